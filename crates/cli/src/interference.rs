//! `--interference FILE`: the GPU-sharing interference table, read, checked
//! against the workload's models, and handed to the sharing policies and the
//! rate model.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use cotenant_core::sharing::InterferenceTable;
use cotenant_sim::sharing::{check_jobs, parse_interference, InterferenceRates};

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

/// The rate model of a run with an interference table.
pub fn rates(table: &InterferenceTable) -> InterferenceRates {
    InterferenceRates { table: table.clone() }
}
