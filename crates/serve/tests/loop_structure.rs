//! The replica and event-loop structure: pipeline-parallel micro-batches, closed-loop
//! clients and disaggregated prefill/decode pools, each on a case worked by hand, then
//! invariants (every request finishes, runs are deterministic) on synthetic load.

use cotenant_core::{TenantSpec, Time};
use cotenant_perf::{find_gpu, ModelShape, Roofline, RooflineParams};
use cotenant_serve::closed_loop::issued_workload;
use cotenant_serve::sim::{DisaggConfig, ServeError};
use cotenant_serve::synthetic::{generate, SyntheticTenant};
use cotenant_serve::{simulate, summarize, Request, ServeConfig, Workload};

mod common;
use common::{h100, serve_config};

fn request(arrival_us: u64, prompt: u32, output: u32) -> Request {
    common::request(0, arrival_us, prompt, output)
}

fn workload(requests: Vec<Request>) -> Workload {
    common::workload(requests, 1)
}

/// FCFS on Llama-3.1-8B / H100 with the roofline's plain defaults (the hand-worked
/// figures of crates/perf/src/roofline.rs), KV sized from memory.
fn config(max_seqs: u32) -> ServeConfig {
    let mut config = serve_config(h100("Llama-3.1-8B"), &[TenantSpec::new("t0")], 1);
    config.scheduler.limits.max_seqs = max_seqs;
    config
}

fn finish_us(result: &cotenant_serve::ServeResult, id: usize) -> u64 {
    result.seqs[id].finish.expect("finished").0
}

/// One 1,024-token prompt (1 output token) on PP 4: the bubble. By hand
/// (crates/serve/src/pipeline.rs, `one_prefill_over_four_stages_by_hand`): stages of
/// 6.87295, 5.87295, 5.87295 and 6.29115 ms and three send/recvs of 23.641 µs, each
/// rounded up to a µs: 6,873 + 5,873 + 5,873 + 6,292 + 3 x 24 = 24,983 µs (the unpipelined
/// iteration: 24,910 µs). Four such prompts at once with one sequence per batch: four
/// micro-batches in flight, entering stage 0 every 6,873 µs (its c0 makes it the slowest
/// stage), so they finish at 24,983 + k x 6,873 µs: a request every 6.873 ms against one
/// every 24.910 ms at PP 1, 3.62 x the rate (4 x only if the stages were equal).
#[test]
fn pipeline_bubble_and_micro_batches_by_hand() {
    let mut pp4 = config(1);
    pp4.pipeline_parallel = 4;
    let alone = simulate(&workload(vec![request(0, 1024, 1)]), &pp4).expect("runs");
    assert_eq!(finish_us(&alone, 0), 24_983);
    let unpipelined = simulate(&workload(vec![request(0, 1024, 1)]), &config(1)).expect("runs");
    assert_eq!(finish_us(&unpipelined, 0), 24_910);

    let four = workload((0..4).map(|_| request(0, 1024, 1)).collect());
    let result = simulate(&four, &pp4).expect("runs");
    let ends: Vec<u64> = (0..4).map(|i| finish_us(&result, i)).collect();
    assert_eq!(ends, vec![24_983, 31_856, 38_729, 45_602]);
    let serial = simulate(&four, &config(1)).expect("runs");
    let serial_ends: Vec<u64> = (0..4).map(|i| finish_us(&serial, i)).collect();
    assert_eq!(serial_ends, vec![24_910, 49_820, 74_730, 99_640]);
    // Busy time: each replica-stage mean, 24,911 µs of stage work / 4 per batch.
    assert_eq!(result.busy_us, 4 * (24_911 / 4));
}

/// Decodes keep one token per pipeline traversal: a request is in at most one micro-batch
/// in flight, so with one request its output tokens are a full pass apart.
#[test]
fn a_request_is_in_one_micro_batch_at_a_time() {
    let mut pp2 = config(256);
    pp2.pipeline_parallel = 2;
    let result = simulate(&workload(vec![request(0, 64, 4)]), &pp2).expect("runs");
    let seq = &result.seqs[0];
    // 4 tokens, 4 traversals of 2 stages: 4 iterations counted.
    assert_eq!(result.iterations, 4);
    assert_eq!(seq.generated, 4);
}

/// Llama-3.1-70B on 2 x H100 per stage with PP 2: each GPU holds half the layers, so the
/// KV capacity is 501,222 tokens (pipeline.rs, `seventy_b_memory_over_two_stages_by_hand`)
/// against 35,302 at PP 1.
#[test]
fn pipeline_memory_plan_scales_kv_capacity() {
    let gpu = *find_gpu("H100-SXM").expect("catalog");
    let mut seventy = config(256);
    seventy.model = Roofline::new(
        ModelShape::parse("Llama-3.1-70B").expect("catalog"),
        gpu,
        2,
        RooflineParams::default(),
    );
    assert_eq!(seventy.kv_capacity_tokens(), 35_302);
    seventy.pipeline_parallel = 2;
    assert_eq!(seventy.kv_capacity_tokens(), 501_222);
    seventy.pipeline_parallel = 81;
    let error = simulate(&workload(vec![request(0, 8, 2)]), &seventy).expect_err("more stages than layers");
    assert!(matches!(error, ServeError::BadConfig { field: "pipeline_parallel", .. }), "{error}");
}

