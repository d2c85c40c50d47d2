//! What the user says they need (`--need BACKEND`, `KILN_NEED`): backends of the consumers in
//! scope, named as the engine's command line names them (`--quantization=fp_quant`), or by the
//! bare value where only one flag of those consumers offers it (`fp_quant`).
//!
//! A need makes the CUDA binaries its backend names in `binaries` required ([`super::kernels`]):
//! a prebuilt wheel without their arch is then unfit and the step builds, and an installed
//! component without it is `wrong-arch`. Without the need those binaries are only reported as
//! unavailable on that arch. It deliberately does not judge whether the backend works (the
//! backend verdicts do) nor which of the consumer's versions offers it (a need names the backend,
//! not a version of it).

use std::fmt;

use serde::Serialize;

use crate::recipe::Backend;
use crate::recipe::RecipeSet;

/// One backend the user needs: `--quantization=fp_quant`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Need {
    pub flag: String,
    pub value: String,
}

impl Need {
    /// Whether `b` is this backend (of whichever consumer offers it).
    pub fn names(&self, b: &Backend) -> bool {
        b.selector.name() == self.flag && b.value == self.value
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.flag, self.value)
    }
}

/// The needs `asked` (each `FLAG=VALUE` or a bare `VALUE`), checked against the backends of the
/// components in `scope`; an unknown or ambiguous one is an error that lists the known ones.
pub fn resolve(set: &RecipeSet, scope: &[(String, Vec<String>)], asked: &[String]) -> Result<Vec<Need>, String> {
    let mut known: Vec<Need> = scope
        .iter()
        .filter_map(|(n, _)| set.get(n))
        .flat_map(|r| &r.backends)
        .map(|b| Need {
            flag: b.selector.name().to_string(),
            value: b.value.clone(),
        })
        .collect();
    known.sort();
    known.dedup();
    let listed = || {
        if known.is_empty() {
            "the components in scope declare no backends".to_string()
        } else {
            format!(
                "known: {}",
                known.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
            )
        }
    };
    let mut out: Vec<Need> = Vec::new();
    for text in asked.iter().map(|a| a.trim()).filter(|a| !a.is_empty()) {
        let matching: Vec<&Need> = match text.split_once('=') {
            Some((flag, value)) => known.iter().filter(|k| k.flag == flag && k.value == value).collect(),
            None => known.iter().filter(|k| k.value == text).collect(),
        };
        match matching.as_slice() {
            [one] => {
                if !out.contains(one) {
                    out.push((*one).clone());
                }
            }
            [] => {
                let scope: Vec<&str> = scope.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "--need `{text}`: no backend of {} is called that; {}",
                    scope.join(", "),
                    listed()
                ));
            }
            many => {
                return Err(format!(
                    "--need `{text}` is ambiguous: {}; name one as FLAG=VALUE",
                    many.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_are_named_by_flag_and_value_or_by_an_unambiguous_value() {
        let set = RecipeSet::embedded().unwrap();
        let scope = set.closure(&[("vllm".to_string(), Vec::new())]);
        let fp = Need {
            flag: "--quantization".into(),
            value: "fp_quant".into(),
        };
        let asked = |a: &[&str]| resolve(&set, &scope, &a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(asked(&["--quantization=fp_quant"]).unwrap(), std::slice::from_ref(&fp));
        assert_eq!(asked(&["fp_quant", "--quantization=fp_quant"]).unwrap(), [fp]);
        let e = asked(&["fp_qant"]).unwrap_err();
        assert!(e.starts_with("--need `fp_qant`: no backend of "), "{e}");
        assert!(e.contains("known: ") && e.contains("--quantization=fp_quant"), "{e}");
        assert!(e.contains("--moe-backend=marlin"), "{e}");
        let e = asked(&["--moe-backend=fp_quant"]).unwrap_err();
        assert!(e.contains("no backend"), "{e}");
    }
}
