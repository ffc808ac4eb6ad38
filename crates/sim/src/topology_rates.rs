//! Topology-aware rates (docs/topology.md): a multi-node job runs at its inner rate
//! times the slowdown its actual placement gives its communication,
//!
//! ```text
//! rate = inner x 1 / ((1 - f) + f x B_ref / B_eff)
//! ```
//!
//! with `f = JobProfile::comm_fraction` (the share of a step spent in scale-out
//! communication at the reference bandwidth), `B_ref` a node's NIC and `B_eff` the
//! bandwidth of the slowest of the job's communication groups (tensor, data- and
//! pipeline-parallel, `core::topology::for_each_group`):
//!
//! - a group inside one NVLink domain has no scale-out traffic (no slowdown);
//! - a group inside one leaf runs at the NIC, `B_ref`;
//! - a group across leaves runs at its slowest node's uplink share,
//!   `core::topology::LinkLedger::node_share`: under ECMP `min(NIC, uplink / flows on
//!   the uplink its node hashed onto)` (so it depends on the other jobs' flows; the
//!   engine re-rates the jobs whose uplinks change load when a job starts or stops),
//!   under vClos `min(NIC, k uplink / n)` on its own `k` reserved uplinks;
//! - on a torus, `min(NIC, link / h)` for the longest hop `h` between consecutive ranks
//!   of the group (ring order, wrapping).
//!
//! A job that names a model can instead be timed by a [`StepTimeModel`] (the hook the
//! training model, `perf::train::iteration_time`, plugs into): its rate is then the
//! inner rate times `t(reference links) / t(actual links)`.

use cotenant_core::topology::{for_each_group, group_spreads, GroupKind, LinkLedger};
use cotenant_core::{Cluster, GpuId, JobSpec, NodeId};

use crate::rates::{Placed, RateModel};

/// The bandwidth each kind of communication group of a job gets from its placement,
/// Gbit/s: the slowest group of each kind. `f64::INFINITY` where every group of the
/// kind stays inside an NVLink domain (or the job has none of that kind).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupLinks {
    pub tensor_gbps: f64,
    pub pipeline_gbps: f64,
    pub data_gbps: f64,
    /// The reference: a node's NIC, uncontended.
    pub nic_gbps: f64,
    /// NVLink bandwidth per GPU inside a domain.
    pub nvlink_gbps: f64,
}

impl GroupLinks {
    /// The slowest group of any kind.
    pub fn slowest(&self) -> f64 {
        self.tensor_gbps.min(self.pipeline_gbps).min(self.data_gbps)
    }

    /// `B_eff` of the communication fraction: the slowest data-parallel or tensor group
    /// (the gradient all-reduce and, should a tensor group leave its NVLink domain, its
    /// all-reduces dominate scale-out traffic; pipeline sends carry one activation per
    /// micro-batch boundary and are left out), or the slowest pipeline or tensor group for a
    /// job without data parallelism.
    pub fn scale_out(&self, data_parallel: bool) -> f64 {
        let other = if data_parallel { self.data_gbps } else { self.pipeline_gbps };
        self.tensor_gbps.min(other)
    }

    /// Every group on the best links a placement can give: tensor groups on NVLink,
    /// pipeline and data-parallel groups on uncontended NICs.
    pub fn reference(nic_gbps: f64, nvlink_gbps: f64) -> GroupLinks {
        GroupLinks {
            tensor_gbps: f64::INFINITY,
            pipeline_gbps: nic_gbps,
            data_gbps: nic_gbps,
            nic_gbps,
            nvlink_gbps,
        }
    }
}

/// Seconds per training step of a job on given links, for jobs whose shape the model
/// knows (it returns `None` for the others, which fall back to the communication
/// fraction). The lead wires `perf::train::iteration_time` here for jobs that name a model.
pub trait StepTimeModel: Send + Sync {
    fn step_time(&self, job: &JobSpec, links: &GroupLinks) -> Option<f64>;
}

/// A rate model that slows multi-node jobs by what their placement gives their
/// communication (module doc).
pub struct TopologyRates {
    inner: Box<dyn RateModel>,
    step_time: Option<Box<dyn StepTimeModel>>,
}

impl std::fmt::Debug for TopologyRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyRates").field("step_time", &self.step_time.is_some()).finish()
    }
}

impl TopologyRates {
    pub fn new(inner: Box<dyn RateModel>) -> TopologyRates {
        TopologyRates { inner, step_time: None }
    }

    /// Times jobs the model knows with `model` instead of their communication fraction.
    pub fn with_step_time(mut self, model: Box<dyn StepTimeModel>) -> TopologyRates {
        self.step_time = Some(model);
        self
    }
}

/// The factor `1 / ((1 - f) + f B_ref / B_eff)`; 1 when `B_eff` is infinite.
pub fn comm_factor(f: f64, b_ref: f64, b_eff: f64) -> f64 {
    if f <= 0.0 || b_eff.is_infinite() {
        return 1.0;
    }
    1.0 / ((1.0 - f) + f * b_ref / b_eff)
}

