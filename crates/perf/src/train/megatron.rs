//! Megatron-LM PTD-P (Narayanan et al., SC'21): iteration time and memory per GPU of a
//! (tensor, pipeline, data) layout with micro-batches, interleaving, recomputation and
//! ZeRO sharding.

use super::links::{ring_allreduce_time, ring_reduce_scatter_time, Links};
use super::shape::TrainShape;
use super::TrainError;
use crate::gpu::{Generation, GpuSpec};

/// Activation recomputation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recompute {
    None,
    /// Recompute only the attention-score part (Korthikanti et al.).
    Selective,
    /// Recompute every layer's forward in the backward pass (store layer inputs only).
    Full,
}

impl Recompute {
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

/// One parallel layout: n = tensor x pipeline x data GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Layout {
    pub tensor: u32,
    pub pipeline: u32,
    pub data: u32,
    /// Sequences per micro-batch (b).
    pub micro_batch: u32,
    /// Model chunks per pipeline stage (v, interleaved schedule; 1 = plain 1F1B).
    pub interleave: u32,
    pub recompute: Recompute,
    /// ZeRO stage over the data-parallel group: 0 none, 1 optimizer state, 2 + gradients,
    /// 3 + weights (FSDP).
    pub zero: u8,
}

impl Layout {
    pub fn gpus(&self) -> u32 {
        self.tensor * self.pipeline * self.data
    }

    /// [t, p, d, b, v] as floats, for the formulas.
    pub fn degrees(&self) -> [f64; 5] {
        [self.tensor, self.pipeline, self.data, self.micro_batch, self.interleave].map(f64::from)
    }
}

/// Bytes per parameter of mixed-precision Adam as Megatron keeps them: bf16 weights (2),
/// fp32 main gradients (4), fp32 master weights, momentum and variance (12) = 18.
pub const WEIGHT_BYTES: f64 = 2.0;
pub const GRADIENT_BYTES: f64 = 4.0;
pub const OPTIMIZER_BYTES: f64 = 12.0;
/// Bytes Adam moves per parameter it updates: reads fp32 master, m, v, gradient (16),
/// writes master, m, v and the bf16 copy (14).
pub const OPTIMIZER_TRAFFIC_BYTES: f64 = 30.0;
/// Elementwise passes over the stored activations per micro-batch: the forward reads
/// and writes them (2), the backward reads them and the incoming gradient and writes the
/// outgoing one (3); a full recomputation adds another forward (2).
pub const ELEMENTWISE_PASSES: f64 = 5.0;
pub const RECOMPUTE_PASSES: f64 = 2.0;
/// Fraction of a GPU's memory a plan may fill (the rest: CUDA context, NCCL buffers,
/// allocator fragmentation).
pub const USABLE_MEMORY_FRACTION: f64 = 0.9;

/// The fraction of the dense 16-bit peak the matrix multiplies of a transformer layer
/// reach, one constant per GPU generation (docs/training.md, "Calibration").
///
/// Ampere: set so that Megatron's 1T-parameter row (Narayanan et al. Table 1, 3,072
/// A100, t=8, p=64, B=3072, plain 1F1B, full recomputation) comes out at its 163 TF/s;
/// every other row is then out of sample. Hopper reuses the Ampere value, on purpose:
/// the Llama 3 rows (H100) test whether the constant transfers across a generation
/// (docs/experiments/training-model.md); other generations have no published
/// large-scale run in our table and reuse it too.
pub fn achievable_fraction(generation: Generation) -> f64 {
    match generation {
        Generation::Hopper => HOPPER_FRACTION,
        Generation::Kepler
        | Generation::Pascal
        | Generation::Volta
        | Generation::Turing
        | Generation::Ampere
        | Generation::Ada => AMPERE_FRACTION,
    }
}

pub const AMPERE_FRACTION: f64 = 0.68;
pub const HOPPER_FRACTION: f64 = AMPERE_FRACTION;

/// Where one iteration's time goes, seconds, plus the counts behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterationBreakdown {
    /// Micro-batches per pipeline per iteration (m = B / (b d)).
    pub micro_batches: u32,
    /// Pipeline bubble as a fraction of the ideal time: (p-1) / (v m).
    pub bubble_fraction: f64,
    /// Matrix-multiply time per micro-batch on the slowest stage.
    pub compute_per_micro_batch_s: f64,
    /// Elementwise (memory-bound) time per micro-batch.
    pub elementwise_per_micro_batch_s: f64,
    /// Tensor-parallel all-reduces per micro-batch.
    pub tensor_comm_per_micro_batch_s: f64,
    /// Pipeline sends and receives per micro-batch.
    pub pipeline_comm_per_micro_batch_s: f64,
    /// m x the micro-batch time.
    pub steady_s: f64,
    /// (p-1)/v x the micro-batch time.
    pub bubble_s: f64,
    /// Data-parallel gradient all-reduce (ZeRO: reduce-scatter + all-gather), not
    /// overlapped: PTD-P runs it after the pipeline flush.
    pub data_comm_s: f64,
    /// The optimizer step (memory-bound).
    pub optimizer_s: f64,
    pub total_s: f64,
    /// FLOPs the GPUs execute (with recomputation), Megatron's count.
    pub hardware_flops: f64,
    /// Model FLOPs (no recomputation), for MFU.
    pub model_flops: f64,
}

