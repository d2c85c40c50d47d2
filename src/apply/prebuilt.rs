//! Prebuilt wheels a recipe offers: fetched into the source cache by their pinned sha256
//! (`<cache>/sources/<sha256>/<file>`, as sdists are, so bundles and `--offline` find them),
//! and, once the plan chose one, handed to the install/verify/rollback path ([`super::commit`])
//! as a wheel file. It deliberately does not decide whether a wheel qualifies
//! (`resolve::wheel_choice` does, from what `probe::wheel` read) and builds nothing.

use std::path::{Path, PathBuf};

use super::failure::BuildFailure;
use super::step::Prepared;
use super::{Context, Phase, Reporter, run_stamp, source};
use crate::resolve::Step;
use crate::resolve::wheel_choice::Offered;

/// The wheel at `url` in the cache, downloaded and checked against `sha256` first if needed;
/// `told` hears the bytes of a download, and another kiln fetching the same wheel first.
pub fn fetch(
    url: &str,
    sha256: &str,
    cache: &Path,
    offline: bool,
    told: source::Told,
) -> Result<PathBuf, source::SourceError> {
    source::cached_download(url, sha256, cache, offline, told)
}

/// The chosen wheel of `step`, ready to install (from the cache; fetched again if it was
/// cleaned since the plan).
pub(super) fn prepare(
    step: &Step,
    w: &Offered,
    cx: &Context,
    reporter: &dyn Reporter,
) -> Result<Prepared, BuildFailure> {
    reporter.phase(step, Phase::Fetch, &format!("prebuilt wheel {}", w.file));
    let told = source::Told {
        bytes: &mut |done, total| reporter.transfer(step, done, total),
        waiting: &mut super::step::waiting_for(step, reporter, Phase::Fetch, "fetching the same wheel"),
    };
    let wheel = source::cached_download(&w.url, &w.sha256, &cx.cache, cx.offline, told)
        .map_err(|e| BuildFailure::new(&step.name, Phase::Fetch, e.into()))?;
    Ok(Prepared {
        to_install: wheel.display().to_string(),
        // Not `sha256:`, an sdist's: a lock pins this as the wheel it is (`lock::WHEEL`).
        identity: format!("wheel:{}", w.sha256),
        wheel: Some(wheel),
        index_url: None,
        inputs: Default::default(),
        cache_entry: None,
        from_cache: false,
        unverified: None,
        note: Some(format!("installed the prebuilt wheel {}; nothing was compiled", w.file)),
        work: cx.cache.join("work").join(format!("{}-{}", step.name, run_stamp())),
        _entry_lock: None,
        compile_cache: None,
        _stable: None,
    })
}
