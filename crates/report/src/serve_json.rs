//! JSON for serving results (`cotenant serve-sim --json`, `cotenant plan serve --json`).
//! Keys are sorted (serde_json's default map), so output is stable; the serving
//! simulator's types know nothing of JSON.

use serde_json::{json, Map, Value};

use cotenant_serve::attribution::AttributionErrors;
use cotenant_serve::goodput::GoodputCriterion;
use cotenant_serve::metrics::Percentiles;
use cotenant_serve::plan::{GoodputResult, PlanRow};
use cotenant_serve::sim::ServiceWindow;
use cotenant_serve::utilization::{KvWindow, ReplicaUsage};
use cotenant_serve::{Summary, Workload};

/// `{"p50", "p90", "p99", "mean"}`; a mean that is not finite is `null`.
pub fn percentiles_json(p: &Percentiles) -> Value {
    let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    json!({"p50": p.p50, "p90": p.p90, "p99": p.p99, "mean": finite(p.mean)})
}

/// One run's summary: latencies (ms), SLO attainment, throughput, fairness and one
/// object per tenant.
pub fn summary_json(s: &Summary) -> Value {
    json!({
        "scheduler": s.scheduler,
        "requests": s.requests,
        "finished": s.finished,
        "ttft_ms": percentiles_json(&s.ttft_ms),
        "tbt_ms": percentiles_json(&s.tbt_ms),
        "tpot_ms": percentiles_json(&s.tpot_ms),
        "e2e_ms": percentiles_json(&s.e2e_ms),
        "normalized_latency_ms_per_token": percentiles_json(&s.normalized_latency_ms),
        "slo_attainment": s.slo_attainment,
        "duration_s": s.duration_s,
        "requests_per_s": s.requests_per_s,
        "output_tokens_per_s": s.output_tokens_per_s,
        "total_tokens_per_s": s.total_tokens_per_s,
        "iterations": s.iterations,
        "preemptions": s.preemptions,
        "busy_fraction": s.busy_fraction,
        "prefix_hit_tokens": s.prefix_hit_tokens,
        "jain_index": s.jain_index,
        "max_window_service_difference": s.max_window_service_difference,
        "max_service_difference": s.max_service_difference,
        "model_flops": s.utilization.model_flops,
        "bytes_moved": s.utilization.bytes_moved,
        "mfu": s.utilization.mfu,
        "mbu": s.utilization.mbu,
        "mfu_wall": s.utilization.mfu_wall,
        "mbu_wall": s.utilization.mbu_wall,
        "kv_utilization_mean": s.utilization.kv_mean,
        "kv_utilization_max": s.utilization.kv_max,
        "tenants": s.tenants.iter().map(|t| json!({
            "name": t.name, "weight": t.weight, "requests": t.requests, "service": t.service,
            "attributed_gpu_s": t.attributed_gpu_s, "ttft_ms": percentiles_json(&t.ttft_ms),
            "e2e_ms": percentiles_json(&t.e2e_ms), "slo_attainment": t.slo_attainment,
        })).collect::<Vec<_>>(),
    })
}

/// A scheduler's diagnostics (name -> value) as an object, or `null` without any.
pub fn diagnostics_json(diagnostics: Option<&[(String, f64)]>) -> Value {
    json!(diagnostics.map(|d| d.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<Map<_, _>>()))
}

/// Relative attribution errors against Shapley values, per method and phase.
pub fn attribution_json(errors: &AttributionErrors) -> Value {
    let stats = |v: &[f64]| {
        let p = Percentiles::of(v);
        json!({"samples": v.len(), "p50": p.p50, "p90": p.p90, "p99": p.p99})
    };
    json!({
        "iterations_evaluated": errors.iterations_evaluated,
        "exact_iterations": errors.exact_iterations,
        "llmvisor": {"prefill": stats(&errors.llmvisor_prefill), "decode": stats(&errors.llmvisor_decode)},
        "token_proxy": {"prefill": stats(&errors.proxy_prefill), "decode": stats(&errors.proxy_decode)},
    })
}

/// Per window: service per tenant (VTC units) and whether each was backlogged throughout.
pub fn windows_json(windows: &[ServiceWindow]) -> Value {
    json!(windows
        .iter()
        .map(|w| json!({"service": w.service, "backlogged": w.backlogged}))
        .collect::<Vec<_>>())
}

/// Per window of iterations (`--windows`): KV blocks in use / capacity over all replicas,
/// the busy-time-weighted mean (null without iterations) and the maximum.
pub fn kv_windows_json(windows: &[KvWindow]) -> Value {
    json!(windows.iter().map(|w| json!({"mean": w.mean(), "max": w.max})).collect::<Vec<_>>())
}

