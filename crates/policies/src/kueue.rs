//! Kueue-style quotas: each tenant (a ClusterQueue) has a nominal GPU quota per
//! GPU type, may borrow idle GPUs of its cohort up to a borrowing limit, and
//! borrowed GPUs are reclaimed by preemption, youngest borrower first, once a
//! job that fits within its tenant's nominal quota has waited `reclaim_grace`.
//!
//! - Capacity of a cohort on a type: the nominal quotas of its members plus the
//!   GPUs no quota names (a pool every cohort may borrow from).
//! - Order of admission: jobs that fit within their tenant's nominal quota
//!   first (by arrival); then borrowing jobs, by their tenant's weighted share
//!   of borrowed GPUs (`borrowed / weight`, lowest first), then by arrival.
//! - A job uses one GPU type: the first type (in config order) where it fits
//!   within nominal quota, else the first where it may borrow. Like a
//!   ClusterQueue, a tenant uses only the types its queue lists; a tenant with
//!   no queue has no quota and may borrow any type.
//! - Tenants without a queue in the config use their `gpu_quota` (the Philly
//!   default sets it from `philly_vc.csv`) as nominal quota, split over GPU
//!   types by size, in the cohort `default`.
//! - Guarantees (property-tested): a tenant below its nominal quota with a
//!   waiting job that fits in the rest of it gets GPUs within `reclaim_grace`
//!   (plus the check interval); a tenant never holds more than nominal +
//!   borrowing limit of a type; every admissible job eventually runs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{
    Action, ClusterView, Decision, GpuTypeId, JobId, Policy, PolicyCx, Span, Time, WaitReason,
    MICROS_PER_SECOND,
};

/// Kueue's default would be immediate; a short grace lets borrowers reach a checkpoint.
pub const DEFAULT_RECLAIM_GRACE: Span = Span(60 * MICROS_PER_SECOND);
/// How often waiting jobs are re-examined without other events.
pub const DEFAULT_CHECK_INTERVAL: Span = Span(60 * MICROS_PER_SECOND);

/// One tenant's queue: cohort, weight, quotas per GPU type (by type name).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSpec {
    pub tenant: String,
    pub cohort: String,
    pub weight: f64,
    pub nominal: BTreeMap<String, u32>,
    /// Most GPUs of a type it may borrow beyond nominal; a type it does not
    /// name has no limit.
    pub borrowing_limit: BTreeMap<String, u32>,
}

/// Quota configuration for the whole cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaConfig {
    pub queues: Vec<QueueSpec>,
}

/// Per tenant, per GPU type (cluster type ids).
#[derive(Clone, Debug)]
struct Quotas {
    cohort: Vec<usize>,
    weight: Vec<f64>,
    nominal: Vec<Vec<u32>>,
    /// nominal + borrowing limit (u32::MAX: unlimited).
    ceiling: Vec<Vec<u32>>,
    /// Capacity each cohort may use of each type.
    cohort_capacity: Vec<Vec<u32>>,
    /// Type order per tenant: types it has quota for first, in config order.
    type_order: Vec<Vec<usize>>,
    /// The tenant's hard GPU limit over all types (`TenantSpec::gpu_limit`; the
    /// engine refuses any start past it).
    hard_limit: Vec<u32>,
}

/// The quota policy.
#[derive(Debug)]
pub struct Kueue {
    placement: Placement,
    config: QuotaConfig,
    reclaim_grace: Span,
    check_interval: Span,
    quotas: Option<Quotas>,
    /// Since when each waiting, within-quota job has been blocked.
    blocked_since: BTreeMap<JobId, Time>,
    next_check: Option<Time>,
}

impl Kueue {
    pub fn new(
        placement: Placement,
        config: QuotaConfig,
        reclaim_grace: Span,
        check_interval: Span,
    ) -> Kueue {
        Kueue {
            placement,
            config,
            reclaim_grace,
            check_interval,
            quotas: None,
            blocked_since: BTreeMap::new(),
            next_check: None,
        }
    }

