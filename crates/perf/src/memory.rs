//! GPU memory of a served model: weights, the activation peak and the KV cache, per GPU.
//!
//! vLLM sizes its KV cache after a profile run (`determine_available_memory`):
//!
//! ```text
//! kv_bytes = gpu_memory_utilization x total - weights - peak activation   (per GPU)
//! kv_tokens = kv_bytes / (2 L ceil(H_kv / tp) h b)
//! ```
//! with `total` the GPU's memory in bytes (GiB x 2^30), the weights that GPU holds
//! ([`ModelShape::weight_bytes_per_gpu`]) and the peak activation of a forward pass over
//! `max_num_batched_tokens` tokens with `max_num_seqs` sampled rows
//! ([`ModelShape::activation_peak_bytes`]). Every GPU of a tensor-parallel group holds
//! its share of every token, so the replica's capacity in tokens is one GPU's.

use crate::gpu::GpuSpec;
use crate::model::ModelShape;

/// The batch the activation reserve is sized for (vLLM's profile run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActivationBatch {
    /// Tokens of the profiled forward pass (vLLM: `max_num_batched_tokens`).
    pub tokens: u32,
    /// Sequences sampled at its end (vLLM: `max_num_seqs`).
    pub sequences: u32,
}

/// One GPU's memory budget, bytes, and the KV tokens it leaves room for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryPlan {
    /// The GPU's memory: GiB x 2^30.
    pub total_bytes: f64,
    /// `memory_utilization` x total.
    pub usable_bytes: f64,
    pub weight_bytes: f64,
    pub activation_bytes: f64,
    /// usable - weights - activations (negative when the model does not fit).
    pub kv_bytes: f64,
    /// KV bytes per token on this GPU (heads replicated past H_kv).
    pub kv_bytes_per_token: f64,
    /// Whole tokens of KV cache: kv_bytes / kv_bytes_per_token, 0 when kv_bytes <= 0.
    pub kv_tokens: u64,
}

