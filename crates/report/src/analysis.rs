//! Rendering `cotenant analyze` results (`trace::analyze`): aligned text tables,
//! JSON, and the HTML report. The numbers are computed in `cotenant_trace::analyze`;
//! this module only lays them out.

use serde_json::{json, Value};

use cotenant_trace::analyze::{
    DemandAnalysis, Distribution, JobAnalysis, RateSample, RequestAnalysis, SizeRow, TokenAnalysis, WorkUnit,
};

use crate::figure::{Axis, Figure, FigureError, LegendPosition, Series};
use crate::html::HtmlReport;
use crate::table::{human_duration, Table};

/// The `kind` of a job-trace analysis JSON document.
pub const JOB_ANALYSIS_KIND: &str = "cotenant-job-analysis";
/// The `kind` of a request-trace analysis JSON document.
pub const REQUEST_ANALYSIS_KIND: &str = "cotenant-request-analysis";
/// Text output groups a long time series into at most this many rows (JSON and
/// HTML keep every window).
pub const MAX_TEXT_SERIES_ROWS: usize = 28;

/// `{"kind": "cotenant-job-analysis", "version": 1, "analysis": {...}}`; object keys
/// sorted (serde_json's default map), so the output is stable.
pub fn job_analysis_json(analysis: &JobAnalysis) -> Value {
    json!({ "kind": JOB_ANALYSIS_KIND, "version": 1, "analysis": to_value(analysis) })
}

/// `{"kind": "cotenant-request-analysis", "version": 1, "traces": [...]}`.
pub fn request_analysis_json(analyses: &[RequestAnalysis]) -> Value {
    let traces: Vec<Value> = analyses.iter().map(to_value).collect();
    json!({ "kind": REQUEST_ANALYSIS_KIND, "version": 1, "traces": traces })
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    // The analysis types hold only strings, integers, finite floats, options and
    // vectors: serializing them cannot fail.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Formats GPU-time: GPU-hours for seconds traces, GPU-steps for step traces.
fn gpu_time(value: f64, unit: WorkUnit) -> String {
    match unit {
        WorkUnit::Seconds => format!("{:.1}", value / 3600.0),
        WorkUnit::Steps => format!("{value:.0}"),
    }
}

fn gpu_time_heading(unit: WorkUnit) -> &'static str {
    match unit {
        WorkUnit::Seconds => "GPU-hours",
        WorkUnit::Steps => "GPU-steps",
    }
}

/// A duration (seconds as `2.41h`), or a step count.
fn duration(value: f64, unit: WorkUnit) -> String {
    match unit {
        WorkUnit::Seconds => human_duration(value),
        WorkUnit::Steps => format!("{value:.0}"),
    }
}

fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// Seconds since time 0 as `HH:MM:SS`, with whole days as `Dd HH:MM:SS`.
pub fn offset_label(secs: f64) -> String {
    let whole = secs.max(0.0).floor() as u64;
    let (days, rest) = (whole / 86_400, whole % 86_400);
    let clock = format!("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    if days > 0 {
        format!("{days}d {clock}")
    } else {
        clock
    }
}

