//! Seeded synthetic workloads: Poisson arrivals, the duration and GPU-count
//! distributions of Gavel (OSDI'20) and Synergy (OSDI'22), tenants with weights.
//!
//! Spec keys (`key=value,...`; all optional):
//! - `jobs=N` (default 1000)
//! - `rate=R/h` | `R/min` | `R/s` | `R` (per hour; default 20/h): Poisson arrivals.
//!   The first job arrives at time 0.
//! - `seed=S` (default 0)
//! - `tenants=T` (default: the number of weights, else 1); jobs pick a tenant uniformly.
//! - `weights=1:1:2:4`: fair-share weights, one per tenant (default all 1).
//! - `durations=gavel` (default) or seconds: Gavel's run times, 80% 10^U(1.5,3)
//!   minutes and 20% 10^U(3,4) minutes; or one fixed run time.
//! - `gpus=gavel` (default) or a count: Gavel's (Philly-derived) GPU counts,
//!   70% 1, 10% 2, 15% 4, 5% 8; or one fixed count.
//! - `job-types=A|B|C`: each job draws a job type uniformly from the list
//!   (e.g. Gavel's `ResNet-18 (batch size 64)`); none by default.
//! - `job-mix=20:70:10`: draw job types with these weights instead (one per type).
//! - `cpus-per-gpu=C`, `mem-gib-per-gpu=M`: each job requests ceil(C x GPUs) CPUs
//!   and floor(M x GPUs) GiB of host memory (default 0: none stated).
//! - `preset=synergy`: Synergy's (OSDI'22) workload: job types image|language|speech
//!   with mix 20:70:10, requests at the proportional point of its servers
//!   (3 CPUs and 62.5 GB per GPU); keys after it override (e.g. `gpus=1`).
//! - `classes=llm-pretrain:2|rlhf:3|etl:5` (commas also separate the list, as in
//!   `classes=llm-pretrain:2,rlhf:3`) or `class=NAME`: each job draws a workload class
//!   by weight and takes its GPUs, run time, kind, profile, elastic range and memory
//!   from it (crate::workload_classes, docs/workloads.md). Not with a `gpus` or
//!   `durations` other than `gavel`.
//!
//! `work` is the run time in seconds at reference speed; `duration_estimate` is
//! that run time (an oracle). Draws happen in a fixed order per job (gap,
//! tenant, duration, GPUs, job type) from one ChaCha8 stream, so a spec and
//! seed always give the same workload.

use std::fmt;

use cotenant_core::limits::{MAX_ARRIVAL_SPAN, MAX_GPUS_PER_JOB, MAX_JOB_DURATION, MAX_TENANTS};
use cotenant_core::{Elastic, JobId, JobKind, JobSpec, Span, TenantId, TenantSpec, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster_config::key_values;
use crate::error::TraceError;
use crate::text::{describe_span, exceeds_secs};
use crate::workload_classes::ClassMix;
use crate::Workload;

/// Where run times come from.
#[derive(Clone, Debug, PartialEq)]
pub enum DurationDist {
    /// Gavel's mixture: 80% 10^U(1.5,3) minutes, 20% 10^U(3,4) minutes.
    Gavel,
    FixedSecs(f64),
}

/// Where GPU counts come from.
#[derive(Clone, Debug, PartialEq)]
pub enum GpuDist {
    /// 70% 1, 10% 2, 15% 4, 5% 8.
    Gavel,
    Fixed(u32),
}

/// A synthetic workload description; see the module doc for the text form.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    pub jobs: usize,
    pub jobs_per_hour: f64,
    pub seed: u64,
    /// One weight per tenant; its length is the number of tenants.
    pub weights: Vec<f64>,
    pub durations: DurationDist,
    pub gpus: GpuDist,
    pub job_types: Vec<String>,
    /// Fraction of jobs that are elastic (EDL), with the range
    /// `[max(1, gpus / 2), 2 x gpus]` around their drawn size.
    pub elastic: f64,
    /// Weights of the job types (empty: uniform).
    pub job_mix: Vec<f64>,
    /// Host requests per GPU (0: none stated).
    pub cpus_per_gpu: f64,
    pub memory_gib_per_gpu: f64,
    /// Workload classes and their weights (`classes=`/`class=`; `None`: Gavel's jobs).
    pub classes: Option<ClassMix>,
}