/// Per replica (`--windows`): its KV blocks in use / capacity over the run, the
/// busy-time-weighted mean and the maximum.
pub fn kv_replicas_json(replicas: &[ReplicaUsage]) -> Value {
    json!(replicas.iter().map(|r| json!({"mean": r.kv_mean(), "max": r.kv_max})).collect::<Vec<_>>())
}

/// The workload: source, request count, arrival rate and tenants with weights.
pub fn workload_json(workload: &Workload) -> Value {
    json!({
        "source": workload.source,
        "requests": workload.requests.len(),
        "request_rate_per_s": workload.request_rate_per_s(),
        "tenants": workload.tenants.iter().map(|t| json!({"name": t.name, "weight": t.weight})).collect::<Vec<_>>(),
    })
}

/// What the goodput search found, and the run at the goodput.
#[derive(Clone, Debug)]
pub struct GoodputFigures<'a> {
    pub search: &'a GoodputResult,
    /// Summary of the run at the found rate scale.
    pub at_goodput: &'a Summary,
    /// Seconds between the first and last arrival at the found rate scale.
    pub arrival_span_s: f64,
    /// Wall-clock seconds the search took.
    pub search_wall_s: f64,
    /// What meeting the SLO meant.
    pub criterion: &'a GoodputCriterion,
}

/// The goodput object of a serve-sim run (`--goodput`).
pub fn goodput_json(g: &GoodputFigures<'_>) -> Value {
    json!({
        "rate_scale": g.search.rate_scale,
        "requests_per_s": g.search.requests_per_s,
        "attainment": g.search.attainment,
        "output_tokens_per_s": g.at_goodput.output_tokens_per_s,
        "total_tokens_per_s": g.at_goodput.total_tokens_per_s,
        "tbt_p99_ms": g.at_goodput.tbt_ms.p99,
        "simulations": g.search.probes.len(),
        "capped": g.search.capped,
        "arrival_span_s": g.arrival_span_s,
        "search_wall_s": g.search_wall_s,
        "probes": g.search.probes,
        "criterion": g.criterion.describe(),
        "targets": targets_json(g.criterion, &g.search.values_ms),
    })
}

/// A percentile criterion's targets with the values measured at the goodput (null when
/// no probed rate met them); `[]` for the attainment criterion.
pub fn targets_json(criterion: &GoodputCriterion, values_ms: &[f64]) -> Value {
    let GoodputCriterion::Percentiles(targets) = criterion else { return json!([]) };
    json!(targets
        .iter()
        .enumerate()
        .map(|(i, t)| json!({
            "metric": t.metric.name(), "percentile": t.percentile, "target_ms": t.target_ms,
            "value_ms": values_ms.get(i),
        }))
        .collect::<Vec<_>>())
}

/// Timings of a serve-sim run (`--bench`), measured by the caller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchFigures {
    pub requests: usize,
    pub wall_s: f64,
    pub iterations: u64,
    /// LLMVisor's split of a 64-request batch, roofline terms included, microseconds.
    pub attribution_us: f64,
    /// The same split with the roofline terms already computed, microseconds.
    pub attribution_split_us: f64,
}

/// The bench object of a serve-sim run (`--bench`).
pub fn bench_json(b: &BenchFigures) -> Value {
    json!({
        "requests": b.requests,
        "wall_s": b.wall_s,
        "iterations": b.iterations,
        "iterations_per_s": b.iterations as f64 / b.wall_s,
        "requests_per_s_wall": b.requests as f64 / b.wall_s,
        "attribution_us_per_iteration_64_requests": b.attribution_us,
        "attribution_split_us_per_iteration_64_requests": b.attribution_split_us,
    })
}

/// `{"workload": ..., "runs": [...]}`: serve-sim's `--json` document.
pub fn serve_runs_json(workload: &Workload, runs: Vec<Value>) -> Value {
    json!({"workload": workload_json(workload), "runs": runs})
}

