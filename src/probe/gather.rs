//! The probe of one interpreter for a set of components, part by part through the probe cache:
//! the distribution list, each component's imports, each distribution's CUDA binaries and each
//! smoke test are taken from the cache while their stamps hold, and only the rest is probed.
//!
//! What is probed runs side by side, at most `side_by_side` interpreters at once, the slowest
//! first: the listing in one interpreter, and with CPUs enough each component's imports in an
//! interpreter of its own (so a cold probe costs about its slowest import, not the sum). With
//! fewer CPUs than components, components linked by dependencies share one interpreter
//! (importing vllm imports torch anyway), so no CPU goes to importing torch twice, and
//! independent sets still get interpreters of their own (`probe::side_by_side`). A component's
//! stamp covers the files its interpreter loaded up to its last import. Binaries are read in
//! the same pool. Each
//! interpreter keeps the per-import time limit and pins an import that hangs or crashes it on
//! its module (`probe::python`). Smoke tests run one at a time afterwards (they share the GPU).
//!
//! After an install, a component whose imports the install's last verification tried is
//! answered from that verification ([`Request::known`]) while the listing is the one it saw,
//! and so is its smoke test where that verification ran the same one.
//!
//! It deliberately ignores recipes: the session hands it [`Unit`]s (a component's imports, the
//! distributions it stands on, its smoke test) as plain values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::binaries::{self, Binaries};
use super::cache::{BinariesEntry, CacheUse, Entries, ImportsEntry, ListingEntry, Probed, SmokeEntry, Sources};
use super::python::{self, Dist, ImportResult, ProbeError, PythonFacts, TorchFacts};
use super::side_by_side::{self, groups};
use super::smoke::{self, Script};
use super::stamp::{self, Graph, Infos};
use crate::watch::Task as Watched;

/// One component as the probe sees it.
#[derive(Debug, Clone)]
pub struct Unit {
    pub name: String,
    /// Tried in this order (in an interpreter of its own when CPUs allow).
    pub imports: Vec<String>,
    /// The distributions (normalized names) of it and of the components it depends on: their
    /// dist-info directories and what they require are part of its stamp.
    pub dists: Vec<String>,
    /// The components in scope it depends on (they share an interpreter with it when CPUs are
    /// short).
    pub after: Vec<String>,
    pub smoke: Option<Smoke>,
}

/// A smoke test, run when the component's distribution is installed and its own imports ran.
#[derive(Debug, Clone)]
pub struct Smoke {
    /// As the recipe writes it (`smoke/torch.py`).
    pub path: String,
    pub text: String,
    /// Whatever else decides the result (the archs it runs for); part of the cache key.
    pub key: String,
    /// The component's distribution (normalized) and the imports that must have run: those of
    /// the installed version where it has its own (`by_version`), else `needs`.
    pub dist: String,
    pub needs: Vec<String>,
    pub needs_by_version: Vec<(String, Vec<String>)>,
    /// A serving proof (`[verify] serve`).
    pub serve: bool,
}

/// What to probe, and how.
pub struct Request<'a> {
    /// kiln's cache directory.
    pub cache: &'a Path,
    pub python: &'a Path,
    pub units: &'a [Unit],
    /// The distributions (normalized) whose CUDA binaries are read.
    pub binaries: &'a [String],
    /// Read the CUDA binaries of every installed distribution too (those no recipe manages are
    /// judged by them, `resolve::unmanaged`).
    pub every_distribution: bool,
    pub per_import: Duration,
    /// How many interpreters may run at once (the CPUs kiln may use).
    pub side_by_side: usize,
    /// Probe every part in scope again.
    pub refresh: bool,
    /// Where smoke scripts are written and run.
    pub smoke_scratch: &'a Path,
    /// Told how the probe's interpreters and binary reads go, and when each smoke test or
    /// serving proof starts and ends.
    pub watch: &'a crate::watch::Watch,
    /// What an install's last verification saw (its listing and the imports it tried): a
    /// component whose imports it tried all is answered from it, not tried again, when the
    /// listing now is the same one (nothing installed or removed since).
    pub known: Option<&'a PythonFacts>,
}

