//! Installing a prepared step and proving it, one step at a time: back up the installed
//! distribution (every file its `RECORD` lists), install, verify with a fresh probe (every
//! import, and the smoke test where a GPU of the target arch is here), and write `kiln.json`
//! into its dist-info. On any failure the new install is removed and the backup put back, and
//! the failure says how. A verified wheel is kept in the wheel cache and the build tree removed;
//! a failed step keeps its tree for whoever debugs it. A wheel whose verification failed for a
//! reason outside it ([`super::blame`]: a dependency missing or broken, a dependency install
//! that failed, a verification killed from outside) is kept too, marked unverified, and the
//! failure says where; one that failed in its own files is not (`fate` keeps or drops them).
//! Steps whose builds finished together go through `batch` instead, which comes back here,
//! one step at a time, when anything in the batch fails.
//!
//! It deliberately ignores how the wheel was made (`step` and `wheel` did that), and never
//! counts a kept unverified wheel as verified: the next run installs it and verifies it again.

use std::path::{Path, PathBuf};

use super::blame::Fault;
use super::failure::{BuildFailure, StepError};
use super::fate::{clean_up, keep_wheel, put_back, uninstall_own, wheel_fate};
use super::owned::{self, Added, Content, listed_with};
use super::replace;
use super::step::{Prepared, abi_fingerprints, log_of, recipe_of};
use super::txn::Txn;
use super::{Context, Phase, Reporter, source, wheels};
use crate::probe::normalize;
use crate::probe::python::{self, PythonFacts};
use crate::probe::runtime;
use crate::recipe::Recipe;
use crate::resolve::{Plan, Step};

/// What a step that changed something leaves behind.
pub(super) struct StepDone {
    pub wheel: Option<PathBuf>,
    pub source: String,
    pub from_cache: bool,
    /// Something the user should know about how it went (a retry with fewer jobs).
    pub note: Option<String>,
    /// What the compile cache did for the build.
    pub compile_cache: Option<crate::compile_cache::stats::Stats>,
    /// The verification probe's facts: the environment as it is after this step.
    pub facts: PythonFacts,
}

/// Installs a prepared step and proves it; on any failure puts the environment back. Runs one
/// at a time: installs never overlap.
pub(super) fn commit(
    step: &Step,
    plan: &Plan,
    cx: &Context,
    p: Prepared,
    reporter: &dyn Reporter,
    txn: &mut Txn,
) -> Result<StepDone, BuildFailure> {
    let fail = |phase, e| BuildFailure::new(&step.name, phase, e);
    let r = recipe_of(step, cx)?;
    let dist = r.dist.clone().unwrap_or_else(|| r.name.clone());
    // What a wheel kept in the wheel cache must be.
    let is = wheels::Expected {
        dist: &dist,
        version: step.version.as_deref().unwrap_or_default(),
    };
    let installed = cx.facts.dists.get(&normalize(&dist));
    let backup_dir = p.work.join("backup");
    // What the component replaces under other names goes out first, backed up with it.
    let replaced = replace::replaced(r, cx.facts);
    let backup = replace::back_up(installed, &replaced, &backup_dir).map_err(|e| fail(Phase::Install, e.into()))?;
    // Written before site-packages changes: a kiln killed from here on is put back by the next.
    let uninstall = cx.installer.uninstall(&cx.python, &dist).restoring();
    txn.begin_step(&step.name, &dist, backup.as_ref(), &backup_dir, &uninstall)
        .map_err(|e| {
            let context = format!(
                "cannot snapshot the environment or write the install journal into {}",
                cx.cache.display()
            );
            fail(Phase::Install, StepError::io(context)(e))
        })?;
    crate::crash_point::reached(&format!("journal begun {}", step.name));
    reporter.phase(step, Phase::Install, &format!("{} ({})", dist, cx.installer.name()));
    let mut runtime: Option<Added> = None;
    let facts = match replace::remove(step, cx, &replaced)
        .and_then(|()| install_and_verify(step, r, plan, cx, &p, &mut runtime, reporter))
        .and_then(|facts| {
            txn.step_proven(&[step.name.as_str()]).map(|()| facts).map_err(|e| {
                (
                    fail(Phase::Verify, StepError::io("cannot write the install journal")(e)),
                    None,
                )
            })
        }) {
        Ok(facts) => facts,
        Err((mut f, fault)) => {
            reporter.phase(step, Phase::Restore, "putting the environment back");
            if let Some(added) = &runtime {
                added.undo();
            }
            let log = log_of(cx, step, Phase::Restore);
            let _ = uninstall.run_logged(&log);
            let own = uninstall_own(cx, &p, &dist, &log);
            let restored = match replaced.as_slice() {
                [] => own.as_deref().unwrap_or(&dist).to_string(),
                _ => replace::names(installed, &replaced),
            };
            // The rest of the environment (what the step added beside it, what the run did
            // before it) is put back by the transaction, once this step is out of the way.
            f.restored = put_back(&restored, backup.as_ref(), &log);
            f.wheel = fault
                .and_then(|fault| wheel_fate(&cx.cache, &p, is, *fault))
                .map(Box::new);
            return Err(f);
        }
    };
    Ok(proven(step, cx, p, is, facts))
}

