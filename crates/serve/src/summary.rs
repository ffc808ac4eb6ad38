//! Turns a [`ServeResult`] into the figures a user reads: latency percentiles, SLO
//! attainment, throughput and per-tenant fairness.

use cotenant_core::Time;

use crate::metrics::{jain_index, Percentiles};
use crate::request::Workload;
use crate::sim::{ServeResult, ServiceWindow};
use crate::utilization::Utilization;
use crate::Slo;

#[derive(Clone, Debug, PartialEq)]
pub struct TenantSummary {
    pub name: String,
    pub weight: f64,
    pub requests: usize,
    /// VTC service units: prompt tokens computed + 2 x output tokens.
    pub service: f64,
    pub attributed_gpu_s: f64,
    pub ttft_ms: Percentiles,
    pub e2e_ms: Percentiles,
    pub slo_attainment: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub scheduler: String,
    pub requests: usize,
    pub finished: usize,
    pub ttft_ms: Percentiles,
    /// Every gap between consecutive output tokens of every request.
    pub tbt_ms: Percentiles,
    /// Per request: (E2E - TTFT) / (output tokens - 1).
    pub tpot_ms: Percentiles,
    pub e2e_ms: Percentiles,
    /// Per request: E2E / output tokens.
    pub normalized_latency_ms: Percentiles,
    pub slo_attainment: f64,
    pub duration_s: f64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub total_tokens_per_s: f64,
    pub iterations: u64,
    pub preemptions: u64,
    pub busy_fraction: f64,
    pub prefix_hit_tokens: u64,
    pub tenants: Vec<TenantSummary>,
    /// Mean over windows with >= 2 backlogged tenants of Jain's index of their
    /// service / weight; over whole-run service when no window qualifies.
    pub jain_index: f64,
    /// Largest (max - min) service / weight among tenants backlogged through one window.
    pub max_window_service_difference: f64,
    /// Largest spread of service / weight accumulated over consecutive windows with the
    /// same >= 2 backlogged tenants (VTC's bounded quantity).
    pub max_service_difference: f64,
    /// MFU, MBU (over busy and over wall time) and KV-cache utilization.
    pub utilization: Utilization,
}

/// One finished request's latencies in ms, and whether it met the SLO.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestLatency {
    /// Arrival to first token.
    pub ttft_ms: f64,
    /// (E2E - TTFT) / (output tokens - 1): the mean gap between its output tokens;
    /// None with a single output token.
    pub tpot_ms: Option<f64>,
    /// Arrival to last token.
    pub e2e_ms: f64,
    /// E2E / output tokens.
    pub normalized_ms: f64,
    pub met_slo: bool,
}

fn request_latency(arrival: Time, first: Time, finish: Time, output_tokens: u32, slo: Slo) -> RequestLatency {
    let ttft_ms = (first - arrival).0 as f64 / 1e3;
    let e2e_ms = (finish - arrival).0 as f64 / 1e3;
    let tpot_ms = (output_tokens > 1).then(|| (finish - first).0 as f64 / 1e3 / f64::from(output_tokens - 1));
    let met_slo = ttft_ms * 1e3 <= slo.ttft.0 as f64 && tpot_ms.is_none_or(|t| t * 1e3 <= slo.tbt.0 as f64);
    RequestLatency {
        ttft_ms,
        tpot_ms,
        e2e_ms,
        normalized_ms: e2e_ms / f64::from(output_tokens.max(1)),
        met_slo,
    }
}

/// Per request of `workload` (same order): its latencies, or None when it did not
/// finish. The figures [`summarize`] aggregates, for callers that need whole
/// distributions (CDFs per tenant).
pub fn request_latencies(workload: &Workload, result: &ServeResult, slo: Slo) -> Vec<Option<RequestLatency>> {
    workload
        .requests
        .iter()
        .zip(&result.seqs)
        .map(|(request, seq)| match (seq.first_token, seq.finish) {
            (Some(first), Some(finish)) => {
                Some(request_latency(request.arrival, first, finish, request.output_tokens, slo))
            }
            _ => None,
        })
        .collect()
}

