//! Persistent per-GPU speed factors: GPUs of one type are not equally fast.
//!
//! Not All GPUs Are Created Equal (Sinha et al., SC'22) measured GPUs of one SKU in
//! large clusters: their speed varies by 8% on average (22% at most), with a few
//! outliers 1.5x slower than the median, and a GPU keeps its speed (it comes from
//! manufacturing and power management, not from the job). The model here gives each GPU
//! a factor `v` (1.0 = the median GPU of its type): with probability `tail` it is one of
//! the slow outliers, `v = 1 / slow`; otherwise `v = 1 + sigma z` with `z` a standard
//! normal truncated to |z| <= 3 (redrawn outside). The draws follow `ClusterSpec`'s GPU
//! order from a seeded stream, so one seed gives one cluster. `ClusterSpec::gpu_speed`
//! holds the factors; the simulator's `VariabilityRates` turns them into job speeds.
//! docs/variability.md has the formulas and the figures they come from.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cluster::ClusterError;

/// Smallest and largest speed factor a cluster may hold (measured files included).
pub const MIN_SPEED: f64 = 0.05;
pub const MAX_SPEED: f64 = 4.0;
/// The normal body is truncated at this many standard deviations.
pub const TRUNCATE_SIGMAS: f64 = 3.0;
/// Largest `sigma` accepted: 3 sigma below 1 stays above 0.1.
pub const MAX_SIGMA: f64 = 0.3;

/// How a cluster's speed factors are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeedModel {
    /// Standard deviation of the normal body (0.08: ~8% spread, the paper's average).
    pub sigma: f64,
    /// Share of GPUs that are slow outliers, in [0, 0.5].
    pub tail: f64,
    /// How many times slower than the median an outlier is (the paper: up to 1.5).
    pub slow: f64,
    pub seed: u64,
}

impl SpeedModel {
    /// The paper's average cluster: sigma 0.08, 1% of GPUs 1.5x slower.
    pub const DEFAULT: SpeedModel = SpeedModel { sigma: 0.08, tail: 0.01, slow: 1.5, seed: 0 };
    /// The paper's worst case: 22% spread (sigma 0.22 plus the tail, 2% of GPUs 1.5x slower).
    pub const STRESS: SpeedModel = SpeedModel { sigma: 0.22, tail: 0.02, slow: 1.5, seed: 0 };

    /// Why the model cannot draw, naming the key at fault.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=MAX_SIGMA).contains(&self.sigma) {
            return Err(format!("sigma={} must be in [0, {MAX_SIGMA}]", self.sigma));
        }
        if !(0.0..=0.5).contains(&self.tail) {
            return Err(format!("tail={} must be in [0, 0.5]", self.tail));
        }
        if !(1.0..=10.0).contains(&self.slow) {
            return Err(format!("slow={} must be in [1, 10] (times slower than the median)", self.slow));
        }
        Ok(())
    }

    /// One factor per GPU, `gpus` of them, from the model's seed.
    pub fn draw(&self, gpus: u32) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x5653_5045_4544_0001);
        (0..gpus)
            .map(|_| {
                if rng.random::<f64>() < self.tail {
                    return (1.0 / self.slow).max(MIN_SPEED);
                }
                let z = loop {
                    let z = standard_normal(&mut rng);
                    if z.abs() <= TRUNCATE_SIGMAS {
                        break z;
                    }
                };
                (1.0 + self.sigma * z).clamp(MIN_SPEED, MAX_SPEED)
            })
            .collect()
    }
}

/// A standard normal draw (Box-Muller, one of the pair).
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// `ClusterSpec::gpu_speed` must be empty or one factor in [MIN_SPEED, MAX_SPEED] per GPU.
pub fn check_speeds(speeds: &[f64], gpus: u32) -> Result<(), ClusterError> {
    if speeds.is_empty() {
        return Ok(());
    }
    if speeds.len() != gpus as usize {
        return Err(ClusterError::GpuSpeedCount { given: speeds.len(), gpus });
    }
    if let Some((gpu, &speed)) =
        speeds.iter().enumerate().find(|(_, v)| !(MIN_SPEED..=MAX_SPEED).contains(*v))
    {
        return Err(ClusterError::BadGpuSpeed {
            gpu,
            speed: speed.to_string(),
            min: MIN_SPEED.to_string(),
            max: MAX_SPEED.to_string(),
        });
    }
    Ok(())
}

/// Measured factors as text: one number per line in GPU order, `#` starts a comment,
/// blank lines are skipped. An error names the 1-based line.
pub fn parse_speed_file(text: &str) -> Result<Vec<f64>, String> {
    let mut speeds = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let speed: f64 = line.parse().map_err(|_| format!("line {}: '{line}' is not a number", i + 1))?;
        if !(MIN_SPEED..=MAX_SPEED).contains(&speed) {
            return Err(format!(
                "line {}: speed factor {speed} must be in [{MIN_SPEED}, {MAX_SPEED}]",
                i + 1
            ));
        }
        speeds.push(speed);
    }
    Ok(speeds)
}

