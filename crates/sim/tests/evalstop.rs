//! EvalStop: the k-decline stop worked out by hand (engine level, with the
//! scores of issue 8, and through the simulator with a noiseless curve), and
//! property tests over random RLHF workloads under every base policy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cotenant_core::{
    Cluster, ClusterSpec, Command, EndReason, Engine, GpuId, Input, JobId, JobSpec, Span, TenantSpec, Time,
};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::evalstop::metrics::evalstop_summary;
use cotenant_sim::evalstop::{EvalCurve, EvalCurves, Shape};
use cotenant_sim::{simulate, Outcome, Overheads, ReferenceRate, SimConfig, SimResult};
use proptest::prelude::*;

fn policy(name: &str, k: u32) -> Box<dyn cotenant_core::Policy> {
    let options = [("k".to_string(), k.to_string())].into_iter().filter(|_| name.starts_with("evalstop"));
    build(name, &PolicyParams { options: options.collect(), ..PolicyParams::default() }).unwrap()
}

/// One GPU; job 0 (evaluated) runs, job 1 waits for its GPU.
fn engine_with_two_jobs(k: u32) -> Engine {
    let cluster = Cluster::new(ClusterSpec::homogeneous("v100", 1, 1)).unwrap();
    let mut engine = Engine::new(cluster, vec![TenantSpec::new("t")], policy("evalstop(fifo)", k), 0);
    let commands = engine.step(
        Time::ZERO,
        Input::Batch(vec![
            Input::JobSubmitted(JobSpec::new(0, 0, Time::ZERO, 1, 100.0).into()),
            Input::JobSubmitted(JobSpec::new(1, 0, Time::ZERO, 1, 10.0).into()),
        ]),
    );
    assert_eq!(commands, vec![Command::Start { job: JobId(0), gpus: vec![GpuId(0)] }]);
    engine
}

/// Feeds evaluation `i` (1-based) of job 0 at `i` seconds, at `10 i` work units.
fn evaluate(engine: &mut Engine, i: u64, score: f64) -> Vec<Command> {
    engine.step(Time::from_secs(i), Input::Evaluated { job: JobId(0), work_done: 10.0 * i as f64, score })
}

#[test]
fn two_declines_stop_after_the_fifth_evaluation_and_keep_checkpoint_three() {
    // Scores 1, 2, 3, 2.5, 2.4 with k = 2: 3 -> 2.5 is the first decline, 2.5 -> 2.4
    // the second, so the 5th evaluation ends the job. Its best checkpoint is the
    // 3rd evaluation (score 3, at 30 work units). The freed GPU goes to job 1 in the
    // same step (the engine's follow-up pass), and no pass runs before that.
    let mut engine = engine_with_two_jobs(2);
    for (i, score) in [(1, 1.0), (2, 2.0), (3, 3.0), (4, 2.5)] {
        assert_eq!(evaluate(&mut engine, i, score), vec![], "evaluation {i}");
    }
    assert_eq!(engine.stats().scheduling_passes, 1, "evaluations without a due stop cost no pass");
    let reason =
        EndReason::EvalDeclined { declines: 2, best_eval: 3, best_score_micro: 3_000_000, best_work: 30 };
    assert_eq!(
        evaluate(&mut engine, 5, 2.4),
        vec![Command::End { job: JobId(0), reason }, Command::Start { job: JobId(1), gpus: vec![GpuId(0)] },]
    );
    assert!(engine.violations().is_empty());
    assert_eq!(
        reason.to_string(),
        "evalstop after 2 declining evaluations; kept best checkpoint: evaluation 3, score 3.000, at work 30"
    );
    // Late or repeated evaluations of the ended job change nothing.
    assert_eq!(evaluate(&mut engine, 6, 1.0), vec![]);
}

