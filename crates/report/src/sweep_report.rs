//! The report sections of a sweep's results.json ([`SweepResults`]): mean and
//! p99 JCT versus load per policy, with the spread over seeds, and a table.
//!
//! Rows group into series by policy and options (a policy swept with two option
//! sets is two series) and, within a series, by load; the seeds of one load give
//! the spread (min to max) drawn as a band around the mean over seeds.

use std::collections::BTreeMap;

use crate::figure::{Axis, Figure, FigureError, Series};
use crate::html::{slug, HtmlReport};
use crate::results::{SweepResults, SweepRow};
use crate::table::{human_duration, Table};

/// One series' name: the policy, with its options in brackets if any.
pub fn series_name(row: &SweepRow) -> String {
    if row.options.is_empty() {
        row.policy.clone()
    } else {
        format!("{} [{}]", row.policy, row.options)
    }
}

/// Mean, min and max of a metric over the seeds of one (series, load).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Seeds with a value (null metrics are left out).
    pub seeds: usize,
}

impl Spread {
    /// Over the values that are present; `None` if none is.
    pub fn of(values: impl Iterator<Item = Option<f64>>) -> Option<Spread> {
        let values: Vec<f64> = values.flatten().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        Some(Spread {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            seeds: values.len(),
        })
    }
}

/// One series' rows by load (ascending): `[(load, rows of its seeds)]`.
pub type ByLoad<'a> = Vec<(f64, Vec<&'a SweepRow>)>;

/// Rows grouped by load mode, then series (in first-appearance order), then load
/// (ascending): `(mode, [(series, by load)])`.
pub type Grouped<'a> = Vec<(String, Vec<(String, ByLoad<'a>)>)>;

/// Groups `rows` as [`Grouped`] describes; series keep the order they first
/// appear in (grid order), loads are sorted.
pub fn group(rows: &[SweepRow]) -> Grouped<'_> {
    let mut modes: Grouped<'_> = Vec::new();
    for row in rows {
        let mode = match modes.iter().position(|(m, _)| *m == row.load_mode) {
            Some(i) => i,
            None => {
                modes.push((row.load_mode.clone(), Vec::new()));
                modes.len() - 1
            }
        };
        let series = &mut modes[mode].1;
        let name = series_name(row);
        let index = match series.iter().position(|(s, _)| *s == name) {
            Some(i) => i,
            None => {
                series.push((name, Vec::new()));
                series.len() - 1
            }
        };
        let loads = &mut series[index].1;
        match loads.iter_mut().find(|(l, _)| *l == row.load) {
            Some((_, rows)) => rows.push(row),
            None => loads.push((row.load, vec![row])),
        }
    }
    for (_, series) in &mut modes {
        for (_, loads) in series.iter_mut() {
            loads.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, rows) in loads.iter_mut() {
                rows.sort_by_key(|r| (r.seed, r.cell));
            }
        }
    }
    modes
}

fn load_axis(mode: &str) -> Axis {
    match mode {
        "rate" => Axis::linear("load (arrival rate multiplier)", "x"),
        "cluster" => Axis::linear("load (cluster shrink factor)", "x"),
        other => Axis::linear(&format!("load ({other})"), "x"),
    }
}

