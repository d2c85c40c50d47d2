//! One step's wheel, ready to install: its source fetched into a fresh work directory and its
//! wheel taken from the wheel cache when the same inputs built one before, else built as the
//! plan's spec says ([`super::wheel`]); for a binary wheel from an index, just the requirement.
//!
//! It touches nothing in the environment, so steps whose dependencies are installed prepare
//! side by side. It deliberately ignores installing (that is [`super::commit`]'s job).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::failure::{BuildFailure, StepError};
use super::wheel::WheelJob;
use super::{Context, Phase, Reporter, run_stamp, source, wheels};
use crate::probe::normalize;
use crate::probe::python::PythonFacts;
use crate::recipe::{Recipe, Source};
use crate::resolve::{Plan, Step};
use crate::store::locks;

/// A step's wheel, built (or found in the cache) and ready to install; for an index wheel, the
/// requirement to install.
pub(super) struct Prepared {
    pub to_install: String,
    pub identity: String,
    pub wheel: Option<PathBuf>,
    pub index_url: Option<String>,
    pub cache_entry: Option<(wheels::WheelKey, serde_json::Value)>,
    pub from_cache: bool,
    /// The cached wheel was built by an earlier run and never verified: why.
    pub unverified: Option<wheels::Unverified>,
    pub note: Option<String>,
    pub work: PathBuf,
    /// The declared build inputs fetched for the build: name -> `git:<commit>` / `sha256:<hex>`.
    pub inputs: BTreeMap<String, String>,
    /// The wheel-cache entry's lock, held until the step is over (its wheel stored or not):
    /// another kiln building the same entry waits and then takes this one's wheel.
    pub _entry_lock: Option<locks::Held>,
    /// What the compile cache did for the build.
    pub compile_cache: Option<crate::compile_cache::stats::Stats>,
    /// The stable build directory's lock, held until the step is installed.
    pub _stable: Option<crate::compile_cache::StableDir>,
}

pub(super) fn recipe_of<'a>(step: &Step, cx: &Context<'a>) -> Result<&'a Recipe, BuildFailure> {
    cx.set
        .get(&step.name)
        .ok_or_else(|| BuildFailure::new(&step.name, Phase::Fetch, StepError::NoRecipe))
}

pub(super) fn log_of(cx: &Context, step: &Step, phase: Phase) -> PathBuf {
    cx.logs.join(format!("{}.{}.log", step.name, phase.as_str()))
}

