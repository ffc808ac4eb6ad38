//! The world model: what each started job actually does. Work advances at the
//! rate the rate model gives; a preempted job falls back to its last checkpoint;
//! a resumed job pays a restore overhead before it makes progress again.

use cotenant_core::mig::{MigPlace, MIG_COMPUTE_SLICES};
use cotenant_core::{Span, Time};

/// Parts of a GPU in which held GPU-time is counted: 420 = lcm(1, ..., 7), so a
/// half (a space-shared pair), a seventh (a MIG compute slice) and a job's share
/// of an MPS GPU (1 to [`cotenant_core::mig::MAX_MPS_JOBS`] = 7 sharers) are all
/// whole numbers of parts, and the integrals stay exact in integers.
pub const GPU_PARTS: u32 = 420;

/// A job's share of GPUs in [`GPU_PARTS`]: `gpus` whole GPUs split among
/// `sharers` jobs (1 alone, 2 a space-shared pair), or, for a MIG job
/// (`mig`), its instance's compute slices out of 7, or its share of an MPS GPU.
pub fn gpu_parts(gpus: u32, sharers: u32, mig: Option<MigPlace>) -> u32 {
    match mig {
        Some(MigPlace::Instance { compute_slices, .. }) => {
            u32::from(compute_slices) * GPU_PARTS / u32::from(MIG_COMPUTE_SLICES)
        }
        Some(MigPlace::Mps { sharers }) => GPU_PARTS / sharers.max(1),
        None => gpus * GPU_PARTS / sharers.max(1),
    }
}

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

impl Overheads {
    /// The overheads of `job`: its own checkpoint interval
    /// (`JobProfile::checkpoint_interval`), when it states one, overrides the run's.
    pub fn for_job(&self, job: &cotenant_core::JobSpec) -> Overheads {
        Overheads {
            checkpoint_interval: job.profile.checkpoint_interval.unwrap_or(self.checkpoint_interval),
            ..*self
        }
    }
}

impl Default for Overheads {
    fn default() -> Self {
        // Suspend-resume preemption (the job checkpoints when told to stop, as
        // Tiresias and Gandiva assume) with a 30 s restore on resume.
        Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::from_secs(30) }
    }
}

/// A stretch of a run at one rate and one share of GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Segment {
    from: Time,
    /// Work units per second (0 while restoring).
    rate: f64,
    /// Work done when the segment began.
    done_at_from: f64,
    /// The job's share of GPUs during the segment, in [`GPU_PARTS`] (it changes
    /// when a partner joins or leaves, an elastic job resizes, or MPS sharers change).
    parts: u32,
}

/// Segments kept in place without a heap allocation: a run has one, or two when it
/// starts with a restore; only re-rated or resized runs have more.
const INLINE_SEGMENTS: usize = 2;

/// The current run's segments, in time order: a vector that keeps its first
/// [`INLINE_SEGMENTS`] in place, so that starting a job allocates nothing. Once a run
/// has more they all move to `spilled`, until the next `clear`. The spilled vector is
/// boxed (kept, emptied, from run to run): most jobs never spill, and the box costs
/// them one word where a vector cost three.
#[derive(Clone, Debug, Default)]
struct Segments {
    /// Used while `spilled` is empty: the first `len` are the segments.
    inline: [Segment; INLINE_SEGMENTS],
    len: usize,
    /// All the segments, when there are (or were, since the last `clear`) more than fit in place.
    /// Boxed on purpose: one word for the many jobs that never spill, where a `Vec` is three.
    #[allow(clippy::box_collection)]
    spilled: Option<Box<Vec<Segment>>>,
}

impl Segments {
    /// The spilled segments, if the run has spilled (a non-empty vector).
    fn spilled(&self) -> Option<&Vec<Segment>> {
        self.spilled.as_deref().filter(|s| !s.is_empty())
    }

    fn spilled_mut(&mut self) -> Option<&mut Vec<Segment>> {
        self.spilled.as_deref_mut().filter(|s| !s.is_empty())
    }

