//! Synergy (OSDI'22): resource-sensitive scheduling. Jobs differ in how much
//! they speed up with CPUs and memory beside their GPUs (throughput matrices,
//! `cotenant_perf::synergy`); Synergy gives each job the CPUs and memory that
//! help it most, in 300 s rounds.
//!
//! Each pass, an ordering (FIFO, SRTF, LAS or finish-time fairness) ranks every
//! active job; the jobs whose GPUs fit, in that order, are picked (a job that
//! does not fit is skipped, later ones may still fit). At a round boundary a
//! running job that is not picked is preempted; between rounds running jobs
//! stay and waiting jobs fill free GPUs. Picked waiting jobs then get CPUs and
//! memory from the allocation mechanism:
//! - Proportional: n_gpu x (C/G, M/G) of the server, whatever the job.
//! - Greedy: the job's best-case demand (the smallest point reaching its peak
//!   throughput), or it is skipped (its GPUs may idle).
//! - TUNE: best-case on the servers with the fewest free GPUs first; failing
//!   that, the proportional share (component-wise at most best-case); failing
//!   that, a server with enough free GPUs whose co-located jobs above
//!   proportional are shrunk back to proportional (largest excess first) until
//!   the shortfall is covered. A picked job never gets less than proportional,
//!   and no GPU idles for lack of CPUs or memory.
//! - OPT: an LP over one-hot (CPU, memory) choices per job (relaxed, cluster
//!   totals, no job below proportional throughput) maximizing total throughput:
//!   its value bounds what any allocation of the round achieves; each job's
//!   largest LP choice becomes its target, placed as TUNE places best-case.
//!
//! At a round boundary, TUNE, Greedy and OPT also grow running jobs below their
//! target where their servers have room (the paper re-allocates every round).
//! Allocations are whole CPUs and GiB; a proportional share rounds down.

use std::collections::BTreeMap;
use std::sync::Arc;

use cotenant_core::host::{proportional, split};
use cotenant_core::{
    Action, ClusterView, Decision, GpuId, HostAlloc, JobId, JobState, NodeId, Policy, PolicyCx, Span, Time,
    WaitReason,
};
use cotenant_perf::synergy::{Matrix, PerGpu, SynergyMatrices};
use good_lp::{constraint, variable, Expression, Solution as _, SolverModel};

/// Synergy's round (lease) length.
pub const ROUND: Span = Span(300 * cotenant_core::MICROS_PER_SECOND);

/// How CPUs and memory are given to the picked jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Proportional,
    Greedy,
    Tune,
    Opt,
}

/// The base policy that ranks jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Fifo,
    Srtf,
    Las,
    /// Finish-time fairness: largest rho = (time in system + remaining) / duration first.
    Ftf,
}

/// The Synergy policy: an order and an allocation mechanism.
#[derive(Clone, Debug)]
pub struct Synergy {
    pub mechanism: Mechanism,
    pub order: Order,
    pub round: Span,
    matrices: Arc<SynergyMatrices>,
    /// Jobs were waiting or running after the last pass (rounds tick only then).
    active: bool,
    /// Matrix index per workload job type; `None`: unknown type (treated as language-like, 1.0 everywhere).
    class_of_type: Vec<Option<usize>>,
}

impl Synergy {
    pub fn new(
        mechanism: Mechanism,
        order: Order,
        round: Span,
        matrices: Arc<SynergyMatrices>,
        job_types: &[String],
    ) -> Synergy {
        let class_of_type = job_types
            .iter()
            .map(|t| matrices.for_job_type(t).and_then(|m| matrices.classes.iter().position(|c| c == m)))
            .collect();
        Synergy { mechanism, order, round, matrices, active: false, class_of_type }
    }

    fn matrix(&self, job: &JobState) -> Option<&Matrix> {
        let class = job.spec.job_type.and_then(|t| self.class_of_type.get(t as usize).copied().flatten());
        class.map(|c| &self.matrices.classes[c])
    }

    /// Best-case demand per GPU, or the proportional point for a job of no known class.
    fn best_case(&self, job: &JobState) -> PerGpu {
        self.matrix(job).map_or(self.matrices.fair(), |m| self.matrices.best_case(m))
    }

