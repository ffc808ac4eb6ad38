//! MISO's workload (SoCC'22, PAPERS.md Part 1): single-GPU training jobs with
//! Poisson arrivals, each of a job class with a speed-versus-slice curve.
//!
//! `--synthetic miso:KEY=VALUE,...`, keys (all optional):
//! - `jobs=N` (default 100, MISO's setup)
//! - `gap=DURATION` (default 60s): mean of the exponential gaps between arrivals
//! - `seed=S` (default 0)
//! - `work=MIN:MAX` (default 10m:2h): run time alone on a whole GPU (7g),
//!   log-uniform between the two (our choice: PAPERS.md gives no durations)
//! - `weights=W1:W2:...` (default: the curves file's): one weight per class, in
//!   the file's order, to vary the mix
//!
//! Each job draws its class from the bundled curves file
//! (`crates/trace/data/mig_curves.toml`) by its weights. Draws per job, in order:
//! gap, class, run time, from one ChaCha8 stream.

use cotenant_core::limits::{MAX_ARRIVAL_SPAN, MAX_JOB_DURATION};
use cotenant_core::{JobSpec, Span, TenantSpec, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster_config::key_values;
use crate::mig::CurveClass;
use crate::{TraceError, Workload};

const CONTEXT: &str = "--synthetic miso";
const KEYS: &str = "jobs, gap, seed, work, weights";
/// Most jobs a MISO workload may have.
pub const MAX_MISO_JOBS: usize = 100_000;

/// A MISO workload description.
#[derive(Clone, Debug, PartialEq)]
pub struct MisoSpec {
    pub jobs: usize,
    pub mean_gap: Span,
    pub seed: u64,
    pub work_min: Span,
    pub work_max: Span,
    /// Class weights replacing the curves file's (`None`: the file's).
    pub weights: Option<Vec<f64>>,
}

impl Default for MisoSpec {
    fn default() -> Self {
        MisoSpec {
            jobs: 100,
            mean_gap: Span::from_secs(60),
            seed: 0,
            work_min: Span::from_secs(600),
            work_max: Span::from_secs(7200),
            weights: None,
        }
    }
}

impl MisoSpec {
    /// Parses the text after `miso` (`:jobs=100,seed=2` or empty).
    pub fn parse(text: &str) -> Result<MisoSpec, TraceError> {
        let mut spec = MisoSpec::default();
        let text = text.strip_prefix(':').unwrap_or(text);
        if text.trim().is_empty() {
            return Ok(spec);
        }
        let err = |key: &str, message: String| TraceError::config(CONTEXT, key, message);
        for (key, value) in key_values(text, CONTEXT)? {
            match key {
                "jobs" => {
                    spec.jobs = value
                        .parse()
                        .ok()
                        .filter(|&n| (1..=MAX_MISO_JOBS).contains(&n))
                        .ok_or_else(|| err(key, format!("expected 1..={MAX_MISO_JOBS}, got {value:?}")))?
                }
                "gap" => spec.mean_gap = Span::parse(value).map_err(|m| err(key, m))?,
                "seed" => {
                    spec.seed =
                        value.parse().map_err(|_| err(key, format!("expected an integer, got {value:?}")))?
                }
                "work" => {
                    let (low, high) = value
                        .split_once(':')
                        .ok_or_else(|| err(key, format!("expected MIN:MAX, got {value:?}")))?;
                    spec.work_min = Span::parse(low).map_err(|m| err(key, m))?;
                    spec.work_max = Span::parse(high).map_err(|m| err(key, m))?;
                }
                "weights" => {
                    let weights: Option<Vec<f64>> = value
                        .split(':')
                        .map(|w| w.trim().parse::<f64>().ok().filter(|w| w.is_finite() && *w >= 0.0))
                        .collect();
                    let weights = weights.filter(|w| w.iter().any(|&x| x > 0.0));
                    spec.weights = Some(weights.ok_or_else(|| {
                        err(key, format!("expected W1:W2:... >= 0, not all 0, got {value:?}"))
                    })?);
                }
                _ => return Err(err(key, format!("unknown key (known: {KEYS})"))),
            }
        }
        if spec.work_min == Span::ZERO || spec.work_min > spec.work_max || spec.work_max > MAX_JOB_DURATION {
            return Err(err(
                "work",
                "needs 0 < MIN <= MAX <= 366 days (core::limits::MAX_JOB_DURATION)".into(),
            ));
        }
        if spec.mean_gap.0.saturating_mul(spec.jobs as u64) > MAX_ARRIVAL_SPAN.0 {
            return Err(err("gap", "jobs x gap exceeds 10 years (core::limits::MAX_ARRIVAL_SPAN)".into()));
        }
        Ok(spec)
    }
}

impl std::fmt::Display for MisoSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "miso:jobs={},gap={}s,seed={},work={}s:{}s",
            self.jobs,
            self.mean_gap.as_secs_f64(),
            self.seed,
            self.work_min.as_secs_f64(),
            self.work_max.as_secs_f64()
        )?;
        if let Some(weights) = &self.weights {
            let text: Vec<String> = weights.iter().map(f64::to_string).collect();
            write!(f, ",weights={}", text.join(":"))?;
        }
        Ok(())
    }
}

