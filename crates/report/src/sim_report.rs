//! The report sections of a saved simulation ([`SimResults`]): figures of the JCT
//! distribution, queueing by job size, utilization and queue length over time,
//! tenant shares against their entitlement, fairness, and tables of every
//! metric. docs/report.md describes each figure; this module only draws what
//! the saved results hold (plus finish-time fairness, computed from them here,
//! see [`finish_time_fairness`]).

use crate::figure::{Axis, Figure, FigureError, LegendPosition, Series};
use crate::html::{slug, HtmlReport};
use crate::results::{SavedRun, SimResults};
use crate::table::{human_duration, Table};

/// At most this many points per CDF line: the sorted values are sampled at
/// evenly spaced ranks (the last rank always included), so a curve stays
/// faithful within 1/`CDF_POINTS` of the fraction while a report of 100,000
/// jobs stays small.
pub const CDF_POINTS: usize = 400;

/// At most this many tenants get a line in a tenant-share figure: those with the
/// most GPU-time under the first policy.
pub const SHARE_TENANTS: usize = 4;

/// Job-size buckets for queueing delay: inclusive GPU-count ranges.
pub const SIZE_BUCKETS: [(u32, u32); 9] =
    [(0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, u32::MAX)];

/// A bucket's name: `0 (CPU)`, `1`, `3-4`, `65+`.
pub fn bucket_name((low, high): (u32, u32)) -> String {
    match (low, high) {
        (0, 0) => "0 (CPU)".into(),
        (l, h) if l == h => l.to_string(),
        (l, u32::MAX) => format!("{l}+"),
        (l, h) => format!("{l}-{h}"),
    }
}

/// Adds one saved simulation's sections to `report`. `label` names the input
/// in headings; `prefix` (may be empty) starts its figures' names.
pub fn add_sim_sections(
    report: &mut HtmlReport,
    results: &SimResults,
    label: &str,
    prefix: &str,
) -> Result<(), FigureError> {
    let stem = slug(prefix);
    let name = |figure: &str| if stem.is_empty() { figure.to_string() } else { format!("{stem}-{figure}") };
    report.section(&format!("Simulation: {label}"));
    report.key_values(&workload_pairs(results));
    for run in &results.runs {
        for warning in &run.summary.warnings {
            report.note(&format!("WARNING [{}]: {warning}", run.summary.policy));
        }
        for note in &run.summary.notes {
            report.note(&format!("note [{}]: {note}", run.summary.policy));
        }
    }

    report.subsection("Job completion time");
    report.named_figure(
        &name("jct-cdf"),
        jct_cdf(results),
        "Cumulative distribution of job completion time (arrival to completion, log scale) per \
         policy, as a fraction of all jobs in the workload: a curve that stops short of 1 left jobs \
         unfinished or ended. Curves that coincide hide each other; the metric table has the numbers.",
    )?;
    report.named_figure(
        &name("queueing-by-size"),
        queueing_by_size(results),
        "Mean queueing delay (arrival to first start) by job size in GPUs, per policy, over the jobs \
         that started; log scale, so a delay of zero sits on the axis. Table 'queueing by job size' \
         gives the counts and p90.",
    )?;
    report.table(&queueing_table(results), "Queueing delay by job size: jobs, then mean / p90 per policy.");

    report.subsection("Over time");
    report.named_figure(
        &name("utilization"),
        utilization(results),
        "GPU utilization per share window: GPU-time held by jobs over GPU-time available in the \
         window, per policy.",
    )?;
    report.named_figure(
        &name("queue-length"),
        queue_length(results),
        "Mean number of waiting jobs per share window (the time integral of the queue length over \
         the window, divided by its length), per policy.",
    )?;
    for run in &results.runs {
        report.named_figure(
            &name(&format!("tenant-share-{}", slug(&run.summary.policy))),
            tenant_share(results, run),
            &format!(
                "GPUs held by the {} tenants with the most GPU-time, as a percentage of the cluster's {} \
                 GPUs, per share window, under {}; flat lines are each tenant's entitlement (its GPU \
                 quota, or else its weight's share of all weights).",
                SHARE_TENANTS.min(results.tenants.len()),
                results.cluster_gpus,
                run.summary.policy
            ),
        )?;
    }

    report.subsection("Fairness");
    report.named_figure(
        &name("jain"),
        jain(results),
        "Jain's index of weighted GPU-time among backlogged tenants, averaged over share windows \
         with two or more backlogged tenants (1 = equal shares; 1/n = one tenant has all). A policy \
         without such a window has no bar.",
    )?;
    report.named_figure(
        &name("finish-time-fairness"),
        ftf_figure(results),
        "Finish-time fairness ρ per policy: median and p90 over completed jobs of JCT / (run time \
         alone × max(1, mean GPU demand over the job's life / cluster GPUs)); ρ ≤ 1 means a job \
         finished no later than it would on an equal share of a contended cluster (docs/report.md).",
    )?;

    report.subsection("Every metric");
    report.table(&metric_table(results), "Every metric per policy (the summary of `sim --json`, plus ρ).");
    report.table(
        &tenant_table(results),
        "Per tenant: jobs, entitlement, then per policy mean JCT and GPU share.",
    );
    Ok(())
}

