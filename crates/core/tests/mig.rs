//! MIG: geometry validation, the engine's checks of MIG actions, and a property
//! test that random MIG actions never leave overlapping or double-booked instances.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Scripted;

use cotenant_core::mig::{
    MigError, MigGeometry, MigInstance, MigLayout, MigModel, MigPlace, MigProfile, MigRefusal, MigTarget,
};
use cotenant_core::{
    Action, Cluster, ClusterSpec, Command, Engine, GpuId, Input, JobId, JobSpec, TenantSpec, Time, Violation,
};
use proptest::prelude::*;

fn a100(allow_4g_3g: bool) -> MigGeometry {
    let profile = |name: &str, c, m, starts: &[u8], max, sms| MigProfile {
        name: name.into(),
        compute_slices: c,
        memory_slots: m,
        starts: starts.to_vec(),
        max_instances: max,
        sms,
    };
    MigGeometry {
        gpu: "A100-40GB".into(),
        memory_slots: 8,
        allow_4g_3g,
        profiles: vec![
            profile("1g.5gb", 1, 1, &[0, 1, 2, 3, 4, 5, 6], 7, 14),
            profile("2g.10gb", 2, 2, &[0, 2, 4], 3, 28),
            profile("3g.20gb", 3, 4, &[0, 4], 2, 42),
            profile("4g.20gb", 4, 4, &[0], 1, 56),
            profile("7g.40gb", 7, 8, &[0], 1, 98),
        ],
    }
}

const G1: u8 = 0;
const G2: u8 = 1;
const G3: u8 = 2;
const G4: u8 = 3;
const G7: u8 = 4;

fn at(profile: u8, start: u8) -> MigInstance {
    MigInstance { profile, start }
}

#[test]
fn partitions_are_checked_against_the_geometry() {
    let g = a100(false);
    assert_eq!(g.validate(), Ok(()));
    assert_eq!(g.check_partition(&[at(G3, 4), at(G2, 0), at(G2, 2)]), Ok(()));
    // 2g at 0 covers slots 0-1; a 1g at 1 overlaps it.
    assert!(matches!(g.check_partition(&[at(G2, 0), at(G1, 1)]), Err(MigError::Overlap { slot: 1, .. })));
    // 3g may start only at 0 or 4.
    assert!(matches!(g.check_partition(&[at(G3, 2)]), Err(MigError::BadStart { start: 2, .. })));
    // 4g + 3g: only with the flag.
    assert_eq!(
        g.check_partition(&[at(G4, 0), at(G3, 4)]),
        Err(MigError::FourThreeNotAllowed { gpu: "A100-40GB".into() })
    );
    assert_eq!(a100(true).check_partition(&[at(G4, 0), at(G3, 4)]), Ok(()));
    // 7g with anything overlaps; an unknown profile index is named.
    assert!(g.check_partition(&[at(G7, 0), at(G1, 6)]).is_err());
    assert!(matches!(g.check_partition(&[at(9, 0)]), Err(MigError::UnknownProfile { .. })));
    let error = g.profile_index("5g.25gb").unwrap_err().to_string();
    assert_eq!(
        error,
        "A100-40GB: unknown MIG profile '5g.25gb' (known: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"
    );
    // Geometry data itself: a start past the last slot is refused, naming the field.
    let mut bad = a100(false);
    bad.profiles[2].starts = vec![0, 5];
    let error = bad.validate().unwrap_err().to_string();
    assert!(error.contains("profile 3g.20gb: starts start 5 + 4 slots passes"), "{error}");
    // Every enumerated partition is valid, and none has more than 7 instances.
    for p in g.partitions() {
        assert_eq!(g.check_partition(&p), Ok(()), "{p:?}");
        assert!(p.len() <= 7);
    }
    assert!(!g
        .partitions()
        .iter()
        .any(|p| p.iter().any(|i| i.profile == G4) && p.iter().any(|i| i.profile == G3)));
}

/// One node of 2 A100s (GPU 0 and 1), MIG on.
fn engine(script: Vec<Vec<Action>>) -> Engine {
    let cluster = Cluster::new(ClusterSpec::homogeneous("A100-40GB", 1, 2)).unwrap();
    let mut e = Engine::new(cluster, vec![TenantSpec::new("t")], Box::new(Scripted(script.into())), 0);
    e.enable_mig(MigModel { geometries: vec![Some(a100(false))] });
    e
}

fn submit(ids: &[u32], gpus: u32) -> Input {
    Input::Batch(
        ids.iter()
            .map(|&i| Input::JobSubmitted(JobSpec::new(i, 0, Time::ZERO, gpus, 100.0).into()))
            .collect(),
    )
}

fn partition(instances: &[MigInstance]) -> MigLayout {
    MigLayout::Partition(instances.to_vec())
}

