//! Gavel's round-based mechanism (`scheduler.py`, simulation mode), as a
//! [`Policy`]:
//!
//! - Time advances in rounds. A round starts when the previous one ends, or at
//!   an arrival when nothing runs. Each job scheduled in a round runs
//!   `min(floor(rate * round_length), steps left)` steps, and the round ends when
//!   the last of them is done (so at most one round length later). Jobs that
//!   arrive or GPUs that free up mid-round wait for the next round, as in Gavel.
//! - The allocation X is recomputed only when jobs arrived or left, and then at
//!   most once per `reset_interval` (Gavel's `minimum_time_between_allocation_resets`,
//!   1,920 s), when time received is reset and the difference to what X promised
//!   is carried as a deficit.
//! - Priority of job i on GPU type j: `X[i][j] / (time of i on j / time of all
//!   jobs on j)` since the last reset (each job starts with half a round on
//!   every type); `X * 1e9` with no time yet; 0 without allocation or throughput.
//! - Per round, jobs are taken greedily per GPU type (fastest type first; in a
//!   random order for heterogeneity-agnostic policies, drawn like Gavel's) by
//!   (priority, deficit, allocation), each at most once, while it fits.
//! - A job that is scheduled again on the same GPU type keeps its GPUs (lease
//!   extension: no stop, no restore); others are preempted and restarted.
//!
//! Steps left are read from the engine's progress (`JobState::work_done`), which
//! the world keeps exact with `Input::Progress` reports on every start and stop
//! (the simulator does); without them a round would be planned as if every job
//! still had all its work left.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{
    Action, ClusterView, Decision, GpuId, GpuTypeId, JobChange, JobId, Policy, PolicyCx, Span, Time,
    WaitReason, MICROS_PER_SECOND,
};
use cotenant_perf::throughput::{JobTypeKey, ThroughputTable};

use super::allocation::{AllocJob, Allocator, Objective};
use super::pyrandom::PyRandom;

/// Gavel's default round length in its simulator (`time_per_iteration`).
pub const DEFAULT_ROUND: Span = Span(360 * MICROS_PER_SECOND);
/// Gavel's `minimum_time_between_allocation_resets`.
pub const DEFAULT_RESET_INTERVAL: Span = Span(1_920 * MICROS_PER_SECOND);
/// Extra time after a round's last predicted finish before the next round, so
/// that a completion rounded up to the next microsecond lands inside the round.
const ROUND_SLACK: Span = Span(1_000);

/// How a Gavel policy is set up.
#[derive(Clone, Debug)]
pub struct GavelConfig {
    pub name: &'static str,
    pub objective: Objective,
    pub round: Span,
    pub reset_interval: Span,
    /// Seeds base FIFO's stream (`seed`) and the GPU-type shuffle (`seed + 5`), as Gavel does.
    pub seed: u64,
    pub placement: Placement,
}

/// Counters for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GavelStats {
    pub rounds: u64,
    pub allocations: u64,
    /// Jobs that ran in consecutive rounds on the same GPUs.
    pub lease_extensions: u64,
    /// Jobs that ran in a round and were still active at the next.
    pub lease_opportunities: u64,
}

#[derive(Clone, Debug)]
struct Tracked {
    /// Steps per second on each cluster GPU type.
    rates: Vec<f64>,
    scale_factor: u32,
    weight: f64,
    arrival: Time,
}

#[derive(Clone, Debug)]
struct RoundJob {
    id: JobId,
    gpu_type: usize,
    gpus: Vec<GpuId>,
    finish_s: f64,
}

#[derive(Clone, Debug)]
struct Round {
    start_s: f64,
    end: Time,
    jobs: Vec<RoundJob>,
}

/// The GPU types of the cluster as the mechanism sees them.
#[derive(Clone, Debug)]
struct Types {
    /// Table index of each cluster GPU type.
    table_index: Vec<Option<usize>>,
    names: Vec<String>,
    /// Types in Gavel's fixed order (fastest first), types with no GPUs left out.
    order: Vec<usize>,
}

