//! A session and a lockfile: what `kiln lock` records of a proven environment, and the pieces
//! of `kiln install --locked` (the lock's targets and archs, pinning the recipes, marking what
//! was built from another source stale, comparing the result with the lock). It deliberately
//! ignores reading and writing the file (that is `lock`) and what is printed.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Session, SessionError};
use crate::arch::Arch;
use crate::lock::{self, Difference, Environment, Lock, Locked};
use crate::recipe::{Kind, RecipeSet};
use crate::resolve::{Reason, Status};

/// Why `kiln lock` writes nothing.
#[derive(Debug)]
pub enum Unlockable {
    /// Components in scope that are not proven, each with why.
    NotProven(Vec<Refused>),
    /// No component kiln knows is installed.
    Nothing,
}

/// A component `kiln lock` refuses: not `ok` (its status and reasons), or asked for by name and
/// not installed (`status` = `None`).
#[derive(Debug, Clone)]
pub struct Refused {
    pub name: String,
    pub status: Option<Status>,
    pub reasons: Vec<Reason>,
}

/// The targets of a locked install: the lock's components (or those named, which must be in
/// it), each pinned to its locked version.
pub fn targets(lock: &Lock, targets: &[String], path: &Path) -> Result<Vec<String>, SessionError> {
    if targets.is_empty() {
        return Ok(lock.components.iter().map(Locked::target).collect());
    }
    targets
        .iter()
        .map(|t| {
            let req = super::targets::requirement(t)?;
            if req.version_or_url.is_some() {
                return Err(SessionError::Usage(format!(
                    "`{t}`: with --locked the version comes from {}; name the component only",
                    path.display()
                )));
            }
            let name = req.name.to_string();
            let mut locked = lock
                .components
                .iter()
                .find(|c| c.name == name)
                .cloned()
                .ok_or_else(|| {
                    SessionError::Usage(format!(
                        "{name} is not in {}; `kiln lock {name}` adds it",
                        path.display()
                    ))
                })?;
            // The features it was locked with, and any the user names besides.
            for e in req.extras.iter().map(|e| e.to_string()) {
                if !locked.features.contains(&e) {
                    locked.features.push(e);
                }
            }
            Ok(locked.target())
        })
        .collect()
}

/// Where the target archs of a locked install came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchsFrom {
    /// `--arch`, naming the lock's.
    Given,
    /// The lock's `[environment] archs`.
    Lock,
    /// The archs every component kiln installed was built for (a lock written without
    /// `--arch` on a machine without those GPUs records none in `[environment]`).
    Components,
    /// Neither the lock nor `--arch` names any: the GPUs found.
    Gpus,
    /// `--arch`, naming other archs than the lock's: what was built for the lock's is built
    /// again for these, and the lock is reproduced in all but its archs.
    Overridden,
}

/// The archs a lock was made for: its `[environment] archs`, else the one set its components
/// were built for (empty when neither says), and which of the two it was.
pub fn archs_of(lock: &Lock) -> (Vec<Arch>, ArchsFrom) {
    if lock.environment.archs.is_empty() {
        let of = component_archs(lock.components.iter().map(|c| c.archs.as_slice()));
        (of.unwrap_or_default(), ArchsFrom::Components)
    } else {
        (lock.environment.archs.clone(), ArchsFrom::Lock)
    }
}

/// The one set of archs the components kiln installed were built or installed for, when they
/// agree on one (components of no arch, like `installed` ones, say nothing).
pub fn component_archs<'a>(archs: impl IntoIterator<Item = &'a [Arch]>) -> Option<Vec<Arch>> {
    let mut sets: Vec<&[Arch]> = archs.into_iter().filter(|a| !a.is_empty()).collect();
    sets.dedup();
    match sets.as_slice() {
        [one] => Some(one.to_vec()),
        _ => None,
    }
}