    fn sort_key(&self, job: &JobState, now: Time) -> (f64, Time, JobId) {
        let key = match self.order {
            Order::Fifo => 0.0,
            Order::Srtf => job.remaining_estimate(now).map_or(f64::MAX, |s| s.0 as f64),
            Order::Las => job.attained_gpu_us(now) as f64,
            Order::Ftf => {
                let ideal = job.spec.duration_estimate.map_or(job.spec.work, |d| d.as_secs_f64()).max(1e-9);
                let remaining = job.remaining_estimate(now).map_or(ideal, |s| s.as_secs_f64());
                -((now - job.spec.arrival).as_secs_f64() + remaining) / ideal
            }
        };
        (key, job.spec.arrival, job.id())
    }
}

impl Policy for Synergy {
    fn name(&self) -> &'static str {
        match self.mechanism {
            Mechanism::Proportional => "synergy-proportional",
            Mechanism::Greedy => "synergy-greedy",
            Mechanism::Tune => "synergy-tune",
            Mechanism::Opt => "synergy-opt",
        }
    }

    fn host_resources(&self) -> bool {
        true
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let boundary = view.now.0.is_multiple_of(self.round.0.max(1));
        let mut jobs: Vec<&JobState> = view.running_jobs().chain(view.pending_jobs()).collect();
        let keys: BTreeMap<JobId, (f64, Time, JobId)> =
            jobs.iter().map(|j| (j.id(), self.sort_key(j, view.now))).collect();
        jobs.sort_by(|a, b| {
            let (ka, kb) = (keys[&a.id()], keys[&b.id()]);
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1)).then(ka.2.cmp(&kb.2))
        });
        let picked = pick(view, &jobs, boundary);
        let mut round = Round::new(self, view);
        let mut decision = Decision::default();
        for job in view.running_jobs() {
            if !picked.contains(&job.id()) {
                decision.actions.push(Action::Preempt { job: job.id() });
                round.release(job.id());
            }
        }
        let waiting: Vec<&JobState> =
            jobs.iter().copied().filter(|j| !j.is_running() && picked.contains(&j.id())).collect();
        let targets = match self.mechanism {
            Mechanism::Opt => self.opt_targets(view, &jobs, &picked),
            _ => BTreeMap::new(),
        };
        for job in &waiting {
            let best = targets.get(&job.id()).copied().unwrap_or_else(|| self.best_case(job));
            if !round.place(job, best, self.mechanism) {
                decision.waiting.push((job.id(), WaitReason::NoHostResources));
            }
        }
        if boundary && self.mechanism != Mechanism::Proportional {
            for job in jobs.iter().filter(|j| j.is_running() && picked.contains(&j.id())) {
                let best = targets.get(&job.id()).copied().unwrap_or_else(|| self.best_case(job));
                round.grow(job.id(), best);
            }
        }
        for job in jobs.iter().filter(|j| !j.is_running() && !picked.contains(&j.id())) {
            decision.waiting.push((job.id(), WaitReason::NotThisRound));
        }
        round.finish(&mut decision);
        self.active = !jobs.is_empty();
        decision
    }

    fn next_round(&self, now: Time) -> Option<Time> {
        let round = self.round.0.max(1);
        self.active.then(|| Time((now.0 / round + 1) * round))
    }
}

/// The registry's builder: options `order` (fifo, srtf, las, ftf) and `round`.
pub fn build(
    mechanism: Mechanism,
    params: &crate::PolicyParams,
    options: &mut crate::registry::Options<'_>,
) -> Result<Box<dyn Policy>, crate::PolicyError> {
    let order = match options.choice("order", &["fifo", "srtf", "las", "ftf"])? {
        "srtf" => Order::Srtf,
        "las" => Order::Las,
        "ftf" => Order::Ftf,
        _ => Order::Fifo,
    };
    let round = options.span("round", params.round.unwrap_or(ROUND))?;
    let matrices = params.synergy_matrices.clone().unwrap_or_else(|| Arc::new(SynergyMatrices::bundled()));
    Ok(Box::new(Synergy::new(mechanism, order, round, matrices, &params.job_types)))
}

