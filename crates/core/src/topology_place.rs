//! The topology-aware placements of [`Placement`] (docs/topology.md): Arnold, vClos
//! and torus sub-boxes. Each turns the usable nodes with free GPUs into a plan of
//! (node, GPUs) pairs, or a reason to wait.

use crate::cluster::Cluster;
use crate::ids::{JobId, NodeId};
use crate::job::Layout;
use crate::placement::Placement;
use crate::policy::WaitReason;
use crate::topology::{choose_spines, group_spreads, vclos_need, Routing};

/// vClos uplinks (leaf, spine) taken by jobs placed earlier in this pass, and jobs
/// the pass preempts, whose reservations count as free.
#[derive(Clone, Debug, Default)]
pub(crate) struct PassReservations {
    taken: Vec<(u32, u32)>,
    freed: Vec<JobId>,
}

impl PassReservations {
    fn is_taken(&self, cluster: &Cluster, leaf: u32, spine: u32) -> bool {
        let Some(links) = cluster.links() else { return false };
        links.reserved_owner(leaf, spine).is_some_and(|j| !self.freed.contains(&j))
            || self.taken.contains(&(leaf, spine))
    }

    pub(crate) fn give_back(&mut self, cluster: &Cluster, job: JobId) {
        if cluster.links().is_some_and(|l| l.topology.routing == Routing::Vclos) {
            self.freed.push(job);
        }
    }

    pub(crate) fn reserve(&mut self, cluster: &Cluster, plan: &[(NodeId, u32)]) {
        let Some(links) = cluster.links().filter(|l| l.topology.routing == Routing::Vclos) else { return };
        let leaves = links.leaves_of_nodes(plan.iter().map(|&(n, _)| n));
        if leaves.len() < 2 {
            return;
        }
        let need = vclos_need(&leaves, links.topology.nic_gbps, links.uplink_gbps(), links.spines());
        if let Some(spines) =
            choose_spines(&leaves, need, links.spines(), |l, s| self.is_taken(cluster, l, s))
        {
            for &(l, _) in &leaves {
                self.taken.extend(spines.iter().map(|&s| (l, s)));
            }
        }
    }
}

/// What a plan may read: the cluster and this pass's reservations.
pub(crate) struct Scratch<'a> {
    pub cluster: &'a Cluster,
    pub reserved: &'a PassReservations,
}

impl Scratch<'_> {
    /// The leaf of `node`: the ledger's, or the node's rack without a topology.
    fn leaf(&self, node: NodeId) -> u32 {
        match self.cluster.links() {
            Some(links) => links.leaf_of(node),
            None => self.cluster.node(node).rack,
        }
    }
}

/// A plan for `needed` GPUs from `nodes` (usable, free count, most free first, ties by
/// id; `free` GPUs in all) under a topology-aware placement.
pub(crate) fn plan(
    scratch: &Scratch<'_>,
    nodes: &[(u32, NodeId)],
    needed: u32,
    layout: Option<Layout>,
    how: Placement,
    free: u32,
) -> Result<Vec<(NodeId, u32)>, WaitReason> {
    let cluster = scratch.cluster;
    match how {
        Placement::Arnold => arnold(scratch, nodes, needed, layout, free),
        Placement::Vclos => match cluster.links().filter(|l| l.topology.routing == Routing::Vclos) {
            Some(_) => vclos(scratch, nodes, needed, free),
            None => Ok(crate::placement::consolidate(nodes, needed)),
        },
        Placement::Torus => match cluster.links().and_then(|l| l.topology.torus) {
            Some(torus) => torus_box(cluster, &torus, nodes, needed, free),
            None => Ok(crate::placement::consolidate(nodes, needed)),
        },
        _ => Ok(crate::placement::consolidate(nodes, needed)),
    }
}

/// Nodes grouped by leaf, each leaf's nodes in the order given; leaves by id.
/// A leaf, its free GPUs, and its nodes with free GPUs (free, node).
type LeafNodes = (u32, u32, Vec<(u32, NodeId)>);