/// The archs of a locked install: the lock's (else those its components were built for), unless
/// `given` (`--arch`). A bundle made for 9.0 and 12.0 installs for both on a node with one GPU,
/// so that the wheel keys, and the bundled wheels, are the lock's; `--arch` naming others
/// builds again for those what was built for the lock's.
pub fn archs(lock: &Lock, given: Option<&[Arch]>) -> (Option<Vec<Arch>>, ArchsFrom) {
    let (locked, from) = archs_of(lock);
    match given {
        None if locked.is_empty() => (None, ArchsFrom::Gpus),
        None => (Some(locked), from),
        Some(a) if a == locked.as_slice() => (Some(a.to_vec()), ArchsFrom::Given),
        Some(a) => (Some(a.to_vec()), ArchsFrom::Overridden),
    }
}

/// Pins the recipes to the lock's sources ([`lock::pin_sources`]).
pub fn pin(set: &mut RecipeSet, lock: &Lock, path: &Path) -> Result<(), SessionError> {
    lock::pin_sources(set, lock).map_err(|problems| {
        SessionError::Lock(format!(
            "{} cannot be reproduced with these recipes:\n  - {}\n  use the recipes it was made with (--recipes DIR), or install from these and write a new lock with `kiln lock`",
            path.display(),
            problems.join("\n  - ")
        ))
    })
}

impl Session {
    /// The archs the installed components the verdict judges were built for, when they agree on one set
    /// ([`component_archs`]): what `kiln lock` without `--arch` locks them for.
    pub fn installed_archs(&self) -> Option<Vec<Arch>> {
        // The components the verdict judges: what only another version pins is not locked.
        let records: Vec<Locked> = self.assessments.iter().filter_map(|a| self.locked(&a.name)).collect();
        component_archs(records.iter().map(|l| l.archs.as_slice()))
    }

    /// What is installed for component `name`, as a lock would record it.
    pub fn locked(&self, name: &str) -> Option<Locked> {
        self.installed(name).map(|d| Locked::of(name, d))
    }