/// A CDF threshold in the largest whole unit: `1m`, `5m`, `1h`, `2d`, `90s`.
fn threshold_label(secs: f64) -> String {
    let whole = secs as u64;
    if secs.fract() != 0.0 || whole == 0 {
        format!("{secs}s")
    } else if whole.is_multiple_of(86_400) {
        format!("{}d", whole / 86_400)
    } else if whole.is_multiple_of(3600) {
        format!("{}h", whole / 3600)
    } else if whole.is_multiple_of(60) {
        format!("{}m", whole / 60)
    } else {
        format!("{whole}s")
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The whole text report of a job-trace analysis.
pub fn job_analysis_text(a: &JobAnalysis) -> String {
    let mut out = String::new();
    out.push_str(&summary_text(a));
    out.push_str("\nJobs and GPU-time by job size (GPUs per job)\n");
    out.push_str(&size_table(&a.by_size, a.work_unit).render());
    out.push_str("\nBy power-of-two job size\n");
    out.push_str(&size_table(&a.by_size_pow2, a.work_unit).render());
    out.push_str(&format!("\nDuration distribution ({})\n", duration_meaning(a.work_unit)));
    out.push_str(
        &distribution_table(&[("duration", &a.duration.stats)], |v| duration(v, a.work_unit)).render(),
    );
    out.push_str("\nDuration CDF\n");
    out.push_str(&cdf_table(a).render());
    out.push('\n');
    out.push_str(&arrivals_text(a));
    out.push_str("\nTenants, by GPU-time\n");
    out.push_str(&tenant_table(a).render());
    out.push('\n');
    out.push_str(&demand_text(a));
    out.push('\n');
    out.push_str(&status_text(a));
    out
}

fn duration_meaning(unit: WorkUnit) -> &'static str {
    match unit {
        WorkUnit::Seconds => "run time per job",
        WorkUnit::Steps => "training steps per job: this trace records steps, not seconds",
    }
}

fn summary_text(a: &JobAnalysis) -> String {
    let mut out = format!("Workload: {}\n", a.source);
    out.push_str(&format!(
        "  {} jobs ({} CPU-only) from {} tenant(s); {} {}; arrivals over {}\n",
        thousands(a.jobs),
        thousands(a.cpu_only_jobs),
        a.tenants,
        gpu_time(a.gpu_time, a.work_unit),
        gpu_time_heading(a.work_unit),
        human_duration(a.arrival_span_s),
    ));
    out.push_str(&format!(
        "  GPUs per job: mean {:.2}, median {:.0}, p90 {:.0}, max {:.0}",
        a.gpus.mean, a.gpus.p50, a.gpus.p90, a.gpus.max
    ));
    if let Some(demand) = a.mean_demand_gpus {
        out.push_str(&format!("; average demand {demand:.1} GPUs (GPU-time / arrival span)"));
    }
    out.push('\n');
    for (reason, rows) in &a.skipped {
        out.push_str(&format!("  skipped {} rows: {reason}\n", thousands(*rows)));
    }
    for note in &a.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    out
}

fn size_table(rows: &[SizeRow], unit: WorkUnit) -> Table {
    let mut table =
        Table::new(&["GPUs", "jobs", "jobs %", gpu_time_heading(unit), "GPU-time %", "median duration"]);
    for r in rows {
        table.row(vec![
            r.label.clone(),
            thousands(r.jobs),
            percent(r.job_share),
            gpu_time(r.gpu_time, unit),
            percent(r.gpu_time_share),
            if r.jobs == 0 { "-".into() } else { duration(r.median_duration, unit) },
        ]);
    }
    table
}

/// One row per named distribution: count, mean, min, percentiles, max.
pub fn distribution_table(rows: &[(&str, &Distribution)], format: impl Fn(f64) -> String) -> Table {
    let mut table =
        Table::new(&["", "count", "mean", "min", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "max"]);
    for (name, d) in rows {
        table.row(vec![
            name.to_string(),
            thousands(d.count),
            format(d.mean),
            format(d.min),
            format(d.p10),
            format(d.p25),
            format(d.p50),
            format(d.p75),
            format(d.p90),
            format(d.p95),
            format(d.p99),
            format(d.max),
        ]);
    }
    table
}

fn cdf_table(a: &JobAnalysis) -> Table {
    let mut table = Table::new(&["duration <=", "jobs", "fraction"]);
    for point in &a.duration.cdf {
        let at = match a.work_unit {
            WorkUnit::Seconds => threshold_label(point.at),
            WorkUnit::Steps => format!("{:.0}", point.at),
        };
        table.row(vec![at, thousands(point.jobs), percent(point.fraction)]);
    }
    table
}

fn arrivals_text(a: &JobAnalysis) -> String {
    let Some(w) = &a.wall_clock else {
        return "Arrivals by hour of day and day of week: not available. This trace's times are seconds \
                since its start, with no wall-clock date or time of day.\n"
            .to_string();
    };
    let mut out = format!(
        "Arrivals by hour of day (the trace's own clock: Philly and sacct local time, kubectl UTC; {} to {})\n",
        w.first_arrival, w.last_arrival
    );
    let mut hours = Table::new(&["hour", "jobs", "jobs %", gpu_time_heading(a.work_unit)]);
    for bin in &w.by_hour {
        hours.row(vec![
            bin.label.clone(),
            thousands(bin.jobs),
            percent(bin.job_share),
            gpu_time(bin.gpu_time, a.work_unit),
        ]);
    }
    out.push_str(&hours.render());
    out.push_str(
        "\nArrivals by day of week (days: how often the weekday occurs from the first to the last arrival)\n",
    );
    let mut days =
        Table::new(&["day", "days", "jobs", "jobs %", "jobs per day", gpu_time_heading(a.work_unit)]);
    for (bin, &occurrences) in w.by_weekday.iter().zip(&w.weekday_occurrences) {
        days.row(vec![
            bin.label.clone(),
            occurrences.to_string(),
            thousands(bin.jobs),
            percent(bin.job_share),
            if occurrences == 0 {
                "-".into()
            } else {
                format!("{:.1}", bin.jobs as f64 / occurrences as f64)
            },
            gpu_time(bin.gpu_time, a.work_unit),
        ]);
    }
    out.push_str(&days.render());
    out
}

fn tenant_table(a: &JobAnalysis) -> Table {
    let mut table = Table::new(&[
        "tenant",
        "jobs",
        "jobs %",
        gpu_time_heading(a.work_unit),
        "GPU-time %",
        "median GPUs",
        "median duration",
    ]);
    for t in &a.by_tenant {
        table.row(vec![
            t.name.clone(),
            thousands(t.jobs),
            percent(t.job_share),
            gpu_time(t.gpu_time, a.work_unit),
            percent(t.gpu_time_share),
            format!("{:.0}", t.median_gpus),
            duration(t.median_duration, a.work_unit),
        ]);
    }
    table
}

/// Group sizes text output tries, smallest first, so that rows start at round times
/// (6 one-hour windows, 15 ten-second windows, ...).
const ROUND_GROUPS: [usize; 18] = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 24, 30, 60, 120, 180, 360, 720, 1440];