/// Summary statistics of a set of factors, as docs/variability.md reports them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeedStats {
    pub gpus: usize,
    pub mean: f64,
    pub median: f64,
    /// Standard deviation over the mean (our reading of the paper's "variation").
    pub cv: f64,
    pub min: f64,
    pub max: f64,
    /// 5th and 95th percentiles.
    pub p5: f64,
    pub p95: f64,
    /// Share of GPUs at least 1.4x slower than the median (the paper's outliers).
    pub slow_share: f64,
}

impl SpeedStats {
    /// `None` for no factors.
    pub fn of(speeds: &[f64]) -> Option<SpeedStats> {
        if speeds.is_empty() {
            return None;
        }
        let mut sorted = speeds.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let var = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let at = |q: f64| sorted[((q * (n - 1) as f64).round() as usize).min(n - 1)];
        let median = at(0.5);
        let slow = sorted.iter().filter(|&&v| v * 1.4 <= median).count();
        Some(SpeedStats {
            gpus: n,
            mean,
            median,
            cv: var.sqrt() / mean,
            min: sorted[0],
            max: sorted[n - 1],
            p5: at(0.05),
            p95: at(0.95),
            slow_share: slow as f64 / n as f64,
        })
    }
}

impl std::fmt::Display for SpeedStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} GPUs, mean {:.3}, median {:.3}, spread (sd/mean) {:.1}%, p5-p95 {:.3}-{:.3}, min {:.3}, max {:.3}, {:.1}% at least 1.4x slower than the median",
            self.gpus,
            self.mean,
            self.median,
            self.cv * 100.0,
            self.p5,
            self.p95,
            self.min,
            self.max,
            self.slow_share * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20,000 GPUs from the default model: mean within 0.01 of 1 (the tail pulls it to
    /// 0.99 x 1 + 0.01 x 0.667 = 0.9967), spread (sd/mean) within 0.08 +- 0.01 (body
    /// 0.08 x 0.986 for the 3-sigma truncation, plus the tail's 0.01 x 0.99 x 0.333^2),
    /// slow share within 1% +- 0.3%.
    #[test]
    fn default_model_statistics() {
        let s = SpeedStats::of(&SpeedModel::DEFAULT.draw(20_000)).unwrap();
        assert!((s.mean - 0.9967).abs() < 0.005, "{s}");
        assert!((s.median - 1.0).abs() < 0.005, "{s}");
        assert!((s.cv - 0.087).abs() < 0.01, "{s}");
        assert!((s.slow_share - 0.01).abs() < 0.003, "{s}");
        assert!(s.min >= 1.0 / 1.5 - 1e-12 && s.max <= 1.0 + 3.0 * 0.08 + 1e-12, "{s}");
    }

    /// Stress: body sd 0.22 x 0.986 = 0.217, tail 0.02 x 0.98 x 0.333^2 = 0.0022 of variance:
    /// sqrt(0.98 x 0.0471 + 0.0022) / 0.993 = 0.221, within 0.22 +- 0.01; slow share: the 2%
    /// tail plus the body below 1/1.4 (z < -1.30, 9.7% of 98%), about 11.5%.
    #[test]
    fn stress_model_statistics() {
        let s = SpeedStats::of(&SpeedModel::STRESS.draw(20_000)).unwrap();
        assert!((s.cv - 0.22).abs() < 0.01, "{s}");
        assert!((s.mean - 0.993).abs() < 0.01, "{s}");
        assert!((s.slow_share - 0.115).abs() < 0.02, "{s}");
    }

    #[test]
    fn draws_are_seeded() {
        let m = SpeedModel::DEFAULT;
        assert_eq!(m.draw(500), m.draw(500));
        assert_ne!(m.draw(500), SpeedModel { seed: 1, ..m }.draw(500));
        // A prefix of the GPUs draws the same factors: the stream follows GPU order.
        assert_eq!(m.draw(500)[..100], m.draw(100)[..]);
    }

    #[test]
    fn zero_sigma_and_tail_give_ones() {
        let m = SpeedModel { sigma: 0.0, tail: 0.0, ..SpeedModel::DEFAULT };
        assert!(m.draw(64).iter().all(|&v| v == 1.0));
    }

    #[test]
    fn bad_models_and_files_are_named() {
        assert!(SpeedModel { sigma: 0.5, ..SpeedModel::DEFAULT }.check().unwrap_err().contains("sigma"));
        assert!(SpeedModel { tail: 0.9, ..SpeedModel::DEFAULT }.check().unwrap_err().contains("tail"));
        assert!(SpeedModel { slow: 0.5, ..SpeedModel::DEFAULT }.check().unwrap_err().contains("slow"));
        assert_eq!(parse_speed_file("# measured\n1.0\n\n0.9 # slow\n").unwrap(), vec![1.0, 0.9]);
        assert_eq!(parse_speed_file("1.0\nfast\n").unwrap_err(), "line 2: 'fast' is not a number");
        assert!(parse_speed_file("0\n").unwrap_err().starts_with("line 1:"));
        assert!(check_speeds(&[1.0; 3], 4).is_err());
        assert!(check_speeds(&[1.0, f64::NAN], 2).is_err());
        assert!(check_speeds(&[], 4).is_ok());
    }
}
