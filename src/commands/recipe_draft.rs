//! `kiln recipe draft NAME [VERSION]`: the draft of a release's `[[versions]]` entry, printed
//! with how it differs from the recipe. Only argument handling and reporting; the facts are
//! gathered by [`crate::draft`].

use std::process::ExitCode;

use super::{CmdResult, Failure, load_recipes};
use crate::report::{self, recipe_draft};
use crate::settings::Settings;

pub fn run(settings: &Settings, name: &str, version: Option<&str>) -> CmdResult {
    if settings.offline {
        return Err(Failure::Usage(
            "`kiln recipe draft` reads the release from PyPI and cannot run --offline".into(),
        ));
    }
    let set = load_recipes(settings)?;
    let d = crate::draft::draft(&set, name, version, &settings.cache_dir, &settings.watch)
        .map_err(|e| Failure::User(e.to_string()))?;
    if settings.json {
        report::json(&d);
    } else {
        recipe_draft::show(&d);
    }
    Ok(ExitCode::SUCCESS)
}
