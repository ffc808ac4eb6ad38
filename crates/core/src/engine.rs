//! The engine: a sans-IO state machine. Inputs in, commands out, time passed in.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::cluster::Cluster;
use crate::host::{HostAlloc, HostResource};
use crate::ids::{GpuId, JobId, NodeId, TenantId};
use crate::job::{EndReason, SpecRef};
use crate::job_set::JobSet;
use crate::mig::{MigModel, MigRefusal, MigState};
use crate::policy::{
    Action, ClusterView, Decision, JobChange, JobState, Phase, Policy, PolicyCx, Progress, Trigger,
};
use crate::sharing::{self, ShareRefusal, Sharing};
use crate::tenant::TenantSpec;
use crate::time::Time;

mod mig_actions;
mod resize;

/// Something that happened in the world.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A new job: its spec, or a handle into specs the world shares (`crate::SpecTable`).
    JobSubmitted(SpecRef),
    /// A running job completed its work.
    JobFinished {
        job: JobId,
    },
    /// A progress report: `work_done` units at `now`, advancing at `rate` per second.
    Progress {
        job: JobId,
        work_done: f64,
        rate: f64,
    },
    NodeUp(NodeId),
    NodeDown(NodeId),
    /// A timer the engine asked for with [`Engine::next_wakeup`].
    Wakeup,
    /// An evaluation of the running job's checkpoint at `work_done` units of
    /// progress scored `score` (RLHF reward, held-out metric). Recorded in the
    /// job's `evals`; a scheduling pass follows only if the policy may act on it.
    Evaluated {
        job: JobId,
        work_done: f64,
        score: f64,
    },
    /// The world ended a job from outside the policy: a tenant cancelled it, its
    /// process failed or vanished (the live controller). A pending job leaves the
    /// queue; a running one frees its GPUs. The engine answers `Command::End`.
    JobEnded {
        job: JobId,
        reason: EndReason,
    },
    /// Several inputs at the same instant, applied in order, then one scheduling pass.
    Batch(Vec<Input>),
}

/// Why a running job was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Preempted,
    NodeDown,
}

/// What the engine asks the world to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Start {
        job: JobId,
        gpus: Vec<GpuId>,
    },
    /// Start `job` on GPUs that `partner` keeps running on (space sharing).
    StartShared {
        job: JobId,
        gpus: Vec<GpuId>,
        partner: JobId,
    },
    /// A running job's co-location changed (a partner came or went): its rate
    /// may change. `partners` are the jobs sharing its GPUs now.
    Rerate {
        job: JobId,
        partners: Vec<JobId>,
    },
    Stop {
        job: JobId,
        reason: StopReason,
    },
    /// The job leaves without finishing, for the stated reason.
    End {
        job: JobId,
        reason: EndReason,
    },
    /// A running elastic job now runs on `gpus` (it ran on `from` GPUs).
    Resize {
        job: JobId,
        gpus: Vec<GpuId>,
        from: u32,
    },
    /// The job's CPUs and memory (crate::host), over all its nodes: emitted just
    /// before its start, and when a running job's allocation changes (then a
    /// `Rerate` follows). Only while the run models host resources.
    Allocate {
        job: JobId,
        alloc: HostAlloc,
    },
}

