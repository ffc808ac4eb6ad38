//! Placement stages: turn "this job needs k GPUs" into concrete GPUs.
//!
//! A policy copies the free GPUs into a [`FreeMap`] once per pass, then places
//! (and un-places, for jobs it preempts) against that scratch copy, so that one
//! decision never hands the same GPU to two jobs. The engine checks again.

use std::borrow::Cow;

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
    /// Arnold (2025): the nodes whose leaves keep the job's data- and pipeline-parallel
    /// groups on the fewest leaves (least weighted maximum spread), tensor groups inside
    /// a node (crate::topology_place).
    Arnold,
    /// vClos (2023): a placement within one leaf, or across leaves with isolated uplinks
    /// to common spines free; otherwise the job waits (`NoIsolatedPaths`).
    Vclos,
    /// A compact sub-box of a 3D torus (APEnet+); waits (`Fragmented`) when none is free.
    Torus,
    /// Fast, matched GPUs first, by the cluster's speed factors (`ClusterSpec::gpu_speed`,
    /// crate::variability): a job that fits in one node gets the node whose fastest free
    /// GPUs are fastest (so a gang's GPUs are alike and no fast GPU waits on a slow
    /// one), a wider job the fastest free GPUs anywhere; slow GPUs stay idle longest.
    /// Without factors it is `Consolidated`.
    VariabilityAware,
}

impl Placement {
    /// Whether [`FreeMap::place_shaped`] reads the job's layout under this
    /// placement (the topology-aware ones); the others ignore it.
    pub fn reads_layout(self) -> bool {
        matches!(self, Placement::Arnold | Placement::Vclos | Placement::Torus)
    }

    pub fn name(self) -> &'static str {
        match self {
            Placement::Consolidated => "consolidated",
            Placement::StrictConsolidated => "strict-consolidated",
            Placement::Spread => "spread",
            Placement::Arnold => "arnold",
            Placement::Vclos => "vclos",
            Placement::Torus => "torus",
            Placement::VariabilityAware => "variability-aware",
        }
    }
}

/// Free GPUs of every node that is up, indexed by free count.
///
/// The cluster keeps one up to date as GPUs are taken and released; a
/// [`FreeMap`] starts from a copy. Bucket `f` (1 to the largest node size) is a
/// bitset of the nodes with exactly `f` free GPUs, with a summary bitset of its
/// non-empty words, so that the nodes with at least `k` free GPUs come out in
/// (free count, node id) order without looking at full nodes: placement costs
/// O(nodes it examines), not O(nodes).
#[derive(Debug)]
pub(crate) struct FreeIndex {
    /// Free slots of each node that is up; 0 for a node that is down.
    masks: Vec<u64>,
    /// Free GPUs on nodes that are up.
    free: u32,
    /// Largest free count a node can have (its GPU count): buckets 1..=max_free.
    max_free: u32,
    /// Words per bucket bitset (one bit per node).
    words: usize,
    bits: Vec<u64>,
    /// Words per bucket summary (one bit per word of the bitset).
    summary_words: usize,
    summary: Vec<u64>,
}

impl Clone for FreeIndex {
    fn clone(&self) -> FreeIndex {
        FreeIndex {
            masks: self.masks.clone(),
            free: self.free,
            max_free: self.max_free,
            words: self.words,
            bits: self.bits.clone(),
            summary_words: self.summary_words,
            summary: self.summary.clone(),
        }
    }

    /// Copies into the buffers this index already has (no allocation once they are large enough).
    fn clone_from(&mut self, source: &FreeIndex) {
        self.masks.clone_from(&source.masks);
        self.free = source.free;
        self.max_free = source.max_free;
        self.words = source.words;
        self.bits.clone_from(&source.bits);
        self.summary_words = source.summary_words;
        self.summary.clone_from(&source.summary);
    }
}

/// Set bits of each byte value: the free count of a node of up to 8 GPUs.
const BYTE_COUNTS: [u8; 256] = {
    let mut counts = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        counts[b] = (b as u8).count_ones() as u8;
        b += 1;
    }
    counts
};

/// `mask.count_ones()`, by table for a node of up to 8 GPUs: the build targets
/// x86-64 without `popcnt`, where `count_ones` is a dozen instructions, and
/// [`FreeIndex::set`] counts two masks per node a job takes or gives back.
#[inline]
fn free_count(mask: u64) -> u32 {
    if mask < 256 {
        u32::from(BYTE_COUNTS[mask as usize])
    } else {
        mask.count_ones()
    }
}

