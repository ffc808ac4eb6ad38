//! Pipeline parallelism inside a replica: `pp` stages, each holding a contiguous slice
//! of the layers on `tp` GPUs, and up to `pp` micro-batches in flight (vLLM's virtual
//! engines).
//!
//! A micro-batch's time at stage k (docs/serving.md, "Pipeline parallelism"):
//!
//! ```text
//! layer part  = T_iter(batch) - c0 - LM head                    (all L layers, roofline)
//! stage k     = [k = 0] c0 + layer part x L_k / L + [k = pp-1] LM head
//! send/recv   = latency + tokens x d x b / bandwidth             (between stages k and k+1)
//! ```
//! with L_k the layers stage k holds (vLLM's `get_pp_indices`: L / pp each, the
//! remainder one each to the stages before the last). Each stage runs one micro-batch at
//! a time, first come first served; a batch enters stage k+1 when it has left stage k,
//! its activations have arrived, and stage k+1 is free:
//!
//! ```text
//! start_k = max(end_{k-1} + send/recv, free_k);  end_k = start_k + stage_k;  free_k = end_k
//! ```
//! A new micro-batch may enter stage 0 when stage 0 is free and fewer than pp are in
//! flight. One batch alone takes sum_k stage_k + (pp-1) send/recv (the bubble: the other
//! stages idle); pp batches back to back complete one per max_k stage_k.
//!
//! Memory (per GPU, the fullest stage): the layer weights of L_k layers, plus the
//! embedding on stage 0 and the LM head on the last; the KV cache of L_k layers per token.
//! A replica's KV capacity in tokens is the smallest over its stages.

use cotenant_core::{Span, Time};
use cotenant_perf::transfer::{activation_bytes, Link};
use cotenant_perf::{BatchEntry, MemoryPlan, ModelShape, Roofline};

/// Layers per stage as vLLM partitions them (`vllm.distributed.utils.get_pp_indices`):
/// L / pp each, and the L mod pp left over one each to stages pp-2, pp-3, ...
pub fn stage_layers(layers: u32, pp: u32) -> Vec<u32> {
    let pp = pp.max(1);
    let mut parts = vec![layers / pp; pp as usize];
    let remainder = (layers % pp) as usize;
    for i in 0..remainder {
        // vLLM's partitions[-(i + 2)] += 1; the remainder is below pp, so i <= pp - 2.
        parts[pp as usize - 2 - i] += 1;
    }
    parts
}

/// Seconds each stage of a `pp`-stage replica takes for `entries` (see the module
/// docs), written to `stage_s` (overwritten), and the send/recv between stages.
pub fn stage_times(
    model: &Roofline,
    link: Link,
    pp: u32,
    entries: &[BatchEntry],
    total_s: f64,
    stage_s: &mut Vec<f64>,
) -> f64 {
    let (mut tokens, mut rows) = (0_u64, 0_u64);
    for entry in entries {
        tokens += u64::from(entry.new_tokens);
        rows += u64::from(entry.emits_token);
    }
    let shared = model.shared_cost(tokens, rows);
    let c0 = model.params.fixed_s.min(total_s);
    let lm_head = shared.lm_head_floor_s + shared.lm_head_excess_s;
    let layer_part = (total_s - c0 - lm_head).max(0.0);
    let layers = stage_layers(model.model.layers, pp);
    let total_layers = f64::from(model.model.layers.max(1));
    stage_s.clear();
    for (k, &stage_layers) in layers.iter().enumerate() {
        let mut seconds = layer_part * f64::from(stage_layers) / total_layers;
        if k == 0 {
            seconds += c0;
        }
        if k + 1 == layers.len() {
            seconds += lm_head;
        }
        stage_s.push(seconds);
    }
    link.transfer_s(activation_bytes(&model.model, tokens))
}

/// When each stage of one replica is next free.
#[derive(Clone, Debug)]
pub struct Stages {
    free: Vec<Time>,
}

/// When a launched micro-batch leaves the pipeline, and its stage-time total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub end: Time,
    /// Sum of its stage times (not counting waits or send/recv), µs.
    pub stage_work: Span,
}

