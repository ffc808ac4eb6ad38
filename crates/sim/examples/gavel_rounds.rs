//! Times Gavel's round mechanism in process: the throughput table's load (the
//! start-up `--throughputs` costs) and whole simulations of Gavel-format traces
//! under a round policy, per 1,000 jobs and per scheduling pass.
//!
//! ```console
//! $ cargo run --release -p cotenant-sim --example gavel_rounds
//! $ cargo run --release -p cotenant-sim --example gavel_rounds -- \
//!     --trace /work/shared/traces/gavel-reference/synth3000_lam600.trace --policy gavel-fifo --repeats 5
//! $ cargo run --release -p cotenant-sim --example gavel_rounds -- \
//!     --policy gavel-fifo,max-min-fairness-perf,finish-time-fairness-perf --repeats 3
//! ```
//!
//! The run is `cotenant sim`'s: 8 V100 + 8 P100 + 8 K80 (one node each), 360 s
//! rounds, no checkpoint or restore overhead, rates from the table (Gavel's
//! consolidated rates), seed 0. `--jobs N` keeps the trace's first N jobs
//! (constant load: the same arrival process, cut shorter); `--tile K` repeats
//! the trace K times one after the other (each copy's arrivals shifted by the
//! last arrival plus one mean gap), to reach 10,000 jobs and more at the same
//! load. `--policy` takes a comma-separated list (each timed in turn; the LP
//! policies' rounds pay the mechanism's costs too). Best of `--repeats` runs
//! (default 5).

use std::path::{Path, PathBuf};
use std::time::Instant;

use cotenant_core::{JobId, Span, Time};
use cotenant_policies::registry::PolicyParams;
use cotenant_sim::driver::{simulate, SimConfig};
use cotenant_sim::gavel_rates::{Consolidation, GavelRates};
use cotenant_sim::world::Overheads;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let throughputs =
        get("--throughputs").unwrap_or_else(|| format!("{root}/data/gavel/simulation_throughputs.json.gz"));
    let trace = get("--trace")
        .unwrap_or_else(|| format!("{root}/../shared/traces/gavel-reference/synth3000_lam600.trace"));
    let policy = get("--policy").unwrap_or_else(|| "gavel-fifo".into());
    let repeats: usize = get("--repeats").and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let keep: Option<usize> = get("--jobs").and_then(|v| v.parse().ok());
    let tile: usize = get("--tile").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);

    let mut load_s = f64::INFINITY;
    let mut table = None;
    for _ in 0..repeats {
        let started = Instant::now();
        let loaded = cotenant_trace::gavel_throughputs::read_gavel_throughputs(Path::new(&throughputs));
        load_s = load_s.min(started.elapsed().as_secs_f64());
        match loaded {
            Ok(t) => table = Some(std::sync::Arc::new(t)),
            Err(e) => fail(&e.to_string()),
        }
    }
    let table = table.expect("loaded at least once");
    println!("throughput table load ({throughputs}): {:.2} ms (best of {repeats})", load_s * 1e3);

    let slice = cotenant_trace::Slice::default();
    let mut workload =
        cotenant_trace::read_gavel(&PathBuf::from(&trace), &slice).unwrap_or_else(|e| fail(&e.to_string()));
    if let Some(n) = keep {
        workload.jobs.truncate(n);
    }
    let base = workload.jobs.clone();
    let last = base.last().map_or(Time::ZERO, |j| j.arrival);
    let gap = Span(last.0 / base.len().max(1) as u64);
    for copy in 1..tile {
        let shift = Span((last.0 + gap.0) * copy as u64);
        for job in &base {
            let mut job = job.clone();
            job.id = JobId(workload.jobs.len() as u32);
            job.arrival += shift;
            workload.jobs.push(job);
        }
    }
    let cluster =
        cotenant_trace::parse_cluster_inline("v100=8,p100=8,k80=8").unwrap_or_else(|e| fail(&e.to_string()));
    let rates =
        GavelRates::new(table.clone(), workload.job_types.clone(), &cluster.gpu_types, Consolidation::Always)
            .unwrap_or_else(|e| fail(&e.to_string()));
    let config = SimConfig {
        overheads: Overheads { checkpoint_interval: Span::ZERO, restore_overhead: Span::ZERO },
        ..SimConfig::default()
    };
    let params = PolicyParams {
        round: Some(Span::from_secs(360)),
        job_types: workload.job_types.clone(),
        throughputs: Some(table),
        ..PolicyParams::default()
    };
    for policy in policy.split(',') {
        let mut best = f64::INFINITY;
        let mut passes = 0;
        for _ in 0..repeats {
            let built = cotenant_policies::build(policy, &params).unwrap_or_else(|e| fail(&e.to_string()));
            let started = Instant::now();
            let result = simulate(
                &workload.jobs,
                &workload.tenants,
                cluster.clone(),
                built,
                &rates,
                &config,
                &mut |_| {},
            )
            .unwrap_or_else(|e| fail(&e.to_string()));
            best = best.min(started.elapsed().as_secs_f64());
            passes = result.engine.scheduling_passes;
        }
        let jobs = workload.jobs.len();
        println!(
            "{policy} on {jobs} jobs ({trace}{}): {:.2} ms, {:.2} ms per 1,000 jobs, {:.2} us per scheduling pass ({passes} passes; best of {repeats})",
            if tile > 1 { format!(" tiled {tile}x") } else { String::new() },
            best * 1e3,
            best * 1e3 * 1000.0 / jobs.max(1) as f64,
            best * 1e6 / passes.max(1) as f64,
        );
    }
}

fn fail(message: &str) -> ! {
    eprintln!("gavel_rounds: {message}");
    std::process::exit(2);
}
