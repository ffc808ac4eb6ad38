//! Requests and the workload a serving simulation replays.

use cotenant_core::{Span, TenantId, TenantSpec, Time};
use cotenant_trace::requests::RequestTrace;

/// Service tier (DriftSched): premium requests are served before standard before batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Premium,
    Standard,
    Batch,
}

/// Index of a request in its [`Workload`].
pub type RequestId = u32;

/// One inference request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub tenant: TenantId,
    pub arrival: Time,
    pub prompt_tokens: u32,
    /// Tokens the request will generate (>= 1). Schedulers must not read it except
    /// through an estimator; oracles are named as such.
    pub output_tokens: u32,
    /// Prefix-cache block hashes, each covering `Workload::prefix_block_tokens` prompt tokens.
    pub prefix_hashes: Box<[u64]>,
    /// Request category for output-length estimation (an index into `Workload::categories`).
    pub category: u32,
    pub tier: Tier,
    /// Interaction (conversation or agent session) this call belongs to.
    pub interaction: u32,
    /// 0 for the first call of an interaction.
    pub call_index: u32,
}

/// Requests sorted by arrival, with their tenants.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub source: String,
    pub requests: Vec<Request>,
    pub tenants: Vec<TenantSpec>,
    pub categories: Vec<String>,
    pub prefix_block_tokens: u32,
}

impl Workload {
    /// One tenant per trace, in order; requests merged by arrival (stable: ties keep
    /// trace order). Category = tenant x prompt-length bucket (see [`length_bucket`]).
    pub fn from_traces(traces: &[(&str, &RequestTrace)]) -> Workload {
        let mut requests = Vec::new();
        let mut tenants = Vec::new();
        let mut categories = Vec::new();
        let mut next_interaction = 0_u32;
        for (tenant_index, (name, trace)) in traces.iter().enumerate() {
            tenants.push(TenantSpec::new(*name));
            for bucket in LENGTH_BUCKET_NAMES {
                categories.push(format!("{name}/{bucket}"));
            }
            for record in &trace.records {
                let bucket = length_bucket(record.prompt_tokens);
                requests.push(Request {
                    tenant: TenantId(tenant_index as u32),
                    arrival: Time(record.arrival_us),
                    prompt_tokens: record.prompt_tokens.max(1),
                    output_tokens: record.output_tokens.max(1),
                    prefix_hashes: record.prefix_hashes.clone().into_boxed_slice(),
                    category: (tenant_index * LENGTH_BUCKET_NAMES.len() + bucket) as u32,
                    tier: Tier::Standard,
                    interaction: next_interaction,
                    call_index: 0,
                });
                next_interaction += 1;
            }
        }
        requests.sort_by_key(|r| r.arrival);
        let prefix_block_tokens = traces.iter().map(|(_, t)| t.block_tokens).max().unwrap_or(0);
        let source = traces.iter().map(|(_, t)| t.source.as_str()).collect::<Vec<_>>().join(" + ");
        Workload { source, requests, tenants, categories, prefix_block_tokens }
    }

    /// Arrivals compressed by `rate_scale` (2.0 = twice the request rate).
    pub fn with_rate_scale(&self, rate_scale: f64) -> Workload {
        let mut scaled = self.clone();
        for request in &mut scaled.requests {
            request.arrival = Time((request.arrival.0 as f64 / rate_scale).round() as u64);
        }
        scaled
    }

    /// The first `count` requests (tests and quick runs).
    pub fn truncated(&self, count: usize) -> Workload {
        let mut cut = self.clone();
        cut.requests.truncate(count);
        cut
    }

    /// Last arrival minus first arrival.
    pub fn arrival_span(&self) -> Span {
        match (self.requests.first(), self.requests.last()) {
            (Some(first), Some(last)) => last.arrival - first.arrival,
            _ => Span::ZERO,
        }
    }

    /// Requests per second over the arrival span.
    pub fn request_rate_per_s(&self) -> f64 {
        let seconds = self.arrival_span().as_secs_f64();
        if seconds > 0.0 {
            self.requests.len() as f64 / seconds
        } else {
            0.0
        }
    }
}

pub const LENGTH_BUCKET_NAMES: [&str; 4] = ["prompt<512", "prompt<2k", "prompt<8k", "prompt>=8k"];

/// Prompt-length bucket: a cheap request category that a real front end can see.
pub fn length_bucket(prompt_tokens: u32) -> usize {
    match prompt_tokens {
        0..512 => 0,
        512..2048 => 1,
        2048..8192 => 2,
        _ => 3,
    }
}