/// An input or action the engine refused. In the simulator any of these is a bug.
#[derive(Clone, Debug, PartialEq)]
pub enum Violation {
    DuplicateJob(JobId),
    UnknownTenant {
        job: JobId,
        tenant: TenantId,
    },
    UnknownJob(JobId),
    FinishedWhileNotRunning(JobId),
    StartNotPending(JobId),
    StartWrongGpuCount {
        job: JobId,
        wanted: u32,
        given: u32,
    },
    StartGpusUnavailable {
        job: JobId,
        gpus: Vec<GpuId>,
    },
    StartOverTenantLimit {
        job: JobId,
        tenant: TenantId,
    },
    PreemptNotRunning(JobId),
    ShareWithNotRunning {
        job: JobId,
        partner: JobId,
    },
    /// The partner already shares, or its GPU count differs from the job's.
    ShareNotPossible {
        job: JobId,
        partner: JobId,
    },
    EndAlreadyOver(JobId),
    UnknownNode(NodeId),
    ResizeNotRunning(JobId),
    /// The job is rigid, shares its GPUs, or the count is outside its range.
    ResizeNotAllowed {
        job: JobId,
        gpus: u32,
    },
    ResizeGpusUnavailable {
        job: JobId,
        gpus: Vec<GpuId>,
    },
    ResizeOverTenantLimit {
        job: JobId,
        tenant: TenantId,
    },
    /// A share (or a start) that does not fit in GPU memory, or asks for an
    /// accumulation factor out of range (`crate::sharing`).
    ShareRefused {
        job: JobId,
        refusal: ShareRefusal,
    },
    /// A MIG reconfiguration (`job: None`) or MIG start the model refuses.
    MigRefused {
        job: Option<JobId>,
        gpu: GpuId,
        refusal: MigRefusal,
    },
    /// A start or allocation change would take more CPUs or memory than `node` has free.
    HostOverCommit {
        job: JobId,
        node: NodeId,
        resource: HostResource,
        wanted: u32,
        free: u32,
    },
    /// `Action::Allocate` for a job that is neither pending nor running, or under
    /// a policy that does not model host resources.
    AllocateNotPossible(JobId),
}

impl Violation {
    fn host_over_commit(job: JobId, over: crate::host::OverCommit) -> Violation {
        Violation::HostOverCommit {
            job,
            node: over.node,
            resource: over.resource,
            wanted: over.wanted,
            free: over.free,
        }
    }
}

/// Counts the engine keeps for reporting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub inputs: u64,
    pub scheduling_passes: u64,
    pub starts: u64,
    pub preemptions: u64,
}

/// The scheduling engine. Owns cluster state and the job table; asks its policy
/// for decisions; validates and applies them; tells the world what to do.
pub struct Engine {
    cluster: Cluster,
    tenants: Vec<TenantSpec>,
    tenant_gpus: Vec<u32>,
    jobs: Vec<Option<JobState>>,
    pending: JobSet,
    running: JobSet,
    changes: Vec<JobChange>,
    policy: Box<dyn Policy>,
    rng: ChaCha8Rng,
    wakeup: Option<Time>,
    violations: Vec<Violation>,
    stats: EngineStats,
    /// Running jobs whose partner changed during this step.
    rerate: Vec<JobId>,
    /// A policy ended a running job in this pass: its GPUs are free for a follow-up pass.
    freed_by_end: bool,
    /// MIG partitions and the jobs in them (`None`: no MIG in this run).
    mig: Option<MigState>,
    /// Jobs whose progress the world reported since the last pass (`ClusterView::progressed`).
    progressed: Vec<JobId>,
    /// GPU lists of jobs that left for good, emptied, for the next jobs that start:
    /// a start then copies its GPUs without allocating (at most [`SPARE_GPU_LISTS`]).
    spare_gpus: Vec<Vec<GpuId>>,
}

/// Most emptied GPU lists the engine keeps for reuse.
const SPARE_GPU_LISTS: usize = 1024;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("policy", &self.policy.name())
            .field("pending", &self.pending.len())
            .field("running", &self.running.len())
            .finish()
    }
}

impl Engine {
    pub fn new(mut cluster: Cluster, tenants: Vec<TenantSpec>, policy: Box<dyn Policy>, seed: u64) -> Engine {
        if policy.host_resources() {
            cluster.host_mut().enable();
        }
        Engine {
            tenant_gpus: vec![0; tenants.len()],
            tenants,
            cluster,
            jobs: Vec::new(),
            pending: JobSet::new(),
            running: JobSet::new(),
            changes: Vec::new(),
            policy,
            rng: ChaCha8Rng::seed_from_u64(seed),
            wakeup: None,
            violations: Vec::new(),
            stats: EngineStats::default(),
            rerate: Vec::new(),
            freed_by_end: false,
            mig: None,
            progressed: Vec::new(),
            spare_gpus: Vec::new(),
        }
    }