/// A Gavel policy: an allocation objective plus the round mechanism.
#[derive(Debug)]
pub struct Gavel {
    config: GavelConfig,
    table: Arc<ThroughputTable>,
    job_types: Vec<String>,
    allocator: Allocator,
    shuffler: PyRandom,
    types: Option<Types>,
    jobs: BTreeMap<JobId, Tracked>,
    arrived: BTreeSet<JobId>,
    allocation: BTreeMap<JobId, Vec<f64>>,
    job_time_s: BTreeMap<JobId, Vec<f64>>,
    worker_time_s: Vec<f64>,
    deficits_s: BTreeMap<JobId, Vec<f64>>,
    last_reset_s: f64,
    need_update: bool,
    round: Option<Round>,
    stats: GavelStats,
}

impl Gavel {
    pub fn new(config: GavelConfig, table: Arc<ThroughputTable>, job_types: Vec<String>) -> Gavel {
        Gavel {
            allocator: Allocator::new(config.objective, config.seed),
            shuffler: PyRandom::new(config.seed + 5),
            config,
            table,
            job_types,
            types: None,
            jobs: BTreeMap::new(),
            arrived: BTreeSet::new(),
            allocation: BTreeMap::new(),
            job_time_s: BTreeMap::new(),
            worker_time_s: Vec::new(),
            deficits_s: BTreeMap::new(),
            last_reset_s: 0.0,
            need_update: false,
            round: None,
            stats: GavelStats::default(),
        }
    }

    pub fn stats(&self) -> GavelStats {
        self.stats
    }

    fn half_round_s(&self) -> f64 {
        self.config.round.as_secs_f64() / 2.0
    }

    fn init_types(&mut self, view: &ClusterView<'_>) {
        if self.types.is_some() {
            return;
        }
        let names: Vec<String> =
            view.cluster.spec().gpu_types.iter().map(|n| n.to_ascii_lowercase()).collect();
        let table_index: Vec<Option<usize>> = names
            .iter()
            .map(|n| self.table.gpu_types().iter().position(|t| t.eq_ignore_ascii_case(n)))
            .collect();
        // Gavel orders ["v100", "p100", "k80"]: fastest first. In general: by
        // mean single-GPU rate over the table, then by name.
        let speed = |t: usize| -> f64 {
            let Some(ti) = table_index[t] else { return 0.0 };
            let rates: Vec<f64> = self
                .table
                .job_types()
                .filter(|k| k.scale_factor == 1)
                .filter_map(|k| self.table.consolidated(k, ti))
                .collect();
            rates.iter().sum::<f64>() / rates.len().max(1) as f64
        };
        let mut order: Vec<usize> =
            (0..names.len()).filter(|&t| view.cluster.gpus_of_type(GpuTypeId(t as u32)) > 0).collect();
        let speeds: Vec<f64> = (0..names.len()).map(speed).collect();
        order.sort_by(|&a, &b| speeds[b].total_cmp(&speeds[a]).then(names[a].cmp(&names[b])));
        self.worker_time_s = vec![0.0; names.len()];
        self.types = Some(Types { table_index, names, order });
    }

    fn rates_of(&self, view: &ClusterView<'_>, id: JobId) -> Vec<f64> {
        let types = self.types.as_ref().expect("types initialized");
        if self.table.is_empty() {
            return vec![1.0; types.names.len()];
        }
        let spec = &view.job(id).spec;
        let key = spec
            .job_type
            .and_then(|t| self.job_types.get(t as usize))
            .map(|model| JobTypeKey::new(model.clone(), spec.gpus.max(1)));
        types
            .table_index
            .iter()
            .map(|ti| match (&key, ti) {
                // No job type: the reference rate, as the simulator's ReferenceRate.
                (None, Some(_)) => 1.0,
                (Some(key), Some(ti)) => self.table.consolidated(key, *ti).unwrap_or(0.0),
                (_, None) => 0.0,
            })
            .collect()
    }

    fn forget(&mut self, id: JobId) {
        if self.jobs.remove(&id).is_some() {
            self.need_update = true;
        }
        self.arrived.remove(&id);
        self.job_time_s.remove(&id);
        self.deficits_s.remove(&id);
    }

