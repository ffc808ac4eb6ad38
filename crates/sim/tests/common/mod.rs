//! A tiny fixture language for hand-computed cases: jobs as
//! `(arrival_s, gpus, duration_s)` on `nodes x gpus_per_node`, under a named policy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use cotenant_core::placement::Placement;
use cotenant_core::{ClusterSpec, JobSpec, Span, TenantSpec, Time};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::{simulate, Overheads, ReferenceRate, SimConfig, SimResult};

pub fn jobs(shape: &[(u64, u32, u64)]) -> Vec<JobSpec> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &(arrival, gpus, duration))| {
            let mut job = JobSpec::new(i as u32, 0, Time::from_secs(arrival), gpus, duration as f64);
            job.duration_estimate = Some(Span::from_secs(duration));
            job
        })
        .collect()
}

pub fn run_with(
    policy: &str,
    options: &[(&str, &str)],
    nodes: u32,
    gpus_per_node: u32,
    jobs: &[JobSpec],
    overheads: Overheads,
) -> SimResult {
    run_placed(policy, options, Placement::default(), nodes, gpus_per_node, jobs, overheads)
}

pub fn run_placed(
    policy: &str,
    options: &[(&str, &str)],
    placement: Placement,
    nodes: u32,
    gpus_per_node: u32,
    jobs: &[JobSpec],
    overheads: Overheads,
) -> SimResult {
    let params = PolicyParams {
        placement,
        options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        ..PolicyParams::default()
    };
    let policy = build(policy, &params).expect("policy builds");
    let config = SimConfig { overheads, record: true, ..SimConfig::default() };
    let tenants = vec![TenantSpec::new("t0")];
    simulate(
        jobs,
        &tenants,
        ClusterSpec::homogeneous("v100", nodes, gpus_per_node),
        policy,
        &ReferenceRate,
        &config,
        &mut |_| {},
    )
    .expect("simulation runs")
}

/// Continuous checkpoints and free restores: preemption costs nothing.
pub const FREE_PREEMPTION: Overheads = Overheads { checkpoint_interval: Span(0), restore_overhead: Span(0) };

/// `(jct_s, queueing_s, preemptions)` per job, in id order.
pub fn outcome(result: &SimResult) -> Vec<(f64, f64, u32)> {
    result
        .jobs
        .iter()
        .map(|j| {
            let jct = j.jct().expect("job completed").as_secs_f64();
            let queue = j.queueing().expect("job started").as_secs_f64();
            (jct, queue, j.preemptions)
        })
        .collect()
}
