//! Transformer shapes for the training model, with the presets of published runs.

/// A dense decoder-only transformer as the training model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainShape {
    pub name: String,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    /// Key/value heads (grouped-query attention); `heads` for multi-head attention.
    pub kv_heads: u32,
    /// MLP inner width (4 x hidden for GPT).
    pub ffn_hidden: u32,
    /// SwiGLU-style gated MLP (three weight matrices instead of two).
    pub gated_mlp: bool,
    /// Sequence length, tokens.
    pub seq: u32,
    pub vocab: u32,
    /// Input embedding and output layer share one matrix (GPT, Megatron) or not (Llama).
    pub tied_embeddings: bool,
    /// Attention never materializes the s x s score matrix (FlashAttention): no
    /// `5 a s^2 b` activation term, in memory or in elementwise traffic.
    pub flash_attention: bool,
}

impl TrainShape {
    /// A GPT-style shape (Megatron's): MLP 4h, multi-head attention, tied embeddings,
    /// attention scores materialized (2021-era kernels).
    pub fn gpt(name: &str, layers: u32, hidden: u32, heads: u32, seq: u32, vocab: u32) -> TrainShape {
        TrainShape {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads: heads,
            ffn_hidden: 4 * hidden,
            gated_mlp: false,
            seq,
            vocab,
            tied_embeddings: true,
            flash_attention: false,
        }
    }

    fn llama(name: &str, layers: u32, hidden: u32, heads: u32, ffn_hidden: u32) -> TrainShape {
        TrainShape {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads: 8,
            ffn_hidden,
            gated_mlp: true,
            seq: 8192,
            vocab: 128_256,
            tied_embeddings: false,
            flash_attention: true,
        }
    }

    /// Weights of one transformer layer: attention (Q and output h x h, K and V h x
    /// kv_heads x head_dim each) and the MLP (2 or 3 matrices of h x ffn). Biases and
    /// norms (O(h)) are left out, as in Megatron's 12 l h^2 count.
    pub fn layer_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let kv_width = f64::from(self.kv_heads) * h / f64::from(self.heads);
        let mlp_matrices = if self.gated_mlp { 3.0 } else { 2.0 };
        2.0 * h * h + 2.0 * h * kv_width + mlp_matrices * h * f64::from(self.ffn_hidden)
    }

    /// Embedding parameters: V h, twice when the output layer is separate.
    pub fn embedding_params(&self) -> f64 {
        let one = f64::from(self.vocab) * f64::from(self.hidden);
        if self.tied_embeddings {
            one
        } else {
            2.0 * one
        }
    }

    /// All parameters.
    pub fn params(&self) -> f64 {
        f64::from(self.layers) * self.layer_params() + self.embedding_params()
    }

    /// Forward FLOPs of one layer for one sequence: 2 s P_layer (the matrix multiplies)
    /// plus 4 s^2 h (scores Q K^T and their product with V). For GPT, P_layer = 12 h^2
    /// gives Megatron's 24 s h^2 + 4 s^2 h.
    pub fn layer_forward_flops(&self) -> f64 {
        let s = f64::from(self.seq);
        2.0 * s * self.layer_params() + self.attention_forward_flops()
    }

    /// The attention-score part of [`Self::layer_forward_flops`]: 4 s^2 h.
    pub fn attention_forward_flops(&self) -> f64 {
        let s = f64::from(self.seq);
        4.0 * s * s * f64::from(self.hidden)
    }

    /// Forward FLOPs of the output layer (logits) for one sequence: 2 s h V.
    pub fn logit_forward_flops(&self) -> f64 {
        2.0 * f64::from(self.seq) * f64::from(self.hidden) * f64::from(self.vocab)
    }

    /// Model FLOPs of one training step over `batch` sequences (forward + backward = 3x
    /// forward, no recomputation): 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) for GPT.
    pub fn model_flops(&self, batch: f64) -> f64 {
        3.0 * batch * (f64::from(self.layers) * self.layer_forward_flops() + self.logit_forward_flops())
    }

    /// Bytes of activations one layer stores for one sequence with tensor and sequence
    /// parallelism over `tensor` GPUs (Korthikanti et al., MLSys'23, 16-bit activations):
    /// s h (34 + 5 a s / h) / t for GPT. The 34 splits into attention 11, MLP 19 and
    /// norms 4; the MLP part generalizes to 3 + 4 f/h (+ 2 f/h when gated) for width f.
    /// With FlashAttention the 5 a s^2 term is absent.
    pub fn layer_activation_bytes(&self, tensor: u32) -> f64 {
        let s = f64::from(self.seq);
        let h = f64::from(self.hidden);
        let ffn_ratio = f64::from(self.ffn_hidden) / h;
        let mlp = 3.0 + 4.0 * ffn_ratio + if self.gated_mlp { 2.0 * ffn_ratio } else { 0.0 };
        let linear = (11.0 + mlp + 4.0) * s * h;
        (linear + self.score_activation_bytes()) / f64::from(tensor)
    }

    /// The attention-score activations of one layer for one sequence, before tensor
    /// sharding: 5 a s^2 bytes (scores, softmax output, dropout mask), 0 with
    /// FlashAttention.
    pub fn score_activation_bytes(&self) -> f64 {
        if self.flash_attention {
            return 0.0;
        }
        let s = f64::from(self.seq);
        5.0 * f64::from(self.heads) * s * s
    }
}

