//! Mixture-of-experts layers: the shape, how many experts a batch touches, expert
//! parallelism's all-to-all, and the MoE layers' share of an iteration's time.
//!
//! A MoE layer replaces the dense FFN with E routed experts (each a gated MLP of width
//! d_e), of which a router picks k per token, plus S shared experts every token uses
//! (Mixtral-8x7B: E 8, k 2, S 0; DeepSeek-V3: E 256, k 8, S 1, after 3 dense layers).
//!
//! - **Memory** holds every expert: (E + S) 3 d d_e per MoE layer ([`crate::ModelShape::total_params`]).
//! - **Compute** per token uses the active ones: 2 (k + S) 3 d d_e FLOPs per MoE layer.
//! - **Weight reads** per iteration: only the experts some token of the batch routes to.
//!   Under uniform, independent routing each token picks k distinct experts of E, so an
//!   expert is missed by one token with probability 1 - k/E and by all T tokens with
//!   (1 - k/E)^T: a batch of T tokens touches E (1 - (1 - k/E)^T) experts in
//!   expectation ([`expected_distinct_experts`]: k at T = 1, all E as T grows; Mixtral
//!   touches 3.5 of 8 with 2 tokens and 7.9 with 16). Real routers are skewed, which
//!   touches fewer experts than this (uniform is the upper bound on distinct experts for
//!   a given T and k, and the load is less even than assumed).
//! - **Expert parallelism** (`--ep N`): the routed experts are split over N groups of the
//!   replica's tp GPUs (E / N experts per group, each split tp / N ways); attention stays
//!   tensor-parallel. Per GPU the expected work and weight bytes are the same as without
//!   EP (1/tp of them), and each MoE layer adds an all-to-all dispatch and an all-to-all
//!   combine ([`all_to_all_s`]), modelled as in DeepEP / vLLM's all2all backends: the
//!   batch's T tokens are spread over the N GPUs (T / N each, as after the attention
//!   output's reduce-scatter), and each GPU sends each of its tokens' k expert copies
//!   of d values, of which (N - 1) / N go to another GPU, and receives as many back.
//!   The two tensor-parallel all-reduces per layer stay as they are: an upper bound,
//!   since with EP the MoE output needs only the all-gather half of one.

use crate::gpu::GpuSpec;
use crate::model::ModelShape;
use crate::roofline::{smooth_max, RooflineParams};

/// The mixture-of-experts part of a model shape; the default (0 experts) is dense.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoeShape {
    /// Routed experts per MoE layer (E); 0 = a dense model.
    pub experts: u32,
    /// Routed experts each token uses (k, top-k).
    pub experts_per_token: u32,
    /// FFN width of one expert (d_e; moe_intermediate_size, or Mixtral's intermediate_size).
    pub expert_ffn: u32,
    /// Shared experts every token uses (S), each of width d_e.
    pub shared_experts: u32,
    /// Leading layers with a dense FFN of `ffn_hidden` instead of experts (DeepSeek-V3: 3).
    pub dense_layers: u32,
    /// Expert-parallel degree N (`--ep`): GPU groups of the replica the routed experts are
    /// split over; 0 and 1 both mean none. A deployment choice carried with the shape so
    /// that every roofline built from it (including `plan serve`'s) keeps it.
    pub expert_parallel: u32,
}