    /// The lock of this environment: every installed Python component in scope, each `ok`.
    /// `named`: the user named the targets, so a target that is not installed is refused too.
    pub fn lock(&self, named: bool) -> Result<Lock, Unlockable> {
        let targets: Vec<&str> = self.request.targets.iter().map(|(n, _)| n.as_str()).collect();
        let mut components = Vec::new();
        let mut refused = Vec::new();
        for a in &self.assessments {
            let Some(r) = self.set.get(&a.name).filter(|r| r.kind == Kind::Python) else {
                continue;
            };
            match (self.installed(&r.name), a.status) {
                (Some(dist), Status::Ok) => {
                    let mut locked = Locked::of(&a.name, dist);
                    // A prebuilt wheel is locked with where it is, as the recipe offers it.
                    if let Some(sha) = locked.source.strip_prefix("wheel:") {
                        locked.wheel_url = lock::offered_url(&r.versions, sha);
                    }
                    components.push(locked)
                }
                (Some(_), status) => refused.push(Refused {
                    name: a.name.clone(),
                    status: Some(status),
                    reasons: a.reasons.clone(),
                }),
                // Asked for by name, yet absent: that is not a proven environment either.
                (None, _) if named && targets.contains(&a.name.as_str()) => refused.push(Refused {
                    name: a.name.clone(),
                    status: None,
                    reasons: Vec::new(),
                }),
                (None, _) => {}
            }
        }
        if !refused.is_empty() {
            return Err(Unlockable::NotProven(refused));
        }
        if components.is_empty() {
            return Err(Unlockable::Nothing);
        }
        // Name order, as Cargo.lock does: a lock diff then shows what changed, not what moved.
        components.sort_by(|a: &Locked, b: &Locked| a.name.cmp(&b.name));
        let cuda = self.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string());
        Ok(Lock {
            format: lock::FORMAT,
            environment: Environment::of(&self.facts, &self.archs, cuda),
            components,
        })
    }

    /// Extensions are built per Python version: the lock's minor version must be this one.
    pub fn check_python(&self, lock: &Lock, path: &Path) -> Result<(), SessionError> {
        let minor = |v: &str| v.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
        if minor(&self.facts.python.version) == minor(&lock.environment.python) {
            return Ok(());
        }
        Err(SessionError::Lock(format!(
            "{} was made with Python {}; {} is Python {} (extensions are built per Python version); pass --python with a Python {} interpreter, or write a lock for this one with `kiln lock`",
            path.display(),
            lock.environment.python,
            self.python.display(),
            self.facts.python.version,
            minor(&lock.environment.python)
        )))
    }

    /// What the lock says the node brings itself (`installed`: kiln did not install it, and a
    /// bundle leaves it out) must be here at the locked version before anything changes: the
    /// components built against it would otherwise be installed and then fail, leaving the
    /// node half-changed. Each one missing or at another version is named.
    pub fn check_brought(&self, lock: &Lock, path: &Path) -> Result<(), SessionError> {
        let lacking: Vec<String> = lock
            .components
            .iter()
            .filter(|c| c.source == lock::NOT_BY_KILN && self.scope.iter().any(|(n, _)| *n == c.name))
            .filter_map(|c| match self.installed(&c.name) {
                Some(d) if d.version == c.version => None,
                Some(d) => Some(format!("{} {} (here: {})", c.name, c.version, d.version)),
                None => Some(format!("{} {} (here: not installed)", c.name, c.version)),
            })
            .collect();
        if lacking.is_empty() {
            return Ok(());
        }
        Err(SessionError::Lock(format!(
            "{} says this environment brings these itself (`installed`: kiln did not install them, a bundle leaves them out), and it does not; nothing was changed:\n  - {}\n  install them as the locked node had them, then run this again",
            path.display(),
            lacking.join("\n  - ")
        )))
    }

    /// A component that is ok at the locked version but was built from another source than the
    /// lock names is stale: the plan rebuilds it from the locked source.
    pub fn mark_other_sources_stale(&mut self, lock: &Lock, path: &Path) {
        let found: BTreeMap<String, Locked> = lock
            .components
            .iter()
            .filter_map(|c| self.locked(&c.name).map(|l| (c.name.clone(), l)))
            .collect();
        // Both the verdict and what the plan starts from.
        let judged = self.assessments.iter_mut().chain(self.scope_assessments.iter_mut());
        for a in judged.filter(|a| a.status == Status::Ok) {
            let (Some(want), Some(have)) = (lock.components.iter().find(|c| c.name == a.name), found.get(&a.name))
            else {
                continue;
            };
            if want.source != lock::NOT_BY_KILN
                && have.public_version() == want.public_version()
                && have.source != want.source
            {
                a.add(Reason::OtherSource {
                    have: have.source.clone(),
                    lock: path.display().to_string(),
                    want: want.source.clone(),
                });
            }
        }
    }

    /// A wheel the plan takes from the cache as it is must be the one `lock` names: each
    /// component's locked wheel sha256, checked before it is installed (a rebuilt wheel is
    /// compared afterwards, field by field).
    pub fn expect_locked_wheels(&mut self, lock: &Lock) {
        self.locked_wheels = lock
            .components
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.wheel_sha256.clone()?)))
            .collect();
    }

    /// The part of the lock in this session's scope (named targets reproduce part of it: those
    /// and what they need), how many components that is, and each field that differs; with
    /// `targeted` (`--arch` over the lock's) a component built for those archs differs in its
    /// archs only as a note.
    pub fn compare(&self, lock: &Lock, targeted: Option<&[Arch]>) -> (usize, Vec<Difference>) {
        let found: BTreeMap<String, Locked> = lock
            .components
            .iter()
            .filter_map(|c| self.locked(&c.name).map(|l| (c.name.clone(), l)))
            .collect();
        let mut part = lock.clone();
        part.components.retain(|c| self.scope.iter().any(|(n, _)| *n == c.name));
        (part.components.len(), lock::differences(&part, &found, targeted))
    }
}
