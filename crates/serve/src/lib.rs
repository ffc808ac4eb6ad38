//! cotenant-serve: a multi-tenant LLM serving simulator. Continuous batching with a
//! token budget and chunked prefill, paged KV memory with recompute preemption and a
//! prefix cache, request schedulers behind one trait, routers over replicas, and
//! per-request latency attribution inside joint batches.
//!
//! Iteration times come from `cotenant_perf`'s roofline; time is integer microseconds
//! and every run is deterministic (no clock reads, no HashMap iteration deciding
//! anything, seeded randomness only). This crate must never do I/O, read a clock or
//! know a file format: traces arrive as `cotenant_trace` values and results leave as
//! plain structs that the CLI serializes.

pub mod attribution;
pub mod closed_loop;
pub mod features;
pub mod goodput;
pub mod kv;
pub mod lora;
pub mod metrics;
pub mod offload;
pub mod pipeline;
pub mod plan;
pub mod request;
pub mod router;
pub mod scheduler;
pub mod search;
pub mod sim;
pub mod spec;
pub mod state;
pub mod summary;
pub mod synthetic;
pub mod utilization;

pub use request::{Request, RequestId, Tier, Workload};
pub use router::RouterKind;
pub use scheduler::{SchedulerConfig, SchedulerKind};
pub use sim::{simulate, ServeConfig, ServeError, ServeResult};
pub use summary::{summarize, Summary};

use cotenant_core::Span;

/// Latency objectives. A request meets its SLO when its TTFT and its TPOT (mean
/// time between its output tokens) are both within bounds; `tbt` also sizes
/// Sarathi-Serve's budget and bounds the look-ahead scheduler's iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slo {
    pub ttft: Span,
    pub tbt: Span,
}

impl Default for Slo {
    /// 2 s to the first token and 100 ms per output token (DistServe-style chat SLOs).
    fn default() -> Slo {
        Slo { ttft: Span(2_000_000), tbt: Span(100_000) }
    }
}
