//! Recipes: one TOML file per component, validated into a [`RecipeSet`].
//!
//! `parse` reads one file (one module per table, every problem collected), `set` loads many files
//! in parallel and checks them against each other, `template` handles the `{variables}` in build
//! commands, `inputs` types the sources a build would otherwise download itself, `targets` what
//! an upstream build compiles and for which archs, `binaries` holds
//! the prebuilt wheels and optional CUDA binaries a recipe names, `limits` what an API cannot do
//! on some archs, and `diag` renders problems at
//! `file:line:col`. It deliberately knows nothing about the machine: whether a recipe's
//! requirements are met is the resolver's question.

pub mod binaries;
pub mod diag;
pub mod inputs;
pub mod limits;
pub mod model;
pub mod parse;
pub mod serving;
pub mod set;
pub mod targets;
pub mod template;
pub mod tool;
pub mod toolkit;

pub use diag::{Diagnostic, Diagnostics};
pub use inputs::{Input, InputSource};
pub use model::{Build, Dependency, Feature, Kind, Recipe, Requires, Rule, Source, parse_duration};
pub use serving::Backend;
pub use set::{LoadError, RecipeSet};
pub use tool::{Tool, ToolWheel};
