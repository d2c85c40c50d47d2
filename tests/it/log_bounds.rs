//! Build output is bounded (issue 23 F10): a build that prints a 300 MB line and then 100 MB
//! of lines leaves a step log of its first 64 MiB and last 16 MiB with what was left out said,
//! and kiln's memory stays far below the size of the line.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{World, text};

/// Runs `cmd` with its output in files under `dir` and samples kiln's own high-water mark
/// (`VmHWM` in /proc/PID/status, proc(5)) until it exits. The children kiln runs (uv, the
/// build's python) are not counted: the bound is on what kiln itself holds while it reads
/// their output, and the largest child differs with the machine and its load. `VmHWM` only
/// grows, so the last sample before exit is the peak. Returns (success, stdout, stderr, peak).
fn run_measured(mut cmd: Command, dir: &Path) -> (bool, Vec<u8>, Vec<u8>, u64) {
    let (o, e) = (dir.join("kiln.stdout"), dir.join("kiln.stderr"));
    cmd.stdout(std::fs::File::create(&o).unwrap());
    cmd.stderr(std::fs::File::create(&e).unwrap());
    let mut child = cmd.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            let kib = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak = peak.max(kib.unwrap_or(0) * 1024);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(peak > 0, "no VmHWM read from {status_file}");
    (
        status.success(),
        std::fs::read(o).unwrap(),
        std::fs::read(e).unwrap(),
        peak,
    )
}

#[test]
fn a_build_that_prints_without_end_leaves_a_log_of_head_and_tail_and_kiln_stays_small() {
    let w = World::new();
    let p = w.recipes.join("fixture-pure.toml");
    let mut recipe = std::fs::read_to_string(&p).unwrap();
    let script = "import sys; o = sys.stdout; o.write('first-line\\n'); \
                  [o.write('x' * 1000000) for _ in range(300)]; o.write('\\n'); \
                  line = 'y' * 99 + '\\n'; [o.write(line * 10000) for _ in range(100)]; \
                  o.write('the-last-line-of-output\\n')";
    recipe.push_str(&format!(
        "\n[build]\nprepare = [[\"{{python}}\", \"-c\", \"{}\"]]\n",
        script.replace('\\', "\\\\").replace('"', "\\\"")
    ));
    std::fs::write(&p, recipe).unwrap();
    let mut cmd = w.kiln_std();
    cmd.args(["install", "--json", "fixture-pure"]);
    let (ok, stdout, stderr, rss) = run_measured(cmd, w.dir.path());
    assert!(ok, "{}", text(&stderr));
    let json: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let logs = PathBuf::from(json["logs"].as_str().unwrap().to_string());
    let log = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::read(p).is_ok_and(|b| b.windows(10).any(|w| w == b"first-line")))
        .expect("a step log with the build's output");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < (64 + 16 + 4) << 20, "{}: {size} bytes", log.display());
    let bytes = std::fs::read(&log).unwrap();
    let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(has("bytes of this line left out]"), "the long line says it was cut");
    assert!(has("bytes of output left out here"), "the log says what it left out");
    assert!(has("the-last-line-of-output"), "the tail is kept");
    assert!(rss < 128 << 20, "kiln took {} MiB", rss >> 20);
}
