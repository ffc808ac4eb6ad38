//! The training model's hand-computed cases and properties (docs/training.md).

use cotenant_perf::find_gpu;
use cotenant_perf::train::{
    fl_hsdp_time, iteration_time, memory_per_gpu, preset, ring_allreduce_time, search, Fabric, FlHsdp,
    Layout, Link, Links, Recompute, SearchLimits, Tier, TrainError, TrainShape,
};
use proptest::prelude::*;

fn layout(tensor: u32, pipeline: u32, data: u32, micro_batch: u32, interleave: u32) -> Layout {
    Layout { tensor, pipeline, data, micro_batch, interleave, recompute: Recompute::None, zero: 0 }
}

/// A tiny GPT: 2 layers, h = 1024, 16 heads, s = 1024, V = 1000.
fn tiny() -> TrainShape {
    TrainShape::gpt("tiny", 2, 1024, 16, 1024, 1000)
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1e-9 * expected.abs().max(1e-12)
}

/// Pipeline bubble, p = 4, B = 16, b = 1, d = 2: m = 16 / (1 x 2) = 8 micro-batches, so
/// the bubble is (p-1)/m = 3/8 = 0.375 of the ideal time; interleaved with v = 2 it is
/// (1/v)(p-1)/m = 3/16 = 0.1875. The bubble time is (p-1)/v micro-batch times against the
/// m micro-batch times of the steady state, the same ratio.
#[test]
fn bubble_fraction_hand_computed() {
    let model = TrainShape::gpt("deep", 8, 1024, 16, 1024, 1000);
    let gpu = find_gpu("a100").expect("catalog");
    let links = Links::best(&Fabric::of(gpu), 1, 2);
    let plain = iteration_time(&model, 16, &layout(1, 4, 2, 1, 1), gpu, &links).expect("valid");
    assert_eq!(plain.micro_batches, 8);
    assert_eq!(plain.bubble_fraction, 0.375);
    assert!(close(plain.bubble_s / plain.steady_s, 0.375));
    let interleaved = iteration_time(&model, 16, &layout(1, 4, 2, 1, 2), gpu, &links).expect("valid");
    assert_eq!(interleaved.bubble_fraction, 0.1875);
    assert!(close(interleaved.bubble_s / interleaved.steady_s, 0.1875));
}

/// Ring all-reduce of 1 GB on a two-tier path: 2 ranks share each node (300 GB/s NVLink,
/// 5 us a step) and 4 nodes meet over the NIC (25 GB/s, 10 us a step), 8 ranks in all.
/// Inside the node: 2 x (2-1)/2 x 1e9 B / 300e9 B/s = 3.3333 ms, + 2 x 1 x 5 us = 10 us.
/// Across nodes each rank carries 1/2 of the data: 2 x (4-1)/4 x 0.5e9 / 25e9 = 30 ms,
/// plus 2 x 3 x 10 us = 60 us. Total 33.3333 + 0.07 = 33.40333 ms. The same 8 ranks all on
/// the NIC (one per node): 2 x 7/8 x 1e9 / 25e9 = 70 ms + 2 x 7 x 10 us = 70.14 ms.
#[test]
fn ring_allreduce_two_tier_hand_computed() {
    let nvlink = Link { gb_per_s: 300.0, latency_s: 5e-6 };
    let nic = Link { gb_per_s: 25.0, latency_s: 10e-6 };
    let two_tier = [Tier { ranks: 2, link: nvlink }, Tier { ranks: 4, link: nic }];
    assert!(close(ring_allreduce_time(1e9, &two_tier), 1.0 / 300.0 + 0.03 + 70e-6));
    let flat = [Tier { ranks: 8, link: nic }];
    assert!(close(ring_allreduce_time(1e9, &flat), 0.07 + 140e-6));
    // The placement decides the path: t = 4 in an 8-GPU node leaves room for 2 of the 8
    // data-parallel ranks per node, the other factor 4 crosses the NIC.
    let fabric = Fabric { domain_gpus: 8, nvlink, nic };
    assert_eq!(Links::best(&fabric, 4, 8).data, two_tier.to_vec());
    assert_eq!(Links::best(&fabric, 4, 8).tensor, vec![Tier { ranks: 4, link: nvlink }]);
}