impl Stages {
    pub fn new(pp: u32) -> Stages {
        Stages { free: vec![Time::ZERO; pp.max(1) as usize] }
    }

    /// When stage 0 can take the next micro-batch.
    pub fn first_free(&self) -> Time {
        self.free[0]
    }

    /// Sends a micro-batch through every stage from `now` (stage 0 must be free), each
    /// stage's seconds rounded up to a whole µs (at least 1), send/recv likewise.
    pub fn launch(&mut self, now: Time, stage_s: &[f64], transfer_s: f64) -> Launch {
        let transfer = if transfer_s > 0.0 { Span::from_secs_f64_ceil(transfer_s) } else { Span::ZERO };
        let mut ready = now;
        let mut work = Span::ZERO;
        for (k, seconds) in stage_s.iter().enumerate() {
            if k > 0 {
                ready += transfer;
            }
            let duration = Span::from_secs_f64_ceil(*seconds).max(Span(1));
            let start = ready.max(self.free[k]);
            ready = start + duration;
            self.free[k] = ready;
            work += duration;
        }
        Launch { end: ready, stage_work: work }
    }
}

/// One GPU's memory plan on the fullest stage of a `pp`-stage replica (`base` is the
/// whole model's plan on `tp` GPUs, [`MemoryPlan::new`]): weights and KV bytes per
/// token scaled to the stage's layers, the embedding on the first stage and the LM head
/// on the last; the stage with the fewest KV tokens.
pub fn stage_memory_plan(model: &ModelShape, tp: u32, pp: u32, base: &MemoryPlan) -> MemoryPlan {
    if pp <= 1 {
        return *base;
    }
    let bytes = f64::from(model.bytes_per_param);
    let embedding = model.lm_head_params() / f64::from(tp.max(1)) * bytes;
    let layer_weights = (base.weight_bytes - 2.0 * embedding).max(0.0);
    let layers = stage_layers(model.layers, pp);
    let total_layers = f64::from(model.layers.max(1));
    let last = layers.len() - 1;
    let mut best: Option<MemoryPlan> = None;
    for (k, &stage_layers) in layers.iter().enumerate() {
        let share = f64::from(stage_layers) / total_layers;
        let mut weight_bytes = layer_weights * share;
        if k == 0 {
            weight_bytes += embedding;
        }
        if k == last {
            weight_bytes += embedding;
        }
        let kv_bytes = base.usable_bytes - weight_bytes - base.activation_bytes;
        let kv_bytes_per_token = base.kv_bytes_per_token * share;
        let kv_tokens = if kv_bytes > 0.0 && kv_bytes_per_token > 0.0 {
            (kv_bytes / kv_bytes_per_token) as u64
        } else {
            0
        };
        let plan = MemoryPlan { weight_bytes, kv_bytes, kv_bytes_per_token, kv_tokens, ..*base };
        if best.is_none_or(|b| plan.kv_tokens < b.kv_tokens) {
            best = Some(plan);
        }
    }
    best.unwrap_or(*base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::{find_gpu, ActivationBatch, RooflineParams};

    fn llama8b_h100() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
    }

    #[test]
    fn layers_split_as_vllm_does() {
        assert_eq!(stage_layers(32, 4), vec![8, 8, 8, 8]);
        assert_eq!(stage_layers(80, 3), vec![27, 27, 26]);
        assert_eq!(stage_layers(10, 4), vec![2, 3, 3, 2]);
        assert_eq!(stage_layers(7, 1), vec![7]);
        for (layers, pp) in [(32, 5), (80, 6), (126, 8)] {
            assert_eq!(stage_layers(layers, pp).iter().sum::<u32>(), layers);
        }
    }

    /// The 1,024-token prefill of Llama-3.1-8B on an H100 (roofline.rs's
    /// `one_prefill_by_hand`: 24.910 ms = c0 1 ms + LM head 0.4182 ms + 23.4918 ms of layers)
    /// over 4 stages of 8 layers: layers 23.4918 / 4 = 5.87295 ms each;
    /// stage 0 = 1 + 5.87295 = 6.87295 ms, stages 1, 2 = 5.87295 ms, stage 3 = 5.87295 +
    /// 0.4182 = 6.29115 ms; send/recv 5 µs + 1024 x 4096 x 2 B / 450 GB/s = 5 + 18.641 =
    /// 23.641 µs. One batch alone (the bubble): 24.910 + 3 x 0.023641 = 24.9809 ms.
    #[test]
    fn one_prefill_over_four_stages_by_hand() {
        let model = llama8b_h100();
        let entries = [BatchEntry { new_tokens: 1024, context_tokens: 0, emits_token: true }];
        let total = model.iteration_s(&entries);
        let link = Link::between_stages(&model.gpu, 1, 4);
        let mut stages = Vec::new();
        let transfer = stage_times(&model, link, 4, &entries, total, &mut stages);
        let close = |a: f64, b: f64| (a - b).abs() <= 2e-3 * b;
        assert!(close(stages[0], 6.87295e-3), "{stages:?}");
        assert!(close(stages[1], 5.87295e-3) && close(stages[2], 5.87295e-3), "{stages:?}");
        assert!(close(stages[3], 6.29115e-3), "{stages:?}");
        assert!((transfer - 23.641e-6).abs() < 1e-9, "{transfer}");
        let alone = stages.iter().sum::<f64>() + 3.0 * transfer;
        assert!(close(alone, 24.9809e-3), "{alone}");
        assert!((stages.iter().sum::<f64>() - total).abs() < 1e-12);
    }

    /// Four stages of 10 ms with 1 ms send/recv. One batch at 0: 4 x 10 + 3 x 1 = 43 ms.
    /// Four batches launched as stage 0 frees (0, 10, 20, 30 ms) complete at 43, 53, 63,
    /// 73 ms: one every 10 ms, four times the 1 / 40 ms of the same work unpipelined.
    #[test]
    fn bubble_and_steady_state_by_hand() {
        let stage_s = [0.010; 4];
        let mut stages = Stages::new(4);
        let one = stages.launch(Time::ZERO, &stage_s, 0.001);
        assert_eq!(one, Launch { end: Time(43_000), stage_work: Span(40_000) });
        let mut stages = Stages::new(4);
        let mut ends = Vec::new();
        for _ in 0..4 {
            let now = stages.first_free();
            ends.push(stages.launch(now, &stage_s, 0.001).end.0);
        }
        assert_eq!(ends, vec![43_000, 53_000, 63_000, 73_000]);
        // A slow later stage holds the ones behind it: stage 1 takes 30 ms.
        let mut stages = Stages::new(2);
        let a = stages.launch(Time::ZERO, &[0.010, 0.030], 0.0).end;
        let b = stages.launch(stages.first_free(), &[0.010, 0.030], 0.0).end;
        assert_eq!((a, b), (Time(40_000), Time(70_000)));
    }

    /// Llama-3.1-70B on 2 x H100 per stage, PP 2 (40 layers each): the whole model's
    /// per-GPU weights 70,552,387,584 B hold an embedding and an LM head of
    /// 8192 x 128,256 / 2 x 2 = 1,050,673,152 B each; layers 68,451,041,280 B, half per
    /// stage = 34,225,520,640 B, + one embedding = 35,276,193,792 B on either stage.
    /// KV per token per GPU: 163,840 / 2 = 81,920 B. Free = 77,309,411,328 -
    /// 35,276,193,792 - 973,078,528 = 41,060,139,008 B -> 501,222 tokens (vs 35,302 at PP 1).
    #[test]
    fn seventy_b_memory_over_two_stages_by_hand() {
        let model = ModelShape::parse("Llama-3.1-70B").expect("catalog");
        let gpu = find_gpu("H100-SXM").expect("catalog");
        let batch = ActivationBatch { tokens: 8192, sequences: 256 };
        let base = MemoryPlan::new(&model, gpu, 2, 0.9, batch, None);
        let plan = stage_memory_plan(&model, 2, 2, &base);
        assert_eq!(plan.weight_bytes, 35_276_193_792.0);
        assert_eq!(plan.kv_bytes_per_token, 81_920.0);
        assert_eq!(plan.kv_tokens, 501_222);
        assert_eq!(stage_memory_plan(&model, 2, 1, &base), base);
    }
}
