//! A serving configuration outside its ranges is an error from `simulate`, never a
//! silent fix-up or an unbounded allocation; goodput probes at low rates widen their
//! service windows instead of failing.

use cotenant_core::limits::MAX_SHARE_WINDOWS;
use cotenant_core::{Span, TenantId, TenantSpec, Time};
use cotenant_perf::{find_gpu, ModelShape, Roofline, RooflineParams};
use cotenant_serve::plan::{goodput_search, with_windows_for};
use cotenant_serve::scheduler::{BatchLimits, DriftConfig};
use cotenant_serve::sim::ServeError;
use cotenant_serve::{
    simulate, Request, RouterKind, SchedulerConfig, SchedulerKind, ServeConfig, Slo, Tier, Workload,
};

fn workload(requests: usize, gap_us: u64) -> Workload {
    Workload {
        source: "test".into(),
        requests: (0..requests)
            .map(|i| Request {
                tenant: TenantId(0),
                arrival: Time(i as u64 * gap_us),
                prompt_tokens: 64,
                output_tokens: 8,
                prefix_hashes: Box::new([]),
                category: 0,
                tier: Tier::Standard,
                interaction: 0,
                call_index: 0,
            })
            .collect(),
        tenants: vec![TenantSpec::new("a")],
        categories: vec!["all".into()],
        prefix_block_tokens: 0,
    }
}

fn config() -> ServeConfig {
    let gpu = *find_gpu("H100-SXM").expect("catalog");
    let model =
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default());
    let slo = Slo::default();
    ServeConfig {
        model,
        replicas: 1,
        scheduler: SchedulerConfig {
            kind: SchedulerKind::Fcfs,
            limits: BatchLimits::default(),
            tenants: vec![TenantSpec::new("a")],
            categories: 4,
            slo,
            drift: DriftConfig::default(),
        },
        router: RouterKind::LeastOutstandingTokens,
        kv_block_tokens: 16,
        memory_utilization: 0.9,
        activation_reserve_gb: 2.0,
        kv_capacity_tokens: None,
        slo,
        service_window: Span::from_secs(1),
        attribution_eval: None,
    }
}

fn error_of(config: &ServeConfig, workload: &Workload) -> String {
    match simulate(workload, config) {
        Ok(_) => panic!("simulate accepted a bad config"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn out_of_range_values_are_errors() {
    let w = workload(10, 100_000);
    let mut c = config();
    c.memory_utilization = 2.0;
    assert_eq!(error_of(&c, &w), "memory_utilization = 2: must be a fraction in (0, 1]");
    c.memory_utilization = f64::NAN;
    assert!(error_of(&c, &w).starts_with("memory_utilization = NaN"));
    let mut c = config();
    c.scheduler.limits.token_budget = 0;
    assert_eq!(error_of(&c, &w), "token_budget = 0: must be at least 1");
    let mut c = config();
    c.scheduler.limits.max_seqs = 0;
    assert_eq!(error_of(&c, &w), "max_seqs = 0: must be at least 1");
    let mut c = config();
    c.service_window = Span::ZERO;
    assert!(error_of(&c, &w).starts_with("service_window = 0"));
}

#[test]
fn windows_are_bounded_and_probes_widen_them() {
    // 1,000 requests a second apart: 999 s of arrivals.
    let w = workload(1_000, 1_000_000);
    let mut c = config();
    c.service_window = Span(1_000); // 1 ms: 999,000 windows
    assert!(matches!(simulate(&w, &c), Err(ServeError::TooManyWindows { windows: 999_000, .. })));
    let widened = with_windows_for(&c, &w);
    assert!(widened.service_window.0 * MAX_SHARE_WINDOWS > 999_000_000);
    assert!(simulate(&w, &widened).is_ok());
    // Goodput probes scale the arrivals down as far as 1/1024: they must not fail.
    let found = goodput_search(&w, &config(), 0.9, 1.0).expect("probes run");
    assert!(found.rate_scale > 0.0);
    // One request a second never strains a replica: no probe misses, the result is a bound.
    assert!(found.capped, "{:?}", found.probes);
}