impl Default for SyntheticSpec {
    fn default() -> SyntheticSpec {
        SyntheticSpec {
            jobs: 1000,
            jobs_per_hour: 20.0,
            seed: 0,
            weights: vec![1.0],
            durations: DurationDist::Gavel,
            gpus: GpuDist::Gavel,
            job_types: Vec::new(),
            elastic: 0.0,
            job_mix: Vec::new(),
            cpus_per_gpu: 0.0,
            memory_gib_per_gpu: 0.0,
            classes: None,
        }
    }
}

/// Most jobs a spec may ask for: a generated workload must fit in memory.
pub const MAX_SYNTHETIC_JOBS: usize = 10_000_000;

const CONTEXT: &str = "synthetic spec";
const KEYS: &str = "jobs, rate, seed, tenants, weights, durations, gpus, job-types, elastic, job-mix, cpus-per-gpu, mem-gib-per-gpu, preset, classes, class";

impl SyntheticSpec {
    /// Parses `key=value,...` (see the module doc). Unknown keys are errors.
    pub fn parse(text: &str) -> Result<SyntheticSpec, TraceError> {
        let mut spec = SyntheticSpec::default();
        let mut tenants: Option<usize> = None;
        let mut weights: Option<Vec<f64>> = None;
        let text = crate::workload_classes::join_class_lists(text);
        let mut shape_key: Option<&str> = None;
        for (key, value) in key_values(&text, CONTEXT)? {
            if matches!(key, "gpus" | "durations") && value != "gavel" {
                shape_key = Some(key);
            }
            match key {
                "jobs" => spec.jobs = parse_jobs(value)?,
                "rate" => spec.jobs_per_hour = parse_rate(value)?,
                "seed" => {
                    spec.seed =
                        value.parse().map_err(|_| err(key, format!("expected an integer, got {value:?}")))?
                }
                "tenants" => {
                    let t = crate::cluster_config::parse_positive(CONTEXT, key, value)? as usize;
                    if t > MAX_TENANTS {
                        return Err(err(
                            key,
                            format!(
                                "{t} tenants exceeds the limit of {MAX_TENANTS} (core::limits::MAX_TENANTS)"
                            ),
                        ));
                    }
                    tenants = Some(t)
                }
                "weights" => weights = Some(parse_weights(value)?),
                "durations" => spec.durations = parse_durations(value)?,
                "gpus" => spec.gpus = parse_gpus(value)?,
                "job-types" => spec.job_types = parse_job_types(value)?,
                "elastic" => spec.elastic = parse_fraction(key, value)?,
                "job-mix" => {
                    spec.job_mix = parse_weights(value).map_err(|_| {
                        err(key, format!("expected positive numbers separated by ':', got {value:?}"))
                    })?
                }
                "cpus-per-gpu" => spec.cpus_per_gpu = parse_per_gpu(key, value, 1024.0)?,
                "mem-gib-per-gpu" => spec.memory_gib_per_gpu = parse_per_gpu(key, value, 65_536.0)?,
                "preset" if value == "synergy" => {
                    spec.job_types = ["image", "language", "speech"].map(String::from).to_vec();
                    spec.job_mix = vec![20.0, 70.0, 10.0];
                    spec.cpus_per_gpu = 3.0;
                    spec.memory_gib_per_gpu = 62.5;
                }
                "preset" => return Err(err(key, format!("unknown preset {value:?} (known: synergy)"))),
                "classes" | "class" if spec.classes.is_some() => {
                    return Err(err(key, "give either `classes` or `class`, once"));
                }
                "classes" => spec.classes = Some(ClassMix::parse(key, value)?),
                "class" if value.contains(['|', ':']) => {
                    return Err(err(
                        key,
                        format!("expected one class name (for a mix use `classes`), got {value:?}"),
                    ));
                }
                "class" => spec.classes = Some(ClassMix::parse(key, value)?),
                _ => return Err(err(key, format!("unknown key (known: {KEYS})"))),
            }
        }
        if let (Some(_), Some(shape)) = (&spec.classes, shape_key) {
            return Err(err(
                shape,
                "workload classes set each job's GPUs and run time: drop this key or `classes`/`class`",
            ));
        }
        spec.weights = match (tenants, weights) {
            (Some(t), Some(w)) if w.len() != t => {
                return Err(err("weights", format!("{} weights given for {t} tenants", w.len())));
            }
            (_, Some(w)) => w,
            (Some(t), None) => vec![1.0; t],
            (None, None) => vec![1.0],
        };
        if spec.weights.len() > MAX_TENANTS {
            return Err(err(
                "weights",
                format!(
                    "{} weights exceeds the limit of {MAX_TENANTS} tenants (core::limits::MAX_TENANTS)",
                    spec.weights.len()
                ),
            ));
        }
        if !spec.job_mix.is_empty() && spec.job_mix.len() != spec.job_types.len() {
            return Err(err(
                "job-mix",
                format!("{} weights given for {} job types", spec.job_mix.len(), spec.job_types.len()),
            ));
        }
        // The expected span of the arrivals: jobs x mean gap.
        let span_secs = spec.jobs as f64 * 3600.0 / spec.jobs_per_hour;
        if span_secs > MAX_ARRIVAL_SPAN.as_secs_f64() {
            return Err(err(
                "rate",
                format!(
                    "{} jobs at {}/h arrive over about {:.0} days, more than the limit of {} (core::limits::MAX_ARRIVAL_SPAN)",
                    spec.jobs,
                    spec.jobs_per_hour,
                    span_secs / 86_400.0,
                    describe_span(MAX_ARRIVAL_SPAN)
                ),
            ));
        }
        Ok(spec)
    }
}

