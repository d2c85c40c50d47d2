//! `kiln recipe draft`: a release's `[[versions]]` entry drafted from its real artifacts on
//! PyPI (the Simple API's JSON, PEP 691, and the core metadata beside each wheel, PEP 658) and
//! its real sdist's CMake files, compared with what the recipe says. Ground truth: the project's
//! recipes/vllm.toml entry for 0.33.0, written by hand from the same sdist (its sha256, the
//! flashinfer pin of requirements/cuda.txt, the ten `[[versions.inputs]]` with their
//! CMakeLists.txt/cmake/external_projects/*.cmake lines).

use std::path::Path;

use crate::common::{kiln_bare, stdout_json, text};

fn recipes() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes")
}

/// The sdist (47 MB) is kept between runs, by sha256, as kiln keeps sources.
fn cache() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("kiln-draft-cache")
}

/// `kiln recipe draft ARGS...` on the project's recipes and the shared cache.
fn draft(args: &[&str]) -> std::process::Output {
    kiln_bare()
        .arg("--recipes")
        .arg(recipes())
        .arg("--cache-dir")
        .arg(cache())
        .args(["recipe", "draft"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_draft_of_vllm_0_33_0_reproduces_the_recipes_sha256_pins_and_ten_inputs() {
    let recipe_text = std::fs::read_to_string(recipes().join("vllm.toml")).unwrap();
    let out = draft(&["vllm", "0.33.0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["version"], "0.33.0");
    assert_eq!(
        v["sdist"]["sha256"], "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
        "{v}"
    );
    // A wheel's core metadata where the index serves it (PEP 658), else the sdist's PKG-INFO.
    let from = v["metadata_from"].as_str().unwrap();
    assert!(
        from.ends_with(".whl.metadata") || from == "vllm-0.33.0.tar.gz PKG-INFO",
        "{v}"
    );
    assert_eq!(v["requires_python"]["value"], "<3.15,>=3.11", "{v}");
    // The wheel's pins on kiln components: flashinfer as the recipe says; torch exact, where the
    // recipe (a build against the torch present) says the minor line.
    let pin = |c: &str| {
        v["depends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["component"] == c)
            .map(|p| p["spec"].as_str().unwrap().to_string())
    };
    assert_eq!(pin("flashinfer").as_deref(), Some("==0.7.2.post1"), "{v}");
    assert_eq!(pin("torch").as_deref(), Some("==2.14.0"), "{v}");
    // The ten inputs the recipe declares, each found with the recipe's repository and commit
    // (or tag), and the variable it sets where the recipe uses the project's own.
    let inputs = v["inputs"].as_array().unwrap();
    let want = [
        (
            "cutlass",
            "https://github.com/nvidia/cutlass.git",
            "v4.7.1",
            "VLLM_CUTLASS_SRC_DIR",
        ),
        (
            "triton-kernels",
            "https://github.com/triton-lang/triton.git",
            "v3.5.1",
            "TRITON_KERNELS_SRC_DIR",
        ),
        (
            "deepgemm",
            "https://github.com/vllm-project/DeepGEMM.git",
            "0820030756945b2daec208e8e8255268360f337d",
            "DEEPGEMM_SRC_DIR",
        ),
        (
            "deepselect",
            "https://github.com/vllm-project/DeepSelect.git",
            "d96d33afe1fab0d6066da49cdc91e64c2bee65ea",
            "DEEPSELECT_SRC_DIR",
        ),
        (
            "fmha-sm100",
            "https://github.com/vllm-project/MSA.git",
            "968061ab16cb14991a5c7d4c0e8eabf531be0dcf",
            "FMHA_SM100_SRC_DIR",
        ),
        (
            "flashmla",
            "https://github.com/vllm-project/FlashMLA",
            "e2afa5fd8c220fbd05fe03fc24c9d5e64c24641b",
            "FLASH_MLA_SRC_DIR",
        ),
        (
            "flashkda",
            "https://github.com/vllm-project/FlashKDA.git",
            "17a037d98da546deb4591e967cf961a43c034d8b",
            "FLASH_KDA_SRC_DIR",
        ),
        (
            "qutlass",
            "https://github.com/IST-DASLab/qutlass.git",
            "e74319e3405ce6d71965732880f5dc1f52371f64",
            "QUTLASS_SRC_DIR",
        ),
        (
            "tml-fa4",
            "https://github.com/vllm-project/tml-fa4.git",
            "75765e76a9c2c012c1f6ecd64577eb646eb4d303",
            "TML_FA4_SRC_DIR",
        ),
        (
            "vllm-flash-attn",
            "https://github.com/vllm-project/flash-attention.git",
            "b273a02621d3c94bc747df67204f591b67f38fae",
            "VLLM_FLASH_ATTN_SRC_DIR",
        ),
    ];
    for (name, git, pin, env) in want {
        assert!(
            recipe_text.contains(&format!("name = \"{name}\"")),
            "the recipe declares {name}"
        );
        let i = inputs
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("no input {name} in the draft: {v}"));
        assert_eq!(i["git"], git, "{i}");
        let got = i["rev"].as_str().or(i["tag"].as_str()).unwrap();
        assert_eq!(got, pin, "{i}");
        assert_eq!(i["env"], env, "{i}");
        assert!(
            i["why"].as_str().unwrap().contains(".cmake:") || i["why"].as_str().unwrap().contains("CMakeLists.txt:"),
            "{i}"
        );
    }
    // The prepare step and the extension modules the recipe's 0.33.0 entry names
    // (`prepare = [["{python}", "tools/use_existing_torch.py"]]`, imports of the two
    // stable-libtorch extensions: setup.py:1619-1620).
    assert_eq!(v["existing_torch_script"], "tools/use_existing_torch.py", "{v}");
    let ext = |m: &str| {
        v["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["module"] == m)
            .map(|e| e["at"].as_str().unwrap().to_string())
    };
    assert_eq!(ext("vllm._C_stable_libtorch").as_deref(), Some("setup.py:1619"), "{v}");
    assert_eq!(
        ext("vllm._moe_C_stable_libtorch").as_deref(),
        Some("setup.py:1620"),
        "{v}"
    );
    assert!(recipe_text.contains("\"vllm._moe_C_stable_libtorch\""));
    let triton = inputs.iter().find(|i| i["name"] == "triton-kernels").unwrap();
    assert_eq!(triton["subdir"], "python/triton_kernels/triton_kernels", "{triton}");
    let deepgemm = inputs.iter().find(|i| i["name"] == "deepgemm").unwrap();
    assert_eq!(
        deepgemm["submodules"],
        serde_json::json!(["third-party/cutlass", "third-party/deep_jit"])
    );
    // Compared with the recipe: the sdist, its sha256, both wheels and every input's repository
    // and commit agree; what differs is what a person decided or has not reviewed: the torch
    // range of a source build, cutlass-dsl (a pin of the wheel no version entry repeats), and the
    // CPU build's inputs (cmake/cpu_extension.cmake), which a CUDA recipe leaves out.
    let diffs: Vec<String> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        diffs,
        [
            "depends.torch",
            "depends.cutlass-dsl",
            "input arm-compute",
            "input onednn"
        ],
        "{v}"
    );
    assert!(v["same"].as_u64().unwrap() >= 25, "{v}");
    // Nothing was written.
    assert_eq!(
        std::fs::read_to_string(recipes().join("vllm.toml")).unwrap(),
        recipe_text
    );
}

#[test]
fn a_draft_needs_the_index_and_says_so_offline() {
    let out = kiln_bare()
        .arg("--cache-dir")
        .arg(cache())
        .args(["--offline", "recipe", "draft", "vllm", "0.33.0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("cannot run --offline"),
        "{}",
        text(&out.stderr)
    );
}

/// A wheel-only release (torch publishes no sdist, and this index serves no core metadata): its
/// METADATA is read out of the remote wheel with range requests, and the draft is what the
/// recipe's entries say — `wheel = "torch==2.14.1"`, `runtime_cuda = "13.0"` from its pin on
/// NVIDIA's `cuda-toolkit` wheel (recipes/torch.toml, read by hand from the same metadata).
#[test]
fn a_draft_of_a_wheel_only_release_reads_the_wheels_metadata_remotely() {
    let out = draft(&["torch", "2.14.1", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["wheel_requirement"], "torch==2.14.1", "{v}");
    assert_eq!(v["runtime_cuda"]["value"], "13.0", "{v}");
    assert!(v["metadata_from"].as_str().unwrap().ends_with(".whl METADATA"), "{v}");
    assert_eq!(v["requires_python"]["value"], ">=3.10", "{v}");
    assert_eq!(v["differences"], serde_json::json!([]), "{v}");
    assert_eq!(v["same"], 2, "{v}");
    // Nothing of the 500 MB wheel but its central directory and METADATA came over: the sdist
    // cache holds no torch file.
    // (On a fresh cache, where no other draft ran first, there is no sources folder at all.)
    let sources = cache().join("sources");
    let fetched_torch = sources.is_dir() && walkdir_names(&sources).iter().any(|name| name.starts_with("torch-"));
    assert!(!fetched_torch, "a torch file was downloaded into {}", sources.display());
}

/// The draft of torch 2.15.0 is an entry kiln uses: pasted into a copy of the recipe whose own
/// 2.15.0 entry is removed, `kiln recipes` loads it and a plan for Python 3.11 installs it from
/// the index. Ground truth: the hand-written entry in recipes/torch.toml (`wheel`,
/// `runtime_cuda = "13.2"`, `python = ">=3.11"`, read from the same wheel's METADATA), which the
/// draft must agree with field by field.
#[test]
fn a_draft_of_torch_2_15_0_agrees_with_the_recipe_and_is_an_entry_kiln_uses() {
    let out = draft(&["torch", "2.15.0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let draft = text(&out.stdout);
    assert!(
        draft.contains("# the recipe's entry for 2.15.0 agrees on all 3 fields compared"),
        "{draft}"
    );
    let entry: String = draft
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        entry.contains("wheel = \"torch==2.15.0\"") && entry.contains("runtime_cuda = \"13.2\""),
        "{entry}"
    );

    // A copy of the recipes without 2.15.0, the drafted entry appended.
    let dir = tempfile::tempdir().unwrap();
    crate::common::copy_dir(&recipes(), dir.path());
    let torch = dir.path().join("torch.toml");
    let text_before = std::fs::read_to_string(&torch).unwrap();
    let start = text_before
        .find("[[versions]]\nversion = \"2.15.0\"")
        .expect("the recipe's 2.15.0 entry");
    let end = start + text_before[start..].find("\n\n").unwrap() + 2;
    let without = format!("{}{}\n{entry}", &text_before[..start], &text_before[end..]);
    std::fs::write(&torch, without).unwrap();
    let out = kiln_bare()
        .arg("--recipes")
        .arg(dir.path())
        .args(["recipes", "torch", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let v215 = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["version"] == "2.15.0")
        .unwrap_or_else(|| panic!("no 2.15.0 in {v}"))
        .clone();
    assert_eq!(v215["runtime_cuda"], "13.2.0", "{v215}");
    assert_eq!(v215["source"]["requirement"], "torch==2.15.0", "{v215}");
    // A plan on a fresh Python 3.11 venv takes it (nothing is downloaded: torch comes from the index).
    let work = tempfile::tempdir().unwrap();
    let py311 = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".pyenv/versions/3.11.7/bin/python3.11");
    let python = if py311.is_file() {
        crate::common::venv_of(&py311, &work.path().join("venv"))
    } else {
        crate::common::venv(&work.path().join("venv"))
    };
    let out = kiln_bare()
        .arg("--recipes")
        .arg(dir.path())
        .arg("--python")
        .arg(&python)
        .arg("--cache-dir")
        .arg(work.path().join("cache"))
        .args(["plan", "torch==2.15.0", "--json", "--arch", "12.0"])
        .output()
        .unwrap();
    let v = stdout_json(&out);
    let step = crate::common::step(&v, "torch");
    assert_eq!(step["version"], "2.15.0", "{v}");
    assert_eq!(step["action"], "install", "{v}");
}

/// The file names anywhere under `dir`.
fn walkdir_names(dir: &std::path::Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        names.push(entry.file_name().to_string_lossy().into_owned());
        if entry.file_type().unwrap().is_dir() {
            names.extend(walkdir_names(&entry.path()));
        }
    }
    names
}

/// vLLM 0.26.0's recipe entry against its own sdist's CMake files (read by the draft). Ground
/// truth: what `cmake/external_projects/*.cmake` and CMakeLists.txt of the 0.26.0 sdist pin.
/// Where the recipe takes an input from its upstream repository (cutlass, DeepGEMM with its
/// submodules, qutlass, flash-attention), repository and commit equal the sdist's pins; where it
/// takes the same files from elsewhere (triton-kernels from a fork, FlashMLA's interface, MSA
/// and tml-fa4 out of the release wheel), the pin it replaces is the one its comment names, and
/// the recipe sets the variable the sdist reads.
#[test]
fn vllm_0_26_0_inputs_are_the_sdists_pins_or_name_the_pin_they_replace() {
    let recipe_text = std::fs::read_to_string(recipes().join("vllm.toml")).unwrap();
    let out = draft(&["vllm", "0.26.0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(
        v["sdist"]["sha256"], "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502",
        "{v}"
    );
    let inputs = v["inputs"].as_array().unwrap();
    let found = |name: &str| {
        inputs
            .iter()
            .find(|i| i["name"] == name)
            .unwrap_or_else(|| panic!("no input {name} in the draft: {v}"))
    };
    let set = kiln::recipe::RecipeSet::embedded().unwrap();
    let vllm = set.get("vllm").unwrap();
    let version: pep440_rs::Version = "0.26.0".parse().unwrap();
    let declared = vllm.build_of(Some(&version)).inputs.clone();
    let input = |name: &str| declared.iter().find(|i| i.name == name).unwrap().clone();
    use kiln::recipe::inputs::InputSource;
    // The same repository at the same commit as upstream's pin.
    for (name, git, rev) in [
        ("cutlass", "https://github.com/nvidia/cutlass.git", "v4.4.2"),
        (
            "deepgemm",
            "https://github.com/deepseek-ai/DeepGEMM.git",
            "a6b593d2826719dcf4892609af7b84ee23aaf32a",
        ),
        (
            "qutlass",
            "https://github.com/IST-DASLab/qutlass.git",
            "830d2c4537c7396e14a02a46fbddd18b5d107c65",
        ),
        (
            "vllm-flash-attn",
            "https://github.com/vllm-project/flash-attention.git",
            "caaa4eb59845388a20b1f435ecaafb4bd9517ad8",
        ),
    ] {
        let d = found(name);
        assert_eq!(d["git"], git, "{d}");
        assert_eq!(d["rev"].as_str().or(d["tag"].as_str()), Some(rev), "{d}");
        let InputSource::Git {
            git: g, rev: r, tag, ..
        } = input(name).from
        else {
            panic!("{name} is a git input")
        };
        assert_eq!(g, git);
        assert!(
            r.as_deref() == Some(rev) || tag.as_deref() == Some(rev),
            "{name}: {r:?} {tag:?}"
        );
    }
    let deepgemm = found("deepgemm");
    assert_eq!(
        deepgemm["submodules"],
        serde_json::json!(["third-party/cutlass", "third-party/fmt"])
    );
    // Taken from elsewhere: upstream's pin is the one the recipe's comment names.
    for (name, pin) in [
        ("triton-kernels", "v3.5.1"),
        ("flashmla", "a8f794d1251cbfd88a5011445dd5582289c727e4"),
        ("fmha-sm100", "2e63ec37a0fc29bc20f39cd1a52e0f5affc33a73"),
        ("tml-fa4", "b206834606ed5b5f21f8eed6b0683f528ea9cf7d"),
    ] {
        let d = found(name);
        let got = d["rev"].as_str().or(d["tag"].as_str()).unwrap();
        assert_eq!(got, pin, "{d}");
        let short = &pin[..pin.len().min(7)];
        assert!(
            recipe_text.contains(short),
            "the recipe names the pin {pin} it replaces"
        );
    }
    // Each input sets the variable the sdist reads (flash-attention: FetchContent's own, by
    // CMAKE_ARGS, instead of VLLM_FLASH_ATTN_SRC_DIR). The draft also finds the CPU build's
    // downloads (arm-compute, oneDNN: cmake/cpu_extension.cmake), which a CUDA build never makes.
    assert_eq!(declared.len(), 8);
    for i in &declared {
        let name = i.name.as_str();
        let d = found(name);
        let var = d["env"].as_str().unwrap();
        if name == "vllm-flash-attn" {
            assert!(
                i.env["CMAKE_ARGS"]
                    .raw()
                    .contains("FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN")
            );
        } else {
            assert!(i.env.contains_key(var), "{name}: the sdist reads {var}");
        }
    }
    for (name, member) in [
        ("flashmla", "vllm/third_party/flashmla/flash_mla_interface.py"),
        ("fmha-sm100", "vllm/third_party/fmha_sm100/"),
        ("tml-fa4", "vllm/third_party/tml_fa4/"),
    ] {
        let InputSource::Wheel {
            wheel,
            sha256,
            member: m,
            ..
        } = input(name).from
        else {
            panic!("{name} is a wheel-file input")
        };
        assert!(wheel.ends_with("vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl"));
        assert_eq!(
            sha256,
            "adb1e4c9b46d0dfdb094121ae5aad670a42412dd813ed4e5db069ed6a15006de"
        );
        assert_eq!(m, member);
    }
}

/// vLLM 0.26.0's `[[versions.targets]]` are the targets its own `setup.py` asks `cmake --build`
/// for. Ground truth: the sdist's `setup.py` as the draft reads it (every `CMakeExtension`,
/// setup.py:1117-1180; a target is the module name without `vllm.` and `vllm_flash_attn.`,
/// :337-338). Every target the recipe lists is one setup.py names, at the line its `why`
/// cites; the ones it leaves out are only ROCm's and the CPU build's (`_rocm_C`, `_C`,
/// `_C_AVX512`, `_C_AVX2`, :1129 and :1166-1177), which a CUDA build never asks for.
#[test]
fn vllm_0_26_0_targets_are_the_ones_its_setup_py_builds_at_the_lines_cited() {
    let out = draft(&["vllm", "0.26.0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = stdout_json(&out);
    let target_of = |module: &str| {
        let m = module.strip_prefix("vllm.").unwrap_or(module);
        m.strip_prefix("vllm_flash_attn.").unwrap_or(m).to_string()
    };
    let setup: Vec<(String, String)> = v["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                target_of(e["module"].as_str().unwrap()),
                e["at"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let set = kiln::recipe::RecipeSet::embedded().unwrap();
    let version: pep440_rs::Version = "0.26.0".parse().unwrap();
    let build = set.get("vllm").unwrap().build_of(Some(&version)).into_owned();
    assert_eq!(build.targets.len(), 15, "{:?}", build.targets);
    for t in &build.targets {
        let lines: Vec<&str> = setup
            .iter()
            .filter(|(name, _)| *name == t.name)
            .map(|(_, at)| at.rsplit(':').next().unwrap())
            .collect();
        assert!(!lines.is_empty(), "{} is not a target of setup.py: {setup:?}", t.name);
        assert!(
            lines.iter().any(|l| t.why.contains(&format!("setup.py:{l}"))
                || t.why.split("setup.py:").nth(1).is_some_and(|r| {
                    let span = r.split([' ', ';', ',']).next().unwrap_or("");
                    span.split_once('-').is_some_and(|(a, b)| {
                        let (a, b, l) = (a.parse::<u32>(), b.parse::<u32>(), l.parse::<u32>());
                        matches!((a, b, l), (Ok(a), Ok(b), Ok(l)) if a <= l && l <= b)
                    })
                })),
            "{}: setup.py names it at {lines:?}, the recipe cites {}",
            t.name,
            t.why
        );
    }
    let left_out: Vec<&str> = setup
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !build.targets.iter().any(|t| t.name == *name))
        .collect();
    for name in &left_out {
        assert!(
            ["_rocm_C", "_C", "_C_AVX512", "_C_AVX2"].contains(name),
            "setup.py builds {name} for CUDA too, and the recipe does not list it"
        );
    }
}
