//! Roofline iteration time of one LLM serving step (bf16, Llama-style), per operator.
//!
//! For a batch with T new tokens (PAPERS.md Part 2):
//!
//! ```text
//! T_iter = c0 + L [ smax(2 P T / (eta_c F), b P / (eta_m BW))              linear layers
//!                 + sum_i smax(4 H_q h (t_i k_i + t_i^2/2) / (eta_c F),     attention and KV
//!                              2 H_kv h b (k_i + t_i) / (eta_m BW)) ]
//!        + smax(2 d V R / (eta_c F), b d V / (eta_m BW))                    LM head, R rows
//!        + 2 L [ alpha_ar + 2 (tp-1)/tp T d b / B_link ]                     TP all-reduce
//! ```
//! with F and BW the per-GPU peaks times the tensor-parallel degree and
//! smax(x, y) = (x^p + y^p)^(1/p), a smooth knee near the ridge point. A decode is the
//! entry with t = 1, which the formula makes memory-bound on its own.
//!
//! The terms are exposed separately because per-request attribution splits the shared
//! ones (c0, linear, LM head, all-reduce) and gives each request its own attention term.

use crate::gpu::GpuSpec;
use crate::model::ModelShape;

/// Efficiency factors and fixed costs. See docs/serving.md for the calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RooflineParams {
    /// Fraction of peak FLOP/s reached by large matrix multiplies.
    pub compute_efficiency: f64,
    /// Fraction of peak HBM bandwidth reached by weight and KV reads.
    pub memory_efficiency: f64,
    /// Fixed per-iteration cost (kernel launches, sampling, scheduler), seconds.
    pub fixed_s: f64,
    /// Exponent of the smooth max of attention and the LM head; larger is a sharper knee.
    pub knee_exponent: f64,
    /// Exponent of the linear layers' smooth max (fitted to measured kernels).
    pub linear_knee_exponent: f64,
    /// Latency of one all-reduce call, seconds.
    pub allreduce_latency_s: f64,
    /// Algorithm bandwidth of the all-reduce's ring, GB/s per GPU; 0 uses the GPU's link.
    pub allreduce_bandwidth_gb_per_s: f64,
    /// Fixed cost of each linear-layer kernel (launch and tail), seconds.
    pub linear_kernel_s: f64,
    /// Fraction of peak HBM bandwidth reached by each element-wise operator, in the order
    /// of [`elementwise_bytes_per_token`] (input norm, post-attention norm, rope,
    /// activation, residual add).
    pub elementwise_efficiency: [f64; 5],
    /// Fixed cost of each element-wise kernel, seconds, same order.
    pub elementwise_kernel_s: [f64; 5],
    /// Least time of one all-reduce call, seconds (launch and synchronisation: measured
    /// NCCL calls do not get faster below it however small the message); 0 for none.
    pub allreduce_floor_s: f64,
    /// Latency of the all-reduce's small-message protocol (NCCL's LL/LL128: lower latency,
    /// lower bandwidth), seconds; used where it beats the large-message line.
    pub allreduce_small_latency_s: f64,
    /// Bandwidth of the small-message protocol, GB/s per GPU; 0: no such protocol.
    pub allreduce_small_bandwidth_gb_per_s: f64,
}

impl Default for RooflineParams {
    fn default() -> RooflineParams {
        RooflineParams {
            compute_efficiency: 0.70,
            memory_efficiency: 0.75,
            fixed_s: 1.0e-3,
            knee_exponent: 3.0,
            linear_knee_exponent: 3.0,
            allreduce_latency_s: 8.0e-6,
            allreduce_bandwidth_gb_per_s: 0.0,
            linear_kernel_s: 0.0,
            elementwise_efficiency: [0.75; 5],
            elementwise_kernel_s: [0.0; 5],
            allreduce_floor_s: 0.0,
            allreduce_small_latency_s: 0.0,
            allreduce_small_bandwidth_gb_per_s: 0.0,
        }
    }
}

impl RooflineParams {
    /// The parameters fitted to measured kernels for `gpu` at tensor-parallel degree `tp`
    /// (crates/perf/data/calibrated.toml), or [`RooflineParams::default`] for a GPU that was
    /// not profiled.
    pub fn for_gpu(gpu: &str, tp: u32) -> RooflineParams {
        crate::calibrated::fitted(gpu, tp).unwrap_or_default()
    }

    /// Whether the all-reduce has a floor or a small-message protocol (otherwise it is
    /// one line, alpha + w / B).
    pub fn allreduce_piecewise(&self) -> bool {
        self.allreduce_floor_s > 0.0 || self.allreduce_small_bandwidth_gb_per_s > 0.0
    }
}

/// The four linear layers of one transformer layer as (input, output) dimensions of the
/// weight matrix each GPU holds at tensor-parallel degree `tp`: QKV projection, output
/// projection, MLP up (gate and up fused) and MLP down. KV heads are replicated when
/// `tp` exceeds their count.
pub fn linear_op_dims(model: &ModelShape, tp: u32) -> [(f64, f64); 4] {
    let tp = tp.max(1);
    let (d, h) = (model.hidden as f64, model.head_dim as f64);
    let hq = model.query_heads as f64 / tp as f64;
    let hkv = model.kv_heads.div_ceil(tp) as f64;
    let ff = model.ffn_hidden as f64 / tp as f64;
    if model.mla.is_some() {
        // MLA's input projections (q_a, q_b, kv_a, kv_b) timed as one d x n GEMM holding
        // their weights per GPU (ModelShape::attention_params_per_gpu less the output's).
        let inputs = model.attention_params_per_gpu(tp) - hq * h * d;
        return [(d, inputs / d), (hq * h, d), (d, 2.0 * ff), (ff, d)];
    }
    [(d, (hq + 2.0 * hkv) * h), (hq * h, d), (d, 2.0 * ff), (ff, d)]
}

