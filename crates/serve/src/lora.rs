//! Multi-LoRA serving (S-LoRA, MLSys'24; Punica, MLSys'24): many low-rank adapters over
//! one base model, batched together, with a fixed number of GPU adapter slots.
//!
//! An adapter of rank r on a linear layer with a k x n weight adds A (k x r) and B (r x n).
//! Per GPU under tensor parallelism (S-LoRA's partitioning): a column-parallel layer (Q,
//! K, V, gate, up) keeps A whole and splits B's columns, a row-parallel layer (O, down)
//! splits A's rows and keeps B whole, so each GPU holds r (k_gpu + n_gpu) per layer with
//! (k_gpu, n_gpu) = (k, n / tp) or (k / tp, n):
//!
//! ```text
//! adapter bytes per GPU = r x b x L x sum over adapted layers of (k_gpu + n_gpu)
//! batch extra (SGMV)    = smax( sum_a 2 T_a r_a L D / (eta_c F),  sum_a bytes_a / (eta_m BW) )
//!                         + 2 x (adapted operators) x L x (fixed cost of a linear kernel)
//! load                  = bytes per GPU / PCIe bandwidth (each GPU over its own link)
//! ```
//! with D = sum (k_gpu + n_gpu), T_a the batch's tokens on adapter a and the sum over the
//! distinct adapters of the batch (each adapter's weights read once), F and BW one GPU's
//! peaks with the base model's efficiencies; a shrink and an expand kernel per adapted
//! operator (QKV fused and O; with `all`, also gate-up and down) and layer each pay the
//! roofline's fixed linear-kernel cost (5.4-5.6 us fitted on A100 and H100, 0 on GPUs
//! without a fit). The GPU memory of `slots` adapters of the
//! largest rank comes out of the KV cache. An adapter that is not resident is copied from
//! host memory when a request that needs it is admitted, into a free slot or else the
//! least recently used slot no running request uses; the copy is charged to the
//! iteration that admits it (vLLM activates LoRAs synchronously before the step's
//! forward; S-LoRA prefetches and overlaps it, so this is the pessimistic end). When
//! every slot holds an adapter in use, the request waits (the admission stops there).

use cotenant_core::TenantSpec;
use cotenant_perf::{ModelShape, Roofline};

/// Largest adapter rank accepted.
pub const MAX_LORA_RANK: u32 = 1024;
/// Most GPU adapter slots per replica.
pub const MAX_LORA_SLOTS: u32 = 4096;
/// Host-to-GPU bandwidth when `pcie=` is not given, GB/s: PCIe 4.0 x16 moves about 25 GB/s
/// of pinned memory in practice (32 GB/s raw). PCIe 5.0 hosts (H100, H200) reach about 50.
pub const DEFAULT_PCIE_GB_PER_S: f64 = 25.0;

/// The linear layers that carry adapters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoraTargets {
    /// Q, K, V and O projections (S-LoRA's and VTC's experiments).
    Attention,
    /// The attention projections and the MLP (gate, up, down).
    All,
}

/// One adapter.
#[derive(Clone, Debug, PartialEq)]
pub struct Adapter {
    pub name: String,
    pub rank: u32,
}

/// `--lora` and `--lora-adapter`: the adapters, which tenant uses which, and the slots.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraConfig {
    pub adapters: Vec<Adapter>,
    /// Per tenant (workload order): index into `adapters`, None for the base model.
    pub tenant_adapter: Vec<Option<u32>>,
    /// GPU adapter slots per replica (vLLM's `max_loras`).
    pub slots: u32,
    pub pcie_gb_per_s: f64,
    pub targets: LoraTargets,
}

/// `--lora rank=R[,slots=S][,pcie=GBPS][,targets=attn|all]` as written.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraArgs {
    pub rank: u32,
    pub slots: u32,
    pub pcie_gb_per_s: f64,
    pub targets: LoraTargets,
}

