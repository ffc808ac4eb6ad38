//! Speculative decoding, multi-LoRA and KV offload inside the simulator: small runs
//! checked by hand, and invariants over random workloads.

use cotenant_serve::lora::{LoraArgs, LoraConfig, LoraTargets};
use cotenant_serve::offload::OffloadConfig;
use cotenant_serve::spec::{Proposer, SpecConfig};
use cotenant_serve::state::Phase;
use cotenant_serve::{simulate, Request, ServeConfig, Workload};
use proptest::prelude::*;

mod common;
use common::{h100, request, serve_config, workload};

const DRAFT_1B: &str = "layers=16,hidden=2048,heads=32,kv_heads=8,head_dim=64,ffn=8192,vocab=128256";

fn config(load: &Workload, kv_tokens: Option<u64>) -> ServeConfig {
    let mut config = serve_config(h100("Llama-3.1-8B"), &load.tenants, 4);
    config.kv_capacity_tokens = kv_tokens;
    config
}

fn ngram(k: u32, acceptance: f64) -> SpecConfig {
    SpecConfig { proposer: Proposer::Ngram, k, acceptance, seed: 1 }
}

fn lora(load: &Workload, rank: u32, slots: u32) -> LoraConfig {
    let args = LoraArgs { rank, slots, pcie_gb_per_s: 25.0, targets: LoraTargets::Attention };
    LoraConfig::build(&args, &[], &load.tenants).expect("builds")
}

/// One request (16-token prompt, 9 output tokens), n-gram proposer with k = 3:
/// - alpha = 1: the prefill samples token 1; each step then verifies min(k + 1, left) tokens
///   and keeps them all: 4 (tokens 2-5), then 4 (6-9). 3 iterations; of the 8 gaps
///   between tokens, the 6 inside a step are 0.
/// - alpha = 0: every step keeps only its correction token: 1 + 8 = 9 iterations.
#[test]
fn speculative_steps_emit_their_accepted_prefix_plus_one() {
    let load = workload(vec![request(0, 0, 16, 9)], 1);
    let mut cfg = config(&load, Some(1024));
    cfg.spec = Some(ngram(3, 1.0));
    let all = simulate(&load, &cfg).expect("runs");
    assert_eq!(all.iterations, 3);
    assert_eq!(all.seqs[0].generated, 9);
    assert_eq!(all.tbt.count(), 8);
    assert_eq!(all.tbt.quantile_us(0.75), 0, "6 of 8 gaps are inside a step");
    let stats = all.request_features;
    assert_eq!((stats.spec_steps, stats.spec_proposed_tokens, stats.spec_accepted_tokens), (2, 6, 6));
    cfg.spec = Some(ngram(3, 0.0));
    let none = simulate(&load, &cfg).expect("runs");
    assert_eq!(none.iterations, 9);
    assert_eq!(none.request_features.spec_accepted_tokens, 0);
    // Rejected proposals give their blocks back: one request of 16 + 9 tokens never holds
    // more than blocks for 16 + 8 + 3 proposals = 27 tokens, 2 blocks.
    assert_eq!(none.kv_stats[0].peak_used_blocks, 2);
}

/// A speculative run is deterministic and, with the draft model, slower per step but
/// needs fewer steps at a high acceptance rate.
#[test]
fn draft_model_runs_are_deterministic_and_fewer_steps() {
    let load = workload((0..8).map(|i| request(0, i * 50_000, 200, 120)).collect(), 1);
    let mut cfg = config(&load, Some(100_000));
    let plain = simulate(&load, &cfg).expect("runs");
    cfg.spec = Some(SpecConfig {
        proposer: Proposer::Draft(Box::new(h100(DRAFT_1B))),
        k: 4,
        acceptance: 0.8,
        seed: 3,
    });
    let first = simulate(&load, &cfg).expect("runs");
    let second = simulate(&load, &cfg).expect("runs");
    let finishes = |r: &cotenant_serve::ServeResult| r.seqs.iter().map(|s| s.finish).collect::<Vec<_>>();
    assert_eq!(finishes(&first), finishes(&second));
    assert_eq!(first.request_features, second.request_features);
    assert!(first.iterations * 2 < plain.iterations, "{} vs {}", first.iterations, plain.iterations);
    let stats = first.request_features;
    let per_step = (stats.spec_accepted_tokens + stats.spec_steps) as f64 / stats.spec_steps as f64;
    // 3.36 expected from an infinite output; the last steps of each request propose fewer.
    assert!(per_step > 2.8 && per_step < 3.6, "{per_step}");
    assert!(stats.spec_proposal_s > 0.0);
}