/// Memory per GPU, bytes (the most loaded stage).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryBreakdown {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
    pub activations: f64,
    pub total: f64,
}

/// Checks a layout against the model and batch; returns m, the micro-batches per pipeline.
pub fn check_layout(model: &TrainShape, global_batch: u32, layout: &Layout) -> Result<u32, TrainError> {
    let Layout { tensor, pipeline, data, micro_batch, interleave, zero, .. } = *layout;
    if tensor == 0 || pipeline == 0 || data == 0 || micro_batch == 0 || interleave == 0 {
        return Err(TrainError::Layout(format!("{layout:?}: every degree must be at least 1")));
    }
    if !model.heads.is_multiple_of(tensor) || !model.kv_heads.is_multiple_of(tensor.min(model.kv_heads)) {
        return Err(TrainError::Layout(format!(
            "t={tensor} does not divide the model's {} attention heads",
            model.heads
        )));
    }
    if pipeline * interleave > model.layers {
        return Err(TrainError::Layout(format!(
            "p x v = {} exceeds the model's {} layers",
            pipeline * interleave,
            model.layers
        )));
    }
    if interleave > 1 && pipeline == 1 {
        return Err(TrainError::Layout(format!(
            "v = {interleave} model chunks need pipeline parallelism (p > 1)"
        )));
    }
    if zero > 3 {
        return Err(TrainError::Layout(format!("ZeRO stage {zero} does not exist (0 to 3)")));
    }
    if zero >= 2 && pipeline > 1 {
        return Err(TrainError::Layout(
            "ZeRO stages 2 and 3 do not combine with pipeline parallelism".into(),
        ));
    }
    let replica_batch = micro_batch * data;
    if !global_batch.is_multiple_of(replica_batch) {
        return Err(TrainError::Batch(format!(
            "global batch {global_batch} is not a multiple of b x d = {micro_batch} x {data} = {replica_batch}"
        )));
    }
    let micro_batches = global_batch / replica_batch;
    if interleave > 1 && !micro_batches.is_multiple_of(pipeline) {
        return Err(TrainError::Layout(format!(
            "the interleaved schedule needs m = {micro_batches} micro-batches to be a multiple of p = {pipeline}"
        )));
    }
    Ok(micro_batches)
}

fn layers_per_stage(model: &TrainShape, pipeline: u32) -> f64 {
    f64::from(model.layers.div_ceil(pipeline))
}

/// Parameters one GPU holds before ZeRO sharding: the most loaded stage's layers and,
/// conservatively, the embedding (first stage) / output layer, all over t.
pub fn stage_params_per_gpu(model: &TrainShape, layout: &Layout) -> f64 {
    let stage = layers_per_stage(model, layout.pipeline) * model.layer_params();
    let embedding = f64::from(model.vocab) * f64::from(model.hidden);
    (stage + embedding) / f64::from(layout.tensor)
}

