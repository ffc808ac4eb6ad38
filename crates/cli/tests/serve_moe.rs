//! `serve-sim` and `plan serve` with mixture-of-experts models, expert parallelism and
//! FP8 weights and KV cache: runs end to end, the KV capacity the memory plan gives, and
//! errors that name the flag.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout};
use serde_json::Value;

fn run_json(args: &[&str]) -> Value {
    let out = cotenant(&[&["serve-sim", "--json", "--limit", "200"], args].concat());
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("json")
}

/// stderr of a run that must fail with `code` (1 for the command's own checks, 2 for a
/// value clap refuses while parsing, as for every other flag).
fn error_with(code: i32, args: &[&str]) -> String {
    let out = cotenant(args);
    assert!(!out.status.success(), "{args:?} should fail: {}", stdout(&out));
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

fn error_of(args: &[&str]) -> String {
    error_with(1, args)
}

/// Mixtral-8x7B on 2 x H100 runs on the bundled Azure trace; its KV capacity is the
/// memory plan's 452,160 tokens per GPU (crates/perf/src/memory.rs, by hand), rounded
/// down to 16-token blocks; the header names the model.
#[test]
fn mixtral_on_two_h100_runs_end_to_end() {
    let out = cotenant(&["serve-sim", "--model", "Mixtral-8x7B", "--tp", "2", "--limit", "200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Mixtral-8x7B on H100-SXM (TP 2)"), "{text}");
    assert!(text.contains("KV 452160 tokens/replica"), "{text}");
    let json = run_json(&["--model", "Mixtral-8x7B", "--tp", "2"]);
    let finished = json["runs"][0]["finished"].as_u64().expect("finished");
    assert_eq!(finished, 200, "{json}");
}

/// FP8 KV doubles an 8B's KV tokens on one H100 (460,896 -> 921,792) and FP8 weights add
/// the 6.5 GiB the weights give back; the model's name says which.
#[test]
fn fp8_weights_and_kv_change_capacity_and_name() {
    let out = cotenant(&["serve-sim", "--limit", "50", "--kv-cache", "fp8"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Llama-3.1-8B fp8-kv on H100-SXM (TP 1), 1 replica(s), KV 921792 tokens"),
        "{}",
        stdout(&out)
    );
    let out = cotenant(&["serve-sim", "--limit", "50", "--weights", "fp8", "--kv-cache", "fp8"]);
    assert!(stdout(&out).contains("KV 1028288 tokens"), "{}", stdout(&out));
    // Without the flags, nothing changes.
    let plain = cotenant(&["serve-sim", "--limit", "50"]);
    let auto = cotenant(&["serve-sim", "--limit", "50", "--weights", "auto", "--kv-cache", "bf16"]);
    assert_eq!(stdout(&plain), stdout(&auto));
}

/// FP8 weights on an A100 run, and stderr says how they are modelled.
#[test]
fn fp8_on_a100_is_weight_only_and_said() {
    let out = cotenant(&["serve-sim", "--limit", "50", "--gpu", "A100-80G", "--weights", "fp8"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("note: --weights fp8 on A100-80G: no FP8 tensor cores"),
        "{}",
        stderr(&out)
    );
    let h100 = cotenant(&["serve-sim", "--limit", "50", "--weights", "fp8"]);
    assert!(!stderr(&h100).contains("no FP8 tensor cores"), "{}", stderr(&h100));
}

/// Expert parallelism adds the all-to-all, so the same trace takes longer per iteration
/// at EP 2 than at EP 1 on the same two GPUs (activation reads fall, but 64 calls of 8 us
/// latency per iteration dominate Mixtral's small decode batches).
#[test]
fn expert_parallel_runs_and_costs_the_all_to_all() {
    let tp = run_json(&["--model", "Mixtral-8x7B", "--tp", "2"]);
    let ep = run_json(&["--model", "Mixtral-8x7B", "--tp", "2", "--ep", "2"]);
    let tpot = |j: &Value| j["runs"][0]["tpot_ms"]["p50"].as_f64().expect("tpot");
    assert!(tpot(&ep) > tpot(&tp), "ep {} tp {}", tpot(&ep), tpot(&tp));
}

#[test]
fn impossible_asks_name_the_flag() {
    let err = error_of(&["serve-sim", "--model", "Mixtral-8x7B", "--tp", "2", "--ep", "3"]);
    assert!(err.contains("--ep 3: must divide the model's 8 routed experts (at --tp 2)"), "{err}");
    let err = error_of(&["serve-sim", "--model", "Mixtral-8x7B", "--tp", "2", "--ep", "4"]);
    assert!(err.contains("--ep 4: must divide the tensor-parallel degree 2"), "{err}");
    let err = error_of(&["serve-sim", "--ep", "2", "--tp", "2"]);
    assert!(err.contains("--ep 2: expert parallelism needs a mixture-of-experts model"), "{err}");
    let err = error_of(&["serve-sim", "--model", "Mixtral-8x7B"]);
    assert!(err.contains("--model Mixtral-8x7B does not fit --tp 1 x --pp 1 x --gpu H100-SXM"), "{err}");
    assert!(err.contains("--weights fp8"), "{err}");
    let err = error_with(2, &["serve-sim", "--weights", "fp4"]);
    assert!(err.contains("--weights"), "{err}");
    let err = error_of(&[
        "serve-sim",
        "--model",
        "layers=4,hidden=64,heads=4,kv_heads=2,ffn=128,experts=8,top_k=9,expert_ffn=32",
    ]);
    assert!(err.contains("field `top_k`"), "{err}");
    let err = error_of(&["plan", "serve", "--model", "Mixtral-8x7B", "--ep", "2", "--tp-options", "1,2"]);
    assert!(
        err.contains("--ep 2: must divide the tensor-parallel degree 1 (the experts")
            && err.contains("--tp-options 1"),
        "{err}"
    );
}

/// Mixtral-8x7B in FP8 fits one H100 (43.5 GiB of weights), so the plan can use TP 1.
#[test]
fn plan_serve_takes_moe_and_fp8() {
    let out = cotenant(&[
        "plan",
        "serve",
        "--model",
        "Mixtral-8x7B",
        "--weights",
        "fp8",
        "--gpus",
        "H100-SXM",
        "--tp-options",
        "1,2",
        "--trace",
        "azure-conv",
        "--limit",
        "300",
        "--max-replicas",
        "4",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Mixtral-8x7B fp8-weights"), "{text}");
    assert!(text.contains("| H100-SXM | 1 |"), "{text}");
}

/// DeepSeek-V3 in FP8 with EP 8 on 8 x H200 runs end to end. Its KV capacity by hand: the
/// weights of `memory.rs`'s `deepseek_v3_fits_eight_h200_in_fp8_only` (85,117,435,904
/// bytes per GPU), activations with whole experts per GPU (EP 8: width 2048):
/// 8192 x 2 x (2 x 7168 + 8 x (3 x 2048 + 7168) + 3 x 2048 / 8) = 16,384 x 121,600 =
/// 1,992,294,400; free 0.9 x 141 x 2^30 - 85,117,435,904 - 1,992,294,400 =
/// 49,148,107,161.6 bytes / 70,272 = 699,398 tokens.
#[test]
fn deepseek_v3_fp8_ep8_on_h200_runs() {
    let out = cotenant(&[
        "serve-sim",
        "--model",
        "DeepSeek-V3",
        "--gpu",
        "H200",
        "--tp",
        "8",
        "--weights",
        "fp8",
        "--ep",
        "8",
        "--limit",
        "100",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("DeepSeek-V3 fp8-weights EP8 on H200 (TP 8), 1 replica(s), KV 699398 tokens"),
        "{text}"
    );
    assert!(text.contains("100 requests"), "{text}");
}
