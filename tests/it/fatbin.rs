//! `kiln arch` against NVIDIA's own cuobjdump, on kernels compiled here by NVIDIA's CUDA 13
//! compiler wheels from PyPI (no GPU needed): a matrix of targets, compression modes and link
//! styles. Each payload is also decompressed and checked (cubin ELF header, PTX `.target`).

use std::path::Path;
use std::process::Command as StdCommand;

use crate::common::{cuda, kiln_bare, stdout_json, text};

fn run(cmd: &mut StdCommand) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn nvcc(dir: &Path, args: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
    run(StdCommand::new(cuda().join("bin/nvcc"))
        .current_dir(dir)
        .env("KILN_SRC", &src)
        .args(args.iter().map(|a| a.replace("$SRC", &src.display().to_string()))));
}

/// nvcc `MODE` (`-c` or `--fatbin`) of the fixture kernel into `out`, for one `-gencode`.
fn axpy(dir: &Path, mode: &str, out: &str, gencode: &str) {
    nvcc(dir, &[mode, "$SRC/axpy.cu", "-o", out, "-gencode", gencode]);
}

/// cuobjdump's plain listing as sorted image names (`sm_120a`, `compute_120f@9.5`).
fn cuobjdump(file: &Path) -> Vec<String> {
    let out = StdCommand::new(cuda().join("bin/cuobjdump"))
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cuobjdump {}: {}",
        file.display(),
        text(&out.stderr)
    );
    let mut images = Vec::new();
    let mut kind = "";
    let mut arch = String::new();
    for line in text(&out.stdout).lines().map(str::trim) {
        if line == "Fatbin elf code:" {
            kind = "elf";
        } else if line == "Fatbin ptx code:" {
            kind = "ptx";
        } else if line.starts_with("Fatbin ") {
            kind = "";
        } else if let Some(a) = line.strip_prefix("arch = ") {
            arch = a.to_string();
        } else if let Some(v) = line.strip_prefix("code version = ") {
            let v = v.trim_matches(['[', ']']).replace(',', ".");
            match kind {
                "elf" => images.push(arch.clone()),
                "ptx" => images.push(format!("{}@{v}", arch.replace("sm_", "compute_"))),
                _ => {}
            }
        }
    }
    images.sort();
    images
}

/// kiln's listing, in the same shape, after checking each payload.
fn kiln(file: &Path) -> Vec<String> {
    let r = kiln::fatbin::read_file(file).unwrap();
    let data = std::fs::read(file).unwrap();
    let mut images = Vec::new();
    for f in &r.fatbins {
        for img in &f.images {
            kiln::fatbin::payload(&data, img).unwrap_or_else(|e| panic!("{} ({}): {e}", file.display(), f.section));
        }
    }
    for img in r.images() {
        let bytes = kiln::fatbin::payload(&data, img).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        match img.kind {
            kiln::fatbin::ImageKind::Cubin => {
                assert_eq!(&bytes[..4], b"\x7fELF", "{} {}", file.display(), img.name());
                assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190, "EM_CUDA");
                let flags = u32::from_le_bytes([bytes[48], bytes[49], bytes[50], bytes[51]]);
                let sm = if bytes[8] == 7 {
                    flags & 0xff
                } else {
                    (flags >> 8) & 0xff
                };
                assert_eq!(sm, img.sm, "{}: SM in the cubin's e_flags", file.display());
                images.push(img.name());
            }
            kiln::fatbin::ImageKind::Ptx => {
                let ptx = String::from_utf8_lossy(&bytes);
                let target = ptx
                    .lines()
                    .find_map(|l| l.trim().strip_prefix(".target "))
                    .unwrap_or("");
                assert_eq!(
                    target.split(',').next().unwrap().trim(),
                    img.name().replace("compute_", "sm_")
                );
                images.push(format!("{}@{}", img.name(), img.ptx_isa().unwrap()));
            }
        }
    }
    images.sort();
    images
}

