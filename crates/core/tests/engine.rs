//! The engine validates every action, applies only valid ones, and handles
//! node failures; a scripted policy plays the part of a buggy or simple policy.
#![allow(clippy::unwrap_used)]

mod common;

use common::Scripted;

use cotenant_core::{
    Action, Cluster, ClusterSpec, Command, EndReason, Engine, GpuId, Input, JobId, JobSpec, NodeId, Phase,
    StopReason, TenantSpec, Time, Violation,
};

fn engine(script: Vec<Vec<Action>>, tenants: Vec<TenantSpec>) -> Engine {
    let cluster = Cluster::new(ClusterSpec::homogeneous("v100", 2, 2)).unwrap();
    Engine::new(cluster, tenants, Box::new(Scripted(script.into())), 0)
}

fn job(id: u32, gpus: u32) -> Input {
    Input::JobSubmitted(JobSpec::new(id, 0, Time::ZERO, gpus, 10.0).into())
}

#[test]
fn invalid_actions_are_refused_and_recorded() {
    let script = vec![vec![
        Action::Start { job: JobId(0), gpus: vec![GpuId(0)] }, // wrong count: wants 2
        Action::Start { job: JobId(0), gpus: vec![GpuId(1), GpuId(1)] }, // same GPU twice
        Action::Start { job: JobId(9), gpus: vec![GpuId(2)] }, // not pending
        Action::Preempt { job: JobId(0) },                     // not running
        Action::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }, // valid
    ]];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    let commands = e.step(Time::ZERO, job(0, 2));
    assert_eq!(commands, vec![Command::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }]);
    assert_eq!(e.violations().len(), 4);
    assert!(matches!(e.violations()[0], Violation::PreemptNotRunning(JobId(0))));
    assert!(e
        .violations()
        .iter()
        .any(|v| matches!(v, Violation::StartWrongGpuCount { wanted: 2, given: 1, .. })));
    assert!(e.violations().iter().any(|v| matches!(v, Violation::StartGpusUnavailable { .. })));
    assert!(e.violations().iter().any(|v| matches!(v, Violation::StartNotPending(JobId(9)))));
    assert_eq!(e.cluster().free_gpus(), 2);
}

#[test]
fn a_gpu_cannot_be_given_twice() {
    let script = vec![
        vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0)] }],
        vec![Action::Start { job: JobId(1), gpus: vec![GpuId(0)] }],
    ];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, job(0, 1));
    assert!(e.step(Time(1), job(1, 1)).is_empty());
    assert!(matches!(e.violations()[0], Violation::StartGpusUnavailable { job: JobId(1), .. }));
    assert_eq!(e.cluster().owner(GpuId(0)), Some(JobId(0)));
}

#[test]
fn preempt_then_start_in_one_decision_reuses_the_gpus() {
    let script = vec![
        vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1), GpuId(2), GpuId(3)] }],
        // Start listed first: the engine applies stops before starts.
        vec![Action::Start { job: JobId(1), gpus: vec![GpuId(2)] }, Action::Preempt { job: JobId(0) }],
    ];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, job(0, 4));
    let commands = e.step(Time(5), job(1, 1));
    assert_eq!(
        commands,
        vec![
            Command::Stop { job: JobId(0), reason: StopReason::Preempted },
            Command::Start { job: JobId(1), gpus: vec![GpuId(2)] },
        ]
    );
    assert!(e.violations().is_empty());
    let j0 = e.job(JobId(0)).unwrap();
    assert_eq!(j0.phase, Phase::Pending);
    assert_eq!((j0.preemptions, j0.attained_gpu_us(Time(100))), (1, 20));
}

#[test]
fn tenant_limits_are_enforced_and_impossible_jobs_end() {
    let script = vec![
        vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0)] }],
        vec![Action::Start { job: JobId(1), gpus: vec![GpuId(1)] }],
    ];
    let tenants = vec![TenantSpec { gpu_limit: Some(1), ..TenantSpec::new("a") }];
    let mut e = engine(script, tenants);
    e.step(Time::ZERO, job(0, 1));
    e.step(Time(1), job(1, 1));
    assert!(matches!(e.violations()[0], Violation::StartOverTenantLimit { job: JobId(1), .. }));
    // Wider than the tenant's limit, and wider than the cluster: ended at once with a reason.
    let commands = e.step(Time(2), job(2, 2));
    assert_eq!(
        commands,
        vec![Command::End { job: JobId(2), reason: EndReason::OverTenantLimit { requested: 2, limit: 1 } }]
    );
    let commands = e.step(Time(3), job(3, 5));
    assert_eq!(
        commands,
        vec![Command::End {
            job: JobId(3),
            reason: EndReason::WiderThanCluster { requested: 5, cluster_gpus: 4 }
        }]
    );
}

