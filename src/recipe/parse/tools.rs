//! `[requires] tools`: the executables a build runs. Each is a name (`"cargo"`: it must be on
//! `PATH`) or a table that also says where the tool comes from when it is not there
//! ([`crate::recipe::tool::Tool`]): `[[requires.tools]]` lines, or inline tables in the list.
//! It deliberately only reads the recipe: looking the tool up, and bringing it, happen later.

use super::cx::{At, Ctx};
use super::doc::{Item, Table};
use crate::recipe::model::Requires;
use crate::recipe::tool::{Tool, ToolWheel};

const TOOL: &[&str] = &["name", "why", "debian", "path", "wheels"];
const WHEEL: &[&str] = &["machine", "url", "sha256"];
const SECTION: &str = "requires.tools";

/// Reads `tools` of `[requires]` into `requires.tools` (every name) and `requires.tool_sources`
/// (the tables).
pub(super) fn read(cx: &mut Ctx, r: Table<'_>, requires: &mut Requires) {
    let Some(item) = r.get("tools") else {
        return;
    };
    let tables: Vec<(Table<'_>, Option<std::ops::Range<usize>>)> = if let Some(list) = item.as_array_of_tables() {
        list.map(|(t, span)| (t, Some(span))).collect()
    } else if let Some(list) = item.as_array() {
        let mut tables = Vec::new();
        for v in list {
            match (v.as_str(), v.as_table()) {
                (Some(name), _) => requires.tools.push(name.to_string()),
                (None, Some(t)) => tables.push((t, v.span())),
                _ => cx.error(
                    v.span(),
                    format!("`requires.tools` lists names or tables, found {}", v.type_name()),
                    "write a tool as `\"protoc\"` or `{ name = \"protoc\", ... }`",
                ),
            }
        }
        tables
    } else {
        cx.wrong_type(item, "an array of names or tables", "tools", "requires");
        return;
    };
    for (t, header) in tables {
        if let Some(tool) = tool(cx, t, header) {
            requires.tools.push(tool.name.clone());
            requires.tool_sources.push(tool);
        }
    }
}

fn tool(cx: &mut Ctx, t: Table<'_>, header: Option<std::ops::Range<usize>>) -> Option<Tool> {
    cx.check_keys(t, SECTION, TOOL);
    let name = cx.required(t, "name", SECTION, header.clone());
    let text = |s: Option<At<'_>>| s.map(|s| s.value.to_string());
    let why = text(cx.string(t, "why", SECTION));
    let debian = text(cx.string(t, "debian", SECTION));
    let path = cx.string(t, "path", SECTION);
    let wheels = match t.get("wheels") {
        Some(item) => wheels(cx, item),
        None => Vec::new(),
    };
    if let Some(p) = &path
        && (p.value.starts_with('/') || p.value.split('/').any(|c| c == ".." || c.is_empty()))
    {
        cx.error(
            p.span.clone(),
            format!(
                "`requires.tools.path` `{}` must be a relative path inside the wheel",
                p.value
            ),
            "write it as the wheel's RECORD does, e.g. `protoc/data/bin/protoc`",
        );
    }
    if !wheels.is_empty() && path.is_none() {
        cx.error(
            header,
            "a tool with `wheels` needs `path`: the executable inside the wheel".into(),
            "add `path = \"pkg/bin/tool\"`",
        );
    }
    Some(Tool {
        name: name?.value.to_string(),
        why,
        debian,
        path: text(path),
        wheels,
    })
}

fn wheels(cx: &mut Ctx, item: Item<'_>) -> Vec<ToolWheel> {
    let Some(list) = item.as_array() else {
        cx.wrong_type(item, "an array of inline tables", "wheels", SECTION);
        return Vec::new();
    };
    let section = "requires.tools.wheels";
    let mut out = Vec::new();
    for v in list {
        let Some(t) = v.as_table() else {
            cx.wrong_type(v, "an inline table { machine, url, sha256 }", "wheels", SECTION);
            continue;
        };
        cx.check_keys(t, section, WHEEL);
        let machine = cx.required(t, "machine", section, v.span());
        let url = cx.required(t, "url", section, v.span());
        let sha256 = cx.required(t, "sha256", section, v.span());
        if let Some(s) = &sha256
            && !(s.value.len() == 64
                && s.value
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        {
            cx.error(
                s.span.clone(),
                format!("`{section}.sha256` must be 64 lowercase hex digits"),
                "copy it from the index (https://pypi.org/simple/<name>/) or `sha256sum`",
            );
        }
        if let (Some(machine), Some(url), Some(sha256)) = (machine, url, sha256) {
            out.push(ToolWheel {
                machine: machine.value.to_string(),
                url: url.value.to_string(),
                sha256: sha256.value.to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::recipe::parse::parse;

    const HEAD: &str = "[package]\nname = \"r\"\nversion = \"1\"\n[source]\npath = \"x\"\n";
    const SHA: &str = "de310ef63f2ba9374e052857b4406842c1f2299b656f58a2df2b923e2455d80d";

    #[test]
    fn names_and_tables_are_both_tools() {
        let src = format!(
            "{HEAD}[[requires.tools]]\nname = \"cargo\"\n\n[[requires.tools]]\nname = \"protoc\"\n\
             why = \"build.rs\"\ndebian = \"protobuf-compiler\"\npath = \"protoc/data/bin/protoc\"\n\
             wheels = [{{ machine = \"x86_64\", url = \"https://f/p.whl\", sha256 = \"{SHA}\" }}]\n"
        );
        let r = parse("r.toml", &src, None).unwrap();
        assert_eq!(r.requires.tools, ["cargo", "protoc"]);
        let p = &r.requires.tool_sources[1];
        assert_eq!(p.debian.as_deref(), Some("protobuf-compiler"));
        assert_eq!(p.wheels[0].sha256, SHA);

        let inline =
            format!("{HEAD}[requires]\ntools = [\"git\", {{ name = \"protoc\", debian = \"protobuf-compiler\" }}]\n");
        let r = parse("r.toml", &inline, None).unwrap();
        assert_eq!(r.requires.tools, ["git", "protoc"]);
        assert_eq!(r.requires.tool_sources.len(), 1);
    }

    #[test]
    fn a_bad_tool_table_is_reported_at_each_problem() {
        let src = format!(
            "{HEAD}[[requires.tools]]\nnmae = \"protoc\"\npath = \"../bin/protoc\"\n\
             wheels = [{{ machine = \"x86_64\", url = \"https://f/p.whl\", sha256 = \"ABC\" }}]\n"
        );
        let errs = parse("r.toml", &src, None).unwrap_err().diags;
        let msgs: Vec<&str> = errs.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "unknown key `nmae` in [requires.tools]",
                "missing key `requires.tools.name`",
                "`requires.tools.wheels.sha256` must be 64 lowercase hex digits",
                "`requires.tools.path` `../bin/protoc` must be a relative path inside the wheel",
            ]
        );
    }
}
