//! `kiln install`: what was built, installed and verified, and the JIT verdicts after it (or
//! what failed, the command, its log, how the environment was put back and what became of the
//! wheel), and with `--locked` how the result compares with the lock. [`Install`] is the
//! `--json` document. It deliberately ignores progress while the build runs (that is
//! [`super::progress`]).

use crate::process::secrets::mask_urls;
use std::path::Path;

use serde::Serialize;

use crate::apply::{BuildFailure, Outcome, StepResult};
use crate::lock::Difference;
use crate::resolve::{Assessment, Plan, Step};
use crate::session::{JitStatus, JitVerdict};

/// What `kiln install --json` prints (as its [`document`]).
#[derive(Debug, Serialize)]
#[serde(tag = "result")]
pub enum Install<'a> {
    /// A step is blocked or unsupported: nothing was changed.
    #[serde(rename = "blocked")]
    Blocked { plan: &'a Plan },
    /// Every component was ok already (`components`: `doctor`'s verdicts).
    #[serde(rename = "nothing to do")]
    NothingToDo {
        built: usize,
        steps: &'a [Step],
        components: &'a [Assessment],
    },
    /// Every step was carried out and verified, and `doctor`'s verdict on the environment it
    /// left (`components`, as `doctor --json` has them) is ok, each JIT proof passed or skipped.
    #[serde(rename = "ok")]
    Done {
        logs: &'a Path,
        timings: &'a Path,
        outcomes: &'a [Outcome],
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        jit: &'a [JitVerdict],
        components: &'a [Assessment],
    },
    /// Every step was carried out and verified, but `doctor`'s verdict on the environment it
    /// left is not ok: a component is blocked, broken... (`components`), or a JIT proof says it
    /// cannot compile its kernels for a target arch (`jit`). Nothing was rolled back.
    #[serde(rename = "not ok")]
    NotOk {
        logs: &'a Path,
        timings: &'a Path,
        outcomes: &'a [Outcome],
        jit: &'a [JitVerdict],
        components: &'a [Assessment],
    },
    /// A step failed; the environment was put back for it.
    #[serde(rename = "failed")]
    Failed {
        logs: &'a Path,
        timings: &'a Path,
        outcomes: &'a [Outcome],
        failure: Failed<'a>,
        more_failures: Vec<Failed<'a>>,
        /// What the transaction put back for the run as a whole (the steps it proved before).
        #[serde(skip_serializing_if = "Option::is_none")]
        undo: Option<&'a crate::apply::txn::Undo>,
    },
    /// `--dry-run`: the plan itself.
    #[serde(untagged)]
    Plan(&'a Plan),
}

/// One failed step, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Failed<'a> {
    pub name: &'a str,
    pub phase: crate::apply::Phase,
    pub message: &'a crate::apply::failure::StepError,
    pub command: Option<&'a str>,
    pub status: Option<&'a crate::process::Exit>,
    pub log: Option<&'a Path>,
    pub tail: Option<&'a [String]>,
    pub causes: Option<&'a [String]>,
    pub restored: &'a crate::apply::failure::Restored,
    pub hint: Option<&'a crate::apply::failure::Hint>,
    /// For a wheel that failed verification: whose fault it was and whether it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<&'a crate::apply::WheelFate>,
}

impl<'a> Failed<'a> {
    pub fn of(f: &'a BuildFailure) -> Failed<'a> {
        let c = f.command.as_deref();
        Failed {
            name: &f.name,
            phase: f.phase,
            message: &f.message,
            command: c.map(|c| c.command.as_str()),
            status: c.map(|c| &c.status),
            log: c.map(|c| c.log.as_path()),
            tail: c.map(|c| c.tail.as_slice()),
            causes: c.map(|c| c.causes.as_slice()),
            restored: &f.restored,
            hint: f.hint.as_ref(),
            wheel: f.wheel.as_deref(),
        }
    }
}

/// How the environment compares with the lock after `install --locked`.
#[derive(Debug, Serialize)]
pub struct LockCheck<'a> {
    pub file: &'a Path,
    pub reproduced: bool,
    pub differences: &'a [Difference],
}

/// The JSON document of `doc`: keys in name order at every level, as [`super::json_doc`]
/// prints them.
pub fn document(doc: &Install) -> serde_json::Value {
    serde_json::to_value(doc).unwrap_or_default()
}

/// Prints a [`document`], with `--locked` the comparison with the lock under `lock`.
pub fn json(mut doc: serde_json::Value, lock: Option<&LockCheck>) {
    if let Some(l) = lock {
        doc["lock"] = serde_json::to_value(l).unwrap_or_default();
    }
    super::json(&doc);
}

