//! The two scheduling passes most queue-order policies share: start waiting jobs
//! in order (non-preemptive), or choose the best jobs among all active ones and
//! preempt the rest (preemptive). A policy supplies the order; the pass supplies
//! placement, tenant limits and verdicts.

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{Action, ClusterView, Decision, JobChange, JobId, JobState, TenantId, WaitReason};

use crate::queue::{JobSize, WaitQueue};
use crate::running::Contested;

/// Most candidates one pass examines (STYLE: a limit on everything). Jobs past
/// it get no verdict this pass and are examined on the next.
pub const SCAN_LIMIT: usize = 10_000;

/// GPUs each tenant would hold after this pass's decisions so far.
pub(crate) struct TenantLedger {
    held: Vec<u32>,
}

impl TenantLedger {
    pub(crate) fn new(view: &ClusterView<'_>) -> TenantLedger {
        TenantLedger { held: view.tenant_gpus.to_vec() }
    }
    /// Verdict if taking `gpus` more would break the tenant's hard limit.
    pub(crate) fn check(&self, view: &ClusterView<'_>, id: JobId, gpus: u32) -> Option<WaitReason> {
        self.check_tenant(view, view.job(id).spec.tenant, gpus)
    }
    fn check_tenant(&self, view: &ClusterView<'_>, tenant: TenantId, gpus: u32) -> Option<WaitReason> {
        let limit = view.tenant(tenant).gpu_limit?;
        let held = self.held[tenant.index()];
        (held + gpus > limit).then_some(WaitReason::TenantAtLimit { tenant, held, limit })
    }
    pub(crate) fn add(&mut self, view: &ClusterView<'_>, id: JobId, gpus: u32) {
        self.held[view.job(id).spec.tenant.index()] += gpus;
    }
    /// The ledger of a preemptive pass, or `None` when no tenant has a hard
    /// limit (then no check can fail and the pass keeps no ledger).
    fn for_limits(view: &ClusterView<'_>) -> Option<TenantLedger> {
        view.tenants.iter().any(|tenant| tenant.gpu_limit.is_some()).then(|| TenantLedger::new(view))
    }
    #[cfg(test)]
    fn sub(&mut self, view: &ClusterView<'_>, id: JobId, gpus: u32) {
        self.held[view.job(id).spec.tenant.index()] -= gpus;
    }
}

/// What happened when a pass tried to start a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    Started,
    /// Its tenant is at its hard limit: the job is skipped, it blocks nobody.
    TenantAtLimit,
    /// No placement for it now (not enough GPUs, or fragmented).
    Misfit,
}

/// The state of one non-preemptive pass: the GPUs still free and the tenants'
/// holdings after the starts decided so far, and the decision being built.
pub(crate) struct StartPass<'v> {
    view: &'v ClusterView<'v>,
    free: FreeMap<'v>,
    /// None when no tenant has a hard limit (no check can fail): then the pass
    /// keeps no ledger, and allocates none.
    ledger: Option<TenantLedger>,
    placement: Placement,
    pub(crate) decision: Decision,
}

impl<'v> StartPass<'v> {
    /// Records a share the caller chose for a job this pass left waiting: its
    /// tenant's ledger takes the GPUs (a shared GPU counts fully), its verdict goes.
    pub(crate) fn push_share(&mut self, share: cotenant_core::Share) {
        if let Some(ledger) = &mut self.ledger {
            ledger.add(self.view, share.job, self.view.job(share.job).spec.gpus);
        }
        if self.decision.waiting.last().is_some_and(|(id, _)| *id == share.job) {
            self.decision.waiting.pop();
        }
        self.decision.actions.push(Action::Share(share));
    }

