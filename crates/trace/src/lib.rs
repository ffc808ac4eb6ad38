//! cotenant-trace: readers and writers for real job and request traces, cluster
//! and tenant configuration files, and seeded synthetic workload generators.
//!
//! This crate owns file formats (serde lives here). It turns bytes into
//! `cotenant_core` values and never decides anything about scheduling.

use cotenant_core::{JobSpec, TenantSpec};

/// A job workload ready to simulate.
///
/// Invariants: `jobs` is sorted by arrival (ties keep file order), `jobs[i].id == JobId(i)`,
/// every `jobs[i].tenant` indexes `tenants`, and `lines[i]` is the 1-based line of
/// the source file that job came from (0 for generated jobs).
#[derive(Clone, Debug, Default)]
pub struct Workload {
    /// What it was read from (a path, or a generator description).
    pub source: String,
    pub jobs: Vec<JobSpec>,
    pub tenants: Vec<TenantSpec>,
    /// Job-type names (model and batch size); `JobSpec::job_type` indexes this.
    pub job_types: Vec<String>,
    pub lines: Vec<u64>,
    /// Rows skipped on purpose, grouped by reason, with counts.
    pub skipped: Vec<SkipCount>,
}

/// A group of rows that a reader skipped on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipCount {
    pub reason: String,
    pub rows: u64,
}

pub mod accounts;
pub mod gavel_throughputs;
pub mod requests;
