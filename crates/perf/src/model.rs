//! Decoder-only transformer shapes (Llama-style: grouped-query attention, gated MLP).

/// The shape of a Llama-style model. Weights are `bytes_per_param` each (2 for bf16).
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
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("unknown model `{0}` (known: Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-14B, Qwen2.5-32B, or an explicit shape `layers=32,hidden=4096,heads=32,kv_heads=8,head_dim=128,ffn=14336,vocab=128256`)")]
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
    }
}

/// The model catalog (shapes from each model's published `config.json`).
pub fn model_catalog() -> Vec<ModelShape> {
    vec![
        shape("Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128_256),
        shape("Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128_256),
        shape("Qwen2.5-14B", 48, 5120, 40, 8, 13824, 152_064),
        shape("Qwen2.5-32B", 64, 5120, 40, 8, 27648, 152_064),
    ]
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

    /// Linear-layer parameters of one layer: P = d H_q h + 2 d H_kv h + H_q h d + 3 d d_ff.
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

    /// All parameters: layers, the LM head and the embedding table.
    pub fn total_params(&self) -> f64 {
        self.layers as f64 * self.linear_params_per_layer() + 2.0 * self.lm_head_params()
    }

    pub fn weight_bytes(&self) -> f64 {
        self.total_params() * self.bytes_per_param as f64
    }

    /// KV-cache bytes per token over all layers: 2 (K and V) L H_kv h b.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * self.layers as f64 * self.kv_heads as f64 * self.head_dim as f64 * self.bytes_per_param as f64
    }
}

fn parse_explicit(text: &str) -> Result<ModelShape, ModelError> {
    let mut model = ModelShape {
        name: "custom".into(),
        layers: 0,
        hidden: 0,
        query_heads: 0,
        kv_heads: 0,
        head_dim: 128,
        ffn_hidden: 0,
        vocab: 32_000,
        bytes_per_param: 2,
    };
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