    pub(crate) fn new(view: &'v ClusterView<'v>, placement: Placement) -> StartPass<'v> {
        StartPass {
            view,
            free: FreeMap::new(view.cluster),
            ledger: TenantLedger::for_limits(view),
            placement,
            decision: Decision::recycled(),
        }
    }

    pub(crate) fn free(&self) -> u32 {
        self.free.free()
    }

    /// What [`StartPass::try_start`] would answer for a job of `size` (read from
    /// a queue that keeps it) that needs more GPUs than are left and whose tenant
    /// has no hard limit: `NoFreeGpus`, after a tenant check that cannot fail,
    /// given without looking the job up (its state and spec: two cache misses per
    /// job passed over on a large trace). Returns false, doing nothing, for any
    /// other job: then call `try_start`.
    pub(crate) fn refuse_by_size(&mut self, id: JobId, size: JobSize) -> bool {
        let free = self.free();
        if size.gpus <= free || self.view.tenant(size.tenant).gpu_limit.is_some() {
            return false;
        }
        self.decision.waiting.push((id, WaitReason::NoFreeGpus { needed: size.gpus, free }));
        true
    }

    /// Starts `id` if its tenant's limit and a placement allow; otherwise records why not.
    pub(crate) fn try_start(&mut self, id: JobId) -> Attempt {
        let gpus = self.view.job(id).spec.gpus;
        if let Some(reason) = self.ledger.as_ref().and_then(|l| l.check(self.view, id, gpus)) {
            self.decision.waiting.push((id, reason));
            return Attempt::TenantAtLimit;
        }
        // What `place` would answer without scanning the nodes.
        let free = self.free.free();
        if gpus > free {
            self.decision.waiting.push((id, WaitReason::NoFreeGpus { needed: gpus, free }));
            return Attempt::Misfit;
        }
        let layout = self.view.job(id).spec.profile.layout;
        match self.free.place_shaped(gpus, layout, self.placement, |_| true) {
            Ok(chosen) => {
                if let Some(ledger) = &mut self.ledger {
                    ledger.add(self.view, id, gpus);
                }
                self.decision.actions.push(Action::Start { job: id, gpus: chosen });
                Attempt::Started
            }
            Err(reason) => {
                self.decision.waiting.push((id, reason));
                Attempt::Misfit
            }
        }
    }
}

/// Non-preemptive: walks waiting jobs in `order` and starts every one that can
/// be placed now. With `stop_at_first_misfit` (strict FIFO) the first job that
/// cannot be placed blocks all behind it (a job held back by its tenant's limit
/// blocks nobody). `smallest_request` lets the pass stop as soon as no waiting
/// job could fit in what is left.
pub fn start_in_order(
    view: &ClusterView<'_>,
    order: impl Iterator<Item = JobId>,
    placement: Placement,
    stop_at_first_misfit: bool,
    smallest_request: Option<u32>,
) -> Decision {
    let mut pass = StartPass::new(view, placement);
    let floor = smallest_request.unwrap_or(0);
    for id in order.take(SCAN_LIMIT) {
        if floor > 0 && pass.free() < floor {
            break;
        }
        if pass.try_start(id) == Attempt::Misfit && stop_at_first_misfit {
            break;
        }
    }
    pass.decision
}

/// Preemptive: all active jobs compete, best key first. `running` holds the
/// running jobs with their current keys (any order; the pass reorders it);
/// `waiting` yields the waiting jobs best first; `smallest_waiting` is the
/// smallest GPU request among them. Jobs are chosen greedily while GPUs remain;
/// running jobs not chosen are preempted; chosen waiting jobs are placed on the
/// GPUs left free. Once no waiting job could fit in what is left, the waiting
/// side is not read further.
///
/// Running jobs that rank ahead of the best waiting job are chosen whatever
/// their order (they all fit: see [`settled_prefix`]), so only the others are
/// sorted: a pass costs O(running + behind log behind + jobs examined), where
/// `behind` counts the running jobs ranked behind the best waiting job.
pub fn preemptive_pass<K: Ord + Copy>(
    view: &ClusterView<'_>,
    running: &mut [(K, JobId)],
    waiting: impl Iterator<Item = (K, JobId)>,
    smallest_waiting: Option<u32>,
    placement: Placement,
) -> Decision {
    let mut waiting = waiting.peekable();
    let settled = waiting.peek().and_then(|&head| settled_prefix(view, running, head));
    let (settled_gpus, contested) = match settled {
        Some((count, gpus)) => (gpus, &mut running[count..]),
        None => (0, running),
    };
    contested.sort_unstable();
    let sized = |entry: (K, JobId)| (entry, JobSize::of(view.job(entry.1)));
    let contested: Vec<Sized<K>> = contested.iter().map(|&entry| sized(entry)).collect();
    let contested = SliceJobs { jobs: &contested, next: 0 };
    let waiting = waiting.map(sized).peekable();
    contest(view, settled_gpus, contested, waiting, smallest_waiting, placement, None).0
}

