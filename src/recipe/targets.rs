//! Build targets: what an upstream CMake build compiles (vLLM's `_C_stable_libtorch`,
//! `_vllm_fa3_C`, ...), declared in the recipe with the arch list upstream gives each one (its
//! `cuda_archs_loose_intersection` lists, in upstream's spelling: `12.0f`, `9.0a`, `8.0+PTX`, or
//! `all` for code compiled for every target arch), what upstream does when none of them is
//! being built (`skipped`: an empty target; `compiled`: its sources are compiled anyway, for no
//! arch that was asked), and the upstream lines that decide it (`why`).
//!
//! This module is the typed form and the question the plan asks of it: for these target archs,
//! which kernel images does each target hold that run there (by the run rules of
//! [`crate::arch::run`]), and which targets are compiled with nothing for them. It deliberately
//! ignores how a target is built (the upstream build does that) and does not emulate CMake: the
//! lists are upstream's, cited, and a build's own `ninja -t commands` is the ground truth.

use serde::Serialize;

use crate::arch::Arch;
use crate::arch::run::{Code, KernelImage, Specific, verdict};

/// One declared target of an upstream build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// The name upstream's build knows it by (`cmake --build --target NAME`).
    pub name: String,
    pub kind: TargetKind,
    /// The code it compiles, per upstream's arch lists (only for `kind = "cuda"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<ArchCode>,
    /// What upstream does when no target arch is one its code is for.
    pub no_arch: NoArch,
    /// The upstream lines that list its archs and say what happens without them.
    pub why: String,
}

/// What a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// CUDA kernels, compiled per arch.
    Cuda,
    /// Host code only (C++ linked against the CUDA runtime at most): no kernels.
    Host,
    /// Files copied into the wheel (Python sources); nothing is compiled.
    Files,
}

/// What upstream does with a target whose arch lists meet none of the target archs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoArch {
    /// It defines an empty target: nothing is compiled.
    Skipped,
    /// Its sources are compiled anyway, with no kernel for any target arch: time spent for
    /// nothing, which upstream gives no switch to avoid (the recipe's `why` says where).
    Compiled,
}

/// One entry of an upstream arch list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub enum ArchCode {
    /// `all`: compiled for every target arch the build is given (vLLM's `CUDA_ARCHS`).
    Every,
    /// Kernel images for one arch: `12.0f` is `sm_120f`, `9.0a` `sm_90a`, `8.9` `sm_89`, and
    /// `8.0+PTX` both `sm_80` and `compute_80`.
    Images { spelled: String, images: Vec<KernelImage> },
}

impl From<ArchCode> for String {
    fn from(c: ArchCode) -> String {
        match c {
            ArchCode::Every => "all".into(),
            ArchCode::Images { spelled, .. } => spelled,
        }
    }
}

impl std::str::FromStr for ArchCode {
    type Err = String;

    /// `all`, `X.Y`, `X.Ya`, `X.Yf` or `X.Y+PTX`, as vLLM's CMake files write them.
    fn from_str(s: &str) -> Result<ArchCode, String> {
        if s == "all" {
            return Ok(ArchCode::Every);
        }
        let bad = || format!("`{s}` is not an arch list entry: expected `all`, `12.0`, `12.0a`, `12.0f` or `8.0+PTX`");
        let (base, ptx) = match s.strip_suffix("+PTX") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let (digits, specific) = match base.as_bytes().last() {
            Some(b'a') => (&base[..base.len() - 1], Specific::Arch),
            Some(b'f') => (&base[..base.len() - 1], Specific::Family),
            _ => (base, Specific::Plain),
        };
        let (major, minor) = digits.split_once('.').ok_or_else(bad)?;
        let (major, minor): (u32, u32) = (major.parse().map_err(|_| bad())?, minor.parse().map_err(|_| bad())?);
        if !(3..=20).contains(&major) || minor > 9 {
            return Err(bad());
        }
        let image = |code| KernelImage {
            code,
            sm: major * 10 + minor,
            specific,
            ptx_isa: (0, 0),
        };
        let mut images = vec![image(Code::Sass)];
        if ptx {
            images.push(image(Code::Ptx));
        }
        Ok(ArchCode::Images {
            spelled: s.to_string(),
            images,
        })
    }
}

/// A target as a build for some archs would compile it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedTarget {
    pub name: String,
    pub kind: TargetKind,
    pub outcome: Outcome,
    /// Per target arch, the images of it that run there (SASS; PTX only where no SASS does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub code_for: Vec<CodeFor>,
    /// Target archs it holds no kernel for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_code_for: Vec<Arch>,
    pub why: String,
}

/// The images of one target that run on one target arch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CodeFor {
    pub arch: Arch,
    pub images: Vec<String>,
}

/// What the build does with a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Compiled, with kernels for at least one target arch.
    Compiled,
    /// Compiled, host code only.
    Host,
    /// Its files are copied; nothing is compiled.
    Files,
    /// Compiled with no kernel for any target arch (upstream has no switch to leave it out).
    CompiledForNothing,
    /// Not compiled: none of its archs is a target arch.
    Skipped,
}