/// Bytes each element-wise operator of one layer moves per token on one GPU, in the order
/// input norm, post-attention norm, rope, activation, residual add: a norm reads and writes
/// d values; rope reads and writes the query and key heads; the gated activation reads
/// two d_ff/tp values and writes one; the add reads two d values and writes one.
pub fn elementwise_bytes_per_token(model: &ModelShape, tp: u32) -> [f64; 5] {
    let tp = tp.max(1);
    let b = model.bytes_per_param as f64;
    let d = model.hidden as f64;
    let heads =
        (model.query_heads as f64 / tp as f64 + model.kv_heads.div_ceil(tp) as f64) * model.head_dim as f64;
    let ff = model.ffn_hidden as f64 / tp as f64;
    [2.0 * d * b, 2.0 * d * b, 2.0 * heads * b, 3.0 * ff * b, 3.0 * d * b]
}

/// Seconds one linear layer with a `k` x `n` weight takes for `tokens` tokens on one GPU:
/// smax(2 T k n / (eta_c F), b (k n + T (k + n)) / (eta_m BW)) + the kernel's fixed cost,
/// with the linear layers' own knee.
pub fn linear_op_s(
    k: f64,
    n: f64,
    tokens: f64,
    bytes_per_param: f64,
    gpu: &GpuSpec,
    params: &RooflineParams,
) -> f64 {
    let compute = 2.0 * tokens * k * n / (gpu.dense_tflops * 1e12 * params.compute_efficiency);
    let memory = bytes_per_param * (k * n + tokens * (k + n))
        / (gpu.memory_tb_per_s * 1e12 * params.memory_efficiency);
    smooth_max(compute, memory, params.linear_knee_exponent) + params.linear_kernel_s
}

/// Seconds element-wise operator `op` (an index into [`elementwise_bytes_per_token`])
/// moving `bytes` takes on one GPU: bytes / (eta_op BW) + the kernel's fixed cost.
pub fn elementwise_op_s(op: usize, bytes: f64, gpu: &GpuSpec, params: &RooflineParams) -> f64 {
    bytes / (gpu.memory_tb_per_s * 1e12 * params.elementwise_efficiency[op]) + params.elementwise_kernel_s[op]
}

/// Seconds of one ring all-reduce of `bytes` over `tp` GPUs. Each GPU moves
/// w = 2 (tp-1)/tp bytes; NCCL picks the faster of its protocols, and no call is faster
/// than the floor:
/// max(floor, min(alpha + w / B, alpha_small + w / B_small)), which is
/// alpha + w / B with the defaults (no floor, no small-message protocol).
pub fn allreduce_s(bytes: f64, tp: u32, gpu: &GpuSpec, params: &RooflineParams) -> f64 {
    if tp <= 1 {
        return 0.0;
    }
    let tp = tp as f64;
    let large =
        params.allreduce_latency_s + 2.0 * (tp - 1.0) / tp * bytes / (allreduce_bandwidth(gpu, params) * 1e9);
    if !params.allreduce_piecewise() {
        return large;
    }
    let wire = 2.0 * (tp - 1.0) / tp * bytes;
    let small = if params.allreduce_small_bandwidth_gb_per_s > 0.0 {
        params.allreduce_small_latency_s + wire / (params.allreduce_small_bandwidth_gb_per_s * 1e9)
    } else {
        f64::INFINITY
    };
    large.min(small).max(params.allreduce_floor_s)
}

fn allreduce_bandwidth(gpu: &GpuSpec, params: &RooflineParams) -> f64 {
    if params.allreduce_bandwidth_gb_per_s > 0.0 {
        params.allreduce_bandwidth_gb_per_s
    } else {
        gpu.interconnect_gb_per_s
    }
}

/// Smooth maximum (x^p + y^p)^(1/p); equals max when either side is zero.
pub fn smooth_max(x: f64, y: f64, knee: f64) -> f64 {
    let (high, low) = if x >= y { (x, y) } else { (y, x) };
    if low <= 0.0 {
        return high;
    }
    // Factor out the larger side so huge inputs cannot overflow.
    let ratio = low / high;
    if knee == 3.0 {
        // The default knee: cube and cube root are several times cheaper than powf,
        // and this runs for every request of every simulated iteration.
        return high * (1.0 + ratio * ratio * ratio).cbrt();
    }
    high * (1.0 + ratio.powf(knee)).powf(1.0 / knee)
}

/// One request's part of a batch: `new_tokens` computed this step over
/// `context_tokens` already in its KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    pub new_tokens: u32,
    pub context_tokens: u32,
    /// Whether the step ends with a sampled token (a decode, or a prefill's last chunk):
    /// only those rows go through the LM head.
    pub emits_token: bool,
}

/// The shared (not per-request) terms of one iteration, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SharedCost {
    pub fixed_s: f64,
    /// Weight-read floor of the linear layers: L b P / (eta_m BW).
    pub linear_floor_s: f64,
    /// Linear-layer time above the floor (the compute side showing through the smooth max).
    pub linear_excess_s: f64,
    pub lm_head_floor_s: f64,
    pub lm_head_excess_s: f64,
    /// All-reduce latency terms (a fixed count per iteration).
    pub allreduce_fixed_s: f64,
    /// All-reduce bandwidth terms (proportional to tokens).
    pub allreduce_bytes_s: f64,
}

impl SharedCost {
    pub fn total_s(&self) -> f64 {
        self.fixed_s
            + self.linear_floor_s
            + self.linear_excess_s
            + self.lm_head_floor_s
            + self.lm_head_excess_s
            + self.allreduce_fixed_s
            + self.allreduce_bytes_s
    }
}

/// A model served on `tp` GPUs of one type, with constants precomputed so an
/// iteration costs a few multiplies per request.
#[derive(Clone, Debug)]
pub struct Roofline {
    pub model: ModelShape,
    pub gpu: GpuSpec,
    pub tensor_parallel: u32,
    pub params: RooflineParams,
    layers: f64,
    /// Per linear operator, over all layers: (compute seconds per token, weight-read
    /// floor seconds, activation-read seconds per token).
    linear_ops: [(f64, f64, f64); 4],
    /// Element-wise operators over all layers, seconds per token.
    elementwise_s_per_token: f64,
    /// Fixed per-iteration cost: c0 plus every kernel's fixed cost over all layers.
    fixed_s: f64,
    lm_head_compute_s_per_row: f64,
    lm_head_floor_s: f64,
    /// Seconds per attention FLOP and per KV byte, over all layers folded in.
    attention_s_per_flop_unit: f64,
    kv_s_per_token: f64,
    allreduce_fixed_s: f64,
    allreduce_s_per_token: f64,
    knee: f64,
    /// Measured per-layer and all-reduce times that replace the linear, element-wise and
    /// all-reduce terms (`--latency-model profile:DIR`).
    profile: Option<std::sync::Arc<crate::profile::ProfileCurves>>,
    /// The MoE layers' experts, router and all-to-all (crate::moe); `None` for a dense model.
    moe: Option<crate::moe::MoeCost>,
}