impl MemoryPlan {
    /// The plan for `model` on `tp` GPUs of type `gpu`. `activation_bytes`, when given,
    /// replaces the profiled peak (a what-if or a measured value).
    pub fn new(
        model: &ModelShape,
        gpu: &GpuSpec,
        tp: u32,
        memory_utilization: f64,
        batch: ActivationBatch,
        activation_bytes: Option<f64>,
    ) -> MemoryPlan {
        let total_bytes = gpu.memory_bytes();
        let usable_bytes = total_bytes * memory_utilization;
        let weight_bytes = model.weight_bytes_per_gpu(tp);
        let activation_bytes = activation_bytes
            .unwrap_or_else(|| model.activation_peak_bytes(tp, batch.tokens, batch.sequences));
        let kv_bytes = usable_bytes - weight_bytes - activation_bytes;
        let kv_bytes_per_token = model.kv_bytes_per_token_per_gpu(tp);
        let kv_tokens = if kv_bytes > 0.0 { (kv_bytes / kv_bytes_per_token) as u64 } else { 0 };
        MemoryPlan {
            total_bytes,
            usable_bytes,
            weight_bytes,
            activation_bytes,
            kv_bytes,
            kv_bytes_per_token,
            kv_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{find_gpu, GIB};

    /// vLLM's online-serving defaults: 8,192 batched tokens, 256 sequences.
    const VLLM_DEFAULT: ActivationBatch = ActivationBatch { tokens: 8192, sequences: 256 };

    fn plan(model: &str, gpu: &str, tp: u32) -> MemoryPlan {
        let model = ModelShape::parse(model).expect("catalog");
        MemoryPlan::new(&model, find_gpu(gpu).expect("catalog"), tp, 0.9, VLLM_DEFAULT, None)
    }

    /// Llama-3.1-70B on 2 x H100-80GB (TP 2), each GPU worked by hand:
    /// total   = 80 x 2^30                                   = 85,899,345,920
    /// usable  = 0.9 x total                                 = 77,309,411,328
    /// weights = 2 x [80 x (2x8192x8192/2 + 2x8192x4x128 + 3x8192x28672/2) + 2x8192x128256/2]
    ///         = 2 x [80 x (67,108,864 + 8,388,608 + 352,321,536) + 1,050,673,152]
    ///         = 2 x 35,276,193,792                         = 70,552,387,584
    /// activation = 8192 x 2 x (2x8192 + max((2x64/2 + 2x4) x 128, 3x28672/2))
    ///            = 16,384 x (16,384 + max(9,216, 43,008))   = 973,078,528
    /// free    = 77,309,411,328 - 70,552,387,584 - 973,078,528 = 5,783,945,216 (5.39 GiB)
    /// tokens  = 5,783,945,216 / (2 x 80 x 4 x 128 x 2 = 163,840) = 35,302
    /// (The old GB arithmetic, 0.9 x 80e9 - 2e9 - 70.55e9, left nothing.)
    #[test]
    fn llama_70b_fits_on_two_h100() {
        let p = plan("Llama-3.1-70B", "H100-SXM", 2);
        assert_eq!(p.total_bytes, 85_899_345_920.0);
        assert_eq!(p.weight_bytes, 70_552_387_584.0);
        assert_eq!(p.activation_bytes, 973_078_528.0);
        assert!((p.kv_bytes - 5_783_945_216.0).abs() < 1.0, "{}", p.kv_bytes);
        assert_eq!(p.kv_bytes_per_token, 163_840.0);
        assert_eq!(p.kv_tokens, 35_302);
    }

    /// Llama-3.1-8B on one H100 (vLLM defaults). weights = 2 x 8,029,995,008 = 16,059,990,016
    /// (14.96 GiB); activation = 8192 x 2 x (2 x 4096 + 3 x 14336) = 838,860,800 (0.78 GiB);
    /// free = 77,309,411,328 - 16,059,990,016 - 838,860,800 = 60,410,560,512 (56.26 GiB)
    /// = 460,896 tokens of 128 KiB. With the 81,559 MiB (79.65 GiB) `nvidia-smi` shows
    /// on an H100 in place of 80 GiB, the same formula gives 55.94 GiB, 0.6% less.
    #[test]
    fn llama_8b_on_one_h100() {
        let p = plan("Llama-3.1-8B", "H100-SXM", 1);
        assert_eq!(p.weight_bytes, 16_059_990_016.0);
        assert_eq!(p.activation_bytes, 838_860_800.0);
        assert_eq!(p.kv_tokens, 460_896);
        assert!((p.kv_bytes / GIB - 56.26).abs() < 0.01, "{}", p.kv_bytes / GIB);
    }

    /// Llama-3.1-8B on one H100 with an FP8 KV cache: the same 60,410,560,512 free bytes
    /// over 2 x 32 x 8 x 128 x 1 = 65,536 bytes per token = 921,792 tokens, twice bf16's
    /// 460,896. FP8 weights: 32 x 218,103,808 layer weights x 1 byte + the LM head and
    /// embedding 2 x 525,336,576 x 2 bytes (kept in bf16) = 9,080,668,160; free =
    /// 77,309,411,328 - 9,080,668,160 - 838,860,800 = 67,389,882,368 = 514,144 bf16 tokens;
    /// both in FP8: 1,028,288 tokens.
    #[test]
    fn llama_8b_fp8_kv_and_weights() {
        let gpu = find_gpu("H100-SXM").expect("catalog");
        let mut model = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        model.precision.fp8_kv_cache = true;
        let kv = MemoryPlan::new(&model, gpu, 1, 0.9, VLLM_DEFAULT, None);
        assert_eq!(kv.kv_bytes_per_token, 65_536.0);
        assert_eq!(kv.kv_tokens, 921_792);
        model.precision = crate::Precision { fp8_weights: true, fp8_kv_cache: false };
        let weights = MemoryPlan::new(&model, gpu, 1, 0.9, VLLM_DEFAULT, None);
        assert_eq!(weights.weight_bytes, 9_080_668_160.0);
        assert_eq!(weights.kv_tokens, 514_144);
        model.precision.fp8_kv_cache = true;
        assert_eq!(MemoryPlan::new(&model, gpu, 1, 0.9, VLLM_DEFAULT, None).kv_tokens, 1_028_288);
    }

    /// Mixtral-8x7B holds all 46.7B parameters: 93.4 GB in bf16 does not fit one H100. On
    /// two (TP 2), per GPU: layers 32 x (2 x 4096 x 4096 / 2 + 2 x 4096 x 4 x 128 + 8 x
    /// 176,160,768 / 2 = 725,614,592) x 2 B = 46,439,333,888, routers (replicated) and
    /// LM head + embedding (32 x 4096 x 8 + 2 x 4096 x 32000 / 2) x 2 = 264,241,152: weights
    /// 46,703,575,040 (43.50 GiB). Activations 8192 x 2 x (2 x 4096 + max((2 x 32 / 2 +
    /// 2 x 4) x 128 = 5,120, 2 x (3 x 7168 + 4096) = 51,200)) = 973,078,528. Free
    /// 77,309,411,328 - 46,703,575,040 - 973,078,528 = 29,632,757,760 bytes over
    /// 2 x 32 x 4 x 128 x 2 = 65,536 per token: 452,160 tokens.
    #[test]
    fn mixtral_holds_every_expert() {
        let one = plan("Mixtral-8x7B", "H100-SXM", 1);
        assert!(one.kv_bytes < 0.0);
        let two = plan("Mixtral-8x7B", "H100-SXM", 2);
        assert_eq!(two.weight_bytes, 46_703_575_040.0);
        assert_eq!(two.activation_bytes, 973_078_528.0);
        assert_eq!(two.kv_tokens, 452_160);
    }

    /// DeepSeek-V3 on 8 x H200 (TP 8). Per GPU, FP8 weights: attention (MLA) 7168 x 1536 +
    /// 7168 x 576 replicated + (37,748,736 + 16,777,216 + 117,440,512) / 8 = 36,634,624 x 61
    /// = 2,234,712,064; dense FFN 3 x 396,361,728 / 8 = 148,635,648; experts 58 x 257 x
    /// 44,040,192 / 8 = 82,057,887,744; in one byte 84,441,235,456; routers 58 x 7168 x 256
    /// x 2 B = 212,860,928 and LM head + embedding 1,853,358,080 / 8 x 2 B = 463,339,520:
    /// 85,117,435,904 bytes. Activations: attention (2 x 16 + 2 x 16) x 128 = 8,192, MoE
    /// 8 x (3 x 2048 / 8 + 7168) + 3 x 2048 / 8 = 64,256 (> dense 3 x 18432 / 8 = 6,912):
    /// 8192 x 2 x (2 x 7168 + 64,256) = 1,287,651,328. Free = 0.9 x 141 x 2^30 -
    /// 85,117,435,904 - 1,287,651,328 = 49,852,750,233.6 over 70,272 latent bytes per token
    /// = 709,425 tokens. In bf16 the experts alone need 164 GB per GPU: it does not fit.
    #[test]
    fn deepseek_v3_fits_eight_h200_in_fp8_only() {
        let mut model = ModelShape::parse("DeepSeek-V3").expect("catalog");
        let gpu = find_gpu("H200").expect("catalog");
        assert!(MemoryPlan::new(&model, gpu, 8, 0.9, VLLM_DEFAULT, None).kv_bytes < 0.0);
        model.precision.fp8_weights = true;
        let p = MemoryPlan::new(&model, gpu, 8, 0.9, VLLM_DEFAULT, None);
        assert_eq!(p.weight_bytes, 85_117_435_904.0);
        assert_eq!(p.activation_bytes, 1_287_651_328.0);
        assert_eq!(p.kv_bytes_per_token, 70_272.0);
        assert_eq!(p.kv_tokens, 709_425);
    }

    #[test]
    fn too_big_leaves_nothing_and_replication_costs_capacity() {
        let p = plan("Llama-3.1-70B", "H100-SXM", 1);
        assert!(p.kv_bytes < 0.0);
        assert_eq!(p.kv_tokens, 0);
        // At TP 16 each GPU stores one KV head (as at TP 8), so per-GPU token capacity
        // is bounded by the per-GPU free bytes over 40,960 bytes per token.
        let p16 = plan("Llama-3.1-70B", "H100-SXM", 16);
        assert_eq!(p16.kv_bytes_per_token, 40_960.0);
        assert_eq!(p16.kv_tokens, (p16.kv_bytes / 40_960.0) as u64);
    }

    #[test]
    fn activation_override_is_used() {
        let model = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        let gpu = find_gpu("H100").expect("catalog");
        let p = MemoryPlan::new(&model, gpu, 1, 0.9, VLLM_DEFAULT, Some(2.0 * GIB));
        assert_eq!(p.activation_bytes, 2.0 * GIB);
        assert_eq!(p.kv_bytes, 0.9 * 80.0 * GIB - 16_059_990_016.0 - 2.0 * GIB);
    }
}
