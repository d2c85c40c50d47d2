//! A serving command line, read as the engine would: which engine it starts (a recipe's
//! `[serving] entry`, after an optional interpreter and `VAR=value` prefixes), the model
//! directory, and every `--flag value` / `--flag=value` and environment assignment. It
//! deliberately does not know what a flag means (the facts do) and never reads the process
//! environment.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::recipe::RecipeSet;
use crate::recipe::serving::Selector;

/// A parsed serving command.
#[derive(Debug, Clone, Serialize)]
pub struct ServeCommand {
    /// The component the command starts (`sglang`, `vllm`).
    pub engine: String,
    pub model: Option<String>,
    /// Flag and environment values, by selector (a flag given twice: the last wins, as argparse).
    pub values: BTreeMap<Selector, String>,
}

/// Why a command line is not one kiln can judge.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CmdlineError {
    #[error("no serving command after `--`; e.g. `kiln check -- vllm serve /models/llama`")]
    Empty,
    #[error("`{0}` does not start an engine kiln knows; known: {1}")]
    UnknownEngine(String, String),
    #[error("the command names no model directory (give {0})")]
    NoModel(String),
    #[error("`{0}` needs a value (the engine would refuse the command): write `{0} VALUE` or `{0}=VALUE`")]
    MissingValue(String),
}

/// Whether `word` runs a Python interpreter (`python`, `python3.12`, `/venv/bin/python`).
fn is_python(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    base == "python"
        || base
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Parses `argv` (what followed `--`).
pub fn parse(set: &RecipeSet, argv: &[String]) -> Result<ServeCommand, CmdlineError> {
    let mut values = BTreeMap::new();
    let mut i = 0;
    while let Some((k, v)) = argv.get(i).and_then(|w| w.split_once('=')).filter(|(k, _)| {
        !k.is_empty() && !k.starts_with('-') && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }) {
        values.insert(Selector::Env(k.to_string()), v.to_string());
        i += 1;
    }
    if argv.get(i).is_some_and(|w| w == "env") {
        i += 1;
    }
    if argv.get(i).is_some_and(|w| is_python(w)) {
        i += 1;
    }
    let rest = argv.get(i..).unwrap_or_default();
    if rest.is_empty() {
        return Err(CmdlineError::Empty);
    }
    let mut found = None;
    for r in set.recipes.values() {
        for entry in &r.serving.entry {
            // `python -m X` entries match after the interpreter was skipped.
            let words: &[String] = if entry.first().is_some_and(|w| is_python(w)) {
                &entry[1..]
            } else {
                entry
            };
            if rest.len() >= words.len() && rest[..words.len()] == *words {
                found = Some((r, words.len()));
            }
        }
    }
    let Some((recipe, used)) = found else {
        let known: Vec<String> = set
            .recipes
            .values()
            .flat_map(|r| r.serving.entry.iter().map(|e| e.join(" ")))
            .collect();
        return Err(CmdlineError::UnknownEngine(rest.join(" "), known.join(", ")));
    };
    // Flags kiln has facts for, and the model flags, take a value: one missing is an error here
    // as it is for the engine's argument parser.
    let valued = |flag: &str| {
        recipe.serving.model_flags.iter().any(|f| f == flag)
            || recipe
                .backends
                .iter()
                .any(|b| b.selector == Selector::Flag(flag.to_string()))
    };
    let mut model = None;
    let mut args = rest[used..].iter().peekable();
    let mut first = true;
    while let Some(a) = args.next() {
        if let Some(flag) = a.strip_prefix("--").map(|_| a.as_str()) {
            let (flag, value) = match flag.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => {
                    let v = args.next_if(|n| !n.starts_with("--")).cloned();
                    (flag.to_string(), v)
                }
            };
            let value = match value {
                Some(v) => v,
                None if valued(&flag) => return Err(CmdlineError::MissingValue(flag)),
                None => "true".into(),
            };
            if recipe.serving.model_flags.contains(&flag) {
                model = Some(value.clone());
            }
            values.insert(Selector::Flag(flag), value);
        } else if first && recipe.serving.model_positional && model.is_none() {
            model = Some(a.clone());
        }
        first = false;
    }
    if model.is_none() {
        let mut ways: Vec<String> = recipe.serving.model_flags.clone();
        if recipe.serving.model_positional {
            ways.push("a model path as the first argument".into());
        }
        return Err(CmdlineError::NoModel(ways.join(" or ")));
    }
    Ok(ServeCommand {
        engine: recipe.name.clone(),
        model,
        values,
    })
}
