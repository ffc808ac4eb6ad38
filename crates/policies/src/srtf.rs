//! Shortest remaining time first, preemptive.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobId, JobState, Policy, PolicyCx, Time};

use crate::greedy::{pass_by_key, pass_contested};
use crate::queue::WaitQueue;
use crate::running::{Contested, JobSizes, SrtfIndex};

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
    queue: WaitQueue<u64>,
    index: SrtfIndex,
    sizes: JobSizes,
    /// Running jobs with their keys, refilled each pass (kept to reuse its allocation).
    running: Vec<(u64, JobId)>,
}

impl Srtf {
    pub fn new(placement: Placement) -> Srtf {
        Srtf { placement, ..Srtf::default() }
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
        let key = |job: &JobState| remaining_us(job, now);
        self.queue.sync(view, key);
        self.index.sync(view, key);
        self.sizes.sync(view);
        let decision = match self.index.set.settled_total(view) {
            Some(running_gpus) => {
                self.running.clear();
                let contested_gpus = match self.queue.iter().next() {
                    Some(head) => self.index.contested(view, head, key, &mut self.running),
                    None => 0,
                };
                let (waiting, smallest) = (self.queue.iter(), self.queue.smallest_request());
                pass_contested(
                    view,
                    Contested { running_gpus, jobs: &self.running, gpus: contested_gpus, sizes: &self.sizes },
                    waiting,
                    smallest,
                    self.placement,
                )
            }
            None => pass_by_key(view, &mut self.running, key, &self.queue, self.placement),
        };
        #[cfg(test)]
        crate::greedy::assert_as_full_sort(
            view,
            view.running_jobs().map(|job| (key(job), job.id())).collect(),
            &self.queue,
            self.placement,
            &decision,
        );
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_world::{case, run};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The indexed pass (cached upper-bound keys, settled jobs never keyed)
        /// decides as the full sort at every pass (`assert_as_full_sort`), with
        /// tenant limits, CPU-only jobs, failing nodes and progress reports that
        /// move a running job's remaining time up as well as down.
        #[test]
        fn srtf_index_decides_as_the_full_sort(case in case()) {
            run(&case, Box::new(Srtf::new(Placement::Consolidated)));
        }
    }
}
