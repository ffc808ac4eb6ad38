//! Faults and spot capacity (sim::faults): hand-computed cases and properties.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cotenant_core::{ClusterSpec, Departure, JobSpec, NodeId, Span, TenantSpec, Time};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::faults::{Cause, Failures, FaultConfig, Outage, Spot, SpotNodes};
use cotenant_sim::{simulate, Outcome, Overheads, ReferenceRate, SimConfig, SimResult};
use proptest::prelude::*;

const OVERHEADS: Overheads =
    Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span(10_000_000) };

fn run(policy: &str, jobs: &[JobSpec], cluster: ClusterSpec, faults: FaultConfig) -> SimResult {
    let config = SimConfig { overheads: OVERHEADS, faults: Some(Arc::new(faults)), ..SimConfig::default() };
    go(policy, &PolicyParams::default(), jobs, cluster, &ReferenceRate, &config)
}

/// One tenant's `jobs` under `policy` (built with `params`).
fn go(
    policy: &str,
    params: &PolicyParams,
    jobs: &[JobSpec],
    cluster: ClusterSpec,
    rates: &dyn cotenant_sim::RateModel,
    config: &SimConfig,
) -> SimResult {
    let policy = build(policy, params).unwrap();
    simulate(jobs, &[TenantSpec::new("t")], cluster, policy, rates, config, &mut |_| {}).unwrap()
}

/// One 2-GPU job of 1000 s that checkpoints every 100 s (its own interval; the run's is 0).
fn checkpointing_job() -> Vec<JobSpec> {
    let mut job = JobSpec::new(0, 0, Time::ZERO, 2, 1000.0);
    job.profile.checkpoint_interval = Some(Span::from_secs(100));
    vec![job]
}

fn outage(at: u64, secs: u64, cause: Cause) -> Outage {
    Outage { node: NodeId(0), at: Time::from_secs(at), down_for: Span::from_secs(secs), cause }
}

/// On paper: the job runs 0-250 s at rate 1 (250 units done); its last checkpoint
/// was at 200 s, so the failure at 250 s loses exactly 50 units (50 s x 2 GPUs =
/// 100 GPU-s). The node is back at 300 s; the restart restores for 10 s and runs
/// the 800 units left: it completes at 300 + 10 + 800 = 1110 s. Lost GPU-time in
/// all: 100 GPU-s of lost work + 20 GPU-s of restore = 120 GPU-s.
#[test]
fn a_failure_loses_exactly_the_work_since_the_last_checkpoint() {
    let faults = FaultConfig { scripted: vec![outage(250, 50, Cause::Failure)], ..FaultConfig::default() };
    let result = run("fifo", &checkpointing_job(), ClusterSpec::homogeneous("v100", 1, 2), faults);
    let job = &result.jobs[0];
    assert_eq!(job.outcome, Outcome::Completed);
    assert_eq!(job.end, Some(Time::from_secs(1110)));
    assert_eq!(job.lost_gpu_us, 120_000_000);
    assert_eq!(job.held_gpu_us, (250 + 810) * 2 * 1_000_000);
    let summary = result.faults.unwrap();
    assert_eq!((summary.failures, summary.jobs_interrupted), (1, 1));
    let hit = summary.interruptions[0];
    assert_eq!((hit.cause, hit.done, hit.kept, hit.lost_work()), (Cause::Failure, 250.0, 200.0, 50.0));
    assert_eq!(hit.lost_gpu_us, 100_000_000);
    assert!((summary.lost_gpu_hours - 100.0 / 3600.0).abs() < 1e-12);
}

