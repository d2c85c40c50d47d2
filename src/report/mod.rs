//! Everything kiln prints: tables for people, JSON for machines, errors on stderr.
//!
//! Data goes to stdout, progress and errors to stderr. Colour is not used, so nothing depends
//! on it. Core types are printed here and only here.

pub mod progress;
pub mod timings;

use std::path::Path;

use serde::Serialize;

use crate::build::{BuildFailure, Outcome};
use crate::commands::Session;
use crate::recipe::diag::Diagnostic;
use crate::recipe::{Diagnostics, Recipe, RecipeSet, Source};
use crate::resolve::Plan;

pub fn json<T: Serialize + ?Sized>(v: &T) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => error(&format!("cannot encode JSON: {e}")),
    }
}

pub fn error(msg: &str) {
    eprintln!("error: {msg}");
}

pub fn diagnostics(d: &Diagnostics, as_json: bool) {
    if as_json {
        json(&serde_json::json!({ "errors": d.0 }));
    }
    eprintln!("{d}");
}

/// One problem in a file that is not a recipe (a lockfile).
pub fn diagnostic(d: &Diagnostic, as_json: bool) {
    if as_json {
        json(&serde_json::json!({ "errors": [d] }));
    }
    eprintln!("{d}");
}

pub fn doctor_json(s: &Session) -> serde_json::Value {
    serde_json::json!({
        "machine": machine_json(s),
        "components": s.assessments,
        "torch": s.facts.torch,
        "backends": s.backends(),
        "binaries": s.binaries.iter().map(|(dist, b)| serde_json::json!({
            "dist": dist,
            "files": b.cuda.iter().map(|f| serde_json::json!({"path": f.path, "sass": f.sass, "ptx": f.ptx})).collect::<Vec<_>>(),
            "without_cuda": b.plain,
            "unreadable": b.unreadable,
        })).collect::<Vec<_>>(),
    })
}