thread_local! {
    /// Copies of free indexes that finished [`FreeMap`]s left behind, reused by the
    /// next pass on this thread: a pass that places a job copies the cluster's index
    /// into one (a `memcpy`) instead of allocating three vectors and freeing them.
    static SPARE_INDEXES: std::cell::RefCell<Vec<FreeIndex>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Most spare indexes kept per thread (passes that nest free maps use a few at once).
const MAX_SPARE_INDEXES: usize = 4;

impl FreeIndex {
    /// `masks[n]`: free slots of node `n` if it is up, else 0; `max_free`: the largest node size.
    pub(crate) fn new(masks: Vec<u64>, max_free: u32) -> FreeIndex {
        let words = masks.len().div_ceil(64).max(1);
        let summary_words = words.div_ceil(64);
        let buckets = max_free as usize;
        let mut index = FreeIndex {
            masks: vec![0; masks.len()],
            free: 0,
            max_free,
            words,
            bits: vec![0; buckets * words],
            summary_words,
            summary: vec![0; buckets * summary_words],
        };
        for (n, &mask) in masks.iter().enumerate() {
            index.set(NodeId(n as u32), mask);
        }
        index
    }

    pub(crate) fn free(&self) -> u32 {
        self.free
    }
    pub(crate) fn mask(&self, node: NodeId) -> u64 {
        self.masks[node.index()]
    }

    /// Sets the free slots of `node` (0 if it is down), moving it between buckets.
    pub(crate) fn set(&mut self, node: NodeId, mask: u64) {
        let before = free_count(self.masks[node.index()]);
        let after = free_count(mask);
        assert!(
            after <= self.max_free,
            "{node} cannot have {after} free GPUs (largest node: {})",
            self.max_free
        );
        self.masks[node.index()] = mask;
        if before != after {
            if before > 0 {
                self.remove(before, node.0);
            }
            if after > 0 {
                self.insert(after, node.0);
            }
            self.free = self.free + after - before;
        }
    }

    fn insert(&mut self, free: u32, node: u32) {
        let (word, bit) = (node as usize / 64, node % 64);
        let bucket = free as usize - 1;
        self.bits[bucket * self.words + word] |= 1u64 << bit;
        self.summary[bucket * self.summary_words + word / 64] |= 1u64 << (word % 64);
    }

    fn remove(&mut self, free: u32, node: u32) {
        let (word, bit) = (node as usize / 64, node % 64);
        let bucket = free as usize - 1;
        let slot = &mut self.bits[bucket * self.words + word];
        debug_assert!(*slot & (1u64 << bit) != 0, "node {node} missing from bucket {free}");
        *slot &= !(1u64 << bit);
        if *slot == 0 {
            self.summary[bucket * self.summary_words + word / 64] &= !(1u64 << (word % 64));
        }
    }

    /// Calls `each` on the nodes with exactly `free` free GPUs, in id order,
    /// until it returns true; returns whether it did.
    fn scan_bucket(&self, free: u32, mut each: impl FnMut(NodeId) -> bool) -> bool {
        let bucket = free as usize - 1;
        let bits = &self.bits[bucket * self.words..(bucket + 1) * self.words];
        let summary = &self.summary[bucket * self.summary_words..(bucket + 1) * self.summary_words];
        for (s, &summary_word) in summary.iter().enumerate() {
            let mut words = summary_word;
            while words != 0 {
                let w = s * 64 + words.trailing_zeros() as usize;
                words &= words - 1;
                let mut nodes = bits[w];
                while nodes != 0 {
                    let node = NodeId((w * 64) as u32 + nodes.trailing_zeros());
                    nodes &= nodes - 1;
                    if each(node) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Calls `each` on the nodes with a free GPU, most free first, ties by id.
    fn scan_most_free_first(&self, mut each: impl FnMut(u32, NodeId)) {
        for f in (1..=self.max_free).rev() {
            self.scan_bucket(f, |n| {
                each(f, n);
                false
            });
        }
    }

    /// The first node `usable` accepts after `after` in (most free first, then id)
    /// order, with its free count; from the start without `after`. Costs the
    /// bucket words it passes, not the nodes.
    fn next_most_free(
        &self,
        after: Option<(u32, NodeId)>,
        usable: &impl Fn(NodeId) -> bool,
    ) -> Option<(u32, NodeId)> {
        let top = after.map_or(self.max_free, |(f, _)| f);
        for f in (1..=top).rev() {
            let bucket = &self.bits[(f as usize - 1) * self.words..f as usize * self.words];
            // In the bucket `after` is in, the nodes after it; in lower buckets, all.
            let start = after.filter(|&(af, _)| af == f).map_or(0, |(_, n)| n.0 as usize + 1);
            for (w, &word) in bucket.iter().enumerate().skip(start / 64) {
                let mut nodes = if w == start / 64 { word & (u64::MAX << (start % 64)) } else { word };
                while nodes != 0 {
                    let node = NodeId((w * 64) as u32 + nodes.trailing_zeros());
                    nodes &= nodes - 1;
                    if usable(node) {
                        return Some((f, node));
                    }
                }
            }
        }
        None
    }

    /// The best-fitting node for `needed` GPUs: fewest free GPUs, then lowest id, among
    /// the nodes `usable` accepts with at least `needed` free.
    fn best_fit(&self, needed: u32, usable: &impl Fn(NodeId) -> bool) -> Option<NodeId> {
        let mut found = None;
        for f in needed..=self.max_free {
            if self.scan_bucket(f, |n| {
                found = Some(n);
                usable(n)
            }) {
                return found;
            }
        }
        None
    }
}

/// A scratch copy of which GPUs are free on nodes that are up.
#[derive(Clone, Debug)]
pub struct FreeMap<'a> {
    cluster: &'a Cluster,
    /// The cluster's index, copied (O(nodes) bytes, no scan) on the first change.
    index: Cow<'a, FreeIndex>,
    /// vClos uplinks reserved in this pass beyond the cluster's (leaf, spine); and
    /// those of jobs given back (crate::topology_place).
    reserved: crate::topology_place::PassReservations,
    /// The candidate nodes of a placement across nodes, (free, node): a buffer the
    /// pass's placements share, so that only its first allocates.
    candidates: Vec<(u32, NodeId)>,
}

impl Drop for FreeMap<'_> {
    /// Leaves a changed copy of the index to the thread's next pass (see `SPARE_INDEXES`).
    fn drop(&mut self) {
        if let Cow::Owned(index) =
            std::mem::replace(&mut self.index, Cow::Borrowed(self.cluster.free_index()))
        {
            // During thread teardown the spares may be gone already: the copy is then just freed.
            let _ = SPARE_INDEXES.try_with(|spares| {
                let mut spares = spares.borrow_mut();
                if spares.len() < MAX_SPARE_INDEXES {
                    spares.push(index);
                }
            });
        }
    }
}

impl<'a> FreeMap<'a> {
    pub fn new(cluster: &'a Cluster) -> FreeMap<'a> {
        FreeMap {
            cluster,
            index: Cow::Borrowed(cluster.free_index()),
            reserved: Default::default(),
            candidates: Vec::new(),
        }
    }

    pub fn free(&self) -> u32 {
        self.index.free()
    }

    /// The index to change: on the first change, a copy of the cluster's, made in
    /// a spare from an earlier pass when this thread has one.
    fn index_mut(&mut self) -> &mut FreeIndex {
        if let Cow::Borrowed(shared) = self.index {
            let copy = match SPARE_INDEXES.with(|spares| spares.borrow_mut().pop()) {
                Some(mut spare) => {
                    spare.clone_from(shared);
                    spare
                }
                None => shared.clone(),
            };
            self.index = Cow::Owned(copy);
        }
        self.index.to_mut()
    }

    pub fn free_on(&self, node: NodeId) -> u32 {
        self.index.mask(node).count_ones()
    }

    /// Marks GPUs of a job this pass preempts as free again (and, under vClos, its uplinks).
    pub fn give_back(&mut self, gpus: &[GpuId]) {
        if let Some(owner) = gpus.first().and_then(|&g| self.cluster.owner(g)) {
            self.reserved.give_back(self.cluster, owner);
        }
        // A job's GPUs come node by node: each run of GPUs on one node moves
        // that node between free-count buckets once, not once per GPU.
        let mut rest = gpus;
        while let Some(&first) = rest.first() {
            let node = self.cluster.node_of(first);
            let run = rest.iter().take_while(|&&g| self.cluster.node_of(g) == node).count();
            let (on_node, after) = rest.split_at(run);
            rest = after;
            if !self.cluster.is_up(node) {
                continue;
            }
            let mut bits = 0u64;
            for &g in on_node {
                let bit = 1u64 << self.cluster.slot_of(g);
                debug_assert_eq!(bits & bit, 0, "{g} given back twice");
                bits |= bit;
            }
            let mask = self.index.mask(node);
            debug_assert_eq!(mask & bits, 0, "a GPU of {node} given back twice");
            self.index_mut().set(node, mask | bits);
        }
    }

    /// Chooses `needed` GPUs on nodes `usable` accepts and marks them taken.
    ///
    /// `usable` is asked only about nodes with a free GPU, and only as far as the
    /// choice needs: a job that fits in one node costs O(log nodes) lookups plus
    /// the nodes `usable` turns down before the best fit.
    pub fn place(
        &mut self,
        needed: u32,
        how: Placement,
        usable: impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        self.place_shaped(needed, None, how, usable)
    }

    /// [`FreeMap::place`] for a job with a parallel layout, which the topology-aware
    /// placements (Arnold) read; the others ignore it.
    pub fn place_shaped(
        &mut self,
        needed: u32,
        layout: Option<crate::job::Layout>,
        how: Placement,
        usable: impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        if needed == 0 {
            return Ok(Vec::new());
        }
        if how == Placement::VariabilityAware && !self.cluster.spec().gpu_speed.is_empty() {
            return self.place_by_speed(needed, &usable);
        }
        if how != Placement::Spread {
            // The best-fitting single node, if any, is what consolidation picks first.
            if let Some(node) = self.index.best_fit(needed, &usable) {
                return Ok(self.take_plan(&[(node, needed)]));
            }
        }
        if matches!(
            how,
            Placement::Consolidated | Placement::StrictConsolidated | Placement::VariabilityAware
        ) {
            return self.consolidate_lazily(needed, how, &usable);
        }
        // One scan: the usable nodes with free GPUs, most free first, and their total.
        let mut nodes = std::mem::take(&mut self.candidates);
        nodes.clear();
        self.index.scan_most_free_first(|f, n| {
            if usable(n) {
                nodes.push((f, n));
            }
        });
        let free = nodes.iter().map(|&(f, _)| f).sum();
        let chosen = self.place_across(&nodes, needed, free, layout, how);
        self.candidates = nodes;
        chosen
    }

    /// [`consolidate`] over the usable nodes for a job no single node takes, reading
    /// the index only as far as the plan goes: the nodes with the most free GPUs
    /// one at a time, each followed by a best fit for the rest among the nodes not
    /// taken. The same plan and verdicts as `consolidate` over the full list
    /// (`index_agrees_with_a_brute_force_scan`), without a scan of every node
    /// unless the job does not fit.
    fn consolidate_lazily(
        &mut self,
        needed: u32,
        how: Placement,
        usable: &impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        let mut plan: Vec<(NodeId, u32)> = Vec::new();
        let mut left = needed;
        let mut last = None;
        // No single node takes `needed` (checked by the caller): take the node with the most free first.
        while left > 0 {
            let Some((free, node)) = self.index.next_most_free(last, usable) else {
                return Err(WaitReason::NoFreeGpus { needed, free: self.usable_free(usable) });
            };
            plan.push((node, free));
            left -= free.min(left);
            last = Some((free, node));
            if left == 0 {
                break;
            }
            let taken = |n: NodeId| plan.iter().any(|&(p, _)| p == n);
            if let Some(best) = self.index.best_fit(left, &|n| usable(n) && !taken(n)) {
                plan.push((best, left));
                break;
            }
        }
        if how == Placement::StrictConsolidated {
            let per_node = self.cluster.max_gpus_per_node().max(1);
            if plan.len() as u32 > needed.div_ceil(per_node) {
                return Err(WaitReason::Fragmented { needed, free: self.usable_free(usable) });
            }
        }
        Ok(self.take_plan(&plan))
    }

    /// Free GPUs on the nodes `usable` accepts.
    fn usable_free(&self, usable: &impl Fn(NodeId) -> bool) -> u32 {
        let mut free = 0;
        self.index.scan_most_free_first(|f, n| {
            if usable(n) {
                free += f;
            }
        });
        free
    }

    /// [`FreeMap::place_shaped`] for a job no single node takes: `nodes` are the
    /// usable nodes with free GPUs, most free first, and `free` their free GPUs.
    fn place_across(
        &mut self,
        nodes: &[(u32, NodeId)],
        needed: u32,
        free: u32,
        layout: Option<crate::job::Layout>,
        how: Placement,
    ) -> Result<Vec<GpuId>, WaitReason> {
        if free < needed {
            return Err(WaitReason::NoFreeGpus { needed, free });
        }
        let plan = match how {
            Placement::Consolidated | Placement::StrictConsolidated | Placement::VariabilityAware => {
                consolidate(nodes, needed)
            }
            Placement::Spread => spread(nodes, needed),
            Placement::Arnold | Placement::Vclos | Placement::Torus => {
                let scratch =
                    crate::topology_place::Scratch { cluster: self.cluster, reserved: &self.reserved };
                let plan = crate::topology_place::plan(&scratch, nodes, needed, layout, how, free)?;
                if how == Placement::Vclos {
                    self.reserve(&plan);
                }
                plan
            }
        };
        if how == Placement::StrictConsolidated {
            let per_node = self.cluster.max_gpus_per_node().max(1);
            if plan.len() as u32 > needed.div_ceil(per_node) {
                return Err(WaitReason::Fragmented { needed, free });
            }
        }
        Ok(self.take_plan(&plan))
    }

    /// Records the vClos uplinks a plan across leaves takes in this pass.
    fn reserve(&mut self, plan: &[(NodeId, u32)]) {
        let cluster = self.cluster;
        self.reserved.reserve(cluster, plan);
    }

    /// `Placement::VariabilityAware` on a cluster with speed factors: in one node if any has
    /// room (the node whose `needed` fastest free GPUs have the fastest slowest one; ties:
    /// fewest free GPUs, then lowest id), else the `needed` fastest free GPUs anywhere.
    /// GPUs come fastest first (ties by id), so consecutive ranks have similar speeds.
    fn place_by_speed(
        &mut self,
        needed: u32,
        usable: &impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        let speed = &self.cluster.spec().gpu_speed;
        let mut nodes: Vec<(u32, NodeId)> = Vec::new();
        self.index.scan_most_free_first(|f, n| {
            if usable(n) {
                nodes.push((f, n));
            }
        });
        let free: u32 = nodes.iter().map(|&(f, _)| f).sum();
        if free < needed {
            return Err(WaitReason::NoFreeGpus { needed, free });
        }
        let fastest_first = |gpus: &mut Vec<GpuId>| {
            gpus.sort_by(|a, b| speed[b.index()].total_cmp(&speed[a.index()]).then(a.cmp(b)))
        };
        let free_gpus = |node: NodeId| -> Vec<GpuId> {
            let mut mask = self.index.mask(node);
            let mut gpus = Vec::with_capacity(mask.count_ones() as usize);
            while mask != 0 {
                gpus.push(self.cluster.gpu(node, mask.trailing_zeros()));
                mask &= mask - 1;
            }
            gpus
        };
        let mut best: Option<(f64, u32, NodeId, Vec<GpuId>)> = None;
        for &(f, node) in nodes.iter().filter(|&&(f, _)| f >= needed) {
            let mut gpus = free_gpus(node);
            fastest_first(&mut gpus);
            gpus.truncate(needed as usize);
            let slowest = speed[gpus[gpus.len() - 1].index()];
            let better = match &best {
                None => true,
                Some((s, bf, bn, _)) => {
                    slowest.total_cmp(s).then(bf.cmp(&f)).then(bn.cmp(&node)) == std::cmp::Ordering::Greater
                }
            };
            if better {
                best = Some((slowest, f, node, gpus));
            }
        }
        let chosen = match best {
            Some((_, _, _, gpus)) => gpus,
            None => {
                let mut gpus: Vec<GpuId> = nodes.iter().flat_map(|&(_, n)| free_gpus(n)).collect();
                fastest_first(&mut gpus);
                gpus.truncate(needed as usize);
                gpus
            }
        };
        for &g in &chosen {
            let node = self.cluster.node_of(g);
            let mask = self.index.mask(node) & !(1u64 << self.cluster.slot_of(g));
            self.index_mut().set(node, mask);
        }
        Ok(chosen)
    }

    fn take_plan(&mut self, plan: &[(NodeId, u32)]) -> Vec<GpuId> {
        let mut gpus = Vec::with_capacity(plan.iter().map(|&(_, count)| count as usize).sum());
        for &(node, count) in plan {
            let mut mask = self.index.mask(node);
            for _ in 0..count {
                let slot = mask.trailing_zeros();
                mask &= !(1u64 << slot);
                gpus.push(self.cluster.gpu(node, slot));
            }
            self.index_mut().set(node, mask);
        }
        gpus
    }
}

/// Best fit in one node if possible; otherwise fill from the emptiest nodes
/// (most free) and finish with a best fit for the remainder. `nodes` come most
/// free first, ties by id.
pub(crate) fn consolidate(nodes: &[(u32, NodeId)], needed: u32) -> Vec<(NodeId, u32)> {
    let mut plan = Vec::new();
    let mut left = needed;
    let mut rest = nodes;
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

/// Round-robin one GPU per node, nodes with the most free GPUs first (the
/// order `nodes` come in, ties by id).
fn spread(nodes: &[(u32, NodeId)], needed: u32) -> Vec<(NodeId, u32)> {
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

    /// The table count is `count_ones` for every byte, and for masks past a byte.
    #[test]
    fn free_count_is_count_ones() {
        for mask in 0u64..1024 {
            assert_eq!(free_count(mask), mask.count_ones(), "{mask:#b}");
        }
        for shift in 0..64 {
            let mask = u64::MAX << shift;
            assert_eq!(free_count(mask), mask.count_ones(), "{mask:#b}");
        }
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

    /// The placement rules as they were before the index: scan every node, sort
    /// by (free descending, id), then the same plan rules (`consolidate`, `spread`,
    /// unchanged by the index). The index must choose exactly these GPUs.
    fn brute_force_place(
        c: &Cluster,
        masks: &mut [u64],
        needed: u32,
        how: Placement,
        usable: impl Fn(NodeId) -> bool,
    ) -> Result<Vec<GpuId>, WaitReason> {
        if needed == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<(u32, NodeId)> = (0..masks.len())
            .map(|n| NodeId(n as u32))
            .filter(|&n| masks[n.index()] != 0 && usable(n))
            .map(|n| (masks[n.index()].count_ones(), n))
            .collect();
        let free: u32 = nodes.iter().map(|(f, _)| f).sum();
        if free < needed {
            return Err(WaitReason::NoFreeGpus { needed, free });
        }
        nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let plan = match how {
            Placement::Consolidated | Placement::StrictConsolidated | Placement::VariabilityAware => {
                consolidate(&nodes, needed)
            }
            Placement::Spread => spread(&nodes, needed),
            Placement::Arnold | Placement::Vclos | Placement::Torus => unreachable!("not drawn in this test"),
        };
        let per_node = c.spec().nodes.iter().map(|n| n.gpus).max().unwrap_or(0).max(1);
        if how == Placement::StrictConsolidated && plan.len() as u32 > needed.div_ceil(per_node) {
            return Err(WaitReason::Fragmented { needed, free });
        }
        let mut gpus = Vec::new();
        for (node, count) in plan {
            for _ in 0..count {
                let slot = masks[node.index()].trailing_zeros();
                masks[node.index()] &= !(1u64 << slot);
                gpus.push(c.gpu(node, slot));
            }
        }
        Ok(gpus)
    }

    /// Free slots of each node as a fresh scan sees them (0 for nodes that are down).
    fn scanned_masks(c: &Cluster) -> Vec<u64> {
        (0..c.node_count() as u32).map(NodeId).map(|n| if c.is_up(n) { c.free_mask(n) } else { 0 }).collect()
    }

    /// What the index holds: masks, total, and the nodes in (free desc, id) order.
    fn index_view(index: &FreeIndex) -> (Vec<u64>, u32, Vec<(u32, NodeId)>) {
        let mut order = Vec::new();
        index.scan_most_free_first(|f, n| order.push((f, n)));
        (index.masks.clone(), index.free(), order)
    }

    /// The same, from a scan of the cluster.
    fn scan_view(c: &Cluster) -> (Vec<u64>, u32, Vec<(u32, NodeId)>) {
        let masks = scanned_masks(c);
        let mut order: Vec<(u32, NodeId)> = (0..masks.len() as u32)
            .map(NodeId)
            .filter(|n| masks[n.index()] != 0)
            .map(|n| (masks[n.index()].count_ones(), n))
            .collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        (masks.clone(), masks.iter().map(|m| m.count_ones()).sum(), order)
    }

    #[test]
    fn index_iterates_buckets_past_one_word() {
        // 200 nodes: bitsets of several words, summary of one.
        let free: Vec<u32> = (0..200).map(|n| [0, 3, 8, 1, 3][n % 5]).collect();
        let c = cluster_with_free(&free);
        let map = FreeMap::new(&c);
        let order = index_view(&map.index).2;
        let mut expected: Vec<(u32, NodeId)> =
            (0..200u32).filter(|&n| free[n as usize] > 0).map(|n| (free[n as usize], NodeId(n))).collect();
        expected.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        assert_eq!(order, expected);
        assert_eq!(map.free(), free.iter().sum::<u32>());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, .. Default::default() })]

        /// On random clusters (node sizes, two GPU types, nodes down, GPUs held),
        /// a sequence of placements and give-backs picks exactly the GPUs the
        /// brute-force scan picks, with the same verdicts; the cluster's own index
        /// agrees with a scan after every take, release and node change.
        #[test]
        fn index_agrees_with_a_brute_force_scan(
            sizes in proptest::collection::vec((1u32..=12, 0u32..2), 1..150),
            held in proptest::collection::vec(proptest::prelude::any::<u64>(), 150),
            down in proptest::collection::vec(0usize..150, 0..6),
            ops in proptest::collection::vec((0u32..40, 0usize..3, 0u32..3, proptest::prelude::any::<bool>()), 1..40),
        ) {
            let mut spec = ClusterSpec { gpu_types: vec!["a".into(), "b".into()], ..Default::default() };
            for &(gpus, ty) in &sizes {
                spec.add_nodes(crate::ids::GpuTypeId(ty), 1, gpus, 0, 0);
            }
            let mut c = Cluster::new(spec).unwrap();
            for (n, (&(gpus, _), &bits)) in sizes.iter().zip(&held).enumerate() {
                let taken: Vec<GpuId> =
                    (0..gpus).filter(|s| bits & (1 << s) != 0).map(|s| c.gpu(NodeId(n as u32), s)).collect();
                c.take(JobId(n as u32), &taken);
                proptest::prop_assert_eq!(index_view(c.free_index()), scan_view(&c));
            }
            for &d in &down {
                c.set_up(NodeId((d % sizes.len()) as u32), false);
                proptest::prop_assert_eq!(index_view(c.free_index()), scan_view(&c));
            }
            let mut map = FreeMap::new(&c);
            let mut masks = scanned_masks(&c);
            let mut placed: Vec<Vec<GpuId>> = Vec::new();
            for &(needed, how, filter, give_back) in &ops {
                if give_back && !placed.is_empty() {
                    let gpus = placed.remove(needed as usize % placed.len());
                    map.give_back(&gpus);
                    for g in gpus {
                        masks[c.node_of(g).index()] |= 1 << c.slot_of(g);
                    }
                    continue;
                }
                let how = [Placement::Consolidated, Placement::StrictConsolidated, Placement::Spread][how];
                let usable = |n: NodeId| filter == 2 || c.node(n).gpu_type.0 == filter;
                let got = map.place(needed, how, usable);
                let want = brute_force_place(&c, &mut masks, needed, how, usable);
                proptest::prop_assert_eq!(&got, &want);
                proptest::prop_assert_eq!(map.free(), masks.iter().map(|m| m.count_ones()).sum::<u32>());
                proptest::prop_assert_eq!(&map.index.masks, &masks);
                if let Ok(gpus) = got {
                    placed.push(gpus);
                }
            }
            drop(map);
            // Releases and nodes coming back keep the cluster's index in step with a scan.
            for (n, (&(gpus, _), &bits)) in sizes.iter().zip(&held).enumerate() {
                let taken: Vec<GpuId> =
                    (0..gpus).filter(|s| bits & (1 << s) != 0).map(|s| c.gpu(NodeId(n as u32), s)).collect();
                c.release(JobId(n as u32), &taken);
                c.set_up(NodeId(n as u32), true);
                proptest::prop_assert_eq!(index_view(c.free_index()), scan_view(&c));
            }
        }
    }
}
