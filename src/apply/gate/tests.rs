use std::ffi::OsString;
use std::path::Path;

use super::*;

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn a_unit_is_its_source_file_within_the_source_tree() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("csrc").join("k_hdim64.cu");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "").unwrap();
    let f = file.display().to_string();
    // torch's ninja rule: flags, -c, the source, -o, then more flags.
    let args = os(&[
        "--use_fast_math",
        "-c",
        &f,
        "-o",
        "k.o",
        "-gencode",
        "arch=compute_90,code=sm_90",
    ]);
    assert_eq!(unit_of(&args, src.path()).as_deref(), Some("csrc/k_hdim64.cu"));
    // CMake's: the source last, after -c -x cu.
    let args = os(&["-x", "cu", "-c", "-o", "k.o", &f]);
    assert_eq!(unit_of(&args, src.path()).as_deref(), Some("csrc/k_hdim64.cu"));
    // Outside the tree: the path as given. A link: no unit.
    let elsewhere = unit_of(&os(&["-c", "/tmp/gen/x.cu"]), src.path());
    assert_eq!(elsewhere.as_deref(), Some("/tmp/gen/x.cu"));
    assert_eq!(unit_of(&os(&["-shared", "a.o", "b.o", "-o", "x.so"]), src.path()), None);
}

/// A "compiler" that holds `mib` MiB for a moment: a real process tree (sh, then python).
fn hog(src: &Path, name: &str, mib: u32) -> Vec<OsString> {
    let file = src.join(name);
    std::fs::write(&file, "").unwrap();
    let script = format!("python3 -c 'import time; b = bytearray({mib} << 20); time.sleep(0.8)'");
    os(&["sh", "-c", &script, "-c", &file.display().to_string()])
}

#[test]
fn the_gate_runs_the_compile_and_keeps_what_its_tree_took() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let config = Config {
        limit: Some(1 << 40),
        unmeasured: None,
        units: Default::default(),
        src: src.clone(),
    };
    std::fs::write(dir.path().join(CONFIG), serde_json::to_vec(&config).unwrap()).unwrap();
    let ended = run(&hog(&src, "big.cu", 96), Some(dir.path()), &mut |_| {}).unwrap();
    assert_eq!(ended, CompilerExit::Code(0));
    let failing = os(&["sh", "-c", "exit 3", "-c", &src.join("big.cu").display().to_string()]);
    assert_eq!(
        run(&failing, Some(dir.path()), &mut |_| {}).unwrap(),
        CompilerExit::Code(3)
    );
    let lines: Vec<UnitRun> = std::fs::read_to_string(dir.path().join(MEASURED))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!((lines[0].unit.as_str(), lines[0].ok), ("big.cu", true));
    assert!(lines[0].peak >= 96 << 20, "{lines:?}");
    assert!(lines[0].seconds >= 0.8, "{lines:?}");
    assert!(!lines[1].ok);
    assert!(lines[1].start >= lines[0].start + lines[0].seconds - 0.01, "{lines:?}");
    // Outside a build: the command runs, nothing is kept.
    let plain = run(&os(&["sh", "-c", "kill -TERM $$"]), None, &mut |_| {}).unwrap();
    assert_eq!(plain, CompilerExit::Signal(15));
    assert!(
        run(&os(&["/no/such/compiler"]), None, &mut |_| {})
            .unwrap_err()
            .contains("cannot run")
    );
}

#[test]
fn two_compilers_at_once_count_together_and_a_gate_that_cannot_work_says_so_and_compiles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let file = src.join("twice.cu");
    std::fs::write(&file, "").unwrap();
    // No config yet: said, and the command runs.
    let mut notices = Vec::new();
    let ok = os(&["sh", "-c", "exit 0", "-c", &file.display().to_string()]);
    assert_eq!(
        run(&ok, Some(dir.path()), &mut |n| notices.push(n)).unwrap(),
        CompilerExit::Code(0)
    );
    assert!(
        matches!(&notices[..], [Notice::Ungated(why)] if why.contains("gate.json")),
        "{notices:?}"
    );
    let config = Config {
        limit: None,
        unmeasured: None,
        units: Default::default(),
        src: src.clone(),
    };
    std::fs::write(dir.path().join(CONFIG), serde_json::to_vec(&config).unwrap()).unwrap();
    // Two processes of 64 MiB at once (as nvcc --threads 2 runs two cicc): the unit took their
    // sum, which no single process's own peak shows.
    let hog = "python3 -c 'import time; b = bytearray(64 << 20); time.sleep(1.5)'";
    let both = format!("{hog} & {hog}; wait");
    run(
        &os(&["sh", "-c", &both, "-c", &file.display().to_string()]),
        Some(dir.path()),
        &mut |_| {},
    )
    .unwrap();
    let line: UnitRun =
        serde_json::from_str(std::fs::read_to_string(dir.path().join(MEASURED)).unwrap().trim()).unwrap();
    assert_eq!(line.unit, "twice.cu");
    assert!(line.peak >= 128 << 20, "{line:?}");
    // CMake's own checks are neither gated nor kept.
    let check = src.join("CMakeFiles/CMakeScratch/TryCompile-x/main.cu");
    std::fs::create_dir_all(check.parent().unwrap()).unwrap();
    std::fs::write(&check, "").unwrap();
    run(
        &os(&["sh", "-c", "exit 0", "-c", &check.display().to_string()]),
        Some(dir.path()),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(MEASURED))
            .unwrap()
            .lines()
            .count(),
        1
    );
}

#[test]
fn each_attempt_opens_the_gate_afresh_and_a_retry_with_fewer_jobs_gets_less_memory() {
    let vars = crate::recipe::template::Vars {
        python: "python3".into(),
        src: String::new(),
        wheel_dir: String::new(),
        jobs: 4,
        version: "1.0".into(),
        cuda_home: None,
        cuda_version: None,
        archs: Vec::new(),
    };
    let mut spec = crate::resolve::spec::BuildSpec::new(&crate::recipe::Build::default(), &vars).unwrap();
    let (cache, dir, src) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        Path::new("/s"),
    );
    // No nvcc: no gate.
    assert_eq!(open(dir.path(), cache.path(), &spec, 4, src), None);
    spec.nvcc = Some("/cuda/bin/nvcc".into());
    spec.memory_limit = Some(12 << 30);
    spec.memory_per_job = Some(3 << 30);
    spec.memory_key = "x@9.0".into();
    std::fs::write(dir.path().join(MEASURED), "left by the last attempt\n").unwrap();
    std::fs::write(dir.path().join(slots::TABLE), "{}").unwrap();
    // The retry after an OOM kill runs 2 of the planned 4 jobs: half the memory.
    let (kiln, at) = open(dir.path(), cache.path(), &spec, 2, src).unwrap();
    assert_eq!(kiln, std::env::current_exe().unwrap().display().to_string());
    assert_eq!(at, dir.path().display().to_string());
    let config: Config = serde_json::from_slice(&std::fs::read(dir.path().join(CONFIG)).unwrap()).unwrap();
    assert_eq!(config.limit, Some(6 << 30));
    assert_eq!(
        config.unmeasured,
        Some(3 << 30),
        "no unit measured: the plan's figure per job"
    );
    assert!(!dir.path().join(MEASURED).exists() && !dir.path().join(slots::TABLE).exists());
}
