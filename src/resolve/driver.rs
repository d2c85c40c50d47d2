//! Driver against runtime: can the driver here run code built for a given CUDA runtime?
//!
//! NVIDIA's rule (CUDA Compatibility, "Minor Version Compatibility",
//! <https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html>): from
//! CUDA 11 on, an application built with any toolkit of a major release family runs on a driver
//! of that family (CUDA 13.x: driver >= 580, 12.x: >= 525), with a limited feature set: PTX newer
//! than the driver does not JIT (the run rules check that per image, CUDA error 222). A runtime of
//! a newer major than the driver supports does not run at all ("CUDA driver version is
//! insufficient for CUDA runtime version") unless NVIDIA's forward-compatibility package
//! (`cuda-compat-<major>-<minor>`, data-center GPUs only) provides a newer user-mode driver.
//!
//! It also knows what a component's CUDA runtime is: torch's `torch.version.cuda` from the
//! probe, else a `+cuXYZ` local version label, else the major of `libcudart.so.N` the binaries
//! link. The driver's version judges the GPU archs too: a target arch whose first CUDA release
//! needs a newer driver branch ([`super::driver_table`]: Blackwell 10.0/12.0 needs R570, 12.1
//! R575) is `blocked` for every component with CUDA code, and no smoke test runs on a GPU that
//! no driver here can drive. It deliberately ignores the forward-compatibility package (the
//! driver kiln reads is the kernel driver's) and runs nothing.

use super::driver_table;
use super::reason::Reason;
use crate::arch::Arch;
use crate::probe::MachineFacts;
use crate::probe::machine::Sourced;

/// The CUDA runtime a component is built for, and how kiln knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    pub major: u64,
    /// `None` when only the major is known (`libcudart.so.13`).
    pub minor: Option<u64>,
    /// Where it was read: `torch.version.cuda`, the version label `+cu132`, `libcudart.so.13`.
    pub source: String,
}

impl Runtime {
    /// `13.2`, or `13` when only the major is known.
    pub fn shown(&self) -> String {
        match self.minor {
            Some(m) => format!("{}.{m}", self.major),
            None => self.major.to_string(),
        }
    }

    /// From a version text such as torch's `13.2`.
    pub fn parse(text: &str, source: &str) -> Option<Runtime> {
        let mut it = text.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next().and_then(|m| m.parse().ok());
        Some(Runtime {
            major,
            minor,
            source: source.to_string(),
        })
    }

    /// From the local label of a version (`2.15.0+cu132` → 13.2, `+cu128` → 12.8, `+cu13` → 13).
    pub fn from_label(version: &str) -> Option<Runtime> {
        let label = version.split_once('+')?.1;
        // `cu132`, also as the start of a longer label (`cu128torch2.7`).
        let digits = label.split(['.', '_', '-']).find_map(|part| {
            let d = part.strip_prefix("cu")?;
            let n = d.bytes().take_while(u8::is_ascii_digit).count();
            (2..=3).contains(&n).then(|| &d[..n])
        })?;
        let major = digits[..2].parse().ok()?;
        let minor = digits.get(2..).filter(|m| !m.is_empty()).and_then(|m| m.parse().ok());
        Some(Runtime {
            major,
            minor,
            source: format!("the version label +cu{digits}"),
        })
    }
}

/// Where NVIDIA states the rule, for evidence.
pub const RULE: &str = "CUDA minor version compatibility covers one major release family only, \
     https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html";

/// The driver's verdict on `subject` built for `runtime`: [`Reason::DriverTooOld`] when it
/// cannot run it, [`Reason::MinorCompatibility`] when only minor version compatibility makes it
/// run, `None` when it runs.
pub fn verdict(subject: &str, runtime: &Runtime, driver: &Sourced<semver::Version>) -> Option<Reason> {
    let d = &driver.value;
    if runtime.major > d.major {
        return Some(Reason::DriverTooOld {
            subject: subject.to_string(),
            runtime: runtime.shown(),
            runtime_major: runtime.major,
            runtime_source: runtime.source.clone(),
            driver_major: d.major,
            driver_minor: d.minor,
            driver_source: driver.source.clone(),
            rule: RULE,
        });
    }
    match runtime.minor {
        Some(m) if runtime.major == d.major && m > d.minor => Some(Reason::MinorCompatibility {
            runtime: runtime.shown(),
            driver_major: d.major,
            driver_minor: d.minor,
        }),
        _ => None,
    }
}