fn err(key: &str, message: impl Into<String>) -> TraceError {
    TraceError::config(CONTEXT, key, message)
}

fn parse_fraction(key: &str, value: &str) -> Result<f64, TraceError> {
    match value.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(err(key, format!("expected a fraction between 0 and 1, got {value:?}"))),
    }
}

pub(crate) fn parse_jobs(value: &str) -> Result<usize, TraceError> {
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_SYNTHETIC_JOBS).contains(&n) => Ok(n),
        _ => Err(err("jobs", format!("expected an integer from 1 to {MAX_SYNTHETIC_JOBS}, got {value:?}"))),
    }
}

pub(crate) fn parse_rate(value: &str) -> Result<f64, TraceError> {
    let (number, per_hour) = match value.split_once('/') {
        None => (value, 1.0),
        Some((n, "h" | "hour")) => (n, 1.0),
        Some((n, "min" | "m")) => (n, 60.0),
        Some((n, "s" | "sec")) => (n, 3600.0),
        Some((_, unit)) => return Err(err("rate", format!("unknown unit {unit:?} (use /h, /min or /s)"))),
    };
    match number.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r * per_hour),
        _ => Err(err("rate", format!("expected a positive rate such as 20/h, got {value:?}"))),
    }
}

fn parse_weights(value: &str) -> Result<Vec<f64>, TraceError> {
    value
        .split(':')
        .map(|w| match w.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
            _ => Err(err("weights", format!("expected positive numbers separated by ':', got {value:?}"))),
        })
        .collect()
}

fn parse_durations(value: &str) -> Result<DurationDist, TraceError> {
    if value == "gavel" {
        return Ok(DurationDist::Gavel);
    }
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s > MAX_JOB_DURATION.as_secs_f64() => {
            Err(err("durations", exceeds_secs(value, MAX_JOB_DURATION, "MAX_JOB_DURATION")))
        }
        Ok(s) if s.is_finite() && s > 0.0 => Ok(DurationDist::FixedSecs(s)),
        _ => {
            Err(err("durations", format!("expected `gavel` or a positive number of seconds, got {value:?}")))
        }
    }
}