/// The preemptive pass of a policy that ranks every job by one key: the running
/// jobs keyed afresh by `key` into `running` (the policy's buffer, kept to reuse
/// its allocation), the waiting ones from `queue`.
pub fn pass_by_key<K: Ord + Copy>(
    view: &ClusterView<'_>,
    running: &mut Vec<(K, JobId)>,
    key: impl Fn(&JobState) -> K,
    queue: &WaitQueue<K>,
    placement: Placement,
) -> Decision {
    running.clear();
    running.extend(view.running_jobs().map(|job| (key(job), job.id())));
    preemptive_pass(view, running, queue.iter(), queue.smallest_request(), placement)
}

/// A job as a preemptive pass examines it: its `(key, id)` and its size.
pub(crate) type Sized<K> = ((K, JobId), JobSize);

/// The waiting jobs of a preemptive pass, best first, and what the pass tells
/// them: a plain iterator, or a [`QueueWalk`](crate::queue::QueueWalk) that
/// jumps over jobs the engine holds `LowerPriority` for and that are too wide
/// for what is left (learning them from these reports).
pub(crate) trait WaitingJobs<K> {
    /// The next job, not consumed.
    fn peek(&mut self) -> Option<Sized<K>>;
    /// Consumes the next job.
    fn next(&mut self) -> Option<Sized<K>>;
    /// Before the next job is read with `capacity` GPUs left: may go past
    /// jobs known to hold `LowerPriority` and to request more than that.
    fn skip_wider(&mut self, _capacity: u32) {}
    /// The job just consumed holds `LowerPriority` now.
    fn held(&mut self, _entry: (K, JobId), _gpus: u32) {}
    /// A job chosen to start found no placement.
    fn start_failed(&mut self, _id: JobId) {}
    /// The pass checks tenant limits: a held job may be told another verdict
    /// (so the walk neither jumps nor learns).
    fn tenant_limits(&mut self) {}
}

impl<K: Copy, I: Iterator<Item = Sized<K>>> WaitingJobs<K> for std::iter::Peekable<I> {
    fn peek(&mut self) -> Option<Sized<K>> {
        std::iter::Peekable::peek(self).copied()
    }
    fn next(&mut self) -> Option<Sized<K>> {
        Iterator::next(self)
    }
}

/// The waiting jobs that hold [`WaitReason::LowerPriority`] as their verdict in
/// the engine, from this policy's earlier passes. The engine keeps a verdict
/// until the job starts (which clears it) or gets another, so a pass that would
/// tell a waiting job `LowerPriority` again changes nothing by saying it: with
/// this memory it does not (the same engine state for fewer entries, which the
/// engine would otherwise write one by one into the jobs' states). It mirrors
/// `JobState::verdict`, which the view also shows, so that a pass need not read
/// each scanned job's state (a cache miss per job, the reason the indexes carry
/// sizes too); the proptests' `assert_same_effect` checks it against the engine.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeldVerdicts {
    /// Bit `i`: job `i` holds `LowerPriority`.
    lower: Vec<u64>,
}

impl HeldVerdicts {
    /// Applies the change log: a job that started (or was just submitted) holds no verdict.
    pub(crate) fn sync(&mut self, view: &ClusterView<'_>) {
        for change in view.changes {
            if let JobChange::Started(id) | JobChange::Submitted(id) = *change {
                self.clear(id);
            }
        }
    }

    fn holds(&self, id: JobId) -> bool {
        self.lower.get(id.index() / 64).is_some_and(|word| word & (1 << (id.index() % 64)) != 0)
    }

    fn set(&mut self, id: JobId) {
        let word = id.index() / 64;
        if word >= self.lower.len() {
            self.lower.resize(word + 1, 0);
        }
        self.lower[word] |= 1 << (id.index() % 64);
    }

    fn clear(&mut self, id: JobId) {
        if let Some(word) = self.lower.get_mut(id.index() / 64) {
            *word &= !(1 << (id.index() % 64));
        }
    }

