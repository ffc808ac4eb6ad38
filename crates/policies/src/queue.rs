//! An ordered index of waiting jobs, kept by a policy from the engine's change log.
//!
//! Preemptive policies compare every active job each pass. Running jobs are at
//! most one per GPU, but waiting jobs can number in the thousands, so they are
//! kept sorted by a key that does not change while a job waits (its attained
//! service, its remaining time, its queue), and a pass walks them in order and
//! stops as soon as the cluster is full.

use std::collections::{btree_map, BTreeMap};
use std::iter::Peekable;
use std::ops::Bound;

use cotenant_core::{ClusterView, JobChange, JobId, JobState, TenantId};

use crate::greedy::{Sized, WaitingJobs};

/// What a pass reads of each job it examines (requested GPUs and tenant), kept
/// beside the job's entry in an index so that the pass does not look it up (a
/// cache miss each on a large trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobSize {
    pub(crate) gpus: u32,
    pub(crate) tenant: TenantId,
}

impl JobSize {
    /// No job's size (a table's empty slot): no job requests `u32::MAX` GPUs
    /// (`core::limits`), and a lookup that finds it reads the spec instead.
    pub(crate) const UNKNOWN: JobSize = JobSize { gpus: u32::MAX, tenant: TenantId(u32::MAX) };

    pub(crate) fn of(job: &JobState) -> JobSize {
        JobSize { gpus: job.spec.gpus, tenant: job.spec.tenant }
    }
}

/// Waiting jobs ordered by `(key, id)`, plus a count of waiting jobs by GPU
/// request so a pass can stop when nothing waiting could fit.
#[derive(Clone, Debug)]
pub struct WaitQueue<K> {
    order: BTreeMap<(K, JobId), JobSize>,
    /// Key of each waiting job, by job index.
    key_of: Vec<Option<K>>,
    by_size: SizeCounts,
    /// The size of every job this queue has held, by job index (`JobSize::UNKNOWN`
    /// for the others): a job's spec never changes, so a job that waits again
    /// (preempted) and the running-job indexes read its size here instead of
    /// from its spec, a cache miss each on a large trace.
    sizes: Vec<JobSize>,
    /// What the preemptive passes learned of the front of this queue
    /// ([`HeldPrefix`]): an insert or rekey into it cuts it short.
    held_prefix: HeldPrefix<K>,
    /// The steps of the prefix a pass is not building (kept to reuse its allocation).
    spare_steps: Vec<Step<K>>,
}

impl<K> Default for WaitQueue<K> {
    fn default() -> Self {
        WaitQueue {
            order: BTreeMap::new(),
            key_of: Vec::new(),
            by_size: SizeCounts::default(),
            sizes: Vec::new(),
            held_prefix: HeldPrefix::default(),
            spare_steps: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> WaitQueue<K> {
    /// Applies the engine's change log. `key` is asked once per job each time it
    /// starts waiting.
    pub fn sync(&mut self, view: &ClusterView<'_>, mut key: impl FnMut(&JobState) -> K) {
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) => {
                    let job = view.job(id);
                    self.insert(id, key(job), job.spec.gpus, job.spec.tenant);
                }
                JobChange::Stopped(id) => {
                    let size = self.size(view, id);
                    self.insert(id, key(view.job(id)), size.gpus, size.tenant);
                }
                JobChange::Started(id) | JobChange::Completed(id) | JobChange::Ended(id) => {
                    self.remove(id);
                }
                JobChange::Resized(_) => {}
            }
        }
        debug_assert_eq!(self.order.len(), view.pending.len(), "wait queue out of sync with the engine");
    }

    pub fn insert(&mut self, id: JobId, key: K, gpus: u32, tenant: TenantId) {
        if id.index() >= self.key_of.len() {
            self.key_of.resize(id.index() + 1, None);
        }
        let size = JobSize { gpus, tenant };
        if id.index() >= self.sizes.len() {
            self.sizes.resize(id.index() + 1, JobSize::UNKNOWN);
        }
        self.sizes[id.index()] = size;
        if let Some(old) = self.key_of[id.index()].replace(key) {
            if let Some(before) = self.order.remove(&(old, id)) {
                self.by_size.remove(before.gpus);
            }
        }
        self.by_size.add(gpus);
        self.held_prefix.cut_before((key, id));
        self.order.insert((key, id), size);
    }

    /// Removes a job if it waits (its GPUs as recorded when it was inserted).
    pub fn remove(&mut self, id: JobId) {
        if let Some(key) = self.key_of.get_mut(id.index()).and_then(Option::take) {
            if let Some(size) = self.order.remove(&(key, id)) {
                self.by_size.remove(size.gpus);
            }
        }
    }

