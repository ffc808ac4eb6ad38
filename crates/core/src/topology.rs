//! The network a cluster's nodes hang off (docs/topology.md): NVLink domains, nodes
//! under leaf switches (the node's `rack`) under a spine tier with an oversubscription
//! ratio, or a 3D torus; and the live state of its links ([`LinkLedger`]): which
//! flows of which jobs cross each leaf uplink under ECMP routing, and which uplinks
//! each job holds under vClos.
//!
//! A cluster without a topology (`ClusterSpec::topology == None`) has no ledger, and
//! nothing here runs.

use std::collections::BTreeMap;

use crate::cluster::ClusterSpec;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::Layout;

/// How flows between leaves choose a spine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Routing {
    /// Each node of a job hashes onto one spine (ECMP); flows hashed onto the same
    /// leaf uplink share its bandwidth, across jobs.
    #[default]
    Ecmp,
    /// vClos (2023): a job spanning leaves reserves uplinks to the same spines on each of
    /// its leaves, for itself alone; it waits when no such set is free.
    Vclos,
}

impl Routing {
    pub fn name(self) -> &'static str {
        match self {
            Routing::Ecmp => "ecmp",
            Routing::Vclos => "vclos",
        }
    }
}

/// A 3D torus of nodes: node `n` sits at `(n mod x, (n / x) mod y, n / (x y))`, and each
/// node links to its six neighbours (wrapping at the edges).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Torus {
    pub dims: [u32; 3],
    /// Bandwidth of one torus link, Gbit/s per direction.
    pub link_gbps: f64,
}

impl Torus {
    pub fn coords(&self, node: u32) -> [u32; 3] {
        let [x, y, _] = self.dims;
        [node % x, (node / x) % y, node / (x * y)]
    }
    pub fn node_at(&self, c: [u32; 3]) -> u32 {
        let [x, y, _] = self.dims;
        c[0] + x * (c[1] + y * c[2])
    }
    /// Hops between two nodes on the shortest wrapped path (dimension-order routing).
    pub fn hops(&self, a: u32, b: u32) -> u32 {
        let (ca, cb) = (self.coords(a), self.coords(b));
        (0..3)
            .map(|i| {
                let d = ca[i].abs_diff(cb[i]);
                d.min(self.dims[i] - d)
            })
            .sum()
    }
    pub fn nodes(&self) -> u64 {
        self.dims.iter().map(|&d| u64::from(d)).product()
    }
}

/// The network of a cluster. Leaves are the nodes' `rack`s.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// GPUs per NVLink domain; 0: one node (an 8-GPU server). Larger domains (72 GPUs
    /// over 9 nodes) group consecutive nodes.
    pub nvlink_domain_gpus: u32,
    /// NVLink bandwidth per GPU, Gbit/s (for step-time models; the rate model treats
    /// traffic inside a domain as free of scale-out cost).
    pub nvlink_gbps: f64,
    /// Scale-out NIC bandwidth per node, Gbit/s: the reference bandwidth `B_ref`.
    pub nic_gbps: f64,
    /// Spine switches; each leaf has one uplink to each.
    pub spines: u32,
    /// Downlink over uplink bandwidth of a leaf (1: non-blocking).
    pub oversubscription: f64,
    /// Bandwidth of one leaf uplink, Gbit/s; `None`: the largest leaf's nodes x NIC /
    /// (spines x oversubscription).
    pub uplink_gbps: Option<f64>,
    /// A 3D torus instead of leaves and spines.
    pub torus: Option<Torus>,
    pub routing: Routing,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            nvlink_domain_gpus: 0,
            nvlink_gbps: 7200.0,
            nic_gbps: 400.0,
            spines: 8,
            oversubscription: 1.0,
            uplink_gbps: None,
            torus: None,
            routing: Routing::Ecmp,
        }
    }
}

/// A topology that does not fit its cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("{field}: {message}")]
    Field { field: &'static str, message: String },
}

fn field(field: &'static str, message: impl Into<String>) -> TopologyError {
    TopologyError::Field { field, message: message.into() }
}