    fn clear(&mut self) {
        self.len = 0;
        if let Some(spilled) = &mut self.spilled {
            spilled.clear();
        }
    }

    fn push(&mut self, segment: Segment) {
        if let Some(spilled) = self.spilled_mut() {
            spilled.push(segment);
        } else if self.len < INLINE_SEGMENTS {
            self.inline[self.len] = segment;
            self.len += 1;
        } else {
            let spilled = self.spilled.get_or_insert_with(Box::default);
            spilled.extend_from_slice(&self.inline[..self.len]);
            spilled.push(segment);
            self.len = 0;
        }
    }

    fn pop(&mut self) -> Option<Segment> {
        if let Some(spilled) = self.spilled_mut() {
            return spilled.pop();
        }
        self.len = self.len.checked_sub(1)?;
        Some(self.inline[self.len])
    }

    fn retain(&mut self, keep: impl Fn(&Segment) -> bool) {
        if let Some(spilled) = self.spilled_mut() {
            spilled.retain(keep);
            return;
        }
        let mut kept = 0;
        for i in 0..self.len {
            if keep(&self.inline[i]) {
                self.inline[kept] = self.inline[i];
                kept += 1;
            }
        }
        self.len = kept;
    }
}

impl std::ops::Deref for Segments {
    type Target = [Segment];
    fn deref(&self) -> &[Segment] {
        match self.spilled() {
            Some(spilled) => spilled,
            None => &self.inline[..self.len],
        }
    }
}

/// One job's progress as the world sees it.
///
/// GPU-time is kept in GPU-part-microseconds ([`GPU_PARTS`] per GPU) so that a
/// space-shared GPU (half to each of two jobs), a MIG instance (its compute
/// slices out of 7) and an MPS share stay exact in integers; `held_gpu_us()` and
/// `lost_gpu_us()` report whole GPU-microseconds.
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
    /// Bumped on every start, rate change and stop, so a stale finish event is recognized.
    pub generation: u32,
    pub starts: u32,
    /// Holds GPUs now.
    pub running: bool,
    held_part_us: u128,
    lost_part_us: u128,
    segments: Segments,
}

impl WorldJob {
    /// Starts a run at `now` on `gpus` GPUs holding `parts` of them (see
    /// [`gpu_parts`]); returns when it would finish `work`, if ever.
    pub fn start(
        &mut self,
        now: Time,
        gpus: u32,
        rate: f64,
        parts: u32,
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
        self.segments.clear();
        if restore > Span::ZERO {
            self.segments.push(Segment { from: now, rate: 0.0, done_at_from: self.saved, parts });
        }
        self.segments.push(Segment { from: self.productive_from, rate, done_at_from: self.saved, parts });
        self.finish_time(self.productive_from, self.saved, work)
    }

    /// The rate or the sharing changed at `now` (the job now holds `parts`);
    /// returns the new finish time.
    pub fn rerate(&mut self, now: Time, rate: f64, parts: u32, work: f64) -> Option<Time> {
        self.generation += 1;
        self.rate = rate;
        if now < self.productive_from {
            // Still restoring: share the rest of the restore, then run at the new rate.
            let productive = self.segments.pop().expect("a run has a productive segment");
            self.segments.push(Segment { from: now, rate: 0.0, done_at_from: self.saved, parts });
            self.segments.push(Segment { rate, parts, ..productive });
            return self.finish_time(self.productive_from, self.saved, work);
        }
        let done = self.work_done(now).min(work);
        self.segments.push(Segment { from: now, rate, done_at_from: done, parts });
        self.finish_time(now, done, work)
    }

