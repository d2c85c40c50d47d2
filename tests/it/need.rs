//! Prefer the versions that let an offered wheel qualify: a prebuilt wheel refused only for its
//! `Requires-Dist` pin is taken once the plan holds the pinned version the recipes allow, and
//! the pinned component says why it is not at its newest; a pin of the user's wins. Then the
//! real vLLM 0.33.0 wheel on 12.0, with and without `--need` (by hand: it reads a 336 MB wheel).

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common::{World, kiln_bare, stdout_json, step, text};

fn sha256(path: &Path) -> String {
    let out = StdCommand::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// A pure wheel `kiln_pinning-1.0.0-py3-none-any.whl` whose METADATA pins `kiln-pinned==1.0.0`.
fn pinning_wheel(w: &World) -> PathBuf {
    let path = w.dir.path().join("kiln_pinning-1.0.0-py3-none-any.whl");
    let script = format!(
        "import zipfile\n\
         with zipfile.ZipFile({:?}, 'w') as z:\n\
         \x20   z.writestr('kiln_pinning/__init__.py', '')\n\
         \x20   z.writestr('kiln_pinning-1.0.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: kiln-pinning\\nVersion: 1.0.0\\nRequires-Dist: kiln-pinned==1.0.0\\n')\n\
         \x20   z.writestr('kiln_pinning-1.0.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         \x20   z.writestr('kiln_pinning-1.0.0.dist-info/RECORD', '')\n",
        path.display().to_string()
    );
    w.py(&script).unwrap();
    path
}

#[test]
fn a_wheel_refused_for_its_pin_alone_gets_the_pinned_version_the_recipes_allow() {
    let w = World::new();
    let wheel = pinning_wheel(&w);
    let recipes = w.dir.path().join("fixtures/pin-recipes");
    std::fs::create_dir_all(&recipes).unwrap();
    std::fs::write(
        recipes.join("pinning.toml"),
        format!(
            "[package]\nname = \"pinning\"\ndist = \"kiln-pinning\"\nsummary = \"test: its wheel pins kiln-pinned==1.0.0\"\n\n\
             [[versions]]\nversion = \"1.0.0\"\npath = \"../packages/kiln-fixture-pure\"\n\
             wheels = [{{ url = \"{}\", sha256 = \"{}\" }}]\n\n[depends]\npinned = \">=1.0\"\n",
            wheel.display(),
            sha256(&wheel)
        ),
    )
    .unwrap();
    std::fs::write(
        recipes.join("pinned.toml"),
        "[package]\nname = \"pinned\"\ndist = \"kiln-pinned\"\nsummary = \"test: two versions\"\n\n\
         [[versions]]\nversion = \"1.1.0\"\npath = \"../packages/kiln-fixture-pure\"\n\n\
         [[versions]]\nversion = \"1.0.0\"\npath = \"../packages/kiln-fixture-pure\"\n",
    )
    .unwrap();
    let plan = |targets: &[&str]| {
        let mut c = w.kiln_with(&recipes);
        c.args(["plan", "--json", "--arch", "12.0"]).args(targets);
        stdout_json(&c.output().unwrap())
    };
    let file = wheel.file_name().unwrap().to_str().unwrap().to_string();

    let v = plan(&["pinning"]);
    let s = step(&v, "pinning");
    assert_eq!(
        (s["action"].as_str(), s["prebuilt"]["install"].as_bool()),
        (Some("install"), Some(true)),
        "{s}"
    );
    let s = step(&v, "pinned");
    assert_eq!(s["version"], "1.0.0", "{s}");
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.ends_with(&format!(
            "1.0.0, not 1.1.0: the prebuilt wheel {file} pins kiln-pinned==1.0.0 (its Requires-Dist), preferred so that it qualifies"
        )),
        "{reason}"
    );

    // The user's own pin wins: the wheel is refused for its pin, and the step builds.
    let v = plan(&["pinning", "pinned==1.1.0"]);
    assert_eq!(step(&v, "pinned")["version"], "1.1.0");
    let s = step(&v, "pinning");
    assert_eq!(s["action"], "build", "{s}");
    assert_eq!(s["prebuilt"]["refused"], serde_json::json!(["pins"]), "{s}");
    assert_eq!(s["prebuilt"]["pins"][0]["requires"], "kiln-pinned==1.0.0", "{s}");
    assert_eq!(s["prebuilt"]["pins"][0]["planned"], "1.1.0", "{s}");
}

