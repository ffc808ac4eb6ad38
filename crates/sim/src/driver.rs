//! The event loop: feeds the engine arrivals, completions and timers in time
//! order, applies its commands to the world model, and records what happened.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use cotenant_core::limits::MAX_RUN_SPAN;
use cotenant_core::{
    Cluster, ClusterError, ClusterSpec, Command, EndReason, Engine, EngineStats, GpuId, Input, JobId,
    JobSpec, Phase, Policy, Span, SpecRef, SpecTable, StopReason, TenantId, TenantSpec, Time, Violation,
    WaitReason,
};

use crate::elastic::ElasticModel;
use crate::evalstop::{CurveError, EvalCurves, EvalPoint};
use crate::rates::{Placed, RateModel};
use crate::usage::UsageTracker;
use crate::world::{gpu_parts, Overheads, WorldJob, GPU_PARTS};

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub overheads: Overheads,
    /// Window for per-tenant shares and Jain's index.
    pub share_window: Span,
    /// Keep the engine's full input log and command stream (for replay).
    pub record: bool,
    /// Stop at this time; jobs still in the system end `Unfinished`.
    pub horizon: Option<Time>,
    /// Follow one job: record every change of its phase, GPUs or wait verdict
    /// (`SimResult::watched`), to explain why it waited.
    pub watch: Option<JobId>,
    /// Most engine steps a run may take (a limit on everything): a policy that
    /// livelocks (preempting jobs before they keep any progress) stops here and
    /// its remaining jobs end `Unfinished`, saying so. `None`: 1,000 per job + 1M.
    pub max_steps: Option<u64>,
    /// Scaling curve and resize costs of elastic jobs (EDL).
    pub elastic: ElasticModel,
    /// Evaluation-score curves of the jobs that report evaluations as they run
    /// (RLHF jobs, `evalstop`); `None`: no job does.
    pub evals: Option<Arc<EvalCurves>>,
    /// MIG geometries by GPU type: the engine then accepts MIG actions (`None`: no MIG).
    pub mig: Option<cotenant_core::mig::MigModel>,
    /// Node failures and spot reclaims (`crate::faults`); `None`: none. Availability
    /// windows come from `ClusterSpec::departures`.
    pub faults: Option<Arc<crate::faults::FaultConfig>>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            overheads: Overheads::default(),
            share_window: Span::from_secs(3600),
            record: false,
            horizon: None,
            watch: None,
            max_steps: None,
            elastic: ElasticModel::default(),
            evals: None,
            mig: None,
            faults: None,
        }
    }
}

/// A run that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error("job {job} names tenant #{tenant}, but the workload has {tenants} tenants")]
    UnknownTenant { job: JobId, tenant: TenantId, tenants: usize },
    #[error("job {job}: work must be a finite, non-negative number, got {work}")]
    BadWork { job: JobId, work: f64 },
    #[error("jobs must be sorted by arrival with ids 0..n: job at position {position} has id {id}")]
    Unsorted { position: usize, id: JobId },
    #[error("policy {policy} made {count} invalid decisions; the first: {first:?}")]
    PolicyViolations { policy: String, count: usize, first: Violation },
    #[error("invalid evaluation curve: {0}")]
    EvalCurve(#[from] CurveError),
}

/// How a job left the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Ended(EndReason),
    /// Still waiting or running when the run stopped; the text says why.
    Unfinished(String),
}

/// What happened to one job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    pub id: JobId,
    pub tenant: TenantId,
    pub arrival: Time,
    pub gpus: u32,
    pub work: f64,
    pub first_start: Option<Time>,
    /// Completion or end time.
    pub end: Option<Time>,
    pub outcome: Outcome,
    pub preemptions: u32,
    pub held_gpu_us: u64,
    pub lost_gpu_us: u64,
    /// `held_gpu_us` exactly, in [`GPU_PARTS`]-microseconds (no rounding).
    pub held_part_us: u128,
    /// Times an elastic job changed its GPU count while running.
    pub resizes: u32,
    /// GPU-time its resizes cost (paused GPUs, added GPUs idle while preparing).
    pub scaling_overhead_gpu_us: u64,
}

impl JobRecord {
    pub fn jct(&self) -> Option<Span> {
        match self.outcome {
            Outcome::Completed => self.end.map(|end| end - self.arrival),
            _ => None,
        }
    }
    pub fn queueing(&self) -> Option<Span> {
        self.first_start.map(|start| start - self.arrival)
    }
}

/// Every engine step of a run, in order: the time, the input, and the
/// commands it produced. Feeding the inputs to a fresh engine with the same
/// cluster, tenants, policy and seed reproduces the commands (replay).
#[derive(Clone, Debug, Default)]
pub struct RunLog {
    pub steps: Vec<(Time, Input, Vec<Command>)>,
}

/// Why a run stopped before every job was done, if it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EarlyStop {
    /// The step limit (`SimConfig::max_steps`): a policy livelock, most likely.
    StepLimit { steps: u64 },
    /// The next event lay beyond `core::limits::MAX_RUN_SPAN` after the first arrival.
    TimeLimit { at: Time },
    /// The configured horizon (`SimConfig::horizon`).
    Horizon { at: Time },
}

impl std::fmt::Display for EarlyStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EarlyStop::StepLimit { steps } => write!(
                f,
                "the run hit its step limit of {steps} engine steps (1,000 per job + 1M): \
                 a policy livelock, jobs preempted before they keep progress?"
            ),
            EarlyStop::TimeLimit { at } => write!(
                f,
                "the run stopped at {:.0} s: its next event lay more than {} days after the first arrival \
                 (core::limits::MAX_RUN_SPAN)",
                at.as_secs_f64(),
                MAX_RUN_SPAN.0 / 86_400_000_000
            ),
            EarlyStop::Horizon { at } => {
                write!(f, "the run stopped at its horizon, {:.0} s", at.as_secs_f64())
            }
        }
    }
}