#[test]
fn agrees_with_cuobjdump_on_a_matrix_of_real_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let ga = |a: &str, c: &str| format!("arch={a},code={c}");
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "plain.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "plain.o".into(),
                "-gencode".into(),
                ga("compute_90", "sm_90"),
                "-gencode".into(),
                ga("compute_120", "sm_120"),
            ],
        ),
        (
            "af.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "af.o".into(),
                "-gencode".into(),
                ga("compute_120a", "sm_120a"),
                "-gencode".into(),
                ga("compute_100f", "sm_100f"),
                "-gencode".into(),
                ga("compute_120f", "compute_120f"),
            ],
        ),
        (
            "ptx-only.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "ptx-only.o".into(),
                "-gencode".into(),
                ga("compute_120", "compute_120"),
            ],
        ),
        (
            "zstd-all.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "zstd-all.o".into(),
                "-Xfatbin".into(),
                "-compress-all".into(),
                "--compress-mode=size".into(),
                "-gencode".into(),
                ga("compute_90a", "sm_90a"),
                "-gencode".into(),
                ga("compute_121", "sm_121"),
            ],
        ),
        (
            "lz4-all.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "lz4-all.o".into(),
                "-Xfatbin".into(),
                "-compress-all".into(),
                "--compress-mode=speed".into(),
                "-gencode".into(),
                ga("compute_80", "sm_80"),
                "-gencode".into(),
                ga("compute_120", "sm_120"),
                "-gencode".into(),
                ga("compute_120", "compute_120"),
            ],
        ),
        (
            "none.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "none.o".into(),
                "--compress-mode=none".into(),
                "-gencode".into(),
                ga("compute_103", "sm_103"),
                "-gencode".into(),
                ga("compute_90", "compute_90"),
            ],
        ),
        (
            "concat.o",
            vec![
                "-c".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "concat.o".into(),
                "--concat".into(),
                "-Xfatbin".into(),
                "-compress-all".into(),
                "--compress-mode=size".into(),
                "-gencode".into(),
                ga("compute_90a", "sm_90a"),
                "-gencode".into(),
                ga("compute_100a", "sm_100a"),
                "-gencode".into(),
                ga("compute_103", "sm_103"),
                "-gencode".into(),
                ga("compute_120f", "sm_120f"),
                "-gencode".into(),
                ga("compute_120f", "compute_120f"),
            ],
        ),
        (
            "debug.o",
            vec![
                "-c".into(),
                "-G".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "debug.o".into(),
                "-gencode".into(),
                ga("compute_120", "sm_120"),
            ],
        ),
        (
            "raw.fatbin",
            vec![
                "--fatbin".into(),
                "$SRC/axpy.cu".into(),
                "-o".into(),
                "raw.fatbin".into(),
                "-gencode".into(),
                ga("compute_90", "sm_90"),
                "-gencode".into(),
                ga("compute_120a", "sm_120a"),
            ],
        ),
        (
            "nvcc-linked.so",
            vec![
                "-shared".into(),
                "-Xcompiler".into(),
                "-fPIC".into(),
                "$SRC/axpy.cu".into(),
                "$SRC/scale.cu".into(),
                "-o".into(),
                "nvcc-linked.so".into(),
                "-gencode".into(),
                ga("compute_120", "sm_120"),
                "-gencode".into(),
                ga("compute_120", "compute_120"),
            ],
        ),
        (
            "rdc.so",
            vec![
                "-shared".into(),
                "-rdc=true".into(),
                "-Xcompiler".into(),
                "-fPIC".into(),
                "$SRC/axpy.cu".into(),
                "$SRC/scale.cu".into(),
                "-o".into(),
                "rdc.so".into(),
                "-gencode".into(),
                ga("compute_90", "sm_90"),
                "-gencode".into(),
                ga("compute_120a", "sm_120a"),
            ],
        ),
    ];
    let mut checked = 0;
    for (file, args) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nvcc(d, &args);
        let path = d.join(file);
        let theirs = cuobjdump(&path);
        assert!(
            !theirs.is_empty() || *file == "empty",
            "{file}: cuobjdump lists nothing"
        );
        assert_eq!(kiln(&path), theirs, "{file}");
        checked += 1;
    }
    let rdc = kiln::fatbin::read_file(&d.join("rdc.so")).unwrap();
    assert!(
        rdc.fatbins.iter().any(|f| f.section == "__nv_relfatbin"),
        "-rdc keeps relocatable inputs"
    );
    assert_eq!(rdc.all_images().count(), 6);
    // Two translation units linked by g++ (as torch's cpp_extension does): no device-link stub.
    for (tu, arch) in [("axpy", "sm_120a"), ("scale", "sm_90")] {
        let code = arch.replace("sm_", "");
        nvcc(
            d,
            &[
                "-c",
                "-Xcompiler",
                "-fPIC",
                &format!("$SRC/{tu}.cu"),
                "-o",
                &format!("{tu}.o"),
                "-gencode",
                &format!("arch=compute_{code},code={arch}"),
            ],
        );
    }
    run(StdCommand::new("g++")
        .current_dir(d)
        .args(["-shared", "-o", "gxx-linked.so", "axpy.o", "scale.o"])
        .arg(format!("-L{}", cuda().join("lib").display()))
        .args(["-l:libcudart_static.a", "-lpthread", "-ldl", "-lrt"]));
    let path = d.join("gxx-linked.so");
    assert_eq!(kiln(&path), cuobjdump(&path));
    let r = kiln::fatbin::read_file(&path).unwrap();
    assert_eq!(r.fatbins.len(), 2, "one fatbin per translation unit");
    assert_eq!(r.sass, ["sm_90", "sm_120a"]);
    checked += 1;

    // The CLI on a few of them, in JSON, with run verdicts for SM 12.0.
    let out = kiln_bare()
        .args(["arch", "--json", "--arch", "12.0", "--driver-cuda", "13.0"])
        .arg(d.join("af.o"))
        .arg(d.join("plain.o"))
        .arg(d.join("concat.o"))
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files[0]["sass"], serde_json::json!(["sm_100f", "sm_120a"]));
    assert_eq!(files[0]["ptx"], serde_json::json!(["compute_120f"]));
    assert_eq!(files[0]["runs_on"][0]["usable"], true);
    assert_eq!(
        files[2]["sass"],
        serde_json::json!(["sm_90a", "sm_100a", "sm_103", "sm_120f"])
    );
    // 13.0 PTX (ISA 9.5 from this 13.5 compiler) is too new for a 13.0 driver: the SASS still runs.
    assert_eq!(files[1]["runs_on"][0]["images"], serde_json::json!(["sm_120"]));
    assert!(checked >= 12);
}

