//! A small random world for driving the engine in tests: jobs run at rate 1
//! (work = seconds) and report progress when they start, nodes fail and come
//! back, tenants may have hard limits, and (`jitter`) the world re-reports
//! some running jobs' progress off the engine's extrapolation, up or down (as a
//! restore overhead or a re-rate does). Used to check that the fast paths of
//! the preemptive passes decide exactly as the full ones.

use cotenant_core::{
    Cluster, ClusterSpec, Command, Engine, Input, JobId, JobSpec, Policy, Span, TenantSpec, Time,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub limits: Vec<Option<u32>>,
    /// (arrival s, tenant, gpus, work s, with an estimate)
    pub jobs: Vec<(u64, u32, u32, f64, bool)>,
    /// (time s, node, up)
    pub node_events: Vec<(u64, u32, bool)>,
    /// Re-report progress of some running jobs at each step, off by up to a
    /// quarter of their work either way.
    pub jitter: bool,
}

pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        1u32..5,
        prop_oneof![Just(4u32), Just(8u32)],
        proptest::collection::vec(prop::option::of(2u32..12), 1..4),
    )
        .prop_flat_map(|(nodes, gpus_per_node, limits)| {
            let tenants = limits.len() as u32;
            let job = (0u64..4000, 0..tenants, 0u32..=8, 1.0f64..3000.0, proptest::bool::weighted(0.9));
            let node_event = (0u64..6000, 0..nodes, proptest::bool::ANY);
            (
                Just(nodes),
                Just(gpus_per_node),
                Just(limits),
                proptest::collection::vec(job, 1..60),
                proptest::collection::vec(node_event, 0..4),
                proptest::bool::ANY,
            )
        })
        .prop_map(|(nodes, gpus_per_node, limits, mut jobs, mut node_events, jitter)| {
            jobs.sort_by_key(|j| j.0);
            node_events.sort_by_key(|e| e.0);
            Case { nodes, gpus_per_node, limits, jobs, node_events, jitter }
        })
}

/// The placements the preemptive passes are checked under: one that never
/// fails while enough GPUs are free, and one that leaves a job waiting
/// (`Fragmented`) rather than spread it (a verdict other than `LowerPriority`).
pub(crate) fn placement() -> impl Strategy<Value = cotenant_core::placement::Placement> {
    use cotenant_core::placement::Placement;
    prop_oneof![Just(Placement::Consolidated), Just(Placement::StrictConsolidated)]
}

/// Runs `case` to completion under `policy` (which checks itself as it goes);
/// returns the engine steps it took.
pub(crate) fn run(case: &Case, policy: Box<dyn Policy>) -> u64 {
    run_from(case, policy, 0)
}

