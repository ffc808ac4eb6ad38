//! Benchmarks Gavel's allocation policies and writes a Gavel-format trace.
//!
//! ```console
//! $ cargo run --release -p cotenant-policies --example gavel_bench
//! $ cargo run --release -p cotenant-policies --example gavel_bench -- --policy max-min-fairness-perf --sizes 10000 --reps 3 --no-rounds
//! $ cargo run --release -p cotenant-policies --example gavel_bench -- --write-trace /tmp/gavel-1000.trace
//! $ cargo run --release -p cotenant-policies --example gavel_bench -- --sequence 1000 --digest
//! ```
//!
//! The first form times one allocation (the optimization Gavel runs when jobs
//! arrive or leave) of every optimization policy for 100, 1,000 and 10,000
//! active jobs on 3 GPU types (V100, P100, K80; N/4 GPUs of each), with job
//! types and scale factors drawn as Gavel's generator draws them; then one
//! round of the mechanism without re-allocation, through the engine. The second
//! writes a 1,000-job trace in Gavel's 10-column format from cotenant's
//! synthetic generator (Gavel's duration and GPU-count distributions, Poisson
//! arrivals), steps = duration x the job type's V100 rate, as Gavel's
//! `generate_job` does; time it with `cotenant sim --trace gavel:<file>`. The
//! third times a sequence of small allocations by one allocator, the regime of
//! whole simulations (see `sequence_bench`).

use std::path::PathBuf;
use std::time::Instant;

use cotenant_core::JobId;
use cotenant_perf::throughput::{JobTypeKey, ThroughputTable};
use cotenant_policies::gavel::{AllocJob, Allocator, Objective};

const OBJECTIVES: [(&str, Objective); 6] = [
    ("max-min-fairness", Objective::MaxMinFairness { perf: false }),
    ("max-min-fairness-perf", Objective::MaxMinFairness { perf: true }),
    ("finish-time-fairness-perf", Objective::FinishTimeFairness { perf: true }),
    ("min-total-duration-perf", Objective::MinTotalDuration),
    ("max-sum-throughput-perf", Objective::MaxSumThroughput),
    ("fifo-perf", Objective::Fifo { perf: true }),
];
const TYPES: [&str; 3] = ["v100", "p100", "k80"];

