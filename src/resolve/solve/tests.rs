//! Unit tests of the solver: PEP 440 matching, features, and the fast path against PubGrub.

use std::collections::BTreeMap;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

use super::provider::Compiled;
use super::world::{World, admitted, public, public_spec};
use super::*;

/// Whether `spec` admits the candidate `v`, exactly as the solver decides it.
fn admits(spec: &str, v: &str) -> bool {
    let spec = public_spec(&VersionSpecifiers::from_str(spec).unwrap());
    admitted(&spec, &[public(&Version::from_str(v).unwrap())]) == 1
}

fn world(files: &[(&str, &str)]) -> RecipeSet {
    let files = files
        .iter()
        .map(|(n, t)| (format!("{n}.toml"), t.to_string()))
        .collect();
    RecipeSet::from_texts(files, "test").expect("valid recipes")
}

fn request(targets: &[(&str, &[&str])]) -> Request {
    Request {
        targets: targets
            .iter()
            .map(|(n, f)| (n.to_string(), f.iter().map(|x| x.to_string()).collect()))
            .collect(),
        ..Request::default()
    }
}

fn py() -> PythonFacts {
    PythonFacts::nothing_installed("python3", "3.12.0")
}

fn chosen(set: &RecipeSet, targets: &[(&str, &[&str])]) -> BTreeMap<String, String> {
    solve(set, &py(), &request(targets)).expect("a solution").chosen
}

#[test]
fn a_features_dependencies_constrain_the_solution_only_when_it_is_asked_for() {
    let set = world(&[
        (
            "app",
            "[package]\nname = \"app\"\nversion = \"1.0\"\n[source]\nwheel = \"app==1.0\"\n\
             [features.fast]\ndepends = { lib = \"<2\" }\n",
        ),
        (
            "lib",
            "[package]\nname = \"lib\"\n[[versions]]\nversion = \"2.0\"\nwheel = \"lib==2.0\"\n\
             [[versions]]\nversion = \"1.5\"\nwheel = \"lib==1.5\"\n",
        ),
    ]);
    let with = chosen(&set, &[("app", &["fast"]), ("lib", &[])]);
    assert_eq!(with.get("lib").map(String::as_str), Some("1.5"), "{with:?}");
    let without = chosen(&set, &[("app", &[]), ("lib", &[])]);
    assert_eq!(without.get("lib").map(String::as_str), Some("2.0"), "{without:?}");
}

#[test]
fn pep440_specifiers_select_candidates() {
    assert!(admits("==2.14.1", "2.14.1"));
    assert!(!admits("==2.14.1", "2.14.0"));
    assert!(admits(">=2.7", "2.11.0"));
    assert!(admits(">=0.1.11,<0.2", "0.1.15.post2"));
    assert!(!admits(">=0.1.11,<0.2", "0.2"));
    assert!(admits("~=2.14", "2.99"));
    assert!(!admits("~=2.14", "3.0"));
    assert!(admits("==2.14.*", "2.14.9"));
    assert!(!admits("==2.14.*", "2.15.0"));
    assert!(!admits("!=0.1.8", "0.1.8"));
    assert!(admits(">=0.6.18rc1", "0.6.18"));
    assert!(!admits(">=0.6.18", "0.6.18rc1"));
}

// The four cases the hand-written ranges got wrong (each of these failed on them), with
// neighbours that must keep their answer.

#[test]
fn less_than_excludes_prereleases_of_its_own_bound() {
    assert!(!admits("<2.0", "2.0a1"));
    assert!(!admits("<2.0", "2.0.dev0"));
    assert!(!admits("<2.0", "2.0rc1"));
    assert!(admits("<2.0", "1.9"));
    assert!(admits("<2.0", "1.9.post1"));
    assert!(admits("<2.0", "1.9a1"));
    assert!(admits("<=2.0", "2.0"));
}

#[test]
fn greater_than_excludes_postreleases_of_its_own_bound() {
    assert!(!admits(">1.0", "1.0.post1"));
    assert!(!admits(">1.0", "1.0"));
    assert!(admits(">1.0", "1.0.1"));
    assert!(admits(">1.0", "1.1.post1"));
    assert!(admits(">1.0.post1", "1.0.post2"));
    assert!(admits(">=1.0", "1.0.post1"));
}

#[test]
fn prefix_match_includes_dev_and_pre_releases_of_the_prefix() {
    assert!(admits("==1.2.*", "1.2.0.dev0"));
    assert!(admits("==1.2.*", "1.2.0rc1"));
    assert!(admits("==1.2.*", "1.2.5"));
    assert!(!admits("==1.2.*", "1.3.0.dev0"));
    assert!(!admits("==1.2.*", "1.1.9"));
    assert!(!admits("!=1.2.*", "1.2.0.dev0"));
    assert!(admits("!=1.2.*", "1.3"));
}

