//! `cotenant bench`: simulator speed on one core, as a Markdown table.

use std::time::Instant;

use anyhow::Result;
use cotenant_sim::{summarize, ReferenceRate};

use crate::sim_cmd::{build_policies, run_one, sim_config, RunArgs};
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
}

pub fn run(mut args: BenchArgs) -> Result<()> {
    let default_trace = args.workload.trace.is_none() && args.workload.synthetic.is_none();
    if default_trace && !args.week {
        args.workload.all = true;
    }
    let load_started = Instant::now();
    let prepared = prepare(&args.workload)?;
    let load_secs = load_started.elapsed().as_secs_f64();
    let config = sim_config(&args.run)?;
    println!(
        "workload: {} ({} jobs), loaded in {load_secs:.2}s",
        prepared.workload.source,
        prepared.workload.jobs.len()
    );
    println!("cluster:  {}", prepared.cluster_rule);
    println!("one policy at a time, one thread, release build expected\n");
    println!("| policy | wall (s) | events | events/s | jobs/s | scheduling passes | mean JCT (h) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for policy in build_policies(&args.run, &prepared)? {
        let (result, wall) = run_one(&prepared, policy, &ReferenceRate, &config, &mut |_| {})?;
        let summary = summarize(&result);
        println!(
            "| {} | {:.2} | {} | {:.0} | {:.0} | {} | {:.2} |",
            summary.policy,
            wall,
            summary.events,
            summary.events as f64 / wall,
            summary.jobs as f64 / wall,
            summary.scheduling_passes,
            summary.jct.mean / 3600.0
        );
    }
    if let Some(peak) = peak_rss_mib() {
        println!("\npeak resident memory: {peak:.0} MiB");
    }
    Ok(())
}

/// Peak resident set size from /proc (Linux); `None` elsewhere.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}
