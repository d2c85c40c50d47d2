//! `kiln doctor`: machine facts and a status per component, with evidence.

use super::{CmdResult, exit, open};
use crate::report::{self, doctor};
use crate::resolve::Status;
use crate::session::Session;
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String]) -> CmdResult {
    let s = open(settings, targets)?;
    let unmanaged = s.unmanaged();
    let doc = doctor::Doctor {
        machine: machine(&s),
        components: &s.assessments,
        torch: s.facts.torch.as_ref(),
        backends: s.backends(),
        binaries: doctor::binaries(&s.binaries),
        unmanaged: &unmanaged,
        jit: &s.jit,
        runtime: s.runtime(settings),
        node: settings.json.then(|| s.node_facts(settings)),
    };
    if settings.json {
        report::json_doc(&doc);
    } else if !settings.quiet {
        doctor::human(&doc);
    }
    Ok(exit(s.assessments.iter().all(|a| a.status == Status::Ok)))
}

/// The machine section of the report.
fn machine(s: &Session) -> doctor::Machine<'_> {
    let python = doctor::Interpreter {
        path: &s.python,
        chosen_by: s.python_source,
        version: &s.facts.python.version,
        prefix: &s.facts.python.prefix,
    };
    let mut m = doctor::Machine::new(
        python,
        &s.machine,
        (&s.archs, &s.arch_source),
        &s.set.origin,
        s.probe_cache,
    );
    m.probe_sources = Some(&s.probe_sources);
    m
}
