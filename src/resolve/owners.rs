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
#[derive(Debug, Clone, Serialize)]
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

    /// "sgl-kernel 0.3.21 (sglang-kernel's former distribution name)".
    pub fn describe(&self, component: &str) -> String {
        let why = match &self.via {
            Via::Own => format!("{component}'s own distribution"),
            Via::FormerName => format!("{component}'s former distribution name"),
            Via::OwnsPackage(p) => format!("it has files in {p}/, which {component} owns"),
        };
        format!("{} {} ({why})", self.dist, self.version)
    }
}

/// From [`found`]: the distribution judged when it is not the own one, and the others that
/// share its import packages.
pub fn reported(r: &Recipe, found: &[Found<'_>]) -> (Option<OtherDist>, Vec<OtherDist>) {
    let installed_as = found.first().filter(|f| f.via != Via::Own).map(|f| OtherDist::of(r, f));
    let sharing = found.iter().skip(1).map(|f| OtherDist::of(r, f)).collect();
    (installed_as, sharing)
}

/// Says what `a` is installed as: under another name, the evidence starts with that name, its
/// version, whether the recipe accepts it and (from `arch`) what its binaries hold, whatever the
/// status; with other distributions in its import packages it is `broken`, since each of them
/// can overwrite or, uninstalled, delete the files the other imports.
pub fn judge(
    a: &mut super::Assessment,
    r: &Recipe,
    installed_as: Option<OtherDist>,
    sharing: Vec<OtherDist>,
    arch: Option<&str>,
) {
    if let Some(other) = &installed_as {
        let accepts = if other.accepted {
            format!("a version the recipe accepts ({})", r.accepts_text())
        } else {
            format!("a version the recipe does not accept ({})", r.accepts_text())
        };
        let mut head = format!("installed as {}, {accepts}", other.describe(&r.name));
        if let Some(arch) = arch.filter(|t| !a.evidence.contains(t)) {
            head = format!("{head}; {arch}");
        }
        a.evidence = format!("{head}; {}", a.evidence);
    }
    if !sharing.is_empty() {
        let judged = match &installed_as {
            Some(o) => format!("{} {}", o.dist, o.version),
            None => format!(
                "{} {}",
                r.dist.as_deref().unwrap_or(&r.name),
                a.version.as_deref().unwrap_or("?")
            ),
        };
        let others: Vec<String> = sharing.iter().map(|o| o.describe(&r.name)).collect();
        let packages: Vec<String> = r.import_packages.iter().map(|p| format!("{p}/")).collect();
        let what = if packages.is_empty() {
            "its files".to_string()
        } else {
            packages.join(", ")
        };
        a.status = super::Status::Broken;
        a.evidence = format!(
            "{what} holds files of more than one distribution: {judged} and {}; one distribution per import package, or uninstalling one deletes files the other imports; {}",
            others.join(", "),
            a.evidence
        );
    }
    a.installed_as = installed_as;
    a.sharing = sharing;
}
