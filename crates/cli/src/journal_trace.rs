//! `--trace journal:PATH`: the live server's recorded history (`cotenant server
//! --db PATH`) as a workload, so that `sim` replays last month's real queue
//! under any policy. `cotenant_live::history` derives the jobs (arrival, tenant,
//! GPUs, estimate, measured run time) and says which it skipped and why; this
//! file turns them into the trace crate's `Workload` and the journal's declared
//! nodes into the default cluster.

use std::future::Future;

use anyhow::{bail, Context, Result};
use cotenant_core::{ClusterSpec, JobSpec, Span, TenantSpec, Time};
use cotenant_live::history::{self, History};
use cotenant_live::setup::{NodeDecl, ServerSetup};
use cotenant_trace::{SkipCount, SliceBound, Workload};

use crate::workload::WorkloadArgs;

/// The `--trace` kind that names a server database.
pub const KIND: &str = "journal:";

/// The database `--trace journal:PATH` names, if it names one.
pub fn database(args: &WorkloadArgs) -> Option<&str> {
    args.trace.as_deref().and_then(|t| t.strip_prefix(KIND))
}

/// Runs one future of the live crate to completion on a small runtime.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting tokio")?;
    Ok(runtime.block_on(future))
}

/// The journal's kept jobs, with `--from`, `--to` and `--max-jobs` applied.
pub fn workload(db: &str, args: &WorkloadArgs) -> Result<Workload> {
    if db.is_empty() {
        bail!("--trace journal:PATH: the path after journal: is empty");
    }
    let history = block_on(history::load(db))??;
    to_workload(&history, args)
}

/// The cluster the journal's server declared (`--nodes`), and the sentence that says so.
pub fn declared_cluster(db: &str) -> Result<(ClusterSpec, String)> {
    let (setup, _) = block_on(history::stored_setup(db))??;
    let spec = setup.cluster_spec();
    let rule = format!(
        "declared by the server that wrote the journal (--nodes {}): {} nodes, {} GPUs; --cluster overrides",
        nodes_arg(&setup),
        spec.nodes.len(),
        spec.total_gpus()
    );
    Ok((spec, rule))
}

/// `--nodes` text for the declared nodes: runs of equal nodes as COUNTxGPUSxTYPE.
fn nodes_arg(setup: &ServerSetup) -> String {
    let mut runs: Vec<(u32, &NodeDecl)> = Vec::new();
    for node in &setup.nodes {
        match runs.last_mut() {
            Some((count, last)) if last.gpus == node.gpus && last.gpu_type == node.gpu_type => *count += 1,
            _ => runs.push((1, node)),
        }
    }
    runs.iter().map(|(count, n)| format!("{count}x{}x{}", n.gpus, n.gpu_type)).collect::<Vec<_>>().join(",")
}

/// A bound of `--from`/`--to` as Unix µs: seconds count from the first submission.
fn bound_us(bound: SliceBound, first_us: u64) -> u64 {
    match bound {
        SliceBound::Relative(us) => first_us.saturating_add(us.max(0) as u64),
        SliceBound::WallClock(us) => us.max(0) as u64,
    }
}

fn to_workload(history: &History, args: &WorkloadArgs) -> Result<Workload> {
    let source = format!("{} (server journal)", history.db);
    let first_us = history.first_submitted_us.unwrap_or(history.epoch_us);
    let start = args.from.as_deref().map(SliceBound::parse).transpose()?.map(|b| bound_us(b, first_us));
    let end = args.to.as_deref().map(SliceBound::parse).transpose()?.map(|b| bound_us(b, first_us));
    let mut notes = Vec::new();
    let mut kept: Vec<_> = history
        .jobs
        .iter()
        .filter(|j| {
            let at = first_us + j.arrival_us;
            start.is_none_or(|s| at >= s) && end.is_none_or(|e| at < e)
        })
        .collect();
    if kept.len() < history.jobs.len() {
        notes.push(format!("time window kept {} of {} jobs", kept.len(), history.jobs.len()));
    }
    if let Some(max) = args.max_jobs.filter(|&max| kept.len() > max) {
        notes.push(format!("job limit kept the first {max} of {} jobs", kept.len()));
        kept.truncate(max);
    }
    let Some(first_kept) = kept.first() else {
        bail!(
            "{source}: no job to replay ({} kept of {} submitted; skipped: {})",
            history.jobs.len(),
            history.jobs.len() as u64 + history.skipped_total(),
            skipped_summary(history)
        );
    };
    let origin_us = start.unwrap_or(first_us + first_kept.arrival_us);
    let jobs: Vec<JobSpec> = kept
        .iter()
        .enumerate()
        .map(|(i, job)| {
            let arrival = Time((first_us + job.arrival_us).saturating_sub(origin_us));
            let mut spec = JobSpec::new(i as u32, job.tenant, arrival, job.gpus, job.run_secs());
            spec.duration_estimate = job.estimate_secs.map(Span::from_secs_f64_ceil);
            spec.priority = job.priority;
            spec.cpus = job.cpus;
            spec.memory_gib = job.memory_gib;
            spec
        })
        .collect();
    let tenants = history
        .tenants
        .iter()
        .map(|t| TenantSpec {
            name: t.name.clone(),
            weight: t.weight,
            gpu_quota: t.gpu_limit,
            gpu_limit: t.gpu_limit,
        })
        .collect();
    notes.push(format!(
        "time 0 is {} UTC; jobs are renumbered in arrival order (an error about a job names the journal row that submitted it)",
        cotenant_trace::wallclock::format_wall_clock(origin_us as i64)
    ));
    notes.push(
        "run times are measured from the engine's decision to the exit report, summed over a job's attempts \
         (docs/live.md, Replaying history)"
            .to_string(),
    );
    if history.failed_kept > 0 {
        notes.push(format!("{} failed jobs kept with their run time until the failure", history.failed_kept));
    }
    notes.extend(history.warnings.iter().cloned());
    let skipped = history
        .skipped
        .iter()
        .map(|s| SkipCount { reason: format!("{} ({:.2} GPU-hours)", s.reason, s.gpu_hours), rows: s.jobs })
        .collect();
    Ok(Workload {
        source,
        lines: kept.iter().map(|j| j.seq).collect(),
        statuses: kept.iter().map(|j| j.status.as_str().to_string()).collect(),
        jobs,
        tenants,
        job_types: Vec::new(),
        skipped,
        notes,
        wall_clock_origin_us: Some(origin_us as i64),
    })
}

fn skipped_summary(history: &History) -> String {
    if history.skipped.is_empty() {
        return "none".into();
    }
    history.skipped.iter().map(|s| format!("{} {}", s.jobs, s.reason)).collect::<Vec<_>>().join("; ")
}