/// Everything a run produced. Deterministic for the same inputs and seed.
#[derive(Clone, Debug)]
pub struct SimResult {
    pub policy: String,
    pub tenants: Vec<TenantSpec>,
    pub cluster_gpus: u32,
    pub jobs: Vec<JobRecord>,
    pub usage: UsageTracker,
    /// Arrivals, completions and timers processed.
    pub events: u64,
    pub engine: EngineStats,
    pub log: Option<RunLog>,
    /// The watched job's history (see `SimConfig::watch`).
    pub watched: Vec<WatchPoint>,
    /// Set when the run stopped with work left (a limit or the horizon).
    pub early_stop: Option<EarlyStop>,
    /// Evaluations reported to the engine, in order (empty without `SimConfig::evals`).
    pub evaluations: Vec<EvalPoint>,
    /// Failures, reclaims, departures and what they cost (with `SimConfig::faults`
    /// or `ClusterSpec::departures`).
    pub faults: Option<crate::faults::FaultSummary>,
    /// How spread the multi-node jobs' groups were, when the cluster has a topology.
    pub placement_spread: Option<crate::topology_rates::SpreadStats>,
}

/// The watched job's state from `at` on.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchPoint {
    pub at: Time,
    pub phase: Phase,
    pub gpus: Vec<GpuId>,
    pub verdict: Option<WaitReason>,
}

/// How far a run has got, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct SimProgress {
    pub jobs_done: usize,
    pub jobs_total: usize,
    pub now: Time,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Finish {
        job: JobId,
        generation: u32,
    },
    Wakeup,
    /// The job's run reaches evaluation `index` of its curve (`SimConfig::evals`).
    Eval {
        job: JobId,
        generation: u32,
        index: u32,
    },
    /// The time of a finish event that went stale and was taken out of the heap,
    /// put back so that the loop stops at it as it would have at the event.
    Stale,
}

/// An event in the loop's queue, due `at`; `sequence` counts the pushes (unique).
/// The heap pops the earliest time first, and among equal times the first pushed:
/// the order of `Reverse((at, sequence, event))`, which never reached the event
/// since no two entries share a sequence number. Compared here as one 128-bit key.
#[derive(Clone, Copy, Debug)]
struct Queued {
    at: Time,
    sequence: u64,
    event: Event,
}

impl Queued {
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.at.0) << 64) | u128::from(self.sequence)
    }
}

impl Ord for Queued {
    /// Reversed: `BinaryHeap` is a max-heap, and the earliest key must come out first.
    #[inline]
    fn cmp(&self, other: &Queued) -> Ordering {
        other.key().cmp(&self.key())
    }
}

impl PartialOrd for Queued {
    #[inline]
    fn partial_cmp(&self, other: &Queued) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Queued) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Queued {}

/// Runs `jobs` on `cluster` under `policy` and returns per-job records and usage.
/// The engine refers to a copy of `jobs` made once for the run; [`simulate_shared`]
/// takes jobs already shared and copies nothing.
pub fn simulate(
    jobs: &[JobSpec],
    tenants: &[TenantSpec],
    cluster: ClusterSpec,
    policy: Box<dyn Policy>,
    rates: &dyn RateModel,
    config: &SimConfig,
    progress: &mut dyn FnMut(SimProgress),
) -> Result<SimResult, SimError> {
    simulate_shared(&Arc::new(jobs.to_vec()), tenants, cluster, policy, rates, config, progress)
}

/// [`simulate`] on jobs the caller shares with the run: the engine's job states
/// refer to these specs ([`SpecRef`]) instead of holding a copy of each.
pub fn simulate_shared(
    jobs: &Arc<Vec<JobSpec>>,
    tenants: &[TenantSpec],
    cluster: ClusterSpec,
    policy: Box<dyn Policy>,
    rates: &dyn RateModel,
    config: &SimConfig,
    progress: &mut dyn FnMut(SimProgress),
) -> Result<SimResult, SimError> {
    validate(jobs, tenants)?;
    if let Some(curves) = &config.evals {
        curves.validate(jobs)?;
    }
    let cluster = Cluster::new(cluster)?;
    let mut run = Run::new(jobs, tenants, cluster, policy, rates, config);
    run.event_loop(progress);
    run.finish()
}

fn validate(jobs: &[JobSpec], tenants: &[TenantSpec]) -> Result<(), SimError> {
    for (position, job) in jobs.iter().enumerate() {
        let out_of_order = position > 0 && job.arrival < jobs[position - 1].arrival;
        if job.id.index() != position || out_of_order {
            return Err(SimError::Unsorted { position, id: job.id });
        }
        if job.tenant.index() >= tenants.len() {
            return Err(SimError::UnknownTenant { job: job.id, tenant: job.tenant, tenants: tenants.len() });
        }
        if !(job.work.is_finite() && job.work >= 0.0) {
            return Err(SimError::BadWork { job: job.id, work: job.work });
        }
    }
    Ok(())
}

/// Finish events that went stale (their job was stopped or re-rated) leave the
/// heap instead of staying until they are due, so that the heap holds about one
/// event per running job. The loop used to stop at each stale event's time
/// (advancing the usage integrals, then finding nothing to do); such a stop
/// changes nothing as long as every tenant holds whole GPUs (the integrals
/// split exactly) and a later step follows before the run ends. So the times
/// are set aside, and stepped on as before only where that might not hold: at
/// the end of the run, and for good once jobs share GPUs or hold MIG slices.
#[derive(Debug, Default)]
struct StaleTimes {
    /// Stale events popped since the last step, in time order.
    skipped: Vec<Time>,
    /// Times of stale events taken out of the heap, in no order (only those after
    /// the step where the loop starts visiting them again count, and their order
    /// does not: a stale event does nothing). Times already passed are dropped in
    /// bulk once the list doubles (see `prune_removed_at`), so each costs O(1)
    /// amortized: a run with a million preemptions sets aside as many times.
    removed: Vec<Time>,
    /// Length of `removed` at which the passed times are next dropped.
    prune_removed_at: usize,
    /// Stale events stay in the heap and the loop stops at each.
    visit_all: bool,
}

/// The records are made in this many chunks (at least [`MIN_RECORD_CHUNK`] jobs
/// each), freeing the job tables behind each ([`Run::records`]).
const RECORD_CHUNKS: usize = 16;
const MIN_RECORD_CHUNK: usize = if cfg!(test) { 3 } else { 4096 };

/// Fewest stale events in the heap that make it worth rebuilding (low in unit
/// tests, so that small runs rebuild it often).
const COMPACT_AT_STALE: usize = if cfg!(test) { 2 } else { 64 };

