//! Time integrals of who holds GPUs and who waits, overall and per window.

use cotenant_core::limits::MAX_SHARE_WINDOWS;
use cotenant_core::{Span, Time};

use crate::world::GPU_PARTS;

/// One window: per tenant, the GPU-time it received, whether it had jobs
/// waiting, and the integral of its waiting jobs; and the window's covered time
/// and capacity (the last window of a run is covered only up to the run's end).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowUsage {
    pub gpu_us: Vec<u64>,
    pub backlogged: Vec<bool>,
    /// Per tenant, the integral over the window of its number of waiting jobs
    /// (job-µs): divided by `span_us`, the tenant's mean queue length.
    pub waiting_job_us: Vec<u64>,
    /// Time of this window the run has accounted (the window length, except
    /// for the last window).
    pub span_us: u64,
    /// GPU-time available (GPUs up × time) in this window.
    pub available_gpu_us: u64,
}

impl WindowUsage {
    /// Mean number of jobs waiting over the window's covered time (all tenants).
    pub fn mean_queue_length(&self) -> f64 {
        if self.span_us == 0 {
            return 0.0;
        }
        let total: u128 = self.waiting_job_us.iter().map(|&w| u128::from(w)).sum();
        total as f64 / self.span_us as f64
    }

    /// GPU-time held by jobs over GPU-time available in this window (0 when none was).
    pub fn utilization(&self) -> f64 {
        if self.available_gpu_us == 0 {
            return 0.0;
        }
        let held: u128 = self.gpu_us.iter().map(|&g| u128::from(g)).sum();
        held as f64 / self.available_gpu_us as f64
    }
}

/// Integrates piecewise-constant usage between simulator steps.
///
/// Windows are kept for the span the run has reached, at most
/// [`MAX_SHARE_WINDOWS`] of them: a run that outgrows them doubles the window
/// length and merges neighbours (window `k` of length `2w` is windows `2k` and
/// `2k + 1` of length `w`, all aligned at the origin), so memory stays bounded
/// whatever the run's length and the result equals a run made with the wider
/// window from the start.
#[derive(Clone, Debug)]
pub struct UsageTracker {
    window: Span,
    /// The window asked for (`window` may have been widened since).
    requested_window: Span,
    origin: Time,
    last: Time,
    /// State since `last`: each tenant's GPUs in [`GPU_PARTS`] (a job alone on
    /// a GPU counts 420, each of two jobs sharing one 210, a job in a MIG
    /// instance 60 per compute slice; see [`crate::world::gpu_parts`]).
    pub tenant_gpu_parts: Vec<u32>,
    pub tenant_waiting: Vec<u32>,
    pub up_gpus: u32,
    /// Capacity not held by any job on nodes that are up, in [`GPU_PARTS`]:
    /// free whole GPUs less the compute slices MIG and MPS jobs use on them
    /// (set by the driver after every step).
    pub free_gpu_parts: u32,
    /// Integrals so far.
    pub busy_gpu_us: u128,
    /// `busy_gpu_us` exactly, in [`GPU_PARTS`]-microseconds (`busy_gpu_us` and
    /// the tenants' GPU-time round down at every step; this does not).
    pub busy_part_us: u128,
    pub available_gpu_us: u128,
    /// `available_gpu_us` as of the latest job completion: the makespan's capacity.
    pub measured_capacity_gpu_us: u128,
    pub tenant_gpu_us: Vec<u128>,
    /// GPU-time free while some job waited: capacity that the waiting jobs could
    /// not use (fragmentation, head-of-line blocking, tenant limits, rounds).
    pub idle_while_waiting_gpu_us: u128,
    pub windows: Vec<WindowUsage>,
}

impl UsageTracker {
    pub fn new(tenants: usize, up_gpus: u32, window: Span) -> UsageTracker {
        let window = if window == Span::ZERO { Span::from_secs(3600) } else { window };
        UsageTracker {
            window,
            requested_window: window,
            origin: Time::ZERO,
            last: Time::ZERO,
            tenant_gpu_parts: vec![0; tenants],
            tenant_waiting: vec![0; tenants],
            up_gpus,
            free_gpu_parts: up_gpus * GPU_PARTS,
            busy_gpu_us: 0,
            busy_part_us: 0,
            idle_while_waiting_gpu_us: 0,
            available_gpu_us: 0,
            measured_capacity_gpu_us: 0,
            tenant_gpu_us: vec![0; tenants],
            windows: Vec::new(),
        }
    }

    /// Starts the integrals at `origin` (the first arrival).
    pub fn start_at(&mut self, origin: Time) {
        self.origin = origin;
        self.last = origin;
    }

    /// The window length in force: the one asked for, or wider if the run
    /// outgrew [`MAX_SHARE_WINDOWS`] windows of it.
    pub fn window(&self) -> Span {
        self.window
    }

    /// Whether the window had to be widened (a note for the run's report).
    pub fn window_widened(&self) -> bool {
        self.window != self.requested_window
    }

