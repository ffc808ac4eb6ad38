//! Elastic jobs (EDL) under elastic Tiresias: scale-out and scale-in worked out on
//! paper, stop-free against stop-resume, and the invariants with resizes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use cotenant_core::{ClusterSpec, Command, Elastic, GpuId, Input, JobId, JobSpec, Span, TenantSpec, Time};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::{
    simulate, summarize, ElasticModel, Outcome, ReferenceRate, ScalingMode, SimConfig, SimResult,
};
use proptest::prelude::*;

fn job(id: u32, arrival_s: u64, gpus: u32, work: f64, range: Option<(u32, u32)>) -> JobSpec {
    let mut spec = JobSpec::new(id, 0, Time(arrival_s * 1_000_000), gpus, work);
    spec.duration_estimate = Some(Span::from_secs(work as u64));
    spec.elastic = range.map(|(min, max)| Elastic::new(min, max, gpus).unwrap());
    spec
}

fn run(policy: &str, mode: ScalingMode, jobs: &[JobSpec], nodes: u32, gpus_per_node: u32) -> SimResult {
    let policy = build(policy, &PolicyParams::default()).unwrap();
    let elastic = ElasticModel { mode, ..ElasticModel::default() };
    let config = SimConfig { elastic, record: true, ..SimConfig::default() };
    let cluster = ClusterSpec::homogeneous("V100", nodes, gpus_per_node);
    simulate(jobs, &[TenantSpec::new("t")], cluster, policy, &ReferenceRate, &config, &mut |_| {}).unwrap()
}

fn end_secs(r: &SimResult, i: usize) -> f64 {
    assert_eq!(r.jobs[i].outcome, Outcome::Completed);
    r.jobs[i].end.unwrap().0 as f64 / 1e6
}

/// A: elastic [1, 4] asking 2 GPUs, 1000 s of work at 2 GPUs; B: rigid, 2 GPUs, 100 s.
/// Both arrive at 0 on one 4-GPU node. Admission at minimums (A 1, B 2) leaves one GPU,
/// which brings A to its request: A and B each start on 2. B ends at 100; A grows to 4.
///
/// Speedup n x 0.9^log2(n): 1.8 on 2, 3.24 on 4, so A on 4 GPUs runs 3.24 / 1.8 = 1.8x.
/// - stop-free: A keeps rate 1 while new workers prepare (100-120 s, done 120), pauses
///   0.9 s (0.5 s + 0.5 GiB / 1.25 GiB/s), then runs 880 / 1.8 = 488.888889 s: ends at
///   609.788889 s. Overhead: 20 s x 2 idle added GPUs + 0.9 s x 4 = 43.6 GPU-s.
/// - stop-resume: paused 100-145 s (done 100), then 900 / 1.8 = 500 s: ends at 645 s.
///   Overhead 45 s x 4 GPUs = 180 GPU-s.
/// - rigid Tiresias: A runs on 2 GPUs throughout, ends at 1000 s.
#[test]
fn scale_out_after_a_completion() {
    let jobs = [job(0, 0, 2, 1000.0, Some((1, 4))), job(1, 0, 2, 100.0, None)];
    let free = run("elastic-tiresias", ScalingMode::StopFree, &jobs, 1, 4);
    assert!((end_secs(&free, 0) - 609.788_889).abs() < 1e-6, "{}", end_secs(&free, 0));
    assert_eq!(end_secs(&free, 1), 100.0);
    assert_eq!(free.jobs[0].resizes, 1);
    assert_eq!(free.jobs[0].scaling_overhead_gpu_us, 43_600_000);

    let resume = run("elastic-tiresias", ScalingMode::StopResume, &jobs, 1, 4);
    assert!((end_secs(&resume, 0) - 645.0).abs() < 1e-6, "{}", end_secs(&resume, 0));
    assert_eq!(resume.jobs[0].scaling_overhead_gpu_us, 180_000_000);

    let rigid = run("tiresias", ScalingMode::StopFree, &jobs, 1, 4);
    assert_eq!(end_secs(&rigid, 0), 1000.0);
    assert_eq!(rigid.jobs[0].resizes, 0);
}

