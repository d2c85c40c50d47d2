//! Reasons in words: the one place where a [`Reason`] becomes a sentence. A component's
//! `evidence` ([`evidence`]), a plan step's `reason` ([`step`]) and each reason on its own
//! ([`text`]) are rendered here, for people and for the rendered fields of `--json`.
//!
//! A component's evidence starts with its context (who else shares its files, what it is
//! installed as), then tells what falls short, most severe first, or, when nothing does,
//! everything that proves it. It deliberately decides nothing: every status and action was
//! decided in `resolve` on the typed values.

use crate::resolve::Reason;
use crate::resolve::kernels::{Lacking, some_of};
use crate::resolve::owners::{OtherDist, Via};

pub(super) fn join<T: ToString>(items: &[T], sep: &str) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(sep)
}

/// A component's evidence from its reasons (see the module doc for the order).
pub fn evidence(reasons: &[Reason]) -> String {
    let (context, body): (Vec<&Reason>, Vec<&Reason>) = reasons.iter().partition(|r| r.is_context());
    let mut failing: Vec<&Reason> = body.iter().copied().filter(|r| r.fails()).collect();
    failing.sort_by_key(|r| std::cmp::Reverse(r.status().severity()));
    let shown = if failing.is_empty() { body.clone() } else { failing };
    let mut out: Vec<String> = Vec::new();
    for c in context {
        out.push(text(c));
        // Installed under another name: what its binaries hold is said whatever the status.
        if matches!(c, Reason::InstalledAs { .. })
            && let Some(b) = body.iter().find(|r| r.is_binaries() && !shown.contains(r))
        {
            out.push(text(b));
        }
    }
    out.extend(shown.into_iter().map(text));
    out.join("; ")
}

/// A plan step's reason from its reasons.
pub fn step(reasons: &[Reason]) -> String {
    join(&reasons.iter().map(text).collect::<Vec<_>>(), "; ")
}

/// A component `kiln lock` refuses: "sglang is broken: import sglang failed: ...".
pub fn refused(r: &crate::session::locked::Refused) -> String {
    match r.status {
        Some(status) => format!("{} is {}: {}", r.name, status.as_str(), evidence(&r.reasons)),
        None => format!("{} is not installed", r.name),
    }
}

/// "sgl-kernel 0.3.21 (sglang-kernel's former distribution name)".
pub fn describe(other: &OtherDist, component: &str) -> String {
    let why = match &other.via {
        Via::Own => format!("{component}'s own distribution"),
        Via::FormerName => format!("{component}'s former distribution name"),
        Via::OwnsPackage(p) => format!("it has files in {p}/, which {component} owns"),
    };
    format!("{} {} ({why})", other.dist, other.version)
}

/// `path for 12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image)`.
fn lacking(l: &Lacking) -> String {
    format!("{} for {}: {}", l.path, join(&l.archs, ", "), l.because)
}

/// A required binary that lacks an arch, with the needed backends that make it required.
fn needed_lacking(l: &Lacking) -> String {
    match l.serves.as_slice() {
        [] => lacking(l),
        needed => format!("{} [needed by {}, which you need]", lacking(l), needed.join(", ")),
    }
}

/// The optional binaries without an image and the unreadable files, after a binaries verdict.
fn binaries_tail(optional: &[Lacking], unavailable: &[Lacking], unreadable: &[String]) -> String {
    let mut out = String::new();
    if !optional.is_empty() {
        let list: Vec<String> = optional
            .iter()
            .map(|l| format!("{} [optional: {}]", lacking(l), l.optional.as_deref().unwrap_or("")))
            .collect();
        out += &format!("; without an image, as the recipe allows: {}", some_of(&list));
    }
    if !unavailable.is_empty() {
        let list: Vec<String> = unavailable
            .iter()
            .map(|l| format!("{} [only {} needs it]", lacking(l), l.serves.join(", ")))
            .collect();
        out += &format!(
            "; not available there, since nothing you need uses it (`--need` makes it required): {}",
            some_of(&list)
        );
    }
    if !unreadable.is_empty() {
        out += &format!("; unreadable: {}", unreadable.join("; "));
    }
    out
}

fn at(nvcc: &Option<String>) -> String {
    nvcc.as_ref().map(|p| format!(" at {p}")).unwrap_or_default()
}

