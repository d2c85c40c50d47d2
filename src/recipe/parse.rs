//! Turns the text of one recipe file into a [`Recipe`], collecting every problem in the file.
//!
//! The TOML is read with `toml_edit`, which keeps byte spans, and walked by hand so that an
//! unknown key, a wrong type, a bad version specifier or an unknown template variable are all
//! reported together, each at its own `file:line:col`. Checks that need the other recipes
//! (unknown dependencies, cycles) live in [`super::set`].

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};
use toml_edit::{Document, Item, TableLike};

use super::diag::Diagnostic;
use super::model::{Backend, Build, Dependency, Feature, Kind, Recipe, Requires, Rule, Source};
use super::template::{Template, Var};

const TOP: &[&str] = &[
    "package", "source", "requires", "depends", "build", "install", "verify", "features", "backends", "versions",
];
const BACKEND: &[&str] = &["flag", "value", "needs", "arch", "cuda", "why"];
const PACKAGE: &[&str] = &["name", "dist", "kind", "version", "accepts", "summary"];
const SOURCE: &[&str] = &[
    "sdist",
    "sha256",
    "git",
    "rev",
    "subdir",
    "submodules",
    "path",
    "wheel",
    "index_url",
];
const REQUIRES: &[&str] = &["python", "cuda", "gcc", "tools", "rule"];
const RULE: &[&str] = &["arch", "cuda", "unsupported", "why"];
const DEPEND: &[&str] = &["version", "abi", "features"];
const BUILD: &[&str] = &[
    "requires",
    "env",
    "prepare",
    "wheel",
    "memory_per_job",
    "cargo_manifest",
];
const INSTALL: &[&str] = &["deps"];
const VERIFY: &[&str] = &["imports", "smoke"];
const FEATURE: &[&str] = &["summary", "depends", "imports"];

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
    diags: Vec<Diagnostic>,
}

/// A value with where it was written.
struct At<T> {
    value: T,
    span: Option<Range<usize>>,
}

impl<'a> Ctx<'a> {
    fn error(&mut self, span: Option<Range<usize>>, message: String, help: Option<String>) {
        self.diags
            .push(Diagnostic::new(self.file, self.src, span, message, help));
    }

    fn check_keys(&mut self, t: &dyn TableLike, section: &str, allowed: &[&str]) {
        for (k, _) in t.iter() {
            if !allowed.contains(&k) {
                let span = t.get_key_value(k).and_then(|(key, _)| key.span());
                let place = if section.is_empty() {
                    "at the top level".to_string()
                } else {
                    format!("in [{section}]")
                };
                self.error(
                    span,
                    format!("unknown key `{k}` {place}"),
                    Some(format!("expected one of: {}", allowed.join(", "))),
                );
            }
        }
    }

    fn wrong_type(&mut self, item: &Item, what: &str, key: &str, section: &str) {
        let got = item.type_name();
        self.error(
            item.span(),
            format!("`{}` must be {what}, found {got}", dotted(section, key)),
            None,
        );
    }