    /// Accounts the state held since the last call up to `now`.
    pub fn advance(&mut self, now: Time) {
        while self.last < now {
            let mut index = (self.last - self.origin).0 / self.window.0;
            while index >= MAX_SHARE_WINDOWS {
                self.widen();
                index = (self.last - self.origin).0 / self.window.0;
            }
            // Saturating: the last window of a run that reaches Time::MAX ends there.
            let window_end = self.origin + Span((index + 1).saturating_mul(self.window.0));
            let until = now.min(window_end);
            let span = (until - self.last).0;
            self.account(index as usize, span);
            self.last = until;
        }
    }

    /// Doubles the window length, merging windows pairwise.
    fn widen(&mut self) {
        self.window = Span(self.window.0.saturating_mul(2));
        let merged = self
            .windows
            .chunks(2)
            .map(|pair| {
                let mut window = pair[0].clone();
                if let Some(second) = pair.get(1) {
                    for (total, more) in window.gpu_us.iter_mut().zip(&second.gpu_us) {
                        *total = total.saturating_add(*more);
                    }
                    for (any, more) in window.backlogged.iter_mut().zip(&second.backlogged) {
                        *any |= more;
                    }
                    for (total, more) in window.waiting_job_us.iter_mut().zip(&second.waiting_job_us) {
                        *total = total.saturating_add(*more);
                    }
                    window.span_us = window.span_us.saturating_add(second.span_us);
                    window.available_gpu_us = window.available_gpu_us.saturating_add(second.available_gpu_us);
                }
                window
            })
            .collect();
        self.windows = merged;
    }

    fn account(&mut self, index: usize, span_us: u64) {
        let tenants = self.tenant_gpu_parts.len();
        if self.windows.len() <= index {
            self.windows.resize_with(index + 1, || WindowUsage {
                gpu_us: vec![0; tenants],
                backlogged: vec![false; tenants],
                waiting_job_us: vec![0; tenants],
                span_us: 0,
                available_gpu_us: 0,
            });
        }
        let window = &mut self.windows[index];
        let mut anyone_waiting = false;
        for t in 0..tenants {
            // A tenant that holds nothing and waits for nothing adds zeros: skipped.
            if self.tenant_gpu_parts[t] == 0 && self.tenant_waiting[t] == 0 {
                continue;
            }
            anyone_waiting |= self.tenant_waiting[t] > 0;
            let (part_us, gpu_us) = parts_over(self.tenant_gpu_parts[t], span_us);
            self.busy_part_us += part_us;
            window.gpu_us[t] = window.gpu_us[t].saturating_add(gpu_us);
            self.tenant_gpu_us[t] += u128::from(gpu_us);
            self.busy_gpu_us += u128::from(gpu_us);
            if self.tenant_waiting[t] > 0 && span_us > 0 {
                window.backlogged[t] = true;
            }
            let waiting = u64::from(self.tenant_waiting[t]).saturating_mul(span_us);
            window.waiting_job_us[t] = window.waiting_job_us[t].saturating_add(waiting);
        }
        window.span_us = window.span_us.saturating_add(span_us);
        window.available_gpu_us =
            window.available_gpu_us.saturating_add(u64::from(self.up_gpus).saturating_mul(span_us));
        self.available_gpu_us += u128::from(self.up_gpus) * u128::from(span_us);
        if anyone_waiting {
            self.idle_while_waiting_gpu_us += u128::from(parts_over(self.free_gpu_parts, span_us).1);
        }
    }
}