/// Memory per GPU of the tiny GPT with t = 2, p = 1, d = 1, b = 1, B = 4, no
/// recomputation, no ZeRO. Params per GPU: (2 layers x 12 h^2 + V h) / t =
/// (2 x 12,582,912 + 1,024,000) / 2 = 13,094,912; weights x 2 B = 26,189,824; gradients
/// x 4 B = 52,379,648; Adam x 12 B = 157,138,944. Activations per layer and sequence:
/// s h (34 + 5 a s / h) / t = 1,048,576 x (34 + 80) / 2 = 59,768,832; one micro-batch in
/// flight (min(m, p) = 1), 2 layers: 119,537,664; fp32 logits 4 s V / t = 2,048,000.
/// Total 357,294,080 bytes. Full recomputation keeps 2 s h / t = 1,048,576 per layer
/// (2,097,152) plus one layer's working set and the logits: 63,913,984 bytes of
/// activations. ZeRO-1 over d = 4 (B = 4, m = 1) divides the optimizer: 12/4 = 3 B, so the
/// model states are 13,094,912 x (2 + 4 + 3) = 117,854,208.
#[test]
fn memory_per_gpu_small_model_hand_computed() {
    let model = tiny();
    let memory = memory_per_gpu(&model, 4, &layout(2, 1, 1, 1, 1)).expect("valid");
    assert_eq!(memory.weights, 26_189_824.0);
    assert_eq!(memory.gradients, 52_379_648.0);
    assert_eq!(memory.optimizer, 157_138_944.0);
    assert_eq!(memory.activations, 121_585_664.0);
    assert_eq!(memory.total, 357_294_080.0);
    let full = Layout { recompute: Recompute::Full, ..layout(2, 1, 1, 1, 1) };
    assert_eq!(memory_per_gpu(&model, 4, &full).expect("valid").activations, 63_913_984.0);
    let zero1 = Layout { zero: 1, ..layout(2, 1, 4, 1, 1) };
    let sharded = memory_per_gpu(&model, 4, &zero1).expect("valid");
    assert_eq!(sharded.weights + sharded.gradients + sharded.optimizer, 117_854_208.0);
}

/// Megatron's FLOP counts: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) without recomputation
/// and 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with it, for a GPT shape.
#[test]
fn flops_match_megatron_formulas() {
    let model = preset("gpt-1t").expect("preset");
    let (b, s, l, h, v) = (3072.0, 2048.0, 128.0, 25600.0, 51200.0);
    let gpu = find_gpu("a100").expect("catalog");
    let full = Layout { recompute: Recompute::Full, ..layout(8, 64, 6, 1, 1) };
    let time = iteration_time(&model, 3072, &full, gpu, &Links::best(&Fabric::of(gpu), 8, 6)).expect("valid");
    let base = b * s * l * h * h;
    assert!(close(time.model_flops, 72.0 * base * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))));
    assert!(close(time.hardware_flops, 96.0 * base * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))));
}

/// The GPT-3 and Llama presets have the published parameter counts (within 1%).
#[test]
fn preset_parameter_counts() {
    for (name, billions) in
        [("gpt3-175b", 175.0), ("gpt-1t", 1008.0), ("llama3-70b", 70.6), ("llama3-405b", 405.9)]
    {
        let params = preset(name).expect("preset").params() / 1e9;
        assert!((params / billions - 1.0).abs() < 0.01, "{name}: {params}");
    }
}

/// FL+HSDP outer step: G = 4 groups of 8 GPUs (FSDP, d = 8, ZeRO 3) on the tiny GPT;
/// each GPU holds (2 x 12,582,912 + 1,024,000) / 8 = 3,273,728 params and averages them
/// in fp32 (13,094,912 B), sending 2 x 3/4 x 13,094,912 = 19,642,368 B per outer step;
/// on a 1 GB/s link with no latency that takes 19.642368 ms, amortized over H = 4 steps.
#[test]
fn fl_hsdp_outer_step_hand_computed() {
    let model = tiny();
    let gpu = find_gpu("a100").expect("catalog");
    let inner = Layout { zero: 3, ..layout(1, 1, 8, 1, 1) };
    let outer =
        FlHsdp { groups: 4, local_steps: 4, outer: Link { gb_per_s: 1.0, latency_s: 0.0 }, penalty: 0.05 };
    let result = fl_hsdp_time(&model, 32, &inner, gpu, &Fabric::of(gpu), &outer).expect("valid");
    assert_eq!(result.outer_bytes_per_gpu, 19_642_368.0);
    assert!(close(result.outer_s, 0.019_642_368));
    assert!(close(result.per_step_s, result.inner.total_s + 0.019_642_368 / 4.0));
    assert!(close(result.convergence_factor, 1.1));
}

#[test]
fn impossible_asks_are_errors() {
    let model = preset("gpt-1t").expect("preset");
    let gpu = find_gpu("a100").expect("catalog");
    let fabric = Fabric::of(gpu);
    match search(&model, 64, 8, gpu, &fabric, &SearchLimits::default()) {
        Err(TrainError::DoesNotFit { smallest_bytes, usable_bytes }) => {
            assert!(smallest_bytes > usable_bytes)
        }
        other => panic!("expected DoesNotFit, got {other:?}"),
    }
    // 4 heads and 2 layers leave t x p <= 8, so d >= 2 on 16 GPUs: an odd batch never splits.
    let narrow = TrainShape::gpt("narrow", 2, 1024, 4, 1024, 1000);
    assert!(matches!(
        search(&narrow, 3, 16, gpu, &fabric, &SearchLimits::default()),
        Err(TrainError::Batch(_))
    ));
}