    fn admit_arrivals(&mut self, view: &ClusterView<'_>) {
        let n = self.worker_time_s.len();
        let arrived = std::mem::take(&mut self.arrived);
        for id in arrived {
            let job = view.job(id);
            let tracked = Tracked {
                rates: self.rates_of(view, id),
                scale_factor: job.spec.gpus.max(1),
                weight: (job.spec.priority as f64 + 1.0).max(1.0),
                arrival: job.spec.arrival,
            };
            self.jobs.insert(id, tracked);
            self.job_time_s.insert(id, vec![self.half_round_s(); n]);
            self.deficits_s.insert(id, vec![0.0; n]);
            self.need_update = true;
        }
    }

    /// Closes the round: charges each job the time it ran to its GPU type.
    fn end_round(&mut self) {
        let Some(round) = self.round.take() else { return };
        for job in &round.jobs {
            let ran_s = job.finish_s - round.start_s;
            if let Some(times) = self.job_time_s.get_mut(&job.id) {
                times[job.gpu_type] += ran_s;
            }
            self.worker_time_s[job.gpu_type] += ran_s;
        }
        self.round = Some(round);
    }

    /// Gavel's `_reset_time_run_so_far`.
    fn reset_time(&mut self, now_s: f64) {
        let elapsed = now_s - self.last_reset_s;
        let half = self.half_round_s();
        for t in 0..self.worker_time_s.len() {
            self.worker_time_s[t] = 0.0;
            for (id, times) in self.job_time_s.iter_mut() {
                let received = times[t] - half;
                let promised = self.allocation.get(id).map_or(0.0, |x| x[t] * elapsed);
                if let Some(deficit) = self.deficits_s.get_mut(id) {
                    deficit[t] += promised - received;
                }
                times[t] = half;
                self.worker_time_s[t] += half;
            }
        }
        self.last_reset_s = now_s;
    }

    fn compute_allocation(&mut self, view: &ClusterView<'_>, now: Time) {
        let types = self.types.as_ref().expect("types initialized");
        let capacity: Vec<u32> = (0..types.names.len())
            .map(
                |t| if types.order.contains(&t) { view.cluster.gpus_of_type(GpuTypeId(t as u32)) } else { 0 },
            )
            .collect();
        let jobs: Vec<AllocJob> = self
            .jobs
            .iter()
            .map(|(&id, tracked)| {
                let state = view.job(id);
                AllocJob {
                    id,
                    steps_per_s: tracked.rates.clone(),
                    scale_factor: tracked.scale_factor,
                    weight: tracked.weight,
                    steps_remaining: (state.spec.work - state.work_done(now)).max(0.0).ceil(),
                    secs_since_arrival: (now - tracked.arrival).as_secs_f64(),
                }
            })
            .collect();
        let names = types.names.clone();
        self.allocation.clear();
        // A solver failure leaves X empty: every priority is zero this round and
        // the next arrival or departure tries again. It is never a panic.
        if let Ok(x) = self.allocator.allocate(&jobs, &capacity, &names) {
            for (job, row) in jobs.iter().zip(x) {
                self.allocation.insert(job.id, row);
            }
        }
        self.stats.allocations += 1;
    }

    /// Gavel's `_update_priorities`: maybe reset and re-allocate, then priorities.
    fn priorities(&mut self, view: &ClusterView<'_>, now: Time, force: bool) -> BTreeMap<JobId, Vec<f64>> {
        let now_s = now.as_secs_f64();
        let interval_over = now_s - self.last_reset_s >= self.config.reset_interval.as_secs_f64();
        if force || (self.need_update && (interval_over || self.last_reset_s == 0.0)) {
            self.reset_time(now_s);
            self.compute_allocation(view, now);
            self.need_update = false;
        }
        let mut out = BTreeMap::new();
        for (&id, tracked) in &self.jobs {
            let times = &self.job_time_s[&id];
            let row: Vec<f64> = (0..self.worker_time_s.len())
                .map(|t| {
                    let Some(x) = self.allocation.get(&id).map(|x| x[t]) else { return 0.0 };
                    if x == 0.0 || tracked.rates[t] == 0.0 {
                        return 0.0;
                    }
                    let fraction =
                        if self.worker_time_s[t] == 0.0 { 0.0 } else { times[t] / self.worker_time_s[t] };
                    if fraction > 0.0 {
                        x / fraction
                    } else {
                        x * 1e9
                    }
                })
                .collect();
            out.insert(id, row);
        }
        out
    }