struct Run<'a> {
    jobs: &'a [JobSpec],
    /// The same jobs, for the engine: each submission is a handle into them.
    specs: Arc<SpecTable>,
    engine: Engine,
    rates: &'a dyn RateModel,
    config: &'a SimConfig,
    world: Vec<WorldJob>,
    /// Each elastic job's resizes and their GPU-time cost, empty until the first
    /// resize. The rest of a job's record is read from the engine's job state when
    /// the run ends (see [`Run::records`]), so that the loop never touches it.
    scaling: Vec<(u32, u64)>,
    /// The records as the loop used to keep them, step by step: the unit tests
    /// check the ones read from the engine against them (see [`Shadow`]).
    #[cfg(test)]
    shadow: Shadow,
    heap: BinaryHeap<Queued>,
    sequence: u64,
    /// Stale finish events (of jobs stopped or re-rated since) still in the heap.
    stale_in_heap: usize,
    /// Whether the job's latest finish event is in the heap and current.
    finish_queued: Vec<bool>,
    /// See [`StaleTimes`].
    stale: StaleTimes,
    /// The inputs of the next step (a buffer kept between steps).
    inputs: Vec<Input>,
    /// The commands of a step and the progress reports they call for (buffers kept between steps).
    commands: Vec<Command>,
    reports: Vec<Input>,
    next_arrival: usize,
    wakeup_queued: Option<Time>,
    usage: UsageTracker,
    events: u64,
    done: usize,
    /// Time of the latest step.
    now: Time,
    early_stop: Option<EarlyStop>,
    log: Option<RunLog>,
    watched: Vec<WatchPoint>,
    /// Each job's current share of GPUs in the usage tracker, in [`GPU_PARTS`].
    held_gpu_parts: Vec<u32>,
    /// Evaluations reported so far; jobs evaluated in this step (their next one is queued after it).
    evaluations: Vec<EvalPoint>,
    evaluated: Vec<(JobId, u32)>,
    /// Timed node changes (`crate::faults`), while jobs remain.
    faults: Option<crate::faults::FaultRun>,
    /// Spread of each start's groups (crate::topology_rates), when the cluster has a topology.
    placement_spread: Option<crate::topology_rates::SpreadStats>,
}

