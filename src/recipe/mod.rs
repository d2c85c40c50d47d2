//! Recipes: one TOML file per component, validated into a [`RecipeSet`].
//!
//! `parse` reads one file, `set` checks the files against each other, `template` handles the
//! `{variables}` in build commands, and `diag` renders problems at `file:line:col`.

pub mod diag;
pub mod model;
pub mod parse;
pub mod set;
pub mod template;

pub use diag::{Diagnostic, Diagnostics};
pub use model::{Backend, Build, Dependency, Feature, Kind, Recipe, Requires, Rule, Source};
pub use set::{LoadError, RecipeSet};
