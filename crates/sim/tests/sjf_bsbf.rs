//! SJF-BSBF and SJF-FFS: the share test worked by hand, gradient accumulation
//! against GPU memory, the engine refusing over-committed shares, and the
//! invariant that no GPU's memory is over-committed and no GPU holds three jobs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cotenant_core::sharing::InterferenceTable;
use cotenant_core::{
    Action, Cluster, ClusterSpec, ClusterView, Decision, Engine, GpuId, GpuMemory, GpuTypeId, Input, JobId,
    JobSpec, Policy, PolicyCx, Share, ShareRefusal, SharingMode, Span, TenantSpec, Time, Violation,
};
use cotenant_policies::sjf_bsbf::share_test;
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::sharing::{parse_interference, InterferenceRates};
use cotenant_sim::{simulate, SimConfig, SimResult};
use proptest::prelude::*;

/// Two models: `small` shares well (xi 1.2), `large` badly (xi 1.8); accumulation
/// costs 10% per extra micro-batch.
const TABLE: &str = "models small large\naccumulation-overhead 0.1\n\
    time-slice small small 1.2\ntime-slice small large 1.5\ntime-slice large small 1.5\ntime-slice large large 1.8\n\
    mps small small 1.1\nmps small large 1.3\nmps large small 1.3\nmps large large 1.6\n";
const SMALL: u32 = 0;
const LARGE: u32 = 1;

fn table() -> InterferenceTable {
    parse_interference(TABLE, "test-table").unwrap()
}

/// One node of `gpus` GPUs of 48 GiB.
fn cluster(gpus: u32) -> ClusterSpec {
    let mut spec = ClusterSpec::homogeneous("A6000", 1, gpus);
    spec.set_gpu_memory_gib(GpuTypeId(0), 48.0);
    spec
}

fn job(id: u32, arrival_secs: u64, model: u32, work_secs: f64, memory: (f64, f64)) -> JobSpec {
    let mut job = JobSpec::new(id, 0, Time::from_secs(arrival_secs), 1, work_secs);
    job.job_type = Some(model);
    job.duration_estimate = Some(Span::from_secs_f64_ceil(work_secs));
    job.gpu_memory = GpuMemory { total_gib: memory.0, activation_gib: memory.1 };
    job
}

fn run(policy: &str, jobs: &[JobSpec], spec: ClusterSpec) -> SimResult {
    let params = PolicyParams { interference: Some(Arc::new(table())), ..PolicyParams::default() };
    let policy = build(policy, &params).unwrap();
    let config = SimConfig { record: true, ..SimConfig::default() };
    let rates = InterferenceRates { table: table() };
    simulate(jobs, &[TenantSpec::new("t")], spec, policy, &rates, &config, &mut |_| {}).unwrap()
}

fn ends_secs(result: &SimResult) -> Vec<f64> {
    result.jobs.iter().map(|j| j.end.unwrap().as_secs_f64()).collect()
}

#[test]
fn share_test_by_hand() {
    // Accepted: a has etc_a = 100 s, resident b has etc_b = 900 s left, xi = 1.2 both.
    // e_a = 120 < e_b = 1080, so t_con = 0.5 * 900 + (1 - 1/2.4) * 120 = 450 + 70 = 520;
    // t_seq = 900 + 0.5 * 100 = 950. 520 < 950: share.
    let accepted = share_test(100.0, 900.0, 1.2, 1.2);
    assert!((accepted.t_con - 520.0).abs() < 1e-9 && accepted.t_seq == 950.0);
    // Refused: etc_a = 1000 s, etc_b = 100 s left, xi = 1.8 both. e_a = 1800 >= e_b = 180, so
    // t_con = 0.5 * 1000 + (1 - 1/3.6) * 180 = 500 + 130 = 630; t_seq = 100 + 500 = 600. 630 > 600.
    let refused = share_test(1000.0, 100.0, 1.8, 1.8);
    assert!((refused.t_con - 630.0).abs() < 1e-9 && refused.t_seq == 600.0);
}

