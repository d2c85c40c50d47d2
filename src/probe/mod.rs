//! Probing: what this machine and one Python interpreter really have.
//!
//! `machine` reads GPUs, driver and toolkit; `python` runs the embedded probe script once.

pub mod binaries;
pub mod cache;
pub mod jit;
pub mod machine;
pub mod owners;
pub mod python;
pub mod runtime;
pub mod smoke;
pub mod torch;

pub use machine::MachineFacts;
pub use python::{PythonFacts, normalize};
