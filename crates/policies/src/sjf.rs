//! Shortest job first (oracle duration), non-preemptive.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, Policy, PolicyCx};

use crate::greedy::start_in_order;
use crate::queue::WaitQueue;

/// Waiting jobs ordered by their duration estimate (the true duration when the
/// trace provides it); every job that fits starts, in that order, and runs to
/// completion. Jobs without an estimate go last, in submission order.
#[derive(Clone, Debug, Default)]
pub struct Sjf {
    pub placement: Placement,
    queue: WaitQueue<u64>,
}

impl Sjf {
    pub fn new(placement: Placement) -> Sjf {
        Sjf { placement, queue: WaitQueue::default() }
    }
}

impl Policy for Sjf {
    fn name(&self) -> &'static str {
        "sjf"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.queue.sync(view, |job| job.spec.duration_estimate.map_or(u64::MAX, |d| d.0));
        let order = self.queue.iter().map(|(_, id)| id);
        start_in_order(view, order, self.placement, false, self.queue.smallest_request())
    }
}