/// KV budget with a draft model and adapter slots, Llama-3.1-8B on one H100 (0.9 of
/// 80 GiB, 8,192-token / 256-row activation peak): usable 77,309,411,328 B - weights
/// 16,059,990,016 - activations 838,860,800 = 60,410,560,512 B = 460,896 tokens of
/// 131,072 B. The 1B-like draft holds (16 x 60,817,408 + 2 x 2048 x 128,256) x 2 =
/// 2,996,830,208 B and 2 x 16 x 8 x 64 x 2 = 32,768 B of KV per token:
/// (60,410,560,512 - 2,996,830,208) / 163,840 = 350,425 tokens. Four rank-16 slots hold
/// 4 x 27,262,976 B: (60,410,560,512 - 109,051,904) / 131,072 = 460,064 tokens.
#[test]
fn draft_and_adapter_slots_come_out_of_the_kv_budget() {
    let load = workload(vec![request(0, 0, 16, 4)], 1);
    let mut cfg = config(&load, None);
    assert_eq!(cfg.kv_capacity_tokens(), 460_896);
    cfg.spec = Some(SpecConfig {
        proposer: Proposer::Draft(Box::new(h100(DRAFT_1B))),
        k: 4,
        acceptance: 0.5,
        seed: 0,
    });
    assert_eq!(cfg.kv_capacity_tokens(), 350_425);
    cfg.spec = Some(ngram(4, 0.5));
    assert_eq!(cfg.kv_capacity_tokens(), 460_896);
    cfg.spec = None;
    cfg.lora = Some(lora(&load, 16, 4));
    assert_eq!(cfg.kv_capacity_tokens(), 460_064);
    // A 70B draft (131 GiB of weights) cannot sit beside the 8B: refused, naming both terms.
    cfg.lora = None;
    cfg.spec = Some(SpecConfig {
        proposer: Proposer::Draft(Box::new(h100("Llama-3.1-70B"))),
        k: 4,
        acceptance: 0.5,
        seed: 0,
    });
    let err = simulate(&load, &cfg).expect_err("does not fit").to_string();
    assert!(
        err.contains("spec draft weights + lora slots = 131.") && err.contains("a KV block must remain"),
        "{err}"
    );
}

/// One request (16-token prompt, 1 output token) of a tenant with a rank-16 adapter:
/// its only iteration adds the adapter's load, 27,262,976 B / 25 GB/s = 1,090.52 us, and
/// the SGMV term for 16 tokens (FLOPs 2 x 16 x 16 x 26,624 x 32 -> 0.630 us against
/// 27,262,976 B / 2.5125e12 B/s = 10.851 us: smax 10.852 us): 1,101.37 us in all, so
/// the end-to-end time grows by 1,101 or 1,102 us (each run rounds up to a microsecond).
#[test]
fn an_adapter_load_and_its_matmuls_lengthen_the_iteration() {
    let load = workload(vec![request(0, 0, 16, 1)], 1);
    let mut cfg = config(&load, Some(1024));
    let base = simulate(&load, &cfg).expect("runs").seqs[0].finish.expect("done");
    cfg.lora = Some(lora(&load, 16, 1));
    let result = simulate(&load, &cfg).expect("runs");
    let with = result.seqs[0].finish.expect("done");
    let extra_us = (with - base).0;
    assert!((1_101..=1_102).contains(&extra_us), "{extra_us}");
    assert_eq!(result.request_features.lora_loads, 1);
    assert!((result.request_features.lora_load_s - 1_090.519e-6).abs() < 1e-9);
}

/// Two tenants with their own adapters and one slot: A (tenant 0) takes the slot; B
/// (tenant 1), arriving together, waits while A's adapter is in use, then evicts it.
#[test]
fn a_request_waits_while_every_slot_holds_an_adapter_in_use() {
    let load = workload(vec![request(0, 0, 16, 4), request(1, 0, 16, 4)], 2);
    let mut cfg = config(&load, Some(1024));
    cfg.lora = Some(lora(&load, 8, 1));
    let result = simulate(&load, &cfg).expect("runs");
    let (a, b) = (&result.seqs[0], &result.seqs[1]);
    assert!(b.first_token.expect("b ran") > a.finish.expect("a ran"));
    let stats = result.request_features;
    assert_eq!((stats.lora_loads, stats.lora_evictions), (2, 1));
    assert!(stats.lora_slot_waits >= 1);
    // With two slots both run together from the start.
    cfg.lora = Some(lora(&load, 8, 2));
    let both = simulate(&load, &cfg).expect("runs");
    assert_eq!(both.seqs[0].first_token, both.seqs[1].first_token);
}

