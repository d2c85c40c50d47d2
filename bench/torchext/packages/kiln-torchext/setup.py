# Built with --no-build-isolation against the torch in the environment (torch.utils.cpp_extension
# reads TORCH_CUDA_ARCH_LIST for the -gencode flags).
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="kiln-torchext",
    version="1.0.0",
    packages=["kiln_torchext"],
    ext_modules=[CUDAExtension("kiln_torchext._axpy", ["csrc/bind.cpp", "csrc/axpy_kernel.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
