//! Integration tests: the real kiln binary on real virtualenvs and real builds.

mod build;
mod bundle;
mod common;
mod compile_cache;
mod crash;
mod download;
mod fatbin;
mod flashinfer;
mod fuzz;
mod integrity;
mod jit;
mod layers;
mod lock;
mod probe_cache;
mod recipes;
mod resolve;
mod smoke;
mod sources;
mod stack;
mod truth;