    /// Makes room in the job table for ids `0..jobs` at once (a simulator knows its
    /// workload up front), so that submissions never grow the table by copying it.
    pub fn reserve_jobs(&mut self, jobs: usize) {
        self.jobs.reserve(jobs.saturating_sub(self.jobs.len()));
        self.pending.reserve(jobs);
        self.running.reserve(jobs);
    }

    /// Turns on MIG for the GPU types `model` has a geometry for (see `crate::mig`).
    pub fn enable_mig(&mut self, model: MigModel) {
        let types = (0..self.cluster.gpu_count()).map(|g| self.cluster.gpu_type_of(GpuId(g))).collect();
        self.mig = Some(MigState::new(model, types));
    }

    /// The MIG state, when MIG is on.
    pub fn mig(&self) -> Option<&MigState> {
        self.mig.as_ref()
    }

    /// Applies one input at `now` and, if it calls for it, runs one scheduling
    /// pass. No I/O, never blocks, cannot fail: refused inputs and actions are
    /// recorded as [`Violation`]s.
    pub fn step(&mut self, now: Time, input: Input) -> Vec<Command> {
        let mut commands = Vec::new();
        self.step_into(now, input, &mut commands);
        commands
    }

    /// [`Engine::step`], appending the commands to `commands` (a buffer the
    /// caller keeps between steps, so that a step allocates nothing for them).
    pub fn step_into(&mut self, now: Time, input: Input, commands: &mut Vec<Command>) {
        let mut trigger = Trigger::default();
        self.apply(now, input, &mut trigger, commands);
        self.after_inputs(now, trigger, commands);
    }

    /// [`Engine::step_into`] with `Input::Batch` of the inputs drained from `inputs`,
    /// whose buffer the caller keeps for the next step.
    pub fn step_batch_into(&mut self, now: Time, inputs: &mut Vec<Input>, commands: &mut Vec<Command>) {
        let mut trigger = Trigger::default();
        // The batch counts as an input, as `Input::Batch` does in `apply`.
        self.stats.inputs += 1;
        for input in inputs.drain(..) {
            self.apply(now, input, &mut trigger, commands);
        }
        self.after_inputs(now, trigger, commands);
    }

    /// The rest of a step once its inputs are applied: the scheduling pass they call
    /// for, if any, and the re-rates that follow.
    fn after_inputs(&mut self, now: Time, trigger: Trigger, commands: &mut Vec<Command>) {
        if trigger != Trigger::default() {
            self.schedule(now, trigger, commands);
            if std::mem::take(&mut self.freed_by_end) {
                // A policy ended running jobs (an early stop): one more pass at the same
                // instant lets it fill their GPUs, as it would after a completion.
                self.schedule(now, Trigger { completion: true, ..Trigger::default() }, commands);
                self.freed_by_end = false;
            }
        }
        // Jobs whose links' load changed (crate::topology, ECMP) run at a new rate: those
        // whose speed can depend on links (a communication fraction or a layout).
        for job in self.cluster.take_link_changes() {
            if self
                .job(job)
                .is_some_and(|s| s.spec.profile.comm_fraction > 0.0 || s.spec.profile.layout.is_some())
            {
                self.rerate.push(job);
            }
        }
        self.flush_rerates(commands);
    }

