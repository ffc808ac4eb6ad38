//! One definition of each metric (DESIGN.md's table), computed from a run's records.

use std::collections::BTreeMap;

use cotenant_core::{EndReason, MICROS_PER_SECOND};

use crate::driver::{EarlyStop, JobRecord, Outcome, SimResult};

/// Mean and nearest-rank percentiles of a set of values, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Distribution {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    /// From values in microseconds.
    ///
    /// The nearest-rank values are found by selection (`select_nth_unstable`) instead of
    /// a full sort: the value at a rank is the same either way, and the mean sums integers.
    pub fn from_micros(mut values: Vec<u64>) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        let secs = |us: u64| us as f64 / MICROS_PER_SECOND as f64;
        let total: u128 = values.iter().map(|&v| u128::from(v)).sum();
        let len = values.len();
        let rank = |p: f64| ((p * len as f64).ceil() as usize).clamp(1, len) - 1;
        let (r50, r90, r99) = (rank(0.50), rank(0.90), rank(0.99));
        // Each selection leaves the smaller values before its rank: the next (lower)
        // rank is selected among those alone.
        let (_, &mut p99, above) = values.select_nth_unstable(r99);
        let max = above.iter().copied().max().unwrap_or(p99);
        let p90 = *values[..=r99].select_nth_unstable(r90).1;
        let p50 = *values[..=r90].select_nth_unstable(r50).1;
        Distribution {
            count: len,
            mean: total as f64 / len as f64 / MICROS_PER_SECOND as f64,
            p50: secs(p50),
            p90: secs(p90),
            p99: secs(p99),
            max: secs(max),
        }
    }

    /// [`Distribution::from_micros`] by a full sort, as it was computed before:
    /// the tests compare the two.
    #[cfg(test)]
    fn from_micros_sorted(mut values: Vec<u64>) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_unstable();
        let secs = |us: u64| us as f64 / MICROS_PER_SECOND as f64;
        let total: u128 = values.iter().map(|&v| u128::from(v)).sum();
        let rank = |p: f64| values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Distribution {
            count: values.len(),
            mean: total as f64 / values.len() as f64 / MICROS_PER_SECOND as f64,
            p50: secs(rank(0.50)),
            p90: secs(rank(0.90)),
            p99: secs(rank(0.99)),
            max: secs(*values.last().expect("not empty")),
        }
    }
}

/// Per-tenant results.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSummary {
    pub name: String,
    pub weight: f64,
    pub gpu_quota: Option<u32>,
    pub jobs: usize,
    pub completed: usize,
    pub jct: Distribution,
    pub queueing: Distribution,
    pub gpu_hours: f64,
    /// Fraction of all allocated GPU-time this tenant received.
    pub gpu_share: f64,
    pub preemptions: u64,
    pub lost_gpu_hours: f64,
}

/// The run's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub policy: String,
    pub cluster_gpus: u32,
    pub jobs: usize,
    pub completed: usize,
    /// Jobs that left without finishing, by reason.
    pub ended: BTreeMap<String, usize>,
    pub unfinished: usize,
    /// Jobs still waiting or running when the run stopped, by reason (with the
    /// last wait verdict).
    pub unfinished_reasons: BTreeMap<String, usize>,
    /// Whether the run can be trusted, and if not, why.
    pub health: Health,
    pub jct: Distribution,
    pub queueing: Distribution,
    pub makespan_secs: f64,
    pub gpu_utilization: f64,
    pub goodput_utilization: f64,
    /// GPU-time left free while jobs waited, as a fraction of capacity over the
    /// makespan: fragmentation and blocking (DESIGN.md's fragmentation metric).
    pub idle_while_waiting: f64,
    pub preemptions: u64,
    pub lost_gpu_hours: f64,
    /// Size changes of running elastic jobs, and the GPU-time they cost.
    pub resizes: u64,
    pub scaling_overhead_gpu_hours: f64,
    /// Mean over share windows (with two or more backlogged tenants) of Jain's
    /// index of weighted GPU-time among backlogged tenants.
    pub jain_backlogged: Option<f64>,
    pub windows_measured: usize,
    pub tenants: Vec<TenantSummary>,
    pub events: u64,
    pub scheduling_passes: u64,
}

const GPU_US_PER_HOUR: f64 = 3600.0 * MICROS_PER_SECOND as f64;

/// What a run says about its own trustworthiness.
///
/// `warnings` make a run unhealthy (`--strict` exits non-zero on them): the run
/// stopped at a limit (step limit: a livelock; time limit), jobs were left
/// unfinished, or a metric fell outside its range (a bug, never expected).
/// `notes` are stated facts a reader must see beside the numbers but that do not
/// make a result wrong: jobs a policy or limit ended by design, widened windows,
/// a horizon.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