/// Fetches the source and builds the wheel as the plan's spec says (or takes it from the wheel
/// cache). `known` is the environment as the last verification saw it (for ABI fingerprints).
pub(super) fn prepare(
    step: &Step,
    plan: &Plan,
    cx: &Context,
    known: &PythonFacts,
    reporter: &dyn Reporter,
) -> Result<Prepared, BuildFailure> {
    let fail = |phase, e| BuildFailure::new(&step.name, phase, e);
    let r = recipe_of(step, cx)?;
    // The source of the version the plan chose (a recipe can describe several).
    let source = r
        .source_of(step.version.as_deref())
        .ok_or_else(|| fail(Phase::Fetch, StepError::NoSource))?;
    // The plan chose the prebuilt wheel the recipe offers: install it, build nothing.
    if let Some(w) = step
        .prebuilt
        .as_ref()
        .filter(|d| d.install)
        .and_then(|d| d.wheel.as_ref())
    {
        return super::prebuilt::prepare(step, w, cx, reporter);
    }
    let mut work = cx.cache.join("work").join(format!("{}-{}", step.name, run_stamp()));
    if let Source::Wheel { requirement, index_url } = source {
        return Ok(Prepared {
            to_install: requirement.clone(),
            identity: format!("index:{requirement}"),
            wheel: None,
            index_url: index_url.clone(),
            cache_entry: None,
            from_cache: false,
            unverified: None,
            note: None,
            work,
            inputs: BTreeMap::new(),
            _entry_lock: None,
            compile_cache: None,
            _stable: None,
        });
    }
    let spec = step
        .build
        .as_ref()
        .ok_or_else(|| fail(Phase::Fetch, StepError::NoSpec))?;
    // With the compile cache, the build runs where it runs on every node (see StableDir).
    let compiles_cached = cx.compile_cache.is_some() && spec.compile_cache.is_some();
    let stable = compiles_cached
        .then(|| crate::compile_cache::StableDir::take(&step.name))
        .flatten();
    if let Some(s) = &stable {
        work = s.dir.clone();
    }
    reporter.phase(step, Phase::Fetch, &describe(source));
    let fetched = source::fetch(
        source,
        r.dir.as_deref(),
        &work,
        &cx.cache,
        cx.offline,
        &log_of(cx, step, Phase::Fetch),
        source::Told {
            bytes: &mut |done, total| reporter.transfer(step, done, total),
            waiting: &mut waiting_for(step, reporter, Phase::Fetch, "fetching the same source"),
        },
    )
    .map_err(|e| match e {
        source::SourceError::Command(c) => BuildFailure::of_command(&step.name, Phase::Fetch, c),
        other => fail(Phase::Fetch, other.into()),
    })?;
    let fetched_inputs = fetch_inputs(step, spec, cx, &work, reporter)?;
    let cache_entry = cache_key(step, r, plan, cx, known, source, (&fetched, &fetched_inputs));
    let entry_lock = match &cache_entry {
        Some((key, _)) => {
            let mut waiting = waiting_for(step, reporter, Phase::Wheel, "building the same wheel");
            let path = locks::entry_lock(&cx.cache, &key.0);
            let held = locks::take(&path, "the wheel cache entry", true, |h| waiting(h)).map_err(|e| {
                let context = format!("cannot lock the wheel cache entry {}", key.0);
                fail(Phase::Wheel, StepError::io(context)(std::io::Error::other(e)))
            })?;
            Some(held)
        }
        None => None,
    };
    let mut made_elsewhere = None;
    let cached = match &cache_entry {
        Some((key, inputs)) => {
            // Bound to this step: its distribution, version, key inputs, and (a wheel taken as
            // it is) the one the lock names, byte for byte.
            let want = wheels::Want {
                dist: r.dist.as_deref().unwrap_or(&r.name),
                version: step.version.as_deref().unwrap_or_default(),
                inputs,
                locked: cx.locked_wheels.get(&step.name).map(String::as_str),
            };
            match wheels::find(&cx.cache, key, &want).map_err(|e| fail(Phase::Wheel, e.into()))? {
                Some(c) => Some(c),
                // The lock's own wheel, made on another host (a bundle brings it).
                None => crate::store::locked_wheel::find_locked(&cx.cache, &want)
                    .map_err(|e| fail(Phase::Wheel, e.into()))?
                    .map(|(_, c, made)| {
                        made_elsewhere = Some(made);
                        c
                    }),
            }
        }
        None => None,
    };
    let unverified = cached.as_ref().and_then(|c| c.unverified.clone());
    let mut compile_cache = None;
    let (wheel, from_cache, note) = match cached {
        Some(wheels::Cached {
            wheel,
            unverified: None,
            ..
        }) => {
            reporter.phase(step, Phase::Wheel, "from the wheel cache");
            let note = made_elsewhere.map(|m| {
                format!(
                    "installed the wheel the lock names ({m} on the host that wrote the lock); nothing was compiled"
                )
            });
            (wheel, true, note)
        }
        // Built by an earlier run whose verification failed outside it: installed and
        // verified again, not compiled again.
        Some(wheels::Cached {
            wheel,
            unverified: Some(u),
            ..
        }) => {
            reporter.phase(
                step,
                Phase::Wheel,
                "from the wheel cache (built before, not verified yet)",
            );
            let note = format!(
                "the wheel an earlier run built and kept unverified ({}) was verified now; nothing was compiled",
                u.why
            );
            (wheel, true, Some(note))
        }
        None => {
            if !spec.tools.is_empty() {
                let names: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
                reporter.phase(step, Phase::Fetch, &format!("bringing {}", names.join(", ")));
                let told = source::Told {
                    bytes: &mut |done, total| reporter.transfer(step, done, total),
                    waiting: &mut waiting_for(step, reporter, Phase::Fetch, "bringing the same tool"),
                };
                super::tools::ensure(&spec.tools, &cx.cache, cx.offline, told)
                    .map_err(|e| fail(Phase::Fetch, e.into()))?;
            }
            let job = WheelJob {
                step,
                spec,
                cx,
                src: &fetched.dir,
                work: &work,
                reporter,
                started: std::time::Instant::now(),
                inputs: super::inputs::dirs(&fetched_inputs),
            };
            let (w, n, stats) = job.build()?;
            compile_cache = stats;
            let n = match (n, compiles_cached && stable.is_none()) {
                (n, false) => n,
                (n, true) => Some(
                    n.map_or(String::new(), |n| format!("{n}; "))
                        + "another run held the stable build directory: built elsewhere, so device code compiled again",
                ),
            };
            (w, false, n)
        }
    };
    crate::crash_point::reached(&format!("prepared {}", step.name));
    Ok(Prepared {
        to_install: wheel.display().to_string(),
        identity: fetched.identity,
        wheel: Some(wheel),
        index_url: None,
        cache_entry,
        from_cache,
        unverified,
        note,
        work,
        inputs: fetched_inputs.into_iter().map(|f| (f.name, f.identity)).collect(),
        _entry_lock: entry_lock,
        compile_cache,
        _stable: stable,
    })
}

