//! Gavel parity as a regression test: the bundled `artifact_evaluation` and
//! `small_test` traces on 2 V100 + 4 K80 with 360 s rounds, driven through the
//! engine by a minimal world (jobs run at their table rate; no checkpoint loss or
//! restore time, as in Gavel's simulator). Reference numbers are Gavel's own
//! (PAPERS.md Part 1); `scripts/gavel-parity.sh` renders the same comparison
//! with the full simulator into docs/experiments/gavel-parity.md.

use std::path::Path;
use std::sync::Arc;

use cotenant_core::{Cluster, ClusterSpec, Command, Engine, GpuTypeId, Input, JobId, Span, Time};
use cotenant_perf::throughput::{JobTypeKey, ThroughputTable};
use cotenant_policies::{build, PolicyParams};
use cotenant_trace::{read_gavel, Slice, Workload};

fn data(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/gavel").join(path)
}

/// Average JCT and makespan in seconds.
fn run(trace: &str, policy: &str) -> (f64, f64) {
    let workload: Workload =
        read_gavel(&data(&format!("physical_cluster/{trace}.trace.gz")), &Slice::default())
            .expect("bundled trace reads");
    let table: ThroughputTable =
        cotenant_trace::gavel_throughputs::read_gavel_throughputs(&data("simulation_throughputs.json.gz"))
            .expect("bundled table reads");
    let mut spec = ClusterSpec { gpu_types: vec!["v100".into(), "k80".into()], ..Default::default() };
    spec.add_nodes(GpuTypeId(0), 2, 1, 8, 64);
    spec.add_nodes(GpuTypeId(1), 4, 1, 8, 64);
    let cluster = Cluster::new(spec).expect("cluster");
    let params = PolicyParams {
        round: Some(Span::from_secs(360)),
        job_types: workload.job_types.clone(),
        throughputs: Some(Arc::new(table.clone())),
        ..PolicyParams::default()
    };
    let mut engine =
        Engine::new(cluster, workload.tenants.clone(), build(policy, &params).expect("builds"), 0);
    let rate = |job: JobId, gpu_type: usize| {
        let spec = &workload.jobs[job.index()];
        let model = &workload.job_types[spec.job_type.expect("typed") as usize];
        let t = table.gpu_type_index(["v100", "k80"][gpu_type]).expect("type");
        table.consolidated(&JobTypeKey::new(model.clone(), spec.gpus), t).expect("rate")
    };
    let n = workload.jobs.len();
    let mut left = workload.jobs.iter().map(|j| j.work).collect::<Vec<f64>>();
    let mut running: Vec<Option<(Time, f64)>> = vec![None; n];
    let mut end = vec![None; n];
    let mut next = 0;
    for _ in 0..100_000 {
        let finish = (0..n)
            .filter_map(|i| running[i].map(|(at, r)| (at + Span::from_secs_f64_ceil(left[i] / r), i)))
            .min();
        let arrival = workload.jobs.get(next).map(|j| j.arrival);
        let wake = engine.next_wakeup();
        let Some(now) = [arrival, finish.map(|f| f.0), wake].into_iter().flatten().min() else { break };
        let mut inputs = Vec::new();
        if let Some((_, i)) = finish.filter(|f| f.0 == now) {
            running[i] = None;
            end[i] = Some(now);
            inputs.push(Input::JobFinished { job: JobId(i as u32) });
        }
        while workload.jobs.get(next).is_some_and(|j| j.arrival == now) {
            inputs.push(Input::JobSubmitted(workload.jobs[next].clone().into()));
            next += 1;
        }
        if wake == Some(now) {
            inputs.push(Input::Wakeup);
        }
        // Progress reports, as the simulator sends them, keep the engine's view
        // of work done exact (the mechanism reads it for steps left).
        let mut reports = Vec::new();
        for command in engine.step(now, Input::Batch(inputs)) {
            match command {
                Command::Start { job, gpus } => {
                    let ty = engine.cluster().gpu_type_of(gpus[0]).index();
                    let r = rate(job, ty);
                    running[job.index()] = Some((now, r));
                    let work_done = workload.jobs[job.index()].work - left[job.index()];
                    reports.push(Input::Progress { job, work_done, rate: r });
                }
                Command::Stop { job, .. } => {
                    let (at, r) = running[job.index()].take().expect("running");
                    left[job.index()] -= r * (now - at).as_secs_f64();
                    let work_done = workload.jobs[job.index()].work - left[job.index()];
                    reports.push(Input::Progress { job, work_done, rate: 0.0 });
                }
                // The unpacked policies under test never share GPUs.
                Command::End { .. }
                | Command::StartShared { .. }
                | Command::Rerate { .. }
                | Command::Resize { .. }
                | Command::Allocate { .. } => {}
            }
        }
        if !reports.is_empty() {
            assert!(engine.step(now, Input::Batch(reports)).is_empty());
        }
        assert!(engine.violations().is_empty(), "{:?}", engine.violations());
    }
    let jct: Vec<f64> =
        (0..n).map(|i| (end[i].expect("job completed") - workload.jobs[i].arrival).as_secs_f64()).collect();
    let makespan = end.iter().flatten().max().expect("some job").as_secs_f64();
    (jct.iter().sum::<f64>() / n as f64, makespan)
}

fn close(ours: f64, gavel: f64, tolerance: f64) -> bool {
    ((ours - gavel) / gavel).abs() <= tolerance
}

#[test]
fn artifact_evaluation_matches_gavel() {
    let (fifo, fifo_makespan) = run("artifact_evaluation", "gavel-fifo");
    assert!(close(fifo, 7581.7, 0.01) && close(fifo_makespan, 11803.0, 0.01), "fifo {fifo} {fifo_makespan}");
    let (mmf, _) = run("artifact_evaluation", "max-min-fairness");
    assert!(close(mmf, 6031.7, 0.05), "max-min-fairness {mmf}");
    let (perf, perf_makespan) = run("artifact_evaluation", "max-min-fairness-perf");
    assert!(
        close(perf, 4322.1, 0.02) && close(perf_makespan, 6401.0, 0.02),
        "mmf-perf {perf} {perf_makespan}"
    );
    let (ftf, _) = run("artifact_evaluation", "finish-time-fairness-perf");
    assert!(close(ftf, 4718.8, 0.02), "ftf-perf {ftf}");
    let (_, mtd) = run("artifact_evaluation", "min-total-duration-perf");
    assert!(close(mtd, 5660.0, 0.05), "min-total-duration makespan {mtd}");
}

#[test]
fn small_test_matches_gavel() {
    let (fifo, _) = run("small_test", "gavel-fifo");
    assert!(close(fifo, 770.4, 0.01), "fifo {fifo}");
    let (perf, _) = run("small_test", "max-min-fairness-perf");
    assert!(close(perf, 644.0, 0.01), "mmf-perf {perf}");
}
