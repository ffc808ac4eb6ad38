//! MIG runs end to end: every MIG policy on random MISO workloads finishes every
//! job, and replaying its input log through a fresh engine shows, after every
//! step, valid partitions with at most one job per instance (never double-booked);
//! GPU-time is conserved (each job holds its instance's compute slices out of 7,
//! or its share of an MPS GPU), and small runs give the GPU-time, utilization and
//! idle-while-waiting computed by hand.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use cotenant_core::mig::{MigLayout, MigModel};
use cotenant_core::{ClusterSpec, Engine, GpuId, Span, TenantSpec};
use cotenant_policies::miso::MigData;
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::mig_rates::MigRates;
use cotenant_sim::world::GPU_PARTS;
use cotenant_sim::{simulate, summarize, Outcome, Overheads, SimConfig, SimResult};
use cotenant_trace::mig::{bundled_mig_geometry, bundled_slice_curves, geometry_for};
use cotenant_trace::miso_workload::{generate_miso, MisoSpec};
use proptest::prelude::*;

const POLICIES: [(&str, Option<&str>); 5] = [
    ("miso", None),
    ("miso-oracle", None),
    ("mig-unpartitioned", None),
    ("mig-static", Some("3g.20gb+2g.10gb+2g.10gb")),
    ("mig-static", Some("2g.10gb+2g.10gb+2g.10gb+1g.5gb")),
];

struct Setup {
    model: MigModel,
    data: Arc<MigData>,
}

fn setup() -> Setup {
    let geometries = bundled_mig_geometry().unwrap();
    let a100 = geometry_for(&geometries, "A100-40GB").unwrap().clone();
    let curves = bundled_slice_curves().unwrap().into_iter().map(|c| c.curve).collect();
    Setup {
        model: MigModel { geometries: vec![Some(a100.clone())] },
        data: Arc::new(MigData { curves, geometries: vec![a100] }),
    }
}

fn params(setup: &Setup, partition: Option<&str>) -> PolicyParams {
    let mut options = BTreeMap::new();
    if let Some(p) = partition {
        options.insert("partition".to_string(), p.to_string());
    }
    PolicyParams { options, mig: Some(setup.data.clone()), ..PolicyParams::default() }
}