#[test]
fn wrong_arch_and_too_new_ptx_are_said_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    axpy(d, "-c", "hopper.o", "arch=compute_90a,code=sm_90a");
    axpy(d, "-c", "ptx.o", "arch=compute_90,code=compute_90");
    let out = kiln_bare()
        .args(["arch", "--arch", "12.0", "--driver-cuda", "13.0"])
        .arg(d.join("hopper.o"))
        .arg(d.join("ptx.o"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    assert!(
        s.contains("NO    12.0: no usable image (holds sm_90a; CUDA error 209, no kernel image)"),
        "{s}"
    );
    assert!(
        s.contains("NO    12.0: only PTX newer than the driver: compute_90 (PTX ISA 9.5 > 9.0) (CUDA error 222)"),
        "{s}"
    );
    // With a driver that knows ISA 9.5, the PTX JIT-compiles for 12.0.
    let out = kiln_bare()
        .args(["arch", "--arch", "12.0", "--driver-cuda", "13.5"])
        .arg(d.join("ptx.o"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("runs  12.0: loads compute_90"));
}

/// An `-rdc=true` object holds its device code in `__nv_relfatbin` only (CUDA's
/// `include/fatbinary_section.h`: `FATBIN_PRELINK_DATA_SECTION_NAME`); NVIDIA's cuobjdump lists
/// those images for the object and for an archive of it. kiln reads the same, says the file is
/// relocatable, and judges the archs on them (they are what device linking loads), while a linked
/// library's leftover relocatable copies still do not count (the `rdc.so` case above).
#[test]
fn a_relocatable_object_reads_as_what_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    nvcc(
        d,
        &[
            "-c",
            "-rdc=true",
            "$SRC/axpy.cu",
            "-o",
            "rdc.o",
            "-gencode",
            "arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_120,code=sm_120",
        ],
    );
    run(StdCommand::new("ar").current_dir(d).args(["rcs", "librdc.a", "rdc.o"]));
    for file in ["rdc.o", "librdc.a"] {
        let path = d.join(file);
        let theirs = cuobjdump(&path);
        assert_eq!(theirs, ["sm_120", "sm_90"], "{file}: cuobjdump");
        assert_eq!(kiln(&path), theirs, "{file}");
        let r = kiln::fatbin::read_file(&path).unwrap();
        assert!(r.relocatable, "{file}");
        assert!(r.fatbins.iter().all(|f| f.section == "__nv_relfatbin"), "{file}");
        assert_eq!(r.sass, ["sm_90", "sm_120"], "{file}");
        let out = kiln_bare()
            .args(["arch", "--json", "--arch", "12.0", "--driver-cuda", "13.0"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {}", text(&out.stdout));
        let v = stdout_json(&out);
        assert_eq!(v["files"][0]["relocatable"], true, "{v}");
        assert_eq!(v["files"][0]["runs_on"][0]["usable"], true, "{v}");
        let out = kiln_bare().args(["arch"]).arg(&path).output().unwrap();
        assert!(
            text(&out.stdout).contains("relocatable object: its 2 -rdc image(s) load once device-linked"),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn malformed_input_is_an_error_with_the_offset_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    nvcc(
        d,
        &[
            "--fatbin",
            "$SRC/axpy.cu",
            "-o",
            "ok.fatbin",
            "-gencode",
            "arch=compute_120a,code=sm_120a",
            "-gencode",
            "arch=compute_120a,code=compute_120a",
        ],
    );
    let good = std::fs::read(d.join("ok.fatbin")).unwrap();
    assert!(kiln::fatbin::read_bytes(&good, "ok").is_ok());
    // Every truncation, and every single-byte corruption of the headers, gives Ok or Err: no panic.
    for cut in 0..good.len().min(4096) {
        let _ = kiln::fatbin::read_bytes(&good[..cut], "cut");
    }
    for at in 0..good.len().min(512) {
        for b in [0x00, 0xff, 0x7f, 0x80] {
            let mut bad = good.clone();
            bad[at] = b;
            if let Ok(r) = kiln::fatbin::read_bytes(&bad, "bad") {
                for img in r.images() {
                    let _ = kiln::fatbin::payload(&bad, img);
                }
            }
        }
    }
    // A huge size field is refused with its offset instead of being trusted.
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = kiln::fatbin::read_bytes(&huge, "huge.fatbin").unwrap_err();
    assert_eq!(e.to_string(), "huge.fatbin: fatbin size overflows (at offset 0x0)");
    let e = kiln::fatbin::read_bytes(&good[..40], "short.fatbin").unwrap_err();
    assert!(e.to_string().starts_with("short.fatbin: fatbin of "), "{e}");
    let out = kiln_bare().args(["arch"]).arg(d.join("nope")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot open"));
}

/// A bare cubin (`nvcc -cubin`, as `ptxas` and the CuTe DSL write them) is one SASS image. Its
/// `e_flags` do not tell `sm_120` from `sm_120a` or `sm_120f`; kiln takes the variant from the
/// `-arch` option in the toolkit note. cuobjdump names the image `<file>.<arch>.cubin` and drops
/// the `f` (`--list-elf` prints `sm_120` for an `sm_120f` cubin), so that one case is compared by hand.
#[test]
fn a_bare_cubin_is_read_with_its_variant_and_agrees_with_cuobjdump() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for (arch, cuobjdump_says) in [
        ("sm_90a", "sm_90a"),
        ("sm_120", "sm_120"),
        ("sm_120a", "sm_120a"),
        ("sm_120f", "sm_120"),
    ] {
        let out = format!("k.{arch}.cubin");
        nvcc(d, &["-cubin", "$SRC/axpy.cu", "-o", &out, &format!("-arch={arch}")]);
        let file = d.join(&out);
        assert_eq!(kiln(&file), vec![arch.to_string()], "{out}");
        let listing = StdCommand::new(cuda().join("bin/cuobjdump"))
            .arg("--list-elf")
            .arg(&file)
            .output()
            .unwrap();
        let listing = text(&listing.stdout);
        let named = listing
            .lines()
            .find_map(|l| l.trim().strip_prefix("ELF file    1: "))
            .unwrap_or_else(|| panic!("cuobjdump {out}: {listing}"));
        assert_eq!(named, format!("k.{arch}.{cuobjdump_says}.cubin"), "{out}");
    }
    // Run rules apply as for any image: an sm_120a cubin loads on 12.0, not on 9.0.
    let file = d.join("k.sm_120a.cubin");
    let out = crate::common::kiln_bare()
        .args(["arch", "--arch", "12.0"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = crate::common::kiln_bare()
        .args(["arch", "--arch", "9.0"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
}

/// A library too big for `.nv_fatbin` keeps its fatbins in the x86-64 large-data section
/// `.ldata` among other data (libcufft.so.12 of nvidia-cufft 12.2.0.57: 29,341 fatbins there,
/// with sm_120 among them, and a one-image sm_75 stub in `.nv_fatbin`, all cuobjdump lists). Here:
/// a real nvcc-built shared object whose fatbin is moved into an `.ldata` with other bytes
/// around it, and a fake magic whose header is not a fatbin's. kiln finds the real one, reads its
/// images and skips the rest; the run rules then see sm_120.
#[test]
fn fatbins_in_a_large_data_section_among_other_bytes_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    nvcc(
        d,
        &[
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "$SRC/scale.cu",
            "-o",
            "lib.so",
            "-gencode",
            "arch=compute_90,code=sm_90",
            "-gencode",
            "arch=compute_120,code=sm_120",
        ],
    );
    let before = kiln(&d.join("lib.so"));
    let mut held = before.clone();
    held.dedup();
    assert_eq!(held, ["sm_120", "sm_90"]);
    run(StdCommand::new("objcopy").current_dir(d).args([
        "-O",
        "binary",
        "--only-section=.nv_fatbin",
        "lib.so",
        "fatbin.bin",
    ]));
    let fatbin = std::fs::read(d.join("fatbin.bin")).unwrap();
    let mut blob = b"other data, 32 bytes of it......".to_vec();
    // A fatbin magic whose header says version 7: not a fatbin, skipped.
    blob.extend_from_slice(&[0x50, 0xed, 0x55, 0xba, 7, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    blob.extend_from_slice(&fatbin);
    while !blob.len().is_multiple_of(8) {
        blob.push(0);
    }
    blob.extend_from_slice(b"and more data after the fatbin..");
    std::fs::write(d.join("ldata.bin"), &blob).unwrap();
    run(StdCommand::new("objcopy").current_dir(d).args([
        "--remove-section=.nv_fatbin",
        "--add-section",
        ".ldata=ldata.bin",
        "lib.so",
        "moved.so",
    ]));
    let r = kiln::fatbin::read_file(&d.join("moved.so")).unwrap();
    assert!(r.fatbins.iter().all(|f| f.section == ".ldata"), "{:?}", r.fatbins);
    assert_eq!(kiln(&d.join("moved.so")), before);
    let out = kiln_bare()
        .args(["arch", "--json", "--arch", "12.0"])
        .arg(d.join("moved.so"))
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert_eq!(v["files"][0]["runs_on"][0]["usable"], true, "{v}");
}