enum Task<'a> {
    Listing,
    /// One interpreter for these components' imports, in this order.
    Imports(Vec<&'a Unit>),
    Binaries(&'a str, &'a Dist),
}

enum Done {
    Listing(Box<PythonFacts>),
    /// One answer per component of the task.
    Imports(Vec<Answer>),
    Binaries(Binaries),
}

/// One component's imports as its interpreter answered.
#[derive(Default)]
struct Answer {
    imports: BTreeMap<String, ImportResult>,
    torch: Option<TorchFacts>,
    seconds: f64,
    /// What the interpreter loaded up to its last import (sorted).
    files: Vec<String>,
}

/// Probes what the cache cannot answer for `req`, and answers the rest from it.
pub fn gather(req: &Request) -> Result<(Probed, Sources), ProbeError> {
    let entries = Entries::new(req.cache, req.python);
    let fresh = if req.refresh { CacheUse::Refresh } else { CacheUse::Miss };
    let n = req.side_by_side.max(1);
    let mut sources = Sources {
        distributions: CacheUse::Hit,
        imports: BTreeMap::new(),
        binaries: BTreeMap::new(),
        smoke: BTreeMap::new(),
        interpreters: 0,
        side_by_side: n,
    };
    let old: BTreeMap<&str, ImportsEntry> = if req.refresh {
        BTreeMap::new()
    } else {
        req.units
            .iter()
            .filter_map(|u| Some((u.name.as_str(), entries.imports(&u.name, &u.imports)?)))
            .collect()
    };
    let estimate = |u: &Unit| {
        old.get(u.name.as_str())
            .map_or(1e6 + u.dists.len() as f64, |e| e.seconds)
    };
    // Imports probed now, by component.
    let mut probed: BTreeMap<&str, Answer> = BTreeMap::new();

    let cached = (!req.refresh)
        .then(|| entries.listing())
        .flatten()
        .map(|e| (Infos::of(&e.facts), e))
        .filter(|(infos, e)| stamp::listing(req.python, &e.facts, infos) == e.stamp);
    let (listing, infos) = match cached {
        Some((infos, e)) => (e, infos),
        None => {
            // The listing and every component never probed, side by side; the components
            // probed before need the listing to tell whether they changed.
            sources.distributions = fresh;
            let first: Vec<&Unit> = req
                .units
                .iter()
                .filter(|u| !u.imports.is_empty() && !old.contains_key(u.name.as_str()))
                .filter(|u| !req.known.is_some_and(|k| tried_all(u, k)))
                .collect();
            let mut tasks = vec![Task::Listing];
            tasks.extend(groups(first, n, &estimate).into_iter().map(Task::Imports));
            let mut facts = None;
            for (task, done) in tasks.iter().zip(run(req, &tasks, n, &mut sources)?) {
                match (task, done) {
                    (_, Done::Listing(f)) => facts = Some(*f),
                    (Task::Imports(us), Done::Imports(answers)) => {
                        probed.extend(us.iter().map(|u| u.name.as_str()).zip(answers));
                    }
                    _ => {}
                }
            }
            let facts = facts.ok_or_else(|| ProbeError::BadAnswer {
                python: req.python.display().to_string(),
                detail: "the listing did not run".into(),
            })?;
            let infos = Infos::of(&facts);
            let e = ListingEntry {
                stamp: stamp::listing(req.python, &facts, &infos),
                graph: Graph::of(&facts),
                facts,
            };
            entries.put_listing(&e);
            (e, infos)
        }
    };

    // The distributions whose binaries are read: those asked for, or every one installed.
    let wanted: Vec<String> = if req.every_distribution {
        let mut all: BTreeSet<String> = req.binaries.iter().cloned().collect();
        all.extend(listing.facts.dists.keys().cloned());
        all.into_iter().collect()
    } else {
        req.binaries.to_vec()
    };
    // Every file the entries name, looked up once, side by side.
    let old_binaries: BTreeMap<&str, BinariesEntry> = if req.refresh {
        BTreeMap::new()
    } else {
        wanted
            .iter()
            .filter(|d| listing.facts.dists.contains_key(*d))
            .filter_map(|d| Some((d.as_str(), entries.binaries(d)?)))
            .collect()
    };
    let named: BTreeSet<&str> = old
        .values()
        .flat_map(|e| e.files.lines())
        .chain(old_binaries.values().flat_map(|e| e.files.lines()))
        .collect();
    let stats = stamp::Stats::of(named, n);
    let at = stamp::At {
        facts: &listing.facts,
        graph: &listing.graph,
        infos: &infos,
        stats: &stats,
        base: stamp::base(req.python, &listing.graph),
    };
    let component_stamp = |u: &Unit, files: &str, failed: bool| stamp::component(&at, &u.dists, files.lines(), failed);

    // What changed since it was probed, and what was never probed, side by side; what the
    // install's verification tried just now, from its answers.
    let verified = req.known.filter(|k| k.same_listing(&listing.facts));
    let mut again: Vec<&Unit> = Vec::new();
    for u in req.units {
        if probed.contains_key(u.name.as_str()) {
            continue;
        }
        match old.get(u.name.as_str()) {
            Some(e) if component_stamp(u, &e.files, e.failed()) == e.stamp => {
                if !u.imports.is_empty() {
                    sources.imports.insert(u.name.clone(), CacheUse::Hit);
                }
            }
            _ if u.imports.is_empty() => {
                probed.insert(u.name.as_str(), Answer::default());
            }
            _ => match verified.filter(|k| tried_all(u, k)) {
                Some(k) => {
                    probed.insert(u.name.as_str(), known_answer(u, k));
                }
                None => again.push(u),
            },
        }
    }
    let mut tasks: Vec<Task> = groups(again, n, &estimate).into_iter().map(Task::Imports).collect();
    let mut binaries: BTreeMap<String, Binaries> = BTreeMap::new();
    for d in &wanted {
        let Some(dist) = listing.facts.dists.get(d) else {
            continue;
        };
        match old_binaries.get(d.as_str()) {
            Some(e)
                if e.stamp
                    == stamp::binaries(dist, &e.files.lines().map(str::to_string).collect::<Vec<_>>(), &stats) =>
            {
                binaries.insert(d.clone(), e.binaries.clone());
                sources.binaries.insert(d.clone(), CacheUse::Hit);
            }
            _ => tasks.push(Task::Binaries(d, dist)),
        }
    }
    for (task, done) in tasks.iter().zip(run(req, &tasks, n, &mut sources)?) {
        match (task, done) {
            (Task::Imports(us), Done::Imports(answers)) => {
                probed.extend(us.iter().map(|u| u.name.as_str()).zip(answers));
            }
            (Task::Binaries(d, dist), Done::Binaries(b)) => {
                let files = stamp::shared_objects(dist);
                entries.put_binaries(
                    d,
                    &BinariesEntry {
                        stamp: stamp::binaries(dist, &files, &stats),
                        files: files.join("\n"),
                        binaries: b.clone(),
                    },
                );
                binaries.insert(d.to_string(), b);
                sources.binaries.insert(d.to_string(), fresh);
            }
            _ => {}
        }
    }

    // Each component's entry as it stands now; new ones are written below, with their smoke test.
    let mut now: BTreeMap<&str, (ImportsEntry, bool)> = BTreeMap::new();
    for u in req.units {
        if let Some(a) = probed.remove(u.name.as_str()) {
            if !u.imports.is_empty() {
                sources.imports.insert(u.name.clone(), fresh);
            }
            let mut e = ImportsEntry {
                stamp: String::new(),
                imports: a.imports,
                torch: a.torch,
                seconds: a.seconds,
                files: a.files.join("\n"),
                smoke: None,
            };
            e.stamp = component_stamp(u, &e.files, e.failed());
            now.insert(u.name.as_str(), (e, true));
        } else if let Some(e) = old.get(u.name.as_str()) {
            now.insert(u.name.as_str(), (e.clone(), false));
        }
    }
    let mut smoke = BTreeMap::new();
    for u in req.units {
        let (Some(s), Some((e, dirty))) = (&u.smoke, now.get_mut(u.name.as_str())) else {
            continue;
        };
        if let Some(done) = e.smoke.as_ref().filter(|d| d.key == s.key) {
            smoke.insert(u.name.clone(), done.result.clone());
            sources.smoke.insert(u.name.clone(), CacheUse::Hit);
            continue;
        }
        // The install's verification ran this smoke test just now, on this listing.
        let just_ran = verified
            .and_then(|k| k.smoke.get(&u.name))
            .filter(|(key, _)| *key == s.key);
        let result = match just_ran {
            Some((_, result)) => result.clone(),
            None => {
                let runs = listing.facts.dists.get(&s.dist).is_some_and(|d| {
                    let installed = d.version.split('+').next().unwrap_or(&d.version);
                    let needs = s
                        .needs_by_version
                        .iter()
                        .find(|(v, _)| v == installed)
                        .map_or(&s.needs, |(_, n)| n);
                    needs.iter().all(|m| e.imports.get(m).is_some_and(|i| i.ok))
                });
                if !runs {
                    continue;
                }
                let script = Script {
                    component: &u.name,
                    path: &s.path,
                    text: &s.text,
                    serve: s.serve,
                };
                let kind = if s.serve {
                    Watched::ServingProof
                } else {
                    Watched::SmokeTest
                };
                let task = req.watch.start(kind, &u.name, s.path.clone());
                let result = smoke::run(req.python, &script, req.smoke_scratch, req.per_import);
                task.finish(result.ok);
                result
            }
        };
        sources.smoke.insert(u.name.clone(), fresh);
        smoke.insert(u.name.clone(), result.clone());
        e.smoke = Some(SmokeEntry {
            key: s.key.clone(),
            result,
        });
        *dirty = true;
    }
    for u in req.units {
        if let Some((e, true)) = now.get(u.name.as_str()) {
            entries.put_imports(&u.name, &u.imports, e);
        }
    }

    let mut facts = listing.facts;
    for u in req.units {
        if let Some((e, _)) = now.get(u.name.as_str()) {
            for (m, r) in &e.imports {
                facts.imports.entry(m.clone()).or_insert_with(|| r.clone());
            }
        }
    }
    // torch's facts from the component that imports torch itself, else from any that did.
    let imports_torch = |u: &&Unit| u.imports.iter().any(|m| m == "torch");
    facts.torch = req
        .units
        .iter()
        .filter(imports_torch)
        .chain(req.units.iter())
        .find_map(|u| now.get(u.name.as_str()).and_then(|(e, _)| e.torch.clone()));
    Ok((Probed { facts, binaries, smoke }, sources))
}

