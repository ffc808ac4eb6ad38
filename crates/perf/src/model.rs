//! Decoder-only transformer shapes (Llama-style: grouped-query attention, gated MLP),
//! optionally with mixture-of-experts layers ([`MoeShape`], Mixtral, DeepSeek-V3),
//! multi-head latent attention ([`MlaShape`], DeepSeek-V3) and FP8 weights or KV cache
//! ([`Precision`]).

pub use crate::moe::MoeShape;

/// The shape of a Llama-style model. Weights are `bytes_per_param` each (2 for bf16)
/// unless [`Precision::fp8_weights`]; activations always are.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub name: String,
    pub layers: u32,
    pub hidden: u32,
    pub query_heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub ffn_hidden: u32,
    pub vocab: u32,
    pub bytes_per_param: u32,
    /// Mixture-of-experts layers; `MoeShape::default()` (0 experts) is a dense model, and
    /// every method below then gives what it gave before MoE existed.
    pub moe: MoeShape,
    /// Multi-head latent attention in place of grouped-query attention (DeepSeek-V2/V3).
    pub mla: Option<MlaShape>,
    /// Number formats of the weights and the KV cache (default: both `bytes_per_param`).
    pub precision: Precision,
}

/// Multi-head latent attention (DeepSeek-V2 and V3, "DeepSeek-V2", arXiv:2405.04434,
/// section 2.1): keys and values are cached as one compressed latent of `kv_lora_rank`
/// values plus a shared rotary key of `rope_dim` values per token and layer, the same on
/// every tensor-parallel GPU (vLLM replicates the latent cache: it has no heads to split).
/// Queries and keys have `head_dim` (qk_nope_head_dim) + `rope_dim` dimensions per head,
/// values `head_dim` (v_head_dim; equal in DeepSeek-V3's config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlaShape {
    /// Rank of the query's low-rank projection (q_lora_rank); 0 = a full d x H_q (h + r) projection.
    pub q_lora_rank: u32,
    /// Rank of the compressed KV latent (kv_lora_rank).
    pub kv_lora_rank: u32,
    /// Rotary dimensions of queries and the shared key (qk_rope_head_dim).
    pub rope_dim: u32,
}

/// Number formats of the weights and the KV cache. FP8 weights (`--weights fp8`): every
/// linear layer's weights in one byte, the LM head, the embedding and MoE routers kept in
/// 16 bits (vLLM's FP8 quantization leaves `lm_head` and the routers' gates unquantized);
/// FP8 KV cache (`--kv-cache fp8`, vLLM's `kv_cache_dtype=fp8`): one byte per cached
/// value. Activations stay in `bytes_per_param` in both cases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Precision {
    pub fp8_weights: bool,
    pub fp8_kv_cache: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("unknown model `{0}` (known: Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-14B, Qwen2.5-32B, Mixtral-8x7B, DeepSeek-V3, or an explicit shape `layers=32,hidden=4096,heads=32,kv_heads=8,head_dim=128,ffn=14336,vocab=128256[,experts=8,top_k=2,expert_ffn=14336,shared_experts=0,dense_layers=0][,q_lora_rank=..,kv_lora_rank=..,rope_dim=..]`)")]
    Unknown(String),
    #[error("model shape `{text}`: field `{field}`: {message}")]
    Field { text: String, field: String, message: String },
}

#[allow(clippy::too_many_arguments)]
fn shape(
    name: &str,
    layers: u32,
    hidden: u32,
    query_heads: u32,
    kv_heads: u32,
    ffn_hidden: u32,
    vocab: u32,
) -> ModelShape {
    ModelShape {
        name: name.into(),
        layers,
        hidden,
        query_heads,
        kv_heads,
        head_dim: 128,
        ffn_hidden,
        vocab,
        bytes_per_param: 2,
        moe: MoeShape::default(),
        mla: None,
        precision: Precision::default(),
    }
}

