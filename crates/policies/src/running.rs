//! Running-job indexes for the preemptive passes, kept from the engine's change
//! log as [`crate::queue::WaitQueue`] keeps the waiting jobs.
//!
//! A preemptive pass keeps every running job that ranks ahead of the best
//! waiting job (the *settled* ones, see `greedy::settled_is_safe`); only the
//! others (the *contested* ones) need their keys and an order. An index yields
//! the contested jobs in key order and the GPUs of all running jobs, so a pass
//! costs what is contested, not O(running log running):
//!
//! - [`SrtfIndex`]: a running job's remaining time only falls while the world
//!   reports no new progress for it, so a key cached when the job started (or
//!   was resized, or reported progress: `ClusterView::progressed`) is an upper
//!   bound on its key now; a job whose cached `(key, id)` is below the head is
//!   settled without recomputing it.
//! - [`LasIndex`]: a running job's attained service is `attained_before +
//!   (now - gpus_since) x gpus`, a line in time with an integer slope (its GPUs):
//!   jobs are grouped by slope and ordered by intercept within a group, and each
//!   group's contested jobs are a range.
//! - Tiresias's running set is already ordered by its key (a range of it).

use std::collections::BTreeSet;

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobChange, JobId, JobState, RemainingInputs, TenantId, Time};

use crate::greedy::{
    pass_by_key, pass_contested, pass_contested_by, settled_is_safe, ContestedJobs, HeldVerdicts, Sized,
};
use crate::queue::{JobSize, WaitQueue};

/// What a running-job index hands the preemptive pass (`greedy::pass_contested`).
pub(crate) struct Contested<'a, K> {
    /// Requested GPUs of all running jobs.
    pub(crate) running_gpus: u64,
    /// The running jobs ranked at or after the best waiting job, in key order,
    /// with their sizes.
    pub(crate) jobs: &'a [Sized<K>],
    /// Their requested GPUs.
    pub(crate) gpus: u64,
}

/// The running jobs as the change log says, with their requested GPUs, and the
/// totals `settled_is_safe` needs without walking them.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunningSet {
    /// Requested GPUs of each running job, by job index.
    gpus: Vec<Option<u32>>,
    count: usize,
    total_gpus: u64,
    zero_gpu_jobs: usize,
}

impl RunningSet {
    /// Adds a job that started; false if it was already in.
    pub(crate) fn insert(&mut self, id: JobId, gpus: u32) -> bool {
        if id.index() >= self.gpus.len() {
            self.gpus.resize(id.index() + 1, None);
        }
        if self.gpus[id.index()].is_some() {
            return false;
        }
        self.gpus[id.index()] = Some(gpus);
        self.count += 1;
        self.total_gpus += u64::from(gpus);
        self.zero_gpu_jobs += usize::from(gpus == 0);
        true
    }

    /// Removes a job that left running; false if it was not in.
    pub(crate) fn remove(&mut self, id: JobId) -> bool {
        let Some(gpus) = self.gpus.get_mut(id.index()).and_then(Option::take) else { return false };
        self.count -= 1;
        self.total_gpus -= u64::from(gpus);
        self.zero_gpu_jobs -= usize::from(gpus == 0);
        true
    }

    pub(crate) fn contains(&self, id: JobId) -> bool {
        self.gpus.get(id.index()).is_some_and(Option::is_some)
    }

    /// Requested GPUs of a running job (0 for a job not in the set).
    pub(crate) fn gpus(&self, id: JobId) -> u32 {
        self.gpus.get(id.index()).copied().flatten().unwrap_or(0)
    }