fn parse_gpus(value: &str) -> Result<GpuDist, TraceError> {
    if value == "gavel" {
        return Ok(GpuDist::Gavel);
    }
    let gpus = crate::cluster_config::parse_positive(CONTEXT, "gpus", value)
        .map_err(|_| err("gpus", format!("expected `gavel` or a positive integer, got {value:?}")))?;
    if gpus > MAX_GPUS_PER_JOB {
        return Err(err(
            "gpus",
            format!("{gpus} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} GPUs per job (core::limits::MAX_GPUS_PER_JOB)"),
        ));
    }
    Ok(GpuDist::Fixed(gpus))
}

fn parse_job_types(value: &str) -> Result<Vec<String>, TraceError> {
    let types: Vec<String> = value.split('|').map(|t| t.trim().to_string()).collect();
    if types.iter().any(String::is_empty) {
        return Err(err("job-types", "expected names separated by '|', got an empty name"));
    }
    Ok(types)
}

impl fmt::Display for SyntheticSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let weights: Vec<String> = self.weights.iter().map(|w| w.to_string()).collect();
        write!(
            f,
            "jobs={},rate={}/h,seed={},tenants={},weights={}",
            self.jobs,
            self.jobs_per_hour,
            self.seed,
            self.weights.len(),
            weights.join(":")
        )?;
        match &self.durations {
            DurationDist::Gavel => write!(f, ",durations=gavel")?,
            DurationDist::FixedSecs(s) => write!(f, ",durations={s}")?,
        }
        match &self.gpus {
            GpuDist::Gavel => write!(f, ",gpus=gavel")?,
            GpuDist::Fixed(n) => write!(f, ",gpus={n}")?,
        }
        if !self.job_types.is_empty() {
            write!(f, ",job-types={}", self.job_types.join("|"))?;
        }
        if !self.job_mix.is_empty() {
            let mix: Vec<String> = self.job_mix.iter().map(|w| w.to_string()).collect();
            write!(f, ",job-mix={}", mix.join(":"))?;
        }
        if self.cpus_per_gpu > 0.0 || self.memory_gib_per_gpu > 0.0 {
            write!(f, ",cpus-per-gpu={},mem-gib-per-gpu={}", self.cpus_per_gpu, self.memory_gib_per_gpu)?;
        }
        if self.elastic > 0.0 {
            write!(f, ",elastic={}", self.elastic)?;
        }
        if let Some(classes) = &self.classes {
            write!(f, ",classes={classes}")?;
        }
        Ok(())
    }
}

/// Salt of the elastic draws' stream (`seed ^ ELASTIC_STREAM`).
const ELASTIC_STREAM: u64 = 0xE1A5_71C0_0000_0001;
/// Salt of the workload classes' stream (`seed ^ CLASS_STREAM`).
const CLASS_STREAM: u64 = 0xC1A5_5E50_0000_0002;

