//! `kiln plan` (and `install --dry-run`, and a blocked install): each step in order with its
//! reason and build environment, then what the plan would do. `--json` prints the
//! [`Plan`] itself. It deliberately ignores how the plan was made.

use crate::process::secrets;
use std::path::Path;

use crate::resolve::Plan;

/// The plan for `python` (Python `version`), for a person.
pub fn human(plan: &Plan, python: &Path, version: &str) {
    let archs: Vec<String> = plan.archs.iter().map(|a| a.to_string()).collect();
    let target = if archs.is_empty() {
        "no arch".to_string()
    } else {
        archs.join(", ")
    };
    println!("plan for {} (target {target}, python {version})", python.display());
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
        println!("       {}", super::reason::step(&st.reasons));
        if let Some(d) = &st.prebuilt {
            println!(
                "       wheel or build ({:.1} s fetch, {:.1} s read): {}",
                d.fetch_seconds, d.read_seconds, d.reason
            );
            // What the wheel leaves out on the target archs (only unneeded backends use it).
            let gaps = d.binaries.iter().filter(|_| d.install).flat_map(|c| &c.unavailable);
            for l in gaps {
                let on: Vec<String> = l.archs.iter().map(|a| a.to_string()).collect();
                println!(
                    "       not available on {}: {} ({} will not work there; `--need {}` builds it instead)",
                    on.join(", "),
                    l.path,
                    l.serves.join(", "),
                    l.serves.first().map_or("", String::as_str)
                );
            }
        }
        for t in st.build.iter().flat_map(|b| &b.tools) {
            let file = t.wheel.rsplit('/').next().unwrap_or(&t.wheel);
            println!("       brings {} (not on PATH) from {file}", t.name);
        }
        if let Some(b) = &st.build {
            for line in inputs_and_targets(b, &archs) {
                println!("       {line}");
            }
        }
        for (k, v) in &st.env() {
            let v = if secrets::is_secret(k) {
                secrets::MASK.into()
            } else {
                secrets::mask_urls(v)
            };
            println!("       {k}={v}");
        }
        if let Some((bytes, from)) = st
            .build
            .as_ref()
            .and_then(|b| Some((b.memory_per_job?, b.memory_from.as_deref()?)))
        {
            println!("       memory per job: {} ({from})", crate::apply::memory::human(bytes));
        }
        if let Some(limit) = st.build.as_ref().and_then(|b| b.memory_limit) {
            let limit = crate::apply::memory::human(limit);
            println!("       memory for its CUDA compiles together: {limit} (each waits until its unit's figure fits)");
        }
        for (k, v) in &st.runtime_env {
            println!("       at run time: {k}={}", secrets::mask_urls(v));
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

/// The build inputs a build fetches first, each with its pinned identity, then what the
/// upstream build compiles for the target archs (where the recipe lists its targets).
fn inputs_and_targets(b: &crate::resolve::spec::BuildSpec, archs: &[String]) -> Vec<String> {
    use crate::recipe::InputSource;
    use crate::recipe::targets::Outcome;
    let mut out = Vec::new();
    let short = |s: &str| s.chars().take(12).collect::<String>();
    for i in &b.inputs {
        let from = match &i.from {
            InputSource::Git { git, rev, tag, .. } => {
                let at = rev.as_deref().map(short).or(tag.clone()).unwrap_or_default();
                let tag = match (rev, tag) {
                    (Some(_), Some(t)) => format!(" ({t})"),
                    _ => String::new(),
                };
                format!("git {} @ {at}{tag}", secrets::mask_urls(git))
            }
            InputSource::Archive { archive, sha256 } => {
                format!("archive {} (sha256 {})", secrets::mask_urls(archive), short(sha256))
            }
            InputSource::Wheel {
                wheel, sha256, member, ..
            } => {
                let file = wheel.rsplit('/').next().unwrap_or(wheel);
                format!("{member} from {file} (sha256 {})", short(sha256))
            }
        };
        out.push(format!("input {:<16} {from}", i.name));
    }
    if b.targets.is_empty() {
        return out;
    }
    let on = if archs.is_empty() {
        "the build's archs".to_string()
    } else {
        archs.join(", ")
    };
    out.push(format!("targets for {on}:"));
    let w = b.targets.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &b.targets {
        let what = match t.outcome {
            Outcome::Compiled if t.code_for.is_empty() => "compiled".to_string(),
            Outcome::Compiled => {
                let per: Vec<String> = t
                    .code_for
                    .iter()
                    .map(|c| format!("{}: {}", c.arch, c.images.join(", ")))
                    .collect();
                format!("compiled, {}", per.join("; "))
            }
            Outcome::Host => "compiled, host code only".to_string(),
            Outcome::Files => "files copied, nothing compiled".to_string(),
            Outcome::Skipped => "not compiled: no code for these archs".to_string(),
            Outcome::CompiledForNothing => format!(
                "compiled with no kernel for {on} (no switch leaves it out: {}; `--json` has the rest)",
                t.why.split(';').next().unwrap_or(&t.why)
            ),
        };
        out.push(format!("  {:w$}  {what}", t.name));
    }
    out
}
