//! Documented limits on inputs, as data.
//!
//! Every value a trace, a config or a flag can carry is bounded here, so that memory
//! and time grow with the size of the input and never with the magnitude of one of
//! its values. Readers and flag parsers check against these constants and name the
//! limit, the offending row or flag, and the value in their error; docs/reliability.md
//! lists them in one table. Raise a limit here, never by skipping a check.

use crate::time::{Span, MICROS_PER_SECOND};

const DAY_US: u64 = 86_400 * MICROS_PER_SECOND;

/// Longest run time (or duration estimate) of one training job: 366 days.
pub const MAX_JOB_DURATION: Span = Span(366 * DAY_US);

/// Most steps (iterations) one job may ask for, in traces that count work in steps
/// (Gavel's `total_steps`): 10^11, about 366 days at 3,000 steps per second, faster
/// than any job type in Gavel's throughput table.
pub const MAX_JOB_STEPS: u64 = 100_000_000_000;

/// Most GPUs one job may ask for (a million: more than any cluster we model).
pub const MAX_GPUS_PER_JOB: u32 = 1 << 20;

/// Widest span between a trace's first and last arrival: 10 years.
pub const MAX_ARRIVAL_SPAN: Span = Span(3_653 * DAY_US);

/// Most GPUs in one modelled cluster.
pub const MAX_CLUSTER_GPUS: u64 = 1 << 20;

/// Most nodes in one modelled cluster.
pub const MAX_CLUSTER_NODES: u64 = 1 << 18;

/// Most GPUs on one node (a node's GPUs are one 64-bit ownership mask in `core::cluster`).
pub const MAX_GPUS_PER_NODE: u32 = 64;

/// Most windows a run keeps per tenant for share and fairness over time (`--share-window`).
pub const MAX_SHARE_WINDOWS: u64 = 100_000;

/// Shortest share window: one second.
pub const MIN_SHARE_WINDOW: Span = Span(MICROS_PER_SECOND);

/// Longest scheduling round or quantum (`--round`, `las.quantum`): 7 days.
pub const MAX_ROUND: Span = Span(7 * DAY_US);

/// Shortest scheduling round or quantum: one millisecond.
pub const MIN_ROUND: Span = Span(1_000);

/// Most worker threads (`--threads`).
pub const MAX_THREADS: usize = 1024;

/// Most prompt tokens in one serving request.
pub const MAX_PROMPT_TOKENS: u64 = 1 << 21;

/// Most output tokens in one serving request.
pub const MAX_OUTPUT_TOKENS: u64 = 1 << 20;

/// Widest span between a request trace's first and last arrival: 366 days.
pub const MAX_REQUEST_SPAN: Span = Span(366 * DAY_US);

/// Earliest absolute timestamp a trace may carry: 1990-01-01T00:00:00Z (Unix seconds).
pub const MIN_UNIX_SECONDS: i64 = 631_152_000;

/// Latest absolute timestamp a trace may carry: 2100-01-01T00:00:00Z (Unix seconds).
pub const MAX_UNIX_SECONDS: i64 = 4_102_444_800;

/// Most tenants in one workload (`--synthetic tenants=N`, weights lists).
pub const MAX_TENANTS: usize = 1_000_000;

/// Most accounts in one fair-share account tree.
pub const MAX_ACCOUNTS: usize = 1_000_000;

/// Longest simulated span, from the first arrival: 100 years. A run whose next
/// event lies beyond it stops there and says so (its jobs end `Unfinished`).
pub const MAX_RUN_SPAN: Span = Span(36_525 * DAY_US);

/// Most requests one serving workload may hold, read or generated (`serve-sim`,
/// `plan serve`; a synthetic tenant's expected count is checked before generating).
pub const MAX_SERVE_REQUESTS: u64 = 10_000_000;

/// Most replicas of one serving deployment (`--replicas`, `--max-replicas`).
pub const MAX_SERVE_REPLICAS: u32 = 4096;

/// Largest factor a serving workload's arrival rate may be scaled by (`--rate-scale`,
/// `plan serve --rate`); the smallest is bounded by [`MAX_REQUEST_SPAN`] and
/// [`MAX_SHARE_WINDOWS`] for the scaled arrival span.
pub const MAX_RATE_SCALE: f64 = 1e6;