/// A step verified and recorded: its backup goes, its wheel is kept, its build tree removed.
pub(super) fn proven(step: &Step, cx: &Context, p: Prepared, is: wheels::Expected, facts: PythonFacts) -> StepDone {
    crate::crash_point::reached(&format!("proven {}", step.name));
    let _ = std::fs::remove_dir_all(p.work.join("backup"));
    let wheel = keep_wheel(&cx.cache, &p, is, &log_of(cx, step, Phase::Wheel));
    clean_up(&p.work, wheel.as_deref());
    crate::crash_point::reached(&format!("cleaned up {}", step.name));
    StepDone {
        wheel,
        source: p.identity,
        from_cache: p.from_cache,
        note: p.note,
        compile_cache: p.compile_cache,
        facts,
    }
}

/// A failed install or verification, and (for a verification) what went wrong as [`blame`]
/// sees it.
pub(super) type Failed = (BuildFailure, Option<Box<Fault>>);

/// Installs the wheel (its runtime dependencies after it, where the recipe says so), proves it
/// and records it.
fn install_and_verify(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    p: &Prepared,
    runtime: &mut Option<Added>,
    reporter: &dyn Reporter,
) -> Result<PythonFacts, Failed> {
    let dist = r.dist.as_deref().unwrap_or(&r.name);
    let constraints = if r.install_deps {
        let context = format!("cannot write the constraints into {}", p.work.display());
        let own = own_constraints(step, r);
        let written = write_constraints(cx, plan, &[dist], &own, &p.work).map_err(|e| {
            (
                BuildFailure::new(&step.name, Phase::Install, StepError::io(context)(e)),
                None,
            )
        })?;
        Some(written)
    } else {
        None
    };
    // The wheel itself replaces what is there; its runtime dependencies are then added only where
    // missing (never force-reinstalled: that would reinstall torch and every CUDA library), with
    // every kiln-managed distribution pinned by the constraints.
    let log = log_of(cx, step, Phase::Install);
    let to_install = std::slice::from_ref(&p.to_install);
    let failed = |e| BuildFailure::of_command(&step.name, Phase::Install, e);
    let index_url = p.index_url.as_deref();
    // uv does both in one call (one resolution, one interpreter query); pip needs two.
    let one = constraints.as_deref().and_then(|cons| {
        cx.installer
            .install_with_missing(&cx.python, to_install, &[dist], cons, index_url)
    });
    let merged = one.is_some();
    if let Some(cmd) = one {
        cmd.run_logged(&log).map_err(|e| (failed(e), None))?;
    } else {
        cx.installer
            .install(&cx.python, to_install, false, None, index_url)
            .run_logged(&log)
            .map_err(|e| (failed(e), None))?;
    }
    if let (false, Some(cons)) = (merged, constraints.as_deref()) {
        cx.installer
            .install_missing(&cx.python, to_install, cons, p.index_url.as_deref())
            .run_logged(&log)
            .map_err(|e| {
                let why = format!("installing its runtime dependencies failed ({})", e.status);
                (failed(e), Some(Box::new(Fault::Outside(why))))
            })?;
    }
    crate::crash_point::reached(&format!("installed {}", step.name));
    // Before the verification, so that its imports run with the run-time defaults.
    *runtime = write_runtime(step, cx, dist).map_err(|e| (BuildFailure::new(&step.name, Phase::Install, e), None))?;
    reporter.phase(step, Phase::Verify, &verify_detail(step, r));
    let facts = verify(step, r, plan, cx).map_err(|(f, fault)| (f, Some(fault)))?;
    crate::crash_point::reached(&format!("verified {}", step.name));
    record(step, r, plan, cx, &facts, dist, p).map_err(|f| (f, None))?;
    Ok(facts)
}

/// The constraints the recipe's entry for the step's version adds (dependencies its metadata
/// leaves too open).
pub(super) fn own_constraints(step: &Step, r: &Recipe) -> Vec<String> {
    step.version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .and_then(|v| r.version_entry(&v))
        .map(|e| e.constraints.clone())
        .unwrap_or_default()
}