#[test]
fn the_engine_validates_every_mig_action() {
    let gpu = GpuId(0);
    let script = vec![
        vec![
            Action::MigReconfigure { gpu, layout: partition(&[at(G4, 0), at(G3, 4)]) }, // 4g+3g: refused
            Action::MigReconfigure { gpu, layout: partition(&[at(G3, 4), at(G2, 0), at(G2, 2)]) },
            Action::MigStart { job: JobId(0), gpu, target: MigTarget::Instance { start: 4 } },
            Action::MigStart { job: JobId(1), gpu, target: MigTarget::Instance { start: 4 } }, // taken
            Action::MigStart { job: JobId(1), gpu, target: MigTarget::Instance { start: 1 } }, // no instance there
            Action::MigStart { job: JobId(1), gpu, target: MigTarget::Mps },                   // not MPS
            Action::MigStart { job: JobId(1), gpu, target: MigTarget::Instance { start: 2 } },
            Action::Start { job: JobId(2), gpus: vec![gpu] }, // whole GPU on a MIG GPU: refused
        ],
        // Removing the 3g at 4 while job 0 runs there: refused; without stopping job 1's
        // 2g at 2 it may not be replaced either. Keeping both and adding nothing is fine.
        vec![
            Action::MigReconfigure { gpu, layout: partition(&[at(G4, 0), at(G2, 4), at(G1, 6)]) },
            Action::MigReconfigure { gpu, layout: partition(&[at(G3, 4), at(G2, 2), at(G1, 0)]) },
        ],
        // Stop job 0 and move it: stops apply first, then the reconfiguration, then starts.
        vec![
            Action::MigStart { job: JobId(0), gpu, target: MigTarget::Instance { start: 0 } },
            Action::MigReconfigure { gpu, layout: partition(&[at(G2, 0), at(G2, 2), at(G2, 4), at(G1, 6)]) },
            Action::Preempt { job: JobId(0) },
        ],
    ];
    let mut e = engine(script);
    let commands = e.step(Time::ZERO, submit(&[0, 1, 2], 1));
    let refused: Vec<MigRefusal> = e
        .violations()
        .iter()
        .map(|v| match v {
            Violation::MigRefused { refusal, .. } => refusal.clone(),
            Violation::StartGpusUnavailable { .. } => MigRefusal::HeldWhole,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        refused,
        [
            MigRefusal::Invalid(Box::new(MigError::FourThreeNotAllowed { gpu: "A100-40GB".into() })),
            MigRefusal::Occupied,
            MigRefusal::NoSuchInstance,
            MigRefusal::WrongMode,
            MigRefusal::HeldWhole,
        ]
    );
    // MIG starts hold no whole GPU: the instance is on the job's state.
    assert_eq!(
        commands,
        [Command::Start { job: JobId(0), gpus: vec![] }, Command::Start { job: JobId(1), gpus: vec![] }]
    );
    assert_eq!(
        e.job(JobId(0)).unwrap().mig.unwrap().place,
        MigPlace::Instance { start: 4, compute_slices: 3 }
    );
    let before = e.violations().len();
    e.step(Time::from_secs(1), Input::Wakeup);
    assert_eq!(e.violations().len(), before + 1);
    assert_eq!(
        e.violations()[before],
        Violation::MigRefused { job: None, gpu, refusal: MigRefusal::Busy(JobId(0)) }
    );
    assert_eq!(e.mig().unwrap().layout(gpu), Some(&partition(&[at(G1, 0), at(G2, 2), at(G3, 4)])));
    let before = e.violations().len();
    e.step(Time::from_secs(2), Input::Wakeup);
    // Job 1 runs in the 2g at 2, kept by the new layout; job 0 moved to the 2g at 0.
    assert_eq!(e.violations().len(), before, "{:?}", &e.violations()[before..]);
    assert_eq!(
        e.job(JobId(0)).unwrap().mig.unwrap().place,
        MigPlace::Instance { start: 0, compute_slices: 2 }
    );
    assert_eq!(
        e.job(JobId(1)).unwrap().mig.unwrap().place,
        MigPlace::Instance { start: 2, compute_slices: 2 }
    );
}

#[test]
fn mps_jobs_share_and_are_rerated_when_one_leaves() {
    let gpu = GpuId(1);
    let script = vec![vec![
        Action::MigReconfigure { gpu, layout: MigLayout::Mps },
        Action::MigStart { job: JobId(0), gpu, target: MigTarget::Mps },
        Action::MigStart { job: JobId(1), gpu, target: MigTarget::Mps },
        Action::MigStart { job: JobId(2), gpu, target: MigTarget::Mps },
    ]];
    let mut e = engine(script);
    let commands = e.step(Time::ZERO, submit(&[0, 1, 2], 1));
    assert!(e.violations().is_empty(), "{:?}", e.violations());
    // Jobs 0 and 1 were re-rated when the later ones joined.
    assert!(commands.contains(&Command::Rerate { job: JobId(0), partners: vec![] }));
    for j in 0..3 {
        assert_eq!(e.job(JobId(j)).unwrap().mig.unwrap().place, MigPlace::Mps { sharers: 3 });
    }
    let commands = e.step(Time::from_secs(5), Input::JobFinished { job: JobId(1) });
    assert_eq!(
        commands,
        [
            Command::Rerate { job: JobId(0), partners: vec![] },
            Command::Rerate { job: JobId(2), partners: vec![] }
        ]
    );
    assert_eq!(e.job(JobId(2)).unwrap().mig.unwrap().place, MigPlace::Mps { sharers: 2 });
    // A node going down stops MIG jobs too.
    let commands = e.step(Time::from_secs(6), Input::NodeDown(cotenant_core::NodeId(0)));
    assert_eq!(commands.iter().filter(|c| matches!(c, Command::Stop { .. })).count(), 2);
    assert!(!e.mig().unwrap().is_busy(gpu));
}

fn action() -> impl Strategy<Value = Action> {
    let instance = (0u8..5, 0u8..8).prop_map(|(profile, start)| MigInstance { profile, start });
    let layout = prop_oneof![
        prop::collection::vec(instance, 1..5).prop_map(MigLayout::Partition),
        Just(MigLayout::Mps),
    ];
    let target = prop_oneof![(0u8..8).prop_map(|start| MigTarget::Instance { start }), Just(MigTarget::Mps)];
    prop_oneof![
        (0u32..2, layout).prop_map(|(g, layout)| Action::MigReconfigure { gpu: GpuId(g), layout }),
        (0u32..12, 0u32..2, target).prop_map(|(j, g, target)| Action::MigStart {
            job: JobId(j),
            gpu: GpuId(g),
            target
        }),
        (0u32..12).prop_map(|j| Action::Preempt { job: JobId(j) }),
    ]
}

proptest! {
    /// Whatever a policy asks, every layout stays a valid partition, no instance
    /// holds two jobs, every MIG job sits in an instance of its GPU's layout (or MPS),
    /// and the engine's job table agrees with the MIG state.
    #[test]
    fn instances_never_overlap_nor_hold_two_jobs(
        steps in prop::collection::vec(prop::collection::vec(action(), 0..8), 1..12),
        finish in prop::collection::vec(0u32..12, 0..6),
    ) {
        let cluster = Cluster::new(ClusterSpec::homogeneous("A100-40GB", 1, 2)).unwrap();
        let policy = Scripted(steps.clone().into());
        let mut e = Engine::new(cluster, vec![TenantSpec::new("t")], Box::new(policy), 0);
        e.enable_mig(MigModel { geometries: vec![Some(a100(false))] });
        let geometry = a100(false);
        e.step(Time::ZERO, submit(&(0..12).collect::<Vec<_>>(), 1));
        for (i, _) in steps.iter().enumerate() {
            let now = Time::from_secs(i as u64 + 1);
            match finish.get(i).filter(|&&j| e.running().contains(&JobId(j))) {
                Some(&j) => e.step(now, Input::JobFinished { job: JobId(j) }),
                None => e.step(now, Input::Wakeup),
            };
            let mig = e.mig().unwrap();
            for g in 0..2 {
                let gpu = GpuId(g);
                let state = mig.gpu(gpu).unwrap();
                let mut starts: Vec<Option<u8>> = state.jobs.iter().map(|&(_, s)| s).collect();
                match &state.layout {
                    Some(MigLayout::Partition(instances)) => {
                        prop_assert_eq!(geometry.check_partition(instances), Ok(()));
                        for s in &starts {
                            let s = s.expect("an instance job has a start");
                            prop_assert!(instances.iter().any(|i| i.start == s));
                        }
                        let before = starts.len();
                        starts.sort();
                        starts.dedup();
                        prop_assert_eq!(starts.len(), before, "an instance holds two jobs");
                    }
                    Some(MigLayout::Mps) => prop_assert!(starts.iter().all(Option::is_none) && starts.len() <= 7),
                    None => prop_assert!(starts.is_empty()),
                }
                for &(job, _) in &state.jobs {
                    let slot = e.job(job).unwrap().mig.expect("a MIG job has a slot");
                    prop_assert_eq!(slot.gpu, gpu);
                    prop_assert!(e.running().contains(&job));
                }
            }
            let placed: usize = (0..2).map(|g| mig.gpu(GpuId(g)).unwrap().jobs.len()).sum();
            prop_assert_eq!(placed, e.running().len());
        }
    }
}
