//! AxoNN-style 4D parallelism (Singh et al., SC'24): data x 3D tensor (x, y, z) with
//! ring collectives whose bandwidth depends on how many of a group's ranks share a node.

use super::links::{ring_allreduce_time, ring_reduce_scatter_time, Fabric, TierPath};
use super::megatron::{
    achievable_fraction, ELEMENTWISE_PASSES, GRADIENT_BYTES, OPTIMIZER_BYTES, RECOMPUTE_PASSES, WEIGHT_BYTES,
};
use super::shape::TrainShape;
use super::TrainError;
use crate::gpu::GpuSpec;

/// A 4D grid: x, y, z tensor degrees and the data-parallel degree; rank order x
/// innermost, then y, z, data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grid {
    pub x: u32,
    pub y: u32,
    pub z: u32,
    pub data: u32,
}

impl Grid {
    pub fn gpus(&self) -> u32 {
        self.x * self.y * self.z * self.data
    }
}

/// Where a 4D iteration's time goes, seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxonnBreakdown {
    pub compute_s: f64,
    pub elementwise_s: f64,
    /// All collectives, as if none overlapped.
    pub comm_s: f64,
    /// The part of `comm_s` on the critical path.
    pub exposed_comm_s: f64,
    pub total_s: f64,
    pub hardware_flops: f64,
    pub model_flops: f64,
    /// Memory per GPU, bytes.
    pub memory_bytes: f64,
}

/// The (k, n) shapes of one layer's four linear layers: QKV, attention output, MLP in
/// (both gates when gated), MLP out.
fn linears(model: &TrainShape) -> [(f64, f64); 4] {
    let h = f64::from(model.hidden);
    let kv = f64::from(model.kv_heads) * h / f64::from(model.heads);
    let f = f64::from(model.ffn_hidden);
    let mlp_in = if model.gated_mlp { 2.0 * f } else { f };
    [(h, h + 2.0 * kv), (h, h), (h, mlp_in), (f, h)]
}

/// One 4D iteration of `model` (global batch in sequences) with activation checkpointing
/// (AxoNN's default), the collectives of Agarwal's 3D matrix multiply per linear layer
/// (k x n weights, T tokens per data-parallel replica), consecutive layers transposed
/// (x and y swap roles):
/// - forward: all-gather the weight shard over z (k n / (x y) x 2 bytes) and all-reduce
///   the output over y (T/z x n/x x 2 bytes); both again in the recomputed forward;
/// - backward: all-reduce the input gradient over x (T/z x k/y x 2) and reduce-scatter
///   the weight gradient over z (k n / (x y) x 2);
/// - data parallel: all-reduce of params/(x y z) x 4 bytes.
///
/// AxoNN overlaps the z collectives, the backward all-reduces and the data-parallel
/// all-reduce with computation; the forward all-reduces over y stay exposed. So
/// time = compute + elementwise + forward all-reduces + max(0, the rest - compute).
pub fn axonn_iteration_time(
    model: &TrainShape,
    global_batch: u32,
    grid: &Grid,
    gpu: &GpuSpec,
    fabric: &Fabric,
) -> Result<AxonnBreakdown, TrainError> {
    let Grid { x, y, z, data } = *grid;
    if x == 0 || y == 0 || z == 0 || data == 0 {
        return Err(TrainError::Layout(format!("{grid:?}: every degree must be at least 1")));
    }
    if !global_batch.is_multiple_of(data) {
        return Err(TrainError::Batch(format!(
            "global batch {global_batch} is not a multiple of d = {data}"
        )));
    }
    let replica_batch = f64::from(global_batch / data);
    let tokens = replica_batch * f64::from(model.seq);
    let paths: [TierPath; 3] =
        [fabric.group_path(x, 1), fabric.group_path(y, x), fabric.group_path(z, x * y)];
    let data_path = fabric.group_path(data, x * y * z);
    let (fx, fy, fz) = (f64::from(x), f64::from(y), f64::from(z));

    let mut forward_ar = 0.0;
    let mut overlappable = 0.0;
    for (index, (k, n)) in linears(model).into_iter().enumerate() {
        let (gx, gy, px, py) =
            if index % 2 == 0 { (fx, fy, &paths[0], &paths[1]) } else { (fy, fx, &paths[1], &paths[0]) };
        let weight_shard = k * n / (gx * gy) * WEIGHT_BYTES;
        let gather = ring_reduce_scatter_time(weight_shard, &paths[2]);
        forward_ar += 2.0 * ring_allreduce_time(tokens / fz * n / gx * 2.0, py);
        overlappable += 2.0 * gather
            + ring_allreduce_time(tokens / fz * k / gy * 2.0, px)
            + ring_reduce_scatter_time(weight_shard, &paths[2]);
    }
    let layers = f64::from(model.layers);
    forward_ar *= layers;
    overlappable *= layers;
    let tensor = x * y * z;
    let params_per_gpu = model.params() / f64::from(tensor);
    overlappable += ring_allreduce_time(params_per_gpu * GRADIENT_BYTES, &data_path);

    let batch = f64::from(global_batch);
    let model_flops = model.model_flops(batch);
    let hardware_flops = model_flops + batch * layers * model.layer_forward_flops();
    let n = f64::from(grid.gpus());
    let compute = hardware_flops / n / (gpu.dense_tflops * 1e12 * achievable_fraction(gpu.generation));
    let elementwise = replica_batch
        * layers
        * model.layer_activation_bytes(tensor)
        * (ELEMENTWISE_PASSES + RECOMPUTE_PASSES)
        / (gpu.memory_tb_per_s * 1e12);
    let exposed = forward_ar + (overlappable - compute).max(0.0);

    let (s, h) = (f64::from(model.seq), f64::from(model.hidden));
    let states = params_per_gpu * (WEIGHT_BYTES + GRADIENT_BYTES + OPTIMIZER_BYTES);
    let checkpoints = layers * 2.0 * s * h * replica_batch / (fy * fz);
    let working =
        replica_batch * model.layer_activation_bytes(tensor) + 4.0 * tokens * f64::from(model.vocab) / n;
    Ok(AxonnBreakdown {
        compute_s: compute,
        elementwise_s: elementwise,
        comm_s: forward_ar + overlappable,
        exposed_comm_s: exposed,
        total_s: compute + elementwise + exposed,
        hardware_flops,
        model_flops,
        memory_bytes: states + checkpoints + working,
    })
}

/// Every 4D grid for `gpus` GPUs (x, y, z dividing the heads where they shard them),
/// best first by predicted time, with those that fit in memory only.
pub fn axonn_search(
    model: &TrainShape,
    global_batch: u32,
    gpus: u32,
    gpu: &GpuSpec,
    fabric: &Fabric,
) -> Vec<(Grid, AxonnBreakdown)> {
    let usable = gpu.memory_bytes() * super::megatron::USABLE_MEMORY_FRACTION;
    let mut found = Vec::new();
    for x in super::divisors(gpus) {
        for y in super::divisors(gpus / x) {
            for z in super::divisors(gpus / (x * y)) {
                let data = gpus / (x * y * z);
                if !model.heads.is_multiple_of(x) || !model.heads.is_multiple_of(y) {
                    continue;
                }
                let grid = Grid { x, y, z, data };
                if let Ok(time) = axonn_iteration_time(model, global_batch, &grid, gpu, fabric) {
                    if time.memory_bytes <= usable {
                        found.push((grid, time));
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| a.1.total_s.total_cmp(&b.1.total_s).then(a.0.cmp(&b.0)));
    found
}