fn by_leaf(scratch: &Scratch<'_>, nodes: &[(u32, NodeId)]) -> Vec<LeafNodes> {
    let mut leaves: std::collections::BTreeMap<u32, Vec<(u32, NodeId)>> = Default::default();
    for &(f, n) in nodes {
        if f > 0 {
            leaves.entry(scratch.leaf(n)).or_default().push((f, n));
        }
    }
    leaves.into_iter().map(|(l, ns)| (l, ns.iter().map(|&(f, _)| f).sum(), ns)).collect()
}

/// The fewest-leaves plan: the best-fitting single leaf if one holds the job; else the
/// leaves with the most free GPUs, the last one the best fit for the remainder. Within a
/// leaf, nodes are filled as `consolidate` fills them.
fn fewest_leaves(scratch: &Scratch<'_>, nodes: &[(u32, NodeId)], needed: u32) -> Option<Vec<(NodeId, u32)>> {
    let mut leaves = by_leaf(scratch, nodes);
    let best_fit = |leaves: &[LeafNodes], want: u32| {
        leaves.iter().enumerate().filter(|(_, l)| l.1 >= want).min_by_key(|(_, l)| (l.1, l.0)).map(|(i, _)| i)
    };
    let mut plan = Vec::new();
    let mut left = needed;
    // Most free first, ties by leaf id.
    leaves.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    while left > 0 {
        if let Some(i) = best_fit(&leaves, left) {
            plan.extend(crate::placement::consolidate(&leaves[i].2, left));
            return Some(plan);
        }
        let (_, total, ns) = leaves.first()?.clone();
        plan.extend(ns.iter().map(|&(f, n)| (n, f)));
        left -= total;
        leaves.remove(0);
    }
    Some(plan)
}

/// Node of each rank for a plan (GPUs in plan order are ranks in order).
fn rank_nodes(plan: &[(NodeId, u32)]) -> Vec<NodeId> {
    plan.iter().flat_map(|&(n, c)| std::iter::repeat_n(n, c as usize)).collect()
}

/// Arnold: of three plans (stage-aligned: each pipeline stage's block of t x d GPUs on the
/// best-fitting leaf that holds it; fewest leaves; consolidated), the one with the least
/// weighted maximum spread, data-parallel groups weighing first: compared by (max DP
/// spread, max PP spread), ties to the earlier plan. Each node gives a whole number of
/// tensor groups when the layout's tensor size fits a node.
fn arnold(
    scratch: &Scratch<'_>,
    nodes: &[(u32, NodeId)],
    needed: u32,
    layout: Option<Layout>,
    free: u32,
) -> Result<Vec<(NodeId, u32)>, WaitReason> {
    let per_node = scratch.cluster.max_gpus_per_node().max(1);
    let layout = layout.filter(|l| l.gpus() == needed);
    let chunk = layout.map(|l| l.tensor).filter(|&t| t > 1 && t <= per_node).unwrap_or(1);
    let mut whole: Vec<(u32, NodeId)> =
        nodes.iter().map(|&(f, n)| (f / chunk * chunk, n)).filter(|&(f, _)| f > 0).collect();
    whole.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    if whole.iter().map(|&(f, _)| f).sum::<u32>() < needed {
        return Err(WaitReason::Fragmented { needed, free });
    }
    let leaf_table: Vec<u32> = match scratch.cluster.links() {
        Some(links) => links.leaf_table().to_vec(),
        None => scratch.cluster.spec().nodes.iter().map(|n| n.rack).collect(),
    };
    let mut candidates: Vec<Vec<(NodeId, u32)>> = Vec::new();
    if let Some(plan) = layout.and_then(|l| stage_aligned(scratch, &whole, l)) {
        candidates.push(plan);
    }
    if let Some(plan) = fewest_leaves(scratch, &whole, needed) {
        candidates.push(plan);
    }
    candidates.push(crate::placement::consolidate(&whole, needed));
    let score = |plan: &Vec<(NodeId, u32)>| group_spreads(&leaf_table, &rank_nodes(plan), layout);
    let best =
        candidates.iter().enumerate().min_by_key(|(i, plan)| (score(plan), *i)).map(|(i, _)| i).unwrap_or(0);
    Ok(candidates.swap_remove(best))
}

