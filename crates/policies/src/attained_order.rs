//! Running jobs kept ordered by attained service (LAS's key), without
//! recomputing and sorting them each pass.
//!
//! A running job's attained service at `now` is `before + held * (now - since)`
//! (GPU-microseconds; `held` the GPUs it holds), so it grows at a rate set by
//! its GPU count. Jobs holding the same number of GPUs therefore never change
//! order while they run: they are kept per GPU count, ordered by the
//! time-invariant `before - held * since`, and a pass merges the few groups.
//! Kept by the policy from the engine's change log, as `WaitQueue` is for
//! waiting jobs.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use cotenant_core::{JobId, Time};

#[derive(Clone, Copy, Debug)]
struct Entry {
    held: u32,
    offset: i128,
    gpus: u32,
}

/// Running jobs by `(attained service now, id)`, with the GPUs they request in all.
#[derive(Clone, Debug, Default)]
pub struct AttainedOrder {
    /// GPUs held -> (attained - held * now, id).
    groups: BTreeMap<u32, BTreeSet<(i128, JobId)>>,
    jobs: BTreeMap<JobId, Entry>,
    gpus: u64,
    zero_gpu_jobs: usize,
}

impl AttainedOrder {
    /// Adds (or replaces) a running job that holds `held` GPUs, attained
    /// `before` GPU-microseconds before it started running at `since`, and
    /// requests `gpus` GPUs.
    pub fn insert(&mut self, id: JobId, held: u32, before: u64, since: Time, gpus: u32) {
        self.remove(id);
        let offset = i128::from(before) - i128::from(held) * i128::from(since.0);
        self.groups.entry(held).or_default().insert((offset, id));
        self.gpus += u64::from(gpus);
        self.zero_gpu_jobs += usize::from(gpus == 0);
        self.jobs.insert(id, Entry { held, offset, gpus });
    }

    pub fn remove(&mut self, id: JobId) {
        let Some(entry) = self.jobs.remove(&id) else { return };
        if let Some(group) = self.groups.get_mut(&entry.held) {
            group.remove(&(entry.offset, id));
            if group.is_empty() {
                self.groups.remove(&entry.held);
            }
        }
        self.gpus -= u64::from(entry.gpus);
        self.zero_gpu_jobs -= usize::from(entry.gpus == 0);
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
    /// GPUs the running jobs request in all.
    pub fn gpus(&self) -> u64 {
        self.gpus
    }
    /// Whether a running job requests no GPU.
    pub fn has_zero_gpu_job(&self) -> bool {
        self.zero_gpu_jobs > 0
    }

    /// Running jobs ranked after `after` at `now`, as `(attained, id)`, best first.
    pub fn behind(&self, now: Time, after: (u64, JobId)) -> Behind<'_> {
        let heads = self
            .groups
            .iter()
            .map(|(&held, group)| {
                let rate = i128::from(held) * i128::from(now.0);
                let from = (i128::from(after.0) - rate, after.1);
                (rate, group.range((Bound::Excluded(from), Bound::Unbounded)).peekable())
            })
            .collect();
        Behind { heads }
    }
}

type GroupRange<'a> = std::iter::Peekable<std::collections::btree_set::Range<'a, (i128, JobId)>>;

/// The merge of the per-GPU-count groups, in `(attained, id)` order.
#[derive(Debug)]
pub struct Behind<'a> {
    /// (held * now, the group's remaining jobs)
    heads: Vec<(i128, GroupRange<'a>)>,
}

impl Iterator for Behind<'_> {
    type Item = (u64, JobId);
    fn next(&mut self) -> Option<(u64, JobId)> {
        let mut best: Option<(i128, JobId, usize)> = None;
        for (i, (rate, group)) in self.heads.iter_mut().enumerate() {
            if let Some(&&(offset, id)) = group.peek() {
                let key = offset + *rate;
                if best.is_none_or(|(k, b, _)| (key, id) < (k, b)) {
                    best = Some((key, id, i));
                }
            }
        }
        let (key, id, i) = best?;
        self.heads[i].1.next();
        Some((key as u64, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Start { held: u32, before: u64 },
        Stop(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..5, 0u64..1000).prop_map(|(held, before)| Op::Start { held, before }),
            1 => (0usize..64).prop_map(Op::Stop),
            3 => (0u64..40).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// The groups' merge agrees with computing every running job's attained
        /// service now and sorting, after any point of the order.
        #[test]
        fn agrees_with_a_full_sort(ops in proptest::collection::vec(op(), 1..120), probe in 0u64..2000) {
            let mut index = AttainedOrder::default();
            // id -> (held, before, since)
            let mut jobs: BTreeMap<JobId, (u32, u64, Time)> = BTreeMap::new();
            let mut now = Time(0);
            let mut next_id = 0u32;
            for op in ops {
                match op {
                    Op::Start { held, before } => {
                        let id = JobId(next_id);
                        next_id += 1;
                        index.insert(id, held, before, now, held.max(1));
                        jobs.insert(id, (held, before, now));
                    }
                    Op::Stop(i) => {
                        if let Some(&id) = jobs.keys().nth(i % jobs.len().max(1)) {
                            jobs.remove(&id);
                            index.remove(id);
                        }
                    }
                    Op::Advance(by) => now = Time(now.0 + by),
                }
                let mut expected: Vec<(u64, JobId)> = jobs
                    .iter()
                    .map(|(&id, &(held, before, since))| (before + u64::from(held) * (now.0 - since.0), id))
                    .collect();
                expected.sort_unstable();
                let all: Vec<_> = index.behind(now, (0, JobId(0))).collect();
                let expected_all: Vec<_> = expected.iter().copied().filter(|&k| k > (0, JobId(0))).collect();
                prop_assert_eq!(all, expected_all);
                let after = (probe, JobId(next_id / 2));
                let got: Vec<_> = index.behind(now, after).collect();
                let expected_after: Vec<_> = expected.iter().copied().filter(|&k| k > after).collect();
                prop_assert_eq!(got, expected_after);
                prop_assert_eq!(index.len(), jobs.len());
                prop_assert_eq!(index.gpus(), jobs.values().map(|j| u64::from(j.0.max(1))).sum::<u64>());
            }
        }
    }
}