/// One reason in words.
pub fn text(r: &Reason) -> String {
    use Reason::*;
    match r {
        ToolkitFound { version, source, nvcc } => format!("CUDA {version} from {source}{}", at(nvcc)),
        ToolkitTooOld {
            version,
            source,
            nvcc,
            need,
        } => format!(
            "CUDA {version} found ({source}{}), need {need}; install a newer CUDA toolkit (kiln does not install it) and point CUDA_HOME at it",
            at(nvcc)
        ),
        NoToolkit { searched, want } => format!(
            "no CUDA toolkit found ({}); install CUDA {} and set CUDA_HOME (kiln does not install it)",
            searched.join("; "),
            want.as_deref().unwrap_or("")
        ),
        ArchUnsupported { archs, source, .. } => format!("cannot work on {}: {source}", join(archs, ", ")),
        PythonUnsupported {
            component,
            needs,
            python,
            have,
        } => format!("{component} needs Python {needs}; {python} is Python {have}"),
        NotInstalled { dist, prefix } => format!("{dist} is not installed in {prefix}"),
        ArchLimits { .. } | NotManaged { .. } => super::reason_notes::text(r),
        ImportFailed { module, error } => format!(
            "import {module} failed: {}",
            error.as_deref().unwrap_or("unknown error")
        ),
        FeatureImportsRan { imports } => format!("imports ran: {}", imports.join(", ")),
        ImportsRan { dist, version, imports } => {
            let ran: Vec<String> = imports
                .iter()
                .map(|i| format!("{} ({:.2} s)", i.module, i.seconds))
                .collect();
            format!("{dist} {version}; imports ran: {}", ran.join(", "))
        }
        NoImportNamed { dist, version } => {
            format!("{dist} {version} installed; the recipe names no import to prove it")
        }
        VersionUnreadable { version } => format!("installed version `{version}` is not a PEP 440 version"),
        VersionNotAccepted {
            component,
            have,
            accepts,
            by,
        } => match by {
            None => format!("have {have}, recipe accepts {accepts}"),
            Some(by) => format!("have {have}, {by} needs {component} {accepts}"),
        },
        DriverTooOld {
            subject,
            runtime,
            runtime_major,
            runtime_source,
            driver_major,
            driver_minor,
            driver_source,
            rule,
        } => format!(
            "{subject} is built for CUDA {runtime} ({runtime_source}); the driver supports CUDA \
             {driver_major}.{driver_minor} ({driver_source}), and a CUDA {runtime_major} runtime needs a \
             driver of the CUDA {runtime_major} family ({rule}); install a newer NVIDIA driver, or a build \
             of {subject} for CUDA {driver_major}"
        ),
        CompanionIgnored {
            component,
            version,
            companion,
            companion_version,
            source,
        } => format!(
            "{companion} {companion_version} is installed, and {component} {version} uses only {companion} \
             {version}: it ignores it and downloads or compiles what it holds instead{}; install \
             {companion}=={version}, or uninstall it",
            source.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        CompanionImagesHeld {
            companion,
            companion_version,
            arch,
            files,
            of,
        } => format!(
            "{companion} {companion_version} holds cubins for {arch} ({files} of {of} CUDA binaries load there)"
        ),
        CompanionImagesMissing {
            component,
            companion,
            companion_version,
            arch,
            held,
        } => format!(
            "{companion} {companion_version} holds no cubin that loads on {arch} (it holds {}): what {component} \
             would load from it there is not in it",
            if held.is_empty() {
                "none".to_string()
            } else {
                held.join(", ")
            }
        ),
        DriverCannotDrive {
            subject,
            arch,
            driver,
            driver_source,
            needs_cuda,
            needs_driver,
            needs_branch,
            source,
        } => format!(
            "{subject} cannot run on a {arch} GPU with driver {driver} ({driver_source}): a {arch} GPU needs \
             CUDA {needs_cuda}, driver {needs_branch} ({needs_driver}) or newer ({source}); install a newer \
             NVIDIA driver"
        ),
        MinorCompatibility {
            runtime,
            driver_major,
            driver_minor,
        } => format!(
            "built for CUDA {runtime}, the driver supports {driver_major}.{driver_minor}: runs by minor \
             version compatibility (PTX newer than the driver cannot JIT)"
        ),
        ImagesMissing {
            required,
            binaries,
            optional,
            unavailable,
            unreadable,
            ..
        } => format!(
            "{} of {required} required CUDA binar{} lack{} a kernel image: {}{}",
            binaries.len(),
            if *required == 1 { "y" } else { "ies" },
            if binaries.len() == 1 { "s" } else { "" },
            binaries.iter().map(needed_lacking).collect::<Vec<_>>().join("; "),
            binaries_tail(optional, unavailable, unreadable)
        ),
        ImagesHeld {
            archs,
            checked,
            required,
            by_need,
            optional,
            unavailable,
            unreadable,
        } => {
            let mut counted = format!("{checked} checked");
            if checked - required - by_need > 0 {
                counted += &format!(", {} optional", checked - required - by_need);
            }
            if *by_need > 0 {
                counted += &format!(", {by_need} only for backends you do not need");
            }
            format!(
                "every required CUDA binary holds kernels for {} ({counted}){}",
                join(archs, ", "),
                binaries_tail(optional, unavailable, unreadable)
            )
        }
        SmokeFailed { error, .. } => format!("smoke test failed: {}", error.as_deref().unwrap_or("?")),
        SmokePassed { script, archs, seconds } => {
            format!("smoke test {script} passed on {} ({seconds:.2} s)", join(archs, ", "))
        }
        SmokeNotRun { script } => format!("smoke test {script} not run: no GPU of a target arch here"),
        Served {
            script,
            archs,
            seconds,
            served,
        } => super::served_proof::served_text(script, archs, *seconds, served),
        ServeFailed { script, error } => format!("serving proof {script} failed: {}", error.as_deref().unwrap_or("?")),
        ServeNotRun { script } => {
            format!("serving proof {script} not run: no GPU of a target arch here (not proven, not failed)")
        }
        SmokeNeedsDriver { script, archs, driver } => match driver {
            None => format!(
                "smoke test {script} cannot run on the {} GPU here: no NVIDIA driver found (nvidia-smi, \
                 /proc/driver/nvidia/version, KILN_DRIVER_VERSION); install the NVIDIA driver",
                join(archs, ", ")
            ),
            Some(d) => format!(
                "smoke test {script} cannot run on the {} GPU here: driver {d} cannot drive it",
                join(archs, ", ")
            ),
        },
        JitNotProven { why } => format!("JIT not proven: {why}"),
        JitSkipped { script } => {
            format!("JIT not proven: --no-jit-proof (`kiln doctor` proves it with {script})")
        }
        JitFailed { script, error } => {
            format!("JIT proof {script} failed: {}", error.as_deref().unwrap_or("?"))
        }
        JitWrongArch { script, held, arch } => {
            let held = if held.is_empty() {
                "nothing".to_string()
            } else {
                held.join(" ")
            };
            format!("JIT proof {script} compiled {held}: no image for {arch}")
        }
        JitProven { script, archs } => {
            let per_arch: Vec<String> = archs
                .iter()
                .map(|a| {
                    let kernels: Vec<String> = a
                        .kernels
                        .iter()
                        .map(|k| format!("{} → {} ({:.1} s)", k.kernel, k.images.join(" "), k.seconds))
                        .collect();
                    let untried = if a.gpu_here {
                        ""
                    } else {
                        " (not run: no GPU of this arch here)"
                    };
                    format!("for {}: {}{untried}", a.arch, kernels.join(", "))
                })
                .collect();
            format!("JIT proof {script} compiled {}", per_arch.join("; "))
        }
        BuiltAgainst { dep, old, now } => match now {
            Some(now) => format!("built against {old}, now {now}"),
            None => format!("built against {old}, now {dep} not installed"),
        },
        RecordUnreadable { file, error } => {
            format!("{file} cannot be read ({error}): how it was built is unknown; installing it again writes it anew")
        }
        OtherSource { have, lock, want } => format!("built from `{have}`; {lock} has `{want}`"),
        InstalledAs {
            component,
            other,
            accepts,
        } => {
            let does = if other.accepted { "accepts" } else { "does not accept" };
            format!(
                "installed as {}, a version the recipe {does} ({accepts})",
                describe(other, component)
            )
        }
        SharedImportPackage {
            component,
            packages,
            judged,
            others,
        } => {
            let what = if packages.is_empty() {
                "its files".to_string()
            } else {
                packages.iter().map(|p| format!("{p}/")).collect::<Vec<_>>().join(", ")
            };
            let others: Vec<String> = others.iter().map(|o| describe(o, component)).collect();
            format!(
                "{what} holds files of more than one distribution: {judged} and {}; one distribution per \
                 import package, or uninstalling one deletes files the other imports",
                others.join(", ")
            )
        }
        NeedsDriver { binaries, library } => {
            let shown: Vec<&str> = binaries.iter().take(3).map(String::as_str).collect();
            let more = match binaries.len().saturating_sub(shown.len()) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "its import needs the NVIDIA driver: {}{more} link{} {library} (the driver's library), and \
                 this machine has no NVIDIA driver (no nvidia-smi, no /proc/driver/nvidia/version, \
                 KILN_DRIVER_VERSION unset); install it on a machine with the driver",
                shown.join(", "),
                if binaries.len() == 1 { "s" } else { "" },
            )
        }
        NeedsSystemLibrary {
            library,
            package,
            binaries,
        } => {
            let shown: Vec<&str> = binaries.iter().take(3).map(String::as_str).collect();
            let more = match binaries.len().saturating_sub(shown.len()) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "{}{more} link{} {library}, which the machine's loader does not find (ldconfig -p); install the \
                 system package that provides it (Debian/Ubuntu: {package})",
                shown.join(", "),
                if binaries.len() == 1 { "s" } else { "" },
            )
        }
        Keep { reasons } => format!("ok: {}", evidence(reasons)),
        Assessed { reasons } => evidence(reasons),
        KeptOutdated {
            component,
            version,
            reasons,
        } => format!(
            "kept {version}: installed and fits every chosen version (--allow-replace {component} lets kiln \
             change it); {}",
            evidence(reasons)
        ),
        NeedsBlocked { dep, root, why } if dep == root => format!("needs {dep}: {}", step(why)),
        NeedsBlocked { dep, root, .. } => format!("needs {dep}, which is blocked by {root}"),
        ReplaceOther {
            component,
            other,
            chosen,
        } => format!("replace {} with {component} {chosen}", describe(other, component)),
        Replace { have, chosen } => format!("replace {have} with {chosen}"),
        AbiChanged { deps } => format!(
            "built against {}, which this plan replaces (abi = true)",
            deps.join(", ")
        ),
        Change { status, reasons } => format!("{}: {}", status.as_str(), evidence(reasons)),
        NotNewest { note } => note.clone(),
        BuildNeedsTool { why } => format!("cannot build: {why}"),
        BuildNeedsToolkit { req, have, source } => match (have, source) {
            (None, Some(why)) => format!("cannot build: needs a CUDA toolkit {req} ({why})"),
            (Some(have), Some(why)) => format!("cannot build: needs CUDA {req}, the toolkit is {have} ({why})"),
            (None, None) => format!("cannot build: needs a CUDA toolkit {req}, none found"),
            (Some(have), None) => format!("cannot build: needs CUDA {req}, the toolkit is {have}"),
        },
        BuildNeedsToolkitParts { home, lacks } => super::toolkit_parts::lacks(home, lacks),
        BuildNeedsCompiler { req, have } => match have {
            Some(v) => format!(
                "cannot build: needs a host C++ compiler (g++) {req} for its CUDA build; found {v}; set CXX to a \
                 newer g++"
            ),
            None => format!("cannot build: needs a host C++ compiler (g++) {req}; none found (set CXX)"),
        },
        Unprovable { because } => format!("cannot be proven here: {}", text(because)),
        CannotRender { error } => error.clone(),
        Offline { missing } => format!("offline: {}", missing.join("; ")),
        NoSourceFor {
            component,
            version,
            offered,
        } => format!(
            "cannot install {component} {version} again: its recipe has no source for that version (it installs {}); \
             name one of those (`{component}=={}`)",
            offered.join(", "),
            offered.first().map_or("?", String::as_str)
        ),
        TorchCudaMajor {
            torch_cuda,
            toolkit,
            torch_major,
            toolkit_major,
        } => format!(
            "cannot build against torch built for CUDA {torch_cuda} with the CUDA {toolkit} toolkit: torch's \
             cpp_extension refuses another CUDA major (torch/utils/cpp_extension.py:544-545 in torch 2.11.0); \
             use a toolkit of CUDA {torch_major} or a torch built for CUDA {toolkit_major}"
        ),
    }
}

#[cfg(test)]
#[path = "reason_tests.rs"]
mod tests;
