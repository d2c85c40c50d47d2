//! A wheel's large shared objects are judged from a stream: only their ELF headers, section
//! names, dynamic section and fatbin headers are kept (`kiln::fatbin::sparse`), and what kiln
//! finds is exactly what it finds reading the same file whole. The library is built here by
//! NVIDIA's CUDA 13 compiler from PyPI, for sm_90 and sm_120 and PTX, linked against the shared
//! CUDA runtime, with 40 MiB of other data beside it so that it is over the streaming bound.

use std::io::Write;
use std::path::Path;
use std::process::Command as StdCommand;

use crate::common::{cuda, kiln_bare, stdout_json, text};

/// A shared object over [`kiln::probe::wheel::WHOLE_UP_TO`]: the fixture kernel and 40 MiB of
/// constant data (a `.rodata` that is neither a fatbin nor zeros, which the stream scans).
fn big_library(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/scale.cu");
    let pad = dir.join("pad.c");
    std::fs::write(
        &pad,
        "const unsigned char kiln_pad[40 << 20] = {1, 2, 3};\nconst unsigned char *kiln_pad_at(void) { return kiln_pad; }\n",
    )
    .unwrap();
    let out = dir.join("_big.so");
    let run = StdCommand::new(cuda().join("bin/nvcc"))
        .current_dir(dir)
        .args(["-shared", "-Xcompiler", "-fPIC", "-cudart", "none"])
        .arg(&src)
        .arg(&pad)
        .args(["-o", "_big.so"])
        // The shared runtime as wheels link it (the PyPI runtime has no unversioned name).
        .arg(format!("-L{}", cuda().join("lib").display()))
        .args(["-Xlinker", "-l:libcudart.so.13"])
        .args(["-gencode", "arch=compute_90,code=sm_90"])
        .args(["-gencode", "arch=compute_120,code=[sm_120,compute_120]"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    assert!(std::fs::metadata(&out).unwrap().len() > kiln::probe::wheel::WHOLE_UP_TO);
    out
}

/// A wheel holding `so` as `pkg/_big.so` (deflated, as wheels are) and its METADATA.
fn wheel_of(dir: &Path, so: &Path) -> std::path::PathBuf {
    let path = dir.join("pkg-1.0-cp312-cp312-linux_x86_64.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let deflated = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("pkg/_big.so", deflated).unwrap();
    zip.write_all(&std::fs::read(so).unwrap()).unwrap();
    zip.start_file("pkg-1.0.dist-info/METADATA", deflated).unwrap();
    zip.write_all(b"Metadata-Version: 2.4\nName: pkg\nVersion: 1.0\nRequires-Dist: torch==2.11.0\n\n")
        .unwrap();
    zip.finish().unwrap();
    path
}

#[test]
fn a_large_library_in_a_wheel_is_judged_from_its_headers_as_if_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let so = big_library(dir.path());
    let whole = kiln::fatbin::read_file(&so).unwrap();
    let data = std::fs::read(&so).unwrap();
    let wheel = wheel_of(dir.path(), &so);

    let facts = kiln::probe::wheel::read(&wheel).unwrap();
    assert!(facts.unreadable.is_empty(), "{:?}", facts.unreadable);
    assert_eq!(facts.cuda.len(), 1);
    let (path, streamed) = &facts.cuda[0];
    assert_eq!(path, "pkg/_big.so");
    assert_eq!(streamed.sass, ["sm_90", "sm_120"]);
    assert_eq!(streamed.ptx, ["compute_120"]);
    // The same fatbins, at the same offsets, with the same images, as read whole.
    assert_eq!(
        serde_json::to_value(&streamed.fatbins).unwrap(),
        serde_json::to_value(&whole.fatbins).unwrap()
    );
    assert_eq!(facts.cudart, Some(13));
    assert_eq!(facts.cudart, kiln::probe::binaries::cudart_major(&data[..]));
    assert_eq!(facts.needed["pkg/_big.so"], kiln::probe::needed::needed(&data[..]));
    assert!(
        facts.needed["pkg/_big.so"]
            .iter()
            .any(|n| n.starts_with("libcudart.so.13"))
    );
    assert_eq!(facts.requires, ["torch==2.11.0"]);
    // All of it was streamed, once (a second pass counts twice); what was kept is its first 16 MiB and the 4 MiB before its
    // section table (whole) and the headers between, not the 40 MiB of data in the middle.
    assert_eq!(facts.bytes_read, data.len() as u64);
    assert!(
        facts.bytes_kept < 21 << 20,
        "kept {} of {} bytes",
        facts.bytes_kept,
        data.len()
    );

    // `kiln arch` reads the wheel the same way: the member, and that it runs on 12.0.
    let out = kiln_bare()
        .args(["arch", "--json", "--arch", "12.0", "--driver-cuda", "13.0"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let file = &v["files"][0];
    assert_eq!(file["path"], format!("{}:pkg/_big.so", wheel.display()), "{v}");
    assert_eq!(file["sass"], serde_json::json!(["sm_90", "sm_120"]));
    assert_eq!(file["runs_on"][0]["usable"], true, "{v}");
}

/// A wheel's facts are kept by its sha256: the second read answers from the record, and a record
/// another reader wrote (another kiln) is read again, not trusted.
#[test]
fn wheel_facts_are_kept_by_sha256_and_a_foreign_record_is_read_again() {
    use kiln::probe::wheel_cache::{Source, path, read};
    let dir = tempfile::tempdir().unwrap();
    let wheel = dir.path().join("pure-1.0-py3-none-any.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
    zip.start_file("pure-1.0.dist-info/METADATA", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(b"Metadata-Version: 2.4\nName: pure\nVersion: 1.0\nRequires-Dist: numpy>=2\n\n")
        .unwrap();
    zip.finish().unwrap();
    let cache = dir.path().join("cache");
    let sha = "ab".repeat(32);

    let (facts, source) = read(&cache, &wheel, &sha).unwrap();
    assert_eq!(
        (source, facts.requires.as_slice()),
        (Source::Read, &["numpy>=2".to_string()][..])
    );
    let record = path(&cache, &sha);
    assert!(record.is_file());
    let (again, source) = read(&cache, &wheel, &sha).unwrap();
    assert_eq!((source, again.requires), (Source::Cached, facts.requires.clone()));

    // The same record under another reader's name is not trusted.
    let text = std::fs::read_to_string(&record).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["reader"] = "kiln 0.0.1 wheel-facts 0".into();
    v["facts"]["requires"] = serde_json::json!(["a-lie"]);
    std::fs::write(&record, v.to_string()).unwrap();
    let (fresh, source) = read(&cache, &wheel, &sha).unwrap();
    assert_eq!((source, fresh.requires), (Source::Read, facts.requires));
}

/// This test's own executable (a large ELF file with symbols and debug info, no fatbins):
/// the libraries it links read the same from what was kept as from the whole file, and
/// what was kept is a small part of it.
#[test]
fn the_dynamic_section_reads_the_same_from_what_was_kept() {
    let exe = std::env::current_exe().unwrap();
    let whole = std::fs::read(&exe).unwrap();
    let kept = kiln::fatbin::sparse::capture(|| std::fs::File::open(&exe), whole.len() as u64).unwrap();
    let needed = kiln::probe::needed::needed(&kept);
    assert!(!needed.is_empty());
    assert_eq!(needed, kiln::probe::needed::needed(&whole[..]));
    assert!(
        kept.kept() < whole.len() as u64 / 4,
        "kept {} of {}",
        kept.kept(),
        whole.len()
    );
    let report = kiln::fatbin::read_sparse(&kept, "exe").unwrap();
    assert_eq!(
        report.fatbins.len(),
        kiln::fatbin::read_bytes(&whole, "exe").unwrap().fatbins.len()
    );
}

/// The second pass, where the first did not suffice, gives the same.
#[test]
fn the_second_pass_reads_the_same_as_the_first() {
    let exe = std::env::current_exe().unwrap();
    let whole = std::fs::read(&exe).unwrap();
    let open = || std::fs::File::open(&exe).unwrap();
    let kept = kiln::fatbin::sparse::Capture::first(whole.len() as u64, open())
        .unwrap()
        .second(open())
        .unwrap();
    assert_eq!(
        kiln::probe::needed::needed(&kept),
        kiln::probe::needed::needed(&whole[..])
    );
    assert!(kiln::fatbin::read_sparse(&kept, "exe").is_ok());
    assert!(kept.kept() < 16 << 20, "kept {}", kept.kept());
}
