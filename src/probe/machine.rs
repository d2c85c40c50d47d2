//! Machine facts: GPUs, driver, CUDA toolkit, CPUs and memory, each with the source that
//! answered (an environment override, `nvidia-smi`, `/proc`, `nvcc --version`).
//!
//! No GPU is not an error: the facts say so and kiln plans for `--arch`. This module only reads;
//! it deliberately ignores which kernels the binaries hold (fatbin reader) and what the facts
//! imply for components (resolver).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::arch::{self, Arch};
use crate::process::Cmd;

/// One GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Gpu {
    pub name: String,
    pub arch: Arch,
}

/// A fact and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

/// The CUDA toolkit found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Toolkit {
    pub version: semver::Version,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvcc: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    pub source: String,
    /// What its home holds besides nvcc (absent when no home was found, or in facts from
    /// elsewhere that did not read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<super::toolkit_layout::ToolkitLayout>,
}

/// What kiln knows about the machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MachineFacts {
    pub gpus: Vec<Gpu>,
    pub gpu_source: String,
    pub driver: Option<Sourced<String>>,
    /// The newest CUDA version the driver supports (`CUDA Version` in nvidia-smi's banner).
    pub driver_cuda: Option<Sourced<semver::Version>>,
    /// The host C++ compiler CUDA builds use (`CXX`, else `g++`), with its version line.
    pub host_compiler: Option<Sourced<String>>,
    pub cuda_toolkit: Option<Toolkit>,
    /// Where kiln looked when no toolkit was found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuda_searched: Vec<String>,
    pub cpus: usize,
    pub memory_available: Option<u64>,
}

impl MachineFacts {
    /// The archs found on the GPUs, sorted and without duplicates.
    pub fn gpu_archs(&self) -> Vec<Arch> {
        let mut a: Vec<Arch> = self.gpus.iter().map(|g| g.arch).collect();
        a.sort();
        a.dedup();
        a
    }
}

const QUICK: Duration = Duration::from_secs(20);

/// Reads the machine.
pub fn probe() -> MachineFacts {
    let (gpus, origin, smi_driver) = gpus();
    let gpu_source = origin.to_string();
    let driver = if let Some(v) = env("KILN_DRIVER_VERSION") {
        Some(Sourced {
            value: v,
            source: "KILN_DRIVER_VERSION".into(),
        })
    } else if let Some(v) = smi_driver {
        Some(Sourced {
            value: v,
            source: "nvidia-smi".into(),
        })
    } else {
        std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|t| parse_proc_driver(&t))
            .map(|v| Sourced {
                value: v,
                source: "/proc/driver/nvidia/version".into(),
            })
    };
    let (cuda_toolkit, cuda_searched) = toolkit();
    let driver_cuda = if let Some(v) = env("KILN_DRIVER_CUDA").and_then(|v| lenient_semver(&v)) {
        Some(Sourced {
            value: v,
            source: "KILN_DRIVER_CUDA".into(),
        })
    } else if origin == GpuOrigin::NvidiaSmi {
        which::which("nvidia-smi")
            .ok()
            .and_then(|smi| Cmd::new(smi.display().to_string()).capture(b"", QUICK).ok())
            .and_then(|o| parse_smi_banner_cuda(&o.stdout))
            .map(|v| Sourced {
                value: v,
                source: "nvidia-smi".into(),
            })
    } else {
        None
    };
    MachineFacts {
        gpus,
        gpu_source,
        driver,
        driver_cuda,
        host_compiler: host_compiler(),
        cuda_toolkit,
        cuda_searched,
        cpus: cpus(),
        memory_available: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| parse_meminfo(&t)),
    }
}

/// The CPUs kiln may use: `KILN_CPUS` (a share of a machine, or a test that needs a number),
/// else what this process may run on.
pub fn cpus() -> usize {
    env("KILN_CPUS")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// Where the GPU list came from; shown as `gpu_source`.
#[derive(Debug, PartialEq, Eq)]
enum GpuOrigin {
    Env,
    NvidiaSmi,
    /// No GPU was found; why.
    None(NoGpu),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum NoGpu {
    #[error("KILN_GPU_ARCH ignored: {0}")]
    BadEnv(arch::ArchParseError),
    #[error("none: nvidia-smi is not on PATH")]
    NoSmi,
    #[error("none: nvidia-smi listed no GPU")]
    Empty,
    #[error("none: nvidia-smi failed ({status}): {stderr}")]
    SmiFailed { status: String, stderr: String },
    #[error("none: nvidia-smi could not run: {0}")]
    SmiSpawn(String),
}

impl std::fmt::Display for GpuOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuOrigin::Env => f.write_str("KILN_GPU_ARCH"),
            GpuOrigin::NvidiaSmi => f.write_str("nvidia-smi"),
            GpuOrigin::None(why) => why.fmt(f),
        }
    }
}