    /// Applies one change: `Some(true)` the job started, `Some(false)` it left
    /// running, `None` nothing changed in the set. `queue` knows the sizes of
    /// the jobs that waited.
    pub(crate) fn apply<K: Ord + Copy>(
        &mut self,
        view: &ClusterView<'_>,
        queue: &WaitQueue<K>,
        change: JobChange,
    ) -> Option<bool> {
        match change {
            JobChange::Started(id) => self.insert(id, queue.size(view, id).gpus).then_some(true),
            JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id) => {
                self.remove(id).then_some(false)
            }
            JobChange::Submitted(_) | JobChange::Resized(_) => None,
        }
    }

    /// The running jobs' GPUs in all, when the pass may set aside the running
    /// jobs ranked ahead of the best waiting job (`settled_is_safe`) and this set
    /// is the view's running set (a wrapper may hide some running jobs from its
    /// base: `ClusterView::with_running`; the set holds every running job, so
    /// equal sizes mean equal sets). `None`: the pass must rank every running job.
    pub(crate) fn settled_total(&self, view: &ClusterView<'_>) -> Option<u64> {
        debug_assert!(
            self.count != view.running.len() || view.running.iter().all(|&id| self.contains(id)),
            "running index out of sync with the engine"
        );
        if self.count != view.running.len() {
            return None;
        }
        self.safe_total(view)
    }

    /// As [`RunningSet::settled_total`], for a policy that ranks this set
    /// whatever the view's running set (Tiresias ranks its own).
    pub(crate) fn safe_total(&self, view: &ClusterView<'_>) -> Option<u64> {
        settled_is_safe(view, self.total_gpus, self.zero_gpu_jobs > 0).then_some(self.total_gpus)
    }
}

/// SRTF's key: remaining run time in µs (`u64::MAX` without an estimate).
pub(crate) fn remaining_us(job: &JobState, now: Time) -> u64 {
    key_from(job.remaining_inputs(), now)
}

/// SRTF's key from what it is computed from (`JobState::remaining_inputs`),
/// so that an index can key a job from a copy of them.
fn key_from(inputs: Option<RemainingInputs>, now: Time) -> u64 {
    inputs.map_or(u64::MAX, |inputs| inputs.at(now).0)
}

/// A running-job index of a policy that ranks every job by one `u64` key.
pub(crate) trait KeyIndex {
    /// Applies the change log (and what else the key depends on) since the
    /// last pass; `queue`, synced first, knows the sizes of the jobs that waited.
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>);
    /// Whether `contested` may be asked (else every pass ranks all running jobs).
    fn exact(&self) -> bool {
        true
    }
    fn set(&self) -> &RunningSet;
    /// The running jobs whose `(key, id)` is at or after `head` now, in key
    /// order, with their sizes, into `out`; returns their GPUs.
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64;
    /// The preemptive pass over the contested running jobs (`greedy::pass_contested`)
    /// when the running jobs hold `running_gpus` and `settled_is_safe` holds:
    /// by default from the list `contested` gives, into `buffer`.
    fn pass_contested(
        &mut self,
        view: &ClusterView<'_>,
        running_gpus: u64,
        queue: &mut WaitQueue<u64>,
        placement: Placement,
        held: &mut HeldVerdicts,
        buffer: &mut Vec<Sized<u64>>,
    ) -> Decision {
        buffer.clear();
        let gpus = match queue.iter().next() {
            Some(head) => self.contested(view, head, buffer),
            None => 0,
        };
        let contested = Contested { running_gpus, jobs: buffer, gpus };
        pass_contested(view, contested, queue, placement, held)
    }
}

impl KeyIndex for SrtfIndex {
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>) {
        SrtfIndex::sync(self, view, queue);
    }
    fn set(&self) -> &RunningSet {
        &self.set
    }
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        SrtfIndex::contested(self, view, head, out)
    }
}

impl KeyIndex for LasIndex {
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>) {
        LasIndex::sync(self, view, queue);
    }
    fn exact(&self) -> bool {
        self.overflowed == 0
    }
    fn set(&self) -> &RunningSet {
        &self.set
    }
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        LasIndex::contested(self, view, head, out)
    }
    /// From cursors into the groups ([`LasJobs`]): the contested jobs are not listed.
    fn pass_contested(
        &mut self,
        view: &ClusterView<'_>,
        running_gpus: u64,
        queue: &mut WaitQueue<u64>,
        placement: Placement,
        held: &mut HeldVerdicts,
        _buffer: &mut Vec<Sized<u64>>,
    ) -> Decision {
        let Some(head) = queue.iter().next() else { return Decision::default() };
        let (jobs, gpus) = self.contested_jobs(view.now, head);
        pass_contested_by(view, running_gpus, gpus, jobs, queue, placement, held)
    }
}

/// What a policy that ranks every job by one key keeps between passes: its
/// waiting queue, its running-job index, the verdicts the engine holds from
/// its passes, and buffers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ranked<I> {
    pub(crate) queue: WaitQueue<u64>,
    index: I,
    held: HeldVerdicts,
    /// The contested running jobs of a pass.
    contested: Vec<Sized<u64>>,
    /// Every running job with its key, for a pass that ranks them all.
    running: Vec<(u64, JobId)>,
}

