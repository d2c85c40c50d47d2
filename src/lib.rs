//! kiln provisions GPU inference stacks: it proves what a Python environment really has and
//! builds from source only what is missing or broken, for one GPU architecture.
//!
//! # A short tour
//!
//! ```text
//! recipes/*.toml ─► recipe::RecipeSet ─┐
//!                                       ├─► resolve::status ─► resolve::plan ─► apply ─► verify
//! machine, python ─► probe::{machine,python} ┘
//! ```
//!
//! * [`recipe`] reads one TOML file per component into a validated [`recipe::RecipeSet`]
//!   (embedded in the binary, or `--recipes DIR`); every problem is reported at `file:line:col`.
//! * [`probe`] reads machine facts (GPUs, driver, CUDA toolkit) and runs one embedded script in
//!   the target interpreter: installed distributions and each import the recipes name (a hang or
//!   crash is pinned on its import); it reads the fatbins of each distribution's shared objects,
//!   and caches all of it against the state of the environment.
//! * [`fatbin`] lists the SASS and PTX inside CUDA binaries from their headers.
//! * [`resolve`] turns facts into a [`resolve::Status`] per component (with evidence: imports,
//!   kernel images for the target arch, build fingerprints), verdicts for runtime backends,
//!   chooses one version of each component with a PubGrub solver, and makes a
//!   [`resolve::Plan`] in dependency order, each step with its reason and build environment.
//! * [`apply`] carries out the plan: source → wheel → install → verify, restoring the
//!   environment when a step fails.
//! * [`lock`] is `kiln.lock`: a proven environment written down, and what differs from it;
//!   [`bundle`] packs a lock with the cached sources and wheels it needs, for air-gapped nodes.
//! * [`arch`] is the arch vocabulary (`--arch 12.0` in each project's spelling) and the run rules;
//!   [`process`] is the one subprocess wrapper; [`compile_cache`] drives sccache with a shared
//!   backend so a fleet compiles each translation unit once; [`store`] owns what kiln keeps in its cache
//!   (wheels, AOT modules, locks, snapshots, unpacked archives), writes its state files
//!   atomically and checks a wheel against what its cache key says it is; [`shown`] escapes
//!   names from outside in messages; [`watch`] carries what long work reports to whoever shows it;
//!   [`crash_point`] names the points where crash-safety tests stop or kill kiln.
//! * [`settings`] is what the command line decides, typed once ([`cli`] builds it); [`session`]
//!   is the pipeline as plain data (probe, assess, solve, plan, execute) for the commands.
//! * Only [`commands`] and [`report`] know about the terminal; the rest returns typed data.
//!   [`report`] draws typed reports and imports nothing above it.

pub mod apply;
pub mod arch;
pub mod bundle;
pub mod cache_dir;
pub mod cli;
pub mod commands;
pub mod compile_cache;
pub mod crash_point;
pub mod download;
pub mod draft;
pub mod fatbin;
pub mod lock;
pub mod probe;
pub mod process;
pub mod recipe;
pub mod report;
pub mod resolve;
pub mod session;
pub mod settings;
pub mod shown;
pub mod state;
pub mod store;
pub mod watch;