/// A (elastic [1, 4], asking 2, 1000 s at 2 GPUs) is alone at 0 and starts on all 4
/// GPUs at 1.8x. B (rigid, 2 GPUs, 100 s) arrives at 100: admission gives A 1 + 1 and
/// B 2, so A shrinks to 2 (graceful scale-in, no pause) and B starts at once, ends at
/// 200. A has done 180 by 100, 280 by 200; it grows back (prepare 200-220 at rate 1:
/// 300 done; pause to 220.9), then 700 / 1.8 = 388.888889 s: ends at 609.788889 s.
/// Under stop-resume the shrink pauses A 45 s (100-145, done 180) and B still starts
/// at 100; A runs at 1 from 145 to 200 (235), pauses 200-245, then 765 / 1.8 = 425 s:
/// ends at 670 s.
#[test]
fn shrink_to_admit_then_grow_back() {
    let jobs = [job(0, 0, 2, 1000.0, Some((1, 4))), job(1, 100, 2, 100.0, None)];
    let free = run("elastic-tiresias", ScalingMode::StopFree, &jobs, 1, 4);
    assert!((end_secs(&free, 0) - 609.788_889).abs() < 1e-6, "{}", end_secs(&free, 0));
    assert_eq!(end_secs(&free, 1), 200.0);
    assert_eq!(free.jobs[0].resizes, 2);
    assert_eq!(free.jobs[0].preemptions, 0);

    let resume = run("elastic-tiresias", ScalingMode::StopResume, &jobs, 1, 4);
    assert!((end_secs(&resume, 0) - 670.0).abs() < 1e-6, "{}", end_secs(&resume, 0));
    assert_eq!(end_secs(&resume, 1), 200.0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random elastic and rigid jobs on 2 x 4 GPUs under elastic Tiresias, both modes:
    /// every job completes, no job ever holds fewer than its minimum or more than its
    /// maximum, and busy GPU-time equals the jobs' held GPU-time (resizes included).
    /// GPU ownership across resizes is checked by crates/sim/tests/properties.rs's replay.
    #[test]
    fn resizes_keep_every_invariant(
        specs in prop::collection::vec((0u64..600, 0usize..4, 10u64..900, any::<bool>()), 1..14),
        stop_resume in any::<bool>(),
    ) {
        let sizes = [1u32, 2, 4, 8];
        let jobs: Vec<JobSpec> = specs.iter().enumerate().map(|(i, &(arrival, size, work, elastic))| {
            let gpus = sizes[size];
            let range = elastic.then(|| ((gpus / 2).max(1), (gpus * 2).min(8)));
            job(i as u32, arrival, gpus, work as f64, range)
        }).collect();
        let mut sorted = jobs.clone();
        sorted.sort_by_key(|j| j.arrival);
        for (i, j) in sorted.iter_mut().enumerate() { j.id = JobId(i as u32); }
        let mode = if stop_resume { ScalingMode::StopResume } else { ScalingMode::StopFree };
        let r = run("elastic-tiresias", mode, &sorted, 2, 4);
        prop_assert!(r.early_stop.is_none(), "{:?}", r.early_stop);
        for record in &r.jobs {
            prop_assert_eq!(&record.outcome, &Outcome::Completed);
        }
        // Replay GPU ownership from the command log: no GPU has two owners, resizes
        // only add free GPUs, and every size is within the job's range.
        let mut owner: BTreeMap<GpuId, JobId> = BTreeMap::new();
        let mut held_by: BTreeMap<JobId, Vec<GpuId>> = BTreeMap::new();
        let release = |owner: &mut BTreeMap<GpuId, JobId>, held_by: &mut BTreeMap<JobId, Vec<GpuId>>, job: JobId| {
            for g in held_by.remove(&job).unwrap_or_default() {
                owner.remove(&g);
            }
        };
        for (_, input, commands) in &r.log.as_ref().unwrap().steps {
            let finished: Vec<JobId> = match input {
                Input::JobFinished { job } => vec![*job],
                Input::Batch(list) => list.iter().filter_map(|i| match i { Input::JobFinished { job } => Some(*job), _ => None }).collect(),
                _ => vec![],
            };
            for job in finished {
                release(&mut owner, &mut held_by, job);
            }
            for command in commands {
                match command {
                    Command::Start { job, gpus } | Command::Resize { job, gpus, .. } => {
                        prop_assert!(sorted[job.index()].accepts_gpus(gpus.len() as u32), "{} on {} GPUs", job, gpus.len());
                        release(&mut owner, &mut held_by, *job);
                        for g in gpus {
                            prop_assert!(owner.insert(*g, *job).is_none(), "{} double-booked", g);
                        }
                        held_by.insert(*job, gpus.clone());
                    }
                    Command::Stop { job, .. } | Command::End { job, .. } => release(&mut owner, &mut held_by, *job),
                    Command::StartShared { .. } | Command::Rerate { .. } => prop_assert!(false, "no sharing here"),
                    Command::Allocate { .. } => prop_assert!(false, "elastic-tiresias models no host resources"),
                }
            }
        }
        let held: u128 = r.jobs.iter().map(|j| u128::from(j.held_gpu_us)).sum();
        prop_assert_eq!(r.usage.busy_gpu_us, held);
        let s = summarize(&r);
        prop_assert!(s.gpu_utilization <= 1.0 + 1e-9);
        prop_assert_eq!(s.resizes, r.jobs.iter().map(|j| u64::from(j.resizes)).sum::<u64>());
    }
}
