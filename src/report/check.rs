//! `kiln check`'s answer as text and as JSON. The JSON contract scripts rely on: top-level
//! `works` (true = proven here, false = cannot work, null = not proven yet), `engine`,
//! `version`, `archs`, and `verdicts`, each `{flag, value, chosen_by, works, reasons: [{text,
//! source, kind, ...}]}` plus `arch`, `kind`, `alternatives` and `install`.

use serde::Serialize;

use super::serving::{Rendered, rendered, with_source, word};
use crate::resolve::serving::{Alternative, ChosenBy, Verdict};
use crate::session::check::Check;

/// One verdict as JSON.
#[derive(Serialize)]
pub struct JsonVerdict<'a> {
    pub flag: &'a str,
    pub by: &'static str,
    pub kind: &'static str,
    pub value: &'a str,
    pub chosen_by: ChosenBy,
    pub arch: String,
    pub works: Option<bool>,
    pub reasons: Vec<Rendered<'a>>,
    pub alternatives: &'a [Alternative],
    pub install: &'a [String],
}

/// The whole answer as JSON.
#[derive(Serialize)]
pub struct Json<'a> {
    pub works: Option<bool>,
    pub engine: &'a str,
    pub version: Option<&'a str>,
    pub version_from: crate::session::check::VersionFrom,
    pub archs: Vec<String>,
    pub model: &'a crate::probe::model::ModelConfig,
    pub workload: &'a crate::resolve::serving::workload::Workload,
    pub choices: &'a [crate::session::check::Choices],
    pub verdicts: Vec<JsonVerdict<'a>>,
    /// Backends whose own binaries must hold the arch (what `--need` says to `kiln install`).
    pub need: &'a [String],
    /// Environment variables given that no backend fact of this engine reads: not judged.
    pub unjudged_env: &'a [String],
    /// The `kiln install` line that would make the unproven verdicts work, if any.
    pub install: Option<String>,
}

impl<'a> Json<'a> {
    pub fn of(c: &'a Check) -> Json<'a> {
        Json {
            works: c.works,
            engine: &c.engine,
            version: c.version.as_deref(),
            version_from: c.version_from,
            archs: c.archs.iter().map(|a| a.to_string()).collect(),
            model: &c.model,
            workload: &c.workload,
            choices: &c.choices,
            verdicts: c.verdicts.iter().map(json_verdict).collect(),
            need: &c.need,
            unjudged_env: &c.unjudged_env,
            install: install_line(c),
        }
    }
}

fn json_verdict(v: &Verdict) -> JsonVerdict<'_> {
    JsonVerdict {
        flag: v.selector.name(),
        by: match v.selector {
            crate::recipe::serving::Selector::Flag(_) => "flag",
            crate::recipe::serving::Selector::Env(_) => "env",
        },
        kind: v.kind.as_str(),
        value: &v.value,
        chosen_by: v.chosen_by,
        arch: v.arch.to_string(),
        works: v.works,
        reasons: rendered(&v.reasons),
        alternatives: &v.alternatives,
        install: &v.install,
    }
}

/// `kiln install ENGINE COMPONENTS --arch A` for what is not proven yet.
pub fn install_line(c: &Check) -> Option<String> {
    if c.install.is_empty() || c.works == Some(false) {
        return None;
    }
    let mut words = vec!["kiln install".to_string()];
    for i in &c.install {
        let pinned = match (&c.version, i == &c.engine) {
            (Some(v), true) if c.version_from != crate::session::check::VersionFrom::Installed => {
                format!("'{i}=={v}'")
            }
            _ if i.contains('[') => format!("'{i}'"),
            _ => i.clone(),
        };
        words.push(pinned);
    }
    if !c.archs.is_empty() {
        let archs: Vec<String> = c.archs.iter().map(|a| a.to_string()).collect();
        words.push(format!("--arch {}", archs.join(",")));
    }
    for n in &c.need {
        words.push(format!("--need={n}"));
    }
    Some(words.join(" "))
}

pub fn human(c: &Check) {
    let version = c.version.as_deref().unwrap_or("(version unknown)");
    let from = match c.version_from {
        crate::session::check::VersionFrom::Installed => "installed",
        crate::session::check::VersionFrom::Pinned => "pinned",
        crate::session::check::VersionFrom::Plan => "not installed; what `kiln plan` would install",
        crate::session::check::VersionFrom::Unknown => "not installed; no version could be chosen",
    };
    println!("engine   {} {version} ({from})", c.engine);
    let w = &c.workload;
    let families: Vec<String> = w.families.iter().map(|f| f.to_string()).collect();
    println!(
        "model    {} — {} ({}); {}",
        c.model.dir.display(),
        w.architecture.as_deref().unwrap_or("unknown architecture"),
        w.quant,
        families.join(", ")
    );
    let mut last = None;
    for v in &c.verdicts {
        if last != Some(v.arch) {
            println!();
            println!("on {}", v.arch);
            last = Some(v.arch);
        }
        let by = match v.chosen_by {
            ChosenBy::User => "",
            ChosenBy::Auto => " (auto)",
        };
        println!("  {:10}  {} {}{by}", word(v.works), v.selector, v.value);
        // Every reason with its source, what says no first.
        let mut reasons: Vec<&crate::resolve::serving::reason::Reason> = v.reasons.iter().collect();
        reasons.sort_by_key(|r| r.effect());
        for r in reasons {
            println!("                {}", with_source(r));
        }
        if !v.alternatives.is_empty() {
            let alts: Vec<String> = v
                .alternatives
                .iter()
                .map(|a| format!("{} ({})", a.value, word(a.works)))
                .collect();
            println!("                instead: {}", alts.join(", "));
        }
    }
    if !c.unjudged_env.is_empty() {
        let vars: Vec<String> = c.unjudged_env.iter().map(|v| format!("${v}")).collect();
        let version = c.version.as_deref().unwrap_or("?");
        println!();
        println!(
            "not judged: {} (no backend fact of {} {version} reads {}: the engine may ignore {})",
            vars.join(", "),
            c.engine,
            if vars.len() == 1 { "it" } else { "them" },
            if vars.len() == 1 { "it" } else { "them" }
        );
    }
    println!();
    match c.works {
        Some(true) => println!("works: every backend this command uses is proven here"),
        Some(false) => println!("no: at least one backend above cannot work on the target arch"),
        None => match install_line(c) {
            Some(line) => println!("not proven yet; `{line}` would add what is missing"),
            None => println!("not proven yet: see the reasons above"),
        },
    }
}
