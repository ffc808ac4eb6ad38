//! Least attained service, preemptive, re-evaluated every quantum.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobId, JobState, Policy, PolicyCx, Span, Time};

use crate::greedy::{pass_by_key, waiting_after};
use crate::queue::WaitQueue;

/// All active jobs ranked by attained service in GPU-seconds (fewest first).
/// Running jobs gain service continuously, so besides arrivals and completions
/// the ranking is re-evaluated every `quantum` while jobs wait.
#[derive(Clone, Debug)]
pub struct Las {
    pub placement: Placement,
    pub quantum: Span,
    queue: WaitQueue<u64>,
    /// Running jobs with their keys, refilled each pass (kept to reuse its allocation).
    running: Vec<(u64, JobId)>,
    next: Option<Time>,
}

impl Las {
    pub fn new(placement: Placement, quantum: Span) -> Las {
        Las { placement, quantum, queue: WaitQueue::default(), running: Vec::new(), next: None }
    }
}

impl Policy for Las {
    fn name(&self) -> &'static str {
        "las"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        let attained = |job: &JobState| job.attained_gpu_us(now);
        self.queue.sync(view, attained);
        let decision = pass_by_key(view, &mut self.running, attained, &self.queue, self.placement);
        let still_waiting = waiting_after(self.queue.len(), &decision) > 0;
        self.next = (still_waiting && self.quantum > Span::ZERO).then(|| now + self.quantum);
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}