/// The jobs whose GPUs fit, in order, within their tenants' hard limits.
/// Between rounds, running jobs all stay.
fn pick(view: &ClusterView<'_>, ordered: &[&JobState], boundary: bool) -> Vec<JobId> {
    let mut left = view.cluster.up_gpus();
    let mut tenant_gpus = vec![0u32; view.tenants.len()];
    let mut picked = Vec::new();
    if !boundary {
        left = view.cluster.free_gpus();
        tenant_gpus = view.tenant_gpus.to_vec();
        picked.extend(view.running.iter().copied());
    }
    for job in ordered.iter().filter(|j| boundary || !j.is_running()) {
        let tenant = job.spec.tenant.index();
        let within_limit =
            view.tenants[tenant].gpu_limit.is_none_or(|l| tenant_gpus[tenant] + job.spec.gpus <= l);
        if job.spec.gpus <= left && within_limit {
            left -= job.spec.gpus;
            tenant_gpus[tenant] += job.spec.gpus;
            picked.push(job.id());
        }
    }
    picked.sort_unstable();
    picked
}

/// One node in the round's working copy.
#[derive(Clone, Debug)]
struct NodeState {
    up: bool,
    /// Free GPU slots, ascending.
    free_slots: Vec<u32>,
    capacity: HostAlloc,
    free: HostAlloc,
    gpus: u32,
}

/// A job holding GPUs in the round's working copy.
#[derive(Clone, Debug)]
struct Holder {
    layout: Vec<(NodeId, u32)>,
    gpus: Vec<GpuId>,
    alloc: HostAlloc,
    running: bool,
    changed: bool,
}

/// The round's working copy of the cluster: what is free, who holds what.
struct Round<'v, 'p> {
    view: &'v ClusterView<'v>,
    policy: &'p Synergy,
    nodes: Vec<NodeState>,
    holders: BTreeMap<JobId, Holder>,
}

impl<'v, 'p> Round<'v, 'p> {
    fn new(policy: &'p Synergy, view: &'v ClusterView<'v>) -> Round<'v, 'p> {
        let cluster = view.cluster;
        let nodes = (0..cluster.node_count())
            .map(|n| {
                let node = NodeId(n as u32);
                let mask = cluster.free_mask(node);
                let gpus = cluster.node(node).gpus;
                NodeState {
                    up: cluster.is_up(node),
                    free_slots: (0..gpus).filter(|s| mask & (1u64 << s) != 0).collect(),
                    capacity: cluster.host().capacity(node),
                    free: cluster.host().free(node),
                    gpus,
                }
            })
            .collect();
        let holders = view
            .running_jobs()
            .map(|job| {
                let layout = layout_of(view, &job.gpus);
                let holder =
                    Holder { layout, gpus: job.gpus.clone(), alloc: job.host, running: true, changed: false };
                (job.id(), holder)
            })
            .collect();
        Round { view, policy, nodes, holders }
    }

    /// A preempted job gives back its GPUs, CPUs and memory.
    fn release(&mut self, job: JobId) {
        let Some(holder) = self.holders.remove(&job) else { return };
        for (&(node, _), share) in holder.layout.iter().zip(self.shares(&holder.layout, holder.alloc)) {
            let n = &mut self.nodes[node.index()];
            n.free.cpus += share.cpus;
            n.free.memory_gib += share.memory_gib;
        }
        for g in holder.gpus {
            let node = self.view.cluster.node_of(g);
            let slots = &mut self.nodes[node.index()].free_slots;
            slots.push(self.view.cluster.slot_of(g));
            slots.sort_unstable();
        }
    }

    fn shares(&self, layout: &[(NodeId, u32)], alloc: HostAlloc) -> Vec<HostAlloc> {
        let weights: Vec<u32> = layout.iter().map(|&(_, k)| k).collect();
        let cpus = split(alloc.cpus, &weights);
        let memory = split(alloc.memory_gib, &weights);
        cpus.into_iter().zip(memory).map(|(cpus, memory_gib)| HostAlloc { cpus, memory_gib }).collect()
    }

    /// The GPU-proportional allocation of a job laid out so (0 where not modelled).
    fn proportional(&self, layout: &[(NodeId, u32)]) -> HostAlloc {
        let mut total = HostAlloc::default();
        for &(node, k) in layout {
            let n = &self.nodes[node.index()];
            total.cpus += proportional(n.capacity.cpus, n.gpus, k);
            total.memory_gib += proportional(n.capacity.memory_gib, n.gpus, k);
        }
        total
    }

