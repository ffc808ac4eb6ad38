//! Demotion and promotion parity: cotenant's tiresias against scripts/tiresias_model.py (a
//! model of Tiresias's `dlas-gpu` loop, checked row for row against Tiresias's own logs) on
//! Tiresias's 60-job trace with queue limits low enough that jobs are demoted and promoted.
//! Limits 96:504 and 296:1200 are divisible by every GPU count of the trace, so exact
//! crossings fall on whole seconds and the default (exact) timer must agree with the model's
//! `--exact-timer`; `tiresias.timer=tiresias` must agree with the model's default (Tiresias's
//! wall-time timer), on those limits and on 100:500 and 300:1200. The model renumbers each
//! queue's list after every pass as Tiresias does, so per-job agreement also checks that
//! cotenant's O(changes) (queue, part, seq) ranking is equivalent to it. Needs the shared trace collection and python3; skips with a printed
//! reason otherwise. scripts/tiresias-demotion.sh renders the full comparison into
//! docs/experiments/tiresias-demotion.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cotenant, stderr, temp_dir};

fn trace() -> Option<PathBuf> {
    let path = cotenant_trace::traces_dir(None).join("tiresias/60_job.csv");
    if !path.is_file() {
        eprintln!("skipping: no {}", path.display());
        return None;
    }
    if Command::new("python3").arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("skipping: python3 is not available to run scripts/tiresias_model.py");
        return None;
    }
    Some(path)
}

/// Rows of a CSV file as maps from column name to field.
fn rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| header.iter().cloned().zip(l.split(',').map(String::from)).collect())
        .collect()
}

#[test]
fn demotion_and_promotion_match_the_model_of_tiresias() {
    let Some(trace) = trace() else { return };
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tiresias_model.py");
    let dir = temp_dir("tiresias-demotion");
    // cotenant numbers jobs by arrival (ties in trace order); the model logs the trace's job_id.
    let trace_rows = rows(&trace);
    let mut order: Vec<usize> = (0..trace_rows.len()).collect();
    order.sort_by_key(|&i| (trace_rows[i]["submit_time"].parse::<u64>().unwrap(), i));
    let job_id: Vec<u64> = order.iter().map(|&i| trace_rows[i]["job_id"].parse().unwrap()).collect();
    let trace_arg = format!("tiresias:{}", trace.display());
    for nodes in [2, 4] {
        for limits in ["96:504", "296:1200", "100:500", "300:1200"] {
            for knob in [0, 1, 2] {
                for timer in ["exact", "tiresias"] {
                    if timer == "exact" && !limits.ends_with("504") && !limits.starts_with("296") {
                        // Exact crossings between seconds: cotenant's continuous time and the
                        // model's whole seconds part (docs/experiments/tiresias-demotion.md).
                        continue;
                    }
                    let case = format!("n{nodes}g4 {limits} knob {knob} timer={timer}");
                    let model_csv =
                        dir.join(format!("model-{nodes}-{knob}-{timer}-{}.csv", limits.replace(':', "-")));
                    let mut args = vec![
                        model.display().to_string(),
                        "--trace".into(),
                        trace.display().to_string(),
                        "--gpus".into(),
                        (nodes * 4).to_string(),
                        "--limits".into(),
                        limits.into(),
                        "--knob".into(),
                        knob.to_string(),
                        "--jobs-csv".into(),
                        model_csv.display().to_string(),
                    ];
                    if timer == "exact" {
                        args.push("--exact-timer".into());
                    }
                    let out = Command::new("python3").args(&args).output().unwrap();
                    assert!(out.status.success(), "{case}: model failed: {}", stderr(&out));
                    let ours_csv =
                        dir.join(format!("ours-{nodes}-{knob}-{timer}-{}.csv", limits.replace(':', "-")));
                    let out = cotenant(&[
                        "sim",
                        "--trace",
                        &trace_arg,
                        "--cluster",
                        &format!("nodes={nodes},gpus-per-node=4"),
                        "--policy",
                        "tiresias",
                        "--set",
                        &format!("tiresias.thresholds={}s", limits.replace(':', "s:")),
                        "--set",
                        &format!("tiresias.knob={knob}"),
                        "--set",
                        &format!("tiresias.timer={timer}"),
                        "--restore-overhead",
                        "0s",
                        "--checkpoint-interval",
                        "0s",
                        "--strict",
                        "--jobs-csv",
                        &ours_csv.display().to_string(),
                    ]);
                    assert!(out.status.success(), "{case}: {}", stderr(&out));
                    let theirs: BTreeMap<u64, f64> = rows(&model_csv)
                        .iter()
                        .map(|r| (r["job_id"].parse().unwrap(), r["JCT"].parse().unwrap()))
                        .collect();
                    let ours: BTreeMap<u64, f64> = rows(&ours_csv)
                        .iter()
                        .map(|r| (job_id[r["job"].parse::<usize>().unwrap()], r["jct_s"].parse().unwrap()))
                        .collect();
                    assert_eq!(ours.len(), theirs.len(), "{case}: job count");
                    for (job, jct) in &theirs {
                        let mine = ours[job];
                        assert!((mine - jct).abs() <= 1.0, "{case}: job {job} JCT {mine} vs model {jct}");
                    }
                    let mean = |m: &BTreeMap<u64, f64>| m.values().sum::<f64>() / m.len() as f64;
                    let (a, b) = (mean(&ours), mean(&theirs));
                    assert!((a - b).abs() <= 0.02 * b, "{case}: avg JCT {a} vs model {b}");
                }
            }
        }
    }
}
