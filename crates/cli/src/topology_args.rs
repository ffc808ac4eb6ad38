//! `cotenant sim --topology`, `--routing`, `--comm-profile` (docs/topology.md): puts a
//! network on the cluster, gives jobs a communication profile, and wraps the run's
//! rates in `cotenant_sim::topology_rates::TopologyRates`.

use anyhow::{bail, Result};
use cotenant_core::topology::Routing;
use cotenant_core::Layout;
use cotenant_sim::topology_rates::TopologyRates;
use cotenant_sim::train_steps::TrainStepTimes;
use cotenant_sim::RateModel;

use crate::sim_cmd::RunArgs;
use crate::workload::Prepared;

/// Applies `--topology`, `--routing` and `--comm-profile` to the prepared workload and
/// cluster, and checks them against `--placement`.
pub fn apply(run: &RunArgs, prepared: &mut Prepared) -> Result<()> {
    if let Some(arg) = &run.topology {
        let config = cotenant_trace::topology_config::parse_topology_arg(arg)?;
        config.apply(&mut prepared.cluster, "--topology")?;
    }
    if let Some(routing) = &run.routing {
        let routing = match routing.as_str() {
            "ecmp" => Routing::Ecmp,
            "vclos" => Routing::Vclos,
            other => bail!("--routing {other}: expected ecmp or vclos"),
        };
        let Some(topology) = prepared.cluster.topology.as_mut() else {
            bail!("--routing needs a topology: --topology, or a [topology] table in the --cluster TOML");
        };
        topology.routing = routing;
    }
    let routing = prepared.cluster.topology.as_ref().map(|t| t.routing);
    match (run.placement.as_str(), routing) {
        ("vclos", Some(Routing::Vclos)) => {}
        ("vclos", _) => {
            bail!("--placement vclos reserves isolated paths: it needs --routing vclos (and a topology)")
        }
        (other, Some(Routing::Vclos)) => {
            bail!("--routing vclos: jobs must reserve isolated paths; use --placement vclos, not {other}")
        }
        ("torus", _) if prepared.cluster.topology.as_ref().and_then(|t| t.torus).is_none() => {
            bail!("--placement torus needs a torus: --topology torus=XxYxZ")
        }
        _ => {}
    }
    if let Some(spec) = &run.comm_profile {
        apply_comm_profile(spec, prepared)?;
    }
    if let Some(t) = &prepared.cluster.topology {
        let uplink = t.uplink(&prepared.cluster);
        prepared.notes.push(format!(
            "topology: {} routing, {} spines, oversubscription {}, NIC {} Gbit/s, leaf uplinks {:.1} Gbit/s{}",
            t.routing.name(),
            t.spines,
            t.oversubscription,
            t.nic_gbps,
            uplink,
            t.torus.map_or(String::new(), |x| format!(", torus {}x{}x{}", x.dims[0], x.dims[1], x.dims[2]))
        ));
    }
    Ok(())
}

/// `cotenant sweep` prepares its cells' clusters elsewhere: the topology flags are refused
/// there with a sentence rather than ignored.
pub fn refuse(run: &RunArgs, command: &str) -> Result<()> {
    let given = [
        ("--topology", run.topology.is_some()),
        ("--routing", run.routing.is_some()),
        ("--comm-profile", run.comm_profile.is_some()),
    ];
    match given.iter().find(|(_, on)| *on) {
        Some((flag, _)) => {
            bail!("{flag}: only `cotenant sim` and `cotenant bench` model the topology, not `{command}`")
        }
        None => Ok(()),
    }
}

/// Wraps `rates` in the topology-aware model when the cluster has a topology. Jobs whose
/// job type names a training preset (`gpt3-175b`, ...) and that have a layout are timed
/// by the training model on their placement's links (`sim::train_steps`), on the
/// cluster's first GPU type.
pub fn wrap(prepared: &Prepared, rates: Box<dyn RateModel>) -> Box<dyn RateModel> {
    if prepared.cluster.topology.is_none() {
        return rates;
    }
    let topology = TopologyRates::new(rates);
    let gpu = prepared.cluster.gpu_types.first().map_or("", String::as_str);
    match TrainStepTimes::new(&prepared.workload.job_types, gpu) {
        Some(model) => Box::new(topology.with_step_time(Box::new(model))),
        None => Box::new(topology),
    }
}

/// `--comm-profile fraction=F[,tensor=T][,pipeline=P][,min-gpus=N]`: jobs of at least
/// `min-gpus` GPUs (default 2) get communication fraction F and, when their GPU count
/// allows, the layout (tensor T if it divides the count, pipeline P if it divides the
/// rest, data-parallel the remainder).
fn apply_comm_profile(spec: &str, prepared: &mut Prepared) -> Result<()> {
    let (mut fraction, mut tensor, mut pipeline, mut min_gpus) = (None, 1u32, 1u32, 2u32);
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            bail!("--comm-profile {part}: expected KEY=VALUE");
        };
        let int = |v: &str| match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(anyhow::anyhow!("--comm-profile {key}: expected a positive integer, got {v:?}")),
        };
        match key {
            "fraction" => match value.parse::<f64>() {
                Ok(f) if (0.0..=1.0).contains(&f) => fraction = Some(f),
                _ => bail!("--comm-profile fraction: expected a number in [0, 1], got {value:?}"),
            },
            "tensor" => tensor = int(value)?,
            "pipeline" => pipeline = int(value)?,
            "min-gpus" => min_gpus = int(value)?,
            other => {
                bail!("--comm-profile {other}: unknown key (known: fraction, tensor, pipeline, min-gpus)")
            }
        }
    }
    let Some(fraction) = fraction else { bail!("--comm-profile needs fraction=F") };
    let mut profiled = 0;
    for job in prepared.workload.jobs.iter_mut().filter(|j| j.gpus >= min_gpus) {
        job.profile.comm_fraction = fraction;
        let t = if job.gpus.is_multiple_of(tensor) { tensor } else { 1 };
        let p = if (job.gpus / t).is_multiple_of(pipeline) { pipeline } else { 1 };
        job.profile.layout = Some(Layout { tensor: t, pipeline: p, data: job.gpus / t / p });
        profiled += 1;
    }
    prepared.notes.push(format!(
        "--comm-profile: {profiled} jobs of {min_gpus}+ GPUs communicate {:.0}% of a step (layout tensor {tensor}, pipeline {pipeline} where it divides)",
        fraction * 100.0
    ));
    Ok(())
}

/// One line per run on how spread its multi-node jobs were (empty without a topology).
pub fn spread_lines(results: &[cotenant_sim::SimResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| {
            r.placement_spread.as_ref().map(|s| {
                format!(
                    "topology: {}: {} multi-node starts, max spread (leaves per DP/PP group) mean {:.2}, max {}; DP groups alone mean {:.2}",
                    r.policy,
                    s.spreads.len(),
                    s.mean(),
                    s.max(),
                    s.mean_data()
                )
            })
        })
        .collect()
}

/// The same as JSON, one object per run (`None` without a topology).
pub fn spread_json(results: &[cotenant_sim::SimResult]) -> Option<serde_json::Value> {
    let runs: Vec<serde_json::Value> = results
        .iter()
        .filter_map(|r| {
            r.placement_spread.as_ref().map(|s| {
                serde_json::json!({
                    "policy": r.policy,
                    "multi_node_starts": s.spreads.len(),
                    "mean_max_spread": s.mean(),
                    "max_spread": s.max(),
                    "mean_max_dp_spread": s.mean_data(),
                })
            })
        })
        .collect();
    (!runs.is_empty()).then_some(serde_json::Value::Array(runs))
}
