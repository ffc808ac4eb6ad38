//! DriftSched (2026): shortest-estimated-job-first with an online-corrected output-length
//! estimator, service tiers and aging.
//!
//! Each request category has a prior output-length estimate; a correction factor per
//! category is an EMA (alpha 0.1) of actual / prior over finished requests, clipped to
//! [0.25, 3]. The estimate is prior x correction. Score = estimate x tier factor - aging
//! x seconds waited; the lowest score is admitted first. The scheduler also keeps the
//! static (uncorrected) estimate's error so the correction can be measured.

use std::collections::BTreeMap;

use super::{BatchLimits, Pick, RequestScheduler, SchedCx};
use crate::request::{Request, RequestId, Tier};

/// Waiting requests examined per pick (a bound on scheduling cost).
const MAX_SCAN: usize = 2048;

#[derive(Clone, Debug, PartialEq)]
pub struct DriftConfig {
    /// Prior output tokens per category; a missing category uses `default_prior_tokens`.
    pub prior_tokens: Vec<f64>,
    pub default_prior_tokens: f64,
    pub ema_alpha: f64,
    pub correction_min: f64,
    pub correction_max: f64,
    /// Estimated tokens forgiven per second of waiting.
    pub aging_tokens_per_s: f64,
    /// Disable the online correction (estimation-error baseline) ...
    pub correct_online: bool,
    /// ... or the SJF order altogether (FIFO with the same bookkeeping).
    pub shortest_first: bool,
}

impl Default for DriftConfig {
    fn default() -> DriftConfig {
        DriftConfig {
            prior_tokens: Vec::new(),
            default_prior_tokens: 256.0,
            ema_alpha: 0.1,
            correction_min: 0.25,
            correction_max: 3.0,
            aging_tokens_per_s: 20.0,
            correct_online: true,
            shortest_first: true,
        }
    }
}

fn tier_factor(tier: Tier) -> f64 {
    match tier {
        Tier::Premium => 0.5,
        Tier::Standard => 1.0,
        Tier::Batch => 2.0,
    }
}

/// Absolute-error sums of the two estimators.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EstimationError {
    pub finished: u64,
    pub corrected_abs_tokens: f64,
    pub static_abs_tokens: f64,
}

#[derive(Clone, Debug)]
pub struct DriftSched {
    limits: BatchLimits,
    config: DriftConfig,
    correction: Vec<f64>,
    /// Estimates made at admission, by request: (corrected, static).
    estimates: BTreeMap<RequestId, (f64, f64)>,
    pub error: EstimationError,
}

impl DriftSched {
    pub fn new(limits: BatchLimits, categories: usize, config: DriftConfig) -> DriftSched {
        DriftSched {
            limits,
            correction: vec![1.0; categories.max(1)],
            estimates: BTreeMap::new(),
            error: EstimationError::default(),
            config,
        }
    }

    fn prior(&self, category: u32) -> f64 {
        self.config.prior_tokens.get(category as usize).copied().unwrap_or(self.config.default_prior_tokens)
    }

    /// Current estimate of a request's output tokens.
    pub fn estimate(&self, request: &Request) -> f64 {
        let correction = self.correction.get(request.category as usize).copied().unwrap_or(1.0);
        self.prior(request.category) * correction
    }

    fn score(&self, cx: &SchedCx<'_>, id: RequestId) -> f64 {
        let request = &cx.requests[id as usize];
        let waited_s = (cx.now - request.arrival).as_secs_f64();
        self.estimate(request) * tier_factor(request.tier) - self.config.aging_tokens_per_s * waited_s
    }
}

impl RequestScheduler for DriftSched {
    fn name(&self) -> &'static str {
        "driftsched"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        if cx.waiting.is_empty() {
            return Pick::Stop;
        }
        if !self.config.shortest_first {
            return Pick::admit(0);
        }
        let mut best = 0;
        let mut best_score = f64::INFINITY;
        for (index, &id) in cx.waiting.iter().enumerate().take(MAX_SCAN) {
            let score = self.score(cx, id);
            if score < best_score {
                (best, best_score) = (index, score);
            }
        }
        Pick::admit(best)
    }
    fn on_admit(&mut self, cx: &SchedCx<'_>, id: RequestId, first_time: bool) {
        if first_time {
            let request = &cx.requests[id as usize];
            self.estimates.insert(id, (self.estimate(request), self.prior(request.category)));
        }
    }
    fn on_finish(&mut self, id: RequestId, request: &Request) {
        let Some((corrected, prior)) = self.estimates.remove(&id) else { return };
        let actual = f64::from(request.output_tokens);
        self.error.finished += 1;
        self.error.corrected_abs_tokens += (corrected - actual).abs();
        self.error.static_abs_tokens += (prior - actual).abs();
        if self.config.correct_online {
            if let Some(factor) = self.correction.get_mut(request.category as usize) {
                let updated =
                    (1.0 - self.config.ema_alpha) * *factor + self.config.ema_alpha * actual / prior;
                *factor = updated.clamp(self.config.correction_min, self.config.correction_max);
            }
        }
    }
    fn diagnostics(&self) -> Vec<(String, f64)> {
        let n = self.error.finished.max(1) as f64;
        vec![
            ("estimate_mae_tokens".into(), self.error.corrected_abs_tokens / n),
            ("static_prior_mae_tokens".into(), self.error.static_abs_tokens / n),
        ]
    }
}
