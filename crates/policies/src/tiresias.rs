//! Tiresias' discretized two-dimensional LAS (2D-LAS), preemptive.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::placement::Placement;
use cotenant_core::{
    Action, ClusterView, Decision, JobChange, JobId, JobState, Phase, Policy, PolicyCx, Span, Time,
};

use crate::greedy::{contest, preemptive_pass, settled_is_safe, waiting_after};
use crate::queue::WaitQueue;
use crate::running_queues::RunningQueues;

/// Tiresias (NSDI'19) with the discretized 2D-LAS rule: a job's priority is its
/// attained service in GPU-seconds (GPUs x time, the "two dimensions"),
/// discretized into queues by `thresholds`; queue 0 is served first, and jobs
/// within a queue in submission order (FIFO). Jobs move down a queue when their
/// attained service crosses a threshold, at the exact time it happens (a timer).
///
/// Starvation guard: a job that has waited `starvation_knob` times its own
/// run time so far is promoted to queue 0, with its
/// attained service counted afresh from the promotion.
#[derive(Clone, Debug)]
pub struct Tiresias {
    pub placement: Placement,
    /// Queue boundaries in GPU-seconds, ascending.
    pub thresholds_gpu_secs: Vec<u64>,
    /// Promote after waiting this many times the job's run time; 0 disables.
    pub starvation_knob: u32,
    queue: WaitQueue<(u32, Time)>,
    /// Attained service (GPU-us) at a job's last promotion.
    promoted_at: BTreeMap<JobId, u64>,
    promotions: BTreeSet<(Time, JobId)>,
    promotion_of: BTreeMap<JobId, Time>,
    /// Running jobs by (queue, arrival), re-queued when their demotion times come.
    index: RunningQueues,
    /// Running jobs holding a different number of GPUs than they requested
    /// (the index assumes they do not; a pass with any takes the full path).
    irregular: BTreeSet<JobId>,
    /// Running jobs with their keys, refilled each pass (kept to reuse its allocation).
    running: Vec<(RunningKey, JobId)>,
    /// When each running job would next cross into a lower queue, refilled each pass.
    demotions: Vec<(Time, JobId)>,
    next: Option<Time>,
}

/// A job's rank: (queue, waiting, arrival). Within a queue running jobs
/// (`false`) rank ahead of waiting ones.
type RunningKey = (u32, bool, Time);

impl Tiresias {
    pub fn new(placement: Placement, thresholds_gpu_secs: Vec<u64>, starvation_knob: u32) -> Tiresias {
        Tiresias {
            placement,
            thresholds_gpu_secs,
            starvation_knob,
            queue: WaitQueue::default(),
            promoted_at: BTreeMap::new(),
            promotions: BTreeSet::new(),
            promotion_of: BTreeMap::new(),
            index: RunningQueues::default(),
            irregular: BTreeSet::new(),
            running: Vec::new(),
            demotions: Vec::new(),
            next: None,
        }
    }

    fn effective_attained_us(&self, job: &JobState, now: Time) -> u64 {
        let base = self.promoted_at.get(&job.id()).copied().unwrap_or(0);
        job.attained_gpu_us(now).saturating_sub(base)
    }

    fn level(&self, attained_us: u64) -> u32 {
        let secs = attained_us / cotenant_core::MICROS_PER_SECOND;
        self.thresholds_gpu_secs.iter().take_while(|&&t| secs >= t).count() as u32
    }

    fn key(&self, job: &JobState, now: Time) -> (u32, Time) {
        (self.level(self.effective_attained_us(job, now)), job.spec.arrival)
    }

    /// When a waiting job becomes eligible for promotion, if ever.
    fn promotion_time(&self, job: &JobState) -> Option<Time> {
        let ran = job.run_before;
        if self.starvation_knob == 0 || ran == Span::ZERO {
            return None;
        }
        Some(job.phase_since + Span(ran.0.saturating_mul(self.starvation_knob as u64)))
    }