impl<'a> Run<'a> {
    fn new(
        shared: &'a Arc<Vec<JobSpec>>,
        tenants: &[TenantSpec],
        cluster: Cluster,
        policy: Box<dyn Policy>,
        rates: &'a dyn RateModel,
        config: &'a SimConfig,
    ) -> Run<'a> {
        let jobs: &'a [JobSpec] = shared;
        let mut usage = UsageTracker::new(tenants.len(), cluster.up_gpus(), config.share_window);
        let origin = jobs.first().map_or(Time::ZERO, |j| j.arrival);
        usage.start_at(origin);
        // Whole-GPU tenants' usage is added up when it changes, not at every step.
        usage.defer();
        let faults = (config.faults.is_some() || !cluster.spec().departures.is_empty()).then(|| {
            let model = config.faults.clone().unwrap_or_default();
            crate::faults::FaultRun::new(model, cluster.spec(), origin)
        });
        let placement_spread = cluster.links().map(|_| crate::topology_rates::SpreadStats::default());
        let mut engine = Engine::new(cluster, tenants.to_vec(), policy, config.seed);
        engine.reserve_jobs(jobs.len());
        if let Some(model) = &config.mig {
            engine.enable_mig(model.clone());
        }
        Run {
            jobs,
            specs: SpecTable::new(Arc::clone(shared)),
            engine,
            rates,
            config,
            world: vec![WorldJob::default(); jobs.len()],
            scaling: Vec::new(),
            #[cfg(test)]
            shadow: Shadow::new(jobs.len()),
            heap: BinaryHeap::new(),
            sequence: 0,
            stale_in_heap: 0,
            finish_queued: vec![false; jobs.len()],
            // Node changes move the usage integrals' capacity: no stale-event skipping.
            stale: StaleTimes { visit_all: faults.is_some(), ..StaleTimes::default() },
            inputs: Vec::new(),
            commands: Vec::new(),
            reports: Vec::new(),
            next_arrival: 0,
            wakeup_queued: None,
            usage,
            events: 0,
            done: 0,
            now: Time::ZERO,
            early_stop: None,
            log: config.record.then(RunLog::default),
            watched: Vec::new(),
            held_gpu_parts: vec![0; jobs.len()],
            evaluations: Vec::new(),
            evaluated: Vec::new(),
            faults,
            placement_spread,
        }
    }

    fn peek_time(&self) -> Option<Time> {
        let arrival = self.jobs.get(self.next_arrival).map(|j| j.arrival);
        let mut event = self.heap.peek().map(|queued| queued.at);
        if let Some(fault) =
            self.faults.as_ref().filter(|_| self.done < self.jobs.len()).and_then(|f| f.next_time())
        {
            event = Some(event.map_or(fault, |e| e.min(fault)));
        }
        match (arrival, event) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    /// The time of the next step: the next arrival or event, as if stale finish
    /// events were still in the heap (see [`StaleTimes`]). `stops(t)`: the loop
    /// would stop before a step at `t`.
    fn next_time(&mut self, stops: impl Fn(Time) -> bool) -> Option<Time> {
        if self.stale.visit_all {
            return self.peek_time();
        }
        self.pop_stale_tops();
        let next = self.peek_time();
        if next.is_some_and(|t| !stops(t)) {
            self.stale.skipped.clear();
            return next;
        }
        // The run ends here: the stale times after the last step still count.
        self.visit_stale_times();
        self.peek_time()
    }

    /// Pops stale finish events due no later than the next arrival or live event.
    fn pop_stale_tops(&mut self) {
        let arrival = self.jobs.get(self.next_arrival).map(|j| j.arrival);
        while let Some(&Queued { at: t, event: Event::Finish { job, generation }, .. }) = self.heap.peek() {
            if self.world[job.index()].generation == generation || arrival.is_some_and(|a| t > a) {
                break;
            }
            self.heap.pop();
            self.stale_in_heap -= 1;
            self.stale.skipped.push(t);
        }
    }

    /// From now on, the loop stops at every stale finish time, as before stale
    /// events were taken out: the ones set aside go back into the heap.
    fn visit_stale_times(&mut self) {
        if self.stale.visit_all {
            return;
        }
        self.stale.visit_all = true;
        let now = self.now;
        let times: Vec<Time> =
            self.stale.skipped.drain(..).chain(self.stale.removed.drain(..)).filter(|&t| t > now).collect();
        for t in times {
            self.push(t, Event::Stale);
        }
    }

    /// The job's generation moved on, so its queued finish event (if any) is
    /// stale: count it, and take stale events out of the heap once they are
    /// half of it.
    fn retire_finish(&mut self, job: JobId) {
        if std::mem::replace(&mut self.finish_queued[job.index()], false) {
            self.stale_in_heap += 1;
        }
        if self.stale.visit_all
            || self.stale_in_heap < COMPACT_AT_STALE
            || self.stale_in_heap * 2 < self.heap.len()
        {
            return;
        }
        let now = self.now;
        if self.stale.removed.len() >= self.stale.prune_removed_at {
            self.stale.removed.retain(|&t| t > now);
            self.stale.prune_removed_at = (2 * self.stale.removed.len()).max(COMPACT_AT_STALE);
        }
        let (world, removed) = (&self.world, &mut self.stale.removed);
        self.heap.retain(|&Queued { at: t, event, .. }| match event {
            Event::Finish { job, generation } if world[job.index()].generation != generation => {
                removed.push(t);
                false
            }
            _ => true,
        });
        self.stale_in_heap = 0;
    }

    fn event_loop(&mut self, progress: &mut dyn FnMut(SimProgress)) {
        let mut steps: u64 = 0;
        let max_steps = self.config.max_steps.unwrap_or(1_000 * self.jobs.len() as u64 + 1_000_000);
        let time_limit = self.jobs.first().map_or(Time::ZERO, |j| j.arrival) + MAX_RUN_SPAN;
        let horizon = self.config.horizon;
        loop {
            let stops = |t: Time| horizon.is_some_and(|h| t > h) || t > time_limit || steps >= max_steps;
            let Some(now) = self.next_time(stops) else { break };
            if let Some(at) = self.config.horizon.filter(|&h| now > h) {
                self.early_stop = Some(EarlyStop::Horizon { at });
                break;
            }
            if now > time_limit {
                self.early_stop = Some(EarlyStop::TimeLimit { at: time_limit });
                break;
            }
            if steps >= max_steps {
                self.early_stop = Some(EarlyStop::StepLimit { steps });
                break;
            }
            self.usage.advance(now);
            self.now = now;
            self.collect_inputs(now);
            if self.inputs.is_empty() {
                continue;
            }
            self.step(now);
            self.queue_wakeup();
            steps += 1;
            if steps.is_multiple_of(4096) {
                progress(SimProgress { jobs_done: self.done, jobs_total: self.jobs.len(), now });
            }
        }
        progress(SimProgress { jobs_done: self.done, jobs_total: self.jobs.len(), now: self.now });
    }

    /// Everything that happens at `now` (completions, arrivals, then a due timer), into `self.inputs`.
    fn collect_inputs(&mut self, now: Time) {
        let mut inputs = std::mem::take(&mut self.inputs);
        let mut wakeup = false;
        while let Some(Queued { at: t, event, .. }) = self.heap.peek().copied() {
            if t != now {
                break;
            }
            self.heap.pop();
            match event {
                Event::Finish { job, generation } if self.world[job.index()].generation == generation => {
                    self.finish_queued[job.index()] = false;
                    self.events += 1;
                    self.complete(now, job);
                    inputs.push(Input::JobFinished { job });
                }
                Event::Wakeup if self.engine.next_wakeup() == Some(now) => wakeup = true,
                Event::Eval { job, generation, index }
                    if self.world[job.index()].generation == generation =>
                {
                    inputs.push(self.evaluate(now, job, index));
                }
                Event::Finish { .. } => self.stale_in_heap -= 1,
                Event::Wakeup | Event::Stale | Event::Eval { .. } => {}
            }
        }
        if let Some(faults) = &mut self.faults {
            faults.due(now, self.engine.cluster(), &mut inputs);
        }
        while let Some(job) = self.jobs.get(self.next_arrival).filter(|j| j.arrival == now) {
            self.events += 1;
            self.usage.add_waiting(job.tenant.index(), true);
            let spec = SpecRef::shared(&self.specs, self.next_arrival).expect("an arrival of the workload");
            inputs.push(Input::JobSubmitted(spec));
            self.next_arrival += 1;
        }
        if wakeup {
            self.events += 1;
            self.wakeup_queued = None;
            inputs.push(Input::Wakeup);
        }
        self.inputs = inputs;
    }

    fn complete(&mut self, now: Time, job: JobId) {
        let world = &mut self.world[job.index()];
        let spec = &self.jobs[job.index()];
        world.finish(now, spec.work);
        #[cfg(test)]
        self.shadow.ended(job, now, Outcome::Completed);
        let tenant = spec.tenant.index();
        let parts = self.usage.tenant_gpu_parts()[tenant] - self.held_gpu_parts[job.index()];
        self.usage.set_tenant_gpu_parts(tenant, parts);
        self.held_gpu_parts[job.index()] = 0;
        self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
        self.done += 1;
    }

    /// One engine step on `self.inputs` (one input alone, several as a batch), then
    /// the world applies its commands. The buffers are kept for the next step.
    fn step(&mut self, now: Time) {
        let mut commands = std::mem::take(&mut self.commands);
        commands.clear();
        let logged_input = if self.inputs.len() == 1 {
            let input = self.inputs.pop().expect("one input");
            let logged = self.log.is_some().then(|| input.clone());
            self.engine.step_into(now, input, &mut commands);
            logged
        } else {
            let logged = self.log.is_some().then(|| Input::Batch(self.inputs.clone()));
            self.engine.step_batch_into(now, &mut self.inputs, &mut commands);
            logged
        };
        let mut reports = std::mem::take(&mut self.reports);
        for command in &commands {
            if let Some(report) = self.apply(now, command) {
                reports.push(report);
            }
        }
        if let (Some(log), Some(input)) = (&mut self.log, logged_input) {
            log.steps.push((now, input, std::mem::take(&mut commands)));
        }
        self.commands = commands;
        // MIG and MPS jobs hold no whole GPU: the cluster counts their GPUs free.
        let mig_slices = self.engine.mig().map_or(0, cotenant_core::mig::MigState::held_compute_slices);
        self.usage.free_gpu_parts = (self.engine.cluster().free_gpus() * GPU_PARTS)
            .saturating_sub(mig_slices * GPU_PARTS / u32::from(cotenant_core::mig::MIG_COMPUTE_SLICES));
        self.usage.up_gpus = self.engine.cluster().up_gpus();
        self.queue_next_evals(now);
        self.watch(now);
        if !reports.is_empty() {
            if let Some(log) = &mut self.log {
                log.steps.push((now, Input::Batch(reports.clone()), Vec::new()));
            }
            let mut more = std::mem::take(&mut self.commands);
            more.clear();
            self.engine.step_batch_into(now, &mut reports, &mut more);
            debug_assert!(more.is_empty(), "progress reports must not trigger scheduling");
            self.commands = more;
        }
        self.reports = reports;
    }

    /// Applies one command to the world; returns the progress report for the engine.
    fn apply(&mut self, now: Time, command: &Command) -> Option<Input> {
        #[cfg(test)]
        self.shadow.command(now, command);
        match command {
            Command::Start { job, gpus } => {
                // A MIG job holds sevenths (or an MPS share) of a GPU: the usage
                // integrals round at every step, as with sharing.
                if self.engine.job(*job).is_some_and(|s| s.mig.is_some()) {
                    self.visit_stale_times();
                }
                Some(self.start(now, *job, gpus, None))
            }
            Command::StartShared { job, gpus, partner } => {
                // Sharing splits GPUs in halves, so the usage integrals round at
                // every step: stale finish times must be stepped on again.
                self.visit_stale_times();
                Some(self.start(now, *job, gpus, Some(*partner)))
            }
            Command::Rerate { job, partners } => self.rerate(now, *job, partners),
            Command::Resize { job, gpus, from } => self.resize(now, *job, gpus, *from),
            // The allocation lives on the engine's JobState; the Rerate that follows a change reads it.
            Command::Allocate { .. } => None,
            Command::Stop { job, reason } => {
                let spec = &self.jobs[job.index()];
                let overheads = self.config.overheads.for_job(spec);
                let world = &mut self.world[job.index()];
                let kept = match self.faults.as_mut().filter(|_| *reason == StopReason::NodeDown) {
                    Some(faults) => faults.stop(now, spec, world, &overheads),
                    None => world.stop(now, spec.work, &overheads),
                };
                self.retire_finish(*job);
                self.set_gpu_parts(*job);
                self.usage.add_waiting(spec.tenant.index(), true);
                Some(Input::Progress { job: *job, work_done: kept, rate: 0.0 })
            }
            Command::End { job, .. } => {
                let spec = &self.jobs[job.index()];
                if self.world[job.index()].running {
                    self.world[job.index()].stop(now, spec.work, &self.config.overheads.for_job(spec));
                    self.retire_finish(*job);
                    self.set_gpu_parts(*job);
                    self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
                } else {
                    self.usage.add_waiting(spec.tenant.index(), false);
                }
                self.done += 1;
                None
            }
        }
    }

    fn start(&mut self, now: Time, job: JobId, gpus: &[GpuId], partner: Option<JobId>) -> Input {
        let spec = &self.jobs[job.index()];
        let partners: Vec<&JobSpec> = partner.iter().map(|p| &self.jobs[p.index()]).collect();
        let placed =
            Placed { gpus, partners: &partners, state: self.engine.job(job), cluster: self.engine.cluster() };
        let rate = self.config.elastic.rate(spec, gpus.len() as u32, self.rates.rate(spec, &placed));
        let sharers = 1 + partners.len() as u32;
        let mig = self.engine.job(job).and_then(|s| s.mig).map(|slot| slot.place);
        let parts = gpu_parts(gpus.len() as u32, sharers, mig);
        let world = &mut self.world[job.index()];
        let finish = world.start(now, gpus.len() as u32, rate, parts, spec.work, &self.config.overheads);
        let generation = world.generation;
        if let Some(stats) = &mut self.placement_spread {
            stats.record(self.engine.cluster(), spec, gpus);
        }
        // Reported so that extrapolation is exact once the restore is over.
        let restore_secs = (world.productive_from - now).as_secs_f64();
        let report = Input::Progress { job, work_done: world.saved - rate * restore_secs, rate };
        let (from, saved) = (world.productive_from, world.saved);
        if let Some(at) = finish {
            self.push(at, Event::Finish { job, generation });
            self.finish_queued[job.index()] = true;
        }
        self.queue_eval(job, from, saved);
        self.usage.add_waiting(spec.tenant.index(), false);
        self.set_gpu_parts(job);
        report
    }

    /// A running job's partners changed: new rate, new finish event.
    fn rerate(&mut self, now: Time, job: JobId, partners: &[JobId]) -> Option<Input> {
        if !self.world[job.index()].running {
            return None;
        }
        let mig = self.engine.job(job).and_then(|s| s.mig).map(|slot| slot.place);
        // A re-rated job that shares its GPUs or holds a MIG slice splits GPUs in parts,
        // so stale finish times must be stepped on again ([`StaleTimes`]); one that holds
        // whole GPUs (a host-allocation change, a topology link change) splits exactly.
        if !partners.is_empty() || mig.is_some() {
            self.visit_stale_times();
        }
        let spec = &self.jobs[job.index()];
        let partner_specs: Vec<&JobSpec> = partners.iter().map(|p| &self.jobs[p.index()]).collect();
        let gpus = self.engine.job(job).map(|state| state.gpus.clone()).unwrap_or_default();
        let placed = Placed {
            gpus: &gpus,
            partners: &partner_specs,
            state: self.engine.job(job),
            cluster: self.engine.cluster(),
        };
        let rate = self.rates.rate(spec, &placed);
        let parts = gpu_parts(self.world[job.index()].gpus, 1 + partners.len() as u32, mig);
        let world = &mut self.world[job.index()];
        let finish = world.rerate(now, rate, parts, spec.work);
        let generation = world.generation;
        let done = world.saved_or_done(now);
        self.retire_finish(job);
        if let Some(at) = finish {
            self.push(at, Event::Finish { job, generation });
            self.finish_queued[job.index()] = true;
        }
        self.queue_eval(job, now.max(self.world[job.index()].productive_from), done);
        self.set_gpu_parts(job);
        Some(Input::Progress { job, work_done: done, rate })
    }

    /// A running elastic job changed its GPU count: its rate follows the scaling
    /// curve after the change's phases (preparation, pause).
    fn resize(&mut self, now: Time, job: JobId, gpus: &[GpuId], from: u32) -> Option<Input> {
        if !self.world[job.index()].running {
            return None;
        }
        self.visit_stale_times();
        let spec = &self.jobs[job.index()];
        let placed =
            Placed { gpus, partners: &[], state: self.engine.job(job), cluster: self.engine.cluster() };
        let to = gpus.len() as u32;
        let model = &self.config.elastic;
        let rate = model.rate(spec, to, self.rates.rate(spec, &placed));
        let world = &mut self.world[job.index()];
        let phases = model.phases(from, to, world.rate);
        let finish = world.resize(now, to, &phases, rate, spec.work);
        let generation = world.generation;
        let (resumes_at, done_then) = world.last_segment().unwrap_or((now, world.saved));
        if self.scaling.is_empty() {
            self.scaling = vec![(0, 0); self.jobs.len()];
        }
        let scaling = &mut self.scaling[job.index()];
        scaling.0 += 1;
        scaling.1 += model.overhead_gpu_us(from, to);
        self.retire_finish(job);
        if let Some(at) = finish {
            self.push(at, Event::Finish { job, generation });
            self.finish_queued[job.index()] = true;
        }
        self.set_gpu_parts(job);
        // Evaluations (RLHF jobs) resume on the new rate once the phases are over.
        self.queue_eval(job, resumes_at, done_then);
        // Reported so that extrapolation is exact once the phases are over.
        let ahead = (resumes_at - now).as_secs_f64();
        Some(Input::Progress { job, work_done: done_then - rate * ahead, rate })
    }

    /// Queues the job's next evaluation after `done` work units at `from`, if it has a curve.
    fn queue_eval(&mut self, job: JobId, from: Time, done: f64) {
        let Some(curve) = self.config.evals.as_ref().and_then(|c| c.get(job)) else { return };
        let world = &self.world[job.index()];
        let generation = world.generation;
        if let Some((index, at)) = curve.next_eval(self.jobs[job.index()].work, from, done, world.rate) {
            self.push(at, Event::Eval { job, generation, index });
        }
    }

    /// The world evaluates the job's checkpoint at evaluation `index`: the input for the engine.
    fn evaluate(&mut self, now: Time, job: JobId, index: u32) -> Input {
        let curve = self.config.evals.as_ref().and_then(|c| c.get(job)).expect("queued with a curve");
        let work = curve.eval_work(index, self.jobs[job.index()].work);
        let score = curve.score(index);
        self.evaluations.push(EvalPoint { job, at: now, index, work, score });
        self.evaluated.push((job, index));
        Input::Evaluated { job, work_done: work, score }
    }

    /// After a step: the next evaluation of each job evaluated in it that still runs.
    fn queue_next_evals(&mut self, now: Time) {
        for (job, index) in std::mem::take(&mut self.evaluated) {
            if self.world[job.index()].running {
                let work = self
                    .config
                    .evals
                    .as_ref()
                    .and_then(|c| c.get(job))
                    .map(|c| c.eval_work(index, self.jobs[job.index()].work));
                self.queue_eval(job, now, work.unwrap_or(0.0));
            }
        }
    }

    /// Brings the usage tracker in line with the job's current share of its GPUs.
    fn set_gpu_parts(&mut self, job: JobId) {
        let now_parts = self.world[job.index()].gpu_parts();
        let tenant = self.jobs[job.index()].tenant.index();
        let before = std::mem::replace(&mut self.held_gpu_parts[job.index()], now_parts);
        let parts = self.usage.tenant_gpu_parts()[tenant] - before + now_parts;
        self.usage.set_tenant_gpu_parts(tenant, parts);
    }

    /// Records the watched job's state if it changed.
    fn watch(&mut self, now: Time) {
        let Some(state) = self.config.watch.and_then(|id| self.engine.job(id)) else { return };
        let point =
            WatchPoint { at: now, phase: state.phase, gpus: state.gpus.clone(), verdict: state.verdict };
        let changed = self.watched.last().is_none_or(|last| {
            (last.phase, &last.gpus, last.verdict) != (point.phase, &point.gpus, point.verdict)
        });
        if changed {
            self.watched.push(point);
        }
    }

    fn push(&mut self, at: Time, event: Event) {
        self.sequence += 1;
        self.heap.push(Queued { at, sequence: self.sequence, event });
    }

    fn queue_wakeup(&mut self) {
        if let Some(at) = self.engine.next_wakeup() {
            if self.wakeup_queued != Some(at) {
                self.wakeup_queued = Some(at);
                self.push(at, Event::Wakeup);
            }
        }
    }

    /// Every job's record at the end of the run, read from the engine's job state
    /// (first start, end, outcome, preemptions), the world's (GPU-time) and the
    /// resizes the loop counted. The engine's phase says how a job left: it turns
    /// `Completed` exactly when the world completes the job (`Input::JobFinished`)
    /// and `Ended` exactly when it emits `Command::End`, at the step's time, which
    /// it keeps in `phase_since`; it counts a preemption exactly when it emits
    /// `Command::Stop` and sets `first_start` exactly when it emits the job's first
    /// `Command::Start` or `StartShared`. The loop used to write all of these into
    /// the records as they happened (a cache miss per job and event); the unit
    /// tests still do, and compare.
    ///
    /// The engine's job table and the world's jobs are freed as the records are made,
    /// from the last job back (the records are then reversed): at a million jobs the
    /// records need not be held beside them (peak memory).
    fn records(&mut self) -> Vec<JobRecord> {
        let mut states = self.engine.take_job_states();
        let mut world = std::mem::take(&mut self.world);
        let n = self.jobs.len();
        let mut records = Vec::with_capacity(n);
        let chunk = (n / RECORD_CHUNKS).max(MIN_RECORD_CHUNK);
        let mut end = n;
        while end > 0 {
            let start = end.saturating_sub(chunk);
            for index in (start..end).rev() {
                let state = states.get(index).and_then(Option::as_ref);
                records.push(self.record(&self.jobs[index], state, &world[index]));
            }
            // Shrinking a large table gives its tail back to the system.
            world.truncate(start);
            world.shrink_to_fit();
            states.truncate(start);
            states.shrink_to_fit();
            end = start;
        }
        records.reverse();
        records
    }

    /// One job's record (see [`Run::records`]).
    fn record(&self, spec: &JobSpec, state: Option<&cotenant_core::JobState>, world: &WorldJob) -> JobRecord {
        let unfinished = |state: Option<&cotenant_core::JobState>| match state {
            _ if matches!(self.early_stop, Some(EarlyStop::StepLimit { .. })) => {
                "the run hit its step limit (a livelock?)".to_string()
            }
            _ if matches!(self.early_stop, Some(EarlyStop::TimeLimit { .. })) => {
                "the run reached its time limit (core::limits::MAX_RUN_SPAN)".to_string()
            }
            None => "arrives after the end of the run".to_string(),
            Some(state) if state.is_running() => "still running at the end of the run".to_string(),
            Some(state) => match state.verdict {
                Some(verdict) => format!("still waiting at the end of the run: {verdict}"),
                None => "still waiting at the end of the run".to_string(),
            },
        };
        let (end, outcome) = match state.map(|s| (s.phase, s.phase_since)) {
            Some((Phase::Completed, at)) => (Some(at), Outcome::Completed),
            Some((Phase::Ended(reason), at)) => (Some(at), Outcome::Ended(reason)),
            _ => (None, Outcome::Unfinished(unfinished(state))),
        };
        let (resizes, scaling_overhead_gpu_us) =
            self.scaling.get(spec.id.index()).copied().unwrap_or_default();
        JobRecord {
            id: spec.id,
            tenant: spec.tenant,
            arrival: spec.arrival,
            gpus: spec.gpus,
            work: spec.work,
            first_start: state.and_then(|s| s.first_start),
            end,
            outcome,
            preemptions: state.map_or(0, |s| s.preemptions),
            held_gpu_us: world.held_gpu_us(),
            lost_gpu_us: world.lost_gpu_us(),
            held_part_us: world.held_part_us(),
            resizes,
            scaling_overhead_gpu_us,
        }
    }

    fn finish(mut self) -> Result<SimResult, SimError> {
        if let Some(first) = self.engine.violations().first() {
            return Err(SimError::PolicyViolations {
                policy: self.engine.policy_name().to_string(),
                count: self.engine.violations().len(),
                first: first.clone(),
            });
        }
        // Close runs still open (a horizon, or a job whose rate is zero) at the end.
        let end = self.config.horizon.unwrap_or(self.now).max(self.now);
        self.usage.advance(end);
        self.usage.settle();
        for (world, spec) in self.world.iter_mut().zip(self.jobs) {
            if world.running {
                world.stop(end, spec.work, &self.config.overheads.for_job(spec));
            }
        }
        let records = self.records();
        #[cfg(test)]
        self.shadow.check(&records);
        // Jobs left unfinished held GPUs or waited until the end: capacity counts to there.
        if records.iter().any(|r| matches!(r.outcome, Outcome::Unfinished(_))) {
            self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
        }
        let faults_end = records.iter().filter_map(|r| r.end).max().unwrap_or(end).max(end.min(self.now));
        Ok(SimResult {
            policy: self.engine.policy_name().to_string(),
            tenants: self.engine.tenants().to_vec(),
            cluster_gpus: self.engine.cluster().gpu_count(),
            jobs: records,
            usage: self.usage,
            events: self.events,
            engine: self.engine.stats(),
            log: self.log,
            watched: self.watched,
            early_stop: self.early_stop,
            evaluations: self.evaluations,
            faults: self.faults.map(|f| f.summary(faults_end)),
            placement_spread: self.placement_spread,
        })
    }
}

