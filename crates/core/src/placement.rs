//! Placement stages: turn "this job needs k GPUs" into concrete GPUs.
//!
//! A policy copies the free GPUs into a [`FreeMap`] once per pass, then places
//! (and un-places, for jobs it preempts) against that scratch copy, so that one
//! decision never hands the same GPU to two jobs. The engine checks again.

use crate::cluster::Cluster;
use crate::ids::{GpuId, NodeId};
use crate::policy::WaitReason;

/// How to choose GPUs for a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Fewest nodes: the best-fitting single node if the job fits in one, else
    /// whole nodes with the most free GPUs first. Never fails while enough GPUs are free.
    #[default]
    Consolidated,
    /// Like `Consolidated`, but a job that cannot get the minimum node count
    /// for its size waits (`Fragmented`) instead of spanning more nodes.
    StrictConsolidated,
    /// One GPU per node in turn, nodes with the most free GPUs first.
    Spread,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Consolidated => "consolidated",
            Placement::StrictConsolidated => "strict-consolidated",
            Placement::Spread => "spread",
        }
    }
}

/// A scratch copy of which GPUs are free on nodes that are up.
#[derive(Clone, Debug)]
pub struct FreeMap<'a> {
    cluster: &'a Cluster,
    masks: Vec<u64>,
    free: u32,
}