    /// `want`, lowered to what the layout's servers could ever give it: a node with
    /// k of the job's g GPUs carries k/g of the total, so it limits the total to
    /// capacity x g / k (a resource a server does not model sets no limit).
    fn at_most_capacity(&self, layout: &[(NodeId, u32)], want: HostAlloc) -> HostAlloc {
        let gpus: u64 = layout.iter().map(|&(_, k)| u64::from(k)).sum();
        let mut limit = HostAlloc { cpus: u32::MAX, memory_gib: u32::MAX };
        for &(node, k) in layout {
            let capacity = self.nodes[node.index()].capacity;
            let most = |c: u32| {
                if c == 0 {
                    u32::MAX
                } else {
                    (u64::from(c) * gpus / u64::from(k).max(1)).min(u64::from(u32::MAX)) as u32
                }
            };
            limit.cpus = limit.cpus.min(most(capacity.cpus));
            limit.memory_gib = limit.memory_gib.min(most(capacity.memory_gib));
        }
        HostAlloc { cpus: want.cpus.min(limit.cpus), memory_gib: want.memory_gib.min(limit.memory_gib) }
    }

    /// Per-node shortfall of `alloc` on `layout` (CPUs, memory); all zero: it fits.
    fn shortfall(&self, layout: &[(NodeId, u32)], alloc: HostAlloc) -> Vec<(u32, u32)> {
        layout
            .iter()
            .zip(self.shares(layout, alloc))
            .map(|(&(node, _), share)| {
                let n = &self.nodes[node.index()];
                let cpus = if n.capacity.cpus > 0 { share.cpus.saturating_sub(n.free.cpus) } else { 0 };
                let memory = if n.capacity.memory_gib > 0 {
                    share.memory_gib.saturating_sub(n.free.memory_gib)
                } else {
                    0
                };
                (cpus, memory)
            })
            .collect()
    }

    fn fits(&self, layout: &[(NodeId, u32)], alloc: HostAlloc) -> bool {
        self.shortfall(layout, alloc).iter().all(|&s| s == (0, 0))
    }