/// A metric versus load: per series a band (min to max over seeds) and a line
/// through the means, in the series' color.
pub fn metric_vs_load(
    title: &str,
    mode: &str,
    series: &[(String, ByLoad<'_>)],
    metric: &str,
    y: Axis,
) -> Figure {
    let mut figure = Figure::new(title, load_axis(mode), y);
    for (color, (name, loads)) in series.iter().enumerate() {
        let spreads: Vec<(f64, Spread)> = loads
            .iter()
            .filter_map(|(load, rows)| Some((*load, Spread::of(rows.iter().map(|r| r.metric(metric)))?)))
            .collect();
        let band = spreads.iter().map(|(l, s)| (*l, s.min, s.max)).collect();
        figure.push(Series::band(&format!("{name} (seed min-max)"), band).with_color(color));
        figure
            .push(Series::line(name, spreads.iter().map(|(l, s)| (*l, s.mean)).collect()).with_color(color));
    }
    figure
}

/// Adds one sweep's sections to `report`; `label` names the input in headings,
/// `prefix` (may be empty) starts its figures' names.
pub fn add_sweep_sections(
    report: &mut HtmlReport,
    sweep: &SweepResults,
    label: &str,
    prefix: &str,
) -> Result<(), FigureError> {
    let stem = slug(prefix);
    let name = |figure: &str| if stem.is_empty() { figure.to_string() } else { format!("{stem}-{figure}") };
    report.section(&format!("Sweep: {label}"));
    let seeds: std::collections::BTreeSet<u64> = sweep.rows.iter().map(|r| r.seed).collect();
    report.key_values(&[
        ("mode", sweep.mode.clone()),
        ("cells", sweep.rows.len().to_string()),
        ("seeds", seeds.len().to_string()),
    ]);
    let unhealthy = sweep.rows.iter().filter(|r| r.metric("healthy") == Some(0.0)).count();
    if unhealthy > 0 {
        report.note(&format!(
            "WARNING: {unhealthy} of {} cells are unhealthy (column healthy = false): their runs stopped at a \
             limit or left jobs unfinished; see the table.",
            sweep.rows.len()
        ));
    }
    if sweep.mode != "sim" {
        report.paragraph("Serving sweeps are listed as a table; their figures are the serving report's.");
        report.table(&rows_table(sweep), "Every cell of the sweep.");
        return Ok(());
    }
    for (mode, series) in group(&sweep.rows) {
        let suffix = if mode == "rate" { String::new() } else { format!("-{}", slug(&mode)) };
        report.subsection(&format!("JCT versus load ({mode} scaling)"));
        report.named_figure(
            &name(&format!("jct-mean-vs-load{suffix}")),
            metric_vs_load("Mean JCT versus load", &mode, &series, "jct_mean_s", Axis::log("mean JCT", "s")),
            "Mean job completion time per policy versus the load factor: the line joins the means over \
             seeds, the band spans the lowest to the highest seed.",
        )?;
        report.named_figure(
            &name(&format!("jct-p99-vs-load{suffix}")),
            metric_vs_load("p99 JCT versus load", &mode, &series, "jct_p99_s", Axis::log("p99 JCT", "s")),
            "99th-percentile job completion time (nearest rank) per policy versus the load factor: mean \
             over seeds and the min-max band.",
        )?;
        report.table(
            &summary_table(&series),
            "Per policy and load: mean over seeds [min-max] of JCT mean and p99, and mean utilization, \
             Jain's index and healthy cells.",
        );
    }
    Ok(())
}

fn spread_cell(spread: Option<Spread>, show: fn(f64) -> String) -> String {
    match spread {
        Some(s) if s.seeds > 1 => format!("{} [{}-{}]", show(s.mean), show(s.min), show(s.max)),
        Some(s) => show(s.mean),
        None => "-".into(),
    }
}

fn summary_table(series: &[(String, ByLoad<'_>)]) -> Table {
    let mut table =
        Table::new(&["policy", "load", "seeds", "JCT mean", "JCT p99", "GPU util", "Jain", "healthy"]);
    for (name, loads) in series {
        for (load, rows) in loads {
            let spread = |metric: &str| Spread::of(rows.iter().map(|r| r.metric(metric)));
            let healthy = rows.iter().filter(|r| r.metric("healthy") != Some(0.0)).count();
            table.row(vec![
                name.clone(),
                format!("{load}"),
                rows.len().to_string(),
                spread_cell(spread("jct_mean_s"), human_duration),
                spread_cell(spread("jct_p99_s"), human_duration),
                spread("gpu_utilization").map_or("-".into(), |s| format!("{:.1}%", s.mean * 100.0)),
                spread("jain_backlogged").map_or("-".into(), |s| format!("{:.3}", s.mean)),
                format!("{healthy}/{}", rows.len()),
            ]);
        }
    }
    table
}

/// Every row, key columns then every metric column (sorted by name).
pub fn rows_table(sweep: &SweepResults) -> Table {
    let metrics: std::collections::BTreeSet<&str> =
        sweep.rows.iter().flat_map(|r| r.metrics.keys().map(String::as_str)).collect();
    let mut header: Vec<String> =
        ["cell", "policy", "load", "load_mode", "seed", "options"].map(String::from).to_vec();
    header.extend(metrics.iter().map(|m| m.to_string()));
    let mut table = Table { header, rows: Vec::new() };
    let by_cell: BTreeMap<u64, &SweepRow> = sweep.rows.iter().map(|r| (r.cell, r)).collect();
    for row in by_cell.values() {
        let mut cells = vec![
            row.cell.to_string(),
            row.policy.clone(),
            format!("{}", row.load),
            row.load_mode.clone(),
            row.seed.to_string(),
            row.options.clone(),
        ];
        cells.extend(metrics.iter().map(|m| row.metric(m).map_or("-".into(), |v| format!("{v}"))));
        table.row(cells);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cell: u64, policy: &str, load: f64, seed: u64, jct: f64) -> SweepRow {
        let mut metrics = BTreeMap::new();
        metrics.insert("jct_mean_s".to_string(), Some(jct));
        metrics.insert("jct_p99_s".to_string(), Some(jct * 10.0));
        SweepRow {
            cell,
            kind: "sim".into(),
            policy: policy.into(),
            load,
            load_mode: "rate".into(),
            seed,
            options: String::new(),
            metrics,
        }
    }

    #[test]
    fn bands_span_the_seeds_and_lines_join_the_means() {
        let rows = vec![
            row(0, "fifo", 2.0, 0, 30.0),
            row(1, "fifo", 2.0, 1, 50.0),
            row(2, "fifo", 1.0, 0, 10.0),
            row(3, "fifo", 1.0, 1, 20.0),
            row(4, "las", 1.0, 0, 5.0),
        ];
        let grouped = group(&rows);
        assert_eq!(grouped.len(), 1);
        let figure = metric_vs_load("t", "rate", &grouped[0].1, "jct_mean_s", Axis::log("JCT", "s"));
        assert_eq!(figure.series.len(), 4);
        assert_eq!(figure.series[0].name, "fifo (seed min-max)");
        assert_eq!(figure.series[0].points, vec![(1.0, 10.0), (2.0, 30.0)]);
        assert_eq!(figure.series[0].upper, vec![20.0, 50.0]);
        assert_eq!(figure.series[1].points, vec![(1.0, 15.0), (2.0, 40.0)]);
        assert_eq!(figure.series[3].points, vec![(1.0, 5.0)]);
        assert_eq!(figure.series[2].color, figure.series[3].color);
    }

    #[test]
    fn spread_ignores_missing_values() {
        let s = Spread::of([Some(1.0), None, Some(3.0)].into_iter()).unwrap();
        assert_eq!((s.mean, s.min, s.max, s.seeds), (2.0, 1.0, 3.0, 2));
        assert_eq!(Spread::of([None].into_iter()), None);
    }
}