/// Each pipeline stage (t x d consecutive ranks) on one leaf: stages in order, each on the
/// best-fitting leaf (fewest free GPUs that hold it, then lowest id), filled as
/// `consolidate` fills. `None` if a stage fits no leaf or the job has one stage.
fn stage_aligned(
    scratch: &Scratch<'_>,
    nodes: &[(u32, NodeId)],
    layout: Layout,
) -> Option<Vec<(NodeId, u32)>> {
    if layout.pipeline < 2 {
        return None;
    }
    let block = layout.tensor * layout.data;
    let mut leaves = by_leaf(scratch, nodes);
    let mut plan = Vec::new();
    for _ in 0..layout.pipeline {
        let i = leaves
            .iter()
            .enumerate()
            .filter(|(_, l)| l.1 >= block)
            .min_by_key(|(_, l)| (l.1, l.0))
            .map(|(i, _)| i)?;
        let stage = crate::placement::consolidate(&leaves[i].2, block);
        for &(node, count) in &stage {
            if let Some(entry) = leaves[i].2.iter_mut().find(|(_, n)| *n == node) {
                entry.0 -= count;
            }
        }
        leaves[i].1 -= block;
        leaves[i].2.retain(|&(f, _)| f > 0);
        leaves[i].2.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        plan.extend(stage);
    }
    Some(plan)
}

/// vClos: the best-fitting single leaf; else the fewest-leaves plan, then the
/// consolidated one, whichever first finds free uplinks to common spines.
fn vclos(
    scratch: &Scratch<'_>,
    nodes: &[(u32, NodeId)],
    needed: u32,
    free: u32,
) -> Result<Vec<(NodeId, u32)>, WaitReason> {
    let links = scratch.cluster.links().expect("vclos runs with a topology");
    let mut candidates = Vec::new();
    if let Some(plan) = fewest_leaves(scratch, nodes, needed) {
        candidates.push(plan);
    }
    candidates.push(crate::placement::consolidate(nodes, needed));
    let mut uplinks = 0;
    for plan in candidates {
        let leaves = links.leaves_of_nodes(plan.iter().map(|&(n, _)| n));
        if leaves.len() < 2 {
            return Ok(plan);
        }
        let need = vclos_need(&leaves, links.topology.nic_gbps, links.uplink_gbps(), links.spines());
        uplinks = uplinks.max(need);
        let taken = |l, s| scratch.reserved.is_taken(scratch.cluster, l, s);
        if choose_spines(&leaves, need, links.spines(), taken).is_some() {
            return Ok(plan);
        }
    }
    let _ = free;
    Err(WaitReason::NoIsolatedPaths { needed, uplinks })
}

/// Largest box volume tried, as a multiple of the fewest nodes the job needs.
const TORUS_SLACK: u32 = 2;