impl LoraArgs {
    pub fn parse(text: &str) -> Result<LoraArgs, String> {
        let mut args = LoraArgs {
            rank: 0,
            slots: 4,
            pcie_gb_per_s: DEFAULT_PCIE_GB_PER_S,
            targets: LoraTargets::Attention,
        };
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("`{pair}`: expected key=value"))?;
            match key {
                "rank" => args.rank = parse_rank(value)?,
                "slots" => {
                    args.slots =
                        value.parse().ok().filter(|s| (1..=MAX_LORA_SLOTS).contains(s)).ok_or_else(|| {
                            format!("slots=`{value}`: must be an integer in [1, {MAX_LORA_SLOTS}]")
                        })?;
                }
                "pcie" => args.pcie_gb_per_s = parse_bandwidth(value)?,
                "targets" => {
                    args.targets = match value {
                        "attn" | "attention" => LoraTargets::Attention,
                        "all" => LoraTargets::All,
                        _ => return Err(format!("targets=`{value}`: expected attn or all")),
                    }
                }
                _ => return Err(format!("`{key}`: unknown field (expected rank, slots, pcie, targets)")),
            }
        }
        if args.rank == 0 {
            return Err("missing rank=R (the adapters' rank)".into());
        }
        Ok(args)
    }
}

fn parse_rank(value: &str) -> Result<u32, String> {
    value
        .parse()
        .ok()
        .filter(|r| (1..=MAX_LORA_RANK).contains(r))
        .ok_or_else(|| format!("rank `{value}`: must be an integer in [1, {MAX_LORA_RANK}]"))
}

/// A bandwidth in GB/s: a finite number in (0, 10000].
pub fn parse_bandwidth(value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|b| b.is_finite() && *b > 0.0 && *b <= 10_000.0)
        .ok_or_else(|| format!("pcie=`{value}`: must be a bandwidth in GB/s in (0, 10000]"))
}

/// `--lora-adapter TENANT=NAME:RANK` (or `TENANT=none`): (tenant, adapter or None).
pub fn parse_tenant_adapter(text: &str) -> Result<(String, Option<Adapter>), String> {
    let (tenant, adapter) = text.split_once('=').ok_or("expected TENANT=NAME:RANK or TENANT=none")?;
    if adapter == "none" {
        return Ok((tenant.to_string(), None));
    }
    let (name, rank) = adapter.split_once(':').ok_or("expected TENANT=NAME:RANK or TENANT=none")?;
    if name.is_empty() {
        return Err("empty adapter name".into());
    }
    Ok((tenant.to_string(), Some(Adapter { name: name.to_string(), rank: parse_rank(rank)? })))
}

impl LoraConfig {
    /// Every tenant gets its own adapter of `args.rank`, named after it, unless `overrides`
    /// (from [`parse_tenant_adapter`]) give it another (tenants may share a name; the same
    /// name must keep one rank) or none.
    pub fn build(
        args: &LoraArgs,
        overrides: &[(String, Option<Adapter>)],
        tenants: &[TenantSpec],
    ) -> Result<LoraConfig, String> {
        if let Some((unknown, _)) =
            overrides.iter().find(|(name, _)| !tenants.iter().any(|t| t.name == *name))
        {
            let known: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
            return Err(format!("no tenant named `{unknown}` (tenants: {})", known.join(", ")));
        }
        let mut adapters: Vec<Adapter> = Vec::new();
        let mut tenant_adapter = Vec::with_capacity(tenants.len());
        for tenant in tenants {
            let chosen = match overrides.iter().rev().find(|(name, _)| *name == tenant.name) {
                Some((_, adapter)) => adapter.clone(),
                None => Some(Adapter { name: tenant.name.clone(), rank: args.rank }),
            };
            let Some(adapter) = chosen else {
                tenant_adapter.push(None);
                continue;
            };
            let index = match adapters.iter().position(|a| a.name == adapter.name) {
                Some(index) if adapters[index].rank != adapter.rank => {
                    return Err(format!(
                        "adapter `{}` given ranks {} and {}",
                        adapter.name, adapters[index].rank, adapter.rank
                    ))
                }
                Some(index) => index,
                None => {
                    adapters.push(adapter);
                    adapters.len() - 1
                }
            };
            tenant_adapter.push(Some(index as u32));
        }
        Ok(LoraConfig {
            adapters,
            tenant_adapter,
            slots: args.slots,
            pcie_gb_per_s: args.pcie_gb_per_s,
            targets: args.targets,
        })
    }