/// Predicted time of one training iteration (one global batch) of `model` under `layout`
/// on `gpu`, its groups on `links`.
///
/// Per micro-batch on the slowest stage (ceil(l/p) layers, plus the output layer):
/// compute = FLOPs / (t x peak x [`achievable_fraction`]), FLOPs = b [ceil(l/p) x
/// passes x layer forward + 3 x logits], passes = 3 (+1 full recomputation; selective
/// adds the score FLOPs once more); elementwise = stored activation bytes x passes /
/// HBM bandwidth; tensor = (4, or 6 with full recomputation) all-reduces of b s h x 2
/// bytes per layer on `links.tensor`; pipeline = 2 v sends of b s h x 2 / t bytes
/// (scatter/gather). Then time = (m + (p-1)/v) x per-micro-batch + data-parallel
/// gradient all-reduce of params/(t p) x 4 bytes on `links.data` + optimizer step.
pub fn iteration_time(
    model: &TrainShape,
    global_batch: u32,
    layout: &Layout,
    gpu: &GpuSpec,
    links: &Links,
) -> Result<IterationBreakdown, TrainError> {
    let micro_batches = check_layout(model, global_batch, layout)?;
    let Layout { tensor, pipeline, data, recompute, zero, .. } = *layout;
    let [t, p, d, b, v] = layout.degrees();
    let m = f64::from(micro_batches);
    let (s, h) = (f64::from(model.seq), f64::from(model.hidden));
    let stage_layers = layers_per_stage(model, pipeline);

    let layer_passes = match recompute {
        Recompute::Full => 4.0,
        Recompute::None | Recompute::Selective => 3.0,
    };
    let selective_extra =
        if recompute == Recompute::Selective { model.attention_forward_flops() } else { 0.0 };
    let stage_flops = b
        * (stage_layers * (layer_passes * model.layer_forward_flops() + selective_extra)
            + 3.0 * model.logit_forward_flops());
    let peak = gpu.dense_tflops * 1e12 * achievable_fraction(gpu.generation);
    let compute = stage_flops / (t * peak);

    let passes = ELEMENTWISE_PASSES + if recompute == Recompute::Full { RECOMPUTE_PASSES } else { 0.0 };
    let elementwise =
        b * stage_layers * model.layer_activation_bytes(tensor) * passes / (gpu.memory_tb_per_s * 1e12);

    let activation_message = b * s * h * 2.0;
    let allreduces = if recompute == Recompute::Full { 6.0 } else { 4.0 };
    let tensor_comm = stage_layers * allreduces * ring_allreduce_time(activation_message, &links.tensor);
    let pipeline_comm =
        if pipeline > 1 { 2.0 * v * links.pipeline.transfer_s(activation_message / t) } else { 0.0 };

    let per_micro_batch = compute + elementwise + tensor_comm + pipeline_comm;
    let steady = m * per_micro_batch;
    let bubble = (p - 1.0) / v * per_micro_batch;

    let params = stage_params_per_gpu(model, layout);
    let mut data_comm =
        if data > 1 { ring_allreduce_time(params * GRADIENT_BYTES, &links.data) } else { 0.0 };
    if zero == 3 && data > 1 {
        // FSDP gathers the bf16 weights before the forward and again before the backward.
        data_comm += 2.0 * ring_reduce_scatter_time(params * WEIGHT_BYTES, &links.data);
    }
    let updated = if zero >= 1 { params / d } else { params };
    let optimizer = updated * OPTIMIZER_TRAFFIC_BYTES / (gpu.memory_tb_per_s * 1e12);

    let batch = f64::from(global_batch);
    let model_flops = model.model_flops(batch);
    let layers = f64::from(model.layers);
    let hardware_flops = match recompute {
        Recompute::None => model_flops,
        Recompute::Selective => model_flops + batch * layers * model.attention_forward_flops(),
        Recompute::Full => model_flops + batch * layers * model.layer_forward_flops(),
    };
    Ok(IterationBreakdown {
        micro_batches,
        bubble_fraction: (p - 1.0) / (v * m),
        compute_per_micro_batch_s: compute,
        elementwise_per_micro_batch_s: elementwise,
        tensor_comm_per_micro_batch_s: tensor_comm,
        pipeline_comm_per_micro_batch_s: pipeline_comm,
        steady_s: steady,
        bubble_s: bubble,
        data_comm_s: data_comm,
        optimizer_s: optimizer,
        total_s: steady + bubble + data_comm + optimizer,
        hardware_flops,
        model_flops,
    })
}

/// Memory per GPU of `layout` (the first pipeline stage, which holds the most
/// micro-batches in flight).
///
/// Model states: stage params/t x (2 weights + 4 gradients + 12 optimizer), ZeRO-1
/// dividing the optimizer by d, ZeRO-2 also the gradients, ZeRO-3 also the weights.
/// Activations: the first stage holds min(m, p) micro-batches in flight (1F1B), each of
/// ceil(l/p) layers x [`TrainShape::layer_activation_bytes`] x b, times
/// (1 + (p-1)/(p v)) when interleaved (Korthikanti et al.); selective recomputation drops
/// the score term; full recomputation keeps only each layer's input (2 s b h / t) plus
/// one layer's working set; plus the fp32 logits of one micro-batch (4 s b V / t).
pub fn memory_per_gpu(
    model: &TrainShape,
    global_batch: u32,
    layout: &Layout,
) -> Result<MemoryBreakdown, TrainError> {
    let micro_batches = check_layout(model, global_batch, layout)?;
    let Layout { tensor, pipeline, interleave, recompute, zero, .. } = *layout;
    let [t, p, d, b, v] = layout.degrees();
    let params = stage_params_per_gpu(model, layout);
    let shard = |stage: u8| if zero >= stage { d } else { 1.0 };
    let weights = params * WEIGHT_BYTES / shard(3);
    let gradients = params * GRADIENT_BYTES / shard(2);
    let optimizer = params * OPTIMIZER_BYTES / shard(1);

    let (s, h) = (f64::from(model.seq), f64::from(model.hidden));
    let full_layer = model.layer_activation_bytes(tensor);
    let per_layer = match recompute {
        Recompute::None => full_layer,
        Recompute::Selective => full_layer - model.score_activation_bytes() / t,
        Recompute::Full => 2.0 * s * h / t,
    };
    let in_flight = f64::from(micro_batches.min(pipeline));
    let interleave_factor = if interleave > 1 { 1.0 + (p - 1.0) / (p * v) } else { 1.0 };
    let mut activations = in_flight * layers_per_stage(model, pipeline) * per_layer * b * interleave_factor;
    if recompute == Recompute::Full {
        activations += full_layer * b;
    }
    activations += 4.0 * s * b * f64::from(model.vocab) / t;
    Ok(MemoryBreakdown {
        weights,
        gradients,
        optimizer,
        activations,
        total: weights + gradients + optimizer + activations,
    })
}
