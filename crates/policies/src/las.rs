//! Least attained service, preemptive, re-evaluated every quantum.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobState, Policy, PolicyCx, Span, Time};

use crate::greedy::waiting_after;
use crate::running::{LasIndex, Ranked};

/// All active jobs ranked by attained service in GPU-seconds (fewest first).
/// Running jobs gain service continuously, so besides arrivals and completions
/// the ranking is re-evaluated every `quantum` while jobs wait.
///
/// A pass reads only the running jobs that rank at or after the best waiting
/// job ([`LasIndex`]: running jobs grouped by GPUs, the slope of their attained
/// service in time); it ranks them all only when that shortcut is not safe
/// (`greedy::settled_is_safe`).
#[derive(Clone, Debug)]
pub struct Las {
    pub placement: Placement,
    pub quantum: Span,
    state: Ranked<LasIndex>,
    next: Option<Time>,
}

impl Las {
    pub fn new(placement: Placement, quantum: Span) -> Las {
        Las { placement, quantum, state: Ranked::default(), next: None }
    }
}

impl Policy for Las {
    fn name(&self) -> &'static str {
        "las"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        let decision = self.state.pass(view, |job: &JobState| job.attained_gpu_us(now), self.placement);
        let still_waiting = waiting_after(self.state.queue.len(), &decision) > 0;
        self.next = (still_waiting && self.quantum > Span::ZERO).then(|| now + self.quantum);
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_world::{case, placement, run, run_from};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The indexed pass (slope groups, settled jobs never read) decides as
        /// the full sort at every pass (`assert_as_full_sort`), with tenant
        /// limits, CPU-only jobs, failing nodes, quanta from 1 s to 10 min and
        /// placements that may leave a chosen job waiting.
        #[test]
        fn las_index_decides_as_the_full_sort(case in case(), quantum_s in 1u64..600, placement in placement()) {
            run(&case, Box::new(Las::new(placement, Span::from_secs(quantum_s))));
        }

        /// The same far into the clock's range, where a job's line on 2 or more
        /// GPUs no longer fits the index's `i64` intercepts (`OVERFLOWED`: the
        /// passes rank every running job while one runs) and on 1 GPU still
        /// does: 2^62 µs is about 4.6e12 s, and 2 x (2^62 + its start) > 2^63.
        #[test]
        fn las_index_decides_as_the_full_sort_past_its_intercepts(case in case(), quantum_s in 1u64..600) {
            let base_s = (1u64 << 62) / 1_000_000 + 1;
            run_from(&case, Box::new(Las::new(Placement::Consolidated, Span::from_secs(quantum_s))), base_s);
        }
    }
}
