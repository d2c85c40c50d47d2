//! `kiln lock`: record a proven environment in a lockfile. It records what is installed and
//! proven, never what the recipes would choose: an environment with anything not `ok` is refused.

use std::path::Path;
use std::process::ExitCode;

use super::{CmdResult, Failure, Session};
use crate::cli::Global;
use crate::lock::{self, Environment, Lock, Locked};
use crate::recipe::Kind;
use crate::report;
use crate::resolve::Status;

pub fn run(g: &Global, targets: &[String], output: &Path) -> CmdResult {
    let s = Session::open(g, targets)?;
    let named: Vec<&str> = s.request.targets.iter().map(|(n, _)| n.as_str()).collect();
    let mut components = Vec::new();
    let mut refused = Vec::new();
    for a in &s.assessments {
        let Some(r) = s.set.get(&a.name).filter(|r| r.kind == Kind::Python) else {
            continue;
        };
        let dist = s.installed(&r.name);
        match (dist, a.status) {
            (Some(dist), Status::Ok) => components.push(Locked::of(&a.name, dist)),
            (Some(_), status) => refused.push(format!("{} is {}: {}", a.name, status.as_str(), a.evidence)),
            // Asked for by name, yet absent: that is not a proven environment either.
            (None, _) if !targets.is_empty() && named.contains(&a.name.as_str()) => {
                refused.push(format!("{} is not installed", a.name))
            }
            (None, _) => {}
        }
    }
    if !refused.is_empty() {
        if g.json {
            report::json(&serde_json::json!({ "result": "refused", "because": refused }));
        }
        return Err(Failure::User(format!(
            "cannot lock an environment that is not proven; nothing was written:\n  - {}\n  `kiln install` fixes what it can; `kiln lock NAME...` locks only the named components",
            refused.join("\n  - ")
        )));
    }
    if components.is_empty() {
        return Err(Failure::User(
            "nothing to lock: no component kiln knows is installed in this environment; `kiln install NAME` first"
                .into(),
        ));
    }
    // Name order, as Cargo.lock does: a lock diff then shows what changed, not what moved.
    components.sort_by(|a: &Locked, b: &Locked| a.name.cmp(&b.name));
    let archs: Vec<String> = s.archs.iter().map(|a| a.to_string()).collect();
    let cuda = s.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string());
    let lock = Lock {
        format: lock::FORMAT,
        environment: Environment::of(&s.facts, &archs, cuda),
        components,
    };
    lock::write(output, &lock).map_err(|e| Failure::User(e.to_string()))?;
    if g.json {
        report::json(&serde_json::json!({ "result": "ok", "lockfile": output, "lock": lock }));
    } else if !g.quiet {
        report::lock_written(output, &lock);
    }
    Ok(ExitCode::SUCCESS)
}
