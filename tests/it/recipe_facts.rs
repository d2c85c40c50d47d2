//! Every `[[versions]]` entry of every embedded recipe against the facts of its own released
//! artifact on PyPI, read with as few bytes as each question needs (`tests/fixtures/
//! artifact_facts.py`; answers cached under `target/tmp/recipe-facts/`, so a second run reads
//! nothing): an sdist's URL and sha256 (PyPI's JSON API), Requires-Python (the recipe allows no
//! Python the artifact refuses), the pins the recipe claims against the artifact's Requires-Dist
//! (a wheel's METADATA by HTTP range requests, else the sdist's PKG-INFO), the verify imports'
//! modules (in the released wheel's file list, else as files or declared extensions in the
//! sdist) and the `prepare` scripts in the sdist's tree (streamed until found).
//!
//! What it skips, and says so in its output: a git source's hash and tree (the machine that runs
//! CI has no GitHub); for a git source the pins and modules are those of the wheel PyPI has for
//! the same version. A binary-wheel recipe's imports are checked in the wheel or, for a
//! meta-package whose code lives in its dependencies, in the wheels it requires.

use std::path::Path;
use std::str::FromStr;

use kiln::recipe::{Kind, Recipe, RecipeSet, Source};
use pep440_rs::{Operator, Version, VersionSpecifiers};
use pep508_rs::{MarkerEnvironment, MarkerEnvironmentBuilder, Requirement, VersionOrUrl};
use sha2::{Digest, Sha256};

