//! GPU memory and sharing at the CLI: `--interference FILE` (the interference
//! table, read, checked against the workload's models, and handed to the sharing
//! policies and the rate model), and the check that every job fits some GPU.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use cotenant_core::sharing::InterferenceTable;
use cotenant_core::ClusterSpec;
use cotenant_sim::sharing::{check_jobs, parse_interference, InterferenceRates};
use cotenant_trace::Workload;

use crate::workload::Prepared;

/// The table at `path`, indexed by the workload's job types. Every job type must
/// be in it and every job must have one.
pub fn load(path: &Path, prepared: &Prepared) -> Result<Arc<InterferenceTable>> {
    let file = path.display().to_string();
    let text = cotenant_trace::text::read_text(path)?;
    let table = parse_interference(&text, &file)?;
    let table = table.reordered(&prepared.workload.job_types).map_err(|model| {
        anyhow!(
            "{file}: the workload's model '{model}' is not in the table (it has: {})",
            table.models.join(", ")
        )
    })?;
    check_jobs(&prepared.workload.jobs, &table).map_err(|(job, problem)| {
        anyhow!("--interference {file}: {}: job {job} {problem}", prepared.workload.source)
    })?;
    Ok(Arc::new(table))
}

/// A job whose stated GPU memory need exceeds the largest GPU of the cluster can
/// never start: an error naming it (clusters with a GPU type whose memory is not
/// modelled hold anything).
pub fn check_gpu_memory(workload: &Workload, cluster: &ClusterSpec) -> Result<()> {
    if cluster.nodes.iter().any(|n| n.gpus > 0 && n.gpu_memory_gib <= 0.0) {
        return Ok(());
    }
    let largest = cluster.nodes.iter().map(|n| n.gpu_memory_gib).fold(0.0, f64::max);
    match workload.jobs.iter().find(|j| j.gpu_memory.need_gib(1) > largest) {
        None => Ok(()),
        Some(job) => bail!(
            "{}: job {} needs {} GiB of GPU memory per GPU, but the cluster's largest GPU has {largest} GiB",
            workload.locate(job.id),
            job.id.0,
            job.gpu_memory.need_gib(1)
        ),
    }
}

/// The rate model of a run with an interference table.
pub fn rates(table: &InterferenceTable) -> InterferenceRates {
    InterferenceRates { table: table.clone() }
}
