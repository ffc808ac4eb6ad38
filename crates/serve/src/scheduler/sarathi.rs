//! Sarathi-Serve: decodes first, then partial prefills, then new prefills, under a
//! token budget chosen so that one iteration meets the TBT SLO ("stall-free batching").

use cotenant_perf::{BatchEntry, Roofline};

use super::{BatchLimits, Pick, RequestScheduler, SchedCx};
use crate::Slo;

/// Decodes assumed to share an iteration when sizing the budget, and their context.
const REFERENCE_DECODES: usize = 32;
const REFERENCE_CONTEXT_TOKENS: u32 = 1024;
/// Budgets are multiples of this (tile-friendly chunk sizes).
const BUDGET_STEP_TOKENS: u32 = 64;

/// The largest budget (a multiple of 64, at least 64, at most `max_tokens`) whose
/// iteration, a prefill chunk of that size plus 32 decodes at 1,024 tokens of
/// context, stays within the TBT SLO.
pub fn sarathi_budget(model: &Roofline, tbt_slo_s: f64, max_tokens: u32) -> u32 {
    let mut entries =
        vec![
            BatchEntry { new_tokens: 1, context_tokens: REFERENCE_CONTEXT_TOKENS, emits_token: true };
            REFERENCE_DECODES
        ];
    entries.push(BatchEntry { new_tokens: 0, context_tokens: 0, emits_token: false });
    let mut best = BUDGET_STEP_TOKENS;
    let mut budget = BUDGET_STEP_TOKENS;
    while budget <= max_tokens {
        entries[REFERENCE_DECODES].new_tokens = budget;
        if model.iteration_s(&entries) > tbt_slo_s {
            break;
        }
        best = budget;
        budget += BUDGET_STEP_TOKENS;
    }
    best
}

#[derive(Clone, Debug)]
pub struct Sarathi {
    limits: BatchLimits,
}

impl Sarathi {
    pub fn new(base: BatchLimits, model: &Roofline, slo: Slo) -> Sarathi {
        let token_budget = sarathi_budget(model, slo.tbt.as_secs_f64(), base.token_budget);
        Sarathi { limits: BatchLimits { token_budget, decode_first: true, ..base } }
    }
}

impl RequestScheduler for Sarathi {
    fn name(&self) -> &'static str {
        "sarathi"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        if cx.waiting.is_empty() {
            Pick::Stop
        } else {
            Pick::admit(0)
        }
    }
    fn diagnostics(&self) -> Vec<(String, f64)> {
        vec![("token_budget".into(), f64::from(self.limits.token_budget))]
    }
}
