//! The world model: what each started job actually does. Work advances at the
//! rate the rate model gives; a preempted job falls back to its last checkpoint;
//! a resumed job pays a restore overhead before it makes progress again.

use cotenant_core::{Span, Time};

/// Overheads of stopping and resuming jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overheads {
    /// A job saves its progress every this much productive run time; zero means
    /// it never loses work on preemption (continuous checkpointing).
    pub checkpoint_interval: Span,
    /// Time a resumed job (any start after its first) spends restoring before
    /// it makes progress.
    pub restore_overhead: Span,
}

impl Default for Overheads {
    fn default() -> Self {
        // Suspend-resume preemption (the job checkpoints when told to stop, as
        // Tiresias and Gandiva assume) with a 30 s restore on resume.
        Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::from_secs(30) }
    }
}

/// One job's progress as the world sees it.
#[derive(Clone, Debug, Default)]
pub struct WorldJob {
    /// Work kept (checkpointed or completed) before the current run.
    pub saved: f64,
    /// Rate of the current run, work units per second.
    pub rate: f64,
    /// When the current run started (including its restore).
    pub run_start: Time,
    /// When the current run starts making progress (after the restore).
    pub productive_from: Time,
    pub gpus: u32,
    /// Bumped on every start and stop, so a stale finish event is recognized.
    pub generation: u32,
    pub starts: u32,
    /// Holds GPUs now.
    pub running: bool,
    /// GPU-microseconds that produced nothing kept: restores and lost work.
    pub lost_gpu_us: u64,
    /// GPU-microseconds held in total.
    pub held_gpu_us: u64,
}

impl WorldJob {
    /// Starts a run at `now`; returns when it would finish `work`, if ever.
    pub fn start(
        &mut self,
        now: Time,
        gpus: u32,
        rate: f64,
        work: f64,
        overheads: &Overheads,
    ) -> Option<Time> {
        let restore = if self.starts > 0 { overheads.restore_overhead } else { Span::ZERO };
        self.starts += 1;
        self.generation += 1;
        self.running = true;
        self.gpus = gpus;
        self.rate = rate;
        self.run_start = now;
        self.productive_from = now + restore;
        if rate <= 0.0 || !rate.is_finite() {
            return None;
        }
        let left = (work - self.saved).max(0.0);
        Some(self.productive_from + Span::from_secs_f64_ceil(left / rate))
    }

    /// Stops the current run at `now`, keeping only checkpointed work; returns
    /// the work kept.
    pub fn stop(&mut self, now: Time, work: f64, overheads: &Overheads) -> f64 {
        let productive = now - self.productive_from;
        let kept_span = kept_productive_span(productive, overheads.checkpoint_interval);
        self.saved = (self.saved + self.rate * kept_span.as_secs_f64()).min(work);
        let held = now - self.run_start;
        self.close_run(held, kept_span);
        self.saved
    }

    /// The run completed all the work at `now`.
    pub fn finish(&mut self, now: Time, work: f64) {
        self.saved = work;
        let held = now - self.run_start;
        let productive = now - self.productive_from;
        self.close_run(held, productive);
    }

    fn close_run(&mut self, held: Span, kept: Span) {
        let gpus = u64::from(self.gpus);
        self.held_gpu_us += held.0 * gpus;
        self.lost_gpu_us += held.0.saturating_sub(kept.0) * gpus;
        self.generation += 1;
        self.rate = 0.0;
        self.running = false;
    }
}

/// Productive time whose work survives a stop: all of it with continuous
/// checkpoints, otherwise up to the last whole checkpoint interval.
fn kept_productive_span(productive: Span, interval: Span) -> Span {
    if interval == Span::ZERO {
        return productive;
    }
    Span(productive.0 / interval.0 * interval.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OVERHEADS: Overheads =
        Overheads { checkpoint_interval: Span(100_000_000), restore_overhead: Span(10_000_000) };

    #[test]
    fn preemption_keeps_last_checkpoint_and_resume_pays_restore() {
        let mut job = WorldJob::default();
        // 1 GPU, rate 1, 500 s of work: finishes at 500 s if undisturbed.
        assert_eq!(job.start(Time::ZERO, 1, 1.0, 500.0, &OVERHEADS), Some(Time::from_secs(500)));
        // Preempted at 250 s: checkpoints at 100 and 200 s, so 200 s of work kept, 50 s lost.
        assert_eq!(job.stop(Time::from_secs(250), 500.0, &OVERHEADS), 200.0);
        assert_eq!(job.lost_gpu_us, 50_000_000);
        // Resumed at 300 s: 10 s restore, then 300 s of work left: ends at 610 s.
        assert_eq!(job.start(Time::from_secs(300), 1, 1.0, 500.0, &OVERHEADS), Some(Time::from_secs(610)));
        job.finish(Time::from_secs(610), 500.0);
        assert_eq!(job.lost_gpu_us, 60_000_000);
        assert_eq!(job.held_gpu_us, 560_000_000);
    }

    #[test]
    fn stop_during_restore_keeps_everything_saved() {
        let mut job = WorldJob { saved: 40.0, starts: 1, ..WorldJob::default() };
        job.start(Time::ZERO, 2, 1.0, 100.0, &OVERHEADS);
        assert_eq!(job.stop(Time::from_secs(5), 100.0, &OVERHEADS), 40.0);
        assert_eq!(job.lost_gpu_us, 10_000_000);
    }

    #[test]
    fn continuous_checkpoints_lose_nothing() {
        let overheads = Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO };
        let mut job = WorldJob::default();
        job.start(Time::ZERO, 4, 2.0, 100.0, &overheads);
        assert_eq!(job.stop(Time::from_secs(7), 100.0, &overheads), 14.0);
        assert_eq!(job.lost_gpu_us, 0);
    }
}