/// Consecutive groups of windows for text output: the group size and each group's
/// (first index, last index exclusive); at most [`MAX_TEXT_SERIES_ROWS`] groups.
fn groups(windows: usize) -> (usize, Vec<(usize, usize)>) {
    let group = ROUND_GROUPS
        .into_iter()
        .find(|&g| windows.div_ceil(g) <= MAX_TEXT_SERIES_ROWS)
        .unwrap_or_else(|| windows.div_ceil(MAX_TEXT_SERIES_ROWS).max(1));
    let ranges = (0..windows).step_by(group).map(|start| (start, (start + group).min(windows))).collect();
    (group, ranges)
}

fn demand_text(a: &JobAnalysis) -> String {
    let Some(d) = &a.demand else {
        return "Demanded GPUs over time: not available. This trace measures work in steps, so a job's \
                run time is unknown until a GPU type is chosen.\n"
            .to_string();
    };
    demand_section(d)
}

fn demand_section(d: &DemandAnalysis) -> String {
    let mut out = format!(
        "Demanded GPUs over time (every job running from its arrival for its duration; window {}): \
         mean {:.1}, peak {}\n",
        human_duration(d.window_s),
        d.mean_gpus,
        d.peak_gpus
    );
    let (group, ranges) = groups(d.samples.len());
    if group > 1 {
        out.push_str(&format!(
            "  one row per {group} windows ({}): mean of their means, highest peak, arrivals summed\n",
            human_duration(d.window_s * group as f64)
        ));
    }
    let mut table = Table::new(&["from (since time 0)", "mean GPUs", "peak GPUs", "arrivals"]);
    for (start, end) in ranges {
        let samples = &d.samples[start..end];
        let mean = samples.iter().map(|s| s.mean_gpus).fold(0.0, |sum, v| sum + v) / samples.len() as f64;
        table.row(vec![
            offset_label(samples[0].start_s),
            format!("{mean:.1}"),
            samples.iter().map(|s| s.peak_gpus).max().unwrap_or(0).to_string(),
            thousands(samples.iter().map(|s| s.arrivals).sum()),
        ]);
    }
    out.push_str(&table.render());
    out
}

fn status_text(a: &JobAnalysis) -> String {
    let Some(rows) = &a.status else {
        return "Final status: not recorded (this trace format keeps no job status).\n".to_string();
    };
    let mut out = "Final status\n".to_string();
    let mut table = Table::new(&["status", "jobs", "jobs %", gpu_time_heading(a.work_unit), "GPU-time %"]);
    for r in rows {
        table.row(vec![
            r.status.clone(),
            thousands(r.jobs),
            percent(r.job_share),
            gpu_time(r.gpu_time, a.work_unit),
            percent(r.gpu_time_share),
        ]);
    }
    out.push_str(&table.render());
    out
}

/// The whole text report of one or more request-trace analyses.
pub fn request_analysis_text(analyses: &[RequestAnalysis]) -> String {
    let mut out = String::new();
    for (i, a) in analyses.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&one_request_text(a));
    }
    out
}