#[test]
fn isolated_dips_of_a_noisy_healthy_curve_do_not_stop_it() {
    // Every dip is followed by a rise: the consecutive-decline count never reaches 2.
    let mut engine = engine_with_two_jobs(2);
    let scores = [0.40, 0.61, 0.58, 0.70, 0.74, 0.71, 0.77, 0.76, 0.78, 0.775, 0.79, 0.785, 0.786];
    for (i, &score) in scores.iter().enumerate() {
        assert_eq!(evaluate(&mut engine, i as u64 + 1, score), vec![], "evaluation {}", i + 1);
    }
    // With k = 1 the very first dip (0.61 -> 0.58) would have stopped it.
    let mut eager = engine_with_two_jobs(1);
    assert_eq!(evaluate(&mut eager, 1, 0.40), vec![]);
    assert_eq!(evaluate(&mut eager, 2, 0.61), vec![]);
    assert!(matches!(evaluate(&mut eager, 3, 0.58)[0], Command::End { job: JobId(0), .. }));
}

/// Ceiling 1, tau 0.05, peak at 35% of the work, decline 1 per unit fraction, no noise,
/// an evaluation every 10% of the work.
fn hacking_curve() -> EvalCurve {
    EvalCurve {
        ceiling: 1.0,
        tau: 0.05,
        shape: Shape::Hacking { peak: 0.35, decline: 1.0 },
        sigma: 0.0,
        interval: 0.1,
        noise_seed: 1,
    }
}

fn run(name: &str, k: u32, jobs: &[JobSpec], curves: EvalCurves, gpus: u32) -> SimResult {
    let config = SimConfig {
        overheads: Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO },
        record: true,
        evals: Some(Arc::new(curves)),
        ..SimConfig::default()
    };
    let tenants = vec![TenantSpec::new("t")];
    let cluster = ClusterSpec::homogeneous("v100", 1, gpus);
    simulate(jobs, &tenants, cluster, policy(name, k), &ReferenceRate, &config, &mut |_| {}).unwrap()
}

#[test]
fn a_hacking_run_stops_two_evaluations_past_its_peak_and_its_gpu_is_backfilled() {
    // Job 0: 1 GPU, 1000 s, evaluated at 100, 200, ..., 900 s (work = time at rate 1).
    // Means: 0.1 -> 1-e^-2 = 0.865, 0.2 -> 0.982, 0.3 -> 0.998, 0.4 -> (1-e^-7) - 0.05
    // = 0.949, 0.5 -> 0.849. Declines at evaluations 4 and 5: stopped at 500 s, best =
    // evaluation 3 (work 300). Job 1 (1 GPU, 100 s, arrives at 0) waits for the only GPU
    // and starts at 500 s in the same step: ends at 600 s.
    let jobs = [JobSpec::new(0, 0, Time::ZERO, 1, 1000.0), JobSpec::new(1, 0, Time::ZERO, 1, 100.0)];
    let curves = EvalCurves::new(vec![Some(hacking_curve()), None]);
    let r = run("evalstop(fifo)", 2, &jobs, curves.clone(), 1);
    let Outcome::Ended(EndReason::EvalDeclined { declines, best_eval, best_score_micro, best_work }) =
        r.jobs[0].outcome
    else {
        panic!("job 0 should be stopped: {:?}", r.jobs[0].outcome)
    };
    assert_eq!((declines, best_eval, best_work), (2, 3, 300));
    assert_eq!(best_score_micro, ((1.0 - (-6.0f64).exp()) * 1e6).round() as i64);
    assert_eq!(r.jobs[0].end, Some(Time::from_secs(500)));
    assert_eq!(
        (r.jobs[1].first_start, r.jobs[1].end),
        (Some(Time::from_secs(500)), Some(Time::from_secs(600)))
    );
    assert_eq!(r.evaluations.len(), 5);
    // Wasted: 1 GPU x (500 - 350) s past the peak = 150 GPU-s. Under plain FIFO it runs
    // to 1000 s: 650 GPU-s, and job 1 ends at 1100 s.
    let s = evalstop_summary(&r, &curves);
    assert!((s.wasted_gpu_hours - 150.0 / 3600.0).abs() < 1e-9, "{}", s.wasted_gpu_hours);
    assert_eq!((s.stopped, s.true_stops, s.precision, s.recall), (1, 1, Some(1.0), Some(1.0)));
    // JCT: (500 + 600) / 2 s.
    assert!((s.mean_jct_hours - 550.0 / 3600.0).abs() < 1e-9);
    let base = run("fifo", 2, &jobs, curves.clone(), 1);
    let b = evalstop_summary(&base, &curves);
    assert!((b.wasted_gpu_hours - 650.0 / 3600.0).abs() < 1e-9);
    assert_eq!((b.stopped, b.recall), (0, Some(0.0)));
    assert_eq!(base.jobs[1].end, Some(Time::from_secs(1100)));
    // k = 3 waits one more evaluation: 0.6 -> 0.749 < 0.849, stopped at 600 s.
    let r3 = run("evalstop(fifo)", 3, &jobs, curves, 1);
    assert_eq!(r3.jobs[0].end, Some(Time::from_secs(600)));
}

