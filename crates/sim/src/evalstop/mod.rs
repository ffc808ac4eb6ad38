//! The world model of RLHF jobs whose evaluation score is reported as they run
//! (for the EvalStop wrapper, `cotenant_policies::evalstop`): each job's score
//! curve as data, evaluations every `interval` of its progress, and the ground
//! truth (over-optimizing or not, and where the true peak lies) that the
//! metrics compare the stops against. Policies never see the truth.
//!
//! Curves are reconstructed from the paper's description (docs/policies.md,
//! "EvalStop"): a healthy run saturates, `ceiling * (1 - exp(-p / tau))`; an
//! over-optimizing ("reward hacking") run rises the same way up to its peak at
//! fraction `p_peak` of its work, then declines linearly at `decline` score per
//! unit of work fraction. Every evaluation adds N(0, sigma) noise, drawn from
//! the job's noise seed and the evaluation's index, so that a job resumed from a
//! checkpoint sees the same score for the same point of its curve.

pub mod metrics;
pub mod workload;

use cotenant_core::{JobId, JobSpec, Span, Time};

/// Most evaluations one job may have (a limit on everything): `interval` is at least its inverse.
pub const MAX_EVALS_PER_JOB: f64 = 10_000.0;

/// What an evaluation curve looks like after its rise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// Saturates at the ceiling.
    Healthy,
    /// Over-optimizes: the score peaks at fraction `peak` of the work, then falls
    /// by `decline` per unit of work fraction.
    Hacking { peak: f64, decline: f64 },
}

/// One job's evaluation-score curve over the fraction of its work done.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalCurve {
    pub ceiling: f64,
    /// Rise constant, as a fraction of the work (63% of the ceiling at `tau`).
    pub tau: f64,
    pub shape: Shape,
    /// Standard deviation of each evaluation's noise.
    pub sigma: f64,
    /// Fraction of the work between evaluations.
    pub interval: f64,
    pub noise_seed: u64,
}

/// A curve parameter out of its range: names the job and the field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{job}: eval curve field '{field}' = {value}: {problem}")]
pub struct CurveError {
    pub job: JobId,
    pub field: &'static str,
    pub value: f64,
    pub problem: &'static str,
}

impl EvalCurve {
    /// Every field finite and in its range.
    pub fn validate(&self, job: JobId) -> Result<(), CurveError> {
        let check = |field: &'static str, value: f64, ok: bool, problem: &'static str| {
            if value.is_finite() && ok {
                Ok(())
            } else {
                Err(CurveError { job, field, value, problem })
            }
        };
        check("ceiling", self.ceiling, self.ceiling.abs() <= 1e6, "must be a finite number within +-1e6")?;
        check(
            "tau",
            self.tau,
            self.tau > 0.0 && self.tau <= 10.0,
            "must be in (0, 10] (a fraction of the work)",
        )?;
        check("sigma", self.sigma, (0.0..=1e6).contains(&self.sigma), "must be in [0, 1e6]")?;
        check(
            "interval",
            self.interval,
            self.interval >= 1.0 / MAX_EVALS_PER_JOB && self.interval <= 1.0,
            "must be in [1e-4, 1] (a fraction of the work; at most 10,000 evaluations per job)",
        )?;
        if let Shape::Hacking { peak, decline } = self.shape {
            check("peak", peak, peak > 0.0 && peak < 1.0, "must be in (0, 1) (a fraction of the work)")?;
            check("decline", decline, decline > 0.0 && decline <= 1e6, "must be in (0, 1e6]")?;
        }
        Ok(())
    }

    /// The noiseless score at `fraction` of the work.
    pub fn mean(&self, fraction: f64) -> f64 {
        let rise = |p: f64| self.ceiling * (1.0 - (-p / self.tau).exp());
        match self.shape {
            Shape::Healthy => rise(fraction),
            Shape::Hacking { peak, .. } if fraction <= peak => rise(fraction),
            Shape::Hacking { peak, decline } => rise(peak) - decline * (fraction - peak),
        }
    }

    /// The score of evaluation `index` (1-based), at fraction `index * interval`.
    pub fn score(&self, index: u32) -> f64 {
        self.mean(f64::from(index) * self.interval) + self.sigma * standard_normal(self.noise_seed, index)
    }

    /// Where the noiseless score peaks, as a fraction of the work: `None` for a
    /// healthy run (it never declines).
    pub fn true_peak(&self) -> Option<f64> {
        match self.shape {
            Shape::Healthy => None,
            Shape::Hacking { peak, .. } => Some(peak),
        }
    }

    /// The first evaluation after `done` work units of `work`: its index and the
    /// time a run at `rate` from `from` (with `done` then) reaches it. `None` if
    /// the run never does (no evaluation at or after the end of the work).
    pub fn next_eval(&self, work: f64, from: Time, done: f64, rate: f64) -> Option<(u32, Time)> {
        let step = self.interval * work;
        if !(rate > 0.0 && rate.is_finite() && step > 0.0) {
            return None;
        }
        let index = (done / step + 1e-9).floor() as u32 + 1;
        let target = f64::from(index) * step;
        if target >= work * (1.0 - 1e-9) {
            return None;
        }
        Some((index, from + Span::from_secs_f64_ceil((target - done).max(0.0) / rate)))
    }

