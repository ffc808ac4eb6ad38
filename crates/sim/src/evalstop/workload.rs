//! The paper's workload, reconstructed: a cluster's worth of jobs arriving as a
//! Poisson stream at a target load, a share of them RLHF jobs with evaluation
//! curves (some over-optimizing), the rest ordinary training jobs that report no
//! evaluations. `cotenant sim --rlhf SPEC` runs it.

use cotenant_core::{JobId, JobKind, JobSpec, Span, TenantSpec, Time};
use cotenant_trace::Workload;

use super::{splitmix64, EvalCurve, EvalCurves, Shape};

/// The generator's parameters (`--rlhf key=value,...`); see [`RlhfSpec::parse`].
#[derive(Clone, Debug, PartialEq)]
pub struct RlhfSpec {
    pub jobs: usize,
    pub seed: u64,
    /// Fraction of jobs that are RLHF jobs (evaluated).
    pub rlhf: f64,
    /// Fraction of RLHF jobs that over-optimize.
    pub hacking: f64,
    /// Offered load on `gpus` GPUs: mean GPU demand / GPUs.
    pub load: f64,
    pub gpus: u32,
    /// Evaluation noise (standard deviation, score units).
    pub sigma: f64,
    /// Fraction of a job's work between evaluations.
    pub interval: f64,
}

impl Default for RlhfSpec {
    fn default() -> Self {
        RlhfSpec {
            jobs: 400,
            seed: 1,
            rlhf: 0.8,
            hacking: 0.3,
            load: 0.9,
            gpus: 64,
            sigma: 0.01,
            interval: 0.05,
        }
    }
}

/// A `--rlhf` spec that cannot be used: names the key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("--rlhf: '{part}' is not key=value")]
    NotKeyValue { part: String },
    #[error("--rlhf: unknown key '{key}'; keys: {KEYS}")]
    UnknownKey { key: String },
    #[error("--rlhf: key '{key}' = '{value}': {problem}")]
    BadValue { key: &'static str, value: String, problem: &'static str },
}

const KEYS: &str = "jobs, seed, rlhf, hacking, load, gpus, sigma, interval";

impl RlhfSpec {
    /// `jobs=400,seed=1,rlhf=0.8,hacking=0.3,load=0.9,gpus=64,sigma=0.01,interval=0.05`;
    /// keys left out keep these defaults.
    pub fn parse(text: &str) -> Result<RlhfSpec, SpecError> {
        let mut spec = RlhfSpec::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| SpecError::NotKeyValue { part: part.to_string() })?;
            let (key, value) = (key.trim(), value.trim());
            let number =
                |key: &'static str, min: f64, max: f64, problem: &'static str| match value.parse::<f64>() {
                    Ok(x) if x.is_finite() && (min..=max).contains(&x) => Ok(x),
                    _ => Err(SpecError::BadValue { key, value: value.to_string(), problem }),
                };
            match key {
                "jobs" => {
                    spec.jobs =
                        number("jobs", 1.0, 100_000.0, "a whole number of jobs from 1 to 100,000")? as usize
                }
                "seed" => {
                    spec.seed = value.parse().map_err(|_| SpecError::BadValue {
                        key: "seed",
                        value: value.to_string(),
                        problem: "a whole number",
                    })?
                }
                "rlhf" => spec.rlhf = number("rlhf", 0.0, 1.0, "a fraction in [0, 1]")?,
                "hacking" => spec.hacking = number("hacking", 0.0, 1.0, "a fraction in [0, 1]")?,
                "load" => spec.load = number("load", 0.01, 1.5, "an offered load in [0.01, 1.5]")?,
                "gpus" => {
                    spec.gpus =
                        number("gpus", 8.0, 100_000.0, "a whole number of GPUs from 8 to 100,000")? as u32
                }
                "sigma" => spec.sigma = number("sigma", 0.0, 1.0, "a noise level in [0, 1] (score units)")?,
                "interval" => {
                    spec.interval = number("interval", 1e-4, 0.5, "a fraction of the work in [1e-4, 0.5]")?
                }
                _ => return Err(SpecError::UnknownKey { key: key.to_string() }),
            }
        }
        Ok(spec)
    }
}

impl std::fmt::Display for RlhfSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self;
        write!(
            f,
            "jobs={},seed={},rlhf={},hacking={},load={},gpus={},sigma={},interval={}",
            s.jobs, s.seed, s.rlhf, s.hacking, s.load, s.gpus, s.sigma, s.interval
        )
    }
}

/// A seeded stream of uniforms in [0, 1) (splitmix64: the sim crate draws no OS randomness).
struct Stream(u64);

impl Stream {
    fn uniform(&mut self) -> f64 {
        self.0 = splitmix64(self.0);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.uniform()
    }
}

/// GPUs per job and their probabilities (small jobs dominate, as in shared clusters).
const GPU_SIZES: [(u32, f64); 4] = [(1, 0.3), (2, 0.3), (4, 0.25), (8, 0.15)];

