//! `plan serve --search` and `--goodput SPEC` from the command line: the same bytes
//! whatever the thread count, every configuration priced (the skipped ones and their
//! reasons are checked in crates/serve/tests/serve_metrics.rs), and bad flags answered
//! with an error naming the flag and the part (exit 1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{cotenant, stderr, stdout, temp_dir};

const SEARCH: &[&str] = &[
    "plan",
    "serve",
    "--limit",
    "150",
    "--search",
    "--gpus",
    "A100-80G,H100-SXM",
    "--tp-options",
    "1,2",
    "--pp-options",
    "1,2",
    "--replicas-options",
    "1",
    "--token-budget-options",
    "2048",
    "--schedulers",
    "fcfs",
    "--json",
];

#[test]
fn the_search_is_deterministic_and_prices_every_configuration() {
    let one_thread = Command::new(env!("CARGO_BIN_EXE_cotenant"))
        .args(SEARCH)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    let many = Command::new(env!("CARGO_BIN_EXE_cotenant"))
        .args(SEARCH)
        .env("RAYON_NUM_THREADS", "4")
        .output()
        .unwrap();
    assert!(one_thread.status.success(), "{}", stderr(&one_thread));
    assert_eq!(stdout(&one_thread), stdout(&many));
    let value: serde_json::Value = serde_json::from_str(&stdout(&one_thread)).unwrap();
    let configurations = value["configurations"].as_array().unwrap();
    assert_eq!(configurations.len(), 8);
    for c in configurations {
        // Every configuration runs, two pipeline stages included (GPUs = replicas x TP x PP).
        assert!(c["goodput_requests_per_s"].as_f64().unwrap() > 0.0, "{c}");
        let gpus = c["replicas"].as_f64().unwrap()
            * c["tensor_parallel"].as_f64().unwrap()
            * c["pipeline_parallel"].as_f64().unwrap();
        assert_eq!(c["gpus"].as_f64(), Some(gpus), "{c}");
        // $/M tokens = GPUs x $/GPU-h / (tokens/s x 3600) x 1e6, from the bundled prices.
        let price = if c["gpu"] == "A100-80G" { 5.1207 } else { 12.29 };
        let expected = gpus * price / (c["tokens_per_s"].as_f64().unwrap() * 3600.0) * 1e6;
        let got = c["usd_per_million_tokens"].as_f64().unwrap();
        assert!((got - expected).abs() <= 1e-9 * expected, "{got} vs {expected}");
    }
    let best = value["best"].as_u64().unwrap() as usize;
    assert!(value["pareto"].as_array().unwrap().iter().any(|i| i.as_u64() == Some(best as u64)));
    let cheapest = configurations
        .iter()
        .filter_map(|c| c["usd_per_million_tokens"].as_f64())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(configurations[best]["usd_per_million_tokens"].as_f64(), Some(cheapest));
}

#[test]
fn bad_search_and_goodput_flags_name_the_flag_and_the_part() {
    let dir = temp_dir("serve-search-prices");
    let prices = dir.join("prices.toml");
    std::fs::write(&prices, "[gpu.\"H100-SXM\"]\nusd_per_gpu_hour = 0\nsource = \"x\"\ndate = \"y\"\n")
        .unwrap();
    let prices = prices.display().to_string();
    let cases: &[(&[&str], &str)] = &[
        (
            &["plan", "serve", "--search", "--pp-options", "1,0"],
            "--pp-options 1,0: `0` is not an integer in [1, 1024]",
        ),
        (
            &["plan", "serve", "--search", "--replicas-options", "x"],
            "--replicas-options x: `x` is not an integer",
        ),
        (&["plan", "serve", "--search", "--schedulers", "fcfs,nope"], "--schedulers"),
        (
            &["plan", "serve", "--search", "--prices", &prices],
            "usd_per_gpu_hour: 0 must be a positive number",
        ),
        (&["plan", "serve", "--search", "--pareto-latency", "e2e"], "--pareto-latency e2e:"),
        (
            &["plan", "serve", "--goodput", "ttft:p90=2000,tbt:p99=0"],
            "--goodput ttft:p90=2000,tbt:p99=0: part 2 `tbt:p99=0`: target `0`",
        ),
        (
            &["serve-sim", "--limit", "20", "--goodput", "tpot:q50=3"],
            "--goodput tpot:q50=3: part 1 `tpot:q50=3`: percentile `q50`",
        ),
    ];
    for (args, expected) in cases {
        let out = cotenant(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
}
