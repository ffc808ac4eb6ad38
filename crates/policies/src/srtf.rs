//! Shortest remaining time first, preemptive.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobId, JobState, Policy, PolicyCx, Time};

use crate::greedy::pass_by_key;
use crate::queue::WaitQueue;

/// All active jobs ranked by remaining run time (estimate x fraction of work
/// left); the shortest that fit run, running jobs that fall out are
/// preempted. A running job's remaining time only shrinks, so ranks change only
/// at arrivals and completions: no timer is needed.
#[derive(Clone, Debug, Default)]
pub struct Srtf {
    pub placement: Placement,
    queue: WaitQueue<u64>,
    /// Running jobs with their keys, refilled each pass (kept to reuse its allocation).
    running: Vec<(u64, JobId)>,
}

impl Srtf {
    pub fn new(placement: Placement) -> Srtf {
        Srtf { placement, queue: WaitQueue::default(), running: Vec::new() }
    }
}

fn remaining_us(job: &JobState, now: Time) -> u64 {
    job.remaining_estimate(now).map_or(u64::MAX, |s| s.0)
}

impl Policy for Srtf {
    fn name(&self) -> &'static str {
        "srtf"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        self.queue.sync(view, |job| remaining_us(job, now));
        pass_by_key(view, &mut self.running, |job| remaining_us(job, now), &self.queue, self.placement)
    }
}
