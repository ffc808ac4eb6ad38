//! A progress bar that appears only when a run takes longer than a second.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Tracks several concurrent runs and shows their combined progress.
#[derive(Debug)]
pub struct RunProgress {
    bar: ProgressBar,
    done: Vec<AtomicUsize>,
    started: Instant,
}

impl RunProgress {
    pub fn new(runs: usize, jobs_per_run: usize, label: &str) -> RunProgress {
        let bar =
            ProgressBar::with_draw_target(Some((runs * jobs_per_run) as u64), ProgressDrawTarget::hidden());
        let style =
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} jobs, {elapsed} elapsed, ~{eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(label.to_string());
        RunProgress { bar, done: (0..runs).map(|_| AtomicUsize::new(0)).collect(), started: Instant::now() }
    }

    /// Records that run `run` has finished `jobs_done` jobs.
    pub fn update(&self, run: usize, jobs_done: usize) {
        self.done[run].store(jobs_done, Ordering::Relaxed);
        if self.bar.is_hidden() && self.started.elapsed() > Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        let total: usize = self.done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        self.bar.set_position(total as u64);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
