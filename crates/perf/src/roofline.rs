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
    /// Exponent of the smooth max; larger is a sharper knee.
    pub knee_exponent: f64,
    /// Latency of one all-reduce call, seconds.
    pub allreduce_latency_s: f64,
}

impl Default for RooflineParams {
    fn default() -> RooflineParams {
        RooflineParams {
            compute_efficiency: 0.70,
            memory_efficiency: 0.75,
            fixed_s: 1.0e-3,
            knee_exponent: 3.0,
            allreduce_latency_s: 8.0e-6,
        }
    }
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
    /// Seconds per new token of linear compute over all layers.
    linear_compute_s_per_token: f64,
    linear_floor_s: f64,
    lm_head_compute_s_per_row: f64,
    lm_head_floor_s: f64,
    /// Seconds per attention FLOP and per KV byte, over all layers folded in.
    attention_s_per_flop_unit: f64,
    kv_s_per_token: f64,
    allreduce_fixed_s: f64,
    allreduce_s_per_token: f64,
    knee: f64,
}

impl Roofline {
    pub fn new(model: ModelShape, gpu: GpuSpec, tensor_parallel: u32, params: RooflineParams) -> Roofline {
        let tp = tensor_parallel.max(1) as f64;
        let flops = gpu.dense_tflops * 1e12 * params.compute_efficiency * tp;
        let bytes_per_s = gpu.memory_tb_per_s * 1e12 * params.memory_efficiency * tp;
        let layers = model.layers as f64;
        let b = model.bytes_per_param as f64;
        let p = model.linear_params_per_layer();
        let (d, hq, hkv, h) =
            (model.hidden as f64, model.query_heads as f64, model.kv_heads as f64, model.head_dim as f64);
        let ring_factor = 2.0 * (tp - 1.0) / tp;
        let link_bytes_per_s = gpu.interconnect_gb_per_s * 1e9;
        let (allreduce_fixed_s, allreduce_s_per_token) = if tensor_parallel > 1 {
            (2.0 * layers * params.allreduce_latency_s, 2.0 * layers * ring_factor * d * b / link_bytes_per_s)
        } else {
            (0.0, 0.0)
        };
        Roofline {
            layers,
            linear_compute_s_per_token: layers * 2.0 * p / flops,
            linear_floor_s: layers * b * p / bytes_per_s,
            lm_head_compute_s_per_row: 2.0 * model.lm_head_params() / flops,
            lm_head_floor_s: b * model.lm_head_params() / bytes_per_s,
            attention_s_per_flop_unit: layers * 4.0 * hq * h / flops,
            kv_s_per_token: layers * 2.0 * hkv * h * b / bytes_per_s,
            allreduce_fixed_s,
            allreduce_s_per_token,
            knee: params.knee_exponent,
            model,
            gpu,
            tensor_parallel,
            params,
        }
    }

    /// Smooth maximum (x^p + y^p)^(1/p); equals max when either side is zero.
    pub fn smooth_max(&self, x: f64, y: f64) -> f64 {
        let (high, low) = if x >= y { (x, y) } else { (y, x) };
        if low <= 0.0 {
            return high;
        }
        // Factor out the larger side so huge inputs cannot overflow.
        let ratio = low / high;
        if self.knee == 3.0 {
            // The default knee: cube and cube root are several times cheaper than powf,
            // and this runs for every request of every simulated iteration.
            return high * (1.0 + ratio * ratio * ratio).cbrt();
        }
        high * (1.0 + ratio.powf(self.knee)).powf(1.0 / self.knee)
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
    pub fn shared_cost(&self, total_tokens: u64, rows: u64) -> SharedCost {
        if total_tokens == 0 {
            return SharedCost::default();
        }
        let linear =
            self.smooth_max(self.linear_compute_s_per_token * total_tokens as f64, self.linear_floor_s);
        let (lm_head_floor_s, lm_head_excess_s) = if rows == 0 {
            (0.0, 0.0)
        } else {
            let lm_head = self.smooth_max(self.lm_head_compute_s_per_row * rows as f64, self.lm_head_floor_s);
            (self.lm_head_floor_s, lm_head - self.lm_head_floor_s)
        };
        SharedCost {
            fixed_s: self.params.fixed_s,
            linear_floor_s: self.linear_floor_s,
            linear_excess_s: linear - self.linear_floor_s,
            lm_head_floor_s,
            lm_head_excess_s,
            allreduce_fixed_s: self.allreduce_fixed_s,
            allreduce_bytes_s: self.allreduce_s_per_token * total_tokens as f64,
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

    /// Number of layers (kept as f64 for the formulas).
    pub fn layers(&self) -> f64 {
        self.layers
    }

    /// Bytes of weights each GPU holds (K/V projections replicated past H_kv).
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        self.model.weight_bytes_per_gpu(self.tensor_parallel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;

    fn llama8b_h100() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
    }

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs()
    }

    /// One 1,024-token prefill of Llama-3.1-8B on one H100 SXM, worked on paper:
    /// P = 218,103,808 per layer, F = 0.70 x 989e12 = 692.3e12 FLOP/s,
    /// BW = 0.75 x 3.35e12 = 2.5125e12 B/s.
    /// linear: compute 32 x 2 x P x 1024 / F = 20.647 ms; floor 32 x 2 x P / BW = 5.556 ms;
    ///         smax p=3: 20.647 x (1 + (5.556/20.647)^3)^(1/3) = 20.647 x 1.00647 = 20.780 ms
    /// attention: compute 32 x 4 x 32 x 128 x (1024^2/2) / F = 0.3971 ms;
    ///            KV 32 x 2 x 8 x 128 x 2 x 1024 / BW = 0.05342 ms; smax = 0.3972 ms
    /// LM head (one row): compute 2 x 525.3M / F = 1.5 us, floor 2 x 525.3M / BW = 0.4182 ms;
    ///            smax = 0.4182 ms
    /// total = 1 ms + 20.780 + 0.3972 + 0.4182 = 22.595 ms
    #[test]
    fn one_prefill_by_hand() {
        let model = llama8b_h100();
        let entry = BatchEntry { new_tokens: 1024, context_tokens: 0, emits_token: true };
        let seconds = model.iteration_s(&[entry]);
        assert!(close(seconds, 22.595e-3, 0.001), "{seconds}");
    }

    /// 64 decodes, each with 1,000 tokens of context, same deployment:
    /// linear: compute 32 x 2 x P x 64 / F = 1.2904 ms, floor 5.556 ms;
    ///         smax = 5.556 x (1 + (1.2904/5.556)^3)^(1/3) = 5.556 x 1.00417 = 5.5792 ms
    /// per decode: KV 32 x 2 x 8 x 128 x 2 x 1001 / BW = 52.22 us; attention compute
    ///         32 x 4 x 32 x 128 x 1000.5 / F = 0.7577 us; smax ~ KV = 52.22 us; x 64 = 3.3421 ms
    /// LM head (64 rows): compute 64 x 1.5176 us = 97.1 us, floor 418.2 us; smax = 419.8 us
    /// total = 1 + 5.5792 + 3.3421 + 0.4198 = 10.341 ms
    #[test]
    fn decode_batch_by_hand() {
        let model = llama8b_h100();
        let entries = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64];
        let seconds = model.iteration_s(&entries);
        assert!(close(seconds, 10.341e-3, 0.001), "{seconds}");
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
