//! Serving sections of the HTML report: latency distributions per tenant and
//! scheduler, VTC's service difference over time and a table of every metric for
//! a saved serve-sim run ([`serve_run_sections`]); SLO attainment and tail latency
//! versus load for a serve sweep ([`serve_sweep_sections`]).
//!
//! Figures only lay out what `cotenant_serve` computed and the saved document or
//! the sweep holds; nothing is measured here.

use serde_json::Value;

use crate::figure::{Axis, Figure, FigureError, LegendPosition, Series};
use crate::html::{slug, HtmlReport};
use crate::serve_saved::{
    read_saved_results, read_serve_sweep, SavedError, SavedServeResults, SavedServeRun, ServeSweepRow,
    Sketch, TenantSketches, SERVE_RESULTS_KIND, SWEEP_KIND,
};
use crate::table::Table;

/// Most tenants drawn in per-tenant figures (the ones with the most requests);
/// every tenant is still in the table.
pub const MAX_TENANT_FIGURES: usize = 8;
/// Most points per series in a figure over time: longer runs of windows are drawn as
/// the maximum over consecutive windows, so no peak is lost.
pub const MAX_TIME_POINTS: usize = 2000;

/// A latency measure of the saved document, as figures name it.
struct Measure {
    name: &'static str,
    /// File-name stem of its figures.
    stem: &'static str,
    definition: &'static str,
    pick: fn(&SavedServeRun) -> &TenantSketches,
}

const MEASURES: [Measure; 3] = [
    Measure {
        name: "TTFT",
        stem: "ttft",
        definition: "time to first token: arrival to the first output token, per finished request",
        pick: |run| &run.ttft_ms,
    },
    Measure {
        name: "TBT per request (TPOT)",
        stem: "tpot",
        definition: "mean time between output tokens of each finished request with at least two output \
                     tokens, (E2E - TTFT) / (output tokens - 1): the figure the SLO's TBT bound is checked against",
        pick: |run| &run.tpot_ms,
    },
    Measure {
        name: "E2E",
        stem: "e2e",
        definition: "end-to-end latency: arrival to the last output token, per finished request",
        pick: |run| &run.e2e_ms,
    },
];

/// A figure's file stem: `name`, after the input's prefix (slugged) when there is one,
/// as the sim and sweep sections name theirs.
fn figure_name(prefix: &str, name: &str) -> String {
    let stem = slug(prefix);
    if stem.is_empty() {
        name.to_string()
    } else {
        format!("{stem}-{name}")
    }
}

/// A CDF as a step series: the value at each quantile level, `(value, level)`.
fn cdf_points(sketch: &Sketch, levels: &[f64]) -> Vec<(f64, f64)> {
    sketch.values.iter().copied().zip(levels.iter().copied()).collect()
}

fn cdf_figure(title: &str, measure: &str) -> Figure {
    Figure::new(
        title,
        Axis::log(measure, "ms"),
        Axis::linear("fraction of requests", "0-1").with_range(0.0, 1.0),
    )
    .with_legend(LegendPosition::LowerRight)
}

/// Tenants drawn one figure each: up to [`MAX_TENANT_FIGURES`], most requests first
/// (ties in the workload's order).
fn drawn_tenants(results: &SavedServeResults) -> Vec<usize> {
    let requests = |t: usize| results.runs.first().map_or(0, |run| run.ttft_ms.tenants[t].count);
    let mut order: Vec<usize> = (0..results.tenants.len()).collect();
    order.sort_by_key(|&t| std::cmp::Reverse(requests(t)));
    order.truncate(MAX_TENANT_FIGURES);
    order.sort_unstable();
    order
}

