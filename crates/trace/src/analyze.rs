//! Characterizing a workload as trace studies do (Philly, Helios, Acme, SAKURAONE):
//! jobs and GPU-time by job size, the duration distribution, arrivals by hour of day
//! and day of week, a per-tenant breakdown, demanded GPUs over time, the final
//! status mix; and for request traces, prompt/output token distributions and the
//! request rate over time.
//!
//! Everything here describes the input; nothing decides anything. Definitions
//! (docs/analyze.md says the same for users):
//! - GPU-time of a job is `gpus * work` (GPU-seconds when `work` is seconds).
//! - Percentiles are nearest-rank: the p-th percentile of n sorted values is the
//!   value of rank `ceil(p * n)` (at least 1), as in `sim::metrics` and `serve::metrics`.
//! - Demanded GPUs at an instant: the GPUs of every job that would be running then
//!   if each job started at its arrival and ran for its duration (no queueing, no
//!   capacity limit). Each window reports the time average and the peak.
//!
//! Output is deterministic: the same input gives the same values in the same order.

use std::collections::BTreeMap;

use cotenant_core::limits::{MAX_SHARE_WINDOWS, MIN_SHARE_WINDOW};
use serde::Serialize;

use crate::requests::RequestTrace;
use crate::wallclock::format_wall_clock;
use crate::Workload;

const US_PER_SEC: f64 = 1e6;
const HOUR_US: u64 = 3_600_000_000;
const DAY_US: u64 = 24 * HOUR_US;

/// Weekday names, Monday first (ISO 8601 order).
pub const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Window lengths tried, shortest first, when none is given: the first that
/// covers the trace in at most [`TARGET_WINDOWS`] windows is used.
pub const WINDOW_CHOICES_US: [u64; 9] =
    [1_000_000, 10_000_000, 60_000_000, 300_000_000, 900_000_000, HOUR_US, 6 * HOUR_US, DAY_US, 7 * DAY_US];
/// How many windows an automatically chosen window length aims for, at most.
pub const TARGET_WINDOWS: u64 = 400;

/// Duration CDF thresholds in seconds: 1 min, 5 min, 10 min, 30 min, 1 h, 2 h,
/// 6 h, 12 h, 1 d, 2 d, 1 week, 2 weeks, 30 days.
pub const CDF_SECONDS: [f64; 13] = [
    60.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    43200.0,
    86400.0,
    172_800.0,
    604_800.0,
    1_209_600.0,
    2_592_000.0,
];
/// Duration CDF thresholds for traces that measure work in steps (Gavel).
pub const CDF_STEPS: [f64; 8] = [1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// What a job's `work` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkUnit {
    /// Run time in seconds at reference speed (every trace kind but Gavel).
    Seconds,
    /// Training steps (Gavel): the run time depends on the GPU type.
    Steps,
}

impl WorkUnit {
    /// `"s"` or `"steps"`, for column headings.
    pub fn suffix(self) -> &'static str {
        match self {
            WorkUnit::Seconds => "s",
            WorkUnit::Steps => "steps",
        }
    }
}

/// How to analyze a job workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobOptions {
    pub work_unit: WorkUnit,
    /// Window for demanded GPUs over time, in microseconds; `None` chooses one
    /// from [`WINDOW_CHOICES_US`].
    pub window_us: Option<u64>,
}

/// Analyzing failed: an empty input or an impossible window.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AnalyzeError {
    #[error("{source_name}: nothing to analyze (no jobs or requests)")]
    Empty { source_name: String },
    #[error(
        "window of {window_us} us is shorter than the minimum of {min_us} us (core::limits::MIN_SHARE_WINDOW)"
    )]
    WindowTooShort { window_us: u64, min_us: u64 },
    #[error(
        "a window of {window_s} s cuts a {span_s:.0} s trace into {windows} windows, more than the limit of \
         {limit} (core::limits::MAX_SHARE_WINDOWS): choose a longer window"
    )]
    TooManyWindows { window_s: f64, span_s: f64, windows: u64, limit: u64 },
    #[error("{given} statuses given for {jobs} jobs: one status per job is needed")]
    StatusCount { given: usize, jobs: usize },
}

/// Summary statistics of a set of values (nearest-rank percentiles).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub mean: f64,
    pub min: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    /// The statistics of `values` (any order); all zero when empty.
    pub fn of(values: &[f64]) -> Distribution {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Distribution::of_sorted(&sorted)
    }

    /// The statistics of values already sorted ascending.
    pub fn of_sorted(sorted: &[f64]) -> Distribution {
        if sorted.is_empty() {
            return Distribution::default();
        }
        let rank = |permille: u64| nearest_rank(sorted, permille);
        Distribution {
            count: sorted.len() as u64,
            mean: total(sorted.iter().copied()) / sorted.len() as f64,
            min: sorted[0],
            p10: rank(100),
            p25: rank(250),
            p50: rank(500),
            p75: rank(750),
            p90: rank(900),
            p95: rank(950),
            p99: rank(990),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// Nearest-rank quantile of sorted values, the quantile given in thousandths: the
/// value of rank `ceil(permille * n / 1000)`, at least 1. Integer arithmetic, so
/// `0.07 * 100` is rank 7, not 8 (as `f64` would round it). 0 when `sorted` is empty.
pub fn nearest_rank(sorted: &[f64], permille: u64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let n = sorted.len() as u64;
    let rank = (permille.min(1000) * n).div_ceil(1000).clamp(1, n);
    sorted[(rank - 1) as usize]
}

/// Jobs of one size class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeRow {
    /// `"1"`, `"2-4"`, `">8"`, ...
    pub label: String,
    pub min_gpus: u32,
    /// `None` for an open-ended class (`>8`).
    pub max_gpus: Option<u32>,
    pub jobs: u64,
    /// Fraction (0..1) of all jobs.
    pub job_share: f64,
    /// GPUs x work (GPU-seconds, or GPU-steps for step traces).
    pub gpu_time: f64,
    /// Fraction (0..1) of all GPU-time.
    pub gpu_time_share: f64,
    /// Median work (seconds or steps) of the class; 0 when empty.
    pub median_duration: f64,
}

/// One point of the duration CDF: the fraction of jobs whose work is at most `at`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CdfPoint {
    pub at: f64,
    pub jobs: u64,
    pub fraction: f64,
}

