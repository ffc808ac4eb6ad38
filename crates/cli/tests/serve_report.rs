//! `serve-sim --save` and `--report`: the saved document holds the same numbers as the
//! run's summary (its sketches' medians are the summary's p50s, its service
//! differences peak at the summary's maximum), and the HTML report's figures hold the
//! data: one series per scheduler named after it, every quantile level drawn, axes
//! labelled with units and spanning the data, and a table with every metric.
//! `cotenant report` reads the saved document and serve sweeps into the same sections.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, temp_dir};
use cotenant_report::svg_read::{self, texts, tick_value};
use serde_json::Value;

/// Two synthetic tenants, one overloaded with few batch slots, so that both are
/// backlogged and VTC's service difference is measured.
const RUN: &str = "serve-sim --trace synthetic --tenant name=a,rate=30 --tenant name=b,rate=5,weight=2 \
                   --duration-s 40 --scheduler fcfs,vtc --max-seqs 8 --window-s 4";

/// Palette colors of series 0 and 1 (crates/report/src/figure.rs PALETTE).
const COLORS: [&str; 2] = ["#0072B2", "#D55E00"];

fn run_with(extra: &[&str]) -> String {
    let mut args: Vec<&str> = RUN.split_whitespace().collect();
    args.extend_from_slice(extra);
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The inline SVG figures of an HTML report with their captions, in order.
fn figures_of(html: &str) -> Vec<(&str, &str)> {
    html.split("<svg")
        .skip(1)
        .map(|s| {
            let (svg, rest) = s.split_once("</svg>").unwrap();
            let caption =
                rest.split_once("<figcaption>").map_or("", |(_, c)| c.split_once("</figcaption>").unwrap().0);
            (svg, caption)
        })
        .collect()
}

/// The point count of each polyline stroked in `color`.
fn polylines(svg: &str, color: &str) -> Vec<usize> {
    svg_read::polylines(svg, color).iter().map(|p| p.points.len()).collect()
}

fn tick_span(texts: &[String]) -> (f64, f64) {
    texts
        .iter()
        .filter_map(|t| tick_value(t))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)))
}

fn numbers(value: &Value) -> Vec<f64> {
    value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
}

