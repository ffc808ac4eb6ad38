//! An ordered index of waiting jobs, kept by a policy from the engine's change log.
//!
//! Preemptive policies compare every active job each pass. Running jobs are at
//! most one per GPU, but waiting jobs can number in the thousands, so they are
//! kept sorted by a key that does not change while a job waits (its attained
//! service, its remaining time, its queue), and a pass walks them in order and
//! stops as soon as the cluster is full.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::{ClusterView, JobChange, JobId, JobState};

/// Waiting jobs ordered by `(key, id)`, plus a count of waiting jobs by GPU
/// request so a pass can stop when nothing waiting could fit.
#[derive(Clone, Debug)]
pub struct WaitQueue<K> {
    order: BTreeSet<(K, JobId)>,
    /// Key of each waiting job, by job index.
    key_of: Vec<Option<K>>,
    by_size: BTreeMap<u32, u32>,
}

impl<K> Default for WaitQueue<K> {
    fn default() -> Self {
        WaitQueue { order: BTreeSet::new(), key_of: Vec::new(), by_size: BTreeMap::new() }
    }
}

impl<K: Ord + Copy> WaitQueue<K> {
    /// Applies the engine's change log. `key` is asked once per job each time it
    /// starts waiting.
    pub fn sync(&mut self, view: &ClusterView<'_>, mut key: impl FnMut(&JobState) -> K) {
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) | JobChange::Stopped(id) => {
                    let job = view.job(id);
                    self.insert(id, key(job), job.spec.gpus);
                }
                JobChange::Started(id) | JobChange::Completed(id) | JobChange::Ended(id) => {
                    self.remove(id, view.job(id).spec.gpus);
                }
                JobChange::Resized(_) => {}
            }
        }
        debug_assert_eq!(self.order.len(), view.pending.len(), "wait queue out of sync with the engine");
    }

    pub fn insert(&mut self, id: JobId, key: K, gpus: u32) {
        if id.index() >= self.key_of.len() {
            self.key_of.resize(id.index() + 1, None);
        }
        if let Some(old) = self.key_of[id.index()].replace(key) {
            self.order.remove(&(old, id));
        } else {
            *self.by_size.entry(gpus).or_default() += 1;
        }
        self.order.insert((key, id));
    }

    pub fn remove(&mut self, id: JobId, gpus: u32) {
        if let Some(key) = self.key_of.get_mut(id.index()).and_then(Option::take) {
            self.order.remove(&(key, id));
            if let Some(count) = self.by_size.get_mut(&gpus) {
                *count -= 1;
                if *count == 0 {
                    self.by_size.remove(&gpus);
                }
            }
        }
    }

    /// Changes the key of a waiting job (for example a starvation promotion).
    pub fn rekey(&mut self, id: JobId, key: K) {
        if let Some(old) = self.key_of.get_mut(id.index()).and_then(Option::as_mut) {
            self.order.remove(&(*old, id));
            *old = key;
            self.order.insert((key, id));
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
        self.by_size.keys().next().copied()
    }
    /// Waiting jobs, best first.
    pub fn iter(&self) -> impl Iterator<Item = (K, JobId)> + '_ {
        self.order.iter().copied()
    }
}
