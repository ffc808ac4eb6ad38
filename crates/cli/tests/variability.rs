//! `cotenant sim --variability/--stragglers/--placement variability-aware` end to end:
//! determinism, the note with the factors' statistics, and errors that name the flag.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

/// 60 nodes of 8 GPUs.
const C480: &str = "nodes=60,gpus-per-node=8";

fn sim_json(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["sim", "--max-jobs", "300", "--policy", "fifo,sjf", "--json"];
    args.extend_from_slice(extra);
    let out = cotenant(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn fails_with(args: &[&str], wanted: &str) {
    let out = cotenant(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail: {}", stdout(&out));
    assert!(stderr(&out).contains(wanted), "{args:?}: expected {wanted:?} in:\n{}", stderr(&out));
}

#[test]
fn variability_is_deterministic_and_changes_the_run() {
    let plain = sim_json(&[]);
    let varied =
        sim_json(&["--variability", "stress,seed=4", "--placement", "variability-aware", "--threads", "1"]);
    let again =
        sim_json(&["--variability", "stress,seed=4", "--placement", "variability-aware", "--threads", "2"]);
    assert_eq!(varied, again, "same seed, any thread count: same results");
    assert!(varied["runs"].as_array().is_some_and(|runs| runs.len() == 2), "{varied}");
    assert_ne!(plain["runs"], varied["runs"], "1.5x-slow GPUs change the JCTs");
    let other_seed = sim_json(&["--variability", "stress,seed=5", "--placement", "variability-aware"]);
    assert_ne!(varied["runs"], other_seed["runs"]);
}

#[test]
fn the_text_output_notes_the_factors() {
    let out = cotenant(&[
        "sim",
        "--max-jobs",
        "100",
        "--policy",
        "fifo",
        "--variability",
        "default",
        "--cluster",
        C480,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("note: GPU speed factors (--variability default): 480 GPUs, mean"), "{text}");
}

#[test]
fn bad_variability_flags_are_named() {
    fails_with(
        &["sim", "--max-jobs", "10", "--variability", "sigma=2"],
        "--variability sigma=2: sigma=2 must be in [0, 0.3]",
    );
    fails_with(
        &["sim", "--max-jobs", "10", "--variability", "fast"],
        "--variability fast: 'fast' is not KEY=VALUE",
    );
    fails_with(&["sim", "--max-jobs", "10", "--stragglers", "auto"], "--stragglers needs --variability");
    fails_with(
        &["sim", "--max-jobs", "10", "--placement", "variability-aware"],
        "--placement variability-aware needs --variability",
    );
    fails_with(
        &["sim", "--max-jobs", "10", "--variability", "default", "--stragglers", "sometimes"],
        "--stragglers sometimes: unknown mode 'sometimes'",
    );
    let dir = temp_dir("variability-file");
    let short = dir.join("short.txt");
    std::fs::write(&short, "1.0\n0.9\n").unwrap();
    let flag = format!("file={}", short.display());
    fails_with(
        &["sim", "--max-jobs", "10", "--cluster", C480, "--variability", &flag],
        "2 factors for a cluster of 480 GPUs",
    );
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "# measured\n1.0\nslow\n").unwrap();
    let flag = format!("file={}", bad.display());
    fails_with(&["sim", "--max-jobs", "10", "--variability", &flag], "line 3: 'slow' is not a number");
}

#[test]
fn a_measured_file_is_read() {
    let dir = temp_dir("variability-measured");
    let path = dir.join("speeds.txt");
    let body: String = (0..480).map(|i| if i % 8 == 0 { "0.5\n" } else { "1.0\n" }).collect();
    std::fs::write(&path, body).unwrap();
    let flag = format!("file={}", path.display());
    let out =
        cotenant(&["sim", "--max-jobs", "50", "--policy", "fifo", "--cluster", C480, "--variability", &flag]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("480 GPUs, mean 0.938"), "{}", stdout(&out));
}