    /// Gavel's `_schedule_jobs_on_workers_helper`: (job, type) chosen this round.
    fn choose(
        &mut self,
        priorities: &BTreeMap<JobId, Vec<f64>>,
        view: &ClusterView<'_>,
    ) -> Vec<(JobId, usize)> {
        let types = self.types.as_ref().expect("types initialized");
        let mut order = types.order.clone();
        if !self.config.objective.heterogeneity_aware() {
            self.shuffler.shuffle(&mut order);
        }
        let is_fifo = matches!(self.config.objective, Objective::Fifo { .. });
        let mut left: Vec<u32> = (0..types.names.len()).map(|t| up_gpus_of_type(view, t)).collect();
        let mut queue: Vec<(JobId, usize, f64, f64, f64)> = Vec::new();
        for &t in &order {
            let mut entries: Vec<(JobId, usize, f64, f64, f64)> = priorities
                .iter()
                .map(|(&id, p)| {
                    let deficit = self.deficits_s.get(&id).map_or(0.0, |d| d[t]);
                    let x = self.allocation.get(&id).map_or(0.0, |x| x[t]);
                    (id, t, p[t], deficit, x)
                })
                .collect();
            // Stable: equal keys keep job-id order, as Python's sorted(reverse=True).
            entries.sort_by(|a, b| b.2.total_cmp(&a.2).then(b.3.total_cmp(&a.3)).then(b.4.total_cmp(&a.4)));
            queue.extend(entries);
        }
        let mut taken: BTreeSet<JobId> = BTreeSet::new();
        let mut chosen = Vec::new();
        // GPUs each tenant holds after this round; the engine refuses starts past
        // a tenant's hard limit, which Gavel (having no tenants) never checks.
        let mut tenant_gpus = vec![0u32; view.tenants.len()];
        for (id, t, priority, _, _) in queue {
            let tracked = &self.jobs[&id];
            if left[t] == 0 || taken.contains(&id) || tracked.rates[t] <= 0.0 || (is_fifo && priority <= 0.0)
            {
                continue;
            }
            if tracked.scale_factor > left[t] {
                continue;
            }
            let tenant = view.job(id).spec.tenant;
            let limit = view.tenant(tenant).gpu_limit.unwrap_or(u32::MAX);
            if tenant_gpus[tenant.index()].saturating_add(tracked.scale_factor) > limit {
                continue;
            }
            tenant_gpus[tenant.index()] += tracked.scale_factor;
            left[t] -= tracked.scale_factor;
            taken.insert(id);
            chosen.push((id, t));
        }
        chosen
    }