#[test]
fn a_preempted_job_resumes_its_curve_from_its_checkpoint() {
    // SRTF on one GPU: job 0 (1000 s) runs from 0; job 1 (50 s) arrives at 150 s and
    // preempts it (its 850 s left are longer). Job 0 resumes at 200 s with 150 units done:
    // evaluation 2 (200 units) comes at 250 s, then every 100 s: 350, 450, 550 s.
    let jobs = [JobSpec::new(0, 0, Time::ZERO, 1, 1000.0), JobSpec::new(1, 0, Time::from_secs(150), 1, 50.0)];
    let jobs: Vec<JobSpec> = jobs
        .into_iter()
        .map(|mut j| {
            j.duration_estimate = Some(Span::from_secs_f64_ceil(j.work));
            j
        })
        .collect();
    let curves = EvalCurves::new(vec![Some(hacking_curve()), None]);
    let r = run("evalstop(srtf)", 2, &jobs, curves, 1);
    let times: Vec<(u32, u64)> = r.evaluations.iter().map(|e| (e.index, e.at.0 / 1_000_000)).collect();
    assert_eq!(times, vec![(1, 100), (2, 250), (3, 350), (4, 450), (5, 550)]);
    assert_eq!(r.jobs[0].end, Some(Time::from_secs(550)));
    assert_eq!(r.jobs[0].preemptions, 1);
}

#[test]
fn malformed_curves_and_options_are_clear_errors() {
    let jobs = [JobSpec::new(0, 0, Time::ZERO, 1, 1000.0)];
    let bad = EvalCurve { shape: Shape::Hacking { peak: 0.35, decline: -1.0 }, ..hacking_curve() };
    let config =
        SimConfig { evals: Some(Arc::new(EvalCurves::new(vec![Some(bad)]))), ..SimConfig::default() };
    let error = simulate(
        &jobs,
        &[TenantSpec::new("t")],
        ClusterSpec::homogeneous("v100", 1, 1),
        policy("evalstop(fifo)", 2),
        &ReferenceRate,
        &config,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid evaluation curve: job0: eval curve field 'decline' = -1: must be in (0, 1e6]"
    );
    let params = |k: &str, v: &str| PolicyParams {
        options: [(k.to_string(), v.to_string())].into_iter().collect(),
        ..PolicyParams::default()
    };
    let error = build("evalstop(srtf)", &params("k", "0")).err().unwrap().to_string();
    assert!(error.contains("policy 'evalstop(srtf)': option 'k=0'"), "{error}");
    let error = build("evalstop(srtf)", &params("min_drop", "-1")).err().unwrap().to_string();
    assert!(error.contains("option 'min_drop=-1'"), "{error}");
    // The base's options still work, and unknown ones are still errors.
    assert!(build("evalstop(las)", &params("quantum", "600s")).is_ok());
    let error = build("evalstop(srtf)", &params("quantum", "600s")).err().unwrap().to_string();
    assert!(error.contains("option 'quantum' is not one it takes"), "{error}");
    assert!(build("evalstop(nope)", &PolicyParams::default()).is_err());
    assert!(build("evalstop(evalstop)", &PolicyParams::default()).is_err());
    assert_eq!(build("evalstop", &PolicyParams::default()).unwrap().name(), "evalstop");
}