    /// When the policy next wants a [`Input::Wakeup`].
    pub fn next_wakeup(&self) -> Option<Time> {
        self.wakeup
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
    pub fn tenants(&self) -> &[TenantSpec] {
        &self.tenants
    }
    /// Adds a tenant (the live controller's `admin tenant add`); its id is the
    /// next index. Policies read the tenant table on every pass.
    pub fn add_tenant(&mut self, tenant: TenantSpec) -> TenantId {
        self.tenants.push(tenant);
        self.tenant_gpus.push(0);
        TenantId(self.tenants.len() as u32 - 1)
    }
    pub fn tenant_gpus(&self) -> &[u32] {
        &self.tenant_gpus
    }
    pub fn job(&self, id: JobId) -> Option<&JobState> {
        self.jobs.get(id.index()).and_then(Option::as_ref)
    }
    /// Hands over the job table (indexed by job id; `None` for ids never submitted)
    /// and leaves the engine without jobs, pending or running: for a simulator that
    /// reads every job's final state once its run is over, and frees the table as it
    /// goes. The engine must not step again.
    pub fn take_job_states(&mut self) -> Vec<Option<JobState>> {
        self.pending = JobSet::new();
        self.running = JobSet::new();
        std::mem::take(&mut self.jobs)
    }
    pub fn pending(&self) -> &JobSet {
        &self.pending
    }
    pub fn running(&self) -> &JobSet {
        &self.running
    }
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }
    pub fn stats(&self) -> EngineStats {
        self.stats
    }
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    fn apply(&mut self, now: Time, input: Input, trigger: &mut Trigger, commands: &mut Vec<Command>) {
        self.stats.inputs += 1;
        match input {
            Input::JobSubmitted(spec) => {
                self.submit(now, spec, commands);
                trigger.arrival = true;
            }
            Input::JobFinished { job } => {
                self.finish(now, job);
                trigger.completion = true;
            }
            Input::Progress { job, work_done, rate } => match self.job_mut(job) {
                Some(state) => {
                    state.progress = Progress { done: work_done, rate, at: now };
                    self.progressed.push(job);
                }
                None => self.violations.push(Violation::UnknownJob(job)),
            },
            Input::Evaluated { job, work_done, score } => {
                match self.jobs.get_mut(job.index()).and_then(Option::as_mut) {
                    Some(state) => {
                        // Evaluations of a job that stopped running since are stale: ignored.
                        let taken = state.is_running() && state.evals.record(now, work_done, score);
                        if taken && self.policy.acts_on_evaluation(state) {
                            trigger.evaluation = true;
                        }
                    }
                    None => self.violations.push(Violation::UnknownJob(job)),
                }
            }
            Input::NodeUp(node) | Input::NodeDown(node) if node.index() >= self.cluster.node_count() => {
                self.violations.push(Violation::UnknownNode(node));
            }
            Input::NodeUp(node) => {
                self.cluster.set_up(node, true);
                trigger.node_change = true;
            }
            Input::NodeDown(node) => {
                for job in self.cluster.jobs_on(node).into_iter().chain(self.mig_jobs_on(node)) {
                    self.stop(now, job);
                    commands.push(Command::Stop { job, reason: StopReason::NodeDown });
                }
                self.cluster.set_up(node, false);
                trigger.node_change = true;
            }
            Input::Wakeup => {
                if self.wakeup.is_some_and(|at| at <= now) {
                    self.wakeup = None;
                }
                trigger.wakeup = true;
            }
            Input::JobEnded { job, reason } => {
                if self.is_pending(job) || self.is_running(job) {
                    // A pass follows, as after a completion: freed GPUs (or a
                    // shorter queue) may let other jobs start.
                    self.end(now, job, reason);
                    commands.push(Command::End { job, reason });
                    trigger.completion = true;
                } else if self.job(job).is_some() {
                    self.violations.push(Violation::EndAlreadyOver(job));
                } else {
                    self.violations.push(Violation::UnknownJob(job));
                }
            }
            Input::Batch(inputs) => {
                for input in inputs {
                    self.apply(now, input, trigger, commands);
                }
            }
        }
    }

    /// One `Rerate` per running job whose partner changed this step, with its
    /// partners as they are at the end of the step.
    fn flush_rerates(&mut self, commands: &mut Vec<Command>) {
        let mut jobs = std::mem::take(&mut self.rerate);
        jobs.sort_unstable();
        jobs.dedup();
        for &job in &jobs {
            if let Some(state) = self.job(job).filter(|s| s.is_running()) {
                commands.push(Command::Rerate { job, partners: state.partner.into_iter().collect() });
            }
        }
        // The buffer stays for the next step.
        jobs.clear();
        self.rerate = jobs;
    }

    fn job_mut(&mut self, id: JobId) -> Option<&mut JobState> {
        self.jobs.get_mut(id.index()).and_then(Option::as_mut)
    }

