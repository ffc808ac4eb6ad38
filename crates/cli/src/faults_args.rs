//! `cotenant sim --failures/--spot/--availability` (docs/faults.md): the fault
//! model of a run, the rates of morphed jobs under `varuna(BASE)`, and the fault
//! section of the output (only when a fault flag is given).

use std::sync::Arc;

use anyhow::{anyhow, Result};
use cotenant_report::Table;
use cotenant_sim::faults::{parse_availability, parse_failures, parse_spot, FaultConfig, FaultSummary};
use cotenant_sim::{RateModel, SimConfig, SimResult};
use serde_json::json;

use crate::sim_cmd::RunArgs;
use crate::workload::Prepared;

/// The run's fault model from `--failures` and `--spot` (`sim_config` sets it).
pub fn config(run: &RunArgs) -> Result<Option<Arc<FaultConfig>>> {
    if run.failures.is_none() && run.spot.is_none() {
        return Ok(None);
    }
    let mut faults = FaultConfig::default();
    if let Some(text) = &run.failures {
        faults.failures = Some(parse_failures(text, run.seed).map_err(|e| anyhow!(e))?);
    }
    if let Some(text) = &run.spot {
        let (spot, save, prices) = parse_spot(text, run.seed).map_err(|e| anyhow!(e))?;
        faults.spot = Some(spot);
        faults.save = save;
        faults.prices = prices;
    }
    Ok(Some(Arc::new(faults)))
}

/// `--availability FILE`: the cluster's known departures (`cotenant sim`).
pub fn setup(run: &RunArgs, prepared: &mut Prepared, config: &mut SimConfig) -> Result<()> {
    let Some(path) = &run.availability else { return Ok(()) };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("--availability {}: cannot read it: {e}", path.display()))?;
    let name = path.display().to_string();
    prepared.cluster.departures =
        parse_availability(&name, &text, &prepared.cluster).map_err(|e| anyhow!(e))?;
    config.faults.get_or_insert_with(Default::default);
    Ok(())
}

/// Commands other than `sim` do not read `--availability`: an error says so.
pub fn no_availability(run: &RunArgs, command: &str) -> Result<()> {
    match &run.availability {
        Some(path) => {
            Err(anyhow!("--availability {}: only `cotenant sim` reads it, not `{command}`", path.display()))
        }
        None => Ok(()),
    }
}

/// With a `varuna(BASE)` policy in the run, elastic jobs run at the pipeline
/// model's speed at other sizes (`sim::varuna_rates`), under every policy of the run.
pub fn wrap_rates(run: &RunArgs, rates: Box<dyn RateModel>, config: &SimConfig) -> Box<dyn RateModel> {
    if !run.policies.iter().any(|p| cotenant_policies::varuna::base_name(p.trim()).is_some()) {
        return rates;
    }
    Box::new(cotenant_sim::varuna_rates::VarunaRates { inner: rates, elastic: config.elastic })
}

fn summaries(results: &[SimResult]) -> Option<Vec<(&str, &FaultSummary)>> {
    let found: Vec<(&str, &FaultSummary)> =
        results.iter().filter_map(|r| r.faults.as_ref().map(|f| (r.policy.as_str(), f))).collect();
    (!found.is_empty()).then_some(found)
}

/// The `faults` JSON section, one entry per policy; `None` without faults.
pub fn json(results: &[SimResult]) -> Option<serde_json::Value> {
    let rows: Vec<serde_json::Value> = summaries(results)?
        .into_iter()
        .map(|(policy, f)| {
            json!({
                "policy": policy,
                "failures": f.failures,
                "reclaims": f.reclaims,
                "departures": f.departures,
                "interruptions": f.interruptions.len(),
                "jobs_interrupted": f.jobs_interrupted,
                "services_interrupted": f.services_interrupted,
                "lost_gpu_hours": f.lost_gpu_hours,
                "lost_work_units": f.interruptions.iter().map(|i| i.lost_work()).sum::<f64>(),
                "spot_gpu_hours": f.spot_gpu_hours,
                "on_demand_gpu_hours": f.on_demand_gpu_hours,
                "cost_usd": f.cost_usd,
                "all_on_demand_cost_usd": f.all_on_demand_cost_usd,
            })
        })
        .collect();
    Some(serde_json::Value::Array(rows))
}

/// The fault table and its legend; `None` without faults.
pub fn table(results: &[SimResult]) -> Option<String> {
    let rows = summaries(results)?;
    let mut table = Table::new(&[
        "policy",
        "failures",
        "reclaims",
        "departures",
        "interrupted",
        "jobs",
        "services",
        "lost GPU-h",
        "spot GPU-h",
        "on-demand GPU-h",
        "cost $",
        "all on-demand $",
    ]);
    for (policy, f) in rows {
        table.row(vec![
            policy.to_string(),
            f.failures.to_string(),
            f.reclaims.to_string(),
            f.departures.to_string(),
            f.interruptions.len().to_string(),
            f.jobs_interrupted.to_string(),
            f.services_interrupted.to_string(),
            format!("{:.2}", f.lost_gpu_hours),
            format!("{:.1}", f.spot_gpu_hours),
            format!("{:.1}", f.on_demand_gpu_hours),
            format!("{:.2}", f.cost_usd),
            format!("{:.2}", f.all_on_demand_cost_usd),
        ]);
    }
    Some(format!(
        "Faults (docs/faults.md):\n{}\ninterrupted = jobs stopped by a node going down (jobs: distinct; services: inference); lost GPU-h = GPU-time since each stopped job's last save; cost = GPU-hours rented (nodes present, first arrival to last job end) at spot and on-demand $/GPU-h; all on-demand = the same span with every node on-demand and present.",
        table.render()
    ))
}