impl Health {
    pub fn healthy(&self) -> bool {
        self.warnings.is_empty()
    }
}

/// Summarizes a run.
pub fn summarize(result: &SimResult) -> Summary {
    let jobs = &result.jobs;
    let completed: Vec<_> = jobs.iter().filter(|j| j.outcome == Outcome::Completed).collect();
    let mut ended = BTreeMap::new();
    for job in jobs {
        if let Outcome::Ended(reason) = job.outcome {
            // Early stops name each job's best checkpoint: one note for all of them.
            let key = match reason {
                EndReason::EvalDeclined { .. } => {
                    "evalstop: declining evaluations, best checkpoint kept (per job: --jobs-csv)".to_string()
                }
                _ => reason.to_string(),
            };
            *ended.entry(key).or_insert(0) += 1;
        }
    }
    let mut unfinished_reasons: BTreeMap<String, usize> = BTreeMap::new();
    for job in jobs {
        if let Outcome::Unfinished(why) = &job.outcome {
            *unfinished_reasons.entry(why.clone()).or_insert(0) += 1;
        }
    }
    let unfinished = unfinished_reasons.values().sum();
    let first_arrival = jobs.iter().map(|j| j.arrival).min();
    let last_end = completed.iter().filter_map(|j| j.end).max();
    let makespan_secs = match (first_arrival, last_end) {
        (Some(a), Some(e)) => (e - a).as_secs_f64(),
        _ => 0.0,
    };
    let held: u128 = jobs.iter().map(|j| u128::from(j.held_gpu_us)).sum();
    let lost: u128 = jobs.iter().map(|j| u128::from(j.lost_gpu_us)).sum();
    // Capacity over the makespan (first arrival to last completion).
    let available = result.usage.measured_capacity_gpu_us.max(1) as f64;
    let (jain, windows_measured) = jain_over_windows(result);
    let mut summary = Summary {
        policy: result.policy.clone(),
        cluster_gpus: result.cluster_gpus,
        jobs: jobs.len(),
        completed: completed.len(),
        ended,
        unfinished,
        unfinished_reasons,
        health: Health::default(),
        jct: Distribution::from_micros(completed.iter().filter_map(|j| j.jct()).map(|s| s.0).collect()),
        queueing: Distribution::from_micros(jobs.iter().filter_map(|j| j.queueing()).map(|s| s.0).collect()),
        makespan_secs,
        gpu_utilization: held as f64 / available,
        goodput_utilization: (held - lost) as f64 / available,
        idle_while_waiting: result.usage.idle_while_waiting_gpu_us as f64 / available,
        preemptions: jobs.iter().map(|j| u64::from(j.preemptions)).sum(),
        lost_gpu_hours: lost as f64 / GPU_US_PER_HOUR,
        resizes: jobs.iter().map(|j| u64::from(j.resizes)).sum(),
        scaling_overhead_gpu_hours: jobs.iter().map(|j| j.scaling_overhead_gpu_us as f64).sum::<f64>()
            / GPU_US_PER_HOUR,
        jain_backlogged: jain,
        windows_measured,
        tenants: tenant_summaries(result, held),
        events: result.events,
        scheduling_passes: result.engine.scheduling_passes,
    };
    summary.health = health(result, &summary);
    summary
}