/// What `install --aot` did, for a person.
pub fn aot(outcomes: &[crate::session::aot::AotOutcome], archs: &[crate::arch::Arch]) {
    let archs: Vec<String> = archs.iter().map(|a| a.to_string()).collect();
    for o in outcomes {
        let how = if o.from_cache { "from the cache" } else { "compiled" };
        match &o.error {
            None => println!(
                "aot       {} for {}: {} module{} {how} ({:.1} s){}",
                o.component,
                archs.join(", "),
                o.modules.len(),
                if o.modules.len() == 1 { "" } else { "s" },
                o.seconds,
                o.entry
                    .as_deref()
                    .map(|e| format!(", kept in {}", e.display()))
                    .unwrap_or_default()
            ),
            Some(e) => println!("aot       {} FAILED ({:.1} s): {e}", o.component, o.seconds),
        }
        for m in &o.modules {
            println!("          {} [{}] -> {}", m.module, m.sass.join(" "), m.path.display());
        }
        if let Some(f) = &o.runtime_file {
            println!("          run-time defaults: {}", f.display());
        }
        if o.ok {
            println!(
                "          checked: {} loads them as precompiled with no compiler reachable",
                o.component
            );
        }
    }
}

pub fn nothing_to_do(plan: &Plan) {
    println!(
        "nothing to do: all {} components are ok; built nothing",
        plan.steps.len()
    );
}

/// The steps carried out, for a person; "verified" only where `doctor`'s verdict after them
/// (`not_ok`: the components it does not call ok) agrees.
pub fn done(outcomes: &[Outcome], logs: &Path, not_ok: &[&Assessment]) {
    let changed: Vec<&Outcome> = outcomes.iter().filter(|o| o.result == StepResult::Done).collect();
    for o in &changed {
        println!(
            "{:9} {} ({:.1} s){}",
            o.action.as_str(),
            o.name,
            o.seconds,
            o.source.as_deref().map(|s| format!(" from {s}")).unwrap_or_default()
                + if o.from_cache { ", wheel from the cache" } else { "" }
        );
        if let Some(n) = &o.note {
            println!("          note: {n}");
        }
        if let Some(c) = &o.compile_cache {
            println!("          {} ({})", c.summary(), c.backend);
        }
        if let Some(a) = not_ok.iter().find(|a| a.name == o.name) {
            println!("          imports, but is {} (see below)", a.status.as_str());
        }
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let kept = outcomes.len() - changed.len();
    let logs = logs.display();
    if not_ok.is_empty() {
        println!(
            "installed and verified {} component{}; kept {kept}; logs in {logs} (timings.html: where the time went)",
            changed.len(),
            plural(changed.len())
        );
    } else {
        println!(
            "installed {} component{}; kept {kept}; {} not ok by `kiln doctor`'s verdict; logs in {logs}",
            changed.len(),
            plural(changed.len()),
            not_ok.len()
        );
    }
}

/// `doctor`'s verdict after an install, where it is not ok: each component it does not call
/// ok, with its status and evidence (stderr).
pub fn verdict(not_ok: &[&Assessment]) {
    for a in not_ok {
        let version = a.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        eprintln!(
            "error: {}{version} is {}: {}",
            a.name,
            a.status.as_str(),
            super::reason::evidence(&a.reasons)
        );
    }
    if !not_ok.is_empty() {
        eprintln!(
            "  this is `kiln doctor`'s verdict on the environment as the install left it; what was installed stays"
        );
    }
}

/// The serving proofs that passed for the components the install changed (`changed`): the engine
/// generated tokens on this GPU; what it measured, the backends it chose and those left out.
pub fn served(components: &[Assessment], changed: &[&str], quiet: bool) {
    if quiet {
        return;
    }
    for a in components.iter().filter(|a| changed.contains(&a.name.as_str())) {
        for r in &a.reasons {
            if matches!(r, crate::resolve::reason::Reason::Served { .. }) {
                println!("serve     {}: {}", a.name, super::reason::text(r));
            }
        }
    }
}

/// Before the JIT proofs after an install (they compile, so they take a while).
pub fn proving(names: &[&str], archs: &[crate::arch::Arch]) {
    let archs: Vec<String> = archs.iter().map(|a| a.to_string()).collect();
    eprintln!(
        "kiln: proving the JIT of {} for {} (a kernel each, compiled and read back; cached)",
        names.join(", "),
        archs.join(", ")
    );
}

/// The JIT verdicts after an install: what is proven on stdout, what is not ok on stderr.
pub fn jit(verdicts: &[JitVerdict], quiet: bool) {
    for v in verdicts {
        let archs: Vec<String> = v.archs.iter().map(|a| a.to_string()).collect();
        let archs = archs.join(", ");
        let evidence = super::reason::text(&v.reason);
        match v.status {
            JitStatus::Ok if !quiet => println!("jit       {} ok for {archs}: {evidence}", v.name),
            JitStatus::Skipped if !quiet => println!("note: {}: {evidence}", v.name),
            JitStatus::Ok | JitStatus::Skipped => {}
            status => {
                eprintln!(
                    "error: {} is installed and imports, but is not ok for {archs} ({}): {evidence}",
                    v.name,
                    status.as_str()
                );
                eprintln!(
                    "  it stays installed; its kernels cannot compile here. Fix that and run `kiln doctor`, \
                     or install with --no-jit-proof to leave the proof for later"
                );
            }
        }
    }
}

/// What was done before the failure (stdout), and each failure in full (stderr).
pub fn failed(outcomes: &[Outcome], failures: &[&BuildFailure], undo: Option<&crate::apply::txn::Undo>) {
    for o in outcomes.iter().filter(|o| o.result == StepResult::Done) {
        println!("{:9} {} ({:.1} s)", o.action.as_str(), o.name, o.seconds);
    }
    for (i, f) in failures.iter().enumerate() {
        if i > 0 {
            eprintln!();
        }
        eprintln!("error: {} failed during {}", f.name, f.phase);
        eprintln!("  {}", mask_urls(&f.message.to_string()));
        if let Some(c) = &f.command {
            eprintln!("  command: {}", mask_urls(&c.command));
            eprintln!("  status:  {}", c.status);
            eprintln!("  log:     {}", c.log.display());
            if !c.causes.is_empty() {
                eprintln!("  cause (from the log):");
                for l in &c.causes {
                    eprintln!("    | {l}");
                }
            }
            if !c.tail.is_empty() {
                eprintln!("  last lines:");
                for l in &c.tail {
                    eprintln!("    | {l}");
                }
            }
        }
        eprintln!("  environment: {}", f.restored);
        if i == 0
            && let Some(u) = undo
        {
            eprintln!("  the run: {u}");
        }
        if let Some(w) = &f.wheel {
            eprintln!("  wheel: {w}");
        }
        if let Some(h) = &f.hint {
            eprintln!("\nhint: {}", mask_urls(&h.to_string()));
        }
    }
}

/// The environment against the lock, after `install --locked`: notes on stdout, differences
/// that fail the reproduction on stderr.
pub fn lock_compared(path: &Path, locked: usize, differences: &[Difference], planned: bool) {
    let failures: Vec<_> = differences.iter().filter(|d| !d.note_only).collect();
    for d in differences.iter().filter(|d| d.note_only) {
        println!("note: {d} (a rebuild is not bit-for-bit identical)");
    }
    if failures.is_empty() && planned {
        println!(
            "installed as planned: {locked} component{} match the plan's versions and sources",
            if locked == 1 { "" } else { "s" }
        );
    } else if failures.is_empty() {
        println!(
            "reproduced {}: {locked} component{} match it",
            path.display(),
            if locked == 1 { "" } else { "s" }
        );
    } else {
        eprintln!("error: the environment differs from {}:", path.display());
        for d in failures {
            eprintln!("  - {d}");
        }
        eprintln!("  `kiln plan` shows why kiln chose otherwise; `kiln lock` records the environment as it is now");
    }
}

/// The proven lock written after a planned bundle installed.
pub fn proven_lock(path: &Path, components: usize) {
    println!(
        "proven here: wrote {} ({components} component{}); `kiln install --locked` reproduces it",
        path.display(),
        if components == 1 { "" } else { "s" }
    );
}

/// Where a locked install's target archs came from, as `install --json` says it (`archs_from`).
pub fn archs_from(from: crate::session::locked::ArchsFrom) -> &'static str {
    use crate::session::locked::ArchsFrom;
    match from {
        ArchsFrom::Given => "--arch",
        ArchsFrom::Lock => "lock",
        ArchsFrom::Components => "lock components",
        ArchsFrom::Gpus => "gpus",
        ArchsFrom::Overridden => "--arch over the lock's",
    }
}