/// [`run`] with every arrival and node event `base_s` seconds later (a run far
/// into the clock's range).
pub(crate) fn run_from(case: &Case, policy: Box<dyn Policy>, base_s: u64) -> u64 {
    let tenants: Vec<TenantSpec> = case
        .limits
        .iter()
        .enumerate()
        .map(|(i, &limit)| TenantSpec { gpu_limit: limit, ..TenantSpec::new(format!("t{i}")) })
        .collect();
    let specs: Vec<JobSpec> = case
        .jobs
        .iter()
        .enumerate()
        .map(|(i, &(at, tenant, gpus, work, estimate))| {
            let mut spec = JobSpec::new(i as u32, tenant, Time::from_secs(base_s + at), gpus, work);
            spec.duration_estimate = estimate.then(|| Span::from_secs_f64_ceil(work));
            spec
        })
        .collect();
    let cluster = Cluster::new(ClusterSpec::homogeneous("v100", case.nodes, case.gpus_per_node)).unwrap();
    let mut engine = Engine::new(cluster, tenants, policy, 0);
    let n = specs.len();
    let mut left_s: Vec<f64> = specs.iter().map(|j| j.work).collect();
    let mut started_at: Vec<Option<Time>> = vec![None; n];
    let (mut next_arrival, mut next_node) = (0, 0);
    // A run is stuck when no job finishes (or ends) in this many steps in a
    // row. Each job finishes or ends once, so a run that is not stuck takes at
    // most (jobs + 1) times as many steps. The run's whole length is not
    // bounded instead: a policy may thrash by its own rule and still finish
    // (tiresias at a 1 GPU-second first queue with its starvation guard: one
    // 18-job case took 204,551 steps, `a_thrashing_run_finishes`).
    let (mut steps, mut steps_since_a_finish) = (0u64, 0u32);
    loop {
        steps_since_a_finish += 1;
        assert!(
            steps_since_a_finish <= STEPS_WITHOUT_A_FINISH,
            "stuck: no job finished in {STEPS_WITHOUT_A_FINISH} steps"
        );
        let arrival = specs.get(next_arrival).map(|j| j.arrival);
        let node_at = case.node_events.get(next_node).map(|e| Time::from_secs(base_s + e.0));
        let finish = started_at
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (s + Span::from_secs_f64_ceil(left_s[i]), JobId(i as u32))))
            .min();
        if arrival.is_none() && node_at.is_none() && finish.is_none() {
            // Nothing runs and nothing will change: what still waits never fits.
            return steps;
        }
        let wake = engine.next_wakeup();
        let Some(now) = [arrival, node_at, finish.map(|f| f.0), wake].into_iter().flatten().min() else {
            return steps;
        };
        let mut inputs = Vec::new();
        if let Some((_, job)) = finish.filter(|f| f.0 == now) {
            steps_since_a_finish = 0;
            started_at[job.index()] = None;
            left_s[job.index()] = 0.0;
            inputs.push(Input::JobFinished { job });
        }
        while specs.get(next_arrival).is_some_and(|j| j.arrival == now) {
            inputs.push(Input::JobSubmitted(specs[next_arrival].clone().into()));
            next_arrival += 1;
        }
        while let Some(&(_, node, up)) =
            case.node_events.get(next_node).filter(|e| Time::from_secs(base_s + e.0) == now)
        {
            let node = cotenant_core::NodeId(node);
            inputs.push(if up { Input::NodeUp(node) } else { Input::NodeDown(node) });
            next_node += 1;
        }
        if wake == Some(now) {
            inputs.push(Input::Wakeup);
        }
        let commands = engine.step(now, Input::Batch(inputs));
        let mut reports = Vec::new();
        for command in commands {
            match command {
                Command::Start { job, .. } => {
                    started_at[job.index()] = Some(now);
                    let done = specs[job.index()].work - left_s[job.index()];
                    reports.push(Input::Progress { job, work_done: done, rate: 1.0 });
                }
                Command::Stop { job, .. } => {
                    if let Some(at) = started_at[job.index()].take() {
                        left_s[job.index()] = (left_s[job.index()] - (now - at).as_secs_f64()).max(0.0);
                    }
                }
                Command::End { job, .. } => {
                    steps_since_a_finish = 0;
                    started_at[job.index()] = None;
                }
                // Every job runs at rate 1 here, whatever its size.
                Command::Rerate { .. }
                | Command::Resize { .. }
                | Command::StartShared { .. }
                | Command::Allocate { .. } => {}
            }
        }
        if case.jitter {
            let secs = now.0 / 1_000_000;
            for (i, at) in started_at.iter().enumerate() {
                if let Some(at) = at.filter(|_| (secs + i as u64).is_multiple_of(7)) {
                    let done = specs[i].work - left_s[i] + (now - at).as_secs_f64();
                    let off = ((secs % 9) as f64 - 4.0) * specs[i].work / 16.0;
                    reports.push(Input::Progress { job: JobId(i as u32), work_done: done + off, rate: 1.0 });
                }
            }
        }
        if !reports.is_empty() {
            engine.step(now, Input::Batch(reports));
        }
        assert!(engine.violations().is_empty(), "{:?}", engine.violations());
        steps += 1;
    }
}

/// Steps without a job finishing after which [`run_from`] calls a run stuck.
const STEPS_WITHOUT_A_FINISH: u32 = 200_000;