/// On paper: a reclaim at 250 s with 60 s notice, a 30 s save: the job trains to
/// 220 s, saves 220-250 s and keeps all 220 units (no work lost; the save's
/// 30 s x 2 GPUs = 60 GPU-s is lost). Back at 300 s, restore 10 s, 780 units
/// left: done at 1090 s. With a 10 s notice the save cannot finish: the job keeps
/// its 200 s checkpoint, as on a failure, and completes at 300 + 10 + 800 = 1110 s.
#[test]
fn a_notice_that_covers_the_save_loses_no_work() {
    let spot = |notice| Spot {
        nodes: SpotNodes::Count(0),
        reclaim: Span::from_secs(3600),
        away: Span::from_secs(50),
        notice: Span::from_secs(notice),
        seed: 0,
    };
    let reclaim = |notice| FaultConfig {
        spot: Some(spot(notice)),
        scripted: vec![outage(250, 50, Cause::Reclaim)],
        ..FaultConfig::default()
    };
    let warned = run("fifo", &checkpointing_job(), ClusterSpec::homogeneous("v100", 1, 2), reclaim(60));
    assert_eq!(warned.jobs[0].end, Some(Time::from_secs(1090)));
    let summary = warned.faults.unwrap();
    let hit = summary.interruptions[0];
    assert_eq!(
        (hit.cause, hit.kept, hit.lost_work(), hit.lost_gpu_us),
        (Cause::Reclaim, 220.0, 0.0, 60_000_000)
    );
    assert_eq!(summary.reclaims, 1);

    let late = run("fifo", &checkpointing_job(), ClusterSpec::homogeneous("v100", 1, 2), reclaim(10));
    assert_eq!(late.jobs[0].end, Some(Time::from_secs(1110)));
    let hit = late.faults.unwrap().interruptions[0];
    assert_eq!((hit.kept, hit.lost_work()), (200.0, 50.0));
}

/// A known departure (availability window) saves like a notice: the node leaves
/// at 250 s and is back at 300 s; the job keeps 220 units and completes at 1090 s.
/// Rent: the node is away 50 s of the 1090 s, at the on-demand price.
#[test]
fn a_known_departure_saves_ahead_and_is_not_paid_for() {
    let mut cluster = ClusterSpec::homogeneous("v100", 1, 2);
    cluster.departures = vec![Departure {
        node: NodeId(0),
        leaves: Time::from_secs(250),
        returns: Some(Time::from_secs(300)),
    }];
    let result = run("fifo", &checkpointing_job(), cluster, FaultConfig::default());
    assert_eq!(result.jobs[0].end, Some(Time::from_secs(1090)));
    let summary = result.faults.unwrap();
    assert_eq!((summary.departures, summary.interruptions[0].cause), (1, Cause::Window));
    let paid_hours = 2.0 * 1040.0 / 3600.0;
    assert!((summary.on_demand_gpu_hours - paid_hours).abs() < 1e-9);
    assert!((summary.cost_usd - paid_hours * 3.06).abs() < 1e-9);
    assert!((summary.all_on_demand_cost_usd - 2.0 * 1090.0 / 3600.0 * 3.06).abs() < 1e-9);
}

/// Without faults nothing changes and no fault summary appears.
#[test]
fn no_faults_no_summary() {
    let config = SimConfig { overheads: OVERHEADS, ..SimConfig::default() };
    let policy = build("fifo", &PolicyParams::default()).unwrap();
    let cluster = ClusterSpec::homogeneous("v100", 1, 2);
    let result = simulate(
        &checkpointing_job(),
        &[TenantSpec::new("t")],
        cluster,
        policy,
        &ReferenceRate,
        &config,
        &mut |_| {},
    )
    .unwrap();
    assert!(result.faults.is_none());
    assert_eq!(result.jobs[0].end, Some(Time::from_secs(1000)));
}