fn run(setup: &Setup, policy: usize, gpus: u32, spec: &MisoSpec, seed: u64, restore_secs: u64) -> SimResult {
    let (name, partition) = POLICIES[policy];
    let workload = generate_miso(spec, &bundled_slice_curves().unwrap()).unwrap();
    let config = SimConfig {
        seed,
        record: true,
        mig: Some(setup.model.clone()),
        overheads: Overheads {
            checkpoint_interval: Span::ZERO,
            restore_overhead: Span::from_secs(restore_secs),
        },
        ..SimConfig::default()
    };
    let policy = build(name, &params(setup, partition)).unwrap();
    let rates = MigRates::new(setup.data.curves.clone());
    simulate(
        &workload.jobs,
        &workload.tenants,
        ClusterSpec::homogeneous("A100-40GB", 1, gpus),
        policy,
        &rates,
        &config,
        &mut |_| {},
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_job_finishes_and_instances_are_never_double_booked(
        policy in 0usize..POLICIES.len(),
        gpus in 1u32..4,
        jobs in 1usize..25,
        gap in 1u64..400,
        workload_seed in 0u64..1000,
        seed in any::<u64>(),
        restore in 0u64..60,
    ) {
        let setup = setup();
        let spec = MisoSpec { jobs, mean_gap: Span::from_secs(gap), seed: workload_seed, work_min: Span::from_secs(60), work_max: Span::from_secs(1200), weights: None };
        let result = run(&setup, policy, gpus, &spec, seed, restore);
        for job in &result.jobs {
            prop_assert_eq!(&job.outcome, &Outcome::Completed, "{:?}", job);
            prop_assert!(job.held_gpu_us > 0, "a MIG job holds GPU-time: {:?}", job);
        }
        // Work is conserved, exactly in GPU parts: busy GPU-time is the jobs' held
        // GPU-time. Rounded to GPU-µs, the tracker rounds per step and tenant and
        // each job once, so they agree to within that rounding.
        let held_parts: u128 = result.jobs.iter().map(|j| j.held_part_us).sum();
        prop_assert_eq!(result.usage.busy_part_us, held_parts);
        let held_total: u128 = result.jobs.iter().map(|j| u128::from(j.held_gpu_us)).sum();
        prop_assert!(result.usage.busy_gpu_us <= held_parts / u128::from(GPU_PARTS));
        prop_assert!(held_total <= held_parts / u128::from(GPU_PARTS));
        // The tracker rounds once per tenant and interval (steps split by windows).
        let intervals = (result.log.as_ref().unwrap().steps.len() + result.usage.windows.len() + 1) as u128;
        let tenants = result.usage.tenant_gpu_us.len() as u128;
        prop_assert!(held_parts / u128::from(GPU_PARTS) - result.usage.busy_gpu_us <= intervals * tenants);
        prop_assert!(held_parts / u128::from(GPU_PARTS) - held_total <= result.jobs.len() as u128);
        prop_assert_eq!(result.usage.tenant_gpu_us.iter().sum::<u128>(), result.usage.busy_gpu_us);
        let window_sum: u128 = result.usage.windows.iter().flat_map(|w| w.gpu_us.iter()).map(|&g| u128::from(g)).sum();
        prop_assert_eq!(window_sum, result.usage.busy_gpu_us);
        // Nothing holds more than the cluster, and idle-while-waiting is capacity nobody held.
        prop_assert!(result.usage.busy_gpu_us + result.usage.idle_while_waiting_gpu_us <= result.usage.available_gpu_us);
        let summary = summarize(&result);
        prop_assert!(summary.gpu_utilization > 0.0 && summary.gpu_utilization <= 1.0 + 1e-9, "util {}", summary.gpu_utilization);
        prop_assert!(summary.goodput_utilization <= summary.gpu_utilization + 1e-9);
        // Replay: the same inputs reproduce the same commands, and the MIG state
        // is valid after every step.
        let (name, partition) = POLICIES[policy];
        let cluster = cotenant_core::Cluster::new(ClusterSpec::homogeneous("A100-40GB", 1, gpus)).unwrap();
        let mut engine = Engine::new(cluster, vec![TenantSpec::new("tenant-0")], build(name, &params(&setup, partition)).unwrap(), seed);
        engine.enable_mig(setup.model.clone());
        let geometry = setup.data.geometries[0].clone();
        for (now, input, commands) in &result.log.as_ref().unwrap().steps {
            prop_assert_eq!(&engine.step(*now, input.clone()), commands);
            let mig = engine.mig().unwrap();
            let mut placed = 0;
            for g in 0..gpus {
                let state = mig.gpu(GpuId(g)).unwrap();
                placed += state.jobs.len();
                let mut starts: Vec<u8> = state.jobs.iter().filter_map(|&(_, s)| s).collect();
                if let Some(MigLayout::Partition(instances)) = &state.layout {
                    prop_assert_eq!(geometry.check_partition(instances), Ok(()));
                    prop_assert!(starts.iter().all(|s| instances.iter().any(|i| i.start == *s)));
                }
                let before = starts.len();
                starts.sort_unstable();
                starts.dedup();
                prop_assert_eq!(before, starts.len(), "an instance holds two jobs");
            }
            prop_assert_eq!(placed, engine.running().len());
        }
        prop_assert!(engine.violations().is_empty());
    }
}

/// Two jobs on one A100, by hand. Job 0 (compute-bound: 1g .15, 2g .29, 3g .43, 4g .58)
/// arrives at 0 with 600 s of work; job 1 (saturating: .45 .70 .85 .93) at 100 s with
/// 300 s of work; no restore cost. The oracle re-partitions at 100 s and again when
/// job 1 leaves.
#[test]
fn oracle_repartitions_when_a_second_job_arrives() {
    let setup = setup();
    let curves = bundled_slice_curves().unwrap();
    let class = |name: &str| curves.iter().position(|c| c.curve.name == name).unwrap() as u32;
    let mut a = cotenant_core::JobSpec::new(0, 0, cotenant_core::Time::ZERO, 1, 600.0);
    a.job_type = Some(class("compute-bound"));
    let mut b = cotenant_core::JobSpec::new(1, 0, cotenant_core::Time::from_secs(100), 1, 300.0);
    b.job_type = Some(class("saturating"));
    let config = SimConfig {
        mig: Some(setup.model.clone()),
        overheads: Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO },
        ..SimConfig::default()
    };
    let policy = build("miso-oracle", &params(&setup, None)).unwrap();
    let result = simulate(
        &[a, b],
        &[TenantSpec::new("t")],
        ClusterSpec::homogeneous("A100-40GB", 1, 1),
        policy,
        &MigRates::new(setup.data.curves.clone()),
        &config,
        &mut |_| {},
    )
    .unwrap();
    // Plans for {job 0, job 1} (A100, no 4g+3g): 3g+2g+2g: 0 on 3g .43 + 1 on 2g .70 = 1.13,
    // or 1 on 3g .85 + 0 on 2g .29 = 1.14; 3g+3g: .43 + .85 = 1.28; 4g+2g(+1g): .58 + .70 = 1.28,
    // or 1 on 4g .93 + 0 on 2g .29 = 1.22. Best 1.28, a tie: 3g+3g comes first in partition
    // order (the branch starting 3g@0 precedes the one starting 4g@0). So from 100 s job 0
    // runs at .43 and job 1 at .85.
    // Job 0: 100 s of work by 100 s, 500 left at .43 -> 1162.79 s more.
    // Job 1: 300 / .85 = 352.94 s -> ends at 452.94 s (ceil to the microsecond).
    // When job 1 ends, job 0 is alone: re-optimized to 7g (speed 1). At 452.94 s it has done
    // 100 + 352.94 x .43 = 251.76; 348.24 left at 1 -> ends at 801.18 s.
    let end = |j: usize| result.jobs[j].end.unwrap().as_secs_f64();
    assert!((end(1) - (100.0 + 300.0 / 0.85)).abs() < 1e-3, "{}", end(1));
    let done_at_b = 100.0 + (end(1) - 100.0) * 0.43;
    assert!((end(0) - (end(1) + 600.0 - done_at_b)).abs() < 1e-3, "{}", end(0));
    assert_eq!(result.jobs[0].preemptions, 2, "moved to 3g, then back to 7g");
}