/// Runs `tasks`, at most `n` at once, in order of the list (the slowest first); the answers
/// come back in the same order. The first probe that gave no answer is the error.
fn run(req: &Request, tasks: &[Task], n: usize, sources: &mut Sources) -> Result<Vec<Done>, ProbeError> {
    sources.interpreters += tasks.iter().filter(|t| !matches!(t, Task::Binaries(..))).count();
    let one = |t: &Task| -> Result<Done, ProbeError> {
        let start = Instant::now();
        Ok(match t {
            Task::Listing => Done::Listing(Box::new(python::probe(req.python, &[], req.per_import)?)),
            Task::Imports(us) => {
                let mut imports: Vec<String> = Vec::new();
                for m in us.iter().flat_map(|u| u.imports.iter()) {
                    if !imports.contains(m) {
                        imports.push(m.clone());
                    }
                }
                let f = python::probe_imports(req.python, &imports, req.per_import)?;
                let wall = start.elapsed().as_secs_f64();
                let wall = (us.len() == 1).then_some(wall);
                Done::Imports(us.iter().map(|u| answer(u, &imports, &f, wall)).collect())
            }
            Task::Binaries(_, d) => Done::Binaries(binaries::scan(d)),
        })
    };
    let what = probe_detail(tasks, n);
    let total = tasks.iter().filter(|t| !matches!(t, Task::Listing)).count() as u64;
    let watched = (total > 0).then(|| {
        std::sync::Mutex::new((
            req.watch.start(Watched::Probe, &req.python.display().to_string(), what),
            0,
        ))
    });
    let answers = side_by_side::run_all(tasks, n, |t| {
        let done = one(t);
        if matches!(t, Task::Listing) {
            return done;
        }
        if let Some((task, count)) = watched.as_ref().and_then(|w| w.lock().ok()).as_deref_mut() {
            *count += 1;
            task.progress(*count, Some(total));
        }
        done
    });
    let answers: Result<Vec<Done>, ProbeError> = answers.into_iter().collect();
    if let Some(w) = watched.and_then(|w| w.into_inner().ok()) {
        w.0.finish(answers.is_ok());
    }
    answers
}