    /// Whether the job is in the pending set, read from its phase (an index, not a
    /// search of the set: a job is pending exactly while its phase is `Pending`).
    fn is_pending(&self, id: JobId) -> bool {
        let pending = self.job(id).is_some_and(|j| j.phase == Phase::Pending);
        debug_assert_eq!(pending, self.pending.contains(&id));
        pending
    }

    /// Whether the job is in the running set, read from its phase (see [`Engine::is_pending`]).
    fn is_running(&self, id: JobId) -> bool {
        let running = self.job(id).is_some_and(JobState::is_running);
        debug_assert_eq!(running, self.running.contains(&id));
        running
    }

    fn submit(&mut self, now: Time, spec: SpecRef, commands: &mut Vec<Command>) {
        let id = spec.id;
        if self.job(id).is_some() {
            self.violations.push(Violation::DuplicateJob(id));
            return;
        }
        let Some(tenant) = self.tenants.get(spec.tenant.index()) else {
            self.violations.push(Violation::UnknownTenant { job: id, tenant: spec.tenant });
            return;
        };
        let request = HostAlloc { cpus: spec.cpus, memory_gib: spec.memory_gib };
        let host = self.cluster.host();
        // An elastic job fits if its smallest size does.
        let needs = spec.min_gpus();
        let never_fits = if needs > self.cluster.gpu_count() {
            Some(EndReason::WiderThanCluster { requested: needs, cluster_gpus: self.cluster.gpu_count() })
        } else if let Some(reason) = host.enabled().then(|| host.never_fits(needs, request)).flatten() {
            Some(reason)
        } else {
            tenant
                .gpu_limit
                .filter(|&limit| needs > limit)
                .map(|limit| EndReason::OverTenantLimit { requested: needs, limit })
        };
        if self.jobs.len() <= id.index() {
            self.jobs.resize_with(id.index() + 1, || None);
        }
        self.jobs[id.index()] = Some(JobState {
            spec,
            phase: Phase::Pending,
            gpus: Vec::new(),
            first_start: None,
            phase_since: now,
            run_before: Default::default(),
            attained_before_gpu_us: 0,
            preemptions: 0,
            progress: Progress { done: 0.0, rate: 0.0, at: now },
            verdict: None,
            partner: None,
            gpus_since: now,
            resizes: 0,
            evals: Default::default(),
            sharing: Sharing::default(),
            mig: None,
            host: request,
        });
        match never_fits {
            Some(reason) => {
                self.end(now, id, reason);
                commands.push(Command::End { job: id, reason });
            }
            None => {
                self.pending.insert(id);
                self.changes.push(JobChange::Submitted(id));
            }
        }
    }

    fn finish(&mut self, now: Time, id: JobId) {
        if !self.is_running(id) {
            self.violations.push(Violation::FinishedWhileNotRunning(id));
            return;
        }
        self.leave_running(now, id);
        let job = self.jobs[id.index()].as_mut().expect("running job exists");
        job.phase = Phase::Completed;
        let gpus = std::mem::take(&mut job.gpus);
        job.progress = Progress { done: job.spec.work, rate: 0.0, at: now };
        self.spare(gpus);
        self.changes.push(JobChange::Completed(id));
    }

    /// Moves a running job out of the running set, releasing its GPUs and
    /// closing its current run interval.
    fn leave_running(&mut self, now: Time, id: JobId) {
        self.running.remove(&id);
        let job = self.jobs[id.index()].as_mut().expect("running job exists");
        let ran = now - job.phase_since;
        job.run_before += ran;
        job.attained_before_gpu_us += (now - job.gpus_since).0.saturating_mul(job.gpus.len() as u64);
        job.progress = Progress { done: job.work_done(now), rate: 0.0, at: now };
        job.phase_since = now;
        let partner = job.partner.take();
        job.sharing = Sharing::default();
        self.tenant_gpus[job.spec.tenant.index()] -= job.gpus.len() as u32;
        self.cluster.release(id, &job.gpus);
        self.cluster.host_mut().release(id);
        // Cleared, not freed: a preempted job keeps the allocation for its next start.
        job.gpus.clear();
        if let Some(partner) = partner {
            if let Some(other) = self.job_mut(partner) {
                other.partner = None;
                other.sharing.mode = None;
            }
            self.rerate.push(partner);
        }
        self.leave_mig(id);
    }

