//! `cotenant bench`: simulator speed on one core, as a Markdown table.

use std::time::Instant;

use anyhow::Result;
use cotenant_sim::{summarize, ReferenceRate};

use crate::sim_cmd::{build_policies, run_one_shared, share_jobs, sim_config, RunArgs};
use crate::workload::{prepare, WorkloadArgs};

#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Benchmark only the default week instead of the full Philly trace.
    #[arg(long)]
    pub week: bool,
    /// Instead of a trace: time single scheduling decisions on a large cluster
    /// (5,000 nodes x 8 GPUs, full, with 10,000 jobs waiting), one completion each.
    #[arg(long)]
    pub decision_latency: bool,
    /// Instead of the simulator: the live server's control plane on loopback (real
    /// controller, SQLite journal and HTTP; in-process fake agents): submissions per
    /// second, then decision-to-launch latency with a full cluster and a long queue.
    #[arg(long)]
    pub live: bool,
    /// --live: fake nodes (8 GPUs each).
    #[arg(long, default_value_t = 1000, requires = "live")]
    pub live_nodes: u32,
    /// --live: jobs kept queued beyond those that fill the cluster.
    #[arg(long, default_value_t = 10_000, requires = "live")]
    pub live_queued: u32,
    /// --live: concurrent submitting clients.
    #[arg(long, default_value_t = 32, requires = "live")]
    pub live_clients: u32,
    /// --live: seconds of steady state to measure.
    #[arg(long, default_value_t = 40, requires = "live")]
    pub live_seconds: u64,
    /// --live: print the report as JSON.
    #[arg(long, requires = "live")]
    pub json: bool,
    /// Instead of the simulator: time a 10,000-GPU `plan train` layout search (docs/performance.md).
    #[arg(long)]
    pub plan_train: bool,
}