impl MoeShape {
    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }

    /// The expert-parallel degree, at least 1.
    pub fn ep(&self) -> u32 {
        self.expert_parallel.max(1)
    }

    /// Layers with experts: all but the leading dense ones (0 for a dense model).
    pub fn moe_layers(&self, layers: u32) -> u32 {
        if self.is_moe() {
            layers.saturating_sub(self.dense_layers)
        } else {
            0
        }
    }

    /// Layers with a dense FFN of `ffn_hidden`: all of a dense model's.
    pub fn dense_ffn_layers(&self, layers: u32) -> u32 {
        layers - self.moe_layers(layers)
    }

    /// Parameters of one expert: 3 d d_e (gate, up and down projections).
    pub fn expert_params(&self, hidden: f64) -> f64 {
        3.0 * hidden * self.expert_ffn as f64
    }

    /// Activation values per token at a layer's FFN peak on one GPU (the `mlp` term of
    /// [`ModelShape::activation_peak_bytes`]): the larger of a dense layer's 3 d_ff / tp
    /// (when there are dense layers) and a MoE layer's fused-MoE buffers, as vLLM's
    /// `fused_experts` allocates them for T tokens: k (2 w + w + d) with w = d_e / (tp / N)
    /// the expert width on one GPU (gate-up output, activation output, per-expert output
    /// before the weighted sum), plus the shared experts' 3 S d_e / tp.
    pub fn activation_values_per_token(&self, hidden: f64, ffn_hidden: f64, tp: u32) -> f64 {
        let tp = tp.max(1) as f64;
        let width = self.expert_ffn as f64 * self.ep() as f64 / tp;
        let moe = self.experts_per_token as f64 * (3.0 * width + hidden)
            + 3.0 * self.shared_experts as f64 * self.expert_ffn as f64 / tp;
        let dense = if self.dense_layers > 0 { 3.0 * ffn_hidden / tp } else { 0.0 };
        moe.max(dense)
    }

    /// Whether the fields make a model: for a dense model every MoE field is 0; for a MoE
    /// model 1 <= k <= E, d_e >= 1 and at least one MoE layer. The error names the field.
    pub fn check(&self, layers: u32) -> Result<(), (&'static str, String)> {
        if !self.is_moe() {
            let stray = [
                ("top_k", self.experts_per_token),
                ("expert_ffn", self.expert_ffn),
                ("shared_experts", self.shared_experts),
                ("dense_layers", self.dense_layers),
            ];
            return match stray.iter().find(|(_, v)| *v > 0) {
                Some((field, _)) => Err((field, "needs experts=E (a mixture-of-experts model)".into())),
                None => Ok(()),
            };
        }
        if self.experts_per_token == 0 || self.experts_per_token > self.experts {
            return Err(("top_k", format!("must be in [1, experts = {}]", self.experts)));
        }
        if self.expert_ffn == 0 {
            return Err(("expert_ffn", "missing or zero".into()));
        }
        if self.dense_layers >= layers {
            return Err(("dense_layers", format!("must be below layers = {layers} (no MoE layer left)")));
        }
        Ok(())
    }

    /// Whether expert parallelism of degree `ep` fits a replica of `tp` GPUs: a MoE model,
    /// `ep` divides E (whole experts per group) and divides `tp` (groups of tp / ep GPUs).
    pub fn check_expert_parallel(&self, ep: u32, tp: u32) -> Result<(), String> {
        if ep <= 1 {
            return Ok(());
        }
        if !self.is_moe() {
            return Err(format!("{ep}: expert parallelism needs a mixture-of-experts model"));
        }
        if !self.experts.is_multiple_of(ep) {
            return Err(format!("{ep}: must divide the model's {} routed experts", self.experts));
        }
        if !tp.is_multiple_of(ep) {
            return Err(format!(
                "{ep}: must divide the tensor-parallel degree {tp} (the experts are split over the replica's \
                 {tp} GPUs; attention stays tensor-parallel)"
            ));
        }
        Ok(())
    }
}

/// Expected distinct experts `tokens` tokens touch when each picks `top_k` distinct
/// experts of `experts` uniformly and independently: E (1 - (1 - k/E)^T).
pub fn expected_distinct_experts(experts: u32, top_k: u32, tokens: f64) -> f64 {
    let e = experts as f64;
    if e == 0.0 || tokens <= 0.0 {
        return 0.0;
    }
    let miss = 1.0 - (top_k as f64 / e).min(1.0);
    e * (1.0 - miss.powf(tokens))
}

/// Seconds of one all-to-all over `gpus` GPUs in which each GPU sends each of its
/// `tokens_per_gpu` tokens to `top_k` experts, `hidden` values of `bytes` each: the
/// (N - 1) / N of those copies bound for other GPUs leave over the GPU's link,
/// latency + tokens k d b (N - 1) / N / link. 0 on one GPU.
pub fn all_to_all_s(
    tokens_per_gpu: f64,
    top_k: f64,
    hidden: f64,
    bytes: f64,
    gpus: u32,
    link_gb_per_s: f64,
    latency_s: f64,
) -> f64 {
    if gpus <= 1 {
        return 0.0;
    }
    let n = gpus as f64;
    latency_s + tokens_per_gpu * top_k * hidden * bytes * (n - 1.0) / n / (link_gb_per_s * 1e9)
}

