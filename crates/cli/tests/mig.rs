//! `--mig` from the command line: MIG policies run on the MISO workload and give
//! the same bytes for the same seed; bad MIG input is an error naming the file,
//! the entry and the field (or the flag), never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

const CLUSTER: &str = "nodes=1,gpus-per-node=4,gpu=A100-40GB";

fn sim(extra: &[&str]) -> std::process::Output {
    let mut args =
        vec!["sim", "--synthetic", "miso:jobs=20,seed=3,work=5m:20m", "--cluster", CLUSTER, "--mig"];
    args.extend_from_slice(extra);
    cotenant(&args)
}

fn fails_with(out: std::process::Output, wanted: &[&str]) {
    let err = stderr(&out);
    assert!(!out.status.success(), "succeeded: {}", stdout(&out));
    for w in wanted {
        assert!(err.contains(w), "expected {w:?} in:\n{err}");
    }
}

#[test]
fn mig_policies_finish_every_job_and_repeat_byte_for_byte() {
    let args = [
        "--policy",
        "miso,miso-oracle,mig-unpartitioned,mig-static",
        "--set",
        "partition=3g.20gb+2g.10gb+2g.10gb",
        "--json",
        "--strict",
    ];
    let first = sim(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let json: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    for run in json["runs"].as_array().unwrap() {
        assert_eq!(run["completed"], 20, "{}", run["policy"]);
    }
    assert_eq!(first.stdout, sim(&args).stdout);
}

#[test]
fn bad_mig_input_is_named() {
    // No GPU type of the cluster has a geometry.
    let out = cotenant(&[
        "sim",
        "--synthetic",
        "miso:jobs=5",
        "--cluster",
        "nodes=1,gpus-per-node=2,gpu=v100",
        "--mig",
        "--policy",
        "miso",
    ]);
    fails_with(
        out,
        &["--mig: no GPU type of the cluster (v100) has a MIG geometry", "A100-40GB, H100-80GB, H200"],
    );
    // An unknown profile in a static partition.
    fails_with(
        sim(&["--policy", "mig-static", "--set", "partition=3g.20gb+5g.25gb"]),
        &["option 'partition=3g.20gb+5g.25gb'", "unknown MIG profile '5g.25gb'"],
    );
    // 4g+3g only with the flag.
    fails_with(
        sim(&["--policy", "mig-static", "--set", "partition=4g.20gb+3g.20gb"]),
        &["allow_4g_3g = false"],
    );
    let ok = sim(&["--policy", "mig-static", "--set", "partition=4g.20gb+3g.20gb", "--mig-allow-4g3g"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    // A MIG policy without --mig.
    let out = cotenant(&["sim", "--synthetic", "miso:jobs=5", "--cluster", CLUSTER, "--policy", "miso"]);
    fails_with(out, &["policy 'miso' needs MIG GPUs and speed-vs-slice curves (run with --mig)"]);
    // Files: an unknown profile field, a malformed curve.
    let dir = temp_dir("mig-files");
    let geometry = dir.join("geometry.toml");
    std::fs::write(&geometry, "[[gpu]]\nname = \"A100-40GB\"\nmemory_slots = 8\nprofiles = [\n  { name = \"1g.5gb\", compute_slices = 1, memory_slots = 1, starts = [0, 7, 8], max_instances = 7, sms = 14 },\n]\n").unwrap();
    fails_with(
        sim(&["--policy", "miso", "--mig-geometry", geometry.to_str().unwrap()]),
        &["geometry.toml [[gpu]] A100-40GB, key `profiles.1g.5gb.starts`: A100-40GB: profile 1g.5gb: starts start 8 + 1 slots passes"],
    );
    let curves = dir.join("curves.toml");
    std::fs::write(&curves, "[[class]]\nname = \"compute-bound\"\nspeeds = [0.1, 0.2, 0.3, 0.4, 0.9]\nweight = 1\nprovenance = \"test\"\n").unwrap();
    fails_with(
        sim(&["--policy", "miso", "--mig-curves", curves.to_str().unwrap()]),
        &["curves.toml [[class]] #1 (compute-bound), key `speeds`: the 7g speed must be 1"],
    );
    // Multi-GPU jobs cannot run in MIG instances.
    let out =
        cotenant(&["sim", "--synthetic", "jobs=5,gpus=2", "--cluster", CLUSTER, "--mig", "--policy", "miso"]);
    fails_with(out, &["asks for 2 GPUs; a MIG instance hosts one single-GPU job"]);
}