/// Generates the workload: one tenant, one-GPU jobs, job types = the classes.
/// Errors when `weights` does not give one weight per class.
pub fn generate_miso(spec: &MisoSpec, classes: &[CurveClass]) -> Result<Workload, TraceError> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let weights: Vec<f64> = match &spec.weights {
        Some(w) if w.len() != classes.len() => {
            return Err(TraceError::config(
                CONTEXT,
                "weights",
                format!("{} weights for {} classes ({})", w.len(), classes.len(), class_names(classes)),
            ))
        }
        Some(w) => w.clone(),
        None => classes.iter().map(|c| c.weight).collect(),
    };
    let total: f64 = weights.iter().sum();
    let (low, high) = (spec.work_min.as_secs_f64().ln(), spec.work_max.as_secs_f64().ln());
    let mut arrival_us: u64 = 0;
    let mut jobs = Vec::with_capacity(spec.jobs);
    for i in 0..spec.jobs {
        if i > 0 {
            let u: f64 = rng.random();
            arrival_us = arrival_us.saturating_add((-(1.0 - u).ln() * spec.mean_gap.0 as f64).round() as u64);
        }
        let mut pick = rng.random::<f64>() * total;
        let class = weights
            .iter()
            .position(|w| {
                pick -= w;
                pick < 0.0
            })
            .unwrap_or(classes.len() - 1);
        let secs = if high > low { rng.random_range(low..high).exp() } else { low.exp() }.round();
        let mut job = JobSpec::new(i as u32, 0, Time(arrival_us), 1, secs);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(secs));
        job.job_type = Some(class as u32);
        jobs.push(job);
    }
    Ok(Workload {
        source: format!("synthetic:{spec}"),
        lines: vec![0; jobs.len()],
        jobs,
        tenants: vec![TenantSpec::new("tenant-0")],
        job_types: classes.iter().map(|c| c.curve.name.clone()).collect(),
        notes: vec![format!(
            "MISO workload: job classes {} (speed-vs-slice curves, reconstructed; see the curves file)",
            class_names(classes)
        )],
        ..Workload::default()
    })
}

fn class_names(classes: &[CurveClass]) -> String {
    classes.iter().map(|c| c.curve.name.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_jobs_and_bad_keys_are_named() {
        let classes = crate::mig::bundled_slice_curves().unwrap();
        let spec = MisoSpec::parse(":jobs=50,seed=3").unwrap();
        let a = generate_miso(&spec, &classes).unwrap();
        assert_eq!(a.jobs, generate_miso(&spec, &classes).unwrap().jobs);
        assert_eq!(a.jobs.len(), 50);
        assert!(a.jobs.iter().all(|j| j.gpus == 1 && (600.0..=7200.0).contains(&j.work)));
        let error = MisoSpec::parse(":jbos=3").unwrap_err().to_string();
        assert_eq!(
            error,
            "--synthetic miso, key `jbos`: unknown key (known: jobs, gap, seed, work, weights)"
        );
        // Only saturating jobs (the third class) with weights 0:0:1:0.
        let only = generate_miso(&MisoSpec::parse(":weights=0:0:1:0").unwrap(), &classes).unwrap();
        assert!(only.jobs.iter().all(|j| j.job_type == Some(2)));
        let error =
            generate_miso(&MisoSpec::parse(":weights=1:1").unwrap(), &classes).unwrap_err().to_string();
        assert!(error.contains("2 weights for 4 classes"), "{error}");
        assert!(MisoSpec::parse(":work=2h:1h").is_err());
    }
}
