//! Host resources: CPU cores and memory beside the GPUs (Synergy, OSDI'22).
//!
//! A node has `NodeSpec::cpus` cores and `NodeSpec::memory_gib` GiB; 0 means the
//! node does not model that resource (unlimited). A running job holds an
//! allocation (`JobState::host`) split across its nodes in proportion to its GPUs
//! there ([`split`]: floors, then the remainder one unit at a time by largest
//! fractional part, ties to the earlier node), and the [`HostLedger`] keeps each
//! node's free CPUs and memory in step with every start, stop and allocation
//! change.
//!
//! The model is opt-in per run: the engine enables it when its policy says it
//! places by host resources ([`crate::Policy::host_resources`]). Other policies
//! keep their earlier results exactly (DRF, for example, checks CPU and memory
//! against cluster totals only, and openb traces ask for CPUs on nodes that
//! state them). While enabled, the engine refuses (a `Violation`) any start or
//! allocation change that would over-commit a node: **CPUs and memory are never
//! over-committed**.

use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId, NodeId};
use crate::job::EndReason;

/// A job's host allocation: CPU cores and GiB of memory, over all its nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HostAlloc {
    pub cpus: u32,
    pub memory_gib: u32,
}

/// Which host resource a refusal or an end reason is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostResource {
    Cpus,
    Memory,
}

impl std::fmt::Display for HostResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostResource::Cpus => "CPUs",
            HostResource::Memory => "GiB of memory",
        })
    }
}

/// Splits `total` in proportion to `weights`: each part gets its floor, then the
/// units left go one each to the parts with the largest fractional remainders
/// (ties to the earlier part). Deterministic; the parts sum to `total` whenever
/// some weight is positive (all zero otherwise).
pub fn split(total: u32, weights: &[u32]) -> Vec<u32> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<(u64, u64)> = weights
        .iter()
        .map(|&w| {
            let scaled = u64::from(total) * u64::from(w);
            (scaled / sum, scaled % sum)
        })
        .collect();
    let mut parts: Vec<u32> = exact.iter().map(|&(q, _)| q as u32).collect();
    let given: u64 = exact.iter().map(|&(q, _)| q).sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(exact[i].1), i));
    for &i in order.iter().take((u64::from(total) - given) as usize) {
        parts[i] += 1;
    }
    parts
}

/// A node's GPU-proportional share of `capacity` for `gpus` of its `node_gpus` GPUs
/// (rounded down, so that proportional shares never over-commit a node).
pub fn proportional(capacity: u32, node_gpus: u32, gpus: u32) -> u32 {
    if node_gpus == 0 {
        return 0;
    }
    (u64::from(capacity) * u64::from(gpus) / u64::from(node_gpus)) as u32
}

/// The part of `alloc` each node of `gpus` carries, in node order: the job's GPUs
/// there are the weights of [`split`].
pub fn node_shares(cluster: &Cluster, gpus: &[GpuId], alloc: HostAlloc) -> Vec<(NodeId, HostAlloc)> {
    let mut per_node: BTreeMap<NodeId, u32> = BTreeMap::new();
    for &g in gpus {
        *per_node.entry(cluster.node_of(g)).or_default() += 1;
    }
    let weights: Vec<u32> = per_node.values().copied().collect();
    let cpus = split(alloc.cpus, &weights);
    let memory = split(alloc.memory_gib, &weights);
    per_node
        .keys()
        .enumerate()
        .map(|(i, &node)| (node, HostAlloc { cpus: cpus[i], memory_gib: memory[i] }))
        .collect()
}

/// A node that cannot take its share of an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverCommit {
    pub node: NodeId,
    pub resource: HostResource,
    pub wanted: u32,
    pub free: u32,
}

/// Free CPUs and memory per node, and what each running job holds where.
///
/// Invariant (while enabled): for every node that models a resource, free +
/// the sum of the shares held there = its capacity; free never goes below 0.
#[derive(Clone, Debug, Default)]
pub struct HostLedger {
    enabled: bool,
    capacity: Vec<HostAlloc>,
    free: Vec<HostAlloc>,
    held: BTreeMap<JobId, Vec<(NodeId, HostAlloc)>>,
}

