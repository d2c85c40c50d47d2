//! Declared build inputs reaching a real CMake configure the way vLLM's do (issue 21, proof a):
//! CMake from its PyPI wheel (a build requirement), `FetchContent_Declare` of a git repository
//! that the build may not reach, pointed at kiln's copy through FetchContent's own
//! `FETCHCONTENT_SOURCE_DIR_<NAME>` in `CMAKE_ARGS` (vLLM 0.26.0's vllm-flash-attn input:
//! setup.py:333-335 passes `CMAKE_ARGS` to cmake), an archive through a variable the CMake files
//! read (as `VLLM_CUTLASS_SRC_DIR` in cmake/external_projects), and files taken from a wheel (as
//! `FMHA_SM100_SRC_DIR`). The configure runs with the network denied where the machine can deny
//! it; what it read from each input is what the package then holds.

use crate::common::{World, stdout_json, text};
use crate::inputs::{make_inputs, namespaces_work};

const CMAKE_LISTS: &str = r#"cmake_minimum_required(VERSION 3.24)
project(kiln_fixture_cmake LANGUAGES NONE)
include(FetchContent)
# Without kiln these come from the network (hosts that do not exist: a build that reaches out fails).
FetchContent_Declare(headers GIT_REPOSITORY https://github.invalid/kiln-fixture/headers.git GIT_TAG v1.0)
if(DEFINED ENV{FIXTURE_BLOB_SRC_DIR})
  FetchContent_Declare(blob SOURCE_DIR $ENV{FIXTURE_BLOB_SRC_DIR})
else()
  FetchContent_Declare(blob URL https://github.invalid/kiln-fixture/blob-1.0.tar.gz)
endif()
FetchContent_MakeAvailable(headers blob)
file(STRINGS ${headers_SOURCE_DIR}/include/answer.h ANSWER)
file(STRINGS ${headers_SOURCE_DIR}/third_party/sub/data.txt SUB)
file(STRINGS ${blob_SOURCE_DIR}/value.txt BLOB)
file(STRINGS $ENV{FIXTURE_MSA_SRC_DIR}/python/msa/api.py MSA)
file(READ /proc/net/dev NETDEV)
string(REGEX MATCHALL "\n *[a-z0-9]+:" DEVICES "${NETDEV}")
string(REGEX REPLACE "[\n :]" "" DEVICES "${DEVICES}")
file(WRITE ${CMAKE_BINARY_DIR}/values.txt
  "ANSWER=${ANSWER}\nSUB=${SUB}\nBLOB=${BLOB}\nMSA=${MSA}\nHEADERS_DIR=${headers_SOURCE_DIR}\nDEVICES=${DEVICES}\n")
"#;

const SETUP: &str = r#"import os, pathlib, shlex, subprocess

import cmake
from setuptools import setup

here = pathlib.Path(__file__).resolve().parent
build = here / "cmake-build"
# As vLLM's setup.py does: CMAKE_ARGS, split on whitespace, go to cmake.
args = shlex.split(os.environ.get("CMAKE_ARGS", ""))
subprocess.check_call([os.path.join(cmake.CMAKE_BIN_DIR, "cmake"), "-S", str(here), "-B", str(build), *args])
values = dict(l.split("=", 1) for l in (build / "values.txt").read_text().splitlines() if "=" in l)
(here / "kiln_fixture_cmake").mkdir(exist_ok=True)
(here / "kiln_fixture_cmake" / "__init__.py").write_text(f"VALUES = {values!r}\n")
setup(name="kiln-fixture-cmake", version="1.0.0", packages=["kiln_fixture_cmake"])
"#;

#[test]
fn a_cmake_configure_takes_every_input_from_kiln_with_the_network_denied() {
    let w = World::new();
    let i = make_inputs(&w);
    w.write("packages/kiln-fixture-cmake/CMakeLists.txt", CMAKE_LISTS);
    w.write("packages/kiln-fixture-cmake/setup.py", SETUP);
    let inputs = i.toml(
        [
            r#"CMAKE_ARGS = "-DFETCHCONTENT_SOURCE_DIR_HEADERS={path}""#,
            r#"FIXTURE_BLOB_SRC_DIR = "{path}""#,
            r#"FIXTURE_MSA_SRC_DIR = "{path}""#,
        ],
        [
            "FetchContent_Declare(headers GIT_REPOSITORY ...) in CMakeLists.txt (test fixture)",
            "CMakeLists.txt reads FIXTURE_BLOB_SRC_DIR (test fixture)",
            "CMakeLists.txt reads FIXTURE_MSA_SRC_DIR/python/msa (test fixture)",
        ],
    );
    w.write(
        "recipes/fixture-cmake.toml",
        &format!(
            r#"[package]
name = "fixture-cmake"
dist = "kiln-fixture-cmake"
version = "1.0.0"
summary = "test fixture: a CMake configure whose FetchContent sources are kiln's inputs"

[source]
path = "../packages/kiln-fixture-cmake"

[build]
requires = ["setuptools>=61", "cmake>=3.24,<4"]

{inputs}
[verify]
imports = ["kiln_fixture_cmake"]
"#
        ),
    );

    // The plan points FetchContent at kiln's copy, and the build gets no network.
    let plan = stdout_json(&w.kiln().args(["plan", "fixture-cmake", "--json"]).output().unwrap());
    let step = crate::common::step(&plan, "fixture-cmake");
    assert_eq!(
        step["env"]["CMAKE_ARGS"], "-DFETCHCONTENT_SOURCE_DIR_HEADERS=<input headers>",
        "{step}"
    );
    assert_eq!(step["network"], "denied", "{step}");

    // Offline with nothing cached: refused before cmake runs, each input named.
    let out = w
        .kiln()
        .args(["install", "--offline", "fixture-cmake"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let all = text(&out.stdout) + &text(&out.stderr);
    for name in ["headers", "blob", "msa"] {
        assert!(all.contains(&format!("build input `{name}`")), "{name}: {all}");
    }

    // Fetched, then configured from kiln's copies alone.
    let out = w.kiln().args(["install", "fixture-cmake"]).output().unwrap();
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let got = w
        .py("import json, kiln_fixture_cmake as m; print(json.dumps(m.VALUES))")
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(
        (
            v["ANSWER"].as_str(),
            v["SUB"].as_str(),
            v["BLOB"].as_str(),
            v["MSA"].as_str()
        ),
        (Some("42"), Some("from the submodule"), Some("7"), Some("API = 1")),
        "{v}"
    );
    assert!(v["HEADERS_DIR"].as_str().unwrap().contains("/inputs/headers"), "{v}");
    if namespaces_work() {
        assert_eq!(v["DEVICES"], "lo", "cmake ran without the network: {v}");
    } else {
        eprintln!("unshare -rn does not work here: the network-denial assertion is skipped");
    }
}