fn one_request_text(a: &RequestAnalysis) -> String {
    let mut out = format!("Requests: {}\n", a.source);
    out.push_str(&format!(
        "  {} requests over {}; mean rate {:.2} requests/s; {} prompt and {} output tokens\n",
        thousands(a.requests),
        human_duration(a.span_s),
        a.mean_rate_per_s,
        thousands(a.prompt_tokens.total),
        thousands(a.output_tokens.total),
    ));
    for (reason, rows) in &a.skipped {
        out.push_str(&format!("  skipped {} rows: {reason}\n", thousands(*rows)));
    }
    out.push_str("\nTokens per request\n");
    let tokens = |v: f64| format!("{v:.0}");
    let mean_aware = |v: f64| if v.fract() == 0.0 { tokens(v) } else { format!("{v:.1}") };
    out.push_str(
        &distribution_table(
            &[("prompt", &a.prompt_tokens.stats), ("output", &a.output_tokens.stats)],
            mean_aware,
        )
        .render(),
    );
    out.push_str("\nToken-count histogram (requests per bucket of tokens)\n");
    out.push_str(&histogram_table(&a.prompt_tokens, &a.output_tokens).render());
    out.push('\n');
    out.push_str(&rate_text(a.window_s, &a.rate));
    out
}

fn histogram_table(prompt: &TokenAnalysis, output: &TokenAnalysis) -> Table {
    let mut table = Table::new(&["tokens", "prompt", "prompt %", "output", "output %"]);
    let longest = prompt.histogram.len().max(output.histogram.len());
    let label = |i: usize| {
        prompt.histogram.get(i).or(output.histogram.get(i)).map_or(String::new(), |b| b.label.clone())
    };
    // Both histograms use the same buckets; a 0 bucket exists in one only if that side has zeros.
    let (p_zero, o_zero) = (has_zero(prompt), has_zero(output));
    if p_zero != o_zero {
        return two_histograms(prompt, output);
    }
    for i in 0..longest {
        let cell = |t: &TokenAnalysis| match t.histogram.get(i) {
            Some(b) => (thousands(b.requests), percent(b.share)),
            None => ("0".into(), percent(0.0)),
        };
        let (p, pp) = cell(prompt);
        let (o, op) = cell(output);
        table.row(vec![label(i), p, pp, o, op]);
    }
    table
}

fn has_zero(t: &TokenAnalysis) -> bool {
    t.histogram.first().is_some_and(|b| b.max == 0)
}

/// Histograms whose bucket lists differ: one row per (side, bucket).
fn two_histograms(prompt: &TokenAnalysis, output: &TokenAnalysis) -> Table {
    let mut table = Table::new(&["tokens", "side", "requests", "%"]);
    for (side, t) in [("prompt", prompt), ("output", output)] {
        for b in &t.histogram {
            table.row(vec![b.label.clone(), side.into(), thousands(b.requests), percent(b.share)]);
        }
    }
    table
}

fn rate_text(window_s: f64, rate: &[RateSample]) -> String {
    let mut out = format!("Request rate over time (window {})\n", human_duration(window_s));
    let (group, ranges) = groups(rate.len());
    if group > 1 {
        out.push_str(&format!(
            "  one row per {group} windows ({}); rates are averages over the row\n",
            human_duration(window_s * group as f64)
        ));
    }
    let mut table =
        Table::new(&["from (since first)", "requests", "requests/s", "prompt tokens/s", "output tokens/s"]);
    for (start, end) in ranges {
        let samples = &rate[start..end];
        let secs = window_s * samples.len() as f64;
        let requests: u64 = samples.iter().map(|s| s.requests).sum();
        let prompt: u64 = samples.iter().map(|s| s.prompt_tokens).sum();
        let output: u64 = samples.iter().map(|s| s.output_tokens).sum();
        table.row(vec![
            offset_label(samples[0].start_s),
            thousands(requests),
            format!("{:.2}", requests as f64 / secs),
            format!("{:.0}", prompt as f64 / secs),
            format!("{:.0}", output as f64 / secs),
        ]);
    }
    out.push_str(&table.render());
    out
}

/// Axis unit and divisor for a time series spanning `span_s` seconds: seconds,
/// minutes, hours or days, whichever keeps the numbers readable.
fn time_unit(span_s: f64) -> (&'static str, f64) {
    if span_s <= 600.0 {
        ("s", 1.0)
    } else if span_s <= 3.0 * 3600.0 {
        ("min", 60.0)
    } else if span_s <= 3.0 * 86_400.0 {
        ("h", 3600.0)
    } else {
        ("days", 86_400.0)
    }
}