/// One client (N = 1), three identical prompts of 1,024 tokens and 1 output token, which
/// alone take 24,910 µs each. Trace arrivals 0, 1,000 and 60,000 µs. Request 0 is issued
/// at 0 and finishes at 24,910; request 1 (arrived at 1,000) waits for it, is issued at
/// 24,910 and finishes at 49,820; request 2 arrives at 60,000 with the slot free and is
/// issued then, finishing at 84,910. Measured from issue, every TTFT is 24.910 ms.
#[test]
fn closed_loop_one_client_by_hand() {
    let trace = workload(vec![request(0, 1024, 1), request(1_000, 1024, 1), request(60_000, 1024, 1)]);
    let mut one = config(256);
    one.max_concurrency = Some(1);
    let result = simulate(&trace, &one).expect("runs");
    assert_eq!(result.issued, vec![Time(0), Time(24_910), Time(60_000)]);
    assert_eq!((0..3).map(|i| finish_us(&result, i)).collect::<Vec<_>>(), vec![24_910, 49_820, 84_910]);
    let offered = issued_workload(&trace, &result);
    let summary = summarize(&offered, &result, one.slo);
    assert!((summary.ttft_ms.mean - 24.91).abs() < 1e-9, "{}", summary.ttft_ms.mean);
    assert!((summary.ttft_ms.p99 - 24.91).abs() < 1e-9, "{}", summary.ttft_ms.p99);
    // 3 requests over 84.910 ms.
    assert!((summary.requests_per_s - 3.0 / 0.08491).abs() < 1e-6, "{}", summary.requests_per_s);
    // Open loop, request 1 joins request 0's queue at 1,000 µs and waits there instead.
    let open = simulate(&trace, &config(256)).expect("runs");
    assert!(open.issued.is_empty());
    assert_eq!(finish_us(&open, 1), 49_820);
    // Enough clients: the same as open loop.
    let mut many = config(256);
    many.max_concurrency = Some(3);
    let result = simulate(&trace, &many).expect("runs");
    assert_eq!(result.issued, vec![Time(0), Time(1_000), Time(60_000)]);
    assert_eq!(result.seqs[1].finish, open.seqs[1].finish);
}

/// One request (1,024-token prompt, 3 output tokens) through a prefill and a decode replica
/// over a 25 GB/s link with 20 µs latency. Prefill: 0 -> 24,910 µs, the first token (TTFT
/// 24.910 ms, as colocated). KV: 1,024 x 131,072 B = 134,217,728 B; 20 µs +
/// 134,217,728 / 25e9 s = 5,388.71 -> 5,389 µs, so it lands at 30,299 µs. Decode of one
/// token at 1,024 of context (by hand, defaults, BW = 0.75 x 3.35 TB/s): c0 1 ms + linear
/// layers (weights 32 x 2 x 218,103,808 B plus one token's activations) 5.5575 ms + the
/// LM head floor 0.4182 ms + element-wise 2.09 µs + KV 2 x 32 x 8 x 128 x 2 x 1,025 B =
/// 134.3 MB, 53.47 µs = 7.0312 ms -> 7,032 µs. So the second token comes 5,389 + 7,032 µs
/// after the first (the largest gap), the third 7,032 µs later (one more token of KV).
#[test]
fn disaggregated_request_timeline_by_hand() {
    let mut pools = config(256);
    pools.disagg =
        Some(DisaggConfig { prefill: 1, decode: 1, link_gb_per_s: Some(25.0), latency_s: Some(20e-6) });
    let result = simulate(&workload(vec![request(0, 1024, 3)]), &pools).expect("runs");
    let seq = &result.seqs[0];
    assert_eq!(seq.first_token, Some(Time(24_910)));
    assert_eq!((result.kv_transfers, result.kv_transfer_us), (1, 5_389));
    assert_eq!(seq.replica, 1, "decoded on the decode replica");
    let decode = seq.max_tbt_us - 5_389;
    assert_eq!(decode, 7_032);
    let finish = seq.finish.expect("finished").0;
    let third_gap = finish - 24_910 - seq.max_tbt_us;
    assert!(third_gap.abs_diff(decode) <= 1, "{third_gap} {decode}");
    // A one-token request never leaves the prefill replica.
    let result = simulate(&workload(vec![request(0, 1024, 1)]), &pools).expect("runs");
    assert_eq!((result.kv_transfers, finish_us(&result, 0)), (0, 24_910));
}

fn synthetic() -> Workload {
    let tenant = SyntheticTenant::parse("name=a,rate=12,prompt=600,output=120").expect("spec");
    generate(&[tenant], 30.0, 7)
}

fn fingerprint(result: &cotenant_serve::ServeResult) -> Vec<(Option<Time>, Option<Time>, u32)> {
    result.seqs.iter().map(|s| (s.first_token, s.finish, s.replica)).collect()
}

