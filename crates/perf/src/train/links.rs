//! The links a placement gives each communication group, and collective costs on them.

use crate::gpu::GpuSpec;

/// Latency of one ring step inside an NVLink domain, seconds (NCCL's intra-node base
/// latency is a few microseconds).
pub const NVLINK_STEP_LATENCY_S: f64 = 5e-6;
/// Latency of one ring step across the network, seconds (InfiniBand/RoCE with NCCL).
pub const NIC_STEP_LATENCY_S: f64 = 10e-6;

/// One point-to-point link: bandwidth (one direction, GB/s) and per-message latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub gb_per_s: f64,
    pub latency_s: f64,
}

impl Link {
    /// Seconds to move `bytes` over the link.
    pub fn transfer_s(&self, bytes: f64) -> f64 {
        self.latency_s + bytes / (self.gb_per_s * 1e9)
    }
}

/// One level of a hierarchical collective: `ranks` members of the group meet at this
/// level (e.g. 4 ranks inside a node), each with `link` to its peers at this level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tier {
    pub ranks: u32,
    pub link: Link,
}

/// The path of a group's collective, innermost tier first; the group has the product of
/// the tiers' ranks.
pub type TierPath = Vec<Tier>;

/// The links the placement gives a training job's groups.
#[derive(Clone, Debug, PartialEq)]
pub struct Links {
    /// The tensor-parallel group's collective path.
    pub tensor: TierPath,
    /// One pipeline hop (stage to next stage).
    pub pipeline: Link,
    /// The data-parallel group's collective path.
    pub data: TierPath,
}

/// The fabric a job runs on: the NVLink domain and its two link classes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fabric {
    /// GPUs per NVLink domain (or PCIe node).
    pub domain_gpus: u32,
    pub nvlink: Link,
    /// Per-GPU network link across domains.
    pub nic: Link,
}

impl Fabric {
    /// The catalog's fabric for a GPU: its NVLink domain, NVLink and NIC bandwidths.
    pub fn of(gpu: &GpuSpec) -> Fabric {
        Fabric {
            domain_gpus: gpu.nvlink_domain_gpus.max(1),
            nvlink: Link { gb_per_s: gpu.interconnect_gb_per_s, latency_s: NVLINK_STEP_LATENCY_S },
            nic: Link { gb_per_s: gpu.nic_gb_per_s, latency_s: NIC_STEP_LATENCY_S },
        }
    }

    /// The path of a group of `ranks` GPUs whose consecutive members are `stride` GPUs
    /// apart in a packed rank order (domains filled in order): as many members as fit
    /// one domain meet over NVLink, the rest over the network.
    pub fn group_path(&self, ranks: u32, stride: u32) -> TierPath {
        let per_domain = (self.domain_gpus / stride.max(1)).clamp(1, ranks.max(1));
        let per_domain = largest_divisor_at_most(ranks.max(1), per_domain);
        let mut path = Vec::new();
        if per_domain > 1 {
            path.push(Tier { ranks: per_domain, link: self.nvlink });
        }
        if ranks / per_domain > 1 {
            path.push(Tier { ranks: ranks / per_domain, link: self.nic });
        }
        path
    }
}

fn largest_divisor_at_most(n: u32, most: u32) -> u32 {
    (1..=most.min(n)).rev().find(|k| n.is_multiple_of(*k)).unwrap_or(1)
}

impl Links {
    /// Every group on the best links a packed placement gives (Megatron's rank order:
    /// tensor innermost, then data, then pipeline): the tensor group inside an NVLink
    /// domain when it fits; data-parallel peers sharing a domain where the tensor group
    /// leaves room; a pipeline hop over NVLink only when a whole stage (t x d GPUs) is
    /// smaller than a domain.
    pub fn best(fabric: &Fabric, tensor: u32, data: u32) -> Links {
        let stage_gpus = tensor * data;
        let pipeline = if stage_gpus < fabric.domain_gpus { fabric.nvlink } else { fabric.nic };
        Links { tensor: fabric.group_path(tensor, 1), pipeline, data: fabric.group_path(data, tensor) }
    }
}

/// Seconds of a hierarchical ring all-reduce of `bytes` (per rank) over `path`.
///
/// Tier by tier, innermost first: a ring reduce-scatter among the tier's r ranks moves
/// (r-1)/r of the data the tier sees, then the next tier works on 1/r of it; the
/// all-gathers mirror the reduce-scatters. So tier i costs
/// 2 (r_i - 1)/r_i x (bytes / (r_1 ... r_{i-1})) / B_i + 2 (r_i - 1) latency_i,
/// and a single tier is the classic ring 2 (g-1)/g x bytes / B. The bandwidth a tier
/// gets depends on how many of the group's ranks share a node (AxoNN's model).
pub fn ring_allreduce_time(bytes: f64, path: &[Tier]) -> f64 {
    2.0 * ring_reduce_scatter_time(bytes, path)
}

/// Seconds of a hierarchical ring reduce-scatter (or all-gather) of `bytes`:
/// sum over tiers of (r_i - 1)/r_i x (bytes / inner ranks) / B_i + (r_i - 1) latency_i.
pub fn ring_reduce_scatter_time(bytes: f64, path: &[Tier]) -> f64 {
    let mut seen = bytes;
    let mut seconds = 0.0;
    for tier in path {
        let ranks = f64::from(tier.ranks.max(1));
        seconds +=
            (ranks - 1.0) / ranks * seen / (tier.link.gb_per_s * 1e9) + (ranks - 1.0) * tier.link.latency_s;
        seen /= ranks;
    }
    seconds
}

/// GPUs in a path: the product of its tiers' ranks.
pub fn path_ranks(path: &[Tier]) -> u32 {
    path.iter().map(|t| t.ranks.max(1)).product()
}
