//! The `Policy` trait and what crosses it: an immutable view in, a `Decision` out.

use rand_chacha::ChaCha8Rng;

use crate::cluster::Cluster;
use crate::eval::EvalHistory;
use crate::host::HostAlloc;
use crate::ids::{GpuId, JobId, TenantId};
use crate::job::{EndReason, SpecRef};
use crate::job_set::JobSet;
use crate::mig::{MigLayout, MigSlot, MigState, MigTarget};
use crate::sharing::{Share, Sharing};
use crate::tenant::TenantSpec;
use crate::time::{Span, Time};

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Completed,
    Ended(EndReason),
}

/// Work progress as last reported by the world (simulator or node agent):
/// `done` work units at time `at`, advancing at `rate` units per second since.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Progress {
    pub done: f64,
    pub rate: f64,
    pub at: Time,
}

impl Progress {
    /// Work done by `now`, extrapolated from this report, at most `work`.
    #[inline]
    pub fn done_by(&self, now: Time, work: f64) -> f64 {
        (self.done + self.rate * (now - self.at).as_secs_f64()).min(work)
    }
}

/// What [`JobState::remaining_estimate`] reads from a job (its duration
/// estimate, its work and its last progress report), copied out so that an
/// index can key a running job at any time without reading the job again,
/// until its progress changes: [`RemainingInputs::at`] performs the same
/// operations in the same order, so it gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemainingInputs {
    estimate_us: f64,
    work: f64,
    progress: Progress,
}

impl RemainingInputs {
    /// Remaining run time at reference speed at `now`: the estimate times
    /// the fraction of work left, rounded to the microsecond.
    #[inline]
    pub fn at(&self, now: Time) -> Span {
        if self.work <= 0.0 {
            return Span::ZERO;
        }
        let left = (1.0 - self.progress.done_by(now, self.work) / self.work).clamp(0.0, 1.0);
        Span(crate::time::round_u64(self.estimate_us * left))
    }
}

/// Everything the engine knows about one job.
#[derive(Clone, Debug)]
pub struct JobState {
    /// The job as submitted: a handle into the workload's specs where the world
    /// shares them (`crate::SpecTable`), read as a `JobSpec`.
    pub spec: SpecRef,
    pub phase: Phase,
    /// GPUs held now (empty unless running).
    pub gpus: Vec<GpuId>,
    pub first_start: Option<Time>,
    /// When the job entered its current phase (running since, or waiting since).
    pub phase_since: Time,
    /// Wall time spent running in earlier, finished run intervals.
    pub run_before: Span,
    /// GPU-microseconds attained in earlier, finished run intervals.
    pub attained_before_gpu_us: u64,
    pub preemptions: u32,
    pub progress: Progress,
    /// The latest reason a policy gave for not starting the job.
    pub verdict: Option<WaitReason>,
    /// The job space-sharing this one's GPUs, if any.
    pub partner: Option<JobId>,
    /// When the job last started or was resized: GPU-time accrues at `gpus.len()`
    /// since then.
    pub gpus_since: Time,
    /// Times a running elastic job was resized.
    pub resizes: u32,
    /// Evaluation scores the world reported while the job ran (`Input::Evaluated`).
    pub evals: EvalHistory,
    /// Declared sharing mode and gradient accumulation (`crate::sharing`).
    pub sharing: Sharing,
    /// The MIG instance (or MPS seat) the job runs in, if it runs on a MIG GPU
    /// (then `gpus` is empty: it holds no whole GPU).
    pub mig: Option<MigSlot>,
    /// CPUs and memory: held while running, else what the job starts with next
    /// (its request unless a policy set it with `Action::Allocate`; crate::host).
    pub host: HostAlloc,
}

