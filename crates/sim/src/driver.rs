//! The event loop: feeds the engine arrivals, completions and timers in time
//! order, applies its commands to the world model, and records what happened.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cotenant_core::limits::MAX_RUN_SPAN;
use cotenant_core::{
    Cluster, ClusterError, ClusterSpec, Command, EndReason, Engine, EngineStats, GpuId, Input, JobId,
    JobSpec, Phase, Policy, Span, TenantId, TenantSpec, Time, Violation, WaitReason,
};

use crate::rates::RateModel;
use crate::usage::UsageTracker;
use crate::world::{Overheads, WorldJob};

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
    Finish { job: JobId, generation: u32 },
    Wakeup,
}

/// Runs `jobs` on `cluster` under `policy` and returns per-job records and usage.
pub fn simulate(
    jobs: &[JobSpec],
    tenants: &[TenantSpec],
    cluster: ClusterSpec,
    policy: Box<dyn Policy>,
    rates: &dyn RateModel,
    config: &SimConfig,
    progress: &mut dyn FnMut(SimProgress),
) -> Result<SimResult, SimError> {
    validate(jobs, tenants)?;
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

struct Run<'a> {
    jobs: &'a [JobSpec],
    engine: Engine,
    rates: &'a dyn RateModel,
    config: &'a SimConfig,
    world: Vec<WorldJob>,
    records: Vec<JobRecord>,
    heap: BinaryHeap<Reverse<(Time, u64, Event)>>,
    sequence: u64,
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
    /// Each job's current share of GPUs in the usage tracker, in half GPUs.
    held_half_gpus: Vec<u32>,
}

