//! `--variability` and `--stragglers`: per-GPU speed factors on the cluster and the rate
//! wrapper that reads them (docs/variability.md).

use anyhow::{anyhow, bail, Context, Result};
use cotenant_core::variability::{parse_speed_file, SpeedModel, SpeedStats};
use cotenant_sim::variability_rates::{StragglerModel, Stragglers, VariabilityRates};
use cotenant_sim::RateModel;

use crate::sim_cmd::RunArgs;
use crate::workload::Prepared;

/// Where the factors come from.
#[derive(Clone, Debug, PartialEq)]
pub enum SpeedSource {
    Drawn(SpeedModel),
    File(std::path::PathBuf),
}

/// `--variability`: `default`, `stress`, `file=PATH`, or `KEY=VALUE,...` with keys sigma,
/// tail, slow, seed (a preset may come first: `stress,seed=3`). The seed defaults to `--seed`.
pub fn parse_variability(text: &str, run_seed: u64) -> Result<SpeedSource> {
    let flag = |msg: String| anyhow!("--variability {text}: {msg}");
    let mut model = SpeedModel { seed: run_seed, ..SpeedModel::DEFAULT };
    for (i, part) in text.split(',').map(str::trim).enumerate() {
        match part {
            "default" if i == 0 => {}
            "stress" if i == 0 => model = SpeedModel { seed: run_seed, ..SpeedModel::STRESS },
            _ => {
                let (key, value) = part.split_once('=').ok_or_else(|| {
                    flag(format!("'{part}' is not KEY=VALUE (keys: sigma, tail, slow, seed, file; or default, stress first)"))
                })?;
                let number = || -> Result<f64> {
                    value.trim().parse::<f64>().map_err(|_| flag(format!("{key}={value}: not a number")))
                };
                match key.trim() {
                    "file" if text.split(',').count() == 1 => {
                        return Ok(SpeedSource::File(value.trim().into()))
                    }
                    "file" => return Err(flag("file=PATH takes no other keys".into())),
                    "sigma" => model.sigma = number()?,
                    "tail" => model.tail = number()?,
                    "slow" => model.slow = number()?,
                    "seed" => {
                        model.seed =
                            value.trim().parse().map_err(|_| flag(format!("seed={value}: not an integer")))?
                    }
                    other => {
                        return Err(flag(format!(
                            "unknown key '{other}' (keys: sigma, tail, slow, seed, file)"
                        )))
                    }
                }
            }
        }
    }
    model.check().map_err(flag)?;
    Ok(SpeedSource::Drawn(model))
}

/// `--stragglers MODE[,every-gang][,max-shrink=F][,overhead=F][,migrate-cost=SECONDS]`.
pub fn parse_stragglers(text: &str) -> Result<StragglerModel> {
    let flag = |msg: String| anyhow!("--stragglers {text}: {msg}");
    let mut parts = text.split(',').map(str::trim);
    let mode = parts.next().unwrap_or("");
    let mut model = StragglerModel {
        mode: Stragglers::parse(mode)
            .ok_or_else(|| flag(format!("unknown mode '{mode}'; use none, shrink, migrate or auto")))?,
        ..StragglerModel::default()
    };
    for part in parts {
        if part == "every-gang" {
            model.every_gang = true;
            continue;
        }
        let (key, value) = part.split_once('=').ok_or_else(|| flag(format!("'{part}' is not KEY=VALUE")))?;
        let value: f64 = value.trim().parse().map_err(|_| flag(format!("{key}={value}: not a number")))?;
        match key.trim() {
            "max-shrink" if (0.0..1.0).contains(&value) => model.max_shrink = value,
            "overhead" if (0.0..1.0).contains(&value) => model.overhead = value,
            "migrate-cost" if (0.0..=1e7).contains(&value) => model.migrate_cost = value,
            "max-shrink" | "overhead" => return Err(flag(format!("{key}={value} must be in [0, 1)"))),
            "migrate-cost" => return Err(flag(format!("migrate-cost={value} must be in [0, 1e7] seconds"))),
            other => {
                return Err(flag(format!(
                    "unknown key '{other}' (keys: every-gang, max-shrink, overhead, migrate-cost)"
                )))
            }
        }
    }
    Ok(model)
}

