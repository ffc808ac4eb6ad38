//! The cluster: nodes with addressable GPUs, and which job holds each GPU.

use crate::host::{HostAlloc, HostLedger};
use crate::ids::{GpuId, GpuTypeId, JobId, NodeId};
use crate::placement::FreeIndex;
use crate::topology::{LinkLedger, Topology, TopologyError};

/// Most GPUs one node may hold; free GPUs of a node are a 64-bit mask.
pub use crate::limits::MAX_GPUS_PER_NODE;

/// One server as configured.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    pub gpu_type: GpuTypeId,
    pub gpus: u32,
    pub cpus: u32,
    pub memory_gib: u32,
    /// Rack (or switch) the node hangs off; placement may prefer one rack.
    pub rack: u32,
    /// Memory of each of its GPUs in GiB (0: not modelled; `crate::sharing`).
    pub gpu_memory_gib: f64,
}

/// A cluster as configured: GPU type names and nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSpec {
    pub gpu_types: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    /// Known departures of capacity (availability windows, sim::faults): a policy
    /// may read them to move work off a node before it leaves. Empty: none known.
    pub departures: Vec<Departure>,
    /// The network (crate::topology, docs/topology.md); `None`: not modelled.
    pub topology: Option<Topology>,
    /// Persistent speed factor of each GPU, indexed by `GpuId` (node order, then slot):
    /// 1.0 is the median GPU of its type, 0.67 one 1.5x slower (crate::variability).
    /// Empty: every GPU runs at 1.0.
    pub gpu_speed: Vec<f64>,
}

/// A node that leaves the cluster at `leaves` and returns at `returns` (never, if
/// `None`), known to policies from the start of the run (Komet-style migration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    pub node: NodeId,
    pub leaves: crate::time::Time,
    pub returns: Option<crate::time::Time>,
}

/// A cluster that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    #[error("the cluster has no GPUs")]
    NoGpus,
    #[error("node {node} has {gpus} GPUs; at most {MAX_GPUS_PER_NODE} per node are supported")]
    TooManyGpusPerNode { node: String, gpus: u32 },
    #[error("node {node} names GPU type #{gpu_type}, but only {known} types are declared")]
    UnknownGpuType { node: String, gpu_type: u32, known: usize },
    #[error("topology {0}")]
    Topology(TopologyError),
    #[error("{given} GPU speed factors given for a cluster of {gpus} GPUs (give one per GPU, or none)")]
    GpuSpeedCount { given: usize, gpus: u32 },
    #[error("GPU {gpu} has speed factor {speed}; factors must be finite and in [{min}, {max}]")]
    BadGpuSpeed { gpu: usize, speed: String, min: String, max: String },
}

impl ClusterSpec {
    /// `nodes` identical nodes of one GPU type, racks of `nodes_per_rack`.
    pub fn homogeneous(gpu_type: &str, nodes: u32, gpus_per_node: u32) -> ClusterSpec {
        let mut spec = ClusterSpec { gpu_types: vec![gpu_type.to_string()], ..Default::default() };
        spec.add_nodes(GpuTypeId(0), nodes, gpus_per_node, 0, 0);
        spec
    }

    /// Appends `count` nodes; returns nothing, names them `<type>-<n>`.
    pub fn add_nodes(&mut self, gpu_type: GpuTypeId, count: u32, gpus: u32, cpus: u32, memory_gib: u32) {
        let type_name = self.gpu_types.get(gpu_type.index()).cloned().unwrap_or_default();
        for _ in 0..count {
            let n = self.nodes.len() as u32;
            self.nodes.push(NodeSpec {
                name: format!("{type_name}-{n}"),
                gpu_type,
                gpus,
                cpus,
                memory_gib,
                rack: n / 16,
                gpu_memory_gib: 0.0,
            });
        }
    }

