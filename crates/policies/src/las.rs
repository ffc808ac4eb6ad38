//! Least attained service, preemptive, re-evaluated every quantum.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobId, Policy, PolicyCx, Span, Time};

use crate::greedy::{preemptive_pass, waiting_after};
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
        self.queue.sync(view, |job| job.attained_gpu_us(now));
        self.running.clear();
        self.running.extend(view.running_jobs().map(|job| (job.attained_gpu_us(now), job.id())));
        let decision = preemptive_pass(
            view,
            &mut self.running,
            self.queue.iter(),
            self.queue.smallest_request(),
            self.placement,
        );
        let still_waiting = waiting_after(self.queue.len(), &decision) > 0;
        self.next = (still_waiting && self.quantum > Span::ZERO).then(|| now + self.quantum);
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}