/// The per-job fields of the records as the loop kept them before they were read
/// from the engine at the end ([`Run::records`]): first start, end and outcome,
/// preemptions, written at the commands that set them. Test builds keep both and
/// compare them at the end of every run.
#[cfg(test)]
#[derive(Debug, Default)]
struct Shadow {
    first_start: Vec<Option<Time>>,
    end: Vec<Option<(Time, Outcome)>>,
    preemptions: Vec<u32>,
}

#[cfg(test)]
impl Shadow {
    fn new(jobs: usize) -> Shadow {
        Shadow { first_start: vec![None; jobs], end: vec![None; jobs], preemptions: vec![0; jobs] }
    }
    /// What the loop recorded when it applied `command`.
    fn command(&mut self, now: Time, command: &Command) {
        match *command {
            Command::Start { job, .. } | Command::StartShared { job, .. } => {
                self.first_start[job.index()].get_or_insert(now);
            }
            Command::Stop { job, .. } => self.preemptions[job.index()] += 1,
            Command::End { job, reason } => self.ended(job, now, Outcome::Ended(reason)),
            Command::Rerate { .. } | Command::Resize { .. } | Command::Allocate { .. } => {}
        }
    }
    fn ended(&mut self, job: JobId, now: Time, outcome: Outcome) {
        self.end[job.index()] = Some((now, outcome));
    }
    /// Panics unless `records` say what the loop recorded.
    fn check(&self, records: &[JobRecord]) {
        for (i, record) in records.iter().enumerate() {
            let (end, outcome) = match &self.end[i] {
                Some((at, outcome)) => (Some(*at), Some(outcome)),
                None => (None, None),
            };
            let derived = (record.first_start, record.end, record.preemptions);
            assert_eq!(derived, (self.first_start[i], end, self.preemptions[i]), "job {i}");
            match outcome {
                Some(outcome) => assert_eq!(&record.outcome, outcome, "job {i}"),
                None => {
                    assert!(matches!(record.outcome, Outcome::Unfinished(_)), "job {i}: {:?}", record.outcome)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::ReferenceRate;
    use cotenant_core::{Action, ClusterView, Decision, PolicyCx};
    use cotenant_policies::{build, policies, PolicyParams};
    use proptest::prelude::*;

    /// Starts waiting jobs on free GPUs if any, otherwise (if `share`) shares
    /// with the oldest running job of the same size that runs alone. Every third
    /// pass it preempts the newest running job instead, and never restarts it:
    /// its stale finish event may lie past every other event of the run.
    #[derive(Default)]
    struct PreemptForGood {
        share: bool,
        passes: u32,
        banned: Vec<JobId>,
    }

    impl Policy for PreemptForGood {
        fn name(&self) -> &'static str {
            "preempt-for-good"
        }
        fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
            self.passes += 1;
            let mut decision = Decision::default();
            if self.passes.is_multiple_of(3) {
                if let Some(victim) = view.running_jobs().last() {
                    self.banned.push(victim.id());
                    decision.actions.push(Action::Preempt { job: victim.id() });
                    return decision;
                }
            }
            let mut free = cotenant_core::placement::FreeMap::new(view.cluster);
            let mut taken = Vec::new();
            for job in view.pending_jobs().filter(|j| !self.banned.contains(&j.id())) {
                if let Ok(gpus) = free.place(job.spec.gpus, Default::default(), |_| true) {
                    decision.actions.push(Action::Start { job: job.id(), gpus });
                    continue;
                }
                if !self.share {
                    continue;
                }
                let partner = view.running_jobs().find(|r| {
                    r.partner.is_none() && r.spec.gpus == job.spec.gpus && !taken.contains(&r.id())
                });
                if let Some(partner) = partner {
                    taken.push(partner.id());
                    decision.actions.push(Action::StartShared { job: job.id(), partner: partner.id() });
                }
            }
            decision
        }
    }

    /// Rate 1 alone, 0.6 when sharing.
    struct SlowerWhenShared;

    impl RateModel for SlowerWhenShared {
        fn rate(&self, _job: &JobSpec, placed: &Placed<'_>) -> f64 {
            if placed.partners.is_empty() {
                1.0
            } else {
                0.6
            }
        }
    }

    fn policy(name: &str) -> Box<dyn Policy> {
        match name {
            "preempt-for-good" => Box::new(PreemptForGood::default()),
            "share-and-preempt" => Box::new(PreemptForGood { share: true, ..PreemptForGood::default() }),
            _ => build(name, &PolicyParams::default()).unwrap(),
        }
    }

    /// A run with stale finish events left in the heap and stepped on, as the
    /// loop did before they were taken out.
    fn simulate_visiting_stale(
        jobs: &[JobSpec],
        tenants: &[TenantSpec],
        cluster: ClusterSpec,
        policy: Box<dyn Policy>,
        rates: &dyn RateModel,
        config: &SimConfig,
    ) -> SimResult {
        let cluster = Cluster::new(cluster).unwrap();
        let jobs = Arc::new(jobs.to_vec());
        let mut run = Run::new(&jobs, tenants, cluster, policy, rates, config);
        run.stale.visit_all = true;
        run.event_loop(&mut |_| {});
        run.finish().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// Taking stale finish events out of the heap changes nothing a run
        /// reports: every policy (preemptive and sharing ones included), with
        /// checkpoint loss and restores, and runs cut short by a step limit or a
        /// horizon.
        #[test]
        fn removing_stale_events_changes_no_result(
            name in prop::sample::select(
                policies()
                    .iter()
                    .map(|p| p.name)
                    .filter(|n| build(n, &PolicyParams::default()).is_ok())
                    .chain(["preempt-for-good"; 8])
                    .chain(["share-and-preempt"; 8])
                    .collect::<Vec<_>>()
            ),
            nodes in 1u32..4,
            per_node in 1u32..9,
            shape in prop::collection::vec((0u64..300, 1u32..10, 1u64..120, 0u32..3), 1..40),
            ckpt in 0u64..20,
            restore in 0u64..5,
            max_steps in prop::option::of(1u64..200),
            horizon in prop::option::of(0u64..500),
            seed in any::<u64>(),
        ) {
            let mut shape = shape;
            shape.sort_by_key(|j| j.0);
            let jobs: Vec<JobSpec> = shape
                .iter()
                .enumerate()
                .map(|(i, &(arrival, gpus, secs, tenant))| {
                    let mut job = JobSpec::new(i as u32, tenant, Time::from_secs(arrival), gpus, secs as f64);
                    job.duration_estimate = Some(Span::from_secs(secs));
                    job
                })
                .collect();
            let tenants: Vec<TenantSpec> = (0..3).map(|t| TenantSpec::new(format!("t{t}"))).collect();
            let config = SimConfig {
                seed,
                overheads: Overheads {
                    checkpoint_interval: Span::from_secs(ckpt),
                    restore_overhead: Span::from_secs(restore),
                },
                max_steps,
                horizon: horizon.map(Time::from_secs),
                share_window: Span::from_secs(7),
                ..SimConfig::default()
            };
            let cluster = ClusterSpec::homogeneous("v100", nodes, per_node);
            let rates: &dyn RateModel = if name == "share-and-preempt" { &SlowerWhenShared } else { &ReferenceRate };
            let fast =
                simulate(&jobs, &tenants, cluster.clone(), policy(name), rates, &config, &mut |_| {}).unwrap();
            let slow = simulate_visiting_stale(&jobs, &tenants, cluster, policy(name), rates, &config);
            prop_assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
        }

        /// The queue pops events in the order the tuple heap did
        /// (`Reverse((time, sequence, event))`), under any mix of pushes (many at
        /// the same time), pops and retains.
        #[test]
        fn queued_events_pop_in_tuple_order(
            ops in prop::collection::vec((0u8..5, 0u64..6, 0u32..4), 0..200),
        ) {
            let mut queue: BinaryHeap<Queued> = BinaryHeap::new();
            let mut tuples: BinaryHeap<std::cmp::Reverse<(Time, u64, Event)>> = BinaryHeap::new();
            let mut sequence = 0u64;
            for (op, at, job) in ops {
                match op {
                    0..=2 => {
                        sequence += 1;
                        let event = match job {
                            0 => Event::Wakeup,
                            1 => Event::Stale,
                            _ => Event::Finish { job: JobId(job), generation: at as u32 },
                        };
                        // Times run backwards against the sequence, so that both orders matter.
                        let at = Time(at * 1_000_000 + 5 - (sequence % 5));
                        queue.push(Queued { at, sequence, event });
                        tuples.push(std::cmp::Reverse((at, sequence, event)));
                    }
                    3 => {
                        let popped = queue.pop().map(|q| (q.at, q.sequence, q.event));
                        prop_assert_eq!(popped, tuples.pop().map(|t| t.0));
                    }
                    _ => {
                        queue.retain(|q| q.sequence % 3 != u64::from(job % 3));
                        tuples.retain(|t| t.0 .1 % 3 != u64::from(job % 3));
                    }
                }
                prop_assert_eq!(queue.peek().map(|q| (q.at, q.sequence)), tuples.peek().map(|t| (t.0 .0, t.0 .1)));
            }
            let rest: Vec<_> = std::iter::from_fn(|| queue.pop().map(|q| (q.at, q.sequence, q.event))).collect();
            let expected: Vec<_> = std::iter::from_fn(|| tuples.pop().map(|t| t.0)).collect();
            prop_assert_eq!(rest, expected);
        }
    }
}
