//! cotenant-sim: the discrete-event cluster simulator. It drives
//! `cotenant_core::Engine` with inputs from a workload and a world model
//! (rates, checkpoints, faults), and measures what happened.
//!
//! The simulator never decides anything a policy should: it only applies the
//! engine's commands and reports the world's events back.

pub mod gavel_rates;
pub mod rates;

pub use rates::{RateModel, ReferenceRate};