impl Target {
    /// What a build for `archs` does with this target. With no arch known, every CUDA target
    /// counts as compiled (the build's own arch list decides).
    pub fn planned(&self, archs: &[Arch]) -> PlannedTarget {
        let mut code_for = Vec::new();
        let mut no_code_for = Vec::new();
        if self.kind == TargetKind::Cuda {
            for &arch in archs {
                let images = self.images_on(arch);
                if images.is_empty() {
                    no_code_for.push(arch);
                } else {
                    code_for.push(CodeFor { arch, images });
                }
            }
        }
        let outcome = match self.kind {
            TargetKind::Host => Outcome::Host,
            TargetKind::Files => Outcome::Files,
            TargetKind::Cuda if !code_for.is_empty() || archs.is_empty() => Outcome::Compiled,
            TargetKind::Cuda => match self.no_arch {
                NoArch::Skipped => Outcome::Skipped,
                NoArch::Compiled => Outcome::CompiledForNothing,
            },
        };
        PlannedTarget {
            name: self.name.clone(),
            kind: self.kind,
            outcome,
            code_for,
            no_code_for,
            why: self.why.clone(),
        }
    }

    /// The image names of this target that run on `arch`: every `all` entry as `sm_<arch>`,
    /// the listed images by the run rules, and PTX only where no SASS runs (upstream's lists
    /// prefer a cubin of the arch to a PTX fallback).
    fn images_on(&self, arch: Arch) -> Vec<String> {
        let mut sass = Vec::new();
        let mut ptx = Vec::new();
        for code in &self.code {
            match code {
                ArchCode::Every => sass.push(format!("sm_{}{}", arch.major, arch.minor)),
                ArchCode::Images { images, .. } => {
                    for img in images {
                        if verdict(img, arch, None).usable() {
                            let list = if img.code == Code::Sass { &mut sass } else { &mut ptx };
                            list.push(img.name());
                        }
                    }
                }
            }
        }
        let mut out = if sass.is_empty() { ptx } else { sass };
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(code: &[&str], no_arch: NoArch) -> Target {
        Target {
            name: "t".into(),
            kind: TargetKind::Cuda,
            code: code.iter().map(|c| c.parse().unwrap()).collect(),
            no_arch,
            why: "w".into(),
        }
    }

    fn a(s: &str) -> Arch {
        s.parse().unwrap()
    }

    /// vLLM 0.26.0 with CUDA 13 for 12.0 (the lists of CMakeLists.txt:784, :958, and
    /// vllm-flash-attn's CMakeLists.txt:140, :257): the generic kernels as sm_120, the SM12x
    /// families as sm_120f, FA2 only as PTX, FA3 nothing.
    #[test]
    fn each_target_holds_what_runs_on_the_arch_by_the_run_rules() {
        let c = target(&["all", "8.0+PTX", "9.0a", "10.0f", "12.0f"], NoArch::Skipped).planned(&[a("12.0")]);
        assert_eq!(c.outcome, Outcome::Compiled);
        assert_eq!(c.code_for[0].images, ["sm_120", "sm_120f"]);
        let fa2 = target(&["8.0+PTX"], NoArch::Skipped).planned(&[a("12.0"), a("9.0")]);
        assert_eq!(fa2.code_for[0].images, ["compute_80"], "PTX only where no cubin runs");
        assert_eq!(fa2.code_for[1].images, ["compute_80"]);
        let fa3 = target(&["9.0a"], NoArch::Compiled);
        let on_120 = fa3.planned(&[a("12.0")]);
        assert_eq!(on_120.outcome, Outcome::CompiledForNothing);
        assert_eq!(on_120.no_code_for, [a("12.0")]);
        assert_eq!(fa3.planned(&[a("9.0"), a("12.0")]).outcome, Outcome::Compiled);
        let mla = target(&["9.0a", "10.0f"], NoArch::Skipped).planned(&[a("12.0")]);
        assert_eq!(mla.outcome, Outcome::Skipped);
        // A family image runs on the family's later minors; an arch-specific one only on its own.
        let q = target(&["12.0f"], NoArch::Skipped).planned(&[a("12.1")]);
        assert_eq!(q.code_for[0].images, ["sm_120f"]);
        assert_eq!(
            target(&["12.0a"], NoArch::Skipped).planned(&[a("12.1")]).outcome,
            Outcome::Skipped
        );
    }

    #[test]
    fn arch_list_entries_are_read_as_upstream_writes_them_or_refused() {
        for good in ["all", "7.5", "8.0+PTX", "9.0a", "12.0f", "10.0f+PTX"] {
            let c: ArchCode = good.parse().unwrap();
            assert_eq!(String::from(c), good);
        }
        for bad in ["", "12", "sm_120", "12.0x", "12.10", "2.0", "12.0+ptx"] {
            assert!(bad.parse::<ArchCode>().is_err(), "{bad}");
        }
    }
}