    fn sync(&mut self, view: &ClusterView<'_>) {
        let now = view.now;
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) | JobChange::Stopped(id) => {
                    let job = view.job(id);
                    self.queue.insert(id, self.key(job, now), job.spec.gpus);
                    if let Some(at) = self.promotion_time(job) {
                        self.promotions.insert((at, id));
                        self.promotion_of.insert(id, at);
                    }
                    self.index.remove(id);
                    self.irregular.remove(&id);
                }
                JobChange::Started(id) | JobChange::Completed(id) | JobChange::Ended(id) => {
                    let job = view.job(id);
                    self.queue.remove(id, job.spec.gpus);
                    if let Some(at) = self.promotion_of.remove(&id) {
                        self.promotions.remove(&(at, id));
                    }
                    if !matches!(job.phase, Phase::Running) {
                        self.promoted_at.remove(&id);
                    }
                    self.index.remove(id);
                    self.irregular.remove(&id);
                    if job.is_running() {
                        let attained = self.effective_attained_us(job, now);
                        let held = job.gpus.len() as u32;
                        let demote_at = self.demotion_time(attained, held, now);
                        self.index.insert(
                            id,
                            self.level(attained),
                            job.spec.arrival,
                            demote_at,
                            job.spec.gpus,
                        );
                        if held != job.spec.gpus {
                            self.irregular.insert(id);
                        }
                    }
                }
            }
        }
        self.promote_due(view);
        // Running jobs whose attained service crossed a threshold move down.
        while let Some(id) = self.index.pop_due(now) {
            let job = view.job(id);
            let attained = self.effective_attained_us(job, now);
            let demote_at = self.demotion_time(attained, job.gpus.len() as u32, now);
            self.index.relevel(id, self.level(attained), demote_at);
        }
        debug_assert_eq!(self.index.len(), view.running.len(), "running index out of sync with the engine");
    }

    fn promote_due(&mut self, view: &ClusterView<'_>) {
        while let Some(&(at, id)) = self.promotions.first() {
            if at > view.now {
                break;
            }
            self.promotions.pop_first();
            self.promotion_of.remove(&id);
            let job = view.job(id);
            if job.phase != Phase::Pending {
                continue;
            }
            self.promoted_at.insert(id, job.attained_gpu_us(view.now));
            self.queue.rekey(id, (0, job.spec.arrival));
        }
    }

    /// When a job with `attained_us` of effective service on `gpus` GPUs
    /// crosses into the next lower queue if it runs from `now`; `None` in the
    /// last queue or without GPUs.
    fn demotion_time(&self, attained_us: u64, gpus: u32, now: Time) -> Option<Time> {
        let gpus = u64::from(gpus);
        if gpus == 0 {
            return None;
        }
        let level = self.level(attained_us) as usize;
        let bound_us = self.thresholds_gpu_secs.get(level)? * cotenant_core::MICROS_PER_SECOND;
        Some(now + Span((bound_us - attained_us).div_ceil(gpus)))
    }

    /// Earliest time one of the jobs that run after `decision` crosses into a
    /// lower queue: the running jobs it does not preempt (their times are in
    /// `running`, earliest first when `sorted`, else in any order) and the
    /// jobs it starts.
    fn next_demotion(
        &self,
        view: &ClusterView<'_>,
        decision: &Decision,
        running: impl Iterator<Item = (Time, JobId)>,
        sorted: bool,
    ) -> Option<Time> {
        let mut preempted: Vec<JobId> = decision
            .actions
            .iter()
            .filter_map(|a| if let Action::Preempt { job } = a { Some(*job) } else { None })
            .collect();
        preempted.sort_unstable();
        let mut running = running.filter(|(_, id)| preempted.binary_search(id).is_err()).map(|(at, _)| at);
        let running = if sorted { running.next() } else { running.min() };
        let started = decision.actions.iter().filter_map(|a| {
            let Action::Start { job, .. } = a else { return None };
            let job = view.job(*job);
            self.demotion_time(self.effective_attained_us(job, view.now), job.spec.gpus, view.now)
        });
        running.into_iter().chain(started).min()
    }
}