    /// Records the verdicts of a decision built without this memory.
    pub(crate) fn record(&mut self, decision: &Decision) {
        for &(id, reason) in &decision.waiting {
            if reason == WaitReason::LowerPriority {
                self.set(id);
            } else {
                self.clear(id);
            }
        }
    }

    /// Adds `(id, reason)` to `decision` unless the engine holds it already.
    #[inline]
    fn tell(held: &mut Option<&mut HeldVerdicts>, decision: &mut Decision, id: JobId, reason: WaitReason) {
        if let Some(held) = held {
            if reason != WaitReason::LowerPriority {
                held.clear(id);
            } else if held.holds(id) {
                return;
            } else {
                held.set(id);
            }
        }
        decision.waiting.push((id, reason));
    }
}

/// The preemptive pass from a running-job index (`crate::running`): the
/// running jobs hold `contested.running_gpus` GPUs in all (the caller has
/// checked [`settled_is_safe`]); `contested.jobs` holds, in key order, the
/// running jobs that rank at or after the best waiting job, with their sizes;
/// the others all stay. Decides as [`preemptive_pass`] over every running job,
/// in O(contested + jobs examined), except that a `LowerPriority` verdict the
/// engine holds already (`held`) is left out. With nothing waiting it decides
/// nothing.
pub(crate) fn pass_contested<K: Ord + Copy>(
    view: &ClusterView<'_>,
    contested: Contested<'_, K>,
    queue: &mut WaitQueue<K>,
    placement: Placement,
    held: &mut HeldVerdicts,
) -> Decision {
    let jobs = SliceJobs { jobs: contested.jobs, next: 0 };
    pass_contested_by(view, contested.running_gpus, contested.gpus, jobs, queue, placement, held)
}

/// [`pass_contested`] with the contested running jobs as a [`ContestedJobs`]
/// (an index may hand them over without listing them): the running jobs hold
/// `running_gpus` GPUs in all, the contested ones `contested_gpus`. A long
/// queue (from [`WALK_FROM`] jobs) is read by a
/// [`QueueWalk`](crate::queue::QueueWalk), which keeps in the queue what it
/// learns of the held jobs at its front; a short one in order.
pub(crate) fn pass_contested_by<K: Ord + Copy>(
    view: &ClusterView<'_>,
    running_gpus: u64,
    contested_gpus: u64,
    contested: impl ContestedJobs<K>,
    queue: &mut WaitQueue<K>,
    placement: Placement,
    held: &mut HeldVerdicts,
) -> Decision {
    if queue.is_empty() {
        // Every running job ranks ahead of every waiting one: all stay.
        return Decision::default();
    }
    // At most `running_gpus`, which fits the GPUs that are up.
    let settled_gpus = (running_gpus - contested_gpus) as u32;
    if queue.len() >= WALK_FROM {
        return pass_walking(view, settled_gpus, contested, queue, placement, held);
    }
    queue.forget_held_prefix();
    let waiting = queue.iter_sized().peekable();
    contest(view, settled_gpus, contested, waiting, queue.smallest_request(), placement, Some(held)).0
}

/// [`pass_contested_by`] over a long queue, out of line (a pass over a short
/// queue, the common case, keeps the code it had before the walk).
#[inline(never)]
fn pass_walking<K: Ord + Copy>(
    view: &ClusterView<'_>,
    settled_gpus: u32,
    contested: impl ContestedJobs<K>,
    queue: &mut WaitQueue<K>,
    placement: Placement,
    held: &mut HeldVerdicts,
) -> Decision {
    let smallest_waiting = queue.smallest_request();
    let walk = queue.walk();
    let (decision, walk) =
        contest(view, settled_gpus, contested, walk, smallest_waiting, placement, Some(held));
    let learned = walk.finish();
    queue.end_walk(learned);
    decision
}

/// The shortest wait queue a preemptive pass reads through a
/// [`QueueWalk`](crate::queue::QueueWalk): below it, the jobs it could jump
/// over are too few to pay for keeping what it learns. In this crate's tests
/// it is 8, so that their small worlds take both paths.
#[cfg(not(test))]
pub(crate) const WALK_FROM: usize = 1024;
#[cfg(test)]
pub(crate) const WALK_FROM: usize = 8;