/// Runs `jobs` (tenant, arrival s, work) of the linear curve (speed slices / 7,
/// so a job holds exactly its work in GPU-seconds) on one A100 under mig-static
/// with `partition`, no restore cost.
fn run_static(partition: &str, jobs: &[(u32, u64, f64)]) -> SimResult {
    let setup = setup();
    let specs: Vec<_> = jobs
        .iter()
        .enumerate()
        .map(|(i, &(tenant, arrival, work))| {
            cotenant_core::JobSpec::new(i as u32, tenant, cotenant_core::Time::from_secs(arrival), 1, work)
        })
        .collect();
    let config = SimConfig {
        mig: Some(setup.model.clone()),
        overheads: Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO },
        share_window: Span::from_secs(100),
        ..SimConfig::default()
    };
    simulate(
        &specs,
        &[TenantSpec::new("a"), TenantSpec::new("b")],
        ClusterSpec::homogeneous("A100-40GB", 1, 1),
        build("mig-static", &params(&setup, Some(partition))).unwrap(),
        &MigRates::new(setup.data.curves.clone()),
        &config,
        &mut |_| {},
    )
    .unwrap()
}

const S: u64 = 1_000_000;

/// One A100 as 3g+2g+2g, four jobs at 0 s (largest instance first, then start
/// order): job 0 (tenant a, 300 units) on 3g at 3/7 ends at 700 s; job 1 (a, 200)
/// on 2g at 2/7 ends at 700 s; job 2 (b, 100) on the other 2g ends at 350 s;
/// job 3 (b, 50) waits for it and runs 350-525 s on 2g.
/// Held: 700 x 3/7 = 300, 700 x 2/7 = 200, 350 x 2/7 = 100, 175 x 2/7 = 50 GPU-s:
/// 650 GPU-s of 700 available over the 700 s makespan, utilization 13/14.
/// Tenant a 500, b 150 GPU-s. While job 3 waits every slice is held: no idle-wait.
#[test]
fn a_static_mig_partition_counts_each_instance_s_compute_slices() {
    let r =
        run_static("3g.20gb+2g.10gb+2g.10gb", &[(0, 0, 300.0), (0, 0, 200.0), (1, 0, 100.0), (1, 0, 50.0)]);
    let ends: Vec<u64> = r.jobs.iter().map(|j| j.end.unwrap().0).collect();
    assert_eq!(ends, vec![700 * S, 700 * S, 350 * S, 525 * S]);
    let held: Vec<u64> = r.jobs.iter().map(|j| j.held_gpu_us).collect();
    assert_eq!(held, vec![300 * S, 200 * S, 100 * S, 50 * S]);
    // Exact in GPU parts: 650 GPU-s x 420 parts.
    assert_eq!(r.usage.busy_part_us, 650 * u128::from(S) * u128::from(GPU_PARTS));
    assert_eq!(r.jobs.iter().map(|j| j.held_part_us).sum::<u128>(), r.usage.busy_part_us);
    // The tracker's GPU-µs round down once per tenant and step or window (seven 100 s
    // windows, steps at 350 and 525 s): a few µs under 500 and 150 GPU-s.
    let tenants = &r.usage.tenant_gpu_us;
    assert!((500 * u128::from(S) - 10..=500 * u128::from(S)).contains(&tenants[0]), "{tenants:?}");
    assert!((150 * u128::from(S) - 10..=150 * u128::from(S)).contains(&tenants[1]), "{tenants:?}");
    assert_eq!(r.usage.busy_gpu_us, tenants[0] + tenants[1]);
    assert_eq!(r.usage.idle_while_waiting_gpu_us, 0);
    assert_eq!(r.usage.measured_capacity_gpu_us, 700 * u128::from(S));
    let s = summarize(&r);
    assert_eq!(s.gpu_utilization, 650.0 / 700.0);
    assert_eq!(s.goodput_utilization, 650.0 / 700.0);
    // The first 100 s window, rounded down to the µs: a holds 300/420 x 100 s =
    // 71.4285714 s, b 120/420 x 100 s = 28.5714285 s.
    let first = &r.usage.windows[0];
    assert_eq!(first.gpu_us, vec![71_428_571, 28_571_428]);
    assert!((first.utilization() - 1.0).abs() < 1e-6);
}

