//! Times the preemptive policies' passes alone (the policy's `schedule`, not the
//! engine around it) on the setup of `cotenant bench --decision-latency`: 5,000
//! nodes x 8 GPUs, twice the cluster's GPUs submitted at once (at least 10,000
//! jobs), then one random running job finishing per second. SRTF and LAS also run
//! with the full sort (`greedy::pass_by_key`, every running job keyed and sorted
//! at every pass), the pass they had before their running-job indexes; both
//! decide the same (the crate's property tests), so the two rows see the same
//! passes.
//!
//! The last two columns time the whole engine step around each pass (the pass,
//! then the engine validating and applying its actions and verdicts), which is
//! what `cotenant bench --decision-latency` times: a verdict the engine holds
//! already is left out of a pass's decision (`greedy::HeldVerdicts`), so the
//! full-sort rows, which tell every verdict, show what that saves.
//!
//! `cargo run --release -p cotenant-policies --example preemptive_pass [SAMPLES [FILTER]]`
//! (FILTER: only the rows whose label contains it).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cotenant_core::placement::Placement;
use cotenant_core::{
    Cluster, ClusterSpec, ClusterView, Decision, Engine, Input, JobId, JobSpec, JobState, Policy, PolicyCx,
    Span, TenantSpec, Time,
};
use cotenant_policies::greedy::pass_by_key;
use cotenant_policies::las::Las;
use cotenant_policies::queue::WaitQueue;
use cotenant_policies::srtf::Srtf;
use cotenant_policies::tiresias::{DemotionTimer, Tiresias};

/// splitmix64: a fixed, dependency-free stream of random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The pass before the running-job indexes: every running job keyed and sorted.
struct FullSort {
    name: &'static str,
    key: fn(&JobState, Time) -> u64,
    queue: WaitQueue<u64>,
    running: Vec<(u64, JobId)>,
}

impl Policy for FullSort {
    fn name(&self) -> &'static str {
        self.name
    }
    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let (now, key) = (view.now, self.key);
        self.queue.sync(view, |job| key(job, now));
        pass_by_key(view, &mut self.running, |job| key(job, now), &self.queue, Placement::Consolidated)
    }
}

/// Times each call of the wrapped policy's `schedule`.
struct Timed {
    inner: Box<dyn Policy>,
    stats: Arc<Mutex<Stats>>,
}

#[derive(Default)]
struct Stats {
    /// (µs, actions, verdicts) of each pass after the first.
    passes: Vec<(f64, usize, usize)>,
    first_ms: Option<f64>,
}

impl Policy for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let started = Instant::now();
        let decision = self.inner.schedule(cx, view);
        let us = started.elapsed().as_secs_f64() * 1e6;
        let mut stats = self.stats.lock().expect("one thread");
        match stats.first_ms {
            None => stats.first_ms = Some(us / 1e3),
            Some(_) => stats.passes.push((us, decision.actions.len(), decision.waiting.len())),
        }
        decision
    }
    fn next_round(&self, now: Time) -> Option<Time> {
        self.inner.next_round(now)
    }
}

fn jobs(total_gpus: u32, rng: &mut Rng) -> Vec<JobSpec> {
    let (mut jobs, mut demand) = (Vec::new(), 0u64);
    while demand < u64::from(total_gpus) * 2 || jobs.len() < 10_000 {
        let gpus = match rng.below(100) {
            0..70 => 1,
            70..80 => 2,
            80..95 => 4,
            _ => 8,
        };
        let secs = 60 + rng.below(86_400 - 60);
        let mut job = JobSpec::new(jobs.len() as u32, rng.below(10) as u32, Time::ZERO, gpus, secs as f64);
        job.duration_estimate = Some(Span::from_secs(secs));
        demand += u64::from(gpus);
        jobs.push(job);
    }
    jobs
}

