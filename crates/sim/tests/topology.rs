//! Topology-aware rates (docs/topology.md), hand-computed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cotenant_core::placement::Placement;
use cotenant_core::topology::{Routing, Topology};
use cotenant_core::{ClusterSpec, JobSpec, Layout, TenantSpec, Time};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::topology_rates::{comm_factor, GroupLinks, StepTimeModel, TopologyRates};
use cotenant_sim::{simulate, Outcome, ReferenceRate, SimConfig, SimResult};

/// `nodes` 1-GPU nodes, node `n` on leaf `n mod leaves`.
fn cluster(nodes: u32, leaves: u32, topology: Topology) -> ClusterSpec {
    let mut spec = ClusterSpec::homogeneous("h100", nodes, 1);
    for (n, node) in spec.nodes.iter_mut().enumerate() {
        node.rack = n as u32 % leaves;
    }
    spec.topology = Some(topology);
    spec
}

/// One spine, 100 Gbit/s NICs and uplinks.
fn one_spine(routing: Routing) -> Topology {
    Topology { spines: 1, nic_gbps: 100.0, uplink_gbps: Some(100.0), routing, ..Topology::default() }
}

/// Jobs `(gpus, work, comm fraction)` all arriving at 0.
fn jobs(shape: &[(u32, f64, f64)]) -> Vec<JobSpec> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &(gpus, work, f))| {
            let mut job = JobSpec::new(i as u32, 0, Time::ZERO, gpus, work);
            job.profile.comm_fraction = f;
            job
        })
        .collect()
}

fn run(spec: ClusterSpec, jobs: &[JobSpec], placement: Placement, rates: &TopologyRates) -> SimResult {
    let params = PolicyParams { placement, ..PolicyParams::default() };
    let config = SimConfig::default();
    simulate(
        jobs,
        &[TenantSpec::new("t0")],
        spec,
        build("fifo", &params).unwrap(),
        rates,
        &config,
        &mut |_| {},
    )
    .unwrap()
}

fn ends(result: &SimResult) -> Vec<f64> {
    result
        .jobs
        .iter()
        .map(|j| {
            assert_eq!(j.outcome, Outcome::Completed);
            (j.end.unwrap() - Time::ZERO).as_secs_f64()
        })
        .collect()
}

/// ECMP collision. Four 1-GPU nodes, leaf = node mod 2, one spine, NIC 100 Gbit/s and
/// uplinks of 100 Gbit/s. FIFO, consolidated: job A (2 GPUs, work 100, f = 0.5) takes
/// nodes 0 and 1 (leaves 0 and 1), job B (2 GPUs, work 50, f = 0.5) nodes 2 and 3 (the
/// same two leaves). Both hash onto the only spine: uplink (leaf 0, spine 0) carries A's
/// node 0 and B's node 2, so each flow gets 100 / 2 = 50 = B_eff, and both run at
/// 1 / ((1 - 0.5) + 0.5 x 100 / 50) = 1 / 1.5 = 2/3. B finishes at 50 / (2/3) = 75 s;
/// A has then done 50, is re-rated alone on the uplink (B_eff = 100, rate 1) and
/// finishes its other 50 at 125 s.
#[test]
fn ecmp_collision_halves_the_shared_uplink() {
    let topology = one_spine(Routing::Ecmp);
    let rates = TopologyRates::new(Box::new(ReferenceRate));
    let result = run(
        cluster(4, 2, topology),
        &jobs(&[(2, 100.0, 0.5), (2, 50.0, 0.5)]),
        Placement::Consolidated,
        &rates,
    );
    let end = ends(&result);
    assert!((end[1] - 75.0).abs() < 1e-3, "B ends at {}", end[1]);
    assert!((end[0] - 125.0).abs() < 1e-3, "A ends at {}", end[0]);
}

/// vClos, one spine, NIC and uplinks of 100 Gbit/s. On the four-node cluster above, the
/// vClos placement keeps each job in one leaf (A: nodes 0 and 2; B: 1 and 3), so neither
/// crosses the spine and both run at rate 1: A ends at 100 s, B at 50 s.
///
/// On six nodes over three leaves (leaf = node mod 3), A asks 4 GPUs: no leaf holds 4;
/// the fewest-leaves plan takes leaf 0 (2 free, lowest id) and then leaf 1: nodes 0, 3,
/// 1, 4, reserving spine 0's uplinks on leaves 0 and 1. Each of those leaves has 2 of A's
/// nodes on one 100 Gbit/s uplink: B_eff = min(100, 1 x 100 / 2) = 50, rate 2/3, A ends
/// at 150 s. B (2 GPUs) gets leaf 2 (nodes 2 and 5) to itself: rate 1, ends at 50 s.
#[test]
fn vclos_isolates_and_queues() {
    let topology = one_spine(Routing::Vclos);
    let rates = TopologyRates::new(Box::new(ReferenceRate));
    let shape = [(2, 100.0, 0.5), (2, 50.0, 0.5)];
    let result = run(cluster(4, 2, topology.clone()), &jobs(&shape), Placement::Vclos, &rates);
    assert_eq!(ends(&result), vec![100.0, 50.0]);
    let shape = [(4, 100.0, 0.5), (2, 50.0, 0.5)];
    let result = run(cluster(6, 3, topology), &jobs(&shape), Placement::Vclos, &rates);
    let end = ends(&result);
    assert!((end[0] - 150.0).abs() < 1e-3, "A ends at {}", end[0]);
    assert!((end[1] - 50.0).abs() < 1e-3, "B ends at {}", end[1]);
}

