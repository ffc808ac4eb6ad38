//! GPU variability and stragglers (crates/sim/src/variability_rates.rs): cases worked
//! out on paper, and the rate bounds as properties.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cotenant_core::placement::Placement;
use cotenant_core::{Cluster, ClusterSpec, GpuId, JobSpec, Layout, Span, TenantSpec, Time};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::variability_rates::{StragglerModel, Stragglers, VariabilityRates};
use cotenant_sim::{simulate, Placed, RateModel, ReferenceRate, SimConfig};

fn cluster(speeds: &[f64], nodes: u32, per_node: u32) -> Cluster {
    let mut spec = ClusterSpec::homogeneous("v100", nodes, per_node);
    spec.gpu_speed = speeds.to_vec();
    Cluster::new(spec).unwrap()
}

fn rates(mode: Stragglers) -> VariabilityRates {
    VariabilityRates::new(Box::new(ReferenceRate), StragglerModel { mode, ..StragglerModel::default() })
}

fn rate_on(rates: &VariabilityRates, job: &JobSpec, c: &Cluster, gpus: &[u32]) -> f64 {
    let gpus: Vec<GpuId> = gpus.iter().map(|&g| GpuId(g)).collect();
    rates.rate(job, &Placed { gpus: &gpus, partners: &[], state: None, cluster: c })
}

fn tensor_job(gpus: u32, tensor: u32, work: f64) -> JobSpec {
    let mut job = JobSpec::new(0, 0, Time::ZERO, gpus, work);
    job.profile.layout = Some(Layout { tensor, pipeline: 1, data: gpus / tensor });
    job
}

/// A 4-GPU gang on factors 1.05, 0.95, 0.80, 1.00.
/// alpha = 1: speeds are the factors, the gang runs at the slowest, 0.80.
/// alpha = 0.5: speeds 1 - 0.5 (1 - v) = 1.025, 0.975, 0.90, 1.00: the gang runs at 0.90.
/// alpha = 0: 1.0 everywhere. One GPU of the gang (GPU 2 alone): 0.80.
#[test]
fn gang_runs_at_its_slowest_gpu() {
    let c = cluster(&[1.05, 0.95, 0.80, 1.00], 1, 4);
    let r = rates(Stragglers::None);
    let mut job = JobSpec::new(0, 0, Time::ZERO, 4, 100.0);
    assert!((rate_on(&r, &job, &c, &[0, 1, 2, 3]) - 0.80).abs() < 1e-12);
    job.profile.sensitivity = 0.5;
    assert!((rate_on(&r, &job, &c, &[0, 1, 2, 3]) - 0.90).abs() < 1e-12);
    job.profile.sensitivity = 0.0;
    assert!((rate_on(&r, &job, &c, &[0, 1, 2, 3]) - 1.0).abs() < 1e-12);
    let single = JobSpec::new(1, 0, Time::ZERO, 1, 100.0);
    assert!((rate_on(&r, &single, &c, &[2]) - 0.80).abs() < 1e-12);
    assert!((rate_on(&r, &single, &c, &[0]) - 1.05).abs() < 1e-12);
}

/// End to end: FIFO, one node of four GPUs with factors 1.05, 0.95, 0.80, 1.00. J0 (4 GPUs,
/// 80 units) runs at 0.80 and ends at 80 / 0.8 = 100 s. Without factors it ends at 80 s.
#[test]
fn slowest_gpu_sets_the_finish_time() {
    let jobs = vec![JobSpec::new(0, 0, Time::ZERO, 4, 80.0)];
    let run = |speeds: &[f64]| {
        let mut spec = ClusterSpec::homogeneous("v100", 1, 4);
        spec.gpu_speed = speeds.to_vec();
        let policy = build("fifo", &PolicyParams::default()).unwrap();
        let result = simulate(
            &jobs,
            &[TenantSpec::new("t0")],
            spec,
            policy,
            &rates(Stragglers::None),
            &SimConfig { record: true, ..SimConfig::default() },
            &mut |_| {},
        )
        .unwrap();
        result.jobs[0].jct().unwrap()
    };
    assert_eq!(run(&[1.05, 0.95, 0.80, 1.00]), Span::from_secs(100));
    assert_eq!(run(&[]), Span::from_secs(80));
}