/// What `step` says in `phase` while another kiln holds what it needs (`doing`: "fetching the
/// same source", "building the same wheel"): that it waits, and for whom (pid, command, since
/// when), so that a wait is never silent.
pub(super) fn waiting_for<'a>(
    step: &'a Step,
    reporter: &'a dyn Reporter,
    phase: Phase,
    doing: &'a str,
) -> impl FnMut(&dyn std::fmt::Display) + 'a {
    move |h| reporter.phase(step, phase, &format!("waiting for another kiln {doing}: {h}"))
}

/// Fetches the build's declared inputs (the plan chose them for the target archs) into the
/// work directory, each named in the progress; a build that runs without the network where it
/// cannot be denied here says so once.
fn fetch_inputs(
    step: &Step,
    spec: &crate::resolve::spec::BuildSpec,
    cx: &Context,
    work: &std::path::Path,
    reporter: &dyn Reporter,
) -> Result<Vec<super::inputs::FetchedInput>, BuildFailure> {
    if spec.deny_network
        && let Err(why) = super::sandbox::available()
    {
        let text = format!("the build runs with the network: it cannot be denied here ({why})");
        reporter.warning(step, &text);
    }
    let log = log_of(cx, step, Phase::Fetch);
    let mut out = Vec::new();
    for input in &spec.inputs {
        let what = format!("build input {}: {}", input.name, super::inputs::describe(&input.from));
        reporter.phase(step, Phase::Fetch, &what);
        let fetched = super::inputs::fetch(
            std::slice::from_ref(input),
            work,
            &cx.cache,
            cx.offline,
            &log,
            source::Told {
                bytes: &mut |done, total| reporter.transfer(step, done, total),
                waiting: &mut waiting_for(step, reporter, Phase::Fetch, "fetching the same build input"),
            },
        )
        .map_err(|e| match e {
            source::SourceError::Command(c) => BuildFailure::of_command(&step.name, Phase::Fetch, c),
            other => BuildFailure::new(&step.name, Phase::Fetch, other.into()),
        })?;
        out.extend(fetched);
    }
    Ok(out)
}