/// splitmix64: a tiny seeded stream for the benchmark's draws.
struct Stream(u64);
impl Stream {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Gavel's scale factors: 70% 1, 10% 2, 15% 4, 5% 8.
fn scale_factor(u: f64) -> u32 {
    match u {
        u if u < 0.70 => 1,
        u if u < 0.80 => 2,
        u if u < 0.95 => 4,
        _ => 8,
    }
}

/// Job types with a rate on all three GPU types at scale factor `sf`.
fn types_with(table: &ThroughputTable, sf: u32) -> Vec<JobTypeKey> {
    let idx: Vec<usize> = TYPES.iter().filter_map(|t| table.gpu_type_index(t)).collect();
    table
        .job_types()
        .filter(|k| {
            k.scale_factor == sf && idx.iter().all(|&i| table.consolidated(k, i).is_some_and(|r| r > 0.0))
        })
        .cloned()
        .collect()
}

fn jobs(table: &ThroughputTable, n: usize, seed: u64) -> Vec<AllocJob> {
    let idx: Vec<usize> =
        TYPES.iter().map(|t| table.gpu_type_index(t).expect("table has v100, p100, k80")).collect();
    let mut s = Stream(seed);
    (0..n)
        .map(|i| {
            let mut sf = scale_factor(s.next());
            let mut candidates = types_with(table, sf);
            if candidates.is_empty() {
                sf = 1;
                candidates = types_with(table, 1);
            }
            let key = &candidates[(s.next() * candidates.len() as f64) as usize % candidates.len()];
            let rates: Vec<f64> = idx.iter().map(|&t| table.consolidated(key, t).unwrap_or(0.0)).collect();
            AllocJob {
                id: JobId(i as u32),
                steps_per_s: rates.clone(),
                scale_factor: sf,
                weight: 1.0,
                steps_remaining: (rates[0] * 3600.0 * (1.0 + 20.0 * s.next())).ceil(),
                secs_since_arrival: 3600.0 * s.next(),
            }
        })
        .collect()
}

/// Which allocations `bench` times: `--policy a,b` (default all), `--sizes 100,1000`
/// (default 100, 1,000, 10,000), `--reps k` (best of k fresh allocators, default 1)
/// and `--digest`.
struct Selection {
    policies: Option<Vec<String>>,
    /// `--digest`: print a hash of the allocation's bits beside each time
    /// (two builds agree bit for bit when their digests do).
    digest: bool,
    sizes: Vec<usize>,
    reps: usize,
}

/// FNV-1a over the bits of an allocation.
fn fnv1a<'a>(values: impl Iterator<Item = &'a f64>) -> u64 {
    values
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

fn bench(table: &ThroughputTable, selection: &Selection) {
    let names: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
    let header: Vec<String> = selection.sizes.iter().map(|n| format!("{n} jobs")).collect();
    println!("| policy | {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(selection.sizes.len()));
    for (name, objective) in OBJECTIVES {
        if selection.policies.as_ref().is_some_and(|p| !p.iter().any(|p| p == name)) {
            continue;
        }
        let mut cells = Vec::new();
        for &n in &selection.sizes {
            let jobs = jobs(table, n, 42);
            let capacity = vec![(n / 4) as u32; 3];
            let mut best = f64::INFINITY;
            let mut digest = 0;
            for _ in 0..selection.reps.max(1) {
                let mut allocator = Allocator::new(objective, 0);
                let started = Instant::now();
                let x = allocator.allocate(&jobs, &capacity, &names).expect("allocation solves");
                best = best.min(started.elapsed().as_secs_f64());
                assert_eq!(x.len(), n);
                digest = fnv1a(x.iter().flatten());
            }
            let time = if best < 1.0 { format!("{:.1} ms", best * 1e3) } else { format!("{best:.2} s") };
            cells.push(if selection.digest { format!("{time} ({digest:016x})") } else { time });
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
}

/// Time of one round of the mechanism through the engine (priorities, sort,
/// greedy pass, placement) when the allocation is not recomputed: N jobs
/// submitted at once on N/4 GPUs of each type; the first step allocates, the
/// following round wakeups only reschedule.
fn round_bench(table: &ThroughputTable) {
    use cotenant_core::{Cluster, ClusterSpec, Engine, GpuTypeId, Input, JobSpec, TenantSpec, Time};
    println!();
    println!("| policy | 100 jobs | 1,000 jobs | 10,000 jobs |");
    println!("|---|---:|---:|---:|");
    for (name, _) in OBJECTIVES {
        let mut cells = Vec::new();
        for n in [100usize, 1_000, 10_000] {
            let alloc_jobs = jobs(table, n, 42);
            let models: Vec<String> = table.job_types().map(|k| k.model.clone()).collect();
            let mut spec = ClusterSpec {
                gpu_types: TYPES.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            };
            for t in 0..3 {
                spec.add_nodes(GpuTypeId(t), (n / 4 / 4).max(1) as u32, 4, 32, 256);
            }
            let params = cotenant_policies::PolicyParams {
                job_types: models.clone(),
                throughputs: Some(std::sync::Arc::new(table.clone())),
                ..Default::default()
            };
            let policy = cotenant_policies::build(name, &params).expect("policy builds");
            let mut engine =
                Engine::new(Cluster::new(spec).expect("cluster"), vec![TenantSpec::new("t")], policy, 0);
            let inputs = alloc_jobs
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let mut j = JobSpec::new(i as u32, 0, Time::ZERO, a.scale_factor, a.steps_remaining);
                    // The job type whose rates these are.
                    let model = table
                        .job_types()
                        .find(|k| {
                            k.scale_factor == a.scale_factor
                                && table.consolidated(k, table.gpu_type_index("v100").unwrap_or(0))
                                    == Some(a.steps_per_s[0])
                        })
                        .map(|k| k.model.clone())
                        .unwrap_or_default();
                    j.job_type = models.iter().position(|m| *m == model).map(|p| p as u32);
                    Input::JobSubmitted(j.into())
                })
                .collect();
            engine.step(Time::ZERO, Input::Batch(inputs));
            let rounds = 5;
            let started = Instant::now();
            for _ in 0..rounds {
                let Some(at) = engine.next_wakeup() else { break };
                engine.step(at, Input::Wakeup);
            }
            let per_round = started.elapsed().as_secs_f64() / rounds as f64;
            cells.push(format!("{:.2} ms", per_round * 1e3));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
}

/// `--sequence K`: K allocations in a row by one allocator kept across calls
/// (as the mechanism keeps it: finish-time fairness's credited time and its
/// warm start on rho), each of 10-30 active jobs on 8 GPUs of each type. That
/// is the regime of Gavel's 3,000-job reference run (about 850 allocations of
/// 17 active jobs on average under max-min-fairness-perf, 21 under
/// finish-time-fairness-perf), where most of a solve is the barrier's line
/// search near the limit of double precision rather than the factorizations.
/// Between allocations the window of active jobs slides by one over a drawn
/// list (one job leaves, one arrives) and its size changes; every job ages by
/// a round (360 s) and loses 0.2% of its steps. `--digest` hashes the bits of
/// every allocation of the sequence.
fn sequence_bench(table: &ThroughputTable, count: usize, selection: &Selection) {
    let names: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
    let pool = jobs(table, count + 30, 7);
    let capacity = vec![8u32; 3];
    println!();
    println!("| policy | allocations | active jobs (mean) | total | per allocation |");
    println!("|---|---:|---:|---:|---:|");
    for (name, objective) in OBJECTIVES {
        let wanted = match &selection.policies {
            Some(p) => p.iter().any(|p| p == name),
            None => matches!(name, "max-min-fairness-perf" | "finish-time-fairness-perf"),
        };
        if !wanted {
            continue;
        }
        let mut best = f64::INFINITY;
        let (mut digest, mut active) = (0u64, 0usize);
        for _ in 0..selection.reps.max(1) {
            let mut allocator = Allocator::new(objective, 0);
            let (mut elapsed, mut hash) = (0.0, 0u64);
            active = 0;
            for k in 0..count {
                let width = 10 + (k * 7) % 21;
                let window: Vec<AllocJob> = (k..k + width)
                    .map(|i| {
                        let mut job = pool[i].clone();
                        let rounds = (k + 30 - i) as f64;
                        job.secs_since_arrival = 360.0 * rounds;
                        job.steps_remaining = (job.steps_remaining * (1.0 - 0.002 * rounds)).max(1.0).ceil();
                        job
                    })
                    .collect();
                active += width;
                let started = Instant::now();
                let x = allocator.allocate(&window, &capacity, &names).expect("allocation solves");
                elapsed += started.elapsed().as_secs_f64();
                hash = hash.rotate_left(5) ^ fnv1a(x.iter().flatten());
            }
            best = best.min(elapsed);
            digest = hash;
        }
        let total = if best < 1.0 { format!("{:.1} ms", best * 1e3) } else { format!("{best:.2} s") };
        let total = if selection.digest { format!("{total} ({digest:016x})") } else { total };
        println!(
            "| {name} | {count} | {:.1} | {total} | {:.1} us |",
            active as f64 / count.max(1) as f64,
            best * 1e6 / count.max(1) as f64
        );
    }
}

fn write_trace(table: &ThroughputTable, path: &PathBuf, jobs: usize, rate: f64, seed: u64) {
    let spec = cotenant_trace::SyntheticSpec::parse(&format!("jobs={jobs},rate={rate}/h,seed={seed}"))
        .expect("valid synthetic spec");
    let mut workload = cotenant_trace::generate(&spec);
    let v100 = table.gpu_type_index("v100").expect("table has v100");
    let mut s = Stream(seed);
    let mut names: Vec<String> = Vec::new();
    for job in &mut workload.jobs {
        let mut candidates = types_with(table, job.gpus);
        if candidates.is_empty() {
            job.gpus = 1;
            candidates = types_with(table, 1);
        }
        let key = &candidates[(s.next() * candidates.len() as f64) as usize % candidates.len()];
        let index = names.iter().position(|n| n == &key.model).unwrap_or_else(|| {
            names.push(key.model.clone());
            names.len() - 1
        });
        job.job_type = Some(index as u32);
        // work is seconds at reference speed: steps = seconds x V100 rate.
        job.work = (job.work * table.consolidated(key, v100).unwrap_or(1.0)).ceil();
    }
    workload.job_types = names;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("trace file can be created"));
    cotenant_trace::write_gavel_trace(&workload, &mut file).expect("trace writes");
    println!("wrote {} jobs to {}", workload.jobs.len(), path.display());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let throughputs = get("--throughputs").unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/gavel/simulation_throughputs.json.gz").to_string()
    });
    let table =
        match cotenant_trace::gavel_throughputs::read_gavel_throughputs(std::path::Path::new(&throughputs)) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("gavel_bench: {e}");
                std::process::exit(2);
            }
        };
    match get("--write-trace") {
        Some(path) => {
            let jobs = get("--jobs").and_then(|v| v.parse().ok()).unwrap_or(1000);
            let rate = get("--rate").and_then(|v| v.parse().ok()).unwrap_or(2.0);
            let seed = get("--seed").and_then(|v| v.parse().ok()).unwrap_or(1);
            write_trace(&table, &PathBuf::from(path), jobs, rate, seed);
        }
        None => {
            let list = |flag: &str| get(flag).map(|v| v.split(',').map(str::to_string).collect::<Vec<_>>());
            let sizes = list("--sizes")
                .map(|v| v.iter().map(|n| n.parse().expect("--sizes takes job counts")).collect())
                .unwrap_or_else(|| vec![100, 1_000, 10_000]);
            let reps = get("--reps").map_or(1, |v| v.parse().expect("--reps takes a count"));
            let digest = args.iter().any(|a| a == "--digest");
            let selection = Selection { policies: list("--policy"), digest, sizes, reps };
            if let Some(count) = get("--sequence") {
                let count = count.parse().expect("--sequence takes an allocation count");
                sequence_bench(&table, count, &selection);
                return;
            }
            bench(&table, &selection);
            if !args.iter().any(|a| a == "--no-rounds") {
                round_bench(&table);
            }
        }
    }
}
