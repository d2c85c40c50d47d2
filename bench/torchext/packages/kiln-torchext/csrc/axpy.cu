// y <- a * x + y for float32 CUDA tensors: one kernel, enough to tell whether the binary holds an
// image the GPU can run ("no kernel image is available for execution on the device" otherwise).
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>

__global__ void axpy_kernel(float a, const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

void axpy(double a, torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat, "float32 only");
    TORCH_CHECK(x.numel() == y.numel(), "x and y differ in size");
    int64_t n = x.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    axpy_kernel<<<blocks, threads>>>((float)a, x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("axpy", &axpy, "y <- a * x + y");
}