impl Roofline {
    pub fn new(model: ModelShape, gpu: GpuSpec, tensor_parallel: u32, params: RooflineParams) -> Roofline {
        let tp = tensor_parallel.max(1) as f64;
        let flops = gpu.dense_tflops * 1e12 * params.compute_efficiency * tp;
        let bytes_per_s = gpu.memory_tb_per_s * 1e12 * params.memory_efficiency * tp;
        let gpu_flops = gpu.dense_tflops * 1e12 * params.compute_efficiency;
        let gpu_bytes_per_s = gpu.memory_tb_per_s * 1e12 * params.memory_efficiency;
        let layers = model.layers as f64;
        let b = model.bytes_per_param as f64;
        let (d, hq, hkv, h) =
            (model.hidden as f64, model.query_heads as f64, model.kv_heads as f64, model.head_dim as f64);
        // MoE and FP8 (crate::moe, ModelShape::precision): equal to layers, b and the
        // bf16 peak for a dense bf16 model, whose arithmetic is unchanged.
        let mlp_layers = model.moe.dense_ffn_layers(model.layers) as f64;
        let op_layers = [layers, layers, mlp_layers, mlp_layers];
        let weight_b = model.weight_bytes_per_param();
        let linear_gpu_flops = if model.precision.fp8_weights {
            gpu.fp8_linear_tflops() * 1e12 * params.compute_efficiency
        } else {
            gpu_flops
        };
        let mut op = 0;
        let linear_ops = linear_op_dims(&model, tensor_parallel).map(|(k, n)| {
            let layers = op_layers[op];
            op += 1;
            (
                layers * 2.0 * k * n / linear_gpu_flops,
                layers * weight_b * k * n / gpu_bytes_per_s,
                layers * b * (k + n) / gpu_bytes_per_s,
            )
        });
        let elementwise_layers = [layers, layers, layers, mlp_layers, layers];
        let elementwise_s_per_token: f64 = elementwise_bytes_per_token(&model, tensor_parallel)
            .iter()
            .zip(params.elementwise_efficiency)
            .zip(elementwise_layers)
            .map(|((bytes, efficiency), layers)| layers * bytes / (gpu.memory_tb_per_s * 1e12 * efficiency))
            .sum();
        let kernels_s = 4.0 * params.linear_kernel_s + params.elementwise_kernel_s.iter().sum::<f64>();
        let moe = crate::moe::MoeCost::new(&model, &gpu, tensor_parallel, &params);
        let fixed_s = params.fixed_s + layers * kernels_s + moe.as_ref().map_or(0.0, |m| m.kernel_s);
        let kv_b = model.kv_bytes_per_value();
        let (attention_s_per_flop_unit, kv_s_per_token) = match model.mla {
            None => (layers * 4.0 * hq * h / flops, layers * 2.0 * hkv * h * kv_b / bytes_per_s),
            // MLA: per query-key pair and head, 2 (h + r) FLOPs for the score and 2 h for the
            // value (the prefill's expanded form); every GPU reads the whole latent, c + r values.
            Some(mla) => (
                layers * 2.0 * (2.0 * h + mla.rope_dim as f64) * hq / flops,
                layers * f64::from(mla.kv_lora_rank + mla.rope_dim) * kv_b / gpu_bytes_per_s,
            ),
        };
        let ring_factor = 2.0 * (tp - 1.0) / tp;
        let link_bytes_per_s = allreduce_bandwidth(&gpu, &params) * 1e9;
        let (allreduce_fixed_s, allreduce_s_per_token) = if tensor_parallel > 1 {
            let fixed = if params.allreduce_piecewise() {
                allreduce_s(0.0, tensor_parallel, &gpu, &params)
            } else {
                params.allreduce_latency_s
            };
            (2.0 * layers * fixed, 2.0 * layers * ring_factor * d * b / link_bytes_per_s)
        } else {
            (0.0, 0.0)
        };
        Roofline {
            layers,
            linear_ops,
            elementwise_s_per_token,
            fixed_s,
            lm_head_compute_s_per_row: 2.0 * model.lm_head_params() / flops,
            lm_head_floor_s: b * model.lm_head_params() / bytes_per_s,
            attention_s_per_flop_unit,
            kv_s_per_token,
            allreduce_fixed_s,
            allreduce_s_per_token,
            knee: params.knee_exponent,
            profile: None,
            moe,
            model,
            gpu,
            tensor_parallel,
            params,
        }
    }

    /// This roofline with its linear, element-wise and all-reduce terms replaced by
    /// interpolated measured times (attention, KV reads, the LM head and c0 stay analytical).
    pub fn with_profile(mut self, curves: crate::profile::ProfileCurves) -> Roofline {
        self.profile = Some(std::sync::Arc::new(curves));
        self.fixed_s = self.params.fixed_s;
        self
    }

    /// Smooth maximum (x^p + y^p)^(1/p) with this model's knee; equals max when either side is zero.
    pub fn smooth_max(&self, x: f64, y: f64) -> f64 {
        smooth_max(x, y, self.knee)
    }

    /// This request's own attention and KV-read time, seconds (all layers).
    pub fn entry_s(&self, entry: BatchEntry) -> f64 {
        let (t, k) = (entry.new_tokens as f64, entry.context_tokens as f64);
        if t == 0.0 {
            return 0.0;
        }
        let compute = self.attention_s_per_flop_unit * (t * k + t * t / 2.0);
        let memory = self.kv_s_per_token * (k + t);
        self.smooth_max(compute, memory)
    }

