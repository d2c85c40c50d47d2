//! Components installed from a prebuilt wheel a recipe offers (`[[versions]] wheels`), as a lock
//! records and reproduces them: the source `wheel:<sha256>` with the wheel's URL, pinned back
//! as that one wheel. An earlier kiln recorded such an install as `sha256:<hex>` with the same
//! hex as the wheel's (its identity was the wheel's hash where an sdist's belongs); that is
//! read as the wheel it was, since a wheel built from an sdist never has the sdist's hash.
//!
//! It deliberately ignores whether the wheel qualifies on the node that reproduces the lock
//! (`resolve::wheel_choice` judges it there, as on any node).

use super::Locked;
use crate::recipe::binaries::{PrebuiltWheel, parse_wheel_name};
use crate::recipe::model::VersionEntry;

/// The source kind of a prebuilt wheel installed as it is.
pub const WHEEL: &str = "wheel";

/// The identity a lock records for a component kiln installed from `source` with a wheel of
/// `wheel_sha256`: `wheel:<hex>` for a prebuilt wheel (also as an earlier kiln recorded it).
pub fn identity(source: &str, wheel_sha256: Option<&str>) -> String {
    match (source.strip_prefix("sha256:"), wheel_sha256) {
        (Some(hex), Some(w)) if hex == w => format!("{WHEEL}:{hex}"),
        _ => source.to_string(),
    }
}

/// The sha256 of the prebuilt wheel `c` was installed from, if it was.
pub fn locked_wheel(c: &Locked) -> Option<&str> {
    if let Some(hex) = c.source.strip_prefix("wheel:") {
        return Some(hex);
    }
    let hex = c.source.strip_prefix("sha256:")?;
    (c.wheel_sha256.as_deref() == Some(hex)).then_some(hex)
}

/// The URL of the wheel with `sha256` among the wheels `entries` offer.
pub fn offered_url<'a>(entries: impl IntoIterator<Item = &'a VersionEntry>, sha256: &str) -> Option<String> {
    entries
        .into_iter()
        .flat_map(|e| &e.wheels)
        .find(|w| w.sha256 == sha256)
        .map(|w| w.url.clone())
}

/// Pins `entry` to the locked wheel: of the wheels it offers, that one alone; where the recipe
/// no longer offers it, the lock's own URL and sha256. A lock that names neither is a problem.
pub(super) fn pin(entry: &mut VersionEntry, c: &Locked, sha256: &str, problems: &mut Vec<String>) {
    if let Some(w) = entry.wheels.iter().find(|w| w.sha256 == sha256).cloned() {
        entry.wheels = vec![w];
        return;
    }
    let Some(url) = &c.wheel_url else {
        problems.push(format!(
            "{} {}: the lock has the prebuilt wheel sha256 {sha256}, which the recipe no longer offers, and no wheel_url",
            c.name,
            c.public_version()
        ));
        return;
    };
    let file = url.rsplit('/').next().unwrap_or(url).to_string();
    match parse_wheel_name(&file) {
        Ok(name) => {
            entry.wheels = vec![PrebuiltWheel {
                url: url.clone(),
                sha256: sha256.to_string(),
                file,
                tags: name.tags,
                span: None,
            }]
        }
        Err(e) => problems.push(format!("{} {}: wheel_url: {e}", c.name, c.public_version())),
    }
}
