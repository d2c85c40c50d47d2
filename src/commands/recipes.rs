//! `kiln recipes [NAME]`: list the recipes, or show one.

use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes};
use crate::cli::Global;
use crate::report;

pub fn run(g: &Global, name: Option<&str>) -> CmdResult {
    let set = load_recipes(g)?;
    match name {
        None => {
            if g.json {
                report::json(
                    &serde_json::json!({ "origin": set.origin, "recipes": set.recipes.values().collect::<Vec<_>>() }),
                );
            } else {
                report::recipes_list(&set);
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
            if g.json {
                report::json(r);
            } else {
                report::recipe_show(r);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