    /// Changes the key of a waiting job (for example a starvation promotion).
    pub fn rekey(&mut self, id: JobId, key: K) {
        if let Some(old) = self.key_of.get_mut(id.index()).and_then(Option::as_mut) {
            if let Some(size) = self.order.remove(&(*old, id)) {
                self.held_prefix.cut_before((key, id));
                self.order.insert((key, id), size);
            }
            *old = key;
        }
    }

    /// The requested GPUs and tenant of `id`: as recorded when it last entered
    /// this queue, else (a job it never held) from its spec.
    pub(crate) fn size(&self, view: &ClusterView<'_>, id: JobId) -> JobSize {
        match self.sizes.get(id.index()) {
            Some(&size) if size != JobSize::UNKNOWN => size,
            _ => JobSize::of(view.job(id)),
        }
    }

    pub fn key(&self, id: JobId) -> Option<K> {
        self.key_of.get(id.index()).copied().flatten()
    }
    pub fn len(&self) -> usize {
        self.order.len()
    }
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
    /// Smallest GPU request among waiting jobs.
    pub fn smallest_request(&self) -> Option<u32> {
        self.by_size.smallest()
    }
    /// Waiting jobs, best first.
    pub fn iter(&self) -> impl Iterator<Item = (K, JobId)> + '_ {
        self.order.keys().copied()
    }
    /// Waiting jobs, best first, with their GPUs and tenants.
    pub(crate) fn iter_sized(&self) -> impl Iterator<Item = ((K, JobId), JobSize)> + '_ {
        self.order.iter().map(|(&entry, &size)| (entry, size))
    }

    /// Forgets what the passes learned of the queue's front (a pass that
    /// told verdicts without [`QueueWalk`] may have changed them).
    pub(crate) fn forget_held_prefix(&mut self) {
        self.held_prefix.end = None;
        self.held_prefix.steps.clear();
    }

    /// A walk over the waiting jobs, best first, for one preemptive pass that
    /// tells its verdicts through `HeldVerdicts`: it may jump over jobs the
    /// engine holds `LowerPriority` for and that are too wide ([`HeldPrefix`]).
    /// [`WaitQueue::end_walk`] keeps what it learned.
    pub(crate) fn walk(&mut self) -> QueueWalk<'_, K> {
        let old = std::mem::take(&mut self.held_prefix);
        let mut steps = std::mem::take(&mut self.spare_steps);
        steps.clear();
        // With more waiting than a pass may examine, the pass counts what it
        // passes over (`greedy::SCAN_LIMIT`): it walks them all.
        let jump_below = match old.steps.first() {
            Some(&(_, gpus)) if self.order.len() <= crate::greedy::SCAN_LIMIT => gpus,
            _ => 0,
        };
        let queue: &WaitQueue<K> = self;
        QueueWalk {
            queue,
            entries: queue.order.range::<(K, JobId), _>(..).peekable(),
            new: HeldPrefix { end: None, steps },
            old,
            jump_below,
            building: true,
            step_below: u32::MAX,
            cut: None,
        }
    }

    /// Keeps the prefix a walk learned.
    pub(crate) fn end_walk(&mut self, learned: (HeldPrefix<K>, Vec<Step<K>>)) {
        (self.held_prefix, self.spare_steps) = learned;
    }
}

/// One step of a [`HeldPrefix`]: from this `(key, id)` on (until the next
/// step), every job of the prefix requests at least this many GPUs.
pub(crate) type Step<K> = ((K, JobId), u32);

/// A front of a wait queue (every waiting job up to `end`, in queue order)
/// whose jobs all hold [`WaitReason::LowerPriority`](cotenant_core::WaitReason)
/// in the engine, with lower bounds on their GPU requests: `steps`, in queue
/// order with strictly falling GPUs, the first at or before the prefix's first
/// job; each job requests at least the GPUs of the last step at or before it.
///
/// A preemptive pass's capacity only falls as it goes, and it tells a waiting
/// job too wide for what is left `LowerPriority`, which changes nothing for a
/// job that holds it. So a pass at capacity `c` may go straight to the first
/// step requesting at most `c` (past the prefix when there is none): every job
/// before it is too wide and holds its verdict. That is Tiresias's and LAS's
/// long tail at scale: after each completion the pass walked past thousands of
/// multi-GPU jobs to the first one-GPU job.
///
/// The passes build it (`QueueWalk`); an insert or rekey cuts it before the
/// new entry, and a job that starts leaves it (its steps stay valid bounds).
#[derive(Clone, Debug)]
pub(crate) struct HeldPrefix<K> {
    end: Option<PrefixEnd<K>>,
    steps: Vec<Step<K>>,
}