/// Generates the workload a spec describes. Deterministic in the spec.
pub fn generate(spec: &SyntheticSpec) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut elastic_rng = ChaCha8Rng::seed_from_u64(spec.seed ^ ELASTIC_STREAM);
    let mut class_rng = ChaCha8Rng::seed_from_u64(spec.seed ^ CLASS_STREAM);
    let mut drawn_classes = Vec::new();
    let tenants: Vec<TenantSpec> = spec
        .weights
        .iter()
        .enumerate()
        .map(|(i, &w)| TenantSpec { weight: w, ..TenantSpec::new(format!("tenant-{i}")) })
        .collect();
    let mean_gap_secs = 3600.0 / spec.jobs_per_hour;
    let mut arrival_us: u64 = 0;
    let mut jobs = Vec::with_capacity(spec.jobs);
    for i in 0..spec.jobs {
        arrival_us = next_arrival_us(&mut rng, arrival_us, i, mean_gap_secs);
        let tenant = rng.random_range(0..tenants.len()) as u32;
        let secs = draw_duration_secs(&mut rng, &spec.durations);
        let gpus = draw_gpus(&mut rng, &spec.gpus);
        let job_type = (!spec.job_types.is_empty()).then(|| draw_job_type(&mut rng, spec));
        jobs.push(JobSpec {
            id: JobId(i as u32),
            tenant: TenantId(tenant),
            arrival: Time(arrival_us),
            gpus,
            work: secs,
            duration_estimate: Some(Span::from_secs_f64_ceil(secs)),
            priority: 0,
            kind: JobKind::Training,
            job_type,
            cpus: (spec.cpus_per_gpu * f64::from(gpus)).ceil() as u32,
            memory_gib: (spec.memory_gib_per_gpu * f64::from(gpus)).floor() as u32,
            elastic: None,
            gpu_memory: Default::default(),
            profile: Default::default(),
        });
        // From a stream of its own: arrivals, tenants and job types stay as without classes.
        if let Some(mix) = &spec.classes {
            let job = jobs.last_mut().expect("just pushed");
            let drawn = crate::workload_classes::draw(mix.draw(&mut class_rng), &mut class_rng);
            crate::workload_classes::apply(&drawn, job, spec);
            drawn_classes.push((drawn.class, drawn.gpus, drawn.secs));
        }
        // From a stream of its own: the jobs are the same whatever the fraction.
        if spec.elastic > 0.0 && elastic_rng.random::<f64>() < spec.elastic {
            let job = jobs.last_mut().expect("just pushed");
            let gpus = job.gpus;
            job.elastic =
                Elastic::new((gpus / 2).max(1), gpus.saturating_mul(2).min(MAX_GPUS_PER_JOB), gpus).ok();
        }
    }
    let notes = match &spec.classes {
        Some(mix) => crate::workload_classes::class_notes(mix, &drawn_classes),
        None => Vec::new(),
    };
    Workload {
        source: format!("synthetic:{spec}"),
        lines: vec![0; jobs.len()],
        jobs,
        tenants,
        job_types: spec.job_types.clone(),
        skipped: Vec::new(),
        notes,
        wall_clock_origin_us: None,
        statuses: Vec::new(),
    }
}

/// Poisson arrivals: job 0 at `previous_us` (0), each later one an exponential gap
/// with the given mean after the one before.
pub(crate) fn next_arrival_us(rng: &mut ChaCha8Rng, previous_us: u64, i: usize, mean_gap_secs: f64) -> u64 {
    match i {
        0 => previous_us,
        _ => previous_us.saturating_add(exponential_us(rng, mean_gap_secs)),
    }
}

/// An exponential gap with the given mean, in whole microseconds.
fn exponential_us(rng: &mut ChaCha8Rng, mean_secs: f64) -> u64 {
    // 1 - U lies in (0, 1], so the logarithm is finite.
    let u: f64 = rng.random();
    let secs = -(1.0 - u).ln() * mean_secs;
    (secs * 1e6).round() as u64
}

pub(crate) fn draw_duration_secs(rng: &mut ChaCha8Rng, dist: &DurationDist) -> f64 {
    match dist {
        DurationDist::FixedSecs(s) => *s,
        DurationDist::Gavel => {
            let long = rng.random::<f64>() >= 0.8;
            let exponent = if long { rng.random_range(3.0..4.0) } else { rng.random_range(1.5..3.0) };
            60.0 * 10f64.powf(exponent)
        }
    }
}

/// Uniform over the types, or by `job_mix` weights when given.
fn draw_job_type(rng: &mut ChaCha8Rng, spec: &SyntheticSpec) -> u32 {
    if spec.job_mix.is_empty() {
        return rng.random_range(0..spec.job_types.len()) as u32;
    }
    let total: f64 = spec.job_mix.iter().sum();
    let mut r = rng.random::<f64>() * total;
    for (i, w) in spec.job_mix.iter().enumerate() {
        if r < *w {
            return i as u32;
        }
        r -= w;
    }
    spec.job_mix.len() as u32 - 1
}

fn parse_per_gpu(key: &str, value: &str, max: f64) -> Result<f64, TraceError> {
    match value.parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=max).contains(&x) => Ok(x),
        _ => Err(err(key, format!("expected a number from 0 to {max}, got {value:?}"))),
    }
}

fn draw_gpus(rng: &mut ChaCha8Rng, dist: &GpuDist) -> u32 {
    match dist {
        GpuDist::Fixed(n) => *n,
        GpuDist::Gavel => match rng.random::<f64>() {
            r if r < 0.70 => 1,
            r if r < 0.80 => 2,
            r if r < 0.95 => 4,
            _ => 8,
        },
    }
}