fn workload_pairs(results: &SimResults) -> Vec<(&'static str, String)> {
    let field = |key: &str| match results.workload.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "-".into(),
    };
    vec![
        ("source", field("source")),
        ("trace kind", field("kind")),
        ("jobs", results.jobs.arrival_s.len().to_string()),
        ("tenants", results.tenants.len().to_string()),
        ("cluster", format!("{} GPUs ({})", results.cluster_gpus, field("cluster_rule"))),
        ("policies", results.runs.iter().map(|r| r.summary.policy.as_str()).collect::<Vec<_>>().join(", ")),
    ]
}

/// Sorted finite values.
fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut values: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    values.sort_by(f64::total_cmp);
    values
}

/// Nearest-rank percentile of sorted values (as `sim::Distribution` computes them).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The CDF of `sorted` values as a fraction of `total`, at most [`CDF_POINTS`] points.
pub fn cdf_points(sorted: &[f64], total: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 || total == 0 {
        return Vec::new();
    }
    let steps = n.min(CDF_POINTS);
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(steps);
    let mut last = usize::MAX;
    for k in 1..=steps {
        let index = (k * n).div_ceil(steps) - 1;
        if index != last {
            points.push((sorted[index], (index + 1) as f64 / total as f64));
            last = index;
        }
    }
    points
}

/// JCT CDF per policy.
pub fn jct_cdf(results: &SimResults) -> Figure {
    let total = results.jobs.arrival_s.len();
    let mut figure = Figure::new(
        "Job completion time (CDF)",
        Axis::log("job completion time", "s"),
        Axis::linear("fraction of jobs", "0-1").with_range(0.0, 1.0),
    )
    .with_legend(LegendPosition::LowerRight);
    for run in &results.runs {
        let jcts = sorted(run.jct_s.iter().flatten().copied());
        figure.push(Series::step(&run.summary.policy, cdf_points(&jcts, total)));
    }
    figure
}

/// The size buckets that hold at least one job, with each job's bucket index.
fn buckets(results: &SimResults) -> (Vec<(u32, u32)>, Vec<Option<usize>>) {
    let bucket_of = |gpus: u32| SIZE_BUCKETS.iter().position(|&(l, h)| gpus >= l && gpus <= h);
    let of_job: Vec<Option<usize>> = results.jobs.gpus.iter().map(|&g| bucket_of(g)).collect();
    let used: Vec<usize> = (0..SIZE_BUCKETS.len()).filter(|b| of_job.contains(&Some(*b))).collect();
    let renumbered = of_job.iter().map(|b| b.and_then(|b| used.iter().position(|&u| u == b))).collect();
    (used.iter().map(|&b| SIZE_BUCKETS[b]).collect(), renumbered)
}