pub fn run(mut args: BenchArgs) -> Result<()> {
    if args.plan_train {
        return crate::plan_train_cmd::bench(21);
    }
    if args.decision_latency {
        return decision_latency(&args.run);
    }
    if args.live {
        return live(&args);
    }
    let default_trace = args.workload.trace.is_none() && args.workload.synthetic.is_none();
    if default_trace && !args.week {
        args.workload.all = true;
    }
    let load_started = Instant::now();
    let mut prepared = prepare(&args.workload)?;
    crate::variability_args::apply(&args.run, &mut prepared)?;
    crate::topology_args::apply(&args.run, &mut prepared)?;
    let load_secs = load_started.elapsed().as_secs_f64();
    let config = sim_config(&args.run)?;
    crate::faults_args::no_availability(&args.run, "bench")?;
    let rates = crate::faults_args::wrap_rates(&args.run, Box::new(ReferenceRate), &config);
    let rates = crate::topology_args::wrap(&prepared, rates);
    let rates = crate::variability_args::wrap(&args.run, &prepared, rates)?;
    println!(
        "workload: {} ({} jobs), loaded in {load_secs:.2}s",
        prepared.workload.source,
        prepared.workload.jobs.len()
    );
    println!("cluster:  {}", prepared.cluster_rule);
    println!("one policy at a time, one thread, release build expected");
    let floor = EventLoopFloor::measure(&prepared.workload.jobs);
    println!(
        "event-loop floor: {:.0} ns per event ({} events of a bare binary-heap loop over the same arrivals and run times, best of {FLOOR_REPEATS})\n",
        floor.secs_per_event * 1e9,
        floor.events
    );
    println!("| policy | wall (s) | floor (ms) | wall / floor | events | events/s | jobs/s | scheduling passes | preemptions | mean JCT (h) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let policies = build_policies(&args.run, &prepared)?;
    // The runs refer to the workload's specs instead of copying them (as `sim` does).
    let jobs = share_jobs(&mut prepared);
    for policy in policies {
        let (result, wall) = run_one_shared(&prepared, &jobs, policy, rates.as_ref(), &config, &mut |_| {})?;
        let summary = summarize(&result);
        let floor_secs = floor.secs_per_event * summary.events as f64;
        println!(
            "| {} | {:.2} | {:.1} | {:.0} | {} | {:.0} | {:.0} | {} | {} | {:.2} |",
            summary.policy,
            wall,
            floor_secs * 1e3,
            wall / floor_secs,
            summary.events,
            summary.events as f64 / wall,
            summary.jobs as f64 / wall,
            summary.scheduling_passes,
            summary.preemptions,
            summary.jct.mean / 3600.0
        );
    }
    if let Some(peak) = peak_rss_mib() {
        println!("\npeak resident memory: {peak:.0} MiB");
    }
    Ok(())
}

const FLOOR_REPEATS: usize = 5;

/// What a bare discrete-event loop costs per event on this machine: arrivals taken in
/// order from the workload, each pushing its completion (arrival + run time at
/// reference speed, as if it started at once) onto a binary heap ordered by (time,
/// sequence), events popped in time order, a GPU counter updated per event. No engine,
/// no policy, no validation: the figure a simulator cannot beat for the same events.
struct EventLoopFloor {
    events: u64,
    secs_per_event: f64,
}

impl EventLoopFloor {
    fn measure(jobs: &[cotenant_core::JobSpec]) -> EventLoopFloor {
        let mut best = f64::INFINITY;
        let mut events = 0;
        for _ in 0..FLOOR_REPEATS {
            let started = Instant::now();
            events = std::hint::black_box(bare_event_loop(std::hint::black_box(jobs)));
            best = best.min(started.elapsed().as_secs_f64());
        }
        EventLoopFloor { events, secs_per_event: best / events.max(1) as f64 }
    }
}

/// The loop [`EventLoopFloor`] times; returns the number of events processed.
fn bare_event_loop(jobs: &[cotenant_core::JobSpec]) -> u64 {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let (mut sequence, mut events, mut busy) = (0u64, 0u64, 0u64);
    let mut next = 0;
    loop {
        let arrival = jobs.get(next).map(|j| j.arrival.0);
        let finish = heap.peek().map(|Reverse((t, _, _))| *t);
        let take_arrival = match (arrival, finish) {
            (Some(a), Some(f)) => a <= f,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if take_arrival {
            let job = &jobs[next];
            next += 1;
            busy += u64::from(job.gpus);
            let run = cotenant_core::Span::from_secs_f64_ceil(job.work).0;
            heap.push(Reverse((job.arrival.0.saturating_add(run), sequence, job.gpus)));
            sequence += 1;
        } else if let Some(Reverse((_, _, gpus))) = heap.pop() {
            busy -= u64::from(gpus);
        }
        events += 1;
    }
    std::hint::black_box(busy);
    events
}

/// Peak resident set size from /proc (Linux); `None` elsewhere.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

const LATENCY_NODES: u32 = 5_000;
const LATENCY_WAITING: usize = 10_000;
const LATENCY_SAMPLES: usize = 2_000;

/// Fills a 40,000-GPU cluster with Gavel-shaped jobs (1/2/4/8 GPUs), leaves
/// 10,000 more waiting, then completes one running job at a time and times the
/// engine step (one scheduling pass) that follows.
fn decision_latency(run: &RunArgs) -> Result<()> {
    use cotenant_core::{ClusterSpec, Engine, Input, JobSpec, Span, TenantSpec, Time};
    use rand::{Rng, SeedableRng};

    let cluster_spec = ClusterSpec::homogeneous("gpu", LATENCY_NODES, 8);
    let total_gpus = cluster_spec.total_gpus();
    let tenants: Vec<TenantSpec> = (0..10).map(|t| TenantSpec::new(format!("t{t}"))).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(run.seed);
    let mut jobs = Vec::new();
    let mut demand = 0u64;
    while demand < u64::from(total_gpus) * 2 || jobs.len() < LATENCY_WAITING {
        let gpus = match rng.random_range(0..100) {
            0..70 => 1,
            70..80 => 2,
            80..95 => 4,
            _ => 8,
        };
        let secs = rng.random_range(60..86_400u64);
        let mut job = JobSpec::new(jobs.len() as u32, rng.random_range(0..10), Time::ZERO, gpus, secs as f64);
        job.duration_estimate = Some(Span::from_secs(secs));
        demand += u64::from(gpus);
        jobs.push(job);
    }
    println!("cluster: {LATENCY_NODES} nodes x 8 = {total_gpus} GPUs; {} jobs submitted at once", jobs.len());
    println!(
        "| policy | first pass (ms) | waiting | p50 (µs) | p99 (µs) | max (µs) | decisions/s | commands p50 / p99 / max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let prepared = crate::workload::Prepared {
        workload: cotenant_trace::Workload::default(),
        kind: None,
        cluster: cluster_spec.clone(),
        cluster_rule: String::new(),
        notes: Vec::new(),
        declared_tenants: Vec::new(),
        evals: None,
    };
    let policies = build_policies(run, &prepared)?;
    let progress = latency_progress(policies.len());
    for (index, policy) in policies.into_iter().enumerate() {
        let name = policy.name();
        progress.set_message(format!("decision latency: {name}, first pass"));
        let cluster = cotenant_core::Cluster::new(cluster_spec.clone())?;
        let mut engine = Engine::new(cluster, tenants.clone(), policy, run.seed);
        let started = Instant::now();
        engine.step(
            Time::ZERO,
            Input::Batch(jobs.iter().cloned().map(|spec| Input::JobSubmitted(spec.into())).collect()),
        );
        let first_ms = started.elapsed().as_secs_f64() * 1e3;
        progress.set_message(format!("decision latency: {name}"));
        let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
        // Commands each timed step sent to the world (starts, stops, ...): the
        // size of the decision, which bounds its latency from below.
        let mut sizes = Vec::with_capacity(LATENCY_SAMPLES);
        // Sample 0 is a warm-up (the allocator tidies up after the mass submission): not timed.
        for i in 0..=LATENCY_SAMPLES {
            let now = Time::from_secs(i as u64 + 1);
            let running: Vec<_> = engine.running().iter().copied().collect();
            if running.is_empty() {
                break;
            }
            let victim = running[rng.random_range(0..running.len())];
            let started = Instant::now();
            let commands = engine.step(now, Input::JobFinished { job: victim });
            if i > 0 {
                samples.push(started.elapsed().as_secs_f64() * 1e6);
                sizes.push(commands.len() as f64);
            }
            progress.set_position((index * (LATENCY_SAMPLES + 1) + i + 1) as u64);
        }
        progress.set_position(((index + 1) * (LATENCY_SAMPLES + 1)) as u64);
        samples.sort_by(f64::total_cmp);
        sizes.sort_by(f64::total_cmp);
        let at = |sorted: &[f64], p: f64| cotenant_report::sim_report::percentile(sorted, p).unwrap_or(0.0);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        progress.suspend(|| {
            println!(
                "| {name} | {first_ms:.1} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} / {:.0} / {:.0} |",
                engine.pending().len(),
                at(&samples, 0.5),
                at(&samples, 0.99),
                at(&samples, 1.0),
                1e6 / mean,
                at(&sizes, 0.5),
                at(&sizes, 0.99),
                at(&sizes, 1.0)
            )
        });
    }
    progress.finish_and_clear();
    Ok(())
}

/// A progress bar on stderr over every policy's timed decisions (the first pass of
/// a policy on the full cluster can take seconds); hidden when stderr is not a terminal.
fn latency_progress(policies: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new((policies * (LATENCY_SAMPLES + 1)) as u64);
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {pos}/{len} decisions, {elapsed} elapsed, ~{eta} left",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// `cotenant bench --live`: see `cotenant_live::bench`.
fn live(args: &BenchArgs) -> Result<()> {
    use cotenant_live::bench::{LiveBenchConfig, Percentiles};
    let config = LiveBenchConfig {
        nodes: args.live_nodes,
        queued: args.live_queued,
        clients: args.live_clients,
        measure: std::time::Duration::from_secs(args.live_seconds),
        ..LiveBenchConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(cotenant_live::bench::run(config, &mut |line| eprintln!("{line}")))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let ms = |p: &Percentiles| {
        format!("p50 {:.1} / p90 {:.1} / p99 {:.1} / max {:.1}", p.p50, p.p90, p.p99, p.max)
    };
    println!("| measure | value |");
    println!("|---|---|");
    println!("| cluster | {} fake nodes, {} GPUs, in-process agents over HTTP |", report.nodes, report.gpus);
    println!("| submissions | {} in {:.2} s = **{:.0}/s** accepted (32 clients, each reply after its journal commit) |", report.submissions, report.submit_secs, report.submits_per_sec);
    println!("| submit latency (ms) | {} |", ms(&report.submit_latency_ms));
    println!("| agents joined, cluster full | {:.1} s |", report.agents_registered_secs);
    println!(
        "| queued during the window | {} jobs at its start, {} at its end |",
        report.queued_at_measure_start, report.queued_at_measure_end
    );
    println!(
        "| launches measured | {} ({:.0} completions/s) |",
        report.launches_measured, report.completions_per_sec
    );
    println!("| decision to launch (ms) | {} |", ms(&report.decision_to_launch_ms));
    println!(
        "| journal | {} entries, {:.1} MiB; replayed at restart in {} ms |",
        report.journal_entries,
        report.db_bytes as f64 / (1 << 20) as f64,
        report.replay_ms
    );
    println!(
        "| record/replay check | {} commands compared, {} mismatches, {} ms |",
        report.replay_check_commands, report.replay_check_mismatches, report.replay_check_ms
    );
    Ok(())
}
