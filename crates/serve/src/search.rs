//! Configuration search (Vidur-Search, MLSys'24): every combination of GPU type, tensor
//! and pipeline parallelism, replicas, token budget, batch size and scheduler; each
//! configuration's goodput (the highest arrival rate that meets the SLO) found by
//! [`goodput_search_with`]; with a price per GPU-hour, its cost per million tokens at that
//! rate; then the Pareto front of cost against a latency percentile, and the cheapest.
//!
//! ```text
//! tokens/s at the SLO  = goodput req/s x (prompt + output tokens per request of the workload)
//! $ per million tokens = GPUs x $/GPU-hour / (tokens/s x 3600) x 1e6
//! req/s per $/h        = goodput req/s / (GPUs x $/GPU-hour)
//! ```
//!
//! Evaluating a configuration is independent of every other, so callers may run
//! [`evaluate`] in parallel and [`rank`] the results in candidate order: the outcome does
//! not depend on the order they finish in.

use cotenant_perf::{GpuSpec, ModelShape, Roofline, RooflineParams};

use crate::goodput::{GoodputCriterion, LatencyMetric};
use crate::metrics::percentile_sorted;
use crate::plan::{goodput_search_with, with_windows_for, GoodputResult};
use crate::request::Workload;
use crate::scheduler::SchedulerKind;
use crate::sim::{simulate, ServeConfig};
use crate::summary::request_latencies;

/// The axes, each a list of values to try.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpace {
    pub gpus: Vec<GpuSpec>,
    pub tensor_parallel: Vec<u32>,
    pub pipeline_parallel: Vec<u32>,
    pub replicas: Vec<u32>,
    pub token_budgets: Vec<u32>,
    pub max_seqs: Vec<u32>,
    pub schedulers: Vec<SchedulerKind>,
}

/// One point of the space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub gpu: GpuSpec,
    pub tensor_parallel: u32,
    pub pipeline_parallel: u32,
    pub replicas: u32,
    pub token_budget: u32,
    pub max_seqs: u32,
    pub scheduler: SchedulerKind,
}

impl Candidate {
    /// replicas x TP x PP.
    pub fn gpus(&self) -> u32 {
        self.replicas * self.tensor_parallel * self.pipeline_parallel
    }

    /// `H100-SXM TP 2 PP 1 x 2 replicas, budget 8192, 256 seqs, fcfs`.
    pub fn describe(&self) -> String {
        format!(
            "{} TP {} PP {} x {} replica(s), budget {}, {} seqs, {}",
            self.gpu.name,
            self.tensor_parallel,
            self.pipeline_parallel,
            self.replicas,
            self.token_budget,
            self.max_seqs,
            self.scheduler.name()
        )
    }
}

