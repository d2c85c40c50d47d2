//! Resolve: from recipes and probed facts to a status per component and a plan.
//!
//! `status` decides what each component is (`ok`, `missing`, `broken`, ...) with evidence;
//! `plan` decides what to do about it, in dependency order. Nothing here prints or touches disk.

pub mod constraints;
pub mod driver;
pub mod driver_table;
pub mod jit;
pub mod kernels;
pub mod need;
pub mod owners;
pub mod plan;
pub mod provable;
pub mod reason;
pub mod serving;
pub mod solve;
pub mod spec;
pub mod status;
pub mod toolkit_parts;
pub mod tools;
pub mod unmanaged;
pub mod wheel_choice;

pub use plan::{Action, Plan, PlanOptions, Step};
pub use reason::Reason;
pub use spec::BuildSpec;
pub use status::{Assessment, Status};
