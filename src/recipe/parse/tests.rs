//! Unit tests of the recipe parser: a good recipe, every problem of a bad one in one pass, the
//! version limit, and input that is not a recipe at all.

use super::*;

const GOOD: &str = r#"
[package]
name = "demo"
version = "1.0.0rc1"

[source]
path = "pkg"

[depends]
torch = { version = ">=2.7", abi = true }

[build]
env = { ARCH = "{arch.torch}" }
memory_per_job = "4GiB"

[verify]
imports = ["demo", "demo._ext"]
"#;

#[test]
fn parses_a_good_recipe() {
    let r = parse("demo.toml", GOOD, None).unwrap();
    assert_eq!(r.name, "demo");
    assert_eq!(r.dist.as_deref(), Some("demo"));
    assert_eq!(r.version.unwrap().to_string(), "1.0.0rc1");
    assert!(r.depends[0].abi);
    assert_eq!(r.build.memory_per_job, Some(4 << 30));
    assert_eq!(r.imports, ["demo", "demo._ext"]);
}

#[test]
fn reports_every_problem_in_one_file() {
    let bad = GOOD
        .replace("version = \"1.0.0rc1\"", "verison = \"1\"\nversion = 3")
        .replace("\">=2.7\"", "\">=2.7.*\"")
        .replace("{arch.torch}", "{arch.tensorrt}");
    let errs = parse("demo.toml", &bad, None).unwrap_err().diags;
    let msgs: Vec<&str> = errs.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "unknown key `verison` in [package]",
            "`package.version` must be a string, found integer",
            "bad version specifier `>=2.7.*` for dependency `torch`",
            "unknown template variable `{arch.tensorrt}`",
        ]
    );
    let tpl = &errs[3];
    let line = bad.lines().nth(tpl.line - 1).unwrap();
    assert_eq!(&line[tpl.column - 1..tpl.column - 1 + 15], "{arch.tensorrt}");
}

#[test]
fn more_versions_than_the_solver_holds_are_refused_at_the_first_extra_one() {
    let mut src = String::from("[package]\nname = \"many\"\n");
    for i in (0..=MAX_VERSIONS).rev() {
        src += &format!("[[versions]]\nversion = \"1.{i}\"\nwheel = \"many==1.{i}\"\n");
    }
    let errs = parse("many.toml", &src, None).unwrap_err().diags;
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].message, format!("more than {MAX_VERSIONS} [[versions]]"));
    // The 64th entry, counting from 1, is the one pointed at.
    let line = src.lines().nth(errs[0].line - 1).unwrap();
    assert_eq!(line, "[[versions]]");
    assert_eq!(src.lines().nth(errs[0].line).unwrap(), "version = \"1.0\"");
    let fits = src.replacen("[[versions]]\nversion = \"1.63\"\nwheel = \"many==1.63\"\n", "", 1);
    assert!(parse("many.toml", &fits, None).is_ok());
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for src in [
        "",
        "[[[",
        "package = 1",
        "\u{0}",
        "[package]\nname = \"x\"\n[source]\npath = 1\nwheel = \"torch==\"",
    ] {
        assert!(parse("x.toml", src, None).is_err(), "{src:?}");
    }
}

#[test]
fn a_distribution_name_must_be_one_pip_accepts() {
    let bad = GOOD.replace("name = \"demo\"", "name = \"demo\"\ndist = \"demo pkg\"");
    let errs = parse("demo.toml", &bad, None).unwrap_err().diags;
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].message, "`demo pkg` is not a Python distribution name");
    assert_eq!((errs[0].line, errs[0].column), (4, 8));
    let named = GOOD.replace("name = \"demo\"", "name = \"demo\"\ndist = \"Demo_Pkg\"");
    let r = parse("demo.toml", &named, None).unwrap();
    assert_eq!(r.dist.as_deref(), Some("Demo_Pkg"));
    assert_eq!(r.dist_name().unwrap().as_ref(), "demo-pkg");
}

#[test]
fn a_requirement_name_ending_in_a_dash_is_an_error_not_a_panic() {
    // pep508_rs 0.9.2 panics on these; the parser must answer with a diagnostic.
    for (value, at) in [
        ("torch-==2.7", '-'),
        ("nvidia-cutlass-dsl_[cu13]", '_'),
        ("a. >=1", '.'),
    ] {
        let src = format!("[package]\nname = \"w\"\nversion = \"1\"\n[source]\nwheel = \"{value}\"\n");
        let errs = parse("w.toml", &src, None).unwrap_err().diags;
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].message, format!("bad requirement `{value}`"));
        assert_eq!(
            errs[0].help.as_deref(),
            Some(format!("Package name must end with an alphanumeric character, not '{at}'").as_str())
        );
    }
    let src = "[package]\nname = \"w\"\nversion = \"1\"\n[source]\npath = \".\"\n[build]\nrequires = [\"ninja-\"]\n";
    assert_eq!(
        parse("w.toml", src, None).unwrap_err().diags[0].help.as_deref(),
        Some("Package name must end with an alphanumeric character, not '-'")
    );
}

