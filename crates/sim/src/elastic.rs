//! Elastic jobs in the world model (EDL): how fast a job runs on `n` GPUs, and
//! what changing `n` costs.
//!
//! Scaling: a job's reference rate (1.0 under [`crate::ReferenceRate`]) is its
//! speed on the GPUs it requested; on `n` GPUs it runs `speedup(n) /
//! speedup(requested)` times that, with `speedup(n) = n x e^log2(n)`: each
//! doubling keeps a fraction `e` of linear scaling (`e = 0.9`: 1.8x on 2, 3.24x
//! on 4, 5.83x on 8 GPUs).
//!
//! Costs, from EDL (PAPERS.md, "EDL"):
//! - stop-free scale-out: new workers prepare in the background (`prepare`,
//!   10-30 s in the paper) while the job keeps training on its old GPUs at its
//!   old rate (the new GPUs are held, idle); then all workers pause to switch,
//!   `switch_fixed + model_gib / bandwidth` (about 0.5 s + model / bandwidth);
//! - graceful scale-in: the leaving workers stop after a step, `scale_in` (about 0);
//! - stop-resume (the baseline EDL beats): every change checkpoints and restarts
//!   the job, `stop_resume` (30-60 s in the paper) at rate 0.

use cotenant_core::{JobSpec, Span};

/// How a running job changes its GPU count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScalingMode {
    /// EDL: stop-free scale-out and graceful scale-in.
    #[default]
    StopFree,
    /// Checkpoint, stop and restart on the new GPUs at every change.
    StopResume,
}

/// The world's parameters for elastic jobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElasticModel {
    pub mode: ScalingMode,
    /// Fraction of linear speedup kept per doubling of GPUs.
    pub efficiency: f64,
    /// Background preparation of new workers before a stop-free switch.
    pub prepare: Span,
    /// Fixed part of the stop-free switching pause.
    pub switch_fixed: Span,
    /// Model state moved to new workers at the switch, GiB.
    pub model_gib: f64,
    /// Bandwidth it moves at, GiB/s.
    pub bandwidth_gib_s: f64,
    /// Pause of a graceful scale-in.
    pub scale_in: Span,
    /// Pause of a stop-resume change (checkpoint, restart, restore).
    pub stop_resume: Span,
}

impl Default for ElasticModel {
    fn default() -> Self {
        // Paper ranges' midpoints; a 0.5 GiB model (about 125M fp32 parameters)
        // over 10 Gb/s Ethernet (1.25 GB/s): a 0.4 s transfer, 0.9 s pause in all.
        ElasticModel {
            mode: ScalingMode::StopFree,
            efficiency: 0.9,
            prepare: Span::from_secs(20),
            switch_fixed: Span(500_000),
            model_gib: 0.5,
            bandwidth_gib_s: 1.25,
            scale_in: Span::ZERO,
            stop_resume: Span::from_secs(45),
        }
    }
}

impl ElasticModel {
    /// `n x e^log2(n)`; 0 GPUs give 0.
    pub fn speedup(&self, gpus: u32) -> f64 {
        if gpus == 0 {
            return 0.0;
        }
        let n = f64::from(gpus);
        n * self.efficiency.powf(n.log2())
    }

    /// The rate of `job` on `gpus` GPUs, given its rate `at_request` on the
    /// GPUs it asked for. Rigid jobs and jobs at their requested size keep it.
    pub fn rate(&self, job: &JobSpec, gpus: u32, at_request: f64) -> f64 {
        if job.elastic.is_none() || gpus == job.gpus {
            return at_request;
        }
        at_request * self.speedup(gpus) / self.speedup(job.gpus)
    }

    /// The switching pause of the stop-free mode.
    pub fn switch_pause(&self) -> Span {
        let transfer = if self.bandwidth_gib_s > 0.0 { self.model_gib / self.bandwidth_gib_s } else { 0.0 };
        self.switch_fixed + Span((transfer * 1e6).round().clamp(0.0, 1e15) as u64)
    }

    /// The phases a change from `from` to `to` GPUs goes through before the job
    /// runs at its new rate: (span, rate) pairs, `old_rate` being its rate before.
    pub fn phases(&self, from: u32, to: u32, old_rate: f64) -> Vec<(Span, f64)> {
        match self.mode {
            ScalingMode::StopResume => vec![(self.stop_resume, 0.0)],
            ScalingMode::StopFree if to > from => vec![(self.prepare, old_rate), (self.switch_pause(), 0.0)],
            ScalingMode::StopFree => vec![(self.scale_in, 0.0)],
        }
    }

    /// GPU-time a change costs: GPUs held while paused, and the added GPUs held
    /// idle while new workers prepare (GPU-microseconds).
    pub fn overhead_gpu_us(&self, from: u32, to: u32) -> u64 {
        self.phases(from, to, 1.0)
            .iter()
            .map(|&(span, rate)| {
                let idle = if rate > 0.0 { to.saturating_sub(from) } else { to };
                span.0.saturating_mul(u64::from(idle))
            })
            .sum()
    }
}