impl<I: KeyIndex> Ranked<I> {
    /// One preemptive pass: the indexes synced from the view, then the
    /// contested running jobs only (`greedy::pass_contested`), or every running
    /// job keyed by `key` and sorted when that shortcut is not safe. In this
    /// crate's tests every pass is checked against the full sort.
    pub(crate) fn pass(
        &mut self,
        view: &ClusterView<'_>,
        key: impl Fn(&JobState) -> u64,
        placement: Placement,
    ) -> Decision {
        self.queue.sync(view, &key);
        self.index.sync(view, &self.queue);
        self.held.sync(view);
        let decision = match self.index.set().settled_total(view).filter(|_| self.index.exact()) {
            Some(running_gpus) => self.index.pass_contested(
                view,
                running_gpus,
                &mut self.queue,
                placement,
                &mut self.held,
                &mut self.contested,
            ),
            None => {
                let decision = pass_by_key(view, &mut self.running, &key, &self.queue, placement);
                self.held.record(&decision);
                self.queue.forget_held_prefix();
                decision
            }
        };
        #[cfg(test)]
        crate::greedy::assert_as_full_sort(
            view,
            view.running_jobs().map(|job| (key(job), job.id())).collect(),
            &self.queue,
            placement,
            &decision,
        );
        decision
    }
}

/// SRTF's running jobs by cached remaining time (an upper bound on the key now).
#[derive(Clone, Debug, Default)]
pub(crate) struct SrtfIndex {
    pub(crate) set: RunningSet,
    /// Each running job's cached key, with what it is computed from, by job
    /// index.
    cached: Vec<Cached>,
    order: BTreeSet<(u64, JobId)>,
    /// Jobs the last `contested` found settled after all, with their cached
    /// and fresh keys (kept to reuse its allocation).
    refreshed: Vec<(u64, u64, JobId)>,
}

/// A running job's cached SRTF key, the inputs of its remaining time as of
/// its last progress report (so that `contested` keys it afresh without
/// reading the job: the same operations, the same bits), and its tenant.
#[derive(Clone, Copy, Debug)]
struct Cached {
    key: u64,
    inputs: Option<RemainingInputs>,
    tenant: TenantId,
}

impl SrtfIndex {
    /// Applies the change log and the progress reports: a job that started,
    /// was resized or reported progress gets its key (and its key's inputs)
    /// afresh.
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>) {
        for &change in view.changes {
            match (self.set.apply(view, queue, change), change) {
                (Some(true), JobChange::Started(id)) => self.insert(id, view.job(id), view.now),
                (Some(false), JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id)) => {
                    self.order.remove(&(self.cached[id.index()].key, id));
                }
                (None, JobChange::Resized(id)) => self.rekey(id, view.job(id), view.now),
                _ => {}
            }
        }
        for &id in view.progressed {
            self.rekey(id, view.job(id), view.now);
        }
    }

    fn insert(&mut self, id: JobId, job: &JobState, now: Time) {
        let inputs = job.remaining_inputs();
        let record = Cached { key: key_from(inputs, now), inputs, tenant: job.spec.tenant };
        if id.index() >= self.cached.len() {
            // The filler entries belong to jobs not running: each is written
            // here before it is read.
            self.cached.resize(id.index() + 1, record);
        }
        self.cached[id.index()] = record;
        self.order.insert((record.key, id));
    }

    /// A running job's key, recomputed (a job not running is left alone).
    fn rekey(&mut self, id: JobId, job: &JobState, now: Time) {
        if self.set.contains(id) {
            self.order.remove(&(self.cached[id.index()].key, id));
            self.insert(id, job, now);
        }
    }

    /// The running jobs that rank at or after `head` now, in key order, into
    /// `out`; returns their GPUs. Only jobs whose cached key is at or after
    /// `head` are keyed afresh (a key only falls between refreshes); those that
    /// rank ahead of `head` after all get their fresh key cached, so that later
    /// passes skip them (a contested job is keyed afresh at every pass anyway).
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        out.clear();
        self.refreshed.clear();
        let mut gpus = 0;
        for &(cached, id) in self.order.range(head..) {
            let record = &self.cached[id.index()];
            // As of the job's last progress report: `remaining_us` of the job
            // while no report is missed (checked in debug builds).
            let k = key_from(record.inputs, view.now);
            debug_assert_eq!(
                k,
                remaining_us(view.job(id), view.now),
                "{id}: SRTF's copied inputs give another key than the job's (progress without a report)"
            );
            debug_assert!(k <= cached, "{id}: SRTF key rose from {cached} to {k} without a progress report");
            if (k, id) >= head {
                let size = JobSize { gpus: self.set.gpus(id), tenant: record.tenant };
                out.push(((k, id), size));
                gpus += u64::from(size.gpus);
            } else {
                self.refreshed.push((cached, k, id));
            }
        }
        for &(cached, k, id) in &self.refreshed {
            self.order.remove(&(cached, id));
            self.order.insert((k, id));
            self.cached[id.index()].key = k;
        }
        // The cached order is not the fresh one (keys cached at different times
        // have fallen by different amounts), but it is close: on full Philly
        // a pass's 61 contested jobs (on average) are about 1.8 inversions
        // each away from it, and half the passes find them in order already. The keys are
        // distinct, so every sort gives the one order.
        sort_nearly_sorted(out, |entry| entry.0);
        gpus
    }
}

