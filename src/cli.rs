//! The command line: clap definitions, and the one place where global flags become typed
//! [`Settings`]. Doc comments here are the `--help` text. It deliberately ignores what the
//! commands do with their arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::arch::{self, ArchParseError};
use crate::compile_cache::Backend;
use crate::settings::{self, DEFAULT_BUNDLE_FILE, DEFAULT_LOCK_FILE, Settings};

/// kiln provisions GPU inference stacks: it checks what a Python environment really has
/// (imports that run, not lines in `pip list`), and builds from source only what is missing
/// or broken, for one GPU architecture.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, propagate_version = true, max_term_width = 100)]
#[command(
    after_help = "Examples:\n  kiln doctor --arch 12.0            what works here, with evidence\n  kiln plan sglang --arch 12.0       what `install` would do, in order, and why\n  kiln install 'flashinfer[cutedsl]' build what is missing, verify each piece\n  kiln verify                        run every proof again (no cache)\n  kiln lock                          record the proven environment in kiln.lock\n  kiln install --locked              reproduce kiln.lock on another node\n  kiln recipes flashinfer            show a recipe"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: Global,
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// The Python interpreter to inspect and install into [default: $VIRTUAL_ENV/bin/python, else python3 on PATH]
    #[arg(long, global = true, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Target GPU archs: `12.0`, `sm_120` or a comma list [default: the GPUs found]
    #[arg(long, global = true, value_name = "ARCHS")]
    pub arch: Option<String>,
    /// Use the recipes in DIR instead of the ones built into kiln
    #[arg(long, global = true, value_name = "DIR")]
    pub recipes: Option<PathBuf>,
    /// Print machine-readable JSON on stdout
    #[arg(long, global = true)]
    pub json: bool,
    /// Where kiln keeps downloads, build trees and logs [default: $XDG_CACHE_HOME/kiln or ~/.cache/kiln]
    #[arg(long, global = true, value_name = "DIR", env = "KILN_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile jobs per build; independent builds run side by side while CPUs and memory are left
    /// [default: min(CPUs, available memory / the recipe's memory_per_job), decided when planning]
    #[arg(long, short = 'j', global = true, value_name = "N")]
    pub jobs: Option<usize>,
    /// The memory builds may use together (`16GiB`): jobs are planned within it, and each CUDA
    /// compile waits until the figure measured for its unit fits [default: the memory available]
    #[arg(long, global = true, value_name = "SIZE", env = "KILN_MEMORY_LIMIT", value_parser = memory_size)]
    pub memory_limit: Option<u64>,
    /// Time limit for each import the probe tries; a hanging import is reported, not waited for
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        env = "KILN_IMPORT_TIMEOUT",
        default_value_t = 120
    )]
    pub import_timeout: u64,
    /// Probe the environment again even if nothing in it changed since the last run
    #[arg(long, global = true)]
    pub refresh: bool,
    /// Let kiln replace this installed component (repeatable; e.g. `--allow-replace torch`);
    /// components built against it are then rebuilt
    #[arg(long, global = true, value_name = "NAME")]
    pub allow_replace: Vec<String>,
    /// Use only what is already here: sources from kiln's cache (sdists, git mirrors), wheels
    /// from the wheel cache, packages from uv's cache (`uv --offline`) or none (`pip --no-index`).
    /// A step whose source is not cached is blocked at plan time, with the reason
    #[arg(long, global = true, env = "KILN_OFFLINE", value_parser = clap::builder::FalseyValueParser::new())]
    pub offline: bool,
    /// Build from source: never fetch or install the prebuilt wheels a recipe offers
    #[arg(long, global = true, env = "KILN_NO_PREBUILT", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_prebuilt: bool,
    /// Plain progress lines instead of spinners
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Print only errors
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Kill a build command that writes nothing and uses no CPU time for this long (`90s`, `20m`,
    /// `6h`); `none` lifts the limit [default: the recipe's `[build] stall`, else 30m]
    #[arg(long, global = true, value_name = "DURATION", value_parser = stall)]
    pub stall: Option<std::time::Duration>,
    /// Kill a build that runs longer than this, all its commands together [default: the recipe's
    /// `[build] limit`, else none]
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration)]
    pub limit: Option<std::time::Duration>,
    /// Fail at once, saying who, when another kiln is changing the same environment (default:
    /// wait for it)
    #[arg(long, global = true)]
    pub no_wait: bool,
    /// Compile through sccache with this shared backend: `redis://host:port[/db]` or a
    /// directory. Nodes that share it compile each translation unit once; a backend that is
    /// down or stops answering costs a warning, never a build
    #[arg(long, global = true, value_name = "URL", env = "KILN_COMPILE_CACHE", value_parser = Backend::parse)]
    pub compile_cache: Option<Backend>,
    /// A backend you need (repeatable, or a comma list): `--quantization=fp_quant`, or the bare
    /// value where one flag offers it. CUDA binaries only such backends use (the recipe's
    /// `[[backends]] binaries`) must then hold the target arch: a prebuilt wheel without it is
    /// built from source instead. Without it, such a gap is only reported
    #[arg(
        long,
        global = true,
        value_name = "BACKEND",
        env = "KILN_NEED",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub need: Vec<String>,
}

