//! What happens to one request inside a replica beyond plain continuous batching:
//! speculative decoding ([`crate::spec`]), multi-LoRA adapters ([`crate::lora`]) and KV
//! offload to CPU memory ([`crate::offload`]). The event loop calls these hooks at fixed
//! points (admission, preemption, completion, a decoding row's tokens, the iteration's
//! time); with none of the three configured every hook is the identity, so runs without
//! them are unchanged to the byte.

use cotenant_perf::{BatchEntry, MemoryPlan, Roofline};

use crate::lora::{Acquired, AdapterSlots, LoraConfig};
use crate::offload::{OffloadConfig, SwapSpace};
use crate::request::{Request, RequestId};
use crate::sim::{ServeConfig, ServeError};
use crate::spec::SpecConfig;
use crate::state::Seq;

/// Counters of the three features over a run (all zero when none is configured, except
/// `recomputed_tokens`, which counts plain recompute preemptions too).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestFeatureStats {
    /// Decoding rows that ran a speculative step.
    pub spec_steps: u64,
    pub spec_proposed_tokens: u64,
    pub spec_accepted_tokens: u64,
    /// Seconds of draft-model steps, and of the verification's extra LM-head rows.
    pub spec_proposal_s: f64,
    pub spec_verification_extra_s: f64,
    pub lora_loads: u64,
    pub lora_evictions: u64,
    pub lora_load_s: f64,
    /// Seconds of SGMV shrink/expand added to batches.
    pub lora_compute_s: f64,
    /// Admissions refused because every adapter slot held an adapter in use.
    pub lora_slot_waits: u64,
    pub swapped_out_tokens: u64,
    pub swapped_in_tokens: u64,
    pub swap_s: f64,
    /// Preemptions that recomputed because the CPU swap space was full.
    pub swap_fallbacks: u64,
    /// KV tokens dropped at preemptions, to be computed again.
    pub recomputed_tokens: u64,
}

/// The three features' configuration and state over a run.
#[derive(Debug)]
pub struct RequestFeatures {
    spec: Option<SpecConfig>,
    lora: Option<LoraConfig>,
    lora_slots: Vec<AdapterSlots>,
    /// Per adapter: seconds to load it (precomputed).
    lora_load_s: Vec<f64>,
    offload: Option<OffloadConfig>,
    swap_spaces: Vec<SwapSpace>,
    /// Per request: KV tokens swapped out to CPU memory (0: none).
    swapped_tokens: Vec<u32>,
    /// KV bytes per token per GPU that a swap moves (target and draft).
    swap_bytes_per_token: f64,
    /// Per replica: transfer seconds (adapter loads, swaps) charged to its next iteration.
    pending_s: Vec<f64>,
    scratch: Vec<BatchEntry>,
    adapter_tokens: Vec<(u32, u64)>,
    pub stats: RequestFeatureStats,
}

/// Refuses feature settings outside their ranges (the CLI parsers check them first).
pub fn validate(config: &ServeConfig, tenants: usize) -> Result<(), ServeError> {
    let bad = |field, value: String, allowed| Err(ServeError::BadConfig { field, value, allowed });
    if let Some(spec) = &config.spec {
        if !(1..=crate::spec::MAX_SPEC_TOKENS).contains(&spec.k) {
            return bad("spec.k", spec.k.to_string(), "an integer in [1, 32]");
        }
        if !(0.0..=1.0).contains(&spec.acceptance) {
            return bad("spec.acceptance", spec.acceptance.to_string(), "a probability in [0, 1]");
        }
    }
    if let Some(lora) = &config.lora {
        if lora.tenant_adapter.len() != tenants {
            return bad("lora.tenant_adapter", lora.tenant_adapter.len().to_string(), "one entry per tenant");
        }
        if lora.slots == 0 {
            return bad("lora.slots", "0".into(), "at least 1");
        }
        if !(lora.pcie_gb_per_s.is_finite() && lora.pcie_gb_per_s > 0.0) {
            return bad("lora.pcie_gb_per_s", lora.pcie_gb_per_s.to_string(), "a bandwidth > 0");
        }
        let adapters = lora.adapters.len() as u32;
        if lora.tenant_adapter.iter().flatten().any(|&a| a >= adapters)
            || lora.adapters.iter().any(|a| a.rank == 0)
        {
            return bad(
                "lora.adapters",
                format!("{adapters} adapters"),
                "ranks >= 1, and tenants naming one of them",
            );
        }
    }
    if config.kv_capacity_tokens.is_none() && (config.spec.is_some() || config.lora.is_some()) {
        let plan = config.memory_plan();
        let block = u64::from(config.kv_block_tokens);
        if plan.kv_tokens >= block && kv_capacity_tokens(config, &plan) < block {
            let (draft_weights, _) = config.spec.as_ref().map_or((0.0, 0.0), SpecConfig::draft_memory);
            let (model, tp) = (&config.model.model, config.model.tensor_parallel);
            let slots = config.lora.as_ref().map_or(0.0, |lora| lora.slot_bytes(model, tp));
            let gib = |bytes: f64| bytes / cotenant_perf::GIB;
            return bad(
                "spec draft weights + lora slots",
                format!("{:.2} GiB + {:.2} GiB per GPU", gib(draft_weights), gib(slots)),
                "less than the KV memory the target leaves (a KV block must remain)",
            );
        }
    }
    if let Some(offload) = &config.kv_offload {
        if !(offload.cpu_gib.is_finite() && offload.cpu_gib >= 0.0) {
            return bad("kv_offload.cpu_gib", offload.cpu_gib.to_string(), "a size >= 0");
        }
        if !(offload.pcie_gb_per_s.is_finite() && offload.pcie_gb_per_s > 0.0) {
            return bad("kv_offload.pcie_gb_per_s", offload.pcie_gb_per_s.to_string(), "a bandwidth > 0");
        }
    }
    Ok(())
}

