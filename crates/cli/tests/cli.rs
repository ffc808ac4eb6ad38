//! End-to-end checks of the `cotenant` binary: determinism of its outputs and
//! clear errors (file, line, field; non-zero exit) on bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

const ONE_DAY: [&str; 4] = ["--from", "2017-11-06", "--to", "2017-11-07"];

#[test]
fn json_and_csv_are_byte_identical_across_runs_and_thread_counts() {
    let dir = temp_dir("determinism");
    let mut outputs = Vec::new();
    for (i, threads) in ["1", "2", "2"].iter().enumerate() {
        let csv = dir.join(format!("jobs-{i}.csv"));
        let csv_arg = csv.to_str().unwrap().to_string();
        let mut args: Vec<&str> = ONE_DAY.to_vec();
        args.extend(["--json", "--threads", threads, "--jobs-csv", &csv_arg]);
        let out = cotenant(&[&["sim"], args.as_slice()].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        outputs.push((out.stdout, std::fs::read(&csv).unwrap()));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[1], outputs[2]);
    let json: serde_json::Value = serde_json::from_slice(&outputs[0].0).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5, "the default compares five policies");
    assert_eq!(json["workload"]["jobs"], 325, "2017-11-06 holds 325 Philly jobs");
    for run in runs {
        assert_eq!(run["completed"], 325, "{} left jobs unfinished", run["policy"]);
    }
    let csv = String::from_utf8(outputs[0].1.clone()).unwrap();
    assert_eq!(csv.lines().count(), 1 + 5 * 325);
}

#[test]
fn default_run_prints_a_comparison_table() {
    let out = cotenant(&["sim", "--max-jobs", "200", "--policy", "fifo,tiresias"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("JCT mean"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("tiresias")), "{text}");
    assert!(text.contains("Mean JCT by tenant"), "{text}");
}

#[test]
fn malformed_row_names_file_line_and_field() {
    let dir = temp_dir("malformed");
    let path = dir.join("philly.csv");
    std::fs::write(
        &path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-06 00:00:00,100,1,100,vc1\n2017-11-06 00:01:00,50,x,50,vc1\n",
    )
    .unwrap();
    let out = cotenant(&["sim", "--trace", &format!("philly:{}", path.display())]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("philly.csv line 3, field num_gpus"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn negative_duration_is_an_error() {
    let dir = temp_dir("negative");
    let path = dir.join("philly.csv");
    std::fs::write(&path, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-06 00:00:00,-5,1,-5,vc1\n")
        .unwrap();
    let out = cotenant(&["sim", "--trace", &format!("philly:{}", path.display())]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("line 2, field duration"), "{err}");
}

#[test]
fn job_wider_than_cluster_is_an_error_unless_dropped() {
    let dir = temp_dir("wide");
    let path = dir.join("philly.csv");
    std::fs::write(
        &path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-06 00:00:00,100,1,100,vc1\n2017-11-06 00:00:10,100,16,1600,vc1\n",
    )
    .unwrap();
    let trace = format!("philly:{}", path.display());
    let out = cotenant(&["sim", "--trace", &trace, "--cluster", "nodes=1,gpus-per-node=8"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("line 3, field num_gpus: job asks for 16 GPUs but the cluster has 8"), "{err}");

    let out =
        cotenant(&["sim", "--trace", &trace, "--cluster", "nodes=1,gpus-per-node=8", "--drop-wide-jobs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("dropped 1 jobs wider than the cluster's 8 GPUs"), "{}", stdout(&out));
}

#[test]
fn unknown_policy_and_trace_kind_are_errors() {
    let out = cotenant(&["sim", "--policy", "fifo,nonesuch"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown policy 'nonesuch'; known policies: fifo"), "{}", stderr(&out));

    let out = cotenant(&["sim", "--trace", "slurm:/tmp/x.csv"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("unknown trace kind"), "{}", stderr(&out));

    let out = cotenant(&["sim", "--set", "knob=3", "--policy", "fifo"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no policy in this run takes option 'knob'"), "{}", stderr(&out));
}

#[test]
fn impossible_cluster_is_an_error() {
    let out = cotenant(&["sim", "--cluster", "nodes=0,gpus-per-node=8"]);
    assert!(!out.status.success());
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn skipped_rows_are_counted_and_reported() {
    let dir = temp_dir("skipped");
    let path = dir.join("openb_pod_list_test.csv");
    std::fs::write(
        &path,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p1,1000,1024,1,1000,,LS,Succeeded,0,100,10\n\
         p2,1000,1024,0,0,,BE,Succeeded,5,50,6\n\
         p3,1000,1024,2,1000,,LS,Succeeded,20,300,30\n",
    )
    .unwrap();
    let out = cotenant(&[
        "sim",
        "--trace",
        &format!("openb:{}", path.display()),
        "--cluster",
        "nodes=1,gpus-per-node=4",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("skipped 1 rows"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("fifo") && l.contains("2/2")), "{text}");
}

#[test]
fn policies_lists_every_baseline() {
    let out = cotenant(&["policies"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for name in ["fifo", "fifo-backfill", "sjf", "srtf", "las", "tiresias"] {
        assert!(text.lines().any(|l| l.split_whitespace().next() == Some(name)), "{name} missing:\n{text}");
    }
}

#[test]
fn explain_follows_one_job_under_each_policy() {
    let out = cotenant(&["sim", "--policy", "fifo,srtf", "--explain", "4318"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let explained = text.split("Job 4318").nth(1).expect("explanation printed");
    assert!(explained.contains("fifo:") && explained.contains("srtf:"), "{text}");
    assert!(explained.contains("waiting: needs 1 GPUs, 0 free"), "{text}");
    assert_eq!(explained.matches("completed").count(), 2, "{text}");

    let out = cotenant(&["sim", "--explain", "999999"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--explain 999999: the workload has jobs 0..6391"), "{}", stderr(&out));
}