/// Every request finishes, each with all its tokens, and the same inputs give the same
/// run, under pipelines, closed loops and pools (also combined, with a small KV so that
/// preemption happens).
#[test]
fn every_structure_finishes_everything_deterministically() {
    let trace = synthetic();
    let mut variants = Vec::new();
    for pp in [1, 2, 3, 4] {
        let mut c = config(64);
        c.pipeline_parallel = pp;
        variants.push(c);
    }
    let mut closed = config(64);
    closed.max_concurrency = Some(8);
    variants.push(closed);
    for (prefill, decode) in [(1, 1), (1, 3), (2, 1)] {
        let mut c = config(64);
        c.disagg = Some(DisaggConfig { prefill, decode, link_gb_per_s: None, latency_s: None });
        variants.push(c);
    }
    let mut everything = config(64);
    everything.pipeline_parallel = 2;
    everything.max_concurrency = Some(16);
    everything.kv_capacity_tokens = Some(4_000);
    everything.disagg =
        Some(DisaggConfig { prefill: 1, decode: 2, link_gb_per_s: Some(5.0), latency_s: None });
    variants.push(everything);
    for c in &variants {
        let result = simulate(&trace, c).expect("runs");
        for (seq, request) in result.seqs.iter().zip(&trace.requests) {
            assert_eq!(seq.generated, request.output_tokens, "pp {} {:?}", c.pipeline_parallel, c.disagg);
            assert!(seq.finish.is_some());
        }
        if let Some(d) = c.disagg {
            let decoded = result.seqs.iter().filter(|s| s.replica >= d.prefill).count();
            let multi_token = trace.requests.iter().filter(|r| r.output_tokens > 1).count();
            assert_eq!(decoded, multi_token);
            assert_eq!(result.kv_transfers as usize, multi_token);
        }
        assert_eq!(fingerprint(&result), fingerprint(&simulate(&trace, c).expect("runs")));
    }
}

#[test]
fn bad_structure_configs_are_errors() {
    let trace = workload(vec![request(0, 8, 2)]);
    let mut c = config(8);
    c.max_concurrency = Some(0);
    assert!(matches!(simulate(&trace, &c), Err(ServeError::BadConfig { field: "max_concurrency", .. })));
    let mut c = config(8);
    c.disagg = Some(DisaggConfig { prefill: 0, decode: 1, link_gb_per_s: None, latency_s: None });
    assert!(matches!(simulate(&trace, &c), Err(ServeError::BadConfig { field: "disagg.prefill", .. })));
    for bad in [
        "prefill=1",
        "decode=2",
        "prefill=0,decode=1",
        "prefill=1,decode=1,link=0",
        "prefill=1,x=2",
        "prefill",
    ] {
        assert!(DisaggConfig::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        DisaggConfig::parse("prefill=2,decode=3,link=50,latency_us=10"),
        Ok(DisaggConfig { prefill: 2, decode: 3, link_gb_per_s: Some(50.0), latency_s: Some(10e-6) })
    );
}

/// KV held on both sides during a transfer, with room for one 1,000-token prompt per
/// replica (68 blocks of 16 tokens; a prompt takes 63). A (10 output tokens) and B (2)
/// arrive together; link 25 GB/s + 20 µs: 20 + 1,000 x 131,072 / 25e9 s = 5,262.88 ->
/// 5,263 µs per transfer. B cannot start its prefill until A's prefill-side copy is freed
/// at the end of A's transfer: B's first token = A's first token (P) + 5,263 + P. B's
/// transfer cannot start until A (9 decodes of ~7 ms, longer than B's prefill) has
/// finished and freed the decode replica's blocks: B finishes at A's finish + 5,263 +
/// one decode step at 1,000 tokens of context (by the hand sum of
/// `disaggregated_request_timeline_by_hand`, 7,031.19 µs, with 1,001 in place of 1,025
/// tokens of KV read: 7,031.19 - (53.47 - 52.22) = 7,029.94 -> 7,030 µs).
#[test]
fn transfers_hold_blocks_on_both_replicas_by_hand() {
    let mut pools = config(256);
    pools.kv_capacity_tokens = Some(68 * 16);
    pools.disagg =
        Some(DisaggConfig { prefill: 1, decode: 1, link_gb_per_s: Some(25.0), latency_s: Some(20e-6) });
    let result = simulate(&workload(vec![request(0, 1000, 10), request(0, 1000, 2)]), &pools).expect("runs");
    let (a, b) = (&result.seqs[0], &result.seqs[1]);
    let p = a.first_token.expect("first token").0;
    assert_eq!(b.first_token, Some(Time(2 * p + 5_263)));
    assert_eq!((result.kv_transfers, result.kv_transfer_us), (2, 2 * 5_263));
    let a_finish = a.finish.expect("finished").0;
    assert!(a_finish > 2 * p + 5_263, "A still decodes when B's prefill ends");
    assert_eq!(b.finish, Some(Time(a_finish + 5_263 + 7_030)));
}