/// The duration (work) distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DurationAnalysis {
    pub stats: Distribution,
    /// The CDF at fixed thresholds ([`CDF_SECONDS`] or [`CDF_STEPS`]).
    pub cdf: Vec<CdfPoint>,
    /// The duration at each whole percent of jobs: `curve[i]` is the nearest-rank
    /// `i`% quantile (`curve[0]` the minimum, `curve[100]` the maximum): 101 points,
    /// the empirical CDF to plot.
    pub curve: Vec<f64>,
}

/// Jobs (and their GPU-time) arriving in one hour of the day or on one weekday.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArrivalBin {
    /// `"00"`..`"23"` or `"Mon"`..`"Sun"`.
    pub label: String,
    pub jobs: u64,
    pub job_share: f64,
    pub gpu_time: f64,
}

/// Arrivals by wall-clock hour of day and day of week.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WallClockArrivals {
    /// First and last arrival, `YYYY-MM-DD HH:MM:SS` in the trace's own zone.
    pub first_arrival: String,
    pub last_arrival: String,
    /// 24 bins, hour 00 first.
    pub by_hour: Vec<ArrivalBin>,
    /// 7 bins, Monday first.
    pub by_weekday: Vec<ArrivalBin>,
    /// How many times each weekday occurs between the first and last arrival's
    /// dates (inclusive): a weekday seen twice has twice the chance to collect jobs.
    pub weekday_occurrences: Vec<u64>,
}

/// One tenant's part of the workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantRow {
    pub name: String,
    pub jobs: u64,
    pub job_share: f64,
    pub gpu_time: f64,
    pub gpu_time_share: f64,
    /// Nearest-rank median GPUs per job.
    pub median_gpus: f64,
    /// Nearest-rank median work per job (seconds or steps).
    pub median_duration: f64,
}

/// Demanded GPUs in one window `[start_s, start_s + window_s)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemandSample {
    pub start_s: f64,
    /// Time-averaged demanded GPUs over the window.
    pub mean_gpus: f64,
    /// Most GPUs demanded at any instant of the window.
    pub peak_gpus: u64,
    /// Jobs arriving in the window.
    pub arrivals: u64,
}

/// Demanded GPUs over time (only for traces whose work is in seconds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemandAnalysis {
    pub window_s: f64,
    /// Windows from time 0 through the window holding the last arrival.
    pub samples: Vec<DemandSample>,
    /// Time average over all the windows.
    pub mean_gpus: f64,
    pub peak_gpus: u64,
}

/// Jobs and GPU-time that ended in one final status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusRow {
    pub status: String,
    pub jobs: u64,
    pub job_share: f64,
    pub gpu_time: f64,
    pub gpu_time_share: f64,
}

/// The characterization of a job workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobAnalysis {
    pub source: String,
    pub work_unit: WorkUnit,
    pub jobs: u64,
    /// Jobs asking for no GPU (CPU-only); they count in `jobs` and in the 0-GPU size class.
    pub cpu_only_jobs: u64,
    pub tenants: u64,
    /// Sum of GPUs x work over all jobs (GPU-seconds, or GPU-steps).
    pub gpu_time: f64,
    /// Seconds from the first to the last arrival.
    pub arrival_span_s: f64,
    /// GPU-time / arrival span: the average GPUs the workload asks for (the `sim`
    /// sizing rule's demand); `None` for step traces or a zero span.
    pub mean_demand_gpus: Option<f64>,
    /// GPUs per job.
    pub gpus: Distribution,
    /// Size classes 1, 2-4, 5-8, >8 (and 0 when CPU-only jobs exist), as the
    /// published characterizations bucket them.
    pub by_size: Vec<SizeRow>,
    /// Power-of-two size classes 1, 2, 3-4, 5-8, 9-16, ... up to the largest job.
    pub by_size_pow2: Vec<SizeRow>,
    pub duration: DurationAnalysis,
    /// `None` when the trace's times are relative (no wall clock).
    pub wall_clock: Option<WallClockArrivals>,
    /// Tenants by GPU-time, largest first (ties by name).
    pub by_tenant: Vec<TenantRow>,
    /// `None` for step traces.
    pub demand: Option<DemandAnalysis>,
    /// `None` when the trace records no final status ([`Workload::statuses`] empty).
    pub status: Option<Vec<StatusRow>>,
    /// Rows the reader skipped on purpose, with counts.
    pub skipped: Vec<(String, u64)>,
    /// What the reader changed or modelled.
    pub notes: Vec<String>,
}

/// Characterizes a job workload.
pub fn analyze_jobs(workload: &Workload, options: JobOptions) -> Result<JobAnalysis, AnalyzeError> {
    let jobs = &workload.jobs;
    if jobs.is_empty() {
        return Err(AnalyzeError::Empty { source_name: workload.source.clone() });
    }
    let gpu_time = total(jobs.iter().map(|j| f64::from(j.gpus) * j.work));
    let first_us = jobs.iter().map(|j| j.arrival.0).min().unwrap_or(0);
    let last_us = jobs.iter().map(|j| j.arrival.0).max().unwrap_or(0);
    let arrival_span_s = (last_us - first_us) as f64 / US_PER_SEC;
    let seconds = options.work_unit == WorkUnit::Seconds;
    let demand = if seconds { Some(demand_over_time(workload, options.window_us)?) } else { None };
    let gpus: Vec<f64> = jobs.iter().map(|j| f64::from(j.gpus)).collect();
    Ok(JobAnalysis {
        source: workload.source.clone(),
        work_unit: options.work_unit,
        jobs: jobs.len() as u64,
        cpu_only_jobs: jobs.iter().filter(|j| j.gpus == 0).count() as u64,
        tenants: workload.tenants.len() as u64,
        gpu_time,
        arrival_span_s,
        mean_demand_gpus: (seconds && arrival_span_s > 0.0).then(|| gpu_time / arrival_span_s),
        gpus: Distribution::of(&gpus),
        by_size: size_rows(workload, &coarse_classes(workload)),
        by_size_pow2: size_rows(workload, &pow2_classes(workload)),
        duration: duration_analysis(workload, options.work_unit),
        wall_clock: workload.wall_clock_origin_us.map(|origin| wall_clock_arrivals(workload, origin)),
        by_tenant: tenant_rows(workload),
        demand,
        status: (!workload.statuses.is_empty())
            .then(|| status_mix(workload, &workload.statuses))
            .transpose()?,
        skipped: workload.skipped.iter().map(|s| (s.reason.clone(), s.rows)).collect(),
        notes: workload.notes.clone(),
    })
}

