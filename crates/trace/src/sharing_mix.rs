//! The SJF-BSBF paper's simulated setup as a generator: `--synthetic
//! sjf-bsbf[,jobs=N][,rate=R/h][,seed=S]` gives training jobs of a model mix with
//! GPU memory needs (fixed and activation parts, GiB per GPU) and iteration times,
//! for a cluster of 32 nodes x 8 GPUs of 48 GB (`--cluster nodes=32,gpus-per-node=8,gpu=A6000`).
//!
//! The paper publishes its setup (cluster, "at most 2 jobs per GPU", memory-aware
//! sharing) but not this table; the models, batch sizes, memory and iteration times
//! below are reconstructed: typical single-GPU figures for these models at the named
//! batch on a 48 GB Ampere GPU, chosen so that small models fit two to a GPU and the
//! large ones need gradient accumulation to share (docs/experiments/sjf-bsbf.md).
//! GPU counts follow Philly's mix (mostly 1 GPU); run times are log-uniform between
//! 12 minutes and 12 hours, rounded to whole iterations; arrivals are Poisson.

use cotenant_core::{GpuMemory, JobSpec, Span, TenantSpec, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster_config::key_values;
use crate::synthetic::{next_arrival_us, parse_jobs, parse_rate};
use crate::{TraceError, Workload};

/// One model of the mix: name (with batch), GPU memory per GPU, seconds per iteration alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MixModel {
    pub name: &'static str,
    pub memory: GpuMemory,
    pub iteration_secs: f64,
}

const fn model(name: &'static str, total_gib: f64, activation_gib: f64, iteration_secs: f64) -> MixModel {
    MixModel { name, memory: GpuMemory { total_gib, activation_gib }, iteration_secs }
}

/// The model mix (reconstructed; see the module doc). Drawn uniformly.
pub const MODELS: [MixModel; 8] = [
    model("resnet18-b128", 3.0, 2.0, 0.035),
    model("lstm-b20", 4.0, 2.5, 0.05),
    model("transformer-b4096", 12.0, 8.0, 0.12),
    model("resnet50-b64", 14.0, 11.0, 0.19),
    model("inception3-b64", 16.0, 12.0, 0.22),
    model("vgg16-b64", 17.0, 12.0, 0.27),
    model("bert-base-b32", 22.0, 16.0, 0.30),
    model("gpt2-medium-b8", 34.0, 22.0, 0.45),
];

/// GPU counts and their probabilities (Philly-like: mostly one GPU).
const GPU_MIX: [(u32, f64); 4] = [(1, 0.60), (2, 0.20), (4, 0.12), (8, 0.08)];

/// Run time alone, log-uniform over this range (seconds).
const RUN_SECS: (f64, f64) = (720.0, 43_200.0);

/// Parameters of one generated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SharingMixSpec {
    pub jobs: usize,
    pub jobs_per_hour: f64,
    pub seed: u64,
}

const CONTEXT: &str = "synthetic spec sjf-bsbf";

impl SharingMixSpec {
    /// Parses what follows `sjf-bsbf` in `--synthetic` (empty, or `,key=value...`).
    pub fn parse(rest: &str) -> Result<SharingMixSpec, TraceError> {
        let mut spec = SharingMixSpec { jobs: 1000, jobs_per_hour: 50.0, seed: 0 };
        let rest = rest.strip_prefix(',').unwrap_or(rest);
        if rest.is_empty() {
            return Ok(spec);
        }
        for (key, value) in key_values(rest, CONTEXT)? {
            match key {
                "jobs" => spec.jobs = parse_jobs(value)?,
                "rate" => spec.jobs_per_hour = parse_rate(value)?,
                "seed" => {
                    spec.seed = value.parse().map_err(|_| {
                        TraceError::config(CONTEXT, key, format!("expected an integer, got {value:?}"))
                    })?
                }
                _ => return Err(TraceError::config(CONTEXT, key, "unknown key (known: jobs, rate, seed)")),
            }
        }
        Ok(spec)
    }
}

/// The workload: one tenant, job types = the models' names, oracle duration estimates.
pub fn generate_sharing_mix(spec: &SharingMixSpec) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mean_gap_secs = 3600.0 / spec.jobs_per_hour;
    let mut arrival_us: u64 = 0;
    let mut jobs = Vec::with_capacity(spec.jobs);
    for i in 0..spec.jobs {
        arrival_us = next_arrival_us(&mut rng, arrival_us, i, mean_gap_secs);
        let m = rng.random_range(0..MODELS.len());
        let gpus = draw_gpus(rng.random());
        let (lo, hi) = RUN_SECS;
        let secs = lo * (hi / lo).powf(rng.random::<f64>());
        let iterations = (secs / MODELS[m].iteration_secs).round().max(1.0);
        let work = iterations * MODELS[m].iteration_secs;
        let mut job = JobSpec::new(i as u32, 0, Time(arrival_us), gpus, work);
        job.job_type = Some(m as u32);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(work));
        job.gpu_memory = MODELS[m].memory;
        jobs.push(job);
    }
    Workload {
        source: format!(
            "synthetic:sjf-bsbf,jobs={},rate={}/h,seed={}",
            spec.jobs, spec.jobs_per_hour, spec.seed
        ),
        lines: vec![0; jobs.len()],
        jobs,
        tenants: vec![TenantSpec::new("tenant-0".to_string())],
        job_types: MODELS.iter().map(|m| m.name.to_string()).collect(),
        skipped: Vec::new(),
        notes: Vec::new(),
        wall_clock_origin_us: None,
        statuses: Vec::new(),
    }
}

fn draw_gpus(u: f64) -> u32 {
    let mut acc = 0.0;
    for (gpus, p) in GPU_MIX {
        acc += p;
        if u < acc {
            return gpus;
        }
    }
    GPU_MIX[GPU_MIX.len() - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_the_mix_deterministically() {
        let spec = SharingMixSpec::parse(",jobs=200,seed=3").unwrap();
        let a = generate_sharing_mix(&spec);
        assert_eq!(a.jobs, generate_sharing_mix(&spec).jobs);
        assert_eq!(a.jobs.len(), 200);
        for job in &a.jobs {
            let m = MODELS[job.job_type.unwrap() as usize];
            assert_eq!(job.gpu_memory, m.memory);
            let iterations = job.work / m.iteration_secs;
            assert!((iterations - iterations.round()).abs() < 1e-6);
            assert!([1, 2, 4, 8].contains(&job.gpus));
        }
        // Every model fits alone on a 48 GB GPU.
        assert!(MODELS
            .iter()
            .all(|m| m.memory.need_gib(1) <= 48.0 && m.memory.activation_gib < m.memory.total_gib));
    }

    #[test]
    fn bad_keys_are_named() {
        let e = SharingMixSpec::parse(",jobz=3").unwrap_err().to_string();
        assert!(e.contains("key `jobz`"), "{e}");
        assert!(SharingMixSpec::parse(",rate=fast").is_err());
    }
}