/// vClos makes a job wait for isolated paths. Nine 1-GPU nodes on three leaves (leaf =
/// node mod 3: {0, 3, 6}, {1, 4, 7}, {2, 5, 8}), one spine, 100 Gbit/s NIC and uplinks.
/// A (4 GPUs, work 100, f = 0.5): no leaf holds 4; leaf 0 (all 3) plus the best fit for
/// 1 on leaf 1 (node 1), reserving spine 0's uplinks on leaves 0 and 1. Leaf 0 has 3 of
/// A's nodes on one uplink: B_eff = 100 / 3, rate 1 / (0.5 + 0.5 x 3) = 1/2, A ends at
/// 200 s. B (4 GPUs, work 50): 5 GPUs are free, but every 4 of them span leaf 1 and
/// leaf 2, and leaf 1's only uplink is A's: B waits (`NoIsolatedPaths`) until 200 s,
/// then is placed like A was (rate 1/2) and ends at 200 + 100 = 300 s.
#[test]
fn vclos_queues_a_job_without_isolated_paths() {
    let topology = one_spine(Routing::Vclos);
    let rates = TopologyRates::new(Box::new(ReferenceRate));
    let result =
        run(cluster(9, 3, topology), &jobs(&[(4, 100.0, 0.5), (4, 50.0, 0.5)]), Placement::Vclos, &rates);
    let end = ends(&result);
    assert!((end[0] - 200.0).abs() < 1e-3, "A ends at {}", end[0]);
    assert_eq!(result.jobs[1].first_start, Some(Time::from_secs(200)));
    assert!((end[1] - 300.0).abs() < 1e-3, "B ends at {}", end[1]);
}

/// B_eff on a two-tier path. Two leaves of four nodes (leaf = node mod 2), two spines,
/// NIC 100, oversubscription 4: each uplink carries 4 x 100 / (2 x 4) = 50 Gbit/s. A
/// 2-GPU job on nodes 0 and 1 crosses the spine tier; alone, each node's flow gets
/// min(100, 50 / 1) = 50 = B_eff. With f = 0.2 it runs at 1 / (0.8 + 0.2 x 100 / 50) =
/// 1 / 1.2, so work 100 takes 120 s. Its 1-GPU twin never leaves a node: 100 s.
#[test]
fn two_tier_path_with_oversubscription() {
    let topology = Topology { spines: 2, nic_gbps: 100.0, oversubscription: 4.0, ..Topology::default() };
    let rates = TopologyRates::new(Box::new(ReferenceRate));
    let result =
        run(cluster(8, 2, topology.clone()), &jobs(&[(2, 100.0, 0.2)]), Placement::Consolidated, &rates);
    assert!((ends(&result)[0] - 120.0).abs() < 1e-3);
    let result = run(cluster(8, 2, topology), &jobs(&[(1, 100.0, 0.2)]), Placement::Consolidated, &rates);
    assert_eq!(ends(&result), vec![100.0]);
    assert!((comm_factor(0.2, 100.0, 50.0) - 1.0 / 1.2).abs() < 1e-12);
}

/// A step-time model replaces the communication fraction for jobs it knows: here one
/// whose step is 1 s of compute plus 100 Gbit / (its data-parallel bandwidth). Alone
/// across the oversubscribed spine (50 Gbit/s): 1 + 2 = 3 s against 1 + 1 = 2 s on the
/// reference NIC, so rate 2/3 and work 100 takes 150 s.
#[test]
fn step_time_hook_sets_the_rate() {
    struct Toy;
    impl StepTimeModel for Toy {
        fn step_time(&self, job: &JobSpec, links: &GroupLinks) -> Option<f64> {
            job.profile.layout.map(|_| 1.0 + 100.0 / links.data_gbps.min(1e12))
        }
    }
    let topology = Topology { spines: 2, nic_gbps: 100.0, oversubscription: 4.0, ..Topology::default() };
    let rates = TopologyRates::new(Box::new(ReferenceRate)).with_step_time(Box::new(Toy));
    let mut job = jobs(&[(2, 100.0, 0.0)]);
    job[0].profile.layout = Some(Layout { tensor: 1, pipeline: 1, data: 2 });
    let result = run(cluster(8, 2, topology), &job, Placement::Consolidated, &rates);
    assert!((ends(&result)[0] - 150.0).abs() < 1e-3);
}