    /// An elastic job now holds `gpus` GPUs: it runs through `phases` (each a
    /// span at a rate: preparing new workers at the old rate, a switching pause
    /// at rate 0) and then at `rate`. Returns the new finish time. A job still
    /// restoring finishes its restore first.
    pub fn resize(
        &mut self,
        now: Time,
        gpus: u32,
        phases: &[(Span, f64)],
        rate: f64,
        work: f64,
    ) -> Option<Time> {
        self.generation += 1;
        // Planned segments (an earlier resize's phases, a pending restore's end) are replaced.
        self.segments.retain(|s| s.from <= now);
        let mut done = self.work_done(now).min(work);
        let mut at = now;
        self.gpus = gpus;
        let parts = gpu_parts(gpus, 1, None);
        if now < self.productive_from {
            self.segments.push(Segment { from: now, rate: 0.0, done_at_from: done, parts });
            at = self.productive_from;
        }
        let mut finish = None;
        for &(span, phase_rate) in phases.iter().filter(|(span, _)| *span > Span::ZERO) {
            self.segments.push(Segment { from: at, rate: phase_rate, done_at_from: done, parts });
            let reachable = done + phase_rate * span.as_secs_f64();
            if finish.is_none() && phase_rate > 0.0 && reachable >= work {
                finish = Some(at + Span::from_secs_f64_ceil((work - done).max(0.0) / phase_rate));
            }
            done = reachable.min(work);
            at += span;
        }
        self.segments.push(Segment { from: at, rate, done_at_from: done, parts });
        self.rate = rate;
        finish.or_else(|| self.finish_time(at, done, work))
    }

    /// When the current run's last segment begins and the work done then: a
    /// progress report extrapolates exactly from it.
    pub fn last_segment(&self) -> Option<(Time, f64)> {
        self.segments.last().map(|s| (s.from, s.done_at_from))
    }

    fn finish_time(&self, from: Time, done: f64, work: f64) -> Option<Time> {
        if self.rate <= 0.0 || !self.rate.is_finite() {
            return None;
        }
        Some(from + Span::from_secs_f64_ceil((work - done).max(0.0) / self.rate))
    }

    /// Work done by `at` in the current run.
    fn work_done(&self, at: Time) -> f64 {
        match self.segments.iter().rev().find(|s| s.from <= at) {
            Some(s) => s.done_at_from + s.rate * (at - s.from).as_secs_f64(),
            None => self.saved,
        }
    }

    /// GPU-part-microseconds held in `[from, to)` of the current run.
    fn part_us_between(&self, from: Time, to: Time) -> u128 {
        let mut total = 0u128;
        for (i, segment) in self.segments.iter().enumerate() {
            let end = self.segments.get(i + 1).map_or(Time::MAX, |next| next.from);
            let span = to.min(end) - from.max(segment.from);
            total += u128::from(span.0) * u128::from(segment.parts);
        }
        total
    }

    /// Stops the current run at `now`, keeping only checkpointed work; returns
    /// the work kept.
    pub fn stop(&mut self, now: Time, work: f64, overheads: &Overheads) -> f64 {
        let kept_until = self.last_checkpoint(now, overheads.checkpoint_interval);
        self.stop_kept_until(now, kept_until, work)
    }

    /// When the current run last saved its progress by `now`, checkpointing every
    /// `interval` of productive time (zero: continuously, so `now`).
    pub fn last_checkpoint(&self, now: Time, interval: Span) -> Time {
        let productive = now.max(self.productive_from) - self.productive_from;
        self.productive_from + kept_productive_span(productive, interval)
    }

    /// Stops the current run at `now`, keeping the work done by `kept_until`
    /// (clamped to the run's productive part, `[productive_from, now]`): a job
    /// told ahead that its node goes saves then (sim::faults). Returns the work kept.
    pub fn stop_kept_until(&mut self, now: Time, kept_until: Time, work: f64) -> f64 {
        let kept_until = kept_until.min(now).max(self.productive_from.min(now));
        let kept = self.work_done(kept_until).min(work);
        self.close_run(now, kept_until);
        self.saved = kept;
        self.saved
    }

