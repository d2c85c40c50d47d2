//! What an unpacked bundle may hold: exactly what `kiln bundle` would put in it for its lock
//! (see [`super::contents`]), checked before anything moves into the cache. `sources/<sha256>`
//! for each locked sdist or build-input archive, `git/<mirror>` when the lock has a git source
//! or git build input (submodules' mirrors included), `wheels/<xx>/<key>`, `aot/<key>`, and
//! `wheelhouse/*.whl` files. Anything else is refused, naming it (escaped: names come from the
//! bundle).
//!
//! A wheel-cache entry may come in only when its contents match its key, so that a bundle can
//! never plant a wheel that a later ordinary install takes for another component: its one
//! wheel has a sha256 some locked component names, and its record says the same; its
//! `key.json` hashes to the entry's name (the key it is filed under) and names that
//! component, version and source; and the wheel is a wheel of that component's distribution at
//! that version whose files match its RECORD (`crate::store::wheel`). An entry that fails is
//! moved aside under `<cache>/quarantine/`, and the whole bundle is refused, naming the member
//! and why, before anything moves into the cache.
//!
//! A `wheelhouse/` wheel may come in only when its METADATA says the distribution and version
//! its file name says, and, when that distribution is one a component of the lock installs
//! (torch, flashinfer, ...), only at the version the lock names for that component: the
//! wheelhouse is shared by later offline installs, so a bundle may not bring another version
//! of a locked component under a third-party name or beside its own. A distribution some
//! recipe manages but the lock does not name is a dependency the locked components need (as
//! SGLang 0.5.11 needs flash-attn-4 4.0.0b15), and comes in as third-party. A third-party wheel
//! is taken as what it says it is (nothing trusted names its hash); RELIABILITY.md says so.
//!
//! An `aot/<key>` entry may come in only when its `manifest.json` files it under that key
//! (its `base` and toolkit hash to it), names a component at the version the lock names,
//! installs every module inside site-packages, and the entry holds exactly the files the
//! manifest names; otherwise it is moved aside and the bundle refused the same way.
//!
//! It deliberately ignores what is inside a source or a mirror (the build checks an sdist's
//! hash and git checks its objects) and whether an `aot` module suits an arch (`install --aot`
//! reads its images when it is used).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::apply::source::sha256_file;
use crate::lock::Lock;
use crate::recipe::RecipeSet;
use crate::shown;

/// Why an unpacked bundle was refused.
#[derive(Debug, thiserror::Error)]
pub enum Unexpected {
    #[error("it holds `{0}`, which its kiln.lock does not name (kiln bundle never writes it)")]
    NotNamed(String),
    #[error(
        "its wheel `{entry}` has sha256 {got}, which its kiln.lock does not name for any component; it was moved aside to {}",
        moved.display()
    )]
    Wheel { entry: String, got: String, moved: PathBuf },
    #[error("its wheel-cache entry `{entry}` {why}; it was moved aside to {}", moved.display())]
    Unbound {
        entry: String,
        why: Box<Unbound>,
        moved: PathBuf,
    },
    #[error("its wheelhouse wheel `{entry}` {why}")]
    House { entry: String, why: Box<HouseUnbound> },
    #[error("its compiled-module entry `{entry}` {why}; it was moved aside to {}", moved.display())]
    Aot {
        entry: String,
        why: Box<AotUnbound>,
        moved: PathBuf,
    },
}

/// How a bundled wheelhouse wheel is not what it may be.
#[derive(Debug, thiserror::Error)]
pub enum HouseUnbound {
    #[error("is not a wheel's file name: {0}")]
    FileName(String),
    #[error("is not what its name says: {0}")]
    Contents(crate::store::wheel::Mismatch),
    #[error(
        "is {dist} {version}, which kiln installs as its component {component}: the lock names {component} {locked}, and a bundle brings no other version; make the bundle again from its lock with `kiln bundle --lock`, which brings only that one"
    )]
    Component {
        dist: String,
        version: String,
        component: String,
        locked: String,
    },
}