    /// Sets the GPU memory of every node of `gpu_type` (GiB per GPU; 0: not modelled).
    pub fn set_gpu_memory_gib(&mut self, gpu_type: GpuTypeId, gib: f64) {
        for node in self.nodes.iter_mut().filter(|n| n.gpu_type == gpu_type) {
            node.gpu_memory_gib = gib;
        }
    }

    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// Index of a GPU type by name, adding it if new.
    pub fn gpu_type_id(&mut self, name: &str) -> GpuTypeId {
        match self.gpu_types.iter().position(|t| t == name) {
            Some(i) => GpuTypeId(i as u32),
            None => {
                self.gpu_types.push(name.to_string());
                GpuTypeId(self.gpu_types.len() as u32 - 1)
            }
        }
    }

    pub fn validate(&self) -> Result<(), ClusterError> {
        for node in &self.nodes {
            if node.gpus > MAX_GPUS_PER_NODE {
                return Err(ClusterError::TooManyGpusPerNode { node: node.name.clone(), gpus: node.gpus });
            }
            if node.gpu_type.index() >= self.gpu_types.len() {
                return Err(ClusterError::UnknownGpuType {
                    node: node.name.clone(),
                    gpu_type: node.gpu_type.0,
                    known: self.gpu_types.len(),
                });
            }
        }
        if self.total_gpus() == 0 {
            return Err(ClusterError::NoGpus);
        }
        if let Some(topology) = &self.topology {
            topology.validate(self).map_err(ClusterError::Topology)?;
        }
        crate::variability::check_speeds(&self.gpu_speed, self.total_gpus())?;
        Ok(())
    }
}

/// Live state of the cluster: GPU ownership and node health.
///
/// Invariant: `free_mask[n]` has bit `i` set exactly when GPU `first_gpu[n] + i`
/// is owned by nobody; `index` holds `free_mask[n]` for every node that is up
/// and 0 for every node that is down. A GPU has at most two owners (space
/// sharing): `owner` is set whenever `co_owner` is, and the two differ.
#[derive(Clone, Debug)]
pub struct Cluster {
    spec: ClusterSpec,
    first_gpu: Vec<u32>,
    gpu_node: Vec<NodeId>,
    owner: Vec<Option<JobId>>,
    /// The second job on a space-shared GPU.
    co_owner: Vec<Option<JobId>>,
    free_mask: Vec<u64>,
    up: Vec<bool>,
    /// Free GPUs of nodes that are up, by node and by free count (placement's index).
    index: FreeIndex,
    up_gpus: u32,
    max_gpus_per_node: u32,
    /// Free CPUs and memory per node (crate::host).
    host: HostLedger,
    /// Link loads and reservations when the spec has a topology (crate::topology).
    links: Option<Box<LinkLedger>>,
}

