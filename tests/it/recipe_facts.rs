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
    assert_eq!(own, 3, "0.20.0 has its own prepare and imports, 0.26.0 its own prepare");
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

/// The x86_64 wheel a recipe's version offers, from PyPI through the test download cache.
fn offered_wheel(set: &RecipeSet, name: &str, version: &str) -> std::path::PathBuf {
    let r = set.get(name).unwrap();
    let e = r
        .version_entry(&Version::from_str(version).unwrap())
        .unwrap_or_else(|| panic!("{name} {version}"));
    let w = e
        .wheels
        .iter()
        .find(|w| w.file.contains("x86_64") || w.file.ends_with("-none-any.whl"))
        .unwrap_or_else(|| panic!("{name} {version}: no x86_64 wheel offered"));
    crate::common::pypi_file(&w.url, &w.sha256)
}

/// Line `n` (1-based) of member `member` of the wheel at `path`.
fn member_line(path: &Path, member: &str, n: usize) -> String {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut text = String::new();
    zip.by_name(member).unwrap().read_to_string(&mut text).unwrap();
    text.lines().nth(n - 1).unwrap_or("").to_string()
}

/// sgl-deep-gemm 0.2.3.post2 on 12.0, as recipes/sgl-deep-gemm.toml answers it, read from the
/// real wheel: no prebuilt kernel image at all (kiln's wheel reader finds one shared object and
/// no fatbin in it), the SM120 kernels as the JIT sources it ships and the runtimes its `_C.so`
/// names, and the three APIs SGLang 0.5.23 probes before enabling DeepGEMM on SM120, at the
/// lines the recipes cite.
#[test]
fn sgl_deep_gemm_holds_sm120_kernels_as_jit_sources_and_no_prebuilt_image() {
    let set = RecipeSet::embedded().unwrap();
    let wheel = offered_wheel(&set, "sgl-deep-gemm", "0.2.3.post2");
    let facts = kiln::probe::wheel::read(&wheel).unwrap();
    assert!(facts.cuda.is_empty(), "{:?}", facts.cuda);
    assert_eq!(
        (facts.plain, facts.provides.as_slice()),
        (1, &["_C.so".to_string()][..])
    );
    assert!(facts.unreadable.is_empty(), "{:?}", facts.unreadable);
    let names: Vec<String> = {
        let zip = zip::ZipArchive::new(std::fs::File::open(&wheel).unwrap()).unwrap();
        zip.file_names()
            .filter_map(|n| n.ok().map(|n| n.into_owned()))
            .collect()
    };
    for header in [
        "impls/sm120_fp8_paged_mqa_logits.cuh",
        "impls/sm120_fp8_mqa_logits.cuh",
        "impls/sm120_fp4_paged_mqa_logits.cuh",
        "impls/sm120_fp4_mqa_logits.cuh",
        "impls/sm120_fp8_fp4_gemm_1d1d.cuh",
        "impls/sm120_bf16_gemm.cuh",
        "scheduler/sm120_paged_mqa_logits.cuh",
        "mma/sm120.cuh",
    ] {
        let member = format!("deep_gemm/include/deep_gemm/{header}");
        assert!(names.contains(&member), "{member} is not in {}", wheel.display());
    }
    let so = {
        use std::io::Read;
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&wheel).unwrap()).unwrap();
        let mut b = Vec::new();
        zip.by_name("deep_gemm/_C.so").unwrap().read_to_end(&mut b).unwrap();
        b
    };
    let holds = |s: &str| so.windows(s.len()).any(|w| w == s.as_bytes());
    for s in [
        "SM120ArchSpec",
        "sm120_fp8_paged_mqa_logits",
        "sm120_paged_mqa_logits_metadata",
        "libnvrtc.so.13",
        "bin/nvcc",
    ] {
        assert!(holds(s), "deep_gemm/_C.so has no {s:?}");
    }
    for (line, def) in [
        (119, "def m_grouped_fp8_fp4_gemm_nt_contiguous("),
        (146, "def fp8_einsum("),
        (155, "def fp8_paged_mqa_logits("),
        (170, "def get_paged_mqa_logits_metadata("),
        (176, "def transform_sf_into_required_layout("),
    ] {
        let text = member_line(&wheel, "deep_gemm/__init__.py", line);
        assert!(
            text.trim_start().starts_with(def),
            "deep_gemm/__init__.py:{line} is {text:?}"
        );
    }
    assert_eq!(
        member_line(&wheel, "deep_gemm/cuda_helpers.py", 20).trim(),
        "assert cuda_home is not None"
    );
    // The recipe says so, and SGLang's deep_gemm backend needs the component.
    let recipe =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/sgl-deep-gemm.toml")).unwrap();
    assert!(recipe.contains("it HOLDS SM120 kernels, as JIT\n# sources, and no prebuilt kernel image at all."));
    let sglang = set.get("sglang").unwrap();
    let dg = sglang
        .backends
        .iter()
        .find(|b| b.value == "deep_gemm" && b.describes(Some(&Version::from_str("0.5.23").unwrap())))
        .unwrap();
    assert!(dg.needs.iter().any(|(n, _)| n == "sgl-deep-gemm"));
}