/// How a bundled `aot/<key>` entry does not match its key or the lock.
#[derive(Debug, thiserror::Error)]
pub enum AotUnbound {
    #[error("has no manifest.json of the shape kiln writes")]
    NoManifest,
    #[error("would install `{0}`, outside site-packages")]
    Leaves(String),
    #[error("is filed under a key its manifest does not hash to (it hashes to {0})")]
    OtherKey(String),
    #[error("is for {component} {version}, which the lock does not name")]
    NotLocked { component: String, version: String },
    #[error("holds `{0}`, which its manifest does not name")]
    Extra(String),
    #[error("lacks `{0}`, which its manifest names")]
    Missing(String),
}

/// How a bundled wheel-cache entry does not match its key.
#[derive(Debug, thiserror::Error)]
pub enum Unbound {
    #[error("has no wheel.sha256 record, or one that is not its wheel's sha256 ({got})")]
    Record { got: String },
    #[error("has no key.json of the shape kiln writes")]
    NoKey,
    #[error("is filed under a key its key.json does not hash to (it hashes to {hashes})")]
    OtherKey { hashes: String },
    #[error(
        "holds the wheel the lock names for {locked} ({locked_version}, {locked_source}), but its key is for {component} {version} from {from}"
    )]
    OtherComponent {
        locked: String,
        locked_version: String,
        locked_source: String,
        component: String,
        version: String,
        from: String,
    },
    #[error("holds a wheel that is not {dist} {version}'s: {mismatch}")]
    Contents {
        dist: String,
        version: String,
        mismatch: crate::store::wheel::Mismatch,
    },
}

/// Checks the bundle unpacked at `dir` against its `lock` (the distribution of each component
/// from `set`); a refused wheel entry is moved to a quarantine under `cache`.
pub fn check(dir: &Path, lock: &Lock, set: &RecipeSet, cache: &Path) -> Result<(), Unexpected> {
    // Each component's source and its declared build inputs.
    let identities = || {
        lock.components
            .iter()
            .flat_map(|c| std::iter::once(&c.source).chain(c.inputs.values()))
    };
    // An sdist's or a prebuilt wheel's (`wheel:`) sha256: both are `sources/<sha256>`.
    let sources: BTreeSet<&str> = identities()
        .filter_map(|s| s.strip_prefix("sha256:").or_else(|| s.strip_prefix("wheel:")))
        .collect();
    let has_git = identities().any(|s| s.starts_with("git:"));
    let not_named = |rel: &Path| Unexpected::NotNamed(shown::path(rel));
    for (top, rel, is_dir) in listing(dir, Path::new("")) {
        let ok = match top.as_str() {
            "kiln.lock" => !is_dir,
            "sources" | "git" | "wheels" | "aot" | "wheelhouse" => is_dir,
            _ => false,
        };
        if !ok {
            return Err(not_named(&rel));
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("sources")) {
        if !is_dir || !sources.contains(name.as_str()) {
            return Err(not_named(&rel));
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("git")) {
        if !is_dir || !has_git || name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_named(&rel));
        }
    }
    for (_, rel, is_dir) in listing(dir, Path::new("aot")) {
        if !is_dir {
            return Err(not_named(&rel));
        }
        if let Err(why) = aot_bound(dir, &rel, lock) {
            return Err(Unexpected::Aot {
                entry: shown::path(&rel),
                why: Box::new(why),
                moved: move_aside(dir, &rel, cache, "bundle-aot"),
            });
        }
    }
    for (name, rel, is_dir) in listing(dir, Path::new("wheelhouse")) {
        if is_dir || !name.ends_with(".whl") {
            return Err(not_named(&rel));
        }
        house_wheel(dir, &name, &rel, lock, set).map_err(|why| Unexpected::House {
            entry: shown::path(&rel),
            why: Box::new(why),
        })?;
    }
    for (_, rel, is_dir) in listing(dir, Path::new("wheels")) {
        if !is_dir {
            return Err(not_named(&rel));
        }
        for (name, entry, is_dir) in listing(dir, &rel) {
            let shard = rel.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if !is_dir || !crate::lock::is_sha256(&name) || !name.starts_with(&shard) {
                return Err(not_named(&entry));
            }
            wheel_entry(dir, &entry, lock, set, cache)?;
        }
    }
    Ok(())
}