/// One matrix multiply's coefficients over all MoE layers on one GPU: seconds of compute
/// per token, of weight reads per unit (one expert touched, or the whole matrix), of
/// activation reads per token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Gemm {
    compute_s_per_token: f64,
    weight_s: f64,
    activation_s_per_token: f64,
}

impl Gemm {
    /// smax(compute, weights + activations) with the linear layers' knee.
    fn time_s(&self, tokens: f64, weight_units: f64, knee: f64) -> f64 {
        smooth_max(
            self.compute_s_per_token * tokens,
            self.weight_s * weight_units + self.activation_s_per_token * tokens,
            knee,
        )
    }
}

/// The MoE layers' time on one GPU of a replica, precomputed per deployment (zero terms
/// for what the model lacks). The attention half of every layer and the dense FFN layers
/// stay in [`crate::Roofline`]'s own terms.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeCost {
    experts: u32,
    top_k: u32,
    /// Routed experts' gate-up and down projections; weight_s per expert touched.
    routed: [Gemm; 2],
    /// Shared experts' gate-up and down projections (zero without shared experts).
    shared: [Gemm; 2],
    router: Gemm,
    /// The experts' gated activation (element-wise), seconds per token.
    activation_s_per_token: f64,
    /// Kernels a MoE layer adds to the dense layer's (router, shared experts), all layers.
    pub kernel_s: f64,
    /// All-to-all dispatch and combine, all MoE layers: latency, and seconds per batch token.
    pub all_to_all_fixed_s: f64,
    pub all_to_all_s_per_token: f64,
    knee: f64,
}

/// A MoE iteration's time split as [`crate::SharedCost`] wants it, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MoeTime {
    /// Weight reads any non-empty batch makes: k routed and the shared experts, the router.
    pub floor_s: f64,
    /// Everything above the floor: more experts touched, compute, activations.
    pub excess_s: f64,
    pub all_to_all_fixed_s: f64,
    pub all_to_all_bytes_s: f64,
}

impl MoeCost {
    /// The cost of `model`'s MoE layers on `tp` GPUs of `gpu` (expert parallelism from
    /// `model.moe`), or `None` for a dense model.
    pub fn new(model: &ModelShape, gpu: &GpuSpec, tp: u32, params: &RooflineParams) -> Option<MoeCost> {
        let moe = model.moe;
        let layers = moe.moe_layers(model.layers) as f64;
        if layers == 0.0 {
            return None;
        }
        let tp = tp.max(1) as f64;
        let ep = moe.ep() as f64;
        let (d, e, k, s, w) = (
            model.hidden as f64,
            moe.experts as f64,
            moe.experts_per_token as f64,
            moe.shared_experts as f64,
            moe.expert_ffn as f64,
        );
        let (b, bw) = (model.bytes_per_param as f64, model.weight_bytes_per_param());
        let linear_peak =
            if model.precision.fp8_weights { gpu.fp8_linear_tflops() } else { gpu.dense_tflops };
        let flops = linear_peak * 1e12 * params.compute_efficiency;
        let bf16_flops = gpu.dense_tflops * 1e12 * params.compute_efficiency;
        let bytes_per_s = gpu.memory_tb_per_s * 1e12 * params.memory_efficiency;
        // Each GPU computes 1/tp of every token's k expert passes and reads 1/tp of each
        // expert touched; it reads T k / ep token rows of d and writes slices of d_e / (tp / ep).
        let gemm = |tokens_per_token: f64, kn: f64, weight_bytes: f64, activations: f64| Gemm {
            compute_s_per_token: layers * 2.0 * tokens_per_token * kn / tp / flops,
            weight_s: layers * weight_bytes / bytes_per_s,
            activation_s_per_token: layers * b * activations / bytes_per_s,
        };
        let routed = [
            gemm(k, d * 2.0 * w, bw * d * 2.0 * w / tp, k * (d / ep + 2.0 * w / tp)),
            gemm(k, w * d, bw * w * d / tp, k * (w / tp + d / ep)),
        ];
        let shared = if s > 0.0 {
            [
                gemm(1.0, d * 2.0 * s * w, bw * d * 2.0 * s * w / tp, d + 2.0 * s * w / tp),
                gemm(1.0, s * w * d, bw * s * w * d / tp, s * w / tp + d),
            ]
        } else {
            [Gemm::default(); 2]
        };
        // The router's gate is replicated and stays in 16 bits.
        let router = Gemm {
            compute_s_per_token: layers * 2.0 * d * e / bf16_flops,
            weight_s: layers * b * d * e / bytes_per_s,
            activation_s_per_token: layers * b * (d + e) / bytes_per_s,
        };
        let activation_s_per_token = layers * 3.0 * (k + s) * w / tp * b
            / (gpu.memory_tb_per_s * 1e12 * params.elementwise_efficiency[3]);
        let shared_kernels =
            if s > 0.0 { 2.0 * params.linear_kernel_s + params.elementwise_kernel_s[3] } else { 0.0 };
        let kernel_s = layers * (params.linear_kernel_s + shared_kernels);
        let link = gpu.interconnect_gb_per_s;
        let (all_to_all_fixed_s, all_to_all_s_per_token) = if moe.ep() > 1 {
            // Dispatch and combine per layer; T / ep tokens per GPU.
            let per_token = all_to_all_s(1.0 / ep, k, d, b, moe.ep(), link, 0.0);
            (layers * 2.0 * params.allreduce_latency_s, layers * 2.0 * per_token)
        } else {
            (0.0, 0.0)
        };
        Some(MoeCost {
            experts: moe.experts,
            top_k: moe.experts_per_token,
            routed,
            shared,
            router,
            activation_s_per_token,
            kernel_s,
            all_to_all_fixed_s,
            all_to_all_s_per_token,
            knee: params.linear_knee_exponent,
        })
    }