    /// Bytes one GPU holds for adapter `index`.
    pub fn adapter_bytes(&self, model: &ModelShape, tp: u32, index: u32) -> f64 {
        adapter_bytes_per_gpu(model, tp, self.targets, self.adapters[index as usize].rank)
    }

    /// GPU bytes the slots reserve per GPU: `slots` adapters of the largest rank.
    pub fn slot_bytes(&self, model: &ModelShape, tp: u32) -> f64 {
        let largest = self.adapters.iter().map(|a| a.rank).max().unwrap_or(0);
        f64::from(self.slots) * adapter_bytes_per_gpu(model, tp, self.targets, largest)
    }

    /// Seconds to copy adapter `index` from host memory to each GPU.
    pub fn load_s(&self, model: &ModelShape, tp: u32, index: u32) -> f64 {
        self.adapter_bytes(model, tp, index) / (self.pcie_gb_per_s * 1e9)
    }

    /// Seconds the adapters add to a batch: `tokens_per_adapter` lists each distinct
    /// adapter of the batch with its tokens (SGMV: shrink and expand per adapted layer,
    /// each adapter's weights read once).
    pub fn batch_extra_s(&self, roofline: &Roofline, tokens_per_adapter: &[(u32, u64)]) -> f64 {
        if tokens_per_adapter.is_empty() {
            return 0.0;
        }
        let (model, tp) = (&roofline.model, roofline.tensor_parallel);
        let dims = adapted_dims_per_gpu(model, tp, self.targets) * f64::from(model.layers);
        let (mut flops, mut bytes) = (0.0, 0.0);
        for &(adapter, tokens) in tokens_per_adapter {
            flops += 2.0 * tokens as f64 * f64::from(self.adapters[adapter as usize].rank) * dims;
            bytes += self.adapter_bytes(model, tp, adapter);
        }
        let (gpu, params) = (&roofline.gpu, &roofline.params);
        let compute_s = flops / (gpu.dense_tflops * 1e12 * params.compute_efficiency);
        let memory_s = bytes / (gpu.memory_tb_per_s * 1e12 * params.memory_efficiency);
        let operators = match self.targets {
            LoraTargets::Attention => 2.0,
            LoraTargets::All => 4.0,
        };
        let kernels_s = 2.0 * operators * f64::from(model.layers) * params.linear_kernel_s;
        roofline.smooth_max(compute_s, memory_s) + kernels_s
    }
}

/// Sum over the adapted linear layers of one transformer layer of (k_gpu + n_gpu): the
/// per-GPU input and output dimensions of their A and B factors at tensor parallelism `tp`.
pub fn adapted_dims_per_gpu(model: &ModelShape, tp: u32, targets: LoraTargets) -> f64 {
    let tp_f = f64::from(tp.max(1));
    let (d, h, ff) = (f64::from(model.hidden), f64::from(model.head_dim), f64::from(model.ffn_hidden));
    let q = f64::from(model.query_heads) * h;
    let kv_per_gpu = f64::from(model.kv_heads_per_gpu(tp)) * h;
    // Column-parallel Q, K, V: (d, n / tp) with K and V replicated past their heads;
    // row-parallel O: (q / tp, d).
    let attention = (d + q / tp_f) + 2.0 * (d + kv_per_gpu) + (q / tp_f + d);
    match targets {
        LoraTargets::Attention => attention,
        // Gate and up column-parallel (d, ff / tp) each, down row-parallel (ff / tp, d).
        LoraTargets::All => attention + 2.0 * (d + ff / tp_f) + (ff / tp_f + d),
    }
}

/// Bytes one GPU holds for an adapter of rank `rank`: r x b x L x [`adapted_dims_per_gpu`].
pub fn adapter_bytes_per_gpu(model: &ModelShape, tp: u32, targets: LoraTargets, rank: u32) -> f64 {
    f64::from(rank)
        * f64::from(model.bytes_per_param)
        * f64::from(model.layers)
        * adapted_dims_per_gpu(model, tp, targets)
}

/// One slot's occupant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    adapter: u32,
    /// Running requests that use it.
    users: u32,
    last_use: u64,
}

/// What acquiring an adapter's slot did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// It was resident.
    Resident,
    /// It was copied in, into a free slot or over `evicted`.
    Loaded { evicted: Option<u32> },
}