/// A `--stall` or `--limit` value.
/// `--stall`: a duration, or `none` (no stall limit, kept as zero).
fn stall(s: &str) -> Result<std::time::Duration, String> {
    if s == "none" {
        return Ok(std::time::Duration::ZERO);
    }
    duration(s).map_err(|e| format!("{e}, or `none`"))
}

/// A `--memory-limit` value: a size with a unit (`16GiB`, `512MiB`, `64GB`) or bytes, above 0.
fn memory_size(s: &str) -> Result<u64, String> {
    let bytes = s
        .parse::<bytesize::ByteSize>()
        .map_err(|_| format!("expected a size such as `16GiB`, `512MiB` or `64GB`, not `{s}`"))?;
    match bytes.as_u64() {
        0 => Err("a memory limit of 0 leaves builds nothing: give a size such as `16GiB`".into()),
        n => Ok(n),
    }
}

fn duration(s: &str) -> Result<std::time::Duration, String> {
    crate::recipe::parse_duration(s)
        .ok_or_else(|| format!("expected a number and a unit: `90s`, `20m`, `6h` or `1d`, not `{s}`"))
}

impl Global {
    /// The typed settings these flags mean; a `--arch` that names no GPU arch is an error.
    pub fn settings(&self) -> Result<Settings, ArchParseError> {
        Ok(Settings {
            python: self.python.clone(),
            archs: self.arch.as_deref().map(arch::parse_list).transpose()?,
            recipes: self.recipes.clone(),
            cache_dir: settings::cache_dir(self.cache_dir.as_deref()),
            jobs: self.jobs,
            memory_limit: self.memory_limit,
            import_timeout: settings::import_timeout(self.import_timeout),
            refresh: self.refresh,
            allow_replace: self.allow_replace.clone(),
            offline: self.offline,
            prebuilt: !self.no_prebuilt,
            json: self.json,
            progress: !self.no_progress,
            quiet: self.quiet,
            jit_proof: true,
            no_wait: self.no_wait,
            keep_done: false,
            stall: self.stall,
            limit: self.limit,
            compile_cache: self.compile_cache.clone(),
            needs: self.need.clone(),
            watch: crate::watch::Watch::default(),
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What is here and what works: machine facts and a status for each component, with evidence
    ///
    /// Statuses: ok (installed, accepted version, imports ran, kernel images for the target arch,
    /// smoke test passed where a GPU of that arch is here; for a component whose kernels are
    /// compiled at run time, a kernel compiled through its own JIT for the arch and read back),
    /// missing, outdated, broken (an import
    /// or the smoke test failed; its error is the evidence), wrong-arch (no kernel image for the
    /// target in its binaries or its JIT's output), stale (built against a torch or other ABI dependency that has
    /// changed since), blocked (needs what kiln does not install, such as the CUDA toolkit a JIT
    /// compiles with), unsupported (cannot work on
    /// this target). Exit status 1 when anything is not ok.
    Doctor(Targets),
    /// What `install` would do, step by step in dependency order, with the reason for each
    Plan(PlanArgs),
    /// Will this serving command run here? Each backend it uses, judged for the target archs
    ///
    /// Reads the command after `--` as the engine would (`python -m sglang.launch_server ...`,
    /// `sglang serve ...`, `vllm serve MODEL ...`, with `VAR=value` prefixes for backends chosen by
    /// environment variables), the model's `config.json` (and `hf_quant_config.json`) from its
    /// local directory (never from a hub) for its architecture, quantization and KV cache, and
    /// resolves each `auto` the way that engine version does. For every flag that matters to the
    /// model (KV cache, attention and its DSA sub-backends, MoE, FP4 GEMM) it answers: works
    /// (proven here: the components are ok, the binaries hold the arch, the JIT modules compiled
    /// for it), not proven (with the `kiln install` line that would make it work), or no — each
    /// with every reason and its upstream source, and the values that do work instead.
    ///
    /// The engine's version is the installed one, else the one TARGETS pin
    /// (`kiln check 'sglang==0.5.11' -- ...`), else what `kiln plan` would install. Exit status 0
    /// only when the answer is `works`; 1 otherwise.
    #[command(
        after_help = "Examples:\n  kiln check --arch 12.0 -- python -m sglang.launch_server --model-path /models/glm-5-nvfp4 --moe-runner-backend flashinfer_cutedsl\n  kiln check 'vllm==0.33.0' --arch 12.0 --json -- vllm serve /models/qwen3-30b-a3b-nvfp4 --moe-backend cutlass\n  kiln check 'vllm==0.20.0' --arch 9.0,12.0 -- vllm serve /models/llama --attention-backend FLASHINFER"
    )]
    Check(CheckArgs),
    /// Build and install what is missing or broken, verifying each component before the next
    ///
    /// Each component is built into a wheel first, then installed; its imports are re-run in a
    /// fresh interpreter, and its smoke test where a GPU of the target arch is present. A failure
    /// puts the environment back as it was and stops. A verified wheel is kept in the cache
    /// (`--cache-dir`) under what decides the binary, so the next build of the same thing, here or
    /// on a node sharing the cache, installs it without compiling. A compile killed for memory is
    /// retried with half the jobs. A wheel whose verification failed for a reason outside it (a
    /// missing dependency) is kept, marked unverified, and the next run verifies it again instead
    /// of compiling.
    ///
    /// A component whose kernels are compiled at run time (`[verify] jit`: flashinfer, the CuTe
    /// DSL) is then proven for the target archs as `doctor` proves it (and cached for it): one
    /// real kernel compiled through its own JIT and its image read back. A proof that fails or
    /// cannot run (no CUDA toolkit) does not undo the install, which imports fine, but install
    /// says the component is not ok for that arch and why, and exits 1: kernels would fail at
    /// first use. `--no-jit-proof` skips the proof (exit 0; `doctor` proves it later).
    Install(InstallArgs),
    /// Run the proofs again, ignoring the probe cache: imports, kernel images for the target arch,
    /// build fingerprints, smoke tests and JIT proofs, for every installed component (or those named and what
    /// they need). Exit status 1 when any proof fails.
    Verify(Targets),
    /// Write kiln.lock: the version, source, archs and ABI facts of every installed component
    ///
    /// Only a proven environment is locked: every installed component in scope must be ok (its
    /// imports ran, its binaries hold an image for the target), else nothing is written and the
    /// reasons are printed. `kiln install --locked` reproduces the lock on another node.
    Lock(LockArgs),
    /// Pack kiln.lock with what a node without network needs to reproduce it: `kiln install
    /// --bundle FILE` there
    ///
    /// The bundle holds the cached sources (sdists, git mirrors) and verified wheels the lock
    /// names, and a wheelhouse: the build requirements of what kiln builds and the runtime
    /// dependencies of what it installs, as wheels for the lock's Python and platform (fetched
    /// with `pip download` by the interpreter the lock was written from). What the lock says the
    /// target already has (`installed`, such as the machine's torch, and what it needs) and
    /// local `path` sources are left out; the output says which.
    ///
    /// `--for NODE.json [TARGETS]` bundles for another node instead, one kiln cannot build on or
    /// reach: the plan is made from the facts that node's `kiln doctor --json` wrote (its Python,
    /// wheel tags, GPUs, driver, installed distributions, libraries), prebuilt wheels are judged
    /// against that node, and the wheelhouse holds what it lacks, for its tags. Nothing in such
    /// a bundle is proven: `kiln install --bundle` on the node installs it offline, runs every
    /// proof there and writes the proven kiln.lock.
    ///
    /// `--split 60MiB` writes parts (`FILE.01-of-06` ...) for transfers that cap a file's size;
    /// `kiln install --bundle` takes any part's name, or `cat FILE.*-of-06 > FILE` joins them.
    ///
    /// Examples:
    ///   kiln bundle --lock kiln.lock -o stack.tar --split 60MiB
    ///   kiln bundle --for h200.json 'sglang==0.5.11' -o sglang.tar --split 60MiB
    Bundle(BundleArgs),
    /// What kiln's cache holds (sources, git mirrors, wheels, probe results, build trees, logs)
    /// and how big each part is; `kiln cache clean` to free space
    Cache(CacheArgs),
    /// List the recipes, or show one
    Recipes(RecipesArgs),
    /// Work on recipes: `kiln recipe draft NAME [VERSION]`
    Recipe(RecipeArgs),
    /// List the SASS and PTX targets inside CUDA binaries (ELF objects, shared libraries, .fatbin, wheels)
    ///
    /// Reads the fatbinary headers itself (no cuobjdump). With --arch, also says whether each
    /// file holds an image that runs on that arch (and, with the driver's CUDA version known,
    /// whether its PTX is new enough to fail with error 222).
    Arch(ArchArgs),
}

#[derive(Debug, Args)]
pub struct ArchArgs {
    /// Files to read: shared objects, objects, archives, fatbins, cubins, or wheels (`.whl`:
    /// each CUDA binary inside, streamed from the zip)
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The driver's CUDA version for the PTX check (e.g. 13.0) [default: from nvidia-smi]
    #[arg(long, value_name = "VERSION")]
    pub driver_cuda: Option<String>,
}

#[derive(Debug, Args)]
pub struct Targets {
    /// Components, optionally with features: `sglang`, `flashinfer[cutedsl]` [default: all]
    pub targets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// Plan for another node: the facts its `kiln doctor --json` wrote (interpreter, wheel tags,
    /// installed distributions, GPUs, driver, toolkit, libraries). Prebuilt wheels are judged
    /// against that node, not this host; nothing is proven until the node installs it
    #[arg(long = "for", value_name = "FILE")]
    pub for_node: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Pins for the engine when it is not installed (`sglang==0.5.11`), or other components to judge
    pub targets: Vec<String>,
    /// Compile the JIT modules the chosen backends need for the target archs now (FlashInfer's
    /// CUTLASS fused MoE for sm_120 takes many minutes and GiBs of memory per job), instead of
    /// taking only proofs already in the cache
    #[arg(long)]
    pub prove_jit: bool,
    /// The serving command line, after `--`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// Show the plan and stop
    #[arg(long)]
    pub dry_run: bool,
    /// Reproduce kiln.lock: its versions and sources (git commits, sdist hashes) and archs,
    /// then check the environment against it field by field [default targets: the lock's]
    #[arg(long)]
    pub locked: bool,
    /// The lockfile --locked reads
    #[arg(long, value_name = "FILE", default_value = DEFAULT_LOCK_FILE, requires = "locked")]
    pub lock: PathBuf,
    /// Reproduce the lock inside a bundle (`kiln bundle`), offline: its sources and wheels go
    /// into the cache first. For a split bundle, name any part (or the name they share)
    #[arg(long, value_name = "FILE", conflicts_with = "locked")]
    pub bundle: Option<PathBuf>,
    /// Keep the steps that were installed and verified when a later step fails. Without it an
    /// install is one transaction: a failure puts the environment back as it was before the
    /// run, the steps it finished included
    #[arg(long)]
    pub keep_done: bool,
    /// Do not prove the JIT of what was built or installed (no toolkit on this node yet, or the
    /// kernels are compiled elsewhere): install exits 0 and says the JIT is not proven
    #[arg(long)]
    pub no_jit_proof: bool,
    /// Then compile ahead of time the JIT modules a serving process would compile at its first
    /// request (components whose recipe has [aot], e.g. flashinfer), for the target archs, into
    /// kiln's cache (`aot/<key>`, carried by bundles) and into the environment, where the
    /// component loads them without a compiler; checked by loading them with none reachable.
    ///
    /// With `--bundle` or `--locked` the modules come from the bundle's cache entries when
    /// their key matches, else they are compiled here. They are in place before the proofs run,
    /// so a serving proof measures the engine, not the compile
    #[arg(long)]
    pub aot: bool,
    /// Also compile this module, one the recipe compiles only on request (`[aot] on_request`,
    /// e.g. flashinfer's `cutlass_fused_moe`, the CUTLASS fused MoE behind vLLM's and SGLang's
    /// `flashinfer_cutlass` MoE backend: many minutes); implies --aot. Repeat for more
    #[arg(long = "aot-module", value_name = "NAME")]
    pub aot_modules: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RecipeArgs {
    #[command(subcommand)]
    pub action: RecipeAction,
}

#[derive(Debug, Subcommand)]
pub enum RecipeAction {
    /// Draft a `[[versions]]` entry from a release's own artifacts, for review
    ///
    /// Reads the release from the index's Simple API (PEP 691; `UV_INDEX_URL`, else
    /// `PIP_INDEX_URL`, else https://pypi.org/simple): the sdist's URL and sha256, its Linux
    /// wheels with their sha256; Requires-Python and the pins on kiln components (as `depends`)
    /// from a wheel's core metadata (PEP 658), else the sdist's PKG-INFO, else a wheel's METADATA
    /// read with range requests (no whole-wheel download); the CUDA runtime its wheels pin (as
    /// `runtime_cuda`). It downloads the sdist (into the cache, by sha256) and reads every
    /// `FetchContent_Declare`/`FetchContent_Populate` of its CMake files as
    /// `[[versions.inputs]]` (repository, commit or tag, submodules, subdir, the variable that
    /// points the build at kiln's copy), the extension modules `setup.py` declares and a
    /// `use_existing_torch.py` prepare script. Each line says the file (or URL) it came from.
    /// It never writes a recipe: it prints the entry, then how it differs from the recipe's entry
    /// for that version, if there is one. A person decides what a source build relaxes (a wheel
    /// pins torch exactly) and what each input is needed for.
    #[command(after_help = "Examples:\n  kiln recipe draft vllm 0.33.0\n  kiln recipe draft torch 2.15.0 --json")]
    Draft {
        /// A recipe's name (its distribution is looked up) or any distribution on PyPI
        name: String,
        /// The release [default: the newest]
        #[arg(value_name = "VERSION")]
        release: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    pub action: Option<CacheAction>,
}

#[derive(Debug, Subcommand)]
pub enum CacheAction {
    /// Remove build trees of failed steps, logs and scratch; with flags, also more
    Clean {
        /// Also the wheel cache (later builds compile again)
        #[arg(long)]
        wheels: bool,
        /// Also the sdists and git mirrors (later builds download again)
        #[arg(long)]
        sources: bool,
        /// Everything, probe results and JIT proofs included
        #[arg(long)]
        all: bool,
        /// Keep the sources and wheels this lockfile needs
        #[arg(long, value_name = "FILE")]
        keep: Option<PathBuf>,
    },
    /// Seed kiln's git mirror of URL from a local clone or bare repository DIR, for a build
    /// input or source whose origin cannot be reached from here. URL is the recipe's exact
    /// string (for a submodule, its `.gitmodules` URL). A build then checks out the pinned
    /// commit from it, offline or online (a mirror that has the pinned commit is not fetched).
    #[command(
        name = "add-mirror",
        after_help = "Example:\n  kiln cache add-mirror https://github.com/nvidia/cutlass.git ~/src/cutlass\n  kiln install 'vllm==0.26.0' --offline --arch 12.0"
    )]
    AddMirror {
        /// The repository URL as the recipe (or `.gitmodules`) names it
        url: String,
        /// A local clone or bare repository holding the pinned commits
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct BundleArgs {
    /// With --for: the components to plan for that node, optionally pinned (`sglang==0.5.11`)
    #[arg(requires = "for_node")]
    pub targets: Vec<String>,
    /// The lockfile to bundle
    #[arg(long, value_name = "FILE", default_value = DEFAULT_LOCK_FILE, conflicts_with = "for_node")]
    pub lock: PathBuf,
    /// Plan the bundle for another node: the facts its `kiln doctor --json` wrote
    #[arg(long = "for", value_name = "FILE")]
    pub for_node: Option<PathBuf>,
    /// Where to write the bundle
    #[arg(long, short = 'o', value_name = "FILE", default_value = DEFAULT_BUNDLE_FILE)]
    pub output: PathBuf,
    /// Split the bundle into parts of at most SIZE (`60MiB`, `4GB`)
    #[arg(long, value_name = "SIZE")]
    pub split: Option<bytesize::ByteSize>,
    /// Leave out the wheels kiln built: the target builds each component from its bundled source
    /// (a smaller bundle, for targets whose Python, toolkit or torch differ from this node's)
    #[arg(long)]
    pub no_built_wheels: bool,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// Where to write the lockfile
    #[arg(long, short = 'o', value_name = "FILE", default_value = DEFAULT_LOCK_FILE)]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct RecipesArgs {
    /// Show this recipe in full
    pub name: Option<String>,
}
