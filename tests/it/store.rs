//! The store's entries are bound to what they are for (issue 23 F1, F17): a bundle may add a
//! wheel-cache entry only when its contents match its key, an entry already in the cache is
//! checked against its key's distribution, version, METADATA and RECORD each time it is taken,
//! and one without its sha256 record is never trusted on first use.

use std::path::{Path, PathBuf};

use crate::common::{World, pip_wheel, sh, text, venv};

/// Every wheel-cache entry of `cache` (its directory) with its `key.json`.
fn entries(cache: &Path) -> Vec<(PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(cache.join("wheels")).into_iter().flatten().flatten() {
        for e in std::fs::read_dir(shard.path()).into_iter().flatten().flatten() {
            let key = std::fs::read_to_string(e.path().join("key.json")).unwrap_or_default();
            if let Ok(v) = serde_json::from_str(&key) {
                out.push((e.path(), v));
            }
        }
    }
    out
}

fn entry_of(cache: &Path, component: &str) -> Option<(PathBuf, serde_json::Value)> {
    entries(cache).into_iter().find(|(_, v)| v["component"] == component)
}

fn sha256(path: &Path) -> String {
    sh(path.parent().unwrap(), &["sha256sum", path.to_str().unwrap()])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn quarantined(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("quarantine")).map_or(0, |d| d.count())
}

/// A real wheel of the distribution `kiln-fixture-pure` 1.0.0 (another component) that carries
/// `kiln_fixture_cext` and its `_speedups` module, whose import writes `marker`: what a hostile
/// bundle plants under fixture-cext's key.
fn planted_wheel(w: &World, marker: &Path) -> PathBuf {
    let pkg = w.dir.path().join("planted-src");
    std::fs::create_dir_all(pkg.join("kiln_fixture_cext")).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
         [project]\nname = \"kiln-fixture-pure\"\nversion = \"1.0.0\"\n[tool.setuptools]\npackages = [\"kiln_fixture_cext\"]\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("kiln_fixture_cext/__init__.py"),
        format!(
            "open({:?}, 'w').write('the planted code ran')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join("kiln_fixture_cext/_speedups.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    let out = w.dir.path().join("planted-wheel");
    let built = pip_wheel(&w.python, &pkg, &out).output().unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));
    out.join("kiln_fixture_pure-1.0.0-py3-none-any.whl")
}

/// Writes a wheel-cache entry `wheels/<xx>/<key>` holding `wheel` under `root`, with its record
/// and `key.json` as kiln writes them.
fn plant(root: &Path, key: &str, inputs: &serde_json::Value, wheel: &Path) -> PathBuf {
    let dir = root.join("wheels").join(&key[..2]).join(key);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(wheel, dir.join(wheel.file_name().unwrap())).unwrap();
    std::fs::write(dir.join("wheel.sha256"), sha256(wheel)).unwrap();
    std::fs::write(dir.join("key.json"), serde_json::to_string_pretty(inputs).unwrap()).unwrap();
    dir
}