/// The most compact free sub-box of the torus: the smallest volume (then the shortest
/// longest side, then the lowest origin) whose usable nodes hold `needed` free GPUs,
/// boxes wrapping at the edges; its nodes filled in snake order. Waits (`Fragmented`)
/// when no box up to [`TORUS_SLACK`] times the fewest nodes holds the job.
fn torus_box(
    cluster: &Cluster,
    torus: &crate::topology::Torus,
    nodes: &[(u32, NodeId)],
    needed: u32,
    free: u32,
) -> Result<Vec<(NodeId, u32)>, WaitReason> {
    let [x, y, z] = torus.dims;
    let n = (x * y * z) as usize;
    let mut free_at = vec![0u32; n];
    for &(f, node) in nodes {
        free_at[node.index()] = f;
    }
    // Prefix sums over the torus doubled in each dimension, so wrapped boxes are ranges.
    let (dx, dy, dz) = (2 * x as usize + 1, 2 * y as usize + 1, 2 * z as usize + 1);
    let mut pre = vec![0u64; dx * dy * dz];
    let at = |i: usize, j: usize, k: usize| (k * dy + j) * dx + i;
    for k in 1..dz {
        for j in 1..dy {
            for i in 1..dx {
                let node = torus.node_at([(i as u32 - 1) % x, (j as u32 - 1) % y, (k as u32 - 1) % z]);
                pre[at(i, j, k)] = u64::from(free_at[node as usize])
                    + pre[at(i - 1, j, k)]
                    + pre[at(i, j - 1, k)]
                    + pre[at(i, j, k - 1)]
                    - pre[at(i - 1, j - 1, k)]
                    - pre[at(i - 1, j, k - 1)]
                    - pre[at(i, j - 1, k - 1)]
                    + pre[at(i - 1, j - 1, k - 1)];
            }
        }
    }
    let box_sum = |o: [usize; 3], s: [usize; 3]| {
        let (i0, j0, k0, i1, j1, k1) = (o[0], o[1], o[2], o[0] + s[0], o[1] + s[1], o[2] + s[2]);
        pre[at(i1, j1, k1)] + pre[at(i0, j0, k1)] + pre[at(i0, j1, k0)] + pre[at(i1, j0, k0)]
            - pre[at(i0, j1, k1)]
            - pre[at(i1, j0, k1)]
            - pre[at(i1, j1, k0)]
            - pre[at(i0, j0, k0)]
    };
    let per_node = cluster.max_gpus_per_node().max(1);
    let fewest = needed.div_ceil(per_node).max(1);
    for volume in fewest..=(fewest * TORUS_SLACK).min(n as u32) {
        let mut shapes: Vec<[u32; 3]> = Vec::new();
        for a in 1..=x.min(volume) {
            for b in 1..=y.min(volume / a) {
                if volume % (a * b) == 0 && volume / (a * b) <= z {
                    shapes.push([a, b, volume / (a * b)]);
                }
            }
        }
        shapes.sort_by_key(|s| (*s.iter().max().unwrap_or(&0), *s));
        for shape in &shapes {
            for k in 0..z {
                for j in 0..y {
                    for i in 0..x {
                        let s = [shape[0] as usize, shape[1] as usize, shape[2] as usize];
                        if box_sum([i as usize, j as usize, k as usize], s) >= u64::from(needed) {
                            return Ok(fill_box(torus, &free_at, [i, j, k], *shape, needed));
                        }
                    }
                }
            }
        }
    }
    Err(WaitReason::Fragmented { needed, free })
}