    fn table<'t>(&mut self, t: &'t dyn TableLike, key: &str, section: &str) -> Option<&'t dyn TableLike> {
        let item = t.get(key)?;
        match item.as_table_like() {
            Some(tt) => Some(tt),
            None => {
                self.wrong_type(item, "a table", key, section);
                None
            }
        }
    }

    fn string(&mut self, t: &dyn TableLike, key: &str, section: &str) -> Option<At<String>> {
        let item = t.get(key)?;
        match item.as_str() {
            Some(s) => Some(At {
                value: s.to_string(),
                span: item.span(),
            }),
            None => {
                self.wrong_type(item, "a string", key, section);
                None
            }
        }
    }

    fn bool(&mut self, t: &dyn TableLike, key: &str, section: &str) -> Option<bool> {
        let item = t.get(key)?;
        match item.as_bool() {
            Some(b) => Some(b),
            None => {
                self.wrong_type(item, "true or false", key, section);
                None
            }
        }
    }

    fn strings(&mut self, t: &dyn TableLike, key: &str, section: &str) -> Option<Vec<At<String>>> {
        let item = t.get(key)?;
        let Some(arr) = item.as_array() else {
            self.wrong_type(item, "an array of strings", key, section);
            return None;
        };
        let mut out = Vec::new();
        for v in arr.iter() {
            match v.as_str() {
                Some(s) => out.push(At {
                    value: s.to_string(),
                    span: v.span(),
                }),
                None => self.error(
                    v.span(),
                    format!(
                        "`{}` must be an array of strings, found {} in it",
                        dotted(section, key),
                        v.type_name()
                    ),
                    None,
                ),
            }
        }
        Some(out)
    }

    fn required(
        &mut self,
        t: &dyn TableLike,
        key: &str,
        section: &str,
        header: Option<Range<usize>>,
    ) -> Option<At<String>> {
        if t.get(key).is_none() {
            self.error(header, format!("missing key `{}`", dotted(section, key)), None);
            return None;
        }
        self.string(t, key, section)
    }

    /// Parses a template, pointing inside the string when it was written without escapes.
    fn template(&mut self, s: &At<String>) -> Option<Template> {
        match Template::parse(&s.value) {
            Ok(t) => Some(t),
            Err(e) => {
                let span = s.span.clone().map(|sp| {
                    let inner = sp.start + 1..sp.end.saturating_sub(1);
                    if self.src.get(inner.clone()) == Some(s.value.as_str()) {
                        inner.start + e.offset..inner.start + e.offset + e.len
                    } else {
                        sp
                    }
                });
                self.error(
                    span,
                    e.message,
                    Some(format!("known variables: {}", Var::all_names().join(", "))),
                );
                None
            }
        }
    }

    fn semver_req(&mut self, s: &At<String>, what: &str) -> Option<semver::VersionReq> {
        match semver::VersionReq::parse(&s.value) {
            Ok(r) => Some(r),
            Err(e) => {
                self.error(
                    s.span.clone(),
                    format!("bad version requirement `{}` for {what}", s.value),
                    Some(format!("{e}; expected something like `>=12.8`")),
                );
                None
            }
        }
    }

    fn specifiers(&mut self, s: &At<String>, what: &str) -> Option<VersionSpecifiers> {
        let text = s.value.trim();
        if text.is_empty() || text == "*" {
            return Some(VersionSpecifiers::from_iter(std::iter::empty()));
        }
        match VersionSpecifiers::from_str(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.error(
                    s.span.clone(),
                    format!("bad version specifier `{}` for {what}", s.value),
                    Some(format!(
                        "{}; expected PEP 440 specifiers such as `>=2.7`, `==0.7.4` or `>=0.6,<0.8`",
                        first_line(&e.to_string())
                    )),
                );
                None
            }
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim_end_matches(':')
}

fn dotted(section: &str, key: &str) -> String {
    if section.is_empty() {
        key.to_string()
    } else {
        format!("{section}.{key}")
    }
}

/// The most `[[versions]]` one recipe may list.
pub const MAX_VERSIONS: usize = 63;

fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim() {
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GB" => 1e9,
        "MB" => 1e6,
        _ => return None,
    };
    Some((num * mult) as u64)
}

/// A file with problems: every diagnostic, and the dependencies that could be read, so that the
/// recipe set can still report unknown dependency names in it.
#[derive(Debug)]
pub struct Rejected {
    pub diags: Vec<Diagnostic>,
    pub depends: Vec<Dependency>,
}