/// The preset names, in the order `plan train` lists them.
pub const PRESET_NAMES: &[&str] =
    &["gpt3-175b", "gpt-1t", "gpt-530b", "gpt-145b", "gpt-1.7b", "axonn-80b", "llama3-70b", "llama3-405b"];

/// A preset by name (case-insensitive), or `None`.
///
/// - gpt3-175b: 96 layers, h 12288, 96 heads, s 2048, V 51200 (Brown et al. 2020;
///   Megatron's vocabulary padding).
/// - gpt-1t, gpt-530b, gpt-145b, gpt-1.7b: rows of Narayanan et al. (SC'21) Table 1
///   (128 x 25600 x 160 heads; 105 x 20480 x 128; 80 x 12288 x 96; 24 x 2304 x 24),
///   s 2048, V 51200.
/// - axonn-80b: an 80-billion-parameter GPT, 64 layers x h 10240 x 80 heads, s 2048,
///   V 51200 (reconstructed: AxoNN's paper names the size, not this exact shape here).
/// - llama3-70b: 80 x 8192, 64 heads, 8 KV heads, SwiGLU 28672; llama3-405b: 126 x
///   16384, 128 heads, 8 KV heads, SwiGLU 53248; s 8192, V 128256 (Llama 3 paper, Table 3).
pub fn preset(name: &str) -> Option<TrainShape> {
    let shape = match name.to_ascii_lowercase().as_str() {
        "gpt3-175b" => TrainShape::gpt("gpt3-175b", 96, 12288, 96, 2048, 51200),
        "gpt-1t" => TrainShape::gpt("gpt-1t", 128, 25600, 160, 2048, 51200),
        "gpt-530b" => TrainShape::gpt("gpt-530b", 105, 20480, 128, 2048, 51200),
        "gpt-145b" => TrainShape::gpt("gpt-145b", 80, 12288, 96, 2048, 51200),
        "gpt-1.7b" => TrainShape::gpt("gpt-1.7b", 24, 2304, 24, 2048, 51200),
        "axonn-80b" => TrainShape::gpt("axonn-80b", 64, 10240, 80, 2048, 51200),
        "llama3-70b" => TrainShape::llama("llama3-70b", 80, 8192, 64, 28672),
        "llama3-405b" => TrainShape::llama("llama3-405b", 126, 16384, 128, 53248),
        _ => return None,
    };
    Some(shape)
}