/// Most a resize phase may last (a day): larger values are typos.
const MAX_PHASE: Span = Span(86_400_000_000);

/// The model for `--scaling MODE` and `--elastic-model KEY=VALUE,...`; errors name the key.
pub fn parse_model(mode: &str, options: &str) -> Result<ElasticModel, String> {
    let mode = match mode {
        "stop-free" => ScalingMode::StopFree,
        "stop-resume" => ScalingMode::StopResume,
        other => return Err(format!("unknown scaling mode {other:?} (known: stop-free, stop-resume)")),
    };
    let mut model = ElasticModel { mode, ..ElasticModel::default() };
    for pair in options.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not KEY=VALUE"))?;
        let number = |lo: f64, hi: f64| match value.parse::<f64>() {
            Ok(x) if (lo..=hi).contains(&x) => Ok(x),
            _ => Err(format!("{key}={value}: expected a number between {lo} and {hi}")),
        };
        let span = || match Span::parse(value) {
            Ok(s) if s <= MAX_PHASE => Ok(s),
            Ok(_) => Err(format!("{key}={value}: at most one day")),
            Err(e) => Err(format!("{key}={value}: {e}")),
        };
        match key {
            "efficiency" => model.efficiency = number(0.01, 1.0)?,
            "prepare" => model.prepare = span()?,
            "switch" => model.switch_fixed = span()?,
            "model-gib" => model.model_gib = number(0.0, 1e6)?,
            "bandwidth" => model.bandwidth_gib_s = number(1e-3, 1e6)?,
            "scale-in" => model.scale_in = span()?,
            "stop-resume" => model.stop_resume = span()?,
            _ => {
                return Err(format!(
                    "unknown key {key:?} (known: efficiency, prepare, switch, model-gib, bandwidth, scale-in, stop-resume)"
                ))
            }
        }
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Elastic, Time};

    #[test]
    fn speedup_keeps_a_fraction_per_doubling() {
        let m = ElasticModel::default();
        assert_eq!(m.speedup(1), 1.0);
        assert!((m.speedup(2) - 1.8).abs() < 1e-12);
        assert!((m.speedup(4) - 3.24).abs() < 1e-12);
        assert!((m.speedup(8) - 5.832).abs() < 1e-12);
        let mut job = JobSpec::new(0, 0, Time::ZERO, 2, 100.0);
        assert_eq!(m.rate(&job, 4, 1.0), 1.0, "rigid jobs keep their rate");
        job.elastic = Some(Elastic::new(1, 4, 2).unwrap());
        assert!((m.rate(&job, 4, 1.0) - 1.8).abs() < 1e-12, "3.24 / 1.8");
        assert!((m.rate(&job, 1, 1.0) - 1.0 / 1.8).abs() < 1e-12);
    }

    #[test]
    fn phases_by_mode_and_direction() {
        let m = ElasticModel::default();
        // 0.5 GiB / 1.25 GiB/s = 0.4 s, plus 0.5 s.
        assert_eq!(m.switch_pause(), Span(900_000));
        assert_eq!(m.phases(2, 4, 0.7), vec![(Span::from_secs(20), 0.7), (Span(900_000), 0.0)]);
        assert_eq!(m.phases(4, 2, 0.7), vec![(Span::ZERO, 0.0)]);
        // 20 s x 2 added GPUs idle + 0.9 s x 4 GPUs paused = 43.6 GPU-s.
        assert_eq!(m.overhead_gpu_us(2, 4), 43_600_000);
        assert_eq!(m.overhead_gpu_us(4, 2), 0);
        let resume = ElasticModel { mode: ScalingMode::StopResume, ..m };
        assert_eq!(resume.phases(2, 4, 0.7), vec![(Span::from_secs(45), 0.0)]);
        assert_eq!(resume.overhead_gpu_us(4, 2), 90_000_000, "45 s x 2 GPUs");
    }

    #[test]
    fn options_parse_and_name_bad_keys() {
        let m = parse_model("stop-resume", "efficiency=0.8, stop-resume=60s,prepare=10s").unwrap();
        assert_eq!(
            (m.mode, m.efficiency, m.stop_resume, m.prepare),
            (ScalingMode::StopResume, 0.8, Span::from_secs(60), Span::from_secs(10))
        );
        assert_eq!(parse_model("stop-free", "").unwrap(), ElasticModel::default());
        assert!(parse_model("pause", "").unwrap_err().contains("unknown scaling mode"));
        assert!(parse_model("stop-free", "efficency=0.8").unwrap_err().contains("unknown key \"efficency\""));
        assert!(parse_model("stop-free", "efficiency=2").unwrap_err().contains("efficiency=2"));
        assert!(parse_model("stop-free", "prepare=3d").unwrap_err().contains("at most one day"));
        assert!(parse_model("stop-free", "prepare").unwrap_err().contains("KEY=VALUE"));
    }
}