fn machine_json(s: &Session) -> serde_json::Value {
    serde_json::json!({
        "python": {
            "path": s.python,
            "chosen_by": s.python_source,
            "version": s.facts.python.version,
            "prefix": s.facts.python.prefix,
        },
        "gpus": s.machine.gpus,
        "gpu_source": s.machine.gpu_source,
        "driver": s.machine.driver,
        "driver_cuda": s.machine.driver_cuda,
        "host_compiler": s.machine.host_compiler,
        "cuda_toolkit": s.machine.cuda_toolkit,
        "cuda_searched": s.machine.cuda_searched,
        "cpus": s.machine.cpus,
        "memory_available": s.machine.memory_available,
        "target_archs": s.archs.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "target_archs_from": s.arch_source,
        "recipes": s.set.origin,
        "probe_cache": s.probe_cache,
    })
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn machine_human(s: &Session) {
    let m = &s.machine;
    println!("machine");
    println!(
        "  python   {} ({}; Python {})",
        s.python.display(),
        s.python_source,
        s.facts.python.version
    );
    if m.gpus.is_empty() {
        println!("  gpu      {}", m.gpu_source);
    } else {
        for g in &m.gpus {
            println!("  gpu      {} (compute {}) from {}", g.name, g.arch, m.gpu_source);
        }
    }
    match &m.driver {
        Some(d) => println!("  driver   {} from {}", d.value, d.source),
        None => println!("  driver   none found"),
    }
    if let Some(c) = &m.driver_cuda {
        println!(
            "  driver   supports CUDA {}.{} (from {})",
            c.value.major, c.value.minor, c.source
        );
    }
    match &m.cuda_toolkit {
        Some(t) => println!("  cuda     {} from {}", t.version, t.source),
        None => println!("  cuda     none found ({})", m.cuda_searched.join("; ")),
    }
    if let Some(c) = &m.host_compiler {
        println!("  c++      {} ({})", c.value, c.source);
    }
    let mem = m.memory_available.map(gib).unwrap_or_else(|| "unknown".into());
    println!("  cpus     {} (memory available {mem})", m.cpus);
    if s.archs.is_empty() {
        println!("  target   none: no GPU found; pass --arch (e.g. --arch 12.0)");
    } else {
        let list: Vec<String> = s.archs.iter().map(|a| a.to_string()).collect();
        println!("  target   {} from {}", list.join(", "), s.arch_source);
    }
}

/// `kiln verify`: each component's status and evidence, then a summary line.
pub fn verified(checked: &[&crate::resolve::Assessment]) {
    let w = checked.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    for a in checked {
        println!(
            "{:w$}  {:11}  {:14}  {}",
            a.name,
            a.status.as_str(),
            a.version.as_deref().unwrap_or("-"),
            a.evidence
        );
    }
    let bad = checked
        .iter()
        .filter(|a| a.status != crate::resolve::Status::Ok)
        .count();
    if bad == 0 {
        println!(
            "verified {} component{}: every proof ran again and held",
            checked.len(),
            if checked.len() == 1 { "" } else { "s" }
        );
    } else {
        println!(
            "{bad} of {} not ok; `kiln install` rebuilds what is broken",
            checked.len()
        );
    }
}

pub fn doctor_human(s: &Session) {
    machine_human(s);
    println!();
    println!("components");
    let w = s.assessments.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    for a in &s.assessments {
        let version = a.version.as_deref().unwrap_or("-");
        println!(
            "  {:w$}  {:11}  {:14}  {}",
            a.name,
            a.status.as_str(),
            version,
            a.evidence
        );
        for f in &a.features {
            println!(
                "  {:w$}  {:11}  {:14}  {}",
                format!("  [{}]", f.name),
                f.status.as_str(),
                "",
                f.evidence
            );
        }
    }
    let backends = s.backends();
    if !backends.is_empty() {
        println!();
        println!("backends");
        let w = backends
            .iter()
            .map(|b| b.component.len() + b.flag.len() + b.value.len() + 2)
            .max()
            .unwrap_or(0);
        for b in &backends {
            let label = format!("{} {} {}", b.component, b.flag, b.value);
            println!("  {label:w$}  {:11}  {}", b.status.as_str(), b.why);
        }
    }
    let bad = s
        .assessments
        .iter()
        .filter(|a| a.status != crate::resolve::Status::Ok)
        .count();
    println!();
    if bad == 0 {
        println!("all {} components ok", s.assessments.len());
    } else {
        println!(
            "{bad} of {} components not ok; `kiln plan` shows what `kiln install` would do",
            s.assessments.len()
        );
    }
}

pub fn plan_human(s: &Session, plan: &Plan) {
    let archs: Vec<String> = plan.archs.iter().map(|a| a.to_string()).collect();
    let target = if archs.is_empty() {
        "no arch".to_string()
    } else {
        archs.join(", ")
    };
    println!(
        "plan for {} (target {target}, python {})",
        s.python.display(),
        s.facts.python.version
    );
    let w = plan.steps.iter().map(|st| st.name.len()).max().unwrap_or(4);
    for (i, st) in plan.steps.iter().enumerate() {
        let name = if st.features.is_empty() {
            st.name.clone()
        } else {
            format!("{}[{}]", st.name, st.features.join(","))
        };
        let ver = st.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default();
        let head = format!("{:>3}. {:11} {:w$}{ver}", i + 1, st.action.as_str(), name, w = w + 2);
        println!("{}", head.trim_end());
        println!("       {}", st.reason);
        for (k, v) in &st.env() {
            println!("       {k}={v}");
        }
    }
    let changes = plan.changes();
    println!();
    if plan.is_blocked() {
        println!("blocked: fix the steps marked blocked/unsupported first; `kiln install` would change nothing");
    } else if changes == 0 {
        println!("nothing to do: every component is ok");
    } else {
        println!(
            "{changes} step{} would change the environment",
            if changes == 1 { "" } else { "s" }
        );
    }
}

pub fn conflict(c: &crate::resolve::solve::Conflict) {
    eprintln!("error: no set of versions satisfies every constraint, because:");
    for l in &c.because {
        eprintln!("  - {l}");
    }
    if c.ways_out.is_empty() {
        eprintln!("\nkiln knows no way out: change a recipe or a pin");
    } else {
        eprintln!("\nways out:");
        for w in &c.ways_out {
            eprintln!("  - {w}");
        }
    }
}

pub fn nothing_to_do(plan: &Plan) {
    println!(
        "nothing to do: all {} components are ok; built nothing",
        plan.steps.len()
    );
}

pub fn install_done(outcomes: &[Outcome], logs: &Path) {
    let changed: Vec<&Outcome> = outcomes.iter().filter(|o| o.result == "done").collect();
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
    }
    println!(
        "installed and verified {} component{}; kept {}; logs in {} (timings.html: where the time went)",
        changed.len(),
        if changed.len() == 1 { "" } else { "s" },
        outcomes.len() - changed.len(),
        logs.display()
    );
}

