//! `kiln check [TARGETS] -- COMMAND`: parses the serving command against the recipes, opens a
//! session on its engine (and TARGETS), and hands the answer to `report::check`.

use super::{CmdResult, Failure, exit, load_recipes};
use crate::report;
use crate::resolve::serving::cmdline;
use crate::session::Session;
use crate::settings::Settings;

pub fn run(settings: &Settings, targets: &[String], command: &[String], prove_jit: bool) -> CmdResult {
    let set = load_recipes(settings)?;
    let cmd = cmdline::parse(&set, command).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut wanted = targets.to_vec();
    let named = |t: &String| crate::session::targets::requirement(t).is_ok_and(|r| r.name.to_string() == cmd.engine);
    if !wanted.iter().any(named) {
        wanted.push(cmd.engine.clone());
    }
    let s = Session::open(settings, set, &wanted)?;
    let answer = s.check(settings, cmd, prove_jit)?;
    if settings.json {
        report::json_doc(&report::check::Json::of(&answer));
    } else if !settings.quiet {
        report::check::human(&answer);
    }
    Ok(exit(answer.works == Some(true)))
}
