//! `cotenant calibrate` and `serve-sim --latency-model profile:DIR` on a tiny hand-made
//! Vidur-format profile: a hand-computed decode step, determinism, refusals that name
//! what the profiles cover, and errors that name file, line and field.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{cotenant, stderr, stdout, temp_dir};

// The operators the compute profiles time: the reader's own list, not a copy.
use cotenant_perf::profile::OPERATORS;

/// A Llama-3-8B-shaped profile at TP 1 where every operator takes `ms` at 1 and 4,096
/// tokens (so a layer is 9 x ms at any size), plus an empty network folder.
fn tiny_profiles(dir: &Path, ms: &str, second_row_n_head: &str) {
    std::fs::create_dir_all(dir.join("compute")).unwrap();
    std::fs::create_dir_all(dir.join("network")).unwrap();
    let mut header: Vec<String> = OPERATORS.iter().map(|op| format!("time_stats.{op}.median")).collect();
    header.extend(
        ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "num_tokens", "num_tensor_parallel_workers"]
            .map(String::from),
    );
    let times = [ms; 9].join(",");
    let text = format!(
        "{}\n{times},32,8,4096,14336,1,1\n{times},{second_row_n_head},8,4096,14336,4096,1\n",
        header.join(",")
    );
    std::fs::write(dir.join("compute").join("h100_Tiny_mlp.csv"), text).unwrap();
}

/// Every operator 0.1 ms: a layer is 0.9 ms, 32 layers 28.8 ms; plus c0 1 ms, the LM head
/// (2 x 128,256 x 4,096 bytes / (0.983 x 3.35 TB/s) = 0.32 ms) and a small KV read: a
/// batch-1 decode step of about 30.1 ms.
#[test]
fn profile_latency_model_decode_step_by_hand() {
    let dir = temp_dir("calibrate-tiny");
    tiny_profiles(&dir, "0.1", "32");
    let model = format!("profile:{}", dir.display());
    let args = [
        "serve-sim",
        "--trace",
        "synthetic",
        "--tenant",
        "name=solo,rate=0.05,prompt=100,output=50,sigma=0",
        "--duration-s",
        "100",
        "--gpu",
        "H100-SXM",
        "--latency-model",
        &model,
    ];
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let tpot = text
        .lines()
        .find(|l| l.trim_start().starts_with("TPOT"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("a TPOT p50");
    assert!((29.8..=30.6).contains(&tpot), "TPOT p50 {tpot} ms\n{text}");
    assert_eq!(stdout(&cotenant(&args)), text, "deterministic");

    // TP 2 is not covered: refused, naming the file and the degrees it has.
    let mut tp2 = args.to_vec();
    tp2.extend(["--tp", "2"]);
    let out = cotenant(&tp2);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("h100_Tiny_mlp.csv has no rows for tensor-parallel degree 2 (it covers [1])"),
        "{}",
        stderr(&out)
    );

    // Another GPU is not covered: refused, listing what is.
    let mut a100 = args.to_vec();
    a100[8] = "A100-80G";
    let out = cotenant(&a100);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the profiles cover: h100_Tiny_mlp.csv (hidden 4096"), "{}", stderr(&out));
}

#[test]
fn calibrate_runs_on_a_tiny_profile_and_reports_bad_rows() {
    let dir = temp_dir("calibrate-run");
    tiny_profiles(&dir, "0.1", "32");
    let params = dir.join("params.toml");
    let out = cotenant(&[
        "calibrate",
        "--profiles",
        &dir.display().to_string(),
        "--write-params",
        &params.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("| H100-SXM | **all linear** | 8 |"), "{}", stdout(&out));
    let written = std::fs::read_to_string(&params).unwrap();
    assert!(written.contains("[gpu.H100-SXM]") && written.contains("compute/h100_Tiny_mlp.csv"), "{written}");

    let bad = temp_dir("calibrate-bad");
    tiny_profiles(&bad, "0.1", "x");
    let out = cotenant(&["calibrate", "--profiles", &bad.display().to_string()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("h100_Tiny_mlp.csv:3: field `n_head`: `x` is not a positive integer"),
        "{}",
        stderr(&out)
    );

    let negative = temp_dir("calibrate-negative");
    tiny_profiles(&negative, "-0.1", "32");
    let out = cotenant(&["calibrate", "--profiles", &negative.display().to_string()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("h100_Tiny_mlp.csv:2: field `time_stats.attn_pre_proj.median`"),
        "{}",
        stderr(&out)
    );
}

/// `plan serve` times each candidate GPU with that GPU's own fitted parameters: the A100
/// row is the same whichever GPU `--gpu` names. (Before, every candidate took the
/// `--gpu` GPU's parameters, and with `--gpu H100-SXM` the A100 needed 4 replicas at
/// 96.6% instead of 5.)
#[test]
fn plan_serve_times_each_candidate_gpu_with_its_own_parameters() {
    let rows = |base: &str| -> Vec<(String, u64, f64)> {
        let out = cotenant(&[
            "plan",
            "serve",
            "--trace",
            "azure-conv",
            "--limit",
            "3000",
            "--rate",
            "30",
            "--gpu",
            base,
            "--gpus",
            "A100-80G,H100-SXM",
            "--tp-options",
            "1",
            "--json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        value["plans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let gpu = r["gpu"].as_str().unwrap().to_string();
                (gpu, r["replicas"].as_u64().unwrap(), r["attainment"].as_f64().unwrap())
            })
            .collect()
    };
    let from_a100 = rows("A100-80G");
    assert_eq!(from_a100.len(), 2, "{from_a100:?}");
    assert_eq!(from_a100, rows("H100-SXM"));
}
