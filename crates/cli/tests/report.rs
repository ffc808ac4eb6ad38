//! `cotenant report`, `sim --save` and `sim --report`: the figures hold the data.
//!
//! The SVG is scanned as text (plotters writes one element per line): each
//! series is one polyline (or polygon, for bands) in its palette color, the
//! legend and axis titles are `<text>` elements, and tick labels give the axis
//! ranges and the value-to-pixel mapping, so a test can check a plotted point
//! against the number it stands for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{cotenant, stderr, temp_dir};
use cotenant_report::svg_read::{self, attribute, polygons, text_elements, texts, tick_value};
use serde_json::{json, Value};

/// The palette's first colors, as SVG writes them (`figure::PALETTE`).
const COLORS: [&str; 4] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"];

/// A small simulation: 2 policies, 3 tenants, 60 jobs on 16 GPUs.
const SIM_ARGS: [&str; 8] = [
    "sim",
    "--synthetic",
    "jobs=60,rate=30/h,seed=3,tenants=3,weights=1:1:2",
    "--cluster",
    "nodes=2,gpus-per-node=8",
    "--policy",
    "fifo,las",
    "--share-window=10m",
];

fn run_ok(args: &[&str]) -> String {
    let out = cotenant(args);
    assert!(out.status.success(), "cotenant {args:?} failed: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Pixel points of each data polyline in `color` (2 px wide; thinner ones are references).
fn polylines(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    svg_read::polylines(svg, color)
        .into_iter()
        .filter(|p| p.stroke_width == Some(2.0))
        .map(|p| p.points)
        .collect()
}

/// The y axis's tick labels as (value, pixel y), from the right-aligned labels
/// left of the plot.
fn y_ticks(svg: &str) -> Vec<(f64, f64)> {
    text_elements(svg)
        .filter(|(t, _)| attribute(t, "text-anchor") == Some("end") && attribute(t, "transform").is_none())
        .filter_map(|(t, text)| Some((tick_value(text)?, attribute(t, "y")?.parse().ok()?)))
        .collect()
}

/// The x axis's tick labels as (value, pixel x): centered labels below the plot.
fn x_ticks(svg: &str) -> Vec<(f64, f64)> {
    let bottom = y_ticks(svg).iter().map(|t| t.1).fold(0.0, f64::max);
    text_elements(svg)
        .filter(|(t, _)| attribute(t, "text-anchor") == Some("middle") && attribute(t, "transform").is_none())
        .filter_map(|(t, text)| {
            let y: f64 = attribute(t, "y")?.parse().ok()?;
            (y > bottom && y < bottom + 20.0).then_some(())?;
            Some((tick_value(text)?, attribute(t, "x")?.parse().ok()?))
        })
        .collect()
}

/// The pixel a value maps to, interpolated between the outermost ticks
/// (linearly, or in log10 on a log axis).
fn pixel_of(ticks: &[(f64, f64)], value: f64, log: bool) -> f64 {
    let f = |v: f64| if log { v.log10() } else { v };
    let (low, high) = (ticks.first().unwrap(), ticks.last().unwrap());
    low.1 + (f(value) - f(low.0)) / (f(high.0) - f(low.0)) * (high.1 - low.1)
}

fn range(ticks: &[(f64, f64)]) -> (f64, f64) {
    let values = ticks.iter().map(|t| t.0);
    (values.clone().fold(f64::INFINITY, f64::min), values.fold(f64::NEG_INFINITY, f64::max))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Simulates, saves and reports; returns (dir, saved JSON, report HTML path).
fn simulate(name: &str) -> (PathBuf, Value, PathBuf) {
    let dir = temp_dir(name);
    let saved = dir.join("sim.json");
    let html = dir.join("sim.html");
    let mut args = SIM_ARGS.to_vec();
    args.extend(["--save", s(&saved), "--report", s(&html)]);
    run_ok(&args);
    let value: Value = serde_json::from_str(&read(&saved)).unwrap();
    (dir, value, html)
}

fn numbers(value: &Value) -> Vec<Option<f64>> {
    value.as_array().unwrap().iter().map(Value::as_f64).collect()
}

#[test]
fn sim_figures_hold_the_data() {
    let (dir, saved, _) = simulate("sim-figures");
    assert_eq!(saved["kind"], "cotenant-sim-results");
    assert_eq!(saved["version"], 1);
    let figures = dir.join("figures");
    let out =
        run_ok(&["report", s(&dir.join("sim.json")), "-o", s(&dir.join("r.html")), "--figures", s(&figures)]);
    assert!(out.contains("report: "), "{out}");
    let runs = saved["runs"].as_array().unwrap();
    let policies: Vec<&str> = runs.iter().map(|r| r["summary"]["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["fifo", "las"]);
    let jobs = saved["jobs"]["arrival_s"].as_array().unwrap().len();
    assert_eq!(jobs, 60);

    // JCT CDF: a step line per policy with one point per completed job (under the
    // 400-point cap), 2n - 1 vertices; the x ticks (log) cover every JCT.
    let svg = read(&figures.join("jct-cdf.svg"));
    let labels = texts(&svg);
    for expected in ["fifo", "las", "job completion time (s)", "fraction of jobs (0-1)"] {
        assert!(labels.iter().any(|t| t == expected), "{expected} not in {labels:?}");
    }
    let (x_low, x_high) = range(&x_ticks(&svg));
    for (i, run) in runs.iter().enumerate() {
        let mut jcts: Vec<f64> = numbers(&run["jct_s"]).into_iter().flatten().collect();
        jcts.sort_by(f64::total_cmp);
        assert_eq!(jcts.len(), run["summary"]["completed"].as_u64().unwrap() as usize);
        let lines = polylines(&svg, COLORS[i]);
        assert_eq!(lines.len(), 1, "{} has one line", policies[i]);
        assert_eq!(
            lines[0].len(),
            2 * jcts.len() - 1,
            "{}: vertices of a step through each JCT",
            policies[i]
        );
        assert!(
            x_low <= jcts[0] && x_high >= *jcts.last().unwrap(),
            "x ticks {x_low}..{x_high} cover the JCTs"
        );
        // The last vertex is the largest JCT at fraction completed / jobs.
        let x_axis = x_ticks(&svg);
        let y_axis = y_ticks(&svg);
        let (x, y) = *lines[0].last().unwrap();
        assert!((x - pixel_of(&x_axis, *jcts.last().unwrap(), true)).abs() <= 1.5, "x pixel {x}");
        assert!((y - pixel_of(&y_axis, jcts.len() as f64 / jobs as f64, false)).abs() <= 1.5, "y pixel {y}");
    }

    // Utilization and queue length: a line per policy, one point per window, at the saved values.
    for (name, key, scale) in [("utilization", "utilization", 100.0), ("queue-length", "queue_length", 1.0)] {
        let svg = read(&figures.join(format!("{name}.svg")));
        let y_axis = y_ticks(&svg);
        let (y_low, y_high) = range(&y_axis);
        for (i, run) in runs.iter().enumerate() {
            let values: Vec<f64> =
                numbers(&run["windows"][key]).into_iter().map(|v| v.unwrap() * scale).collect();
            let lines = polylines(&svg, COLORS[i]);
            assert_eq!(lines.len(), 1);
            assert_eq!(lines[0].len(), values.len(), "{name}: one point per window");
            for (point, value) in lines[0].iter().zip(&values) {
                assert!(y_low <= *value && *value <= y_high, "{name}: {value} outside {y_low}..{y_high}");
                assert!(
                    (point.1 - pixel_of(&y_axis, *value, false)).abs() <= 1.5,
                    "{name}: {value} at {point:?}"
                );
            }
        }
        let labels = texts(&svg);
        assert!(labels.iter().any(|t| t.starts_with("time since first arrival (")), "{labels:?}");
        assert!(labels.iter().any(|t| t == "GPU utilization (%)" || t == "mean waiting jobs (jobs)"));
    }

    // Tenant shares: the 3 tenants' lines and one dashed entitlement (weights 1:1:2
    // differ, so one per tenant), named in the legend.
    let svg = read(&figures.join("tenant-share-las.svg"));
    let labels = texts(&svg);
    let tenants: Vec<&str> =
        saved["tenants"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for tenant in &tenants {
        assert!(labels.iter().any(|t| t == tenant), "{tenant} in {labels:?}");
        assert!(labels.iter().any(|t| *t == format!("{tenant} weight")), "{tenant} weight in {labels:?}");
    }
    assert!(labels.iter().any(|t| t == "GPUs held (% of cluster)"));

    // Fairness: Jain's bars per policy; every figure came as SVG and PNG (twice the size).
    let svg = read(&figures.join("jain.svg"));
    assert!(texts(&svg).iter().any(|t| t == "Jain's index (0-1)"));
    for name in ["jct-cdf", "queueing-by-size", "utilization", "queue-length", "jain", "finish-time-fairness"]
    {
        let png = std::fs::read(figures.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((width, height), (1600, 900), "{name}.png");
    }

    // The HTML inlines the same SVGs, one figure each, and tables name every policy.
    let html = read(&dir.join("r.html"));
    let svgs: Vec<&str> = html.split("<svg").skip(1).collect();
    assert_eq!(svgs.len(), 8, "jct, queueing, utilization, queue, 2 tenant shares, jain, ftf");
    assert_eq!(html.matches("<figcaption>").count(), 8);
    let cdf = read(&figures.join("jct-cdf.svg"));
    assert!(html.contains(cdf.trim_end()), "the inline SVG is the exported one");
    assert!(html.contains("<th>fifo</th><th>las</th>"), "metric table header");
    assert!(html.contains("finish-time fairness ρ p90"));
    // Nothing to fetch: no scripts, no links out; the only URLs are the SVG namespaces.
    assert!(!html.contains("<script") && !html.contains("src="));
    assert_eq!(html.matches("http").count(), html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count());
}

#[test]
fn outputs_are_deterministic_across_runs_and_threads() {
    let dir = temp_dir("determinism");
    let mut saved = Vec::new();
    let mut html = Vec::new();
    for threads in ["1", "2"] {
        let path = dir.join(format!("sim-{threads}.json"));
        let report = dir.join(format!("sim-{threads}.html"));
        let mut args = SIM_ARGS.to_vec();
        args.extend(["--threads", threads, "--save", s(&path), "--report", s(&report)]);
        run_ok(&args);
        saved.push(std::fs::read(&path).unwrap());
        html.push(std::fs::read(&report).unwrap());
    }
    assert_eq!(saved[0], saved[1], "saved results differ between 1 and 2 threads");
    assert_eq!(html[0], html[1], "sim --report differs between 1 and 2 threads");
    let input = dir.join("sim-1.json");
    let mut reports = Vec::new();
    for i in 0..2 {
        let out = dir.join(format!("r{i}.html"));
        let figures = dir.join(format!("fig{i}"));
        run_ok(&["report", s(&input), "-o", s(&out), "--figures", s(&figures)]);
        reports.push((std::fs::read(&out).unwrap(), std::fs::read(figures.join("jct-cdf.png")).unwrap()));
    }
    assert_eq!(reports[0], reports[1], "report bytes (HTML and PNG) differ between identical runs");
}

/// Every sim metric column of a sweep row, with the given JCT mean and p99.
fn sweep_row(cell: u64, policy: &str, load: f64, seed: u64, jct_mean: f64, jct_p99: f64) -> Value {
    json!({
        "cell": cell, "kind": "sim", "policy": policy, "load": load, "load_mode": "rate", "seed": seed,
        "options": "", "jobs": 100, "completed": 100, "unfinished": 0, "cluster_gpus": 64,
        "jct_mean_s": jct_mean, "jct_p50_s": jct_mean / 2.0, "jct_p90_s": jct_mean * 2.0, "jct_p99_s": jct_p99,
        "jct_max_s": jct_p99 * 1.5, "queueing_mean_s": 10.0, "queueing_p50_s": 5.0, "queueing_p90_s": 20.0,
        "queueing_p99_s": 40.0, "makespan_s": 86400.0, "gpu_utilization": 0.5 * load,
        "goodput_utilization": 0.5 * load, "idle_while_waiting": 0.01, "preemptions": 0, "lost_gpu_hours": 0.0,
        "jain_backlogged": null, "healthy": true, "events": 200, "scheduling_passes": 150
    })
}

/// 2 policies x 3 loads x 2 seeds, JCTs growing with load; seed 1 is 20% slower.
fn sweep_fixture(dir: &Path) -> PathBuf {
    let mut rows = Vec::new();
    let mut cell = 0;
    for (p, policy) in ["fifo", "las"].iter().enumerate() {
        for load in [0.5, 1.0, 2.0] {
            for seed in [0u64, 1] {
                let base = 100.0 * load * load * (p as f64 + 1.0) * (1.0 + 0.2 * seed as f64);
                rows.push(sweep_row(cell, policy, load, seed, base, base * 10.0));
                cell += 1;
            }
        }
    }
    let sweep = dir.join("sweep");
    std::fs::create_dir_all(&sweep).unwrap();
    let path = sweep.join("results.json");
    let doc = json!({"kind": "cotenant-sweep", "mode": "sim", "rows": rows});
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

#[test]
fn sweep_figures_hold_the_data() {
    let dir = temp_dir("sweep");
    let input = sweep_fixture(&dir);
    let figures = dir.join("figures");
    run_ok(&["report", s(&input), "-o", s(&dir.join("r.html")), "--figures", s(&figures)]);
    for (name, scale) in [("jct-mean-vs-load", 1.0), ("jct-p99-vs-load", 10.0)] {
        let svg = read(&figures.join(format!("{name}.svg")));
        let labels = texts(&svg);
        for expected in
            ["fifo", "las", "fifo (seed min-max)", "las (seed min-max)", "load (arrival rate multiplier) (x)"]
        {
            assert!(labels.iter().any(|t| t == expected), "{name}: {expected} not in {labels:?}");
        }
        let y_axis = y_ticks(&svg);
        let x_axis = x_ticks(&svg);
        for (p, color) in COLORS[..2].iter().enumerate() {
            // The mean over seeds (1.1 x seed 0's value) at each load.
            let means: Vec<(f64, f64)> = [0.5, 1.0, 2.0]
                .iter()
                .map(|&l| (l, 100.0 * l * l * (p as f64 + 1.0) * 1.1 * scale))
                .collect();
            let lines = polylines(&svg, color);
            assert_eq!(lines.len(), 1, "{name}: one mean line per policy");
            assert_eq!(lines[0].len(), 3, "{name}: one point per load");
            for (pixel, (load, mean)) in lines[0].iter().zip(&means) {
                assert!(
                    (pixel.0 - pixel_of(&x_axis, *load, false)).abs() <= 1.5,
                    "{name}: load {load} at {pixel:?}"
                );
                assert!(
                    (pixel.1 - pixel_of(&y_axis, *mean, true)).abs() <= 1.5,
                    "{name}: mean {mean} at {pixel:?}"
                );
            }
            // The band: lower edge (seed 0) out, upper edge (seed 1) back: 6 points.
            let band = polygons(&svg, color);
            assert_eq!(band.len(), 1, "{name}: one band per policy");
            assert_eq!(band[0].len(), 6);
            let low = 100.0 * 2.0 * 2.0 * (p as f64 + 1.0) * scale;
            assert!((band[0][2].1 - pixel_of(&y_axis, low, true)).abs() <= 1.5, "{name}: band low at load 2");
            assert!(
                (band[0][3].1 - pixel_of(&y_axis, low * 1.2, true)).abs() <= 1.5,
                "{name}: band high at load 2"
            );
        }
        let (low, high) = range(&y_axis);
        assert!(
            low <= 100.0 * 0.25 * scale && high >= 100.0 * 4.0 * 2.0 * 1.2 * scale,
            "{name}: y range {low}..{high}"
        );
    }
    let html = read(&dir.join("r.html"));
    assert!(
        html.contains("<th scope=\"row\">las</th><td>2</td><td>2</td>"),
        "summary table row: las, load 2, 2 seeds"
    );
}

#[test]
fn mixed_inputs_give_one_report_with_prefixed_figures() {
    let (dir, _, _) = simulate("mixed");
    let sweep = sweep_fixture(&dir);
    let figures = dir.join("figures");
    let out = dir.join("mixed.html");
    run_ok(&["report", s(&dir.join("sim.json")), s(&sweep), "-o", s(&out), "--figures", s(&figures)]);
    let html = read(&out);
    assert!(html.contains("Simulation: ") && html.contains("Sweep: "));
    assert_eq!(html.matches("<svg").count(), 8 + 2);
    assert!(figures.join("sim-jct-cdf.svg").exists());
    assert!(figures.join("sweep-results-jct-mean-vs-load.png").exists());
}

fn report_error(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    let out = cotenant(&["report", s(&path), "-o", s(&dir.join("out.html"))]);
    assert!(!out.status.success(), "{name} should fail");
    let message = stderr(&out);
    assert!(message.contains(name), "the error names the file: {message}");
    assert!(!message.contains("panicked"), "{message}");
    message
}

#[test]
fn bad_inputs_give_errors_naming_the_file_and_field() {
    let dir = temp_dir("bad");
    assert!(report_error(&dir, "unknown.json", r#"{"kind": "something-else"}"#)
        .contains("unknown kind \"something-else\""));
    assert!(report_error(&dir, "nokind.json", r#"{"rows": []}"#).contains("missing field \"kind\""));
    assert!(report_error(&dir, "broken.json", "{\"kind\": ").contains("not JSON"));
    assert!(report_error(&dir, "version.json", r#"{"kind": "cotenant-sim-results", "version": 2}"#)
        .contains("field \"version\": 2"));
    let bad_row = r#"{"kind": "cotenant-sweep", "mode": "sim", "rows": [{"cell": 0, "kind": "sim", "policy": "fifo",
        "load": "high", "load_mode": "rate", "seed": 0, "options": ""}]}"#;
    assert!(report_error(&dir, "badrow.json", bad_row).contains("rows[0]: field \"load\": expected a number"));
    // A saved simulation with a column cut short.
    let (sim_dir, mut saved, _) = simulate("bad-sim");
    saved["runs"][0]["jct_s"].as_array_mut().unwrap().pop();
    let message = report_error(&sim_dir, "short.json", &saved.to_string());
    assert!(message.contains("\"runs\"[0].jct_s: 59 values for 60 jobs"), "{message}");
    let mut typed = saved.clone();
    typed["cluster_gpus"] = json!("many");
    let message = report_error(&sim_dir, "typed.json", &typed.to_string());
    assert!(message.contains("field \"cluster_gpus\": invalid type: string \"many\""), "{message}");
    // A missing file.
    let out = cotenant(&["report", s(&dir.join("absent.json")), "-o", s(&dir.join("out.html"))]);
    assert!(!out.status.success() && stderr(&out).contains("absent.json"));
}