impl HostLedger {
    pub(crate) fn new(capacity: Vec<HostAlloc>) -> HostLedger {
        HostLedger { enabled: false, free: capacity.clone(), capacity, held: BTreeMap::new() }
    }

    pub(crate) fn enable(&mut self) {
        self.enabled = true;
    }

    /// True when the run's policy places by host resources and the engine enforces them.
    pub fn enabled(&self) -> bool {
        self.enabled
    }
    /// The node's CPUs and memory (0: not modelled, unlimited).
    pub fn capacity(&self, node: NodeId) -> HostAlloc {
        self.capacity[node.index()]
    }
    /// What is left on the node (meaningless for a resource the node does not model).
    pub fn free(&self, node: NodeId) -> HostAlloc {
        self.free[node.index()]
    }
    /// What `job` holds on each of its nodes (empty unless it runs under an enabled ledger).
    pub fn held(&self, job: JobId) -> &[(NodeId, HostAlloc)] {
        self.held.get(&job).map_or(&[], Vec::as_slice)
    }

    /// The first node share that does not fit in what is free, counting what
    /// `job` already holds there as free (so that a change can be checked).
    pub fn check(&self, job: JobId, shares: &[(NodeId, HostAlloc)]) -> Result<(), OverCommit> {
        for &(node, want) in shares {
            let mut free = self.free[node.index()];
            for &(n, had) in self.held(job) {
                if n == node {
                    free.cpus += had.cpus;
                    free.memory_gib += had.memory_gib;
                }
            }
            let cap = self.capacity[node.index()];
            if cap.cpus > 0 && want.cpus > free.cpus {
                return Err(OverCommit {
                    node,
                    resource: HostResource::Cpus,
                    wanted: want.cpus,
                    free: free.cpus,
                });
            }
            if cap.memory_gib > 0 && want.memory_gib > free.memory_gib {
                return Err(OverCommit {
                    node,
                    resource: HostResource::Memory,
                    wanted: want.memory_gib,
                    free: free.memory_gib,
                });
            }
        }
        Ok(())
    }

    /// Gives `job` its shares. Caller has checked them with [`HostLedger::check`]
    /// (after releasing what the job held).
    pub(crate) fn take(&mut self, job: JobId, shares: Vec<(NodeId, HostAlloc)>) {
        assert!(!self.held.contains_key(&job), "{job} takes host resources twice");
        for &(node, want) in &shares {
            let cap = self.capacity[node.index()];
            let free = &mut self.free[node.index()];
            if cap.cpus > 0 {
                free.cpus = free.cpus.checked_sub(want.cpus).expect("CPUs over-committed: checked before");
            }
            if cap.memory_gib > 0 {
                free.memory_gib = free
                    .memory_gib
                    .checked_sub(want.memory_gib)
                    .expect("memory over-committed: checked before");
            }
        }
        self.held.insert(job, shares);
    }

    /// Returns everything `job` holds (nothing if it holds nothing).
    pub(crate) fn release(&mut self, job: JobId) {
        for (node, had) in self.held.remove(&job).unwrap_or_default() {
            let cap = self.capacity[node.index()];
            let free = &mut self.free[node.index()];
            if cap.cpus > 0 {
                free.cpus += had.cpus;
                assert!(free.cpus <= cap.cpus, "{node} has more free CPUs than it has");
            }
            if cap.memory_gib > 0 {
                free.memory_gib += had.memory_gib;
                assert!(free.memory_gib <= cap.memory_gib, "{node} has more free memory than it has");
            }
        }
    }

