//! Synergy from the command line: the preset workload runs, a malformed matrix file
//! and an unknown job class are errors naming what is wrong, and a job asking more
//! CPUs than any node has ends with that reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{cotenant, stderr, stdout, temp_dir};

const CLUSTER: &str = "nodes=2,gpus-per-node=8,gpu=v100,cpus=24,mem-gib=500";

fn sim(synthetic: &str, matrices: &str) -> std::process::Output {
    cotenant(&[
        "sim",
        "--synthetic",
        synthetic,
        "--cluster",
        CLUSTER,
        "--synergy-matrices",
        matrices,
        "--policy",
        "synergy-tune,synergy-proportional",
        "--json",
        "--threads",
        "1",
    ])
}

#[test]
fn the_preset_runs_and_tune_is_not_slower_than_proportional() {
    let out = sim("preset=synergy,jobs=60,rate=9/h,gpus=1,seed=3", "bundled");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mean = |i: usize| json["runs"][i]["jct_secs"]["mean"].as_f64().unwrap();
    assert_eq!(json["runs"][0]["completed"], 60);
    assert!(mean(0) <= mean(1), "TUNE {} vs proportional {}", mean(0), mean(1));
}

#[test]
fn a_malformed_matrix_file_names_file_line_and_field() {
    let dir = temp_dir("synergy-matrix");
    let path = dir.join("bad.txt");
    std::fs::write(
        &path,
        "cpus_per_gpu = 1 3\nmemory_gib_per_gpu = 62.5\n[image]\ncpus 1 = 0.5\ncpus 3 = 1.0 7\n",
    )
    .unwrap();
    let out = sim("preset=synergy,jobs=5,gpus=1", path.to_str().unwrap());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("bad.txt line 5, field [image] cpus 3: 2 values; memory_gib_per_gpu has 1"),
        "{err}"
    );
}

#[test]
fn an_unknown_job_class_is_an_error_naming_the_classes() {
    let out = sim("preset=synergy,jobs=5,gpus=1,job-types=image|video,job-mix=1:1", "bundled");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("job type \"video\" names no class"), "{err}");
    assert!(err.contains("image, speech, language"), "{err}");
}

#[test]
fn a_job_wider_than_any_node_ends_with_its_reason() {
    let out = sim("preset=synergy,jobs=3,gpus=1,cpus-per-gpu=30", "bundled");
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ended = json["runs"][0]["ended"].to_string();
    assert!(ended.contains("wider than any node (30 CPUs requested; the largest node has 24)"), "{ended}");
}