impl<'a> Run<'a> {
    fn new(
        jobs: &'a [JobSpec],
        tenants: &[TenantSpec],
        cluster: Cluster,
        policy: Box<dyn Policy>,
        rates: &'a dyn RateModel,
        config: &'a SimConfig,
    ) -> Run<'a> {
        let mut usage = UsageTracker::new(tenants.len(), cluster.up_gpus(), config.share_window);
        usage.start_at(jobs.first().map_or(Time::ZERO, |j| j.arrival));
        let records = jobs
            .iter()
            .map(|j| JobRecord {
                id: j.id,
                tenant: j.tenant,
                arrival: j.arrival,
                gpus: j.gpus,
                work: j.work,
                first_start: None,
                end: None,
                outcome: Outcome::Unfinished(String::new()),
                preemptions: 0,
                held_gpu_us: 0,
                lost_gpu_us: 0,
            })
            .collect();
        Run {
            jobs,
            engine: Engine::new(cluster, tenants.to_vec(), policy, config.seed),
            rates,
            config,
            world: vec![WorldJob::default(); jobs.len()],
            records,
            heap: BinaryHeap::new(),
            sequence: 0,
            next_arrival: 0,
            wakeup_queued: None,
            usage,
            events: 0,
            done: 0,
            now: Time::ZERO,
            early_stop: None,
            log: config.record.then(RunLog::default),
            watched: Vec::new(),
            held_half_gpus: vec![0; jobs.len()],
        }
    }

    fn next_time(&self) -> Option<Time> {
        let arrival = self.jobs.get(self.next_arrival).map(|j| j.arrival);
        let event = self.heap.peek().map(|Reverse((t, _, _))| *t);
        match (arrival, event) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    fn event_loop(&mut self, progress: &mut dyn FnMut(SimProgress)) {
        let mut steps: u64 = 0;
        let max_steps = self.config.max_steps.unwrap_or(1_000 * self.jobs.len() as u64 + 1_000_000);
        let time_limit = self.jobs.first().map_or(Time::ZERO, |j| j.arrival) + MAX_RUN_SPAN;
        while let Some(now) = self.next_time() {
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
            let inputs = self.collect_inputs(now);
            if inputs.is_empty() {
                continue;
            }
            let input = if inputs.len() == 1 {
                inputs.into_iter().next().expect("one input")
            } else {
                Input::Batch(inputs)
            };
            self.step(now, input);
            self.queue_wakeup();
            steps += 1;
            if steps.is_multiple_of(4096) {
                progress(SimProgress { jobs_done: self.done, jobs_total: self.jobs.len(), now });
            }
        }
        progress(SimProgress { jobs_done: self.done, jobs_total: self.jobs.len(), now: self.now });
    }

    /// Everything that happens at `now`: completions, arrivals, then a due timer.
    fn collect_inputs(&mut self, now: Time) -> Vec<Input> {
        let mut inputs = Vec::new();
        let mut wakeup = false;
        while let Some(Reverse((t, _, event))) = self.heap.peek().copied() {
            if t != now {
                break;
            }
            self.heap.pop();
            match event {
                Event::Finish { job, generation } if self.world[job.index()].generation == generation => {
                    self.events += 1;
                    self.complete(now, job);
                    inputs.push(Input::JobFinished { job });
                }
                Event::Wakeup if self.engine.next_wakeup() == Some(now) => wakeup = true,
                _ => {}
            }
        }
        while let Some(job) = self.jobs.get(self.next_arrival).filter(|j| j.arrival == now) {
            self.events += 1;
            self.usage.tenant_waiting[job.tenant.index()] += 1;
            inputs.push(Input::JobSubmitted(job.clone()));
            self.next_arrival += 1;
        }
        if wakeup {
            self.events += 1;
            self.wakeup_queued = None;
            inputs.push(Input::Wakeup);
        }
        inputs
    }

    fn complete(&mut self, now: Time, job: JobId) {
        let world = &mut self.world[job.index()];
        world.finish(now, self.jobs[job.index()].work);
        let record = &mut self.records[job.index()];
        record.end = Some(now);
        record.outcome = Outcome::Completed;
        self.usage.tenant_half_gpus[record.tenant.index()] -= self.held_half_gpus[job.index()];
        self.held_half_gpus[job.index()] = 0;
        self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
        self.done += 1;
    }

    fn step(&mut self, now: Time, input: Input) {
        let logged_input = self.log.is_some().then(|| input.clone());
        let commands = self.engine.step(now, input);
        let mut reports = Vec::new();
        for command in &commands {
            if let Some(report) = self.apply(now, command) {
                reports.push(report);
            }
        }
        if let (Some(log), Some(input)) = (&mut self.log, logged_input) {
            log.steps.push((now, input, commands));
        }
        self.usage.free_gpus = self.engine.cluster().free_gpus();
        self.watch(now);
        if !reports.is_empty() {
            let input = Input::Batch(reports);
            if let Some(log) = &mut self.log {
                log.steps.push((now, input.clone(), Vec::new()));
            }
            let more = self.engine.step(now, input);
            debug_assert!(more.is_empty(), "progress reports must not trigger scheduling");
        }
    }

    /// Applies one command to the world; returns the progress report for the engine.
    fn apply(&mut self, now: Time, command: &Command) -> Option<Input> {
        match command {
            Command::Start { job, gpus } => Some(self.start(now, *job, gpus, None)),
            Command::StartShared { job, gpus, partner } => Some(self.start(now, *job, gpus, Some(*partner))),
            Command::Rerate { job, partners } => self.rerate(now, *job, partners),
            Command::Stop { job, .. } => {
                let spec = &self.jobs[job.index()];
                let kept = self.world[job.index()].stop(now, spec.work, &self.config.overheads);
                self.records[job.index()].preemptions += 1;
                self.set_half_gpus(*job);
                self.usage.tenant_waiting[spec.tenant.index()] += 1;
                Some(Input::Progress { job: *job, work_done: kept, rate: 0.0 })
            }
            Command::End { job, reason } => {
                let spec = &self.jobs[job.index()];
                if self.world[job.index()].running {
                    self.world[job.index()].stop(now, spec.work, &self.config.overheads);
                    self.set_half_gpus(*job);
                    self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
                } else {
                    self.usage.tenant_waiting[spec.tenant.index()] -= 1;
                }
                let record = &mut self.records[job.index()];
                record.end = Some(now);
                record.outcome = Outcome::Ended(*reason);
                self.done += 1;
                None
            }
        }
    }

    fn start(&mut self, now: Time, job: JobId, gpus: &[GpuId], partner: Option<JobId>) -> Input {
        let spec = &self.jobs[job.index()];
        let partners: Vec<&JobSpec> = partner.iter().map(|p| &self.jobs[p.index()]).collect();
        let rate = self.rates.rate(spec, gpus, &partners, self.engine.cluster());
        let sharers = 1 + partners.len() as u32;
        let world = &mut self.world[job.index()];
        let finish = world.start(now, gpus.len() as u32, rate, sharers, spec.work, &self.config.overheads);
        let generation = world.generation;
        // Reported so that extrapolation is exact once the restore is over.
        let restore_secs = (world.productive_from - now).as_secs_f64();
        let report = Input::Progress { job, work_done: world.saved - rate * restore_secs, rate };
        if let Some(at) = finish {
            self.push(at, Event::Finish { job, generation });
        }
        self.records[job.index()].first_start.get_or_insert(now);
        self.usage.tenant_waiting[spec.tenant.index()] -= 1;
        self.set_half_gpus(job);
        report
    }

    /// A running job's partners changed: new rate, new finish event.
    fn rerate(&mut self, now: Time, job: JobId, partners: &[JobId]) -> Option<Input> {
        let world = &self.world[job.index()];
        if !world.running {
            return None;
        }
        let spec = &self.jobs[job.index()];
        let partner_specs: Vec<&JobSpec> = partners.iter().map(|p| &self.jobs[p.index()]).collect();
        let gpus = self.engine.job(job).map(|state| state.gpus.clone()).unwrap_or_default();
        let rate = self.rates.rate(spec, &gpus, &partner_specs, self.engine.cluster());
        let world = &mut self.world[job.index()];
        let finish = world.rerate(now, rate, 1 + partners.len() as u32, spec.work);
        let generation = world.generation;
        let done = world.saved_or_done(now);
        if let Some(at) = finish {
            self.push(at, Event::Finish { job, generation });
        }
        self.set_half_gpus(job);
        Some(Input::Progress { job, work_done: done, rate })
    }

    /// Brings the usage tracker in line with the job's current share of its GPUs.
    fn set_half_gpus(&mut self, job: JobId) {
        let now_half = self.world[job.index()].half_gpus();
        let tenant = self.jobs[job.index()].tenant.index();
        let before = std::mem::replace(&mut self.held_half_gpus[job.index()], now_half);
        self.usage.tenant_half_gpus[tenant] = self.usage.tenant_half_gpus[tenant] - before + now_half;
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
        self.heap.push(Reverse((at, self.sequence, event)));
    }

    fn queue_wakeup(&mut self) {
        if let Some(at) = self.engine.next_wakeup() {
            if self.wakeup_queued != Some(at) {
                self.wakeup_queued = Some(at);
                self.push(at, Event::Wakeup);
            }
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
        for (world, spec) in self.world.iter_mut().zip(self.jobs) {
            if world.running {
                world.stop(end, spec.work, &self.config.overheads);
            }
        }
        for (i, record) in self.records.iter_mut().enumerate() {
            if record.outcome != Outcome::Unfinished(String::new()) {
                continue;
            }
            let reason = match self.engine.job(JobId(i as u32)) {
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
            record.outcome = Outcome::Unfinished(reason);
        }
        for (record, world) in self.records.iter_mut().zip(&self.world) {
            record.held_gpu_us = world.held_gpu_us;
            record.lost_gpu_us = world.lost_gpu_us;
        }
        // Jobs left unfinished held GPUs or waited until the end: capacity counts to there.
        if self.records.iter().any(|r| matches!(r.outcome, Outcome::Unfinished(_))) {
            self.usage.measured_capacity_gpu_us = self.usage.available_gpu_us;
        }
        Ok(SimResult {
            policy: self.engine.policy_name().to_string(),
            tenants: self.engine.tenants().to_vec(),
            cluster_gpus: self.engine.cluster().gpu_count(),
            jobs: self.records,
            usage: self.usage,
            events: self.events,
            engine: self.engine.stats(),
            log: self.log,
            watched: self.watched,
            early_stop: self.early_stop,
        })
    }
}