/// The status mix of a workload whose reader kept each job's final status
/// (`statuses[i]` for job `i`): statuses sorted by job count, largest first (ties by name).
pub fn status_mix(workload: &Workload, statuses: &[String]) -> Result<Vec<StatusRow>, AnalyzeError> {
    if statuses.len() != workload.jobs.len() {
        return Err(AnalyzeError::StatusCount { given: statuses.len(), jobs: workload.jobs.len() });
    }
    let total_gpu_time = total(workload.jobs.iter().map(|j| f64::from(j.gpus) * j.work));
    // A BTreeMap, not a HashMap: iteration order must not depend on hashing.
    let mut by_status: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
    for (job, status) in workload.jobs.iter().zip(statuses) {
        let entry = by_status.entry(status.as_str()).or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 += f64::from(job.gpus) * job.work;
    }
    let jobs = workload.jobs.len() as f64;
    let mut rows: Vec<StatusRow> = by_status
        .into_iter()
        .map(|(status, (count, gpu_time))| StatusRow {
            status: status.to_string(),
            jobs: count,
            job_share: count as f64 / jobs,
            gpu_time,
            gpu_time_share: share(gpu_time, total_gpu_time),
        })
        .collect();
    rows.sort_by(|a, b| b.jobs.cmp(&a.jobs).then_with(|| a.status.cmp(&b.status)));
    Ok(rows)
}

/// The sum of `values`, starting from +0.0 (`Iterator::sum` starts from -0.0, so an
/// empty class would print as `-0`).
fn total(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |sum, v| sum + v)
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// `(label, min, max)` size classes.
type SizeClass = (String, u32, Option<u32>);

fn coarse_classes(workload: &Workload) -> Vec<SizeClass> {
    let mut classes = Vec::new();
    if workload.jobs.iter().any(|j| j.gpus == 0) {
        classes.push(("0".to_string(), 0, Some(0)));
    }
    classes.extend([
        ("1".to_string(), 1, Some(1)),
        ("2-4".to_string(), 2, Some(4)),
        ("5-8".to_string(), 5, Some(8)),
        (">8".to_string(), 9, None),
    ]);
    classes
}

/// 1, 2, 3-4, 5-8, ... (2^(k-1)+1 .. 2^k) through the class of the largest job.
fn pow2_classes(workload: &Workload) -> Vec<SizeClass> {
    let mut classes = Vec::new();
    if workload.jobs.iter().any(|j| j.gpus == 0) {
        classes.push(("0".to_string(), 0, Some(0)));
    }
    let widest = workload.jobs.iter().map(|j| j.gpus).max().unwrap_or(1).max(1);
    classes.push(("1".to_string(), 1, Some(1)));
    let mut upper: u64 = 2;
    loop {
        let lower = upper / 2 + 1;
        let label = if lower == upper { upper.to_string() } else { format!("{lower}-{upper}") };
        // Bounded by MAX_GPUS_PER_JOB (2^20) on the reading side; u64 never overflows here.
        classes.push((label, lower as u32, Some(upper.min(u64::from(u32::MAX)) as u32)));
        if upper >= u64::from(widest) {
            break;
        }
        upper *= 2;
    }
    classes
}

fn size_rows(workload: &Workload, classes: &[SizeClass]) -> Vec<SizeRow> {
    let total_jobs = workload.jobs.len() as f64;
    let total_gpu_time = total(workload.jobs.iter().map(|j| f64::from(j.gpus) * j.work));
    classes
        .iter()
        .map(|(label, min, max)| {
            let inside = |g: u32| g >= *min && max.is_none_or(|m| g <= m);
            let mut durations: Vec<f64> =
                workload.jobs.iter().filter(|j| inside(j.gpus)).map(|j| j.work).collect();
            durations.sort_by(f64::total_cmp);
            let gpu_time =
                total(workload.jobs.iter().filter(|j| inside(j.gpus)).map(|j| f64::from(j.gpus) * j.work));
            SizeRow {
                label: label.clone(),
                min_gpus: *min,
                max_gpus: *max,
                jobs: durations.len() as u64,
                job_share: durations.len() as f64 / total_jobs,
                gpu_time,
                gpu_time_share: share(gpu_time, total_gpu_time),
                median_duration: nearest_rank(&durations, 500),
            }
        })
        .collect()
}

fn duration_analysis(workload: &Workload, unit: WorkUnit) -> DurationAnalysis {
    let mut sorted: Vec<f64> = workload.jobs.iter().map(|j| j.work).collect();
    sorted.sort_by(f64::total_cmp);
    let thresholds: &[f64] = match unit {
        WorkUnit::Seconds => &CDF_SECONDS,
        WorkUnit::Steps => &CDF_STEPS,
    };
    let n = sorted.len() as f64;
    let cdf = thresholds
        .iter()
        .map(|&at| {
            let jobs = sorted.partition_point(|&d| d <= at) as u64;
            CdfPoint { at, jobs, fraction: jobs as f64 / n }
        })
        .collect();
    let curve = (0..=100u64).map(|percent| nearest_rank(&sorted, percent * 10)).collect();
    DurationAnalysis { stats: Distribution::of_sorted(&sorted), cdf, curve }
}

/// Monday = 0 for a day number counted from 1970-01-01 (a Thursday).
fn weekday_of_day(day: i64) -> usize {
    (day + 3).rem_euclid(7) as usize
}

