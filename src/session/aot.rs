//! `kiln install --aot`: the JIT modules a serving process would compile at its first request
//! (the recipe's `[aot] modules`, plus those of `[aot] on_request` that `--aot-module` names),
//! compiled now for the target archs and installed where the component loads a precompiled
//! module as it is, without a compiler (for flashinfer, `<package>/data/aot/<name>/<name>.so`;
//! the recipe's `[aot]` script names the place, see `recipes/aot/flashinfer.py`).
//!
//! Why that place and not the JIT's own cache: flashinfer loads a module in its AOT directory
//! without ninja or nvcc, while a module in its JIT workspace always goes through ninja, whose
//! build.ninja holds absolute paths (sources, CUDA_HOME): a copied workspace, or one on a node
//! whose toolkit lives elsewhere, is compiled again (flashinfer 0.7.4 jit/core.py:372-393,
//! :576-640; jit/env.py:238, :296-300). So the modules are kept in kiln's cache under
//! `aot/<key>` (`store::aot`), a self-contained entry that the wheel cache's neighbours
//! and bundles carry, and copied into the environment, listed in the distribution's RECORD.
//!
//! The key is a hash of what decides the binaries: component and installed version, the
//! script, the modules, the script's environment without its job counts (the arch list stays),
//! the target archs, the host compiler, the installed versions of the component's `abi`
//! dependencies, and the toolkit version. A node without a toolkit takes the newest entry whose
//! inputs other than the toolkit match (its manifest's `base`): it could not compile anyway. Compiling runs
//! the script once for all modules with `{jobs}` = min(CPUs, memory / `memory_per_job`), the
//! builder's rule. After installing, the script runs again in check mode with no compiler
//! reachable (`PATH` an empty directory, `CUDA_HOME` nowhere, the component's JIT disabled): each
//! module must be found by the component as precompiled and load; otherwise the files are
//! removed again. The files go in under the install journal (`apply::guarded`): a kiln killed
//! during the check is rolled back by the next kiln command. It deliberately ignores GPUs:
//! loading a module needs none, running it does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Session;
use crate::apply::owned::{self, Content};
use crate::probe::binaries::runs_on;
use crate::probe::{normalize, runtime};
use crate::process::Cmd;
use crate::recipe::Recipe;
use crate::recipe::model::Aot;
use crate::recipe::template::{Part, Var, Vars};
use crate::resolve;
use crate::settings::Settings;
use crate::store::aot::{self, CachedModule, Manifest};

/// Compiling a serving stack's modules is minutes on a loaded 2-core machine; an hour is a hang.
const LIMIT: Duration = Duration::from_secs(3600);