    /// Keeps the GPU list of a job that left for good for a later start (see `spare_gpus`).
    fn spare(&mut self, mut gpus: Vec<GpuId>) {
        if gpus.capacity() > 0 && self.spare_gpus.len() < SPARE_GPU_LISTS {
            gpus.clear();
            self.spare_gpus.push(gpus);
        }
    }

    fn stop(&mut self, now: Time, id: JobId) {
        self.leave_running(now, id);
        let job = self.jobs[id.index()].as_mut().expect("running job exists");
        job.phase = Phase::Pending;
        job.preemptions += 1;
        self.pending.insert(id);
        self.changes.push(JobChange::Stopped(id));
        self.stats.preemptions += 1;
    }

    fn end(&mut self, now: Time, id: JobId, reason: EndReason) {
        if self.is_running(id) {
            self.leave_running(now, id);
        } else {
            self.pending.remove(&id);
        }
        let job = self.jobs[id.index()].as_mut().expect("job exists");
        job.phase = Phase::Ended(reason);
        let gpus = std::mem::take(&mut job.gpus);
        job.phase_since = now;
        self.spare(gpus);
        self.changes.push(JobChange::Ended(id));
    }

    fn schedule(&mut self, now: Time, trigger: Trigger, commands: &mut Vec<Command>) {
        self.stats.scheduling_passes += 1;
        let view = ClusterView {
            now,
            trigger,
            cluster: &self.cluster,
            tenants: &self.tenants,
            tenant_gpus: &self.tenant_gpus,
            pending: &self.pending,
            running: &self.running,
            changes: &self.changes,
            jobs: &self.jobs,
            mig: self.mig.as_ref(),
            progressed: &self.progressed,
        };
        let mut cx = PolicyCx { rng: &mut self.rng };
        let decision = self.policy.schedule(&mut cx, &view);
        self.changes.clear();
        self.progressed.clear();
        self.apply_decision(now, decision, commands);
        self.wakeup = self.policy.next_round(now).filter(|&at| at > now);
    }

    fn apply_decision(&mut self, now: Time, decision: Decision, commands: &mut Vec<Command>) {
        let Decision { mut actions, waiting } = decision;
        // Read in place (not moved out one by one): each verdict is a plain 16-byte copy.
        for &(id, reason) in &waiting {
            if let Some(Some(job)) = self.jobs.get_mut(id.index()) {
                job.verdict = Some(reason);
            }
        }
        // Stops first, so that the starts of the same decision may use the freed
        // GPUs; shared starts last, so that they may join jobs started just now.
        // MIG reconfigurations after the stops that empty their instances, before the starts.
        let class = |a: &Action| match a {
            Action::Preempt { .. } | Action::End { .. } | Action::Allocate { .. } => 0,
            // Resizes keep the policy's order among starts: it lists the shrinks
            // that make room before the starts, and the growths after them.
            Action::MigReconfigure { .. } => 1,
            Action::Start { .. } | Action::Resize { .. } | Action::MigStart { .. } => 2,
            Action::StartShared { .. } | Action::Share(_) => 3,
        };
        // Policies mostly list them in this order already: skip the (allocating) stable sort.
        if !actions.is_sorted_by_key(class) {
            actions.sort_by_key(class);
        }
        for action in actions.drain(..) {
            match action {
                Action::Preempt { job } => {
                    if self.is_running(job) {
                        self.stop(now, job);
                        commands.push(Command::Stop { job, reason: StopReason::Preempted });
                    } else {
                        self.violations.push(Violation::PreemptNotRunning(job));
                    }
                }
                Action::End { job, reason } => {
                    let running = self.is_running(job);
                    if running || self.is_pending(job) {
                        self.freed_by_end |= running;
                        self.end(now, job, reason);
                        commands.push(Command::End { job, reason });
                    } else {
                        self.violations.push(Violation::EndAlreadyOver(job));
                    }
                }
                Action::Start { job, gpus } => {
                    if let Some(violation) = self.check_start(job, &gpus) {
                        self.violations.push(violation);
                        continue;
                    }
                    self.start(now, job, &gpus);
                    self.push_allocate(job, commands);
                    commands.push(Command::Start { job, gpus });
                }
                Action::Resize { job, gpus } => {
                    if let Some(violation) = self.check_resize(job, &gpus) {
                        self.violations.push(violation);
                        continue;
                    }
                    let from = self.resize(now, job, &gpus);
                    commands.push(Command::Resize { job, gpus, from });
                }
                Action::StartShared { job, partner } => {
                    self.start_shared(now, job, partner, Sharing::default(), commands);
                }
                Action::Share(share) => {
                    let sharing = Sharing { mode: Some(share.mode), accumulation: share.accumulation };
                    self.start_shared(now, share.job, share.partner, sharing, commands);
                }
                Action::MigReconfigure { gpu, layout } => self.mig_reconfigure(gpu, layout),
                Action::MigStart { job, gpu, target } => self.mig_start(now, job, gpu, target, commands),
                Action::Allocate { job, alloc } => self.allocate(job, alloc, commands),
            }
        }
        Decision { actions, waiting }.recycle();
    }

