//! What a run reports about its GPUs: MFU, MBU and KV utilization from the simulator's
//! own iterations (invariants under random workloads, one request by hand), and goodput
//! on chosen percentiles.

use cotenant_core::{Span, TenantSpec};
use cotenant_perf::roofline::iteration_work;
use cotenant_perf::{find_gpu, BatchEntry, ModelShape, RooflineParams};
use cotenant_serve::{simulate, summarize, RouterKind, SchedulerKind, ServeConfig, Workload};
use proptest::prelude::*;

mod common;
use common::{h100, request, serve_config, workload};

fn run_config(tenants: usize, kv_tokens: u64, budget: u32, replicas: u32) -> ServeConfig {
    let names: Vec<TenantSpec> = (0..tenants).map(|t| TenantSpec::new(format!("t{t}"))).collect();
    let mut config = serve_config(h100("Llama-3.1-8B"), &names, 1);
    config.replicas = replicas;
    config.router = RouterKind::RoundRobin;
    config.scheduler.limits.token_budget = budget;
    config.kv_capacity_tokens = Some(kv_tokens);
    config
}

fn load(rows: &[(u64, u32, u32)]) -> Workload {
    workload(rows.iter().map(|&(arrival, prompt, output)| request(0, arrival, prompt, output)).collect(), 1)
}

/// One request, 100 prompt tokens and 3 outputs, alone on a replica with 1,024 tokens of
/// KV (64 blocks): iteration 1 prefills 100 tokens (7 blocks in use), iterations 2 and 3
/// decode at contexts 100 and 101 (7 blocks each). FLOPs and bytes are the three
/// iterations' `iteration_work`; KV max = 7/64; KV mean = 7/64 (every iteration holds 7).
#[test]
fn one_request_by_hand() {
    let config = run_config(1, 1024, 8192, 1);
    let workload = load(&[(0, 100, 3)]);
    let result = simulate(&workload, &config).expect("runs");
    assert_eq!(result.iterations, 3);
    let shape = &config.model.model;
    let entries = [
        BatchEntry { new_tokens: 100, context_tokens: 0, emits_token: true },
        BatchEntry { new_tokens: 1, context_tokens: 100, emits_token: true },
        BatchEntry { new_tokens: 1, context_tokens: 101, emits_token: true },
    ];
    let flops: f64 = entries.iter().map(|e| iteration_work(shape, 1, &[*e]).flops).sum();
    let bytes: f64 = entries.iter().map(|e| iteration_work(shape, 1, &[*e]).bytes).sum();
    let summary = summarize(&workload, &result, config.slo);
    let u = summary.utilization;
    assert!((u.model_flops - flops).abs() <= 1e-12 * flops);
    assert!((u.bytes_moved - bytes).abs() <= 1e-12 * bytes);
    assert_eq!(u.kv_max, 7.0 / 64.0);
    assert!((u.kv_mean - 7.0 / 64.0).abs() < 1e-12);
    let busy_s = result.busy_us as f64 / 1e6;
    assert!((u.mfu - flops / (989e12 * busy_s)).abs() <= 1e-9 * u.mfu);
    assert!((u.mbu_wall - bytes / (3.35e12 * summary.duration_s)).abs() <= 1e-9 * u.mbu_wall);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// The books add up: per-replica and per-window busy time equal the run's; MFU and
    /// MBU stay under the roofline's efficiencies (its time is at least each term's
    /// compute and memory time) and wall-time figures under busy-time ones; KV
    /// utilization is a fraction no larger than the pool's peak.
    #[test]
    fn utilization_books_add_up(
        rows in prop::collection::vec((0_u64..3_000_000, 1_u32..2_000, 1_u32..80), 1..40),
        budget in 16_u32..4_096,
        replicas in 1_u32..4,
        spare_blocks in 0_u64..200,
    ) {
        let mut rows = rows;
        rows.sort_by_key(|r| r.0);
        let largest = rows.iter().map(|r| u64::from(r.1 + r.2)).max().unwrap_or(1);
        let kv_tokens = (largest.div_ceil(16) + spare_blocks) * 16;
        let config = run_config(1, kv_tokens, budget, replicas);
        let workload = load(&rows);
        let result = simulate(&workload, &config).expect("runs");
        let usage = &result.usage;
        prop_assert_eq!(usage.replicas.len(), replicas as usize);
        prop_assert_eq!(usage.replicas.iter().map(|r| r.busy_us).sum::<u64>(), result.busy_us);
        prop_assert_eq!(usage.kv_windows.iter().map(|w| w.busy_us).sum::<u64>(), result.busy_us);
        let u = summarize(&workload, &result, config.slo).utilization;
        let params = config.model.params;
        prop_assert!(u.mfu > 0.0 && u.mfu <= params.compute_efficiency, "MFU {}", u.mfu);
        prop_assert!(u.mbu > 0.0 && u.mbu <= params.memory_efficiency, "MBU {}", u.mbu);
        prop_assert!(u.mfu_wall <= u.mfu && u.mbu_wall <= u.mbu);
        let peak = result.kv_stats.iter().map(|k| k.peak_used_blocks).max().unwrap_or(0) as f64
            / (kv_tokens / 16) as f64;
        // The mean is a time integral of fractions divided by the time: when
        // the fraction is constant it can round one ulp above the max (a case
        // in serve_metrics.proptest-regressions), as the windows' means below.
        prop_assert!(
            u.kv_mean > 0.0 && u.kv_mean <= u.kv_max + 1e-12 && u.kv_max <= peak.min(1.0),
            "{:?} peak {}",
            u,
            peak
        );
        for window in &usage.kv_windows {
            prop_assert!(window.mean().is_none_or(|m| m <= window.max + 1e-12 && window.max <= 1.0));
        }
    }
}