/// A random curve: healthy or hacking, noisy.
fn curve() -> impl Strategy<Value = EvalCurve> {
    (any::<bool>(), 0.2f64..0.8, 0.2f64..2.0, 0.0f64..0.05, 0.05f64..0.3, 0.03f64..0.3, any::<u64>())
        .prop_map(|(hacking, peak, decline, sigma, interval, tau, noise_seed)| EvalCurve {
            ceiling: 1.0,
            tau,
            shape: if hacking { Shape::Hacking { peak, decline } } else { Shape::Healthy },
            sigma,
            interval,
            noise_seed,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Under every base: a stopped job frees exactly the GPUs it held (and they are
    /// free before anything else takes them), no job ends twice or gets a command
    /// after it ended, every stop follows k declining evaluations, and the run is
    /// deterministic.
    #[test]
    fn stops_free_exactly_their_gpus_once_and_replay(
        base in prop::sample::select(vec!["fifo", "sjf", "srtf", "las", "tiresias"]),
        k in 1u32..4,
        shape in prop::collection::vec((0u64..2000, prop::sample::select(vec![1u32, 2, 4]), 200u64..3000, prop::option::of(curve())), 1..25),
        restore in 0u64..30,
        ckpt in prop::sample::select(vec![0u64, 120]),
    ) {
        let mut shape = shape;
        shape.sort_by_key(|j| j.0);
        let jobs: Vec<JobSpec> = shape.iter().enumerate().map(|(i, &(arrival, gpus, secs, _))| {
            let mut job = JobSpec::new(i as u32, 0, Time::from_secs(arrival), gpus, secs as f64);
            job.duration_estimate = Some(Span::from_secs(secs));
            job
        }).collect();
        let curves = EvalCurves::new(shape.iter().map(|j| j.3).collect());
        let config = SimConfig {
            overheads: Overheads { checkpoint_interval: Span::from_secs(ckpt), restore_overhead: Span::from_secs(restore) },
            record: true,
            evals: Some(Arc::new(curves.clone())),
            ..SimConfig::default()
        };
        let name = format!("evalstop({base})");
        let go = || simulate(&jobs, &[TenantSpec::new("t")], ClusterSpec::homogeneous("v100", 1, 4),
            policy(&name, k), &ReferenceRate, &config, &mut |_| {}).unwrap();
        let r = go();
        let again = go();
        prop_assert_eq!(format!("{:?}{:?}", r.jobs, r.evaluations), format!("{:?}{:?}", again.jobs, again.evaluations));

        let mut owner: BTreeMap<GpuId, JobId> = BTreeMap::new();
        let mut held: BTreeMap<JobId, Vec<GpuId>> = BTreeMap::new();
        let mut ended: BTreeSet<JobId> = BTreeSet::new();
        for (_, input, commands) in &r.log.as_ref().unwrap().steps {
            let inputs = match input {
                Input::Batch(inputs) => inputs.clone(),
                one => vec![one.clone()],
            };
            for input in inputs {
                if let Input::JobFinished { job } = input {
                    for g in held.remove(&job).unwrap() {
                        prop_assert_eq!(owner.remove(&g), Some(job));
                    }
                }
            }
            for command in commands {
                match command {
                    Command::Start { job, gpus } => {
                        prop_assert!(!ended.contains(job));
                        for g in gpus {
                            prop_assert!(owner.insert(*g, *job).is_none(), "{:?} taken twice", g);
                        }
                        held.insert(*job, gpus.clone());
                    }
                    Command::Stop { job, .. } => {
                        for g in held.remove(job).unwrap() {
                            prop_assert_eq!(owner.remove(&g), Some(*job));
                        }
                    }
                    Command::End { job, reason } => {
                        prop_assert!(ended.insert(*job), "{} ended twice", job);
                        if let EndReason::EvalDeclined { .. } = reason {
                            let gpus = held.remove(job).expect("a stopped job was running");
                            prop_assert_eq!(gpus.len() as u32, jobs[job.index()].gpus);
                            for g in gpus {
                                prop_assert_eq!(owner.remove(&g), Some(*job));
                            }
                            prop_assert!(!owner.values().any(|j| j == job));
                        }
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
        }
        for (i, record) in r.jobs.iter().enumerate() {
            let over = matches!(record.outcome, Outcome::Completed | Outcome::Ended(EndReason::EvalDeclined { .. }));
            prop_assert!(over, "{:?}", record.outcome);
            if let Outcome::Ended(EndReason::EvalDeclined { declines, .. }) = record.outcome {
                prop_assert!(curves.get(JobId(i as u32)).is_some());
                prop_assert!(declines >= k);
                // What the engine took: a job resumed from an earlier checkpoint re-reports
                // evaluations it passed already, and the engine ignores those.
                let mut scores: Vec<f64> = Vec::new();
                let mut latest = f64::NEG_INFINITY;
                for e in r.evaluations.iter().filter(|e| e.job.index() == i) {
                    if e.work > latest {
                        latest = e.work;
                        scores.push(e.score);
                    }
                }
                let tail = &scores[scores.len() - k as usize - 1..];
                prop_assert!(tail.windows(2).all(|w| w[1] < w[0]), "{:?}", tail);
                prop_assert_eq!(r.evaluations.iter().rfind(|e| e.job.index() == i).unwrap().at, record.end.unwrap());
            }
        }
    }
}

#[test]
fn evaluations_cost_no_pass_under_a_policy_that_ignores_them() {
    let cluster = Cluster::new(ClusterSpec::homogeneous("v100", 1, 1)).unwrap();
    let mut engine = Engine::new(cluster, vec![TenantSpec::new("t")], policy("fifo", 2), 0);
    engine.step(Time::ZERO, Input::JobSubmitted(JobSpec::new(0, 0, Time::ZERO, 1, 100.0).into()));
    for (i, score) in [(1, 3.0), (2, 2.0), (3, 1.0), (4, 0.5)] {
        assert_eq!(evaluate(&mut engine, i, score), vec![]);
    }
    assert_eq!(engine.stats().scheduling_passes, 1);
    assert_eq!(engine.job(JobId(0)).unwrap().evals.declines(0.0), 3, "still recorded for policies to read");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// Without evaluation curves the wrapper is its base: same records, same commands.
    #[test]
    fn without_evaluations_evalstop_is_its_base(
        base in prop::sample::select(vec!["fifo", "fifo-backfill", "sjf", "srtf", "las", "tiresias"]),
        shape in prop::collection::vec((0u64..2000, prop::sample::select(vec![1u32, 2, 4]), 100u64..3000), 1..30),
    ) {
        let mut shape = shape;
        shape.sort_by_key(|j| j.0);
        let jobs: Vec<JobSpec> = shape.iter().enumerate().map(|(i, &(arrival, gpus, secs))| {
            let mut job = JobSpec::new(i as u32, 0, Time::from_secs(arrival), gpus, secs as f64);
            job.duration_estimate = Some(Span::from_secs(secs));
            job
        }).collect();
        let config = SimConfig { record: true, ..SimConfig::default() };
        let go = |name: &str| simulate(&jobs, &[TenantSpec::new("t")], ClusterSpec::homogeneous("v100", 1, 4),
            policy(name, 2), &ReferenceRate, &config, &mut |_| {}).unwrap();
        let plain = go(base);
        let wrapped = go(&format!("evalstop({base})"));
        prop_assert_eq!(format!("{:?}", plain.jobs), format!("{:?}", wrapped.jobs));
        let commands = |r: &SimResult| format!("{:?}", r.log.as_ref().unwrap().steps.iter().map(|s| &s.2).collect::<Vec<_>>());
        prop_assert_eq!(commands(&plain), commands(&wrapped));
    }
}
