//! Enumerate the feasible Megatron layouts for a GPU count and global batch, best first.

use super::links::{Fabric, Links};
use super::megatron::{
    iteration_time, memory_per_gpu, IterationBreakdown, Layout, MemoryBreakdown, Recompute,
    USABLE_MEMORY_FRACTION,
};
use super::shape::TrainShape;
use super::{divisors, TrainError};
use crate::gpu::GpuSpec;

/// Bounds of the search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchLimits {
    /// Largest micro-batch (sequences) tried.
    pub max_micro_batch: u32,
    /// Largest interleaving factor v tried.
    pub max_interleave: u32,
    /// Keep only layouts that fit the GPU's memory (false: keep all, to see what a
    /// layout would do with memory to spare).
    pub memory_check: bool,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits { max_micro_batch: 8, max_interleave: 4, memory_check: true }
    }
}

/// One evaluated layout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub layout: Layout,
    pub time: IterationBreakdown,
    pub memory: MemoryBreakdown,
}

impl Plan {
    /// TFLOP/s per GPU, Megatron's count (recomputed FLOPs included).
    pub fn tflops_per_gpu(&self) -> f64 {
        self.time.hardware_flops / self.time.total_s / f64::from(self.layout.gpus()) / 1e12
    }

    /// Model FLOPs utilization: model FLOPs / time / GPUs / dense peak.
    pub fn mfu(&self, gpu: &GpuSpec) -> f64 {
        self.time.model_flops / self.time.total_s / f64::from(self.layout.gpus()) / (gpu.dense_tflops * 1e12)
    }

    /// Tokens per day at the predicted iteration time.
    pub fn tokens_per_day(&self, model: &TrainShape, global_batch: u32) -> f64 {
        f64::from(global_batch) * f64::from(model.seq) / self.time.total_s * 86_400.0
    }
}

/// Evaluates one layout on the best links of `fabric`, with its memory check.
pub fn evaluate(
    model: &TrainShape,
    global_batch: u32,
    layout: &Layout,
    gpu: &GpuSpec,
    fabric: &Fabric,
) -> Result<Plan, TrainError> {
    let links = Links::best(fabric, layout.tensor, layout.data);
    let time = iteration_time(model, global_batch, layout, gpu, &links)?;
    let memory = memory_per_gpu(model, global_batch, layout)?;
    Ok(Plan { layout: *layout, time, memory })
}

/// Every layout of exactly `gpus` GPUs that is valid and fits in
/// [`USABLE_MEMORY_FRACTION`] of the GPU's memory, best first (time, then memory, then
/// the layout itself, so the order is total and deterministic).
///
/// Enumerated: t dividing the heads, p up to the layers, d = gpus / (t p) dividing the
/// global batch, b dividing B/d up to the limit, v up to the limit (p > 1), recompute
/// none/selective/full (selective only where attention scores are materialized), ZeRO
/// 0-1 with pipelining and 0-3 without.
pub fn search(
    model: &TrainShape,
    global_batch: u32,
    gpus: u32,
    gpu: &GpuSpec,
    fabric: &Fabric,
    limits: &SearchLimits,
) -> Result<Vec<Plan>, TrainError> {
    if gpus == 0 || global_batch == 0 {
        return Err(TrainError::Layout("the GPU count and the global batch must be at least 1".into()));
    }
    let usable = gpu.memory_bytes() * USABLE_MEMORY_FRACTION;
    let mut plans = Vec::new();
    let mut smallest_need = f64::INFINITY;
    let mut any_batch_fit = false;
    let recomputes: &[Recompute] = if model.flash_attention {
        &[Recompute::None, Recompute::Full]
    } else {
        &[Recompute::None, Recompute::Selective, Recompute::Full]
    };
    for tensor in divisors(gpus).into_iter().filter(|t| model.heads.is_multiple_of(*t)) {
        for pipeline in divisors(gpus / tensor).into_iter().filter(|p| *p <= model.layers) {
            let data = gpus / (tensor * pipeline);
            if !global_batch.is_multiple_of(data) {
                continue;
            }
            any_batch_fit = true;
            let replica_batch = global_batch / data;
            for micro_batch in divisors(replica_batch).into_iter().filter(|b| *b <= limits.max_micro_batch) {
                let max_v = if pipeline > 1 { limits.max_interleave } else { 1 };
                for interleave in 1..=max_v {
                    let max_zero = match (pipeline > 1, data > 1) {
                        (_, false) => 0,
                        (true, true) => 1,
                        (false, true) => 3,
                    };
                    for &recompute in recomputes {
                        for zero in 0..=max_zero {
                            let layout =
                                Layout { tensor, pipeline, data, micro_batch, interleave, recompute, zero };
                            let Ok(plan) = evaluate(model, global_batch, &layout, gpu, fabric) else {
                                continue;
                            };
                            smallest_need = smallest_need.min(plan.memory.total);
                            if plan.memory.total <= usable || !limits.memory_check {
                                plans.push(plan);
                            }
                        }
                    }
                }
            }
        }
    }
    if !any_batch_fit {
        return Err(TrainError::Batch(format!(
            "no data-parallel degree d dividing {gpus} GPUs (d = gpus / (t p)) divides the global batch {global_batch}"
        )));
    }
    if plans.is_empty() {
        if smallest_need.is_finite() {
            return Err(TrainError::DoesNotFit { smallest_bytes: smallest_need, usable_bytes: usable });
        }
        return Err(TrainError::Layout(format!(
            "no valid layout of {gpus} GPUs for this model (heads, layers and batch leave none)"
        )));
    }
    plans.sort_by(|a, b| {
        a.time
            .total_s
            .total_cmp(&b.time.total_s)
            .then(a.memory.total.total_cmp(&b.memory.total))
            .then(a.layout.cmp(&b.layout))
    });
    Ok(plans)
}