/// The CUDA runtime of a distribution: torch's own `torch.version.cuda` (`torch_cuda`), else
/// its version label, else the libcudart major its binaries link (`cudart`).
pub fn runtime_of(version: &str, torch_cuda: Option<&str>, cudart: Option<u64>) -> Option<Runtime> {
    let linked = cudart.map(|m| Runtime {
        major: m,
        minor: None,
        source: format!("its binaries link libcudart.so.{m}"),
    });
    torch_cuda
        .and_then(|c| Runtime::parse(c, "torch.version.cuda"))
        .or_else(|| Runtime::from_label(version))
        .or(linked)
}

/// The driver's verdicts on `subject`: on its CUDA runtime (when known, [`verdict`]), and, when
/// it holds CUDA code (`cuda`), on each target arch the driver cannot drive
/// ([`Reason::DriverCannotDrive`]).
pub fn verdicts(
    subject: &str,
    runtime: Option<&Runtime>,
    cuda: bool,
    machine: &MachineFacts,
    archs: &[Arch],
) -> Vec<Reason> {
    let mut out: Vec<Reason> = Vec::new();
    if let (Some(rt), Some(drv)) = (runtime, &machine.driver_cuda) {
        out.extend(verdict(subject, rt, drv));
    }
    let Some(driver) = machine.driver.as_ref().filter(|_| cuda || runtime.is_some()) else {
        return out;
    };
    let Some(version) = driver_table::lenient(&driver.value) else {
        return out;
    };
    for arch in archs {
        if let Err(n) = driver_table::drives(&version, *arch) {
            out.push(Reason::DriverCannotDrive {
                subject: subject.to_string(),
                arch: *arch,
                driver: driver.value.clone(),
                driver_source: driver.source.clone(),
                needs_cuda: n.row.cuda_shown(),
                needs_driver: n.row.driver,
                needs_branch: n.row.branch(),
                source: n.source,
            });
        }
    }
    out
}

/// Why a step for `r` at `version` cannot run with this machine's driver, known before anything
/// is fetched or built (the same verdicts `doctor` gives after): the CUDA runtime the recipe
/// says the version's wheel is built for (`[[versions]] runtime_cuda`) of a newer major than
/// the driver's, and, for a component with CUDA code (`cuda`), each target arch the driver
/// cannot drive.
pub fn step_refusals(
    r: &crate::recipe::Recipe,
    version: Option<&str>,
    cuda: bool,
    machine: &MachineFacts,
    archs: &[Arch],
) -> Vec<Reason> {
    if let Some(why) = runtime_too_new(r, version, machine) {
        return vec![why];
    }
    if !cuda {
        return Vec::new();
    }
    let subject = format!("{} {}", r.name, version.unwrap_or("?"));
    verdicts(&subject, None, true, machine, archs)
        .into_iter()
        .filter(|r| matches!(r, Reason::DriverCannotDrive { .. }))
        .collect()
}

/// The driver's verdict on the CUDA runtime the recipe says version `version`'s wheel is built
/// for (`[[versions]] runtime_cuda`), when the driver here is known and too old for it.
fn runtime_too_new(r: &crate::recipe::Recipe, version: Option<&str>, machine: &MachineFacts) -> Option<Reason> {
    let v: pep440_rs::Version = version?.parse().ok()?;
    let rt = r.versions.iter().find(|e| e.version == v)?.runtime_cuda.as_ref()?;
    let driver = machine.driver_cuda.as_ref()?;
    let runtime = Runtime {
        major: rt.major,
        minor: Some(rt.minor),
        source: format!("{}'s recipe: runtime_cuda of {v}", r.name),
    };
    verdict(&format!("{} {v}", r.name), &runtime, driver).filter(|reason| matches!(reason, Reason::DriverTooOld { .. }))
}

/// The target archs a smoke test can run on here: a GPU of the arch is present and a driver is
/// that can drive it.
pub fn smoke_archs(machine: &MachineFacts, targets: &[Arch]) -> Vec<Arch> {
    let Some(version) = machine.driver.as_ref().and_then(|d| driver_table::lenient(&d.value)) else {
        return Vec::new();
    };
    let gpus = machine.gpu_archs();
    targets
        .iter()
        .copied()
        .filter(|t| gpus.contains(t) && driver_table::drives(&version, *t).is_ok())
        .collect()
}