    fn resolve(&mut self, view: &ClusterView<'_>) {
        if self.quotas.is_some() {
            return;
        }
        let types = &view.cluster.spec().gpu_types;
        let type_index = |name: &str| types.iter().position(|t| t.eq_ignore_ascii_case(name));
        let tenants = view.tenants.len();
        let mut cohorts: Vec<String> = Vec::new();
        let mut q = Quotas {
            cohort: vec![0; tenants],
            weight: vec![1.0; tenants],
            nominal: vec![vec![0; types.len()]; tenants],
            ceiling: vec![vec![u32::MAX; types.len()]; tenants],
            cohort_capacity: Vec::new(),
            type_order: vec![Vec::new(); tenants],
            hard_limit: view.tenants.iter().map(|t| t.gpu_limit.unwrap_or(u32::MAX)).collect(),
        };
        for (t, tenant) in view.tenants.iter().enumerate() {
            let spec = self.config.queues.iter().find(|s| s.tenant == tenant.name);
            let cohort = spec.map_or("default", |s| s.cohort.as_str());
            q.cohort[t] = cohorts.iter().position(|c| c == cohort).unwrap_or_else(|| {
                cohorts.push(cohort.to_string());
                cohorts.len() - 1
            });
            q.weight[t] = spec.map_or(tenant.weight, |s| s.weight).max(f64::MIN_POSITIVE);
            if let Some(spec) = spec {
                for (name, &gpus) in &spec.nominal {
                    if let Some(ty) = type_index(name) {
                        q.nominal[t][ty] = gpus;
                        q.type_order[t].push(ty);
                    }
                }
                for ty in 0..types.len() {
                    let limit =
                        spec.borrowing_limit.iter().find(|(n, _)| type_index(n) == Some(ty)).map(|(_, &l)| l);
                    q.ceiling[t][ty] = match (q.type_order[t].contains(&ty), limit) {
                        // Like a ClusterQueue, a tenant uses only the types it lists.
                        (false, _) => 0,
                        (true, Some(limit)) => q.nominal[t][ty].saturating_add(limit),
                        (true, None) => u32::MAX,
                    };
                }
            } else {
                // A tenant without a queue: its `gpu_quota` (if any) as nominal
                // quota, split over types in proportion to their size; may
                // borrow any type.
                q.type_order[t] = (0..types.len()).collect();
                if let Some(quota) = tenant.gpu_quota {
                    let sizes: Vec<u32> =
                        (0..types.len()).map(|ty| view.cluster.gpus_of_type(GpuTypeId(ty as u32))).collect();
                    let total: u32 = sizes.iter().sum();
                    let mut given = 0;
                    for (ty, &size) in sizes.iter().enumerate() {
                        let share = (u64::from(quota) * u64::from(size) / u64::from(total.max(1))) as u32;
                        q.nominal[t][ty] = share;
                        given += share;
                    }
                    if let Some(largest) = (0..types.len()).max_by_key(|&ty| (sizes[ty], Reverse(ty))) {
                        q.nominal[t][largest] += quota.saturating_sub(given);
                    }
                }
            }
        }
        let totals: Vec<u32> =
            (0..types.len()).map(|ty| view.cluster.gpus_of_type(GpuTypeId(ty as u32))).collect();
        let named: Vec<u32> =
            (0..types.len()).map(|ty| (0..tenants).map(|t| q.nominal[t][ty]).sum()).collect();
        q.cohort_capacity = (0..cohorts.len())
            .map(|c| {
                (0..types.len())
                    .map(|ty| {
                        let own: u32 =
                            (0..tenants).filter(|&t| q.cohort[t] == c).map(|t| q.nominal[t][ty]).sum();
                        own + totals[ty].saturating_sub(named[ty])
                    })
                    .collect()
            })
            .collect();
        self.quotas = Some(q);
    }
}

/// GPUs held per tenant and type, and per cohort and type.
struct Holdings {
    tenant: Vec<Vec<u32>>,
    cohort: Vec<Vec<u32>>,
}

