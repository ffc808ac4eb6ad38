//! Least attained service, preemptive, re-evaluated every quantum.

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterView, Decision, JobChange, JobId, Policy, PolicyCx, Span, Time};

use crate::attained_order::AttainedOrder;
use crate::greedy::{contest, preemptive_pass, settled_is_safe, waiting_after};
use crate::queue::WaitQueue;

/// All active jobs ranked by attained service in GPU-seconds (fewest first).
/// Running jobs gain service continuously, so besides arrivals and completions
/// the ranking is re-evaluated every `quantum` while jobs wait.
#[derive(Clone, Debug)]
pub struct Las {
    pub placement: Placement,
    pub quantum: Span,
    queue: WaitQueue<u64>,
    /// Running jobs by attained service, synced from the change log.
    index: AttainedOrder,
    /// Running jobs with their keys, refilled each pass (kept to reuse its allocation).
    running: Vec<(u64, JobId)>,
    next: Option<Time>,
}

impl Las {
    pub fn new(placement: Placement, quantum: Span) -> Las {
        Las {
            placement,
            quantum,
            queue: WaitQueue::default(),
            index: AttainedOrder::default(),
            running: Vec::new(),
            next: None,
        }
    }
}

impl Las {
    fn sync_running(&mut self, view: &ClusterView<'_>) {
        for change in view.changes {
            match *change {
                JobChange::Started(id) => {
                    let job = view.job(id);
                    if job.is_running() {
                        let held = job.gpus.len() as u32;
                        self.index.insert(
                            id,
                            held,
                            job.attained_before_gpu_us,
                            job.phase_since,
                            job.spec.gpus,
                        );
                    }
                }
                JobChange::Stopped(id) | JobChange::Completed(id) | JobChange::Ended(id) => {
                    self.index.remove(id)
                }
                JobChange::Submitted(_) => {}
            }
        }
        debug_assert_eq!(self.index.len(), view.running.len(), "running index out of sync with the engine");
    }

    /// The pass from the running index: running jobs ahead of the best waiting
    /// job all stay, so only those behind it are read, already in order.
    fn fast_pass(&mut self, view: &ClusterView<'_>) -> Decision {
        let mut waiting = self.queue.iter().peekable();
        self.running.clear();
        let mut contested_gpus = 0u64;
        if let Some(&head) = waiting.peek() {
            for (attained, id) in self.index.behind(view.now, head) {
                contested_gpus += u64::from(view.job(id).spec.gpus);
                self.running.push((attained, id));
            }
        }
        // At most the GPUs that are up (`settled_is_safe`).
        let settled_gpus = (self.index.gpus() - contested_gpus) as u32;
        contest(view, settled_gpus, &self.running, waiting, self.queue.smallest_request(), self.placement)
    }

    /// The pass recomputing every running job's attained service.
    fn full_pass(&mut self, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        self.running.clear();
        self.running.extend(view.running_jobs().map(|job| (job.attained_gpu_us(now), job.id())));
        preemptive_pass(
            view,
            &mut self.running,
            self.queue.iter(),
            self.queue.smallest_request(),
            self.placement,
        )
    }
}

impl Policy for Las {
    fn name(&self) -> &'static str {
        "las"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        self.queue.sync(view, |job| job.attained_gpu_us(now));
        self.sync_running(view);
        let decision = if settled_is_safe(view, self.index.gpus(), self.index.has_zero_gpu_job()) {
            self.fast_pass(view)
        } else {
            self.full_pass(view)
        };
        let still_waiting = waiting_after(self.queue.len(), &decision) > 0;
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
    use crate::test_world::{case, run};
    use proptest::prelude::*;

    /// LAS deciding every pass from the running index and by recomputing every
    /// running job's attained service, asserting that the two agree.
    struct Checked(Las);

    impl Policy for Checked {
        fn name(&self) -> &'static str {
            "checked-las"
        }
        fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
            let las = &mut self.0;
            let now = view.now;
            las.queue.sync(view, |job| job.attained_gpu_us(now));
            las.sync_running(view);
            let full = las.full_pass(view);
            if settled_is_safe(view, las.index.gpus(), las.index.has_zero_gpu_job()) {
                assert_eq!(las.fast_pass(view), full, "at {now:?}");
            }
            let still_waiting = waiting_after(las.queue.len(), &full) > 0;
            las.next = still_waiting.then(|| now + las.quantum);
            full
        }
        fn next_round(&self, now: Time) -> Option<Time> {
            self.0.next_round(now)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The attained-service index decides exactly as recomputing and sorting
        /// every running job, with tenant limits, CPU-only jobs and failing nodes.
        #[test]
        fn running_index_decides_as_the_full_pass(case in case(), quantum_s in 30u64..900) {
            let las = Las::new(Placement::Consolidated, Span::from_secs(quantum_s));
            run(&case, Box::new(Checked(las)));
        }
    }
}