impl RateModel for TopologyRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let rate = self.inner.rate(job, placed);
        let Some(links) = placed.cluster.links() else { return rate };
        if placed.gpus.len() < 2 || (job.profile.comm_fraction <= 0.0 && self.step_time.is_none()) {
            return rate;
        }
        let first = placed.cluster.node_of(placed.gpus[0]);
        if placed.gpus.iter().all(|&g| placed.cluster.node_of(g) == first) {
            return rate;
        }
        let groups = group_links(placed.cluster, links, job, placed.gpus);
        if let Some(model) = &self.step_time {
            let reference = GroupLinks::reference(groups.nic_gbps, groups.nvlink_gbps);
            if let (Some(best), Some(actual)) =
                (model.step_time(job, &reference), model.step_time(job, &groups))
            {
                if best > 0.0 && actual > 0.0 {
                    return rate * best / actual;
                }
            }
        }
        let data_parallel =
            job.profile.layout.filter(|l| l.gpus() == placed.gpus.len() as u32).is_none_or(|l| l.data > 1);
        rate * comm_factor(job.profile.comm_fraction, groups.nic_gbps, groups.scale_out(data_parallel))
    }
}

/// The bandwidth of each kind of group of `job` on `gpus` (GPU `r` is rank `r`).
pub fn group_links(cluster: &Cluster, links: &LinkLedger, job: &JobSpec, gpus: &[GpuId]) -> GroupLinks {
    let topology = &links.topology;
    let nic = topology.nic_gbps;
    let mut out = GroupLinks::reference(nic, topology.nvlink_gbps);
    out.pipeline_gbps = f64::INFINITY;
    out.data_gbps = f64::INFINITY;
    let rank_nodes: Vec<NodeId> = gpus.iter().map(|&g| cluster.node_of(g)).collect();
    let layout = job.profile.layout.filter(|l| l.gpus() == gpus.len() as u32);
    if layout.is_none_or(|l| l.tensor == 1 && l.pipeline == 1) {
        // One data-parallel group of every rank: no group enumeration.
        out.data_gbps = group_bandwidth(cluster, links, job, &rank_nodes);
        return out;
    }
    let mut nodes: Vec<NodeId> = Vec::new();
    for_each_group(layout, gpus.len() as u32, |kind, ranks| {
        nodes.clear();
        nodes.extend(ranks.iter().map(|&r| rank_nodes[r as usize]));
        let bandwidth = group_bandwidth(cluster, links, job, &nodes);
        let slot = match kind {
            GroupKind::Tensor => &mut out.tensor_gbps,
            GroupKind::Data => &mut out.data_gbps,
            GroupKind::Pipeline => &mut out.pipeline_gbps,
        };
        *slot = slot.min(bandwidth);
    });
    out
}

/// Bandwidth of one group whose ranks sit on `nodes` (rank order).
fn group_bandwidth(cluster: &Cluster, links: &LinkLedger, job: &JobSpec, nodes: &[NodeId]) -> f64 {
    let topology = &links.topology;
    let first = nodes[0];
    if nodes.iter().all(|&n| n == first) {
        return f64::INFINITY;
    }
    let spec = cluster.spec();
    let domain = topology.domain_of(spec, first);
    if topology.nvlink_domain_gpus > 0 && nodes.iter().all(|&n| topology.domain_of(spec, n) == domain) {
        return f64::INFINITY;
    }
    let nic = topology.nic_gbps;
    if let Some(torus) = &topology.torus {
        let hops = (0..nodes.len())
            .map(|i| torus.hops(nodes[i].0, nodes[(i + 1) % nodes.len()].0))
            .max()
            .unwrap_or(1);
        return nic.min(torus.link_gbps / f64::from(hops.max(1)));
    }
    let leaf = links.leaf_of(first);
    if nodes.iter().all(|&n| links.leaf_of(n) == leaf) {
        return nic;
    }
    let mut distinct = nodes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    links.least_share(job.id, &distinct)
}

/// Arnold's measure over a run: for every start of a job on more than one node, the
/// largest number of leaves one of its data-parallel or pipeline groups spans
/// (`core::topology::max_spread`), in start order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpreadStats {
    pub spreads: Vec<u32>,
    /// The same for data-parallel groups alone.
    pub data_spreads: Vec<u32>,
}

impl SpreadStats {
    pub fn record(&mut self, cluster: &Cluster, job: &JobSpec, gpus: &[GpuId]) {
        let Some(links) = cluster.links() else { return };
        let nodes: Vec<NodeId> = gpus.iter().map(|&g| cluster.node_of(g)).collect();
        if nodes.iter().all(|&n| Some(&n) == nodes.first()) {
            return;
        }
        let (dp, pp) = group_spreads(links.leaf_table(), &nodes, job.profile.layout);
        self.spreads.push(dp.max(pp));
        self.data_spreads.push(dp);
    }

    pub fn mean_data(&self) -> f64 {
        mean(&self.data_spreads)
    }

    pub fn mean(&self) -> f64 {
        mean(&self.spreads)
    }

    pub fn max(&self) -> u32 {
        self.spreads.iter().copied().max().unwrap_or(0)
    }
}

fn mean(values: &[u32]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().map(|&s| f64::from(s)).sum::<f64>() / values.len() as f64
}