fn wall_clock_arrivals(workload: &Workload, origin_us: i64) -> WallClockArrivals {
    let mut hours = vec![(0u64, 0.0f64); 24];
    let mut days = vec![(0u64, 0.0f64); 7];
    let mut first = i64::MAX;
    let mut last = i64::MIN;
    for job in &workload.jobs {
        // Arrivals are at most MAX_ARRIVAL_SPAN after the origin: no overflow.
        let at = origin_us.saturating_add(i64::try_from(job.arrival.0).unwrap_or(i64::MAX));
        first = first.min(at);
        last = last.max(at);
        let day = at.div_euclid(DAY_US as i64);
        let hour = (at.rem_euclid(DAY_US as i64) / HOUR_US as i64) as usize;
        let gpu_time = f64::from(job.gpus) * job.work;
        hours[hour].0 += 1;
        hours[hour].1 += gpu_time;
        days[weekday_of_day(day)].0 += 1;
        days[weekday_of_day(day)].1 += gpu_time;
    }
    let total = workload.jobs.len() as f64;
    let bins = |counts: Vec<(u64, f64)>, label: &dyn Fn(usize) -> String| -> Vec<ArrivalBin> {
        counts
            .into_iter()
            .enumerate()
            .map(|(i, (jobs, gpu_time))| ArrivalBin {
                label: label(i),
                jobs,
                job_share: jobs as f64 / total,
                gpu_time,
            })
            .collect()
    };
    let (first_day, last_day) = (first.div_euclid(DAY_US as i64), last.div_euclid(DAY_US as i64));
    let mut occurrences = vec![0u64; 7];
    // At most MAX_ARRIVAL_SPAN (3,653 days): a short loop.
    for day in first_day..=last_day {
        occurrences[weekday_of_day(day)] += 1;
    }
    WallClockArrivals {
        first_arrival: format_wall_clock(first),
        last_arrival: format_wall_clock(last),
        by_hour: bins(hours, &|i| format!("{i:02}")),
        by_weekday: bins(days, &|i| WEEKDAYS[i].to_string()),
        weekday_occurrences: occurrences,
    }
}

fn tenant_rows(workload: &Workload) -> Vec<TenantRow> {
    let total_jobs = workload.jobs.len() as f64;
    let total_gpu_time = total(workload.jobs.iter().map(|j| f64::from(j.gpus) * j.work));
    let mut per_tenant: Vec<(Vec<f64>, Vec<f64>, f64)> =
        vec![(Vec::new(), Vec::new(), 0.0); workload.tenants.len()];
    for job in &workload.jobs {
        if let Some(entry) = per_tenant.get_mut(job.tenant.0 as usize) {
            entry.0.push(f64::from(job.gpus));
            entry.1.push(job.work);
            entry.2 += f64::from(job.gpus) * job.work;
        }
    }
    let mut rows: Vec<TenantRow> = workload
        .tenants
        .iter()
        .zip(per_tenant)
        .filter(|(_, (gpus, _, _))| !gpus.is_empty())
        .map(|(tenant, (mut gpus, mut durations, gpu_time))| {
            gpus.sort_by(f64::total_cmp);
            durations.sort_by(f64::total_cmp);
            TenantRow {
                name: tenant.name.clone(),
                jobs: gpus.len() as u64,
                job_share: gpus.len() as f64 / total_jobs,
                gpu_time,
                gpu_time_share: share(gpu_time, total_gpu_time),
                median_gpus: nearest_rank(&gpus, 500),
                median_duration: nearest_rank(&durations, 500),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.gpu_time.total_cmp(&a.gpu_time).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// The window to use: the given one (checked), or the shortest of
/// [`WINDOW_CHOICES_US`] that covers `span_us` in at most [`TARGET_WINDOWS`].
/// Returns `(window_us, windows)`.
pub fn choose_window(span_us: u64, given: Option<u64>) -> Result<(u64, u64), AnalyzeError> {
    let windows_for = |w: u64| span_us / w + 1;
    let window_us = match given {
        Some(w) if w < MIN_SHARE_WINDOW.0 => {
            return Err(AnalyzeError::WindowTooShort { window_us: w, min_us: MIN_SHARE_WINDOW.0 })
        }
        Some(w) => w,
        None => WINDOW_CHOICES_US
            .into_iter()
            .find(|&w| windows_for(w) <= TARGET_WINDOWS)
            .unwrap_or_else(|| span_us.div_ceil(TARGET_WINDOWS - 1).max(MIN_SHARE_WINDOW.0)),
    };
    let windows = windows_for(window_us);
    if windows > MAX_SHARE_WINDOWS {
        return Err(AnalyzeError::TooManyWindows {
            window_s: window_us as f64 / US_PER_SEC,
            span_s: span_us as f64 / US_PER_SEC,
            windows,
            limit: MAX_SHARE_WINDOWS,
        });
    }
    Ok((window_us, windows))
}

fn demand_over_time(workload: &Workload, window: Option<u64>) -> Result<DemandAnalysis, AnalyzeError> {
    let last_us = workload.jobs.iter().map(|j| j.arrival.0).max().unwrap_or(0);
    let (window_us, windows) = choose_window(last_us, window)?;
    // (time, GPU change); ends are rounded up to the microsecond, as the simulator does.
    let mut events: Vec<(u64, i64)> = Vec::with_capacity(workload.jobs.len() * 2);
    let mut arrivals = vec![0u64; windows as usize];
    for job in &workload.jobs {
        arrivals[(job.arrival.0 / window_us) as usize] += 1;
        if job.gpus == 0 {
            continue;
        }
        let end = job.arrival.0.saturating_add(cotenant_core::Span::from_secs_f64_ceil(job.work).0);
        events.push((job.arrival.0, i64::from(job.gpus)));
        events.push((end, -i64::from(job.gpus)));
    }
    events.sort_unstable();
    let mut samples = Vec::with_capacity(windows as usize);
    let (mut level, mut next, mut total_area, mut overall_peak) = (0i64, 0usize, 0u128, 0u64);
    for (k, &arrived) in arrivals.iter().enumerate() {
        let start = k as u64 * window_us;
        let end = start + window_us;
        while next < events.len() && events[next].0 <= start {
            level += events[next].1;
            next += 1;
        }
        let (mut area, mut peak, mut at) = (0u128, level, start);
        while next < events.len() && events[next].0 < end {
            let time = events[next].0;
            area += level as u128 * u128::from(time - at);
            at = time;
            // Apply every change at this instant before reading the level: a job that
            // ends when another starts never counts twice.
            while next < events.len() && events[next].0 == time {
                level += events[next].1;
                next += 1;
            }
            peak = peak.max(level);
        }
        area += level as u128 * u128::from(end - at);
        total_area += area;
        overall_peak = overall_peak.max(peak as u64);
        samples.push(DemandSample {
            start_s: start as f64 / US_PER_SEC,
            mean_gpus: area as f64 / window_us as f64,
            peak_gpus: peak as u64,
            arrivals: arrived,
        });
    }
    Ok(DemandAnalysis {
        window_s: window_us as f64 / US_PER_SEC,
        mean_gpus: total_area as f64 / (windows * window_us) as f64,
        peak_gpus: overall_peak,
        samples,
    })
}

/// Requests (and tokens) arriving in one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateSample {
    pub start_s: f64,
    pub requests: u64,
    pub requests_per_s: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
}

/// Requests whose token count lies in `[min, max]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenBucket {
    pub label: String,
    pub min: u64,
    pub max: u64,
    pub requests: u64,
    pub share: f64,
}

/// A token-count distribution with a power-of-two histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenAnalysis {
    pub total: u64,
    pub stats: Distribution,
    /// Buckets 1-64, 65-128, 129-256, ... through the bucket of the largest count
    /// (0 first when a count of 0 occurs).
    pub histogram: Vec<TokenBucket>,
}

/// The characterization of a request trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestAnalysis {
    pub source: String,
    pub requests: u64,
    /// Seconds from the first to the last arrival.
    pub span_s: f64,
    /// Requests / span (0 for a zero span).
    pub mean_rate_per_s: f64,
    pub prompt_tokens: TokenAnalysis,
    pub output_tokens: TokenAnalysis,
    pub window_s: f64,
    /// Windows from time 0 through the window holding the last arrival.
    pub rate: Vec<RateSample>,
    pub skipped: Vec<(String, u64)>,
}

