//! Turns the text of one recipe file into a [`Recipe`], collecting every problem in the file.
//!
//! The TOML is read once into a spanned tree ([`doc`]) and walked by hand, one module per table,
//! so that an unknown key, a wrong type, a bad version specifier or an unknown template variable
//! are all reported together, each at its own `file:line:col`. The tables are read in a fixed
//! order, so the problems come out in the same order every time. It deliberately ignores the other
//! recipes: checks that need them (unknown dependencies, cycles) live in [`super::set`].

mod backends;
mod binaries;
#[cfg(test)]
mod binaries_tests;
mod build;
mod cx;
mod depends;
mod doc;
mod inputs;
#[cfg(test)]
mod inputs_tests;
mod limits;
mod package;
mod requires;
mod runtime;
mod source;
mod targets;
#[cfg(test)]
mod tests;
mod tools;
mod verify;
mod versions;
mod wheels;

use std::path::PathBuf;

use super::diag::Diagnostic;
use super::model::{Dependency, Kind, Recipe};
use cx::{Ctx, first_line};
use doc::Table;

pub use versions::MAX_VERSIONS;

const TOP: &[&str] = &[
    "package", "source", "requires", "depends", "build", "install", "verify", "features", "backends", "auto",
    "serving", "versions", "runtime", "aot", "binaries", "limits",
];

/// A file with problems: every diagnostic, and the dependencies that could be read, so that the
/// recipe set can still report unknown dependency names in it.
#[derive(Debug)]
pub struct Rejected {
    pub diags: Vec<Diagnostic>,
    pub depends: Vec<Dependency>,
}

/// Parses one recipe file. `dir` is where relative paths in it resolve (`None` when embedded).
pub fn parse(file: &str, src: &str, dir: Option<PathBuf>) -> Result<Recipe, Rejected> {
    let mut cx = Ctx::new(file, src);
    let doc = match doc::parse(src) {
        Ok(d) => d,
        Err(e) => {
            cx.error(
                e.span,
                format!("invalid TOML: {}", first_line(&e.message)),
                "fix the TOML syntax here (quotes, brackets, one `key = value` per line, no key twice)",
            );
            return Err(Rejected {
                diags: cx.diags,
                depends: Vec::new(),
            });
        }
    };
    let root = Table::root(&doc);
    cx.check_keys(root, "", TOP);
    let package = package::read(&mut cx, root);
    let source = source::read(&mut cx, root);
    let requires = requires::read(&mut cx, root);
    let depends = match cx.table(root, "depends", "") {
        Some(d) => depends::read(&mut cx, d, "depends"),
        None => Vec::new(),
    };
    let build = build::read(&mut cx, root);
    let install_deps = build::install_deps(&mut cx, root);
    let verify = verify::read(&mut cx, root);
    let features = verify::features(&mut cx, root);
    let v = versions::read(&mut cx, root, package.kind, package.version, source.source);
    let (backends, serving) = backends::read(&mut cx, root);
    let runtime_env = runtime::env(&mut cx, root);
    let aot = runtime::aot(&mut cx, root);
    let optional_binaries = binaries::read(&mut cx, root);
    let limits = limits::read(&mut cx, root);
    if let Some(dist) = &package.dist {
        wheels::check_names(&mut cx, &v.versions, dist);
    }

    if package.kind == Kind::Python && v.source.is_none() && !source.reported && !v.reported_no_source {
        cx.error(
            Some(0..0),
            "missing table [source]".into(),
            "a python component needs one of `sdist`, `git`, `path` or `wheel`",
        );
    }
    if package.kind == Kind::CudaToolkit && v.source.is_some() {
        cx.error(
            root.get("source").and_then(|i| i.span()),
            "a `cuda-toolkit` component has no [source]: kiln detects the toolkit, it does not install it".into(),
            "remove [source]",
        );
    }

    let (true, Some(name)) = (cx.diags.is_empty(), package.name) else {
        let mut all = depends;
        all.extend(features.into_values().flat_map(|f| f.depends));
        all.extend(v.versions.into_iter().flat_map(|v| v.depends));
        return Err(Rejected {
            diags: cx.diags,
            depends: all,
        });
    };
    Ok(Recipe {
        name,
        dist: package.dist,
        former: package.former,
        import_packages: package.import_packages,
        companions: package.companions,
        companions_why: package.companions_why,
        kind: package.kind,
        version: v.version,
        accepts: package.accepts,
        accepts_spec: package.accepts_spec,
        summary: package.summary,
        source: v.source,
        requires,
        depends,
        build,
        install_deps,
        imports: verify.imports,
        smoke: verify.smoke,
        jit: verify.jit,
        runtime_env,
        aot,
        features,
        versions: v.versions,
        backends,
        serving,
        optional_binaries,
        limits,
        depends_sorted: Vec::new(),
        file: file.to_string(),
        dir,
    })
}
