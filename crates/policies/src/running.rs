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

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobChange, JobId, JobState, Time};

use crate::greedy::{pass_by_key, pass_contested, settled_is_safe, HeldVerdicts, Sized};
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
    /// running, `None` nothing changed in the set.
    pub(crate) fn apply(&mut self, view: &ClusterView<'_>, change: JobChange) -> Option<bool> {
        match change {
            JobChange::Started(id) => self.insert(id, view.job(id).spec.gpus).then_some(true),
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
    job.remaining_estimate(now).map_or(u64::MAX, |s| s.0)
}

/// A running-job index of a policy that ranks every job by one `u64` key.
pub(crate) trait KeyIndex {
    /// Applies the change log (and what else the key depends on) since the last pass.
    fn sync(&mut self, view: &ClusterView<'_>);
    fn set(&self) -> &RunningSet;
    /// The running jobs whose `(key, id)` is at or after `head` now, in key
    /// order, with their sizes, into `out`; returns their GPUs.
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64;
}

impl KeyIndex for SrtfIndex {
    fn sync(&mut self, view: &ClusterView<'_>) {
        SrtfIndex::sync(self, view);
    }
    fn set(&self) -> &RunningSet {
        &self.set
    }
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        SrtfIndex::contested(self, view, head, out)
    }
}

impl KeyIndex for LasIndex {
    fn sync(&mut self, view: &ClusterView<'_>) {
        LasIndex::sync(self, view);
    }
    fn set(&self) -> &RunningSet {
        &self.set
    }
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        LasIndex::contested(self, view, head, out)
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
        self.index.sync(view);
        self.held.sync(view);
        let decision = match self.index.set().settled_total(view) {
            Some(running_gpus) => {
                self.contested.clear();
                let gpus = match self.queue.iter().next() {
                    Some(head) => self.index.contested(view, head, &mut self.contested),
                    None => 0,
                };
                let contested = Contested { running_gpus, jobs: &self.contested, gpus };
                let waiting = self.queue.iter_sized();
                pass_contested(
                    view,
                    contested,
                    waiting,
                    self.queue.smallest_request(),
                    placement,
                    &mut self.held,
                )
            }
            None => {
                let decision = pass_by_key(view, &mut self.running, &key, &self.queue, placement);
                self.held.record(&decision);
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
    /// Cached key of each running job, by job index.
    cached: Vec<u64>,
    order: BTreeSet<(u64, JobId)>,
    /// Jobs the last `contested` found settled after all, with their cached
    /// and fresh keys (kept to reuse its allocation).
    refreshed: Vec<(u64, u64, JobId)>,
}

impl SrtfIndex {
    /// Applies the change log and the progress reports: a job that started,
    /// was resized or reported progress gets its key afresh.
    fn sync(&mut self, view: &ClusterView<'_>) {
        let key = |job: &JobState| remaining_us(job, view.now);
        for &change in view.changes {
            match (self.set.apply(view, change), change) {
                (Some(true), JobChange::Started(id)) => {
                    let k = key(view.job(id));
                    self.insert(id, k);
                }
                (Some(false), JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id)) => {
                    self.order.remove(&(self.cached[id.index()], id));
                }
                (None, JobChange::Resized(id)) => self.rekey(id, key(view.job(id))),
                _ => {}
            }
        }
        for &id in view.progressed {
            self.rekey(id, key(view.job(id)));
        }
    }

    fn insert(&mut self, id: JobId, k: u64) {
        if id.index() >= self.cached.len() {
            self.cached.resize(id.index() + 1, 0);
        }
        self.cached[id.index()] = k;
        self.order.insert((k, id));
    }

    /// A running job's key, recomputed (a job not running is left alone).
    fn rekey(&mut self, id: JobId, k: u64) {
        if self.set.contains(id) {
            self.order.remove(&(self.cached[id.index()], id));
            self.insert(id, k);
        }
    }

    /// The running jobs that rank at or after `head` now, in key order, into
    /// `out`; returns their GPUs. Only jobs whose cached key is at or after
    /// `head` are keyed afresh (a key only falls between refreshes); those that
    /// rank ahead of `head` after all get their fresh key cached, so that later
    /// passes skip them (a contested job is keyed afresh at every pass anyway).
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        let key = |job: &JobState| remaining_us(job, view.now);
        out.clear();
        self.refreshed.clear();
        let mut gpus = 0;
        for &(cached, id) in self.order.range(head..) {
            let job = view.job(id);
            let k = key(job);
            debug_assert!(k <= cached, "{id}: SRTF key rose from {cached} to {k} without a progress report");
            if (k, id) >= head {
                let size = JobSize { gpus: self.set.gpus(id), tenant: job.spec.tenant };
                out.push(((k, id), size));
                gpus += u64::from(size.gpus);
            } else {
                self.refreshed.push((cached, k, id));
            }
        }
        for &(cached, k, id) in &self.refreshed {
            self.order.remove(&(cached, id));
            self.order.insert((k, id));
            self.cached[id.index()] = k;
        }
        // Nearly in order already (keys fall at similar rates): a merge of runs.
        out.sort_by_key(|entry| entry.0);
        gpus
    }
}

/// LAS's running jobs grouped by their GPUs (the slope of attained service in
/// time), each group ordered by `(intercept, id)` where a job's attained
/// service at `now` is `slope x now + intercept`.
#[derive(Clone, Debug, Default)]
pub(crate) struct LasIndex {
    pub(crate) set: RunningSet,
    /// `(slope, intercept)` of each running job, by job index.
    line: Vec<(u64, i128)>,
    groups: BTreeMap<u64, BTreeMap<(i128, JobId), JobSize>>,
    /// Where each group's contested jobs start and end in a pass's list, and
    /// the list merged and the jobs outside the longest run (buffers kept to
    /// reuse their allocations).
    runs: Vec<(usize, usize)>,
    merged: Vec<Sized<u64>>,
    rest: Vec<Sized<u64>>,
}

impl LasIndex {
    /// Applies the change log: a job that started or was resized gets its line afresh.
    fn sync(&mut self, view: &ClusterView<'_>) {
        for &change in view.changes {
            match (self.set.apply(view, change), change) {
                (Some(true), JobChange::Started(id)) => self.insert(view.job(id)),
                (Some(false), JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id)) => {
                    self.remove(id);
                }
                (None, JobChange::Resized(id)) if self.set.contains(id) => {
                    self.remove(id);
                    self.insert(view.job(id));
                }
                _ => {}
            }
        }
    }

    /// Attained GPU-µs at `now` = attained_before + (now - gpus_since) x gpus
    /// = gpus x now + (attained_before - gpus x gpus_since).
    fn insert(&mut self, job: &JobState) {
        let id = job.id();
        let slope = job.gpus.len() as u64;
        let intercept =
            i128::from(job.attained_before_gpu_us) - i128::from(slope) * i128::from(job.gpus_since.0);
        if id.index() >= self.line.len() {
            self.line.resize(id.index() + 1, (0, 0));
        }
        self.line[id.index()] = (slope, intercept);
        let size = JobSize { gpus: self.set.gpus(id), tenant: job.spec.tenant };
        self.groups.entry(slope).or_default().insert((intercept, id), size);
    }

    fn remove(&mut self, id: JobId) {
        let (slope, intercept) = self.line[id.index()];
        if let Some(group) = self.groups.get_mut(&slope) {
            group.remove(&(intercept, id));
            if group.is_empty() {
                self.groups.remove(&slope);
            }
        }
    }

    /// The running jobs whose `(attained, id)` is at or after `head` at
    /// `view.now`, in key order, into `out`; returns their GPUs.
    fn contested(&mut self, view: &ClusterView<'_>, head: (u64, JobId), out: &mut Vec<Sized<u64>>) -> u64 {
        out.clear();
        self.runs.clear();
        let now = i128::from(view.now.0);
        let mut gpus = 0;
        for (&slope, group) in &self.groups {
            let at_now = i128::from(slope) * now;
            // slope x now + c >= key  <=>  c >= key - slope x now (ties by id).
            let from = (i128::from(head.0) - at_now, head.1);
            let start = out.len();
            for (&(intercept, id), &size) in group.range(from..) {
                let key = (at_now + intercept) as u64;
                debug_assert_eq!(key, view.job(id).attained_gpu_us(view.now), "{id}: LAS line");
                out.push(((key, id), size));
                gpus += u64::from(size.gpus);
            }
            if out.len() > start {
                self.runs.push((start, out.len()));
            }
        }
        // Each group's run is in key order; most jobs are in one of them (the
        // 1-GPU group, on the traces measured): the others are sorted together
        // and merged with it.
        if self.runs.len() > 1 {
            merge_runs(out, &self.runs, &mut self.merged, &mut self.rest);
            std::mem::swap(out, &mut self.merged);
        }
        gpus
    }
}

/// Merges the sorted runs `runs` (start, end) of `list` into `merged`, in
/// `(key, id)` order: the jobs outside the longest run sorted (in `rest`),
/// then merged with that run.
fn merge_runs<K: Ord + Copy>(
    list: &[Sized<K>],
    runs: &[(usize, usize)],
    merged: &mut Vec<Sized<K>>,
    rest: &mut Vec<Sized<K>>,
) {
    let Some(&(start, end)) = runs.iter().max_by_key(|&&(start, end)| end - start) else { return };
    rest.clear();
    rest.extend_from_slice(&list[..start]);
    rest.extend_from_slice(&list[end..]);
    rest.sort_unstable_by_key(|entry| entry.0);
    let (mut long, mut short) = (list[start..end].iter().peekable(), rest.iter().peekable());
    merged.clear();
    merged.reserve(list.len());
    while let (Some(a), Some(b)) = (long.peek(), short.peek()) {
        if a.0 < b.0 {
            merged.push(**a);
            long.next();
        } else {
            merged.push(**b);
            short.next();
        }
    }
    merged.extend(long);
    merged.extend(short);
}
