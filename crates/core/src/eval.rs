//! Evaluation scores the world reports while a job runs (an RLHF job's
//! held-out reward or win rate at a checkpoint), kept on the engine's
//! [`crate::JobState`] so that policies can read them.
//!
//! The engine keeps a bounded summary, not the whole history: the count, the
//! best evaluation (its checkpoint is the one an early stop keeps) and the
//! latest [`EVAL_TAIL`] evaluations, enough for any decline test a policy runs.

use std::collections::VecDeque;

use crate::time::Time;

/// Latest evaluations kept per job: a decline test looks back at most this many.
pub const EVAL_TAIL: usize = 32;

/// One evaluation: `score` of the checkpoint at `work` units of progress, reported at `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    pub at: Time,
    pub work: f64,
    pub score: f64,
    /// 1 for the job's first evaluation, counting on.
    pub index: u32,
}

/// A job's evaluations so far, as a bounded summary. Every job's state holds
/// one, and most jobs never report an evaluation, so the summary is boxed and
/// made at the first evaluation taken: 8 bytes a job instead of about 80.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalHistory {
    summary: Option<Box<Summary>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Summary {
    count: u32,
    best: Option<Evaluation>,
    tail: VecDeque<Evaluation>,
}

impl EvalHistory {
    /// Records an evaluation; returns whether it was taken. A score that is not
    /// finite, or one for work at or before the latest evaluated work (a job
    /// that resumed from an earlier checkpoint reports those points again), is
    /// ignored.
    pub fn record(&mut self, at: Time, work: f64, score: f64) -> bool {
        let newer = self.last().is_none_or(|last| work > last.work);
        if !(score.is_finite() && work.is_finite() && newer) {
            return false;
        }
        let summary = self.summary.get_or_insert_with(Box::default);
        summary.count += 1;
        let evaluation = Evaluation { at, work, score, index: summary.count };
        if summary.best.is_none_or(|best| score > best.score) {
            summary.best = Some(evaluation);
        }
        if summary.tail.len() == EVAL_TAIL {
            summary.tail.pop_front();
        }
        summary.tail.push_back(evaluation);
        true
    }

    /// Evaluations recorded.
    pub fn count(&self) -> u32 {
        self.summary.as_ref().map_or(0, |summary| summary.count)
    }

    /// The best evaluation so far (the first of equal scores).
    pub fn best(&self) -> Option<Evaluation> {
        self.summary.as_ref().and_then(|summary| summary.best)
    }

    pub fn last(&self) -> Option<Evaluation> {
        self.summary.as_ref().and_then(|summary| summary.tail.back().copied())
    }

    /// The latest evaluations, oldest first (at most [`EVAL_TAIL`]).
    pub fn tail(&self) -> impl Iterator<Item = &Evaluation> {
        self.summary.iter().flat_map(|summary| summary.tail.iter())
    }

    /// Consecutive declines at the end of the history: how many of the latest
    /// evaluations each scored more than `min_drop` below the one before.
    /// At most `EVAL_TAIL - 1`.
    pub fn declines(&self, min_drop: f64) -> u32 {
        let scores: Vec<f64> = self.tail().map(|e| e.score).collect();
        scores.windows(2).rev().take_while(|w| w[1] < w[0] - min_drop).count() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(scores: &[f64]) -> EvalHistory {
        let mut history = EvalHistory::default();
        for (i, &score) in scores.iter().enumerate() {
            assert!(history.record(Time::from_secs(i as u64), (i + 1) as f64 * 10.0, score));
        }
        history
    }

    #[test]
    fn declines_count_from_the_end_and_best_is_the_first_maximum() {
        // 1, 2, 3, 2.5, 2.4: two declines at the end; best is the 3rd (score 3, work 30).
        let h = history(&[1.0, 2.0, 3.0, 2.5, 2.4]);
        assert_eq!(h.declines(0.0), 2);
        assert_eq!(h.best().map(|b| (b.index, b.score, b.work)), Some((3, 3.0, 30.0)));
        // A drop of 0.1 is not more than min_drop 0.1: only 3 -> 2.5 would count, and it is not last.
        assert_eq!(h.declines(0.1), 0);
        // A rise resets the count.
        assert_eq!(history(&[3.0, 2.0, 2.5]).declines(0.0), 0);
        assert_eq!(history(&[3.0, 3.0]).declines(0.0), 0);
    }

    #[test]
    fn stale_and_non_finite_evaluations_are_ignored_and_the_tail_is_bounded() {
        let mut h = history(&[1.0, 2.0]);
        assert!(!h.record(Time::from_secs(9), 20.0, 0.5), "work 20 was evaluated already");
        assert!(!h.record(Time::from_secs(9), 30.0, f64::NAN));
        assert_eq!(h.count(), 2);
        let long: Vec<f64> = (0..100).map(|i| 100.0 - i as f64).collect();
        let h = history(&long);
        assert_eq!(h.tail().count(), EVAL_TAIL);
        assert_eq!(h.declines(0.0), (EVAL_TAIL - 1) as u32);
        assert_eq!(h.best().map(|b| b.index), Some(1));
    }

    #[test]
    fn a_history_without_evaluations_is_empty_and_holds_nothing() {
        let mut h = EvalHistory::default();
        assert!(!h.record(Time::from_secs(1), 10.0, f64::NAN), "a rejected score makes no summary");
        assert_eq!(h, EvalHistory::default());
        assert_eq!((h.count(), h.best(), h.last(), h.tail().count(), h.declines(0.0)), (0, None, None, 0, 0));
        assert_eq!(size_of::<EvalHistory>(), size_of::<usize>());
    }
}
