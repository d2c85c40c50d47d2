//! `kiln lock` on an environment `kiln install` made of a stack shaped like SGLang's, and
//! `install --locked` of that lock on a fresh venv reproducing it.
//!
//! The shape is recipes/sglang.toml's (0.5.23): a top component whose `[[versions]]` entry has
//! a source and a prebuilt wheel (`wheels`), `[install] deps = true`, and exact pins of a
//! component that is itself a prebuilt wheel holding CUDA code (sglang-kernel, recipes/
//! sglang-kernel.toml) and of one installed from an index by requirement (torch, recipes/
//! torch.toml `wheel = "torch==2.14.1"`). Real SGLang cannot install here (sglang-kernel 0.4.10's
//! `sm100/common_ops` links `libcuda.so.1`, and this machine has no driver), so the fixture
//! plays each part: the CUDA fixture's wheel (compiled by NVIDIA's nvcc from PyPI for sm_90 and
//! sm_120) as the kernel package, six from PyPI (https://pypi.org/project/six/1.17.0/) as the
//! index component (also brought by a feature of the kernel package, as flashinfer's `cutedsl`
//! brings cutlass-dsl and SGLang pins it too), and a pure-Python top package that requires both at exactly those versions,
//! as SGLang 0.5.23's METADATA requires `sglang-kernel==0.4.10` and `torch==2.14.1`.
//! Ground truth: issue 19's done-when, "`kiln lock` succeeds on an environment made by `kiln
//! install sglang` (every component proven), and `install --locked` of it on a fresh venv
//! reproduces it".

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use crate::common::{World, cuda, give_uv, kiln_bare, stdout_json, text, venv};
use crate::prebuilt::{fixture_wheel, sha256};

/// The top package's wheel: `kiln_fixture_top` requiring the kernel and the index component at
/// exactly the versions its recipe pins.
fn top_wheel(w: &World, out: &Path) -> PathBuf {
    let src = w.dir.path().join("kiln-fixture-top");
    std::fs::create_dir_all(src.join("kiln_fixture_top")).unwrap();
    std::fs::write(
        src.join("pyproject.toml"),
        "[build-system]\nrequires = [\"setuptools>=61\", \"wheel\"]\nbuild-backend = \"setuptools.build_meta\"\n\
         [project]\nname = \"kiln-fixture-top\"\nversion = \"0.5.23\"\n\
         dependencies = [\"kiln-fixture-cuda==1.0.0\", \"six==1.17.0\"]\n\
         [tool.setuptools]\npackages = [\"kiln_fixture_top\"]\n",
    )
    .unwrap();
    std::fs::write(
        src.join("kiln_fixture_top/__init__.py"),
        "import kiln_fixture_cuda, six\n__version__ = \"0.5.23\"\n",
    )
    .unwrap();
    let st = crate::common::pip_wheel(&w.python, &src, out).status().unwrap();
    assert!(st.success());
    out.join("kiln_fixture_top-0.5.23-py3-none-any.whl")
}

/// The stack's recipes beside the fixtures: (directory).
fn stack_recipes(w: &World) -> PathBuf {
    let kernel = fixture_wheel(w, "90;120", &w.dir.path().join("kernel-wheels"));
    let top = top_wheel(w, &w.dir.path().join("top-wheels"));
    let dir = w.dir.path().join("fixtures/stack-recipes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        w.dir.path().join("fixtures/cuda-recipes/cuda-toolkit.toml"),
        dir.join("cuda-toolkit.toml"),
    )
    .unwrap();
    let write = |name: &str, body: String| std::fs::write(dir.join(format!("{name}.toml")), body).unwrap();
    write(
        "fixture-kernel",
        format!(
            "[package]\nname = \"fixture-kernel\"\ndist = \"kiln-fixture-cuda\"\naccepts = \">=1.0\"\n\
             summary = \"test fixture: sglang-kernel's part, a prebuilt wheel with CUDA code\"\n\n\
             [[versions]]\nversion = \"1.0.0\"\npath = \"../packages/kiln-fixture-cuda\"\n\
             wheels = [{{ url = \"{}\", sha256 = \"{}\" }}]\n\n\
             [requires]\ncuda = \">=12.8\"\n\n[depends]\ncuda-toolkit = \"*\"\n\n\
             [build]\nenv = {{ FIXTURE_CUDA_ARCHS = \"{{arch.flash_attn}}\", CUDA_HOME = \"{{cuda_home}}\" }}\n\n\
             [verify]\nimports = [\"kiln_fixture_cuda\"]\n\n\
             [features.cutedsl]\nsummary = \"flashinfer's cutedsl part: one more component\"\n\
             depends = {{ fixture-index = \">=1.16\" }}\nimports = [\"six.moves\"]\n",
            kernel.display(),
            sha256(&kernel)
        ),
    );
    write(
        "fixture-index",
        "[package]\nname = \"fixture-index\"\ndist = \"six\"\naccepts = \">=1.16\"\n\
         summary = \"test fixture: torch's part, a wheel from the index by requirement\"\n\n\
         [[versions]]\nversion = \"1.17.0\"\nwheel = \"six==1.17.0\"\n\n[verify]\nimports = [\"six\"]\n"
            .to_string(),
    );
    write(
        "fixture-top",
        format!(
            "[package]\nname = \"fixture-top\"\ndist = \"kiln-fixture-top\"\naccepts = \">=0.5\"\n\
             summary = \"test fixture: sglang's part\"\n\n\
             [[versions]]\nversion = \"0.5.23\"\npath = \"../../kiln-fixture-top\"\n\
             depends = {{ fixture-kernel = {{ version = \"==1.0.0\", features = [\"cutedsl\"] }}, fixture-index = \"==1.17.0\" }}\n\
             wheels = [{{ url = \"{}\", sha256 = \"{}\" }}]\n\n\
             [depends]\nfixture-kernel = \"*\"\nfixture-index = \"*\"\n\n\
             [install]\ndeps = true\n\n[verify]\nimports = [\"kiln_fixture_top\", \"kiln_fixture_cuda\"]\n",
            top.display(),
            sha256(&top)
        ),
    );
    dir
}