/// Sorts `v` by `key`, which must be distinct (so that there is one order),
/// in time that grows with how far `v` is from sorted: insertion sort, whose
/// cost is the number of inversions, until they pass a budget of a few per
/// entry, and then `sort_unstable_by_key` for the whole slice. Fed a list in
/// an order close to the right one (SRTF's contested jobs in their cached
/// order), it makes a few moves where a sort from scratch compares
/// `n log n` times.
fn sort_nearly_sorted<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let mut budget = 4 * v.len() + 16;
    for i in 1..v.len() {
        // Entry `i` is held aside while the larger ones before it shift up
        // one place each (a move per inversion rather than a swap).
        let item = v[i];
        let k = key(&item);
        let mut j = i;
        while j > 0 && k < key(&v[j - 1]) {
            if budget == 0 {
                v[j] = item;
                v.sort_unstable_by_key(key);
                return;
            }
            budget -= 1;
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = item;
    }
}

/// LAS's running jobs grouped by their GPUs (the slope of attained service in
/// time) and requested GPUs, each group ordered by `(intercept, id)` where a
/// job's attained service at `now` is `slope x now + intercept`.
///
/// A group is a sorted vector (at most one entry per running job, so a few
/// hundred on the traces measured): a pass finds where its contested jobs
/// start by binary search, and hands the pass cursors into the groups
/// ([`LasJobs`]) instead of a merged list, so that a block of contested jobs
/// the pass keeps is skipped group by group (every job of a group requests its
/// GPUs) without being listed.
///
/// Intercepts are kept as `i64`; a job whose intercept does not fit
/// (`OVERFLOWED`: a slope times a start time past 2^63, never on a real trace)
/// is counted instead, and while one runs the passes rank every running job
/// (`KeyIndex::exact`).
#[derive(Clone, Debug, Default)]
pub(crate) struct LasIndex {
    pub(crate) set: RunningSet,
    /// `(intercept, group)` of each running job, by job index.
    line: Vec<(i64, u32)>,
    /// The groups, in no order (a group that empties stays, for its next job).
    groups: Vec<LasGroup>,
    /// The group of the jobs whose slope is their request, by request
    /// (`u32::MAX`: none yet); other groups are found by a scan.
    group_of_size: Vec<u32>,
    /// Running jobs whose intercept is `OVERFLOWED` (in no group).
    overflowed: usize,
    /// One cursor per group for a pass, and the groups with contested jobs
    /// left (kept to reuse their allocations).
    cursors: Vec<LasCursor>,
    live: Vec<usize>,
}

/// The running jobs of one slope that request `gpus` GPUs each.
#[derive(Clone, Debug)]
struct LasGroup {
    slope: u64,
    gpus: u32,
    /// `(intercept, id, tenant)`, sorted by `(intercept, id)`.
    jobs: Vec<(i64, JobId, TenantId)>,
}

/// Where a pass is in one group: `slope x now` and the next job to consume.
#[derive(Clone, Copy, Debug)]
struct LasCursor {
    at_now: i128,
    next: usize,
}