/// Writes the run-time environment file of a step with `[runtime] env` next to the distribution
/// just installed, listed in its RECORD (so uninstalling or replacing it removes the file).
fn write_runtime(step: &Step, cx: &Context, dist: &str) -> Result<Option<Added>, StepError> {
    if step.runtime_env.is_empty() {
        return Ok(None);
    }
    let site = site_of(cx, dist)?;
    let info = owned::dist_info(&site, dist).ok_or_else(|| StepError::NotListed { dist: dist.to_string() })?;
    let text = runtime::render(&step.name, &step.runtime_env);
    let files = [(runtime::file_name(&step.name), Content::Text(&text))];
    let context = format!("cannot write the run-time environment file into {}", site.display());
    owned::add(&site, &info, &files)
        .map(Some)
        .map_err(StepError::io(context))
}

/// The site-packages directory a distribution is (or was just) installed in.
pub(super) fn site_of(cx: &Context, dist: &str) -> Result<PathBuf, StepError> {
    let before = cx.facts.dists.get(&normalize(dist)).and_then(|d| d.location.clone());
    let paths = &cx.facts.python.paths;
    let lib = |k: &str| paths.get(k).cloned().flatten();
    [before, lib("purelib"), lib("platlib")]
        .into_iter()
        .flatten()
        .map(PathBuf::from)
        .find(|site| owned::dist_info(site, dist).is_some())
        .ok_or_else(|| StepError::NotListed { dist: dist.to_string() })
}

/// What the verify phase says it imports: the recipe's imports for the step's version.
pub(super) fn verify_detail(step: &Step, r: &Recipe) -> String {
    let version = step.version.as_deref().and_then(|v| v.parse().ok());
    r.imports_of(version.as_ref()).join(", ")
}

/// Proves the component in a fresh interpreter: every import its recipe names must run.
fn verify(step: &Step, r: &Recipe, plan: &Plan, cx: &Context) -> Result<PythonFacts, (BuildFailure, Box<Fault>)> {
    let imports = proof_imports(step, r, cx);
    // The probe itself failing (killed, timed out, unable to run) is no import of the wheel's.
    let mut facts = python::probe(&cx.python, &imports, cx.import_timeout).map_err(|e| {
        let why = format!("the verification probe failed: {e}");
        (
            BuildFailure::new(&step.name, Phase::Verify, e.into()),
            Box::new(Fault::Outside(why)),
        )
    })?;
    judge(step, r, plan, cx, &imports, &mut facts)?;
    Ok(facts)
}

/// What the verification imports, in order: what the component links against first (torch
/// above all, so that the probe records their ABI facts), then its own imports and its features'.
pub(super) fn proof_imports(step: &Step, r: &Recipe, cx: &Context) -> Vec<String> {
    let version = step.version.as_deref().and_then(|v| v.parse().ok());
    let mut imports = r.imports_of(version.as_ref()).to_vec();
    // Import what it links against first (torch above all), so the probe records their ABI facts.
    for d in r.depends_with(&step.features).filter(|d| d.abi) {
        if let Some(first) = cx.set.get(&d.name).and_then(|x| x.imports.first())
            && !imports.contains(first)
        {
            imports.insert(0, first.clone());
        }
    }
    for f in &step.features {
        if let Some(feat) = r.features.get(f) {
            imports.extend(feat.imports.iter().cloned());
        }
    }
    imports
}

/// Whether what a fresh interpreter answered for `imports` proves the component: every import
/// ran, and its smoke test passes where a GPU of the target arch is here (the result goes into
/// `facts` for the verdict after the install).
pub(super) fn judge(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    imports: &[String],
    facts: &mut PythonFacts,
) -> Result<(), (BuildFailure, Box<Fault>)> {
    let fail = |e| BuildFailure::new(&step.name, Phase::Verify, e);
    let failed: Vec<(String, python::ImportResult)> = imports
        .iter()
        .filter_map(|m| {
            facts
                .imports
                .get(m)
                .filter(|res| !res.ok)
                .map(|res| (m.clone(), res.clone()))
        })
        .collect();
    if !failed.is_empty() {
        let texts = failed
            .iter()
            .map(|(m, res)| (m.clone(), res.error.clone().unwrap_or_else(|| "?".into())))
            .collect();
        return Err((fail(StepError::Imports(texts)), Box::new(Fault::Imports(failed))));
    }
    // Where a GPU of the target arch is here and the driver can drive it, the kernels must also
    // run. A serving proof runs once, in the verdict that follows the install (and is cached
    // there): it starts a whole engine, too long to run twice.
    let smoke_archs = crate::resolve::driver::smoke_archs(cx.machine, &plan.archs);
    if !smoke_archs.is_empty()
        && let Some(smoke) = r.smoke.as_ref().filter(|s| !s.serve)
    {
        let script = crate::probe::smoke::Script {
            component: &r.name,
            path: &smoke.path,
            text: &smoke.text,
            serve: false,
        };
        let s = crate::probe::smoke::run(&cx.python, &script, &cx.cache.join("smoke"), cx.import_timeout);
        if !s.ok {
            let error = s.error.unwrap_or_default();
            let why = format!("its smoke test {} failed", smoke.path);
            return Err((fail(StepError::Smoke(error)), Box::new(Fault::Own(why))));
        }
        // The verdict after the install takes this result: the same script, the same archs.
        let key = crate::probe::smoke::key(&smoke_archs, &smoke.text);
        facts.smoke.insert(r.name.clone(), (key, s));
    }
    Ok(())
}