/// Unit `u`'s part of what an interpreter answered, having tried `order`: its imports, the
/// files loaded up to its last import (what came before in the same interpreter may have
/// decided it), and torch's facts when it imports torch or depends on it; `wall` is the
/// interpreter's time when it probed `u` alone.
fn answer(u: &Unit, order: &[String], f: &PythonFacts, wall: Option<f64>) -> Answer {
    let last = order.iter().rposition(|m| u.imports.contains(m)).map_or(0, |i| i + 1);
    let files: BTreeSet<&str> = order[..last]
        .iter()
        .filter_map(|m| f.imports.get(m))
        .flat_map(|r| r.loaded.iter().map(String::as_str))
        .collect();
    let imports: BTreeMap<String, ImportResult> = u
        .imports
        .iter()
        .filter_map(|m| Some((m.clone(), f.imports.get(m)?.clone())))
        .collect();
    let torch_is_its = u.imports.iter().any(|m| m == "torch") || u.dists.iter().any(|d| d == "torch");
    Answer {
        seconds: wall.unwrap_or_else(|| imports.values().map(|i| i.seconds).sum()),
        imports,
        torch: f.torch.clone().filter(|_| torch_is_its),
        files: files.into_iter().map(str::to_string).collect(),
    }
}

/// What a probe's tasks do, for whoever watches: `2 interpreters trying imports, the CUDA
/// binaries of 5 distributions read, 2 side by side`.
fn probe_detail(tasks: &[Task], n: usize) -> String {
    let plural = |k: usize| if k == 1 { "" } else { "s" };
    let interpreters = tasks.iter().filter(|t| matches!(t, Task::Imports(_))).count();
    let dists = tasks.iter().filter(|t| matches!(t, Task::Binaries(..))).count();
    let mut parts = Vec::new();
    if interpreters > 0 {
        parts.push(format!(
            "{interpreters} interpreter{} trying imports",
            plural(interpreters)
        ));
    }
    if dists > 0 {
        parts.push(format!(
            "the CUDA binaries of {dists} distribution{} read",
            plural(dists)
        ));
    }
    format!("{}, {n} side by side", parts.join(", "))
}

/// Whether the verification whose facts are `k` tried every import of `u`.
fn tried_all(u: &Unit, k: &PythonFacts) -> bool {
    !u.imports.is_empty() && u.imports.iter().all(|m| k.imports.contains_key(m))
}

/// `u`'s answer from a verification that tried its imports: as [`answer`] gives it, with the
/// files every import of that interpreter loaded (the order it tried them in is not kept, so all
/// of them count: a stamp over more files can only go stale sooner).
fn known_answer(u: &Unit, k: &PythonFacts) -> Answer {
    let order: Vec<String> = k
        .imports
        .keys()
        .filter(|m| !u.imports.contains(m))
        .chain(u.imports.iter())
        .cloned()
        .collect();
    answer(u, &order, k, None)
}