/// The fingerprint of each dependency the step links against (`abi = true`) in `facts`, and
/// whether all are known (torch counts as known only with the ABI facts of an import).
pub(super) fn abi_fingerprints(
    r: &Recipe,
    step: &Step,
    cx: &Context,
    facts: &PythonFacts,
) -> (BTreeMap<String, String>, bool) {
    let mut out = BTreeMap::new();
    let mut complete = true;
    for d in r.depends_with(&step.features).filter(|d| d.abi) {
        let dep_dist = cx
            .set
            .get(&d.name)
            .and_then(|x| x.dist.clone())
            .unwrap_or_else(|| d.name.clone());
        match facts.fingerprint(&dep_dist) {
            Some(fp) => {
                complete &= normalize(&dep_dist) != "torch" || facts.torch.is_some();
                out.insert(d.name.clone(), fp);
            }
            None => complete = false,
        }
    }
    (out, complete)
}

/// The wheel cache key of this build, with its inputs; `None` when something that decides the
/// binary is unknown (an ABI dependency's fingerprint, a local tree that cannot be read).
fn cache_key(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    known: &PythonFacts,
    source: &Source,
    (fetched, inputs): (&source::Fetched, &[super::inputs::FetchedInput]),
) -> Option<(wheels::WheelKey, serde_json::Value)> {
    let (abi, complete) = abi_fingerprints(r, step, cx, known);
    if !complete {
        return None;
    }
    let identity = match source {
        Source::Path { .. } => format!("tree:{}", wheels::tree_hash(&fetched.dir).ok()?),
        _ => fetched.identity.clone(),
    };
    let m = &known.python.markers;
    let inputs = wheels::KeyInputs {
        component: &r.name,
        version: step.version.as_deref().unwrap_or_default(),
        features: &step.features,
        source: &identity,
        build: build_key(r, step, inputs)?,
        archs: plan.archs.clone(),
        cuda: cx.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string()),
        host_compiler: cx.machine.host_compiler.as_ref().map(|c| c.value.as_str()),
        python: &known.python.version,
        implementation: &known.python.implementation,
        platform: m
            .get("sys_platform")
            .zip(m.get("platform_machine"))
            .map(|(s, a)| format!("{s} {a}")),
        abi: &abi,
    };
    Some((wheels::WheelKey::of(&inputs), serde_json::to_value(&inputs).ok()?))
}

/// What of the recipe's build decides the binary: `[build]` as this version builds it, with
/// the commit or sha256 each fetched input turned out to be (and not its prose `why`). A build
/// with no inputs and no per-version changes keys as it always did.
fn build_key(r: &Recipe, step: &Step, inputs: &[super::inputs::FetchedInput]) -> Option<serde_json::Value> {
    let version = step.version.as_deref().and_then(|v| v.parse().ok());
    let mut build = serde_json::to_value(r.build_of(version.as_ref()).as_ref()).ok()?;
    if let Some(list) = build.get_mut("inputs").and_then(|v| v.as_array_mut()) {
        for i in list.iter_mut().filter_map(|i| i.as_object_mut()) {
            i.remove("why");
        }
    }
    if !inputs.is_empty() {
        let fetched: BTreeMap<&str, &str> = inputs.iter().map(|f| (f.name.as_str(), f.identity.as_str())).collect();
        build["inputs_fetched"] = serde_json::to_value(fetched).ok()?;
    }
    Some(build)
}

/// The source in a few words, for progress.
fn describe(s: &Source) -> String {
    match s {
        Source::Sdist { url, .. } => url.rsplit('/').next().unwrap_or(url).to_string(),
        Source::Git { url, rev, .. } => format!("{} @ {rev}", crate::process::secrets::mask_urls(url)),
        Source::Path { path } => path.display().to_string(),
        Source::Wheel { requirement, .. } => requirement.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_described_in_a_few_words() {
        let sdist = Source::Sdist {
            url: "https://files.example/flashinfer-0.7.4.tar.gz".into(),
            sha256: "00".into(),
        };
        assert_eq!(describe(&sdist), "flashinfer-0.7.4.tar.gz");
        let git = Source::Git {
            url: "https://github.com/x/y.git".into(),
            rev: "v1".into(),
            subdir: None,
            submodules: false,
        };
        assert_eq!(describe(&git), "https://github.com/x/y.git @ v1");
    }
}
