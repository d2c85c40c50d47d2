//! Unit tests of the wording of conflicts: a line per constraint and version, ways out proven by
//! a second solve (also when two adopted components must move together), and the commands that
//! take them, made from the user's own arguments.

use std::collections::BTreeMap;

use super::*;
use crate::probe::python::Dist;

fn set(files: &[(&str, &str)]) -> RecipeSet {
    let files = files
        .iter()
        .map(|(n, t)| (format!("{n}.toml"), t.to_string()))
        .collect();
    RecipeSet::from_texts(files, "test").expect("valid recipes")
}

/// A recipe with binary-wheel versions (newest first) and the given `[depends]` per version.
fn recipe(name: &str, versions: &[(&str, &str)]) -> String {
    let mut s = format!("[package]\nname = \"{name}\"\n");
    for (v, deps) in versions {
        s += &format!("[[versions]]\nversion = \"{v}\"\nwheel = \"{name}=={v}\"\ndepends = {{ {deps} }}\n");
    }
    s
}

fn installed(dists: &[(&str, &str)]) -> PythonFacts {
    let mut py = PythonFacts::nothing_installed("python3", "3.12.0");
    for (name, version) in dists {
        py.dists.insert(
            name.to_string(),
            Dist {
                name: name.to_string(),
                version: version.to_string(),
                location: None,
                dist_info: None,
                direct_url: None,
                requires: Vec::new(),
                installer: None,
                kiln: None,
                kiln_unreadable: None,
            },
        );
    }
    py
}

fn asking(target: &str) -> Request {
    Request {
        targets: vec![(target.to_string(), Vec::new())],
        pins: BTreeMap::new(),
        allow_replace: Default::default(),
        prefer: BTreeMap::new(),
    }
}

#[test]
fn versions_pinning_different_things_get_a_line_each() {
    let s = set(&[
        (
            "app",
            &recipe("app", &[("2.0", "lib = \"==2.0\""), ("1.0", "lib = \"==1.0\"")]),
        ),
        ("lib", &recipe("lib", &[("3.0", ""), ("2.0", ""), ("1.0", "")])),
    ]);
    let c = solve(&s, &installed(&[("lib", "3.0")]), &asking("app")).unwrap_err();
    assert!(c.because.contains(&"app 2.0 needs lib ==2.0".to_string()), "{c:?}");
    assert!(c.because.contains(&"app 1.0 needs lib ==1.0".to_string()), "{c:?}");
    assert!(!c.because.iter().any(|l| l.contains(" or ")), "{c:?}");
    // No reason names a flag; the way out is proven and says what kiln then chooses.
    assert!(!c.because.iter().any(|l| l.contains("--")), "{c:?}");
    assert_eq!(c.ways_out.len(), 1, "{c:?}");
    assert_eq!(c.ways_out[0].allow_replace, ["lib"]);
    assert!(c.ways_out[0].says.ends_with("kiln then chooses lib 2.0"), "{c:?}");
}

#[test]
fn two_adopted_components_that_must_move_together_are_one_way_out() {
    let s = set(&[
        ("app", &recipe("app", &[("1.0", "a = \"==1.0\", b = \"==1.0\"")])),
        ("a", &recipe("a", &[("2.0", ""), ("1.0", "")])),
        ("b", &recipe("b", &[("2.0", ""), ("1.0", "")])),
    ]);
    let py = installed(&[("a", "2.0"), ("b", "2.0")]);
    let c = solve(&s, &py, &asking("app")).unwrap_err();
    // Neither alone helps: both were solved again and said so.
    assert_eq!(c.ways_out.len(), 1, "{c:?}");
    assert_eq!(c.ways_out[0].allow_replace, ["a", "b"]);
    assert!(!c.tried.is_empty(), "{c:?}");
    // And the way out is one: solving with it succeeds.
    let mut req = asking("app");
    req.allow_replace.extend(["a".to_string(), "b".to_string()]);
    assert!(solve(&s, &py, &req).is_ok());
}

#[test]
fn a_conflict_among_recipes_alone_has_nothing_to_try() {
    let s = set(&[
        ("app", &recipe("app", &[("1.0", "lib = \"==1.0\", other = \"*\"")])),
        ("other", &recipe("other", &[("1.0", "lib = \"==2.0\"")])),
        ("lib", &recipe("lib", &[("2.0", ""), ("1.0", "")])),
    ]);
    let c = solve(&s, &installed(&[]), &asking("app")).unwrap_err();
    assert!(c.ways_out.is_empty() && c.tried.is_empty(), "{c:?}");
}

fn way(allow: &[&str], drop: &[(&str, &str)]) -> WayOut {
    WayOut {
        says: String::new(),
        allow_replace: allow.iter().map(|s| s.to_string()).collect(),
        drop_pins: drop
            .iter()
            .map(|(pin, becomes)| DroppedPin {
                pin: pin.to_string(),
                becomes: becomes.to_string(),
            })
            .collect(),
        command: None,
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_way_outs_command_keeps_every_flag_the_user_gave() {
    let user = args(&[
        "--arch",
        "12.0",
        "plan",
        "sglang==0.5.23",
        "--allow-replace",
        "torch",
        "--json",
    ]);
    let w = way(&["torch", "flashinfer"], &[("sglang==0.5.23", "sglang")]);
    assert_eq!(
        w.command_from("kiln", &user),
        "kiln --arch 12.0 plan sglang --allow-replace torch --json --allow-replace flashinfer"
    );
    // `--allow-replace=NAME` counts as given; flags go before a `--`.
    let user = args(&["install", "--allow-replace=torch", "--", "flashinfer[cutedsl]>=0.7"]);
    let w = way(
        &["torch", "cutlass-dsl"],
        &[("flashinfer[cutedsl]>=0.7", "flashinfer[cutedsl]")],
    );
    assert_eq!(
        w.command_from("kiln", &user),
        "kiln install --allow-replace=torch --allow-replace cutlass-dsl -- 'flashinfer[cutedsl]'"
    );
}

#[test]
fn for_command_fills_every_way_out() {
    let c = Conflict {
        because: Vec::new(),
        notes: Vec::new(),
        ways_out: vec![way(&["torch"], &[]), way(&[], &[("torch==2.11.0", "torch")])],
        tried: Vec::new(),
    }
    .for_command("kiln", &args(&["plan", "torch==2.11.0"]));
    let cmds: Vec<&str> = c.ways_out.iter().filter_map(|w| w.command.as_deref()).collect();
    assert_eq!(
        cmds,
        ["kiln plan torch==2.11.0 --allow-replace torch", "kiln plan torch"]
    );
}