impl Cluster {
    pub fn new(spec: ClusterSpec) -> Result<Cluster, ClusterError> {
        spec.validate()?;
        let mut first_gpu = Vec::with_capacity(spec.nodes.len());
        let mut gpu_node = Vec::new();
        let mut free_mask = Vec::with_capacity(spec.nodes.len());
        for (n, node) in spec.nodes.iter().enumerate() {
            first_gpu.push(gpu_node.len() as u32);
            gpu_node.extend(std::iter::repeat_n(NodeId(n as u32), node.gpus as usize));
            free_mask.push(full_mask(node.gpus));
        }
        let total = gpu_node.len() as u32;
        let max_gpus_per_node = spec.nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
        let spec_links = spec.topology.clone().map(|t| Box::new(LinkLedger::new(&spec, t)));
        let host_capacity =
            spec.nodes.iter().map(|n| HostAlloc { cpus: n.cpus, memory_gib: n.memory_gib }).collect();
        Ok(Cluster {
            host: HostLedger::new(host_capacity),
            index: FreeIndex::new(free_mask.clone(), max_gpus_per_node),
            max_gpus_per_node,
            up: vec![true; spec.nodes.len()],
            owner: vec![None; gpu_node.len()],
            co_owner: vec![None; gpu_node.len()],
            spec,
            first_gpu,
            gpu_node,
            free_mask,
            up_gpus: total,
            links: spec_links,
        })
    }

    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }
    pub fn node_count(&self) -> usize {
        self.spec.nodes.len()
    }
    pub fn node(&self, node: NodeId) -> &NodeSpec {
        &self.spec.nodes[node.index()]
    }
    pub fn gpu_count(&self) -> u32 {
        self.gpu_node.len() as u32
    }
    /// GPUs on nodes that are up.
    pub fn up_gpus(&self) -> u32 {
        self.up_gpus
    }
    /// Free GPUs on nodes that are up.
    pub fn free_gpus(&self) -> u32 {
        self.index.free()
    }
    pub fn is_up(&self, node: NodeId) -> bool {
        self.up[node.index()]
    }
    pub fn node_of(&self, gpu: GpuId) -> NodeId {
        self.gpu_node[gpu.index()]
    }
    pub fn gpu_type_of(&self, gpu: GpuId) -> GpuTypeId {
        self.node(self.node_of(gpu)).gpu_type
    }
    pub fn owner(&self, gpu: GpuId) -> Option<JobId> {
        self.owner.get(gpu.index()).copied().flatten()
    }
    /// The second job sharing `gpu`, if it is space-shared.
    pub fn co_owner(&self, gpu: GpuId) -> Option<JobId> {
        self.co_owner.get(gpu.index()).copied().flatten()
    }
    /// The GPU at `slot` of `node`.
    pub fn gpu(&self, node: NodeId, slot: u32) -> GpuId {
        GpuId(self.first_gpu[node.index()] + slot)
    }
    pub fn slot_of(&self, gpu: GpuId) -> u32 {
        gpu.0 - self.first_gpu[self.node_of(gpu).index()]
    }
    /// Bit `i` set: slot `i` of the node is free (regardless of node health).
    pub fn free_mask(&self, node: NodeId) -> u64 {
        self.free_mask[node.index()]
    }
    pub fn free_masks(&self) -> &[u64] {
        &self.free_mask
    }
    /// Largest GPU count on any node.
    pub fn max_gpus_per_node(&self) -> u32 {
        self.max_gpus_per_node
    }
    /// CPUs and memory per node: capacity, free, and what each job holds (crate::host).
    pub fn host(&self) -> &HostLedger {
        &self.host
    }
    pub(crate) fn host_mut(&mut self) -> &mut HostLedger {
        &mut self.host
    }
    pub(crate) fn free_index(&self) -> &FreeIndex {
        &self.index
    }
    pub fn gpus_of_type(&self, gpu_type: GpuTypeId) -> u32 {
        self.spec.nodes.iter().filter(|n| n.gpu_type == gpu_type).map(|n| n.gpus).sum()
    }

    /// True if every GPU exists, is free, sits on a node that is up, and none repeats;
    /// under vClos routing, also if the job's isolated uplinks are free.
    pub fn can_take(&self, gpus: &[GpuId]) -> bool {
        if has_repeats(gpus) {
            return false;
        }
        let free = gpus.iter().all(|&g| {
            g.index() < self.owner.len()
                && self.owner[g.index()].is_none()
                && self.up[self.node_of(g).index()]
        });
        free && self
            .links
            .as_ref()
            .filter(|l| l.topology.routing == crate::topology::Routing::Vclos)
            .is_none_or(|links| {
                let mut nodes: Vec<NodeId> = gpus.iter().map(|&g| self.node_of(g)).collect();
                nodes.dedup();
                links.can_reserve(&nodes)
            })
    }

    /// Link loads and reservations, when the cluster has a topology.
    pub fn links(&self) -> Option<&LinkLedger> {
        self.links.as_deref()
    }

    /// Jobs whose shared links changed load since the last call (crate::topology).
    pub(crate) fn take_link_changes(&mut self) -> Vec<JobId> {
        self.links.as_mut().map(|l| l.take_touched()).unwrap_or_default()
    }

    /// True if `partner` alone holds every one of `gpus`, so a second job may share them.
    pub fn can_share(&self, gpus: &[GpuId], partner: JobId) -> bool {
        !gpus.is_empty()
            && gpus.iter().all(|&g| {
                g.index() < self.owner.len()
                    && self.owner[g.index()] == Some(partner)
                    && self.co_owner[g.index()].is_none()
            })
    }

    /// Adds `job` as the second owner of `gpus`. Caller has checked [`Cluster::can_share`].
    pub(crate) fn take_shared(&mut self, job: JobId, gpus: &[GpuId]) {
        for &g in gpus {
            assert!(
                self.owner[g.index()].is_some() && self.co_owner[g.index()].is_none(),
                "{g} cannot take a second owner {job}: owners {:?}, {:?}",
                self.owner[g.index()],
                self.co_owner[g.index()]
            );
            self.co_owner[g.index()] = Some(job);
        }
    }

    /// Gives `gpus` to `job`. Caller has checked [`Cluster::can_take`].
    pub(crate) fn take(&mut self, job: JobId, gpus: &[GpuId]) {
        for &g in gpus {
            assert!(
                self.owner[g.index()].is_none(),
                "{g} double-booked: held by {:?}, wanted by {job}",
                self.owner[g.index()]
            );
            self.owner[g.index()] = Some(job);
            let node = self.node_of(g);
            self.free_mask[node.index()] &= !(1u64 << self.slot_of(g));
        }
        self.sync_nodes_of(gpus);
        if let Some(links) = &mut self.links {
            let gpu_node = &self.gpu_node;
            links.take(job, gpus, |g| gpu_node[g.index()]);
        }
    }

    /// Returns `gpus` held by `job`; a GPU becomes free once neither owner holds it.
    pub(crate) fn release(&mut self, job: JobId, gpus: &[GpuId]) {
        for &g in gpus {
            let i = g.index();
            if self.co_owner[i] == Some(job) {
                self.co_owner[i] = None;
                continue;
            }
            assert_eq!(self.owner[i], Some(job), "{g} released by {job}, which does not hold it");
            self.owner[i] = self.co_owner[i].take();
            if self.owner[i].is_some() {
                continue;
            }
            let node = self.node_of(g);
            self.free_mask[node.index()] |= 1u64 << self.slot_of(g);
        }
        self.sync_nodes_of(gpus);
        if let Some(links) = &mut self.links {
            let gpu_node = &self.gpu_node;
            links.release(job, gpus, |g| gpu_node[g.index()]);
        }
    }

    pub(crate) fn set_up(&mut self, node: NodeId, up: bool) {
        let i = node.index();
        if self.up[i] == up {
            return;
        }
        let gpus = self.spec.nodes[i].gpus;
        if up {
            self.up_gpus += gpus;
        } else {
            self.up_gpus -= gpus;
        }
        self.up[i] = up;
        self.sync_index(node);
    }

    /// Syncs the index for the nodes of `gpus`, once per run of GPUs on one node
    /// (a job's GPUs come grouped by node).
    fn sync_nodes_of(&mut self, gpus: &[GpuId]) {
        let mut last = None;
        for &g in gpus {
            let node = self.node_of(g);
            if last != Some(node) {
                self.sync_index(node);
                last = Some(node);
            }
        }
    }

    /// Puts `node`'s free GPUs (none while it is down) into the placement index.
    fn sync_index(&mut self, node: NodeId) {
        let mask = if self.up[node.index()] { self.free_mask[node.index()] } else { 0 };
        self.index.set(node, mask);
    }

    /// Jobs holding GPUs on `node`, in id order, without repeats.
    pub fn jobs_on(&self, node: NodeId) -> Vec<JobId> {
        let first = self.first_gpu[node.index()] as usize;
        let count = self.spec.nodes[node.index()].gpus as usize;
        let mut jobs: Vec<JobId> = self.owner[first..first + count]
            .iter()
            .chain(&self.co_owner[first..first + count])
            .flatten()
            .copied()
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }
}

