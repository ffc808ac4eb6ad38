//! Shared by the engine tests: a policy that plays pre-written decisions.

use std::collections::VecDeque;

use cotenant_core::{Action, ClusterView, Decision, Policy, PolicyCx};

/// Returns pre-written decisions, one per pass (then empty ones).
pub struct Scripted(pub VecDeque<Vec<Action>>);

impl Policy for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, _view: &ClusterView<'_>) -> Decision {
        Decision { actions: self.0.pop_front().unwrap_or_default(), waiting: Vec::new() }
    }
}