impl<K> Default for HeldPrefix<K> {
    fn default() -> Self {
        HeldPrefix { end: None, steps: Vec::new() }
    }
}

/// Where a [`HeldPrefix`] ends.
#[derive(Clone, Copy, Debug)]
enum PrefixEnd<K> {
    /// At this entry, which belongs to it.
    Through((K, JobId)),
    /// Just before this entry.
    Before((K, JobId)),
}

impl<K: Ord + Copy> HeldPrefix<K> {
    fn contains(&self, entry: (K, JobId)) -> bool {
        match self.end {
            Some(PrefixEnd::Through(end)) => entry <= end,
            Some(PrefixEnd::Before(end)) => entry < end,
            None => false,
        }
    }

    /// Ends the prefix before `entry` if it reaches that far.
    fn cut_before(&mut self, entry: (K, JobId)) {
        if self.contains(entry) {
            self.end = Some(PrefixEnd::Before(entry));
            let keep = self.steps.partition_point(|&(at, _)| at < entry);
            self.steps.truncate(keep);
        }
    }

    /// The GPUs every job from `entry` on requests, until the next step.
    fn floor_at(&self, entry: (K, JobId)) -> Option<u32> {
        let after = self.steps.partition_point(|&(at, _)| at <= entry);
        after.checked_sub(1).map(|i| self.steps[i].1)
    }
}

/// A preemptive pass's walk over a [`WaitQueue`] ([`WaitQueue::walk`]): the
/// waiting jobs best first, jumping over held, too-wide ones, while it learns
/// the prefix for the next pass from the verdicts the pass reports.
pub(crate) struct QueueWalk<'q, K> {
    queue: &'q WaitQueue<K>,
    entries: Peekable<btree_map::Range<'q, (K, JobId), JobSize>>,
    /// The prefix the earlier passes learned, read by the jumps.
    old: HeldPrefix<K>,
    /// The prefix this pass learns: every job it has gone by, while `building`.
    new: HeldPrefix<K>,
    /// A capacity below this may jump: the first step's GPUs at first, then
    /// the bound where the last jump (or the last try) left the walk; 0 once
    /// the walk is past the old prefix or may not jump.
    jump_below: u32,
    /// Whether this pass learns a prefix (not when it checks tenant limits).
    building: bool,
    /// A job gone by requesting fewer GPUs than this adds a step (the last
    /// step's GPUs; `u32::MAX` before the first; 0 when not `building`).
    step_below: u32,
    /// The first job chosen to start that found no placement.
    cut: Option<(K, JobId)>,
}

impl<K: Ord + Copy> QueueWalk<'_, K> {
    /// Adds a step to the prefix being learned, when it lowers the bound.
    #[inline]
    fn step(&mut self, at: (K, JobId), gpus: u32) {
        if gpus < self.step_below {
            self.new.steps.push((at, gpus));
            self.step_below = gpus;
        }
    }

    /// The prefix being learned takes in the old prefix's jobs from `from`
    /// (which it holds, with `floor` the bound there) up to `until` (through
    /// its end without one): they are gone by, held and too wide.
    fn take_in_old(&mut self, from: (K, JobId), floor: u32, until: Option<(K, JobId)>) {
        self.step(from, floor);
        for i in 0..self.old.steps.len() {
            let (at, gpus) = self.old.steps[i];
            if at > from && until.is_none_or(|until| at < until) {
                self.step(at, gpus);
            }
        }
    }

    /// Goes past the jobs the old prefix shows too wide for `capacity` (and
    /// held), if the next one is in it and a step lies ahead of it.
    fn jump(&mut self, capacity: u32) {
        let Some(&(&from, _)) = self.entries.peek() else {
            self.jump_below = 0;
            return;
        };
        if !self.old.contains(from) {
            self.jump_below = 0;
            return;
        }
        let Some(floor) = self.old.floor_at(from) else {
            debug_assert!(false, "a job in the held prefix before its first step");
            self.jump_below = 0;
            return;
        };
        let to = self.old.steps.iter().copied().find(|&(_, gpus)| gpus <= capacity);
        if to.is_some_and(|(to, _)| to <= from) {
            // The bound here is at most `capacity`: only a smaller capacity
            // (or a job further on) can jump again.
            debug_assert!(floor <= capacity);
            self.jump_below = floor;
            return;
        }
        if self.building {
            self.take_in_old(from, floor, to.map(|(to, _)| to));
        }
        let order = &self.queue.order;
        match to {
            Some((to, gpus)) => {
                self.entries = order.range(to..).peekable();
                self.jump_below = gpus;
            }
            None => {
                self.entries = match self.old.end.expect("the prefix contains a job") {
                    PrefixEnd::Through(end) => order.range((Bound::Excluded(end), Bound::Unbounded)),
                    PrefixEnd::Before(end) => order.range(end..),
                }
                .peekable();
                self.jump_below = 0;
            }
        }
        #[cfg(test)]
        JUMPS.with(|jumps| jumps.set(jumps.get() + 1));
    }

    /// What the next pass may rely on: the jobs this pass went by (each now
    /// holds `LowerPriority` or is starting: up to the next job it would have
    /// read), then the rest of the old prefix from there; cut before a job
    /// that got another verdict.
    pub(crate) fn finish(mut self) -> (HeldPrefix<K>, Vec<Step<K>>) {
        if self.building {
            let next = self.entries.peek().map(|(&next, _)| next);
            self.new.end = match next {
                Some(next) => Some(PrefixEnd::Before(next)),
                None => self.queue.order.last_key_value().map(|(&last, _)| PrefixEnd::Through(last)),
            };
            if let Some(next) = next.filter(|&next| self.old.contains(next)) {
                if let Some(floor) = self.old.floor_at(next) {
                    self.take_in_old(next, floor, None);
                    self.new.end = self.old.end;
                }
            }
        }
        if let Some(cut) = self.cut {
            self.new.cut_before(cut);
        }
        if self.new.steps.is_empty() {
            self.new.end = None;
        }
        (self.new, self.old.steps)
    }
}