/// `{"workload": ..., "target": ..., "plans": [...]}`: `plan serve --json`.
pub fn plan_json(workload: &Workload, target: f64, rows: &[PlanRow]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| json!({"gpu": r.gpu, "tensor_parallel": r.tensor_parallel, "replicas": r.replicas, "gpus": r.gpus, "attainment": r.attainment}))
        .collect();
    json!({"workload": workload_json(workload), "target": target, "plans": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_serve::summary::TenantSummary;

    fn percentiles(p50: f64, p90: f64, p99: f64, mean: f64) -> Percentiles {
        Percentiles { p50, p90, p99, mean }
    }

    fn summary() -> Summary {
        let latency = percentiles(1.0, 2.0, 3.0, 1.5);
        Summary {
            scheduler: "vtc".into(),
            requests: 4,
            finished: 3,
            ttft_ms: latency,
            tbt_ms: latency,
            tpot_ms: latency,
            e2e_ms: latency,
            normalized_latency_ms: latency,
            slo_attainment: 0.75,
            duration_s: 2.0,
            requests_per_s: 1.5,
            output_tokens_per_s: 10.0,
            total_tokens_per_s: 30.0,
            iterations: 7,
            preemptions: 1,
            busy_fraction: 0.5,
            prefix_hit_tokens: 0,
            tenants: vec![TenantSummary {
                name: "a".into(),
                weight: 2.0,
                requests: 4,
                service: 60.0,
                attributed_gpu_s: 0.25,
                ttft_ms: latency,
                e2e_ms: latency,
                slo_attainment: 0.75,
            }],
            jain_index: 1.0,
            max_window_service_difference: 0.0,
            max_service_difference: 0.0,
            utilization: Default::default(),
        }
    }

    #[test]
    fn a_mean_that_is_not_finite_is_null() {
        assert_eq!(
            percentiles_json(&percentiles(1.0, 2.0, 3.0, f64::NAN)),
            json!({"p50": 1.0, "p90": 2.0, "p99": 3.0, "mean": null})
        );
        assert_eq!(percentiles_json(&percentiles(1.0, 2.0, 3.0, 4.0))["mean"], json!(4.0));
    }

    #[test]
    fn the_summary_keeps_every_field_under_its_name() {
        let value = summary_json(&summary());
        let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "busy_fraction",
                "bytes_moved",
                "duration_s",
                "e2e_ms",
                "finished",
                "iterations",
                "jain_index",
                "kv_utilization_max",
                "kv_utilization_mean",
                "max_service_difference",
                "max_window_service_difference",
                "mbu",
                "mbu_wall",
                "mfu",
                "mfu_wall",
                "model_flops",
                "normalized_latency_ms_per_token",
                "output_tokens_per_s",
                "preemptions",
                "prefix_hit_tokens",
                "requests",
                "requests_per_s",
                "scheduler",
                "slo_attainment",
                "tbt_ms",
                "tenants",
                "total_tokens_per_s",
                "tpot_ms",
                "ttft_ms",
            ]
        );
        assert_eq!(value["slo_attainment"], json!(0.75));
        assert_eq!(value["tenants"][0]["service"], json!(60.0));
        assert_eq!(value["tenants"][0]["ttft_ms"]["p99"], json!(3.0));
        assert!(value["tenants"][0].get("tbt_ms").is_none());
    }

    #[test]
    fn bench_rates_divide_by_the_wall_time() {
        let bench = bench_json(&BenchFigures {
            requests: 200,
            wall_s: 0.5,
            iterations: 1000,
            attribution_us: 4.0,
            attribution_split_us: 1.0,
        });
        assert_eq!(bench["iterations_per_s"], json!(2000.0));
        assert_eq!(bench["requests_per_s_wall"], json!(400.0));
    }

    #[test]
    fn windows_and_diagnostics_keep_their_order() {
        let windows = [
            ServiceWindow { service: vec![3.0, 0.0], backlogged: vec![true, false] },
            ServiceWindow { service: vec![1.0, 2.0], backlogged: vec![true, true] },
        ];
        assert_eq!(
            windows_json(&windows),
            json!([
                {"service": [3.0, 0.0], "backlogged": [true, false]},
                {"service": [1.0, 2.0], "backlogged": [true, true]},
            ])
        );
        let diagnostics = [("counter_tenant0".to_string(), 5.0)];
        assert_eq!(diagnostics_json(Some(&diagnostics)), json!({"counter_tenant0": 5.0}));
        assert_eq!(diagnostics_json(None), Value::Null);
    }

    #[test]
    fn goodput_takes_the_search_and_the_run_at_it() {
        let search = GoodputResult {
            rate_scale: 2.0,
            requests_per_s: 8.0,
            attainment: 0.95,
            probes: vec![(1.0, 1.0), (2.0, 0.95), (4.0, 0.5)],
            capped: false,
            values_ms: vec![12.5],
        };
        let goodput = goodput_json(&GoodputFigures {
            search: &search,
            at_goodput: &summary(),
            arrival_span_s: 100.0,
            search_wall_s: 0.1,
            criterion: &GoodputCriterion::parse_percentiles("tbt:p99=20").unwrap(),
        });
        assert_eq!(goodput["criterion"], json!("TBT p99 <= 20 ms"));
        assert_eq!(
            goodput["targets"],
            json!([{"metric": "tbt", "percentile": 99.0, "target_ms": 20.0, "value_ms": 12.5}])
        );
        assert_eq!(goodput["simulations"], json!(3));
        assert_eq!(goodput["tbt_p99_ms"], json!(3.0));
        assert_eq!(goodput["probes"], json!([[1.0, 1.0], [2.0, 0.95], [4.0, 0.5]]));
    }
}