/// Characterizes a request trace; `window_us` as for [`JobOptions::window_us`].
pub fn analyze_requests(
    trace: &RequestTrace,
    window_us: Option<u64>,
) -> Result<RequestAnalysis, AnalyzeError> {
    let records = &trace.records;
    if records.is_empty() {
        return Err(AnalyzeError::Empty { source_name: trace.source.clone() });
    }
    let first = records.iter().map(|r| r.arrival_us).min().unwrap_or(0);
    let last = records.iter().map(|r| r.arrival_us).max().unwrap_or(0);
    let (window_us, windows) = choose_window(last, window_us)?;
    let mut rate: Vec<RateSample> = (0..windows)
        .map(|k| RateSample {
            start_s: (k * window_us) as f64 / US_PER_SEC,
            requests: 0,
            requests_per_s: 0.0,
            prompt_tokens: 0,
            output_tokens: 0,
        })
        .collect();
    for record in records {
        let sample = &mut rate[(record.arrival_us / window_us) as usize];
        sample.requests += 1;
        sample.prompt_tokens += u64::from(record.prompt_tokens);
        sample.output_tokens += u64::from(record.output_tokens);
    }
    for sample in &mut rate {
        sample.requests_per_s = sample.requests as f64 / (window_us as f64 / US_PER_SEC);
    }
    let span_s = (last - first) as f64 / US_PER_SEC;
    let prompt: Vec<u64> = records.iter().map(|r| u64::from(r.prompt_tokens)).collect();
    let output: Vec<u64> = records.iter().map(|r| u64::from(r.output_tokens)).collect();
    Ok(RequestAnalysis {
        source: trace.source.clone(),
        requests: records.len() as u64,
        span_s,
        mean_rate_per_s: if span_s > 0.0 { records.len() as f64 / span_s } else { 0.0 },
        prompt_tokens: token_analysis(&prompt),
        output_tokens: token_analysis(&output),
        window_s: window_us as f64 / US_PER_SEC,
        rate,
        skipped: trace.skipped.iter().map(|s| (s.reason.clone(), s.rows)).collect(),
    })
}