fn gpus() -> (Vec<Gpu>, GpuOrigin, Option<String>) {
    if let Some(v) = env("KILN_GPU_ARCH") {
        return match arch::parse_list(&v) {
            Ok(archs) => (
                archs
                    .into_iter()
                    .map(|a| Gpu {
                        name: format!("GPU {a} (KILN_GPU_ARCH)"),
                        arch: a,
                    })
                    .collect(),
                GpuOrigin::Env,
                None,
            ),
            Err(e) => (Vec::new(), GpuOrigin::None(NoGpu::BadEnv(e)), None),
        };
    }
    let Ok(smi) = which::which("nvidia-smi") else {
        return (Vec::new(), GpuOrigin::None(NoGpu::NoSmi), None);
    };
    let out = Cmd::new(smi.display().to_string())
        .args(["--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"])
        .capture(b"", QUICK);
    match out {
        Ok(o) if o.success => {
            let (gpus, driver) = parse_nvidia_smi(&o.stdout);
            let origin = if gpus.is_empty() {
                GpuOrigin::None(NoGpu::Empty)
            } else {
                GpuOrigin::NvidiaSmi
            };
            (gpus, origin, driver)
        }
        Ok(o) => (
            Vec::new(),
            GpuOrigin::None(NoGpu::SmiFailed {
                status: o.status.to_string(),
                stderr: o.stderr.trim().to_string(),
            }),
            None,
        ),
        Err(e) => (Vec::new(), GpuOrigin::None(NoGpu::SmiSpawn(e.to_string())), None),
    }
}

/// Parses `CUDA Version: 13.0` from nvidia-smi's banner.
pub fn parse_smi_banner_cuda(out: &str) -> Option<semver::Version> {
    let at = out.find("CUDA Version:")? + "CUDA Version:".len();
    lenient_semver(out[at..].split_whitespace().next()?)
}