    /// Starts a round at `now`: returns the actions and records the round.
    fn start_round(&mut self, view: &ClusterView<'_>, now: Time) -> Decision {
        let previous: BTreeMap<JobId, (usize, Vec<GpuId>)> = self
            .round
            .take()
            .map(|r| r.jobs.into_iter().map(|j| (j.id, (j.gpu_type, j.gpus))).collect())
            .unwrap_or_default();
        self.admit_arrivals(view);
        let mut decision = Decision::default();
        if self.jobs.is_empty() {
            for &id in view.running {
                decision.actions.push(Action::Preempt { job: id });
            }
            return decision;
        }
        let priorities = self.priorities(view, now, false);
        let mut chosen = self.choose(&priorities, view);
        if !chosen.iter().any(|(id, _)| self.allocation.contains_key(id)) {
            // Nothing would run (jobs chosen without an allocation get no GPUs,
            // as in Gavel). Gavel then forces a reset; without it no timer would
            // ever fire again.
            let priorities = self.priorities(view, now, true);
            chosen = self.choose(&priorities, view);
        }
        // Placement: jobs staying on their GPU type keep their GPUs.
        let mut keep: BTreeMap<JobId, (usize, Vec<GpuId>)> = BTreeMap::new();
        let chosen_types: BTreeMap<JobId, usize> = chosen.iter().copied().collect();
        for (&id, (t, gpus)) in &previous {
            if view.job(id).is_running() && chosen_types.get(&id) == Some(t) {
                keep.insert(id, (*t, gpus.clone()));
            }
        }
        for id in previous.keys() {
            if self.jobs.contains_key(id) {
                self.stats.lease_opportunities += 1;
                if keep.contains_key(id) {
                    self.stats.lease_extensions += 1;
                }
            }
        }
        let mut free = FreeMap::new(view.cluster);
        for &id in view.running {
            if !keep.contains_key(&id) {
                free.give_back(&view.job(id).gpus);
                decision.actions.push(Action::Preempt { job: id });
            }
        }
        // Larger jobs first, for locality (Gavel sorts by scale factor, descending).
        let mut to_place: Vec<(JobId, usize)> = chosen
            .iter()
            .copied()
            .filter(|(id, _)| !keep.contains_key(id) && self.allocation.contains_key(id))
            .collect();
        to_place.sort_by_key(|(id, _)| std::cmp::Reverse(self.jobs[id].scale_factor));
        let mut placed: Vec<(JobId, usize, Vec<GpuId>)> =
            keep.iter().map(|(&id, (t, gpus))| (id, *t, gpus.clone())).collect();
        for (id, t) in to_place {
            let needed = self.jobs[&id].scale_factor;
            let of_type = |node: cotenant_core::NodeId| view.cluster.node(node).gpu_type.index() == t;
            match free.place(needed, self.config.placement, of_type) {
                Ok(gpus) => {
                    decision.actions.push(Action::Start { job: id, gpus: gpus.clone() });
                    placed.push((id, t, gpus));
                }
                Err(reason) => decision.waiting.push((id, reason)),
            }
        }
        // Steps this round and when the round ends.
        let now_s = now.as_secs_f64();
        let round_s = self.config.round.as_secs_f64();
        let mut jobs = Vec::with_capacity(placed.len());
        let mut end_s = now_s;
        for (id, t, gpus) in placed {
            let rate = self.jobs[&id].rates[t];
            let state = view.job(id);
            let left = (state.spec.work - state.work_done(now)).max(0.0);
            let steps = (rate * round_s).floor().min(left);
            let finish_s = now_s + steps / rate;
            end_s = end_s.max(finish_s);
            jobs.push(RoundJob { id, gpu_type: t, gpus, finish_s });
        }
        let mut has_verdict: BTreeSet<JobId> = jobs.iter().map(|j| j.id).collect();
        has_verdict.extend(decision.waiting.iter().map(|(id, _)| *id));
        for &id in self.jobs.keys() {
            if !has_verdict.contains(&id) {
                decision.waiting.push((id, WaitReason::NotThisRound));
            }
        }
        if !jobs.is_empty() {
            let end = Time(((end_s * MICROS_PER_SECOND as f64).ceil()) as u64) + ROUND_SLACK;
            self.round = Some(Round { start_s: now_s, end: end.max(now + ROUND_SLACK), jobs });
            self.stats.rounds += 1;
        }
        decision
    }
}

fn up_gpus_of_type(view: &ClusterView<'_>, t: usize) -> u32 {
    (0..view.cluster.node_count())
        .map(|n| cotenant_core::NodeId(n as u32))
        .filter(|&n| view.cluster.is_up(n) && view.cluster.node(n).gpu_type.index() == t)
        .map(|n| view.cluster.node(n).gpus)
        .sum()
}