#[test]
fn node_failure_stops_its_jobs_and_takes_its_gpus_away() {
    let script = vec![vec![
        Action::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] },
        Action::Start { job: JobId(1), gpus: vec![GpuId(2)] },
    ]];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, Input::Batch(vec![job(0, 2), job(1, 1)]));
    let commands = e.step(Time(10), Input::NodeDown(NodeId(0)));
    assert_eq!(commands, vec![Command::Stop { job: JobId(0), reason: StopReason::NodeDown }]);
    assert_eq!(e.cluster().up_gpus(), 2);
    assert_eq!(e.cluster().free_gpus(), 1);
    assert!(e.pending().contains(&JobId(0)));
    e.step(Time(20), Input::NodeUp(NodeId(0)));
    assert_eq!(e.cluster().free_gpus(), 3);
    assert!(e.step(Time(30), Input::NodeDown(NodeId(7))).is_empty());
    assert!(matches!(e.violations()[0], Violation::UnknownNode(NodeId(7))));
}

#[test]
fn finishing_a_job_that_is_not_running_is_a_violation() {
    let mut e = engine(vec![], vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, job(0, 1));
    assert!(e.step(Time(1), Input::JobFinished { job: JobId(0) }).is_empty());
    assert!(matches!(e.violations()[0], Violation::FinishedWhileNotRunning(JobId(0))));
    e.step(Time(2), job(0, 1));
    assert!(matches!(e.violations()[1], Violation::DuplicateJob(JobId(0))));
}

#[test]
fn space_sharing_pairs_two_jobs_and_rerates_the_one_that_stays() {
    let script = vec![
        vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }],
        vec![Action::StartShared { job: JobId(1), partner: JobId(0) }],
        // A third job cannot join a pair, nor share with a job of another size.
        vec![Action::StartShared { job: JobId(2), partner: JobId(0) }],
    ];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, job(0, 2));
    let commands = e.step(Time(10), job(1, 2));
    assert_eq!(
        commands,
        vec![
            Command::StartShared { job: JobId(1), gpus: vec![GpuId(0), GpuId(1)], partner: JobId(0) },
            Command::Rerate { job: JobId(0), partners: vec![JobId(1)] },
        ]
    );
    assert_eq!(e.job(JobId(0)).unwrap().partner, Some(JobId(1)));
    assert_eq!(e.cluster().co_owner(GpuId(0)), Some(JobId(1)));
    e.step(Time(20), job(2, 2));
    assert!(matches!(e.violations()[0], Violation::ShareNotPossible { job: JobId(2), partner: JobId(0) }));

    // The first job finishes: its partner keeps the GPUs alone and is re-rated.
    let commands = e.step(Time(30), Input::JobFinished { job: JobId(0) });
    assert_eq!(commands, vec![Command::Rerate { job: JobId(1), partners: vec![] }]);
    assert_eq!(e.cluster().owner(GpuId(0)), Some(JobId(1)));
    assert_eq!(e.cluster().free_gpus(), 2);
    assert_eq!(e.job(JobId(1)).unwrap().partner, None);
}

fn elastic_job(id: u32, gpus: u32, min: u32, max: u32) -> Input {
    let mut spec = JobSpec::new(id, 0, Time::ZERO, gpus, 10.0);
    spec.elastic = Some(cotenant_core::Elastic::new(min, max, gpus).unwrap());
    Input::JobSubmitted(spec.into())
}

#[test]
fn resizes_are_validated_against_range_cluster_and_tenant() {
    let g = |ids: &[u32]| ids.iter().map(|&i| GpuId(i)).collect::<Vec<_>>();
    let script = vec![
        // J0 elastic [1, 3] asking 2 may start on 1; J1 rigid on 1.
        vec![
            Action::Start { job: JobId(0), gpus: g(&[0]) },
            Action::Resize { job: JobId(0), gpus: g(&[0, 1]) }, // applied after the start: valid
        ],
        vec![
            Action::Start { job: JobId(1), gpus: g(&[2]) },
            Action::Resize { job: JobId(1), gpus: g(&[2, 3]) }, // rigid
            Action::Resize { job: JobId(0), gpus: g(&[0, 1, 2, 3]) }, // over its max (3)
            Action::Resize { job: JobId(0), gpus: g(&[0, 1, 2]) }, // GPU 2 held by J1
            Action::Resize { job: JobId(0), gpus: g(&[0, 0]) }, // repeated GPU
            Action::Resize { job: JobId(0), gpus: g(&[1, 3]) }, // drops 0, adds 3: valid
        ],
        vec![Action::Resize { job: JobId(0), gpus: g(&[1, 3, 0]) }], // over the tenant limit of 3
    ];
    let tenant = TenantSpec { gpu_limit: Some(3), ..TenantSpec::new("a") };
    let mut e = engine(script, vec![tenant]);
    let first = e.step(Time::ZERO, elastic_job(0, 2, 1, 3));
    assert_eq!(
        first,
        vec![
            Command::Start { job: JobId(0), gpus: g(&[0]) },
            Command::Resize { job: JobId(0), gpus: g(&[0, 1]), from: 1 },
        ]
    );
    let second = e.step(Time(10_000_000), job(1, 1));
    assert_eq!(
        second,
        vec![
            Command::Start { job: JobId(1), gpus: g(&[2]) },
            Command::Resize { job: JobId(0), gpus: g(&[1, 3]), from: 2 },
        ]
    );
    let v = e.violations();
    assert!(matches!(v[0], Violation::ResizeNotAllowed { job: JobId(1), gpus: 2 }), "{v:?}");
    assert!(matches!(v[1], Violation::ResizeNotAllowed { job: JobId(0), gpus: 4 }));
    assert!(matches!(v[2], Violation::ResizeGpusUnavailable { job: JobId(0), .. }));
    assert!(matches!(v[3], Violation::ResizeGpusUnavailable { job: JobId(0), .. }));
    assert_eq!(v.len(), 4);
    assert_eq!(e.cluster().owner(GpuId(0)), None);
    assert_eq!(e.cluster().owner(GpuId(3)), Some(JobId(0)));
    assert_eq!(e.tenant_gpus(), &[3]);
    // J0 held 1 GPU for 0 s, then 2 GPUs for 10 s: 20 GPU-s attained at the resize.
    let j0 = e.job(JobId(0)).unwrap();
    assert_eq!((j0.resizes, j0.attained_gpu_us(Time(20_000_000))), (2, 40_000_000));
    e.step(Time(20_000_000), Input::Wakeup);
    assert!(matches!(e.violations()[4], Violation::ResizeOverTenantLimit { job: JobId(0), .. }));
    assert_eq!(e.job(JobId(0)).unwrap().gpus, g(&[1, 3]), "a refused resize changes nothing");
}

