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
    /// A window nothing has been accounted in yet, for `tenants` tenants.
    fn empty(tenants: usize) -> WindowUsage {
        WindowUsage {
            gpu_us: vec![0; tenants],
            backlogged: vec![false; tenants],
            waiting_job_us: vec![0; tenants],
            span_us: 0,
            available_gpu_us: 0,
        }
    }

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
///
/// Each tenant's GPU-time rounds down to whole GPU-microseconds at every step
/// (part of the output), so the integrals are a sum over steps. A tenant that
/// holds whole GPUs adds exactly `gpus * span` at each, which sums to `gpus *
/// (sum of spans)`: with [`UsageTracker::defer`], such a tenant's steps are
/// added up when its state changes, at a window's end and at [`UsageTracker::settle`]
/// instead of at every step, so a step costs the same for any number of
/// tenants. While any tenant holds a fraction of a GPU (a shared pair, a MIG
/// slice), or windows are longer than [`MAX_DEFERRED_WINDOW`], every tenant is
/// added up at every step. The tests check both against the plain per-step sum.
#[derive(Clone, Debug)]
pub struct UsageTracker {
    window: Span,
    /// The window asked for (`window` may have been widened since).
    requested_window: Span,
    origin: Time,
    last: Time,
    /// State since `last`: each tenant's GPUs in [`GPU_PARTS`] (a job alone on
    /// a GPU counts 420, each of two jobs sharing one 210, a job in a MIG
    /// instance 60 per compute slice; see [`crate::world::gpu_parts`]). Set with
    /// [`UsageTracker::set_tenant_gpu_parts`].
    tenant_gpu_parts: Vec<u32>,
    /// Each tenant's waiting jobs (set with [`UsageTracker::set_tenant_waiting`]).
    tenant_waiting: Vec<u32>,
    /// Up to when each tenant's state is in the integrals (`last` after a step,
    /// unless its steps are deferred or it holds and waits for nothing; an active
    /// tenant's is never before the open window's start).
    since: Vec<Time>,
    /// The window the deferred steps fall in.
    open_window: usize,
    /// Tenants whose GPU parts are not whole GPUs, and tenants with jobs waiting.
    fractional: usize,
    waiting_tenants: usize,
    /// Whole-GPU tenants' steps are added up lazily (see the type's doc).
    deferred: bool,
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
            since: vec![Time::ZERO; tenants],
            open_window: 0,
            fractional: 0,
            waiting_tenants: 0,
            deferred: false,
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
        self.since.fill(origin);
    }

    /// Defers whole-GPU tenants' steps (see the type's doc): the integrals are then
    /// complete only after [`UsageTracker::settle`].
    pub fn defer(&mut self) {
        self.deferred = true;
    }

    /// Adds every deferred step to the integrals. A tenant that holds nothing and
    /// waits for nothing is passed over: its steps add nothing, and its `since`,
    /// left behind, counts only steps at that state (its next change flushes it).
    pub fn settle(&mut self) {
        for tenant in 0..self.tenant_gpu_parts.len() {
            if self.tenant_gpu_parts[tenant] != 0 || self.tenant_waiting[tenant] != 0 {
                self.flush(tenant);
            }
        }
    }

    /// Each tenant's GPUs now, in [`GPU_PARTS`].
    pub fn tenant_gpu_parts(&self) -> &[u32] {
        &self.tenant_gpu_parts
    }

    /// Each tenant's waiting jobs now.
    pub fn tenant_waiting(&self) -> &[u32] {
        &self.tenant_waiting
    }

    /// The tenant holds `parts` GPU parts from now on.
    pub fn set_tenant_gpu_parts(&mut self, tenant: usize, parts: u32) {
        let before = self.tenant_gpu_parts[tenant];
        if parts == before {
            return;
        }
        self.flush(tenant);
        let fractional = |p: u32| usize::from(!p.is_multiple_of(GPU_PARTS));
        self.fractional = self.fractional - fractional(before) + fractional(parts);
        self.tenant_gpu_parts[tenant] = parts;
    }

    /// The tenant has `waiting` jobs waiting from now on.
    pub fn set_tenant_waiting(&mut self, tenant: usize, waiting: u32) {
        let before = self.tenant_waiting[tenant];
        if waiting == before {
            return;
        }
        self.flush(tenant);
        self.waiting_tenants = self.waiting_tenants - usize::from(before > 0) + usize::from(waiting > 0);
        self.tenant_waiting[tenant] = waiting;
    }

    /// One more (`true`) or one fewer job of the tenant waits.
    pub fn add_waiting(&mut self, tenant: usize, more: bool) {
        let waiting = self.tenant_waiting[tenant];
        self.set_tenant_waiting(tenant, if more { waiting + 1 } else { waiting - 1 });
    }

    /// Whether whole-GPU tenants' steps wait for their next change (see the type's doc).
    fn defers(&self) -> bool {
        self.deferred && self.fractional == 0 && self.window.0 <= MAX_DEFERRED_WINDOW.0
    }

    /// Adds the tenant's steps since `since` (all in the open window, at its
    /// current state) to the integrals.
    fn flush(&mut self, t: usize) {
        let span_us = (self.last - self.since[t]).0;
        self.since[t] = self.last;
        let (parts, waiting) = (self.tenant_gpu_parts[t], self.tenant_waiting[t]);
        // A tenant that holds nothing and waits for nothing adds zeros: skipped.
        if span_us == 0 || (parts == 0 && waiting == 0) {
            return;
        }
        let window = &mut self.windows[self.open_window];
        // Exact for a sum of steps: `parts` is whole GPUs whenever steps are deferred,
        // and `gpus * span` stays below 2^63 (`MAX_DEFERRED_WINDOW`), so nothing rounds
        // or saturates that would not have at each step.
        let (part_us, gpu_us) = parts_over(parts, span_us);
        self.busy_part_us += part_us;
        window.gpu_us[t] = window.gpu_us[t].saturating_add(gpu_us);
        self.tenant_gpu_us[t] += u128::from(gpu_us);
        self.busy_gpu_us += u128::from(gpu_us);
        if waiting > 0 {
            window.backlogged[t] = true;
        }
        // Saturating sums of non-negative terms saturate in one go as step by step.
        let waiting_us = u64::from(waiting).saturating_mul(span_us);
        window.waiting_job_us[t] = window.waiting_job_us[t].saturating_add(waiting_us);
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
                self.settle();
                self.widen();
                index = (self.last - self.origin).0 / self.window.0;
            }
            if index as usize != self.open_window {
                // Deferred steps go to the window they fell in.
                self.settle();
                self.open_window = index as usize;
            }
            // Saturating: the last window of a run that reaches Time::MAX ends there.
            let window_end = self.origin + Span((index + 1).saturating_mul(self.window.0));
            let until = now.min(window_end);
            let span = (until - self.last).0;
            self.account(index as usize, span);
            self.last = until;
            if !self.defers() {
                self.settle();
            }
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

    /// One step's span in window `index`: its time and capacity, and the idle
    /// capacity while jobs wait (the tenants' shares: [`UsageTracker::flush`]).
    fn account(&mut self, index: usize, span_us: u64) {
        let tenants = self.tenant_gpu_parts.len();
        if self.windows.len() <= index {
            self.windows.resize_with(index + 1, || WindowUsage::empty(tenants));
        }
        let window = &mut self.windows[index];
        let anyone_waiting = self.waiting_tenants > 0;
        window.span_us = window.span_us.saturating_add(span_us);
        window.available_gpu_us =
            window.available_gpu_us.saturating_add(u64::from(self.up_gpus).saturating_mul(span_us));
        self.available_gpu_us += u128::from(self.up_gpus) * u128::from(span_us);
        if anyone_waiting {
            self.idle_while_waiting_gpu_us += u128::from(parts_over(self.free_gpu_parts, span_us).1);
        }
    }
}