pub fn lock_written(path: &Path, lock: &crate::lock::Lock) {
    for c in &lock.components {
        println!("locked {} {} ({})", c.name, c.version, c.source);
    }
    println!(
        "wrote {}: {} component{} for Python {}, arch {}",
        path.display(),
        lock.components.len(),
        if lock.components.len() == 1 { "" } else { "s" },
        lock.environment.python,
        if lock.environment.archs.is_empty() {
            "none".to_string()
        } else {
            lock.environment.archs.join(",")
        }
    );
}

pub fn bundle_written(path: &Path, bytes: u64, c: &crate::bundle::Contents) {
    for e in &c.entries {
        println!("bundled {e}");
    }
    for l in &c.left_out {
        println!("left out: {l}");
    }
    println!(
        "wrote {}: the lock and {} cache entr{} ({}); on the target: kiln install --bundle {}",
        path.display(),
        c.entries.len(),
        if c.entries.len() == 1 { "y" } else { "ies" },
        megabytes(bytes),
        path.display()
    );
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

pub fn cache_parts(cache: &Path, parts: &[crate::cache_dir::Part]) {
    println!("{}", cache.display());
    for p in parts {
        println!(
            "  {:8} {:>10}  {:>5} entries  {}",
            p.name,
            megabytes(p.bytes),
            p.entries,
            p.what
        );
    }
    let total: u64 = parts.iter().map(|p| p.bytes).sum();
    println!("  total    {:>10}", megabytes(total));
}

pub fn cache_cleaned(cache: &Path, freed: &[(&str, u64)], kept: usize) {
    for (part, bytes) in freed {
        println!("cleaned {part}: {}", megabytes(*bytes));
    }
    let total: u64 = freed.iter().map(|(_, b)| b).sum();
    println!(
        "freed {} in {}{}",
        megabytes(total),
        cache.display(),
        if kept > 0 {
            format!("; kept the {kept} entries the lockfile needs")
        } else {
            String::new()
        }
    );
}

/// The environment against the lock, after `install --locked`.
pub fn lock_compared(path: &Path, locked: usize, differences: &[crate::lock::Difference]) {
    let failures: Vec<_> = differences.iter().filter(|d| !d.note_only).collect();
    for d in differences.iter().filter(|d| d.note_only) {
        println!("note: {d} (a rebuild is not bit-for-bit identical)");
    }
    if failures.is_empty() {
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

pub fn install_failed(outcomes: &[Outcome], failures: &[&BuildFailure]) {
    for o in outcomes.iter().filter(|o| o.result == "done") {
        println!("{:9} {} ({:.1} s)", o.action.as_str(), o.name, o.seconds);
    }
    for (i, f) in failures.iter().enumerate() {
        if i > 0 {
            eprintln!();
        }
        eprintln!("error: {} failed during {}", f.name, f.phase);
        eprintln!("  {}", f.message);
        if let Some(c) = &f.command {
            eprintln!("  command: {}", c.command);
            eprintln!("  status:  {}", c.status);
            eprintln!("  log:     {}", c.log.display());
            if !c.tail.is_empty() {
                eprintln!("  last lines:");
                for l in &c.tail {
                    eprintln!("    | {l}");
                }
            }
        }
        eprintln!("  environment: {}", f.restored);
        if let Some(h) = &f.hint {
            eprintln!("\nhint: {h}");
        }
    }
}

pub fn recipes_list(set: &RecipeSet) {
    let w = set.recipes.keys().map(String::len).max().unwrap_or(4);
    for r in set.recipes.values() {
        let v = if r.versions.is_empty() {
            "-".to_string()
        } else {
            r.versions
                .iter()
                .map(|e| e.version.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("{:w$}  {:20}  {}", r.name, v, r.summary);
    }
    println!("\n{} recipes ({})", set.recipes.len(), set.origin);
}

pub fn recipe_show(r: &Recipe) {
    println!("{} — {}", r.name, r.summary);
    println!("  file       {}", r.file);
    if let Some(d) = &r.dist {
        println!("  dist       {d}");
    }
    for e in &r.versions {
        let deps: Vec<String> = e
            .depends
            .iter()
            .map(|d| format!("{} {}", d.name, d.version.as_deref().unwrap_or("(any)")))
            .collect();
        let pins = if deps.is_empty() {
            String::new()
        } else {
            format!(" (needs {})", deps.join(", "))
        };
        println!("  version    {}{pins}", e.version);
    }
    if r.version.is_some() {
        println!("  accepts    {} installed", r.accepts_text());
    }
    match &r.source {
        Some(Source::Sdist { url, sha256 }) => println!("  source     sdist {url}\n             sha256 {sha256}"),
        Some(Source::Git { url, rev, subdir, .. }) => println!(
            "  source     git {url} @ {rev}{}",
            subdir.as_deref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        Some(Source::Path { path }) => println!("  source     path {}", path.display()),
        Some(Source::Wheel { requirement, index_url }) => println!(
            "  source     binary wheel {requirement}{}",
            index_url.as_deref().map(|u| format!(" from {u}")).unwrap_or_default()
        ),
        None => println!("  source     none (detected on the machine)"),
    }
    if let Some(p) = &r.requires.python {
        println!("  python     {p}");
    }
    if let Some(c) = &r.requires.cuda {
        println!("  cuda       {c}");
    }
    if !r.requires.tools.is_empty() {
        println!("  tools      {}", r.requires.tools.join(", "));
    }
    for d in &r.depends {
        println!(
            "  depends    {} {}{}",
            d.name,
            d.version.as_deref().unwrap_or("(any)"),
            if d.abi { " (abi)" } else { "" }
        );
    }
    for (k, v) in &r.build.env {
        println!("  env        {k}={v}");
    }
    if !r.imports.is_empty() {
        println!("  verify     import {}", r.imports.join(", "));
    }
    for (n, f) in &r.features {
        println!("  feature    [{n}] {} (imports {})", f.summary, f.imports.join(", "));
    }
}

pub fn arch_files(files: &[crate::commands::ArchFile]) {
    for f in files {
        println!("{}", f.report.path);
        let none = || "-".to_string();
        println!(
            "  sass  {}",
            if f.report.sass.is_empty() {
                none()
            } else {
                f.report.sass.join(" ")
            }
        );
        let ptx: Vec<String> = f.ptx_isa.iter().map(|(n, v)| format!("{n} (ISA {v})")).collect();
        println!("  ptx   {}", if ptx.is_empty() { none() } else { ptx.join(" ") });
        let images: usize = f.report.fatbins.iter().map(|b| b.images.len()).sum();
        println!(
            "  {} fatbin{}, {images} image{}",
            f.report.fatbins.len(),
            if f.report.fatbins.len() == 1 { "" } else { "s" },
            if images == 1 { "" } else { "s" }
        );
        for b in &f.report.fatbins {
            for u in &b.unknown {
                println!("  unknown entry kind {:#x} at {:#x}", u.kind, u.offset);
            }
        }
        for r in &f.runs_on {
            println!("  {}  {}", if r.usable { "runs" } else { "NO  " }, r.why);
        }
    }
}