/// The intercept of a job whose line does not fit an `i64` (no `i64`
/// intercept is this: the conversion below maps it here too).
const OVERFLOWED: i64 = i64::MIN;

impl LasIndex {
    /// Applies the change log: a job that started or was resized gets its line afresh.
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>) {
        for &change in view.changes {
            match (self.set.apply(view, queue, change), change) {
                (Some(true), JobChange::Started(id)) => {
                    self.insert(view.job(id), queue.size(view, id).tenant)
                }
                (Some(false), JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id)) => {
                    self.remove(id);
                }
                (None, JobChange::Resized(id)) if self.set.contains(id) => {
                    self.remove(id);
                    self.insert(view.job(id), queue.size(view, id).tenant);
                }
                _ => {}
            }
        }
    }

    /// Attained GPU-µs at `now` = attained_before + (now - gpus_since) x gpus
    /// = gpus x now + (attained_before - gpus x gpus_since).
    fn insert(&mut self, job: &JobState, tenant: TenantId) {
        let id = job.id();
        let slope = job.gpus.len() as u64;
        let intercept =
            i128::from(job.attained_before_gpu_us) - i128::from(slope) * i128::from(job.gpus_since.0);
        let intercept = i64::try_from(intercept).unwrap_or(OVERFLOWED);
        let gpus = self.set.gpus(id);
        if id.index() >= self.line.len() {
            self.line.resize(id.index() + 1, (0, 0));
        }
        if intercept == OVERFLOWED {
            self.line[id.index()] = (OVERFLOWED, 0);
            self.overflowed += 1;
            return;
        }
        let g = self.group(slope, gpus);
        self.line[id.index()] = (intercept, g as u32);
        let jobs = &mut self.groups[g].jobs;
        let at = jobs.partition_point(|&(c, j, _)| (c, j) < (intercept, id));
        jobs.insert(at, (intercept, id, tenant));
    }

    /// The group of jobs of `slope` that request `gpus` GPUs, made if new.
    fn group(&mut self, slope: u64, gpus: u32) -> usize {
        let by_size = slope == u64::from(gpus);
        if by_size {
            if let Some(&g) = self.group_of_size.get(gpus as usize).filter(|&&g| g != u32::MAX) {
                return g as usize;
            }
        }
        let g = match self.groups.iter().position(|g| g.slope == slope && g.gpus == gpus) {
            Some(g) => g,
            None => {
                self.groups.push(LasGroup { slope, gpus, jobs: Vec::new() });
                self.groups.len() - 1
            }
        };
        if by_size {
            if gpus as usize >= self.group_of_size.len() {
                self.group_of_size.resize(gpus as usize + 1, u32::MAX);
            }
            self.group_of_size[gpus as usize] = g as u32;
        }
        g
    }

    fn remove(&mut self, id: JobId) {
        let (intercept, g) = self.line[id.index()];
        if intercept == OVERFLOWED {
            self.overflowed -= 1;
            return;
        }
        let jobs = &mut self.groups[g as usize].jobs;
        if let Ok(at) = jobs.binary_search_by(|&(c, j, _)| (c, j).cmp(&(intercept, id))) {
            jobs.remove(at);
        }
    }

    /// The running jobs whose `(attained, id)` is at or after `head` at
    /// `view.now`, as cursors into the groups, and their GPUs.
    fn contested_jobs(&mut self, now: Time, head: (u64, JobId)) -> (LasJobs<'_>, u64) {
        self.cursors.clear();
        let now = i128::from(now.0);
        let mut gpus = 0;
        for group in &self.groups {
            let at_now = i128::from(group.slope) * now;
            // slope x now + c >= key  <=>  c >= key - slope x now (ties by id);
            // every intercept in a group lies strictly between i64::MIN and i64::MAX + 1.
            let from = i128::from(head.0) - at_now;
            let next = match i64::try_from(from) {
                Ok(from) => group.jobs.partition_point(|&(c, j, _)| (c, j) < (from, head.1)),
                Err(_) if from > 0 => group.jobs.len(),
                Err(_) => 0,
            };
            gpus += u64::from(group.gpus) * (group.jobs.len() - next) as u64;
            self.cursors.push(LasCursor { at_now, next });
        }
        (LasJobs::new(&self.groups, &mut self.cursors, &mut self.live), gpus)
    }

    /// The running jobs whose `(attained, id)` is at or after `head` at
    /// `view.now`, in key order, into `out`; returns their GPUs.
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        out.clear();
        let (jobs, gpus) = self.contested_jobs(view.now, head);
        jobs.for_each_left(|entry| out.push(entry));
        gpus
    }
}