/// sgl-flash-mla 1.0.0's two extensions hold the images recipes/sgl-flash-mla.toml names, read
/// from the real wheel with kiln's reader, and the recipe's `[[binaries.optional]]` entries make
/// exactly the archs FlashMLA lacks by design optional: on 12.0 both extensions lack an image and
/// are optional; on 9.0 the legacy one holds sm_90a and the SM100-only one is optional; on 10.0
/// both hold one; on 11.0 (not named) neither may be missing without failing.
#[test]
fn sgl_flash_mla_binaries_hold_what_its_recipe_says() {
    use kiln::resolve::kernels::{Rules, check};
    let set = RecipeSet::embedded().unwrap();
    let wheel = offered_wheel(&set, "sgl-flash-mla", "1.0.0");
    let facts = kiln::probe::wheel::read(&wheel).unwrap();
    let held: std::collections::BTreeMap<&str, Vec<String>> =
        facts.cuda.iter().map(|(p, r)| (p.as_str(), r.sass.clone())).collect();
    assert_eq!(
        held,
        std::collections::BTreeMap::from([
            (
                "flash_mla/_C_legacy.abi3.so",
                vec!["sm_90a".into(), "sm_100a".into(), "sm_103a".into(), "sm_107a".into()]
            ),
            (
                "flash_mla/cuda.abi3.so",
                vec!["sm_100a".into(), "sm_103a".into(), "sm_107a".into()]
            ),
        ])
    );
    assert!(facts.cuda.iter().all(|(_, r)| r.ptx.is_empty()));
    let r = set.get("sgl-flash-mla").unwrap();
    let v = Version::from_str("1.0.0").unwrap();
    let rules = Rules::of(r, Some(&v), &[]);
    let files: Vec<(String, &kiln::fatbin::FileReport)> = facts.cuda.iter().map(|(p, f)| (p.clone(), f)).collect();
    let arch = |a: &str| -> kiln::arch::Arch { a.parse().unwrap() };
    let c = check(&files, &[arch("12.0")], None, &rules);
    assert!(c.ok() && c.optional_missing.len() == 2, "{}", c.evidence());
    let c = check(&files, &[arch("9.0")], None, &rules);
    assert!(c.ok(), "{}", c.evidence());
    assert_eq!(c.optional_missing.len(), 1, "{}", c.evidence());
    assert_eq!(c.optional_missing[0].path, "flash_mla/cuda.abi3.so");
    let c = check(&files, &[arch("10.0")], None, &rules);
    assert!(c.ok() && c.optional_missing.is_empty(), "{}", c.evidence());
    let c = check(&files, &[arch("11.0")], None, &rules);
    assert!(!c.ok(), "{}", c.evidence());
}

/// flash-attn-4's `[[limits]]` rest on the lines they cite, read from the real 4.0.0b36 wheel.
#[test]
fn flash_attn_4_sm120_limits_are_the_released_interfaces_asserts() {
    let set = RecipeSet::embedded().unwrap();
    let wheel = offered_wheel(&set, "flash-attn-4", "4.0.0b36");
    let file = "flash_attn/cute/interface.py";
    for (n, text) in [
        (416, "if arch // 10 == 12:"),
        (
            417,
            "assert num_splits <= 1, \"SM120 forward only supports num_splits=1\"",
        ),
        (1751, "elif arch // 10 == 12:"),
        (
            1753,
            "assert not use_block_sparsity, \"Block sparsity not supported on SM 12.0\"",
        ),
        (
            1754,
            "assert page_table is None, \"Paged KV not supported on SM 12.0 in this PR\"",
        ),
        (
            1755,
            "assert not is_split_kv, \"SplitKV not supported on SM 12.0 in this PR\"",
        ),
    ] {
        assert_eq!(member_line(&wheel, file, n).trim(), text, "{file}:{n}");
    }
    let r = set.get("flash-attn-4").unwrap();
    let lacks: Vec<&str> = r.limits[0].lacks.iter().map(|c| c.as_str()).collect();
    assert_eq!(lacks, ["paged-kv", "split-kv", "block-sparsity"]);
    assert!(r.limits[0].why.contains("flash_attn/cute/interface.py:1751-1755"));
    assert!(r.limits[0].why.contains(":416-418"));
}

/// vLLM's FlashMLA backends need both of its FlashMLA extensions: `_is_flashmla_available`
/// gates on `vllm._flashmla_C` and on `vllm._flashmla_extension_C`
/// (vllm/v1/attention/ops/flashmla.py:12-47 in 0.20.0), and both FLASHMLA backends ask it. So
/// every FlashMLA extension in the released wheels (their file lists, read by range requests)
/// is named by those backends' `binaries`: on 12.0 neither is then required of a user who does
/// not need FlashMLA. Before, `_flashmla_extension_C` counted as required and the 0.20.0 wheel
/// was `wrong-arch` for 12.0 (the H200 run of 2026-12-04, docs/gpu-proof.md §15).
#[test]
fn vllm_flashmla_backends_name_every_flashmla_extension_of_the_released_wheels() {
    let set = RecipeSet::embedded().unwrap();
    let vllm = set.get("vllm").unwrap();
    for version in ["0.20.0", "0.33.0"] {
        let release = facts(&["pypi", "vllm", version]);
        let files = release["files"].as_array().unwrap();
        let wheel = pick_wheel(files).unwrap_or_else(|| panic!("vllm {version}: no wheel"));
        let names = facts(&["wheel", wheel["url"].as_str().unwrap()]);
        let flashmla: Vec<&str> = names["names"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .filter(|n| n.starts_with("vllm/_flashmla") && n.ends_with(".so"))
            .collect();
        assert!(flashmla.len() >= 2, "vllm {version}: {flashmla:?}");
        let v = Version::from_str(version).unwrap();
        for value in ["FLASHMLA", "FLASHMLA_SPARSE"] {
            let b = vllm
                .backends
                .iter()
                .find(|b| b.value == value && b.serves.versions_spec.as_ref().is_none_or(|s| s.contains(&v)))
                .unwrap_or_else(|| panic!("vllm {version}: no {value} backend"));
            let served = b.binaries.as_ref().unwrap();
            for f in &flashmla {
                assert!(
                    served.names(f),
                    "vllm {version} {value}: {f} is not among {:?}",
                    served.files
                );
            }
        }
    }
}