/// The version in a compiler's first `--version` line: `g++ (Debian 12.2.0-14) 12.2.0` → 12.2.0.
pub fn compiler_version(line: &str) -> Option<semver::Version> {
    line.split_whitespace().rev().find_map(|w| {
        let w = w.trim_end_matches(')');
        (w.contains('.') && w.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .then(|| lenient_semver(w))
            .flatten()
    })
}

fn host_compiler() -> Option<Sourced<String>> {
    let (cxx, source) = match env("CXX") {
        Some(c) => (c, "CXX"),
        None => ("g++".to_string(), "g++ on PATH"),
    };
    let path = which::which(&cxx).ok()?;
    let out = Cmd::new(path.display().to_string())
        .arg("--version")
        .capture(b"", QUICK)
        .ok()?;
    let first = out.stdout.lines().next()?.trim().to_string();
    Some(Sourced {
        value: first,
        source: source.into(),
    })
}

/// Parses `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`.
pub fn parse_nvidia_smi(out: &str) -> (Vec<Gpu>, Option<String>) {
    let mut gpus = Vec::new();
    let mut driver = None;
    for line in out.lines() {
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if cols.len() < 3 {
            continue;
        }
        if let Ok(a) = cols[1].parse::<Arch>() {
            gpus.push(Gpu {
                name: cols[0].to_string(),
                arch: a,
            });
        }
        driver.get_or_insert_with(|| cols[2].to_string());
    }
    (gpus, driver)
}

/// Parses `/proc/driver/nvidia/version` ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05 ...").
pub fn parse_proc_driver(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

/// Parses `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88").
pub fn parse_nvcc_version(out: &str) -> Option<semver::Version> {
    let line = out.lines().find(|l| l.contains("release"))?;
    if let Some(ver) = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix('V'))
        .and_then(lenient_semver)
    {
        return Some(ver);
    }
    let rel = line.split("release").nth(1)?.trim().split(',').next()?;
    lenient_semver(rel.trim())
}

/// `13.0` → 13.0.0, `580.95.05` → 580.95.5.
pub fn lenient_semver(s: &str) -> Option<semver::Version> {
    let nums: Vec<u64> = s.trim().split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    match nums.as_slice() {
        [a] => Some(semver::Version::new(*a, 0, 0)),
        [a, b] => Some(semver::Version::new(*a, *b, 0)),
        [a, b, c, ..] => Some(semver::Version::new(*a, *b, *c)),
        [] => None,
    }
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn memory_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo(&t))
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn toolkit() -> (Option<Toolkit>, Vec<String>) {
    let mut searched = Vec::new();
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    match env("CUDA_HOME") {
        Some(h) => candidates.push((Path::new(&h).join("bin/nvcc"), "CUDA_HOME".into())),
        None => searched.push("CUDA_HOME is unset".into()),
    }
    match which::which("nvcc") {
        Ok(p) => candidates.push((p, "nvcc on PATH".into())),
        Err(_) => searched.push("nvcc is not on PATH".into()),
    }
    candidates.push((PathBuf::from("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda".into()));
    let found = candidates.into_iter().find_map(|(nvcc, source)| {
        if !nvcc.is_file() {
            searched.push(format!("{} does not exist", nvcc.display()));
            return None;
        }
        match Cmd::new(nvcc.display().to_string())
            .arg("--version")
            .capture(b"", QUICK)
        {
            Ok(o) if o.success => match parse_nvcc_version(&o.stdout) {
                Some(version) => {
                    let home = nvcc.parent().and_then(Path::parent).map(Path::to_path_buf);
                    Some(Toolkit {
                        version,
                        nvcc: Some(nvcc),
                        layout: home.as_deref().map(super::toolkit_layout::read),
                        home,
                        source,
                    })
                }
                None => {
                    searched.push(format!("{} --version printed no release", nvcc.display()));
                    None
                }
            },
            _ => {
                searched.push(format!("{} --version failed", nvcc.display()));
                None
            }
        }
    });
    // The override names the version; the paths (if any) still come from the search.
    if let Some(v) = env("KILN_CUDA_VERSION") {
        return match lenient_semver(&v) {
            Some(version) => (
                Some(Toolkit {
                    version,
                    nvcc: found.as_ref().and_then(|t| t.nvcc.clone()),
                    home: found.as_ref().and_then(|t| t.home.clone()),
                    layout: found.as_ref().and_then(|t| t.layout.clone()),
                    source: "KILN_CUDA_VERSION".into(),
                }),
                Vec::new(),
            ),
            None => {
                searched.push(format!("KILN_CUDA_VERSION={v} is not a version"));
                (found, searched)
            }
        };
    }
    if found.is_some() {
        searched.clear();
    }
    (found, searched)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Output of `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`
    // as shown for an H200 with driver 580.159.04 (the reference machine).
    const SMI_H200: &str = "NVIDIA H200, 9.0, 580.159.04\n";
    // `nvcc --version` as printed by CUDA 13.0's nvcc (13.0.88).
    const NVCC_13_0: &str = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\nBuilt on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";

    #[test]
    fn parses_tool_outputs() {
        let (g, d) = parse_nvidia_smi(SMI_H200);
        assert_eq!(
            g,
            [Gpu {
                name: "NVIDIA H200".into(),
                arch: Arch { major: 9, minor: 0 }
            }]
        );
        assert_eq!(d.as_deref(), Some("580.159.04"));
        assert_eq!(parse_nvcc_version(NVCC_13_0), Some(semver::Version::new(13, 0, 88)));
        assert_eq!(
            parse_proc_driver("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)\nGCC version:  gcc version 12.3.0\n").as_deref(),
            Some("580.159.04")
        );
        assert_eq!(
            parse_meminfo("MemTotal: 10 kB\nMemAvailable:  2048 kB\n"),
            Some(2 << 20)
        );
    }
}

#[cfg(test)]
mod h200 {
    //! The parsers on the real outputs captured on an H200 (tests/fixtures/h200/README.md).
    use super::*;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/h200/");

    fn read(name: &str) -> String {
        std::fs::read_to_string(format!("{DIR}{name}")).unwrap()
    }

    #[test]
    fn real_h200_outputs() {
        let (gpus, driver) = parse_nvidia_smi(&read("nvidia-smi-query.txt"));
        assert_eq!(
            gpus,
            [Gpu {
                name: "NVIDIA H200".into(),
                arch: Arch { major: 9, minor: 0 }
            }]
        );
        assert_eq!(driver.as_deref(), Some("580.159.04"));
        assert_eq!(
            parse_smi_banner_cuda(&read("nvidia-smi.txt")),
            Some(semver::Version::new(13, 0, 0))
        );
        assert_eq!(
            parse_nvcc_version(&read("nvcc-version.txt")),
            Some(semver::Version::new(13, 0, 88))
        );
        assert_eq!(
            parse_proc_driver(&read("proc-driver-version.txt")).as_deref(),
            Some("580.159.04")
        );
    }
}
