//! Shortest remaining time first, preemptive.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobState, Policy, PolicyCx};

use crate::running::{remaining_us, Ranked, SrtfIndex};

/// All active jobs ranked by remaining run time (estimate x fraction of work
/// left); the shortest that fit run, running jobs that fall out are
/// preempted. A running job's remaining time only shrinks, so ranks change only
/// at arrivals and completions: no timer is needed.
///
/// A pass keys afresh only the running jobs that may rank at or after the best
/// waiting job ([`SrtfIndex`]); it ranks them all only when that shortcut is
/// not safe (`greedy::settled_is_safe`).
#[derive(Clone, Debug, Default)]
pub struct Srtf {
    pub placement: Placement,
    state: Ranked<SrtfIndex>,
}

impl Srtf {
    pub fn new(placement: Placement) -> Srtf {
        Srtf { placement, ..Srtf::default() }
    }
}

impl Policy for Srtf {
    fn name(&self) -> &'static str {
        "srtf"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        self.state.pass(view, |job: &JobState| remaining_us(job, now), self.placement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_world::{case, placement, run};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The indexed pass (cached upper-bound keys, settled jobs never keyed)
        /// decides as the full sort at every pass (`assert_as_full_sort`), with
        /// tenant limits, CPU-only jobs, failing nodes and progress reports that
        /// move a running job's remaining time up as well as down, and
        /// placements that may leave a chosen job waiting.
        #[test]
        fn srtf_index_decides_as_the_full_sort(case in case(), placement in placement()) {
            run(&case, Box::new(Srtf::new(placement)));
        }
    }
}
