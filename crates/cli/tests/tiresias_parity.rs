//! Parity with Tiresias's own simulator: its 60-job trace on 2x4 and 4x4 GPUs under
//! fifo, srtf (its `shortest`) and tiresias (its `dlas-gpu`, queue limits 3,250 and
//! 7,200 GPU-seconds, no restart cost). The reference is its per-job logs in the shared
//! trace collection (`COTENANT_TRACES` or ../shared/traces); a clone without the
//! collection skips with a printed reason. scripts/tiresias-parity.sh renders the same
//! comparison into docs/experiments/tiresias-parity.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::{cotenant, stderr};

fn traces() -> Option<PathBuf> {
    let dir = cotenant_trace::traces_dir(None);
    if dir.join("tiresias/60_job.csv").is_file() && dir.join("tiresias-reference").is_dir() {
        Some(dir)
    } else {
        eprintln!("skipping: {} has no tiresias trace or reference runs", dir.display());
        None
    }
}

/// Mean JCT and makespan of one reference per-job log.
fn reference(path: &std::path::Path) -> (f64, f64) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (jct, end) = (column("JCT"), column("end_time"));
    let rows: Vec<Vec<f64>> = lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|f| f.parse().unwrap_or(0.0)).collect())
        .collect();
    let mean = rows.iter().map(|r| r[jct]).sum::<f64>() / rows.len() as f64;
    let makespan = rows.iter().map(|r| r[end]).fold(0.0, f64::max);
    (mean, makespan)
}

#[test]
fn fifo_srtf_and_tiresias_match_tiresias_simulator_exactly() {
    let Some(dir) = traces() else { return };
    let trace = format!("tiresias:{}", dir.join("tiresias/60_job.csv").display());
    for nodes in [2, 4] {
        let cluster = format!("nodes={nodes},gpus-per-node=4");
        let out = cotenant(&[
            "sim",
            "--trace",
            &trace,
            "--cluster",
            &cluster,
            "--policy",
            "fifo,srtf,tiresias",
            "--set",
            "tiresias.thresholds=3250s:7200s",
            "--restore-overhead",
            "0s",
            "--json",
            "--strict",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for (run, schedule) in json["runs"].as_array().unwrap().iter().zip(["fifo", "shortest", "dlas-gpu"]) {
            let log = dir.join(format!("tiresias-reference/n{nodes}g4_{schedule}-count_job.csv"));
            let (mean, makespan) = reference(&log);
            let ours = run["jct_secs"]["mean"].as_f64().unwrap();
            assert!((ours - mean).abs() < 0.01, "n{nodes}g4 {}: {ours} vs Tiresias {mean}", run["policy"]);
            assert_eq!(run["makespan_secs"].as_f64().unwrap(), makespan, "n{nodes}g4 {}", run["policy"]);
        }
    }
}
