//! `kiln recipes [NAME]`: list the recipes, or show one.

use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes};
use crate::report::{self, recipes};
use crate::settings::Settings;

pub fn run(settings: &Settings, name: Option<&str>) -> CmdResult {
    let set = load_recipes(settings)?;
    match name {
        None => {
            let list = recipes::List::of(&set);
            if settings.json {
                report::json_doc(&list);
            } else {
                recipes::list(&list);
            }
        }
        Some(n) => {
            let Some(r) = set.get(n) else {
                let hint = set
                    .closest(n)
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                return Err(Failure::Usage(format!("no recipe named `{n}`{hint}")));
            };
            if settings.json {
                report::json(r);
            } else {
                recipes::show(r);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