impl<'a> FreeMap<'a> {
    pub fn new(cluster: &'a Cluster) -> FreeMap<'a> {
        let masks: Vec<u64> = (0..cluster.node_count())
            .map(|n| {
                let node = NodeId(n as u32);
                if cluster.is_up(node) {
                    cluster.free_mask(node)
                } else {
                    0
                }
            })
            .collect();
        let free = masks.iter().map(|m| m.count_ones()).sum();
        FreeMap { cluster, masks, free }
    }

    pub fn free(&self) -> u32 {
        self.free
    }
    pub fn free_on(&self, node: NodeId) -> u32 {
        self.masks[node.index()].count_ones()
    }

    /// Marks GPUs of a job this pass preempts as free again.
    pub fn give_back(&mut self, gpus: &[GpuId]) {
        for &g in gpus {
            let node = self.cluster.node_of(g);
            if !self.cluster.is_up(node) {
                continue;
            }
            let bit = 1u64 << self.cluster.slot_of(g);
            debug_assert_eq!(self.masks[node.index()] & bit, 0, "{g} given back twice");
            self.masks[node.index()] |= bit;
            self.free += 1;
        }
    }

    /// Chooses `needed` GPUs on nodes `usable` accepts and marks them taken.
    pub fn place(
        &mut self,
        needed: u32,
        how: Placement,
        usable: impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        if needed == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<(u32, NodeId)> = (0..self.masks.len())
            .map(|n| NodeId(n as u32))
            .filter(|&n| self.masks[n.index()] != 0 && usable(n))
            .map(|n| (self.free_on(n), n))
            .collect();
        let free: u32 = nodes.iter().map(|(f, _)| f).sum();
        if free < needed {
            return Err(WaitReason::NoFreeGpus { needed, free });
        }
        let plan = match how {
            Placement::Consolidated | Placement::StrictConsolidated => consolidate(&mut nodes, needed),
            Placement::Spread => spread(&mut nodes, needed),
        };
        if how == Placement::StrictConsolidated {
            let per_node = self.cluster.max_gpus_per_node().max(1);
            if plan.len() as u32 > needed.div_ceil(per_node) {
                return Err(WaitReason::Fragmented { needed, free });
            }
        }
        Ok(self.take_plan(&plan))
    }

    fn take_plan(&mut self, plan: &[(NodeId, u32)]) -> Vec<GpuId> {
        let mut gpus = Vec::new();
        for &(node, count) in plan {
            let mask = &mut self.masks[node.index()];
            for _ in 0..count {
                let slot = mask.trailing_zeros();
                *mask &= !(1u64 << slot);
                gpus.push(self.cluster.gpu(node, slot));
            }
            self.free -= count;
        }
        gpus
    }
}

/// Best fit in one node if possible; otherwise fill from the emptiest nodes
/// (most free) and finish with a best fit for the remainder.
fn consolidate(nodes: &mut [(u32, NodeId)], needed: u32) -> Vec<(NodeId, u32)> {
    nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut plan = Vec::new();
    let mut left = needed;
    let mut rest = &nodes[..];
    while left > 0 {
        let best_fit =
            rest.iter().filter(|(free, _)| *free >= left).min_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        if let Some(&(_, node)) = best_fit {
            plan.push((node, left));
            break;
        }
        let (free, node) = rest[0];
        plan.push((node, free));
        left -= free;
        rest = &rest[1..];
    }
    plan
}

/// Round-robin one GPU per node, nodes with the most free GPUs first.
fn spread(nodes: &mut [(u32, NodeId)], needed: u32) -> Vec<(NodeId, u32)> {
    nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut take = vec![0u32; nodes.len()];
    let mut left = needed;
    while left > 0 {
        for (i, (free, _)) in nodes.iter().enumerate() {
            if left > 0 && take[i] < *free {
                take[i] += 1;
                left -= 1;
            }
        }
    }
    nodes.iter().zip(take).filter(|(_, t)| *t > 0).map(|((_, node), t)| (*node, t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::JobId;

    fn cluster_with_free(free: &[u32]) -> Cluster {
        let mut c = Cluster::new(ClusterSpec::homogeneous("v100", free.len() as u32, 8)).unwrap();
        for (n, &f) in free.iter().enumerate() {
            let busy: Vec<GpuId> = (f..8).map(|s| c.gpu(NodeId(n as u32), s)).collect();
            c.take(JobId(1000 + n as u32), &busy);
        }
        c
    }

    fn nodes_used(c: &Cluster, gpus: &[GpuId]) -> Vec<u32> {
        let mut n: Vec<u32> = gpus.iter().map(|g| c.node_of(*g).0).collect();
        n.dedup();
        n
    }

    #[test]
    fn consolidated_prefers_best_fitting_node() {
        let c = cluster_with_free(&[8, 3, 5]);
        let mut map = FreeMap::new(&c);
        let gpus = map.place(3, Placement::Consolidated, |_| true).unwrap();
        assert_eq!(nodes_used(&c, &gpus), vec![1]);
        assert_eq!(map.free(), 13);
    }

    #[test]
    fn consolidated_spans_fewest_nodes() {
        let c = cluster_with_free(&[2, 8, 6, 1]);
        let mut map = FreeMap::new(&c);
        let gpus = map.place(10, Placement::Consolidated, |_| true).unwrap();
        assert_eq!(gpus.len(), 10);
        assert_eq!(nodes_used(&c, &gpus), vec![1, 0]);
    }

    #[test]
    fn strict_consolidation_waits_when_fragmented() {
        let c = cluster_with_free(&[4, 4]);
        let mut map = FreeMap::new(&c);
        let err = map.place(8, Placement::StrictConsolidated, |_| true).unwrap_err();
        assert_eq!(err, WaitReason::Fragmented { needed: 8, free: 8 });
        assert_eq!(map.free(), 8, "a failed placement takes nothing");
    }

    #[test]
    fn spread_uses_one_gpu_per_node_first() {
        let c = cluster_with_free(&[8, 8, 8]);
        let mut map = FreeMap::new(&c);
        let gpus = map.place(4, Placement::Spread, |_| true).unwrap();
        let mut used = nodes_used(&c, &gpus);
        used.sort();
        assert_eq!(gpus.len(), 4);
        assert_eq!(used.len(), 3);
    }

    #[test]
    fn give_back_restores_gpus() {
        let c = cluster_with_free(&[8]);
        let mut map = FreeMap::new(&c);
        let gpus = map.place(8, Placement::Consolidated, |_| true).unwrap();
        assert_eq!(
            map.place(1, Placement::Consolidated, |_| true),
            Err(WaitReason::NoFreeGpus { needed: 1, free: 0 })
        );
        map.give_back(&gpus[..2]);
        assert_eq!(map.free(), 2);
    }
}
