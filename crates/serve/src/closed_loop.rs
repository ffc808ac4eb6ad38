//! Closed-loop clients, as vLLM's `benchmarks/benchmark_serving.py --max-concurrency N`
//! runs them: at most N requests in flight; the trace's next request is issued at
//!
//! ```text
//! issue = max(its trace arrival, the time a request in flight last finished)
//! ```
//! once fewer than N are in flight, and its latency (TTFT, end to end) is measured from
//! its issue time. The simulator gives each request its issue time as its arrival (the
//! schedulers see it), and [`ServeResult::issued`](crate::ServeResult) keeps them;
//! [`issued_workload`] is the workload as it was actually offered, which
//! [`crate::summarize`] reads for latencies and the achieved request rate.

use cotenant_core::Time;

use crate::request::Workload;
use crate::sim::ServeResult;

/// The clients' state: how many requests were issued, and when a slot last freed.
#[derive(Clone, Debug)]
pub struct ClosedLoop {
    limit: u64,
    issued: u64,
    released: Time,
    /// Issue time of each request issued so far, in trace order.
    pub times: Vec<Time>,
}

impl ClosedLoop {
    pub fn new(max_concurrency: u32) -> ClosedLoop {
        ClosedLoop {
            limit: u64::from(max_concurrency.max(1)),
            issued: 0,
            released: Time::ZERO,
            times: Vec::new(),
        }
    }

    /// When the next request (trace arrival `arrival`) is issued, with `finished`
    /// requests done so far; `None` while `limit` are in flight (a finish decides).
    pub fn next_issue(&self, arrival: Time, finished: u64) -> Option<Time> {
        (self.issued.saturating_sub(finished) < self.limit).then(|| arrival.max(self.released))
    }

    /// Requests finished at `now`, freeing slots.
    pub fn on_finished(&mut self, now: Time) {
        self.released = self.released.max(now);
    }

    /// The next request is issued at `now`.
    pub fn issue(&mut self, now: Time) {
        self.issued += 1;
        self.times.push(now);
    }
}

/// The workload as offered to the server in `result`: [`issued_workload`] for a
/// closed-loop run, `workload` itself (not copied) for an open-loop one. Summaries of
/// closed-loop runs read latencies from this.
pub fn offered<'a>(workload: &'a Workload, result: &ServeResult) -> std::borrow::Cow<'a, Workload> {
    if result.issued.is_empty() {
        std::borrow::Cow::Borrowed(workload)
    } else {
        std::borrow::Cow::Owned(issued_workload(workload, result))
    }
}

/// `workload` with each request's arrival replaced by its issue time in `result` (a
/// closed-loop run); `workload` itself for an open-loop run.
pub fn issued_workload(workload: &Workload, result: &ServeResult) -> Workload {
    let mut issued = workload.clone();
    for (request, time) in issued.requests.iter_mut().zip(&result.issued) {
        request.arrival = *time;
    }
    issued
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two slots; trace arrivals 0, 0, 0, 50. The first two issue at 0; the third waits
    /// for a finish (at 30) and issues then; the fourth, with one slot free after another
    /// finish at 40, issues at its own arrival 50.
    #[test]
    fn issue_times_by_hand() {
        let mut clients = ClosedLoop::new(2);
        assert_eq!(clients.next_issue(Time(0), 0), Some(Time(0)));
        clients.issue(Time(0));
        assert_eq!(clients.next_issue(Time(0), 0), Some(Time(0)));
        clients.issue(Time(0));
        assert_eq!(clients.next_issue(Time(0), 0), None);
        clients.on_finished(Time(30));
        assert_eq!(clients.next_issue(Time(0), 1), Some(Time(30)));
        clients.issue(Time(30));
        clients.on_finished(Time(40));
        assert_eq!(clients.next_issue(Time(50), 2), Some(Time(50)));
        clients.issue(Time(50));
        assert_eq!(clients.times, vec![Time(0), Time(0), Time(30), Time(50)]);
    }
}
