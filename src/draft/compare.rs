//! A draft against the recipe's entry for the same version: field by field (the source, its
//! sha256, the CUDA runtime, each pin the draft found, each wheel and input the recipe lists,
//! each input only the draft has), counting what agrees. It ignores prose (`why`) and what a
//! person chose on purpose is still shown as a difference, for them to confirm.

use super::{Difference, Draft};
use crate::recipe::Recipe;

/// Fills `differences` and `same` against the recipe's entry for the draft's version.
pub(super) fn compare(d: &mut Draft, r: &Recipe) {
    let Ok(v) = d.version.parse::<pep440_rs::Version>() else {
        return;
    };
    let Some(entry) = r.versions.iter().find(|e| e.version == v) else {
        return;
    };
    let mut diffs = Vec::new();
    let mut same = 0usize;
    let mut check = |field: String, recipe: Option<String>, draft: Option<String>| {
        if recipe == draft {
            same += 1;
        } else {
            diffs.push(Difference { field, recipe, draft });
        }
    };
    if let Some(crate::recipe::Source::Wheel { requirement, .. }) = &entry.source {
        check("wheel".into(), Some(requirement.clone()), d.wheel_requirement.clone());
    }
    // A version's own `python` only where it is narrower than the recipe's: compared when
    // the recipe writes one.
    if let Some(py) = &entry.python {
        let ours = d
            .requires_python
            .as_ref()
            .and_then(|p| p.value.parse::<pep440_rs::VersionSpecifiers>().ok());
        check("python".into(), Some(py.to_string()), ours.map(|o| o.to_string()));
    }
    if let Some(rt) = &entry.runtime_cuda {
        let theirs = format!("{}.{}", rt.major, rt.minor);
        check(
            "runtime_cuda".into(),
            Some(theirs),
            d.runtime_cuda.as_ref().map(|c| c.value.clone()),
        );
    }
    if let Some(crate::recipe::Source::Sdist { url, sha256 }) = &entry.source {
        check(
            "sdist".into(),
            Some(url.clone()),
            d.sdist.as_ref().map(|s| s.url.clone()),
        );
        check(
            "sha256".into(),
            Some(sha256.clone()),
            d.sdist.as_ref().map(|s| s.sha256.clone()),
        );
    }
    for p in &d.depends {
        let theirs = entry
            .depends
            .iter()
            .find(|x| x.name == p.component)
            .map(|x| x.spec.as_ref().map_or_else(|| "*".to_string(), |s| s.to_string()));
        check(format!("depends.{}", p.component), theirs, Some(p.spec.clone()));
    }
    for w in &entry.wheels {
        let ours = d.wheels.iter().find(|x| x.url == w.url).map(|x| x.sha256.clone());
        check(format!("wheel {}", w.file), Some(w.sha256.clone()), ours);
    }
    for i in &entry.inputs {
        let ours = d.inputs.iter().find(|x| x.name == i.name);
        let crate::recipe::inputs::InputSource::Git { git, rev, tag, .. } = &i.from else {
            check(
                format!("input {}", i.name),
                Some("archive".into()),
                ours.map(|_| "git".into()),
            );
            continue;
        };
        check(
            format!("input {}.git", i.name),
            Some(git.clone()),
            ours.and_then(|o| o.git.clone()),
        );
        // A recipe may pin the commit of a tag the CMake files name: then the tag must agree.
        match (rev, ours.and_then(|o| o.rev.clone())) {
            (Some(theirs), Some(o)) => check(format!("input {}.rev", i.name), Some(theirs.clone()), Some(o)),
            (None, Some(o)) => check(format!("input {}.rev", i.name), None, Some(o)),
            _ => {}
        }
        if let Some(o) = ours.and_then(|o| o.tag.clone()) {
            check(format!("input {}.tag", i.name), tag.clone(), Some(o));
        }
    }
    for o in &d.inputs {
        if !entry.inputs.iter().any(|i| i.name == o.name) {
            check(
                format!("input {}", o.name),
                None,
                Some(o.git.clone().unwrap_or_default()),
            );
        }
    }
    d.same = same;
    d.differences = Some(diffs);
}