    /// The run completed all the work at `now`.
    pub fn finish(&mut self, now: Time, work: f64) {
        self.close_run(now, now);
        self.saved = work;
    }

    /// Accounts the run's GPU-time: all of it held, and lost except the
    /// productive part up to `kept_until`.
    fn close_run(&mut self, now: Time, kept_until: Time) {
        let held = self.part_us_between(self.run_start, now);
        let useful = self.part_us_between(self.productive_from, kept_until.min(now));
        self.held_part_us += held;
        self.lost_part_us += held - useful;
        self.generation += 1;
        self.rate = 0.0;
        self.running = false;
        self.segments.clear();
    }

    /// Work done at `now` (for progress reports; extrapolation needs no restore term
    /// once productive).
    pub fn saved_or_done(&self, now: Time) -> f64 {
        self.work_done(now.max(self.productive_from))
    }

    /// GPU-time held by the runs closed so far, in whole GPU-microseconds (rounded down).
    pub fn held_gpu_us(&self) -> u64 {
        whole_gpu_us(self.held_part_us)
    }

    /// GPU-time of the runs closed so far whose work was lost (not checkpointed,
    /// or restoring), in whole GPU-microseconds (rounded down).
    pub fn lost_gpu_us(&self) -> u64 {
        whole_gpu_us(self.lost_part_us)
    }

    /// GPU-time held by the runs closed so far, in [`GPU_PARTS`]-microseconds
    /// (`held_gpu_us()` before rounding down).
    pub fn held_part_us(&self) -> u128 {
        self.held_part_us
    }

    /// This job's share of GPUs now, in [`GPU_PARTS`] (420 per GPU held alone).
    pub fn gpu_parts(&self) -> u32 {
        match self.segments.last() {
            Some(segment) if self.running => segment.parts,
            _ => 0,
        }
    }
}