    /// Work units at evaluation `index` of a job with `work` units.
    pub fn eval_work(&self, index: u32, work: f64) -> f64 {
        f64::from(index) * self.interval * work
    }
}

/// The curves of a workload, by job id; `None` for a job that is not evaluated.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalCurves {
    curves: Vec<Option<EvalCurve>>,
}

impl EvalCurves {
    pub fn new(curves: Vec<Option<EvalCurve>>) -> EvalCurves {
        EvalCurves { curves }
    }

    pub fn get(&self, job: JobId) -> Option<&EvalCurve> {
        self.curves.get(job.index()).and_then(Option::as_ref)
    }

    /// Every curve valid, and none for a job the workload does not have.
    pub fn validate(&self, jobs: &[JobSpec]) -> Result<(), CurveError> {
        for (i, curve) in self.curves.iter().enumerate() {
            let Some(curve) = curve else { continue };
            let job = JobId(i as u32);
            if i >= jobs.len() {
                return Err(CurveError {
                    job,
                    field: "job",
                    value: i as f64,
                    problem: "the workload has no such job",
                });
            }
            curve.validate(job)?;
        }
        Ok(())
    }
}

/// One evaluation the world reported, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalPoint {
    pub job: JobId,
    pub at: Time,
    pub index: u32,
    pub work: f64,
    pub score: f64,
}

/// A N(0, 1) draw determined by `(seed, index)` (splitmix64, then Box-Muller).
fn standard_normal(seed: u64, index: u32) -> f64 {
    let a = splitmix64(seed ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let b = splitmix64(a);
    // Uniforms in (0, 1]: the logarithm is finite.
    let u1 = ((a >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let u2 = (b >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> EvalCurve {
        EvalCurve { ceiling: 1.0, tau: 0.2, shape: Shape::Healthy, sigma: 0.0, interval: 0.1, noise_seed: 7 }
    }

    #[test]
    fn shapes_by_hand() {
        let h = healthy();
        assert!((h.mean(0.2) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        let hack = EvalCurve { shape: Shape::Hacking { peak: 0.4, decline: 2.0 }, ..h };
        let at_peak = 1.0 - (-2.0f64).exp();
        assert!((hack.mean(0.4) - at_peak).abs() < 1e-12);
        // 0.1 past the peak at 2 per unit: 0.2 lower.
        assert!((hack.mean(0.5) - (at_peak - 0.2)).abs() < 1e-12);
        assert_eq!(hack.true_peak(), Some(0.4));
        assert_eq!(h.true_peak(), None);
    }

    #[test]
    fn evaluations_every_interval_of_work_and_none_at_the_end() {
        let h = healthy();
        // 1000 units, interval 0.1: evaluations at 100, 200, ..., 900 units.
        assert_eq!(h.next_eval(1000.0, Time::ZERO, 0.0, 2.0), Some((1, Time::from_secs(50))));
        // Resumed from a checkpoint at 250 units at t=400 s: next is #3 at 300 units, 50 s later.
        assert_eq!(h.next_eval(1000.0, Time::from_secs(400), 250.0, 1.0), Some((3, Time::from_secs(450))));
        // Exactly at an evaluation point: the next one.
        assert_eq!(h.next_eval(1000.0, Time::ZERO, 300.0, 1.0), Some((4, Time::from_secs(100))));
        assert_eq!(h.next_eval(1000.0, Time::ZERO, 900.0, 1.0), None);
        assert_eq!(h.next_eval(1000.0, Time::ZERO, 0.0, 0.0), None);
    }

    #[test]
    fn noise_is_a_function_of_seed_and_index_with_unit_spread() {
        let n = 20_000;
        let draws: Vec<f64> = (1..=n).map(|i| standard_normal(3, i)).collect();
        let mean = draws.iter().sum::<f64>() / f64::from(n);
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / f64::from(n);
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean}, variance {var}");
        assert_eq!(standard_normal(3, 5), draws[4]);
        assert_ne!(standard_normal(4, 5), draws[4]);
    }

    #[test]
    fn malformed_curves_name_the_job_and_field() {
        let bad = EvalCurve { tau: -1.0, ..healthy() };
        let error = bad.validate(JobId(3)).unwrap_err();
        assert_eq!(error.field, "tau");
        assert!(error.to_string().starts_with("job3: eval curve field 'tau' = -1"), "{error}");
        let bad = EvalCurve { shape: Shape::Hacking { peak: 1.5, decline: 1.0 }, ..healthy() };
        assert_eq!(bad.validate(JobId(0)).unwrap_err().field, "peak");
        let bad = EvalCurve { interval: f64::NAN, ..healthy() };
        assert_eq!(bad.validate(JobId(0)).unwrap_err().field, "interval");
        let bad = EvalCurve { sigma: -0.1, ..healthy() };
        assert_eq!(bad.validate(JobId(0)).unwrap_err().field, "sigma");
        let curves = EvalCurves::new(vec![None, Some(healthy())]);
        assert_eq!(curves.validate(&[JobSpec::new(0, 0, Time::ZERO, 1, 1.0)]).unwrap_err().field, "job");
    }
}
