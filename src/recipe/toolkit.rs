//! `[requires] toolkit`: the parts of a CUDA toolkit a component's build uses beyond `nvcc`,
//! named by kind. A toolkit put together from NVIDIA's PyPI wheels (`nvidia-cuda-nvcc`,
//! `nvidia-cuda-runtime`, ...) has `nvcc` and the runtime headers but lacks several of these, and
//! a CMake configure or a link then fails minutes into the build; the plan checks them first.
//!
//! Each part says which upstream file needs it. It deliberately only names the parts: where a
//! toolkit keeps them is read by `probe::toolkit_layout`, and judged by `resolve::toolkit_parts`.

use serde::{Deserialize, Serialize};

/// A part of a CUDA toolkit a build needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolkitPart {
    /// The `lib64` directory nvcc links from.
    Lib64,
    /// The unversioned `libcudart.so` (in `lib64` or `lib`) a link against `-lcudart` finds.
    Cudart,
    /// The unversioned `libnvrtc.so`.
    Nvrtc,
    /// The driver stub `stubs/libcuda.so`, which links without an NVIDIA driver on the machine.
    DriverStub,
    /// The CUDA library headers torch's CUDA headers include.
    LibraryHeaders,
    /// The toolkit's headers are of the CUDA version its `nvcc` is.
    HeaderVersion,
}

impl ToolkitPart {
    pub const ALL: [ToolkitPart; 6] = [
        ToolkitPart::Lib64,
        ToolkitPart::Cudart,
        ToolkitPart::Nvrtc,
        ToolkitPart::DriverStub,
        ToolkitPart::LibraryHeaders,
        ToolkitPart::HeaderVersion,
    ];

    /// The name a recipe writes.
    pub fn name(self) -> &'static str {
        match self {
            ToolkitPart::Lib64 => "lib64",
            ToolkitPart::Cudart => "cudart",
            ToolkitPart::Nvrtc => "nvrtc",
            ToolkitPart::DriverStub => "driver-stub",
            ToolkitPart::LibraryHeaders => "library-headers",
            ToolkitPart::HeaderVersion => "header-version",
        }
    }

    pub fn from_name(name: &str) -> Option<ToolkitPart> {
        ToolkitPart::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The headers [`ToolkitPart::LibraryHeaders`] stands for, under `include/`: torch 2.11.0's
    /// `ATen/cuda/CUDAContextLight.h:9-19` includes them in every CUDA extension that includes
    /// `ATen/cuda/CUDAContext.h`.
    pub const HEADERS: [&'static str; 5] = [
        "cuda_runtime_api.h",
        "cusparse.h",
        "cublas_v2.h",
        "cublasLt.h",
        "cusolverDn.h",
    ];

    /// The upstream file that needs the part.
    pub fn needed_by(self) -> &'static str {
        match self {
            ToolkitPart::Lib64 => "nvcc links with -L$(TOP)/lib64 (bin/nvcc.profile:13 of nvidia-cuda-nvcc 13.0.88)",
            ToolkitPart::Cudart => {
                "FindCUDA's CUDA_CUDART_LIBRARY (torch 2.11.0 share/cmake/Caffe2/public/cuda.cmake:29) and \
                 cpp_extension's -lcudart (torch/utils/cpp_extension.py:1474, 1684-1692)"
            }
            ToolkitPart::Nvrtc => "CUDA_nvrtc_LIBRARY (torch 2.11.0 share/cmake/Caffe2/public/cuda.cmake:140, 310-313)",
            ToolkitPart::DriverStub => "CUDA::cuda_driver (torch 2.11.0 share/cmake/Caffe2/public/cuda.cmake:164-167)",
            ToolkitPart::LibraryHeaders => "torch 2.11.0 include/ATen/cuda/CUDAContextLight.h:9-19",
            ToolkitPart::HeaderVersion => {
                "torch 2.11.0 share/cmake/Caffe2/public/cuda.cmake:72-75 and 118-127 stop on two CUDA versions"
            }
        }
    }
}

impl ToolkitPart {
    /// Where the part comes from for a toolkit made of NVIDIA's PyPI wheels (the `cuda-toolkit`
    /// meta-package's extras, each a `nvidia-*` wheel; they put libraries in `lib/`, versioned
    /// only), so that the message says how to complete one. Read off cuda-toolkit 13.0.2's
    /// wheels (docs/gpu-proof.md §17), whose extras ship no driver stub.
    pub fn supplied_by(self) -> &'static str {
        match self {
            ToolkitPart::Lib64 => "NVIDIA's wheels keep their libraries in lib/: a link lib64 -> lib",
            ToolkitPart::Cudart => {
                "cuda-toolkit[cudart] (nvidia-cuda-runtime) ships lib/libcudart.so.<major> only: a link libcudart.so -> it"
            }
            ToolkitPart::Nvrtc => {
                "cuda-toolkit[nvrtc] (nvidia-cuda-nvrtc) ships lib/libnvrtc.so.<major> only: a link libnvrtc.so -> it"
            }
            ToolkitPart::DriverStub => {
                "no NVIDIA PyPI wheel ships it; NVIDIA's CUDA installer puts it in lib64/stubs, and for linking any                  shared library whose SONAME is libcuda.so.1 does (the driver's own is loaded at run time)"
            }
            ToolkitPart::LibraryHeaders => {
                "cuda-toolkit[cublas,cusparse,cusolver] of nvcc's version (nvidia-cublas, nvidia-cusparse, nvidia-cusolver)"
            }
            ToolkitPart::HeaderVersion => {
                "every cuda-toolkit extra at nvcc's version (`cuda-toolkit[nvcc,crt,nvvm,cudart,...]==13.0.2`;                  nvidia-cuda-nvcc alone pulls the newest runtime headers)"
            }
        }
    }
}

impl std::fmt::Display for ToolkitPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