/// The contested running jobs of a preemptive pass, in `(key, id)` order (keys
/// distinct), consumed from the front.
pub(crate) trait ContestedJobs<K> {
    /// The next job, not consumed.
    fn peek(&self) -> Option<Sized<K>>;
    /// Consumes the next job.
    fn advance(&mut self);
    /// Consumes the jobs the pass takes in one step, in order: while the next
    /// one is at or before `bound` (any, without a bound), holds a GPU and
    /// fits in what is left of `room`. Returns their GPUs (0: none consumed).
    fn take_fitting(&mut self, bound: Option<(K, JobId)>, room: u32) -> u32;
    /// Calls `each` on the jobs not consumed, in order.
    fn for_each_left(&self, each: impl FnMut(Sized<K>));
}

/// Contested running jobs listed in key order.
pub(crate) struct SliceJobs<'a, K> {
    pub(crate) jobs: &'a [Sized<K>],
    pub(crate) next: usize,
}

impl<K: Ord + Copy> ContestedJobs<K> for SliceJobs<'_, K> {
    fn peek(&self) -> Option<Sized<K>> {
        self.jobs.get(self.next).copied()
    }
    fn advance(&mut self) {
        self.next += 1;
    }
    fn take_fitting(&mut self, bound: Option<(K, JobId)>, room: u32) -> u32 {
        let (mut j, mut taken) = (self.next, 0u32);
        while let Some(&(entry, size)) = self.jobs.get(j) {
            if bound.is_some_and(|b| entry > b) || size.gpus == 0 || size.gpus > room - taken {
                break;
            }
            taken += size.gpus;
            j += 1;
        }
        self.next = j;
        taken
    }
    fn for_each_left(&self, each: impl FnMut(Sized<K>)) {
        self.jobs[self.next..].iter().copied().for_each(each);
    }
}

