//! The per-binary arch verdict: every CUDA binary of a distribution (installed, or inside a wheel
//! not installed yet) judged on its own for each target arch with the run rules, against what the
//! recipe calls optional (`[[binaries.optional]]`) and what only some of its backends need
//! (`[[backends]] binaries`, [`Rules`]).
//!
//! A component passes only when every *required* binary holds an image that loads on every
//! target arch; one binary that holds the arch proves nothing about the others. A binary that
//! backends name in `binaries` is required only when the user needs one of them (`--need`,
//! [`super::need`]); otherwise one without the arch is *unavailable*: the component passes, and
//! the verdict names the binary, the archs and the backends that do not work there. The verdict
//! names each required binary that lacks an arch (with what it holds, in the run rules' words),
//! and each optional one that lacks it (with the recipe's reason). It deliberately ignores where
//! the binaries come from and what is done about a failure (`status` and `wheel_choice` decide).

use pep440_rs::Version;
use serde::Serialize;

use super::need::Need;
use super::reason::Reason;
use crate::arch::Arch;
use crate::fatbin::FileReport;
use crate::probe::binaries::runs_on;
use crate::recipe::Recipe;
use crate::recipe::binaries::{OptionalBinaries, ServedBinaries, optional_for};

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
    /// For a binary only some backends need: those backends (`--quantization=fp_quant`), or,
    /// when the user needs some of them, the ones needed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<String>,
}

/// A backend of the consumer whose `binaries` name some of its CUDA binaries.
pub struct Served<'a> {
    pub binaries: &'a ServedBinaries,
    /// As the user names it: `--quantization=fp_quant`.
    pub backend: String,
    /// The user needs it (`--need`).
    pub needed: bool,
}

/// What the recipe and the user say of one distribution's binaries, for its version `version`.
#[derive(Default)]
pub struct Rules<'a> {
    pub optional: &'a [OptionalBinaries],
    pub version: Option<&'a Version>,
    pub served: Vec<Served<'a>>,
}

impl<'a> Rules<'a> {
    /// The rules of recipe `r` at version `version`, with the backends the user `needs`.
    pub fn of(r: &'a Recipe, version: Option<&'a Version>, needs: &[Need]) -> Rules<'a> {
        let served = r
            .backends
            .iter()
            .filter(|b| b.describes(version))
            .filter_map(|b| {
                Some(Served {
                    binaries: b.binaries.as_ref()?,
                    backend: b.spelled(),
                    needed: needs.iter().any(|n| n.names(b)),
                })
            })
            .collect();
        Rules {
            optional: &r.optional_binaries,
            version,
            served,
        }
    }

    /// For the binary at `path`: the backends naming it, and whether the user needs any (then
    /// only the needed ones). Empty: no backend names it (required as usual).
    fn serving(&self, path: &str) -> (Vec<String>, bool) {
        let naming: Vec<&Served> = self.served.iter().filter(|s| s.binaries.names(path)).collect();
        let needed: Vec<String> = naming.iter().filter(|s| s.needed).map(|s| s.backend.clone()).collect();
        if needed.is_empty() {
            (naming.iter().map(|s| s.backend.clone()).collect(), false)
        } else {
            (needed, true)
        }
    }
}

/// The verdict over all CUDA binaries of one distribution for the target archs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelCheck {
    pub archs: Vec<Arch>,
    /// CUDA binaries judged.
    pub checked: usize,
    /// Of those, the ones every target arch requires (not optional on any of them).
    pub required: usize,
    /// Of those, the ones only backends the user does not need use (not required either).
    #[serde(skip_serializing_if = "is_zero")]
    pub by_need: usize,
    /// Required binaries without a usable image for some target arch: the component fails.
    pub missing: Vec<Lacking>,
    /// Optional binaries without one (allowed by the recipe, named with its reason).
    pub optional_missing: Vec<Lacking>,
    /// Binaries only backends the user does not need use, without one: those backends
    /// (`serves`) do not work on those archs; the component still passes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Lacking>,
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
                by_need: self.by_need,
                optional: self.optional_missing.clone(),
                unavailable: self.unavailable.clone(),
                unreadable: self.unreadable.clone(),
            }
        } else {
            Reason::ImagesMissing {
                archs: self.archs.clone(),
                required: self.required,
                binaries: self.missing.clone(),
                optional: self.optional_missing.clone(),
                unavailable: self.unavailable.clone(),
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
        let optional = self.checked - self.required - self.by_need;
        let mut out = if self.ok() {
            let mut counted = format!("{} checked", self.checked);
            if optional > 0 {
                counted += &format!(", {optional} optional");
            }
            if self.by_need > 0 {
                counted += &format!(", {} only for backends you do not need", self.by_need);
            }
            format!("every required CUDA binary holds kernels for {archs} ({counted})")
        } else {
            format!(
                "{} of {} required CUDA binar{} lack{} a kernel image: {}",
                self.missing.len(),
                self.required,
                plural(self.required),
                if self.missing.len() == 1 { "s" } else { "" },
                self.missing.iter().map(missing).collect::<Vec<_>>().join("; ")
            )
        };
        if !self.optional_missing.is_empty() {
            let list: Vec<String> = self
                .optional_missing
                .iter()
                .map(|l| format!("{} [optional: {}]", lacking(l), l.optional.as_deref().unwrap_or("")))
                .collect();
            out += &format!("; without an image, as the recipe allows: {}", some_of(&list));
        }
        if !self.unavailable.is_empty() {
            let list: Vec<String> = self
                .unavailable
                .iter()
                .map(|l| format!("{} [only {} needs it]", lacking(l), l.serves.join(", ")))
                .collect();
            out += &format!(
                "; not available there, since nothing you need uses it (`--need` makes it required): {}",
                some_of(&list)
            );
        }
        if !self.unreadable.is_empty() {
            out += &format!("; unreadable: {}", self.unreadable.join("; "));
        }
        out
    }
}