impl Topology {
    /// Checks the numbers and that the topology fits `spec`'s nodes.
    pub fn validate(&self, spec: &ClusterSpec) -> Result<(), TopologyError> {
        for (name, v) in [("nic-gbps", self.nic_gbps), ("nvlink-gbps", self.nvlink_gbps)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(field(name, format!("must be positive, got {v}")));
            }
        }
        if self.spines == 0 {
            return Err(field("spines", "must be at least 1"));
        }
        if !(self.oversubscription.is_finite() && self.oversubscription >= 1.0) {
            return Err(field(
                "oversubscription",
                format!("must be at least 1, got {}", self.oversubscription),
            ));
        }
        if let Some(up) = self.uplink_gbps {
            if !(up.is_finite() && up > 0.0) {
                return Err(field("uplink-gbps", format!("must be positive, got {up}")));
            }
        }
        let per_node = spec.nodes.iter().map(|n| n.gpus).max().unwrap_or(0).max(1);
        if self.nvlink_domain_gpus > per_node && !self.nvlink_domain_gpus.is_multiple_of(per_node) {
            return Err(field(
                "nvlink-domain",
                format!("{} GPUs is not a whole number of {per_node}-GPU nodes", self.nvlink_domain_gpus),
            ));
        }
        if let Some(torus) = &self.torus {
            if torus.dims.contains(&0) {
                return Err(field("torus", "every dimension must be at least 1"));
            }
            if torus.nodes() != spec.nodes.len() as u64 {
                return Err(field(
                    "torus",
                    format!(
                        "{}x{}x{} = {} positions, but the cluster has {} nodes",
                        torus.dims[0],
                        torus.dims[1],
                        torus.dims[2],
                        torus.nodes(),
                        spec.nodes.len()
                    ),
                ));
            }
            if !(torus.link_gbps.is_finite() && torus.link_gbps > 0.0) {
                return Err(field("torus-link-gbps", format!("must be positive, got {}", torus.link_gbps)));
            }
        }
        Ok(())
    }

    /// Bandwidth of one leaf uplink, Gbit/s.
    pub fn uplink(&self, spec: &ClusterSpec) -> f64 {
        self.uplink_gbps.unwrap_or_else(|| {
            let largest = leaf_sizes(spec).into_iter().max().unwrap_or(1) as f64;
            largest * self.nic_gbps / (f64::from(self.spines) * self.oversubscription)
        })
    }

    /// The NVLink domain of `node` (nodes of one domain are consecutive).
    pub fn domain_of(&self, spec: &ClusterSpec, node: NodeId) -> u32 {
        let per_node = spec.nodes.get(node.index()).map_or(1, |n| n.gpus.max(1));
        let nodes_per_domain =
            if self.nvlink_domain_gpus > per_node { self.nvlink_domain_gpus / per_node } else { 1 };
        node.0 / nodes_per_domain
    }
}

/// Nodes per leaf (rack), by dense leaf index.
fn leaf_sizes(spec: &ClusterSpec) -> Vec<u32> {
    let (leaf_of, leaves) = dense_leaves(spec);
    let mut sizes = vec![0u32; leaves];
    for l in leaf_of {
        sizes[l as usize] += 1;
    }
    sizes
}

/// Each node's leaf as a dense index (racks in order of first appearance), and the count.
pub fn dense_leaves(spec: &ClusterSpec) -> (Vec<u32>, usize) {
    let mut ids: BTreeMap<u32, u32> = BTreeMap::new();
    let mut leaf_of = Vec::with_capacity(spec.nodes.len());
    for node in &spec.nodes {
        let next = ids.len() as u32;
        leaf_of.push(*ids.entry(node.rack).or_insert(next));
    }
    (leaf_of, ids.len())
}

/// The spine ECMP hashes a job's node onto: a SplitMix64 finaliser of (job, node)
/// modulo the spine count, standing for a switch's hash of a flow's 5-tuple.
pub fn ecmp_spine(job: JobId, node: NodeId, spines: u32) -> u32 {
    let mut z = (u64::from(job.0) << 32 | u64::from(node.0)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % u64::from(spines.max(1))) as u32
}