#[test]
fn jobs_ended_from_outside_leave_the_queue_or_free_their_gpus() {
    // Job 0 runs on GPUs 0-1; job 1 waits. Cancelling the waiting job removes it;
    // failing the running one frees its GPUs; ending either again is a violation.
    let script = vec![vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }]];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, Input::Batch(vec![job(0, 2), job(1, 4)]));
    assert_eq!(e.cluster().free_gpus(), 2);
    let commands = e.step(Time(5), Input::JobEnded { job: JobId(1), reason: EndReason::Cancelled });
    assert_eq!(commands, vec![Command::End { job: JobId(1), reason: EndReason::Cancelled }]);
    assert!(e.pending().is_empty());
    let failed = EndReason::Failed { exit_code: 3 };
    let commands = e.step(Time(7), Input::JobEnded { job: JobId(0), reason: failed });
    assert_eq!(commands, vec![Command::End { job: JobId(0), reason: failed }]);
    assert_eq!(e.cluster().free_gpus(), 4);
    assert_eq!(e.tenant_gpus(), &[0]);
    assert!(matches!(e.job(JobId(0)).unwrap().phase, Phase::Ended(EndReason::Failed { exit_code: 3 })));
    assert!(e.step(Time(8), Input::JobEnded { job: JobId(0), reason: EndReason::Lost }).is_empty());
    assert!(e.step(Time(9), Input::JobEnded { job: JobId(9), reason: EndReason::Lost }).is_empty());
    assert_eq!(e.violations(), &[Violation::EndAlreadyOver(JobId(0)), Violation::UnknownJob(JobId(9))]);
}

#[test]
fn tenants_added_at_run_time_get_the_next_id_and_may_submit() {
    let script = vec![vec![], vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0)] }]];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    e.step(Time::ZERO, Input::JobSubmitted(JobSpec::new(7, 1, Time::ZERO, 1, 1.0).into()));
    assert!(matches!(e.violations()[0], Violation::UnknownTenant { .. }));
    assert_eq!(e.add_tenant(TenantSpec::new("b")).0, 1);
    let commands = e.step(Time(1), Input::JobSubmitted(JobSpec::new(0, 1, Time(1), 1, 1.0).into()));
    assert_eq!(commands, vec![Command::Start { job: JobId(0), gpus: vec![GpuId(0)] }]);
    assert_eq!(e.tenant_gpus(), &[0, 1]);
}

/// A job submitted as a handle into a shared table keeps the handle, not a copy:
/// each of the two jobs adds one count to the table (the test's own is the third),
/// and the state reads the table's spec. Dropping the engine gives the counts back.
#[test]
fn shared_specs_are_referred_to_not_copied() {
    use std::sync::Arc;
    let specs: Vec<JobSpec> = (0..2).map(|i| JobSpec::new(i, 0, Time::ZERO, 1, 10.0)).collect();
    let table = cotenant_core::SpecTable::new(Arc::new(specs));
    let script = vec![vec![Action::Start { job: JobId(0), gpus: vec![GpuId(0)] }]];
    let mut e = engine(script, vec![TenantSpec::new("a")]);
    let submit = |i| Input::JobSubmitted(cotenant_core::SpecRef::shared(&table, i).unwrap());
    e.step(Time::ZERO, Input::Batch(vec![submit(0), submit(1)]));
    assert_eq!(Arc::strong_count(&table), 3);
    assert_eq!(e.job(JobId(1)).unwrap().spec.id, JobId(1));
    assert_eq!(e.job(JobId(0)).unwrap().phase, Phase::Running);
    drop(e);
    assert_eq!(Arc::strong_count(&table), 1);
}