/// Per used bucket: the sorted queueing delays of jobs that started under `run`.
fn queueing_by_bucket(run: &SavedRun, buckets: usize, of_job: &[Option<usize>]) -> Vec<Vec<f64>> {
    let mut delays = vec![Vec::new(); buckets];
    for (job, delay) in run.queueing_s.iter().enumerate() {
        if let (Some(delay), Some(Some(bucket))) = (delay, of_job.get(job)) {
            delays[*bucket].push(*delay);
        }
    }
    delays.into_iter().map(|d| sorted(d.into_iter())).collect()
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Mean queueing delay by job-size bucket, bars per policy.
pub fn queueing_by_size(results: &SimResults) -> Figure {
    let (used, of_job) = buckets(results);
    let mut figure = Figure::new(
        "Queueing delay by job size",
        Axis::linear("job size", "GPUs"),
        Axis::log("mean queueing delay", "s"),
    )
    .with_categories(used.iter().map(|&b| bucket_name(b)).collect());
    for run in &results.runs {
        let delays = queueing_by_bucket(run, used.len(), &of_job);
        let points = delays.iter().enumerate().filter_map(|(b, d)| Some((b as f64, mean(d)?))).collect();
        figure.push(Series::bars(&run.summary.policy, points));
    }
    figure
}

fn queueing_table(results: &SimResults) -> Table {
    let (used, of_job) = buckets(results);
    let mut header = vec!["job size (GPUs)".to_string(), "jobs".to_string()];
    header.extend(results.runs.iter().map(|r| format!("{} mean / p90", r.summary.policy)));
    let mut table = Table { header, rows: Vec::new() };
    let per_run: Vec<Vec<Vec<f64>>> =
        results.runs.iter().map(|run| queueing_by_bucket(run, used.len(), &of_job)).collect();
    for (b, &bucket) in used.iter().enumerate() {
        let jobs = of_job.iter().filter(|&&j| j == Some(b)).count();
        let mut row = vec![bucket_name(bucket), jobs.to_string()];
        for delays in &per_run {
            let d = &delays[b];
            row.push(match (mean(d), percentile(d, 0.9)) {
                (Some(m), Some(p90)) => format!("{} / {}", human_duration(m), human_duration(p90)),
                _ => "-".into(),
            });
        }
        table.row(row);
    }
    table
}

/// The time axis of window series: hours, or days for runs longer than three days.
fn time_axis(results: &SimResults) -> (Axis, f64) {
    let longest = results
        .runs
        .iter()
        .map(|r| r.windows.window_s * r.windows.utilization.len() as f64)
        .fold(0.0, f64::max);
    if longest > 3.0 * 86400.0 {
        (Axis::linear("time since first arrival", "days"), 86400.0)
    } else {
        (Axis::linear("time since first arrival", "h"), 3600.0)
    }
}

/// Window midpoints in the time axis's unit, paired with `values`.
fn window_points(run: &SavedRun, values: &[f64], unit_s: f64) -> Vec<(f64, f64)> {
    let w = run.windows.window_s;
    values.iter().enumerate().map(|(k, &v)| ((k as f64 + 0.5) * w / unit_s, v)).collect()
}

/// GPU utilization per window, a line per policy.
pub fn utilization(results: &SimResults) -> Figure {
    let (x, unit_s) = time_axis(results);
    let mut figure = Figure::new(
        "GPU utilization over time",
        x,
        Axis::linear("GPU utilization", "%").with_range(0.0, 100.0),
    );
    for run in &results.runs {
        let percent: Vec<f64> = run.windows.utilization.iter().map(|u| u * 100.0).collect();
        figure.push(Series::line(&run.summary.policy, window_points(run, &percent, unit_s)));
    }
    figure
}

/// Mean queue length per window, a line per policy.
pub fn queue_length(results: &SimResults) -> Figure {
    let (x, unit_s) = time_axis(results);
    let mut figure = Figure::new("Queue length over time", x, Axis::linear("mean waiting jobs", "jobs"));
    for run in &results.runs {
        figure.push(Series::line(&run.summary.policy, window_points(run, &run.windows.queue_length, unit_s)));
    }
    figure
}

/// Each tenant's entitled share of the cluster, in percent: its quota, else its weight share.
pub fn entitlement_percent(results: &SimResults, tenant: usize) -> f64 {
    let t = &results.tenants[tenant];
    match t.gpu_quota {
        Some(quota) if results.cluster_gpus > 0 => f64::from(quota) / f64::from(results.cluster_gpus) * 100.0,
        _ => {
            let total: f64 = results.tenants.iter().map(|t| t.weight).sum();
            if total > 0.0 {
                t.weight / total * 100.0
            } else {
                0.0
            }
        }
    }
}

/// The tenants drawn in share figures: most GPU-hours under the first policy, at most [`SHARE_TENANTS`].
pub fn share_tenants(results: &SimResults) -> Vec<usize> {
    let Some(first) = results.runs.first() else { return Vec::new() };
    let hours = |t: usize| first.summary.tenants.get(t).map_or(0.0, |s| s.gpu_hours);
    let mut tenants: Vec<usize> = (0..results.tenants.len()).collect();
    // Most GPU-hours first; ties by index, so the order is deterministic.
    tenants.sort_by(|&a, &b| hours(b).total_cmp(&hours(a)).then(a.cmp(&b)));
    tenants.truncate(SHARE_TENANTS);
    tenants
}

/// GPUs held per window by the top tenants under `run`, as % of the cluster, with entitlements.
pub fn tenant_share(results: &SimResults, run: &SavedRun) -> Figure {
    let (x, unit_s) = time_axis(results);
    let mut figure = Figure::new(
        &format!("Tenant GPU share over time ({})", run.summary.policy),
        x,
        Axis::linear("GPUs held", "% of cluster"),
    );
    let tenants = share_tenants(results);
    let gpus = f64::from(results.cluster_gpus.max(1));
    let span_end = run.windows.window_s * run.windows.utilization.len() as f64 / unit_s;
    let entitlements: Vec<f64> = tenants.iter().map(|&t| entitlement_percent(results, t)).collect();
    let all_equal = entitlements.windows(2).all(|w| (w[0] - w[1]).abs() < 1e-9);
    for (color, &t) in tenants.iter().enumerate() {
        let percent: Vec<f64> = run.windows.tenant_gpus[t].iter().map(|g| g / gpus * 100.0).collect();
        figure.push(
            Series::line(&results.tenants[t].name, window_points(run, &percent, unit_s)).with_color(color),
        );
    }
    if let (true, Some(&share)) = (all_equal, entitlements.first()) {
        let what =
            if results.tenants.iter().any(|t| t.gpu_quota.is_some()) { "quota" } else { "weight share" };
        figure.push(
            Series::dashed(&format!("entitled ({what})"), vec![(0.0, share), (span_end, share)])
                .with_color(6),
        );
    } else {
        for (color, (&t, &share)) in tenants.iter().zip(&entitlements).enumerate() {
            let what = if results.tenants[t].gpu_quota.is_some() { "quota" } else { "weight" };
            let name = format!("{} {what}", results.tenants[t].name);
            figure.push(Series::dashed(&name, vec![(0.0, share), (span_end, share)]).with_color(color));
        }
    }
    figure
}

/// Jain's index per policy, bars.
pub fn jain(results: &SimResults) -> Figure {
    let names = results.runs.iter().map(|r| r.summary.policy.clone()).collect();
    let mut figure = Figure::new(
        "Jain's index among backlogged tenants",
        Axis::linear("policy", ""),
        Axis::linear("Jain's index", "0-1").with_range(0.0, 1.0),
    )
    .with_categories(names);
    let points = results
        .runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i as f64, r.summary.jain_backlogged?)))
        .collect();
    figure.push(Series::bars("Jain's index (mean over windows)", points));
    figure
}