/// `stem` made safe as a file name: letters, digits, `-` and `_` only.
fn file_stem(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The latency CDFs: per measure, one figure for all tenants and one per tenant,
/// series = schedulers; then every token gap (TBT), series = schedulers.
fn latency_figures(
    report: &mut HtmlReport,
    results: &SavedServeResults,
    prefix: &str,
) -> Result<(), FigureError> {
    let levels = &results.quantiles;
    let tenants = drawn_tenants(results);
    for measure in &MEASURES {
        report.subsection(&format!("{} distribution", measure.name));
        report.paragraph(&format!("{}: {}.", measure.name, measure.definition));
        let mut all = cdf_figure(&format!("{} CDF, all tenants", measure.name), measure.name);
        for run in &results.runs {
            all.push(Series::step(&run.scheduler, cdf_points(&(measure.pick)(run).all, levels)));
        }
        report.named_figure(
            &figure_name(prefix, &format!("{}-all", measure.stem)),
            all,
            &format!("Fraction of finished requests (all tenants) with a {} of at most x ms, one line per scheduler.", measure.name),
        )?;
        for &t in &tenants {
            let name = &results.tenants[t];
            let mut figure = cdf_figure(&format!("{} CDF, tenant {name}", measure.name), measure.name);
            for run in &results.runs {
                figure
                    .push(Series::step(&run.scheduler, cdf_points(&(measure.pick)(run).tenants[t], levels)));
            }
            report.named_figure(
                &figure_name(prefix, &format!("{}-tenant-{}", measure.stem, file_stem(name))),
                figure,
                &format!(
                    "Fraction of tenant {name}'s finished requests (weight {}) with a {} of at most x ms, one line per scheduler.",
                    results.weights[t], measure.name
                ),
            )?;
        }
    }
    if results.tenants.len() > tenants.len() {
        report.note(&format!(
            "Per-tenant figures show the {} tenants with the most requests of {}; the table lists every tenant.",
            tenants.len(),
            results.tenants.len()
        ));
    }
    report.subsection("TBT distribution (every token gap)");
    let mut tbt = cdf_figure("TBT CDF, every token gap, all tenants", "TBT");
    tbt.y = Axis::linear("fraction of token gaps", "0-1").with_range(0.0, 1.0);
    for run in &results.runs {
        tbt.push(Series::step(&run.scheduler, cdf_points(&run.tbt_ms, levels)));
    }
    report.named_figure(
        &figure_name(prefix, "tbt-all"),
        tbt,
        "Fraction of gaps between consecutive output tokens (every request, every tenant) of at most x ms, one line \
         per scheduler. The simulator records token gaps in one histogram (values within 1.6%), not per tenant.",
    )?;
    Ok(())
}

/// `(x, y)` points of a series over windows, at most [`MAX_TIME_POINTS`]: when there are
/// more windows, each point is the maximum over a run of consecutive windows, at the
/// run's last window.
fn over_time(values: &[f64], window_s: f64) -> Vec<(f64, f64)> {
    let per_point = values.len().div_ceil(MAX_TIME_POINTS).max(1);
    values
        .chunks(per_point)
        .enumerate()
        .map(|(i, chunk)| {
            let last = i * per_point + chunk.len();
            (last as f64 * window_s, chunk.iter().copied().fold(0.0, f64::max))
        })
        .collect()
}

/// The caption's note when a series of `windows` is drawn coarser than one point per window.
fn coarse_note(windows: usize) -> String {
    if windows > MAX_TIME_POINTS {
        format!(" Each point is the maximum over {} consecutive windows.", windows.div_ceil(MAX_TIME_POINTS))
    } else {
        String::new()
    }
}

/// VTC's service difference over time, series = schedulers.
fn service_figure(
    report: &mut HtmlReport,
    results: &SavedServeResults,
    prefix: &str,
) -> Result<(), FigureError> {
    report.subsection("Service difference over time");
    let window_s = results.runs.first().map_or(1.0, |run| run.window_s);
    let mut figure = Figure::new(
        "Service difference between backlogged tenants",
        Axis::linear("time (end of window)", "s"),
        Axis::linear("accumulated service difference", "tokens per weight"),
    )
    .with_legend(LegendPosition::UpperLeft);
    let mut windows = 0;
    for run in &results.runs {
        let values: Vec<f64> = run.service_difference.iter().map(|d| d.unwrap_or(0.0)).collect();
        windows = windows.max(values.len());
        figure.push(Series::step(&run.scheduler, over_time(&values, run.window_s)));
    }
    let coarse = coarse_note(windows);
    report.named_figure(
        &figure_name(prefix, "service-difference"),
        figure,
        &format!(
            "VTC's measure, per {window_s} s window: the largest minus the smallest service / weight (service = prompt \
             tokens computed + 2 x output tokens) accumulated by the tenants backlogged through every window since that \
             set of tenants last changed; 0 where fewer than two tenants were backlogged. Its maximum is the summary's \
             max_service_difference.{coarse}"
        ),
    )?;
    Ok(())
}

/// KV-cache utilization over time, series = schedulers (mean and max per window); nothing
/// for documents without it.
fn kv_figure(report: &mut HtmlReport, results: &SavedServeResults, prefix: &str) -> Result<(), FigureError> {
    if results.runs.iter().all(|run| run.kv_max.is_empty()) {
        return Ok(());
    }
    report.subsection("KV-cache utilization over time");
    let window_s = results.runs.first().map_or(1.0, |run| run.window_s);
    let mut figure = Figure::new(
        "KV-cache blocks in use / capacity",
        Axis::linear("time (end of window)", "s"),
        Axis::linear("KV utilization", "0-1").with_range(0.0, 1.0),
    )
    .with_legend(LegendPosition::UpperLeft);
    let mut windows = 0;
    for run in &results.runs {
        let means: Vec<f64> = run.kv_mean.iter().map(|m| m.unwrap_or(0.0)).collect();
        windows = windows.max(means.len());
        figure.push(Series::step(&format!("{} mean", run.scheduler), over_time(&means, run.window_s)));
        figure.push(Series::step(&format!("{} max", run.scheduler), over_time(&run.kv_max, run.window_s)));
    }
    let coarse = coarse_note(windows);
    report.named_figure(
        &figure_name(prefix, "kv-utilization"),
        figure,
        &format!(
            "Per {window_s} s window, over all replicas: KV-cache blocks in use / the replica's capacity at the start \
             of each iteration that starts in the window, the mean weighted by iteration length and the maximum; 0 \
             where no iteration started (idle). Their run-wide values are the summary's kv_utilization_mean and \
             kv_utilization_max.{coarse}"
        ),
    )?;
    Ok(())
}

/// `prefix.key` paths and values of every number and boolean in `value`; tenants
/// (an array of objects with a name) are keyed by name.
fn flatten(value: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    let join = |key: &str| if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                flatten(field, &join(key), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let key =
                    item.get("name").and_then(Value::as_str).map_or_else(|| i.to_string(), str::to_string);
                flatten(item, &format!("{prefix}[{key}]"), out);
            }
        }
        Value::Number(number) => {
            out.push((prefix.to_string(), format_metric(number.as_f64().unwrap_or(f64::NAN))))
        }
        Value::Bool(flag) => out.push((prefix.to_string(), flag.to_string())),
        Value::Null => out.push((prefix.to_string(), "-".to_string())),
        Value::String(_) => {}
    }
}

