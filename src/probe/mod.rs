//! Probing: what this machine and one Python interpreter really have.
//!
//! `machine` reads GPUs, driver and toolkit; `python` runs the embedded probe script in one
//! interpreter; `gather` probes an environment component by component through `cache`, whose
//! stamps `stamp` computes; `tags` asks an interpreter which wheel tags it supports; `wheel`
//! reads a wheel before it is installed.

pub mod binaries;
pub mod cache;
pub mod choices;
mod dist_wire;
pub mod gather;
pub mod jit;
pub mod machine;
pub mod model;
pub mod needed;
pub mod node;
pub mod owners;
pub mod python;
pub mod runtime;
pub mod side_by_side;
pub mod smoke;
pub mod stamp;
pub mod tags;
pub mod toolkit_layout;
pub mod torch;
pub mod wheel;
pub mod wheel_cache;

pub use machine::MachineFacts;
pub use python::{PythonFacts, normalize};