/// Writes `<dist-info>/kiln.json`: what was built, from what, for which archs and toolkit, and
/// the fingerprint of every dependency it links against (`abi = true`), so that a later change
/// of that dependency makes it `stale`.
pub(super) fn record(
    step: &Step,
    r: &Recipe,
    plan: &Plan,
    cx: &Context,
    facts: &PythonFacts,
    dist: &str,
    p: &Prepared,
) -> Result<(), BuildFailure> {
    let fail = |e| BuildFailure::new(&step.name, Phase::Verify, e);
    let installed = facts
        .dists
        .get(&normalize(dist))
        .ok_or_else(|| fail(StepError::NotListed { dist: dist.to_string() }))?;
    let Some(info) = &installed.dist_info else {
        return Ok(());
    };
    let (built_against, _) = abi_fingerprints(r, step, cx, facts);
    let rec = python::BuildRecord {
        component: r.name.clone(),
        version: installed.version.clone(),
        source: p.identity.clone(),
        wheel_sha256: p.wheel.as_deref().and_then(|w| source::sha256_file(w).ok()),
        archs: plan.archs.clone(),
        cuda: cx.machine.cuda_toolkit.as_ref().map(|t| t.version.to_string()),
        built_against,
        features: step.features.clone(),
        inputs: p.inputs.clone(),
    };
    let io = |e| fail(StepError::io(format!("cannot write kiln.json into {info}"))(e));
    let text = serde_json::to_string_pretty(&rec).map_err(|e| io(std::io::Error::other(e)))?;
    // List it in RECORD first, so that uninstalling the distribution removes it too, even when
    // kiln is killed right after writing it (a rollback then leaves no stray dist-info behind).
    let record = Path::new(info).join("RECORD");
    let listed = std::fs::read_to_string(&record).map_err(io)?;
    let dir = Path::new(info)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(text) = listed_with(&listed, &format!("{dir}/kiln.json")) {
        owned::replace_file(&record, text.as_bytes()).map_err(io)?;
    }
    owned::replace_file(&Path::new(info).join("kiln.json"), text.as_bytes()).map_err(io)?;
    crate::crash_point::reached("record");
    Ok(())
}

/// Pins every distribution kiln manages, so that installing with dependencies can never
/// replace one of them (torch above all) behind the user's back: at the version the plan
/// installs where a step of it changes that component (steps before this one installed it, the
/// ones after will), else at the version installed before the run. Adds the version's own
/// `constraints` (dependencies its metadata leaves too open). The facts from before the run
/// alone were not enough: a component an earlier step installed was unpinned, and the next
/// step's dependencies replaced it (vLLM 0.26.0: cutlass-dsl 4.6.0 installed, then replaced by
/// 4.8.1 when flashinfer 0.6.14 was installed).
pub(super) fn write_constraints(
    cx: &Context,
    plan: &Plan,
    except: &[&str],
    own: &[String],
    work: &Path,
) -> std::io::Result<PathBuf> {
    let mut lines = own.to_vec();
    for r in cx.set.recipes.values() {
        let Some(d) = &r.dist else { continue };
        if except.iter().any(|e| normalize(d) == normalize(e)) {
            continue;
        }
        let planned = plan
            .steps
            .iter()
            .find(|s| s.name == r.name && s.action.changes())
            .and_then(|s| s.version.as_deref());
        if let Some(v) = planned {
            lines.push(format!("{d}=={}", v.split('+').next().unwrap_or(v)));
        } else if let Some(inst) = cx.facts.dists.get(&normalize(d)) {
            lines.push(format!("{}=={}", inst.name, inst.version));
        }
    }
    std::fs::create_dir_all(work)?;
    let path = work.join("constraints.txt");
    std::fs::write(&path, lines.join("\n") + "\n")?;
    Ok(path)
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