/// How many entries of a long list a sentence names before it says how many more there are
/// (flashinfer-cubin 0.6.8.post1 holds 10560 cubins, none for 9.0: one line, not 4.8 MB).
pub const NAMED: usize = 5;

/// The first [`NAMED`] of `items`, joined by "; ", and how many more (the JSON keeps every one).
pub fn some_of(items: &[String]) -> String {
    match items.len().checked_sub(NAMED) {
        None | Some(0) => items.join("; "),
        Some(more) => format!("{}; and {more} more (`--json` names each)", items[..NAMED].join("; ")),
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

/// `path for 12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image)`.
fn lacking(l: &Lacking) -> String {
    let archs: Vec<String> = l.archs.iter().map(|a| a.to_string()).collect();
    format!("{} for {}: {}", l.path, archs.join(", "), l.because)
}

/// A required binary that lacks an arch, with the needed backends that make it required.
fn missing(l: &Lacking) -> String {
    match l.serves.as_slice() {
        [] => lacking(l),
        needed => format!("{} [needed by {}, which you need]", lacking(l), needed.join(", ")),
    }
}

/// Judges `files` (RECORD path, what the file holds) for `archs` under a driver for CUDA
/// `driver_cuda`, with the recipe's `rules` for the component's version.
pub fn check(
    files: &[(String, &FileReport)],
    archs: &[Arch],
    driver_cuda: Option<&semver::Version>,
    rules: &Rules,
) -> KernelCheck {
    let mut out = KernelCheck {
        archs: archs.to_vec(),
        checked: files.len(),
        ..KernelCheck::default()
    };
    for (path, report) in files {
        let mut required_gap: Option<Lacking> = None;
        let mut optional_gap: Option<Lacking> = None;
        let (serves, needed) = rules.serving(path);
        let by_need = !serves.is_empty() && !needed;
        let mut optional_somewhere = false;
        for &arch in archs {
            let opt = optional_for(rules.optional, path, arch, rules.version);
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
                serves: if opt.is_some() { Vec::new() } else { serves.clone() },
            });
            entry.archs.push(arch);
        }
        if by_need {
            out.by_need += 1;
        } else if !optional_somewhere {
            out.required += 1;
        }
        if by_need {
            out.unavailable.extend(required_gap);
        } else {
            out.missing.extend(required_gap);
        }
        out.optional_missing.extend(optional_gap);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::binaries::glob_set;

    use crate::fatbin::test_sass as sass;

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
        let c = check(&files, &[a("12.0")], None, &Rules::default());
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
            &Rules {
                optional: std::slice::from_ref(&fa3_optional),
                ..Rules::default()
            },
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
            &Rules {
                optional: std::slice::from_ref(&fa3_optional),
                ..Rules::default()
            },
        );
        assert!(c.ok());
        assert_eq!(
            c.evidence(),
            "every required CUDA binary holds kernels for 12.0 (2 checked, 1 optional); without an image, \
             as the recipe allows: vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so for 12.0: \
             no usable image (holds sm_90a; CUDA error 209, no kernel image) [optional: FA3 is Hopper-only]"
        );
    }

    #[test]
    fn a_binary_only_some_backends_need_is_required_only_when_one_is_needed() {
        let (core, qutlass) = (sass(120, 0x20_0000), sass(100, 0x20_0000));
        let files = vec![
            ("vllm/_C.abi3.so".to_string(), &core),
            ("vllm/_qutlass_C.abi3.so".to_string(), &qutlass),
        ];
        let served = ServedBinaries {
            files: vec!["vllm/_qutlass_C*.so".into()],
            matcher: glob_set(&["vllm/_qutlass_C*.so"]).unwrap(),
        };
        let rules = |needed: bool| Rules {
            served: vec![Served {
                binaries: &served,
                backend: "--quantization=fp_quant".into(),
                needed,
            }],
            ..Rules::default()
        };
        // Nobody needs fp_quant: the component passes, and the gap is named with its backend.
        let c = check(&files, &[a("12.0")], None, &rules(false));
        assert!(c.ok());
        assert_eq!((c.checked, c.required, c.by_need), (2, 1, 1));
        assert_eq!(c.unavailable.len(), 1);
        assert_eq!(c.unavailable[0].path, "vllm/_qutlass_C.abi3.so");
        assert_eq!(c.unavailable[0].archs, [a("12.0")]);
        assert_eq!(c.unavailable[0].serves, ["--quantization=fp_quant"]);
        assert_eq!(
            c.evidence(),
            "every required CUDA binary holds kernels for 12.0 (2 checked, 1 only for backends you do not need); \
             not available there, since nothing you need uses it (`--need` makes it required): \
             vllm/_qutlass_C.abi3.so for 12.0: no usable image (holds sm_100f; CUDA error 209, no kernel image) \
             [only --quantization=fp_quant needs it]"
        );
        // Needed: required, and the verdict says which need makes it so.
        let c = check(&files, &[a("12.0")], None, &rules(true));
        assert!(!c.ok());
        assert!(c.unavailable.is_empty());
        assert_eq!((c.required, c.by_need), (2, 0));
        assert_eq!(
            c.evidence(),
            "1 of 2 required CUDA binaries lacks a kernel image: vllm/_qutlass_C.abi3.so for 12.0: \
             no usable image (holds sm_100f; CUDA error 209, no kernel image) [needed by --quantization=fp_quant, which you need]"
        );
        // Where it holds the arch, nothing is unavailable.
        let c = check(&files, &[a("10.0")], None, &rules(false));
        assert!(c.unavailable.is_empty(), "{c:?}");
    }
}