/// Integers as integers, other numbers with four significant digits.
fn format_metric(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else if value.abs() >= 1000.0 {
        format!("{value:.1}")
    } else {
        format!("{:.4}", value).trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Every metric of every run: one row per metric (its JSON path in the summary),
/// one column per scheduler.
pub fn serve_metric_table(results: &SavedServeResults) -> Table {
    let mut header = vec!["metric".to_string()];
    header.extend(results.runs.iter().map(|run| run.scheduler.clone()));
    let mut table = Table { header, rows: Vec::new() };
    let columns: Vec<Vec<(String, String)>> = results
        .runs
        .iter()
        .map(|run| {
            let mut cells = Vec::new();
            flatten(&run.summary, "", &mut cells);
            cells
        })
        .collect();
    let Some(first) = columns.first() else { return table };
    for (row, (metric, _)) in first.iter().enumerate() {
        let mut cells = vec![metric.clone()];
        cells.extend(
            columns
                .iter()
                .map(|c| c.get(row).filter(|(m, _)| m == metric).map_or("-".into(), |(_, v)| v.clone())),
        );
        table.row(cells);
    }
    table
}

/// The serving sections of one saved serve-sim document: latency CDFs per tenant and
/// scheduler, service difference over time, every metric. `label` names the
/// document (its file) in headings; a non-empty `prefix` starts its figures' file names.
pub fn serve_run_sections(
    report: &mut HtmlReport,
    results: &SavedServeResults,
    label: &str,
    prefix: &str,
) -> Result<(), FigureError> {
    report.section(&format!("Serving: {label}"));
    let schedulers: Vec<&str> = results.runs.iter().map(|run| run.scheduler.as_str()).collect();
    let config = &results.config;
    let text = |key: &str| {
        config.get(key).map_or_else(String::new, |v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
    };
    report.key_values(&[
        (
            "workload",
            format!(
                "{} ({} requests, {:.2} req/s)",
                results.source, results.requests, results.request_rate_per_s
            ),
        ),
        (
            "tenants",
            results
                .tenants
                .iter()
                .zip(&results.weights)
                .map(|(t, w)| format!("{t} (weight {w})"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "deployment",
            format!(
                "{} on {} replica(s) of {} x {}, router {}, KV {} tokens per replica",
                text("model"),
                text("replicas"),
                text("tensor_parallel"),
                text("gpu"),
                text("router"),
                text("kv_capacity_tokens")
            ),
        ),
        ("SLO", format!("TTFT <= {} ms and TPOT <= {} ms", results.slo_ttft_ms, results.slo_tbt_ms)),
        ("schedulers", schedulers.join(", ")),
    ]);
    if results.runs.is_empty() {
        report.note("The document holds no runs.");
        return Ok(());
    }
    latency_figures(report, results, prefix)?;
    service_figure(report, results, prefix)?;
    kv_figure(report, results, prefix)?;
    report.subsection("Every serving metric");
    report.table(
        &serve_metric_table(results),
        "Each run's summary as serve-sim --json prints it: latencies in ms (p50/p90/p99/mean), rates per second, \
         fractions 0-1, service in VTC units (prompt + 2 x output tokens); tenants[NAME] are per-tenant figures.",
    );
    Ok(())
}

/// Mean, minimum and maximum over seeds of `metric` per load, for one scheduler.
fn over_seeds(rows: &[&ServeSweepRow], metric: &str) -> Vec<(f64, f64, f64, f64)> {
    let mut loads: Vec<f64> = rows.iter().map(|r| r.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    loads
        .into_iter()
        .filter_map(|load| {
            let values: Vec<f64> = rows
                .iter()
                .filter(|r| r.load == load)
                .filter_map(|r| r.metric(metric))
                .filter(|v| v.is_finite())
                .collect();
            if values.is_empty() {
                return None;
            }
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let (low, high) =
                values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
            Some((load, mean, low, high))
        })
        .collect()
}

/// One figure of `metric` against load: per scheduler, a line through the mean over
/// seeds and, with several seeds, a band from the lowest to the highest seed.
fn versus_load(
    schedulers: &[(String, Vec<&ServeSweepRow>)],
    metric: &str,
    scale: f64,
    title: &str,
    y: Axis,
) -> Figure {
    let mut figure = Figure::new(title, Axis::linear("arrival rate", "x trace rate"), y);
    for (i, (name, rows)) in schedulers.iter().enumerate() {
        let points = over_seeds(rows, metric);
        if rows.iter().any(|r| r.seed != rows[0].seed) {
            let band = points.iter().map(|&(x, _, low, high)| (x, low * scale, high * scale)).collect();
            figure.push(Series::band(&format!("{name} (seed range)"), band).with_color(i));
        }
        figure.push(
            Series::line(name, points.iter().map(|&(x, mean, _, _)| (x, mean * scale)).collect())
                .with_color(i),
        );
    }
    figure
}

/// The serving sections of a serve sweep (`results.json` with mode `serve`): SLO
/// attainment, TTFT p99 and E2E p99 versus load per scheduler, and a table of the
/// means over seeds. `label` names the sweep in headings; `prefix` starts figure names.
pub fn serve_sweep_sections(
    report: &mut HtmlReport,
    rows: &[ServeSweepRow],
    label: &str,
    prefix: &str,
) -> Result<(), FigureError> {
    report.section(&format!("Serving sweep: {label}"));
    let mut schedulers: Vec<(String, Vec<&ServeSweepRow>)> = Vec::new();
    for row in rows {
        match schedulers.iter_mut().find(|(name, _)| *name == row.scheduler) {
            Some((_, rows)) => rows.push(row),
            None => schedulers.push((row.scheduler.clone(), vec![row])),
        }
    }
    let seeds = {
        let mut seeds: Vec<u64> = rows.iter().map(|r| r.seed).collect();
        seeds.sort_unstable();
        seeds.dedup();
        seeds.len()
    };
    report.paragraph(&format!(
        "{} runs: {} scheduler(s) x loads x {seeds} seed(s). Load scales the arrival rate (2 = twice as many requests per \
         second as the trace). Lines are means over seeds; shaded bands span the lowest to the highest seed.",
        rows.len(),
        schedulers.len()
    ));
    let attainment = versus_load(
        &schedulers,
        "slo_attainment",
        1.0,
        "SLO attainment versus load",
        Axis::linear("SLO attainment", "0-1").with_range(0.0, 1.0),
    )
    .with_legend(LegendPosition::LowerLeft);
    report.named_figure(
        &figure_name(prefix, "slo-attainment-vs-load"),
        attainment,
        "Fraction of requests that met both the TTFT and the TPOT objective, per scheduler, against the arrival-rate scale.",
    )?;
    for (metric, name, stem) in [("ttft_p99_s", "TTFT p99", "ttft-p99"), ("e2e_p99_s", "E2E p99", "e2e-p99")]
    {
        let figure =
            versus_load(&schedulers, metric, 1e3, &format!("{name} versus load"), Axis::log(name, "ms"))
                .with_legend(LegendPosition::UpperLeft);
        report.named_figure(
            &figure_name(prefix, &format!("{stem}-vs-load")),
            figure,
            &format!("99th percentile of {name} over finished requests, per scheduler, against the arrival-rate scale."),
        )?;
    }
    report.subsection("Every serving metric, mean over seeds");
    report.table(&sweep_metric_table(&schedulers), "One row per scheduler and load; each value is the mean over seeds of the sweep's column (seconds as _s, fractions 0-1).");
    Ok(())
}

/// One row per (scheduler, load): the mean over seeds of every metric column.
fn sweep_metric_table(schedulers: &[(String, Vec<&ServeSweepRow>)]) -> Table {
    let mut metrics: Vec<&str> = Vec::new();
    for (_, rows) in schedulers {
        for row in rows {
            for name in row.metrics.keys() {
                if !metrics.contains(&name.as_str()) {
                    metrics.push(name);
                }
            }
        }
    }
    let mut header = vec!["scheduler".to_string(), "load".to_string(), "seeds".to_string()];
    header.extend(metrics.iter().map(|m| m.to_string()));
    let mut table = Table { header, rows: Vec::new() };
    for (name, rows) in schedulers {
        let columns: Vec<Vec<(f64, f64, f64, f64)>> = metrics.iter().map(|m| over_seeds(rows, m)).collect();
        let mut loads: Vec<f64> = rows.iter().map(|r| r.load).collect();
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        for load in loads {
            let seeds = rows.iter().filter(|r| r.load == load).count();
            let mut cells = vec![name.clone(), format_metric(load), seeds.to_string()];
            cells.extend(
                columns
                    .iter()
                    .map(|c| c.iter().find(|p| p.0 == load).map_or("-".into(), |p| format_metric(p.1))),
            );
            table.row(cells);
        }
    }
    table
}

/// A whole report for one serve-sim run (`cotenant serve-sim --report out.html`): the
/// HTML and its figures (named as `cotenant report` names a single input's).
pub fn serve_report_html(
    results: &SavedServeResults,
    title: &str,
    subtitle: &str,
) -> Result<(String, Vec<(String, Figure)>), FigureError> {
    let mut report = HtmlReport::new(title);
    report.subtitle(subtitle);
    serve_run_sections(&mut report, results, &results.source, "")?;
    Ok((report.render(), report.named_figures().to_vec()))
}

/// Why a serving input could not be reported on.
#[derive(Debug, thiserror::Error)]
pub enum ServeReportError {
    #[error(transparent)]
    Read(#[from] SavedError),
    #[error(transparent)]
    Figure(#[from] FigureError),
}

/// Whether `value` is an input the serving sections report on: a saved serve-sim
/// document (kind `cotenant-serve-results`) or a serve sweep (kind `cotenant-sweep`,
/// mode `serve`).
pub fn is_serve_input(value: &Value) -> bool {
    let field = |key: &str| value.get(key).and_then(Value::as_str);
    field("kind") == Some(SERVE_RESULTS_KIND)
        || (field("kind") == Some(SWEEP_KIND) && field("mode") == Some("serve"))
}

/// The serving sections of one input file (see [`is_serve_input`]), read from its
/// parsed JSON: [`serve_run_sections`] for a saved serve-sim document,
/// [`serve_sweep_sections`] for a serve sweep. `file` names it in errors and
/// headings; a non-empty `prefix` starts its figures' file names.
pub fn serve_report_sections(
    report: &mut HtmlReport,
    file: &str,
    value: &Value,
    prefix: &str,
) -> Result<(), ServeReportError> {
    if value.get("kind").and_then(Value::as_str) == Some(SERVE_RESULTS_KIND) {
        let results = read_saved_results(file, value)?;
        Ok(serve_run_sections(report, &results, file, prefix)?)
    } else {
        let rows = read_serve_sweep(file, value)?;
        Ok(serve_sweep_sections(report, &rows, file, prefix)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::PALETTE;
    use serde_json::json;

    use crate::svg_read::{hex, polylines as stroked, svgs, texts};

    /// The point count of each polyline stroked in palette color `index`.
    fn polylines(svg: &str, index: usize) -> Vec<usize> {
        stroked(svg, &hex(PALETTE[index])).iter().map(|p| p.points.len()).collect()
    }

    /// Two schedulers x three loads x two seeds; SLO attainment by hand so that the
    /// means over seeds are fcfs 1, 0.5, 0.375 and vtc 1, 0.75, 0.5 (exact in binary).
    fn sweep() -> Value {
        let mut rows = Vec::new();
        let attainment = [
            ("fcfs", [[1.0, 1.0], [0.75, 0.25], [0.5, 0.25]]),
            ("vtc", [[1.0, 1.0], [1.0, 0.5], [0.75, 0.25]]),
        ];
        for (scheduler, by_load) in attainment {
            for (load, seeds) in [0.5, 1.0, 2.0].iter().zip(by_load) {
                for (seed, value) in [1, 2].iter().zip(seeds) {
                    rows.push(json!({
                        "cell": rows.len(), "kind": "serve", "policy": scheduler, "load": load,
                        "load_mode": "rate", "seed": seed, "options": "", "requests": 100,
                        "slo_attainment": value, "ttft_p99_s": 0.25 * load, "e2e_p99_s": 2.0 * load,
                        "tbt_p99_s": null,
                    }));
                }
            }
        }
        json!({"kind": "cotenant-sweep", "mode": "serve", "rows": rows})
    }

    #[test]
    fn a_serve_sweep_draws_attainment_and_tails_against_load() {
        let mut report = HtmlReport::new("sweep");
        serve_report_sections(&mut report, "sweep/results.json", &sweep(), "s").unwrap();
        let figures = report.named_figures();
        let names: Vec<&str> = figures.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["s-slo-attainment-vs-load", "s-ttft-p99-vs-load", "s-e2e-p99-vs-load"]);
        let attainment = &figures[0].1;
        let series: Vec<&str> = attainment.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(series, ["fcfs (seed range)", "fcfs", "vtc (seed range)", "vtc"]);
        assert_eq!(attainment.series[1].points, [(0.5, 1.0), (1.0, 0.5), (2.0, 0.375)]);
        assert_eq!(attainment.series[0].upper, [1.0, 0.75, 0.5]);
        assert_eq!(attainment.series[0].points, [(0.5, 1.0), (1.0, 0.25), (2.0, 0.25)]);
        assert_eq!(attainment.y_range(), (0.0, 1.0));
        // TTFT p99 in ms: 0.25 s x load.
        let ttft = &figures[1].1;
        assert_eq!(ttft.series[3].points, [(0.5, 125.0), (1.0, 250.0), (2.0, 500.0)]);

        let html = report.render();
        let svg = svgs(&html);
        assert_eq!(svg.len(), 3);
        let labels = texts(svg[0]);
        for expected in [
            "SLO attainment versus load",
            "arrival rate (x trace rate)",
            "SLO attainment (0-1)",
            "fcfs",
            "vtc",
            "vtc (seed range)",
        ] {
            assert!(labels.iter().any(|t| t == expected), "{expected} not in {labels:?}");
        }
        // One mean line of 3 loads per scheduler, in the scheduler's color.
        assert_eq!(polylines(svg[0], 0), [3]);
        assert_eq!(polylines(svg[0], 1), [3]);
        assert!(texts(svg[1]).iter().any(|t| t == "TTFT p99 (ms)"));
        // The table: means over seeds; a null column shows as "-".
        assert!(html.contains(
            "<tr><th scope=\"row\">fcfs</th><td>1</td><td>2</td><td>2</td><td>100</td><td>0.5</td><td>-</td><td>0.25</td></tr>"
        ));
        assert!(html.contains("<td>0.375</td>"));
    }

    #[test]
    fn serve_sweep_errors_name_the_row_and_field() {
        let mut value = sweep();
        value["rows"][3]["load"] = json!("high");
        let error = serve_report_sections(&mut HtmlReport::new("x"), "r.json", &value, "").unwrap_err();
        assert_eq!(error.to_string(), "r.json: field rows[3].load: expected a finite number");
        value["mode"] = json!("sim");
        assert!(!is_serve_input(&value));
        let error = serve_report_sections(&mut HtmlReport::new("x"), "r.json", &value, "").unwrap_err();
        assert_eq!(error.to_string(), "r.json: field mode: `sim`: serving sections read serve sweeps only");
    }

    #[test]
    fn long_runs_of_windows_keep_their_peaks() {
        let values: Vec<f64> = (0..5000).map(|i| if i == 4321 { 7.0 } else { 1.0 }).collect();
        let points = over_time(&values, 2.0);
        assert_eq!(points.len(), 1667);
        assert_eq!(points.iter().map(|p| p.1).fold(0.0, f64::max), 7.0);
        assert_eq!(points.last(), Some(&(10_000.0, 1.0)));
        assert_eq!(over_time(&[1.0, 2.0], 5.0), [(5.0, 1.0), (10.0, 2.0)]);
    }

    #[test]
    fn metrics_flatten_by_path_and_tenant_name() {
        let mut cells = Vec::new();
        flatten(
            &json!({"ttft_ms": {"p50": 1.5}, "tenants": [{"name": "a", "requests": 3}], "healthy": true, "x": null}),
            "",
            &mut cells,
        );
        let expected =
            [("healthy", "true"), ("tenants[a].requests", "3"), ("ttft_ms.p50", "1.5"), ("x", "-")];
        assert_eq!(cells, expected.map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(format_metric(12345.678), "12345.7");
        assert_eq!(format_metric(0.123456), "0.1235");
    }
}
