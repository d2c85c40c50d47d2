//! Which installed distributions are a component: its own distribution, a distribution of one of
//! its former names (`sgl-kernel` for `sglang-kernel`), and any distribution with files in one of
//! the import packages it owns alone (read from `RECORD`s by `probe::owners`).
//!
//! The first one found is the component as installed ([`provider`]): its own distribution when
//! present, else a former name, else the owner of an import package; status judges that one. The
//! others ([`found`] past the first) share a directory with it: one distribution per import package
//! is what an install restores. It deliberately ignores whether an import runs or a binary holds an
//! arch (status judges that) and never touches the disk (the owners were read by the probe).

use serde::Serialize;

use super::reason::Reason;
use crate::probe::normalize;
use crate::probe::python::{Dist, PythonFacts};
use crate::recipe::Recipe;

/// How an installed distribution is related to the component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// The recipe's own `dist`.
    Own,
    /// One of the recipe's `former` names.
    FormerName,
    /// It has files in one of the recipe's `import_packages` (named).
    OwnsPackage(String),
}

/// An installed distribution that is, or overlaps, a component.
#[derive(Debug, Clone)]
pub struct Found<'a> {
    pub dist: &'a Dist,
    pub via: Via,
}

/// Every installed distribution that is or overlaps `r`, each once: its own first, then its
/// former names in the recipe's order, then the owners of its import packages.
pub fn found<'a>(r: &Recipe, py: &'a PythonFacts) -> Vec<Found<'a>> {
    let mut out: Vec<Found<'a>> = Vec::new();
    let mut add = |key: &str, via: Via| {
        if let Some(dist) = py.dists.get(key)
            && !out.iter().any(|f| std::ptr::eq(f.dist, dist))
        {
            out.push(Found { dist, via });
        }
    };
    if let Some(d) = &r.dist {
        add(&normalize(d), Via::Own);
    }
    for f in &r.former {
        add(&normalize(f), Via::FormerName);
    }
    for p in &r.import_packages {
        for owner in py.owners.get(p).into_iter().flatten() {
            add(owner, Via::OwnsPackage(p.clone()));
        }
    }
    out
}

/// The distribution that is `r` as installed (see [`found`]).
pub fn provider<'a>(r: &Recipe, py: &'a PythonFacts) -> Option<Found<'a>> {
    found(r, py).into_iter().next()
}

/// The normalized names of the distributions that may be `r` by name (its own and its former
/// ones): what the probe scans for binaries before it knows who owns what.
pub fn names(r: &Recipe) -> impl Iterator<Item = String> + '_ {
    r.dist.iter().chain(&r.former).map(|d| normalize(d))
}

/// What a report says of a distribution that is not the component's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OtherDist {
    /// As installed (`sgl-kernel`).
    pub dist: String,
    pub version: String,
    /// `former-name`, or `owns-package` with the package.
    pub via: Via,
    /// Whether the recipe's `accepts` admits its version.
    pub accepted: bool,
}

impl OtherDist {
    pub fn of(r: &Recipe, f: &Found<'_>) -> OtherDist {
        let accepted = f
            .dist
            .version
            .parse::<pep440_rs::Version>()
            .is_ok_and(|v| r.accepts_version(&v));
        OtherDist {
            dist: f.dist.name.clone(),
            version: f.dist.version.clone(),
            via: f.via.clone(),
            accepted,
        }
    }
}

/// From [`found`]: the distribution judged when it is not the own one, and the others that
/// share its import packages.
pub fn reported(r: &Recipe, found: &[Found<'_>]) -> (Option<OtherDist>, Vec<OtherDist>) {
    let installed_as = found.first().filter(|f| f.via != Via::Own).map(|f| OtherDist::of(r, f));
    let sharing = found.iter().skip(1).map(|f| OtherDist::of(r, f)).collect();
    (installed_as, sharing)
}

/// Says what `a` is installed as: under another name, its reasons start with
/// [`Reason::InstalledAs`] (that name, its version, whether the recipe accepts it; the evidence
/// then tells what its binaries hold, whatever the status); with other distributions in its
/// import packages it is `broken` ([`Reason::SharedImportPackage`] first), since each of them
/// can overwrite or, uninstalled, delete the files the other imports.
pub fn judge(a: &mut super::Assessment, r: &Recipe, installed_as: Option<OtherDist>, sharing: Vec<OtherDist>) {
    let mut head = Vec::new();
    if !sharing.is_empty() {
        let judged = match &installed_as {
            Some(o) => format!("{} {}", o.dist, o.version),
            None => format!(
                "{} {}",
                r.dist.as_deref().unwrap_or(&r.name),
                a.version.as_deref().unwrap_or("?")
            ),
        };
        head.push(Reason::SharedImportPackage {
            component: r.name.clone(),
            packages: r.import_packages.clone(),
            judged,
            others: sharing.clone(),
        });
    }
    if let Some(other) = &installed_as {
        head.push(Reason::InstalledAs {
            component: r.name.clone(),
            other: other.clone(),
            accepts: r.accepts_text(),
        });
    }
    if !head.is_empty() {
        head.append(&mut a.reasons);
        a.status = super::reason::status_of(&head);
        a.reasons = head;
    }
    a.installed_as = installed_as;
    a.sharing = sharing;
}