/// Parses one recipe file. `dir` is where relative paths in it resolve (`None` when embedded).
pub fn parse(file: &str, src: &str, dir: Option<PathBuf>) -> Result<Recipe, Rejected> {
    let mut cx = Ctx {
        file,
        src,
        diags: Vec::new(),
    };
    let doc = match Document::parse(src) {
        Ok(d) => d,
        Err(e) => {
            cx.error(e.span(), format!("invalid TOML: {}", first_line(e.message())), None);
            return Err(Rejected {
                diags: cx.diags,
                depends: Vec::new(),
            });
        }
    };
    let root: &dyn TableLike = doc.as_table();
    cx.check_keys(root, "", TOP);

    // [package]
    let mut name = None;
    let mut dist = None;
    let mut kind = Kind::Python;
    let mut version = None;
    let mut accepts = None;
    let mut accepts_spec = None;
    let mut summary = String::new();
    match cx.table(root, "package", "") {
        None => cx.error(
            Some(0..0),
            "missing table [package]".into(),
            Some("every recipe starts with [package] name = \"...\"".into()),
        ),
        Some(p) => {
            let header = doc.get("package").and_then(Item::span);
            cx.check_keys(p, "package", PACKAGE);
            name = cx.required(p, "name", "package", header.clone());
            if let Some(k) = cx.string(p, "kind", "package") {
                match k.value.as_str() {
                    "python" => kind = Kind::Python,
                    "cuda-toolkit" => kind = Kind::CudaToolkit,
                    other => cx.error(
                        k.span,
                        format!("unknown kind `{other}`"),
                        Some("expected `python` (default) or `cuda-toolkit`".into()),
                    ),
                }
            }
            dist = cx.string(p, "dist", "package").map(|s| s.value);
            if let Some(v) = cx.string(p, "version", "package") {
                match Version::from_str(&v.value) {
                    Ok(ver) => version = Some(ver),
                    Err(e) => cx.error(
                        v.span,
                        format!("bad version `{}`", v.value),
                        Some(format!(
                            "{}; expected a PEP 440 version such as `0.7.4` or `2.14.1`",
                            first_line(&e.to_string())
                        )),
                    ),
                }
            } else if kind == Kind::Python && p.get("version").is_none() && root.get("versions").is_none() {
                cx.error(
                    header.clone(),
                    "missing key `package.version`".into(),
                    Some("the version kiln installs when it must".into()),
                );
            }
            if let Some(a) = cx.string(p, "accepts", "package") {
                accepts_spec = cx.specifiers(&a, "package.accepts");
                accepts = Some(a.value);
            }
            summary = cx.string(p, "summary", "package").map(|s| s.value).unwrap_or_default();
            if kind == Kind::Python && dist.is_none() {
                dist = name.as_ref().map(|n: &At<String>| n.value.clone());
            }
        }
    }

    // [source]
    let mut source = None;
    if let Some(t) = cx.table(root, "source", "") {
        cx.check_keys(t, "source", SOURCE);
        source = parse_source(&mut cx, t, "source", doc.get("source").and_then(Item::span));
    }

    // [requires]
    let mut requires = Requires::default();
    if let Some(r) = cx.table(root, "requires", "") {
        cx.check_keys(r, "requires", REQUIRES);
        if let Some(p) = cx.string(r, "python", "requires") {
            requires.python_spec = cx.specifiers(&p, "requires.python");
            requires.python = Some(p.value);
        }
        if let Some(c) = cx.string(r, "cuda", "requires") {
            match semver::VersionReq::parse(&c.value) {
                Ok(req) => requires.cuda_req = Some(req),
                Err(e) => cx.error(
                    c.span.clone(),
                    format!("bad CUDA version requirement `{}`", c.value),
                    Some(format!("{e}; expected something like `>=12.8`")),
                ),
            }
            requires.cuda = Some(c.value);
        }
        if let Some(g) = cx.string(r, "gcc", "requires") {
            requires.gcc_req = cx.semver_req(&g, "requires.gcc");
            requires.gcc = Some(g.value);
        }
        if let Some(item) = r.get("rule") {
            match item.as_array_of_tables() {
                Some(arr) => {
                    for t in arr.iter() {
                        if let Some(rule) = parse_rule(&mut cx, t) {
                            requires.rules.push(rule);
                        }
                    }
                }
                None => cx.wrong_type(item, "an array of tables ([[requires.rule]])", "rule", "requires"),
            }
        }
        requires.tools = cx
            .strings(r, "tools", "requires")
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.value)
            .collect();
    }

    // [depends]
    let depends = match cx.table(root, "depends", "") {
        Some(d) => parse_depends(&mut cx, d, "depends"),
        None => Vec::new(),
    };

    // [build]
    let mut build = Build::default();
    if let Some(b) = cx.table(root, "build", "") {
        cx.check_keys(b, "build", BUILD);
        for r in cx.strings(b, "requires", "build").unwrap_or_default() {
            match pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(&r.value) {
                Ok(_) => build.requires.push(r.value),
                Err(e) => cx.error(
                    r.span,
                    format!("bad requirement `{}` in build.requires", r.value),
                    Some(first_line(&e.to_string()).to_string()),
                ),
            }
        }
        if let Some(env) = cx.table(b, "env", "build") {
            for (k, item) in env.iter() {
                match item.as_str() {
                    Some(v) => {
                        let at = At {
                            value: v.to_string(),
                            span: item.span(),
                        };
                        if let Some(t) = cx.template(&at) {
                            build.env.insert(k.to_string(), t);
                        }
                    }
                    None => cx.wrong_type(item, "a string", k, "build.env"),
                }
            }
        }
        if let Some(item) = b.get("prepare") {
            match item.as_array() {
                Some(arr) => {
                    for cmd in arr.iter() {
                        match cmd.as_array() {
                            Some(args) if !args.is_empty() => {
                                let mut out = Vec::new();
                                for a in args.iter() {
                                    match a.as_str() {
                                        Some(s) => {
                                            if let Some(t) = cx.template(&At {
                                                value: s.to_string(),
                                                span: a.span(),
                                            }) {
                                                out.push(t);
                                            }
                                        }
                                        None => cx.error(
                                            a.span(),
                                            format!("a command argument must be a string, found {}", a.type_name()),
                                            None,
                                        ),
                                    }
                                }
                                build.prepare.push(out);
                            }
                            _ => cx.error(
                                cmd.span(),
                                "`build.prepare` must be an array of commands, each an array of strings".into(),
                                Some("e.g. prepare = [[\"{python}\", \"tools/use_existing_torch.py\"]]".into()),
                            ),
                        }
                    }
                }
                None => cx.wrong_type(item, "an array of commands", "prepare", "build"),
            }
        }
        if let Some(args) = cx.strings(b, "wheel", "build") {
            if args.is_empty() {
                cx.error(
                    b.get("wheel").and_then(Item::span),
                    "`build.wheel` must not be empty".into(),
                    None,
                );
            }
            build.wheel = Some(args.iter().filter_map(|a| cx.template(a)).collect());
        }
        if let Some(m) = cx.string(b, "memory_per_job", "build") {
            match parse_bytes(&m.value) {
                Some(n) if n > 0 => build.memory_per_job = Some(n),
                _ => cx.error(
                    m.span,
                    format!("bad size `{}`", m.value),
                    Some("expected a size such as `4GiB` or `512MiB`".into()),
                ),
            }
        }
        build.cargo_manifest = cx.string(b, "cargo_manifest", "build").map(|s| s.value);
    }

    let mut install_deps = false;
    if let Some(i) = cx.table(root, "install", "") {
        cx.check_keys(i, "install", INSTALL);
        install_deps = cx.bool(i, "deps", "install").unwrap_or(false);
    }

    let mut imports = Vec::new();
    let mut smoke = None;
    if let Some(v) = cx.table(root, "verify", "") {
        cx.check_keys(v, "verify", VERIFY);
        imports = module_names(&mut cx, v, "verify");
        // The script itself is read with the rest of the set (embedded or from the directory).
        smoke = cx.string(v, "smoke", "verify").map(|s| super::model::Smoke {
            path: s.value,
            text: String::new(),
            span: s.span,
        });
    }

    let mut features = BTreeMap::new();
    if let Some(fs) = cx.table(root, "features", "") {
        for (fname, item) in fs.iter() {
            let section = format!("features.{fname}");
            let Some(f) = item.as_table_like() else {
                cx.wrong_type(item, "a table", fname, "features");
                continue;
            };
            cx.check_keys(f, &section, FEATURE);
            let summary = cx.string(f, "summary", &section).map(|s| s.value).unwrap_or_default();
            let depends = match cx.table(f, "depends", &section) {
                Some(d) => parse_depends(&mut cx, d, &format!("{section}.depends")),
                None => Vec::new(),
            };
            let imports = module_names(&mut cx, f, &section);
            features.insert(
                fname.to_string(),
                Feature {
                    summary,
                    depends,
                    imports,
                },
            );
        }
    }

    let mut versions = Vec::new();
    if let Some(item) = root.get("versions") {
        match item.as_array_of_tables() {
            Some(arr) => {
                for (i, t) in arr.iter().enumerate() {
                    // The solver holds a component's candidates (these and the installed one)
                    // as bits of one 64-bit word.
                    if i == MAX_VERSIONS {
                        cx.error(
                            t.span(),
                            format!("more than {MAX_VERSIONS} [[versions]]"),
                            Some("keep the versions people may still need; older ones belong in another recipe".into()),
                        );
                    }
                    let allowed: Vec<&str> = ["version", "depends"].iter().chain(SOURCE).copied().collect();
                    cx.check_keys(t, "versions", &allowed);
                    let header = t.span();
                    let v = cx.required(t, "version", "versions", header.clone());
                    let parsed = v.as_ref().and_then(|v| match Version::from_str(&v.value) {
                        Ok(x) => Some(x),
                        Err(e) => {
                            cx.error(
                                v.span.clone(),
                                format!("bad version `{}`", v.value),
                                Some(first_line(&e.to_string()).to_string()),
                            );
                            None
                        }
                    });
                    let has_source = ["sdist", "git", "path", "wheel"].iter().any(|k| t.get(k).is_some());
                    let own_source = if has_source {
                        parse_source(&mut cx, t, "versions", header.clone())
                    } else {
                        source.clone()
                    };
                    if own_source.is_none() && kind == Kind::Python && !has_source {
                        cx.error(
                            header.clone(),
                            "this version names no source and the recipe has no [source]".into(),
                            Some("add `sdist`/`git`/`path`/`wheel` to the entry".into()),
                        );
                    }
                    let deps = match cx.table(t, "depends", "versions") {
                        Some(d) => parse_depends(&mut cx, d, "versions.depends"),
                        None => Vec::new(),
                    };
                    if let Some(version) = parsed {
                        versions.push(super::model::VersionEntry {
                            version,
                            source: own_source,
                            depends: deps,
                        });
                    }
                }
            }
            None => cx.wrong_type(item, "an array of tables ([[versions]])", "versions", ""),
        }
        if let (Some(first), true) = (versions.first(), version.is_none()) {
            version = Some(first.version.clone());
        }
        if source.is_none() {
            source = versions.first().and_then(|e| e.source.clone());
        }
    } else if let Some(v) = &version {
        versions.push(super::model::VersionEntry {
            version: v.clone(),
            source: source.clone(),
            depends: Vec::new(),
        });
    }

    let mut backends = Vec::new();
    if let Some(item) = root.get("backends") {
        match item.as_array_of_tables() {
            Some(arr) => {
                for t in arr.iter() {
                    if let Some(b) = parse_backend(&mut cx, t) {
                        backends.push(b);
                    }
                }
            }
            None => cx.wrong_type(item, "an array of tables ([[backends]])", "backends", ""),
        }
    }

    if kind == Kind::Python && source.is_none() && !cx.diags.iter().any(|d| d.message.contains("[source]")) {
        cx.error(
            Some(0..0),
            "missing table [source]".into(),
            Some("a python component needs one of `sdist`, `git`, `path` or `wheel`".into()),
        );
    }
    if kind == Kind::CudaToolkit && source.is_some() {
        cx.error(
            doc.get("source").and_then(Item::span),
            "a `cuda-toolkit` component has no [source]: kiln detects the toolkit, it does not install it".into(),
            None,
        );
    }

    if !cx.diags.is_empty() || name.is_none() {
        let mut all = depends;
        all.extend(features.into_values().flat_map(|f: Feature| f.depends));
        all.extend(versions.into_iter().flat_map(|v: super::model::VersionEntry| v.depends));
        return Err(Rejected {
            diags: cx.diags,
            depends: all,
        });
    }
    let Some(name) = name else {
        unreachable!("checked above")
    };
    Ok(Recipe {
        name: name.value,
        dist,
        kind,
        version,
        accepts,
        accepts_spec,
        summary,
        source,
        requires,
        depends,
        build,
        install_deps,
        imports,
        smoke,
        features,
        versions,
        backends,
        depends_sorted: Vec::new(),
        file: file.to_string(),
        dir,
    })
}

