//! vLLM-style first come, first served: running requests continue, then waiting
//! requests in order (preempted ones first); chunked prefill falls out of the budget.

use super::{BatchLimits, Pick, RequestScheduler, SchedCx};

#[derive(Clone, Debug)]
pub struct Fcfs {
    limits: BatchLimits,
}

impl Fcfs {
    pub fn new(limits: BatchLimits) -> Fcfs {
        Fcfs { limits }
    }
}

impl RequestScheduler for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        if cx.waiting.is_empty() {
            Pick::Stop
        } else {
            Pick::admit(0)
        }
    }
}