/// The box's nodes in snake order (x reverses on odd rows, rows on odd planes), each
/// giving its free GPUs until `needed` are planned.
fn fill_box(
    torus: &crate::topology::Torus,
    free_at: &[u32],
    origin: [u32; 3],
    shape: [u32; 3],
    needed: u32,
) -> Vec<(NodeId, u32)> {
    let [x, y, z] = torus.dims;
    let mut plan = Vec::new();
    let mut left = needed;
    let mut row = 0;
    for c in 0..shape[2] {
        for b0 in 0..shape[1] {
            let b = if c % 2 == 1 { shape[1] - 1 - b0 } else { b0 };
            for a0 in 0..shape[0] {
                let a = if row % 2 == 1 { shape[0] - 1 - a0 } else { a0 };
                let node = torus.node_at([(origin[0] + a) % x, (origin[1] + b) % y, (origin[2] + c) % z]);
                let take = free_at[node as usize].min(left);
                if take > 0 {
                    plan.push((NodeId(node), take));
                    left -= take;
                }
                if left == 0 {
                    return plan;
                }
            }
            row += 1;
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use crate::ids::GpuId;
    use crate::placement::FreeMap;
    use crate::topology::{Topology, Torus};

    /// `nodes` nodes of `gpus` GPUs, node `n` on leaf `leaf(n)`.
    fn cluster(nodes: u32, gpus: u32, leaf: impl Fn(u32) -> u32, topology: Option<Topology>) -> Cluster {
        let mut spec = ClusterSpec::homogeneous("h100", nodes, gpus);
        for (n, node) in spec.nodes.iter_mut().enumerate() {
            node.rack = leaf(n as u32);
        }
        spec.topology = topology;
        Cluster::new(spec).unwrap()
    }

    fn hold(c: &mut Cluster, job: u32, node: u32, slots: std::ops::Range<u32>) {
        let gpus: Vec<GpuId> = slots.map(|s| c.gpu(NodeId(node), s)).collect();
        c.take(JobId(job), &gpus);
    }

    fn nodes_of(c: &Cluster, gpus: &[GpuId]) -> Vec<u32> {
        let mut n: Vec<u32> = gpus.iter().map(|&g| c.node_of(g).0).collect();
        n.dedup();
        n
    }

    /// Three leaves of two 4-GPU nodes: leaf 0 = nodes 0, 1; leaf 1 = 2, 3; leaf 2 = 4, 5.
    /// Nodes 0 and 3 have 2 GPUs busy, so the free counts are 2, 4 | 4, 2 | 4, 4.
    /// An 8-GPU job laid out (tensor 4, pipeline 1, data 2):
    /// - consolidated takes the most free node first (node 1, 4 GPUs), then the best fit
    ///   for the other 4 (node 2, lowest id among the 4-free nodes): leaves 0 and 1, so its
    ///   data-parallel groups {rank tp, rank 4 + tp} span 2 leaves: max spread 2;
    /// - Arnold finds leaf 2 holds all 8 (leaf totals 6, 6, 8): nodes 4 and 5, spread 1.
    #[test]
    fn arnold_keeps_data_parallel_groups_on_one_leaf() {
        let mut c = cluster(6, 4, |n| n / 2, None);
        hold(&mut c, 100, 0, 0..2);
        hold(&mut c, 101, 3, 0..2);
        let layout = Some(Layout { tensor: 4, pipeline: 1, data: 2 });
        let mut map = FreeMap::new(&c);
        let consolidated = map.place_shaped(8, layout, Placement::Consolidated, |_| true).unwrap();
        assert_eq!(nodes_of(&c, &consolidated), vec![1, 2]);
        let mut map = FreeMap::new(&c);
        let arnold = map.place_shaped(8, layout, Placement::Arnold, |_| true).unwrap();
        assert_eq!(nodes_of(&c, &arnold), vec![4, 5]);
        let leaves: Vec<u32> = c.spec().nodes.iter().map(|n| n.rack).collect();
        let ranks = |g: &[GpuId]| g.iter().map(|&g| c.node_of(g)).collect::<Vec<_>>();
        assert_eq!(crate::topology::max_spread(&leaves, &ranks(&consolidated), layout), 2);
        assert_eq!(crate::topology::max_spread(&leaves, &ranks(&arnold), layout), 1);
    }

    /// Two leaves of three 4-GPU nodes, all free; a 16-GPU job laid out (tensor 4,
    /// pipeline 2, data 2): each stage is 8 consecutive ranks = 2 nodes. Fewest leaves and
    /// consolidated both take nodes 0, 1, 2 (leaf 0) and 3: stage 1 = nodes 2 and 3 spans
    /// both leaves, DP spread 2. Stage-aligned puts stage 0 on leaf 0 (nodes 0, 1; both
    /// leaves hold 8, lowest id) and stage 1 on the best fit then, leaf 1 (12 free against
    /// leaf 0's 4): nodes 3, 4. DP spread 1 (pipeline groups span 2 either way): Arnold
    /// picks it.
    #[test]
    fn arnold_aligns_pipeline_stages_with_leaves() {
        let c = cluster(6, 4, |n| n / 3, None);
        let layout = Some(Layout { tensor: 4, pipeline: 2, data: 2 });
        let mut map = FreeMap::new(&c);
        let gpus = map.place_shaped(16, layout, Placement::Arnold, |_| true).unwrap();
        assert_eq!(nodes_of(&c, &gpus), vec![0, 1, 3, 4]);
        let leaves: Vec<u32> = c.spec().nodes.iter().map(|n| n.rack).collect();
        let ranks: Vec<NodeId> = gpus.iter().map(|&g| c.node_of(g)).collect();
        assert_eq!(group_spreads(&leaves, &ranks, layout), (1, 2));
        let mut map = FreeMap::new(&c);
        let consolidated = map.place_shaped(16, layout, Placement::Consolidated, |_| true).unwrap();
        let ranks: Vec<NodeId> = consolidated.iter().map(|&g| c.node_of(g)).collect();
        assert_eq!(group_spreads(&leaves, &ranks, layout), (2, 2));
    }

    /// A 4x4x1 torus of 1-GPU nodes with nodes (0,0) and (1,1) busy: the most compact
    /// box for 4 GPUs is 2x2 (longest side 2, before 4x1 and 1x4); the first origin in
    /// (z, y, x) order whose box is all free is (2,0): nodes (2,0),(3,0) then, snaking
    /// back, (3,1),(2,1) = nodes 2, 3, 7, 6. With only columns x = 0 and 3 free, the
    /// 2x2 box wraps: origin (3,0) gives nodes 3, 0, then 4, 7.
    #[test]
    fn torus_takes_a_compact_wrapping_box() {
        let torus =
            Topology { torus: Some(Torus { dims: [4, 4, 1], link_gbps: 100.0 }), ..Topology::default() };
        let mut c = cluster(16, 1, |_| 0, Some(torus.clone()));
        hold(&mut c, 100, 0, 0..1);
        hold(&mut c, 101, 5, 0..1);
        let mut map = FreeMap::new(&c);
        let gpus = map.place(4, Placement::Torus, |_| true).unwrap();
        assert_eq!(nodes_of(&c, &gpus), vec![2, 3, 7, 6]);

        let mut c = cluster(16, 1, |_| 0, Some(torus));
        for node in (0..16).filter(|n| n % 4 == 1 || n % 4 == 2) {
            hold(&mut c, 200 + node, node, 0..1);
        }
        let mut map = FreeMap::new(&c);
        let gpus = map.place(4, Placement::Torus, |_| true).unwrap();
        assert_eq!(nodes_of(&c, &gpus), vec![3, 0, 4, 7]);
        // 9 GPUs: 8 free in all, and no box holds them: the job waits.
        let mut map = FreeMap::new(&c);
        assert!(matches!(map.place(9, Placement::Torus, |_| true), Err(WaitReason::NoFreeGpus { .. })));
    }

    /// Four 1-GPU nodes on two leaves (leaf = node mod 2), one spine, vClos. A 2-GPU job
    /// placed on the empty cluster stays in one leaf (nodes 0 and 2: no uplinks). A job
    /// holding nodes 0 and 1 reserves the spine's uplinks on both leaves; the next 2-GPU
    /// job can only span both leaves again (nodes 2 and 3), finds no free uplink and waits.
    #[test]
    fn vclos_reserves_uplinks_and_makes_the_next_job_wait() {
        let topology =
            Topology { spines: 1, nic_gbps: 100.0, routing: Routing::Vclos, ..Topology::default() };
        let mut c = cluster(4, 1, |n| n % 2, Some(topology));
        let mut map = FreeMap::new(&c);
        assert_eq!(nodes_of(&c, &map.place(2, Placement::Vclos, |_| true).unwrap()), vec![0, 2]);
        drop(map);
        let first = [c.gpu(NodeId(0), 0), c.gpu(NodeId(1), 0)];
        c.take(JobId(1), &first);
        let links = c.links().unwrap();
        assert_eq!(
            (links.reserved_owner(0, 0), links.reserved_owner(1, 0)),
            (Some(JobId(1)), Some(JobId(1)))
        );
        let mut map = FreeMap::new(&c);
        assert_eq!(
            map.place(2, Placement::Vclos, |_| true),
            Err(WaitReason::NoIsolatedPaths { needed: 2, uplinks: 1 })
        );
        drop(map);
        let rest = [c.gpu(NodeId(2), 0), c.gpu(NodeId(3), 0)];
        assert!(!c.can_take(&rest), "the engine refuses a start without isolated paths");
        // Preempting the first job in a pass frees its uplinks for the second.
        let mut map = FreeMap::new(&c);
        map.give_back(&first);
        assert!(map.place(2, Placement::Vclos, |_| true).is_ok());
        drop(map);
        c.release(JobId(1), &first);
        assert_eq!(c.links().unwrap().reserved_count(), 0);
        assert!(c.can_take(&rest));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 120, .. Default::default() })]

        /// Random clusters (leaves of random sizes, spines, oversubscription) and random
        /// workloads placed by Arnold, vClos and torus placements, started and finished in
        /// random order: no GPU is ever held twice (`Cluster::take` asserts it), every plan
        /// the placement returns is one the engine accepts (`can_take`: free GPUs and, under
        /// vClos, free isolated uplinks), reservations never exceed the uplinks (each held by
        /// one job, on leaves the job uses, the same spines on each), and the ECMP flow counts
        /// equal the flows of the jobs spanning leaves.
        #[test]
        fn placement_never_exceeds_link_or_gpu_capacity(
            leaf_size in 1u32..5,
            leaves in 1u32..5,
            gpus in 1u32..5,
            spines in 1u32..4,
            over in 1u32..3,
            vclos in proptest::prelude::any::<bool>(),
            ops in proptest::collection::vec((1u32..20, 0usize..3, proptest::prelude::any::<bool>()), 1..40),
        ) {
            let nodes = leaf_size * leaves;
            let topology = Topology {
                spines,
                oversubscription: f64::from(over),
                nic_gbps: 100.0,
                routing: if vclos { Routing::Vclos } else { Routing::Ecmp },
                torus: Some(Torus { dims: [nodes, 1, 1], link_gbps: 100.0 }),
                ..Topology::default()
            };
            let mut c = cluster(nodes, gpus, |n| n / leaf_size, Some(topology));
            let mut running: Vec<(JobId, Vec<GpuId>)> = Vec::new();
            for (i, &(size, how, finish)) in ops.iter().enumerate() {
                if finish && !running.is_empty() {
                    let (job, held) = running.remove(size as usize % running.len());
                    c.release(job, &held);
                } else {
                    let how = [Placement::Arnold, Placement::Vclos, Placement::Torus][how];
                    let layout = (size % 2 == 0).then_some(Layout { tensor: 2, pipeline: 1, data: size / 2 });
                    let mut map = FreeMap::new(&c);
                    let placed = map.place_shaped(size, layout, how, |_| true);
                    drop(map);
                    if let Ok(chosen) = placed {
                        proptest::prop_assert_eq!(chosen.len() as u32, size);
                        if how == Placement::Vclos || !vclos {
                            proptest::prop_assert!(c.can_take(&chosen), "{:?} refused", how);
                        }
                        if c.can_take(&chosen) {
                            c.take(JobId(i as u32), &chosen);
                            running.push((JobId(i as u32), chosen));
                        }
                    }
                }
                let links = c.links().unwrap();
                proptest::prop_assert!(links.reserved_count() <= links.uplink_count());
                let mut flows = 0;
                for (job, held) in &running {
                    let mut job_nodes: Vec<NodeId> = held.iter().map(|&g| c.node_of(g)).collect();
                    job_nodes.sort_unstable();
                    job_nodes.dedup();
                    let used = links.leaves_of_nodes(job_nodes.iter().copied());
                    let reserved: Vec<(u32, u32)> = (0..links.leaves() as u32)
                        .flat_map(|l| (0..spines).map(move |s| (l, s)))
                        .filter(|&(l, s)| links.reserved_owner(l, s) == Some(*job))
                        .collect();
                    for &(l, _) in &reserved {
                        proptest::prop_assert!(used.iter().any(|&(u, _)| u == l), "reserved on a leaf it does not use");
                    }
                    let spines_of = |leaf: u32| reserved.iter().filter(|&&(l, _)| l == leaf).map(|&(_, s)| s).collect::<Vec<_>>();
                    for &(l, _) in &used {
                        proptest::prop_assert_eq!(spines_of(l), spines_of(used[0].0));
                    }
                    if used.len() >= 2 && reserved.is_empty() {
                        flows += job_nodes.len();
                    }
                }
                let counted: usize = (0..links.leaves() as u32).flat_map(|l| (0..spines).map(move |s| (l, s))).map(|(l, s)| links.flows_on(l, s)).sum();
                proptest::prop_assert_eq!(counted, flows);
            }
        }
    }
}
