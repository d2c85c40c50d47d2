//! Unit tests of `wheels = [...]` in `[[versions]]` and `[[binaries.optional]]`: a good recipe,
//! and every problem of a bad one at its own `file:line:col`.

use super::parse;

const SHA: &str = "4fe3d1bd5a4e8a7e1f6f2c5e2a9b8b2f1c0e4d3a2b1c0f9e8d7c6b5a49382716";

fn good() -> String {
    format!(
        r#"[package]
name = "demo"
dist = "demo-kernels"

[[versions]]
version = "1.2.0"
path = "pkg"
wheels = [
  {{ url = "https://files.example/demo_kernels-1.2.0-cp38-abi3-manylinux_2_28_x86_64.whl", sha256 = "{SHA}" }},
  {{ url = "https://files.example/demo_kernels-1.2.0%2Bcu130-cp311-cp311-manylinux_2_28_aarch64.whl", sha256 = "{SHA}" }},
]

[[versions]]
version = "1.1.0"
path = "pkg"

[[binaries.optional]]
files = ["demo/_fa3_C*.so", "demo/hopper/**/*.so"]
arch = ["12.0", "12.1"]
versions = ">=1.2"
why = "FA3 is built for SM 9.0a only (demo CMakeLists.txt:10)"
"#
    )
}

#[test]
fn wheels_and_optional_binaries_are_read() {
    let r = parse("demo.toml", &good(), None).unwrap();
    let w = &r.versions[0].wheels;
    assert_eq!(w.len(), 2);
    assert_eq!(w[0].file, "demo_kernels-1.2.0-cp38-abi3-manylinux_2_28_x86_64.whl");
    assert_eq!(w[0].tags, ["cp38-abi3-manylinux_2_28_x86_64"]);
    assert_eq!(
        w[1].file,
        "demo_kernels-1.2.0+cu130-cp311-cp311-manylinux_2_28_aarch64.whl"
    );
    assert_eq!(w[0].sha256, SHA);
    assert!(r.versions[1].wheels.is_empty());
    let o = &r.optional_binaries;
    assert_eq!(o.len(), 1);
    assert_eq!(o[0].files, ["demo/_fa3_C*.so", "demo/hopper/**/*.so"]);
    assert_eq!(o[0].arch.len(), 2);
    let v = |s: &str| s.parse::<pep440_rs::Version>().unwrap();
    let a120 = "12.0".parse().unwrap();
    assert!(o[0].covers("demo/_fa3_C.abi3.so", a120, Some(&v("1.2.0"))));
    assert!(o[0].covers("demo/hopper/a/b/x.so", a120, Some(&v("1.2.0"))));
    assert!(!o[0].covers("demo/_fa3_C.abi3.so", a120, Some(&v("1.1.0"))));
    assert!(!o[0].covers("demo/_C.abi3.so", a120, None));
}

#[test]
fn every_problem_of_wheels_and_optional_binaries_points_at_its_place() {
    let bad = good()
        .replace("demo_kernels-1.2.0-cp38", "demo_kernels-1.3.0-cp38")
        .replace(
            "demo_kernels-1.2.0%2Bcu130-cp311-cp311-manylinux_2_28_aarch64.whl",
            "demo_kernels-1.2.0.tar.gz",
        )
        .replacen(
            &format!("sha256 = \"{SHA}\" }},\n]"),
            "sha256 = \"abc\" },\n  \"x\",\n]",
            1,
        )
        .replace("\"demo/_fa3_C*.so\"", "\"demo/[_fa3\"")
        .replace("arch = [\"12.0\", \"12.1\"]", "arch = [\"12.0\", \"sm_12x\"]\nfile = 1")
        .replace(">=1.2", ">=1.2.*")
        + "\n[[binaries.optional]]\nwhy = \"x\"\n\n[[versions]]\nversion = \"1.0.0\"\npath = \"pkg\"\nwheels = [{ url = \"https://f/other-1.0.0-py3-none-any.whl\", sha256 = \""
        + SHA
        + "\" }]\n";
    let errs = parse("demo.toml", &bad, None).unwrap_err().diags;
    let msgs: Vec<&str> = errs.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "`demo_kernels-1.3.0-cp38-abi3-manylinux_2_28_x86_64.whl` is version 1.3.0, this entry is version 1.2.0",
            "`versions.wheels.sha256` must be 64 hex digits",
            "the URL does not name a wheel file: `demo_kernels-1.2.0.tar.gz` does not end in .whl",
            "`versions.wheels` must hold inline tables, found string",
            "unknown key `file` in [binaries.optional]",
            "bad glob `demo/[_fa3`: unclosed character class; missing ']'",
            "`sm_12x` is not a GPU arch: expected a compute capability such as `12.0`, `sm_120` or `120`",
            "bad version specifier `>=1.2.*` for binaries.optional.versions",
            "a [[binaries.optional]] needs `files`: globs over the distribution's RECORD paths",
            "a [[binaries.optional]] needs `arch`: the target archs on which these binaries may lack an image",
            "`other-1.0.0-py3-none-any.whl` is a wheel of `other`, not of `demo-kernels`",
        ]
    );
    let at = |i: usize, text: &str| {
        let d = &errs[i];
        let line = bad.lines().nth(d.line - 1).unwrap();
        assert!(line[d.column - 1..].starts_with(text), "{}: {line}", d.message);
        assert!(d.help.is_some(), "{}", d.message);
    };
    at(0, "\"https://files.example/demo_kernels-1.3.0");
    at(1, "\"abc\"");
    at(3, "\"x\"");
    at(4, "file");
    at(5, "\"demo/[_fa3\"");
    at(6, "\"sm_12x\"");
    at(8, "[[binaries.optional]]");
    at(10, "\"https://f/other");
}
