//! The per-binary arch verdict: every CUDA binary of a distribution (installed, or inside a wheel
//! not installed yet) judged on its own for each target arch with the run rules, against what the
//! recipe calls optional (`[[binaries.optional]]`).
//!
//! A component passes only when every *required* binary holds an image that loads on every
//! target arch; one binary that holds the arch proves nothing about the others. The verdict
//! names each required binary that lacks an arch (with what it holds, in the run rules' words),
//! and each optional one that lacks it (with the recipe's reason). It deliberately ignores where
//! the binaries come from and what is done about a failure (`status` and `wheel_choice` decide).

use pep440_rs::Version;
use serde::Serialize;

use super::reason::Reason;
use crate::arch::Arch;
use crate::fatbin::FileReport;
use crate::probe::binaries::runs_on;
use crate::recipe::binaries::{OptionalBinaries, optional_for};

/// One binary that lacks a usable image for some target archs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lacking {
    /// Its path as the distribution's RECORD names it (`vllm/_qutlass_C.abi3.so`).
    pub path: String,
    /// The target archs it has no usable image for.
    pub archs: Vec<Arch>,
    /// The run rules' words for the first of them ("12.0: no usable image (holds sm_90a; ...)").
    pub why: String,
    /// The same without the arch ("no usable image (holds sm_90a; ...)").
    #[serde(skip)]
    pub because: String,
    /// For an optional binary: the recipe's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<String>,
}