/// A wheel cache entry: its files are the wheel, `key.json`, `wheel.sha256` and maybe
/// `unverified.json`, and its contents match its key (see the module doc).
fn wheel_entry(dir: &Path, entry: &Path, lock: &Lock, set: &RecipeSet, cache: &Path) -> Result<(), Unexpected> {
    let files = listing(dir, entry);
    let whl: Vec<&(String, PathBuf, bool)> = files.iter().filter(|(n, _, _)| n.ends_with(".whl")).collect();
    for (name, rel, is_dir) in &files {
        let known = ["key.json", "wheel.sha256", "unverified.json"].contains(&name.as_str()) || name.ends_with(".whl");
        if *is_dir || !known {
            return Err(Unexpected::NotNamed(shown::path(rel)));
        }
    }
    let [(_, wheel, _)] = whl[..] else {
        return Err(Unexpected::NotNamed(shown::path(entry)));
    };
    let got = sha256_file(&dir.join(wheel)).unwrap_or_else(|e| format!("none ({e})"));
    let Some(locked) = lock
        .components
        .iter()
        .find(|c| c.wheel_sha256.as_deref() == Some(got.as_str()))
    else {
        let moved = move_aside(dir, entry, cache, "bundle-wheel");
        return Err(Unexpected::Wheel {
            entry: shown::path(wheel),
            got,
            moved,
        });
    };
    match bound(dir, entry, wheel, &got, locked, set) {
        Ok(()) => Ok(()),
        Err(why) => Err(Unexpected::Unbound {
            entry: shown::path(entry),
            why,
            moved: move_aside(dir, entry, cache, "bundle-wheel"),
        }),
    }
}

/// Whether the wheelhouse wheel `name` (at `rel`) is what its name says and, where it is a
/// component's distribution, the version the lock names (see the module doc).
fn house_wheel(dir: &Path, name: &str, rel: &Path, lock: &Lock, set: &RecipeSet) -> Result<(), HouseUnbound> {
    let parsed =
        crate::recipe::binaries::parse_wheel_name(name).map_err(|e| HouseUnbound::FileName(shown::text(&e)))?;
    let version = parsed.version.to_string();
    crate::store::wheel::identity(
        &dir.join(rel),
        crate::store::wheel::Expected {
            dist: &parsed.name,
            version: &version,
        },
    )
    .map_err(HouseUnbound::Contents)?;
    let dist = crate::probe::normalize(&parsed.name);
    let Some(recipe) = set
        .recipes
        .values()
        .find(|r| r.dist_name().is_some_and(|d| d.to_string() == dist))
    else {
        return Ok(());
    };
    let public = parsed.version.clone().without_local();
    let locked = lock.components.iter().find(|c| c.name == recipe.name);
    // A component the lock does not name is, here, a dependency of one it names (SGLang
    // 0.5.11's wheel requires flash-attn-4 4.0.0b15, which kiln does not manage for it): a
    // third-party wheel like any other.
    let Some(locked) = locked else {
        return Ok(());
    };
    let same = locked
        .public_version()
        .parse::<pep440_rs::Version>()
        .is_ok_and(|v| v.without_local() == public);
    if same {
        return Ok(());
    }
    Err(HouseUnbound::Component {
        dist: shown::text(&parsed.name),
        version: shown::text(&version),
        component: recipe.name.clone(),
        locked: shown::text(&locked.version),
    })
}