#[test]
fn epochs_are_kept() {
    assert!(!admits("==1!1.2.*", "1.2.3"));
    assert!(admits("==1!1.2.*", "1!1.2.3"));
    assert!(admits("~=1!2.0", "1!2.5"));
    assert!(!admits("~=1!2.0", "2.5"));
    assert!(admits("!=1!1.2.*", "1.2.3"));
    assert!(!admits(">=1!1.0", "2.0"));
    assert!(admits(">=1.0", "1!0.5"));
}

#[test]
fn local_labels_are_ignored_on_both_sides() {
    assert!(admits("==2.9.0", "2.9.0+cu130"));
    assert!(admits("==2.9.0+cu130", "2.9.0"));
    assert!(admits("==2.9.0+cu128", "2.9.0+cu130"));
    assert!(!admits("!=2.9.0+cu130", "2.9.0"));
    assert!(!admits(">2.9.0", "2.9.0+cu130"));
}

#[test]
fn the_solver_skips_a_prerelease_of_a_cap() {
    let set = world(&[
        (
            "app",
            "[package]\nname = \"app\"\nversion = \"1.0\"\n[source]\nwheel = \"app==1.0\"\n\
             [depends]\nlib = \"<2.0\"\n",
        ),
        (
            "lib",
            "[package]\nname = \"lib\"\n[[versions]]\nversion = \"2.0a1\"\nwheel = \"lib==2.0a1\"\n\
             [[versions]]\nversion = \"1.5\"\nwheel = \"lib==1.5\"\n",
        ),
    ]);
    let got = chosen(&set, &[("app", &[])]);
    assert_eq!(got.get("lib").map(String::as_str), Some("1.5"), "{got:?}");
}

#[test]
fn equal_versions_written_differently_print_as_written() {
    // `1.0` and `1.0.0` are equal versions: the solver shares work between them, not text.
    let set = world(&[
        (
            "a",
            "[package]\nname = \"a\"\nversion = \"1.0\"\n[source]\nwheel = \"a==1.0\"\n",
        ),
        (
            "b",
            "[package]\nname = \"b\"\nversion = \"1.0.0\"\n[source]\nwheel = \"b==1.0.0\"\n",
        ),
    ]);
    let got = chosen(&set, &[("a", &[]), ("b", &[])]);
    assert_eq!(got.get("a").map(String::as_str), Some("1.0"), "{got:?}");
    assert_eq!(got.get("b").map(String::as_str), Some("1.0.0"), "{got:?}");
}

/// Random worlds (three versions each, dependencies on lower-numbered components, some per
/// version), some of which conflict: wherever the fast path answers, PubGrub answers the same;
/// both kinds of world occur.
#[test]
fn the_fast_path_gives_pubgrubs_answer_or_none() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut fast, mut fallback, mut unsolvable) = (0, 0, 0);
    for _ in 0..200 {
        let n = 2 + (next() % 25) as usize;
        let files: Vec<(String, String)> = (0..n)
            .map(|i| {
                let mut text = format!("[package]\nname = \"c{i}\"\n[depends]\n{}", deps(&mut next, i, 4));
                for v in ["3.0.0", "2.0.0", "1.0.0"] {
                    text += &format!("[[versions]]\nversion = \"{v}\"\nwheel = \"c{i}=={v}\"\n");
                    if next() % 4 == 0 {
                        text += &format!("[versions.depends]\n{}", deps(&mut next, i, 3));
                    }
                }
                (format!("c{i}.toml"), text)
            })
            .collect();
        let set = RecipeSet::from_texts(files, "random").expect("valid recipes");
        let targets: Vec<(String, Vec<String>)> = (0..n)
            .filter(|_| next() % 3 == 0)
            .map(|i| (format!("c{i}"), Vec::new()))
            .collect();
        let req = Request {
            targets,
            ..Request::default()
        };
        let facts = py();
        let world = World::build(&set, &facts, &req);
        let compiled = Compiled::new(&world);
        let pubgrub = compiled.with_pubgrub().ok();
        match compiled.without_conflicts() {
            Some(chosen) => {
                assert_eq!(Some(chosen), pubgrub);
                fast += 1;
            }
            None if pubgrub.is_some() => fallback += 1,
            None => unsolvable += 1,
        }
    }
    assert!(
        fast > 50 && fallback > 5 && unsolvable > 5,
        "{fast} {fallback} {unsolvable}"
    );
}

/// Up to `k - 1` dependency lines of component `i` on lower-numbered ones, each name once.
fn deps(next: &mut impl FnMut() -> u64, i: usize, k: u64) -> String {
    let ranges = [
        ">=1.0", ">=1.0", "<3", "==2.*", ">=2.0,<4", ">=3", "<2", "!=2.0.0", "==1.0.0",
    ];
    let mut out = BTreeMap::new();
    for _ in 0..(next() % k).min(i as u64) {
        let j = next() as usize % i;
        out.insert(j, ranges[next() as usize % ranges.len()]);
    }
    out.iter().map(|(j, r)| format!("c{j} = \"{r}\"\n")).collect()
}