fn parse_source(cx: &mut Ctx, s: &dyn TableLike, section: &str, header: Option<Range<usize>>) -> Option<Source> {
    {
        let kinds: Vec<&str> = ["sdist", "git", "path", "wheel"]
            .into_iter()
            .filter(|k| s.get(k).is_some())
            .collect();
        if kinds.len() != 1 {
            cx.error(
                header,
                if kinds.is_empty() {
                    format!("[{section}] names no source")
                } else {
                    format!("[{section}] names {} sources ({})", kinds.len(), kinds.join(", "))
                },
                Some("give exactly one of `sdist`, `git`, `path` or `wheel`".into()),
            );
            None
        } else {
            match kinds[0] {
                "sdist" => {
                    let url = cx.string(s, "sdist", section);
                    let sha = cx.required(s, "sha256", section, s.get("sdist").and_then(Item::span));
                    if let Some(sha) = &sha
                        && (sha.value.len() != 64 || !sha.value.bytes().all(|b| b.is_ascii_hexdigit()))
                    {
                        cx.error(sha.span.clone(), "`source.sha256` must be 64 hex digits".into(), None);
                    }
                    match (url, sha) {
                        (Some(u), Some(h)) => Some(Source::Sdist {
                            url: u.value,
                            sha256: h.value.to_ascii_lowercase(),
                        }),
                        _ => None,
                    }
                }
                "git" => {
                    let url = cx.string(s, "git", section);
                    let rev = cx.required(s, "rev", section, s.get("git").and_then(Item::span));
                    let subdir = cx.string(s, "subdir", section).map(|x| x.value);
                    let submodules = cx.bool(s, "submodules", section).unwrap_or(false);
                    match (url, rev) {
                        (Some(u), Some(r)) => Some(Source::Git {
                            url: u.value,
                            rev: r.value,
                            subdir,
                            submodules,
                        }),
                        _ => None,
                    }
                }
                "path" => cx.string(s, "path", section).map(|p| Source::Path {
                    path: PathBuf::from(p.value),
                }),
                _ => {
                    let req = cx.string(s, "wheel", section);
                    if let Some(r) = &req
                        && let Err(e) = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(&r.value)
                    {
                        cx.error(
                            r.span.clone(),
                            format!("bad requirement `{}`", r.value),
                            Some(first_line(&e.to_string()).to_string()),
                        );
                    }
                    let index_url = cx.string(s, "index_url", section).map(|x| x.value);
                    req.map(|r| Source::Wheel {
                        requirement: r.value,
                        index_url,
                    })
                }
            }
        }
    }
}