#[test]
fn runtime_env_and_aot_are_read_with_their_templates() {
    let src = format!(
        "{GOOD}\n[runtime]\nenv = {{ ARCHS = \"{{arch.flashinfer}}\", MAX_JOBS = \"{{jobs}}\" }}\n\n\
         [aot]\nscript = \"aot/demo.py\"\nmodules = [\"silu_and_mul\", \"norm\"]\non_request = [\"cutlass_fused_moe\"]\n\
         env = {{ A = \"{{arch.flashinfer}}\" }}\n"
    );
    let r = parse("demo.toml", &src, None).unwrap();
    let names: Vec<&String> = r.runtime_env.keys().collect();
    assert_eq!(names, ["ARCHS", "MAX_JOBS"]);
    assert_eq!(r.runtime_env["MAX_JOBS"].raw(), "{jobs}");
    let aot = r.aot.unwrap();
    assert_eq!(aot.script.path, "aot/demo.py");
    assert_eq!(aot.modules, ["silu_and_mul", "norm"]);
    assert_eq!(aot.on_request, ["cutlass_fused_moe"]);
    assert_eq!(aot.script.env["A"].raw(), "{arch.flashinfer}");
}

#[test]
fn runtime_and_aot_problems_point_at_their_place() {
    let src = format!(
        "{GOOD}\n[runtime]\nenv = {{ \"BAD-NAME\" = \"x\", SRC = \"{{src}}/x\", T = \"{{arch.nope}}\", N = 3 }}\nextra = 1\n\n\
         [aot]\nmodules = [\"ok\", \"no/slash\"]\non_request = [\"ok\"]\n"
    );
    let errs = parse("demo.toml", &src, None).unwrap_err().diags;
    let msgs: Vec<&str> = errs.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        msgs,
        [
            "unknown key `extra` in [runtime]",
            "unknown template variable `{arch.nope}`",
            "`runtime.env.N` must be a string, found integer",
            "`BAD-NAME` is not an environment variable name",
            "`{src}` exists only while a wheel builds, not when runtime.env is read",
            "`no/slash` is not a module name",
            "`ok` is in both `aot.modules` and `aot.on_request`",
            "missing key `aot.script`",
        ]
    );
    // Each points at its own text: file:line:col.
    let at = |i: usize, text: &str| {
        let d = &errs[i];
        let line = src.lines().nth(d.line - 1).unwrap();
        assert!(line[d.column - 1..].starts_with(text), "{}: {line}", d.message);
    };
    at(0, "extra");
    at(1, "{arch.nope}");
    at(3, "\"BAD-NAME\"");
    at(4, "\"{src}/x\"");
    at(5, "\"no/slash\"");
}

#[test]
fn former_names_and_import_packages_are_read_and_checked_where_written() {
    let named = GOOD.replace(
        "name = \"demo\"",
        "name = \"demo\"\nformer = [\"demo-old\", \"Demo_Older\"]\nimport_packages = [\"demo\", \"_demo_c\"]",
    );
    let r = parse("demo.toml", &named, None).unwrap();
    assert_eq!(r.former, ["demo-old", "Demo_Older"]);
    assert_eq!(r.import_packages, ["demo", "_demo_c"]);

    let bad = GOOD.replace(
        "name = \"demo\"",
        "name = \"demo\"\nformer = [\"demo old\", \"Demo\", \"x\", \"X\"]\nimport_packages = [\"demo.ops\", 7]",
    );
    let errs = parse("demo.toml", &bad, None).unwrap_err().diags;
    let got: Vec<(&str, usize, usize)> = errs.iter().map(|e| (e.message.as_str(), e.line, e.column)).collect();
    assert_eq!(
        got,
        [
            ("`demo old` is not a Python distribution name", 4, 11),
            ("`Demo` is the component's own distribution", 4, 23),
            ("`X` is listed twice", 4, 36),
            (
                "`package.import_packages` must be an array of strings, found integer in it",
                5,
                32
            ),
            ("`demo.ops` is not a top-level Python package name", 5, 20),
        ],
        "{errs:?}"
    );
    let toolkit = "[package]\nname = \"cuda\"\nkind = \"cuda-toolkit\"\nformer = [\"cuda-old\"]\n";
    let errs = parse("cuda.toml", toolkit, None).unwrap_err().diags;
    assert_eq!((errs[0].line, errs[0].column), (4, 10), "{errs:?}");
}
