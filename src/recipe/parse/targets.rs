//! `[[build.targets]]` and `[[versions.targets]]`: the targets an upstream build compiles, each
//! with its kind, upstream's arch list (`code`), what upstream does when none of those archs is
//! built (`no_arch`) and the upstream lines that say so (`why`). Every problem is reported at its
//! own place.
//!
//! It deliberately does not check the lists against upstream's CMake files (a test reads them
//! from the release's sdist), nor decide what a build compiles (see [`crate::recipe::targets`]).

use super::cx::Ctx;
use super::doc::Table;
use crate::recipe::targets::{ArchCode, NoArch, Target, TargetKind};

const KEYS: &[&str] = &["name", "kind", "code", "no_arch", "why"];

/// The targets under `targets` of `t` (an array of tables), `section` naming it in messages
/// (`build.targets`, `versions.targets`).
pub(super) fn read(cx: &mut Ctx, t: Table<'_>, section: &str) -> Vec<Target> {
    cx.named_tables(
        t,
        "targets",
        section,
        |cx, table, header| one(cx, table, header, section),
        |t| t.name.as_str(),
        |name| {
            (
                format!("build target `{name}` is listed twice"),
                "list each target of one build once",
            )
        },
    )
}

fn one(cx: &mut Ctx, t: Table<'_>, header: std::ops::Range<usize>, section: &str) -> Option<Target> {
    cx.check_keys(t, section, KEYS);
    let name = cx.required(t, "name", section, Some(header.clone()));
    if let Some(n) = &name
        && !valid_name(n.value)
    {
        cx.error(
            n.span.clone(),
            format!("bad build target name `{}`", n.value),
            "the target's name as upstream's build knows it: letters, digits, `_`, `-` and `.`",
        );
    }
    let kind = match cx.string(t, "kind", section) {
        None => Some(TargetKind::Cuda),
        Some(k) => match k.value {
            "cuda" => Some(TargetKind::Cuda),
            "host" => Some(TargetKind::Host),
            "files" => Some(TargetKind::Files),
            other => {
                cx.error(
                    k.span,
                    format!("unknown target kind `{other}`"),
                    "`cuda` (kernels, the default), `host` (host code only) or `files` (copied, not compiled)",
                );
                None
            }
        },
    };
    let code = code(cx, t, section, kind, header.clone());
    let no_arch = match cx.string(t, "no_arch", section) {
        None => Some(NoArch::Skipped),
        Some(n) if kind.is_some_and(|k| k != TargetKind::Cuda) => {
            cx.error(
                n.span,
                "`no_arch` belongs to a `cuda` target".into(),
                "leave it out: a host or files target has no arch list",
            );
            None
        }
        Some(n) => match n.value {
            "skipped" => Some(NoArch::Skipped),
            "compiled" => Some(NoArch::Compiled),
            other => {
                cx.error(
                    n.span,
                    format!("unknown `no_arch` value `{other}`"),
                    "`skipped` (upstream defines an empty target) or `compiled` (upstream compiles it anyway)",
                );
                None
            }
        },
    };
    let why = cx.required(t, "why", section, Some(header));
    if let Some(w) = &why
        && w.value.trim().is_empty()
    {
        cx.error(
            w.span.clone(),
            "`why` of a build target is empty".into(),
            "cite the upstream lines that give its archs (file:line)",
        );
        return None;
    }
    Some(Target {
        name: name.filter(|n| valid_name(n.value))?.value.to_string(),
        kind: kind?,
        code: code?,
        no_arch: no_arch?,
        why: why?.value.to_string(),
    })
}

