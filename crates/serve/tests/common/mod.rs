//! Fixtures shared by the serving simulator's integration tests (each test file uses
//! some of them).
#![allow(dead_code)]

use cotenant_core::{Span, TenantId, TenantSpec, Time};
use cotenant_perf::{find_gpu, ModelShape, Roofline, RooflineParams};
use cotenant_serve::scheduler::{BatchLimits, DriftConfig};
use cotenant_serve::{Request, RouterKind, SchedulerConfig, SchedulerKind, ServeConfig, Slo, Tier, Workload};

/// `shape` (a catalog name or an explicit shape) on one H100 SXM with the roofline's plain
/// defaults (the hand-worked figures of crates/perf/src/roofline.rs), not the fitted ones.
pub fn h100(shape: &str) -> Roofline {
    let gpu = *find_gpu("H100-SXM").expect("catalog");
    Roofline::new(ModelShape::parse(shape).expect("shape"), gpu, 1, RooflineParams::default())
}

/// FCFS on `model` for `tenants` with `categories` request categories: one replica, one
/// stage, least-outstanding routing, 16-token blocks, 90% of memory, KV sized from memory,
/// default batch limits and SLO, 1 s service windows, none of the optional features. Each
/// test changes the fields it is about.
pub fn serve_config(model: Roofline, tenants: &[TenantSpec], categories: usize) -> ServeConfig {
    let slo = Slo::default();
    ServeConfig {
        model,
        replicas: 1,
        pipeline_parallel: 1,
        scheduler: SchedulerConfig {
            kind: SchedulerKind::Fcfs,
            limits: BatchLimits::default(),
            tenants: tenants.to_vec(),
            categories,
            slo,
            drift: DriftConfig::default(),
        },
        router: RouterKind::LeastOutstandingTokens,
        kv_block_tokens: 16,
        memory_utilization: 0.9,
        activation_reserve_bytes: None,
        kv_capacity_tokens: None,
        slo,
        service_window: Span::from_secs(1),
        attribution_eval: None,
        max_concurrency: None,
        disagg: None,
        spec: None,
        lora: None,
        kv_offload: None,
    }
}

/// A request of `tenant` arriving at `arrival_us`, with no prefix hashes.
pub fn request(tenant: u32, arrival_us: u64, prompt: u32, output: u32) -> Request {
    Request {
        tenant: TenantId(tenant),
        arrival: Time(arrival_us),
        prompt_tokens: prompt,
        output_tokens: output,
        prefix_hashes: Box::new([]),
        category: 0,
        tier: Tier::Standard,
        interaction: 0,
        call_index: 0,
    }
}

/// `requests` (sorted by arrival) of tenants t0, t1, ... with one category and no prefix cache.
pub fn workload(requests: Vec<Request>, tenants: usize) -> Workload {
    Workload {
        source: "test".into(),
        requests,
        tenants: (0..tenants).map(|t| TenantSpec::new(format!("t{t}"))).collect(),
        categories: vec!["all".into()],
        prefix_block_tokens: 0,
    }
}