proptest! {
    /// For a fixed (t, p, b, v, recompute, ZeRO) family, more data-parallel GPUs never
    /// raise memory per GPU (fewer micro-batches in flight, more ZeRO sharding).
    #[test]
    fn more_data_parallel_gpus_never_raise_memory(
        t_exp in 0u32..3, p in 1u32..5, zero in 0u8..2, recompute in 0usize..3, d_exp in 0u32..4,
    ) {
        let model = TrainShape::gpt("g", 8, 2048, 16, 1024, 5000);
        let recompute = [Recompute::None, Recompute::Selective, Recompute::Full][recompute];
        let fam = |data: u32| Layout { tensor: 1 << t_exp, pipeline: p, data, micro_batch: 1, interleave: 1, recompute, zero };
        let smaller = memory_per_gpu(&model, 64, &fam(1 << d_exp)).expect("valid").total;
        let larger = memory_per_gpu(&model, 64, &fam(2 << d_exp)).expect("valid").total;
        prop_assert!(larger <= smaller);
    }

    /// A higher ZeRO stage never raises memory per GPU (it only divides model states by d).
    #[test]
    fn a_higher_zero_stage_never_raises_memory(t_exp in 0u32..3, d_exp in 0u32..5, recompute in 0usize..3) {
        let model = TrainShape::gpt("g", 8, 2048, 16, 1024, 5000);
        let recompute = [Recompute::None, Recompute::Selective, Recompute::Full][recompute];
        let at = |zero: u8| {
            let layout = Layout { tensor: 1 << t_exp, pipeline: 1, data: 1 << d_exp, micro_batch: 1, interleave: 1, recompute, zero };
            memory_per_gpu(&model, 64, &layout).expect("valid").total
        };
        for zero in 0u8..3 {
            prop_assert!(at(zero + 1) <= at(zero));
        }
    }

    /// Splitting a flat ring into an inner tier on a faster link never slows it.
    #[test]
    fn a_faster_inner_tier_never_slows_a_ring(inner in 2u32..9, outer in 1u32..9, bytes in 1e3f64..1e10) {
        let slow = Link { gb_per_s: 25.0, latency_s: 0.0 };
        let fast = Link { gb_per_s: 300.0, latency_s: 0.0 };
        let flat = ring_allreduce_time(bytes, &[Tier { ranks: inner * outer, link: slow }]);
        let tiered = ring_allreduce_time(bytes, &[Tier { ranks: inner, link: fast }, Tier { ranks: outer, link: slow }]);
        prop_assert!(tiered <= flat * (1.0 + 1e-12));
    }

    /// Every plan the search returns uses exactly the GPUs asked, fits in memory, and
    /// the list is sorted by predicted time.
    #[test]
    fn search_results_are_feasible_and_sorted(gpus_exp in 3u32..8, batch_mult in 1u32..4) {
        let gpus = 1 << gpus_exp;
        let model = TrainShape::gpt("g", 16, 2048, 16, 1024, 5000);
        let gpu = find_gpu("a100-40g").expect("catalog");
        let plans = search(&model, gpus * batch_mult, gpus, gpu, &Fabric::of(gpu), &SearchLimits::default())
            .expect("feasible");
        for pair in plans.windows(2) {
            prop_assert!(pair[0].time.total_s <= pair[1].time.total_s);
        }
        for plan in &plans {
            prop_assert_eq!(plan.layout.gpus(), gpus);
            prop_assert!(plan.memory.total <= gpu.memory_bytes() * 0.9);
        }
    }
}

/// The catalog's scale-out figures: MIG only on A100, H100 and H200 (7 instances); the
/// DGX NICs per GPU (HDR 200 Gb/s = 25 GB/s, NDR 400 Gb/s = 50 GB/s); T4 and A10 present
/// with their datasheet figures; an 8-GPU NVLink domain except the A6000's bridged pair.
#[test]
fn catalog_scale_out_figures() {
    for gpu in cotenant_perf::GPU_CATALOG {
        let mig = matches!(gpu.name, "A100-80G" | "A100-40G" | "H100-SXM" | "H200");
        assert_eq!(gpu.mig_instances, if mig { 7 } else { 0 }, "{}", gpu.name);
        assert_eq!(gpu.nvlink_domain_gpus, if gpu.name == "A6000" { 2 } else { 8 }, "{}", gpu.name);
        assert!(gpu.nic_gb_per_s > 0.0 && gpu.nic_gb_per_s < gpu.interconnect_gb_per_s, "{}", gpu.name);
    }
    assert_eq!(find_gpu("a100").expect("catalog").nic_gb_per_s, 25.0);
    assert_eq!(find_gpu("h200").expect("catalog").nic_gb_per_s, 50.0);
    let t4 = find_gpu("T4").expect("catalog");
    assert_eq!((t4.dense_tflops, t4.memory_tb_per_s, t4.memory_gib), (65.0, 0.32, 16.0));
    let a10 = find_gpu("a10").expect("catalog");
    assert_eq!((a10.dense_tflops, a10.memory_tb_per_s, a10.memory_gib), (125.0, 0.6, 24.0));
}