/// Tenants drawn by name in the per-tenant figure; the rest are summed as `others`.
pub const MAX_FIGURE_TENANTS: usize = 20;

/// The figures of a job-trace analysis, in report order: `(file name, figure, caption)`.
/// Every axis names its quantity and unit.
pub fn job_analysis_figures(a: &JobAnalysis) -> Vec<(String, Figure, String)> {
    let mut figures = Vec::new();
    let unit = a.work_unit;
    let work_axis_unit = match unit {
        WorkUnit::Seconds => "s",
        WorkUnit::Steps => "steps",
    };

    let mut sizes = Figure::new(
        "Jobs and GPU-time by job size",
        Axis::linear("GPUs per job", "GPUs"),
        Axis::linear("share", "% of all jobs or GPU-time"),
    )
    .with_categories(a.by_size.iter().map(|r| r.label.clone()).collect());
    sizes.push(Series::bars("jobs", indexed(a.by_size.iter().map(|r| r.job_share * 100.0))));
    sizes.push(Series::bars("GPU-time", indexed(a.by_size.iter().map(|r| r.gpu_time_share * 100.0))));
    figures.push((
        "sizes".to_string(),
        sizes,
        "Share of jobs and of GPU-time (GPUs x duration) in each job-size class.".to_string(),
    ));

    let mut cdf = Figure::new(
        "Duration CDF",
        Axis::log(if unit == WorkUnit::Seconds { "duration" } else { "work" }, work_axis_unit),
        Axis::linear("fraction of jobs", "0-1").with_range(0.0, 1.0),
    )
    .with_legend(LegendPosition::LowerRight);
    // From 1%: at x = curve[i], at least i% of jobs have a duration <= x; the 0% point
    // (the minimum) would draw a fraction of 0 where the shortest jobs already count.
    let curve: Vec<(f64, f64)> =
        a.duration.curve.iter().enumerate().skip(1).map(|(i, &d)| (d, i as f64 / 100.0)).collect();
    cdf.push(Series::step("jobs", curve));
    figures.push((
        "duration-cdf".to_string(),
        cdf,
        format!(
            "Fraction of jobs whose {} is at most x (nearest-rank quantiles at every percent, 1% to 100%).",
            duration_meaning(unit)
        ),
    ));

    if let Some(w) = &a.wall_clock {
        let mut hours = Figure::new(
            "Arrivals by hour of day",
            Axis::linear("hour of day", "trace clock"),
            Axis::linear("arrivals", "% of jobs"),
        )
        .with_categories(w.by_hour.iter().map(|b| b.label.clone()).collect());
        hours.push(Series::bars("jobs", indexed(w.by_hour.iter().map(|b| b.job_share * 100.0))));
        figures.push((
            "arrivals-by-hour".to_string(),
            hours,
            format!(
                "Share of jobs submitted in each hour of the day, {} to {}.",
                w.first_arrival, w.last_arrival
            ),
        ));
        let mut days = Figure::new(
            "Arrivals by day of week",
            Axis::linear("day of week", ""),
            Axis::linear("arrivals per day", "jobs/day"),
        )
        .with_categories(w.by_weekday.iter().map(|b| b.label.clone()).collect());
        let per_day = w.by_weekday.iter().zip(&w.weekday_occurrences).map(|(b, &n)| {
            if n == 0 {
                0.0
            } else {
                b.jobs as f64 / n as f64
            }
        });
        days.push(Series::bars("jobs", indexed(per_day)));
        figures.push((
            "arrivals-by-weekday".to_string(),
            days,
            "Jobs submitted per occurrence of each weekday between the first and the last arrival."
                .to_string(),
        ));
    }

    let (names, jobs, gpu_time) = tenant_bars(a);
    let mut tenants = Figure::new(
        "Tenants",
        Axis::linear("tenant", ""),
        Axis::linear("share", "% of all jobs or GPU-time"),
    )
    .with_categories(names);
    tenants.push(Series::bars("jobs", indexed(jobs.into_iter())));
    tenants.push(Series::bars("GPU-time", indexed(gpu_time.into_iter())));
    figures.push((
        "tenants".to_string(),
        tenants,
        format!(
            "Each tenant's share of jobs and of GPU-time, largest GPU-time first (at most {MAX_FIGURE_TENANTS} \
             by name; the rest as `others`)."
        ),
    ));

    if let Some(d) = &a.demand {
        let span = d.samples.len() as f64 * d.window_s;
        let (unit_name, divisor) = time_unit(span);
        let mut demand = Figure::new(
            "Demanded GPUs over time",
            Axis::linear("time since time 0", unit_name),
            Axis::linear("demanded GPUs", "GPUs"),
        )
        .with_legend(LegendPosition::UpperLeft);
        let mean: Vec<(f64, f64)> = d.samples.iter().map(|s| (s.start_s / divisor, s.mean_gpus)).collect();
        let peak: Vec<(f64, f64)> =
            d.samples.iter().map(|s| (s.start_s / divisor, s.peak_gpus as f64)).collect();
        demand.push(Series::step("peak in window", peak));
        demand.push(Series::step("mean over window", mean));
        figures.push((
            "demand".to_string(),
            demand,
            format!(
                "GPUs of the jobs that would be running if each started at its arrival and ran for its duration \
                 (no queueing, no capacity limit), per {} window.",
                human_duration(d.window_s)
            ),
        ));
    }
    figures
}

