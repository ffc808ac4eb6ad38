//! Goodput search and capacity planning, both by running the simulator.

use cotenant_core::limits::MAX_SHARE_WINDOWS;
use cotenant_core::Span;
use cotenant_perf::{GpuSpec, Roofline, RooflineParams};

use crate::request::Workload;
use crate::sim::{simulate, ServeConfig, ServeError};
use crate::summary::summarize;

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

fn attainment(workload: &Workload, config: &ServeConfig, scale: f64) -> Result<f64, ServeError> {
    let scaled = workload.with_rate_scale(scale);
    let config = with_windows_for(config, &scaled);
    let result = simulate(&scaled, &config)?;
    Ok(summarize(&crate::closed_loop::offered(&scaled, &result), &result, config.slo).slo_attainment)
}

/// Max arrival-rate scale with attainment >= `target`: double from `start_scale`
/// until attainment drops below the target, then bisect.
pub fn goodput_search(
    workload: &Workload,
    config: &ServeConfig,
    target: f64,
    start_scale: f64,
) -> Result<GoodputResult, ServeError> {
    let mut probes = Vec::new();
    let probe = |scale: f64, probes: &mut Vec<(f64, f64)>| -> Result<bool, ServeError> {
        let value = attainment(workload, config, scale)?;
        probes.push((scale, value));
        Ok(value >= target)
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
    Ok(GoodputResult {
        rate_scale: good,
        requests_per_s: workload.request_rate_per_s() * good,
        attainment,
        probes,
        capped,
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
/// (up to `max_replicas`) whose attainment reaches `target`; sorted by GPU count. Each
/// candidate's roofline takes its parameters from `params(gpu, tp)` (the GPU's own
/// fitted parameters, with the caller's overrides), not from `base`'s GPU.
pub fn plan_serve(
    workload: &Workload,
    base: &ServeConfig,
    gpus: &[GpuSpec],
    tensor_parallel: &[u32],
    params: &dyn Fn(&GpuSpec, u32) -> RooflineParams,
    target: f64,
    max_replicas: u32,
) -> Vec<PlanRow> {
    let mut rows = Vec::new();
    for gpu in gpus {
        for &tp in tensor_parallel {
            let mut config = with_windows_for(base, workload);
            config.model = Roofline::new(base.model.model.clone(), *gpu, tp, params(gpu, tp));
            if let Some(row) = fewest_replicas(workload, &mut config, target, max_replicas) {
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
    target: f64,
    max_replicas: u32,
) -> Option<(u32, f64)> {
    let mut run = |replicas: u32| -> Option<f64> {
        config.replicas = replicas;
        let result = simulate(workload, config).ok()?;
        Some(summarize(workload, &result, config.slo).slo_attainment)
    };
    // Exponential search for a feasible count, then bisection below it.
    let (mut low, mut high) = (0_u32, 1_u32);
    let mut high_attainment = loop {
        let value = run(high)?;
        if value >= target {
            break value;
        }
        if high >= max_replicas {
            return None;
        }
        low = high;
        high = (high * 2).min(max_replicas);
    };
    while high - low > 1 {
        let middle = (low + high) / 2;
        let value = run(middle)?;
        if value >= target {
            (high, high_attainment) = (middle, value);
        } else {
            low = middle;
        }
    }
    Some((high, high_attainment))
}
