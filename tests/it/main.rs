//! Integration tests: the real kiln binary on real virtualenvs and real builds.

mod build;
mod bundle;
mod common;
mod compile_cache;
mod compile_fit;
mod crash;
mod download;
mod fatbin;
mod flashinfer;
mod fuzz;
mod inputs;
mod integrity;
mod jit;
mod layers;
mod lock;
mod names;
mod overhead;
mod prebuilt;
mod recipe_facts;
mod recipes;
mod resolve;
mod sglang;
mod smoke;
mod sources;
mod stack;
mod truth;