/// The real vLLM 0.33.0 x86_64 wheel of the embedded recipe (`recipes/vllm.toml`).
const VLLM_WHEEL: &str = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl";
const VLLM_SHA256: &str = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa";

/// It reads the 336 MB wheel, from `KILN_TEST_VLLM_WHEEL` (a local copy, put into the test's
/// cache) or else fetched from PyPI (once per run; issue 18's done-when is about this real wheel).
/// A driver is said by `KILN_DRIVER_VERSION` (the wheel's binaries link libcuda.so.1).
#[test]
fn real_vllm_on_12_0_takes_the_wheel_with_torch_2_14_0_and_builds_for_fp_quant() {
    let w = World::new();
    if let Some(local) = std::env::var_os("KILN_TEST_VLLM_WHEEL") {
        let dir = w.cache.join("sources").join(VLLM_SHA256);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(local, dir.join(VLLM_WHEEL)).unwrap();
    }
    let gxx = w.dir.path().join("g++13");
    std::fs::write(&gxx, "#!/bin/sh\necho 'g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0'\n").unwrap();
    StdCommand::new("chmod").arg("755").arg(&gxx).status().unwrap();
    let plan = |need: &[&str]| {
        let mut c = kiln_bare();
        c.arg("--python")
            .arg(&w.python)
            .arg("--cache-dir")
            .arg(&w.cache)
            .env("KILN_CUDA_VERSION", "13.0")
            .env("KILN_DRIVER_VERSION", "580.95.05")
            .env("CXX", &gxx)
            .args(["plan", "vllm", "--arch", "12.0", "--json"])
            .args(need);
        stdout_json(&c.output().unwrap())
    };

    let v = plan(&[]);
    let s = step(&v, "vllm");
    assert_eq!(
        (s["action"].as_str(), s["version"].as_str()),
        (Some("install"), Some("0.33.0")),
        "{s}"
    );
    assert_eq!(s["prebuilt"]["wheel"]["file"], VLLM_WHEEL, "{s}");
    let gap = &s["prebuilt"]["binaries"]["unavailable"];
    assert_eq!(gap[0]["path"], "vllm/_qutlass_C.abi3.so", "{s}");
    assert_eq!(gap[0]["serves"], serde_json::json!(["--quantization=fp_quant"]), "{s}");
    let t = step(&v, "torch");
    assert_eq!(t["version"], "2.14.0", "{t}");
    assert!(
        t["reason"].as_str().unwrap().ends_with(&format!(
            "2.14.0, not 2.15.0: vllm 0.26.0 or 0.20.0 needs torch >=2.11,<2.12; vllm 0.33.0 needs torch >=2.14,<2.15; \
             you asked for vllm; the prebuilt wheel {VLLM_WHEEL} pins torch==2.14.0 (its Requires-Dist), preferred so that it qualifies"
        )),
        "{t}"
    );

    let v = plan(&["--need", "fp_quant"]);
    let s = step(&v, "vllm");
    assert_eq!(s["action"], "build", "{s}");
    assert_eq!(s["prebuilt"]["refused"], serde_json::json!(["binaries", "pins"]), "{s}");
    assert!(
        s["prebuilt"]["reason"].as_str().unwrap().contains(
            "vllm/_qutlass_C.abi3.so for 12.0: no usable image (holds sm_100f; CUDA error 209, no kernel image) \
             [needed by --quantization=fp_quant, which you need]"
        ),
        "{s}"
    );
    // Built from source, vLLM takes the newest torch its recipe allows.
    assert_eq!(step(&v, "torch")["version"], "2.14.1");
}