    /// Candidate GPU layouts for `gpus` GPUs: each single node with room, fewest
    /// free GPUs first (ties to the lower id), then one spread over the nodes
    /// with the most free GPUs when no single node has room.
    fn layouts(&self, gpus: u32) -> Vec<Vec<(NodeId, u32)>> {
        let mut single: Vec<(usize, usize)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.up && n.free_slots.len() as u32 >= gpus)
            .map(|(i, n)| (n.free_slots.len(), i))
            .collect();
        single.sort_unstable();
        let mut layouts: Vec<Vec<(NodeId, u32)>> =
            single.iter().map(|&(_, i)| vec![(NodeId(i as u32), gpus)]).collect();
        if layouts.is_empty() {
            let mut by_free: Vec<(std::cmp::Reverse<usize>, usize)> = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.up && !n.free_slots.is_empty())
                .map(|(i, n)| (std::cmp::Reverse(n.free_slots.len()), i))
                .collect();
            by_free.sort_unstable();
            let mut left = gpus;
            let mut spread = Vec::new();
            for (free, i) in by_free {
                if left == 0 {
                    break;
                }
                let take = left.min(free.0 as u32);
                spread.push((NodeId(i as u32), take));
                left -= take;
            }
            if left == 0 {
                spread.sort_unstable();
                layouts.push(spread);
            }
        }
        layouts
    }

    /// Places a waiting job under `mechanism` with best-case (or LP) demand `best`
    /// per GPU; false if it must wait.
    fn place(&mut self, job: &JobState, best: PerGpu, mechanism: Mechanism) -> bool {
        let gpus = job.spec.gpus;
        let layouts = self.layouts(gpus);
        let wanted = demand_of(best, gpus);
        // Best case, but never more than the layout's servers have (else a wide job
        // of a sensitive class could never run under Greedy).
        let demand = |round: &Round<'_, '_>, l: &[(NodeId, u32)]| round.at_most_capacity(l, wanted);
        let attempt = |round: &Round<'_, '_>, want: &WantFn<'_>| {
            layouts.iter().find(|l| round.fits(l, want(l))).map(|l| (l.clone(), want(l)))
        };
        let capped = |round: &Round<'_, '_>, l: &[(NodeId, u32)]| {
            let prop = round.proportional(l);
            HostAlloc { cpus: prop.cpus.min(wanted.cpus), memory_gib: prop.memory_gib.min(wanted.memory_gib) }
        };
        let chosen = match mechanism {
            Mechanism::Proportional => attempt(self, &|l| self.proportional(l)),
            Mechanism::Greedy => attempt(self, &|l| demand(self, l)),
            Mechanism::Tune | Mechanism::Opt => attempt(self, &|l| demand(self, l))
                .or_else(|| attempt(self, &|l| capped(self, l)))
                .or_else(|| {
                    let layout = layouts.iter().find(|l| self.can_shrink_for(l, capped(self, l)))?;
                    let want = capped(self, layout);
                    self.shrink_for(layout, want);
                    Some((layout.clone(), want))
                }),
        };
        let Some((layout, alloc)) = chosen else { return false };
        self.take(job.id(), layout, alloc);
        true
    }

    /// Gives `job` the GPUs (lowest free slots) and host resources of `layout`.
    fn take(&mut self, job: JobId, layout: Vec<(NodeId, u32)>, alloc: HostAlloc) {
        let shares = self.shares(&layout, alloc);
        let mut gpus = Vec::new();
        for (&(node, k), share) in layout.iter().zip(shares) {
            let n = &mut self.nodes[node.index()];
            for slot in n.free_slots.drain(..k as usize) {
                gpus.push(self.view.cluster.gpu(node, slot));
            }
            if n.capacity.cpus > 0 {
                n.free.cpus -= share.cpus;
            }
            if n.capacity.memory_gib > 0 {
                n.free.memory_gib -= share.memory_gib;
            }
        }
        self.holders.insert(job, Holder { layout, gpus, alloc, running: false, changed: true });
    }

    /// Jobs on the layout's nodes holding more than proportional, largest excess first.
    fn shrinkable(&self, layout: &[(NodeId, u32)]) -> Vec<(JobId, HostAlloc)> {
        let mut found: Vec<(std::cmp::Reverse<u64>, JobId, HostAlloc)> = self
            .holders
            .iter()
            .filter(|(_, h)| h.layout.iter().any(|(n, _)| layout.iter().any(|(m, _)| m == n)))
            .filter_map(|(&id, h)| {
                let prop = self.proportional(&h.layout);
                let excess = u64::from(h.alloc.cpus.saturating_sub(prop.cpus))
                    + u64::from(h.alloc.memory_gib.saturating_sub(prop.memory_gib));
                (excess > 0).then(|| {
                    let to = HostAlloc {
                        cpus: h.alloc.cpus.min(prop.cpus),
                        memory_gib: h.alloc.memory_gib.min(prop.memory_gib),
                    };
                    (std::cmp::Reverse(excess), id, to)
                })
            })
            .collect();
        found.sort_unstable_by_key(|(excess, id, _)| (*excess, *id));
        found.into_iter().map(|(_, id, to)| (id, to)).collect()
    }

    fn can_shrink_for(&self, layout: &[(NodeId, u32)], want: HostAlloc) -> bool {
        let mut trial = Round {
            view: self.view,
            policy: self.policy,
            nodes: self.nodes.clone(),
            holders: self.holders.clone(),
        };
        trial.shrink_for(layout, want)
    }

    /// Shrinks co-located jobs above proportional back to proportional, one at a
    /// time, until `want` fits on `layout`; true if it then fits.
    fn shrink_for(&mut self, layout: &[(NodeId, u32)], want: HostAlloc) -> bool {
        for (job, to) in self.shrinkable(layout) {
            if self.fits(layout, want) {
                return true;
            }
            self.set_alloc(job, to);
        }
        self.fits(layout, want)
    }

    /// Changes a holder's allocation, moving the difference on each of its nodes.
    fn set_alloc(&mut self, job: JobId, to: HostAlloc) {
        let Some(holder) = self.holders.get(&job) else { return };
        let before = self.shares(&holder.layout, holder.alloc);
        let after = self.shares(&holder.layout, to);
        let layout = holder.layout.clone();
        for ((&(node, _), b), a) in layout.iter().zip(before).zip(after) {
            let n = &mut self.nodes[node.index()];
            if n.capacity.cpus > 0 {
                n.free.cpus = n.free.cpus + b.cpus - a.cpus;
            }
            if n.capacity.memory_gib > 0 {
                n.free.memory_gib = n.free.memory_gib + b.memory_gib - a.memory_gib;
            }
        }
        if let Some(holder) = self.holders.get_mut(&job) {
            holder.alloc = to;
            holder.changed = true;
        }
    }

    /// Raises a running job toward its target where its servers have room now.
    fn grow(&mut self, job: JobId, best: PerGpu) {
        let Some(holder) = self.holders.get(&job) else { return };
        let gpus: u32 = holder.layout.iter().map(|&(_, k)| k).sum();
        let (alloc, layout) = (holder.alloc, holder.layout.clone());
        let demand = self.at_most_capacity(&layout, demand_of(best, gpus));
        let target = HostAlloc {
            cpus: demand.cpus.max(alloc.cpus),
            memory_gib: demand.memory_gib.max(alloc.memory_gib),
        };
        if target == alloc {
            return;
        }
        // What the job holds counts as free for its own new shares.
        self.set_alloc(job, HostAlloc::default());
        let fits = self.fits(&layout, target);
        self.set_alloc(job, if fits { target } else { alloc });
    }

    /// Actions: shrinks of running jobs first, then the new starts' allocations,
    /// growths, and the starts themselves (the engine applies allocations before starts).
    fn finish(self, decision: &mut Decision) {
        let view = self.view;
        let mut shrinks = Vec::new();
        let mut grows = Vec::new();
        let mut new_allocs = Vec::new();
        let mut starts = Vec::new();
        for (job, holder) in self.holders {
            if !holder.changed {
                continue;
            }
            let alloc = Action::Allocate { job, alloc: holder.alloc };
            if holder.running {
                let before = view.job(job).host;
                if holder.alloc == before {
                    continue;
                }
                let shrinking =
                    holder.alloc.cpus <= before.cpus && holder.alloc.memory_gib <= before.memory_gib;
                if shrinking {
                    shrinks.push(alloc)
                } else {
                    grows.push(alloc)
                }
            } else {
                new_allocs.push(alloc);
                starts.push(Action::Start { job, gpus: holder.gpus });
            }
        }
        decision.actions.extend(shrinks);
        decision.actions.extend(new_allocs);
        decision.actions.extend(grows);
        decision.actions.extend(starts);
    }
}

