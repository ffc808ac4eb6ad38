//! Run health: a run that cannot be trusted says so in the table, the JSON and
//! the exit status (`--strict`), and the cases that once gave wrong answers with
//! exit status 0 (issue 7) stay fixed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

use std::path::PathBuf;
use std::process::Output;

fn data(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data").join(path).to_str().unwrap().to_string()
}

/// `sim` on a Gavel-format trace file, 2 V100 + 4 K80, the bundled throughput table.
fn gavel_sim(trace: &str, policies: &str, extra: &[&str]) -> Output {
    let trace = format!("gavel:{trace}");
    let throughputs = data("gavel/simulation_throughputs.json.gz");
    let mut args = vec![
        "sim",
        "--trace",
        &trace,
        "--throughputs",
        &throughputs,
        "--cluster",
        "v100=2,k80=4",
        "--policy",
        policies,
    ];
    args.extend(extra);
    cotenant(&args)
}

/// `sim --json` on a bundled Gavel trace, default overheads.
fn gavel_json(trace: &str, policies: &str, extra: &[&str]) -> (Output, serde_json::Value) {
    let path = data(&format!("gavel/physical_cluster/{trace}.trace.gz"));
    let out = gavel_sim(&path, policies, &[&["--json"], extra].concat());
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, json)
}

fn assert_all_done_and_in_range(json: &serde_json::Value) {
    assert_eq!(json["healthy"], true, "{json:#}");
    for run in json["runs"].as_array().unwrap() {
        let policy = &run["policy"];
        assert_eq!(run["completed"], run["jobs"], "{policy}: {:#}", run["unfinished_reasons"]);
        assert_eq!(run["healthy"], true, "{policy}: {:#}", run["warnings"]);
        for metric in ["gpu_utilization", "goodput_utilization", "idle_while_waiting"] {
            let value = run[metric].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&value), "{policy} {metric} = {value}");
        }
    }
}