fn parse_rule(cx: &mut Ctx, t: &toml_edit::Table) -> Option<Rule> {
    let section = "requires.rule";
    cx.check_keys(t, section, RULE);
    let header = t.span();
    let why = cx.required(t, "why", section, header.clone());
    let mut arch = Vec::new();
    for a in cx.strings(t, "arch", section).unwrap_or_default() {
        match a.value.parse::<crate::arch::Arch>() {
            Ok(x) => arch.push(x),
            Err(e) => cx.error(a.span, e.to_string(), None),
        }
    }
    if arch.is_empty() {
        cx.error(
            header.clone(),
            "a [[requires.rule]] needs `arch`: the target archs it applies to".into(),
            None,
        );
    }
    let cuda = cx.string(t, "cuda", section);
    let cuda_req = cuda.as_ref().and_then(|c| cx.semver_req(c, "requires.rule.cuda"));
    let unsupported = cx.bool(t, "unsupported", section).unwrap_or(false);
    if cuda.is_none() && !unsupported {
        cx.error(
            header,
            "a [[requires.rule]] needs `cuda` or `unsupported = true`".into(),
            None,
        );
    }
    Some(Rule {
        arch,
        cuda: cuda.map(|c| c.value),
        cuda_req,
        unsupported,
        why: why?.value,
    })
}