#[test]
fn saved_document_and_report_hold_the_runs_data() {
    let dir = temp_dir("serve-report");
    let (saved_path, html_path) = (dir.join("serve.json"), dir.join("serve.html"));
    let stdout = run_with(&["--save", saved_path.to_str().unwrap(), "--report", html_path.to_str().unwrap()]);
    // The printed tables are the same with or without --save and --report.
    assert_eq!(stdout, run_with(&[]));
    let json_out: Value = serde_json::from_str(&run_with(&["--json"])).unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&saved_path).unwrap()).unwrap();
    assert_eq!(saved["kind"], "cotenant-serve-results");
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["config"]["slo"]["ttft_ms"], 2000.0);
    let levels = numbers(&saved["quantiles"]);
    let median = levels.iter().position(|&q| q == 0.5).unwrap();
    let runs = saved["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (r, run) in runs.iter().enumerate() {
        let summary = &run["summary"];
        // The summary is serve-sim --json's, less the run-only extras.
        for key in ["ttft_ms", "e2e_ms", "slo_attainment", "max_service_difference", "tenants"] {
            assert_eq!(summary[key], json_out["runs"][r][key], "{key}");
        }
        let latency = &run["latency_ms"];
        assert_eq!(latency["ttft"]["all"]["count"], summary["finished"]);
        for (measure, key) in [("ttft", "ttft_ms"), ("e2e", "e2e_ms"), ("tpot", "tpot_ms"), ("tbt", "tbt_ms")]
        {
            let values = numbers(&latency[measure]["all"]["values"]);
            assert_eq!(values.len(), levels.len());
            assert!(values.windows(2).all(|w| w[0] <= w[1]), "{measure} sketch decreases");
            assert_eq!(values[median], summary[key]["p50"].as_f64().unwrap(), "{measure} median");
        }
        for (t, tenant) in summary["tenants"].as_array().unwrap().iter().enumerate() {
            let sketch = &latency["ttft"]["tenants"][t];
            assert_eq!(sketch["count"], tenant["requests"], "every request of tenant {t} finished");
            assert_eq!(numbers(&sketch["values"])[median], tenant["ttft_ms"]["p50"].as_f64().unwrap());
            let total: f64 =
                run["windows"]["service"].as_array().unwrap().iter().map(|w| w[t].as_f64().unwrap()).sum();
            let service = tenant["service"].as_f64().unwrap();
            assert!((total - service).abs() <= 1e-9 * service, "windows sum to the tenant's service");
        }
        let peak = run["windows"]["service_difference"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["accumulated"].as_f64())
            .fold(0.0, f64::max);
        assert_eq!(peak, summary["max_service_difference"].as_f64().unwrap());
    }
    let vtc_difference = runs[1]["summary"]["max_service_difference"].as_f64().unwrap();
    assert!(vtc_difference > 0.0, "both tenants were backlogged under VTC");
    let windows = runs[0]["windows"]["service"].as_array().unwrap().len();

    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("<script") && !html.contains("src=\"http") && !html.contains("href=\"http"),
        "self-contained"
    );
    let figures = figures_of(&html);
    // TTFT, TPOT and E2E: all tenants, a, b (3 x 3); every token gap; service difference;
    // KV utilization.
    assert_eq!(figures.len(), 12, "{:?}", figures.iter().map(|f| texts(f.0)[0].clone()).collect::<Vec<_>>());
    let cdf_points = 2 * levels.len() - 1; // a step line through every level
    for (svg, caption) in &figures[..10] {
        let labels = texts(svg);
        assert!(labels.iter().any(|t| t == "fcfs") && labels.iter().any(|t| t == "vtc"), "{labels:?}");
        assert!(labels.iter().any(|t| t.ends_with("(ms)")), "x axis in ms: {labels:?}");
        assert!(labels.iter().any(|t| t.starts_with("fraction of") && t.ends_with("(0-1)")), "{labels:?}");
        for color in COLORS {
            assert_eq!(polylines(svg, color), [cdf_points], "{caption}");
        }
    }
    let ttft_all = texts(figures[0].0);
    assert_eq!(ttft_all[0], "TTFT CDF, all tenants");
    let (low, high) = tick_span(&ttft_all);
    for run in runs {
        let values = numbers(&run["latency_ms"]["ttft"]["all"]["values"]);
        assert!(
            low <= values[0] && values[values.len() - 1] <= high,
            "TTFT axis {low}..{high} spans the data"
        );
    }
    assert!(texts(figures[1].0)[0].ends_with("tenant a") && texts(figures[2].0)[0].ends_with("tenant b"));
    assert!(figures[3].1.contains("TBT per request (TPOT)"));
    let (difference_svg, difference_caption) = figures[10];
    let labels = texts(difference_svg);
    assert!(labels.iter().any(|t| t == "accumulated service difference (tokens per weight)"), "{labels:?}");
    assert!(labels.iter().any(|t| t == "time (end of window) (s)"), "{labels:?}");
    assert!(difference_caption.contains("per 4 s window"));
    for color in COLORS {
        assert_eq!(polylines(difference_svg, color), [2 * windows - 1]);
    }
    let (_, high) = tick_span(&labels);
    assert!(high >= vtc_difference, "the y axis reaches the largest difference {vtc_difference}");
    // KV utilization over time: a mean and a max line per scheduler, within 0-1, as many
    // windows as the saved series (a step line through each).
    let (kv_svg, kv_caption) = figures[11];
    let kv_labels = texts(kv_svg);
    for name in ["fcfs mean", "fcfs max", "vtc mean", "vtc max"] {
        assert!(kv_labels.iter().any(|t| t == name), "{kv_labels:?}");
    }
    assert!(kv_caption.contains("kv_utilization_mean"));
    for run in runs {
        let maxima = numbers(&run["windows"]["kv_utilization_max"]);
        assert!(!maxima.is_empty() && maxima.iter().all(|m| (0.0..=1.0).contains(m)));
        let peak = maxima.iter().copied().fold(0.0, f64::max);
        assert_eq!(peak, run["summary"]["kv_utilization_max"].as_f64().unwrap(), "windows' max is the run's");
    }
    // The table: every metric of both runs, e.g. the SLO attainment and per-tenant service.
    assert!(html.contains("<th scope=\"row\">slo_attainment</th>"));
    assert!(html.contains("<th scope=\"row\">tenants[b].service</th>"));
    assert!(html.contains("<th scope=\"row\">max_service_difference</th>"));

    // `cotenant report` on the saved document draws the same figures, and exports them.
    let (report_path, figures_dir) = (dir.join("report.html"), dir.join("figures"));
    let out = cotenant(&[
        "report",
        saved_path.to_str().unwrap(),
        "-o",
        report_path.to_str().unwrap(),
        "--figures",
        figures_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = std::fs::read_to_string(&report_path).unwrap();
    let from_report: Vec<&str> = figures_of(&report).into_iter().map(|f| f.0).collect();
    let from_serve_sim: Vec<&str> = figures_of(&html).into_iter().map(|f| f.0).collect();
    assert_eq!(from_report, from_serve_sim);
    for name in ["ttft-all", "tpot-tenant-b", "e2e-tenant-a", "tbt-all", "service-difference"] {
        for extension in ["svg", "png"] {
            assert!(figures_dir.join(format!("{name}.{extension}")).is_file(), "{name}.{extension}");
        }
    }
}

/// A serve sweep's results.json (two schedulers x two loads x two seeds, numbers by
/// hand) through `cotenant report`: SLO attainment versus load, one mean line per
/// scheduler through both loads, a seed-range band, axes with units.
#[test]
fn report_draws_a_serve_sweep_against_load() {
    let dir = temp_dir("serve-sweep-report");
    let mut rows = Vec::new();
    for (scheduler, attainment) in [("fcfs", [[1.0, 0.5], [0.5, 0.25]]), ("vtc", [[1.0, 1.0], [0.75, 0.5]])] {
        for (load, seeds) in [1.0, 2.0].iter().zip(attainment) {
            for (seed, value) in [1, 2].iter().zip(seeds) {
                rows.push(serde_json::json!({
                    "cell": rows.len(), "kind": "serve", "policy": scheduler, "load": load, "load_mode": "rate",
                    "seed": seed, "options": "", "requests": 10, "completed": 10, "slo_attainment": value,
                    "ttft_p99_s": 0.5 * load, "e2e_p99_s": 4.0 * load,
                }));
            }
        }
    }
    let results = dir.join("results.json");
    let sweep = serde_json::json!({"kind": "cotenant-sweep", "mode": "serve", "rows": rows});
    std::fs::write(&results, sweep.to_string()).unwrap();
    let html_path = dir.join("sweep.html");
    let out = cotenant(&["report", results.to_str().unwrap(), "-o", html_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(html_path).unwrap();
    let figures = figures_of(&html);
    assert_eq!(figures.len(), 3);
    let labels = texts(figures[0].0);
    for expected in
        ["SLO attainment versus load", "SLO attainment (0-1)", "arrival rate (x trace rate)", "fcfs", "vtc"]
    {
        assert!(labels.iter().any(|t| t == expected), "{expected} not in {labels:?}");
    }
    for color in COLORS {
        assert_eq!(polylines(figures[0].0, color), [2], "one mean line through both loads");
    }
    assert!(figures[0].0.contains("<polygon"), "seed-range bands");
    let (low, high) = tick_span(&labels);
    assert!(low <= 0.0 && high >= 2.0, "ticks {low}..{high} cover attainment 0..1 and loads 1..2");
    assert!(texts(figures[1].0).iter().any(|t| t == "TTFT p99 (ms)"));
    // Means over seeds in the table: fcfs at load 2 = (0.5 + 0.25) / 2.
    assert!(html.contains("<th scope=\"row\">fcfs</th><td>2</td><td>2</td>"), "{html}");
    assert!(html.contains("<td>0.375</td>"));
}

#[test]
fn save_and_report_are_deterministic_and_errors_name_the_path() {
    let dir = temp_dir("serve-report-determinism");
    let outputs: Vec<(String, String)> = (0..2)
        .map(|i| {
            let (saved, html) = (dir.join(format!("s{i}.json")), dir.join(format!("r{i}.html")));
            run_with(&["--save", saved.to_str().unwrap(), "--report", html.to_str().unwrap()]);
            (std::fs::read_to_string(saved).unwrap(), std::fs::read_to_string(html).unwrap())
        })
        .collect();
    assert_eq!(outputs[0], outputs[1]);
    let missing = dir.join("no-such-dir").join("out.json");
    let mut args: Vec<&str> = RUN.split_whitespace().collect();
    args.extend(["--save", missing.to_str().unwrap()]);
    let out = cotenant(&args);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--save: writing") && stderr(&out).contains("no-such-dir"),
        "{}",
        stderr(&out)
    );
}