/// `parts` GPU parts held for `span_us`: the exact part-microseconds, and whole
/// GPU-microseconds rounded down (saturating). Divides in 64 bits whenever the product
/// fits (always, for any real run): a 128-bit division by `GPU_PARTS` is a library call,
/// and this runs for every tenant at every step.
fn parts_over(parts: u32, span_us: u64) -> (u128, u64) {
    match u64::from(parts).checked_mul(span_us) {
        Some(part_us) => (u128::from(part_us), part_us / u64::from(GPU_PARTS)),
        None => {
            let part_us = u128::from(parts) * u128::from(span_us);
            (part_us, u64::try_from(part_us / u128::from(GPU_PARTS)).unwrap_or(u64::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_over_is_exact_in_both_widths() {
        assert_eq!(parts_over(GPU_PARTS, 7), (u128::from(GPU_PARTS) * 7, 7));
        assert_eq!(parts_over(GPU_PARTS / 2, 3), (630, 1), "half a GPU for 3 us: 1.5 GPU-us, rounded down");
        // Past 64 bits the product is kept exactly and divided in 128 bits.
        let (part_us, gpu_us) = parts_over(8 * GPU_PARTS, u64::MAX);
        assert_eq!(part_us, u128::from(8 * GPU_PARTS) * u128::from(u64::MAX));
        assert_eq!(gpu_us, u64::MAX, "8 GPUs for u64::MAX us saturates");
    }

    #[test]
    fn splits_intervals_across_windows() {
        let mut usage = UsageTracker::new(2, 4, Span::from_secs(10));
        usage.start_at(Time::from_secs(5));
        usage.tenant_gpu_parts = vec![2 * GPU_PARTS, GPU_PARTS];
        usage.tenant_waiting = vec![0, 1];
        usage.free_gpu_parts = GPU_PARTS;
        usage.advance(Time::from_secs(20));
        assert_eq!(usage.windows.len(), 2);
        assert_eq!(usage.windows[0].gpu_us, vec![20_000_000, 10_000_000]);
        assert_eq!(usage.windows[1].gpu_us, vec![10_000_000, 5_000_000]);
        assert_eq!(usage.windows[1].backlogged, vec![false, true]);
        assert_eq!(usage.busy_gpu_us, 45_000_000);
        assert_eq!(usage.available_gpu_us, 60_000_000);
        // One GPU free (4 up, 3 held) while tenant 1 waits: 15 s so far, then 5 s more.
        assert_eq!(usage.idle_while_waiting_gpu_us, 15_000_000);
        usage.advance(Time::from_secs(25));
        assert_eq!(usage.idle_while_waiting_gpu_us, 20_000_000);
    }

    #[test]
    fn windows_integrate_waiting_jobs_and_capacity() {
        // Window 10 s from t = 0: tenant 0 has 2 waiting for 0-4 s, then 1 until 15 s;
        // tenant 1 has 3 waiting from 12 s. 4 GPUs up, 3 held by tenant 0 throughout.
        let mut usage = UsageTracker::new(2, 4, Span::from_secs(10));
        usage.tenant_gpu_parts = vec![3 * GPU_PARTS, 0];
        usage.tenant_waiting = vec![2, 0];
        usage.advance(Time::from_secs(4));
        usage.tenant_waiting = vec![1, 0];
        usage.advance(Time::from_secs(12));
        usage.tenant_waiting = vec![1, 3];
        usage.advance(Time::from_secs(15));
        let [first, second] = &usage.windows[..] else { panic!("two windows: {:?}", usage.windows) };
        assert_eq!(first.waiting_job_us, vec![2 * 4_000_000 + 6_000_000, 0]);
        assert_eq!(first.span_us, 10_000_000);
        assert_eq!(first.mean_queue_length(), 1.4);
        assert_eq!(first.available_gpu_us, 40_000_000);
        assert_eq!(first.utilization(), 0.75);
        // The last window is covered for 5 s: (1 x 5 + 3 x 3) / 5 jobs waiting on average.
        assert_eq!(second.waiting_job_us, vec![5_000_000, 9_000_000]);
        assert_eq!(second.span_us, 5_000_000);
        assert_eq!(second.mean_queue_length(), 14.0 / 5.0);
        assert_eq!(second.available_gpu_us, 20_000_000);
        // Window capacities add up to the run's.
        let windows_available: u128 = usage.windows.iter().map(|w| u128::from(w.available_gpu_us)).sum();
        assert_eq!(windows_available, usage.available_gpu_us);
    }

    #[test]
    fn a_run_longer_than_the_window_limit_widens_windows_and_stays_bounded() {
        let mut narrow = UsageTracker::new(1, 4, Span::from_secs(1));
        narrow.tenant_gpu_parts = vec![GPU_PARTS];
        narrow.tenant_waiting = vec![1];
        // 3 x the limit in 1 s windows: widened twice (to 4 s), never over the limit.
        narrow.advance(Time::from_secs(3 * MAX_SHARE_WINDOWS));
        assert_eq!(narrow.window(), Span::from_secs(4));
        assert!(narrow.window_widened());
        assert!(narrow.windows.len() as u64 <= MAX_SHARE_WINDOWS);
        // The same as a run made with 4 s windows from the start.
        let mut wide = UsageTracker::new(1, 4, Span::from_secs(4));
        wide.tenant_gpu_parts = vec![GPU_PARTS];
        wide.tenant_waiting = vec![1];
        wide.advance(Time::from_secs(3 * MAX_SHARE_WINDOWS));
        assert_eq!(narrow.windows, wide.windows);
        assert_eq!(narrow.busy_gpu_us, wide.busy_gpu_us);
        assert_eq!(narrow.windows[0].waiting_job_us, vec![4_000_000]);
        assert_eq!(narrow.windows[0].span_us, 4_000_000);
        assert_eq!(narrow.windows[0].available_gpu_us, 16_000_000);
    }

    #[test]
    fn advancing_to_the_end_of_time_terminates() {
        let mut usage = UsageTracker::new(2, 8, Span::from_secs(1));
        usage.tenant_gpu_parts = vec![8 * GPU_PARTS, 0];
        usage.advance(Time::MAX);
        assert!(usage.windows.len() as u64 <= MAX_SHARE_WINDOWS);
        assert_eq!(usage.busy_gpu_us, u128::from(u64::MAX) * 8);
    }
}