/// Why no smoke test can run on the target archs a GPU here has, when a GPU of one is here:
/// `Some(driver)` (`None` inside: no driver found) when the driver is what stops it.
pub fn smoke_blocked(machine: &MachineFacts, targets: &[Arch], ran_on: &[Arch]) -> Option<(Vec<Arch>, Option<String>)> {
    let gpus = machine.gpu_archs();
    let stopped: Vec<Arch> = targets
        .iter()
        .copied()
        .filter(|t| gpus.contains(t) && !ran_on.contains(t))
        .collect();
    (!stopped.is_empty() && ran_on.is_empty()).then(|| (stopped, machine.driver.as_ref().map(|d| d.value.clone())))
}

/// [`verdict`] in words, for the wheel decision's `reason` text (`wheel_choice`): `Err(why)`
/// when the driver cannot run `what` built for `runtime`; `Ok(note)` when it can, with a note
/// when only minor version compatibility makes it so. `report::reason` renders the typed
/// verdict to the same words (a test there holds the two equal).
pub fn judge(what: &str, runtime: &Runtime, driver: &Sourced<semver::Version>) -> Result<Option<String>, String> {
    let d = &driver.value;
    let shown = runtime.shown();
    if runtime.major > d.major {
        return Err(format!(
            "{what} is built for CUDA {shown} ({}); the driver supports CUDA {}.{} ({}), and a CUDA {} \
             runtime needs a driver of the CUDA {} family ({RULE}); install a newer NVIDIA driver, or a \
             build of {what} for CUDA {}",
            runtime.source, d.major, d.minor, driver.source, runtime.major, runtime.major, d.major
        ));
    }
    Ok(match runtime.minor {
        Some(m) if runtime.major == d.major && m > d.minor => Some(format!(
            "built for CUDA {shown}, the driver supports {}.{}: runs by minor version compatibility \
             (PTX newer than the driver cannot JIT)",
            d.major, d.minor
        )),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(v: &str) -> Sourced<semver::Version> {
        Sourced {
            value: semver::Version::parse(v).unwrap(),
            source: "KILN_DRIVER_CUDA".into(),
        }
    }

    #[test]
    fn a_newer_major_than_the_driver_is_refused_and_a_newer_minor_is_not() {
        let cu132 = Runtime::from_label("2.15.0+cu132").unwrap();
        assert_eq!((cu132.major, cu132.minor), (13, Some(2)));
        let refused = verdict("torch 2.15.0+cu132", &cu132, &driver("12.8.0")).unwrap();
        assert_eq!(refused.status(), crate::resolve::Status::Blocked);
        let Reason::DriverTooOld {
            subject,
            runtime,
            runtime_source,
            driver_major,
            driver_minor,
            driver_source,
            ..
        } = &refused
        else {
            panic!("{refused:?}")
        };
        assert_eq!(
            (subject.as_str(), runtime.as_str(), runtime_source.as_str()),
            ("torch 2.15.0+cu132", "13.2", "the version label +cu132")
        );
        assert_eq!(
            (*driver_major, *driver_minor, driver_source.as_str()),
            (12, 8, "KILN_DRIVER_CUDA")
        );
        let note = verdict("torch", &cu132, &driver("13.0.0")).unwrap();
        assert!(
            matches!(note, Reason::MinorCompatibility { driver_minor: 0, .. }),
            "{note:?}"
        );
        assert_eq!(note.status(), crate::resolve::Status::Ok);
        assert_eq!(verdict("torch", &cu132, &driver("13.2.0")), None);
        assert_eq!(verdict("torch", &cu132, &driver("14.0.0")), None);
        let major_only = Runtime::parse("13", "libcudart.so.13").unwrap();
        assert!(verdict("x", &major_only, &driver("12.9.0")).is_some_and(|r| r.fails()));
        assert_eq!(verdict("x", &major_only, &driver("13.0.0")), None);
    }

    #[test]
    fn labels_without_a_cuda_build_say_nothing() {
        assert_eq!(Runtime::from_label("2.15.0"), None);
        assert_eq!(Runtime::from_label("2.15.0+cpu"), None);
        assert_eq!(Runtime::from_label("1.0+cu1234"), None);
        assert_eq!(Runtime::from_label("2.8.3+cu128torch2.7").unwrap().shown(), "12.8");
        let r = Runtime::from_label("1.0+cu13").unwrap();
        assert_eq!(r.shown(), "13");
        assert_eq!(Runtime::parse("12.8", "torch.version.cuda").unwrap().shown(), "12.8");
    }
}