/// Finish-time fairness ρ of each job under `run` (None for jobs that did not
/// complete or never ran):
///
/// ρ = JCT / (T_alone × max(1, D̄ / C))
///
/// with T_alone the job's run time alone on its GPUs (`run_s`: GPU-time held
/// minus GPU-time lost, over its GPUs), C the cluster's GPUs, and D̄ the mean
/// GPU demand (the GPUs of every job that has arrived and not yet completed or
/// ended, running or waiting) over the job's life, arrival to completion.
/// D̄ / C is the slowdown an equal share of a contended cluster would impose
/// (Themis' finish-time fairness, T_shared / T_independent with an independent
/// share of 1/N of the cluster; here weighted by GPUs, as Gavel's uses the
/// job's share of the cluster).
pub fn finish_time_fairness(results: &SimResults, run: &SavedRun) -> Vec<Option<f64>> {
    let arrivals = &results.jobs.arrival_s;
    // Demand steps: +gpus at arrival, -gpus at completion or end (never, if still there).
    let mut events: Vec<(f64, f64)> = Vec::with_capacity(arrivals.len() * 2);
    for (job, &arrival) in arrivals.iter().enumerate() {
        let gpus = f64::from(results.jobs.gpus[job]);
        events.push((arrival, gpus));
        if let Some(end) = run.end_s[job] {
            events.push((arrival + end, -gpus));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // times[k], the integral of demand up to times[k], and the level from times[k] on.
    let mut times = Vec::with_capacity(events.len());
    let mut integral = Vec::with_capacity(events.len());
    let mut level = Vec::with_capacity(events.len());
    let (mut area, mut demand, mut last) = (0.0f64, 0.0f64, f64::NEG_INFINITY);
    for (time, change) in events {
        if last.is_finite() {
            area += demand * (time - last);
        }
        demand += change;
        if times.last() == Some(&time) {
            *level.last_mut().expect("pushed with times") = demand;
        } else {
            times.push(time);
            integral.push(area);
            level.push(demand);
        }
        last = time;
    }
    let area_to = |t: f64| -> f64 {
        let k = times.partition_point(|&x| x <= t);
        if k == 0 {
            return 0.0;
        }
        integral[k - 1] + level[k - 1] * (t - times[k - 1])
    };
    let cluster = f64::from(results.cluster_gpus.max(1));
    (0..arrivals.len())
        .map(|job| {
            let jct = run.jct_s[job]?;
            let alone = run.run_s[job].filter(|&r| r > 0.0)?;
            let arrival = arrivals[job];
            let mean_demand = if jct > 0.0 { (area_to(arrival + jct) - area_to(arrival)) / jct } else { 0.0 };
            Some(jct / (alone * (mean_demand / cluster).max(1.0)))
        })
        .collect()
}

/// ρ's median and p90 per policy, bars.
pub fn ftf_figure(results: &SimResults) -> Figure {
    let names = results.runs.iter().map(|r| r.summary.policy.clone()).collect();
    let mut figure = Figure::new(
        "Finish-time fairness (ρ = JCT / fair-share time)",
        Axis::linear("policy", ""),
        Axis::log("ρ", "ratio"),
    )
    .with_categories(names);
    let mut medians = Vec::new();
    let mut p90s = Vec::new();
    for (i, run) in results.runs.iter().enumerate() {
        let rho = sorted(finish_time_fairness(results, run).into_iter().flatten());
        if let (Some(median), Some(p90)) = (percentile(&rho, 0.5), percentile(&rho, 0.9)) {
            medians.push((i as f64, median));
            p90s.push((i as f64, p90));
        }
    }
    figure.push(Series::bars("median ρ", medians));
    figure.push(Series::bars("p90 ρ", p90s));
    figure
}

fn percent(value: f64) -> String {
    format!("{:.1}%", value * 100.0)
}

fn seconds(value: f64) -> String {
    format!("{value:.0} ({})", human_duration(value))
}

/// Every metric (rows) per policy (columns).
pub fn metric_table(results: &SimResults) -> Table {
    type Cell = fn(&crate::results::SavedSummary) -> String;
    let rows: [(&str, Cell); 24] = [
        ("jobs", |s| s.jobs.to_string()),
        ("completed", |s| s.completed.to_string()),
        ("unfinished", |s| s.unfinished.to_string()),
        ("healthy", |s| if s.healthy { "yes".into() } else { "NO".into() }),
        ("JCT mean (s)", |s| seconds(s.jct_secs.mean)),
        ("JCT p50 (s)", |s| seconds(s.jct_secs.p50)),
        ("JCT p90 (s)", |s| seconds(s.jct_secs.p90)),
        ("JCT p99 (s)", |s| seconds(s.jct_secs.p99)),
        ("JCT max (s)", |s| seconds(s.jct_secs.max)),
        ("queueing mean (s)", |s| seconds(s.queueing_secs.mean)),
        ("queueing p50 (s)", |s| seconds(s.queueing_secs.p50)),
        ("queueing p90 (s)", |s| seconds(s.queueing_secs.p90)),
        ("queueing p99 (s)", |s| seconds(s.queueing_secs.p99)),
        ("queueing max (s)", |s| seconds(s.queueing_secs.max)),
        ("makespan (s)", |s| seconds(s.makespan_secs)),
        ("GPU utilization", |s| percent(s.gpu_utilization)),
        ("goodput utilization", |s| percent(s.goodput_utilization)),
        ("idle while waiting", |s| percent(s.idle_while_waiting)),
        ("preemptions", |s| s.preemptions.to_string()),
        ("lost GPU-hours", |s| format!("{:.1}", s.lost_gpu_hours)),
        ("Jain's index (backlogged)", |s| s.jain_backlogged.map_or("-".into(), |j| format!("{j:.3}"))),
        ("share windows measured", |s| s.share_windows_measured.to_string()),
        ("events", |s| s.events.to_string()),
        ("scheduling passes", |s| s.scheduling_passes.to_string()),
    ];
    let mut header = vec!["metric".to_string()];
    header.extend(results.runs.iter().map(|r| r.summary.policy.clone()));
    let mut table = Table { header, rows: Vec::new() };
    for (name, cell) in rows {
        let mut row = vec![name.to_string()];
        row.extend(results.runs.iter().map(|r| cell(&r.summary)));
        table.row(row);
    }
    let rhos: Vec<Vec<f64>> =
        results.runs.iter().map(|r| sorted(finish_time_fairness(results, r).into_iter().flatten())).collect();
    type Stat = fn(&[f64]) -> Option<String>;
    let stats: [(&str, Stat); 4] = [
        ("finish-time fairness ρ mean", |r| mean(r).map(|m| format!("{m:.2}"))),
        ("finish-time fairness ρ p50", |r| percentile(r, 0.5).map(|m| format!("{m:.2}"))),
        ("finish-time fairness ρ p90", |r| percentile(r, 0.9).map(|m| format!("{m:.2}"))),
        ("jobs with ρ > 1", |r| {
            (!r.is_empty()).then(|| percent(r.iter().filter(|&&x| x > 1.0).count() as f64 / r.len() as f64))
        }),
    ];
    for (name, stat) in stats {
        let mut row = vec![name.to_string()];
        row.extend(rhos.iter().map(|r| stat(r).unwrap_or_else(|| "-".into())));
        table.row(row);
    }
    table
}

/// Tenants as rows: jobs, entitlement, and per policy mean JCT and GPU share.
pub fn tenant_table(results: &SimResults) -> Table {
    let mut header =
        vec!["tenant".to_string(), "jobs".into(), "weight".into(), "quota".into(), "entitled".into()];
    for run in &results.runs {
        header.push(format!("{} JCT mean", run.summary.policy));
        header.push(format!("{} share", run.summary.policy));
    }
    let mut table = Table { header, rows: Vec::new() };
    for (t, tenant) in results.tenants.iter().enumerate() {
        let jobs = results.jobs.tenant.iter().filter(|&&j| j == t).count();
        let mut row = vec![
            tenant.name.clone(),
            jobs.to_string(),
            format!("{}", tenant.weight),
            tenant.gpu_quota.map_or("-".into(), |q| q.to_string()),
            format!("{:.1}%", entitlement_percent(results, t)),
        ];
        for run in &results.runs {
            match run.summary.tenants.get(t) {
                Some(s) if s.jct_secs.count > 0 => row.push(human_duration(s.jct_secs.mean)),
                _ => row.push("-".into()),
            }
            row.push(run.summary.tenants.get(t).map_or("-".into(), |s| percent(s.gpu_share)));
        }
        table.row(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{SavedDistribution, SavedJobs, SavedSummary, SavedTenant, SavedWindows};

    fn summary(policy: &str) -> SavedSummary {
        let d = SavedDistribution { count: 0, mean: 0.0, p50: 0.0, p90: 0.0, p99: 0.0, max: 0.0 };
        SavedSummary {
            policy: policy.into(),
            cluster_gpus: 4,
            jobs: 3,
            completed: 3,
            unfinished: 0,
            healthy: true,
            warnings: vec![],
            notes: vec![],
            jct_secs: d,
            queueing_secs: d,
            makespan_secs: 0.0,
            gpu_utilization: 0.0,
            goodput_utilization: 0.0,
            idle_while_waiting: 0.0,
            preemptions: 0,
            lost_gpu_hours: 0.0,
            jain_backlogged: Some(0.5),
            share_windows_measured: 1,
            events: 0,
            scheduling_passes: 0,
            tenants: vec![],
            rest: Default::default(),
        }
    }

    /// Three jobs on a 4-GPU cluster: A (4 GPUs, 0-10 s alone), B (4 GPUs, arrives
    /// at 0, waits for A, runs 10-20 s), C (2 GPUs, arrives at 20 s, runs 20-30 s).
    fn three_jobs() -> SimResults {
        let run = SavedRun {
            summary: summary("fifo"),
            queueing_s: vec![Some(0.0), Some(10.0), Some(0.0)],
            jct_s: vec![Some(10.0), Some(20.0), Some(10.0)],
            end_s: vec![Some(10.0), Some(20.0), Some(10.0)],
            run_s: vec![Some(10.0), Some(10.0), Some(10.0)],
            outcome: vec!["completed".into(); 3],
            windows: SavedWindows {
                window_s: 10.0,
                origin_s: 0.0,
                utilization: vec![1.0, 1.0, 0.5],
                queue_length: vec![1.0, 0.0, 0.0],
                tenant_gpus: vec![vec![4.0, 4.0, 2.0]],
            },
        };
        SimResults {
            kind: "cotenant-sim-results".into(),
            version: 1,
            workload: serde_json::json!({"source": "hand"}),
            cluster_gpus: 4,
            tenants: vec![SavedTenant { name: "t".into(), weight: 1.0, gpu_quota: None }],
            jobs: SavedJobs { arrival_s: vec![0.0, 0.0, 20.0], gpus: vec![4, 4, 2], tenant: vec![0, 0, 0] },
            runs: vec![run],
        }
    }

    #[test]
    fn finish_time_fairness_by_hand() {
        let results = three_jobs();
        let rho = finish_time_fairness(&results, &results.runs[0]);
        // A: demand 8 GPUs over 0-10 s = 2x the cluster: rho = 10 / (10 x 2) = 0.5.
        // B: demand 8 over 0-10, 4 over 10-20: mean 6 = 1.5x: rho = 20 / (10 x 1.5) = 4/3.
        // C: demand 2 over 20-30, under the cluster: rho = 10 / 10 = 1.
        assert_eq!(rho, vec![Some(0.5), Some(20.0 / 15.0), Some(1.0)]);
    }

    #[test]
    fn a_run_where_nothing_completed_or_started_still_reports() {
        let mut results = three_jobs();
        let run = &mut results.runs[0];
        run.jct_s = vec![None; 3];
        run.queueing_s = vec![None; 3];
        run.end_s = vec![None; 3];
        run.summary.jain_backlogged = None;
        let mut report = HtmlReport::new("t");
        add_sim_sections(&mut report, &results, "empty", "").unwrap();
        for (_, figure) in report.named_figures() {
            figure.to_png().unwrap();
        }
        assert!(report.render().contains("jobs with ρ &gt; 1</th><td>-</td>"));
    }

    #[test]
    fn cdf_samples_ranks_and_ends_at_the_completed_fraction() {
        let values: Vec<f64> = (1..=1000).map(f64::from).collect();
        let points = cdf_points(&values, 2000);
        assert_eq!(points.len(), CDF_POINTS);
        assert_eq!(points.last(), Some(&(1000.0, 0.5)));
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert_eq!(cdf_points(&[3.0, 5.0], 2), vec![(3.0, 0.5), (5.0, 1.0)]);
    }

    #[test]
    fn buckets_and_percentiles() {
        assert_eq!(bucket_name((3, 4)), "3-4");
        assert_eq!(bucket_name((65, u32::MAX)), "65+");
        let (used, of_job) = buckets(&three_jobs());
        assert_eq!(used, vec![(2, 2), (3, 4)]);
        assert_eq!(of_job, vec![Some(1), Some(1), Some(0)]);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.0));
    }

    #[test]
    fn figures_hold_the_data() {
        let results = three_jobs();
        let cdf = jct_cdf(&results);
        assert_eq!(cdf.series[0].points, vec![(10.0, 1.0 / 3.0), (10.0, 2.0 / 3.0), (20.0, 1.0)]);
        let util = utilization(&results);
        assert_eq!(
            util.series[0].points,
            vec![(5.0 / 3600.0, 100.0), (15.0 / 3600.0, 100.0), (25.0 / 3600.0, 50.0)]
        );
        let share = tenant_share(&results, &results.runs[0]);
        assert_eq!(share.series[0].points[2].1, 50.0);
        assert_eq!(share.series[1].name, "entitled (weight share)");
        let mut report = HtmlReport::new("t");
        add_sim_sections(&mut report, &results, "hand.json", "hand").unwrap();
        let names: Vec<&str> = report.named_figures().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "hand-jct-cdf",
                "hand-queueing-by-size",
                "hand-utilization",
                "hand-queue-length",
                "hand-tenant-share-fifo",
                "hand-jain",
                "hand-finish-time-fairness"
            ]
        );
    }
}
