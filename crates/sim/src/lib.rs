//! cotenant-sim: the discrete-event cluster simulator. It drives
//! `cotenant_core::Engine` with inputs from a workload and a world model
//! (rates, checkpoints, restores), and measures what happened.
//!
//! The simulator never decides anything a policy should: it applies the
//! engine's commands to the world and reports the world's events back. It reads
//! no clock and no files; the CLI does.

pub mod driver;
pub mod elastic;
pub mod evalstop;
pub mod faults;
pub mod gavel_rates;
pub mod metrics;
pub mod mig_rates;
pub mod rates;
pub mod sharing;
pub mod synergy_rates;
pub mod topology_rates;
pub mod train_steps;
pub mod usage;
pub mod variability_rates;
pub mod varuna_rates;
pub mod world;

pub use driver::{
    simulate, simulate_shared, EarlyStop, JobRecord, Outcome, RunLog, SimConfig, SimError, SimProgress,
    SimResult, WatchPoint,
};
pub use elastic::{ElasticModel, ScalingMode};
pub use metrics::{summarize, Distribution, Health, Summary, TenantSummary};
pub use rates::{Placed, RateModel, ReferenceRate};
pub use world::Overheads;
