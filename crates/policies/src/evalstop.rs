//! EvalStop: a wrapper around any registered policy that ends an RLHF job whose
//! evaluation score declined `k` times in a row (reward over-optimization), keeps
//! its best checkpoint, frees its GPUs and lets the base policy fill them.
//!
//! The wrapper reads only what the engine keeps per job (`JobState::evals`: the
//! best evaluation and the latest ones); it never sees whether a job really
//! over-optimizes (that ground truth stays in the simulator's world model).

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

use cotenant_core::eval::EVAL_TAIL;
use cotenant_core::{Action, ClusterView, Decision, EndReason, JobId, JobState, Policy, PolicyCx, Time};

/// Consecutive declines that end a job, when not given.
pub const DEFAULT_K: u32 = 2;
/// The base policy of plain `evalstop`.
pub const DEFAULT_BASE: &str = "srtf";
/// The name form `evalstop(BASE)`.
const PREFIX: &str = "evalstop(";

/// The wrapper. `k` consecutive evaluations, each more than `min_drop` below the
/// one before, end a running job.
pub struct EvalStop {
    name: &'static str,
    base: Box<dyn Policy>,
    k: u32,
    min_drop: f64,
}

impl std::fmt::Debug for EvalStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalStop")
            .field("name", &self.name)
            .field("k", &self.k)
            .field("min_drop", &self.min_drop)
            .finish()
    }
}

impl EvalStop {
    /// `k` must be in `1..EVAL_TAIL` (the engine keeps that many evaluations) and
    /// `min_drop` finite and non-negative; the registry checks both.
    pub fn new(name: &'static str, base: Box<dyn Policy>, k: u32, min_drop: f64) -> EvalStop {
        assert!((1..EVAL_TAIL as u32).contains(&k) && min_drop.is_finite() && min_drop >= 0.0);
        EvalStop { name, base, k, min_drop }
    }

    fn should_stop(&self, job: &JobState) -> bool {
        job.evals.declines(self.min_drop) >= self.k
    }

    /// The end action for a job that should stop, naming its best checkpoint.
    fn stop(&self, job: &JobState) -> Action {
        let best = job.evals.best().expect("a job with declines has evaluations");
        let reason = EndReason::EvalDeclined {
            declines: job.evals.declines(self.min_drop),
            best_eval: best.index,
            best_score_micro: (best.score * 1e6).round() as i64,
            best_work: best.work.round().max(0.0) as u64,
        };
        Action::End { job: job.id(), reason }
    }
}

impl Policy for EvalStop {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        // Only an evaluation can make a job due: other passes cost nothing extra.
        let stops: Vec<Action> = if view.trigger.evaluation {
            view.running_jobs().filter(|job| self.should_stop(job)).map(|job| self.stop(job)).collect()
        } else {
            Vec::new()
        };
        // The base always sees every pass (it keeps indexes from the change log).
        let mut decision = self.base.schedule(cx, view);
        if stops.is_empty() {
            return decision;
        }
        let ended: BTreeSet<JobId> = stops
            .iter()
            .filter_map(|a| if let Action::End { job, .. } = a { Some(*job) } else { None })
            .collect();
        // The base did not know these jobs end now: drop what it meant for them. Its
        // starts on their GPUs stay valid (ends are applied first), and the engine's
        // follow-up pass lets it fill whatever is left free.
        decision.actions.retain(|action| match action {
            Action::Preempt { job }
            | Action::End { job, .. }
            | Action::Resize { job, .. }
            | Action::MigStart { job, .. }
            | Action::Allocate { job, .. } => !ended.contains(job),
            Action::StartShared { partner, .. } | Action::Share(cotenant_core::Share { partner, .. }) => {
                !ended.contains(partner)
            }
            // A reconfiguration only needs the jobs in removed instances stopped, which an end does.
            Action::Start { .. } | Action::MigReconfigure { .. } => true,
        });
        let mut actions = stops;
        actions.append(&mut decision.actions);
        decision.actions = actions;
        decision
    }

    fn next_round(&self, now: Time) -> Option<Time> {
        self.base.next_round(now)
    }

    fn acts_on_evaluation(&self, job: &JobState) -> bool {
        self.should_stop(job) || self.base.acts_on_evaluation(job)
    }
}

/// The base policy named by `evalstop(BASE)`; `None` for any other name.
pub fn base_name(name: &str) -> Option<&str> {
    name.strip_prefix(PREFIX)?.strip_suffix(')')
}

/// A `&'static str` for a wrapper's name (policy names are static). Each
/// distinct name is leaked once; a run names a handful.
pub fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(base_name("evalstop(srtf)"), Some("srtf"));
        assert_eq!(base_name("evalstop(las"), None);
        assert_eq!(base_name("srtf"), None);
        assert!(std::ptr::eq(intern("evalstop(x)"), intern(&String::from("evalstop(x)"))));
    }
}