impl JobState {
    pub fn id(&self) -> JobId {
        self.spec.id
    }
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }
    /// Wall time spent running, up to `now`.
    pub fn run_time(&self, now: Time) -> Span {
        match self.phase {
            Phase::Running => self.run_before + (now - self.phase_since),
            _ => self.run_before,
        }
    }
    /// Attained service in GPU-microseconds (the LAS and Tiresias priority).
    pub fn attained_gpu_us(&self, now: Time) -> u64 {
        match self.phase {
            Phase::Running => {
                self.attained_before_gpu_us + (now - self.gpus_since).0.saturating_mul(self.gpus.len() as u64)
            }
            _ => self.attained_before_gpu_us,
        }
    }
    /// Work done by `now`, extrapolated from the last progress report.
    pub fn work_done(&self, now: Time) -> f64 {
        self.progress.done_by(now, self.spec.work)
    }
    /// Remaining run time at reference speed, from the duration estimate and
    /// the fraction of work done. `None` when the job has no estimate.
    pub fn remaining_estimate(&self, now: Time) -> Option<Span> {
        self.remaining_inputs().map(|inputs| inputs.at(now))
    }
    /// What `remaining_estimate` reads, as of the last progress report.
    /// `None` when the job has no estimate.
    pub fn remaining_inputs(&self) -> Option<RemainingInputs> {
        let estimate = self.spec.duration_estimate?;
        Some(RemainingInputs {
            estimate_us: estimate.0 as f64,
            work: self.spec.work,
            progress: self.progress,
        })
    }
    /// How long a pending job has waited since it last became pending.
    pub fn waiting_for(&self, now: Time) -> Span {
        match self.phase {
            Phase::Pending => now - self.phase_since,
            _ => Span::ZERO,
        }
    }
}

/// What woke the engine up. A batch of inputs can set several flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trigger {
    pub arrival: bool,
    pub completion: bool,
    pub wakeup: bool,
    pub node_change: bool,
    /// An evaluation the policy said it may act on (`Policy::acts_on_evaluation`).
    pub evaluation: bool,
}

/// A change to a job since the policy was last called, in the order it happened.
/// Policies that keep their own indexes (ordered queues) update them from this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobChange {
    Submitted(JobId),
    Started(JobId),
    /// Preempted or lost its node; it is pending again.
    Stopped(JobId),
    Completed(JobId),
    Ended(JobId),
    /// A running elastic job changed its GPU count.
    Resized(JobId),
}

/// The immutable view a policy decides from.
#[derive(Clone, Copy, Debug)]
pub struct ClusterView<'a> {
    pub now: Time,
    pub trigger: Trigger,
    pub cluster: &'a Cluster,
    pub tenants: &'a [TenantSpec],
    /// GPUs each tenant holds now, indexed by tenant.
    pub tenant_gpus: &'a [u32],
    /// Waiting jobs, in id (submission) order.
    pub pending: &'a JobSet,
    /// Running jobs, in id order.
    pub running: &'a JobSet,
    pub changes: &'a [JobChange],
    pub(crate) jobs: &'a [Option<JobState>],
    /// MIG geometry, layouts and instance occupants, when the run has MIG.
    pub mig: Option<&'a MigState>,
    /// Jobs whose progress (`JobState::progress`) the world reported since the
    /// last pass, in report order, possibly repeated: a policy that caches
    /// values derived from progress (SRTF's remaining times) refreshes these.
    pub progressed: &'a [JobId],
}

impl<'a> ClusterView<'a> {
    /// The job with this id. Panics only for an id the engine never saw, which
    /// a policy can only get by inventing it.
    ///
    /// Inlined into the policies (another crate), where it is called once per job
    /// a pass reads; the panic stays out of line.
    #[inline]
    pub fn job(&self, id: JobId) -> &'a JobState {
        match self.jobs.get(id.index()) {
            Some(Some(job)) => job,
            _ => never_saw(id),
        }
    }
    #[inline]
    pub fn tenant(&self, id: TenantId) -> &'a TenantSpec {
        &self.tenants[id.index()]
    }
    pub fn pending_jobs(&self) -> impl Iterator<Item = &'a JobState> + '_ {
        self.pending.iter().map(move |&id| self.job(id))
    }
    pub fn running_jobs(&self) -> impl Iterator<Item = &'a JobState> + '_ {
        self.running.iter().map(move |&id| self.job(id))
    }
    /// The same view with another set of running jobs: a wrapper policy hides the
    /// jobs it manages itself from its base (`varuna(BASE)`).
    pub fn with_running<'b>(&self, running: &'b JobSet) -> ClusterView<'b>
    where
        'a: 'b,
    {
        ClusterView { running, ..*self }
    }
}