/// Longest window whose whole-GPU steps are deferred: a tenant's GPUs (under 2^24,
/// since its parts fit in 32 bits) times a window's span then stays under 2^63, so a
/// deferred sum never saturates where the steps would not have (about 6.4 days).
pub const MAX_DEFERRED_WINDOW: Span = Span(1 << 39);

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
    use proptest::prelude::*;

    fn set_parts(usage: &mut UsageTracker, parts: &[u32]) {
        for (t, &p) in parts.iter().enumerate() {
            usage.set_tenant_gpu_parts(t, p);
        }
    }

    fn set_waiting(usage: &mut UsageTracker, waiting: &[u32]) {
        for (t, &w) in waiting.iter().enumerate() {
            usage.set_tenant_waiting(t, w);
        }
    }

    /// The tracker as it was before deferred steps: every tenant added at every
    /// step (the plain computation the deferred one must equal).
    #[derive(Debug)]
    struct Plain {
        window: Span,
        origin: Time,
        last: Time,
        tenant_gpu_parts: Vec<u32>,
        tenant_waiting: Vec<u32>,
        up_gpus: u32,
        free_gpu_parts: u32,
        busy_gpu_us: u128,
        busy_part_us: u128,
        available_gpu_us: u128,
        tenant_gpu_us: Vec<u128>,
        idle_while_waiting_gpu_us: u128,
        windows: Vec<WindowUsage>,
    }

    impl Plain {
        fn new(tenants: usize, up_gpus: u32, window: Span) -> Plain {
            Plain {
                window,
                origin: Time::ZERO,
                last: Time::ZERO,
                tenant_gpu_parts: vec![0; tenants],
                tenant_waiting: vec![0; tenants],
                up_gpus,
                free_gpu_parts: up_gpus * GPU_PARTS,
                busy_gpu_us: 0,
                busy_part_us: 0,
                available_gpu_us: 0,
                tenant_gpu_us: vec![0; tenants],
                idle_while_waiting_gpu_us: 0,
                windows: Vec::new(),
            }
        }

        fn advance(&mut self, now: Time) {
            while self.last < now {
                let mut index = (self.last - self.origin).0 / self.window.0;
                while index >= MAX_SHARE_WINDOWS {
                    self.window = Span(self.window.0.saturating_mul(2));
                    let mut helper = UsageTracker::new(0, 0, self.window);
                    helper.windows = std::mem::take(&mut self.windows);
                    helper.widen();
                    self.windows = helper.windows;
                    index = (self.last - self.origin).0 / self.window.0;
                }
                let window_end = self.origin + Span((index + 1).saturating_mul(self.window.0));
                let until = now.min(window_end);
                self.account(index as usize, (until - self.last).0);
                self.last = until;
            }
        }

        fn account(&mut self, index: usize, span_us: u64) {
            let tenants = self.tenant_gpu_parts.len();
            if self.windows.len() <= index {
                self.windows.resize_with(index + 1, || WindowUsage::empty(tenants));
            }
            let window = &mut self.windows[index];
            let mut anyone_waiting = false;
            for t in 0..tenants {
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

    fn same(usage: &UsageTracker, plain: &Plain) -> Result<(), TestCaseError> {
        prop_assert_eq!(&usage.windows, &plain.windows);
        prop_assert_eq!(&usage.tenant_gpu_us, &plain.tenant_gpu_us);
        prop_assert_eq!(usage.busy_gpu_us, plain.busy_gpu_us);
        prop_assert_eq!(usage.busy_part_us, plain.busy_part_us);
        prop_assert_eq!(usage.available_gpu_us, plain.available_gpu_us);
        prop_assert_eq!(usage.idle_while_waiting_gpu_us, plain.idle_while_waiting_gpu_us);
        prop_assert_eq!(usage.window, plain.window);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

        /// Deferred whole-GPU steps, and the per-step path, give the plain per-step
        /// sums: random steps (some across windows, some long enough to widen them),
        /// whole and fractional GPU parts, waiting jobs and capacity changes.
        #[test]
        fn deferred_steps_sum_as_the_plain_ones(
            window in prop_oneof![1u64..50, Just(3_600_000_000u64), Just(MAX_DEFERRED_WINDOW.0 + 1)],
            ops in prop::collection::vec((0u8..5, 0usize..3, 0u32..20, 0u64..200), 1..120),
            deferred in any::<bool>(),
        ) {
            let tenants = 3;
            let mut usage = UsageTracker::new(tenants, 16, Span(window));
            let mut plain = Plain::new(tenants, 16, Span(window));
            if deferred {
                usage.defer();
            }
            usage.start_at(Time(5));
            plain.origin = Time(5);
            plain.last = Time(5);
            let mut now = Time(5);
            for (op, tenant, value, step) in ops {
                match op {
                    // A step; now and then a long one (windows widen past MAX_SHARE_WINDOWS).
                    0 | 1 => {
                        let span = if value == 19 && step < 20 { window * (MAX_SHARE_WINDOWS + step) } else { step };
                        now = Time(now.0.saturating_add(span));
                        usage.advance(now);
                        plain.advance(now);
                    }
                    // Whole GPUs mostly, a fraction (a shared GPU, a MIG slice) at times.
                    2 => {
                        let parts = if value % 7 == 6 { value * GPU_PARTS / 7 } else { value * GPU_PARTS };
                        usage.set_tenant_gpu_parts(tenant, parts);
                        plain.tenant_gpu_parts[tenant] = parts;
                    }
                    3 => {
                        usage.set_tenant_waiting(tenant, value);
                        plain.tenant_waiting[tenant] = value;
                    }
                    _ => {
                        usage.up_gpus = value;
                        usage.free_gpu_parts = value * GPU_PARTS / 2;
                        plain.up_gpus = value;
                        plain.free_gpu_parts = value * GPU_PARTS / 2;
                    }
                }
                prop_assert_eq!(usage.tenant_gpu_parts(), &plain.tenant_gpu_parts[..]);
                prop_assert_eq!(usage.tenant_waiting(), &plain.tenant_waiting[..]);
            }
            if !deferred {
                // Without deferral the integrals are complete after every step.
                same(&usage, &plain)?;
            }
            usage.settle();
            same(&usage, &plain)?;
        }
    }

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
        set_parts(&mut usage, &[2 * GPU_PARTS, GPU_PARTS]);
        set_waiting(&mut usage, &[0, 1]);
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
        set_parts(&mut usage, &[3 * GPU_PARTS, 0]);
        set_waiting(&mut usage, &[2, 0]);
        usage.advance(Time::from_secs(4));
        set_waiting(&mut usage, &[1, 0]);
        usage.advance(Time::from_secs(12));
        set_waiting(&mut usage, &[1, 3]);
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
        set_parts(&mut narrow, &[GPU_PARTS]);
        set_waiting(&mut narrow, &[1]);
        // 3 x the limit in 1 s windows: widened twice (to 4 s), never over the limit.
        narrow.advance(Time::from_secs(3 * MAX_SHARE_WINDOWS));
        assert_eq!(narrow.window(), Span::from_secs(4));
        assert!(narrow.window_widened());
        assert!(narrow.windows.len() as u64 <= MAX_SHARE_WINDOWS);
        // The same as a run made with 4 s windows from the start.
        let mut wide = UsageTracker::new(1, 4, Span::from_secs(4));
        set_parts(&mut wide, &[GPU_PARTS]);
        set_waiting(&mut wide, &[1]);
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
        set_parts(&mut usage, &[8 * GPU_PARTS, 0]);
        usage.advance(Time::MAX);
        assert!(usage.windows.len() as u64 <= MAX_SHARE_WINDOWS);
        assert_eq!(usage.busy_gpu_us, u128::from(u64::MAX) * 8);
    }
}