fn parse_backend(cx: &mut Ctx, t: &toml_edit::Table) -> Option<Backend> {
    let section = "backends";
    cx.check_keys(t, section, BACKEND);
    let header = t.span();
    let flag = cx.required(t, "flag", section, header.clone());
    let value = cx.required(t, "value", section, header.clone());
    let why = cx.required(t, "why", section, header.clone());
    let mut needs = Vec::new();
    for n in cx.strings(t, "needs", section).unwrap_or_default() {
        match pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(&n.value) {
            Ok(req) if req.version_or_url.is_none() => {
                needs.push((req.name.to_string(), req.extras.iter().map(|e| e.to_string()).collect()));
            }
            _ => cx.error(
                n.span,
                format!("`{}` is not a component name with optional features", n.value),
                Some("e.g. \"flashinfer[cutedsl]\"".into()),
            ),
        }
    }
    let arch = match cx.strings(t, "arch", section) {
        None => None,
        Some(list) => {
            let mut out = Vec::new();
            for a in list {
                match a.value.parse::<crate::arch::Arch>() {
                    Ok(x) => out.push(x),
                    Err(e) => cx.error(a.span, e.to_string(), None),
                }
            }
            Some(out)
        }
    };
    let mut cuda_req = None;
    let cuda = cx.string(t, "cuda", section).map(|c| {
        match semver::VersionReq::parse(&c.value) {
            Ok(r) => cuda_req = Some(r),
            Err(e) => cx.error(
                c.span.clone(),
                format!("bad CUDA version requirement `{}`", c.value),
                Some(e.to_string()),
            ),
        }
        c.value
    });
    Some(Backend {
        flag: flag?.value,
        value: value?.value,
        needs,
        arch,
        cuda,
        cuda_req,
        why: why?.value,
        span: header,
    })
}

