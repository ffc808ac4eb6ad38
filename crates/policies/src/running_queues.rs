//! Running jobs kept ordered by (queue, arrival), for policies whose queue
//! index depends on attained service (Tiresias' discretized LAS).
//!
//! A running job's attained service grows linearly, so the time it crosses
//! into the next lower queue is known when it starts: the index keeps each
//! job's queue and that time, and a pass re-queues only the jobs whose time
//! has come instead of recomputing and sorting every running job. Kept by the
//! policy from the engine's change log, as `WaitQueue` is for waiting jobs.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::{JobId, Time};

#[derive(Clone, Copy, Debug)]
struct Entry {
    level: u32,
    arrival: Time,
    demote_at: Option<Time>,
    gpus: u32,
}

/// Running jobs ordered by `(level, arrival, id)`, with the GPUs they request
/// in all and the times their levels next change.
#[derive(Clone, Debug, Default)]
pub struct RunningQueues {
    order: BTreeSet<(u32, Time, JobId)>,
    jobs: BTreeMap<JobId, Entry>,
    demotions: BTreeSet<(Time, JobId)>,
    gpus: u64,
    zero_gpu_jobs: usize,
}

impl RunningQueues {
    /// Adds (or replaces) a running job: its queue `level` now, its arrival,
    /// when it next moves down a queue (`None`: never while it runs) and the
    /// GPUs it requests.
    pub fn insert(&mut self, id: JobId, level: u32, arrival: Time, demote_at: Option<Time>, gpus: u32) {
        self.remove(id);
        self.order.insert((level, arrival, id));
        if let Some(at) = demote_at {
            self.demotions.insert((at, id));
        }
        self.gpus += u64::from(gpus);
        self.zero_gpu_jobs += usize::from(gpus == 0);
        self.jobs.insert(id, Entry { level, arrival, demote_at, gpus });
    }

    pub fn remove(&mut self, id: JobId) {
        let Some(entry) = self.jobs.remove(&id) else { return };
        self.order.remove(&(entry.level, entry.arrival, id));
        if let Some(at) = entry.demote_at {
            self.demotions.remove(&(at, id));
        }
        self.gpus -= u64::from(entry.gpus);
        self.zero_gpu_jobs -= usize::from(entry.gpus == 0);
    }

    /// Takes the next job whose level change is due at `now`, if any; the
    /// caller gives it its new level with [`RunningQueues::relevel`].
    pub fn pop_due(&mut self, now: Time) -> Option<JobId> {
        let &(at, id) = self.demotions.first()?;
        if at > now {
            return None;
        }
        self.demotions.pop_first();
        if let Some(entry) = self.jobs.get_mut(&id) {
            entry.demote_at = None;
        }
        Some(id)
    }

    /// Moves a job to `level`, next changing at `demote_at`.
    pub fn relevel(&mut self, id: JobId, level: u32, demote_at: Option<Time>) {
        if let Some(&Entry { arrival, gpus, .. }) = self.jobs.get(&id) {
            self.insert(id, level, arrival, demote_at, gpus);
        }
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
    /// Running jobs in a level at or below `level` (numerically at least it), best first.
    pub fn from_level(&self, level: u32) -> impl Iterator<Item = (u32, Time, JobId)> + '_ {
        self.order.range((level, Time(0), JobId(0))..).copied()
    }
    /// Level-change times, earliest first.
    pub fn demotions(&self) -> impl Iterator<Item = (Time, JobId)> + '_ {
        self.demotions.iter().copied()
    }
    pub fn level(&self, id: JobId) -> Option<u32> {
        self.jobs.get(&id).map(|e| e.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A running job's state for the brute-force check: attained service at
    /// `since`, grows by `gpus` per microsecond.
    #[derive(Clone, Copy, Debug)]
    struct Job {
        arrival: Time,
        attained: u64,
        since: Time,
        gpus: u32,
    }

    fn level(thresholds: &[u64], attained: u64) -> u32 {
        thresholds.iter().take_while(|&&t| attained >= t).count() as u32
    }

    fn attained(job: &Job, now: Time) -> u64 {
        job.attained + (now.0 - job.since.0) * u64::from(job.gpus)
    }

    fn demote_at(thresholds: &[u64], job: &Job, now: Time) -> Option<Time> {
        let a = attained(job, now);
        let bound = *thresholds.get(level(thresholds, a) as usize)?;
        (job.gpus > 0).then(|| Time(now.0 + (bound - a).div_ceil(u64::from(job.gpus))))
    }

    #[derive(Clone, Debug)]
    enum Op {
        Start { arrival: u64, attained: u64, gpus: u32 },
        Stop(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..50, 0u64..400, 0u32..5).prop_map(|(arrival, attained, gpus)| Op::Start { arrival, attained, gpus }),
            1 => (0usize..64).prop_map(Op::Stop),
            3 => (0u64..60).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// The index, updated only at starts, stops and due level changes,
        /// agrees with recomputing every running job's level and sorting.
        #[test]
        fn agrees_with_a_full_sort(
            thresholds in proptest::collection::btree_set(1u64..500, 0..4),
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let thresholds: Vec<u64> = thresholds.into_iter().collect();
            let mut index = RunningQueues::default();
            let mut jobs: BTreeMap<JobId, Job> = BTreeMap::new();
            let mut now = Time(0);
            let mut next_id = 0u32;
            for op in ops {
                match op {
                    Op::Start { arrival, attained, gpus } => {
                        let id = JobId(next_id);
                        next_id += 1;
                        let job = Job { arrival: Time(arrival), attained, since: now, gpus };
                        let a = attained;
                        index.insert(id, level(&thresholds, a), job.arrival, demote_at(&thresholds, &job, now), gpus);
                        jobs.insert(id, job);
                    }
                    Op::Stop(i) => {
                        if let Some(&id) = jobs.keys().nth(i % jobs.len().max(1)) {
                            jobs.remove(&id);
                            index.remove(id);
                        }
                    }
                    Op::Advance(by) => now = Time(now.0 + by),
                }
                while let Some(id) = index.pop_due(now) {
                    let job = jobs[&id];
                    index.relevel(id, level(&thresholds, attained(&job, now)), demote_at(&thresholds, &job, now));
                }
                let mut expected: Vec<(u32, Time, JobId)> = jobs
                    .iter()
                    .map(|(&id, job)| (level(&thresholds, attained(job, now)), job.arrival, id))
                    .collect();
                expected.sort_unstable();
                let got: Vec<_> = index.from_level(0).collect();
                prop_assert_eq!(&got, &expected);
                let from_one: Vec<_> = index.from_level(1).collect();
                let expected_one: Vec<_> = expected.iter().copied().filter(|k| k.0 >= 1).collect();
                prop_assert_eq!(from_one, expected_one);
                let next = jobs.values().filter_map(|job| demote_at(&thresholds, job, now)).min();
                prop_assert_eq!(index.demotions().next().map(|d| d.0), next);
                prop_assert_eq!(index.gpus(), jobs.values().map(|j| u64::from(j.gpus)).sum::<u64>());
                prop_assert_eq!(index.has_zero_gpu_job(), jobs.values().any(|j| j.gpus == 0));
            }
        }
    }
}