fn token_analysis(counts: &[u64]) -> TokenAnalysis {
    let values: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
    let largest = counts.iter().copied().max().unwrap_or(0);
    let mut bounds: Vec<(u64, u64)> = Vec::new();
    if counts.contains(&0) {
        bounds.push((0, 0));
    }
    bounds.push((1, 64));
    let mut upper = 64u64;
    while upper < largest {
        bounds.push((upper + 1, upper * 2));
        upper *= 2;
    }
    let n = counts.len() as f64;
    let histogram = bounds
        .into_iter()
        .map(|(min, max)| {
            let requests = counts.iter().filter(|&&c| c >= min && c <= max).count() as u64;
            let label = if min == max { min.to_string() } else { format!("{min}-{max}") };
            TokenBucket { label, min, max, requests, share: requests as f64 / n }
        })
        .collect();
    TokenAnalysis { total: counts.iter().sum(), stats: Distribution::of(&values), histogram }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{JobSpec, TenantSpec, Time};

    /// Five jobs, two tenants, origin Monday 2017-11-06 00:00:00 (hand-checked below).
    ///
    /// | job | tenant | arrival | GPUs | duration | GPU-time |
    /// | 0   | a      | 0 s     | 1    | 100 s    | 100      |
    /// | 1   | a      | 1800 s  | 1    | 300 s    | 300      |
    /// | 2   | b      | 3600 s  | 4    | 1000 s   | 4000     |
    /// | 3   | b      | 7200 s  | 8    | 50 s     | 400      |
    /// | 4   | a      | 90000 s | 16   | 7200 s   | 115200   |
    fn five_jobs() -> Workload {
        let rows = [
            (0, 0, 1, 100.0),
            (0, 1800, 1, 300.0),
            (1, 3600, 4, 1000.0),
            (1, 7200, 8, 50.0),
            (0, 90000, 16, 7200.0),
        ];
        let jobs = rows
            .iter()
            .enumerate()
            .map(|(i, &(tenant, at, gpus, work))| {
                JobSpec::new(i as u32, tenant, Time(at * 1_000_000), gpus, work)
            })
            .collect();
        Workload {
            source: "five".into(),
            jobs,
            tenants: vec![TenantSpec::new("a"), TenantSpec::new("b")],
            lines: vec![2, 3, 4, 5, 6],
            wall_clock_origin_us: Some(1_509_926_400_000_000),
            ..Workload::default()
        }
    }

    fn seconds(window_us: Option<u64>) -> JobOptions {
        JobOptions { work_unit: WorkUnit::Seconds, window_us }
    }

    #[test]
    fn sizes_and_gpu_time_by_hand() {
        let a = analyze_jobs(&five_jobs(), seconds(None)).expect("analyzes");
        assert_eq!(a.jobs, 5);
        assert_eq!(a.gpu_time, 120_000.0);
        assert_eq!(a.arrival_span_s, 90_000.0);
        assert_eq!(a.mean_demand_gpus, Some(120_000.0 / 90_000.0));
        let coarse: Vec<(&str, u64, f64, f64)> =
            a.by_size.iter().map(|r| (r.label.as_str(), r.jobs, r.gpu_time, r.median_duration)).collect();
        assert_eq!(
            coarse,
            [
                ("1", 2, 400.0, 100.0),
                ("2-4", 1, 4000.0, 1000.0),
                ("5-8", 1, 400.0, 50.0),
                (">8", 1, 115_200.0, 7200.0)
            ]
        );
        assert_eq!(a.by_size[0].job_share, 0.4);
        assert_eq!(a.by_size[3].gpu_time_share, 0.96);
        let pow2: Vec<(&str, u64)> = a.by_size_pow2.iter().map(|r| (r.label.as_str(), r.jobs)).collect();
        assert_eq!(pow2, [("1", 2), ("2", 0), ("3-4", 1), ("5-8", 1), ("9-16", 1)]);
        // An empty class has +0 GPU-time (not -0, which would print as `-0`).
        assert!(a.by_size_pow2[1].gpu_time.is_sign_positive());
        // GPUs 1,1,4,8,16: mean 6, nearest-rank median (rank 3) 4.
        assert_eq!((a.gpus.mean, a.gpus.p50, a.gpus.max), (6.0, 4.0, 16.0));
    }

    #[test]
    fn durations_by_hand() {
        let a = analyze_jobs(&five_jobs(), seconds(None)).expect("analyzes");
        let d = &a.duration.stats;
        // Sorted: 50, 100, 300, 1000, 7200. Ranks: p10 -> 1, p25 -> 2, p50 -> 3, p75 -> 4, p90.. -> 5.
        assert_eq!(
            (d.min, d.p10, d.p25, d.p50, d.p75, d.p90, d.p99, d.max),
            (50.0, 50.0, 100.0, 300.0, 1000.0, 7200.0, 7200.0, 7200.0)
        );
        assert_eq!(d.mean, 1730.0);
        // <= 60 s: 1 job; <= 300 s: 3; <= 600 s: 3; <= 1800 s: 4; <= 2 h: 5.
        let cdf: Vec<(f64, u64)> = a.duration.cdf.iter().map(|p| (p.at, p.jobs)).take(6).collect();
        assert_eq!(cdf, [(60.0, 1), (300.0, 3), (600.0, 3), (1800.0, 4), (3600.0, 4), (7200.0, 5)]);
        assert_eq!(a.duration.curve.len(), 101);
        assert_eq!(
            (a.duration.curve[0], a.duration.curve[20], a.duration.curve[21], a.duration.curve[100]),
            (50.0, 50.0, 100.0, 7200.0)
        );
    }

    #[test]
    fn arrivals_by_hour_and_weekday_by_hand() {
        let a = analyze_jobs(&five_jobs(), seconds(None)).expect("analyzes");
        let w = a.wall_clock.expect("Philly-like origin");
        assert_eq!(w.first_arrival, "2017-11-06 00:00:00");
        assert_eq!(w.last_arrival, "2017-11-07 01:00:00");
        let hours: Vec<u64> = w.by_hour.iter().map(|b| b.jobs).collect();
        // 00:00 and 00:30 (Mon), 01:00 (Mon), 02:00 (Mon), 01:00 (Tue).
        assert_eq!(&hours[..4], [2, 2, 1, 0]);
        assert_eq!(hours.iter().sum::<u64>(), 5);
        let days: Vec<(&str, u64)> = w.by_weekday.iter().map(|b| (b.label.as_str(), b.jobs)).collect();
        assert_eq!(&days[..3], [("Mon", 4), ("Tue", 1), ("Wed", 0)]);
        assert_eq!(w.weekday_occurrences, [1, 1, 0, 0, 0, 0, 0]);
        let relative = Workload { wall_clock_origin_us: None, ..five_jobs() };
        assert!(analyze_jobs(&relative, seconds(None)).expect("analyzes").wall_clock.is_none());
    }

    #[test]
    fn tenants_by_hand() {
        let a = analyze_jobs(&five_jobs(), seconds(None)).expect("analyzes");
        let rows: Vec<(&str, u64, f64, f64, f64)> = a
            .by_tenant
            .iter()
            .map(|t| (t.name.as_str(), t.jobs, t.gpu_time, t.median_gpus, t.median_duration))
            .collect();
        // a: GPUs 1,1,16 (median 1), durations 100,300,7200 (median 300); b: GPUs 4,8 -> rank 1 = 4.
        assert_eq!(rows, [("a", 3, 115_600.0, 1.0, 300.0), ("b", 2, 4400.0, 4.0, 50.0)]);
        assert_eq!(a.by_tenant[1].gpu_time_share, 4400.0 / 120_000.0);
    }

    #[test]
    fn demand_by_hand() {
        let a = analyze_jobs(&five_jobs(), seconds(Some(HOUR_US))).expect("analyzes");
        let d = a.demand.expect("seconds trace");
        // Last arrival at 25 h: windows 0..=25.
        assert_eq!(d.samples.len(), 26);
        // Hour 0: job 0 (1 GPU, 100 s), job 1 (1 GPU, 1800..2100 s): 400 GPU-s / 3600 s.
        assert_eq!(d.samples[0].mean_gpus, 400.0 / 3600.0);
        assert_eq!((d.samples[0].peak_gpus, d.samples[0].arrivals), (1, 2));
        // Hour 1: job 2 (4 GPUs, 1000 s); hour 2: job 3 (8 GPUs, 50 s).
        assert_eq!((d.samples[1].mean_gpus, d.samples[1].peak_gpus), (4000.0 / 3600.0, 4));
        assert_eq!((d.samples[2].mean_gpus, d.samples[2].peak_gpus), (400.0 / 3600.0, 8));
        assert_eq!((d.samples[3].mean_gpus, d.samples[3].peak_gpus, d.samples[3].arrivals), (0.0, 0, 0));
        // Hour 25: job 4 (16 GPUs from 90,000 s) runs the whole window.
        assert_eq!((d.samples[25].mean_gpus, d.samples[25].peak_gpus), (16.0, 16));
        assert_eq!(d.peak_gpus, 16);
        // Area inside the windows: 400 + 4000 + 400 + 16 x 3600 = 62,400 GPU-s over 26 h.
        assert_eq!(d.mean_gpus, 62_400.0 / (26.0 * 3600.0));
    }

    #[test]
    fn a_job_ending_as_another_starts_is_not_counted_twice() {
        let mut w = five_jobs();
        w.jobs = vec![JobSpec::new(0, 0, Time(0), 2, 10.0), JobSpec::new(1, 0, Time(10_000_000), 3, 10.0)];
        let d = analyze_jobs(&w, seconds(Some(60_000_000))).expect("analyzes").demand.expect("seconds");
        assert_eq!(d.samples[0].peak_gpus, 3);
        assert_eq!(d.samples[0].mean_gpus, 50.0 / 60.0);
    }

    #[test]
    fn steps_traces_have_no_demand_and_step_thresholds() {
        let a = analyze_jobs(&five_jobs(), JobOptions { work_unit: WorkUnit::Steps, window_us: None })
            .expect("ok");
        assert!(a.demand.is_none());
        assert!(a.mean_demand_gpus.is_none());
        assert_eq!(a.duration.cdf[0].at, 100.0);
    }

    #[test]
    fn window_choice_and_limits() {
        // 25 h at 1 min = 1,501 windows > 400; at 5 min = 301.
        assert_eq!(choose_window(90_000_000_000, None), Ok((300_000_000, 301)));
        assert_eq!(choose_window(0, None), Ok((1_000_000, 1)));
        assert!(matches!(
            choose_window(90_000_000_000, Some(1_000)),
            Err(AnalyzeError::WindowTooShort { .. })
        ));
        assert_eq!(choose_window(90_000_000_000, Some(MIN_SHARE_WINDOW.0)), Ok((1_000_000, 90_001)));
        assert!(matches!(
            choose_window(365 * DAY_US, Some(MIN_SHARE_WINDOW.0)),
            Err(AnalyzeError::TooManyWindows { .. })
        ));
    }

    #[test]
    fn nearest_rank_uses_integer_ranks() {
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&hundred, 70), 7.0);
        assert_eq!(nearest_rank(&hundred, 0), 1.0);
        assert_eq!(nearest_rank(&hundred, 1000), 100.0);
        assert_eq!(nearest_rank(&[], 500), 0.0);
    }

    #[test]
    fn empty_workloads_are_errors() {
        let empty = Workload { source: "e.csv".into(), ..Workload::default() };
        assert_eq!(
            analyze_jobs(&empty, seconds(None)),
            Err(AnalyzeError::Empty { source_name: "e.csv".into() })
        );
    }

    #[test]
    fn statuses_recorded_by_the_reader_give_the_status_mix() {
        let mut w = five_jobs();
        assert_eq!(analyze_jobs(&w, seconds(None)).expect("ok").status, None);
        w.statuses = ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "TIMEOUT"].map(String::from).to_vec();
        let rows = analyze_jobs(&w, seconds(None)).expect("ok").status.expect("statuses given");
        let got: Vec<(&str, u64)> = rows.iter().map(|r| (r.status.as_str(), r.jobs)).collect();
        assert_eq!(got, [("COMPLETED", 3), ("FAILED", 1), ("TIMEOUT", 1)]);
        w.statuses.pop();
        assert_eq!(analyze_jobs(&w, seconds(None)), Err(AnalyzeError::StatusCount { given: 4, jobs: 5 }));
    }

    #[test]
    fn status_mix_by_hand() {
        let w = five_jobs();
        let statuses: Vec<String> =
            ["Pass", "Failed", "Pass", "Killed", "Pass"].iter().map(|s| s.to_string()).collect();
        let rows = status_mix(&w, &statuses).expect("one per job");
        let got: Vec<(&str, u64, f64)> =
            rows.iter().map(|r| (r.status.as_str(), r.jobs, r.gpu_time)).collect();
        assert_eq!(got, [("Pass", 3, 119_300.0), ("Failed", 1, 300.0), ("Killed", 1, 400.0)]);
        assert_eq!(status_mix(&w, &statuses[..2]), Err(AnalyzeError::StatusCount { given: 2, jobs: 5 }));
    }

    #[test]
    fn requests_by_hand() {
        use crate::requests::RequestRecord;
        let record = |at_s: u64, prompt: u32, output: u32| RequestRecord {
            arrival_us: at_s * 1_000_000,
            prompt_tokens: prompt,
            output_tokens: output,
            prefix_hashes: Vec::new(),
            line: 0,
        };
        let trace = RequestTrace {
            source: "r.csv".into(),
            records: vec![record(0, 10, 5), record(5, 100, 1), record(12, 1000, 20), record(30, 64, 65)],
            block_tokens: 0,
            skipped: Vec::new(),
            origin_us: 0,
        };
        let a = analyze_requests(&trace, Some(10_000_000)).expect("analyzes");
        assert_eq!((a.requests, a.span_s, a.mean_rate_per_s), (4, 30.0, 4.0 / 30.0));
        let rate: Vec<(u64, u64, u64)> =
            a.rate.iter().map(|s| (s.requests, s.prompt_tokens, s.output_tokens)).collect();
        assert_eq!(rate, [(2, 110, 6), (1, 1000, 20), (0, 0, 0), (1, 64, 65)]);
        assert_eq!(a.rate[0].requests_per_s, 0.2);
        assert_eq!(a.prompt_tokens.total, 1174);
        // Prompts sorted 10, 64, 100, 1000: median (rank 2) 64.
        assert_eq!((a.prompt_tokens.stats.p50, a.prompt_tokens.stats.max), (64.0, 1000.0));
        let hist: Vec<(&str, u64)> =
            a.prompt_tokens.histogram.iter().map(|b| (b.label.as_str(), b.requests)).collect();
        assert_eq!(hist, [("1-64", 2), ("65-128", 1), ("129-256", 0), ("257-512", 0), ("513-1024", 1)]);
        let out: Vec<(&str, u64)> =
            a.output_tokens.histogram.iter().map(|b| (b.label.as_str(), b.requests)).collect();
        assert_eq!(out, [("1-64", 3), ("65-128", 1)]);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// (tenant, arrival s, GPUs, duration s) rows: small enough to recompute by brute force.
        fn jobs() -> impl Strategy<Value = Vec<(u32, u64, u32, u32)>> {
            proptest::collection::vec((0u32..3, 0u64..20_000, 0u32..40, 0u32..5_000), 1..40)
        }

        fn workload(rows: &[(u32, u64, u32, u32)], wall_clock: bool) -> Workload {
            let mut rows = rows.to_vec();
            rows.sort_by_key(|r| r.1);
            Workload {
                source: "prop".into(),
                jobs: rows
                    .iter()
                    .enumerate()
                    .map(|(i, &(t, at, g, d))| {
                        JobSpec::new(i as u32, t, Time(at * 1_000_000), g, f64::from(d))
                    })
                    .collect(),
                tenants: ["a", "b", "c"].map(TenantSpec::new).to_vec(),
                lines: vec![0; rows.len()],
                wall_clock_origin_us: wall_clock.then_some(1_509_926_400_000_000),
                ..Workload::default()
            }
        }

        fn close(a: f64, b: f64) -> bool {
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

            /// Every job lands in exactly one class, hour, weekday and tenant; the parts
            /// of the GPU-time add up to the whole; distributions are ordered.
            #[test]
            fn parts_add_up(rows in jobs(), wall_clock in any::<bool>()) {
                let w = workload(&rows, wall_clock);
                let a = analyze_jobs(&w, JobOptions { work_unit: WorkUnit::Seconds, window_us: None }).expect("ok");
                let n = w.jobs.len() as u64;
                for classes in [&a.by_size, &a.by_size_pow2] {
                    prop_assert_eq!(classes.iter().map(|r| r.jobs).sum::<u64>(), n);
                    prop_assert!(close(total(classes.iter().map(|r| r.gpu_time)), a.gpu_time));
                }
                prop_assert_eq!(a.by_tenant.iter().map(|t| t.jobs).sum::<u64>(), n);
                prop_assert!(close(total(a.by_tenant.iter().map(|t| t.gpu_time)), a.gpu_time));
                if let Some(clock) = &a.wall_clock {
                    prop_assert_eq!(clock.by_hour.iter().map(|b| b.jobs).sum::<u64>(), n);
                    prop_assert_eq!(clock.by_weekday.iter().map(|b| b.jobs).sum::<u64>(), n);
                }
                let d = &a.duration;
                prop_assert!(d.curve.windows(2).all(|p| p[0] <= p[1]));
                prop_assert!(d.cdf.windows(2).all(|p| p[0].jobs <= p[1].jobs));
                let s = &d.stats;
                prop_assert!(s.min <= s.p10 && s.p10 <= s.p25 && s.p25 <= s.p50 && s.p50 <= s.p75);
                prop_assert!(s.p75 <= s.p90 && s.p90 <= s.p95 && s.p95 <= s.p99 && s.p99 <= s.max);
                prop_assert!(s.min <= s.mean && s.mean <= s.max);
            }

            /// Demand integrates to the GPU-time that falls inside the windows (each job's
            /// interval clipped to them); no window's mean exceeds its peak; arrivals add up.
            #[test]
            fn demand_conserves_gpu_time(rows in jobs(), window_s in 1u64..5_000) {
                let w = workload(&rows, false);
                let options = JobOptions { work_unit: WorkUnit::Seconds, window_us: Some(window_s * 1_000_000) };
                let d = analyze_jobs(&w, options).expect("ok").demand.expect("seconds");
                let horizon = d.samples.len() as f64 * window_s as f64;
                let clipped = total(w.jobs.iter().map(|j| {
                    let start = j.arrival.0 as f64 / 1e6;
                    f64::from(j.gpus) * ((start + j.work).min(horizon) - start).max(0.0)
                }));
                let integrated = total(d.samples.iter().map(|s| s.mean_gpus * window_s as f64));
                prop_assert!(close(integrated, clipped), "{} vs {}", integrated, clipped);
                prop_assert!(d.samples.iter().all(|s| s.mean_gpus <= s.peak_gpus as f64 + 1e-9));
                prop_assert_eq!(d.samples.iter().map(|s| s.arrivals).sum::<u64>(), w.jobs.len() as u64);
                // Brute force: the peak equals the largest demand at any event instant.
                let mut instants: Vec<u64> = w.jobs.iter().map(|j| j.arrival.0).collect();
                instants.sort_unstable();
                let at = |t: u64| -> u64 {
                    w.jobs
                        .iter()
                        .filter(|j| j.arrival.0 <= t && t < j.arrival.0 + cotenant_core::Span::from_secs_f64_ceil(j.work).0)
                        .map(|j| u64::from(j.gpus))
                        .sum()
                };
                let brute = instants.iter().map(|&t| at(t)).max().unwrap_or(0);
                prop_assert_eq!(d.peak_gpus, brute);
            }
        }
    }
}
