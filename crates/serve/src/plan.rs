//! Goodput search and capacity planning, both by running the simulator.

use cotenant_core::limits::MAX_SHARE_WINDOWS;
use cotenant_core::Span;
use cotenant_perf::{GpuSpec, Roofline, RooflineParams};

use crate::goodput::{GoodputCriterion, Verdict};
use crate::request::Workload;
use crate::sim::{simulate, ServeConfig, ServeError};

/// SLO attainment the goodput definition asks for.
pub const GOODPUT_ATTAINMENT: f64 = 0.9;
/// Doublings tried when looking for a rate that breaks the SLO, and bisection steps.
const MAX_DOUBLINGS: u32 = 12;
const BISECTION_STEPS: u32 = 10;

#[derive(Clone, Debug, PartialEq)]
pub struct GoodputResult {
    /// Largest rate scale found with attainment >= the target.
    pub rate_scale: f64,
    pub requests_per_s: f64,
    pub attainment: f64,
    /// (rate scale, attainment) of every run, in the order run.
    pub probes: Vec<(f64, f64)>,
    /// The search never found a rate that misses the target: `rate_scale` is a
    /// lower bound set by the search's doublings, not the goodput.
    pub capped: bool,
    /// With a percentile criterion: each target's measured value (ms) at `rate_scale`, in
    /// the criterion's order; empty otherwise or when no probed rate met it.
    pub values_ms: Vec<f64>,
}

/// `config` with its service window widened, if needed, so that `workload`'s
/// arrivals span at most `MAX_SHARE_WINDOWS` windows: for runs that read only
/// attainment and throughput (goodput probes, plans), where windows do not matter.
pub fn with_windows_for(config: &ServeConfig, workload: &Workload) -> ServeConfig {
    let last_arrival = workload.requests.last().map_or(0, |r| r.arrival.0);
    let mut widened = config.clone();
    widened.service_window = Span(config.service_window.0.max(last_arrival / MAX_SHARE_WINDOWS + 1));
    widened
}

/// How `workload` at `scale` times its rate, run with `config`, measures against `criterion`.
pub fn judge_at(
    workload: &Workload,
    config: &ServeConfig,
    criterion: &GoodputCriterion,
    scale: f64,
) -> Result<Verdict, ServeError> {
    let scaled = workload.with_rate_scale(scale);
    let config = with_windows_for(config, &scaled);
    let result = simulate(&scaled, &config)?;
    Ok(criterion.judge(&crate::closed_loop::offered(&scaled, &result), &result, config.slo))
}

/// Max arrival-rate scale with attainment >= `target`: double from `start_scale`
/// until attainment drops below the target, then bisect.
pub fn goodput_search(
    workload: &Workload,
    config: &ServeConfig,
    target: f64,
    start_scale: f64,
) -> Result<GoodputResult, ServeError> {
    goodput_search_with(workload, config, &GoodputCriterion::Attainment(target), start_scale)
}

/// Max arrival-rate scale at which runs meet `criterion`: double from `start_scale`
/// until a run misses it, then bisect (the same probes as [`goodput_search`]).
pub fn goodput_search_with(
    workload: &Workload,
    config: &ServeConfig,
    criterion: &GoodputCriterion,
    start_scale: f64,
) -> Result<GoodputResult, ServeError> {
    let mut probes = Vec::new();
    let mut met_values: Vec<(f64, Vec<f64>)> = Vec::new();
    let mut probe = |scale: f64, probes: &mut Vec<(f64, f64)>| -> Result<bool, ServeError> {
        let verdict = judge_at(workload, config, criterion, scale)?;
        probes.push((scale, verdict.attainment));
        if verdict.met {
            met_values.push((scale, verdict.values_ms));
        }
        Ok(verdict.met)
    };
    let (mut good, mut bad) = (0.0, start_scale);
    let mut capped = true;
    for _ in 0..MAX_DOUBLINGS {
        if !probe(bad, &mut probes)? {
            capped = false;
            break;
        }
        good = bad;
        bad *= 2.0;
    }
    if good == 0.0 {
        // Even the starting rate misses: search downwards between 0 and it.
        good = 0.0;
    }
    for _ in 0..BISECTION_STEPS {
        let middle = (good + bad) / 2.0;
        if probe(middle, &mut probes)? {
            good = middle;
        } else {
            bad = middle;
        }
    }
    let attainment = probes.iter().filter(|(s, _)| *s == good).map(|(_, a)| *a).next().unwrap_or(0.0);
    let values_ms = met_values.into_iter().find(|(s, _)| *s == good).map(|(_, v)| v).unwrap_or_default();
    Ok(GoodputResult {
        rate_scale: good,
        requests_per_s: workload.request_rate_per_s() * good,
        attainment,
        probes,
        capped,
        values_ms,
    })
}

/// One feasible deployment for a load.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRow {
    pub gpu: &'static str,
    pub tensor_parallel: u32,
    pub replicas: u32,
    pub gpus: u32,
    pub attainment: f64,
}

/// For each GPU type and tensor-parallel degree the model fits on, the fewest replicas
/// (up to `max_replicas`) whose run meets `criterion` (attainment, or chosen latency percentiles); sorted by GPU count. Each
/// candidate's roofline takes its parameters from `params(gpu, tp)` (the GPU's own
/// fitted parameters, with the caller's overrides), not from `base`'s GPU.
pub fn plan_serve(
    workload: &Workload,
    base: &ServeConfig,
    gpus: &[GpuSpec],
    tensor_parallel: &[u32],
    params: &dyn Fn(&GpuSpec, u32) -> RooflineParams,
    criterion: &GoodputCriterion,
    max_replicas: u32,
) -> Vec<PlanRow> {
    let mut rows = Vec::new();
    for gpu in gpus {
        for &tp in tensor_parallel {
            let mut config = with_windows_for(base, workload);
            config.model = Roofline::new(base.model.model.clone(), *gpu, tp, params(gpu, tp));
            if let Some(row) = fewest_replicas(workload, &mut config, criterion, max_replicas) {
                rows.push(PlanRow {
                    gpu: gpu.name,
                    tensor_parallel: tp,
                    replicas: row.0,
                    gpus: row.0 * tp * base.pipeline_parallel.max(1),
                    attainment: row.1,
                });
            }
        }
    }
    rows.sort_by(|a, b| {
        a.gpus.cmp(&b.gpus).then(a.gpu.cmp(b.gpu)).then(a.tensor_parallel.cmp(&b.tensor_parallel))
    });
    rows
}

fn fewest_replicas(
    workload: &Workload,
    config: &mut ServeConfig,
    criterion: &GoodputCriterion,
    max_replicas: u32,
) -> Option<(u32, f64)> {
    let mut run = |replicas: u32| -> Option<Verdict> {
        config.replicas = replicas;
        let result = simulate(workload, config).ok()?;
        Some(criterion.judge(workload, &result, config.slo))
    };
    // Exponential search for a feasible count, then bisection below it.
    let (mut low, mut high) = (0_u32, 1_u32);
    let mut high_attainment = loop {
        let verdict = run(high)?;
        if verdict.met {
            break verdict.attainment;
        }
        if high >= max_replicas {
            return None;
        }
        low = high;
        high = (high * 2).min(max_replicas);
    };
    while high - low > 1 {
        let middle = (low + high) / 2;
        let verdict = run(middle)?;
        if verdict.met {
            (high, high_attainment) = (middle, verdict.attainment);
        } else {
            low = middle;
        }
    }
    Some((high, high_attainment))
}
