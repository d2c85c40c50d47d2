//! `[[limits]]`: what a library's API cannot do on some archs (flash-attn-4's SM120 forward has
//! no paged KV, SplitKV or block sparsity) is a typed note on the installed component for those
//! target archs only and those versions only; a capability outside the vocabulary is an error at
//! its position.

use crate::common::{World, component, stand_in, stdout_json, text};

const RECIPE: &str = r#"[package]
name = "fixture-attn"
dist = "kiln-fixture-attn"
version = "1.0.0"
summary = "test fixture: an attention library with SM120 limits"

[source]
path = "../packages/kiln-fixture-pure"

[verify]
imports = ["kiln_fixture_attn"]

[[limits]]
arch = ["12.0", "12.1"]
lacks = ["paged-kv", "split-kv"]
versions = ">=1.0"
why = "interface.py:10-12 asserts no page table on SM 12.0"
"#;

#[test]
fn an_apis_limits_are_noted_for_the_target_archs_and_versions_they_hold_for() {
    let w = World::new();
    w.write("recipes/fixture-attn.toml", RECIPE);
    stand_in(
        &w.python,
        w.dir.path(),
        "kiln-fixture-attn",
        "1.0.0",
        "kiln_fixture_attn",
        &[],
    );
    let doctor = |arch: &str| {
        let out = w
            .kiln()
            .args(["doctor", "--json", "--arch", arch, "fixture-attn"])
            .output()
            .unwrap();
        component(&stdout_json(&out), "fixture-attn").clone()
    };
    let c = doctor("12.0");
    assert_eq!(c["status"], "ok", "{c}");
    let note = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "arch-limits")
        .unwrap_or_else(|| panic!("{c}"))
        .clone();
    assert_eq!(note["archs"], serde_json::json!(["12.0"]));
    assert_eq!(note["lacks"], serde_json::json!(["paged-kv", "split-kv"]));
    assert_eq!(note["source"], "interface.py:10-12 asserts no page table on SM 12.0");
    let c = doctor("9.0");
    assert!(!c.to_string().contains("arch-limits"), "{c}");
    // An older version the entry does not describe: no note.
    w.edit(
        "recipes/fixture-attn.toml",
        "versions = \">=1.0\"",
        "versions = \">=2.0\"",
    );
    let c = doctor("12.0");
    assert!(!c.to_string().contains("arch-limits"), "{c}");

    // A capability kiln has no word for: the file, line and column, and the words it has.
    w.edit("recipes/fixture-attn.toml", "\"split-kv\"]", "\"splitkv\"]");
    let out = w.kiln().args(["recipes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("fixture-attn.toml:15:22"), "{err}");
    assert!(
        err.contains("`splitkv` is not one of paged-kv, split-kv, block-sparsity, backward"),
        "{err}"
    );
}
