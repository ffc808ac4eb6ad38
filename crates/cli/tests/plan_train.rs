//! `cotenant plan train`: layouts best first, JSON, the calibration row, and clear
//! errors for impossible asks (exit 1, naming the flag).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout};

fn plan(args: &[&str]) -> std::process::Output {
    let mut all = vec!["plan", "train"];
    all.extend_from_slice(args);
    cotenant(&all)
}

fn fails_with(args: &[&str], wanted: &str) {
    let out = plan(args);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains(wanted), "wanted `{wanted}` in: {}", stderr(&out));
}

const GPT3: [&str; 8] = ["--model", "gpt3-175b", "--gpu", "a100", "--gpus", "1024", "--global-batch", "1536"];

#[test]
fn the_table_is_best_first_and_deterministic() {
    let out = plan(&[&GPT3[..], &["--tokens", "300B", "--top", "5"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text, stdout(&plan(&[&GPT3[..], &["--tokens", "300B", "--top", "5"]].concat())));
    assert!(text.contains("model gpt3-175b: 174.6B params"), "{text}");
    let times: Vec<f64> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("rank"))
        .skip(1)
        .map(|l| l.split_whitespace().nth(8).unwrap().parse().unwrap())
        .collect();
    assert_eq!(times.len(), 5);
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{text}");
    assert!(text.contains("days"), "{text}");
}

#[test]
fn json_plans_use_every_gpu_and_days_follow_the_token_budget() {
    let out = plan(&[&GPT3[..], &["--tokens", "300e9", "--json", "--top", "20"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let plans = value["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 20);
    let mut last = 0.0;
    for plan in plans {
        let gpus = plan["tensor"].as_u64().unwrap()
            * plan["pipeline"].as_u64().unwrap()
            * plan["data"].as_u64().unwrap();
        assert_eq!(gpus, 1024);
        let time = plan["iteration_s"].as_f64().unwrap();
        assert!(time >= last);
        last = time;
        assert!(plan["memory_gib"].as_f64().unwrap() <= 72.0);
        let days = plan["days"].as_f64().unwrap();
        let expected = 300e9 / plan["tokens_per_day"].as_f64().unwrap();
        assert!((days - expected).abs() < 1e-9 * expected);
        // tokens/day = B s / iteration time x 86,400.
        let per_day = 1536.0 * 2048.0 / time * 86_400.0;
        assert!((plan["tokens_per_day"].as_f64().unwrap() / per_day - 1.0).abs() < 1e-12);
    }
}

/// The calibration row: Megatron's 1T GPT, t=8, p=64, d=6, b=1, plain 1F1B, full
/// recomputation, on 3,072 A100 gives the paper's 163 TF/s per GPU (52% of peak).
#[test]
fn the_calibration_row_reproduces_megatrons_1t_figure() {
    let out = plan(&[
        "--model",
        "gpt-1t",
        "--gpus",
        "3072",
        "--global-batch",
        "3072",
        "--layout",
        "8,64,6,1,1,full,0",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let tflops = value["plans"][0]["tflops_per_gpu"].as_f64().unwrap();
    assert!((tflops - 163.0).abs() < 1.0, "{tflops}");
}

#[test]
fn axonn_and_fl_hsdp_modes_run() {
    let out = plan(&[
        "--model",
        "axonn-80b",
        "--gpu",
        "a100-40g",
        "--node-gpus",
        "4",
        "--gpus",
        "1024",
        "--global-batch",
        "2048",
        "--axonn",
        "--top",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("exposed_s"), "{}", stdout(&out));
    let out =
        plan(&["--model", "gpt-1.7b", "--gpus", "64", "--global-batch", "512", "--fl-groups", "4", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let per_step = value["per_step_s"].as_f64().unwrap();
    let inner = value["inner_step_s"].as_f64().unwrap();
    let outer = value["outer_step_s"].as_f64().unwrap();
    assert!((per_step - (inner + outer / 8.0)).abs() < 1e-12);
}

#[test]
fn impossible_asks_are_clear_errors() {
    fails_with(
        &["--model", "gpt-5", "--gpus", "8", "--global-batch", "8"],
        "--model: unknown preset `gpt-5` (known: gpt3-175b,",
    );
    fails_with(
        &["--model", "gpt3-175b", "--gpu", "tpu-v5", "--gpus", "8", "--global-batch", "8"],
        "--gpu: unknown GPU `tpu-v5` (known: A100-80G",
    );
    fails_with(
        &["--model", "gpt-1t", "--gpus", "8", "--global-batch", "8"],
        "the model fits no layout: the smallest needs",
    );
    let custom = "--layers 2 --hidden 1024 --heads 4 --seq 1024 --vocab 1000 --gpus 16 --global-batch 3";
    fails_with(&custom.split(' ').collect::<Vec<_>>(), "divides the global batch 3");
    let no_hidden = custom.replace("--hidden 1024 ", "").replace("batch 3", "batch 16");
    fails_with(&no_hidden.split(' ').collect::<Vec<_>>(), "--hidden: required");
    fails_with(
        &["--model", "gpt3-175b", "--gpus", "1024", "--global-batch", "1536", "--layout", "8,8,8"],
        "--layout: t x p x d = 512 but --gpus is 1024",
    );
    fails_with(
        &["--model", "gpt3-175b", "--gpus", "1024", "--global-batch", "1536", "--tokens", "lots"],
        "--tokens: `lots`",
    );
}