/// The allocation a mechanism wants on a layout.
type WantFn<'a> = dyn Fn(&[(NodeId, u32)]) -> HostAlloc + 'a;

/// A job's GPUs per node, in node order.
fn layout_of(view: &ClusterView<'_>, gpus: &[GpuId]) -> Vec<(NodeId, u32)> {
    let mut per_node: BTreeMap<NodeId, u32> = BTreeMap::new();
    for &g in gpus {
        *per_node.entry(view.cluster.node_of(g)).or_default() += 1;
    }
    per_node.into_iter().collect()
}

/// Whole CPUs (rounded up) and GiB (rounded down: 62 GiB is the 62.5 GB point) for `gpus` GPUs.
fn demand_of(per_gpu: PerGpu, gpus: u32) -> HostAlloc {
    HostAlloc {
        cpus: (per_gpu.cpus * f64::from(gpus)).ceil() as u32,
        memory_gib: (per_gpu.memory_gib * f64::from(gpus)).floor() as u32,
    }
}

impl Synergy {
    /// OPT's targets: each picked job's largest choice in the LP over the picked
    /// jobs ([`opt_bound`]), on the cluster's up nodes' CPUs and memory.
    fn opt_targets(
        &self,
        view: &ClusterView<'_>,
        jobs: &[&JobState],
        picked: &[JobId],
    ) -> BTreeMap<JobId, PerGpu> {
        let mut capacity = (0u64, 0u64);
        for n in 0..view.cluster.node_count() {
            let node = NodeId(n as u32);
            if view.cluster.is_up(node) {
                let cap = view.cluster.host().capacity(node);
                capacity.0 += u64::from(cap.cpus);
                capacity.1 += u64::from(cap.memory_gib);
            }
        }
        if capacity.0 == 0 || capacity.1 == 0 {
            return BTreeMap::new();
        }
        let chosen: Vec<&JobState> = jobs.iter().copied().filter(|j| picked.contains(&j.id())).collect();
        let demands: Vec<OptJob<'_>> = chosen
            .iter()
            .filter_map(|j| self.matrix(j).map(|m| OptJob { gpus: j.spec.gpus, matrix: m }))
            .collect();
        let with_matrix: Vec<&JobState> = chosen.into_iter().filter(|j| self.matrix(j).is_some()).collect();
        let Some(solution) = opt_bound(&self.matrices, &demands, capacity.0 as f64, capacity.1 as f64) else {
            return BTreeMap::new();
        };
        with_matrix.iter().map(|j| j.id()).zip(solution.choices).collect()
    }
}

