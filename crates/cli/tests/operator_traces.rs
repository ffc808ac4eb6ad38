//! An operator's own history end to end: the hand-built `sacct` and `kubectl`
//! samples of docs/examples replayed through the binary under two policies, and
//! malformed rows failing with file, line and field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, temp_dir};
use serde_json::Value;

const SACCT_SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/sacct-sample.txt");
const PODS_SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/kubectl-pods.json");
const JOBS_SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/kubectl-jobs.json");
const CLUSTER: &str = "nodes=2,gpus-per-node=8";

/// `cotenant sim --trace TRACE --cluster CLUSTER --policy POLICIES --json [extra]`, parsed.
fn sim_json(trace: &str, policies: &str, extra: &[&str]) -> Value {
    let mut args = vec!["sim", "--trace", trace, "--cluster", CLUSTER, "--policy", policies, "--json"];
    args.extend_from_slice(extra);
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn notes(json: &Value) -> Vec<String> {
    json["workload"]["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

/// Every run completed all `jobs` jobs; returns each policy's mean JCT in seconds.
fn all_complete(json: &Value, jobs: u64) -> Vec<f64> {
    assert_eq!(json["workload"]["jobs"], jobs);
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    runs.iter()
        .map(|run| {
            assert_eq!(run["completed"], jobs, "{} left jobs unfinished", run["policy"]);
            assert_eq!(run["unfinished"], 0);
            run["jct_secs"]["mean"].as_f64().unwrap()
        })
        .collect()
}

#[test]
fn sacct_sample_replays_under_fifo_and_sjf() {
    let json = sim_json(&format!("sacct:{SACCT_SAMPLE}"), "fifo,sjf", &[]);
    assert_eq!(json["workload"]["kind"], "sacct");
    assert_eq!(json["workload"]["tenants"], 4, "vision, nlp, speech, robotics");
    // 46 rows: 32 jobs kept, 6 steps, 4 CPU-only (one a heterogeneous component),
    // 3 never started (pending, a pending array, cancelled while pending), 1 running.
    let notes = notes(&json);
    for expected in [
        "skipped 6 rows: sacct: job step",
        "skipped 4 rows: sacct: CPU-only job",
        "skipped 3 rows: sacct: never started",
        "skipped 1 rows: sacct: still running",
        "sacct: kept jobs by final state: CANCELLED 1, COMPLETED 25, FAILED 2, NODE_FAIL 1, OUT_OF_MEMORY 1, PREEMPTED 1, TIMEOUT 1",
        "time 0 is 2026-01-05 08:00:00",
    ] {
        assert!(notes.iter().any(|n| n.starts_with(expected)), "no note {expected:?} in {notes:#?}");
    }
    let jct = all_complete(&json, 32);
    // Long 8-GPU jobs arrive first; SJF lets the short ones past them.
    assert!(jct[1] < jct[0], "sjf mean JCT {} should be below fifo's {}", jct[1], jct[0]);
}

#[test]
fn kubectl_pods_replay_under_fifo_and_tiresias() {
    let json = sim_json(&format!("kubectl:{PODS_SAMPLE}"), "fifo,tiresias", &[]);
    assert_eq!(json["workload"]["kind"], "kubectl");
    assert_eq!(json["workload"]["tenants"], 3, "team-nlp, team-recsys, team-vision");
    // 27 pods: 22 kept, 2 without GPUs, 1 Pending, 1 Running, 1 evicted (no finish).
    let notes = notes(&json);
    for expected in [
        "skipped 2 rows: kubectl: no nvidia.com/gpu",
        "skipped 1 rows: kubectl: never started",
        "skipped 1 rows: kubectl: still running",
        "skipped 1 rows: kubectl: no finish time",
        "kubectl: kept pods by phase: Failed 2, Succeeded 20",
        "time 0 is 2026-01-12 09:00:00",
    ] {
        assert!(notes.iter().any(|n| n.starts_with(expected)), "no note {expected:?} in {notes:#?}");
    }
    let jct = all_complete(&json, 22);
    assert_ne!(jct[0], jct[1], "the two policies should order this queue differently");
}

#[test]
fn kubectl_jobs_replay_with_gangs_and_conditions() {
    let json = sim_json(&format!("kubectl:{JOBS_SAMPLE}"), "fifo,sjf", &[]);
    // 8 Jobs: 5 kept (4 Complete, 1 Failed), 1 without GPUs, 1 active, 1 suspended.
    let notes = notes(&json);
    for expected in [
        "skipped 1 rows: kubectl: no nvidia.com/gpu",
        "skipped 1 rows: kubectl: never started",
        "skipped 1 rows: kubectl: still running",
        "kubectl: kept Jobs by final condition: Complete 4, Failed 1",
        "kubectl: 2 Jobs with parallelism > 1 run as one gang",
    ] {
        assert!(notes.iter().any(|n| n.starts_with(expected)), "no note {expected:?} in {notes:#?}");
    }
    all_complete(&json, 5);
}

#[test]
fn operator_traces_are_deterministic_and_slice_by_wall_clock() {
    let trace = format!("sacct:{SACCT_SAMPLE}");
    let one = cotenant(&["sim", "--trace", &trace, "--cluster", CLUSTER, "--json", "--threads", "1"]);
    let two = cotenant(&["sim", "--trace", &trace, "--cluster", CLUSTER, "--json", "--threads", "2"]);
    assert!(one.status.success() && two.status.success(), "{}", stderr(&one));
    assert_eq!(one.stdout, two.stdout);
    // Submits from 10:00 (inclusive) to 12:00 (exclusive): the 6 array tasks 4130_*
    // (10:00), 4120 (10:10), 4122 (10:40), 4123 (11:05), 4140+0 (11:20), 4124 (11:30);
    // 4119 (09:55) and 4126 (12:20) are out.
    let json =
        sim_json(&trace, "fifo,sjf", &["--from", "2026-01-05 10:00:00", "--to", "2026-01-05 12:00:00"]);
    all_complete(&json, 11);
    assert!(notes(&json).iter().any(|n| n == "time window kept 11 of 32 jobs"), "{:#?}", notes(&json));
}

/// Runs `sim` on `text` written to `name` and returns stderr, asserting a clean failure.
fn fails(kind: &str, name: &str, text: &str) -> String {
    let dir = temp_dir("operator-malformed");
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = cotenant(&["sim", "--trace", &format!("{kind}:{}", path.display()), "--cluster", CLUSTER]);
    assert!(!out.status.success(), "{name} should fail");
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn malformed_sacct_rows_name_file_line_and_field() {
    let sample = std::fs::read_to_string(SACCT_SAMPLE).unwrap();
    let lines: Vec<&str> = sample.lines().collect();
    // Line 11 is job 4104; break one field of it at a time.
    assert!(lines[10].starts_with("4104|"), "{}", lines[10]);
    let with = |from: &str, to: &str| {
        let mut lines = lines.clone();
        let broken = lines[10].replacen(from, to, 1);
        assert_ne!(broken, lines[10]);
        lines[10] = &broken;
        lines.join("\n")
    };
    let cases = [
        (
            with("2026-01-05T08:14:00", "2026-01-05T08:74:00"),
            "bad-time.txt line 11, field Submit: expected a time HH:MM:SS",
        ),
        (
            with("gres/gpu=4", "gres/gpu=four"),
            "bad-tres.txt line 11, field AllocTRES: expected a whole number of gres/gpu",
        ),
        (with("00:40:00", "00:4x:00"), "bad-elapsed.txt line 11, field Elapsed: expected an elapsed time"),
        (
            with("|COMPLETED|", "|FINISHED|"),
            "bad-state.txt line 11, field State: unknown job state \"FINISHED\"",
        ),
    ];
    let names = ["bad-time.txt", "bad-tres.txt", "bad-elapsed.txt", "bad-state.txt"];
    for ((text, expected), name) in cases.into_iter().zip(names) {
        let err = fails("sacct", name, &text);
        assert!(err.contains(expected), "{name}: {err}");
    }
    let no_tres = sample.replacen("|AllocTRES|", "|Alloc|", 1);
    let err = fails("sacct", "no-column.txt", &no_tres);
    assert!(err.contains("no-column.txt line 1: missing column `AllocTRES`"), "{err}");
}

#[test]
fn malformed_kubectl_items_name_file_line_and_json_path() {
    let sample = std::fs::read_to_string(PODS_SAMPLE).unwrap();
    let gpus = "\"nvidia.com/gpu\": \"8\"";
    let first = sample.find(gpus).unwrap();
    let line = sample[..first].matches('\n').count() + 1;
    let bad_type = format!("{}\"nvidia.com/gpu\": [8]{}", &sample[..first], &sample[first + gpus.len()..]);
    let err = fails("kubectl", "bad-type.json", &bad_type);
    let expected = format!(
        "bad-type.json line {line}, field items[0].spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: \
         expected a whole number of GPUs such as \"4\", got an array"
    );
    assert!(err.contains(&expected), "{err}");
    let bad_time = sample.replacen(
        "\"creationTimestamp\": \"2026-01-12T09:02:00Z\"",
        "\"creationTimestamp\": 1768208520",
        1,
    );
    let err = fails("kubectl", "bad-time.json", &bad_time);
    assert!(err.contains("field items[1].metadata.creationTimestamp: expected an RFC 3339 time"), "{err}");
    assert!(err.contains("got a number 1768208520"), "{err}");
    let err = fails("kubectl", "truncated.json", &sample[..sample.len() / 2]);
    assert!(err.contains("truncated.json line ") && err.contains("not valid JSON"), "{err}");
}