    /// Starts `job` on the GPUs of `partner` (space sharing), if the pair is
    /// possible and fits in the GPUs' memory; `sharing` is the job's declared mode
    /// and accumulation, and the partner's mode becomes the same.
    fn start_shared(
        &mut self,
        now: Time,
        job: JobId,
        partner: JobId,
        sharing: Sharing,
        commands: &mut Vec<Command>,
    ) {
        let gpus = self.job(partner).filter(|p| p.is_running()).map(|p| p.gpus.clone());
        let Some(gpus) = gpus else {
            self.violations.push(Violation::ShareWithNotRunning { job, partner });
            return;
        };
        let shareable =
            self.cluster.can_share(&gpus, partner) && self.job(partner).is_some_and(|p| p.partner.is_none());
        if !shareable {
            self.violations.push(Violation::ShareNotPossible { job, partner });
            return;
        }
        if let Some(violation) = self.check_admission(job, gpus.len() as u32) {
            self.violations.push(violation);
            return;
        }
        if let Some(refusal) = self.check_share_memory(job, partner, &gpus, sharing.accumulation) {
            self.violations.push(Violation::ShareRefused { job, refusal });
            return;
        }
        if let Some(violation) = self.check_host(job, &gpus) {
            self.violations.push(violation);
            return;
        }
        self.start(now, job, &gpus);
        self.push_allocate(job, commands);
        for (one, other) in [(job, partner), (partner, job)] {
            if let Some(state) = self.job_mut(one) {
                state.partner = Some(other);
                state.sharing.mode = sharing.mode;
            }
        }
        if let Some(state) = self.job_mut(job) {
            state.sharing = sharing;
        }
        self.rerate.push(partner);
        commands.push(Command::StartShared { job, gpus, partner });
    }

    fn check_share_memory(&self, job: JobId, partner: JobId, gpus: &[GpuId], k: u32) -> Option<ShareRefusal> {
        let (job, partner) = (self.job(job)?, self.job(partner)?);
        let resident_gib = partner.spec.gpu_memory.need_gib(partner.sharing.accumulation);
        sharing::check_share(&self.cluster, gpus, k, job.spec.gpu_memory, resident_gib)
    }

    fn check_start(&self, id: JobId, gpus: &[GpuId]) -> Option<Violation> {
        if let Some(violation) = self.check_admission(id, gpus.len() as u32) {
            return Some(violation);
        }
        if !self.cluster.can_take(gpus) || self.mig_configured(gpus) {
            return Some(Violation::StartGpusUnavailable { job: id, gpus: gpus.to_vec() });
        }
        let need_gib = self.job(id)?.spec.gpu_memory.need_gib(1);
        if let Some(refusal) = sharing::check_memory(&self.cluster, gpus, need_gib) {
            return Some(Violation::ShareRefused { job: id, refusal });
        }
        self.check_host(id, gpus)
    }