/// The workload and its curves. Tenant 0 holds the RLHF jobs, tenant 1 the training
/// jobs; every job carries its true duration as its estimate (SRTF with estimates).
pub fn rlhf_workload(spec: &RlhfSpec) -> (Workload, EvalCurves) {
    let mut rng = Stream(spec.seed ^ 0x5EED_E7A1_5709);
    let mut jobs = Vec::with_capacity(spec.jobs);
    let mut curves = Vec::with_capacity(spec.jobs);
    for i in 0..spec.jobs {
        let rlhf = rng.uniform() < spec.rlhf;
        let pick = rng.uniform();
        let mut cumulative = 0.0;
        let gpus = GPU_SIZES.iter().find(|(_, p)| {
            cumulative += p;
            pick < cumulative
        });
        let gpus = gpus.map_or(8, |(g, _)| *g);
        // Half an hour to eight hours at reference speed, log-uniform.
        let secs = (3600.0 * 10f64.powf(rng.range(-0.3, 0.9))).round();
        let mut job = JobSpec::new(i as u32, u32::from(!rlhf), Time::ZERO, gpus, secs);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(secs));
        job.kind = if rlhf { JobKind::Rlhf } else { JobKind::Training };
        let curve = rlhf.then(|| {
            let hacking = rng.uniform() < spec.hacking;
            let shape = if hacking {
                Shape::Hacking { peak: rng.range(0.3, 0.7), decline: rng.range(0.5, 1.5) }
            } else {
                Shape::Healthy
            };
            EvalCurve {
                ceiling: rng.range(0.6, 0.9),
                tau: rng.range(0.08, 0.25),
                shape,
                sigma: spec.sigma,
                interval: spec.interval,
                noise_seed: splitmix64(spec.seed.wrapping_add(i as u64)),
            }
        });
        jobs.push(job);
        curves.push(curve);
    }
    // Poisson arrivals at the offered load: mean gap = mean GPU-seconds / (load x GPUs).
    let gpu_secs: f64 = jobs.iter().map(|j| f64::from(j.gpus) * j.work).sum();
    let mean_gap_secs = gpu_secs / jobs.len().max(1) as f64 / (spec.load * f64::from(spec.gpus));
    let mut arrival_us: u64 = 0;
    for (i, job) in jobs.iter_mut().enumerate() {
        if i > 0 {
            let gap = -(1.0 - rng.uniform()).ln() * mean_gap_secs;
            arrival_us = arrival_us.saturating_add((gap * 1e6).round() as u64);
        }
        job.arrival = Time(arrival_us);
        job.id = JobId(i as u32);
        debug_assert!(job.tenant.index() < 2);
    }
    let tenants = vec![TenantSpec::new("rlhf"), TenantSpec::new("training")];
    let workload = Workload {
        source: format!("rlhf:{spec}"),
        lines: vec![0; jobs.len()],
        jobs,
        tenants,
        job_types: Vec::new(),
        skipped: Vec::new(),
        notes: vec![format!(
            "RLHF workload (reconstructed EvalStop setup): {:.0}% RLHF jobs, {:.0}% of them over-optimizing, offered load {} on {} GPUs",
            spec.rlhf * 100.0,
            spec.hacking * 100.0,
            spec.load,
            spec.gpus
        )],
        wall_clock_origin_us: None,
        statuses: Vec::new(),
    };
    (workload, EvalCurves::new(curves))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_errors_name_the_key() {
        assert_eq!(RlhfSpec::parse("").unwrap(), RlhfSpec::default());
        let spec = RlhfSpec::parse("jobs=10, seed=3, hacking=0.5").unwrap();
        assert_eq!((spec.jobs, spec.seed, spec.hacking), (10, 3, 0.5));
        let error = RlhfSpec::parse("hacking=1.5").unwrap_err();
        assert!(error.to_string().contains("key 'hacking' = '1.5'"), "{error}");
        assert!(matches!(RlhfSpec::parse("sigma=nan"), Err(SpecError::BadValue { key: "sigma", .. })));
        assert!(matches!(RlhfSpec::parse("hackign=0.1"), Err(SpecError::UnknownKey { .. })));
        assert!(matches!(RlhfSpec::parse("jobs"), Err(SpecError::NotKeyValue { .. })));
        assert_eq!(RlhfSpec::parse(&RlhfSpec::default().to_string()).unwrap(), RlhfSpec::default());
    }

    #[test]
    fn the_mix_follows_the_spec_and_is_deterministic() {
        let spec = RlhfSpec { jobs: 2000, ..RlhfSpec::default() };
        let (workload, curves) = rlhf_workload(&spec);
        let rlhf = workload.jobs.iter().filter(|j| j.kind == JobKind::Rlhf).count();
        let hacking =
            (0..2000).filter(|&i| curves.get(JobId(i)).is_some_and(|c| c.true_peak().is_some())).count();
        assert!((rlhf as f64 / 2000.0 - 0.8).abs() < 0.03, "{rlhf} RLHF jobs");
        assert!((hacking as f64 / rlhf as f64 - 0.3).abs() < 0.04, "{hacking} hacking jobs");
        assert!(workload.jobs.iter().all(|j| (j.kind == JobKind::Rlhf) == curves.get(j.id).is_some()));
        assert!(workload.jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        curves.validate(&workload.jobs).unwrap();
        let (again, again_curves) = rlhf_workload(&spec);
        assert_eq!((again.jobs, again_curves), (workload.jobs, curves));
    }
}
