//! The store: how kiln writes the files of its cache, and what it checks before it trusts a
//! wheel found there. [`atomic`] is the one way a state file is written (a temporary file in
//! the same directory, synced where it matters, renamed over the old one); [`wheel`] checks
//! that a wheel file is what a wheel-cache key says it is (its distribution name and version,
//! its METADATA, every file against its RECORD hash), for what kiln keeps, takes and receives
//! from bundles.
//!
//! It deliberately ignores where entries live and when they are made or removed: the wheel
//! cache (`build/wheels.rs`), bundles (`bundle/check.rs`) and `cache_dir.rs` decide that.

pub mod atomic;
pub mod wheel;