/// The adapter slots of one replica: an LRU over adapters no running request uses.
#[derive(Clone, Debug, Default)]
pub struct AdapterSlots {
    capacity: usize,
    slots: Vec<Slot>,
    clock: u64,
}

impl AdapterSlots {
    pub fn new(capacity: u32) -> AdapterSlots {
        AdapterSlots { capacity: capacity as usize, slots: Vec::new(), clock: 0 }
    }

    /// Whether a request on `adapter` could start now: resident, a free slot, or an idle one.
    pub fn can_acquire(&self, adapter: u32) -> bool {
        self.slots.len() < self.capacity || self.slots.iter().any(|s| s.adapter == adapter || s.users == 0)
    }

    /// Takes a use of `adapter`'s slot, loading it if needed. Call only after
    /// [`Self::can_acquire`] said yes.
    pub fn acquire(&mut self, adapter: u32) -> Acquired {
        self.clock += 1;
        if let Some(slot) = self.slots.iter_mut().find(|s| s.adapter == adapter) {
            slot.users += 1;
            slot.last_use = self.clock;
            return Acquired::Resident;
        }
        let fresh = Slot { adapter, users: 1, last_use: self.clock };
        if self.slots.len() < self.capacity {
            self.slots.push(fresh);
            return Acquired::Loaded { evicted: None };
        }
        let victim = self
            .slots
            .iter_mut()
            .filter(|s| s.users == 0)
            .min_by_key(|s| s.last_use)
            .expect("acquire called without a free or idle slot");
        let evicted = victim.adapter;
        *victim = fresh;
        Acquired::Loaded { evicted: Some(evicted) }
    }