/// Why a job is not running now. A verdict, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// Fewer free GPUs than the job needs.
    NoFreeGpus { needed: u32, free: u32 },
    /// Enough free GPUs, but not in a shape the placement stage accepts.
    Fragmented { needed: u32, free: u32 },
    /// Strict FIFO: an earlier job that does not fit blocks the queue.
    BehindHeadOfLine { head: JobId },
    /// Backfilling it would delay the reserved start of an earlier job.
    WouldDelayReservation { head: JobId },
    /// Its tenant is at its limit or quota.
    TenantAtLimit { tenant: TenantId, held: u32, limit: u32 },
    /// Higher-priority jobs take all the GPUs.
    LowerPriority,
    /// Not examined: the pass hit its candidate limit.
    ScanLimit,
    /// Round-based policy: the job waits for a later round.
    NotThisRound,
    /// No GPU of a type the job can use exists or is up.
    NoUsableGpuType,
    /// Its GPUs would be free, but not the CPUs or memory it needs beside them
    /// (policies that model host resources).
    NoHostResources,
    /// vClos (crate::topology): enough free GPUs, but no placement whose leaves have
    /// `uplinks` free uplinks to common spines.
    NoIsolatedPaths { needed: u32, uplinks: u32 },
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::NoFreeGpus { needed, free } => write!(f, "needs {needed} GPUs, {free} free"),
            WaitReason::Fragmented { needed, free } => {
                write!(f, "needs {needed} GPUs, {free} free but fragmented across nodes")
            }
            WaitReason::BehindHeadOfLine { head } => write!(f, "FIFO: waits behind {head}"),
            WaitReason::WouldDelayReservation { head } => write!(f, "backfill would delay {head}"),
            WaitReason::TenantAtLimit { tenant, held, limit } => {
                write!(f, "{tenant} holds {held} of its {limit} GPUs")
            }
            WaitReason::LowerPriority => write!(f, "higher-priority jobs hold the GPUs"),
            WaitReason::ScanLimit => write!(f, "not examined (candidate limit)"),
            WaitReason::NotThisRound => write!(f, "not chosen this round"),
            WaitReason::NoUsableGpuType => write!(f, "no usable GPU type"),
            WaitReason::NoHostResources => {
                write!(f, "GPUs free, but not the CPUs or memory it needs beside them")
            }
            WaitReason::NoIsolatedPaths { needed, uplinks } => {
                write!(f, "vClos: no {needed}-GPU placement with {uplinks} free uplinks to common spines")
            }
        }
    }
}

/// One intent of a policy. The engine validates each before applying it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start a pending job on exactly these GPUs.
    Start { job: JobId, gpus: Vec<GpuId> },
    /// Start a pending job on the GPUs of `partner`, a running job that holds
    /// them alone and asked for as many GPUs (space sharing, two jobs per GPU).
    StartShared { job: JobId, partner: JobId },
    /// Stop a running job; it returns to the queue.
    Preempt { job: JobId },
    /// Remove a job for good (pending or running).
    End { job: JobId, reason: EndReason },
    /// Run an elastic job on exactly these GPUs from now on: the ones it keeps
    /// plus free ones it adds (scale-out), without the ones it drops (scale-in).
    Resize { job: JobId, gpus: Vec<GpuId> },
    /// Start a pending job sharing the GPUs of a running job, in a declared mode
    /// and with gradient accumulation (`crate::sharing`); memory-checked.
    Share(Share),
    /// Set a MIG GPU's partition (or MPS mode). Refused while a job runs in an
    /// instance it removes: preempt those jobs in the same decision.
    MigReconfigure { gpu: GpuId, layout: MigLayout },
    /// Start a pending one-GPU job in an instance (or under MPS) of a MIG GPU.
    MigStart { job: JobId, gpu: GpuId, target: MigTarget },
    /// Set a job's CPUs and memory (crate::host): a pending job's for its next
    /// start, or a running job's now (its rate changes). Only under a policy
    /// whose `host_resources` is true.
    Allocate { job: JobId, alloc: HostAlloc },
}

/// What a policy returns: actions, and verdicts for jobs it looked at and left waiting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub waiting: Vec<(JobId, WaitReason)>,
}