/// A tensor-parallel group of 4 (max_shrink 0.2, overhead 0.03, migrate cost 60 s).
///
/// Mild, factors 1, 1, 1, 0.9: mean 0.975; shrink = min(0.975, 0.9 / 0.8 = 1.125) = 0.975;
/// migrate steady = 0.975 x 0.97 = 0.94575, over W = 3600: 3600 / (3600 / 0.94575 + 60)
/// = 3600 / 3866.50 = 0.93107. Auto picks shrink (0.975).
///
/// Heavy, factors 1, 1, 1, 0.6: mean 0.9; shrink = min(0.9, 0.6 / 0.8 = 0.75) = 0.75; migrate
/// steady = 0.873, over W = 3600: 3600 / (4123.71 + 60) = 0.86048 > 0.75: auto migrates.
/// The same group for a short job, W = 100: 100 / (114.55 + 60) = 0.57291 < 0.75: auto
/// shrinks, since the one-off move would not pay for itself. Without mitigation: 0.6.
#[test]
fn mitigation_is_chosen_by_cost() {
    let model = StragglerModel { mode: Stragglers::Auto, ..StragglerModel::default() };
    let mild = model.group_rate(&[1.0, 1.0, 1.0, 0.9], 3600.0);
    assert_eq!(mild.remedy, Stragglers::Shrink);
    assert!((mild.rate - 0.975).abs() < 1e-12);
    let forced =
        StragglerModel { mode: Stragglers::Migrate, ..model }.group_rate(&[1.0, 1.0, 1.0, 0.9], 3600.0);
    assert!((forced.rate - 0.93107).abs() < 1e-5, "{forced:?}");

    let heavy = model.group_rate(&[1.0, 1.0, 1.0, 0.6], 3600.0);
    assert_eq!(heavy.remedy, Stragglers::Migrate);
    assert!((heavy.rate - 0.86048).abs() < 1e-5, "{heavy:?}");
    let short = model.group_rate(&[1.0, 1.0, 1.0, 0.6], 100.0);
    assert_eq!(short.remedy, Stragglers::Shrink);
    assert!((short.rate - 0.75).abs() < 1e-12);
    let forced =
        StragglerModel { mode: Stragglers::Migrate, ..model }.group_rate(&[1.0, 1.0, 1.0, 0.6], 100.0);
    assert!((forced.rate - 0.57291).abs() < 1e-5, "{forced:?}");

    // Through the rate model: an 8-GPU job, tensor 4 (two groups: GPUs 0-3, 4-7), the heavy
    // group second. Groups: mild 0.975 (shrink), heavy 0.86048 (migrate): the job runs at
    // the slower, 0.86048; without mitigation at 0.6; a job without a tensor layout at 0.6
    // even under auto, since only tensor groups can resize shards.
    let c = cluster(&[1.0, 1.0, 1.0, 0.9, 1.0, 1.0, 1.0, 0.6], 1, 8);
    let job = tensor_job(8, 4, 3600.0);
    let all: Vec<u32> = (0..8).collect();
    assert!((rate_on(&rates(Stragglers::Auto), &job, &c, &all) - 0.86048).abs() < 1e-5);
    assert!((rate_on(&rates(Stragglers::None), &job, &c, &all) - 0.6).abs() < 1e-12);
    let plain = JobSpec::new(1, 0, Time::ZERO, 8, 3600.0);
    assert!((rate_on(&rates(Stragglers::Auto), &plain, &c, &all) - 0.6).abs() < 1e-12);
    // With every gang treated as one tensor group: mean 0.9375, shrink min(0.9375, 0.75),
    // migrate 3600 / (3600 / (0.9375 x 0.97) + 60) = 3600 / (3958.76 + 60) = 0.89580.
    let every = VariabilityRates::new(
        Box::new(ReferenceRate),
        StragglerModel { mode: Stragglers::Auto, every_gang: true, ..StragglerModel::default() },
    );
    let expected: f64 = 3600.0 / (3600.0 / (0.9375 * 0.97) + 60.0);
    assert!((expected - 0.89580).abs() < 1e-5);
    assert!((rate_on(&every, &plain, &c, &all) - expected).abs() < 1e-12);
}

/// Without speed factors the wrapper is the inner model.
#[test]
fn no_factors_no_change() {
    let c = cluster(&[], 1, 4);
    let job = tensor_job(4, 2, 100.0);
    for mode in [Stragglers::None, Stragglers::Shrink, Stragglers::Migrate, Stragglers::Auto] {
        assert_eq!(rate_on(&rates(mode), &job, &c, &[0, 1, 2, 3]), 1.0);
    }
}