/// What `--aot` did for one component.
#[derive(Debug, Clone, Serialize)]
pub struct AotOutcome {
    pub component: String,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The cache entry (`<cache>/aot/<key>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<PathBuf>,
    pub from_cache: bool,
    pub seconds: f64,
    pub modules: Vec<AotModule>,
    /// The run-time environment file written with the modules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One module installed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AotModule {
    pub module: String,
    pub name: String,
    /// Where it is installed.
    pub path: PathBuf,
    /// SASS targets read back from it.
    pub sass: Vec<String>,
}

/// `<dist-info>/kiln-aot.json`: what `--aot` installed, for `doctor`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Installed {
    pub key: String,
    pub archs: Vec<String>,
    pub modules: Vec<CachedModule>,
}

/// One line the script prints.
#[derive(Deserialize)]
struct Line {
    module: String,
    name: String,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    install: Option<String>,
    #[serde(default)]
    aot: bool,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    loaded: bool,
    #[serde(default)]
    error: Option<String>,
}

impl Session {
    /// Compiles (or takes from the cache) and installs the `[aot]` modules of every component in
    /// scope that has them, and the modules `extra` names that a recipe compiles only when asked
    /// (`[aot] on_request`; `unknown_modules` says which no recipe in scope knows).
    pub fn warm(&self, settings: &Settings, extra: &[String]) -> Vec<AotOutcome> {
        self.scope
            .iter()
            .filter_map(|(n, _)| self.set.get(n))
            .filter_map(|r| r.aot.as_ref().map(|a| (r, with_requested(a, extra))))
            .map(|(r, aot)| {
                let aot = &aot;
                let start = Instant::now();
                let mut out = AotOutcome {
                    component: r.name.clone(),
                    ok: false,
                    key: None,
                    entry: None,
                    from_cache: false,
                    seconds: 0.0,
                    modules: Vec::new(),
                    runtime_file: None,
                    error: None,
                };
                if let Err(e) = self.warm_one(settings, r, aot, &mut out) {
                    out.error = Some(e);
                } else {
                    out.ok = true;
                }
                out.seconds = start.elapsed().as_secs_f64();
                out
            })
            .collect()
    }

    fn warm_one(&self, settings: &Settings, r: &Recipe, aot: &Aot, out: &mut AotOutcome) -> Result<(), String> {
        let dist_name = r.dist.clone().unwrap_or_else(|| r.name.clone());
        let dist = self
            .facts
            .dists
            .get(&normalize(&dist_name))
            .filter(|_| resolve::status::installed_and_imports(r, &self.facts))
            .ok_or_else(|| {
                format!(
                    "{} is not installed here (or does not import): install it first",
                    r.name
                )
            })?;
        let (Some(site), Some(info)) = (dist.location.as_deref(), dist.dist_info.as_deref()) else {
            return Err(format!("where {dist_name} is installed is unknown"));
        };
        if self.archs.is_empty() {
            return Err("no target arch: give --arch (no GPU was found)".into());
        }
        let toolkit = self.machine.cuda_toolkit.as_ref();
        let home = toolkit.and_then(|t| t.home.as_ref()).map(|h| h.display().to_string());
        let vars = Vars {
            python: self.python.display().to_string(),
            jobs: resolve::plan::jobs_for(r.build.memory_per_job, &self.machine, settings.jobs),
            version: dist.version.clone(),
            cuda_home: home.clone(),
            cuda_version: toolkit.map(|t| t.version.clone()),
            archs: self.archs.clone(),
            ..Vars::default()
        };
        let mut env = Vec::new();
        let mut keyed = Vec::new();
        for (k, t) in &aot.script.env {
            let v = t
                .render(&vars)
                .map_err(|e| format!("cannot set {k} = \"{t}\" for the AOT compile: {e}"))?;
            if !t.parts().iter().any(|p| matches!(p, Part::Var(Var::Jobs))) {
                keyed.push(format!("{k}={v}"));
            }
            env.push((k.clone(), v));
        }
        let archs: Vec<String> = self.archs.iter().map(|a| a.to_string()).collect();
        let compiler = self.machine.host_compiler.as_ref().map(|c| c.value.clone());
        let abi: Vec<String> = r
            .depends
            .iter()
            .filter(|d| d.abi)
            .filter_map(|d| self.set.get(&d.name)?.dist.as_deref())
            .filter_map(|d| self.facts.dists.get(&normalize(d)))
            .map(|d| format!("{} {}", d.name, d.version))
            .collect();
        let tk = toolkit.map(|t| t.version.to_string());
        let base = aot::hash(&[
            &r.name,
            &dist.version,
            &aot.script.text,
            &aot.modules.join(","),
            &keyed.join("\n"),
            compiler.as_deref().unwrap_or(""),
            &abi.join(","),
            &archs.join(" "),
        ]);
        // With no toolkit here, any toolkit's build of the same inputs will do: loading the
        // modules needs none, and there is nothing to compile with anyway.
        let cached = match &tk {
            Some(tk) => {
                let k = aot::key_of(&base, Some(tk));
                aot::lookup(&settings.cache_dir, &k).map(|m| (k, m))
            }
            None => aot::lookup_base(&settings.cache_dir, &base),
        };
        let key = cached
            .as_ref()
            .map_or_else(|| aot::key_of(&base, tk.as_deref()), |(k, _)| k.clone());
        out.key = Some(key.clone());
        let scratch = settings.cache_dir.join("work").join(format!("aot-{}-{key}", r.name));
        let manifest = match cached {
            Some((_, m)) => {
                out.from_cache = true;
                m
            }
            None => {
                let Some(home) = &home else {
                    return Err(format!(
                        "no compiled modules for this key in the cache, and no CUDA toolkit to compile them ({})",
                        self.machine.cuda_searched.join("; ")
                    ));
                };
                env.push(("CUDA_HOME".into(), home.clone()));
                let path = std::env::var("PATH").unwrap_or_default();
                let bin = Path::new(home).join("bin");
                env.push(("PATH".into(), format!("{}:{path}", bin.display())));
                env.push(("KILN_TARGET_ARCHS".into(), archs.join(" ")));
                let what = format!("{} for {}", aot.modules.join(", "), archs.join(", "));
                let task = settings.watch.start(crate::watch::Task::Aot, &r.name, what);
                let lines = run_script(&self.python, r, aot, &env, &scratch.join("compile"), false);
                task.finish(lines.is_ok());
                let lines = lines?;
                let mut files = Vec::new();
                let mut modules = Vec::new();
                for l in lines {
                    let (Some(file), Some(install)) = (l.file, l.install) else {
                        return Err(format!(
                            "{}: module {} without `file` and `install`",
                            aot.script.path, l.module
                        ));
                    };
                    files.push(PathBuf::from(file));
                    modules.push(CachedModule {
                        module: l.module,
                        name: l.name,
                        install,
                    });
                }
                let m = Manifest {
                    base: base.clone(),
                    component: r.name.clone(),
                    version: dist.version.clone(),
                    archs: archs.clone(),
                    toolkit: tk.clone(),
                    host_compiler: compiler.clone(),
                    modules,
                };
                aot::store(&settings.cache_dir, &key, &m, &files)
                    .map_err(|e| format!("cannot keep the modules in the cache: {e}"))?;
                m
            }
        };
        let entry = aot::entry_dir(&settings.cache_dir, &key);
        out.entry = Some(entry.clone());
        // Each module must hold an image that loads on every target arch.
        let driver = self.machine.driver_cuda.as_ref().map(|d| &d.value);
        for m in &manifest.modules {
            let file = aot::file_of(&entry, m);
            let report = crate::fatbin::read_file(&file).map_err(|e| format!("{}: {e}", m.module))?;
            for &a in &self.archs {
                let r = runs_on(&report, a, driver);
                if !r.usable {
                    return Err(format!("{} holds no image that runs on {a}: {}", m.module, r.why));
                }
            }
            out.modules.push(AotModule {
                module: m.module.clone(),
                name: m.name.clone(),
                path: Path::new(site).join(&m.install),
                sass: report.sass.clone(),
            });
        }
        self.install_and_check(settings, r, aot, site, info, &manifest, &key, out, &scratch)
    }

    /// Copies the modules (and the run-time environment file) into the environment, then runs
    /// the check; a failed check takes them out again.
    #[allow(clippy::too_many_arguments)]
    fn install_and_check(
        &self,
        settings: &Settings,
        r: &Recipe,
        aot: &Aot,
        site: &str,
        info: &str,
        manifest: &Manifest,
        key: &str,
        out: &mut AotOutcome,
        scratch: &Path,
    ) -> Result<(), String> {
        let entry = aot::entry_dir(&settings.cache_dir, key);
        let opts = resolve::plan::PlanOptions {
            archs: self.archs.clone(),
            jobs: settings.jobs,
            python: self.python.display().to_string(),
            compile_cache: None,
            tools: Default::default(),
            prebuilt: Default::default(),
            unprovable: Default::default(),
        };
        let version = manifest.version.as_str();
        // With no toolkit an arch spelling such as `{arch.flashinfer}` cannot be rendered; then
        // the run-time file is left as it is (nothing here could compile with it anyway).
        let run_env = match resolve::plan::runtime_env(r, Some(version), &self.machine, &opts) {
            Ok(e) => e,
            Err(_) if self.machine.cuda_toolkit.is_none() => Default::default(),
            Err(e) => return Err(e),
        };
        let pth = runtime::render(&r.name, &run_env);
        let record = Installed {
            key: key.to_string(),
            archs: manifest.archs.clone(),
            modules: manifest.modules.clone(),
        };
        let record = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
        let info_dir = Path::new(info)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let copies: Vec<PathBuf> = manifest.modules.iter().map(|m| aot::file_of(&entry, m)).collect();
        let mut files: Vec<(String, Content<'_>)> = manifest
            .modules
            .iter()
            .zip(&copies)
            .map(|(m, f)| (m.install.clone(), Content::Copy(f)))
            .collect();
        files.push((format!("{info_dir}/kiln-aot.json"), Content::Text(&record)));
        if !run_env.is_empty() {
            files.push((runtime::file_name(&r.name), Content::Text(&pth)));
            out.runtime_file = Some(Path::new(site).join(runtime::file_name(&r.name)));
        }
        // Under the install journal: a kiln killed during the check is rolled back by the next.
        let dist = r.dist.as_deref().unwrap_or(&r.name);
        let guarded = crate::apply::guarded::begin(&settings.cache_dir, &self.python, Path::new(site), &r.name, dist)
            .map_err(|e| format!("cannot snapshot {site} or write the install journal: {e}"))?;
        let added = owned::add(Path::new(site), Path::new(info), &files)
            .map_err(|e| format!("cannot install the modules into {site}: {e}"))?;
        // Proof that the component finds and loads them with no compiler in reach.
        let empty = scratch.join("empty-path");
        let _ = std::fs::create_dir_all(&empty);
        let mut env: Vec<(String, String)> = run_env.into_iter().collect();
        env.push(("KILN_AOT_CHECK".into(), "1".into()));
        env.push(("PATH".into(), empty.display().to_string()));
        env.push(("CUDA_HOME".into(), empty.join("no-cuda").display().to_string()));
        let checked = run_script(&self.python, r, aot, &env, &scratch.join("check"), true);
        let problem = match checked {
            Err(e) => Some(e),
            Ok(lines) => lines.iter().find_map(|l| {
                let want =
                    Path::new(site).join(manifest.modules.iter().find(|m| m.module == l.module)?.install.as_str());
                let at = l.path.as_deref().map(Path::new);
                (!(l.aot && l.loaded && at == Some(want.as_path()))).then(|| {
                    format!(
                        "{} was not loaded as precompiled (found at {}, loaded: {}{})",
                        l.module,
                        l.path.as_deref().unwrap_or("?"),
                        l.loaded,
                        l.error.as_deref().map(|e| format!("; {e}")).unwrap_or_default()
                    )
                })
            }),
        };
        if let Some(p) = problem {
            added.undo();
            drop(guarded);
            out.runtime_file = None;
            return Err(format!("check failed, modules removed again: {p}"));
        }
        guarded.keep();
        let _ = std::fs::remove_dir_all(scratch);
        Ok(())
    }
}

/// Runs the `[aot]` script in `dir` (fresh) and returns its lines; every module the recipe
/// names must have one. The output goes to `dir/aot.log`.
/// `aot` with the modules of `extra` that it compiles only on request.
fn with_requested(aot: &Aot, extra: &[String]) -> Aot {
    let mut aot = aot.clone();
    for m in extra.iter().filter(|m| aot.on_request.contains(m)) {
        if !aot.modules.contains(m) {
            aot.modules.push(m.clone());
        }
    }
    aot
}

impl Session {
    /// The names in `asked` that no `[aot]` recipe in scope compiles on request or always.
    pub fn unknown_modules(&self, asked: &[String]) -> Vec<String> {
        let known: Vec<&String> = self
            .scope
            .iter()
            .filter_map(|(n, _)| self.set.get(n)?.aot.as_ref())
            .flat_map(|a| a.modules.iter().chain(&a.on_request))
            .collect();
        asked.iter().filter(|m| !known.contains(m)).cloned().collect()
    }

    /// The components in scope with `[aot]` (what `warm` compiles for).
    pub fn aot_components(&self) -> Vec<String> {
        self.scope
            .iter()
            .filter(|(n, _)| self.set.get(n).is_some_and(|r| r.aot.is_some()))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

fn run_script(
    python: &Path,
    r: &Recipe,
    aot: &Aot,
    env: &[(String, String)],
    dir: &Path,
    check: bool,
) -> Result<Vec<Line>, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join(format!("{}-aot.py", r.name));
    std::fs::write(&file, &aot.script.text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let mut cmd = Cmd::new(python.display().to_string())
        .args(["-I", "-B"])
        .arg(file.display().to_string())
        .cwd(dir)
        .env("KILN_AOT_DIR", dir.display().to_string())
        .env("KILN_AOT_MODULES", aot.modules.join(","));
    for (k, v) in env {
        cmd = cmd.env(k.clone(), v.clone());
    }
    let o = cmd
        .capture(b"", LIMIT)
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let log = dir.join("aot.log");
    let _ = std::fs::write(&log, format!("{}\n{}", o.stdout, o.stderr));
    let what = if check { "check" } else { "compile" };
    if !o.success {
        let mut why = crate::process::cause_lines(&log, 0, 3);
        if why.is_empty() {
            why = crate::process::tail_lines(&log, 3);
        }
        let why = why.join(" | ");
        return Err(format!(
            "{} ({what}, {}) failed: {why}; log: {}",
            aot.script.path,
            o.status,
            log.display()
        ));
    }
    let lines: Vec<Line> = o
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let missing: Vec<&String> = aot
        .modules
        .iter()
        .filter(|m| !lines.iter().any(|l| &l.module == *m))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} ({what}) said nothing of {missing:?}; log: {}",
            aot.script.path,
            log.display()
        ));
    }
    Ok(lines)
}

/// What `--aot` installed for `dist` (from its `kiln-aot.json`), for `doctor`.
pub fn installed(info: &Path) -> Option<Installed> {
    crate::state::cached_json(&info.join("kiln-aot.json"))
}