/// The preemptive pass once the running jobs that rank ahead of every waiting
/// job are set aside: they hold `settled_gpus` GPUs and all stay (the caller
/// has checked [`settled_is_safe`] or passes 0 and every running job);
/// `contested` holds the other running jobs in key order. With `held`, a
/// `LowerPriority` verdict the engine holds already is left out.
fn contest<K: Ord + Copy, W: WaitingJobs<K>>(
    view: &ClusterView<'_>,
    settled_gpus: u32,
    mut contested: impl ContestedJobs<K>,
    mut waiting: W,
    smallest_waiting: Option<u32>,
    placement: Placement,
    mut held: Option<&mut HeldVerdicts>,
) -> (Decision, W) {
    let mut capacity = view.cluster.up_gpus() - settled_gpus;
    let mut decision = Decision::recycled();
    // The ledger starts from current holdings; running jobs are re-admitted as chosen.
    let mut ledger = TenantLedger::for_limits(view);
    if let Some(ledger) = &mut ledger {
        contested.for_each_left(|(_, size)| ledger.held[size.tenant.index()] -= size.gpus);
        waiting.tenant_limits();
    }
    let smallest_waiting = smallest_waiting.unwrap_or(0);
    // The contested running jobs not chosen go straight into the decision as
    // preemptions, in key order (nothing else is pushed before the starts); the
    // waiting jobs chosen, with their GPUs, are placed once every preempted job
    // has given its GPUs back.
    // In the buffer the last pass on this thread left (no allocation per pass:
    // LAS's passes on full Philly grew a fresh one 790,288 times).
    let mut to_start =
        SPARE_STARTS.try_with(|spare| std::mem::take(&mut *spare.borrow_mut())).unwrap_or_default();
    let mut waiting_examined = 0usize;
    let mut waiting_cut = false;
    while capacity > 0 {
        waiting_cut |= capacity < smallest_waiting || waiting_examined >= SCAN_LIMIT;
        let next_waiting = if waiting_cut {
            None
        } else {
            waiting.skip_wider(capacity);
            waiting.peek()
        };
        let next_running = contested.peek();
        let take_running = match (next_running, next_waiting) {
            (Some(r), Some(w)) => r.0 <= w.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if take_running && ledger.is_none() {
            // The running jobs up to the next waiting one (all of them once the
            // waiting side is cut) that fit one after another are chosen, as
            // the steps below would choose them one at a time; the first that
            // does not fit (or holds no GPU) is left to those steps.
            let taken = contested.take_fitting(next_waiting.map(|w| w.0), capacity);
            if taken > 0 {
                capacity -= taken;
                continue;
            }
        }
        let next = if take_running {
            contested.advance();
            next_running
        } else {
            waiting.next()
        };
        let Some((entry @ (_, id), size)) = next else { break };
        if !take_running {
            waiting_examined += 1;
        }
        if let Some(reason) = ledger.as_ref().and_then(|l| l.check_tenant(view, size.tenant, size.gpus)) {
            if take_running {
                decision.actions.push(Action::Preempt { job: id });
            } else {
                HeldVerdicts::tell(&mut held, &mut decision, id, reason);
            }
            continue;
        }
        if size.gpus > capacity {
            if take_running {
                decision.actions.push(Action::Preempt { job: id });
            } else {
                HeldVerdicts::tell(&mut held, &mut decision, id, WaitReason::LowerPriority);
                waiting.held(entry, size.gpus);
            }
            continue;
        }
        capacity -= size.gpus;
        if let Some(ledger) = &mut ledger {
            ledger.held[size.tenant.index()] += size.gpus;
        }
        if !take_running {
            to_start.push((id, size.gpus));
        }
    }
    // Running jobs not chosen stop: each was examined, or ranks below a full cluster.
    contested.for_each_left(|((_, id), _)| decision.actions.push(Action::Preempt { job: id }));
    if to_start.is_empty() && decision.actions.is_empty() {
        keep_starts_buffer(to_start);
        return (decision, waiting);
    }
    let mut free = FreeMap::new(view.cluster);
    for action in &decision.actions {
        if let Action::Preempt { job } = *action {
            free.give_back(&view.job(job).gpus);
        }
    }
    for &(id, gpus) in &to_start {
        // Only the topology-aware placements read a job's layout: the others
        // need nothing of its state (its GPUs came with its queue entry).
        let layout = if placement.reads_layout() { view.job(id).spec.profile.layout } else { None };
        match free.place_shaped(gpus, layout, placement, |_| true) {
            Ok(gpus) => decision.actions.push(Action::Start { job: id, gpus }),
            Err(reason) => {
                HeldVerdicts::tell(&mut held, &mut decision, id, reason);
                waiting.start_failed(id);
            }
        }
    }
    keep_starts_buffer(to_start);
    (decision, waiting)
}

thread_local! {
    /// The chosen-starts buffer of the last `contest` on this thread, empty,
    /// for the next one.
    static SPARE_STARTS: std::cell::RefCell<Vec<(JobId, u32)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Gives `contest`'s starts buffer back, emptied, unless it grew past
/// `MAX_SPARE_STARTS` (or the thread is being torn down: then it is freed).
fn keep_starts_buffer(mut starts: Vec<(JobId, u32)>) {
    if starts.capacity() <= MAX_SPARE_STARTS {
        starts.clear();
        let _ = SPARE_STARTS.try_with(|spare| *spare.borrow_mut() = starts);
    }
}

/// The largest starts buffer kept between passes (16 bytes an entry).
const MAX_SPARE_STARTS: usize = 1 << 16;

/// Moves the running jobs that rank ahead of `head` (the best waiting job) to
/// the front of `running` and returns their count and GPUs, when the pass is
/// sure to keep every one of them in any order; `None` (nothing moved) when it
/// cannot be sure. The pass meets them before any waiting job, so each is
/// admitted against running jobs only: it fits when all running jobs together
/// fit the GPUs that are up, each holds at least one GPU (a pass stops at zero
/// capacity), and no tenant with a limit holds more than it (the engine admits
/// no start over a limit; checked rather than assumed).
fn settled_prefix<K: Ord + Copy>(
    view: &ClusterView<'_>,
    running: &mut [(K, JobId)],
    head: (K, JobId),
) -> Option<(usize, u32)> {
    let (mut total, mut zero_gpu_jobs) = (0u64, false);
    let (mut count, mut gpus) = (0, 0u64);
    // One walk: totals for the safety check, and the jobs ahead of `head` moved
    // to the front (harmless if the check fails: the caller then sorts all).
    for i in 0..running.len() {
        let job_gpus = u64::from(view.job(running[i].1).spec.gpus);
        zero_gpu_jobs |= job_gpus == 0;
        total += job_gpus;
        if running[i] < head {
            gpus += job_gpus;
            running.swap(count, i);
            count += 1;
        }
    }
    if !settled_is_safe(view, total, zero_gpu_jobs) {
        return None;
    }
    // At most `total`, which fits the GPUs that are up.
    let gpus = gpus as u32;
    Some((count, gpus))
}

/// Whether every running job that the pass meets before any waiting job is
/// sure to stay: the running jobs hold `running_gpus` GPUs (as requested) in
/// all, which must fit the GPUs that are up, none holds zero (a pass stops at
/// zero capacity), and no tenant with a limit holds more than it (the engine
/// admits no start over a limit; checked rather than assumed).
pub(crate) fn settled_is_safe(view: &ClusterView<'_>, running_gpus: u64, zero_gpu_jobs: bool) -> bool {
    !zero_gpu_jobs
        && running_gpus <= u64::from(view.cluster.up_gpus())
        && !view
            .tenants
            .iter()
            .zip(view.tenant_gpus)
            .any(|(tenant, &held)| tenant.gpu_limit.is_some_and(|limit| held > limit))
}

/// How many jobs wait once `decision` is applied, given `waiting_before`.
pub fn waiting_after(waiting_before: usize, decision: &Decision) -> usize {
    let mut waiting = waiting_before;
    for action in &decision.actions {
        match action {
            Action::Start { .. }
            | Action::StartShared { .. }
            | Action::Share(_)
            | Action::MigStart { .. } => waiting = waiting.saturating_sub(1),
            Action::Preempt { .. } => waiting += 1,
            Action::End { .. }
            | Action::Resize { .. }
            | Action::MigReconfigure { .. }
            | Action::Allocate { .. } => {}
        }
    }
    waiting
}

#[cfg(test)]
/// The pass as it was before running jobs ahead of the best waiting job
/// were set aside: every running job sorted and merged.
pub(crate) fn reference_pass<K: Ord + Copy>(
    view: &ClusterView<'_>,
    mut running: Vec<(K, JobId)>,
    waiting: impl Iterator<Item = (K, JobId)>,
    smallest_waiting: Option<u32>,
    placement: Placement,
) -> Decision {
    running.sort_unstable();
    let mut decision = Decision::default();
    let mut capacity = view.cluster.up_gpus();
    let mut ledger = TenantLedger::new(view);
    for &(_, id) in &running {
        ledger.sub(view, id, view.job(id).spec.gpus);
    }
    let smallest_waiting = smallest_waiting.unwrap_or(0);
    let mut keep = vec![false; running.len()];
    let mut to_start: Vec<JobId> = Vec::new();
    let mut running_iter = running.iter().copied().enumerate().map(|(i, (k, id))| (k, id, i)).peekable();
    let mut waiting = waiting.peekable();
    let mut waiting_examined = 0usize;
    let mut waiting_cut = false;
    while capacity > 0 {
        waiting_cut |= capacity < smallest_waiting || waiting_examined >= SCAN_LIMIT;
        let next_waiting = if waiting_cut { None } else { waiting.peek() };
        let take_running = match (running_iter.peek(), next_waiting) {
            (Some(r), Some(w)) => (r.0, r.1) <= *w,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_running {
            running_iter.next().map(|(_, id, i)| (id, Some(i)))
        } else {
            waiting.next().map(|(_, id)| (id, None))
        };
        let Some((id, running_index)) = next else { break };
        if !take_running {
            waiting_examined += 1;
        }
        let gpus = view.job(id).spec.gpus;
        if let Some(reason) = ledger.check(view, id, gpus) {
            if !take_running {
                decision.waiting.push((id, reason));
            }
            continue;
        }
        if gpus > capacity {
            if !take_running {
                decision.waiting.push((id, WaitReason::LowerPriority));
            }
            continue;
        }
        capacity -= gpus;
        ledger.add(view, id, gpus);
        match running_index {
            Some(i) => keep[i] = true,
            None => to_start.push(id),
        }
    }
    let mut free = FreeMap::new(view.cluster);
    for (&(_, id), kept) in running.iter().zip(&keep) {
        if !kept {
            free.give_back(&view.job(id).gpus);
            decision.actions.push(Action::Preempt { job: id });
        }
    }
    for id in to_start {
        let spec = &view.job(id).spec;
        match free.place_shaped(spec.gpus, spec.profile.layout, placement, |_| true) {
            Ok(gpus) => decision.actions.push(Action::Start { job: id, gpus }),
            Err(reason) => decision.waiting.push((id, reason)),
        }
    }
    decision
}

/// Asserts that `got` is what the full sort decides from `running` (every
/// running job with its key now) and the waiting jobs in `queue`: the check a
/// policy with a running-job index makes at every pass in this crate's tests.
#[cfg(test)]
pub(crate) fn assert_as_full_sort<K: Ord + Copy>(
    view: &ClusterView<'_>,
    running: Vec<(K, JobId)>,
    queue: &WaitQueue<K>,
    placement: Placement,
    got: &Decision,
) {
    let expected = reference_pass(view, running, queue.iter(), queue.smallest_request(), placement);
    assert_same_effect(view, got, &expected);
}

/// Asserts that the engine ends in the same state after `got` as after
/// `expected`: the same actions, and the same verdicts except those `got`
/// leaves out because the job holds that verdict already (`HeldVerdicts`).
#[cfg(test)]
pub(crate) fn assert_same_effect(view: &ClusterView<'_>, got: &Decision, expected: &Decision) {
    assert_eq!(
        got.actions, expected.actions,
        "the indexed pass at {:?} acts otherwise than the full sort",
        view.now
    );
    let mut told = got.waiting.iter().peekable();
    for &(id, reason) in &expected.waiting {
        if told.peek() == Some(&&(id, reason)) {
            told.next();
        } else {
            assert_eq!(
                view.job(id).verdict,
                Some(reason),
                "at {:?} the indexed pass left out {id}'s verdict {reason:?}, which the job does not hold",
                view.now
            );
        }
    }
    assert_eq!(told.next(), None, "at {:?} the indexed pass told a verdict the full sort does not", view.now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::WaitQueue;
    use crate::test_world::{case, run};
    use cotenant_core::{JobState, Policy, PolicyCx, Span, Time};
    use proptest::prelude::*;

    /// A preemptive policy ranking by `key` (LAS's or SRTF's) that decides with
    /// both passes, asserts they agree, and re-evaluates every 5 minutes.
    struct Checked {
        key: fn(&JobState, Time) -> u64,
        queue: WaitQueue<u64>,
        passes: usize,
    }

    impl Policy for Checked {
        fn name(&self) -> &'static str {
            "checked"
        }
        fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
            let (now, key) = (view.now, self.key);
            self.queue.sync(view, |job| key(job, now));
            let running: Vec<(u64, JobId)> =
                view.running_jobs().map(|job| (key(job, now), job.id())).collect();
            let expected = reference_pass(
                view,
                running.clone(),
                self.queue.iter(),
                self.queue.smallest_request(),
                Placement::Consolidated,
            );
            let mut buffer = running;
            let got = preemptive_pass(
                view,
                &mut buffer,
                self.queue.iter(),
                self.queue.smallest_request(),
                Placement::Consolidated,
            );
            assert_eq!(got, expected, "pass {} at {now:?}", self.passes);
            self.passes += 1;
            got
        }
        fn next_round(&self, now: Time) -> Option<Time> {
            (!self.queue.is_empty()).then(|| now + Span::from_secs(300))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Setting aside the running jobs ahead of the best waiting job changes
        /// no decision, with tenant limits, CPU-only jobs and failing nodes.
        #[test]
        fn preemptive_pass_decides_as_the_full_sort(case in case(), las in proptest::bool::ANY) {
            let key: fn(&JobState, Time) -> u64 = if las {
                |job, now| job.attained_gpu_us(now)
            } else {
                |job, now| job.remaining_estimate(now).map_or(u64::MAX, |s| s.0)
            };
            run(&case, Box::new(Checked { key, queue: WaitQueue::default(), passes: 0 }));
        }
    }
}