impl Holdings {
    fn new(view: &ClusterView<'_>, q: &Quotas) -> Holdings {
        let types = view.cluster.spec().gpu_types.len();
        let mut h = Holdings {
            tenant: vec![vec![0; types]; view.tenants.len()],
            cohort: vec![vec![0; types]; q.cohort_capacity.len()],
        };
        for job in view.running_jobs() {
            if let Some(&g) = job.gpus.first() {
                h.add(q, job.spec.tenant.index(), view.cluster.gpu_type_of(g).index(), job.gpus.len() as u32);
            }
        }
        h
    }
    /// Nothing held: what a tenant could reach on an idle cluster.
    fn empty(view: &ClusterView<'_>, q: &Quotas) -> Holdings {
        let types = view.cluster.spec().gpu_types.len();
        Holdings {
            tenant: vec![vec![0; types]; view.tenants.len()],
            cohort: vec![vec![0; types]; q.cohort_capacity.len()],
        }
    }

    fn add(&mut self, q: &Quotas, tenant: usize, ty: usize, gpus: u32) {
        self.tenant[tenant][ty] += gpus;
        self.cohort[q.cohort[tenant]][ty] += gpus;
    }
    fn sub(&mut self, q: &Quotas, tenant: usize, ty: usize, gpus: u32) {
        self.tenant[tenant][ty] -= gpus;
        self.cohort[q.cohort[tenant]][ty] -= gpus;
    }
    fn borrowed(&self, q: &Quotas, tenant: usize) -> u32 {
        self.tenant[tenant].iter().zip(&q.nominal[tenant]).map(|(h, n)| h.saturating_sub(*n)).sum()
    }
}

/// How a job may use a type now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    WithinQuota(usize),
    Borrowing(usize),
}

fn fit(q: &Quotas, h: &Holdings, tenant: usize, gpus: u32) -> Option<Fit> {
    let held: u32 = h.tenant[tenant].iter().sum();
    if held.saturating_add(gpus) > q.hard_limit[tenant] {
        return None;
    }
    let order = &q.type_order[tenant];
    if let Some(&ty) =
        order.iter().find(|&&ty| gpus > 0 && h.tenant[tenant][ty] + gpus <= q.nominal[tenant][ty])
    {
        return Some(Fit::WithinQuota(ty));
    }
    let cohort = q.cohort[tenant];
    order
        .iter()
        .find(|&&ty| {
            h.tenant[tenant][ty].saturating_add(gpus) <= q.ceiling[tenant][ty]
                && h.cohort[cohort][ty] + gpus <= q.cohort_capacity[cohort][ty]
        })
        .map(|&ty| Fit::Borrowing(ty))
}

impl Policy for Kueue {
    fn name(&self) -> &'static str {
        "kueue"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.resolve(view);
        let q = self.quotas.as_ref().expect("resolved");
        let now = view.now;
        // Running jobs youngest first, for reclaim.
        let mut youngest: Vec<(Time, JobId)> = view.running_jobs().map(|j| (j.phase_since, j.id())).collect();
        youngest.sort_by(|a, b| b.cmp(a));
        let mut pass = Pass {
            view,
            q,
            now,
            placement: self.placement,
            grace: self.reclaim_grace,
            blocked_since: &self.blocked_since,
            held: Holdings::new(view, q),
            free: FreeMap::new(view.cluster),
            decision: Decision::default(),
            youngest,
            preempted: Vec::new(),
            still_blocked: BTreeMap::new(),
        };
        // First, jobs within their tenant's nominal quota, by arrival.
        let mut borrowing: BTreeMap<usize, VecDeque<JobId>> = BTreeMap::new();
        for job in view.pending_jobs() {
            let t = job.spec.tenant.index();
            if matches!(fit(q, &pass.held, t, job.spec.gpus), Some(Fit::WithinQuota(_))) {
                pass.admit(job.id());
            } else {
                borrowing.entry(t).or_default().push_back(job.id());
            }
        }
        // Then borrowing jobs: the tenant with the least borrowed GPUs per unit
        // of weight goes next, re-ranked after every admission (weighted fair
        // share within the cohort). Shares are finite and >= 0, so their bit
        // patterns order like the numbers.
        let share = |held: &Holdings, t: usize| (held.borrowed(q, t) as f64 / q.weight[t]).to_bits();
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            borrowing.keys().map(|&t| Reverse((share(&pass.held, t), t))).collect();
        while let Some(Reverse((_, t))) = heap.pop() {
            let Some(queue) = borrowing.get_mut(&t) else { continue };
            let Some(id) = queue.pop_front() else { continue };
            pass.admit(id);
            if !queue.is_empty() {
                heap.push(Reverse((share(&pass.held, t), t)));
            }
        }
        let Pass { decision, still_blocked, .. } = pass;
        self.blocked_since = still_blocked;
        let reclaim_at =
            self.blocked_since.values().map(|&since| since + self.reclaim_grace).filter(|&t| t > now).min();
        // Re-check only for jobs that could ever be admitted: a job wider than its
        // tenant's reach on every type (a queue naming a GPU type the cluster lacks,
        // a hard limit below its width) waits for nothing, and polling it every
        // check interval would keep the simulation running with nothing to do.
        let empty = Holdings::empty(view, q);
        let any_admissible =
            view.pending_jobs().any(|j| fit(q, &empty, j.spec.tenant.index(), j.spec.gpus).is_some());
        let recheck = any_admissible.then(|| now + self.check_interval);
        self.next_check = match (reclaim_at, recheck) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next_check
    }
}