/// True if some GPU appears twice. Allocation-free for gangs up to 32 GPUs.
/// A list in strictly increasing order (what placement gives) has none, and
/// saying so takes one comparison per GPU instead of one per pair (about 215
/// instructions a call on full Philly under LAS, 1.2 million calls).
pub(crate) fn has_repeats(gpus: &[GpuId]) -> bool {
    if gpus.windows(2).all(|w| w[0] < w[1]) {
        return false;
    }
    if gpus.len() <= 32 {
        return gpus.iter().enumerate().any(|(i, g)| gpus[..i].contains(g));
    }
    let mut seen = gpus.to_vec();
    seen.sort_unstable();
    seen.windows(2).any(|w| w[0] == w[1])
}

pub(crate) fn full_mask(gpus: u32) -> u64 {
    if gpus >= 64 {
        u64::MAX
    } else {
        (1u64 << gpus) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// `has_repeats` is "some pair is equal", for sorted lists (the
        /// shortcut), unsorted ones and gangs past 32 GPUs. (Checked to catch
        /// a seeded bug: `<=` for `<` in the shortcut.)
        #[test]
        fn has_repeats_is_some_equal_pair(ids in proptest::collection::vec(0u32..48, 0..40), sort in proptest::prelude::any::<bool>()) {
            let mut gpus: Vec<GpuId> = ids.into_iter().map(GpuId).collect();
            if sort {
                gpus.sort_unstable();
            }
            let plain = (0..gpus.len()).any(|i| gpus[..i].contains(&gpus[i]));
            proptest::prop_assert_eq!(has_repeats(&gpus), plain);
        }
    }

    #[test]
    fn take_and_release_keep_counts() {
        let mut c = Cluster::new(ClusterSpec::homogeneous("v100", 2, 4)).unwrap();
        assert_eq!(c.free_gpus(), 8);
        let gpus = [c.gpu(NodeId(1), 0), c.gpu(NodeId(1), 3)];
        assert!(c.can_take(&gpus));
        c.take(JobId(7), &gpus);
        assert_eq!(c.free_gpus(), 6);
        assert_eq!(c.free_mask(NodeId(1)), 0b0110);
        assert!(!c.can_take(&gpus));
        assert_eq!(c.jobs_on(NodeId(1)), vec![JobId(7)]);
        c.set_up(NodeId(1), false);
        assert_eq!(c.free_gpus(), 4);
        c.release(JobId(7), &gpus);
        assert_eq!(c.free_gpus(), 4);
        c.set_up(NodeId(1), true);
        assert_eq!(c.free_gpus(), 8);
    }

    #[test]
    fn shared_gpus_free_up_when_both_owners_leave() {
        let mut c = Cluster::new(ClusterSpec::homogeneous("v100", 1, 2)).unwrap();
        let gpus = [GpuId(0), GpuId(1)];
        c.take(JobId(1), &gpus);
        assert!(c.can_share(&gpus, JobId(1)));
        assert!(!c.can_share(&gpus, JobId(2)));
        c.take_shared(JobId(2), &gpus);
        assert!(!c.can_share(&gpus, JobId(1)), "at most two owners");
        assert_eq!(c.jobs_on(NodeId(0)), vec![JobId(1), JobId(2)]);
        c.release(JobId(1), &gpus);
        assert_eq!((c.owner(GpuId(0)), c.co_owner(GpuId(0))), (Some(JobId(2)), None));
        assert_eq!(c.free_gpus(), 0);
        c.release(JobId(2), &gpus);
        assert_eq!(c.free_gpus(), 2);
    }

    #[test]
    fn duplicate_gpus_cannot_be_taken() {
        let c = Cluster::new(ClusterSpec::homogeneous("v100", 1, 2)).unwrap();
        assert!(!c.can_take(&[GpuId(0), GpuId(0)]));
        assert!(!c.can_take(&[GpuId(5)]));
    }

    #[test]
    fn rejects_empty_and_oversized_nodes() {
        assert_eq!(Cluster::new(ClusterSpec::default()).unwrap_err(), ClusterError::NoGpus);
        let spec = ClusterSpec::homogeneous("x", 1, 65);
        assert!(matches!(Cluster::new(spec), Err(ClusterError::TooManyGpusPerNode { .. })));
    }
}