/// The run's warnings and notes (see [`Health`]).
fn health(result: &SimResult, s: &Summary) -> Health {
    let mut health = Health::default();
    // Stopping at a horizon the caller set is a fact to state; any other early stop is a warning.
    let at_horizon = matches!(result.early_stop, Some(EarlyStop::Horizon { .. }));
    if let Some(stop) = result.early_stop {
        let list = if at_horizon { &mut health.notes } else { &mut health.warnings };
        list.push(stop.to_string());
    }
    if s.unfinished > 0 {
        let mut text = format!("{} of {} jobs did not finish:", s.unfinished, s.jobs);
        for (why, count) in &s.unfinished_reasons {
            text.push_str(&format!("\n  {count} {why}"));
        }
        if at_horizon {
            health.notes.push(text);
        } else {
            health.warnings.push(text);
        }
    }
    for (reason, count) in &s.ended {
        health.notes.push(format!("{count} of {} jobs ended without completing: {reason}", s.jobs));
    }
    if result.usage.window_widened() {
        health.notes.push(format!(
            "share windows widened to {} s to keep at most {} of them (core::limits::MAX_SHARE_WINDOWS)",
            result.usage.window().0 / MICROS_PER_SECOND,
            cotenant_core::limits::MAX_SHARE_WINDOWS
        ));
    }
    let fractions = [
        ("GPU utilization", s.gpu_utilization),
        ("goodput utilization", s.goodput_utilization),
        ("idle-wait", s.idle_while_waiting),
    ];
    for (name, value) in fractions {
        if !(0.0..=1.0 + 1e-9).contains(&value) {
            health
                .warnings
                .push(format!("{name} is {:.1}%, outside [0, 100%]: a bug, please report it", value * 100.0));
        }
    }
    if s.goodput_utilization > s.gpu_utilization + 1e-9 {
        health.warnings.push("goodput utilization exceeds utilization: a bug, please report it".into());
    }
    if let Some(jain) = s.jain_backlogged.filter(|j| !(0.0..=1.0 + 1e-9).contains(j)) {
        health.warnings.push(format!("Jain's index is {jain}, outside [0, 1]: a bug, please report it"));
    }
    let distributions = [("JCT", &s.jct), ("queueing", &s.queueing)];
    for (name, d) in distributions {
        let values = [d.mean, d.p50, d.p90, d.p99, d.max];
        if values.iter().any(|v| !v.is_finite() || *v < 0.0)
            || d.p50 > d.p90
            || d.p90 > d.p99
            || d.p99 > d.max
        {
            health
                .warnings
                .push(format!("{name} distribution is inconsistent ({d:?}): a bug, please report it"));
        }
    }
    health
}

fn tenant_summaries(result: &SimResult, total_held: u128) -> Vec<TenantSummary> {
    // One pass over the jobs, not one per tenant.
    let mut by_tenant: Vec<Vec<&JobRecord>> = vec![Vec::new(); result.tenants.len()];
    for job in &result.jobs {
        by_tenant[job.tenant.index()].push(job);
    }
    result
        .tenants
        .iter()
        .enumerate()
        .map(|(t, spec)| {
            let mine = &by_tenant[t];
            let held: u128 = mine.iter().map(|j| u128::from(j.held_gpu_us)).sum();
            let lost: u128 = mine.iter().map(|j| u128::from(j.lost_gpu_us)).sum();
            TenantSummary {
                name: spec.name.clone(),
                weight: spec.weight,
                gpu_quota: spec.gpu_quota,
                jobs: mine.len(),
                completed: mine.iter().filter(|j| j.outcome == Outcome::Completed).count(),
                jct: Distribution::from_micros(mine.iter().filter_map(|j| j.jct()).map(|s| s.0).collect()),
                queueing: Distribution::from_micros(
                    mine.iter().filter_map(|j| j.queueing()).map(|s| s.0).collect(),
                ),
                gpu_hours: held as f64 / GPU_US_PER_HOUR,
                gpu_share: if total_held == 0 { 0.0 } else { held as f64 / total_held as f64 },
                preemptions: mine.iter().map(|j| u64::from(j.preemptions)).sum(),
                lost_gpu_hours: lost as f64 / GPU_US_PER_HOUR,
            }
        })
        .collect()
}

/// Jain's index (sum x)^2 / (n sum x^2) of x = GPU-time / weight over the
/// tenants backlogged in a window, averaged over windows with at least two.
fn jain_over_windows(result: &SimResult) -> (Option<f64>, usize) {
    let mut total = 0.0;
    let mut windows = 0usize;
    for window in &result.usage.windows {
        let shares: Vec<f64> = window
            .backlogged
            .iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(t, _)| window.gpu_us[t] as f64 / result.tenants[t].weight.max(f64::MIN_POSITIVE))
            .collect();
        if shares.len() < 2 {
            continue;
        }
        total += jain(&shares);
        windows += 1;
    }
    ((windows > 0).then(|| total / windows as f64), windows)
}

/// Jain's fairness index of `values`: 1 when all equal, 1/n when one has everything.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (values.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d = Distribution::from_micros((1..=100).map(|s| s * 1_000_000).collect());
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(d.mean, 50.5);
        assert_eq!(Distribution::from_micros(vec![]).count, 0);
    }

    proptest::proptest! {
        /// Selection gives the nearest-rank values a full sort gives, for any values
        /// (repeats, one value, unsorted).
        #[test]
        fn selection_matches_the_sort(values in proptest::collection::vec(0u64..50, 0..300)) {
            proptest::prop_assert_eq!(
                Distribution::from_micros(values.clone()),
                Distribution::from_micros_sorted(values)
            );
        }
    }

    #[test]
    fn jain_bounds() {
        assert_eq!(jain(&[3.0, 3.0, 3.0]), 1.0);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}