/// The target archs of a locked install and where they came from.
pub fn locked_archs(
    path: &Path,
    archs: Option<&[crate::arch::Arch]>,
    from: crate::session::locked::ArchsFrom,
    locked: &[crate::arch::Arch],
) {
    use crate::session::locked::ArchsFrom;
    let list = archs
        .unwrap_or_default()
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let lock = path.display();
    match from {
        ArchsFrom::Given => println!("target {list} (--arch, as {lock} has it)"),
        ArchsFrom::Lock => {
            println!("target {list}: the archs of {lock} (it reproduces them; --arch names others)")
        }
        ArchsFrom::Components => println!(
            "target {list}: the archs {lock}'s components were built for (it reproduces them; --arch names others)"
        ),
        ArchsFrom::Overridden => {
            let locked: Vec<String> = locked.iter().map(|a| a.to_string()).collect();
            if locked.is_empty() {
                // A lock of no arch (only pure-Python or `installed` components).
                println!("target {list} (--arch; {lock} names no archs)")
            } else {
                println!(
                    "target {list} (--arch), not the lock's {}: what was built for those is built again for {list}, and {lock} is reproduced in all but its archs",
                    locked.join(", ")
                )
            }
        }
        ArchsFrom::Gpus => println!("target: the GPUs found ({lock} names no archs)"),
    }
}