/// Whole GPU-microseconds in `part_us` GPU-part-microseconds, rounded down (saturating).
fn whole_gpu_us(part_us: u128) -> u64 {
    u64::try_from(part_us / u128::from(GPU_PARTS)).unwrap_or(u64::MAX)
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
        assert_eq!(job.start(Time::ZERO, 1, 1.0, GPU_PARTS, 500.0, &OVERHEADS), Some(Time::from_secs(500)));
        // Preempted at 250 s: checkpoints at 100 and 200 s, so 200 s of work kept, 50 s lost.
        assert_eq!(job.stop(Time::from_secs(250), 500.0, &OVERHEADS), 200.0);
        assert_eq!(job.lost_gpu_us(), 50_000_000);
        // Resumed at 300 s: 10 s restore, then 300 s of work left: ends at 610 s.
        assert_eq!(
            job.start(Time::from_secs(300), 1, 1.0, GPU_PARTS, 500.0, &OVERHEADS),
            Some(Time::from_secs(610))
        );
        job.finish(Time::from_secs(610), 500.0);
        assert_eq!(job.lost_gpu_us(), 60_000_000);
        assert_eq!(job.held_gpu_us(), 560_000_000);
    }

    #[test]
    fn stop_during_restore_keeps_everything_saved() {
        let mut job = WorldJob { saved: 40.0, starts: 1, ..WorldJob::default() };
        job.start(Time::ZERO, 2, 1.0, 2 * GPU_PARTS, 100.0, &OVERHEADS);
        assert_eq!(job.stop(Time::from_secs(5), 100.0, &OVERHEADS), 40.0);
        assert_eq!(job.lost_gpu_us(), 10_000_000);
    }

    #[test]
    fn sharing_halves_the_gpu_time_and_a_rate_change_moves_the_finish() {
        let overheads = Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO };
        let mut job = WorldJob::default();
        // 2 GPUs alone at rate 1 for 100 units: finishes at 100 s.
        assert_eq!(
            job.start(Time::ZERO, 2, 1.0, gpu_parts(2, 1, None), 100.0, &overheads),
            Some(Time::from_secs(100))
        );
        // At 40 s a partner joins: rate 0.5, half the GPUs. 60 units left take 120 s.
        assert_eq!(
            job.rerate(Time::from_secs(40), 0.5, gpu_parts(2, 2, None), 100.0),
            Some(Time::from_secs(160))
        );
        assert_eq!(job.gpu_parts(), GPU_PARTS);
        // At 100 s the partner leaves: 30 units left at rate 1.
        assert_eq!(
            job.rerate(Time::from_secs(100), 1.0, gpu_parts(2, 1, None), 100.0),
            Some(Time::from_secs(130))
        );
        job.finish(Time::from_secs(130), 100.0);
        // Held: 40 s x 2 GPUs + 60 s x 1 GPU (half of 2) + 30 s x 2 GPUs = 200 GPU-s.
        assert_eq!(job.held_gpu_us(), 200_000_000);
        assert_eq!(job.lost_gpu_us(), 0);
    }

    #[test]
    fn continuous_checkpoints_lose_nothing() {
        let overheads = Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO };
        let mut job = WorldJob::default();
        job.start(Time::ZERO, 4, 2.0, 4 * GPU_PARTS, 100.0, &overheads);
        assert_eq!(job.stop(Time::from_secs(7), 100.0, &overheads), 14.0);
        assert_eq!(job.lost_gpu_us(), 0);
    }

    #[test]
    fn a_mig_instance_holds_its_compute_slices_and_an_mps_job_its_share() {
        let overheads = Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO };
        let three_g = MigPlace::Instance { start: 0, compute_slices: 3 };
        assert_eq!(gpu_parts(0, 1, Some(three_g)), 180);
        assert_eq!(gpu_parts(0, 1, Some(MigPlace::Mps { sharers: 3 })), 140);
        let mut job = WorldJob::default();
        // In a 3g instance for 70 s (rate 0.5), then alone under MPS for 14 s: 30 + 14 = 44 GPU-s.
        assert_eq!(
            job.start(Time::ZERO, 0, 0.5, gpu_parts(0, 1, Some(three_g)), 100.0, &overheads),
            Some(Time::from_secs(200))
        );
        let mps_alone = gpu_parts(0, 1, Some(MigPlace::Mps { sharers: 1 }));
        assert_eq!(job.rerate(Time::from_secs(70), 1.0, mps_alone, 100.0), Some(Time::from_secs(135)));
        job.stop(Time::from_secs(84), 100.0, &overheads);
        assert_eq!(job.held_gpu_us(), 44_000_000);
        // A third of an MPS GPU for 3 µs: 3 x 140 part-µs = 1 GPU-µs, exactly.
        let mut short = WorldJob::default();
        short.start(Time::ZERO, 0, 1.0, gpu_parts(0, 3, Some(MigPlace::Mps { sharers: 3 })), 1.0, &overheads);
        short.stop(Time(3), 1.0, &overheads);
        assert_eq!(short.held_gpu_us(), 1);
    }

    proptest::proptest! {
        /// `Segments` (two in place, then a heap vector) holds exactly what a plain
        /// vector holds under any sequence of pushes, pops, retains and clears.
        #[test]
        fn segments_behave_as_a_vector(ops in proptest::collection::vec((0u8..6, 0u64..8), 0..60)) {
            let (mut segments, mut plain) = (Segments::default(), Vec::new());
            for (op, at) in ops {
                let segment = Segment { from: Time(at), rate: at as f64, done_at_from: 0.0, parts: 1 };
                match op {
                    0..=2 => {
                        segments.push(segment);
                        plain.push(segment);
                    }
                    3 => proptest::prop_assert_eq!(segments.pop(), plain.pop()),
                    4 => {
                        segments.retain(|s| s.from.0 <= at);
                        plain.retain(|s| s.from.0 <= at);
                    }
                    _ => {
                        segments.clear();
                        plain.clear();
                    }
                }
                proptest::prop_assert_eq!(&segments[..], &plain[..]);
            }
        }
    }
}
