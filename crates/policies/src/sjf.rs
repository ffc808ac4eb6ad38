//! Shortest job first (oracle duration), non-preemptive.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, Policy, PolicyCx};

use crate::greedy::{StartPass, SCAN_LIMIT};
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
        start_queued(view, &self.queue, self.placement)
    }
}

/// `greedy::start_in_order` over the queue, best first, without blocking: every
/// job that can be placed starts. The queue carries each job's GPUs and tenant,
/// so a job that cannot fit gets its verdict from them
/// (`StartPass::refuse_by_size`) without the pass looking the job up; every
/// other job goes through `try_start`.
fn start_queued<K: Ord + Copy>(
    view: &ClusterView<'_>,
    queue: &WaitQueue<K>,
    placement: Placement,
) -> Decision {
    let mut pass = StartPass::new(view, placement);
    let floor = queue.smallest_request().unwrap_or(0);
    for ((_, id), size) in queue.iter_sized().take(SCAN_LIMIT) {
        if floor > 0 && pass.free() < floor {
            break;
        }
        if !pass.refuse_by_size(id, size) {
            pass.try_start(id);
        }
    }
    pass.decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::greedy::start_in_order;
    use crate::test_world::{case, run};
    use proptest::prelude::*;

    /// SJF as it was: the queue's order through `greedy::start_in_order`, beside
    /// the pass that reads GPUs and tenants from the queue; every pass of the
    /// run checks that both decide the same.
    #[derive(Default)]
    struct BothPasses {
        fast: Sjf,
        plain: WaitQueue<u64>,
    }

    impl Policy for BothPasses {
        fn name(&self) -> &'static str {
            "sjf"
        }
        fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
            self.plain.sync(view, |job| job.spec.duration_estimate.map_or(u64::MAX, |d| d.0));
            let order = self.plain.iter().map(|(_, id)| id);
            let plain =
                start_in_order(view, order, self.fast.placement, false, self.plain.smallest_request());
            let fast = self.fast.schedule(cx, view);
            assert_eq!(fast, plain, "at {:?}", view.now);
            fast
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The pass that reads GPUs and tenants from the queue decides as the
        /// plain start-in-order pass at every pass: same starts and placements,
        /// same verdicts in the same order, with tenant limits (whose jobs still
        /// go through the full check), CPU-only jobs and failing nodes.
        #[test]
        fn sjf_queued_pass_decides_as_start_in_order(case in case()) {
            run(&case, Box::new(BothPasses::default()));
        }
    }
}