/// Puts `--variability`'s factors on the prepared cluster (and a note with their
/// statistics). Checks the flags that need them.
pub fn apply(run: &RunArgs, prepared: &mut Prepared) -> Result<()> {
    let Some(text) = &run.variability else {
        if run.stragglers.is_some() {
            bail!("--stragglers needs --variability (the GPUs' speed factors)");
        }
        if run.placement == "variability-aware" {
            bail!("--placement variability-aware needs --variability (the GPUs' speed factors)");
        }
        return Ok(());
    };
    let gpus = prepared.cluster.total_gpus();
    let speeds = match parse_variability(text, run.seed)? {
        SpeedSource::Drawn(model) => model.draw(gpus),
        SpeedSource::File(path) => {
            let body = std::fs::read_to_string(&path)
                .with_context(|| format!("--variability file={}: cannot read", path.display()))?;
            let speeds =
                parse_speed_file(&body).map_err(|e| anyhow!("--variability file={}: {e}", path.display()))?;
            if speeds.len() != gpus as usize {
                bail!(
                    "--variability file={}: {} factors for a cluster of {gpus} GPUs (one per GPU, in node order)",
                    path.display(),
                    speeds.len()
                );
            }
            speeds
        }
    };
    if let Some(stats) = SpeedStats::of(&speeds) {
        prepared.notes.push(format!("GPU speed factors (--variability {text}): {stats}"));
    }
    prepared.cluster.gpu_speed = speeds;
    cotenant_core::Cluster::new(prepared.cluster.clone()).context("--variability")?;
    Ok(())
}

/// `rates` wrapped in [`VariabilityRates`] when `--variability` is on; as they were otherwise.
pub fn wrap(run: &RunArgs, prepared: &Prepared, rates: Box<dyn RateModel>) -> Result<Box<dyn RateModel>> {
    if run.variability.is_none() {
        return Ok(rates);
    }
    if prepared.cluster.gpu_speed.is_empty() {
        bail!("--variability is supported by `cotenant sim` and `cotenant bench`");
    }
    let model = match &run.stragglers {
        Some(text) => parse_stragglers(text)?,
        None => StragglerModel::default(),
    };
    Ok(Box::new(VariabilityRates::new(rates, model)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variability_specs() {
        assert_eq!(
            parse_variability("default", 7).unwrap(),
            SpeedSource::Drawn(SpeedModel { seed: 7, ..SpeedModel::DEFAULT })
        );
        assert_eq!(
            parse_variability("stress,seed=3", 7).unwrap(),
            SpeedSource::Drawn(SpeedModel { seed: 3, ..SpeedModel::STRESS })
        );
        assert_eq!(
            parse_variability("sigma=0.05,tail=0,slow=2", 0).unwrap(),
            SpeedSource::Drawn(SpeedModel { sigma: 0.05, tail: 0.0, slow: 2.0, seed: 0 })
        );
        assert_eq!(parse_variability("file=x.txt", 0).unwrap(), SpeedSource::File("x.txt".into()));
        for bad in
            ["sigma=2", "sigma=x", "fast", "speed=1", "tail=0.9", "file=a,sigma=0.1", "sigma=0.1,stress"]
        {
            let err = parse_variability(bad, 0).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--variability {bad}:")), "{err}");
        }
    }

    #[test]
    fn straggler_specs() {
        let m = parse_stragglers("auto,every-gang,max-shrink=0.3,overhead=0.05,migrate-cost=120").unwrap();
        assert_eq!(
            m,
            StragglerModel {
                mode: Stragglers::Auto,
                every_gang: true,
                max_shrink: 0.3,
                overhead: 0.05,
                migrate_cost: 120.0
            }
        );
        assert_eq!(parse_stragglers("none").unwrap().mode, Stragglers::None);
        for bad in ["fast", "shrink,max-shrink=1", "migrate,cost=3", "auto,every"] {
            let err = parse_stragglers(bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--stragglers {bad}:")), "{err}");
        }
    }
}