/// Was: 82 of 100 jobs done, utilization 2164.7%, 1.1 million preemptions, exit 0
/// (rounds planned without the 30 s restore ended before any restore was over).
#[test]
fn gavel_max_min_fairness_with_a_restore_time_finishes_every_job() {
    let (out, json) = gavel_json("minimize_makespan", "max-min-fairness", &["--strict"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_all_done_and_in_range(&json);
    let preemptions = json["runs"][0]["preemptions"].as_u64().unwrap();
    assert!(preemptions < 20_000, "{preemptions} preemptions: livelock back?");
}

/// Was: 12 of 96 jobs waiting forever (4-GPU jobs assigned to the 2-GPU V100 type), exit 0.
#[test]
fn gavel_fifo_runs_every_job_of_the_max_min_fairness_trace() {
    let (out, json) = gavel_json("max_min_fairness", "gavel-fifo", &["--strict"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_all_done_and_in_range(&json);
}

#[test]
fn bundled_gavel_traces_finish_under_gavel_policies_with_default_flags() {
    for trace in ["small_test", "artifact_evaluation", "debug", "highmem_test"] {
        let policies = "gavel-fifo,fifo-perf,max-min-fairness,max-min-fairness-perf,min-total-duration-perf,\
                        max-sum-throughput-perf,max-min-fairness-packed,fifo-packed,gandiva";
        let (out, json) = gavel_json(trace, policies, &["--strict"]);
        assert!(out.status.success(), "{trace}: {}", stderr(&out));
        assert_all_done_and_in_range(&json);
    }
}

/// Was: utilization 2,251,873.9% with a Gavel job of 9.2e18 steps, exit 0.
#[test]
fn a_job_longer_than_the_limit_is_refused_naming_line_and_field() {
    let dir = temp_dir("long-gavel");
    let trace = dir.join("long.trace");
    let row = |steps: &str| {
        format!(
            "ResNet-18 (batch size 128)\tpython3 main.py\tcifar10\t--num_steps\t1\t{steps}\t1\t1\t-1\t0\n"
        )
    };
    // Over the steps limit; then under it but years of work at the table's fastest rate.
    for (steps, wanted) in [
        ("9200000000000000000", ["line 2, field total_steps", "MAX_JOB_STEPS"]),
        ("10000000000", ["line 2", "MAX_JOB_DURATION"]),
    ] {
        std::fs::write(&trace, row("1000") + &row(steps)).unwrap();
        let out = gavel_sim(trace.to_str().unwrap(), "gavel-fifo", &[]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(wanted.iter().all(|w| err.contains(w)), "{err}");
    }
}

/// Jobs a tenant limit ends are stated after the table as notes (was: "gpu_limit = 0
/// ends half the jobs with no note in the table"), without making the run unhealthy.
#[test]
fn jobs_ended_by_a_tenant_limit_are_noted_after_the_table() {
    let dir = temp_dir("ended");
    let trace = dir.join("limit.csv");
    let cluster = dir.join("cluster.toml");
    std::fs::write(
        &cluster,
        "[[nodes]]\ncount = 1\ngpu = \"v100\"\ngpus = 2\n\n[[tenants]]\nname = \"a\"\ngpu_limit = 1\n",
    )
    .unwrap();
    std::fs::write(
        &trace,
        "timestamp,duration,num_gpus,gpu_time,cluster\n\
         2017-11-06 00:00:00,3600.0,1,3600.0,a\n\
         2017-11-06 00:00:10,3600.0,2,7200.0,a\n",
    )
    .unwrap();
    let trace_arg = format!("philly:{}", trace.display());
    let args = [
        "sim",
        "--trace",
        &trace_arg,
        "--cluster",
        cluster.to_str().unwrap(),
        "--policy",
        "fifo",
        "--strict",
    ];
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("note [fifo]: 1 of 2 jobs ended without completing"), "{text}");
    assert!(!text.contains("WARNING"), "{text}");
}

/// A run cut short by its step limit (what a livelock hits) with jobs left: a
/// warning block after the table, `healthy: false` in the JSON, and `--strict`
/// exits 2 after printing everything.
#[test]
fn a_run_stopped_at_its_step_limit_warns_and_strict_fails() {
    let base = ["sim", "--max-jobs", "200", "--policy", "fifo,las", "--max-steps", "50"];
    let out = cotenant(&base);
    assert!(out.status.success(), "without --strict the results print and exit 0: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("WARNING [las]: the run hit its step limit of 50 engine steps"), "{text}");
    assert!(text.contains("jobs did not finish"), "{text}");
    assert!(text.contains("not trustworthy"), "{text}");
    assert!(stderr(&out).contains("unhealthy"), "{}", stderr(&out));

    let strict = cotenant(&[&base[..], &["--strict"]].concat());
    assert_eq!(strict.status.code(), Some(2), "{}", stderr(&strict));
    assert!(stdout(&strict).contains("JCT mean"), "results still print under --strict");

    let json_out = cotenant(&[&base[..], &["--json", "--strict"]].concat());
    assert_eq!(json_out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(json["healthy"], false);
    for run in json["runs"].as_array().unwrap() {
        assert_eq!(run["healthy"], false);
        let unfinished = run["unfinished"].as_u64().unwrap();
        assert!(unfinished > 0);
        let by_reason: u64 =
            run["unfinished_reasons"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(by_reason, unfinished);
    }
}

#[test]
fn flags_out_of_range_are_refused_naming_the_limit() {
    for (flag, value, expect) in [
        ("--share-window", "1us", "--share-window 1us: must be between 1s and"),
        ("--round", "100000000d", "--round 100000000d: must be between 1ms and 7d"),
        ("--threads", "20000", "--threads 20000: must be between 1 and 1024"),
        ("--threads", "0", "--threads 0: must be between 1 and 1024"),
        ("--restore-overhead", "1000d", "--restore-overhead 1000d: must be between 0s and 366d"),
        ("--set", "las.quantum=1us", "must be between 1 ms and 3653 days"),
    ] {
        let out = cotenant(&["sim", "--max-jobs", "10", flag, value]);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}");
        assert!(stderr(&out).contains(expect), "{flag} {value}: {}", stderr(&out));
    }
}

#[test]
fn an_absurd_target_load_is_refused_by_the_sizer() {
    let out = cotenant(&["sim", "--max-jobs", "100", "--target-load", "1e-9"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("the sizing rule asks for") && err.contains("MAX_CLUSTER_NODES"), "{err}");
}

#[test]
fn the_table_explains_its_columns() {
    let out = cotenant(&["sim", "--max-jobs", "50", "--policy", "fifo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("offered load") && text.contains("\"-\" when no window"), "{text}");
}