pub fn summarize(workload: &Workload, result: &ServeResult, slo: Slo) -> Summary {
    let tenants = workload.tenants.len();
    let (mut ttft, mut tpot, mut e2e, mut normalized) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut per_tenant: Vec<(Vec<f64>, Vec<f64>, usize, usize)> =
        vec![(Vec::new(), Vec::new(), 0, 0); tenants];
    let (mut met, mut finished, mut output_tokens, mut prompt_tokens) = (0_usize, 0_usize, 0_u64, 0_u64);
    for (request, seq) in workload.requests.iter().zip(&result.seqs) {
        let (Some(first), Some(finish)) = (seq.first_token, seq.finish) else { continue };
        let latency = request_latency(request.arrival, first, finish, request.output_tokens, slo);
        finished += 1;
        met += usize::from(latency.met_slo);
        output_tokens += u64::from(request.output_tokens);
        prompt_tokens += u64::from(request.prompt_tokens);
        ttft.push(latency.ttft_ms);
        e2e.push(latency.e2e_ms);
        normalized.push(latency.normalized_ms);
        tpot.extend(latency.tpot_ms);
        let tenant = &mut per_tenant[request.tenant.index()];
        tenant.0.push(latency.ttft_ms);
        tenant.1.push(latency.e2e_ms);
        tenant.2 += 1;
        tenant.3 += usize::from(latency.met_slo);
    }
    let first_arrival = workload.requests.first().map_or(Time::ZERO, |r| r.arrival);
    let duration_s = (result.end - first_arrival).as_secs_f64().max(1e-9);
    let weights: Vec<f64> = workload.tenants.iter().map(|t| t.weight).collect();
    let fairness = window_fairness(&result.windows, &weights, &result.tenant_service);
    Summary {
        scheduler: result.scheduler_name.to_string(),
        requests: workload.requests.len(),
        finished,
        ttft_ms: Percentiles::of(&ttft),
        tbt_ms: Percentiles::of_histogram_ms(&result.tbt),
        tpot_ms: Percentiles::of(&tpot),
        e2e_ms: Percentiles::of(&e2e),
        normalized_latency_ms: Percentiles::of(&normalized),
        slo_attainment: met as f64 / workload.requests.len().max(1) as f64,
        duration_s,
        requests_per_s: finished as f64 / duration_s,
        output_tokens_per_s: output_tokens as f64 / duration_s,
        total_tokens_per_s: (output_tokens + prompt_tokens) as f64 / duration_s,
        iterations: result.iterations,
        preemptions: result.preemptions,
        busy_fraction: result.busy_us as f64 / 1e6 / (duration_s * result.kv_stats.len().max(1) as f64),
        prefix_hit_tokens: result.kv_stats.iter().map(|s| s.prefix_hit_tokens).sum(),
        tenants: workload
            .tenants
            .iter()
            .enumerate()
            .map(|(t, spec)| TenantSummary {
                name: spec.name.clone(),
                weight: spec.weight,
                requests: workload.requests.iter().filter(|r| r.tenant.index() == t).count(),
                service: result.tenant_service[t],
                attributed_gpu_s: result.tenant_attributed_ns[t] as f64 / 1e9,
                ttft_ms: Percentiles::of(&per_tenant[t].0),
                e2e_ms: Percentiles::of(&per_tenant[t].1),
                slo_attainment: per_tenant[t].3 as f64 / per_tenant[t].2.max(1) as f64,
            })
            .collect(),
        jain_index: fairness.jain,
        max_window_service_difference: fairness.max_window_difference,
        max_service_difference: fairness.max_cumulative_difference,
        utilization: result.usage.utilization(duration_s),
    }
}

struct Fairness {
    jain: f64,
    max_window_difference: f64,
    max_cumulative_difference: f64,
}

fn spread(values: impl Iterator<Item = f64>) -> f64 {
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if high >= low {
        high - low
    } else {
        0.0
    }
}

/// VTC's service difference in one window where at least two tenants were backlogged
/// throughout (service in VTC units, divided by the tenant's weight).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServiceDifference {
    /// max - min of service / weight within this window, among its backlogged tenants.
    pub window: f64,
    /// max - min of service / weight accumulated over the consecutive windows with this
    /// window's set of backlogged tenants, up to and including it: the quantity VTC bounds.
    pub accumulated: f64,
}