    /// Drops a use of `adapter` (a request finished or was preempted).
    pub fn release(&mut self, adapter: u32) {
        let slot =
            self.slots.iter_mut().find(|s| s.adapter == adapter).expect("released adapter is resident");
        assert!(slot.users > 0, "adapter {adapter} released more often than acquired");
        slot.users -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::{find_gpu, RooflineParams};

    fn llama8b_h100() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
    }

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs()
    }

    fn two_tenants(rank: u32) -> LoraConfig {
        let args = LoraArgs { rank, slots: 2, pcie_gb_per_s: 25.0, targets: LoraTargets::Attention };
        LoraConfig::build(&args, &[], &[TenantSpec::new("a"), TenantSpec::new("b")]).expect("builds")
    }

    /// Llama-3.1-8B (d 4096, 32 query heads and 8 KV heads of 128, 32 layers, bf16), rank 16
    /// on Q, K, V, O at TP 1: D = (4096 + 4096) + 2 (4096 + 1024) + (4096 + 4096) = 26,624;
    /// bytes = 16 x 2 x 32 x 26,624 = 27,262,976 (26 MiB); over 25 GB/s: 1,090.5 us.
    /// At TP 2: D = (4096 + 2048) + 2 (4096 + 512) + (2048 + 4096) = 21,504.
    #[test]
    fn adapter_bytes_and_load_time_by_hand() {
        let model = ModelShape::parse("Llama-3.1-8B").expect("catalog");
        assert_eq!(adapted_dims_per_gpu(&model, 1, LoraTargets::Attention), 26_624.0);
        assert_eq!(adapted_dims_per_gpu(&model, 2, LoraTargets::Attention), 21_504.0);
        // All: + 2 (4096 + 14336) + (14336 + 4096) = 55,296 more.
        assert_eq!(adapted_dims_per_gpu(&model, 1, LoraTargets::All), 26_624.0 + 55_296.0);
        let lora = two_tenants(16);
        assert_eq!(lora.adapter_bytes(&model, 1, 0), 27_262_976.0);
        assert!(close(lora.load_s(&model, 1, 0), 1_090.519e-6, 1e-6));
        assert_eq!(lora.slot_bytes(&model, 1), 2.0 * 27_262_976.0);
    }

    /// A batch of 100 tokens on each of two rank-16 adapters, same deployment (F = 0.70 x
    /// 989e12, BW = 0.75 x 3.35e12): FLOPs 2 x 200 x 16 x 26,624 x 32 = 5.4526e9 -> 7.876 us;
    /// bytes 2 x 27,262,976 -> 21.702 us; smax = 21.702 x (1 + (7.876/21.702)^3)^(1/3) = 22.042 us.
    /// One adapter with all 200 tokens: 7.876 us against 10.851 us -> 12.088 us.
    #[test]
    fn lora_batch_extra_time_by_hand() {
        let lora = two_tenants(16);
        let roofline = llama8b_h100();
        let two = lora.batch_extra_s(&roofline, &[(0, 100), (1, 100)]);
        assert!(close(two, 22.042e-6, 1e-4), "{two}");
        let one = lora.batch_extra_s(&roofline, &[(0, 200)]);
        assert!(close(one, 12.088e-6, 1e-4), "{one}");
        assert_eq!(lora.batch_extra_s(&roofline, &[]), 0.0);
        // With a 5 us fixed cost per linear kernel: + 2 kernels x 2 operators (QKV, O) x 32
        // layers x 5 us = 640 us.
        let params = RooflineParams { linear_kernel_s: 5e-6, ..RooflineParams::default() };
        let with_kernels = Roofline::new(roofline.model.clone(), roofline.gpu, 1, params);
        let one_with_kernels = lora.batch_extra_s(&with_kernels, &[(0, 200)]);
        assert!(close(one_with_kernels, 12.088e-6 + 640e-6, 1e-4), "{one_with_kernels}");
    }

    /// Two slots, three adapters: 0 and 1 load into free slots; 2 waits while both are in
    /// use; after 0's request finishes, 2 evicts 0 (idle), not 1 (in use).
    #[test]
    fn slots_are_an_lru_over_idle_adapters() {
        let mut slots = AdapterSlots::new(2);
        assert_eq!(slots.acquire(0), Acquired::Loaded { evicted: None });
        assert_eq!(slots.acquire(1), Acquired::Loaded { evicted: None });
        assert_eq!(slots.acquire(1), Acquired::Resident);
        assert!(!slots.can_acquire(2));
        assert!(slots.can_acquire(1));
        slots.release(0);
        assert!(slots.can_acquire(2));
        assert_eq!(slots.acquire(2), Acquired::Loaded { evicted: Some(0) });
        slots.release(1);
        slots.release(1);
        slots.release(2);
        // Both idle: 1 was used before 2, so it goes first.
        assert_eq!(slots.acquire(0), Acquired::Loaded { evicted: Some(1) });
    }

    #[test]
    fn parses_and_builds_adapters_per_tenant() {
        let args = LoraArgs::parse("rank=8,slots=3,pcie=50,targets=all").expect("parses");
        assert_eq!(args, LoraArgs { rank: 8, slots: 3, pcie_gb_per_s: 50.0, targets: LoraTargets::All });
        let tenants = [TenantSpec::new("a"), TenantSpec::new("b"), TenantSpec::new("c")];
        let overrides = [
            parse_tenant_adapter("b=shared:32").expect("b"),
            parse_tenant_adapter("c=shared:32").expect("c"),
        ];
        let lora = LoraConfig::build(&args, &overrides, &tenants).expect("builds");
        assert_eq!(lora.adapters.len(), 2);
        assert_eq!(lora.tenant_adapter, vec![Some(0), Some(1), Some(1)]);
        let base = LoraConfig::build(&args, &[parse_tenant_adapter("a=none").expect("none")], &tenants[..1]);
        assert_eq!(base.expect("builds").tenant_adapter, vec![None]);
        for (text, needle) in [
            ("slots=2", "missing rank"),
            ("rank=0", "rank `0`"),
            ("rank=8,pcie=0", "pcie=`0`"),
            ("rank=8,bogus=1", "unknown field"),
        ] {
            let err = LoraArgs::parse(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
        let clash = [parse_tenant_adapter("a=x:8").expect("a"), parse_tenant_adapter("b=x:16").expect("b")];
        assert!(LoraConfig::build(&args, &clash, &tenants).expect_err("clash").contains("ranks 8 and 16"));
        let unknown = [parse_tenant_adapter("zz=x:8").expect("zz")];
        assert!(LoraConfig::build(&args, &unknown, &tenants)
            .expect_err("unknown")
            .contains("no tenant named `zz`"));
        assert!(parse_tenant_adapter("a=x").is_err());
    }
}