impl<K: Ord + Copy> WaitingJobs<K> for QueueWalk<'_, K> {
    fn peek(&mut self) -> Option<Sized<K>> {
        self.entries.peek().map(|(&entry, &size)| (entry, size))
    }

    fn next(&mut self) -> Option<Sized<K>> {
        self.entries.next().map(|(&entry, &size)| (entry, size))
    }

    #[inline]
    fn skip_wider(&mut self, capacity: u32) {
        if capacity < self.jump_below {
            self.jump(capacity);
        }
    }

    #[inline]
    fn held(&mut self, entry: (K, JobId), gpus: u32) {
        self.step(entry, gpus);
    }

    fn start_failed(&mut self, id: JobId) {
        if let Some(key) = self.queue.key(id) {
            self.cut = Some(self.cut.map_or((key, id), |cut| cut.min((key, id))));
        }
    }

    fn tenant_limits(&mut self) {
        self.jump_below = 0;
        self.building = false;
        self.step_below = 0;
    }
}

#[cfg(test)]
thread_local! {
    /// Jumps over held prefixes on this thread (tests check that they happen).
    pub(crate) static JUMPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Sizes below this are counted in an array with a bitset of the non-zero
/// counts; larger ones (rare) in a map.
const SMALL_SIZES: u32 = 1024;

/// How many waiting jobs request each GPU count, and the smallest count with
/// any: an array and a bitset for the common sizes (no tree node per update),
/// a map for the rest.
#[derive(Clone, Debug, Default)]
struct SizeCounts {
    small: Vec<u32>,
    /// Bit `s` set: `small[s] > 0`.
    small_set: Vec<u64>,
    large_count: BTreeMap<u32, u32>,
}

impl SizeCounts {
    fn add(&mut self, gpus: u32) {
        if gpus < SMALL_SIZES {
            let s = gpus as usize;
            if s >= self.small.len() {
                self.small.resize(s + 1, 0);
                self.small_set.resize(s / 64 + 1, 0);
            }
            self.small[s] += 1;
            self.small_set[s / 64] |= 1 << (s % 64);
        } else {
            *self.large_count.entry(gpus).or_default() += 1;
        }
    }

    fn remove(&mut self, gpus: u32) {
        if gpus < SMALL_SIZES {
            let s = gpus as usize;
            if let Some(count) = self.small.get_mut(s).filter(|count| **count > 0) {
                *count -= 1;
                if *count == 0 {
                    self.small_set[s / 64] &= !(1 << (s % 64));
                }
            }
        } else if let Some(count) = self.large_count.get_mut(&gpus) {
            *count -= 1;
            if *count == 0 {
                self.large_count.remove(&gpus);
            }
        }
    }

    fn smallest(&self) -> Option<u32> {
        for (w, &word) in self.small_set.iter().enumerate() {
            if word != 0 {
                return Some(w as u32 * 64 + word.trailing_zeros());
            }
        }
        self.large_count.keys().next().copied()
    }
}
