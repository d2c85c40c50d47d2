//! `kiln recipe draft`: the drafted `[[versions]]` entry as TOML a person can paste after
//! review (each fact with a comment naming where it came from), then its differences from the
//! recipe's entry for that version.

use std::fmt::Write;

use crate::draft::{Draft, DraftInput};

/// A TOML string literal.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The entry as TOML text.
pub fn entry(d: &Draft) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Drafted by `kiln recipe draft {} {}` from {}",
        d.component, d.version, d.index
    );
    let _ = writeln!(t, "[[versions]]");
    let _ = writeln!(t, "version = {}", q(&d.version));
    if let Some(s) = &d.sdist {
        let _ = writeln!(t, "sdist = {}", q(&s.url));
        let _ = writeln!(t, "sha256 = {}", q(&s.sha256));
    }
    if let Some(w) = &d.wheel_requirement {
        let _ = writeln!(t, "wheel = {}", q(w));
    }
    if let Some(c) = &d.runtime_cuda {
        let _ = writeln!(t, "# the CUDA runtime its wheels pin ({})", c.from);
        let _ = writeln!(t, "runtime_cuda = {}", q(&c.value));
    }
    if let Some(p) = &d.requires_python {
        let _ = writeln!(
            t,
            "# Requires-Python ({}); keep it only where it is narrower than the recipe's",
            p.from
        );
        let _ = writeln!(t, "python = {}", q(&p.value));
    }
    if !d.depends.is_empty() {
        for p in &d.depends {
            let _ = writeln!(t, "# Requires-Dist: {} ({})", p.requirement, d.metadata_from);
        }
        let pins: Vec<String> = d
            .depends
            .iter()
            .map(|p| format!("{} = {}", p.component, q(&p.spec)))
            .collect();
        let _ = writeln!(t, "depends = {{ {} }}", pins.join(", "));
    }
    if !d.wheels.is_empty() && d.wheel_requirement.is_none() {
        let _ = writeln!(t, "wheels = [");
        for w in &d.wheels {
            let _ = writeln!(t, "  {{ url = {}, sha256 = {} }},", q(&w.url), q(&w.sha256));
        }
        let _ = writeln!(t, "]");
    }
    if let Some(script) = &d.existing_torch_script {
        let _ = writeln!(t, "# a build against the torch present: {script} strips the torch pins");
        let _ = writeln!(t, "prepare = [[\"{{python}}\", {}]]", q(script));
    }
    if !d.extensions.is_empty() {
        let _ = writeln!(
            t,
            "# extension modules setup.py declares (every branch: keep those this build makes as imports):"
        );
        for e in &d.extensions {
            let opt = if e.optional { ", optional" } else { "" };
            let _ = writeln!(t, "#   {} ({}{opt})", e.module, e.at);
        }
    }
    for i in &d.inputs {
        input(&mut t, i);
    }
    t
}

fn input(t: &mut String, i: &DraftInput) {
    let _ = writeln!(t, "\n[[versions.inputs]]");
    let _ = writeln!(t, "name = {}", q(&i.name));
    if let Some(g) = &i.git {
        let _ = writeln!(t, "git = {}", q(g));
    }
    if let Some(r) = &i.rev {
        let _ = writeln!(t, "rev = {}", q(r));
    }
    if let Some(tag) = &i.tag {
        let _ = writeln!(t, "# a tag or branch: find its commit for `rev`");
        let _ = writeln!(t, "tag = {}", q(tag));
    }
    if let Some(a) = &i.archive {
        let _ = writeln!(t, "archive = {}", q(a));
        let _ = writeln!(
            t,
            "# sha256 = \"...\"  (the archive's; URL_HASH says how upstream checks it)"
        );
    }
    match &i.submodules {
        None if i.git.is_some() => {
            let _ = writeln!(
                t,
                "# no GIT_SUBMODULES: FetchContent checks out every submodule; name the ones the build reads"
            );
            let _ = writeln!(t, "submodules = true");
        }
        Some(list) if !list.is_empty() => {
            let list: Vec<String> = list.iter().map(|s| q(s)).collect();
            let _ = writeln!(t, "submodules = [{}]", list.join(", "));
        }
        _ => {}
    }
    if let Some(s) = &i.subdir {
        let _ = writeln!(t, "subdir = {}", q(s));
    }
    let _ = writeln!(t, "env = {{ {} = \"{{path}}\" }}", i.env);
    let _ = writeln!(t, "why = {}", q(&i.why));
}

/// Prints the entry and the comparison.
pub fn show(d: &Draft) {
    print!("{}", entry(d));
    println!();
    match &d.differences {
        None => println!(
            "# the recipe `{}` has no entry for {}: nothing to compare",
            d.component, d.version
        ),
        Some(diffs) if diffs.is_empty() => {
            println!(
                "# the recipe's entry for {} agrees on all {} fields compared",
                d.version, d.same
            )
        }
        Some(diffs) => {
            println!(
                "# against the recipe's entry for {}: {} fields agree, {} differ",
                d.version,
                d.same,
                diffs.len()
            );
            for x in diffs {
                println!(
                    "#   {}: recipe {}, draft {}",
                    x.field,
                    x.recipe.as_deref().unwrap_or("(none)"),
                    x.draft.as_deref().unwrap_or("(none)")
                );
            }
        }
    }
    println!(
        "# {} CMake files read; nothing was written (review the entry, then add it to the recipe)",
        d.cmake_files
    );
}