/// The mutable state of one scheduling pass.
struct Pass<'v, 'a> {
    view: &'v ClusterView<'a>,
    q: &'v Quotas,
    now: Time,
    placement: Placement,
    grace: Span,
    blocked_since: &'v BTreeMap<JobId, Time>,
    held: Holdings,
    free: FreeMap<'a>,
    decision: Decision,
    youngest: Vec<(Time, JobId)>,
    preempted: Vec<JobId>,
    still_blocked: BTreeMap<JobId, Time>,
}

impl Pass<'_, '_> {
    /// Starts `id` if its tenant may use a type and it can be placed there;
    /// reclaims borrowed GPUs for a within-quota job blocked past the grace period.
    fn admit(&mut self, id: JobId) {
        let (view, q) = (self.view, self.q);
        let job = view.job(id);
        let tenant = job.spec.tenant.index();
        let gpus = job.spec.gpus;
        let Some(how) = fit(q, &self.held, tenant, gpus) else {
            let nominal: u32 = q.nominal[tenant].iter().sum();
            let held = self.held.tenant[tenant].iter().sum();
            self.decision
                .waiting
                .push((id, WaitReason::TenantAtLimit { tenant: job.spec.tenant, held, limit: nominal }));
            return;
        };
        let ty = match how {
            Fit::WithinQuota(ty) | Fit::Borrowing(ty) => ty,
        };
        let of_type = |n: cotenant_core::NodeId| view.cluster.node(n).gpu_type.index() == ty;
        let placed = match self.free.place(gpus, self.placement, of_type) {
            Ok(chosen) => Ok(chosen),
            Err(reason) if matches!(how, Fit::WithinQuota(_)) => {
                let since = *self.blocked_since.get(&id).unwrap_or(&self.now);
                self.still_blocked.insert(id, since);
                if self.now - since >= self.grace {
                    self.reclaim(ty, gpus);
                    self.free.place(gpus, self.placement, of_type)
                } else {
                    Err(reason)
                }
            }
            Err(reason) => Err(reason),
        };
        match placed {
            Ok(chosen) => {
                self.still_blocked.remove(&id);
                self.held.add(q, tenant, ty, gpus);
                self.decision.actions.push(Action::Start { job: id, gpus: chosen });
            }
            Err(reason) => self.decision.waiting.push((id, reason)),
        }
    }

    /// Preempts the youngest jobs of tenants borrowing type `ty` until `gpus` are free.
    fn reclaim(&mut self, ty: usize, gpus: u32) {
        let (view, q) = (self.view, self.q);
        for &(_, victim) in &self.youngest {
            if self.free.free_on_type(view, ty) >= gpus {
                break;
            }
            let vjob = view.job(victim);
            let vt = vjob.spec.tenant.index();
            let on_type = vjob.gpus.first().is_some_and(|&g| view.cluster.gpu_type_of(g).index() == ty);
            if self.preempted.contains(&victim) || !on_type || self.held.tenant[vt][ty] <= q.nominal[vt][ty] {
                continue;
            }
            self.preempted.push(victim);
            self.free.give_back(&vjob.gpus);
            self.held.sub(q, vt, ty, vjob.gpus.len() as u32);
            self.decision.actions.push(Action::Preempt { job: victim });
        }
    }
}