/// `code`: the arch list of a `cuda` target (required, not empty), absent on the others.
fn code(
    cx: &mut Ctx,
    t: Table<'_>,
    section: &str,
    kind: Option<TargetKind>,
    header: std::ops::Range<usize>,
) -> Option<Vec<ArchCode>> {
    let kind = kind?;
    if kind != TargetKind::Cuda {
        if let Some(i) = t.get("code") {
            cx.error(
                i.span(),
                "`code` belongs to a `cuda` target".into(),
                "leave it out: a host or files target compiles no kernels",
            );
            return None;
        }
        return Some(Vec::new());
    }
    let Some(list) = cx.strings(t, "code", section) else {
        if !t.contains("code") {
            cx.error(
                Some(header),
                format!("missing key `{section}.code`"),
                "list upstream's archs for it, as its CMake files write them: code = [\"9.0a\", \"12.0f\"]",
            );
        }
        return None;
    };
    if list.is_empty() {
        cx.error(
            t.get("code").and_then(|i| i.span()),
            "`code = []` lists no arch".into(),
            "list upstream's archs for it, or make it `kind = \"host\"`",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut clean = true;
    for entry in list {
        match entry.value.parse::<ArchCode>() {
            Ok(c) => out.push(c),
            Err(e) => {
                clean = false;
                cx.error(
                    entry.span,
                    e,
                    "write it as vLLM's CMake files do: `all`, `12.0f`, `9.0a`, `8.0+PTX`",
                );
            }
        }
    }
    clean.then_some(out)
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use crate::recipe::parse::parse;
    use crate::recipe::targets::{NoArch, TargetKind};

    fn parse_recipe(file: &str, src: &str) -> Result<crate::recipe::Recipe, String> {
        parse(file, src, None).map_err(|e| {
            let d = &e.diags[0];
            let line = src.lines().nth(d.line - 1).unwrap_or("");
            format!(
                "{}:{}:{}: {} = help: {:?} | {line}",
                d.file, d.line, d.column, d.message, d.help
            )
        })
    }

    const HEAD: &str = "[package]\nname = \"demo\"\nversion = \"1.0\"\n[source]\npath = \".\"\n";

    #[test]
    fn targets_are_read_and_a_version_lists_its_own() {
        let src = format!(
            "{HEAD}[[build.targets]]\nname = \"_C\"\ncode = [\"all\", \"12.0f\"]\nwhy = \"CMakeLists.txt:1\"\n\
             [[versions]]\nversion = \"1.0\"\n[[versions.targets]]\nname = \"_fa3_C\"\ncode = [\"9.0a\"]\n\
             no_arch = \"compiled\"\nwhy = \"setup.py:2\"\n[[versions.targets]]\nname = \"files\"\nkind = \"files\"\nwhy = \"x:3\"\n"
        );
        let r = parse_recipe("demo.toml", &src).unwrap();
        assert_eq!(r.build.targets.len(), 1);
        assert_eq!(r.build.targets[0].code.len(), 2);
        let v = &r.versions[0];
        assert_eq!(v.targets.len(), 2);
        assert_eq!(v.targets[0].no_arch, NoArch::Compiled);
        assert_eq!(v.targets[1].kind, TargetKind::Files);
        let b = r.build_of(Some(&v.version));
        let names: Vec<&str> = b.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["_fa3_C", "files"], "a version's targets replace the recipe's");
    }

    #[test]
    fn bad_targets_are_refused_at_their_place_with_a_fix() {
        let cases = [
            (
                "name = \"a\"\ncode = [\"12.0x\"]\nwhy = \"w\"\n",
                "not an arch list entry",
            ),
            ("name = \"a\"\nwhy = \"w\"\n", "missing key `build.targets.code`"),
            ("name = \"a\"\ncode = []\nwhy = \"w\"\n", "lists no arch"),
            (
                "name = \"a\"\nkind = \"host\"\ncode = [\"all\"]\nwhy = \"w\"\n",
                "`code` belongs to a `cuda` target",
            ),
            (
                "name = \"a\"\nkind = \"gpu\"\ncode = [\"all\"]\nwhy = \"w\"\n",
                "unknown target kind `gpu`",
            ),
            (
                "name = \"a\"\ncode = [\"all\"]\nno_arch = \"maybe\"\nwhy = \"w\"\n",
                "unknown `no_arch`",
            ),
            (
                "name = \"a\"\ncode = [\"all\"]\nwhy = \" \"\n",
                "`why` of a build target is empty",
            ),
            (
                "name = \"a b\"\ncode = [\"all\"]\nwhy = \"w\"\n",
                "bad build target name",
            ),
        ];
        for (body, want) in cases {
            let src = format!("{HEAD}[[build.targets]]\n{body}");
            let text = parse_recipe("demo.toml", &src).unwrap_err();
            assert!(text.contains(want), "{body}: {text}");
            assert!(text.contains("demo.toml:") && text.contains("help: Some"), "{text}");
        }
        let twice = format!(
            "{HEAD}[[build.targets]]\nname = \"a\"\ncode = [\"all\"]\nwhy = \"w\"\n[[build.targets]]\nname = \"a\"\ncode = [\"all\"]\nwhy = \"w\"\n"
        );
        assert!(parse_recipe("demo.toml", &twice).unwrap_err().contains("listed twice"));
    }
}