    /// The MoE layers' time for a batch of `tokens` new tokens (> 0).
    pub fn time(&self, tokens: f64) -> MoeTime {
        let touched = expected_distinct_experts(self.experts, self.top_k, tokens);
        let knee = self.knee;
        let mut total = self.activation_s_per_token * tokens;
        let mut floor = 0.0;
        for gemm in self.routed {
            total += gemm.time_s(tokens, touched, knee);
            floor += gemm.weight_s * self.top_k as f64;
        }
        for gemm in self.shared.into_iter().chain([self.router]) {
            total += gemm.time_s(tokens, 1.0, knee);
            floor += gemm.weight_s;
        }
        MoeTime {
            floor_s: floor,
            excess_s: (total - floor).max(0.0),
            all_to_all_fixed_s: self.all_to_all_fixed_s,
            all_to_all_bytes_s: self.all_to_all_s_per_token * tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;
    use crate::roofline::{BatchEntry, Roofline};

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs()
    }

    /// E (1 - (1 - k/E)^T) by hand: Mixtral (E 8, k 2): T 1 -> 8 x 0.25 = 2;
    /// T 2 -> 8 (1 - 0.75^2) = 8 x 0.4375 = 3.5; T 16 -> 8 (1 - 0.75^16 = 0.010023) = 7.9198.
    /// DeepSeek-V3 (256, 8): T 32 -> 256 (1 - (31/32)^32 = 0.63794) = 163.31.
    #[test]
    fn distinct_experts_by_hand() {
        assert_eq!(expected_distinct_experts(8, 2, 1.0), 2.0);
        assert_eq!(expected_distinct_experts(8, 2, 2.0), 3.5);
        assert!(close(expected_distinct_experts(8, 2, 16.0), 7.9198, 1e-4));
        assert!(close(expected_distinct_experts(256, 8, 32.0), 163.31, 1e-4));
        assert_eq!(expected_distinct_experts(8, 2, 0.0), 0.0);
    }

    /// Never more than min(E, k T), never fewer than k (T >= 1), and more tokens never
    /// touch fewer experts.
    #[test]
    fn distinct_experts_bounds_and_monotone() {
        for (e, k) in [(8, 2), (256, 8), (64, 6), (4, 4)] {
            let mut previous = 0.0;
            for t in 1..2000 {
                let x = expected_distinct_experts(e, k, t as f64);
                assert!(x <= (e as f64).min(k as f64 * t as f64) + 1e-9, "{e} {k} {t}");
                assert!(x >= k as f64 - 1e-9 && x >= previous, "{e} {k} {t}");
                previous = x;
            }
        }
    }

    /// An all-to-all by hand: 64 tokens per GPU, top-2, hidden 4096, bf16, 2 GPUs over
    /// 450 GB/s, 10 us latency: 64 x 2 x 4096 x 2 x 1/2 = 524,288 bytes leave each GPU;
    /// 524,288 / 450e9 = 1.1651 us; + 10 us = 11.1651 us. 8 GPUs: x 7/8 instead of 1/2:
    /// 917,504 bytes, 2.0389 us + 10 = 12.0389 us. One GPU sends nothing.
    #[test]
    fn all_to_all_by_hand() {
        assert!(close(all_to_all_s(64.0, 2.0, 4096.0, 2.0, 2, 450.0, 10e-6), 11.1651e-6, 1e-4));
        assert!(close(all_to_all_s(64.0, 2.0, 4096.0, 2.0, 8, 450.0, 10e-6), 12.0389e-6, 1e-4));
        assert_eq!(all_to_all_s(64.0, 2.0, 4096.0, 2.0, 1, 450.0, 10e-6), 0.0);
    }

    /// Mixtral-8x7B on 2 x H100 with --ep 2: per MoE layer a dispatch and a combine, each
    /// 8 us (the roofline's default collective latency) + T/2 x 2 x 4096 x 2 B x 1/2 / 450
    /// GB/s. For T = 256: 128 x 2 x 4096 x 2 x 0.5 = 1,048,576 B -> 2.3302 us; over 32
    /// layers x 2: latency 512 us, bytes 149.13 us, 661.13 us in all, carried in the
    /// iteration's all-reduce terms. Without --ep: none.
    #[test]
    fn expert_parallel_all_to_all_by_hand() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let mut model = ModelShape::parse("Mixtral-8x7B").expect("catalog");
        let params = RooflineParams::default();
        let tp_only = Roofline::new(model.clone(), gpu, 2, params);
        model.moe.expert_parallel = 2;
        let cost = MoeCost::new(&model, &gpu, 2, &params).expect("moe");
        let time = cost.time(256.0);
        assert!(close(time.all_to_all_fixed_s, 512e-6, 1e-9), "{}", time.all_to_all_fixed_s);
        assert!(close(time.all_to_all_bytes_s, 149.13e-6, 1e-4), "{}", time.all_to_all_bytes_s);
        let ep = Roofline::new(model, gpu, 2, params);
        let (with, without) = (ep.shared_cost(256, 256), tp_only.shared_cost(256, 256));
        let extra = with.allreduce_fixed_s + with.allreduce_bytes_s
            - without.allreduce_fixed_s
            - without.allreduce_bytes_s;
        assert!(close(extra, 661.13e-6, 1e-4), "{extra}");
        let none = MoeCost::new(&ModelShape::parse("Mixtral-8x7B").expect("catalog"), &gpu, 2, &params);
        assert_eq!(none.expect("moe").time(256.0).all_to_all_bytes_s, 0.0);
    }