#[test]
fn a_bundle_cannot_plant_a_wheel_under_another_components_key_nor_can_an_entry_that_is_there() {
    let w = World::new();
    w.git_pure();
    w.install_ok("fixture-pure");
    let lockfile = w.lock("fixture-pure");
    let (bundle, out) = w.bundle(&lockfile, "stack.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));

    // fixture-cext's key on a node like this one: built once in a scratch venv and cache.
    let scratch = w.dir.path().join("scratch-cache");
    let out = w
        .kiln_elsewhere(&venv(&w.dir.path().join("scratch")), &scratch)
        .args(["install", "fixture-cext"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (cext_entry, cext_inputs) = entry_of(&scratch, "fixture-cext").expect("fixture-cext's entry");
    let cext_key = cext_entry.file_name().unwrap().to_str().unwrap().to_string();

    // The hostile bundle: its lock names the planted wheel as fixture-pure's, and the wheel is
    // filed under fixture-cext's key with a record and key.json that agree with it.
    let marker = w.dir.path().join("planted-ran");
    let planted = planted_wheel(&w, &marker);
    let unpacked = w.dir.path().join("hostile");
    std::fs::create_dir_all(&unpacked).unwrap();
    sh(&unpacked, &["tar", "-xf", bundle.to_str().unwrap()]);
    std::fs::remove_dir_all(unpacked.join("wheels")).unwrap();
    plant(&unpacked, &cext_key, &cext_inputs, &planted);
    let lock = std::fs::read_to_string(unpacked.join("kiln.lock")).unwrap();
    let at = lock
        .find("wheel_sha256 = \"")
        .expect("the lock names fixture-pure's wheel")
        + 16;
    let lock = format!("{}{}{}", &lock[..at], sha256(&planted), &lock[at + 64..]);
    std::fs::write(unpacked.join("kiln.lock"), lock).unwrap();
    let hostile = w.dir.path().join("hostile.tar");
    sh(&unpacked, &["sh", "-c", &format!("tar -cf {} *", hostile.display())]);

    let node = venv(&w.dir.path().join("node"));
    let node_cache = w.dir.path().join("node-cache");
    let out = w
        .kiln_elsewhere(&node, &node_cache)
        .args(["install", "--bundle"])
        .arg(&hostile)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the bundle was accepted: {}{err}",
        text(&out.stdout)
    );
    assert!(err.contains(&format!("wheels/{}/{cext_key}", &cext_key[..2])), "{err}");
    assert!(err.contains("holds the wheel the lock names for fixture-pure"), "{err}");
    assert!(err.contains("but its key is for fixture-cext"), "{err}");
    assert!(entries(&node_cache).is_empty(), "an entry came in: {err}");
    assert!(
        w.kiln_elsewhere(&node, &node_cache)
            .args(["install", "fixture-cext"])
            .output()
            .unwrap()
            .status
            .success()
    );
    assert!(!marker.exists(), "the planted code ran");

    // The same entry already in a cache (an older kiln let it in): refused when taken, moved
    // aside, never installed.
    let other = venv(&w.dir.path().join("other"));
    let other_cache = w.dir.path().join("other-cache");
    plant(&other_cache, &cext_key, &cext_inputs, &planted);
    let out = w
        .kiln_elsewhere(&other, &other_cache)
        .args(["install", "fixture-cext"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{err}", text(&out.stdout));
    assert!(
        err.contains("is not the wheel of kiln-fixture-cext 1.0.0 its key names"),
        "{err}"
    );
    assert!(err.contains("not of `kiln-fixture-cext`"), "{err}");
    assert!(!marker.exists(), "the planted code ran");
    assert_eq!(quarantined(&other_cache), 1, "{err}");
    // The next run builds it from its source.
    let out = w
        .kiln_elsewhere(&other, &other_cache)
        .args(["install", "fixture-cext"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!marker.exists(), "the planted code ran");
}

/// Rewrites a wheel so that `greet` says "tampered": still a wheel pip installs.
fn tamper(wheel: &Path) {
    sh(
        wheel.parent().unwrap(),
        &[
            "python3",
            "-c",
            "import sys, zipfile\n\
             src = sys.argv[1]\n\
             with zipfile.ZipFile(src) as a:\n\
             \x20   items = [(i, a.read(i.filename)) for i in a.infolist()]\n\
             with zipfile.ZipFile(src, 'w') as b:\n\
             \x20   for i, data in items:\n\
             \x20       if i.filename.endswith('words.py'):\n\
             \x20           data = b'def greet(name):\\n    return \"tampered, \" + name\\n'\n\
             \x20       b.writestr(i, data)",
            wheel.to_str().unwrap(),
        ],
    );
}

fn greeting(python: &Path) -> Result<String, String> {
    let out = std::process::Command::new(python)
        .args(["-c", "from kiln_fixture_pure import greet; print(greet('x'))"])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(text(&out.stdout).trim().to_string())
    } else {
        Err(text(&out.stderr))
    }
}

#[test]
fn an_entry_without_its_record_is_refused_not_trusted_on_first_use() {
    let w = World::new();
    w.install_ok("fixture-pure");
    let (entry, _) = entry_of(&w.cache, "fixture-pure").expect("fixture-pure's entry");
    let wheel = std::fs::read_dir(&entry)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap();
    std::fs::remove_file(entry.join("wheel.sha256")).unwrap();
    tamper(&wheel);

    let node = venv(&w.dir.path().join("node"));
    let out = w.kiln_for(&node).args(["install", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}{err}", text(&out.stdout));
    assert!(err.contains("has no record of its sha256 (wheel.sha256)"), "{err}");
    assert!(err.contains("was moved aside to"), "{err}");
    assert!(greeting(&node).is_err(), "the changed wheel was installed");
    assert_eq!(quarantined(&w.cache), 1, "{err}");
    assert!(!entry.exists());
    // The next run builds it again: the wheel the source makes.
    let out = w.kiln_for(&node).args(["install", "fixture-pure"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(greeting(&node).unwrap(), "hello, x");
    assert!(entry.join("wheel.sha256").is_file());
}

#[test]
fn cache_clean_while_another_kiln_verifies_leaves_what_that_kiln_holds() {
    use crate::crash::{kill, pending_2_0_0, spawn, version, wait_for};
    let (w, hooks) = pending_2_0_0();
    let mark = hooks.join("importing");
    let env = [
        ("HOOK_DIR", hooks.to_str().unwrap()),
        ("HOOK_IMPORT_MARK", mark.to_str().unwrap()),
    ];
    let mut kiln = spawn(&w, &w.python, &env, &["install", "fixture-pure"]);
    wait_for(&mark, &mut kiln);

    // kiln verifies 2.0.0 (its backup of 1.0.0 in the cache): a clean of everything skips what
    // it holds, and says so.
    let out = w.kiln().args(["cache", "clean", "--all"]).output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(said.contains("skipped work/fixture-pure-"), "{said}");
    assert!(
        said.contains("needs it to put an environment back")
            || said.contains(&format!("a live kiln holds it: pid {}", kiln.id())),
        "{said}"
    );
    let work: Vec<_> = std::fs::read_dir(w.cache.join("work")).unwrap().flatten().collect();
    assert_eq!(work.len(), 1, "{said}");

    // Interrupted, that kiln puts the environment back from its backup.
    kill(&mut kiln, "-INT");
    let out = kiln.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(!err.contains("RESTORE FAILED"), "{err}");
    assert!(err.contains("the previous kiln-fixture-pure was restored"), "{err}");
    assert_eq!(version(&w), "1.0.0");

    // With no kiln left, a clean removes the rest and skips nothing.
    let out = w.kiln().args(["cache", "clean"]).output().unwrap();
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(!said.contains("skipped"), "{said}");
    assert_eq!(
        std::fs::read_dir(w.cache.join("work")).map_or(0, |d| d.count()),
        0,
        "{said}"
    );
}

#[test]
fn names_from_a_bundle_or_a_lock_are_escaped_in_messages() {
    let w = World::new();
    let python = w.py("import platform; print(platform.python_version())").unwrap();
    let lock = format!(
        "format = 1\n\n[environment]\npython = \"{python}\"\narchs = []\n\n[[component]]\nname = \"fixture-pure\"\nversion = \"1.0.0\"\nsource = \"installed\"\n"
    );
    // A bundle member whose name holds a newline, a terminal escape and a byte that is not UTF-8.
    let bundle = w.dir.path().join("names.tar");
    sh(
        w.dir.path(),
        &[
            "python3",
            "-c",
            "import io, sys, tarfile\n\
             with tarfile.open(sys.argv[1], 'w', format=tarfile.GNU_FORMAT, encoding='utf-8', errors='surrogateescape') as t:\n\
             \x20   for name, data in [('kiln.lock', sys.argv[2].encode()), ('sources/evil\\nkiln: installed\\x1b[2J\\udcff', b'x')]:\n\
             \x20       m = tarfile.TarInfo(name)\n\
             \x20       m.size = len(data)\n\
             \x20       t.addfile(m, io.BytesIO(data))",
            bundle.to_str().unwrap(),
            &lock,
        ],
    );
    let out = w.kiln().args(["install", "--bundle"]).arg(&bundle).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("sources/evil\\nkiln: installed\\u{1b}[2J\\xff"), "{err}");
    assert!(!out.stderr.contains(&0x1b), "a raw escape reached the terminal: {err}");
    assert!(
        !err.lines().any(|l| l.starts_with("kiln: installed")),
        "a faked line: {err}"
    );

    // A lock value of the wrong shape is shown escaped at its line.
    let hostile = w.dir.path().join("hostile.lock");
    std::fs::write(
        &hostile,
        lock.replace("version = \"1.0.0\"", "version = \"1.0\\n\\u001b[2Jok\""),
    )
    .unwrap();
    let out = w
        .kiln()
        .args(["install", "--locked", "--lock"])
        .arg(&hostile)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`1.0\\n\\u{1b}[2Jok` is not a version"), "{err}");
    assert!(!out.stderr.contains(&0x1b), "a raw escape reached the terminal: {err}");
}

/// An `aot/<key>` entry of a bundle as `kiln install --aot` files one: its manifest and one
/// module file, keyed as kiln keys it unless `key` is given.
fn plant_aot(root: &Path, component: &str, version: &str, install: &str, key: Option<&str>) -> String {
    let manifest = serde_json::json!({
        "base": "b1", "component": component, "version": version, "archs": ["12.0"],
        "toolkit": "13.0.88", "host_compiler": null,
        "modules": [{"module": "m", "name": "m", "install": install}],
    });
    let parsed: kiln::store::aot::Manifest = serde_json::from_value(manifest.clone()).unwrap();
    let key = key.map_or_else(|| parsed.key(), str::to_string);
    let dir = root.join("aot").join(&key);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    // The module's file as kiln would file it; one whose path leaves the entry is kept inside
    // (this test must not write outside its own directory either).
    let inside = !install.split('/').any(|p| p == "..") && !install.starts_with('/');
    let file = dir.join("files").join(if inside { install } else { "escape.so" });
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "module").unwrap();
    key
}

/// A hostile bundle's case: its name, how it edits the unpacked bundle, what kiln must say.
type Case<'a> = (&'a str, Box<dyn Fn(&Path) + 'a>, &'a str);

/// A real wheel of `dist` `version` (one empty module), built by pip.
fn wheel_of(w: &World, dist: &str, version: &str) -> PathBuf {
    let module = dist.replace('-', "_");
    let pkg = w.dir.path().join(format!("src-{module}-{version}"));
    std::fs::create_dir_all(pkg.join(&module)).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        format!(
            "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
             [project]\nname = \"{dist}\"\nversion = \"{version}\"\n[tool.setuptools]\npackages = [\"{module}\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(pkg.join(&module).join("__init__.py"), "").unwrap();
    let out = w.dir.path().join(format!("wheel-{module}-{version}"));
    let built = pip_wheel(&w.python, &pkg, &out).output().unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));
    out.join(format!("{module}-{version}-py3-none-any.whl"))
}

/// A bundle's compiled-module entries are bound like its wheels (issue 23, item 1): an entry
/// whose module would be copied outside site-packages (`install` is joined to site-packages
/// and written), filed under another key than its manifest hashes to, for a component or
/// version its lock does not name, or holding a file its manifest does not name, is refused
/// before anything moves into the cache, moved aside and never used; a well-formed one for a
/// locked component comes in. Its wheelhouse, which later offline installs share, may hold
/// no wheel that is not what its file name says, and no version of a locked component other
/// than the locked one; a wheel of a component the lock does not name is a dependency (SGLang
/// 0.5.11's flash-attn-4 4.0.0b15, which refused the real bundle) and comes in.
#[test]
fn a_bundle_cannot_plant_a_compiled_module_or_a_component_wheel_outside_its_key_and_lock() {
    let w = World::new();
    w.git_pure();
    w.install_ok("fixture-pure");
    let lockfile = w.lock("fixture-pure");
    let (bundle, out) = w.bundle(&lockfile, "stack.tar");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lock = kiln::lock::read(&lockfile).unwrap();
    let version = lock
        .components
        .iter()
        .find(|c| c.name == "fixture-pure")
        .unwrap()
        .version
        .clone();
    let escaped = w.dir.path().join("escaped");
    let install = |case: &str, edit: &dyn Fn(&Path)| {
        let unpacked = w.dir.path().join(format!("hostile-{case}"));
        std::fs::create_dir_all(&unpacked).unwrap();
        sh(&unpacked, &["tar", "-xf", bundle.to_str().unwrap()]);
        edit(&unpacked);
        let tar = w.dir.path().join(format!("hostile-{case}.tar"));
        sh(&unpacked, &["sh", "-c", &format!("tar -cf {} *", tar.display())]);
        let node = venv(&w.dir.path().join(format!("node-{case}")));
        let cache = w.dir.path().join(format!("node-cache-{case}"));
        let out = w
            .kiln_elsewhere(&node, &cache)
            .args(["install", "--bundle"])
            .arg(&tar)
            .output()
            .unwrap();
        (out, cache)
    };
    let outside = format!("../../../../../../..{}", escaped.display());
    let disguised = wheel_of(&w, "kiln-fixture-pure", "1.0.0");
    let other_version = wheel_of(&w, "kiln-fixture-pure", "9.0.0");
    let house = |d: &Path, wheel: &Path, name: &str| {
        std::fs::create_dir_all(d.join("wheelhouse")).unwrap();
        std::fs::copy(wheel, d.join("wheelhouse").join(name)).unwrap();
    };
    let locked_other =
        format!("which kiln installs as its component fixture-pure: the lock names fixture-pure {version}");
    let house_cases: [Case; 2] = [
        (
            "house-disguise",
            Box::new(|d: &Path| house(d, &disguised, "requests-2.31.0-py3-none-any.whl")),
            "is not what its name says: it is a wheel of `kiln-fixture-pure`, not of `requests`",
        ),
        (
            "house-component",
            Box::new(|d: &Path| house(d, &other_version, "kiln_fixture_pure-9.0.0-py3-none-any.whl")),
            &locked_other,
        ),
    ];
    for (case, edit, says) in house_cases {
        let (out, cache) = install(case, &*edit);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{case}: accepted: {}{err}",
            text(&out.stdout)
        );
        assert!(err.contains("its wheelhouse wheel `wheelhouse/"), "{case}: {err}");
        assert!(err.contains(says), "{case}: {err}");
        assert!(!cache.join("wheelhouse").exists(), "{case}: a wheel came in");
    }
    // A component the lock does not name: a dependency, taken as third-party.
    let dependency = wheel_of(&w, "kiln-fixture-cext", "9.0.0");
    let (out, cache) = install("house-dependency", &|d: &Path| {
        house(d, &dependency, "kiln_fixture_cext-9.0.0-py3-none-any.whl")
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        cache
            .join("wheelhouse")
            .join("kiln_fixture_cext-9.0.0-py3-none-any.whl")
            .is_file()
    );
    let cases: [Case; 4] = [
        (
            "leaves",
            Box::new(|d: &Path| {
                plant_aot(d, "fixture-pure", &version, &outside, None);
            }),
            "outside site-packages",
        ),
        (
            "key",
            Box::new(|d: &Path| {
                plant_aot(
                    d,
                    "fixture-pure",
                    &version,
                    "kiln_fixture_pure/m.so",
                    Some(&"ab".repeat(16)),
                );
            }),
            "is filed under a key its manifest does not hash to",
        ),
        (
            "component",
            Box::new(|d: &Path| {
                plant_aot(d, "fixture-cext", &version, "kiln_fixture_cext/m.so", None);
            }),
            "is for fixture-cext",
        ),
        (
            "extra",
            Box::new(|d: &Path| {
                let key = plant_aot(d, "fixture-pure", &version, "kiln_fixture_pure/m.so", None);
                std::fs::write(d.join("aot").join(key).join("files/sitecustomize.py"), "x").unwrap();
            }),
            "which its manifest does not name",
        ),
    ];
    for (case, edit, says) in cases {
        let (out, cache) = install(case, &*edit);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{case}: accepted: {}{err}",
            text(&out.stdout)
        );
        assert!(err.contains("its compiled-module entry `aot/"), "{case}: {err}");
        assert!(err.contains(says), "{case}: {err}");
        assert!(err.contains("moved aside"), "{case}: {err}");
        assert!(!cache.join("aot").exists(), "{case}: an entry came in");
        assert!(!escaped.exists(), "{case}: a file was written outside site-packages");
    }
    // A well-formed entry for the locked component comes in with the bundle.
    let (out, cache) = install("good", &|d: &Path| {
        let key = plant_aot(d, "fixture-pure", &version, "kiln_fixture_pure/m.so", None);
        assert!(!key.is_empty());
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_dir(cache.join("aot")).unwrap().count(), 1);
}