fn module_names(cx: &mut Ctx, t: &dyn TableLike, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    for m in cx.strings(t, "imports", section).unwrap_or_default() {
        let ok = !m.value.is_empty()
            && m.value.split('.').all(|p| {
                !p.is_empty()
                    && !p.starts_with(|c: char| c.is_ascii_digit())
                    && p.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
        if ok {
            out.push(m.value);
        } else {
            cx.error(
                m.span,
                format!("`{}` is not a Python module name", m.value),
                Some("expected a dotted name such as `flashinfer.cute_dsl`".into()),
            );
        }
    }
    out
}

fn parse_depends(cx: &mut Ctx, t: &dyn TableLike, section: &str) -> Vec<Dependency> {
    let mut out = Vec::new();
    for (name, item) in t.iter() {
        let key_span = t.get_key_value(name).and_then(|(k, _)| k.span());
        let mut dep = Dependency {
            name: name.to_string(),
            version: None,
            spec: None,
            abi: false,
            features: Vec::new(),
            span: key_span,
        };
        let what = format!("dependency `{name}`");
        if let Some(s) = item.as_str() {
            let at = At {
                value: s.to_string(),
                span: item.span(),
            };
            dep.spec = cx.specifiers(&at, &what);
            dep.version = Some(s.to_string());
        } else if let Some(tt) = item.as_table_like() {
            let sub = format!("{section}.{name}");
            cx.check_keys(tt, &sub, DEPEND);
            if let Some(v) = cx.string(tt, "version", &sub) {
                dep.spec = cx.specifiers(&v, &what);
                dep.version = Some(v.value);
            }
            dep.abi = cx.bool(tt, "abi", &sub).unwrap_or(false);
            dep.features = cx
                .strings(tt, "features", &sub)
                .unwrap_or_default()
                .into_iter()
                .map(|f| f.value)
                .collect();
        } else {
            cx.wrong_type(
                item,
                "a version specifier string or a table { version, abi, features }",
                name,
                section,
            );
            continue;
        }
        if dep
            .version
            .as_deref()
            .is_some_and(|v| v.trim().is_empty() || v.trim() == "*")
        {
            dep.version = None;
            dep.spec = None;
        }
        out.push(dep);
    }
    out
}

#[cfg(test)]
mod tests {
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
}