/// Same seed, same failures under any policy; the plan does not depend on the policy.
#[test]
fn failures_are_seeded() {
    let faults = |seed| FaultConfig {
        failures: Some(Failures { mtbf: Span::from_secs(2000), repair: Span::from_secs(100), seed }),
        ..FaultConfig::default()
    };
    let jobs: Vec<JobSpec> =
        (0..6).map(|i| JobSpec::new(i, 0, Time::from_secs(u64::from(i) * 50), 2, 900.0)).collect();
    let a = run("fifo", &jobs, ClusterSpec::homogeneous("v100", 3, 2), faults(7));
    let b = run("fifo", &jobs, ClusterSpec::homogeneous("v100", 3, 2), faults(7));
    assert_eq!(format!("{:?}", a.jobs), format!("{:?}", b.jobs));
    assert_eq!(a.faults, b.faults);
    assert!(a.faults.as_ref().unwrap().failures > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// Checkpoint intervals stay under LAS's 300 s quantum and MTBFs well above them
    /// (a job that can never reach a checkpoint between failures or quanta livelocks,
    /// with or without faults: that is the model, not a bug).
    ///
    /// Under random failure and reclaim plans, availability windows, and any of several
    /// policies, Varuna-wrapped ones included (elastic jobs, services): no
    /// interruption loses more productive time than the job's checkpoint interval
    /// (lost work < interval x rate; none with continuous checkpoints or a notice
    /// that covers the save), and every job completes or states why.
    #[test]
    fn a_failure_never_loses_more_than_the_checkpoint_interval(
        policy in prop::sample::select(vec![
            "fifo", "srtf", "las", "tiresias", "fifo-backfill", "varuna(fifo)", "varuna(las)", "varuna(srtf)", "varuna(fifo-backfill)",
        ]),
        nodes in 1u32..5,
        per_node in 1u32..5,
        shape in prop::collection::vec(
            (0u64..2000, 1u32..6, 1u64..3000, prop::option::of(1u64..250), any::<bool>(), 0u8..4),
            1..16,
        ),
        windows in prop::collection::vec((0u32..4, 0u64..4000, 1u64..2000), 0..3),
        run_ckpt in 0u64..250,
        mtbf in 2_000u64..50_000,
        repair in 1u64..2000,
        spot in prop::option::of((0.0f64..=1.0, 100u64..10_000, 0u64..120)),
        seed in any::<u64>(),
    ) {
        let mut shape = shape;
        shape.sort_by_key(|j| j.0);
        let jobs: Vec<JobSpec> = shape
            .iter()
            .enumerate()
            .map(|(i, &(arrival, gpus, secs, ckpt, elastic, kind))| {
                let gpus = gpus.min(nodes * per_node);
                let mut job = JobSpec::new(i as u32, 0, Time::from_secs(arrival), gpus, secs as f64);
                job.duration_estimate = Some(Span::from_secs(secs));
                job.profile.checkpoint_interval = ckpt.map(Span::from_secs);
                job.elastic = elastic.then(|| cotenant_core::Elastic { min: gpus.div_ceil(2), max: gpus });
                if kind == 0 {
                    job.kind = cotenant_core::JobKind::Inference;
                }
                job
            })
            .collect();
        let faults = FaultConfig {
            failures: Some(Failures { mtbf: Span::from_secs(mtbf), repair: Span::from_secs(repair), seed }),
            spot: spot.map(|(fraction, reclaim, notice)| Spot {
                nodes: SpotNodes::Fraction(fraction),
                reclaim: Span::from_secs(reclaim),
                away: Span::from_secs(300),
                notice: Span::from_secs(notice),
                seed: seed ^ 1,
            }),
            ..FaultConfig::default()
        };
        let config = SimConfig {
            overheads: Overheads { checkpoint_interval: Span::from_secs(run_ckpt), restore_overhead: Span::from_secs(5) },
            faults: Some(Arc::new(faults)),
            seed,
            ..SimConfig::default()
        };
        let policy = build(policy, &PolicyParams::default()).unwrap();
        let mut cluster = ClusterSpec::homogeneous("v100", nodes, per_node);
        cluster.departures = windows
            .iter()
            .filter(|w| w.0 < nodes)
            .map(|&(node, leaves, away)| Departure {
                node: NodeId(node),
                leaves: Time::from_secs(leaves),
                returns: Some(Time::from_secs(leaves + away)),
            })
            .collect();
        // Every decision is valid (a violation would fail the run).
        let result = simulate(&jobs, &[TenantSpec::new("t")], cluster, policy, &ReferenceRate, &config, &mut |_| {}).unwrap();
        let summary = result.faults.unwrap();
        for hit in &summary.interruptions {
            let bound = hit.interval.as_secs_f64() * hit.rate;
            prop_assert!(hit.lost_work() <= bound + 1e-6, "{hit:?} lost more than {bound}");
            if hit.interval == Span::ZERO {
                prop_assert!(hit.lost_work() <= 1e-6, "{hit:?}");
            }
        }
        // Every outage ends (repairs, returns), every job fits the cluster: all complete.
        for job in &result.jobs {
            prop_assert_eq!(&job.outcome, &Outcome::Completed, "job {}", job.id);
        }
    }
}

/// Varuna morphing against waiting for capacity, on paper. Two nodes of 4 GPUs;
/// one 8-GPU elastic job ([4, 8]) of 1000 s that checkpoints every 100 s; node 1
/// fails at 250 s for 500 s; restores take 10 s; a resize checkpoints and restarts
/// (stop-resume, 45 s); the elastic curve is linear, so the pipeline model alone
/// sets the rate (on 4 GPUs AutoConfig's P = 1, D = 4 runs at exactly half speed).
/// - Wait (fifo): keeps 200 at 250 s, waits for node 1 until 750 s, restores 10 s,
///   runs 800 s: done at 1560 s.
/// - Varuna (varuna(fifo)): keeps 200, restarts at once on node 0's 4 GPUs: restore
///   to 260 s, then 490 s at 0.5 = 245 units (445 at 750 s); node 1 back: it grows
///   to 8 GPUs, pausing 45 s, then runs the 555 units left: done at 750 + 45 + 555 = 1350 s.
#[test]
fn varuna_restarts_on_what_is_left_instead_of_waiting() {
    use cotenant_sim::elastic::{ElasticModel, ScalingMode};
    use cotenant_sim::varuna_rates::VarunaRates;
    let elastic = ElasticModel { mode: ScalingMode::StopResume, efficiency: 1.0, ..ElasticModel::default() };
    let mut job = JobSpec::new(0, 0, Time::ZERO, 8, 1000.0);
    job.profile.checkpoint_interval = Some(Span::from_secs(100));
    job.elastic = Some(cotenant_core::Elastic { min: 4, max: 8 });
    let faults = FaultConfig {
        scripted: vec![Outage { node: NodeId(1), ..outage(250, 500, Cause::Failure) }],
        ..FaultConfig::default()
    };
    let config =
        SimConfig { overheads: OVERHEADS, faults: Some(Arc::new(faults)), elastic, ..SimConfig::default() };
    let rates = VarunaRates { inner: Box::new(ReferenceRate), elastic };
    let run = |name: &str| {
        let cluster = ClusterSpec::homogeneous("v100", 2, 4);
        go(name, &PolicyParams::default(), std::slice::from_ref(&job), cluster, &rates, &config)
    };
    let wait = run("fifo");
    assert_eq!(wait.jobs[0].end, Some(Time::from_secs(1560)));
    let morph = run("varuna(fifo)");
    assert_eq!(morph.jobs[0].end, Some(Time::from_secs(1350)));
    assert_eq!(morph.jobs[0].resizes, 1);
    assert_eq!(morph.faults.unwrap().interruptions[0].kept, 200.0);
}

/// Komet-style: three 1-GPU nodes; nodes 0 and 1 leave at 500 s (back at 600 s),
/// known from the start. An inference service of 1000 s starts at 0 on node 0.
/// - fifo: the departure stops it; it saved at 470 s (30 s save) and restarts at
///   once on node 2: restore 10 s, 530 s left: done at 1040 s; one service interrupted.
/// - varuna(fifo) with lead=100s: a pass at 400 s moves it to node 2 (suspend-resume
///   preemption keeps all 400 units), restore 10 s, 600 left: done at 1010 s; none interrupted.
#[test]
fn services_move_ahead_of_a_known_departure() {
    let mut service = JobSpec::new(0, 0, Time::ZERO, 1, 1000.0);
    service.kind = cotenant_core::JobKind::Inference;
    let mut cluster = ClusterSpec::homogeneous("v100", 3, 1);
    cluster.departures = (0..2)
        .map(|n| Departure {
            node: NodeId(n),
            leaves: Time::from_secs(500),
            returns: Some(Time::from_secs(600)),
        })
        .collect();
    let config = SimConfig { overheads: OVERHEADS, ..SimConfig::default() };
    let run = |name: &str| {
        let params = PolicyParams {
            options: [("lead".to_string(), "100s".to_string())]
                .into_iter()
                .filter(|_| name != "fifo")
                .collect(),
            ..PolicyParams::default()
        };
        go(name, &params, std::slice::from_ref(&service), cluster.clone(), &ReferenceRate, &config)
    };
    let killed = run("fifo");
    assert_eq!(killed.jobs[0].end, Some(Time::from_secs(1040)));
    assert_eq!(killed.faults.unwrap().services_interrupted, 1);
    let moved = run("varuna(fifo)");
    assert_eq!(moved.jobs[0].end, Some(Time::from_secs(1010)));
    assert_eq!(moved.faults.unwrap().services_interrupted, 0);
}