fn main() {
    let samples: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2_000);
    let filter = std::env::args().nth(2).unwrap_or_default();
    let spec = ClusterSpec::homogeneous("gpu", 5_000, 8);
    let tenants: Vec<TenantSpec> = (0..10).map(|t| TenantSpec::new(format!("t{t}"))).collect();
    let remaining = |job: &JobState, now: Time| job.remaining_estimate(now).map_or(u64::MAX, |s| s.0);
    let attained = |job: &JobState, now: Time| job.attained_gpu_us(now);
    let policies: Vec<(&str, Box<dyn Policy>)> = vec![
        ("srtf (index)", Box::new(Srtf::new(Placement::Consolidated))),
        (
            "srtf (full sort)",
            Box::new(FullSort {
                name: "srtf",
                key: remaining,
                queue: WaitQueue::default(),
                running: Vec::new(),
            }),
        ),
        (
            "tiresias (range)",
            Box::new(Tiresias::new(Placement::Consolidated, vec![3_600, 36_000], 8, DemotionTimer::Exact)),
        ),
        ("las (index)", Box::new(Las::new(Placement::Consolidated, Span::from_secs(60)))),
        (
            "las (full sort)",
            Box::new(FullSort {
                name: "las",
                key: attained,
                queue: WaitQueue::default(),
                running: Vec::new(),
            }),
        ),
    ];
    println!("cluster: 5000 nodes x 8 GPUs; {samples} passes after the first, one completion each; the policy's own time");
    println!(
        "| policy | first pass (ms) | p50 (µs) | p99 (µs) | max (µs) | actions at p99+ (mean) | verdicts at p99+ (mean) | step p50 (µs) | step p99 (µs) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, policy) in policies.into_iter().filter(|(label, _)| label.contains(filter.as_str())) {
        let mut rng = Rng(1);
        let cluster = Cluster::new(spec.clone()).expect("a valid cluster");
        let submitted = jobs(cluster.up_gpus(), &mut rng);
        let stats = Arc::new(Mutex::new(Stats::default()));
        let timed = Timed { inner: policy, stats: Arc::clone(&stats) };
        let mut engine = Engine::new(cluster, tenants.clone(), Box::new(timed), 1);
        engine.step(
            Time::ZERO,
            Input::Batch(submitted.into_iter().map(|spec| Input::JobSubmitted(spec.into())).collect()),
        );
        let mut running: Vec<JobId> = Vec::new();
        let mut steps: Vec<f64> = Vec::with_capacity(samples);
        for i in 0..samples {
            running.clear();
            running.extend(engine.running().iter().copied());
            if running.is_empty() {
                break;
            }
            let victim = running[rng.below(running.len() as u64) as usize];
            let started = Instant::now();
            engine.step(Time::from_secs(i as u64 + 1), Input::JobFinished { job: victim });
            steps.push(started.elapsed().as_secs_f64() * 1e6);
        }
        report(label, &stats.lock().expect("one thread"), &mut steps);
    }
}

/// The `p` quantile of sorted `values`.
fn quantile(values: &[f64], p: f64) -> f64 {
    values[((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1]
}

fn report(label: &str, stats: &Stats, steps: &mut [f64]) {
    steps.sort_by(f64::total_cmp);
    let mut passes = stats.passes.clone();
    passes.sort_by(|a, b| a.0.total_cmp(&b.0));
    let at = |p: f64| passes[((p * passes.len() as f64).ceil() as usize).clamp(1, passes.len()) - 1].0;
    let tail = &passes[(passes.len() * 99 / 100).min(passes.len() - 1)..];
    let mean =
        |f: fn(&(f64, usize, usize)) -> usize| tail.iter().map(f).sum::<usize>() as f64 / tail.len() as f64;
    println!(
        "| {label} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
        stats.first_ms.unwrap_or(0.0),
        at(0.5),
        at(0.99),
        passes.last().map_or(0.0, |p| p.0),
        mean(|p| p.1),
        mean(|p| p.2),
        quantile(steps, 0.5),
        quantile(steps, 0.99)
    );
}
