//! `serve-sim --pp`, `--disagg`, `--max-concurrency` and `plan serve --pp-options`,
//! `--disagg-search` from the command line: what they report, and bad values refused
//! with an error naming the flag (exit 1, never a panic).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout};
use serde_json::Value;

fn run_json(args: &[&str]) -> Value {
    let out = cotenant(&[&["serve-sim", "--json", "--trace", "azure-conv", "--limit", "200"], args].concat());
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("json");
    json["runs"][0].clone()
}

#[test]
fn structure_is_reported_only_when_used() {
    let plain = run_json(&[]);
    assert!(plain.get("structure").is_none());
    let run = run_json(&["--pp", "2", "--disagg", "prefill=1,decode=2,link=25", "--max-concurrency", "4"]);
    let structure = &run["structure"];
    assert_eq!(structure["pipeline_parallel"], 2);
    assert_eq!(structure["disagg"]["prefill"], 1);
    assert_eq!(structure["disagg"]["link_gb_per_s"], 25.0);
    assert_eq!(structure["max_concurrency"], 4);
    assert!(structure["disagg"]["kv_transfers"].as_u64().unwrap() > 0);
}

/// Four closed-loop clients cannot issue faster than the trace or than they finish: the
/// achieved rate is below the open-loop one on the same requests, and every request
/// still finishes.
#[test]
fn closed_loop_lowers_the_achieved_rate() {
    let open = run_json(&["--rate-scale", "20"]);
    let closed = run_json(&["--rate-scale", "20", "--max-concurrency", "4"]);
    let rate = |run: &Value| run["requests_per_s"].as_f64().expect("rate");
    let (open_rate, closed_rate) = (rate(&open), rate(&closed));
    assert_eq!(closed["finished"], 200);
    assert!(closed_rate < open_rate, "{closed_rate} {open_rate}");
}

#[test]
fn bad_values_name_the_flag() {
    for (args, needle) in [
        (vec!["serve-sim", "--pp", "0"], "--pp"),
        (vec!["serve-sim", "--pp", "33"], "--pp 33: Llama-3.1-8B has 32 layers"),
        (vec!["serve-sim", "--max-concurrency", "0"], "--max-concurrency"),
        (vec!["serve-sim", "--disagg", "prefill=1"], "--disagg prefill=1: missing decode=M"),
        (vec!["serve-sim", "--disagg", "prefill=1,decode=1,link=-3"], "link=-3"),
        (vec!["serve-sim", "--disagg", "prefill=1,decode=1,speed=3"], "unknown key `speed`"),
        (vec!["plan", "serve", "--pp-options", "1,x"], "--pp-options: `x`"),
        (vec!["plan", "serve", "--pp-options", "40"], "--pp-options 40"),
        (vec!["plan", "serve", "--disagg", "prefill=1,decode=1"], "use --disagg-search"),
    ] {
        let out = cotenant(&args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{args:?}");
    }
}

#[test]
fn plan_serve_sizes_pools_and_stages() {
    let workload =
        ["--trace", "synthetic", "--tenant", "name=a,rate=20,prompt=1000,output=200", "--duration-s", "60"];
    let out =
        cotenant(
            &[
                &[
                    "plan",
                    "serve",
                    "--json",
                    "--gpus",
                    "H100-SXM",
                    "--tp-options",
                    "1",
                    "--max-replicas",
                    "8",
                ][..],
                &workload,
                &["--disagg-search"],
            ]
            .concat(),
        );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("json");
    let plan = &json["plans"][0];
    let (prefill, decode, gpus) =
        (plan["prefill"].as_u64().unwrap(), plan["decode"].as_u64().unwrap(), plan["gpus"].as_u64().unwrap());
    assert!(prefill >= 1 && decode >= 1 && prefill + decode == gpus, "{plan}");
    assert!(plan["attainment"].as_f64().unwrap() >= 0.9);
    let out = cotenant(
        &[
            &[
                "plan",
                "serve",
                "--json",
                "--gpus",
                "H100-SXM",
                "--tp-options",
                "1",
                "--max-replicas",
                "8",
                "--pp-options",
                "1,2",
            ][..],
            &workload,
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(json[1]["pipeline_parallel"], 2);
    let row = &json[1]["plan"]["plans"][0];
    assert_eq!(row["gpus"].as_u64().unwrap(), 2 * row["replicas"].as_u64().unwrap());
}