/// Runs the helper (or reads its cached answer).
fn facts(args: &[&str]) -> serde_json::Value {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("recipe-facts");
    std::fs::create_dir_all(&dir).unwrap();
    let key = hex::encode(Sha256::digest(args.join("\n").as_bytes()));
    let cached = dir.join(format!("{}.json", &key[..24]));
    if let Ok(text) = std::fs::read_to_string(&cached) {
        return serde_json::from_str(&text).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/artifact_facts.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "artifact_facts.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&cached, &out.stdout).unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Linux x86_64 CPython 3.12, where the recipes' stacks run.
fn linux() -> MarkerEnvironment {
    MarkerEnvironment::try_from(MarkerEnvironmentBuilder {
        implementation_name: "cpython",
        implementation_version: "3.12.3",
        os_name: "posix",
        platform_machine: "x86_64",
        platform_python_implementation: "CPython",
        platform_release: "6.8.0",
        platform_system: "Linux",
        platform_version: "#1 SMP",
        python_full_version: "3.12.3",
        python_version: "3.12",
        sys_platform: "linux",
    })
    .unwrap()
}

/// The wheel PyPI has for Linux x86_64 (or any platform), if any.
fn pick_wheel(files: &[serde_json::Value]) -> Option<&serde_json::Value> {
    let wheels: Vec<&serde_json::Value> = files.iter().filter(|f| f["packagetype"] == "bdist_wheel").collect();
    let name = |f: &&serde_json::Value| f["filename"].as_str().unwrap_or("").to_string();
    wheels
        .iter()
        .find(|f| name(f).contains("manylinux") && name(f).contains("x86_64"))
        .or_else(|| wheels.iter().find(|f| name(f).ends_with("-none-any.whl")))
        .or_else(|| wheels.first())
        .copied()
}

/// The requirements a METADATA or PKG-INFO text lists for Linux x86_64 with no extras.
fn requires_dist(metadata: &str) -> Vec<Requirement> {
    let env = linux();
    metadata
        .lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
        .filter_map(|r| Requirement::from_str(r.trim()).ok())
        .filter(|r| r.marker.evaluate(&env, &[]))
        .collect()
}

/// A version the requirement pins exactly (`==X`), if it does.
fn exact_pin(r: &Requirement) -> Option<Version> {
    match &r.version_or_url {
        Some(VersionOrUrl::VersionSpecifier(s)) => {
            let v: Vec<_> = s.iter().collect();
            (v.len() == 1 && *v[0].operator() == Operator::Equal).then(|| v[0].version().clone())
        }
        _ => None,
    }
}

/// Whether a module is among a wheel's members: a `.py` file, a package, or an extension.
fn module_in(names: &[String], module: &str) -> bool {
    let path = module.replace('.', "/");
    names.iter().any(|n| {
        n == &format!("{path}.py")
            || n == &format!("{path}/__init__.py")
            || (n.starts_with(&format!("{path}.")) && n.ends_with(".so"))
    })
}

/// The files the recipe's `prepare` commands run, as paths relative to the source tree.
fn prepare_paths(r: &Recipe, v: &Version) -> Vec<String> {
    let build = r.build_of(Some(v));
    build
        .prepare
        .iter()
        .flatten()
        .map(|t| t.raw().to_string())
        .filter(|a| !a.contains('{') && !a.starts_with('-') && (a.ends_with(".py") || a.ends_with(".sh")))
        .collect()
}

struct Report {
    problems: Vec<String>,
    notes: Vec<String>,
}

fn check_version(set: &RecipeSet, r: &Recipe, entry: &kiln::recipe::model::VersionEntry, out: &mut Report) {
    let v = &entry.version;
    let label = format!("{} {v}", r.name);
    let mut bad = |what: String| out.problems.push(format!("{label}: {what}"));
    let source = entry.source.as_ref().or(r.source.as_ref());
    // Which release on PyPI, and the file the recipe names.
    let (dist, version) = match source {
        Some(Source::Wheel { requirement, .. }) => {
            let req = Requirement::from_str(requirement).unwrap();
            let pinned = exact_pin(&req).map(|p| p.to_string()).unwrap_or_else(|| v.to_string());
            (req.name.to_string(), pinned)
        }
        _ => (r.dist.clone().unwrap_or_else(|| r.name.clone()), v.to_string()),
    };
    let release = facts(&["pypi", &dist, &version]);
    let files = release["files"].as_array().cloned().unwrap_or_default();
    if files.is_empty() {
        bad(format!("PyPI has no files for {dist} {version}"));
        return;
    }
    let sdist_file = match source {
        Some(Source::Sdist { url, sha256 }) => {
            let name = url.rsplit('/').next().unwrap();
            match files.iter().find(|f| f["filename"] == name) {
                None => {
                    bad(format!("PyPI's {dist} {version} has no file {name}"));
                    None
                }
                Some(f) => {
                    if f["sha256"] != sha256.as_str() {
                        bad(format!("sha256 {sha256} in the recipe, {} on PyPI", f["sha256"]));
                    }
                    let path = |u: &str| u.split("/packages/").nth(1).unwrap_or(u).to_string();
                    if path(url) != path(f["url"].as_str().unwrap()) {
                        bad(format!("the recipe's URL {url} is not PyPI's {}", f["url"]));
                    }
                    Some(f.clone())
                }
            }
        }
        Some(Source::Git { url, rev, .. }) => {
            out.notes.push(format!(
                "{label}: git {url} @ {rev}: its hash and tree are not checked (no GitHub here); pins and modules are the released wheel's"
            ));
            None
        }
        _ => None,
    };
    let wheel_file = pick_wheel(&files).cloned();
    // Requires-Python: the recipe allows no Python the artifact refuses (the version's own
    // `python` narrows the recipe's `[requires] python`).
    let artifact = sdist_file.as_ref().or(wheel_file.as_ref()).unwrap();
    if let (Some(ours), Some(theirs)) = (&r.requires.python_spec, artifact["requires_python"].as_str()) {
        let theirs = VersionSpecifiers::from_str(theirs).unwrap();
        for minor in 8..=16 {
            let py = Version::from_str(&format!("3.{minor}")).unwrap();
            let allowed = ours.contains(&py) && entry.python.as_ref().is_none_or(|own| own.contains(&py));
            if allowed && !theirs.contains(&py) {
                bad(format!(
                    "the recipe allows Python 3.{minor}; {} requires {theirs}",
                    artifact["filename"]
                ));
            }
        }
    }
    // The artifact's metadata and members: the wheel's, else the sdist's.
    let wheel = wheel_file
        .as_ref()
        .map(|f| facts(&["wheel", f["url"].as_str().unwrap()]));
    let names: Vec<String> = wheel
        .as_ref()
        .map(|w| serde_json::from_value(w["names"].clone()).unwrap())
        .unwrap_or_default();
    let sdist_url = sdist_file.as_ref().map(|f| f["url"].as_str().unwrap().to_string());
    let mut wanted: Vec<String> = prepare_paths(r, v);
    if wheel.is_none() {
        wanted.extend(["+PKG-INFO".to_string(), "+setup.py".to_string()]);
        for m in r.imports_of(Some(v)) {
            let p = m.replace('.', "/");
            wanted.extend([format!("{p}.py"), format!("{p}/__init__.py")]);
        }
    }
    let tree = match (&sdist_url, wanted.is_empty()) {
        (Some(url), false) => {
            let mut args = vec!["sdist", url.as_str()];
            args.extend(wanted.iter().map(String::as_str));
            Some(facts(&args))
        }
        _ => None,
    };
    let metadata = match (&wheel, &tree) {
        (Some(w), _) => w["metadata"].as_str().unwrap_or("").to_string(),
        (None, Some(t)) => t["files"]["PKG-INFO"].as_str().unwrap_or("").to_string(),
        _ => String::new(),
    };
    // The pins the recipe claims against Requires-Dist.
    let requires = requires_dist(&metadata);
    for dep in r.depends_of(Some(v), &[]) {
        let Some(spec) = &dep.spec else { continue };
        let Some(target) = set.get(&dep.name) else { continue };
        let Some(dname) = target.dist_name() else { continue };
        for req in requires.iter().filter(|q| q.name == dname) {
            match exact_pin(req) {
                Some(pin) if !spec.contains(&pin) => {
                    bad(format!("the recipe needs {} {spec}; the artifact pins {req}", dep.name))
                }
                Some(_) => {}
                None => {
                    let offered: Vec<&Version> = target.versions.iter().map(|e| &e.version).collect();
                    let fits = offered.iter().any(|o| {
                        spec.contains(o)
                            && match &req.version_or_url {
                                Some(VersionOrUrl::VersionSpecifier(s)) => s.contains(o),
                                _ => true,
                            }
                    });
                    if !fits {
                        bad(format!(
                            "no {} the recipes offer fits both the recipe's {spec} and the artifact's {req}",
                            dep.name
                        ));
                    }
                }
            }
        }
    }
    // Modules: in the wheel, else in the sdist (a file, or an extension its setup.py declares).
    // A module of a dependency (sglang imports sgl_kernel to prove the pair) is that one's.
    let of_dependency = |m: &str| {
        let top = m.split('.').next().unwrap_or(m);
        r.depends_of(Some(v), &[]).iter().find_map(|d| {
            let dep = set.get(&d.name)?;
            dep.all_imports()
                .iter()
                .any(|i| i.split('.').next() == Some(top))
                .then(|| d.name.clone())
        })
    };
    for m in r.imports_of(Some(v)) {
        if let Some(dep) = of_dependency(m) {
            out.notes
                .push(format!("{label}: import {m} is {dep}'s, checked with {dep}"));
            continue;
        }
        let found = if wheel.is_some() {
            module_in(&names, m)
                || (matches!(source, Some(Source::Wheel { .. })) && requires.iter().any(|q| companion_has(q, m, 2)))
        } else if let Some(t) = &tree {
            let p = m.replace('.', "/");
            let found: Vec<String> = serde_json::from_value(t["found"].clone()).unwrap();
            let setup = t["files"]["setup.py"].as_str().unwrap_or("");
            found.contains(&format!("{p}.py"))
                || found.contains(&format!("{p}/__init__.py"))
                || setup.contains(&format!("\"{m}\""))
                || setup.contains(&format!("'{m}'"))
        } else {
            out.notes
                .push(format!("{label}: import {m} not checked (no wheel, no sdist)"));
            true
        };
        if !found {
            bad(format!("import {m}: no such module in the released artifact"));
        }
    }
    // Prepare scripts exist in the sdist's tree.
    for p in prepare_paths(r, v) {
        match &tree {
            Some(t) if !t["found"].as_array().unwrap().iter().any(|f| f == p.as_str()) => {
                bad(format!("prepare runs {p}, which the sdist does not have"))
            }
            Some(_) => {}
            None => out.notes.push(format!("{label}: prepare {p} not checked (no sdist)")),
        }
    }
}

/// Whether a wheel a meta-package requires (`nvidia-cutlass-dsl-libs-base`), or one that one
/// requires in turn (`-libs-core`), holds module `m`: such wheels put their packages under a
/// directory their `.pth` file adds to the path. Exact pins only, two levels at most.
fn companion_has(req: &Requirement, m: &str, depth: usize) -> bool {
    let Some(pin) = exact_pin(req) else { return false };
    let release = facts(&["pypi", req.name.as_ref(), &pin.to_string()]);
    let files = release["files"].as_array().cloned().unwrap_or_default();
    let Some(w) = pick_wheel(&files) else { return false };
    let wheel = facts(&["wheel", w["url"].as_str().unwrap()]);
    let names: Vec<String> = serde_json::from_value(wheel["names"].clone()).unwrap();
    let path = m.replace('.', "/");
    let here = module_in(&names, m)
        || names
            .iter()
            .any(|n| n.ends_with(&format!("/{path}/__init__.py")) || n.ends_with(&format!("/{path}.py")));
    here || (depth > 1
        && requires_dist(wheel["metadata"].as_str().unwrap_or(""))
            .iter()
            .any(|q| companion_has(q, m, depth - 1)))
}

/// Every problem of every version of every Python recipe in `set`, and the notes on what was
/// not checked, with the count of versions checked.
fn check_all(set: &RecipeSet) -> (Report, usize) {
    let mut report = Report {
        problems: Vec::new(),
        notes: Vec::new(),
    };
    let mut checked = 0;
    for r in set.recipes.values().filter(|r| r.kind == Kind::Python) {
        for entry in &r.versions {
            check_version(set, r, entry, &mut report);
            checked += 1;
        }
    }
    (report, checked)
}

#[test]
fn every_version_of_every_recipe_matches_its_released_artifact() {
    // KILN_RECIPE_FACTS_DIR checks a recipe directory instead of the embedded set.
    let set = match std::env::var_os("KILN_RECIPE_FACTS_DIR") {
        Some(dir) => RecipeSet::from_dir(Path::new(&dir)).unwrap(),
        None => RecipeSet::embedded().unwrap(),
    };
    let (report, checked) = check_all(&set);
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    assert!(checked >= 10, "{checked} versions");
    assert!(
        report.problems.is_empty(),
        "{} of {checked} recipe versions disagree with their artifacts:\n{}",
        report.problems.len(),
        report.problems.join("\n")
    );
}

#[test]
fn an_older_version_that_inherits_the_newer_ones_build_facts_is_caught() {
    // vLLM 0.20.0 as the recipe had it before: 0.33.0's prepare script and extension names.
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    for f in [
        "vllm.toml",
        "torch.toml",
        "flashinfer.toml",
        "cutlass-dsl.toml",
        "cuda-toolkit.toml",
        "flashinfer-cubin.toml",
    ] {
        std::fs::copy(root.join(f), dir.path().join(f)).unwrap();
    }
    for d in ["jit", "aot", "smoke", "serve"] {
        crate::common::copy_dir(&root.join(d), &dir.path().join(d));
    }
    let vllm = std::fs::read_to_string(root.join("vllm.toml")).unwrap();
    let own = vllm
        .lines()
        .filter(|l| {
            l.starts_with("prepare = [[\"{python}\", \"use_existing_torch.py\"]]")
                || l.starts_with("imports = [\"vllm\", \"vllm._C\",")
        })
        .count();
    assert_eq!(own, 2, "0.20.0 has its own prepare and imports");
    let inherited: String = vllm
        .lines()
        .filter(|l| {
            !l.starts_with("prepare = [[\"{python}\", \"use_existing_torch.py\"]]")
                && !l.starts_with("imports = [\"vllm\", \"vllm._C\",")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("vllm.toml"), inherited).unwrap();
    let set = RecipeSet::from_dir(dir.path()).unwrap();
    let r = set.get("vllm").unwrap();
    let entry = r.versions.iter().find(|e| e.version.to_string() == "0.20.0").unwrap();
    let mut report = Report {
        problems: Vec::new(),
        notes: Vec::new(),
    };
    check_version(&set, r, entry, &mut report);
    let all = report.problems.join("\n");
    assert!(
        all.contains("prepare runs tools/use_existing_torch.py, which the sdist does not have"),
        "{all}"
    );
    assert!(
        all.contains("import vllm._moe_C_stable_libtorch: no such module"),
        "{all}"
    );
}