/// Free GPUs of one type in a scratch map.
trait FreeOfType {
    fn free_on_type(&self, view: &ClusterView<'_>, ty: usize) -> u32;
}

impl FreeOfType for FreeMap<'_> {
    fn free_on_type(&self, view: &ClusterView<'_>, ty: usize) -> u32 {
        (0..view.cluster.node_count())
            .map(|n| cotenant_core::NodeId(n as u32))
            .filter(|&n| view.cluster.node(n).gpu_type.index() == ty)
            .map(|n| self.free_on(n))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, Command, Engine, Input, JobSpec, TenantSpec};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// A tiny world for driving the engine: jobs run at rate 1 (work = seconds),
    /// preempted jobs keep their progress.
    struct World {
        engine: Engine,
        jobs: Vec<JobSpec>,
        left_s: Vec<f64>,
        started_at: Vec<Option<Time>>,
        now: Time,
    }

    impl World {
        fn new(
            cluster: ClusterSpec,
            tenants: Vec<TenantSpec>,
            config: QuotaConfig,
            jobs: Vec<JobSpec>,
        ) -> World {
            let policy =
                Kueue::new(Placement::Consolidated, config, DEFAULT_RECLAIM_GRACE, DEFAULT_CHECK_INTERVAL);
            let engine = Engine::new(Cluster::new(cluster).unwrap(), tenants, Box::new(policy), 0);
            let left_s = jobs.iter().map(|j| j.work).collect();
            let n = jobs.len();
            World { engine, jobs, left_s, started_at: vec![None; n], now: Time::ZERO }
        }

        fn apply(&mut self, commands: Vec<Command>) {
            for c in commands {
                match c {
                    Command::Start { job, .. } => self.started_at[job.index()] = Some(self.now),
                    Command::Stop { job, .. } => {
                        let at = self.started_at[job.index()].take().expect("was running");
                        self.left_s[job.index()] -= (self.now - at).as_secs_f64();
                    }
                    // Kueue never shares GPUs.
                    Command::End { .. }
                    | Command::StartShared { .. }
                    | Command::Rerate { .. }
                    | Command::Resize { .. }
                    | Command::Allocate { .. } => {}
                }
            }
        }

