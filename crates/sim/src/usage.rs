//! Time integrals of who holds GPUs and who waits, overall and per window.

use cotenant_core::{Span, Time};

/// GPU-time one tenant received in one window, and whether it had jobs waiting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowUsage {
    pub gpu_us: Vec<u64>,
    pub backlogged: Vec<bool>,
}

/// Integrates piecewise-constant usage between simulator steps.
#[derive(Clone, Debug)]
pub struct UsageTracker {
    window: Span,
    origin: Time,
    last: Time,
    /// State since `last`: each tenant's GPUs in half-GPU units (a job alone on
    /// a GPU counts 2, each of two jobs sharing one counts 1).
    pub tenant_half_gpus: Vec<u32>,
    pub tenant_waiting: Vec<u32>,
    pub up_gpus: u32,
    /// Free GPUs on nodes that are up (set by the driver after every step).
    pub free_gpus: u32,
    /// Integrals so far.
    pub busy_gpu_us: u128,
    pub available_gpu_us: u128,
    /// `available_gpu_us` as of the latest job completion: the makespan's capacity.
    pub available_at_last_completion_gpu_us: u128,
    pub tenant_gpu_us: Vec<u128>,
    /// GPU-time free while some job waited: capacity that the waiting jobs could
    /// not use (fragmentation, head-of-line blocking, tenant limits, rounds).
    pub idle_while_waiting_gpu_us: u128,
    pub windows: Vec<WindowUsage>,
}

impl UsageTracker {
    pub fn new(tenants: usize, up_gpus: u32, window: Span) -> UsageTracker {
        UsageTracker {
            window: if window == Span::ZERO { Span::from_secs(3600) } else { window },
            origin: Time::ZERO,
            last: Time::ZERO,
            tenant_half_gpus: vec![0; tenants],
            tenant_waiting: vec![0; tenants],
            up_gpus,
            free_gpus: up_gpus,
            busy_gpu_us: 0,
            idle_while_waiting_gpu_us: 0,
            available_gpu_us: 0,
            available_at_last_completion_gpu_us: 0,
            tenant_gpu_us: vec![0; tenants],
            windows: Vec::new(),
        }
    }

    /// Starts the integrals at `origin` (the first arrival).
    pub fn start_at(&mut self, origin: Time) {
        self.origin = origin;
        self.last = origin;
    }

    /// Accounts the state held since the last call up to `now`.
    pub fn advance(&mut self, now: Time) {
        while self.last < now {
            let index = ((self.last - self.origin).0 / self.window.0) as usize;
            let window_end = self.origin + Span((index as u64 + 1) * self.window.0);
            let until = now.min(window_end);
            let span = (until - self.last).0;
            self.account(index, span);
            self.last = until;
        }
    }

    fn account(&mut self, index: usize, span_us: u64) {
        let tenants = self.tenant_half_gpus.len();
        if self.windows.len() <= index {
            self.windows.resize_with(index + 1, || WindowUsage {
                gpu_us: vec![0; tenants],
                backlogged: vec![false; tenants],
            });
        }
        let window = &mut self.windows[index];
        for t in 0..tenants {
            let gpu_us = u64::from(self.tenant_half_gpus[t]) * span_us / 2;
            window.gpu_us[t] += gpu_us;
            self.tenant_gpu_us[t] += u128::from(gpu_us);
            self.busy_gpu_us += u128::from(gpu_us);
            if self.tenant_waiting[t] > 0 && span_us > 0 {
                window.backlogged[t] = true;
            }
        }
        self.available_gpu_us += u128::from(self.up_gpus) * u128::from(span_us);
        if self.tenant_waiting.iter().any(|&w| w > 0) {
            self.idle_while_waiting_gpu_us += u128::from(self.free_gpus) * u128::from(span_us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_intervals_across_windows() {
        let mut usage = UsageTracker::new(2, 4, Span::from_secs(10));
        usage.start_at(Time::from_secs(5));
        usage.tenant_half_gpus = vec![4, 2];
        usage.tenant_waiting = vec![0, 1];
        usage.free_gpus = 1;
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
}