thread_local! {
    /// Decisions the engine applied on this thread, emptied, for the next pass's
    /// [`Decision::recycled`]: a pass that starts a job or gives a verdict then
    /// reuses their buffers instead of allocating two vectors and freeing them.
    static SPARE_DECISIONS: std::cell::RefCell<Vec<Decision>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Most spare decisions kept per thread.
const MAX_SPARE_DECISIONS: usize = 4;

/// Spare buffers above this many entries are freed rather than kept (one
/// pass's burst does not pin its memory).
const MAX_SPARE_ENTRIES: usize = 1 << 12;

impl Decision {
    /// An empty decision, in the buffers of one applied earlier on this thread
    /// when there is one (see [`Decision::recycle`]); the same as
    /// `Decision::default()` in everything but where its entries are stored.
    pub fn recycled() -> Decision {
        SPARE_DECISIONS.try_with(|spares| spares.borrow_mut().pop()).ok().flatten().unwrap_or_default()
    }

    /// Empties `self` and keeps its buffers for a later [`Decision::recycled`]
    /// on this thread (the engine calls it after applying a decision).
    pub fn recycle(mut self) {
        if self.actions.capacity() > MAX_SPARE_ENTRIES || self.waiting.capacity() > MAX_SPARE_ENTRIES {
            return;
        }
        self.actions.clear();
        self.waiting.clear();
        // During thread teardown the spares may be gone already: then it is just freed.
        let _ = SPARE_DECISIONS.try_with(|spares| {
            let mut spares = spares.borrow_mut();
            if spares.len() < MAX_SPARE_DECISIONS {
                spares.push(self);
            }
        });
    }
}

/// Mutable context a policy may use: the run's seeded random stream.
#[derive(Debug)]
pub struct PolicyCx<'a> {
    pub rng: &'a mut ChaCha8Rng,
}

/// A scheduling policy: reads a view, returns a decision. Never mutates the cluster.
pub trait Policy: Send {
    /// The name the CLI knows it by.
    fn name(&self) -> &'static str;
    fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision;
    /// True if the policy places by CPUs and memory: the engine then tracks them
    /// per node and refuses any over-commit (crate::host). Off by default, so
    /// that policies that ignore host resources keep their results.
    fn host_resources(&self) -> bool {
        false
    }
    /// When the policy next wants to be called even if nothing happens.
    fn next_round(&self, _now: Time) -> Option<Time> {
        None
    }
    /// Whether the evaluation just recorded in `job.evals` may lead this policy
    /// to act. The engine runs a scheduling pass for an evaluation only then, so
    /// that evaluations cost nothing under policies that ignore them.
    fn acts_on_evaluation(&self, _job: &JobState) -> bool {
        false
    }
}

/// The panic of [`ClusterView::job`], out of line so that the lookup inlines small.
#[cold]
#[inline(never)]
fn never_saw(id: JobId) -> ! {
    panic!("policy asked for {id}, which the engine never saw")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recycled decision is empty (as `Decision::default()`) but keeps the
    /// buffers of the one given back; an oversized one is not kept.
    #[test]
    fn recycled_decisions_are_empty_and_reuse_buffers() {
        let spare = |_| Decision::recycled();
        // Drain what earlier tests on this thread may have left.
        let _: Vec<Decision> = (0..MAX_SPARE_DECISIONS).map(spare).collect();
        let mut used = Decision::default();
        used.actions.push(Action::Preempt { job: JobId(3) });
        used.waiting.push((JobId(4), WaitReason::NoFreeGpus { needed: 2, free: 1 }));
        let (actions, waiting) = (used.actions.as_ptr(), used.waiting.as_ptr());
        used.recycle();
        let again = Decision::recycled();
        assert_eq!(again, Decision::default());
        assert_eq!((again.actions.as_ptr(), again.waiting.as_ptr()), (actions, waiting));
        assert_eq!(Decision::recycled().actions.capacity(), 0, "only one was given back");
        let mut big = Decision::default();
        big.waiting.reserve(MAX_SPARE_ENTRIES + 1);
        big.recycle();
        assert_eq!(Decision::recycled().waiting.capacity(), 0, "an oversized one is freed");
    }
}