/// One A100 as 3g+2g+1g (one compute slice left unpartitioned), all at 0 s:
/// job 0 (300 units) on 3g until 700 s, job 1 (200) on 2g until 700 s, job 2
/// (10) on 1g at 1/7 until 70 s, job 3 (10) waits for the 1g, runs 70-140 s.
/// Held 300 + 200 + 10 + 10 = 520 GPU-s. While job 3 waits (0-70 s) 6 of 7
/// slices are held: 70 x 1/7 = 10 GPU-s idle while waiting (counting the GPU as
/// busy gave 0, as free 70).
#[test]
fn idle_while_waiting_counts_the_slices_no_job_holds() {
    let r = run_static("3g.20gb+2g.10gb+1g.5gb", &[(0, 0, 300.0), (0, 0, 200.0), (1, 0, 10.0), (1, 0, 10.0)]);
    let ends: Vec<u64> = r.jobs.iter().map(|j| j.end.unwrap().0).collect();
    assert_eq!(ends, vec![700 * S, 700 * S, 70 * S, 140 * S]);
    assert_eq!(r.usage.busy_part_us, 520 * u128::from(S) * u128::from(GPU_PARTS));
    assert_eq!(r.usage.idle_while_waiting_gpu_us, 10 * u128::from(S));
    let s = summarize(&r);
    assert_eq!(s.gpu_utilization, 520.0 / 700.0);
    assert_eq!(s.idle_while_waiting, 10.0 / 700.0);
}
