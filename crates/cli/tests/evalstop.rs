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
    let csv_path = csv.to_str().unwrap();
    let flags = ["--set", "k=3", "--set", "min_drop=0.01", "--strict", "--json", "--jobs-csv", csv_path];
    let run = |flags: &[&str]| sim_rlhf(SPEC, "srtf,evalstop(srtf)", flags);
    let out = run(&flags);
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
    let again = run(&flags);
    assert_eq!(stdout(&again), stdout(&out));
    // The table names the section.
    let table = run(&flags[..flags.len() - 3]);
    assert!(
        stdout(&table).contains("EvalStop (stops against the curves' ground truth)"),
        "{}",
        stdout(&table)
    );
}

/// `sim --rlhf SPEC` on 64 GPUs under `policy`, with more flags.
fn sim_rlhf(spec: &str, policy: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["sim", "--rlhf", spec, "--cluster", "nodes=8,gpus-per-node=8", "--policy", policy];
    args.extend_from_slice(extra);
    cotenant(&args)
}

#[test]
fn bad_specs_and_options_are_named() {
    let out = sim_rlhf("hacking=1.5", "evalstop", &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--rlhf: key 'hacking' = '1.5'"), "{}", stderr(&out));
    let out = sim_rlhf(SPEC, "evalstop(las)", &["--set", "k=zero"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("policy 'evalstop(las)': option 'k=zero'"), "{}", stderr(&out));
    let out = cotenant(&["policies"]);
    assert!(stdout(&out).lines().any(|l| l.starts_with("evalstop ")), "{}", stdout(&out));
}