/// What kiln recorded of each distribution it installed into the venv of `python`: name ->
/// (version, source, wheel sha256), read from their `kiln.json`.
fn recorded(python: &Path) -> Vec<(String, String, String, String)> {
    let code = "import importlib.metadata as m, json\n\
                for d in sorted(m.distributions(), key=lambda d: d.metadata['Name']):\n\
                \x20   t = d.read_text('kiln.json')\n\
                \x20   if t:\n\
                \x20       r = json.loads(t)\n\
                \x20       print(d.metadata['Name'], d.version, r.get('source'), r.get('wheel_sha256'))";
    let out = StdCommand::new(python).args(["-c", code]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].into(), f[1].into(), f[2].into(), f[3].into())
        })
        .collect()
}

#[test]
fn a_lock_of_an_sglang_shaped_install_is_proven_and_reproduced_on_a_fresh_venv() {
    let w = World::new();
    let recipes = stack_recipes(&w);
    let kiln = |python: &Path, cache: &Path, args: &[&str]| {
        give_uv(cache);
        let mut c = kiln_bare();
        c.arg("--recipes").arg(&recipes).arg("--python").arg(python);
        c.arg("--cache-dir").arg(cache).arg("--no-progress");
        c.env("CUDA_HOME", cuda()).args(args);
        c.output().unwrap()
    };
    let out = kiln(
        &w.python,
        &w.cache,
        &["install", "--json", "--arch", "12.0", "fixture-top"],
    );
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["result"], "ok", "{v}");

    // Every component proven: the lock is written, each source as kiln installed it.
    let lockfile = w.dir.path().join("kiln.lock");
    let lock_arg = lockfile.display().to_string();
    let out = kiln(&w.python, &w.cache, &["lock", "fixture-top", "-o", &lock_arg]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let lock = std::fs::read_to_string(&lockfile).unwrap();
    let here = recorded(&w.python);
    let names: Vec<&str> = here.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["kiln-fixture-cuda", "kiln-fixture-top", "six"], "{here:?}");
    for (name, version, source, _) in &here {
        assert!(
            lock.contains(&format!("source = \"{source}\"")),
            "{name} {version}: {lock}"
        );
    }
    assert!(lock.contains("source = \"index:six==1.17.0\""), "{lock}");
    assert_eq!(lock.matches("wheel_url = ").count(), 2, "{lock}");
    assert!(
        lock.contains("features = [\"cutedsl\"]"),
        "the kernel with the feature the top asks: {lock}"
    );

    // A fresh venv and its own cache: --locked reproduces it, the same versions, sources and
    // wheels (by sha256), the prebuilt wheels installed as they are.
    let node = venv(&w.dir.path().join("node"));
    let node_cache = w.dir.path().join("node-cache");
    let out = kiln(
        &node,
        &node_cache,
        &["install", "--json", "--locked", "--lock", &lock_arg],
    );
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let v = stdout_json(&out);
    assert_eq!(v["lock"]["reproduced"], true, "{v}");
    assert_eq!(v["result"], "ok", "{v}");
    assert_eq!(recorded(&node), here);
    for o in v["outcomes"].as_array().unwrap() {
        assert_ne!(o["action"], "build", "nothing compiled: {v}");
    }
}