    /// A job that can never fit, however it is placed: even spread one GPU per
    /// node, its largest share exceeds the largest node. `None` when the cluster
    /// does not model the resource (some node states 0) or the job has no GPUs.
    pub fn never_fits(&self, gpus: u32, alloc: HostAlloc) -> Option<EndReason> {
        if gpus == 0 {
            return None;
        }
        let largest_share = |total: u32| total.div_ceil(gpus);
        let check = |resource: HostResource, total: u32, cap: fn(&HostAlloc) -> u32| {
            if self.capacity.iter().any(|c| cap(c) == 0) {
                return None;
            }
            let largest_node = self.capacity.iter().map(cap).max().unwrap_or(0);
            (largest_share(total) > largest_node).then_some(EndReason::WiderThanNodes {
                resource,
                requested: total,
                largest_node,
            })
        };
        check(HostResource::Cpus, alloc.cpus, |c| c.cpus)
            .or_else(|| check(HostResource::Memory, alloc.memory_gib, |c| c.memory_gib))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;

    #[test]
    fn split_is_proportional_with_largest_remainders() {
        // 10 over 1:1:1 -> 3.33 each: floors 3,3,3, one left -> the first (ties to earlier).
        assert_eq!(split(10, &[1, 1, 1]), vec![4, 3, 3]);
        // 7 over 3:1 -> 5.25, 1.75: floors 5,1; one left -> the larger remainder (0.75).
        assert_eq!(split(7, &[3, 1]), vec![5, 2]);
        assert_eq!(split(24, &[8]), vec![24]);
        assert_eq!(split(5, &[0, 0]), vec![0, 0]);
    }

    #[test]
    fn proportional_rounds_down() {
        assert_eq!(proportional(500, 8, 1), 62);
        assert_eq!(proportional(24, 8, 3), 9);
        assert_eq!(proportional(24, 0, 3), 0);
    }

    #[test]
    fn ledger_takes_checks_and_releases() {
        let mut spec = ClusterSpec::homogeneous("v100", 0, 8);
        spec.add_nodes(crate::GpuTypeId(0), 2, 8, 24, 500);
        let mut cluster = Cluster::new(spec).unwrap();
        cluster.host_mut().enable();
        // A 3-GPU job, 2 GPUs on node 0 and 1 on node 1, 10 CPUs and 100 GiB:
        // CPUs 6.67/3.33 -> 7/3, memory 66.67/33.33 -> 67/33.
        let gpus = [GpuId(0), GpuId(1), GpuId(8)];
        let shares = node_shares(&cluster, &gpus, HostAlloc { cpus: 10, memory_gib: 100 });
        assert_eq!(
            shares,
            vec![
                (NodeId(0), HostAlloc { cpus: 7, memory_gib: 67 }),
                (NodeId(1), HostAlloc { cpus: 3, memory_gib: 33 })
            ]
        );
        let ledger = cluster.host_mut();
        ledger.check(JobId(1), &shares).unwrap();
        ledger.take(JobId(1), shares);
        assert_eq!(ledger.free(NodeId(0)), HostAlloc { cpus: 17, memory_gib: 433 });
        let too_much = [(NodeId(0), HostAlloc { cpus: 18, memory_gib: 0 })];
        assert_eq!(
            ledger.check(JobId(2), &too_much),
            Err(OverCommit { node: NodeId(0), resource: HostResource::Cpus, wanted: 18, free: 17 })
        );
        // The job's own holding counts as free when it changes its allocation.
        assert!(ledger.check(JobId(1), &too_much).is_ok());
        ledger.release(JobId(1));
        assert_eq!(ledger.free(NodeId(0)), HostAlloc { cpus: 24, memory_gib: 500 });
    }

    #[test]
    fn never_fits_names_the_resource() {
        let mut spec = ClusterSpec::homogeneous("v100", 0, 8);
        spec.add_nodes(crate::GpuTypeId(0), 2, 8, 24, 500);
        let cluster = Cluster::new(spec).unwrap();
        let ledger = cluster.host();
        // 2 GPUs spread one per node need 25 CPUs each: more than 24.
        assert_eq!(
            ledger.never_fits(2, HostAlloc { cpus: 49, memory_gib: 0 }),
            Some(EndReason::WiderThanNodes { resource: HostResource::Cpus, requested: 49, largest_node: 24 })
        );
        assert_eq!(ledger.never_fits(2, HostAlloc { cpus: 48, memory_gib: 1000 }), None);
        assert_eq!(ledger.never_fits(0, HostAlloc { cpus: 480, memory_gib: 0 }), None);
    }
}
