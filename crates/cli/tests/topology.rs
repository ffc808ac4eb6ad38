//! `cotenant sim --topology`, `--routing`, `--comm-profile` and the topology placements
//! (docs/topology.md): bad input is an error naming the flag and key (exit 1, no panic);
//! a run with a topology prints its spread line; one without prints nothing new.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn sim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cotenant"))
        .arg("sim")
        .args(["--synthetic", "jobs=20,rate=4/h,seed=3,gpus=16", "--cluster", "nodes=8,gpus-per-node=8"])
        .args(["--policy", "fifo"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_topology_input_names_the_flag_and_key() {
    for (args, needles) in [
        (vec!["--topology", "spines=0"], vec!["--topology", "spines"]),
        (vec!["--topology", "spine=2"], vec!["spines"]),
        (vec!["--topology", "torus=2x2x3"], vec!["torus", "8 nodes"]),
        (vec!["--routing", "vclos"], vec!["--routing needs a topology"]),
        (vec!["--topology", "leaf=4", "--routing", "vclos"], vec!["--placement vclos"]),
        (vec!["--topology", "leaf=4", "--placement", "vclos"], vec!["--routing vclos"]),
        (vec!["--topology", "leaf=4", "--placement", "torus"], vec!["torus=XxYxZ"]),
        (vec!["--comm-profile", "fraction=2"], vec!["--comm-profile fraction"]),
    ] {
        let (code, _, stderr) = sim(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{args:?}: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn topology_runs_report_spread_and_plain_runs_do_not() {
    let (code, plain, _) = sim(&[]);
    assert_eq!(code, 0);
    assert!(!plain.contains("topology"));
    for placement in ["consolidated", "arnold"] {
        let (code, out, err) = sim(&[
            "--topology",
            "leaf=4,spines=2",
            "--comm-profile",
            "fraction=0.3,tensor=8",
            "--placement",
            placement,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("topology: fifo: 20 multi-node starts"), "{out}");
    }
    let (code, out, err) = sim(&[
        "--topology",
        "leaf=4,spines=2",
        "--routing",
        "vclos",
        "--placement",
        "vclos",
        "--comm-profile",
        "fraction=0.3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["topology"][0]["multi_node_starts"], 20);
    let (code, _, err) =
        sim(&["--topology", "torus=2x2x2", "--placement", "torus", "--comm-profile", "fraction=0.3"]);
    assert_eq!(code, 0, "{err}");
}

/// Mean JCT of `cotenant sim --json` on 64-GPU jobs of job type `job_type`, tensor 8 x
/// data 8 across two oversubscribed leaves, with or without the topology.
fn llm_mean_jct(job_type: &str, topology: bool) -> f64 {
    let synthetic = format!("jobs=12,rate=4/h,seed=1,gpus=64,durations=7200,job-types={job_type}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cotenant"));
    cmd.arg("sim")
        .args(["--synthetic", &synthetic, "--cluster", "nodes=64,gpus-per-node=8,gpu=a100"])
        .args(["--policy", "fifo", "--json", "--comm-profile", "fraction=0.3,tensor=8,pipeline=1"]);
    if topology {
        cmd.args(["--topology", "leaf=4,spines=2,oversubscription=4,nic-gbps=200"]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["runs"][0]["jct_secs"]["mean"].as_f64().unwrap_or_else(|| panic!("no mean JCT in {json}"))
}

/// A job type that names a training preset is timed by the training model on its
/// placement's links (sim::train_steps), not by its stated communication fraction: the
/// same jobs without a topology run alike whatever their type, and with one the GPT-3
/// 175B gangs (a 44 GB-per-GPU gradient ring across half-bandwidth uplinks) slow down
/// by a different amount than the 30% fraction gives an unnamed type.
#[test]
fn jobs_that_name_a_model_are_timed_by_the_training_model() {
    let plain = llm_mean_jct("gpt3-175b", false);
    assert_eq!(plain, llm_mean_jct("resnet", false));
    let named = llm_mean_jct("gpt3-175b", true);
    let fraction = llm_mean_jct("resnet", true);
    assert!(fraction > plain, "the fraction model slows the spread gangs: {fraction} vs {plain}");
    assert!(named > fraction, "the training model's ring is slower still: {named} vs {fraction}");
}