impl Policy for Gavel {
    fn name(&self) -> &'static str {
        self.config.name
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.init_types(view);
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) => {
                    self.arrived.insert(id);
                }
                JobChange::Completed(id) | JobChange::Ended(id) => self.forget(id),
                JobChange::Started(_) | JobChange::Stopped(_) => {}
            }
        }
        if let Some(round) = &self.round {
            if view.now < round.end {
                let mut decision = Decision::default();
                for &id in &self.arrived {
                    decision.waiting.push((id, WaitReason::NotThisRound));
                }
                return decision;
            }
        }
        self.end_round();
        self.start_round(view, view.now)
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.round.as_ref().map(|r| r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, Command, Engine, Input, JobSpec, TenantSpec};

    fn table() -> Arc<ThroughputTable> {
        let mut t = ThroughputTable::new();
        for (model, v100, k80) in [("fast", 10.0, 1.0), ("even", 2.0, 1.5)] {
            t.set_consolidated(&JobTypeKey::new(model, 1), "v100", v100);
            t.set_consolidated(&JobTypeKey::new(model, 1), "k80", k80);
        }
        Arc::new(t)
    }

    fn engine(objective: Objective) -> Engine {
        let mut spec = ClusterSpec { gpu_types: vec!["v100".into(), "k80".into()], nodes: Vec::new() };
        spec.add_nodes(GpuTypeId(0), 1, 1, 8, 64);
        spec.add_nodes(GpuTypeId(1), 1, 1, 8, 64);
        let config = GavelConfig {
            name: "test",
            objective,
            round: DEFAULT_ROUND,
            reset_interval: DEFAULT_RESET_INTERVAL,
            seed: 0,
            placement: Placement::Consolidated,
        };
        let policy = Gavel::new(config, table(), vec!["fast".into(), "even".into()]);
        Engine::new(Cluster::new(spec).unwrap(), vec![TenantSpec::new("t")], Box::new(policy), 0)
    }

    fn job(id: u32, job_type: u32, steps: f64) -> JobSpec {
        let mut j = JobSpec::new(id, 0, Time::ZERO, 1, steps);
        j.job_type = Some(job_type);
        j
    }

    fn starts(commands: &[Command]) -> Vec<(u32, u32)> {
        commands
            .iter()
            .filter_map(|c| match c {
                Command::Start { job, gpus } => Some((job.0, gpus[0].0)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn rounds_place_jobs_by_allocation_and_extend_leases() {
        let mut e = engine(Objective::MaxMinFairness { perf: true });
        let batch = Input::Batch(vec![
            Input::JobSubmitted(job(0, 0, 100_000.0)),
            Input::JobSubmitted(job(1, 1, 100_000.0)),
            Input::JobSubmitted(job(2, 1, 100_000.0)),
        ]);
        let first = e.step(Time::ZERO, batch);
        // The fast job gains most on the V100 (GPU 0); one "even" job takes the K80.
        assert_eq!(starts(&first), vec![(0, 0), (1, 1)]);
        let end = e.next_wakeup().expect("round end");
        // The round ends when the last job's floor(rate * 360) steps are done.
        assert!(end <= Time::from_secs(360) + ROUND_SLACK && end > Time::from_secs(359), "{end}");
        let second = e.step(end, Input::Wakeup);
        assert!(e.violations().is_empty(), "{:?}", e.violations());
        // Job 2, which has had no time yet, runs; both GPUs stay busy; a job
        // that stays on its GPU is not stopped and restarted.
        assert!(e.running().contains(&JobId(2)));
        assert_eq!(e.cluster().free_gpus(), 0);
        for (job, gpu) in starts(&second) {
            assert!(
                !starts(&first).contains(&(job, gpu))
                    || second.iter().any(|c| matches!(c, Command::Stop { job: j, .. } if j.0 == job))
            );
        }
        let third = e.step(e.next_wakeup().unwrap(), Input::Wakeup);
        let kept: Vec<&JobId> = e
            .running()
            .iter()
            .filter(|j| !third.iter().any(|c| matches!(c, Command::Start { job, .. } if job == *j)))
            .collect();
        assert!(!kept.is_empty() || starts(&third).len() == 2);
    }

    #[test]
    fn mid_round_arrivals_wait_for_the_round_end() {
        let mut e = engine(Objective::Fifo { perf: true });
        let first = e.step(Time::ZERO, Input::JobSubmitted(job(0, 0, 100_000.0)));
        assert_eq!(starts(&first), vec![(0, 0)]);
        let mid = e.step(Time::from_secs(100), Input::JobSubmitted(job(1, 0, 100_000.0)));
        assert!(starts(&mid).is_empty());
        let end = e.next_wakeup().unwrap();
        let next = e.step(end, Input::Wakeup);
        assert_eq!(starts(&next), vec![(1, 1)], "FIFO-perf: the newcomer takes the K80");
    }

    #[test]
    fn an_idle_cluster_starts_a_round_on_arrival() {
        let mut e = engine(Objective::MaxMinFairness { perf: false });
        let first = e.step(Time::from_secs(50), Input::JobSubmitted(job(0, 1, 10.0)));
        assert_eq!(starts(&first).len(), 1);
        let end = e.next_wakeup().unwrap();
        assert!(end < Time::from_secs(57), "a short job ends its round early: {end}");
        e.step(Time(end.0 - 500), Input::JobFinished { job: JobId(0) });
        e.step(end, Input::Wakeup);
        assert_eq!(e.next_wakeup(), None, "nothing left: no more rounds");
    }
}