/// The contested running jobs of a LAS pass: a cursor into each group of a
/// [`LasIndex`], the jobs before it consumed (or settled).
pub(crate) struct LasJobs<'a> {
    groups: &'a [LasGroup],
    cursors: &'a mut [LasCursor],
    /// The groups with jobs left, in no order.
    live: &'a mut Vec<usize>,
    /// The least job left, with its group.
    head: Option<(usize, Sized<u64>)>,
}

/// Where a group's jobs stop being at or before a bound `(key, id)`: in
/// intercept terms for the group's slope.
#[derive(Clone, Copy)]
enum GroupBound {
    All,
    None,
    /// At or before `(intercept, id)`.
    Upto(i64, JobId),
}

/// Most groups whose block ends a step keeps on the stack.
const STACK_GROUPS: usize = 64;

impl<'a> LasJobs<'a> {
    fn new(groups: &'a [LasGroup], cursors: &'a mut [LasCursor], live: &'a mut Vec<usize>) -> LasJobs<'a> {
        live.clear();
        live.extend((0..groups.len()).filter(|&g| cursors[g].next < groups[g].jobs.len()));
        let mut jobs = LasJobs { groups, cursors, live, head: None };
        jobs.refresh();
        jobs
    }

    /// Key and size of the job at `i` in group `g`: `slope x now + intercept`,
    /// exact in `u64` (it is the job's attained service).
    #[inline]
    fn entry(&self, g: usize, i: usize) -> Sized<u64> {
        let group = &self.groups[g];
        let (c, id, tenant) = group.jobs[i];
        let key = (self.cursors[g].at_now + i128::from(c)) as u64;
        ((key, id), JobSize { gpus: group.gpus, tenant })
    }

    /// Drops the groups with no job left and finds the least job left.
    fn refresh(&mut self) {
        self.head = None;
        let mut slot = 0;
        while slot < self.live.len() {
            let g = self.live[slot];
            let next = self.cursors[g].next;
            if next >= self.groups[g].jobs.len() {
                self.live.swap_remove(slot);
                continue;
            }
            let entry = self.entry(g, next);
            if self.head.is_none_or(|(_, least)| entry.0 < least.0) {
                self.head = Some((g, entry));
            }
            slot += 1;
        }
    }

    /// The group whose next job is least, and the least next job of the
    /// others, with group `g`'s next job at `next[slot]` for `g = live[slot]`.
    #[inline]
    fn least_two(&self, next: &[usize]) -> Option<(usize, Option<(u64, JobId)>)> {
        let mut least: Option<(usize, (u64, JobId))> = None;
        let mut second: Option<(u64, JobId)> = None;
        for (slot, &g) in self.live.iter().enumerate() {
            let i = next[slot];
            if i >= self.groups[g].jobs.len() {
                continue;
            }
            let head = self.entry(g, i).0;
            match least {
                Some((_, l)) if head > l => {
                    if second.is_none_or(|s| head < s) {
                        second = Some(head);
                    }
                }
                _ => {
                    second = least.map(|(_, l)| l);
                    least = Some((slot, head));
                }
            }
        }
        least.map(|(slot, _)| (slot, second))
    }

    fn bound_in(&self, g: usize, bound: Option<(u64, JobId)>) -> GroupBound {
        let Some((key, id)) = bound else { return GroupBound::All };
        let c = i128::from(key) - self.cursors[g].at_now;
        match i64::try_from(c) {
            Ok(c) => GroupBound::Upto(c, id),
            Err(_) if c > 0 => GroupBound::All,
            Err(_) => GroupBound::None,
        }
    }

    /// One past the last job of group `g` at or before `bound`, from its job
    /// `next`: an exponential search, so a short block costs little.
    fn end_in(&self, g: usize, next: usize, bound: GroupBound) -> usize {
        let jobs = &self.groups[g].jobs;
        let (c, id) = match bound {
            GroupBound::All => return jobs.len(),
            GroupBound::None => return next,
            GroupBound::Upto(c, id) => (c, id),
        };
        let rest = &jobs[next..];
        let at_or_before = |&(jc, j, _): &(i64, JobId, TenantId)| (jc, j) <= (c, id);
        // `rest[..lo]` are at or before the bound; `rest[probe - 1]` is not.
        let (mut lo, mut step) = (0, 1);
        loop {
            let probe = lo + step;
            if probe > rest.len() || !at_or_before(&rest[probe - 1]) {
                break;
            }
            lo = probe;
            step *= 2;
        }
        let upper = (lo + step - 1).min(rest.len());
        next + lo + rest[lo..upper].partition_point(at_or_before)
    }

    /// Each live group's next job (`next[slot]` for `live[slot]`), a copy to
    /// step through: on the stack for up to [`STACK_GROUPS`] groups, else in `spilled`.
    fn next_positions<'b>(
        &self,
        stack: &'b mut [usize; STACK_GROUPS],
        spilled: &'b mut Vec<usize>,
    ) -> &'b mut [usize] {
        let next: &mut [usize] = if self.live.len() <= STACK_GROUPS {
            &mut stack[..self.live.len()]
        } else {
            spilled.resize(self.live.len(), 0);
            spilled
        };
        for (slot, &g) in self.live.iter().enumerate() {
            next[slot] = self.cursors[g].next;
        }
        next
    }

    /// [`ContestedJobs::take_fitting`] one job at a time in key order.
    fn take_in_order(&mut self, bound: Option<(u64, JobId)>, room: u32) -> u32 {
        let (mut stack, mut spilled) = ([0usize; STACK_GROUPS], Vec::new());
        let next = self.next_positions(&mut stack, &mut spilled);
        let mut taken = 0u32;
        // The least group's jobs ahead of the others' least (and at or before
        // `bound`) come next in key order: counted by search, taken while they fit.
        while let Some((slot, second)) = self.least_two(next) {
            let g = self.live[slot];
            let gpus = self.groups[g].gpus;
            let until = match (second, bound) {
                (Some(s), Some(b)) => Some(s.min(b)),
                (s, b) => s.or(b),
            };
            let end = self.end_in(g, next[slot], self.bound_in(g, until));
            let run = end - next[slot];
            if run == 0 || gpus == 0 {
                // The least job left is past `bound`, or holds no GPU.
                break;
            }
            let fits = ((room - taken) / gpus) as usize;
            let took = run.min(fits);
            taken += took as u32 * gpus;
            next[slot] += took;
            if took < run {
                break;
            }
        }
        for (slot, &g) in self.live.iter().enumerate() {
            self.cursors[g].next = next[slot];
        }
        self.refresh();
        taken
    }
}

