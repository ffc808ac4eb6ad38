//! Request schedulers: which waiting requests join the next batch.
//!
//! Every scheduler sees the same [`SchedCx`] and answers with a [`Pick`]; the replica
//! applies the token budget and KV capacity, preempts on KV exhaustion and keeps the
//! books. Running requests always continue: the schedulers differ in their limits
//! (budget, decode-first order) and in which waiting request they admit next.

mod drift;
mod fairserve;
mod fcfs;
mod lookahead;
mod sarathi;
mod vtc;

pub use drift::{DriftConfig, DriftSched};
pub use fairserve::FairServe;
pub use fcfs::Fcfs;
pub use lookahead::Lookahead;
pub use sarathi::{largest_chunk_within, BatchSoFar, Sarathi, MIN_CHUNK_TOKENS};
pub use vtc::{Vtc, VtcCounters};

use cotenant_core::{TenantSpec, Time};
use cotenant_perf::{BatchEntry, Roofline};

use crate::request::{Request, RequestId};
use crate::state::Seq;
use crate::Slo;

/// Per-iteration limits of a scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// New tokens per iteration (prefill chunks plus one per decode).
    pub token_budget: u32,
    /// Requests per iteration.
    pub max_seqs: u32,
    /// Schedule running decodes before running prefill chunks (Sarathi-Serve).
    pub decode_first: bool,
}

impl Default for BatchLimits {
    /// vLLM's defaults for online serving: 8,192 batched tokens, 256 sequences.
    fn default() -> BatchLimits {
        BatchLimits { token_budget: 8192, max_seqs: 256, decode_first: false }
    }
}

/// What a scheduler sees when it decides (read-only).
#[derive(Debug)]
pub struct SchedCx<'a> {
    pub now: Time,
    pub requests: &'a [Request],
    pub seqs: &'a [Seq],
    pub tenants: &'a [TenantSpec],
    /// Waiting requests of this replica; preempted ones first, then arrival order.
    pub waiting: &'a [RequestId],
    /// Running requests in admission order.
    pub running: &'a [RequestId],
    /// Per tenant: requests waiting or running on this replica.
    pub backlog: &'a [u32],
    /// Per tenant: requests waiting on this replica.
    pub waiting_per_tenant: &'a [u32],
    /// Entries already placed in the batch being formed.
    pub batch: &'a [BatchEntry],
    pub budget_left: u32,
    pub kv_available_blocks: u64,
    pub kv_capacity_blocks: u64,
    pub kv_block_tokens: u32,
    pub model: &'a Roofline,
    pub slo: Slo,
}

impl SchedCx<'_> {
    /// Prompt (or recompute) tokens a request still has to prefill.
    pub fn prefill_left(&self, id: RequestId) -> u32 {
        self.seqs[id as usize].prefill_left()
    }

    /// Index in `waiting` of the earliest waiting request of `tenant`.
    pub fn first_waiting_of(&self, tenant: cotenant_core::TenantId) -> Option<usize> {
        self.waiting.iter().position(|&id| self.requests[id as usize].tenant == tenant)
    }
}

/// A scheduler's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Admit `waiting[waiting_index]`, computing at most `max_tokens` of it this step
    /// (the budget caps it further).
    Admit { waiting_index: usize, max_tokens: u32 },
    /// Admit nothing more this iteration.
    Stop,
}

impl Pick {
    pub fn admit(waiting_index: usize) -> Pick {
        Pick::Admit { waiting_index, max_tokens: u32::MAX }
    }
}

/// A request scheduler. Implementations keep their own state (counters, estimators)
/// and are driven through these hooks only.
pub trait RequestScheduler: std::fmt::Debug {
    fn name(&self) -> &'static str;
    fn limits(&self) -> BatchLimits;
    /// A request arrived at this replica (already in `cx.waiting` and counted in `cx.backlog`).
    fn on_arrival(&mut self, _cx: &SchedCx<'_>, _id: RequestId) {}
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick;
    /// Most tokens of a running request's prefill to compute this step (the budget caps
    /// it further). Default: no cap of its own.
    fn running_chunk_cap(&mut self, _cx: &SchedCx<'_>, _id: RequestId) -> u32 {
        u32::MAX
    }
    /// `id` joined the running set; `first_time` is false after a preemption.
    fn on_admit(&mut self, _cx: &SchedCx<'_>, _id: RequestId, _first_time: bool) {}
    /// One iteration gave `request` `prefill_tokens` of prefill and `decode_tokens` output tokens.
    fn on_service(&mut self, _request: &Request, _prefill_tokens: u32, _decode_tokens: u32) {}
    fn on_finish(&mut self, _id: RequestId, _request: &Request) {}
    /// Named figures the scheduler wants reported (estimation error, counters).
    fn diagnostics(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

/// The schedulers the CLI can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    Fcfs,
    Sarathi,
    Vtc,
    FairServe,
    DriftSched,
    Lookahead,
}

impl SchedulerKind {
    pub const ALL: [SchedulerKind; 6] = [
        SchedulerKind::Fcfs,
        SchedulerKind::Sarathi,
        SchedulerKind::Vtc,
        SchedulerKind::FairServe,
        SchedulerKind::DriftSched,
        SchedulerKind::Lookahead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Fcfs => "fcfs",
            SchedulerKind::Sarathi => "sarathi",
            SchedulerKind::Vtc => "vtc",
            SchedulerKind::FairServe => "fairserve",
            SchedulerKind::DriftSched => "driftsched",
            SchedulerKind::Lookahead => "lookahead",
        }
    }

    pub fn parse(text: &str) -> Option<SchedulerKind> {
        let text = text.to_ascii_lowercase();
        let aliases: &[(&str, SchedulerKind)] = &[
            ("vllm", SchedulerKind::Fcfs),
            ("sim-guided", SchedulerKind::Lookahead),
            ("slice", SchedulerKind::Lookahead),
            ("drift", SchedulerKind::DriftSched),
        ];
        SchedulerKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .or_else(|| aliases.iter().find(|(alias, _)| *alias == text).map(|(_, kind)| *kind))
    }
}

/// Everything a scheduler may be built from.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    pub kind: SchedulerKind,
    pub limits: BatchLimits,
    pub tenants: Vec<TenantSpec>,
    pub categories: usize,
    pub slo: Slo,
    pub drift: DriftConfig,
}

/// Builds one scheduler instance (one per replica).
pub fn build_scheduler(config: &SchedulerConfig, _model: &Roofline) -> Box<dyn RequestScheduler> {
    let weights: Vec<f64> = config.tenants.iter().map(|t| t.weight).collect();
    match config.kind {
        SchedulerKind::Fcfs => Box::new(Fcfs::new(config.limits)),
        SchedulerKind::Sarathi => Box::new(Sarathi::new(config.limits, config.slo)),
        SchedulerKind::Vtc => Box::new(Vtc::new(config.limits, weights)),
        SchedulerKind::FairServe => Box::new(FairServe::new(config.limits, weights)),
        SchedulerKind::DriftSched => {
            Box::new(DriftSched::new(config.limits, config.categories, config.drift.clone()))
        }
        SchedulerKind::Lookahead => Box::new(Lookahead::new(config.limits, weights)),
    }
}