/// KV bytes per token per GPU with the draft model's cache beside the target's.
fn kv_bytes_per_token(config: &ServeConfig) -> f64 {
    let target = config.model.model.kv_bytes_per_token_per_gpu(config.model.tensor_parallel);
    target + config.spec.as_ref().map_or(0.0, |spec| spec.draft_memory().1)
}

/// KV-cache tokens per replica from `plan` once a draft model's weights and KV, and the
/// LoRA slots, are taken out of the KV budget; `plan.kv_tokens` without them.
pub fn kv_capacity_tokens(config: &ServeConfig, plan: &MemoryPlan) -> u64 {
    let (draft_weights, draft_kv) = config.spec.as_ref().map_or((0.0, 0.0), SpecConfig::draft_memory);
    let (model, tp) = (&config.model.model, config.model.tensor_parallel);
    let slots = config.lora.as_ref().map_or(0.0, |lora| lora.slot_bytes(model, tp));
    if draft_weights == 0.0 && draft_kv == 0.0 && slots == 0.0 {
        return plan.kv_tokens;
    }
    let free = plan.kv_bytes - draft_weights - slots;
    if free > 0.0 {
        (free / (plan.kv_bytes_per_token + draft_kv)) as u64
    } else {
        0
    }
}

impl RequestFeatures {
    pub fn new(config: &ServeConfig, requests: usize) -> RequestFeatures {
        let replicas = config.replicas as usize;
        let swap_bytes_per_token = kv_bytes_per_token(config);
        let (model, tp) = (&config.model.model, config.model.tensor_parallel);
        let lora_load_s = config.lora.as_ref().map_or_else(Vec::new, |lora| {
            (0..lora.adapters.len() as u32).map(|a| lora.load_s(model, tp, a)).collect()
        });
        let swap_space = |offload: &OffloadConfig| SwapSpace {
            capacity_tokens: offload.capacity_tokens(swap_bytes_per_token),
            used_tokens: 0,
        };
        RequestFeatures {
            spec: config.spec.clone(),
            lora_slots: config
                .lora
                .as_ref()
                .map_or_else(Vec::new, |l| vec![AdapterSlots::new(l.slots); replicas]),
            lora: config.lora.clone(),
            lora_load_s,
            swap_spaces: config.kv_offload.as_ref().map_or_else(Vec::new, |o| vec![swap_space(o); replicas]),
            offload: config.kv_offload,
            swapped_tokens: if config.kv_offload.is_some() { vec![0; requests] } else { Vec::new() },
            swap_bytes_per_token,
            pending_s: vec![0.0; replicas],
            scratch: Vec::new(),
            adapter_tokens: Vec::new(),
            stats: RequestFeatureStats::default(),
        }
    }

    /// Whether any of the three features is configured.
    pub fn enabled(&self) -> bool {
        self.spec.is_some() || self.lora.is_some() || self.offload.is_some()
    }

    /// New tokens a decoding request computes this step: 1, or its speculative step's.
    pub fn decode_tokens(&self, request: &Request, seq: &Seq, budget: u32) -> u32 {
        match &self.spec {
            Some(spec) => {
                spec.step_tokens(request.output_tokens.saturating_sub(seq.generated).max(1), budget)
            }
            None => 1,
        }
    }

    /// Tokens `entry` emits when its iteration ends: 0 or 1, or a speculative decoding
    /// row's accepted proposals plus one.
    pub fn emitted_tokens(&mut self, id: RequestId, seq: &Seq, entry: BatchEntry, prefill: bool) -> u32 {
        let Some(spec) = &self.spec else { return u32::from(entry.emits_token) };
        if prefill {
            return u32::from(entry.emits_token);
        }
        let proposals = entry.new_tokens - 1;
        let accepted = spec.accepted(id, seq.generated, proposals);
        self.stats.spec_steps += 1;
        self.stats.spec_proposed_tokens += u64::from(proposals);
        self.stats.spec_accepted_tokens += u64::from(accepted);
        accepted + 1
    }