/// `(index, value)` points for a categorical axis.
fn indexed(values: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
    values.enumerate().map(|(i, v)| (i as f64, v)).collect()
}

/// Tenant names and their job and GPU-time shares (%), the tail beyond
/// [`MAX_FIGURE_TENANTS`] summed as `others`.
fn tenant_bars(a: &JobAnalysis) -> (Vec<String>, Vec<f64>, Vec<f64>) {
    let shown = a.by_tenant.len().min(MAX_FIGURE_TENANTS);
    let mut names: Vec<String> = a.by_tenant[..shown].iter().map(|t| t.name.clone()).collect();
    let mut jobs: Vec<f64> = a.by_tenant[..shown].iter().map(|t| t.job_share * 100.0).collect();
    let mut gpu_time: Vec<f64> = a.by_tenant[..shown].iter().map(|t| t.gpu_time_share * 100.0).collect();
    if a.by_tenant.len() > shown {
        let rest = &a.by_tenant[shown..];
        names.push(format!("others ({})", rest.len()));
        jobs.push(rest.iter().map(|t| t.job_share * 100.0).fold(0.0, |s, v| s + v));
        gpu_time.push(rest.iter().map(|t| t.gpu_time_share * 100.0).fold(0.0, |s, v| s + v));
    }
    (names, jobs, gpu_time)
}

/// The HTML report of a job-trace analysis: every figure of [`job_analysis_figures`]
/// beside the tables of the text report.
pub fn job_analysis_html(a: &JobAnalysis) -> Result<String, FigureError> {
    let mut report = HtmlReport::new(&format!("Workload analysis: {}", a.source));
    report.subtitle("cotenant analyze: what the workload asks for, before any scheduling.");
    let mut figures = job_analysis_figures(a).into_iter();
    let mut next_figure = |report: &mut HtmlReport, name: &str| -> Result<(), FigureError> {
        if let Some((_, figure, caption)) = figures.by_ref().find(|(n, _, _)| n == name) {
            report.figure(&figure, &caption)?;
        }
        Ok(())
    };
    report.section("Summary");
    report.preformatted(&summary_text(a));
    report.section("Job sizes");
    next_figure(&mut report, "sizes")?;
    report.table(&size_table(&a.by_size, a.work_unit), "Jobs and GPU-time by job size (GPUs per job).");
    report.table(&size_table(&a.by_size_pow2, a.work_unit), "By power-of-two job size.");
    report.section("Durations");
    next_figure(&mut report, "duration-cdf")?;
    report.table(
        &distribution_table(&[("duration", &a.duration.stats)], |v| duration(v, a.work_unit)),
        &format!("Duration distribution ({}), nearest-rank percentiles.", duration_meaning(a.work_unit)),
    );
    report.table(&cdf_table(a), "Duration CDF at fixed thresholds.");
    report.section("Arrivals");
    if a.wall_clock.is_some() {
        next_figure(&mut report, "arrivals-by-hour")?;
        next_figure(&mut report, "arrivals-by-weekday")?;
    }
    report.preformatted(&arrivals_text(a));
    report.section("Tenants");
    next_figure(&mut report, "tenants")?;
    report.table(&tenant_table(a), "Tenants, by GPU-time.");
    report.section("Demanded GPUs over time");
    if a.demand.is_some() {
        next_figure(&mut report, "demand")?;
    }
    report.preformatted(&demand_text(a));
    report.section("Final status");
    report.preformatted(&status_text(a));
    Ok(report.render())
}