/// The recompute case of `kv_exhaustion_preempts_newest_and_recomputes` (KV of 64 tokens,
/// two 16-token prompts generating 40): B is preempted holding 16 + 17 - 1 = 32 tokens of
/// KV. Recompute drops them and prefills 33 tokens again. With a CPU swap space, the 32
/// tokens go out and come back (2 x 32 x 131,072 B / 25 GB/s = 335.54 us charged to two
/// iterations) and B re-enters with one token to compute: the same 63 iterations, 32
/// fewer prompt tokens of service. With no CPU space, it falls back to recompute.
#[test]
fn swapping_to_cpu_replaces_recompute() {
    let load = workload(vec![request(0, 0, 16, 40), request(0, 0, 16, 40)], 1);
    let mut cfg = config(&load, Some(64));
    let recompute = simulate(&load, &cfg).expect("runs");
    assert_eq!(recompute.request_features.recomputed_tokens, 32);
    cfg.kv_offload = Some(OffloadConfig::parse("cpu_gib=1").expect("parses"));
    let swap = simulate(&load, &cfg).expect("runs");
    let stats = swap.request_features;
    assert_eq!((stats.swapped_out_tokens, stats.swapped_in_tokens, stats.recomputed_tokens), (32, 32, 0));
    assert!((stats.swap_s - 335.544e-6).abs() < 1e-9, "{}", stats.swap_s);
    assert_eq!((swap.preemptions, swap.iterations), (1, 63));
    let service = |r: &cotenant_serve::ServeResult| r.tenant_service.iter().sum::<f64>();
    assert_eq!(service(&recompute) - service(&swap), 32.0);
    assert!(swap.seqs.iter().all(|s| s.generated == 40 && s.phase == Phase::Done));
    cfg.kv_offload = Some(OffloadConfig::parse("cpu_gib=0").expect("parses"));
    let full = simulate(&load, &cfg).expect("runs");
    assert_eq!((full.request_features.swap_fallbacks, full.request_features.recomputed_tokens), (1, 32));
    assert_eq!(full.iterations, recompute.iterations);
}

fn arbitrary_load() -> impl Strategy<Value = Workload> {
    prop::collection::vec((0_u32..2, 0_u64..500_000, 1_u32..300, 1_u32..80), 1..24).prop_map(|rows| {
        let mut requests: Vec<Request> = rows
            .into_iter()
            .map(|(tenant, arrival, prompt, output)| request(tenant, arrival, prompt, output))
            .collect();
        requests.sort_by_key(|r| r.arrival);
        workload(requests, 2)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Whatever the acceptance rate, proposals, KV pressure, adapter slots and swap
    /// space: every request finishes with exactly its output tokens, KV stays within
    /// capacity, swaps balance, and attribution still adds up to busy time.
    #[test]
    fn every_request_emits_exactly_its_output_tokens(
        load in arbitrary_load(),
        k in 1_u32..8,
        acceptance in 0.0_f64..=1.0,
        spare_blocks in 0_u64..40,
        budget in 8_u32..400,
        draft in any::<bool>(),
        slots in prop::option::of(1_u32..3),
        cpu_gib in prop::option::of(prop::sample::select(vec![0.0, 0.0001, 1.0])),
    ) {
        let largest = load.requests.iter().map(|r| u64::from(r.prompt_tokens + r.output_tokens)).max().unwrap_or(1);
        let kv_tokens = (largest.div_ceil(16) + 1 + spare_blocks) * 16;
        let mut cfg = config(&load, Some(kv_tokens));
        cfg.scheduler.limits.token_budget = budget;
        let proposer = if draft { Proposer::Draft(Box::new(h100(DRAFT_1B))) } else { Proposer::Ngram };
        cfg.spec = Some(SpecConfig { proposer, k, acceptance, seed: 5 });
        cfg.lora = slots.map(|s| lora(&load, 8, s));
        cfg.kv_offload = cpu_gib.map(|g| OffloadConfig { cpu_gib: g, pcie_gb_per_s: 25.0 });
        let result = simulate(&load, &cfg).expect("runs");
        for (r, s) in load.requests.iter().zip(&result.seqs) {
            prop_assert_eq!(s.phase, Phase::Done);
            prop_assert_eq!(s.generated, r.output_tokens);
            prop_assert_eq!(s.private_blocks, 0);
        }
        prop_assert!(result.kv_stats[0].peak_used_blocks <= kv_tokens / 16);
        let stats = result.request_features;
        prop_assert_eq!(stats.swapped_out_tokens, stats.swapped_in_tokens);
        prop_assert!(stats.spec_accepted_tokens <= stats.spec_proposed_tokens);
        let attributed: u64 = result.tenant_attributed_ns.iter().sum();
        prop_assert_eq!(attributed, result.busy_us * 1_000);
    }
}