    /// Mixtral-8x7B's MoE layers on 2 x H100 (TP 2, default roofline: F = 0.70 x 989e12,
    /// BW = 0.75 x 3.35e12 per GPU), by hand. One decode token touches k = 2 experts: per
    /// layer and GPU 2 x 176,160,768 x 2 B / 2 = 352,321,536 bytes of experts + the router
    /// 4096 x 8 x 2 = 65,536; x 32 / BW = 4.4881 ms, the floor. Compute and activations
    /// add 2.7 us: 4.4908 ms. A batch of 64 decodes touches 8 (1 - 0.75^64) = 8.0 experts:
    /// gate-up smax(2 x 64 x 2 x 4096 x 28672 x 32 / 2 / F = 0.694 ms, 4 x 1.9942 ms of
    /// weights + 0.013 ms) = 12.027 ms, down 6.020 ms, router 7.5 us, activation 70.1 us:
    /// 18.125 ms, four times the one-token floor (a dense model's decode batch would
    /// read no more weights than one token does).
    #[test]
    fn mixtral_expert_reads_by_hand() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let model = ModelShape::parse("Mixtral-8x7B").expect("catalog");
        let cost = MoeCost::new(&model, &gpu, 2, &RooflineParams::default()).expect("moe");
        let one = cost.time(1.0);
        assert!(close(one.floor_s, 4.4881e-3, 1e-4), "{}", one.floor_s);
        assert!(close(one.floor_s + one.excess_s, 4.4908e-3, 1e-4), "{one:?}");
        let batch = cost.time(64.0);
        assert_eq!(batch.floor_s, one.floor_s);
        assert!(close(batch.floor_s + batch.excess_s, 18.125e-3, 1e-4), "{batch:?}");
        assert!(MoeCost::new(
            &ModelShape::parse("Llama-3.1-8B").expect("catalog"),
            &gpu,
            2,
            &RooflineParams::default()
        )
        .is_none());
    }

    /// Mixtral-8x7B's parameter counts by hand, per layer: attention 2 x 4096 x 4096 +
    /// 2 x 4096 x 1024 = 41,943,040; one expert 3 x 4096 x 14336 = 176,160,768; router
    /// 4096 x 8 = 32,768; embedding and LM head 2 x 4096 x 32000 = 262,144,000.
    /// total = 32 x (41,943,040 + 8 x 176,160,768 + 32,768) + 262,144,000 = 46,702,526,464
    /// active = 32 x (41,943,040 + 2 x 176,160,768 + 32,768) + 262,144,000 = 12,879,659,008
    /// (Mistral's "46.7B total, 12.9B active").
    #[test]
    fn mixtral_total_and_active_params() {
        let m = ModelShape::parse("mixtral-8x7b").expect("catalog");
        assert_eq!(m.total_params(), 46_702_526_464.0);
        assert_eq!(m.active_params(), 12_879_659_008.0);
        assert_eq!(m.weight_bytes(), 2.0 * 46_702_526_464.0);
        // GQA KV as Llama-3.1-8B's: 2 x 32 x 8 x 128 x 2 = 131,072 bytes per token.
        assert_eq!(m.kv_bytes_per_token(), 131_072.0);
    }

    /// DeepSeek-V3 by hand. Attention per layer (MLA): q_a 7168 x 1536 = 11,010,048; q_b
    /// 1536 x 128 x 192 = 37,748,736; kv_a 7168 x 576 = 4,128,768; kv_b 512 x 128 x 256
    /// = 16,777,216; o 128 x 128 x 7168 = 117,440,512; sum 187,105,280 (x 61).
    /// Dense FFN 3 x 7168 x 18432 = 396,361,728 (x 3). Expert 3 x 7168 x 2048 =
    /// 44,040,192; routed 256 + shared 1 (x 58); router 7168 x 256 = 1,835,008 (x 58).
    /// Embedding and head 2 x 7168 x 129,280 = 1,853,358,080.
    /// total = 11,413,422,080 + 1,189,085,184 + 58 x 257 x 44,040,192 (656,463,101,952)
    ///       + 106,430,464 + 1,853,358,080 = 671,025,397,760 (DeepSeek's 671B);
    /// active: 58 x 9 x 44,040,192 = 22,988,980,224 in place of the experts' 656.5B:
    ///       = 37,551,276,032 (their 37B).
    /// KV per token (bf16): 61 x (512 + 64) x 2 = 70,272 bytes, on every GPU.
    #[test]
    fn deepseek_v3_params_and_latent_kv() {
        let m = ModelShape::parse("DeepSeek-V3").expect("catalog");
        assert_eq!(m.total_params(), 671_025_397_760.0);
        assert_eq!(m.active_params(), 37_551_276_032.0);
        assert_eq!(m.kv_bytes_per_token(), 70_272.0);
        assert_eq!(m.kv_bytes_per_token_per_gpu(8), 70_272.0);
        let mut fp8 = m.clone();
        fp8.precision.fp8_kv_cache = true;
        assert_eq!(fp8.kv_bytes_per_token_per_gpu(8), 35_136.0);
    }

    /// A MoE model with one expert, always used, of the dense model's FFN width is the
    /// dense model plus a d x 1 router, a GEMM that reads each token's d values:
    /// smax(2 T d L / F, L b d / BW + L b T (d + 1) / BW) (at T = 2,048 on one H100:
    /// 32 x 2 x 2048 x 4097 / 2.5125e12 = 213.7 us, 0.4% of the prefill). Iteration times
    /// agree with dense + router to 1e-9, for decodes and prefills, at TP 1 and 2.
    #[test]
    fn one_expert_moe_is_the_dense_model_plus_its_router() {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        let params = RooflineParams::default();
        let dense = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let moe = ModelShape {
            moe: MoeShape { experts: 1, experts_per_token: 1, expert_ffn: 14336, ..MoeShape::default() },
            ..dense.clone()
        };
        assert_eq!(moe.total_params() - dense.total_params(), 32.0 * 4096.0);
        let (l, d, b) = (32.0, 4096.0, 2.0);
        let flops = 989e12 * params.compute_efficiency;
        let bandwidth = 3.35e12 * params.memory_efficiency;
        for tp in [1, 2] {
            let (a, m) =
                (Roofline::new(dense.clone(), gpu, tp, params), Roofline::new(moe.clone(), gpu, tp, params));
            for entries in [
                vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64],
                vec![BatchEntry { new_tokens: 2048, context_tokens: 0, emits_token: true }],
            ] {
                let t: f64 = entries.iter().map(|e| e.new_tokens as f64).sum();
                let router = smooth_max(
                    2.0 * t * d * l / flops,
                    l * b * d / bandwidth + l * b * t * (d + 1.0) / bandwidth,
                    3.0,
                );
                let (x, y) = (a.iteration_s(&entries), m.iteration_s(&entries));
                assert!(close(y, x + router, 1e-9), "tp {tp}: dense {x} + router {router} against moe {y}");
            }
        }
    }

    /// More tokens never make a MoE iteration shorter (the experts touched, compute and
    /// activations all grow with T), for both catalog MoE models, with and without EP.
    #[test]
    fn moe_time_grows_with_tokens() {
        let gpu = *find_gpu("H200").expect("catalog");
        for (name, tp, ep) in [("Mixtral-8x7B", 2, 1), ("Mixtral-8x7B", 2, 2), ("DeepSeek-V3", 8, 8)] {
            let mut model = ModelShape::parse(name).expect("catalog");
            model.moe.expert_parallel = ep;
            let cost = MoeCost::new(&model, &gpu, tp, &RooflineParams::default()).expect("moe");
            let mut previous = 0.0;
            for tokens in (1..=8192).step_by(7) {
                let t = cost.time(tokens as f64);
                let total = t.floor_s + t.excess_s + t.all_to_all_fixed_s + t.all_to_all_bytes_s;
                assert!(total >= previous, "{name} ep {ep} at {tokens}");
                previous = total;
            }
        }
    }

    #[test]
    fn shape_checks_name_the_field() {
        let bad = |text: &str| match ModelShape::parse(text) {
            Err(crate::ModelError::Field { field, .. }) => field,
            other => panic!("{text}: {other:?}"),
        };
        let base = "layers=4,hidden=64,heads=4,kv_heads=2,head_dim=16,ffn=128,vocab=100";
        assert_eq!(bad(&format!("{base},experts=8,top_k=9,expert_ffn=32")), "top_k");
        assert_eq!(bad(&format!("{base},experts=8,top_k=2")), "expert_ffn");
        assert_eq!(bad(&format!("{base},top_k=2")), "top_k");
        assert_eq!(bad(&format!("{base},experts=8,top_k=2,expert_ffn=32,dense_layers=4")), "dense_layers");
        assert_eq!(bad(&format!("{base},rope_dim=64")), "kv_lora_rank");
        let ok = ModelShape::parse(&format!("{base},experts=8,top_k=2,expert_ffn=32,shared_experts=1"))
            .expect("valid");
        assert_eq!(ok.moe.shared_experts, 1);
        let shape = MoeShape { experts: 8, experts_per_token: 2, expert_ffn: 32, ..MoeShape::default() };
        assert!(shape.check_expert_parallel(2, 4).is_ok());
        assert!(shape.check_expert_parallel(3, 6).is_err());
        assert!(shape.check_expert_parallel(4, 2).is_err());
        assert!(MoeShape::default().check_expert_parallel(2, 2).is_err());
    }
}