impl ContestedJobs<u64> for LasJobs<'_> {
    fn peek(&self) -> Option<Sized<u64>> {
        self.head.map(|(_, entry)| entry)
    }

    fn advance(&mut self) {
        if let Some((g, _)) = self.head {
            self.cursors[g].next += 1;
            self.refresh();
        }
    }

    /// Every group's jobs up to `bound`, counted by search: when they all
    /// fit, they are all taken (whatever their order) without reading them
    /// one by one; else they are taken one at a time in key order.
    fn take_fitting(&mut self, bound: Option<(u64, JobId)>, room: u32) -> u32 {
        if self.live.len() > STACK_GROUPS {
            return self.take_in_order(bound, room);
        }
        let mut ends = [0usize; STACK_GROUPS];
        let mut total = 0u64;
        let mut zero_gpu_jobs = false;
        for (slot, &g) in self.live.iter().enumerate() {
            let end = self.end_in(g, self.cursors[g].next, self.bound_in(g, bound));
            let count = (end - self.cursors[g].next) as u64;
            total += count * u64::from(self.groups[g].gpus);
            zero_gpu_jobs |= count > 0 && self.groups[g].gpus == 0;
            ends[slot] = end;
        }
        if total > u64::from(room) || zero_gpu_jobs {
            return self.take_in_order(bound, room);
        }
        if total > 0 {
            for (slot, &g) in self.live.iter().enumerate() {
                self.cursors[g].next = ends[slot];
            }
            self.refresh();
        }
        total as u32
    }

    fn for_each_left(&self, mut each: impl FnMut(Sized<u64>)) {
        // The groups' runs merged: the least group gives every job ahead of
        // the others' least, so a merge costs one comparison per job plus
        // O(groups) per change of group.
        let (mut stack, mut spilled) = ([0usize; STACK_GROUPS], Vec::new());
        let next = self.next_positions(&mut stack, &mut spilled);
        while let Some((slot, second)) = self.least_two(next) {
            let g = self.live[slot];
            while next[slot] < self.groups[g].jobs.len() {
                let entry = self.entry(g, next[slot]);
                if second.is_some_and(|s| entry.0 > s) {
                    break;
                }
                each(entry);
                next[slot] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::greedy::SliceJobs;
    use proptest::prelude::*;

    /// A step of a pass over the contested jobs.
    #[derive(Clone, Debug)]
    enum Step {
        Advance,
        Take { bound: Option<(u64, u32)>, room: u32 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Advance),
            (proptest::option::of((0u64..400, 0u32..1024)), 0u32..40)
                .prop_map(|(bound, room)| Step::Take { bound, room }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// The insertion sort with its budget gives the one order of
        /// distinct keys, whether the input is close to sorted (a few
        /// swaps of a sorted list: the insertion sort) or far from it
        /// (the budget runs out: the fallback).
        #[test]
        fn nearly_sorted_sort_is_the_sort(
            keys in proptest::collection::btree_set(any::<u32>(), 0..200),
            swaps in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..6), 0..400),
        ) {
            let mut v: Vec<(u32, usize)> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
            for (at, distance) in swaps {
                if v.len() > 1 {
                    let i = at.index(v.len());
                    let j = (i + distance).min(v.len() - 1);
                    v.swap(i, j);
                }
            }
            let mut expected = v.clone();
            expected.sort_unstable_by_key(|e| e.0);
            sort_nearly_sorted(&mut v, |e| e.0);
            prop_assert_eq!(v, expected);
        }

        /// The cursors into LAS's groups (`LasJobs`: blocks counted by binary
        /// search, taken one at a time only when they do not all fit) consume
        /// and leave what the plain path does over the merged, sorted list of
        /// the contested jobs (`SliceJobs`), step by step: ties of key broken
        /// by id, groups of one slope with different requests, CPU-only groups.
        #[test]
        fn las_cursors_take_as_the_sorted_list(
            groups in proptest::collection::vec(
                (1u64..5, 0u32..4, proptest::collection::vec(0i64..300, 0..24)),
                0..6,
            ),
            now in 0u64..40,
            head in (0u64..400, 0u32..1024),
            steps in proptest::collection::vec(step(), 0..24),
        ) {
            let mut index = LasIndex::default();
            let mut all: Vec<Sized<u64>> = Vec::new();
            let mut next_id = 0u32;
            for (slope, gpus, intercepts) in groups {
                // One group per (slope, GPUs), as `insert` keeps them.
                let g = index.group(slope, gpus);
                for c in intercepts {
                    // Ids shuffled across groups, so that ties of key fall either way.
                    let id = JobId(next_id * 37 % 1024);
                    next_id += 1;
                    let tenant = TenantId(next_id % 3);
                    index.groups[g].jobs.push((c, id, tenant));
                    all.push(((slope * now + c as u64, id), JobSize { gpus, tenant }));
                }
                index.groups[g].jobs.sort_unstable_by_key(|&(c, id, _)| (c, id));
            }
            let head = (head.0, JobId(head.1));
            all.retain(|entry| entry.0 >= head);
            all.sort_unstable_by_key(|entry| entry.0);
            let (mut got, gpus) = index.contested_jobs(Time(now), head);
            prop_assert_eq!(gpus, all.iter().map(|e| u64::from(e.1.gpus)).sum::<u64>());
            let mut expected = SliceJobs { jobs: &all, next: 0 };
            for step in steps {
                prop_assert_eq!(got.peek(), expected.peek());
                match step {
                    Step::Advance if expected.peek().is_some() => {
                        got.advance();
                        expected.advance();
                    }
                    Step::Take { bound, room } => {
                        let bound = bound.map(|(k, id)| (k, JobId(id)));
                        prop_assert_eq!(got.take_fitting(bound, room), expected.take_fitting(bound, room));
                    }
                    Step::Advance => {}
                }
            }
            let (mut left, mut expected_left) = (Vec::new(), Vec::new());
            got.for_each_left(|entry| left.push(entry));
            expected.for_each_left(|entry| expected_left.push(entry));
            prop_assert_eq!(left, expected_left);
        }
    }
}