/// The variability-aware placement gives a 4-GPU job the node whose fastest four free
/// GPUs are fastest (node 1: its four best 1.02, 1.01, 1.0, 0.99 against node 0's 1.0,
/// 0.99, 0.98, 0.7), and then a 1-GPU job the fastest GPU left (GPU 0: 1.0; ties go to the lower id).
#[test]
fn variability_aware_placement_picks_fast_matched_gpus() {
    let speeds = [1.0, 0.99, 0.7, 0.98, 0.9, 0.9, 0.9, 0.9, 1.0, 1.02, 0.99, 1.01, 0.8, 0.8, 0.8, 0.8];
    let c = cluster(&speeds, 2, 8);
    let mut map = cotenant_core::placement::FreeMap::new(&c);
    let mut gang = map.place(4, Placement::VariabilityAware, |_| true).unwrap();
    gang.sort();
    assert_eq!(gang, vec![GpuId(8), GpuId(9), GpuId(10), GpuId(11)]);
    let one = map.place(1, Placement::VariabilityAware, |_| true).unwrap();
    assert_eq!(one, vec![GpuId(0)]);
    // Without factors it is consolidated placement.
    let plain = cluster(&[], 2, 8);
    let mut a = cotenant_core::placement::FreeMap::new(&plain);
    let mut b = cotenant_core::placement::FreeMap::new(&plain);
    for needed in [3, 1, 8, 2] {
        assert_eq!(
            a.place(needed, Placement::VariabilityAware, |_| true),
            b.place(needed, Placement::Consolidated, |_| true)
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, .. Default::default() })]

    /// On random factors, sensitivities, layouts and work: without mitigation a job runs
    /// exactly at its slowest GPU's speed; with any mitigation never above the mean of its
    /// GPUs' speeds, and under shrink or auto never below the slowest GPU's speed.
    #[test]
    fn gang_rate_bounds(
        speeds in proptest::collection::vec(0.3f64..1.6, 8),
        alpha in 0.0f64..=1.0,
        tensor in proptest::sample::select(vec![1u32, 2, 4, 8]),
        every_gang in proptest::prelude::any::<bool>(),
        work in 1.0f64..1e6,
    ) {
        let c = cluster(&speeds, 1, 8);
        let mut job = tensor_job(8, tensor, work);
        job.profile.sensitivity = alpha;
        let eff: Vec<f64> = speeds.iter().map(|v| 1.0 - alpha * (1.0 - v)).collect();
        let slowest = eff.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = eff.iter().sum::<f64>() / 8.0;
        let all: Vec<u32> = (0..8).collect();
        let none = rate_on(&rates(Stragglers::None), &job, &c, &all);
        proptest::prop_assert!((none - slowest).abs() < 1e-12);
        for mode in [Stragglers::Shrink, Stragglers::Migrate, Stragglers::Auto] {
            let r = VariabilityRates::new(
                Box::new(ReferenceRate),
                StragglerModel { mode, every_gang, ..StragglerModel::default() },
            );
            let rate = rate_on(&r, &job, &c, &all);
            proptest::prop_assert!(rate <= mean + 1e-12, "{mode:?}: {rate} > mean {mean}");
            if mode != Stragglers::Migrate {
                proptest::prop_assert!(rate >= slowest - 1e-12, "{mode:?}: {rate} < slowest {slowest}");
            }
        }
    }

    /// On random clusters with speed factors and GPUs held: the variability-aware placement
    /// takes `needed` distinct GPUs that were free on usable nodes, in one node whenever one
    /// has room, and its slowest GPU is never slower than consolidated placement's from the
    /// same free GPUs; it waits exactly when consolidated placement does.
    #[test]
    fn variability_aware_placement_is_valid_and_never_slower(
        nodes in proptest::collection::vec(1u32..=8, 1..24),
        held in proptest::collection::vec((1u32..6, proptest::prelude::any::<bool>()), 0..12),
        seed in 0u64..1000,
        needed in 1u32..20,
        odd_only in proptest::prelude::any::<bool>(),
    ) {
        let mut spec = ClusterSpec { gpu_types: vec!["a".into()], ..Default::default() };
        for &gpus in &nodes {
            spec.add_nodes(cotenant_core::GpuTypeId(0), 1, gpus, 0, 0);
        }
        spec.gpu_speed = cotenant_core::variability::SpeedModel { seed, ..cotenant_core::variability::SpeedModel::STRESS }
            .draw(spec.total_gpus());
        let speed = spec.gpu_speed.clone();
        let c = Cluster::new(spec).unwrap();
        // Other jobs hold some GPUs first (placed consolidated or spread).
        let mut map = cotenant_core::placement::FreeMap::new(&c);
        let mut taken: Vec<GpuId> = Vec::new();
        for &(k, spread) in &held {
            let how = if spread { Placement::Spread } else { Placement::Consolidated };
            if let Ok(gpus) = map.place(k, how, |_| true) {
                taken.extend(gpus);
            }
        }
        let usable = |n: cotenant_core::NodeId| !odd_only || n.0 % 2 == 1;
        let aware = map.clone().place(needed, Placement::VariabilityAware, usable);
        let blind = map.clone().place(needed, Placement::Consolidated, usable);
        proptest::prop_assert_eq!(aware.is_ok(), blind.is_ok());
        if let (Ok(aware), Ok(blind)) = (aware, blind) {
            proptest::prop_assert_eq!(aware.len(), needed as usize);
            let mut distinct = aware.clone();
            distinct.sort();
            distinct.dedup();
            proptest::prop_assert_eq!(distinct.len(), aware.len());
            for &g in &aware {
                proptest::prop_assert!(!taken.contains(&g) && usable(c.node_of(g)), "{g} was not free and usable");
            }
            let room = (0..c.node_count() as u32)
                .map(cotenant_core::NodeId)
                .any(|n| usable(n) && map.free_on(n) >= needed);
            let mut used: Vec<u32> = aware.iter().map(|&g| c.node_of(g).0).collect();
            used.dedup();
            if room {
                proptest::prop_assert_eq!(used.len(), 1);
            }
            let slowest = |gpus: &[GpuId]| gpus.iter().map(|g| speed[g.index()]).fold(f64::INFINITY, f64::min);
            proptest::prop_assert!(slowest(&aware) >= slowest(&blind));
        }
    }
}