/// The figures of request-trace analyses: per trace, token histograms and the
/// request rate over time; `(file name, figure, caption)`.
pub fn request_analysis_figures(analyses: &[RequestAnalysis]) -> Vec<(String, Figure, String)> {
    let mut figures = Vec::new();
    for (i, a) in analyses.iter().enumerate() {
        let buckets = if a.prompt_tokens.histogram.len() >= a.output_tokens.histogram.len() {
            &a.prompt_tokens.histogram
        } else {
            &a.output_tokens.histogram
        };
        let mut tokens = Figure::new(
            &format!("Tokens per request: {}", short_name(&a.source)),
            Axis::linear("tokens per request", "tokens"),
            Axis::linear("requests", "% of requests"),
        )
        .with_categories(buckets.iter().map(|b| b.label.clone()).collect());
        let shares = |t: &TokenAnalysis| -> Vec<(f64, f64)> {
            buckets
                .iter()
                .enumerate()
                .map(|(k, b)| {
                    let share = t.histogram.iter().find(|h| h.min == b.min).map_or(0.0, |h| h.share);
                    (k as f64, share * 100.0)
                })
                .collect()
        };
        tokens.push(Series::bars("prompt", shares(&a.prompt_tokens)));
        tokens.push(Series::bars("output", shares(&a.output_tokens)));
        figures.push((
            format!("tokens-{i}"),
            tokens,
            "Share of requests whose prompt (or output) token count falls in each power-of-two bucket."
                .to_string(),
        ));

        let span = a.rate.len() as f64 * a.window_s;
        let (unit_name, divisor) = time_unit(span);
        let mut rate = Figure::new(
            &format!("Request rate: {}", short_name(&a.source)),
            Axis::linear("time since the first request", unit_name),
            Axis::linear("request rate", "requests/s"),
        );
        rate.push(Series::step(
            "requests/s",
            a.rate.iter().map(|s| (s.start_s / divisor, s.requests_per_s)).collect(),
        ));
        figures.push((
            format!("rate-{i}"),
            rate,
            format!("Requests arriving per second, averaged over {} windows.", human_duration(a.window_s)),
        ));
    }
    figures
}

/// The file name of a path (for figure titles), or the whole text.
fn short_name(source: &str) -> &str {
    source.rsplit(['/', '\\']).next().unwrap_or(source)
}

