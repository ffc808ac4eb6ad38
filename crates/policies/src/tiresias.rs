//! Tiresias' discretized two-dimensional LAS (2D-LAS), preemptive.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::placement::Placement;
use cotenant_core::{
    Action, ClusterView, Decision, JobChange, JobId, JobState, Phase, Policy, PolicyCx, Span, Time,
};

use crate::greedy::{preemptive_pass, waiting_after};
use crate::queue::WaitQueue;

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
                }
            }
        }
        self.promote_due(view);
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
    /// `self.demotions`) and the jobs it starts.
    fn next_demotion(&self, view: &ClusterView<'_>, decision: &Decision) -> Option<Time> {
        let mut preempted: Vec<JobId> = decision
            .actions
            .iter()
            .filter_map(|a| if let Action::Preempt { job } = a { Some(*job) } else { None })
            .collect();
        preempted.sort_unstable();
        let running =
            self.demotions.iter().filter(|(_, id)| preempted.binary_search(id).is_err()).map(|&(at, _)| at);
        let started = decision.actions.iter().filter_map(|a| {
            let Action::Start { job, .. } = a else { return None };
            let job = view.job(*job);
            self.demotion_time(self.effective_attained_us(job, view.now), job.spec.gpus, view.now)
        });
        running.chain(started).min()
    }
}

impl Policy for Tiresias {
    fn name(&self) -> &'static str {
        "tiresias"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.sync(view);
        let now = view.now;
        // Within a queue, running jobs rank ahead of waiting ones (Tiresias keeps a
        // running job ahead of the pending jobs of its own queue), so a job is only
        // ever preempted by a job of a higher-priority queue.
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
        let waiting = self.queue.iter().map(|((level, arrival), id)| ((level, true, arrival), id));
        let decision =
            preemptive_pass(view, &mut running, waiting, self.queue.smallest_request(), self.placement);
        self.running = running;
        let anyone_waits = waiting_after(self.queue.len(), &decision) > 0;
        let promotion = self.promotions.first().map(|&(at, _)| at);
        let demotion = if anyone_waits { self.next_demotion(view, &decision) } else { None };
        self.next = [promotion, demotion].into_iter().flatten().min();
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}