/// Per window (same order as `windows`): the service difference among the tenants
/// backlogged through it, or None where fewer than two were. The maxima over this
/// series are the summary's `max_window_service_difference` and `max_service_difference`.
pub fn service_differences(windows: &[ServiceWindow], weights: &[f64]) -> Vec<Option<ServiceDifference>> {
    let mut run_set: Vec<bool> = Vec::new();
    let mut run_service = vec![0.0; weights.len()];
    windows
        .iter()
        .map(|window| {
            let members: Vec<usize> = (0..weights.len()).filter(|&t| window.backlogged[t]).collect();
            if members.len() < 2 {
                run_set.clear();
                return None;
            }
            let within = spread(members.iter().map(|&t| window.service[t] / weights[t]));
            if run_set != window.backlogged {
                run_set = window.backlogged.clone();
                run_service.iter_mut().for_each(|s| *s = 0.0);
            }
            for &t in &members {
                run_service[t] += window.service[t] / weights[t];
            }
            Some(ServiceDifference {
                window: within,
                accumulated: spread(members.iter().map(|&t| run_service[t])),
            })
        })
        .collect()
}

fn window_fairness(windows: &[ServiceWindow], weights: &[f64], total_service: &[f64]) -> Fairness {
    let (mut jain_sum, mut jain_windows) = (0.0, 0_u32);
    for window in windows {
        let members: Vec<usize> = (0..weights.len()).filter(|&t| window.backlogged[t]).collect();
        if members.len() < 2 {
            continue;
        }
        let normalized: Vec<f64> = members.iter().map(|&t| window.service[t] / weights[t]).collect();
        jain_sum += jain_index(&normalized);
        jain_windows += 1;
    }
    let (mut max_window_difference, mut max_cumulative_difference) = (0.0_f64, 0.0_f64);
    for difference in service_differences(windows, weights).into_iter().flatten() {
        max_window_difference = max_window_difference.max(difference.window);
        max_cumulative_difference = max_cumulative_difference.max(difference.accumulated);
    }
    let jain = if jain_windows > 0 {
        jain_sum / f64::from(jain_windows)
    } else {
        let normalized: Vec<f64> = total_service.iter().zip(weights).map(|(s, w)| s / w).collect();
        jain_index(&normalized)
    };
    Fairness { jain, max_window_difference, max_cumulative_difference }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(service: [f64; 2], backlogged: [bool; 2]) -> ServiceWindow {
        ServiceWindow { service: service.to_vec(), backlogged: backlogged.to_vec() }
    }

    /// Weights 1 and 2. Windows 0-1 both backlogged: per-weight service (10, 5) then
    /// (10, 10): window spreads 5 and 0, accumulated (20, 15): spread 5. Window 2 breaks
    /// the run (one tenant idle). Windows 3-4: (4, 1) then (4, 1): spreads 3, accumulated 6.
    /// Jain over the four qualifying windows: (15^2 / (2 x 125) + 1 + 25 / 34 + 25 / 34) / 4.
    #[test]
    fn service_differences_and_jain_by_hand() {
        let windows = [
            window([10.0, 10.0], [true, true]),
            window([10.0, 20.0], [true, true]),
            window([50.0, 0.0], [true, false]),
            window([4.0, 2.0], [true, true]),
            window([4.0, 2.0], [true, true]),
        ];
        let fairness = window_fairness(&windows, &[1.0, 2.0], &[78.0, 34.0]);
        assert_eq!(fairness.max_window_difference, 5.0);
        assert_eq!(fairness.max_cumulative_difference, 6.0);
        let expected = (225.0 / 250.0 + 1.0 + 25.0 / 34.0 + 25.0 / 34.0) / 4.0;
        assert!((fairness.jain - expected).abs() < 1e-12, "{}", fairness.jain);
        let series = service_differences(&windows, &[1.0, 2.0]);
        let difference = |window, accumulated| Some(ServiceDifference { window, accumulated });
        assert_eq!(
            series,
            [difference(5.0, 5.0), difference(0.0, 5.0), None, difference(3.0, 3.0), difference(3.0, 6.0)]
        );
    }
}
