//! How well early stops match the truth, and what they save: precision, recall
//! and false-positive rate of the stops, mean JCT and wasted compute.
//!
//! Definitions (docs/policies.md, "EvalStop"):
//! - a *stop* is a job that ended `EvalDeclined`; a *positive* is an RLHF job whose
//!   curve over-optimizes (has a true peak). Precision = true stops / stops;
//!   recall = true stops / positives; false-positive rate = healthy RLHF jobs
//!   stopped / healthy RLHF jobs.
//! - *JCT* counts every job that completed or was stopped (a stopped job is done:
//!   it delivers its best checkpoint), end - arrival.
//! - *Wasted compute* is the GPU-time, at reference speed, spent on an
//!   over-optimizing job's progress past its true peak:
//!   `gpus x max(0, work_at_end - peak x work) / rate`, summed over those jobs, in
//!   GPU-hours, where work_at_end is all the work for a completed job and the work
//!   of its last evaluation for a stopped one (it stops at that evaluation).
//!   Restore overheads after a preemption are not counted (they are lost time of
//!   any preemption, `lost_gpu_seconds` in the per-job output).

use cotenant_core::EndReason;

use super::EvalCurves;
use crate::driver::{Outcome, SimResult};

/// The EvalStop figures of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalStopSummary {
    pub policy: String,
    pub rlhf_jobs: usize,
    pub hacking_jobs: usize,
    pub stopped: usize,
    pub true_stops: usize,
    pub false_stops: usize,
    /// `None` when nothing was stopped (or nothing to find / no healthy job).
    pub precision: Option<f64>,
    pub recall: Option<f64>,
    pub false_positive_rate: Option<f64>,
    /// Mean JCT in hours over jobs that completed or were stopped, and over training jobs alone.
    pub mean_jct_hours: f64,
    pub mean_training_jct_hours: f64,
    pub wasted_gpu_hours: f64,
    /// Mean true (noiseless) score of the checkpoint over-optimizing jobs deliver,
    /// as a fraction of their true peak score.
    pub delivered_quality: f64,
    /// Jobs neither completed nor ended (a horizon or limit): left out of the means.
    pub unfinished: usize,
}

/// The figures of `result`, against the truth in `curves`.
pub fn evalstop_summary(result: &SimResult, curves: &EvalCurves) -> EvalStopSummary {
    let mut s = EvalStopSummary { policy: result.policy.clone(), ..EvalStopSummary::default() };
    let (mut jct_sum, mut jct_n, mut train_sum, mut train_n) = (0.0, 0usize, 0.0, 0usize);
    let mut quality_sum = 0.0;
    // The work of each job's last evaluation (a stopped job stops at it).
    let mut last_eval_work = vec![0.0; result.jobs.len()];
    for point in &result.evaluations {
        last_eval_work[point.job.index()] = point.work;
    }
    for record in &result.jobs {
        let stopped = matches!(record.outcome, Outcome::Ended(EndReason::EvalDeclined { .. }));
        let done = stopped || record.outcome == Outcome::Completed;
        match record.end.filter(|_| done) {
            Some(end) => {
                let hours = (end - record.arrival).as_secs_f64() / 3600.0;
                jct_sum += hours;
                jct_n += 1;
                if curves.get(record.id).is_none() {
                    train_sum += hours;
                    train_n += 1;
                }
            }
            None if !matches!(record.outcome, Outcome::Ended(_)) => s.unfinished += 1,
            None => {}
        }
        s.stopped += usize::from(stopped);
        let Some(curve) = curves.get(record.id) else { continue };
        s.rlhf_jobs += 1;
        let Some(peak) = curve.true_peak() else {
            s.false_stops += usize::from(stopped);
            continue;
        };
        s.hacking_jobs += 1;
        s.true_stops += usize::from(stopped);
        if !done {
            continue;
        }
        let work_at_end = if stopped { last_eval_work[record.id.index()] } else { record.work };
        let past_peak = (work_at_end - peak * record.work).max(0.0);
        s.wasted_gpu_hours += f64::from(record.gpus) * past_peak / 3600.0;
        let delivered = match record.outcome {
            Outcome::Ended(EndReason::EvalDeclined { best_work, .. }) => best_work as f64 / record.work,
            _ => 1.0,
        };
        quality_sum += curve.mean(delivered) / curve.mean(peak);
    }
    let ratio = |a: usize, b: usize| (b > 0).then(|| a as f64 / b as f64);
    s.precision = ratio(s.true_stops, s.stopped);
    s.recall = ratio(s.true_stops, s.hacking_jobs);
    s.false_positive_rate = ratio(s.false_stops, s.rlhf_jobs - s.hacking_jobs);
    s.mean_jct_hours = if jct_n > 0 { jct_sum / jct_n as f64 } else { 0.0 };
    s.mean_training_jct_hours = if train_n > 0 { train_sum / train_n as f64 } else { 0.0 };
    s.delivered_quality = if s.hacking_jobs > 0 { quality_sum / s.hacking_jobs as f64 } else { 0.0 };
    s
}
