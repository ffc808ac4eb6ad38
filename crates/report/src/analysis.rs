//! Rendering `cotenant analyze` results (`trace::analyze`): aligned text tables,
//! JSON, and the HTML report. The numbers are computed in `cotenant_trace::analyze`;
//! this module only lays them out.

use serde_json::{json, Value};

use cotenant_trace::analyze::{
    DemandAnalysis, Distribution, JobAnalysis, RateSample, RequestAnalysis, SizeRow, TokenAnalysis, WorkUnit,
};

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
    } else if whole % 86_400 == 0 {
        format!("{}d", whole / 86_400)
    } else if whole % 3600 == 0 {
        format!("{}h", whole / 3600)
    } else if whole % 60 == 0 {
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
        if i > 0 && (digits.len() - i) % 3 == 0 {
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
        "Arrivals by hour of day (the trace's own clock, no time zone; {} to {})\n",
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
        return "Final status: not recorded in this trace (no status column survives in the format).\n"
            .to_string();
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

/// The HTML report of a job-trace analysis (placeholder until the figure API lands).
pub fn job_analysis_html(a: &JobAnalysis) -> Result<String, String> {
    Ok(format!("<pre>{}</pre>", job_analysis_text(a)))
}

/// The HTML report of request-trace analyses (placeholder until the figure API lands).
pub fn request_analysis_html(a: &[RequestAnalysis]) -> Result<String, String> {
    Ok(format!("<pre>{}</pre>", request_analysis_text(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