/// The verdict over all CUDA binaries of one distribution for the target archs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelCheck {
    pub archs: Vec<Arch>,
    /// CUDA binaries judged.
    pub checked: usize,
    /// Of those, the ones every target arch requires (not optional on any of them).
    pub required: usize,
    /// Required binaries without a usable image for some target arch: the component fails.
    pub missing: Vec<Lacking>,
    /// Optional binaries without one (allowed by the recipe, named with its reason).
    pub optional_missing: Vec<Lacking>,
    /// Files that could not be read, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl KernelCheck {
    /// Every required binary holds a usable image for every target arch.
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
    }

    /// The verdict as a typed reason: [`Reason::ImagesHeld`] when [`Self::ok`], else
    /// [`Reason::ImagesMissing`], each naming every binary that lacks an arch.
    pub fn reason(&self) -> Reason {
        if self.ok() {
            Reason::ImagesHeld {
                archs: self.archs.clone(),
                checked: self.checked,
                required: self.required,
                optional: self.optional_missing.clone(),
                unreadable: self.unreadable.clone(),
            }
        } else {
            Reason::ImagesMissing {
                archs: self.archs.clone(),
                required: self.required,
                binaries: self.missing.clone(),
                optional: self.optional_missing.clone(),
                unreadable: self.unreadable.clone(),
            }
        }
    }

    /// What a person reads: how many binaries were checked and, by name, each that lacks an arch.
    /// Kept for the wheel decision's `reason` text (`wheel_choice`); verdicts carry
    /// [`Self::reason`], which `report::reason` renders to this same sentence (a test there
    /// holds the two equal).
    pub fn evidence(&self) -> String {
        let archs = self.archs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
        let optional = self.checked - self.required;
        let mut out = if self.ok() {
            let counted = match optional {
                0 => format!("{} checked", self.checked),
                n => format!("{} checked, {n} optional", self.checked),
            };
            format!("every required CUDA binary holds kernels for {archs} ({counted})")
        } else {
            format!(
                "{} of {} required CUDA binar{} lack{} a kernel image: {}",
                self.missing.len(),
                self.required,
                plural(self.required),
                if self.missing.len() == 1 { "s" } else { "" },
                self.missing.iter().map(lacking).collect::<Vec<_>>().join("; ")
            )
        };
        if !self.optional_missing.is_empty() {
            let list: Vec<String> = self
                .optional_missing
                .iter()
                .map(|l| format!("{} [optional: {}]", lacking(l), l.optional.as_deref().unwrap_or("")))
                .collect();
            out += &format!("; without an image, as the recipe allows: {}", list.join("; "));
        }
        if !self.unreadable.is_empty() {
            out += &format!("; unreadable: {}", self.unreadable.join("; "));
        }
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

/// `path for 12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image)`.
fn lacking(l: &Lacking) -> String {
    let archs: Vec<String> = l.archs.iter().map(|a| a.to_string()).collect();
    format!("{} for {}: {}", l.path, archs.join(", "), l.because)
}

/// Judges `files` (RECORD path, what the file holds) for `archs` under a driver for CUDA
/// `driver_cuda`, with the recipe's `optional` entries for component version `version`.
pub fn check(
    files: &[(String, &FileReport)],
    archs: &[Arch],
    driver_cuda: Option<&semver::Version>,
    optional: &[OptionalBinaries],
    version: Option<&Version>,
) -> KernelCheck {
    let mut out = KernelCheck {
        archs: archs.to_vec(),
        checked: files.len(),
        ..KernelCheck::default()
    };
    for (path, report) in files {
        let mut required_gap: Option<Lacking> = None;
        let mut optional_gap: Option<Lacking> = None;
        let mut optional_somewhere = false;
        for &arch in archs {
            let opt = optional_for(optional, path, arch, version);
            optional_somewhere |= opt.is_some();
            let r = runs_on(report, arch, driver_cuda);
            if r.usable {
                continue;
            }
            let slot = if opt.is_some() {
                &mut optional_gap
            } else {
                &mut required_gap
            };
            let entry = slot.get_or_insert_with(|| Lacking {
                path: path.clone(),
                archs: Vec::new(),
                why: r.why.clone(),
                because: r.because.clone(),
                optional: opt.map(|o| o.why.clone()),
            });
            entry.archs.push(arch);
        }
        if !optional_somewhere {
            out.required += 1;
        }
        out.missing.extend(required_gap);
        out.optional_missing.extend(optional_gap);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::binaries::glob_set;

    /// A raw fatbin holding one SASS image for `sm` with variant `flags` (0, `a`, `f`).
    fn sass(sm: u32, flags: u64) -> FileReport {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&2u16.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&8u64.to_le_bytes());
        e[0x1c..0x20].copy_from_slice(&sm.to_le_bytes());
        e[0x28..0x30].copy_from_slice(&(0x11 | flags).to_le_bytes());
        e.extend([0u8; 8]);
        let mut f = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
        f.extend((e.len() as u64).to_le_bytes());
        f.extend(e);
        crate::fatbin::read_bytes(&f, "t").unwrap()
    }

    fn a(s: &str) -> Arch {
        s.parse().unwrap()
    }

    #[test]
    fn one_binary_with_the_arch_proves_nothing_about_the_others() {
        let (core, fa3, qutlass) = (sass(120, 0x20_0000), sass(90, 0x10_0000), sass(100, 0x10_0000));
        let files = vec![
            ("vllm/_C.abi3.so".to_string(), &core),
            ("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so".to_string(), &fa3),
            ("vllm/_qutlass_C.abi3.so".to_string(), &qutlass),
        ];
        let c = check(&files, &[a("12.0")], None, &[], None);
        assert!(!c.ok());
        assert_eq!((c.checked, c.required), (3, 3));
        let lacking: Vec<&str> = c.missing.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(
            lacking,
            ["vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so", "vllm/_qutlass_C.abi3.so"]
        );
        assert_eq!(
            c.evidence(),
            "2 of 3 required CUDA binaries lack a kernel image: \
             vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so for 12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image); \
             vllm/_qutlass_C.abi3.so for 12.0: no usable image (holds sm_100a; CUDA error 209, no kernel image)"
        );

        let fa3_optional = OptionalBinaries {
            files: vec!["vllm/vllm_flash_attn/_vllm_fa3_C*.so".into()],
            matcher: glob_set(&["vllm/vllm_flash_attn/_vllm_fa3_C*.so"]).unwrap(),
            arch: vec![a("12.0")],
            versions: None,
            versions_spec: None,
            why: "FA3 is Hopper-only".into(),
            span: None,
        };
        let c = check(
            &files,
            &[a("12.0"), a("9.0")],
            None,
            std::slice::from_ref(&fa3_optional),
            None,
        );
        // On 9.0 FA3 holds sm_90a; on 12.0 it is optional; the core binary lacks 9.0.
        assert_eq!(c.required, 2);
        assert_eq!(c.missing.len(), 2);
        assert_eq!(c.missing[0].path, "vllm/_C.abi3.so");
        assert_eq!(c.missing[0].archs, [a("9.0")]);
        assert_eq!(c.missing[1].archs, [a("12.0"), a("9.0")]);
        assert_eq!(c.optional_missing.len(), 1);
        assert_eq!(c.optional_missing[0].optional.as_deref(), Some("FA3 is Hopper-only"));

        let only_core_and_fa3 = &files[..2];
        let c = check(
            only_core_and_fa3,
            &[a("12.0")],
            None,
            std::slice::from_ref(&fa3_optional),
            None,
        );
        assert!(c.ok());
        assert_eq!(
            c.evidence(),
            "every required CUDA binary holds kernels for 12.0 (2 checked, 1 optional); without an image, \
             as the recipe allows: vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so for 12.0: \
             no usable image (holds sm_90a; CUDA error 209, no kernel image) [optional: FA3 is Hopper-only]"
        );
    }
}