    /// The shared terms for `total_tokens` new tokens of which `rows` emit a token.
    /// Element-wise operators (memory-bound, proportional to tokens) are counted in
    /// `linear_excess_s`; kernels' fixed costs in `fixed_s`.
    pub fn shared_cost(&self, total_tokens: u64, rows: u64) -> SharedCost {
        if total_tokens == 0 {
            return SharedCost::default();
        }
        let tokens = total_tokens as f64;
        let (lm_head_floor_s, lm_head_excess_s) = if rows == 0 {
            (0.0, 0.0)
        } else {
            let lm_head = self.smooth_max(self.lm_head_compute_s_per_row * rows as f64, self.lm_head_floor_s);
            (self.lm_head_floor_s, lm_head - self.lm_head_floor_s)
        };
        if let Some(profile) = &self.profile {
            let (floor, total) = (profile.layer_s(1.0), profile.layer_s(tokens));
            let bytes = tokens * self.model.hidden as f64 * self.model.bytes_per_param as f64;
            let (ar_floor, ar_total) = (profile.allreduce_s(1.0), profile.allreduce_s(bytes));
            return SharedCost {
                fixed_s: self.fixed_s,
                linear_floor_s: self.layers * floor,
                linear_excess_s: self.layers * (total - floor).max(0.0),
                lm_head_floor_s,
                lm_head_excess_s,
                allreduce_fixed_s: 2.0 * self.layers * ar_floor,
                allreduce_bytes_s: 2.0 * self.layers * (ar_total - ar_floor).max(0.0),
            };
        }
        let (mut linear, mut floor) = (0.0, 0.0);
        for (compute, weights, activations) in self.linear_ops {
            linear += smooth_max(
                compute * tokens,
                weights + activations * tokens,
                self.params.linear_knee_exponent,
            );
            floor += weights;
        }
        let cost = SharedCost {
            fixed_s: self.fixed_s,
            linear_floor_s: floor,
            linear_excess_s: linear - floor + self.elementwise_s_per_token * tokens,
            lm_head_floor_s,
            lm_head_excess_s,
            allreduce_fixed_s: self.allreduce_fixed_s,
            allreduce_bytes_s: self.allreduce_bytes_s(tokens),
        };
        match &self.moe {
            None => cost,
            Some(moe) => {
                // The experts' weight floor splits like the other weight reads, the rest by
                // tokens; the all-to-all with the all-reduce it travels beside.
                let time = moe.time(tokens);
                SharedCost {
                    linear_floor_s: cost.linear_floor_s + time.floor_s,
                    linear_excess_s: cost.linear_excess_s + time.excess_s,
                    allreduce_fixed_s: cost.allreduce_fixed_s + time.all_to_all_fixed_s,
                    allreduce_bytes_s: cost.allreduce_bytes_s + time.all_to_all_bytes_s,
                    ..cost
                }
            }
        }
    }

    /// Iteration time of a batch, seconds (0 for an empty batch).
    pub fn iteration_s(&self, entries: &[BatchEntry]) -> f64 {
        let mut tokens = 0_u64;
        let mut rows = 0_u64;
        let mut own_s = 0.0;
        for entry in entries {
            tokens += u64::from(entry.new_tokens);
            rows += u64::from(entry.emits_token);
            own_s += self.entry_s(*entry);
        }
        self.shared_cost(tokens, rows).total_s() + own_s
    }

    /// [`Self::iteration_s`], also writing each entry's own term to `own_s` (overwritten)
    /// so that attribution need not recompute them.
    pub fn iteration_s_with_own(&self, entries: &[BatchEntry], own_s: &mut Vec<f64>) -> f64 {
        own_s.clear();
        let (mut tokens, mut rows, mut own_total_s) = (0_u64, 0_u64, 0.0);
        for entry in entries {
            tokens += u64::from(entry.new_tokens);
            rows += u64::from(entry.emits_token);
            let own = self.entry_s(*entry);
            own_total_s += own;
            own_s.push(own);
        }
        self.shared_cost(tokens, rows).total_s() + own_total_s
    }

    /// All-reduce time above the per-call fixed part for `tokens` new tokens (all layers).
    /// With a floor or a small-message protocol ([`allreduce_s`]) the fixed part is the
    /// time of an empty call and this is the rest.
    fn allreduce_bytes_s(&self, tokens: f64) -> f64 {
        if self.tensor_parallel <= 1 || !self.params.allreduce_piecewise() {
            return self.allreduce_s_per_token * tokens;
        }
        let bytes = tokens * self.model.hidden as f64 * self.model.bytes_per_param as f64;
        let per_call = allreduce_s(bytes, self.tensor_parallel, &self.gpu, &self.params);
        2.0 * self.layers * (per_call - allreduce_s(0.0, self.tensor_parallel, &self.gpu, &self.params))
    }

    /// Number of layers (kept as f64 for the formulas).
    pub fn layers(&self) -> f64 {
        self.layers
    }

    /// Bytes of weights each GPU holds (K/V projections replicated past H_kv).
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        self.model.weight_bytes_per_gpu(self.tensor_parallel)
    }
}

/// Model FLOPs and bytes moved by one iteration, for MFU and MBU (model FLOP and memory
/// bandwidth utilization), from the same terms [`Roofline`] times. Summed over the
/// replica's GPUs. The fields' formulas below are a dense bf16 model's; mixture-of-experts,
/// MLA and FP8 models count what they touch instead (`general_iteration_work`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterationWork {
    /// Linear layers 2 L P T (P = [`ModelShape::linear_params_per_layer`], T new tokens),
    /// plus attention sum_i 4 L H_q h (t_i k_i + t_i^2 / 2), plus the LM head 2 d V R (R
    /// sampled rows). Model FLOPs: K/V heads that tensor parallelism replicates count once.
    pub flops: f64,
    /// Weights read once per iteration (b L sum k n over each GPU's linear shards, times
    /// tp, + b d V for the LM head), the linear layers' activations read and written
    /// (tp L b (k + n) T), the element-wise operators' bytes (tp L T x their bytes per
    /// token) and KV read and written (sum_i 2 L H_kv h b (k_i + t_i)): what the roofline's
    /// memory terms move.
    pub bytes: f64,
}