impl Tiresias {
    /// Waiting jobs with their ranks, best first.
    fn waiting(&self) -> std::iter::Peekable<impl Iterator<Item = (RunningKey, JobId)> + '_> {
        self.queue.iter().map(|((level, arrival), id)| ((level, true, arrival), id)).peekable()
    }

    /// The pass from the running index: running jobs of the best waiting job's
    /// queue or a better one rank ahead of every waiting job and all stay, so
    /// only those of lower queues are read, already in order.
    fn fast_pass(&mut self, view: &ClusterView<'_>) -> Decision {
        let mut running = std::mem::take(&mut self.running);
        running.clear();
        let mut waiting = self.waiting();
        let behind = waiting.peek().and_then(|&((level, _, _), _)| level.checked_add(1));
        let mut contested_gpus = 0u64;
        if let Some(level) = behind {
            for (level, arrival, id) in self.index.from_level(level) {
                contested_gpus += u64::from(view.job(id).spec.gpus);
                running.push(((level, false, arrival), id));
            }
        }
        // At most the GPUs that are up (`settled_is_safe`).
        let settled_gpus = (self.index.gpus() - contested_gpus) as u32;
        let decision =
            contest(view, settled_gpus, &running, waiting, self.queue.smallest_request(), self.placement);
        self.running = running;
        decision
    }

    /// The pass recomputing every running job's key and demotion time.
    fn full_pass(&mut self, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        let mut running = std::mem::take(&mut self.running);
        running.clear();
        self.demotions.clear();
        for job in view.running_jobs() {
            let attained = self.effective_attained_us(job, now);
            running.push(((self.level(attained), false, job.spec.arrival), job.id()));
            if let Some(at) = self.demotion_time(attained, job.spec.gpus, now) {
                self.demotions.push((at, job.id()));
            }
        }
        let decision = preemptive_pass(
            view,
            &mut running,
            self.waiting(),
            self.queue.smallest_request(),
            self.placement,
        );
        self.running = running;
        decision
    }
}

impl Policy for Tiresias {
    fn name(&self) -> &'static str {
        "tiresias"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.sync(view);
        // Within a queue, running jobs rank ahead of waiting ones (Tiresias keeps a
        // running job ahead of the pending jobs of its own queue), so a job is only
        // ever preempted by a job of a higher-priority queue.
        let fast = self.irregular.is_empty()
            && settled_is_safe(view, self.index.gpus(), self.index.has_zero_gpu_job());
        let decision = if fast { self.fast_pass(view) } else { self.full_pass(view) };
        let anyone_waits = waiting_after(self.queue.len(), &decision) > 0;
        let promotion = self.promotions.first().map(|&(at, _)| at);
        let demotion = match (anyone_waits, fast) {
            (false, _) => None,
            (true, true) => self.next_demotion(view, &decision, self.index.demotions(), true),
            (true, false) => self.next_demotion(view, &decision, self.demotions.iter().copied(), false),
        };
        self.next = [promotion, demotion].into_iter().flatten().min();
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_world::{case, run};
    use proptest::prelude::*;

    /// Tiresias deciding every pass by both the running index and the full
    /// recomputation, asserting that decisions and timers agree.
    struct Checked {
        inner: Tiresias,
    }

    impl Policy for Checked {
        fn name(&self) -> &'static str {
            "checked-tiresias"
        }
        fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
            let t = &mut self.inner;
            t.sync(view);
            let full = t.full_pass(view);
            let waits = waiting_after(t.queue.len(), &full) > 0;
            let full_demotion =
                if waits { t.next_demotion(view, &full, t.demotions.iter().copied(), false) } else { None };
            if t.irregular.is_empty() && settled_is_safe(view, t.index.gpus(), t.index.has_zero_gpu_job()) {
                let fast = t.fast_pass(view);
                assert_eq!(fast, full, "at {:?}", view.now);
                let fast_demotion =
                    if waits { t.next_demotion(view, &fast, t.index.demotions(), true) } else { None };
                assert_eq!(fast_demotion, full_demotion, "at {:?}", view.now);
            }
            let promotion = t.promotions.first().map(|&(at, _)| at);
            t.next = [promotion, full_demotion].into_iter().flatten().min();
            full
        }
        fn next_round(&self, now: Time) -> Option<Time> {
            self.inner.next_round(now)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The running index (queues advanced at precomputed demotion times)
        /// decides exactly as recomputing every running job's queue, with
        /// demotions, starvation promotions, tenant limits and failing nodes.
        #[test]
        fn running_index_decides_as_the_full_pass(
            case in case(),
            thresholds in proptest::collection::btree_set(1u64..20_000, 0..4),
            knob in 0u32..3,
        ) {
            let inner = Tiresias::new(Placement::Consolidated, thresholds.into_iter().collect(), knob);
            run(&case, Box::new(Checked { inner }));
        }
    }
}