/// One job of the OPT LP: its GPU count and matrix.
#[derive(Clone, Copy, Debug)]
pub struct OptJob<'a> {
    pub gpus: u32,
    pub matrix: &'a Matrix,
}

/// The LP's answer: its objective (total normalized throughput, an upper bound
/// for the round) and each job's largest choice.
#[derive(Clone, Debug, PartialEq)]
pub struct OptSolution {
    pub throughput: f64,
    pub choices: Vec<PerGpu>,
}

/// OPT: maximize the jobs' total throughput over one-hot (CPU, memory) grid
/// choices, relaxed to fractions, within the cluster's total CPUs and memory;
/// only choices with throughput at least proportional (1.0). Jobs of one class
/// and size are interchangeable, so they share variables (counts per choice).
/// `None` if the LP fails (it is always feasible when proportional shares fit).
pub fn opt_bound(
    matrices: &SynergyMatrices,
    jobs: &[OptJob<'_>],
    total_cpus: f64,
    total_memory_gib: f64,
) -> Option<OptSolution> {
    let mut groups: BTreeMap<(String, u32), Vec<usize>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        groups.entry((job.matrix.class.clone(), job.gpus)).or_default().push(i);
    }
    let mut vars = good_lp::variables!();
    let mut objective = Expression::from(0.0);
    let mut cpus = Expression::from(0.0);
    let mut memory = Expression::from(0.0);
    let mut group_vars = Vec::new();
    let mut counts = Vec::new();
    for ((_, gpus), members) in &groups {
        let matrix = jobs[members[0]].matrix;
        let mut options = Vec::new();
        for (r, row) in matrix.values.iter().enumerate() {
            for (c, &value) in row.iter().enumerate() {
                if value < 1.0 - 1e-9 {
                    continue;
                }
                let point =
                    PerGpu { cpus: matrices.cpus_per_gpu[r], memory_gib: matrices.memory_gib_per_gpu[c] };
                let v = vars.add(variable().min(0.0));
                objective += value * v;
                cpus += point.cpus * f64::from(*gpus) * v;
                memory += point.memory_gib * f64::from(*gpus) * v;
                options.push((v, point, value));
            }
        }
        counts.push(members.len() as f64);
        group_vars.push(options);
    }
    let mut model = vars.maximise(objective.clone()).using(good_lp::microlp);
    for (options, &count) in group_vars.iter().zip(&counts) {
        let sum: Expression = options.iter().map(|(v, _, _)| *v).sum();
        model = model.with(constraint!(sum == count));
    }
    model = model.with(constraint!(cpus <= total_cpus)).with(constraint!(memory <= total_memory_gib));
    let solution = model.solve().ok()?;
    let mut choices = vec![matrices.fair(); jobs.len()];
    for ((_, members), options) in groups.iter().zip(&group_vars) {
        // Integer counts by largest remainder, better throughput first among equals.
        let values: Vec<f64> = options.iter().map(|(v, _, _)| solution.value(*v).max(0.0)).collect();
        let mut whole: Vec<usize> = values.iter().map(|x| (x + 1e-6).floor() as usize).collect();
        let mut order: Vec<usize> = (0..options.len()).collect();
        order.sort_by(|&a, &b| {
            let fa = values[a] - whole[a] as f64;
            let fb = values[b] - whole[b] as f64;
            fb.total_cmp(&fa).then(options[b].2.total_cmp(&options[a].2)).then(a.cmp(&b))
        });
        let mut short = members.len().saturating_sub(whole.iter().sum());
        for &i in &order {
            if short == 0 {
                break;
            }
            whole[i] += 1;
            short -= 1;
        }
        let mut by_value: Vec<usize> = (0..options.len()).collect();
        by_value.sort_by(|&a, &b| options[b].2.total_cmp(&options[a].2).then(a.cmp(&b)));
        let mut slots = by_value.iter().flat_map(|&i| std::iter::repeat_n(options[i].1, whole[i]));
        for &member in members {
            choices[member] = slots.next().unwrap_or(matrices.fair());
        }
    }
    Some(OptSolution { throughput: solution.eval(&objective), choices })
}