/// Ten requests 10 s apart, each alone on the replica: request i (1..=10) has a prompt
/// of 100 i tokens and 2 outputs, so its TTFT is its prefill iteration,
/// ceil(iteration_s(100 i tokens)) µs. Nearest-rank p90 of ten values is the 9th
/// smallest: request 9's. `ttft:p90=X` is met at exactly X = that TTFT and missed 1 µs
/// below; `e2e:p50` is request 5's E2E (prefill + one decode).
#[test]
fn percentile_criterion_by_hand() {
    use cotenant_serve::goodput::GoodputCriterion;
    let config = run_config(1, 1 << 16, 8192, 1);
    let rows: Vec<(u64, u32, u32)> = (1..=10).map(|i| ((i - 1) * 10_000_000, 100 * i as u32, 2)).collect();
    let workload = load(&rows);
    let result = simulate(&workload, &config).expect("runs");
    let prefill_us = |tokens: u32| {
        let entry = BatchEntry { new_tokens: tokens, context_tokens: 0, emits_token: true };
        Span::from_secs_f64_ceil(config.model.iteration_s(&[entry])).0
    };
    let ttft9_ms = prefill_us(900) as f64 / 1e3;
    let decode5 = BatchEntry { new_tokens: 1, context_tokens: 500, emits_token: true };
    let e2e5_ms =
        (prefill_us(500) + Span::from_secs_f64_ceil(config.model.iteration_s(&[decode5])).0) as f64 / 1e3;
    let judge = |spec: String| {
        GoodputCriterion::parse_percentiles(&spec).expect("spec").judge(&workload, &result, config.slo)
    };
    let met = judge(format!("ttft:p90={ttft9_ms},e2e:p50={e2e5_ms}"));
    assert!(met.met);
    assert_eq!(met.values_ms, [ttft9_ms, e2e5_ms]);
    assert_eq!(met.attainment, 1.0);
    assert!(!judge(format!("ttft:p90={}", ttft9_ms - 0.001)).met);
    assert!(!judge(format!("e2e:p50={}", e2e5_ms - 0.001)).met);
}

/// The search skips, with the simulator's own reason, what it refuses: Llama-3.1-70B on
/// one A100-80G (140 GB of weights), TP 3 (does not split 32 heads); a configuration
/// that runs, on one stage or two, has a goodput > 0.
#[test]
fn search_skips_what_the_simulator_refuses() {
    use cotenant_serve::goodput::{GoodputCriterion, LatencyMetric};
    use cotenant_serve::search::{evaluate, Candidate, LatencyPick};
    let rows: Vec<(u64, u32, u32)> = (0..40).map(|i| (i * 500_000, 300, 20)).collect();
    let workload = load(&rows);
    let mut base = run_config(1, 1 << 16, 8192, 1);
    base.kv_capacity_tokens = None;
    let a100 = *find_gpu("A100-80G").expect("catalog");
    let candidate = Candidate {
        gpu: a100,
        tensor_parallel: 1,
        pipeline_parallel: 1,
        replicas: 1,
        token_budget: 2048,
        max_seqs: 64,
        scheduler: SchedulerKind::Fcfs,
    };
    let criterion = GoodputCriterion::Attainment(0.9);
    let latency = LatencyPick { metric: LatencyMetric::E2e, percentile: 90.0 };
    let run = |base: &ServeConfig, candidate: Candidate| {
        evaluate(&workload, base, candidate, RooflineParams::default(), &criterion, latency).outcome
    };
    let measured = run(&base, candidate).expect("8B fits on one A100");
    assert!(measured.goodput.requests_per_s > 0.0 && measured.latency_ms.is_some());
    let reason = |outcome: Result<_, String>| outcome.expect_err("skipped");
    let staged = run(&base, Candidate { pipeline_parallel: 2, ..candidate }).expect("8B on two stages");
    assert!(staged.goodput.requests_per_s > 0.0);
    assert!(reason(run(&base, Candidate { tensor_parallel: 3, ..candidate })).contains("TP 3 does not split"));
    let mut big = base.clone();
    big.model.model = ModelShape::parse("Llama-3.1-70B").expect("catalog");
    assert!(reason(run(&big, candidate)).contains("does not fit on 1 x A100-80G"));
}
