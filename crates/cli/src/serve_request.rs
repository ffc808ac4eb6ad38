//! `serve-sim --spec`, `--lora`, `--lora-adapter` and `--kv-offload`: the flags' parsers,
//! their placement into a [`ServeConfig`], and the run's feature counters as JSON and text.
//! Glue only: the models live in `cotenant_serve::{spec, lora, offload, features}`.

use anyhow::{bail, Result};
use cotenant_perf::{Roofline, RooflineParams};
use cotenant_serve::features::RequestFeatureStats;
use cotenant_serve::lora::{parse_tenant_adapter, Adapter, LoraArgs, LoraConfig};
use cotenant_serve::offload::OffloadConfig;
use cotenant_serve::spec::{Proposer, SpecArgs, SpecConfig};
use cotenant_serve::{ServeConfig, Workload};
use serde_json::{json, Value};

/// clap parser of `--spec`.
pub fn spec_flag(text: &str) -> Result<SpecArgs, String> {
    SpecArgs::parse(text)
}

/// clap parser of `--lora`.
pub fn lora_flag(text: &str) -> Result<LoraArgs, String> {
    LoraArgs::parse(text)
}

/// clap parser of `--lora-adapter`.
pub fn lora_adapter_flag(text: &str) -> Result<(String, Option<Adapter>), String> {
    parse_tenant_adapter(text)
}

/// clap parser of `--kv-offload`.
pub fn kv_offload_flag(text: &str) -> Result<OffloadConfig, String> {
    OffloadConfig::parse(text)
}

/// The parsed flags of one serve-sim invocation.
#[derive(Clone, Copy, Debug)]
pub struct RequestFlags<'a> {
    pub spec: Option<&'a SpecArgs>,
    pub lora: Option<&'a LoraArgs>,
    pub lora_adapters: &'a [(String, Option<Adapter>)],
    pub kv_offload: Option<OffloadConfig>,
}

/// Puts the flags into `config`: the draft model on the target's GPUs (same GPU type, the
/// target's tensor-parallel degree unless `tp=` says otherwise, and that degree's roofline
/// parameters from `params_for_tp`), the adapters per tenant, the swap space.
pub fn apply(
    config: &mut ServeConfig,
    flags: RequestFlags<'_>,
    workload: &Workload,
    params_for_tp: &dyn Fn(u32) -> RooflineParams,
) -> Result<()> {
    if let Some(spec) = flags.spec {
        let proposer = match &spec.draft {
            None => Proposer::Ngram,
            Some(shape) => {
                let tp = spec.draft_tp.unwrap_or(config.model.tensor_parallel);
                if tp > config.model.tensor_parallel {
                    bail!(
                        "--spec tp={tp}: the draft runs on the target's {} GPUs",
                        config.model.tensor_parallel
                    );
                }
                crate::serve_cmd::check_tensor_parallel("--spec draft", tp, shape)?;
                let gpu = config.model.gpu;
                Proposer::Draft(Box::new(Roofline::new(shape.clone(), gpu, tp, params_for_tp(tp))))
            }
        };
        config.spec = Some(SpecConfig { proposer, k: spec.k, acceptance: spec.acceptance, seed: spec.seed });
    }
    match (flags.lora, flags.lora_adapters.is_empty()) {
        (Some(lora), _) => {
            let built = LoraConfig::build(lora, flags.lora_adapters, &workload.tenants);
            config.lora = Some(built.map_err(|e| anyhow::anyhow!("--lora-adapter: {e}"))?);
        }
        (None, false) => bail!("--lora-adapter needs --lora rank=R (the slots and the default rank)"),
        (None, true) => {}
    }
    config.kv_offload = flags.kv_offload;
    Ok(())
}

/// The counters of a run that used any of the flags, as JSON (None otherwise, so runs
/// without them print exactly what they printed before).
pub fn features_json(config: &ServeConfig, stats: &RequestFeatureStats) -> Option<Value> {
    let mut out = serde_json::Map::new();
    if let Some(spec) = &config.spec {
        let steps = stats.spec_steps.max(1) as f64;
        out.insert(
            "speculative".into(),
            json!({
                "proposer": match spec.proposer { Proposer::Draft(ref d) => d.model.name.clone(), Proposer::Ngram => "ngram".into() },
                "k": spec.k,
                "acceptance": spec.acceptance,
                "expected_tokens_per_step": cotenant_serve::spec::expected_tokens_per_step(spec.k, spec.acceptance),
                "steps": stats.spec_steps,
                "proposed_tokens": stats.spec_proposed_tokens,
                "accepted_tokens": stats.spec_accepted_tokens,
                "tokens_per_step": (stats.spec_accepted_tokens + stats.spec_steps) as f64 / steps,
                "proposal_s": stats.spec_proposal_s,
                "verification_extra_s": stats.spec_verification_extra_s,
            }),
        );
    }
    if let Some(lora) = &config.lora {
        out.insert(
            "lora".into(),
            json!({
                "adapters": lora.adapters.len(),
                "slots": lora.slots,
                "loads": stats.lora_loads,
                "evictions": stats.lora_evictions,
                "load_s": stats.lora_load_s,
                "compute_s": stats.lora_compute_s,
                "slot_waits": stats.lora_slot_waits,
            }),
        );
    }
    if config.kv_offload.is_some() {
        out.insert(
            "kv_offload".into(),
            json!({
                "swapped_out_tokens": stats.swapped_out_tokens,
                "swapped_in_tokens": stats.swapped_in_tokens,
                "swap_s": stats.swap_s,
                "fallbacks_to_recompute": stats.swap_fallbacks,
            }),
        );
    }
    if out.is_empty() {
        return None;
    }
    out.insert("recomputed_tokens".into(), json!(stats.recomputed_tokens));
    Some(Value::Object(out))
}

/// One text line per feature of `report["request_features"]`, if present.
pub fn features_text(report: &Value) -> String {
    let Some(Value::Object(features)) = report.get("request_features") else { return String::new() };
    let mut out = String::new();
    for (name, value) in features {
        let text = match value {
            Value::Object(fields) => {
                fields.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
            }
            other => other.to_string(),
        };
        out.push_str(&format!("  {name}: {text}\n"));
    }
    out
}