/// Uplinks a job spanning `leaves` (leaf, its nodes there) needs on each of them under
/// vClos: enough for its nodes' NICs, at most every spine.
pub fn vclos_need(leaves: &[(u32, u32)], nic_gbps: f64, uplink_gbps: f64, spines: u32) -> u32 {
    let most = leaves.iter().map(|&(_, n)| n).max().unwrap_or(0);
    ((f64::from(most) * nic_gbps / uplink_gbps).ceil() as u32).clamp(1, spines)
}

/// The lowest-numbered `need` spines whose uplinks from every leaf in `leaves` are free
/// (`taken(leaf, spine)` false), or `None`.
pub fn choose_spines(
    leaves: &[(u32, u32)],
    need: u32,
    spines: u32,
    taken: impl Fn(u32, u32) -> bool,
) -> Option<Vec<u32>> {
    let chosen: Vec<u32> =
        (0..spines).filter(|&s| leaves.iter().all(|&(l, _)| !taken(l, s))).take(need as usize).collect();
    (chosen.len() as u32 == need).then_some(chosen)
}

/// The communication groups of a job of `n` ranks laid out as (tensor, pipeline, data),
/// ranks ordered tensor fastest, then data, then pipeline (Megatron's order): rank
/// `r = pp t d + dp t + tp`. Calls `each(kind, ranks)` for every tensor, data-parallel and
/// pipeline group. Without a layout (or one that does not match `n`), one data-parallel
/// group of all ranks.
pub fn for_each_group(layout: Option<Layout>, n: u32, mut each: impl FnMut(GroupKind, &[u32])) {
    let Layout { tensor: t, pipeline: p, data: d } = layout
        .filter(|l| l.gpus() == n && l.gpus() > 0)
        .unwrap_or(Layout { tensor: 1, pipeline: 1, data: n });
    let mut ranks = Vec::new();
    if t > 1 {
        for start in (0..n).step_by(t as usize) {
            ranks.clear();
            ranks.extend(start..start + t);
            each(GroupKind::Tensor, &ranks);
        }
    }
    if d > 1 {
        for pp in 0..p {
            for tp in 0..t {
                ranks.clear();
                ranks.extend((0..d).map(|dp| pp * t * d + dp * t + tp));
                each(GroupKind::Data, &ranks);
            }
        }
    }
    if p > 1 {
        for dp in 0..d {
            for tp in 0..t {
                ranks.clear();
                ranks.extend((0..p).map(|pp| pp * t * d + dp * t + tp));
                each(GroupKind::Pipeline, &ranks);
            }
        }
    }
}

/// Which parallel dimension a communication group belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKind {
    Tensor,
    Data,
    Pipeline,
}

/// Arnold's (2025) spread for GPUs given in rank order: the most leaves any data-parallel
/// group spans and the most any pipeline group spans, `(max DP spread, max PP spread)`.
pub fn group_spreads(leaf_of: &[u32], gpus_nodes: &[NodeId], layout: Option<Layout>) -> (u32, u32) {
    let (mut dp, mut pp) = (0, 0);
    let mut seen: Vec<u32> = Vec::new();
    for_each_group(layout, gpus_nodes.len() as u32, |kind, ranks| {
        if kind == GroupKind::Tensor {
            return;
        }
        seen.clear();
        seen.extend(ranks.iter().map(|&r| leaf_of[gpus_nodes[r as usize].index()]));
        seen.sort_unstable();
        seen.dedup();
        let spread = seen.len() as u32;
        match kind {
            GroupKind::Data => dp = dp.max(spread),
            _ => pp = pp.max(spread),
        }
    });
    (dp, pp)
}

/// The largest spread of any data-parallel or pipeline group (the unweighted maximum).
pub fn max_spread(leaf_of: &[u32], gpus_nodes: &[NodeId], layout: Option<Layout>) -> u32 {
    let (dp, pp) = group_spreads(leaf_of, gpus_nodes, layout);
    dp.max(pp)
}

