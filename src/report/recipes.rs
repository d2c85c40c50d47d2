//! `kiln recipes [NAME]`: the recipes in a table, or one recipe in full. `--json` prints the
//! recipes as parsed. It deliberately ignores the recipe files' text.

use crate::process::secrets::mask_urls;
use serde::Serialize;

use crate::recipe::{Recipe, RecipeSet, Source};

/// What `kiln recipes --json` prints (through [`super::json_doc`]).
#[derive(Debug, Serialize)]
pub struct List<'a> {
    pub origin: &'a str,
    pub recipes: Vec<&'a Recipe>,
}

impl<'a> List<'a> {
    pub fn of(set: &'a RecipeSet) -> List<'a> {
        List {
            origin: &set.origin,
            recipes: set.recipes.values().collect(),
        }
    }
}

/// The recipes, one line each, for a person.
pub fn list(l: &List) {
    let w = l.recipes.iter().map(|r| r.name.len()).max().unwrap_or(4);
    for r in &l.recipes {
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
    println!("\n{} recipes ({})", l.recipes.len(), l.origin);
}

/// One recipe in full, for a person.
pub fn show(r: &Recipe) {
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
        Some(Source::Sdist { url, sha256 }) => {
            println!("  source     sdist {}\n             sha256 {sha256}", mask_urls(url))
        }
        Some(Source::Git { url, rev, subdir, .. }) => println!(
            "  source     git {} @ {rev}{}",
            mask_urls(url),
            subdir.as_deref().map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        Some(Source::Path { path }) => println!("  source     path {}", path.display()),
        Some(Source::Wheel { requirement, index_url }) => println!(
            "  source     binary wheel {requirement}{}",
            index_url
                .as_deref()
                .map(|u| format!(" from {}", mask_urls(u)))
                .unwrap_or_default()
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
    if r.install_deps {
        println!("  install    with its runtime dependencies (pinned to what kiln manages)");
    }
    if !r.imports.is_empty() {
        println!("  verify     import {}", r.imports.join(", "));
    }
    if let Some(s) = &r.smoke {
        let what = if s.serve {
            "serving proof (the engine generates tokens on a tiny model)"
        } else {
            "smoke test"
        };
        println!(
            "  verify     {what} {} where a GPU of the target arch is present",
            s.path
        );
    }
    if let Some(j) = &r.jit {
        let env: Vec<String> = j.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  verify     JIT proof {} (no GPU needed) {}", j.path, env.join(" "));
    }
    for (n, f) in &r.features {
        println!("  feature    [{n}] {} (imports {})", f.summary, f.imports.join(", "));
    }
    for l in &r.limits {
        let archs: Vec<String> = l.arch.iter().map(|a| a.to_string()).collect();
        let lacks: Vec<&str> = l.lacks.iter().map(|c| c.as_str()).collect();
        println!(
            "  limits     on {}: no {} ({})",
            archs.join(", "),
            lacks.join(", "),
            l.why
        );
    }
}