/// The HTML report of request-trace analyses.
pub fn request_analysis_html(analyses: &[RequestAnalysis]) -> Result<String, FigureError> {
    let mut report = HtmlReport::new("Request trace analysis");
    report.subtitle("cotenant analyze --requests: prompt and output tokens, and the request rate over time.");
    let figures = request_analysis_figures(analyses);
    for (i, a) in analyses.iter().enumerate() {
        report.section(short_name(&a.source));
        report.preformatted(&format!("{}\n", a.source));
        for (name, figure, caption) in &figures {
            if *name == format!("tokens-{i}") || *name == format!("rate-{i}") {
                report.figure(figure, caption)?;
            }
        }
        report.preformatted(&one_request_text(a));
    }
    Ok(report.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_trace::analyze::{analyze_jobs, JobOptions};
    use cotenant_trace::{parse_trace, Slice, TraceKind};

    /// The five jobs of crates/cli/tests/analyze.rs (hand-computed there and in trace::analyze).
    const FIVE_JOBS: &str = "timestamp,duration,num_gpus,gpu_time,cluster
2017-11-06 01:00:00,1000.0,4,4000.0,b
2017-11-06 00:00:00,100.0,1,100.0,a
2017-11-07 01:00:00,7200.0,16,115200.0,a
2017-11-06 00:30:00,300.0,1,300.0,a
2017-11-06 02:00:00,50.0,8,400.0,b
";

    fn five_jobs() -> JobAnalysis {
        let path = std::path::Path::new("five.csv");
        let workload = parse_trace(TraceKind::Philly, path, FIVE_JOBS.as_bytes().to_vec(), &Slice::all())
            .expect("parses");
        analyze_jobs(&workload, JobOptions { work_unit: WorkUnit::Seconds, window_us: Some(3_600_000_000) })
            .expect("analyzes")
    }

    fn ys(series: &Series) -> Vec<f64> {
        series.points.iter().map(|p| (p.1 * 1e9).round() / 1e9).collect()
    }

    #[test]
    fn figures_hold_the_data() {
        let a = five_jobs();
        let figures = job_analysis_figures(&a);
        let names: Vec<&str> = figures.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["sizes", "duration-cdf", "arrivals-by-hour", "arrivals-by-weekday", "tenants", "demand"]
        );
        let sizes = &figures[0].1;
        assert_eq!(sizes.x_categories.as_deref(), Some(&["1", "2-4", "5-8", ">8"].map(String::from)[..]));
        assert_eq!(sizes.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["jobs", "GPU-time"]);
        assert_eq!(ys(&sizes.series[0]), [40.0, 20.0, 20.0, 20.0]);
        assert_eq!(ys(&sizes.series[1]), [0.333333333, 3.333333333, 0.333333333, 96.0]);
        assert_eq!(sizes.y.title(), "share (% of all jobs or GPU-time)");
        let cdf = &figures[1].1;
        assert_eq!(cdf.series[0].points.len(), 100);
        assert_eq!(cdf.series[0].points[0], (50.0, 0.01));
        assert_eq!(cdf.series[0].points[99], (7200.0, 1.0));
        assert_eq!(cdf.x.title(), "duration (s)");
        let hours = &figures[2].1;
        assert_eq!(hours.x_categories.as_ref().map(Vec::len), Some(24));
        assert_eq!(&ys(&hours.series[0])[..4], [40.0, 40.0, 20.0, 0.0]);
        // Jobs per occurrence of the weekday: Monday 4 (once), Tuesday 1 (once).
        assert_eq!(ys(&figures[3].1.series[0]), [4.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let tenants = &figures[4].1;
        assert_eq!(tenants.x_categories.as_deref(), Some(&["a".to_string(), "b".to_string()][..]));
        assert_eq!(ys(&tenants.series[0]), [60.0, 40.0]);
        let demand = &figures[5].1;
        assert_eq!(demand.y.title(), "demanded GPUs (GPUs)");
        assert_eq!(demand.x.title(), "time since time 0 (h)");
        assert_eq!(demand.series.iter().map(|s| s.points.len()).collect::<Vec<_>>(), [26, 26]);
        assert_eq!(demand.series[0].points[25], (25.0, 16.0));
        assert_eq!(demand.series[1].points[1], (1.0, 4000.0 / 3600.0));
    }

    #[test]
    fn html_has_every_figure_and_table() {
        let html = job_analysis_html(&five_jobs()).expect("renders");
        assert_eq!(html.matches("<figure").count(), 6);
        assert_eq!(html.matches("<svg").count(), 6);
        for label in
            ["demanded GPUs (GPUs)", "duration (s)", "&gt;8", "Arrivals by day of week", "peak in window"]
        {
            assert!(html.contains(label), "{label} missing");
        }
        assert!(html.contains("Final status: not recorded"));
        assert_eq!(job_analysis_html(&five_jobs()).expect("renders"), html, "deterministic");
    }

    #[test]
    fn tenant_figure_folds_the_tail_into_others() {
        let mut a = five_jobs();
        let template = a.by_tenant[1].clone();
        a.by_tenant = (0..25)
            .map(|i| cotenant_trace::analyze::TenantRow {
                name: format!("t{i:02}"),
                job_share: 0.04,
                ..template.clone()
            })
            .collect();
        let (names, jobs, _) = tenant_bars(&a);
        assert_eq!(names.len(), MAX_FIGURE_TENANTS + 1);
        assert_eq!(names.last().map(String::as_str), Some("others (5)"));
        assert!((jobs[MAX_FIGURE_TENANTS] - 20.0).abs() < 1e-9);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(82_247), "82,247");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn time_labels() {
        assert_eq!(offset_label(0.0), "00:00:00");
        assert_eq!(offset_label(3661.5), "01:01:01");
        assert_eq!(offset_label(2.25 * 86_400.0), "2d 06:00:00");
        assert_eq!(threshold_label(60.0), "1m");
        assert_eq!(threshold_label(7200.0), "2h");
        assert_eq!(threshold_label(604_800.0), "7d");
        assert_eq!(threshold_label(90.0), "90s");
    }

    #[test]
    fn long_series_are_grouped_into_at_most_the_row_limit() {
        let (group, ranges) = groups(168);
        assert_eq!(group, 6);
        assert_eq!(ranges.len(), 28);
        assert_eq!(ranges.last(), Some(&(162, 168)));
        let (group, ranges) = groups(5);
        assert_eq!((group, ranges.len()), (1, 5));
        // 344 ten-second windows: groups of 15 (2.5 minutes), 23 rows.
        let (group, ranges) = groups(344);
        assert_eq!((group, ranges.len()), (15, 23));
        // Beyond the round sizes: the smallest group that fits.
        let (group, ranges) = groups(100_000);
        assert_eq!((group, ranges.len()), (3572, 28));
    }
}
