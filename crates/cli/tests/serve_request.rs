//! `serve-sim --spec`, `--lora`, `--lora-adapter` and `--kv-offload`: their counters in
//! the JSON and the text, the same bytes twice, nothing added without them, and bad
//! values refused with the flag and the field named.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout};
use serde_json::Value;

const DRAFT_1B: &str = "layers=16,hidden=2048,heads=32,kv_heads=8,head_dim=64,ffn=8192,vocab=128256";

fn run_json(args: &[&str]) -> Value {
    let out = cotenant(&[&["serve-sim", "--json", "--limit", "120"], args].concat());
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("json")
}

#[test]
fn speculative_runs_report_their_steps_and_repeat_exactly() {
    let spec = format!("draft={DRAFT_1B},k=4,accept=0.8,seed=2");
    let first = run_json(&["--spec", &spec]);
    let features = &first["runs"][0]["request_features"]["speculative"];
    assert_eq!(features["k"], 4);
    assert_eq!(features["proposer"], "custom");
    let per_step = features["tokens_per_step"].as_f64().unwrap();
    assert!(per_step > 2.5 && per_step < 3.5, "{per_step}");
    assert!(features["proposal_s"].as_f64().unwrap() > 0.0);
    assert_eq!(first, run_json(&["--spec", &spec]));
    let plain = run_json(&[]);
    assert!(plain["runs"][0].get("request_features").is_none());
    let text = cotenant(&["serve-sim", "--limit", "120", "--spec", "ngram,k=2,accept=0.5"]);
    assert!(stdout(&text).contains("  speculative: acceptance 0.5,"), "{}", stdout(&text));
}

#[test]
fn lora_and_offload_report_their_counters() {
    let json =
        run_json(&["--lora", "rank=16,slots=1", "--lora-adapter", "code=none", "--kv-offload", "cpu_gib=4"]);
    let features = &json["runs"][0]["request_features"];
    assert_eq!(features["lora"]["adapters"], 1, "{features}");
    assert!(features["lora"]["loads"].as_u64().unwrap() >= 1);
    assert_eq!(features["kv_offload"]["swapped_out_tokens"], features["kv_offload"]["swapped_in_tokens"]);
}

#[test]
fn bad_values_name_the_flag_and_the_field() {
    for (args, needle) in [
        (vec!["--spec", "ngram,k=0,accept=0.5"], "'--spec <SPEC>': k=`0`"),
        (vec!["--spec", "draft=gpt-9,k=4,accept=0.5"], "unknown model `gpt-9`"),
        (
            vec![
                "--model",
                "Qwen2.5-14B",
                "--tp",
                "2",
                "--spec",
                "draft=layers=2,hidden=64,heads=3,kv_heads=3,ffn=128,k=2,accept=0.5",
            ],
            "--spec draft 2: custom has 3 attention heads",
        ),
        (
            vec!["--spec", "draft=Llama-3.1-8B,k=2,accept=0.5,tp=2"],
            "--spec tp=2: the draft runs on the target's 1 GPUs",
        ),
        (vec!["--lora", "slots=2"], "missing rank"),
        (vec!["--lora-adapter", "conv=x:8"], "--lora-adapter needs --lora"),
        (vec!["--lora", "rank=8", "--lora-adapter", "nobody=x:8"], "no tenant named `nobody`"),
        (vec!["--kv-offload", "cpu_gib=4,pcie=-1"], "pcie=`-1`"),
    ] {
        let out = cotenant(&[&["serve-sim", "--limit", "5"], args.as_slice()].concat());
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}
