//! Space sharing in the simulator: a shared job runs at its co-located rate, and
//! when its partner leaves it is re-rated and its finish moves. Hand-computed.
#![allow(clippy::unwrap_used)]

use cotenant_core::{
    Action, ClusterSpec, ClusterView, Decision, JobSpec, Policy, PolicyCx, TenantSpec, Time,
};
use cotenant_sim::{simulate, summarize, Overheads, Placed, RateModel, SimConfig};

/// Starts on free GPUs if any, otherwise shares with the oldest running job of
/// the same size that runs alone.
struct ShareWhenFull;

impl Policy for ShareWhenFull {
    fn name(&self) -> &'static str {
        "share-when-full"
    }
    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let mut decision = Decision::default();
        let mut free = cotenant_core::placement::FreeMap::new(view.cluster);
        let mut taken = Vec::new();
        for job in view.pending_jobs() {
            if let Ok(gpus) = free.place(job.spec.gpus, Default::default(), |_| true) {
                decision.actions.push(Action::Start { job: job.id(), gpus });
                continue;
            }
            let partner = view
                .running_jobs()
                .find(|r| r.partner.is_none() && r.spec.gpus == job.spec.gpus && !taken.contains(&r.id()));
            if let Some(partner) = partner {
                taken.push(partner.id());
                decision.actions.push(Action::StartShared { job: job.id(), partner: partner.id() });
            }
        }
        decision
    }
}

/// Rate 1 alone, 0.5 when sharing.
struct HalfWhenShared;

impl RateModel for HalfWhenShared {
    fn rate(&self, _job: &JobSpec, placed: &Placed<'_>) -> f64 {
        if placed.partners.is_empty() {
            1.0
        } else {
            0.5
        }
    }
}

#[test]
fn partner_leaving_speeds_the_survivor_up() {
    // One GPU. J0 (10 units) alone from 0. J1 (4 units) joins at 2: both at 0.5.
    // J1 needs 8 s: done at 10. J0 has 2 + 0.5 x 8 = 6 done at 10, then 4 alone: done at 14.
    let jobs = vec![JobSpec::new(0, 0, Time::ZERO, 1, 10.0), JobSpec::new(1, 0, Time::from_secs(2), 1, 4.0)];
    let overheads =
        Overheads { checkpoint_interval: Default::default(), restore_overhead: Default::default() };
    let config = SimConfig { overheads, record: true, ..SimConfig::default() };
    let result = simulate(
        &jobs,
        &[TenantSpec::new("t")],
        ClusterSpec::homogeneous("v100", 1, 1),
        Box::new(ShareWhenFull),
        &HalfWhenShared,
        &config,
        &mut |_| {},
    )
    .unwrap();
    let jct: Vec<f64> = result.jobs.iter().map(|j| j.jct().unwrap().as_secs_f64()).collect();
    assert_eq!(jct, vec![14.0, 8.0]);
    // GPU-time: J0 2 s alone + 8 s at half + 4 s alone = 10 GPU-s; J1 8 s at half = 4 GPU-s.
    assert_eq!(result.jobs[0].held_gpu_us, 10_000_000);
    assert_eq!(result.jobs[1].held_gpu_us, 4_000_000);
    assert_eq!(result.usage.busy_gpu_us, 14_000_000);
    let summary = summarize(&result);
    assert!((summary.gpu_utilization - 1.0).abs() < 1e-12);
}