/// [`IterationWork`] of `entries` for `model` on `tp` tensor-parallel GPUs.
pub fn iteration_work(model: &ModelShape, tp: u32, entries: &[BatchEntry]) -> IterationWork {
    let tp = tp.max(1);
    let layers = model.layers as f64;
    let b = model.bytes_per_param as f64;
    let (hq, hkv, h) = (model.query_heads as f64, model.kv_heads as f64, model.head_dim as f64);
    let (mut tokens, mut rows, mut attention_units, mut kv_tokens) = (0.0, 0.0, 0.0, 0.0);
    for entry in entries {
        let (t, k) = (entry.new_tokens as f64, entry.context_tokens as f64);
        if t == 0.0 {
            continue;
        }
        tokens += t;
        rows += f64::from(u8::from(entry.emits_token));
        attention_units += t * k + t * t / 2.0;
        kv_tokens += k + t;
    }
    if tokens == 0.0 {
        return IterationWork::default();
    }
    if !model.is_plain() {
        return general_iteration_work(model, tp, [tokens, rows, attention_units, kv_tokens]);
    }
    let flops = 2.0 * layers * model.linear_params_per_layer() * tokens
        + 4.0 * layers * hq * h * attention_units
        + 2.0 * model.lm_head_params() * rows;
    let gpus = tp as f64;
    let dims = linear_op_dims(model, tp);
    let weights =
        gpus * layers * b * dims.iter().map(|(k, n)| k * n).sum::<f64>() + b * model.lm_head_params();
    let activations = gpus * layers * b * dims.iter().map(|(k, n)| k + n).sum::<f64>() * tokens;
    let elementwise = gpus * layers * elementwise_bytes_per_token(model, tp).iter().sum::<f64>() * tokens;
    let kv = 2.0 * layers * hkv * h * b * kv_tokens;
    IterationWork { flops, bytes: weights + activations + elementwise + kv }
}