impl SearchSpace {
    /// Every combination, in a fixed order: GPU, TP, PP, replicas, token budget, max
    /// sequences, scheduler (the last varies fastest).
    pub fn candidates(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        for &gpu in &self.gpus {
            for &tensor_parallel in &self.tensor_parallel {
                for &pipeline_parallel in &self.pipeline_parallel {
                    for &replicas in &self.replicas {
                        for &token_budget in &self.token_budgets {
                            for &max_seqs in &self.max_seqs {
                                for &scheduler in &self.schedulers {
                                    out.push(Candidate {
                                        gpu,
                                        tensor_parallel,
                                        pipeline_parallel,
                                        replicas,
                                        token_budget,
                                        max_seqs,
                                        scheduler,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Whether `tp` GPUs can split `model` as vLLM does: the attention heads evenly, and the
/// KV heads evenly or, with fewer KV heads than GPUs, replicated evenly.
pub fn tensor_parallel_fits(tp: u32, model: &ModelShape) -> bool {
    tp >= 1
        && model.query_heads.is_multiple_of(tp)
        && (model.kv_heads.is_multiple_of(tp) || (model.kv_heads > 0 && tp.is_multiple_of(model.kv_heads)))
}

/// `base` deployed as `candidate`, its roofline with `params` (the candidate GPU's own).
pub fn candidate_config(base: &ServeConfig, candidate: &Candidate, params: RooflineParams) -> ServeConfig {
    let mut config = base.clone();
    config.model = Roofline::new(base.model.model.clone(), candidate.gpu, candidate.tensor_parallel, params);
    config.replicas = candidate.replicas;
    config.pipeline_parallel = candidate.pipeline_parallel;
    config.scheduler.kind = candidate.scheduler;
    config.scheduler.limits.token_budget = candidate.token_budget;
    config.scheduler.limits.max_seqs = candidate.max_seqs;
    config
}

/// What the search measured for one configuration that ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub goodput: GoodputResult,
    /// Prompt + output tokens per second at the goodput.
    pub tokens_per_s: f64,
    /// The Pareto latency (the chosen metric's percentile, ms) in the run at the goodput;
    /// None when no rate met the SLO.
    pub latency_ms: Option<f64>,
    /// Seconds between the first and last arrival at the goodput: under a minute, the
    /// goodput measures how fast a burst drains rather than a sustained rate.
    pub arrival_span_s: f64,
}

/// One configuration's result: measured, or skipped with the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub candidate: Candidate,
    pub outcome: Result<Measured, String>,
}

/// The latency the Pareto front trades cost against: a metric and a percentile (0, 100].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyPick {
    pub metric: LatencyMetric,
    pub percentile: f64,
}

impl LatencyPick {
    /// `METRIC:pQ`, e.g. `e2e:p90`.
    pub fn parse(text: &str) -> Result<LatencyPick, String> {
        let criterion = GoodputCriterion::parse_percentiles(&format!("{text}=1"))
            .map_err(|e| e.replace("=1`", "`").replace("no `=MS` target", "expected METRIC:pQ"))?;
        match criterion {
            GoodputCriterion::Percentiles(targets) if targets.len() == 1 => {
                Ok(LatencyPick { metric: targets[0].metric, percentile: targets[0].percentile })
            }
            _ => Err(format!("`{text}`: expected one METRIC:pQ (e.g. e2e:p90)")),
        }
    }

    pub fn describe(&self) -> String {
        format!("{} p{}", self.metric.name().to_uppercase(), self.percentile)
    }
}

/// Runs one configuration: `refusal` (a reason the caller knows already, e.g. no price)
/// skips it; otherwise its goodput under `criterion` (searched from the workload's own
/// rate), then one run at the goodput for the latency. A configuration the simulator
/// refuses (does not fit, pipeline parallelism not modelled, ...) is skipped with its
/// error as the reason.
pub fn evaluate(
    workload: &Workload,
    base: &ServeConfig,
    candidate: Candidate,
    params: RooflineParams,
    criterion: &GoodputCriterion,
    latency: LatencyPick,
) -> Evaluation {
    let skip = |reason: String| Evaluation { candidate, outcome: Err(reason) };
    if !tensor_parallel_fits(candidate.tensor_parallel, &base.model.model) {
        return skip(format!(
            "TP {} does not split {}'s {} attention and {} KV heads",
            candidate.tensor_parallel,
            base.model.model.name,
            base.model.model.query_heads,
            base.model.model.kv_heads
        ));
    }
    let config = candidate_config(base, &candidate, params);
    let goodput = match goodput_search_with(workload, &config, criterion, 1.0) {
        Ok(found) => found,
        Err(error) => return skip(error.to_string()),
    };
    let tokens: u64 =
        workload.requests.iter().map(|r| u64::from(r.prompt_tokens) + u64::from(r.output_tokens)).sum();
    let tokens_per_s = goodput.requests_per_s * tokens as f64 / workload.requests.len().max(1) as f64;
    let arrival_span_s = workload.arrival_span().as_secs_f64() / goodput.rate_scale.max(f64::MIN_POSITIVE);
    let latency_ms = if goodput.rate_scale > 0.0 {
        let scaled = workload.with_rate_scale(goodput.rate_scale);
        let config = with_windows_for(&config, &scaled);
        match simulate(&scaled, &config) {
            Ok(result) => Some(latency_of(&scaled, &result, &config, latency)),
            Err(error) => return skip(error.to_string()),
        }
    } else {
        None
    };
    Evaluation { candidate, outcome: Ok(Measured { goodput, tokens_per_s, latency_ms, arrival_span_s }) }
}

fn latency_of(
    workload: &Workload,
    result: &crate::ServeResult,
    config: &ServeConfig,
    pick: LatencyPick,
) -> f64 {
    let q = pick.percentile / 100.0;
    if pick.metric == LatencyMetric::Tbt {
        return result.tbt.quantile_us(q) as f64 / 1e3;
    }
    let latencies = request_latencies(workload, result, config.slo);
    let mut values: Vec<f64> = latencies
        .iter()
        .flatten()
        .filter_map(|l| match pick.metric {
            LatencyMetric::Ttft => Some(l.ttft_ms),
            LatencyMetric::Tpot => l.tpot_ms,
            LatencyMetric::E2e => Some(l.e2e_ms),
            LatencyMetric::Tbt => None,
        })
        .collect();
    values.sort_by(f64::total_cmp);
    percentile_sorted(&values, q)
}

/// One ranked configuration: its evaluation and, when it has a price and a goodput > 0,
/// its costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub evaluation: Evaluation,
    pub usd_per_hour: Option<f64>,
    /// Dollars per million prompt + output tokens at the goodput.
    pub usd_per_million_tokens: Option<f64>,
    /// Goodput requests per second per dollar-per-hour.
    pub qps_per_dollar: Option<f64>,
    pub pareto: bool,
}

/// The search's answer: every configuration in candidate order, the Pareto front
/// (indices, by cost) and the cheapest configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOutcome {
    pub ranked: Vec<Ranked>,
    pub pareto: Vec<usize>,
    pub best: Option<usize>,
}

/// GPUs x $/GPU-hour / (tokens/s x 3600) x 1e6; None without throughput.
pub fn usd_per_million_tokens(gpus: u32, usd_per_gpu_hour: f64, tokens_per_s: f64) -> Option<f64> {
    (tokens_per_s > 0.0).then(|| f64::from(gpus) * usd_per_gpu_hour / (tokens_per_s * 3600.0) * 1e6)
}

/// Costs from `price_of(gpu name)` ($/GPU-hour), the Pareto front of (cost, latency) among
/// configurations with both (a point is on it when no other is at most as costly and at
/// most as slow, and strictly better in one), and the cheapest (ties: lower latency, then
/// candidate order).
pub fn rank(evaluations: Vec<Evaluation>, price_of: &dyn Fn(&str) -> Option<f64>) -> SearchOutcome {
    let mut ranked: Vec<Ranked> = evaluations
        .into_iter()
        .map(|evaluation| {
            let gpus = evaluation.candidate.gpus();
            let usd_per_hour = price_of(evaluation.candidate.gpu.name).map(|p| p * f64::from(gpus));
            let (mut per_million, mut qps_per_dollar) = (None, None);
            if let (Some(hourly), Ok(measured)) = (usd_per_hour, &evaluation.outcome) {
                let per_gpu = hourly / f64::from(gpus);
                per_million = usd_per_million_tokens(gpus, per_gpu, measured.tokens_per_s);
                qps_per_dollar =
                    (measured.goodput.requests_per_s > 0.0).then(|| measured.goodput.requests_per_s / hourly);
            }
            Ranked {
                evaluation,
                usd_per_hour,
                usd_per_million_tokens: per_million,
                qps_per_dollar,
                pareto: false,
            }
        })
        .collect();
    let point = |r: &Ranked| -> Option<(f64, f64)> {
        let latency = r.evaluation.outcome.as_ref().ok()?.latency_ms?;
        Some((r.usd_per_million_tokens?, latency))
    };
    let points: Vec<(usize, (f64, f64))> =
        ranked.iter().enumerate().filter_map(|(i, r)| point(r).map(|p| (i, p))).collect();
    let mut pareto: Vec<usize> = points
        .iter()
        .filter(|(_, (cost, latency))| {
            !points.iter().any(|(_, (c, l))| c <= cost && l <= latency && (c < cost || l < latency))
        })
        .map(|(i, _)| *i)
        .collect();
    pareto.sort_by(|&a, &b| {
        let (pa, pb) = (point(&ranked[a]).unwrap_or_default(), point(&ranked[b]).unwrap_or_default());
        pa.0.total_cmp(&pb.0).then(pa.1.total_cmp(&pb.1)).then(a.cmp(&b))
    });
    for &i in &pareto {
        ranked[i].pareto = true;
    }
    let best = points
        .iter()
        .min_by(|(i, a), (j, b)| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)).then(i.cmp(j)))
        .map(|(i, _)| *i);
    SearchOutcome { ranked, pareto, best }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::find_gpu;

    fn candidate(gpu: &str, tp: u32, replicas: u32) -> Candidate {
        Candidate {
            gpu: *find_gpu(gpu).expect("catalog"),
            tensor_parallel: tp,
            pipeline_parallel: 1,
            replicas,
            token_budget: 8192,
            max_seqs: 256,
            scheduler: SchedulerKind::Fcfs,
        }
    }

    fn measured(candidate: Candidate, requests_per_s: f64, tokens_per_s: f64, latency_ms: f64) -> Evaluation {
        let goodput = GoodputResult {
            rate_scale: 1.0,
            requests_per_s,
            attainment: 1.0,
            probes: Vec::new(),
            capped: false,
            values_ms: Vec::new(),
        };
        Evaluation {
            candidate,
            outcome: Ok(Measured {
                goodput,
                tokens_per_s,
                latency_ms: Some(latency_ms),
                arrival_span_s: 600.0,
            }),
        }
    }

    /// Prices A100 $2/GPU-h, H100 $4/GPU-h (none for L4).
    /// 0: 1 x A100, 1,000 tok/s, 4 req/s, 900 ms: $2/h / 3.6M tok/h = $0.5556/M; 2 req/s per $/h.
    /// 1: 2 x H100 (TP 2), 4,000 tok/s, 300 ms: $8/h / 14.4M = $0.5556/M (tie on cost, faster).
    /// 2: 1 x H100, 1,500 tok/s, 500 ms: $4/h / 5.4M = $0.7407/M (dominated by 1).
    /// 3: 4 x A100, 3,000 tok/s, 200 ms: $8/h / 10.8M = $0.7407/M (fastest: on the front).
    /// 4: L4, no price. 5: skipped. Front by cost: 1, 3 (0 is dominated by 1's equal cost and
    /// lower latency); best: 1.
    #[test]
    fn costs_front_and_best_by_hand() {
        let evaluations = vec![
            measured(candidate("A100-80G", 1, 1), 4.0, 1000.0, 900.0),
            measured(candidate("H100-SXM", 2, 1), 10.0, 4000.0, 300.0),
            measured(candidate("H100-SXM", 1, 1), 5.0, 1500.0, 500.0),
            measured(candidate("A100-80G", 1, 4), 8.0, 3000.0, 200.0),
            measured(candidate("L4", 1, 1), 1.0, 100.0, 100.0),
            Evaluation { candidate: candidate("A100-80G", 1, 1), outcome: Err("does not fit".into()) },
        ];
        let price = |gpu: &str| match gpu {
            "A100-80G" => Some(2.0),
            "H100-SXM" => Some(4.0),
            _ => None,
        };
        let outcome = rank(evaluations, &price);
        let cost = |i: usize| outcome.ranked[i].usd_per_million_tokens.expect("priced");
        assert!((cost(0) - 2.0 / 3.6).abs() < 1e-12);
        assert!((cost(1) - 8.0 / 14.4).abs() < 1e-12);
        assert!((cost(2) - 4.0 / 5.4).abs() < 1e-12);
        assert!((cost(3) - 8.0 / 10.8).abs() < 1e-12);
        assert_eq!(outcome.ranked[0].qps_per_dollar, Some(2.0));
        assert_eq!(outcome.ranked[4].usd_per_million_tokens, None);
        assert_eq!(outcome.ranked[5].usd_per_hour, Some(2.0));
        assert_eq!(outcome.pareto, [1, 3]);
        assert_eq!(outcome.best, Some(1));
        assert!(outcome.ranked[1].pareto && !outcome.ranked[0].pareto);
        assert_eq!(usd_per_million_tokens(8, 12.29, 0.0), None);
    }

    #[test]
    fn candidates_cover_every_combination_in_order() {
        let space = SearchSpace {
            gpus: vec![*find_gpu("A100-80G").expect("catalog"), *find_gpu("H100-SXM").expect("catalog")],
            tensor_parallel: vec![1, 2],
            pipeline_parallel: vec![1],
            replicas: vec![1, 2, 4],
            token_budgets: vec![2048],
            max_seqs: vec![64, 256],
            schedulers: vec![SchedulerKind::Fcfs, SchedulerKind::Sarathi],
        };
        let all = space.candidates();
        assert_eq!(all.len(), 2 * 2 * 3 * 2 * 2);
        assert_eq!(all[0].describe(), "A100-80G TP 1 PP 1 x 1 replica(s), budget 2048, 64 seqs, fcfs");
        assert_eq!(all[1].scheduler, SchedulerKind::Sarathi);
        assert_eq!(all[47].gpus(), 8);
        assert!(LatencyPick::parse("e2e:p90").is_ok_and(|p| p.describe() == "E2E p90"));
        assert!(LatencyPick::parse("e2e").expect_err("no percentile").contains("expected METRIC:pQ"));
    }
}
