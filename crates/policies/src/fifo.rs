//! FIFO in submission order, non-preemptive; optionally with EASY backfilling.

use cotenant_core::placement::Placement;
use cotenant_core::{Action, ClusterView, Decision, JobId, Policy, PolicyCx, Time, WaitReason};

use crate::greedy::{start_in_order, Attempt, StartPass, SCAN_LIMIT};

/// First come, first served. Without backfill the first job that cannot start
/// blocks every job behind it (strict FIFO). With EASY backfill the blocked
/// head gets a reservation at the earliest time enough GPUs free up (from the
/// duration estimates of running jobs), and later jobs may start now if they
/// finish before that time or use only GPUs the head will not need.
#[derive(Clone, Debug)]
pub struct Fifo {
    pub placement: Placement,
    pub backfill: bool,
}

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        if self.backfill {
            "fifo-backfill"
        } else {
            "fifo"
        }
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        if !self.backfill {
            return start_in_order(view, view.pending.iter().copied(), self.placement, true, None);
        }
        easy_backfill(view, self.placement)
    }
}

fn easy_backfill(view: &ClusterView<'_>, placement: Placement) -> Decision {
    let mut pass = StartPass::new(view, placement);
    let mut pending = view.pending.iter().copied().take(SCAN_LIMIT);
    // Phase 1: start in order until the first job that cannot be placed: the head.
    let Some(head) = pending.by_ref().find(|&id| pass.try_start(id) == Attempt::Misfit) else {
        return pass.decision;
    };
    let started: Vec<JobId> = pass
        .decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    let (shadow, mut extra) = reservation(view, head, &started, pass.free());
    // Phase 2: backfill jobs that leave the head's reservation intact.
    for id in pending {
        if pass.free() == 0 {
            break;
        }
        let job = view.job(id);
        let gpus = job.spec.gpus;
        if gpus > pass.free() {
            continue;
        }
        let ends_before_shadow = job.spec.duration_estimate.is_some_and(|d| view.now + d <= shadow);
        if !ends_before_shadow && gpus > extra {
            pass.decision.waiting.push((id, WaitReason::WouldDelayReservation { head }));
            continue;
        }
        if pass.try_start(id) == Attempt::Started && !ends_before_shadow {
            extra -= gpus;
        }
    }
    pass.decision
}

/// The head's reserved start (shadow time) and the GPUs free at that time
/// beyond what the head needs. Jobs without estimates are assumed never to end.
fn reservation(view: &ClusterView<'_>, head: JobId, started: &[JobId], free_now: u32) -> (Time, u32) {
    let needed = view.job(head).spec.gpus;
    let mut ends: Vec<(Time, u32)> = view
        .running
        .iter()
        .map(|&id| {
            let job = view.job(id);
            let end = job.remaining_estimate(view.now).map_or(Time::MAX, |left| view.now + left);
            (end, job.spec.gpus)
        })
        .chain(started.iter().map(|&id| {
            let job = view.job(id);
            (job.spec.duration_estimate.map_or(Time::MAX, |d| view.now + d), job.spec.gpus)
        }))
        .collect();
    ends.sort_unstable();
    let mut available = free_now;
    for (end, gpus) in ends {
        if end == Time::MAX {
            break;
        }
        available += gpus;
        if available >= needed {
            return (end, available - needed);
        }
    }
    (Time::MAX, 0)
}