        fn next_finish(&self) -> Option<(Time, JobId)> {
            self.started_at
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.map(|s| (s + Span::from_secs_f64_ceil(self.left_s[i]), JobId(i as u32)))
                })
                .min()
        }

        /// Runs to completion, calling `check` after every step.
        fn run(&mut self, mut check: impl FnMut(&Engine, Time)) {
            let mut next_arrival = 0;
            for _ in 0..100_000 {
                let arrival = self.jobs.get(next_arrival).map(|j| j.arrival);
                let finish = self.next_finish();
                let wake = self.engine.next_wakeup();
                let Some(now) = [arrival, finish.map(|f| f.0), wake].into_iter().flatten().min() else {
                    return;
                };
                self.now = now;
                let mut inputs = Vec::new();
                if let Some((_, job)) = finish.filter(|f| f.0 == now) {
                    self.started_at[job.index()] = None;
                    self.left_s[job.index()] = 0.0;
                    inputs.push(Input::JobFinished { job });
                }
                while self.jobs.get(next_arrival).is_some_and(|j| j.arrival == now) {
                    inputs.push(Input::JobSubmitted(self.jobs[next_arrival].clone().into()));
                    next_arrival += 1;
                }
                if wake == Some(now) {
                    inputs.push(Input::Wakeup);
                }
                let commands = self.engine.step(now, Input::Batch(inputs));
                self.apply(commands);
                assert!(self.engine.violations().is_empty(), "{:?}", self.engine.violations());
                check(&self.engine, now);
            }
            panic!("did not finish");
        }
    }

    fn queue(tenant: &str, cohort: &str, nominal: &[(&str, u32)], limit: &[(&str, u32)]) -> QueueSpec {
        QueueSpec {
            tenant: tenant.into(),
            cohort: cohort.into(),
            weight: 1.0,
            nominal: nominal.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
            borrowing_limit: limit.iter().map(|(t, n)| (t.to_string(), *n)).collect(),
        }
    }

    fn job(id: u32, tenant: u32, at_s: u64, gpus: u32, secs: f64) -> JobSpec {
        JobSpec::new(id, tenant, Time::from_secs(at_s), gpus, secs)
    }

    #[test]
    fn borrower_is_reclaimed_after_the_grace_period() {
        // a and b each own 2 GPUs; a borrows b's while b is idle; b arrives at 100 s.
        let config = QuotaConfig {
            queues: vec![queue("a", "c", &[("v100", 2)], &[]), queue("b", "c", &[("v100", 2)], &[])],
        };
        let jobs = vec![job(0, 0, 0, 2, 10_000.0), job(1, 0, 0, 2, 10_000.0), job(2, 1, 100, 2, 50.0)];
        let tenants = vec![TenantSpec::new("a"), TenantSpec::new("b")];
        let mut world = World::new(ClusterSpec::homogeneous("v100", 1, 4), tenants, config, jobs);
        let mut b_started = None;
        world.run(|engine, now| {
            if b_started.is_none() && engine.running().contains(&JobId(2)) {
                b_started = Some(now);
            }
        });
        assert_eq!(b_started, Some(Time::from_secs(100) + DEFAULT_RECLAIM_GRACE));
    }

    #[test]
    fn jobs_that_can_never_be_admitted_do_not_keep_the_run_alive() {
        // The queue names v100 on a cluster of type "gpu": the tenant may use no type,
        // so its job can never run and no re-check is scheduled (the run ends at once).
        let config = QuotaConfig { queues: vec![queue("a", "c", &[("v100", 4)], &[])] };
        let jobs = vec![job(0, 0, 0, 1, 100.0)];
        let mut world =
            World::new(ClusterSpec::homogeneous("gpu", 1, 4), vec![TenantSpec::new("a")], config, jobs);
        let mut steps = 0;
        world.run(|_, _| steps += 1);
        assert_eq!(steps, 1, "one step for the arrival, then nothing to wait for");
        assert!(world.engine.running().is_empty());
        assert_eq!(world.engine.next_wakeup(), None);
    }

    #[test]
    fn borrowing_limit_caps_holdings() {
        let config = QuotaConfig { queues: vec![queue("a", "c", &[("v100", 1)], &[("v100", 1)])] };
        let jobs: Vec<JobSpec> = (0..4).map(|i| job(i, 0, 0, 1, 100.0)).collect();
        let mut world =
            World::new(ClusterSpec::homogeneous("v100", 1, 4), vec![TenantSpec::new("a")], config, jobs);
        world.run(|engine, _| assert!(engine.tenant_gpus()[0] <= 2));
    }

    #[test]
    fn borrowing_is_shared_by_weight_within_a_cohort() {
        // An idle lender owns 6 GPUs; a (weight 2) and b (weight 1) own 1 each and
        // queue many 1-GPU jobs at once: the 6 spare GPUs go 4 to a, 2 to b.
        let mut a = queue("a", "c", &[("v100", 1)], &[]);
        a.weight = 2.0;
        let config = QuotaConfig {
            queues: vec![a, queue("b", "c", &[("v100", 1)], &[]), queue("lender", "c", &[("v100", 6)], &[])],
        };
        let mut jobs = Vec::new();
        for i in 0..16u32 {
            jobs.push(job(i, i % 2, 0, 1, 1000.0));
        }
        let tenants = vec![TenantSpec::new("a"), TenantSpec::new("b"), TenantSpec::new("lender")];
        let mut world = World::new(ClusterSpec::homogeneous("v100", 1, 8), tenants, config, jobs);
        let mut first = None;
        world.run(|engine, _| {
            if first.is_none() {
                first = Some(engine.tenant_gpus().to_vec());
            }
        });
        // 1 nominal + 4 borrowed for a, 1 + 2 for b.
        assert_eq!(first, Some(vec![5, 3, 0]));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// Random tenants (quota, limit, cohort) and jobs on 2 GPU types.
        #[test]
        fn quotas_hold_under_random_mixes(
            tenants in prop::collection::vec((0u32..4, 0u32..4, prop::option::of(0u32..3), 0usize..2), 1..5),
            jobs in prop::collection::vec((0usize..5, 0u64..2_000, 1u32..4, 10u32..3_000), 1..30),
        ) {
            let types = ["v100", "k80"];
            let per_type = 8u32;
            // Scale nominal quotas so they fit the cluster.
            let mut queues = Vec::new();
            let mut used = [0u32; 2];
            for (i, &(nominal, _, limit, cohort)) in tenants.iter().enumerate() {
                let ty = i % 2;
                let n = nominal.min(per_type - used[ty]);
                used[ty] += n;
                let limit: Vec<(&str, u32)> = limit.map(|l| (types[ty], l)).into_iter().collect();
                queues.push(queue(&format!("t{i}"), if cohort == 0 { "x" } else { "y" }, &[(types[ty], n)], &limit));
            }
            let config = QuotaConfig { queues: queues.clone() };
            let mut cluster = ClusterSpec { gpu_types: types.iter().map(|t| t.to_string()).collect(), ..Default::default() };
            cluster.add_nodes(GpuTypeId(0), 2, 4, 32, 256);
            cluster.add_nodes(GpuTypeId(1), 2, 4, 32, 256);
            let tenant_specs: Vec<TenantSpec> = (0..tenants.len()).map(|i| TenantSpec::new(format!("t{i}"))).collect();
            let mut specs: Vec<JobSpec> = jobs.iter().map(|&(t, at, g, secs)| (t % tenants.len(), at, g, secs)).map(|(t, at, g, secs)| {
                // Keep jobs admissible: within nominal, or within borrowing reach.
                let q = &queues[t];
                let nominal = q.nominal.values().sum::<u32>();
                let cap = q.borrowing_limit.values().next().map_or(4, |l| nominal + l);
                (t, at, g.min(cap.max(1)).min(4), secs)
            }).filter(|&(t, _, g, _)| {
                let q = &queues[t];
                let nominal = q.nominal.values().sum::<u32>();
                q.borrowing_limit.values().next().is_none_or(|l| g <= nominal + l)
            }).enumerate().map(|(i, (t, at, g, secs))| job(i as u32, t as u32, at, g, secs as f64)).collect();
            specs.sort_by_key(|j| (j.arrival, j.id));
            for (i, j) in specs.iter_mut().enumerate() { j.id = JobId(i as u32); }
            let jobs_total = specs.len();
            let mut world = World::new(cluster, tenant_specs, config, specs.clone());
            let ceiling: Vec<u32> = queues.iter().map(|q| {
                let n: u32 = q.nominal.values().sum();
                q.borrowing_limit.values().next().map_or(u32::MAX, |l| n + l)
            }).collect();
            let nominal: Vec<u32> = queues.iter().map(|q| q.nominal.values().sum()).collect();
            let bound = DEFAULT_RECLAIM_GRACE + DEFAULT_CHECK_INTERVAL;
            let mut starved_since: Vec<Option<Time>> = vec![None; queues.len()];
            let mut last_held: Vec<u32> = vec![0; queues.len()];
            let mut completed = BTreeSet::new();
            world.run(|engine, now| {
                for t in 0..queues.len() {
                    let held = engine.tenant_gpus()[t];
                    // Borrowing never exceeds its limit.
                    assert!(held <= ceiling[t], "tenant {t} holds {held} > ceiling {}", ceiling[t]);
                    // A tenant under quota with a job that fits in the rest of it
                    // gets GPUs within grace + check interval.
                    let wants = engine.pending().iter().any(|&id| {
                        let j = engine.job(id).expect("pending job");
                        j.spec.tenant.index() == t && held + j.spec.gpus <= nominal[t]
                    });
                    if !wants || held > last_held[t] {
                        starved_since[t] = None;
                    }
                    if wants && starved_since[t].is_none() {
                        starved_since[t] = Some(now);
                    }
                    if let Some(since) = starved_since[t] {
                        assert!(now - since <= bound, "tenant {t} under quota waited {} since {since}", now - since);
                    }
                    last_held[t] = held;
                }
                for &id in engine.running() { let _ = id; }
                for i in 0..jobs_total {
                    if engine.job(JobId(i as u32)).is_some_and(|j| j.phase == cotenant_core::Phase::Completed) {
                        completed.insert(i);
                    }
                }
            });
            // No tenant is starved: every admissible job completes.
            prop_assert_eq!(completed.len(), jobs_total);
        }
    }
}