/// Calls `each(node, count)` once per run of consecutive GPUs on one node.
fn for_node_runs(gpus: &[GpuId], node_of: &impl Fn(GpuId) -> NodeId, mut each: impl FnMut(NodeId, u32)) {
    let mut run: Option<(NodeId, u32)> = None;
    for &g in gpus {
        let node = node_of(g);
        match &mut run {
            Some((n, count)) if *n == node => *count += 1,
            _ => {
                if let Some((n, count)) = run.take() {
                    each(n, count);
                }
                run = Some((node, 1));
            }
        }
    }
    if let Some((n, count)) = run {
        each(n, count);
    }
}

/// What one job holds on the links.
#[derive(Clone, Debug, Default)]
struct JobLinks {
    /// GPUs it holds per node.
    nodes: BTreeMap<NodeId, u32>,
    /// Uplinks (leaf x spines + spine) its ECMP flows cross, one entry per node.
    flows: Vec<usize>,
    /// Uplinks it reserved (vClos).
    reserved: Vec<usize>,
}

/// Live link state of a cluster with a leaf-spine topology (kept by `Cluster`).
///
/// Invariant: `reserved[u]` names at most one job, and that job lists `u` in its
/// reservation; `flows[u]` lists each ECMP flow crossing uplink `u` once.
#[derive(Clone, Debug)]
pub struct LinkLedger {
    pub topology: Topology,
    leaf_of: Vec<u32>,
    leaves: usize,
    uplink_gbps: f64,
    flows: Vec<Vec<JobId>>,
    reserved: Vec<Option<JobId>>,
    jobs: BTreeMap<JobId, JobLinks>,
    /// Jobs whose links' load changed since the engine last asked.
    touched: Vec<JobId>,
}

impl LinkLedger {
    pub fn new(spec: &ClusterSpec, topology: Topology) -> LinkLedger {
        let (leaf_of, leaves) = dense_leaves(spec);
        let uplinks = leaves * topology.spines as usize;
        LinkLedger {
            uplink_gbps: topology.uplink(spec),
            topology,
            leaf_of,
            leaves,
            flows: vec![Vec::new(); uplinks],
            reserved: vec![None; uplinks],
            jobs: BTreeMap::new(),
            touched: Vec::new(),
        }
    }

    pub fn leaf_of(&self, node: NodeId) -> u32 {
        self.leaf_of[node.index()]
    }
    pub fn leaf_table(&self) -> &[u32] {
        &self.leaf_of
    }
    pub fn leaves(&self) -> usize {
        self.leaves
    }
    pub fn uplink_gbps(&self) -> f64 {
        self.uplink_gbps
    }
    pub fn spines(&self) -> u32 {
        self.topology.spines
    }
    fn uplink(&self, leaf: u32, spine: u32) -> usize {
        leaf as usize * self.topology.spines as usize + spine as usize
    }
    /// Whether uplink (leaf, spine) is reserved by some job.
    pub fn is_reserved(&self, leaf: u32, spine: u32) -> bool {
        self.reserved[self.uplink(leaf, spine)].is_some()
    }
    /// The job holding uplink (leaf, spine) under vClos.
    pub fn reserved_owner(&self, leaf: u32, spine: u32) -> Option<JobId> {
        self.reserved[self.uplink(leaf, spine)]
    }
    /// Uplinks reserved in all.
    pub fn reserved_count(&self) -> usize {
        self.reserved.iter().filter(|r| r.is_some()).count()
    }
    pub fn uplink_count(&self) -> usize {
        self.reserved.len()
    }
    /// ECMP flows crossing uplink (leaf, spine).
    pub fn flows_on(&self, leaf: u32, spine: u32) -> usize {
        self.flows[self.uplink(leaf, spine)].len()
    }
    /// Uplinks `job` reserved per leaf it spans (0 if none).
    pub fn reserved_by(&self, job: JobId) -> usize {
        let Some(links) = self.jobs.get(&job) else { return 0 };
        let leaves = self.job_leaves(links).len().max(1);
        links.reserved.len() / leaves
    }