/// Whether the entry at `entry` is what its manifest says, for a component and version the
/// lock names, with exactly the files the manifest names (see the module doc).
fn aot_bound(dir: &Path, entry: &Path, lock: &Lock) -> Result<(), AotUnbound> {
    use crate::store::aot::{Manifest, file_of};
    let root = dir.join(entry);
    let m: Manifest = crate::state::read_json(&root.join("manifest.json"), crate::state::RECORD_LIMIT, "")
        .ok()
        .flatten()
        .ok_or(AotUnbound::NoManifest)?;
    if let Some(p) = m.leaves_site_packages() {
        return Err(AotUnbound::Leaves(shown::text(p)));
    }
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if m.key() != name {
        return Err(AotUnbound::OtherKey(m.key()));
    }
    let public = |v: &str| {
        v.parse::<pep440_rs::Version>()
            .ok()
            .map(pep440_rs::Version::without_local)
    };
    let locked = lock.components.iter().any(|c| {
        c.name == m.component && public(&m.version).is_some() && public(&m.version) == public(c.public_version())
    });
    if !locked {
        return Err(AotUnbound::NotLocked {
            component: shown::text(&m.component),
            version: shown::text(&m.version),
        });
    }
    let named: BTreeSet<PathBuf> = m.modules.iter().map(|x| file_of(&root, x)).collect();
    for f in &named {
        if !f.is_file() {
            return Err(AotUnbound::Missing(shown::path(f.strip_prefix(dir).unwrap_or(f))));
        }
    }
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let known =
                p == root.join("manifest.json") || named.contains(&p) || named.iter().any(|f| f.starts_with(&p));
            if !known {
                return Err(AotUnbound::Extra(shown::path(p.strip_prefix(dir).unwrap_or(&p))));
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    Ok(())
}

/// Whether the entry at `entry` (its wheel `wheel`, of sha256 `got`) is what its key says and
/// the wheel the lock names for `locked`.
fn bound(
    dir: &Path,
    entry: &Path,
    wheel: &Path,
    got: &str,
    locked: &crate::lock::Locked,
    set: &RecipeSet,
) -> Result<(), Box<Unbound>> {
    let record = crate::state::read(&dir.join(entry).join("wheel.sha256"), 1024, "")
        .ok()
        .flatten();
    if record.is_none_or(|r| String::from_utf8_lossy(&r).trim() != got) {
        return Err(Unbound::Record { got: got.to_string() }.into());
    }
    let inputs: serde_json::Value =
        crate::state::read_json(&dir.join(entry).join("key.json"), crate::state::RECORD_LIMIT, "")
            .ok()
            .flatten()
            .ok_or(Unbound::NoKey)?;
    let key = crate::store::wheels::WheelKey::of_recorded(&inputs).ok_or(Unbound::NoKey)?;
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if key.0 != name {
        return Err(Unbound::OtherKey { hashes: key.0 }.into());
    }
    let field = |k: &str| inputs.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let (component, version, source) = (field("component"), field("version"), field("source"));
    let public = |v: &str| {
        v.parse::<pep440_rs::Version>()
            .ok()
            .map(pep440_rs::Version::without_local)
    };
    let same_version = public(&version).is_some() && public(&version) == public(locked.public_version());
    // A local tree is locked by its path and keyed by its contents (`tree:<hash>`).
    let same_source = source == locked.source || (locked.source.starts_with("path:") && source.starts_with("tree:"));
    if component != locked.name || !same_version || !same_source {
        return Err(Box::new(Unbound::OtherComponent {
            locked: shown::text(&locked.name),
            locked_version: shown::text(&locked.version),
            locked_source: shown::text(&locked.source),
            component: shown::text(&component),
            version: shown::text(&version),
            from: shown::text(&source),
        }));
    }
    let dist = set
        .get(&locked.name)
        .and_then(|r| r.dist.clone())
        .unwrap_or_else(|| locked.name.clone());
    let want = crate::store::wheel::Expected {
        dist: &dist,
        version: &version,
    };
    crate::store::wheel::check(&dir.join(wheel), want).map_err(|mismatch| {
        Box::new(Unbound::Contents {
            dist: shown::text(&dist),
            version: shown::text(&version),
            mismatch,
        })
    })
}

/// Moves a refused entry of the unpacked bundle aside to `<cache>/quarantine/` (or removes it).
fn move_aside(dir: &Path, entry: &Path, cache: &Path, what: &str) -> PathBuf {
    let moved = crate::store::wheels::quarantine_path(
        cache,
        &format!("{what}-{}", entry.file_name().unwrap_or_default().to_string_lossy()),
    );
    let done = moved
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::rename(dir.join(entry), &moved));
    if done.is_err() {
        let _ = std::fs::remove_dir_all(dir.join(entry));
    }
    moved
}

/// The members directly below `rel` in `dir`: name, path relative to `dir`, whether a
/// directory (anything not a plain directory or file was refused when unpacking).
fn listing(dir: &Path, rel: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out: Vec<(String, PathBuf, bool)> = std::fs::read_dir(dir.join(rel))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            // The path keeps the name's own bytes, for messages to show them escaped.
            (name, rel.join(e.file_name()), is_dir)
        })
        .collect();
    out.sort();
    out
}
