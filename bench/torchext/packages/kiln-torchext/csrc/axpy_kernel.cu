// The kernel half of the extension, compiled by nvcc: y <- a * x + y on float32, launched on
// torch's current stream. One kernel is enough to tell whether the binary holds an image the GPU
// can run ("no kernel image is available for execution on the device" otherwise).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void axpy_kernel(float a, const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

void axpy_launch(float a, const float* x, float* y, int64_t n) {
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    axpy_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(a, x, y, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
