// The binding half, compiled by the C++ compiler (torch's CXX), as most torch extensions split
// it: argument checks and the Python module, with the kernel in axpy_kernel.cu.
#include <torch/extension.h>

void axpy_launch(float a, const float* x, float* y, int64_t n);

void axpy(double a, torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat, "float32 only");
    TORCH_CHECK(x.numel() == y.numel(), "x and y differ in size");
    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "x and y must be contiguous");
    axpy_launch((float)a, x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("axpy", &axpy, "y <- a * x + y");
}
