//! `cotenant sim --rlhf` with `evalstop(BASE)`: the EvalStop section in the table
//! and the JSON, stopped jobs with their best checkpoint in the per-job CSV,
//! determinism, and clear errors for bad specs and options.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

const SPEC: &str = "jobs=80,seed=2";

#[test]
fn evalstop_section_json_and_per_job_csv() {
    let dir = temp_dir("evalstop");
    let csv = dir.join("jobs.csv");
    let args = [
        "sim",
        "--rlhf",
        SPEC,
        "--cluster",
        "nodes=8,gpus-per-node=8",
        "--policy",
        "srtf,evalstop(srtf)",
        "--set",
        "k=3",
        "--set",
        "min_drop=0.01",
        "--strict",
        "--json",
        "--jobs-csv",
        csv.to_str().unwrap(),
    ];
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = json["evalstop"].as_array().unwrap();
    assert_eq!(rows[0]["policy"], "srtf");
    assert_eq!(rows[0]["stopped"], 0);
    assert_eq!(rows[1]["policy"], "evalstop(srtf)");
    let stopped = rows[1]["stopped"].as_u64().unwrap();
    assert!(stopped > 0 && rows[1]["true_stops"].as_u64().unwrap() <= stopped);
    assert!(rows[1]["wasted_gpu_hours"].as_f64().unwrap() < rows[0]["wasted_gpu_hours"].as_f64().unwrap());
    let text = std::fs::read_to_string(&csv).unwrap();
    let ended = text
        .lines()
        .filter(|l| l.contains("evalstop after 3 declining evaluations; kept best checkpoint"))
        .count();
    assert_eq!(ended as u64, stopped, "every stop is in the per-job CSV with its best checkpoint");
    // Same seed, same bytes.
    let again = cotenant(&args);
    assert_eq!(stdout(&again), stdout(&out));
    // The table names the section.
    let table = cotenant(&args[..args.len() - 3]);
    assert!(
        stdout(&table).contains("EvalStop (stops against the curves' ground truth)"),
        "{}",
        stdout(&table)
    );
}

#[test]
fn bad_specs_and_options_are_named() {
    let out = cotenant(&[
        "sim",
        "--rlhf",
        "hacking=1.5",
        "--cluster",
        "nodes=8,gpus-per-node=8",
        "--policy",
        "evalstop",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--rlhf: key 'hacking' = '1.5'"), "{}", stderr(&out));
    let out = cotenant(&[
        "sim",
        "--rlhf",
        SPEC,
        "--cluster",
        "nodes=8,gpus-per-node=8",
        "--policy",
        "evalstop(las)",
        "--set",
        "k=zero",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("policy 'evalstop(las)': option 'k=zero'"), "{}", stderr(&out));
    let out = cotenant(&["policies"]);
    assert!(stdout(&out).lines().any(|l| l.starts_with("evalstop ")), "{}", stdout(&out));
}