#[test]
fn sjf_bsbf_shares_when_the_test_says_so() {
    // One GPU. Job 0 (small, 1000 s) runs alone from 0; job 1 (small, 100 s) arrives at 100:
    // the accepted case above. Both run at 1/1.2: job 1 ends at 100 + 120 = 220; job 0 has
    // done 100 + 120/1.2 = 200 by then and ends 800 s later, at 1020. The pair's mean
    // completion after t = 100 is (120 + 920) / 2 = 520 = t_con.
    let jobs = [job(0, 0, SMALL, 1000.0, (10.0, 5.0)), job(1, 100, SMALL, 100.0, (10.0, 5.0))];
    let ends = ends_secs(&run("sjf-bsbf", &jobs, cluster(1)));
    assert!((ends[0] - 1020.0).abs() < 1e-3 && (ends[1] - 220.0).abs() < 1e-3, "{ends:?}");
}

#[test]
fn sjf_bsbf_refuses_a_harmful_share_that_first_fit_takes() {
    // Job 0 (large, 1000 s) alone from 0; job 1 (large, 1000 s) arrives at 900: the refused
    // case above. SJF-BSBF waits: job 1 runs 1000..2000 (mean JCT (1000 + 1100) / 2 = 1050).
    // SJF-FFS shares at 1/1.8: job 0's last 100 s take 180, ending at 1080; job 1 has done
    // 100 by then and ends 900 s later, at 1980 (mean JCT (1080 + 1080) / 2 = 1080).
    let jobs = [job(0, 0, LARGE, 1000.0, (10.0, 5.0)), job(1, 900, LARGE, 1000.0, (10.0, 5.0))];
    let ends = ends_secs(&run("sjf-bsbf", &jobs, cluster(1)));
    assert!((ends[0] - 1000.0).abs() < 1e-3 && (ends[1] - 2000.0).abs() < 1e-3, "{ends:?}");
    let ends = ends_secs(&run("sjf-ffs", &jobs, cluster(1)));
    assert!((ends[0] - 1080.0).abs() < 1e-3 && (ends[1] - 1980.0).abs() < 1e-3, "{ends:?}");
}

#[test]
fn gradient_accumulation_makes_a_share_fit_in_memory() {
    // Both need 30 GiB (20 of it activations) on a 48 GiB GPU: 30 + 30 = 60 does not fit;
    // k = 2: 30 - 20/2 = 20, 20 + 30 = 50 does not; k = 4: 30 - 15 = 15, 15 + 30 = 45 fits.
    // Job 1 then runs 1.2 (xi) x 1.3 (1 + 0.1 x 3) = 1.56 times slower: its 100 s take 156 s,
    // ending at 256; job 0 runs at 1/1.2 meanwhile: 100 + 156/1.2 = 230 done, ending at 1026.
    let jobs = [job(0, 0, SMALL, 1000.0, (30.0, 20.0)), job(1, 100, SMALL, 100.0, (30.0, 20.0))];
    let result = run("sjf-bsbf", &jobs, cluster(1));
    let ends = ends_secs(&result);
    assert!((ends[0] - 1026.0).abs() < 1e-3 && (ends[1] - 256.0).abs() < 1e-3, "{ends:?}");
    // The engine's state after the share: replay up to job 1's start.
    let engine = replay_until(&result, "sjf-bsbf", Time::from_secs(100));
    assert_eq!(engine.job(JobId(1)).unwrap().sharing.accumulation, 4);
    assert_eq!(engine.job(JobId(0)).unwrap().sharing.mode, Some(SharingMode::TimeSlice));
    // A job needing more than 48 GiB even with k = 64 never shares: it waits for the GPU.
    let jobs = [job(0, 0, SMALL, 1000.0, (30.0, 20.0)), job(1, 100, SMALL, 100.0, (40.0, 1.0))];
    let ends = ends_secs(&run("sjf-bsbf", &jobs, cluster(1)));
    assert!((ends[1] - 1100.0).abs() < 1e-3, "{ends:?}");
}

/// A fresh engine fed the recorded inputs up to and including `until`.
fn replay_until(result: &SimResult, policy: &str, until: Time) -> Engine {
    let params = PolicyParams { interference: Some(Arc::new(table())), ..PolicyParams::default() };
    let cluster = Cluster::new(cluster(1)).unwrap();
    let mut engine = Engine::new(cluster, vec![TenantSpec::new("t")], build(policy, &params).unwrap(), 0);
    for (at, input, _) in &result.log.as_ref().unwrap().steps {
        if *at > until {
            break;
        }
        engine.step(*at, input.clone());
    }
    engine
}

/// Proposes the given actions on its first call, nothing after.
struct Scripted(Vec<Action>);

impl Policy for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, _view: &ClusterView<'_>) -> Decision {
        Decision { actions: std::mem::take(&mut self.0), waiting: Vec::new() }
    }
}

