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
    job.remaining_estimate(now).map_or(u64::MAX, |s| s.0)
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
    fn sync(&mut self, view: &ClusterView<'_>, queue: &WaitQueue<u64>) {
        let key = |job: &JobState| remaining_us(job, view.now);
        for &change in view.changes {
            match (self.set.apply(view, queue, change), change) {
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
        // The cached order is not the fresh one (keys cached at different times
        // have fallen by different amounts): a full sort, in place (the keys
        // are distinct, so an unstable sort gives the one order).
        out.sort_unstable_by_key(|entry| entry.0);
        gpus
    }
}

/// LAS's running jobs grouped by their GPUs (the slope of attained service in
/// time), each group ordered by `(intercept, id)` where a job's attained
/// service at `now` is `slope x now + intercept`.
///
/// Intercepts are kept as `i64` (a 16-byte key, half the tree of an `i128`
/// one); a job whose intercept does not fit (`OVERFLOWED`: a slope times a
/// start time past 2^63, never on a real trace) is counted instead, and while
/// one runs the passes rank every running job (`KeyIndex::exact`).
#[derive(Clone, Debug, Default)]
pub(crate) struct LasIndex {
    pub(crate) set: RunningSet,
    /// `(slope, intercept)` of each running job, by job index.
    line: Vec<(u64, i64)>,
    groups: BTreeMap<u64, BTreeMap<(i64, JobId), JobSize>>,
    /// Running jobs whose intercept is `OVERFLOWED` (in no group).
    overflowed: usize,
    /// Where each group's contested jobs start and end in a pass's list, and
    /// the list merged (buffers kept to reuse their allocations).
    runs: Vec<(usize, usize)>,
    merged: Vec<Sized<u64>>,
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
    fn insert(&mut self, job: &JobState, tenant: cotenant_core::TenantId) {
        let id = job.id();
        let slope = job.gpus.len() as u64;
        let intercept =
            i128::from(job.attained_before_gpu_us) - i128::from(slope) * i128::from(job.gpus_since.0);
        let intercept = i64::try_from(intercept).unwrap_or(OVERFLOWED);
        if id.index() >= self.line.len() {
            self.line.resize(id.index() + 1, (0, 0));
        }
        self.line[id.index()] = (slope, intercept);
        if intercept == OVERFLOWED {
            self.overflowed += 1;
            return;
        }
        let size = JobSize { gpus: self.set.gpus(id), tenant };
        self.groups.entry(slope).or_default().insert((intercept, id), size);
    }

    fn remove(&mut self, id: JobId) {
        let (slope, intercept) = self.line[id.index()];
        if intercept == OVERFLOWED {
            self.overflowed -= 1;
            return;
        }
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
            // slope x now + c >= key  <=>  c >= key - slope x now (ties by id);
            // every intercept in a group lies strictly between i64::MIN and i64::MAX + 1.
            let from = i128::from(head.0) - at_now;
            let Ok(from) = i64::try_from(from.max(i128::from(i64::MIN))) else { continue };
            let start = out.len();
            for (&(intercept, id), &size) in group.range((from, head.1)..) {
                let key = (at_now + i128::from(intercept)) as u64;
                debug_assert_eq!(key, view.job(id).attained_gpu_us(view.now), "{id}: LAS line");
                out.push(((key, id), size));
                gpus += u64::from(size.gpus);
            }
            if out.len() > start {
                self.runs.push((start, out.len()));
            }
        }
        // Each group's run is in key order: they are merged (no sort), taking
        // from one run as long as it stays ahead of every other.
        if self.runs.len() > 1 {
            merge_runs(out, &mut self.runs, &mut self.merged);
            std::mem::swap(out, &mut self.merged);
        }
        gpus
    }
}

/// Merges the sorted runs `runs` (start, end) of `list` into `merged`, in
/// `(key, id)` order (keys are distinct), consuming `runs`: the run whose head
/// is least gives every entry ahead of the next least head in one step, so a
/// merge costs one comparison per entry plus O(runs) per change of run, and
/// most entries are in one run (the 1-GPU group, on the traces measured).
fn merge_runs<K: Ord + Copy>(list: &[Sized<K>], runs: &mut Vec<(usize, usize)>, merged: &mut Vec<Sized<K>>) {
    merged.clear();
    merged.reserve(list.len());
    runs.retain(|&(start, end)| start < end);
    while runs.len() > 1 {
        // The run with the least head, and the least head of the others.
        let (mut least, mut second) = (0, 1);
        if list[runs[1].0].0 < list[runs[0].0].0 {
            (least, second) = (1, 0);
        }
        for r in 2..runs.len() {
            let head = list[runs[r].0].0;
            if head < list[runs[least].0].0 {
                (least, second) = (r, least);
            } else if head < list[runs[second].0].0 {
                second = r;
            }
        }
        let bound = list[runs[second].0].0;
        let (start, end) = runs[least];
        let taken = list[start..end].iter().take_while(|entry| entry.0 < bound).count();
        merged.extend_from_slice(&list[start..start + taken]);
        if start + taken == end {
            runs.swap_remove(least);
        } else {
            runs[least].0 = start + taken;
        }
    }
    if let Some(&(start, end)) = runs.first() {
        merged.extend_from_slice(&list[start..end]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::TenantId;
    use proptest::prelude::*;

    proptest! {
        /// Merging a list's sorted runs gives the list sorted, whatever the
        /// runs' number, lengths and interleaving.
        #[test]
        fn merge_runs_sorts_the_list(
            groups in proptest::collection::vec(proptest::collection::btree_set(0u64..200, 0..40), 1..8),
        ) {
            let mut list: Vec<Sized<u64>> = Vec::new();
            let mut runs = Vec::new();
            for (g, keys) in groups.iter().enumerate() {
                let start = list.len();
                let size = JobSize { gpus: g as u32 + 1, tenant: TenantId(0) };
                list.extend(keys.iter().map(|&k| ((k, JobId(g as u32)), size)));
                runs.push((start, list.len()));
            }
            let mut expected = list.clone();
            expected.sort_unstable_by_key(|entry| entry.0);
            let mut merged = Vec::new();
            merge_runs(&list, &mut runs, &mut merged);
            prop_assert_eq!(merged, expected);
        }
    }
}
