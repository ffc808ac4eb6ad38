//! An ordered index of waiting jobs, kept by a policy from the engine's change log.
//!
//! Preemptive policies compare every active job each pass. Running jobs are at
//! most one per GPU, but waiting jobs can number in the thousands, so they are
//! kept sorted by a key that does not change while a job waits (its attained
//! service, its remaining time, its queue), and a pass walks them in order and
//! stops as soon as the cluster is full.

use std::collections::BTreeMap;

use cotenant_core::{ClusterView, JobChange, JobId, JobState, TenantId};

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
}

impl<K> Default for WaitQueue<K> {
    fn default() -> Self {
        WaitQueue {
            order: BTreeMap::new(),
            key_of: Vec::new(),
            by_size: SizeCounts::default(),
            sizes: Vec::new(),
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