/// [`iteration_work`] for a mixture-of-experts, MLA or FP8 model, from the batch's sums
/// (new tokens T, sampled rows R, attention units sum t k + t^2/2, KV tokens sum k + t):
/// - FLOPs: 2 T x the active layer parameters (attention, dense FFNs, the k routed and the
///   shared experts of each MoE layer, the routers: [`ModelShape::active_params`] less the
///   embedding and LM head) + attention (GQA 4 H_q h per unit and layer; MLA 2 (2h + r) H_q,
///   the roofline's expanded form) + 2 d V R;
/// - bytes: each GPU's attention and dense-FFN shards at the weight format, the experts a
///   batch of T tokens touches (X(T) routed, [`crate::moe::expected_distinct_experts`], plus
///   the shared ones) read once at the weight format, the replicated routers and the LM
///   head in `bytes_per_param`; activations T b (2d + 3 w) per expert pass and per dense
///   FFN and attention projection as the dense form; element-wise bytes as the dense form;
///   KV at its own format (MLA: the whole latent on every GPU).
fn general_iteration_work(model: &ModelShape, tp: u32, sums: [f64; 4]) -> IterationWork {
    let [tokens, rows, attention_units, kv_tokens] = sums;
    let gpus = tp as f64;
    let layers = model.layers as f64;
    let (b, bw) = (model.bytes_per_param as f64, model.weight_bytes_per_param());
    let (d, hq, h) = (model.hidden as f64, model.query_heads as f64, model.head_dim as f64);
    let moe = model.moe;
    let (moe_layers, dense_layers) =
        (moe.moe_layers(model.layers) as f64, moe.dense_ffn_layers(model.layers) as f64);
    let lm_head = model.lm_head_params();
    let attention_flops_per_unit = match model.mla {
        None => 4.0 * hq * h,
        Some(mla) => 2.0 * (2.0 * h + mla.rope_dim as f64) * hq,
    };
    let flops = 2.0 * (model.active_params() - 2.0 * lm_head) * tokens
        + layers * attention_flops_per_unit * attention_units
        + 2.0 * lm_head * rows;
    let dims = linear_op_dims(model, tp);
    let attention_weights = gpus * layers * (dims[0].0 * dims[0].1 + dims[1].0 * dims[1].1);
    let ffn_weights = gpus * dense_layers * (dims[2].0 * dims[2].1 + dims[3].0 * dims[3].1);
    let expert_passes = f64::from(moe.experts_per_token + moe.shared_experts);
    let (expert_weights, router_weights) = if moe.is_moe() {
        let touched = crate::moe::expected_distinct_experts(moe.experts, moe.experts_per_token, tokens);
        (
            moe_layers * (touched + f64::from(moe.shared_experts)) * moe.expert_params(d),
            gpus * moe_layers * d * moe.experts as f64,
        )
    } else {
        (0.0, 0.0)
    };
    let weights = bw * (attention_weights + ffn_weights + expert_weights) + b * (router_weights + lm_head);
    let width = moe.expert_ffn as f64;
    let activations = b
        * tokens
        * (gpus * layers * (dims[0].0 + dims[0].1 + dims[1].0 + dims[1].1)
            + gpus * dense_layers * (dims[2].0 + dims[2].1 + dims[3].0 + dims[3].1)
            + moe_layers * expert_passes * (2.0 * d + 3.0 * width));
    let elementwise = gpus * layers * elementwise_bytes_per_token(model, tp).iter().sum::<f64>() * tokens;
    let kv_per_token = if model.mla.is_some() {
        gpus * model.kv_bytes_per_token_per_gpu(tp)
    } else {
        model.kv_bytes_per_token()
    };
    IterationWork { flops, bytes: weights + activations + elementwise + kv_per_token * kv_tokens }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;

    /// Mixtral-8x7B, one new token with no context on one GPU, worked on paper. Per layer:
    /// attention 2 x 4096 x 32 x 128 + 2 x 4096 x 8 x 128 = 41,943,040 parameters; two
    /// routed experts 2 x 3 x 4096 x 14,336 = 352,321,536; router 4096 x 8 = 32,768; so
    /// 394,297,344 active, x 32 layers = 12,617,515,008. FLOPs = 2 x 12,617,515,008 plus
    /// attention 4 x 32 x 128 x 0.5 x 32 = 262,144 plus LM head 2 x 4096 x 32,000 =
    /// 262,144,000, so 25,497,436,160. Weights read (bf16): attention 41,943,040 x 32 x 2 =
    /// 2,684,354,560; the 2 experts one token touches 176,160,768 x 2 x 32 x 2 =
    /// 22,548,578,304; routers 32,768 x 32 x 2 = 2,097,152; LM head 262,144,000: in all
    /// 25,497,174,016 bytes, which activations, norms and KV raise by well under 1%.
    #[test]
    fn mixture_of_experts_work_by_hand() {
        let shape = ModelShape::parse("Mixtral-8x7B").expect("catalog");
        let entry = BatchEntry { new_tokens: 1, context_tokens: 0, emits_token: true };
        let work = iteration_work(&shape, 1, &[entry]);
        assert!(close(work.flops, 25_497_436_160.0, 1e-9), "{}", work.flops);
        let weights = 25_497_174_016.0;
        assert!(work.bytes > weights && work.bytes < weights * 1.01, "{}", work.bytes);
        // FP8 weights halve the linear layers' bytes, not the router's or the LM head's.
        let mut fp8 = shape.clone();
        fp8.precision.fp8_weights = true;
        let fp8_work = iteration_work(&fp8, 1, &[entry]);
        let fp8_weights = (2_684_354_560.0 + 22_548_578_304.0) / 2.0 + 2_097_152.0 + 262_144_000.0;
        assert!(fp8_work.bytes > fp8_weights && fp8_work.bytes < fp8_weights * 1.01, "{}", fp8_work.bytes);
        assert_eq!(fp8_work.flops, work.flops);
    }

    fn llama8b_h100() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
    }

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs()
    }

    /// One 1,024-token prefill of Llama-3.1-8B on one H100 SXM, worked on paper:
    /// F = 0.70 x 989e12 = 692.3e12 FLOP/s, BW = 0.75 x 3.35e12 = 2.5125e12 B/s.
    /// linear, per layer and operator (k x n weight): compute 2 T k n / F, memory
    ///   2 (k n + T (k + n)) / BW, smax p=3:
    ///   QKV 4096x6144: 74.45 us, 28.38 us -> 75.80 us; O 4096x4096: 49.63, 20.03 -> 50.70;
    ///   up 4096x28672: 347.42, 120.19 -> 352.15; down 14336x4096: 173.71, 61.77 -> 176.27;
    ///   x 32 layers = 20.957 ms
    /// element-wise: bytes per token 2x(2 d b) + 2 (32+8) 128 b + 3 d_ff b + 3 d b
    ///   = 163,840 B; x 1024 x 32 / BW = 2.1368 ms
    /// attention: compute 32 x 4 x 32 x 128 x (1024^2/2) / F = 0.3971 ms;
    ///            KV 32 x 2 x 8 x 128 x 2 x 1024 / BW = 0.05342 ms; smax = 0.3972 ms
    /// LM head (one row): compute 2 x 525.3M / F = 1.5 us, floor 2 x 525.3M / BW = 0.4182 ms;
    ///            smax = 0.4182 ms
    /// total = 1 ms + 20.957 + 2.1368 + 0.3972 + 0.4182 = 24.910 ms
    #[test]
    fn one_prefill_by_hand() {
        let model = llama8b_h100();
        let entry = BatchEntry { new_tokens: 1024, context_tokens: 0, emits_token: true };
        let seconds = model.iteration_s(&[entry]);
        assert!(close(seconds, 24.910e-3, 0.001), "{seconds}");
    }

    /// 64 decodes, each with 1,000 tokens of context, same deployment:
    /// linear per layer: QKV 4.65 us compute, 20.55 us memory -> 20.63; O 3.10, 13.77 -> 13.82;
    ///   up 21.71, 95.15 -> 95.53; down 10.86, 47.68 -> 47.87; x 32 = 5.6914 ms
    /// element-wise: 163,840 B x 64 x 32 / BW = 0.13355 ms
    /// per decode: KV 32 x 2 x 8 x 128 x 2 x 1001 / BW = 52.22 us; attention compute
    ///         32 x 4 x 32 x 128 x 1000.5 / F = 0.7577 us; smax ~ KV = 52.22 us; x 64 = 3.3421 ms
    /// LM head (64 rows): compute 64 x 1.5176 us = 97.1 us, floor 418.2 us; smax = 419.8 us
    /// total = 1 + 5.6914 + 0.13355 + 3.3421 + 0.4198 = 10.587 ms
    #[test]
    fn decode_batch_by_hand() {
        let model = llama8b_h100();
        let entries = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64];
        let seconds = model.iteration_s(&entries);
        assert!(close(seconds, 10.587e-3, 0.001), "{seconds}");
    }

    /// The 1,024-token prefill of `one_prefill_by_hand` with FP8 weights (`--weights fp8`):
    /// F = 0.70 x 1,979e12 (H100's FP8 peak) = 1,385.3e12, weights 1 byte, activations 2:
    ///   QKV: compute 2 x 1024 x 4096 x 6144 / F = 37.20 us, memory (4096 x 6144 + 2 x 1024
    ///   x (4096 + 6144)) / BW = 18.36 us -> smax 38.64 us; O 24.80, 13.35 -> 26.03;
    ///   up 173.62, 73.45 -> 177.90; down 86.81, 38.40 -> 89.25; x 32 layers = 10.618 ms
    ///   (bf16: 20.957 ms). Element-wise 2.1368 ms, attention 0.3972 ms and the LM head
    ///   (kept in bf16) 0.4182 ms are unchanged: total 1 + 10.618 + 2.1368 + 0.3972 + 0.4182
    ///   = 14.570 ms. On an A100 (no FP8 tensor cores: weight-only FP8, bf16 compute) the
    ///   same prefill's compute-bound linear layers barely move (within 5%).
    #[test]
    fn fp8_prefill_by_hand() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let mut shape = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        shape.precision.fp8_weights = true;
        let fp8 = Roofline::new(shape.clone(), gpu, 1, RooflineParams::default());
        let entry = BatchEntry { new_tokens: 1024, context_tokens: 0, emits_token: true };
        let seconds = fp8.iteration_s(&[entry]);
        assert!(close(seconds, 14.570e-3, 0.001), "{seconds}");
        let a100 = *find_gpu("A100-80G").expect("catalog");
        let bf16 = Roofline::new(
            ModelShape::parse("Llama-3.1-8B").expect("catalog"),
            a100,
            1,
            RooflineParams::default(),
        );
        let weight_only = Roofline::new(shape, a100, 1, RooflineParams::default());
        let (x, y) = (bf16.iteration_s(&[entry]), weight_only.iteration_s(&[entry]));
        assert!(y < x && y > 0.95 * x, "A100 bf16 {x} fp8 {y}");
    }

    /// FP8 KV halves the KV-read time of a decode: 64 decodes at 1,000 tokens of context
    /// (`decode_batch_by_hand`) read 32 x 2 x 8 x 128 x 1 x 1001 bytes each, 26.11 us in
    /// place of 52.22 us, so the batch is 64 x 26.11 us = 1.671 ms faster (attention
    /// compute, 0.76 us per decode, stays well below the knee).
    #[test]
    fn fp8_kv_halves_kv_reads() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let mut shape = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let bf16 = Roofline::new(shape.clone(), gpu, 1, RooflineParams::default());
        shape.precision.fp8_kv_cache = true;
        let fp8 = Roofline::new(shape, gpu, 1, RooflineParams::default());
        let entries = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64];
        let saved = bf16.iteration_s(&entries) - fp8.iteration_s(&entries);
        assert!(close(saved, 1.671e-3, 0.002), "{saved}");
    }

    /// The new terms by hand: an element-wise operator moving 1 GB at eta 0.5 of 3.35 TB/s
    /// with a 2 us kernel cost takes 1e9 / 1.675e12 + 2e-6 = 599.0 us; an 8-GPU all-reduce
    /// of 1 MB with 30 us latency over 340 GB/s takes 30 us + 2 x 7/8 x 1e6 / 340e9 = 35.147 us;
    /// a linear kernel's fixed cost and the element-wise ones add L x (4 k_lin + sum k_ew)
    /// to every iteration.
    #[test]
    fn elementwise_allreduce_and_kernel_costs_by_hand() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let mut params = RooflineParams::default();
        params.elementwise_efficiency[3] = 0.5;
        params.elementwise_kernel_s[3] = 2e-6;
        assert!(close(elementwise_op_s(3, 1e9, &gpu, &params), 599.0e-6, 1e-4));
        params.allreduce_latency_s = 30e-6;
        params.allreduce_bandwidth_gb_per_s = 340.0;
        assert!(close(allreduce_s(1e6, 8, &gpu, &params), 35.147e-6, 1e-4));
        assert_eq!(allreduce_s(1e6, 1, &gpu, &params), 0.0);
        let shape = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let plain = Roofline::new(shape.clone(), gpu, 1, RooflineParams::default());
        let kernels =
            RooflineParams { linear_kernel_s: 5e-6, elementwise_kernel_s: [1e-6; 5], ..Default::default() };
        let with_kernels = Roofline::new(shape, gpu, 1, kernels);
        let batch = [BatchEntry { new_tokens: 1, context_tokens: 10, emits_token: true }];
        // 32 layers x (4 x 5 + 5 x 1) us = 800 us.
        let extra = with_kernels.iteration_s(&batch) - plain.iteration_s(&batch);
        assert!(close(extra, 800e-6, 1e-6), "{extra}");
    }

    /// The all-reduce with a floor and a small-message protocol, by hand, Llama-3.1-8B at
    /// TP 2 (32 layers, d = 4096, b = 2; w = 2 x 1/2 x S = S): floor 30 us, large line
    /// 20 us + w / 200 GB/s, small line 5 us + w / 20 GB/s.
    /// - an empty call: min(20, 5) = 5 us, floor -> 30 us; fixed part 2 x 32 x 30 us = 1.92 ms;
    /// - 64 tokens, S = 524,288 B: large 22.62 us, small 31.21 us -> 22.62, floor -> 30 us:
    ///   nothing above the fixed part;
    /// - 1,024 tokens, S = 8,388,608 B: large 20 + 41.94 = 61.94 us, small 424.4 us ->
    ///   61.94 us; 64 calls = 3.9643 ms, of which 2.0443 ms above the fixed part;
    /// - without floor and small protocol it is the line: 1,024 tokens, 64 x 61.94 us.
    #[test]
    fn piecewise_allreduce_by_hand() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let params = RooflineParams {
            allreduce_latency_s: 20e-6,
            allreduce_bandwidth_gb_per_s: 200.0,
            allreduce_floor_s: 30e-6,
            allreduce_small_latency_s: 5e-6,
            allreduce_small_bandwidth_gb_per_s: 20.0,
            ..RooflineParams::default()
        };
        assert!(close(allreduce_s(0.0, 2, &gpu, &params), 30e-6, 1e-9));
        assert!(close(allreduce_s(524_288.0, 2, &gpu, &params), 30e-6, 1e-9));
        assert!(close(allreduce_s(8_388_608.0, 2, &gpu, &params), 61.943e-6, 1e-4));
        let shape = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let model = Roofline::new(shape.clone(), gpu, 2, params);
        let small = model.shared_cost(64, 64);
        assert!(close(small.allreduce_fixed_s, 1.92e-3, 1e-9), "{small:?}");
        assert!(small.allreduce_bytes_s.abs() < 1e-12, "{small:?}");
        let large = model.shared_cost(1024, 1);
        assert!(close(large.allreduce_fixed_s, 1.92e-3, 1e-9), "{large:?}");
        assert!(close(large.allreduce_bytes_s, 2.0443e-3, 1e-4), "{large:?}");
        let line =
            RooflineParams { allreduce_floor_s: 0.0, allreduce_small_bandwidth_gb_per_s: 0.0, ..params };
        let plain = Roofline::new(shape, gpu, 2, line).shared_cost(1024, 1);
        assert!(
            close(plain.allreduce_fixed_s + plain.allreduce_bytes_s, 64.0 * 61.943e-6, 1e-4),
            "{plain:?}"
        );
    }

    /// KV heads are replicated, not split, past their count: Llama-3.1-8B (8 KV heads) at
    /// TP 16 keeps one KV head per GPU, so the QKV weight is 4096 x (2 + 2 x 1) x 128.
    #[test]
    fn linear_dims_replicate_kv_heads() {
        let shape = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        assert_eq!(linear_op_dims(&shape, 16)[0], (4096.0, 512.0));
        assert_eq!(linear_op_dims(&shape, 2)[0], (4096.0, (16.0 + 8.0) * 128.0));
    }

    /// MFU of the 1,024-token prefill above, on paper:
    /// P = 4096 x 4096 + 2 x 4096 x 1024 + 4096 x 4096 + 3 x 4096 x 14336 = 218,103,808 per layer;
    /// linear 2 x 32 x P x 1024 = 14,293,651,161,088 FLOPs;
    /// attention 4 x 32 x 32 x 128 x 1024^2 / 2 = 274,877,906,944;
    /// LM head 2 x 4096 x 128,256 = 1,050,673,152; total 14,569,579,741,184 FLOPs
    /// over 24.910 ms at 989 TFLOP/s peak: MFU = 1.45696e13 / 2.46360e13 = 0.5914.
    #[test]
    fn prefill_mfu_by_hand() {
        let model = llama8b_h100();
        let entry = BatchEntry { new_tokens: 1024, context_tokens: 0, emits_token: true };
        let work = iteration_work(&model.model, 1, &[entry]);
        assert_eq!(work.flops, 14_569_579_741_184.0);
        let mfu = work.flops / (989e12 * model.iteration_s(&[entry]));
        assert!(close(mfu, 0.5914, 1e-3), "{mfu}");
    }

    /// MBU of the 64-decode batch above, on paper (bytes): weights 2 x 32 x 218,103,808
    /// = 13,958,643,712 + LM head 2 x 4096 x 128,256 = 1,050,673,152; linear activations
    /// 2 x 32 x 64 x (10,240 + 8,192 + 32,768 + 18,432) = 285,212,672; element-wise
    /// 163,840 x 32 x 64 = 335,544,320; KV 2 x 32 x 8 x 128 x 2 x 1,001 x 64 = 8,396,996,608;
    /// total 24,027,070,464 over 10.587 ms at 3.35 TB/s: MBU = 2.40271e10 / 3.54665e10 = 0.6775.
    #[test]
    fn decode_mbu_by_hand() {
        let model = llama8b_h100();
        let entries = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64];
        let work = iteration_work(&model.model, 1, &entries);
        assert_eq!(work.bytes, 24_027_070_464.0);
        let mbu = work.bytes / (3.35e12 * model.iteration_s(&entries));
        assert!(close(mbu, 0.6775, 1e-3), "{mbu}");
    }

    /// The roofline's time is at least each term's compute and memory time, so the FLOPs
    /// and bytes it is charged for never exceed the efficiency-scaled peaks: MFU <= eta_c
    /// and MBU <= max(eta_m, element-wise etas), for any batch and TP degree.
    #[test]
    fn utilization_never_exceeds_the_efficiencies() {
        let gpu = *find_gpu("A100-80G").expect("catalog");
        for name in ["Llama-3.1-8B", "Llama-3.1-70B"] {
            let shape = ModelShape::parse(name).expect("catalog");
            for tp in [1, 2, 8, 16] {
                let params = RooflineParams::default();
                let model = Roofline::new(shape.clone(), gpu, tp, params);
                for (t, k, n) in [(1, 10, 1), (1, 4000, 256), (8192, 0, 1), (512, 3000, 3), (1, 0, 1)] {
                    let entries = vec![BatchEntry { new_tokens: t, context_tokens: k, emits_token: true }; n];
                    let work = iteration_work(&shape, tp, &entries);
                    let seconds = model.iteration_s(&entries);
                    let gpus = f64::from(tp);
                    let mfu = work.flops / (gpu.dense_tflops * 1e12 * gpus * seconds);
                    let mbu = work.bytes / (gpu.memory_tb_per_s * 1e12 * gpus * seconds);
                    assert!(
                        mfu > 0.0 && mfu <= params.compute_efficiency,
                        "{name} tp {tp} ({t},{k},{n}): MFU {mfu}"
                    );
                    assert!(
                        mbu > 0.0 && mbu <= params.memory_efficiency,
                        "{name} tp {tp} ({t},{k},{n}): MBU {mbu}"
                    );
                }
            }
        }
        assert_eq!(
            iteration_work(&ModelShape::parse("Llama-3.1-8B").expect("catalog"), 1, &[]),
            IterationWork::default()
        );
    }

    #[test]
    fn cube_root_path_matches_powf() {
        let model = llama8b_h100();
        let mut other_knee = model.clone();
        other_knee.knee = 3.0 + 1e-12;
        for (x, y) in [(1.0, 0.5), (0.2, 7.0), (3.0, 3.0), (1e-9, 2e-9)] {
            assert!(close(model.smooth_max(x, y), other_knee.smooth_max(x, y), 1e-9));
        }
    }

    #[test]
    fn smooth_max_bounds() {
        let model = llama8b_h100();
        assert_eq!(model.smooth_max(3.0, 0.0), 3.0);
        let equal = model.smooth_max(1.0, 1.0);
        assert!(close(equal, 2f64.powf(1.0 / 3.0), 1e-12));
        assert!(model.smooth_max(1e300, 1e300).is_finite());
    }

    #[test]
    fn tensor_parallel_adds_allreduce_and_divides_work() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let shape = ModelShape::parse("Llama-3.1-70B").expect("catalog");
        let tp1 = Roofline::new(shape.clone(), gpu, 1, RooflineParams::default());
        let tp4 = Roofline::new(shape, gpu, 4, RooflineParams::default());
        let batch = [BatchEntry { new_tokens: 1, context_tokens: 500, emits_token: true }; 8];
        let (one, four) = (tp1.iteration_s(&batch), tp4.iteration_s(&batch));
        assert!(four < one / 3.0 && four > one / 4.0, "{one} {four}");
    }
}