#[test]
fn the_engine_refuses_shares_that_over_commit_memory() {
    let share = |job, k| {
        Action::Share(Share { job: JobId(job), partner: JobId(0), mode: SharingMode::Mps, accumulation: k })
    };
    let actions = vec![
        Action::Start { job: JobId(0), gpus: vec![GpuId(0)] },
        share(1, 2),
        share(1, 0),
        share(1, 4),
        share(2, 1),
    ];
    let mut engine = Engine::new(
        Cluster::new(cluster(1)).unwrap(),
        vec![TenantSpec::new("t")],
        Box::new(Scripted(actions)),
        0,
    );
    let jobs = [
        job(0, 0, SMALL, 10.0, (30.0, 20.0)),
        job(1, 0, SMALL, 10.0, (30.0, 20.0)),
        job(2, 0, SMALL, 10.0, (1.0, 0.0)),
    ];
    engine.step(
        Time::ZERO,
        Input::Batch(jobs.iter().cloned().map(|spec| Input::JobSubmitted(spec.into())).collect()),
    );
    assert_eq!(
        engine.violations(),
        &[
            // k = 2: 20 + 30 = 50 > 48.
            Violation::ShareRefused {
                job: JobId(1),
                refusal: ShareRefusal::OverCommitsMemory {
                    gpu: GpuId(0),
                    need_gib: 50.0,
                    capacity_gib: 48.0
                }
            },
            Violation::ShareRefused { job: JobId(1), refusal: ShareRefusal::BadAccumulation(0) },
            // k = 4 fits (45 GiB); job 2 would be the third job on the GPU.
            Violation::ShareNotPossible { job: JobId(2), partner: JobId(0) },
        ]
    );
    assert_eq!(engine.job(JobId(1)).unwrap().sharing.accumulation, 4);
}

/// Needs per job and the GPUs' memory: every GPU holds at most two jobs, and
/// their needs (at their accumulation factors) fit in its memory.
fn check_memory(engine: &Engine, jobs: &[JobSpec]) -> Result<(), TestCaseError> {
    let cluster = engine.cluster();
    for g in 0..cluster.gpu_count() {
        let gpu = GpuId(g);
        let holders: Vec<JobId> = [cluster.owner(gpu), cluster.co_owner(gpu)].into_iter().flatten().collect();
        let need: f64 = holders
            .iter()
            .map(|&id| jobs[id.index()].gpu_memory.need_gib(engine.job(id).unwrap().sharing.accumulation))
            .sum();
        let holding: Vec<JobId> = engine
            .running()
            .iter()
            .copied()
            .filter(|&id| engine.job(id).unwrap().gpus.contains(&gpu))
            .collect();
        prop_assert!(holding.len() <= 2, "{gpu} held by {holding:?}");
        prop_assert_eq!(holding.len(), holders.len());
        prop_assert!(need <= 48.0 + 1e-9, "{gpu}: {need} GiB of 48 for {holders:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn gpu_memory_is_never_over_committed(
        shape in prop::collection::vec((0u64..400, 0u32..2, 1u64..300, 1u32..40, 0u32..100, prop::sample::select(vec![1u32, 2, 4])), 1..30),
        ffs in any::<bool>(),
        per_node in 1u32..9,
    ) {
        let mut shape = shape;
        shape.sort_by_key(|s| s.0);
        let jobs: Vec<JobSpec> = shape.iter().enumerate().map(|(i, &(arrival, model, secs, total, act_pct, gpus))| {
            let mut j = job(i as u32, arrival, model, secs as f64, (f64::from(total), f64::from(total * act_pct) / 100.0));
            j.gpus = gpus.min(per_node);
            j
        }).collect();
        let policy = if ffs { "sjf-ffs" } else { "sjf-bsbf" };
        let spec = cluster(per_node);
        let result = run(policy, &jobs, spec.clone());
        prop_assert!(result.jobs.iter().all(|j| j.end.is_some()));
        let params = PolicyParams { interference: Some(Arc::new(table())), ..PolicyParams::default() };
        let mut engine = Engine::new(Cluster::new(spec).unwrap(), vec![TenantSpec::new("t")], build(policy, &params).unwrap(), 0);
        for (at, input, _) in &result.log.as_ref().unwrap().steps {
            engine.step(*at, input.clone());
            check_memory(&engine, &jobs)?;
        }
        prop_assert!(engine.violations().is_empty(), "{:?}", engine.violations());
    }
}