    /// (leaf, nodes of the job there) for the given nodes, leaves in order.
    pub fn leaves_of_nodes(&self, nodes: impl IntoIterator<Item = NodeId>) -> Vec<(u32, u32)> {
        let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
        for n in nodes {
            *counts.entry(self.leaf_of(n)).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    fn job_leaves(&self, links: &JobLinks) -> Vec<(u32, u32)> {
        self.leaves_of_nodes(links.nodes.keys().copied())
    }

    /// Under vClos: whether a job on `nodes` (distinct) would find its isolated uplinks.
    pub fn can_reserve(&self, nodes: &[NodeId]) -> bool {
        if self.topology.routing != Routing::Vclos {
            return true;
        }
        let leaves = self.leaves_of_nodes(nodes.iter().copied());
        if leaves.len() < 2 {
            return true;
        }
        let need = vclos_need(&leaves, self.topology.nic_gbps, self.uplink_gbps, self.topology.spines);
        choose_spines(&leaves, need, self.topology.spines, |l, s| self.is_reserved(l, s)).is_some()
    }

    /// `job` took `gpus` (on `node_of`'s nodes).
    pub fn take(&mut self, job: JobId, gpus: &[GpuId], node_of: impl Fn(GpuId) -> NodeId) {
        let links = self.jobs.entry(job).or_default();
        for_node_runs(gpus, &node_of, |node, count| *links.nodes.entry(node).or_default() += count);
        self.refresh(job);
    }

    /// `job` gave back `gpus`.
    pub fn release(&mut self, job: JobId, gpus: &[GpuId], node_of: impl Fn(GpuId) -> NodeId) {
        if let Some(links) = self.jobs.get_mut(&job) {
            for_node_runs(gpus, &node_of, |node, count| {
                if let Some(held) = links.nodes.get_mut(&node) {
                    *held = held.saturating_sub(count);
                    if *held == 0 {
                        links.nodes.remove(&node);
                    }
                }
            });
        }
        self.refresh(job);
    }

    /// Recomputes `job`'s flows and reservation from its nodes.
    fn refresh(&mut self, job: JobId) {
        // Fast path: a job on one leaf that held no flows or uplinks changes no link.
        if let Some(links) = self.jobs.get(&job) {
            let first = links.nodes.keys().next().map(|&n| self.leaf_of(n));
            if links.flows.is_empty()
                && links.reserved.is_empty()
                && links.nodes.keys().all(|&n| Some(self.leaf_of(n)) == first)
            {
                if links.nodes.is_empty() {
                    self.jobs.remove(&job);
                }
                return;
            }
        }
        let Some(mut links) = self.jobs.remove(&job) else { return };
        let mut changed: Vec<usize> = Vec::new();
        for u in links.flows.drain(..) {
            let list = &mut self.flows[u];
            if let Some(i) = list.iter().position(|&j| j == job) {
                list.remove(i);
            }
            changed.push(u);
        }
        for u in links.reserved.drain(..) {
            self.reserved[u] = None;
        }
        let leaves = self.job_leaves(&links);
        if leaves.len() >= 2 {
            let spines = self.topology.spines;
            let reservation = if self.topology.routing == Routing::Vclos {
                let need = vclos_need(&leaves, self.topology.nic_gbps, self.uplink_gbps, spines);
                choose_spines(&leaves, need, spines, |l, s| self.is_reserved(l, s))
            } else {
                None
            };
            match reservation {
                Some(chosen) => {
                    for &(l, _) in &leaves {
                        for &s in &chosen {
                            let u = self.uplink(l, s);
                            self.reserved[u] = Some(job);
                            links.reserved.push(u);
                        }
                    }
                }
                None => {
                    for &node in links.nodes.keys() {
                        let u = self.uplink(self.leaf_of(node), ecmp_spine(job, node, spines));
                        self.flows[u].push(job);
                        links.flows.push(u);
                        changed.push(u);
                    }
                }
            }
        }
        changed.sort_unstable();
        changed.dedup();
        for u in changed {
            self.touched.extend(self.flows[u].iter().filter(|&&j| j != job));
        }
        if !links.nodes.is_empty() {
            self.jobs.insert(job, links);
        }
    }

    /// Jobs whose shared links changed load since the last call, in id order.
    pub fn take_touched(&mut self) -> Vec<JobId> {
        let mut jobs = std::mem::take(&mut self.touched);
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// The least [`LinkLedger::node_share`] over `nodes` (distinct), the NIC at most.
    pub fn least_share(&self, job: JobId, nodes: &[NodeId]) -> f64 {
        let nic = self.topology.nic_gbps;
        if self.jobs.get(&job).is_some_and(|l| !l.reserved.is_empty()) {
            return nodes.iter().map(|&n| self.node_share(job, n)).fold(nic, f64::min);
        }
        let spines = self.topology.spines;
        let most = nodes
            .iter()
            .map(|&n| self.flows[self.uplink(self.leaf_of(n), ecmp_spine(job, n, spines))].len())
            .max()
            .unwrap_or(0)
            .max(1);
        nic.min(self.uplink_gbps / most as f64)
    }

    /// Cross-leaf bandwidth of `job`'s node `node`, Gbit/s: its NIC, or less when its
    /// uplink is oversubscribed or shared. ECMP: `min(NIC, uplink / flows on it)`; vClos:
    /// `min(NIC, k uplink / n)` for `k` reserved uplinks and `n` nodes of the job on the leaf.
    pub fn node_share(&self, job: JobId, node: NodeId) -> f64 {
        let nic = self.topology.nic_gbps;
        let leaf = self.leaf_of(node);
        if let Some(links) = self.jobs.get(&job).filter(|l| !l.reserved.is_empty()) {
            let on_leaf = links.nodes.keys().filter(|&&n| self.leaf_of(n) == leaf).count().max(1);
            let k = links
                .reserved
                .iter()
                .filter(|&&u| u / self.topology.spines as usize == leaf as usize)
                .count();
            return nic.min(k as f64 * self.uplink_gbps / on_leaf as f64);
        }
        let u = self.uplink(leaf, ecmp_spine(job, node, self.topology.spines));
        let load = self.flows[u].len().max(1);
        nic.min(self.uplink_gbps / load as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_megatron_order() {
        let mut got = Vec::new();
        for_each_group(Some(Layout { tensor: 2, pipeline: 2, data: 2 }), 8, |k, r| got.push((k, r.to_vec())));
        assert!(got.contains(&(GroupKind::Tensor, vec![0, 1])));
        assert!(got.contains(&(GroupKind::Data, vec![0, 2])));
        assert!(got.contains(&(GroupKind::Data, vec![5, 7])));
        assert!(got.contains(&(GroupKind::Pipeline, vec![0, 4])));
        assert!(got.contains(&(GroupKind::Pipeline, vec![3, 7])));
        assert_eq!(got.len(), 4 + 4 + 4);
    }

    #[test]
    fn torus_hops_wrap() {
        let t = Torus { dims: [4, 4, 2], link_gbps: 100.0 };
        assert_eq!(t.coords(t.node_at([3, 2, 1])), [3, 2, 1]);
        // (0,0,0) to (3,0,0): one hop around the wrap; to (2,2,1): 2 + 2 + 1.
        assert_eq!(t.hops(0, t.node_at([3, 0, 0])), 1);
        assert_eq!(t.hops(0, t.node_at([2, 2, 1])), 5);
    }

    #[test]
    fn spines_are_chosen_lowest_first_among_free_ones() {
        let taken = |l: u32, s: u32| (l, s) == (1, 0);
        assert_eq!(choose_spines(&[(0, 2), (1, 2)], 2, 4, taken), Some(vec![1, 2]));
        assert_eq!(choose_spines(&[(0, 2), (1, 2)], 4, 4, taken), None);
    }
}