    /// While host resources are modelled: the job's allocation fits on its nodes.
    fn check_host(&self, id: JobId, gpus: &[GpuId]) -> Option<Violation> {
        let host = self.cluster.host();
        let job = self.job(id).filter(|_| host.enabled())?;
        let shares = crate::host::node_shares(&self.cluster, gpus, job.host);
        let over = host.check(id, &shares).err()?;
        Some(Violation::host_over_commit(id, over))
    }

    fn push_allocate(&self, job: JobId, commands: &mut Vec<Command>) {
        if let Some(state) = self.job(job).filter(|_| self.cluster.host().enabled()) {
            commands.push(Command::Allocate { job, alloc: state.host });
        }
    }

    /// `Action::Allocate`: a pending job's next allocation, or a running job's
    /// new one (checked against its nodes, counting what it holds as free).
    fn allocate(&mut self, id: JobId, alloc: HostAlloc, commands: &mut Vec<Command>) {
        let running = self.is_running(id);
        if !self.cluster.host().enabled() || !(running || self.is_pending(id)) {
            self.violations.push(Violation::AllocateNotPossible(id));
            return;
        }
        let Some(job) = self.job(id) else { return };
        if !running || job.host == alloc {
            if let Some(job) = self.job_mut(id) {
                job.host = alloc;
            }
            return;
        }
        let gpus = job.gpus.clone();
        let shares = crate::host::node_shares(&self.cluster, &gpus, alloc);
        if let Err(over) = self.cluster.host().check(id, &shares) {
            self.violations.push(Violation::host_over_commit(id, over));
            return;
        }
        self.cluster.host_mut().release(id);
        self.cluster.host_mut().take(id, shares);
        if let Some(job) = self.job_mut(id) {
            job.host = alloc;
        }
        commands.push(Command::Allocate { job: id, alloc });
        self.rerate.push(id);
    }

    /// The job is pending, gets the GPU count it asked for, and its tenant stays
    /// within its hard limit (a shared GPU counts fully for each job).
    fn check_admission(&self, id: JobId, given: u32) -> Option<Violation> {
        let Some(job) = self.job(id).filter(|j| j.phase == Phase::Pending) else {
            return Some(Violation::StartNotPending(id));
        };
        if !job.spec.accepts_gpus(given) {
            return Some(Violation::StartWrongGpuCount { job: id, wanted: job.spec.gpus, given });
        }
        let tenant = job.spec.tenant;
        let limit = self.tenants[tenant.index()].gpu_limit;
        if limit.is_some_and(|limit| self.tenant_gpus[tenant.index()] + given > limit) {
            return Some(Violation::StartOverTenantLimit { job: id, tenant });
        }
        None
    }

    fn start(&mut self, now: Time, id: JobId, gpus: &[GpuId]) {
        match gpus.first().and_then(|&g| self.cluster.owner(g)) {
            Some(_) => self.cluster.take_shared(id, gpus),
            None => self.cluster.take(id, gpus),
        }
        self.pending.remove(&id);
        self.running.insert(id);
        let job = self.jobs[id.index()].as_mut().expect("pending job exists");
        self.tenant_gpus[job.spec.tenant.index()] += gpus.len() as u32;
        job.phase = Phase::Running;
        job.phase_since = now;
        job.gpus_since = now;
        if job.gpus.capacity() == 0 {
            job.gpus = self.spare_gpus.pop().unwrap_or_default();
        }
        job.gpus.clear();
        job.gpus.extend_from_slice(gpus);
        job.first_start.get_or_insert(now);
        job.verdict = None;
        if self.cluster.host().enabled() {
            let shares = crate::host::node_shares(&self.cluster, gpus, job.host);
            self.cluster.host_mut().take(id, shares);
        }
        job.progress.at = now;
        self.changes.push(JobChange::Started(id));
        self.stats.starts += 1;
    }
}