    /// Seconds the features add to the iteration of a batch (ids, entries and prefill
    /// flags aligned): proposals, verification rows, LoRA matmuls, and the transfers
    /// (adapter loads, swaps) charged to this replica since its last iteration.
    pub fn iteration_extra_s(
        &mut self,
        model: &Roofline,
        requests: &[Request],
        seqs: &[Seq],
        ids: &[RequestId],
        entries: &[BatchEntry],
        prefill: &[bool],
    ) -> f64 {
        let Some(&first) = ids.first() else { return 0.0 };
        if !self.enabled() {
            return 0.0;
        }
        let replica = seqs[first as usize].replica as usize;
        let mut extra_s = std::mem::take(&mut self.pending_s[replica]);
        if let Some(spec) = &self.spec {
            let proposal_s = spec.proposal_s(entries, prefill, &mut self.scratch);
            let verification_s = SpecConfig::verification_extra_s(model, entries, prefill);
            self.stats.spec_proposal_s += proposal_s;
            self.stats.spec_verification_extra_s += verification_s;
            extra_s += proposal_s + verification_s;
        }
        if let Some(lora) = &self.lora {
            self.adapter_tokens.clear();
            for (&id, entry) in ids.iter().zip(entries) {
                let Some(adapter) = lora.tenant_adapter[requests[id as usize].tenant.index()] else {
                    continue;
                };
                match self.adapter_tokens.iter_mut().find(|(a, _)| *a == adapter) {
                    Some((_, tokens)) => *tokens += u64::from(entry.new_tokens),
                    None => self.adapter_tokens.push((adapter, u64::from(entry.new_tokens))),
                }
            }
            let compute_s = lora.batch_extra_s(model, &self.adapter_tokens);
            self.stats.lora_compute_s += compute_s;
            extra_s += compute_s;
        }
        extra_s
    }

    /// Whether `request` may be admitted on `replica` now: false while its adapter is not
    /// resident and every slot holds an adapter in use.
    pub fn can_admit(&mut self, request: &Request, replica: u32) -> bool {
        let Some(adapter) = self.adapter_of(request) else { return true };
        let ok = self.lora_slots[replica as usize].can_acquire(adapter);
        self.stats.lora_slot_waits += u64::from(!ok);
        ok
    }

    /// On readmission of a request whose KV was swapped out: its KV counts as present
    /// again (`seq.kv_tokens` raised to what was swapped). Returns the tokens added, which
    /// the caller takes back if the admission fails.
    pub fn restore_swapped(&self, id: RequestId, seq: &mut Seq) -> u32 {
        let swapped = self.swapped_tokens.get(id as usize).copied().unwrap_or(0);
        let restored = swapped.saturating_sub(seq.kv_tokens);
        seq.kv_tokens += restored;
        restored
    }

    /// `request` (`id`) joined the running set of `replica`: its adapter's slot is taken
    /// (loaded if needed) and its swapped KV copied back, both charged to this iteration.
    pub fn admitted(&mut self, request: &Request, id: RequestId, replica: u32) {
        if let Some(adapter) = self.adapter_of(request) {
            if let Acquired::Loaded { evicted } = self.lora_slots[replica as usize].acquire(adapter) {
                let load_s = self.lora_load_s[adapter as usize];
                self.pending_s[replica as usize] += load_s;
                self.stats.lora_loads += 1;
                self.stats.lora_evictions += u64::from(evicted.is_some());
                self.stats.lora_load_s += load_s;
            }
        }
        if let Some(offload) = &self.offload {
            let swapped = std::mem::take(&mut self.swapped_tokens[id as usize]);
            if swapped > 0 {
                self.swap_spaces[replica as usize].give_back(u64::from(swapped));
                let swap_s = offload.transfer_s(u64::from(swapped), self.swap_bytes_per_token);
                self.pending_s[replica as usize] += swap_s;
                self.stats.swapped_in_tokens += u64::from(swapped);
                self.stats.swap_s += swap_s;
            }
        }
    }

    /// `request` (`id`, state `seq` before its KV is freed) is being preempted: its
    /// adapter's slot is let go, and its KV swapped out when the CPU space holds it
    /// (charged to the iteration being formed), else counted as recomputed.
    pub fn preempted(&mut self, request: &Request, id: RequestId, seq: &Seq) {
        let replica = seq.replica as usize;
        if let Some(adapter) = self.adapter_of(request) {
            self.lora_slots[replica].release(adapter);
        }
        let tokens = u64::from(seq.kv_tokens);
        if let Some(offload) = &self.offload {
            if tokens > 0 && self.swap_spaces[replica].try_take(tokens) {
                self.swapped_tokens[id as usize] = seq.kv_tokens;
                let swap_s = offload.transfer_s(tokens, self.swap_bytes_per_token);
                self.pending_s[replica] += swap_s;
                self.stats.swapped_out_tokens += tokens;
                self.stats.swap_s += swap_s;
                return;
            }
            self.stats.swap_fallbacks += u64::from(tokens > 0);
        }
        self.stats.recomputed_tokens += tokens;
    }

    /// `request` finished on `replica`: its adapter's slot is let go.
    pub fn completed(&mut self, request: &Request, replica: u32) {
        if let Some(adapter) = self.adapter_of(request) {
            self.lora_slots[replica as usize].release(adapter);
        }
    }

    fn adapter_of(&self, request: &Request) -> Option<u32> {
        self.lora.as_ref().and_then(|lora| lora.tenant_adapter[request.tenant.index()])
    }
}