/// The model catalog (shapes from each model's published `config.json`).
///
/// - Mixtral-8x7B: huggingface.co/mistralai/Mixtral-8x7B-v0.1, config.json:
///   num_hidden_layers 32, hidden_size 4096, num_attention_heads 32,
///   num_key_value_heads 8, intermediate_size 14336, num_local_experts 8,
///   num_experts_per_tok 2, vocab_size 32000 (untied). 46.7B parameters, 12.9B active.
/// - DeepSeek-V3: huggingface.co/deepseek-ai/DeepSeek-V3, config.json:
///   num_hidden_layers 61, first_k_dense_replace 3, hidden_size 7168,
///   intermediate_size 18432 (the dense layers), moe_intermediate_size 2048,
///   n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1,
///   num_attention_heads 128 (num_key_value_heads 128), q_lora_rank 1536,
///   kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128,
///   vocab_size 129280. 671B parameters, 37B active (the multi-token-prediction module,
///   which serving without speculation does not run, is left out). Its published
///   checkpoint is FP8 (block-quantized); `--weights fp8` serves it so, the default bf16
///   is the upcast model.
pub fn model_catalog() -> Vec<ModelShape> {
    let mixtral = ModelShape {
        moe: MoeShape { experts: 8, experts_per_token: 2, expert_ffn: 14336, ..MoeShape::default() },
        ..shape("Mixtral-8x7B", 32, 4096, 32, 8, 14336, 32_000)
    };
    let deepseek = ModelShape {
        moe: MoeShape {
            experts: 256,
            experts_per_token: 8,
            expert_ffn: 2048,
            shared_experts: 1,
            dense_layers: 3,
            ..MoeShape::default()
        },
        mla: Some(MlaShape { q_lora_rank: 1536, kv_lora_rank: 512, rope_dim: 64 }),
        ..shape("DeepSeek-V3", 61, 7168, 128, 128, 18432, 129_280)
    };
    vec![
        shape("Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128_256),
        shape("Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128_256),
        shape("Qwen2.5-14B", 48, 5120, 40, 8, 13824, 152_064),
        shape("Qwen2.5-32B", 64, 5120, 40, 8, 27648, 152_064),
        mixtral,
        deepseek,
    ]
}

impl Default for ModelShape {
    /// The starting point of an explicit shape: every size 0 (to be given), head_dim 128,
    /// vocabulary 32,000, bf16, dense, grouped-query attention.
    fn default() -> ModelShape {
        ModelShape {
            name: "custom".into(),
            layers: 0,
            hidden: 0,
            query_heads: 0,
            kv_heads: 0,
            head_dim: 128,
            ffn_hidden: 0,
            vocab: 32_000,
            bytes_per_param: 2,
            moe: MoeShape::default(),
            mla: None,
            precision: Precision::default(),
        }
    }
}

impl ModelShape {
    /// A catalog name (case-insensitive) or an explicit `key=value,...` shape.
    pub fn parse(text: &str) -> Result<ModelShape, ModelError> {
        if text.contains('=') {
            return parse_explicit(text);
        }
        model_catalog()
            .into_iter()
            .find(|m| m.name.eq_ignore_ascii_case(text))
            .ok_or_else(|| ModelError::Unknown(text.to_string()))
    }

    /// Whether the shape is the plain one every formula started from: dense, grouped-query
    /// attention, weights and KV in `bytes_per_param`. Plain shapes keep their original
    /// arithmetic operation for operation, so their outputs stay bit-identical.
    pub fn is_plain(&self) -> bool {
        !self.moe.is_moe() && self.mla.is_none() && self.precision == Precision::default()
    }

    /// Bytes of one linear-layer weight: 1 with FP8 weights, else `bytes_per_param`.
    pub fn weight_bytes_per_param(&self) -> f64 {
        if self.precision.fp8_weights {
            1.0
        } else {
            self.bytes_per_param as f64
        }
    }

    /// Bytes of one cached key or value: 1 with an FP8 KV cache, else `bytes_per_param`.
    pub fn kv_bytes_per_value(&self) -> f64 {
        if self.precision.fp8_kv_cache {
            1.0
        } else {
            self.bytes_per_param as f64
        }
    }

    /// Attention projection parameters of one layer on one GPU of `tp`: GQA
    /// 2 d H_q h / tp + 2 d ceil(H_kv/tp) h; MLA d q_r + d (c + r) (replicated, as vLLM's
    /// `ReplicatedLinear` q_a and kv_a projections) + [q_r H_q (h + r) + c H_q 2h + H_q h d] / tp
    /// (with q_r = 0: d H_q (h + r) / tp for the query).
    pub fn attention_params_per_gpu(&self, tp: u32) -> f64 {
        let tp_f = tp.max(1) as f64;
        let (d, hq, h) = (self.hidden as f64, self.query_heads as f64, self.head_dim as f64);
        match self.mla {
            None => 2.0 * d * hq * h / tp_f + 2.0 * d * self.kv_heads_per_gpu(tp) as f64 * h,
            Some(mla) => {
                let (qr, c, r) = (mla.q_lora_rank as f64, mla.kv_lora_rank as f64, mla.rope_dim as f64);
                let query =
                    if qr > 0.0 { d * qr + qr * hq * (h + r) / tp_f } else { d * hq * (h + r) / tp_f };
                query + d * (c + r) + (c * hq * 2.0 * h + hq * h * d) / tp_f
            }
        }
    }

    /// Linear-layer parameters of one layer: P = d H_q h + 2 d H_kv h + H_q h d + 3 d d_ff
    /// (a dense layer; see [`Self::total_params`] and [`Self::active_params`] for MoE).
    pub fn linear_params_per_layer(&self) -> f64 {
        let (d, hq, hkv, h, ff) = (
            self.hidden as f64,
            self.query_heads as f64,
            self.kv_heads as f64,
            self.head_dim as f64,
            self.ffn_hidden as f64,
        );
        d * hq * h + 2.0 * d * hkv * h + hq * h * d + 3.0 * d * ff
    }

    /// LM-head parameters (untied from the embedding in every catalog model).
    pub fn lm_head_params(&self) -> f64 {
        self.hidden as f64 * self.vocab as f64
    }

    /// All parameters: layers, the LM head and the embedding table. With MoE, every
    /// expert counts (what memory holds).
    pub fn total_params(&self) -> f64 {
        if self.is_plain() {
            return self.layers as f64 * self.linear_params_per_layer() + 2.0 * self.lm_head_params();
        }
        let (layer_params, router_params) = self.layer_and_router_params(1, self.moe.experts);
        layer_params + router_params + 2.0 * self.lm_head_params()
    }

    /// Parameters one token computes with: every expert of a dense model; with MoE the
    /// top-k routed and the shared experts of each MoE layer (Mixtral-8x7B: 12.9B of 46.7B).
    pub fn active_params(&self) -> f64 {
        let (layer_params, router_params) = self.layer_and_router_params(1, self.moe.experts_per_token);
        layer_params + router_params + 2.0 * self.lm_head_params()
    }

    /// (Linear-layer weights of all layers on one GPU of `tp`, counting `routed` routed
    /// experts per MoE layer; the MoE routers' weights, d E per MoE layer on every GPU.)
    fn layer_and_router_params(&self, tp: u32, routed: u32) -> (f64, f64) {
        let tp_f = tp.max(1) as f64;
        let (d, ff) = (self.hidden as f64, self.ffn_hidden as f64);
        let attention = self.layers as f64 * self.attention_params_per_gpu(tp);
        let dense_ffn = self.moe.dense_ffn_layers(self.layers) as f64 * 3.0 * d * ff / tp_f;
        let moe_layers = self.moe.moe_layers(self.layers) as f64;
        let experts = f64::from(routed + self.moe.shared_experts) * self.moe.expert_params(d);
        let router = moe_layers * d * self.moe.experts as f64;
        (attention + dense_ffn + moe_layers * experts / tp_f, router)
    }

    pub fn weight_bytes(&self) -> f64 {
        if self.is_plain() {
            return self.total_params() * self.bytes_per_param as f64;
        }
        self.weight_bytes_held(1)
    }

    /// Weight bytes on one GPU of `tp`: linear layers at the weight format, routers and
    /// the LM head and embedding in `bytes_per_param`.
    fn weight_bytes_held(&self, tp: u32) -> f64 {
        let (layers, routers) = self.layer_and_router_params(tp, self.moe.experts);
        let b = self.bytes_per_param as f64;
        layers * self.weight_bytes_per_param()
            + (routers + 2.0 * self.lm_head_params() / tp.max(1) as f64) * b
    }

    /// KV-cache bytes per token over all layers: 2 (K and V) L H_kv h b; with MLA
    /// L (kv_lora_rank + rope_dim) b (one latent, no separate V); b is 1 with an FP8 cache.
    pub fn kv_bytes_per_token(&self) -> f64 {
        if let Some(mla) = self.mla {
            return self.layers as f64
                * f64::from(mla.kv_lora_rank + mla.rope_dim)
                * self.kv_bytes_per_value();
        }
        2.0 * self.layers as f64 * self.kv_heads as f64 * self.head_dim as f64 * self.kv_bytes_per_value()
    }

    /// KV heads each GPU holds under `tp`-way tensor parallelism: ceil(H_kv / tp), at
    /// least 1. When `tp` exceeds H_kv, vLLM replicates each KV head over tp / H_kv GPUs
    /// (Llama-3.1-70B has 8 KV heads: TP 16 gives each GPU one head, held twice).
    pub fn kv_heads_per_gpu(&self, tp: u32) -> u32 {
        self.kv_heads.div_ceil(tp.max(1)).max(1)
    }

    /// KV-cache bytes one GPU stores per token: 2 L ceil(H_kv / tp) h b (b = 1 with an FP8
    /// cache); with MLA the whole latent on every GPU, L (c + r) b.
    pub fn kv_bytes_per_token_per_gpu(&self, tp: u32) -> f64 {
        if self.mla.is_some() {
            return self.kv_bytes_per_token();
        }
        2.0 * self.layers as f64
            * self.kv_heads_per_gpu(tp) as f64
            * self.head_dim as f64
            * self.kv_bytes_per_value()
    }

    /// Weight bytes one GPU holds under `tp`-way tensor parallelism. Q, O and the MLP are
    /// split `tp` ways, the embedding and the LM head by vocabulary rows; K and V keep
    /// ceil(H_kv / tp) heads per GPU, so they are replicated when `tp` exceeds H_kv:
    /// b [ L (2 d H_q h / tp + 2 d ceil(H_kv/tp) h + 3 d d_ff / tp) + 2 d V / tp ].
    /// Norm weights (2 d per layer, about 0.003% of the model) are left out, as in
    /// [`Self::total_params`]. Equals [`Self::weight_bytes`] / tp when tp divides H_kv.
    ///
    /// With MoE, MLA or FP8 weights ([`Self::is_plain`] false): linear layers at
    /// [`Self::weight_bytes_per_param`] (attention [`Self::attention_params_per_gpu`], the
    /// dense FFN layers 3 d d_ff / tp, each MoE layer's routed and shared experts
    /// (E + S) 3 d d_e / tp: `ep` GPU groups hold E / ep experts each, split tp / ep ways,
    /// so every GPU holds 1/tp of them whatever ep), plus in 16 bits the routers (d E per
    /// MoE layer, on every GPU) and the LM head and embedding (2 d V / tp).
    pub fn weight_bytes_per_gpu(&self, tp: u32) -> f64 {
        if !self.is_plain() {
            return self.weight_bytes_held(tp);
        }
        let tp_f = tp.max(1) as f64;
        let (d, hq, h, ff) =
            (self.hidden as f64, self.query_heads as f64, self.head_dim as f64, self.ffn_hidden as f64);
        let kv = self.kv_heads_per_gpu(tp) as f64;
        let per_layer = 2.0 * d * hq * h / tp_f + 2.0 * d * kv * h + 3.0 * d * ff / tp_f;
        let params = self.layers as f64 * per_layer + 2.0 * self.lm_head_params() / tp_f;
        params * self.bytes_per_param as f64
    }

    /// Peak activation bytes on one GPU of a forward pass over `tokens` batched tokens of
    /// which `logit_rows` are sampled, the quantity vLLM's profile run measures (a dummy
    /// forward over `max_num_batched_tokens` tokens, then the sampler over
    /// `max_num_seqs` rows) and subtracts before sizing the KV cache:
    ///
    /// ```text
    /// layers:  T b (2 d + max(attention, mlp))      residual stream and normed input live
    ///          attention = (2 H_q + 2 ceil(H_kv/tp)) h / tp'   QKV output and attention output
    ///          mlp       = 3 d_ff / tp               gate-up output (2 d_ff) and SiLU-mul (d_ff)
    /// logits:  T b d + R V (b + 4 + 4)               last hidden, bf16 logits, fp32 copy, fp32 probs
    /// peak  =  max(layers, logits)
    /// ```
    /// (tp' divides only the query heads; the KV heads per GPU are already per GPU.) With
    /// MoE the mlp term is [`MoeShape::activation_values_per_token`]; with MLA the
    /// attention term keeps the GQA form with the config's H_kv (= H_q for DeepSeek-V3),
    /// an over-estimate next to the MoE term.
    /// Tensors are freed between layers, so the peak is one layer's, not their sum; the
    /// logits are gathered whole on every rank. CUDA graphs, the CUDA context and NCCL
    /// buffers are not counted (vLLM counts some of them as non-torch memory, well
    /// under 1 GiB on one node).
    pub fn activation_peak_bytes(&self, tp: u32, tokens: u32, logit_rows: u32) -> f64 {
        let tp_f = tp.max(1) as f64;
        let (t, b) = (tokens as f64, self.bytes_per_param as f64);
        let (d, hq, h, ff) =
            (self.hidden as f64, self.query_heads as f64, self.head_dim as f64, self.ffn_hidden as f64);
        let kv = self.kv_heads_per_gpu(tp) as f64;
        let attention = 2.0 * hq * h / tp_f + 2.0 * kv * h;
        let mlp =
            if self.moe.is_moe() { self.moe.activation_values_per_token(d, ff, tp) } else { 3.0 * ff / tp_f };
        let layers = t * b * (2.0 * d + attention.max(mlp));
        let rows = f64::from(logit_rows.min(tokens));
        let logits = t * b * d + rows * self.vocab as f64 * (b + 8.0);
        layers.max(logits)
    }
}

fn parse_explicit(text: &str) -> Result<ModelShape, ModelError> {
    let mut model = ModelShape::default();
    let mut mla = MlaShape { q_lora_rank: 0, kv_lora_rank: 0, rope_dim: 0 };
    let field_err = |field: &str, message: &str| ModelError::Field {
        text: text.into(),
        field: field.into(),
        message: message.into(),
    };
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| field_err(pair, "expected key=value"))?;
        if key == "name" {
            model.name = value.to_string();
            continue;
        }
        let number: u32 = value.parse().map_err(|_| field_err(key, "not a positive integer"))?;
        let slot = match key {
            "layers" | "L" => &mut model.layers,
            "hidden" | "d" => &mut model.hidden,
            "heads" | "query_heads" | "hq" => &mut model.query_heads,
            "kv_heads" | "hkv" => &mut model.kv_heads,
            "head_dim" | "h" => &mut model.head_dim,
            "ffn" | "ffn_hidden" | "d_ff" => &mut model.ffn_hidden,
            "vocab" | "V" => &mut model.vocab,
            "bytes_per_param" | "b" => &mut model.bytes_per_param,
            "experts" => &mut model.moe.experts,
            "top_k" | "experts_per_token" => &mut model.moe.experts_per_token,
            "expert_ffn" => &mut model.moe.expert_ffn,
            "shared_experts" => &mut model.moe.shared_experts,
            "dense_layers" => &mut model.moe.dense_layers,
            "q_lora_rank" => &mut mla.q_lora_rank,
            "kv_lora_rank" => &mut mla.kv_lora_rank,
            "rope_dim" => &mut mla.rope_dim,
            _ => return Err(field_err(key, "unknown field")),
        };
        *slot = number;
    }
    let required = [
        ("layers", model.layers),
        ("hidden", model.hidden),
        ("heads", model.query_heads),
        ("kv_heads", model.kv_heads),
        ("ffn", model.ffn_hidden),
        ("head_dim", model.head_dim),
        ("vocab", model.vocab),
        ("bytes_per_param", model.bytes_per_param),
    ];
    if let Some((field, _)) = required.iter().find(|(_, v)| *v == 0) {
        return Err(field_err(field, "missing or zero"));
    }
    if let Err((field, message)) = model.moe.check(model.layers) {
        return Err(field_err(field, &message));
    }
    if mla.kv_lora_rank > 0 {
        model.mla = Some(mla);
    } else if mla.q_lora_rank > 0 || mla.rope_dim > 0 {
        return Err(field_err(
            "kv_lora_rank",
            "multi-head latent attention (q_lora_rank, rope_dim) needs kv_lora_rank",
        ));
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_8b_counts() {
        let m = ModelShape::parse("llama-3.1-8b").expect("catalog");
        // 16.78M + 8.39M + 16.78M + 176.16M per layer.
        assert_eq!(m.linear_params_per_layer(), 218_103_808.0);
        // 32 x 218.1M + 2 x 525.3M = 8.03B, the published parameter count.
        assert!((m.total_params() / 1e9 - 8.030).abs() < 0.001, "{}", m.total_params());
        assert_eq!(m.kv_bytes_per_token(), 131_072.0); // 128 KiB per token
    }

    /// Llama-3.1-70B (8 KV heads, 80 layers, head_dim 128, bf16) at TP 16: each GPU holds
    /// ceil(8/16) = 0 -> 1 head, so 2 x 80 x 1 x 128 x 2 = 40,960 bytes per token per GPU,
    /// the same as at TP 8; 16 GPUs then hold each token twice (655,360 bytes in all,
    /// against 327,680 for the model's one copy).
    #[test]
    fn kv_heads_replicate_past_their_count() {
        let m = ModelShape::parse("Llama-3.1-70B").expect("catalog");
        assert_eq!(m.kv_bytes_per_token(), 327_680.0);
        assert_eq!(m.kv_heads_per_gpu(2), 4);
        assert_eq!(m.kv_heads_per_gpu(8), 1);
        assert_eq!(m.kv_heads_per_gpu(16), 1);
        assert_eq!(m.kv_bytes_per_token_per_gpu(2), 163_840.0);
        assert_eq!(m.kv_bytes_per_token_per_gpu(8), 40_960.0);
        assert_eq!(m.kv_bytes_per_token_per_gpu(16), 40_960.0);
        // A shape with 3 KV heads at TP 2: ceil(3/2) = 2 heads per GPU.
        let odd = ModelShape::parse("layers=2,hidden=64,heads=6,kv_heads=3,head_dim=16,ffn=128,vocab=100")
            .expect("explicit");
        assert_eq!(odd.kv_bytes_per_token_per_gpu(2), 2.0 * 2.0 * 2.0 * 16.0 * 2.0);
    }

    /// Weights per GPU divide by tp while tp divides H_kv, and K/V replicate past it:
    /// 70B at TP 16 holds 80 x 2 x 8192 x 1 x 128 x 2 bytes of K/V projection per GPU
    /// where an even split would hold half of that.
    #[test]
    fn weights_per_gpu_replicate_kv_projections() {
        let m = ModelShape::parse("Llama-3.1-70B").expect("catalog");
        for tp in [1, 2, 4, 8] {
            let even = m.weight_bytes() / f64::from(tp);
            assert!((m.weight_bytes_per_gpu(tp) - even).abs() < 1.0, "tp {tp}");
        }
        let extra = m.weight_bytes_per_gpu(16) - m.weight_bytes() / 16.0;
        let kv_projection_per_gpu = 80.0 * 2.0 * 8192.0 * 128.0 * 2.0; // one head, K and V
        assert!((extra - kv_projection_per_gpu / 2.0).abs() < 1.0, "{extra}");
    }

    /// A small shape by hand: L=2, d=64, H_q=4, H_kv=2, h=16, d_ff=128, V=100, bf16,
    /// T = 32 tokens, R = 4 sampled rows, TP 1:
    /// attention = (2 x 4 + 2 x 2) x 16 = 192, mlp = 3 x 128 = 384 -> per token 2 x 64 + 384 = 512;
    /// layers = 32 x 2 x 512 = 32,768 bytes.
    /// logits = 32 x 2 x 64 + 4 x 100 x (2 + 8) = 4,096 + 4,000 = 8,096 bytes.
    /// peak = 32,768. With R = 32: logits = 4,096 + 32,000 = 36,096 > 32,768.
    #[test]
    fn activation_peak_by_hand() {
        let m = ModelShape::parse("layers=2,hidden=64,heads=4,kv_heads=2,head_dim=16,ffn=128,vocab=100")
            .expect("explicit");
        assert_eq!(m.activation_peak_bytes(1, 32, 4), 32_768.0);
        assert_eq!(m.activation_peak_bytes(1, 32, 32), 36_096.0);
        // Rows beyond the tokens are not sampled.
        assert_eq!(m.activation_peak_bytes(1, 32, 1000), 36_096.0);
        // TP 2: attention = (8/2 + 2 x 1) x 16 = 96, mlp = 192 -> 32 x 2 x (128 + 192) = 20,480.
        assert_eq!(m.activation_peak_bytes(2, 32, 4), 20_480.0);
    }

    #[test]
    fn catalog_sizes_match_names() {
        for (name, billions) in [("Llama-3.1-70B", 70.6), ("Qwen2.5-14B", 14.7), ("Qwen2.5-32B", 32.5)] {
            let params = ModelShape::parse(name).expect("catalog").total_params() / 1e9;
            assert!((params - billions).abs() / billions < 0.03, "{name}: {params}");
        }
    }

    #[test]
    fn explicit_shape_and_errors() {
        let m = ModelShape::parse("layers=2,hidden=64,heads=4,kv_heads=2,head_dim=16,ffn=128,vocab=100")
            .expect("explicit");
        assert_eq!((m.layers, m.hidden, m.vocab), (2, 64, 100));
        let err = ModelShape::parse("layers=2,hidden=x").expect_err("bad");
        assert!(matches!(err, ModelError::Field { ref field, .. } if field == "hidden"));
        assert!(ModelShape::parse("gpt-9").is_err());
    }
}
