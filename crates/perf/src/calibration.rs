//! Fitting the roofline's per-GPU parameters to measured kernel and collective times,
//! and the error statistics the validation harness (`cotenant calibrate`) reports.
//!
//! Every fit minimises the mean squared log error, sum (ln predicted - ln measured)^2 / n,
//! by a deterministic compass search over log-parameters (no randomness, fixed start,
//! step halving), so the same profiles always give the same numbers.

use crate::gpu::GpuSpec;
use crate::roofline::{elementwise_op_s, linear_op_s, RooflineParams};

/// One measured linear-layer kernel: a `k` x `n` weight over `tokens` tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearPoint {
    pub k: f64,
    pub n: f64,
    pub tokens: f64,
    pub bytes_per_param: f64,
    pub seconds: f64,
}

/// One measured element-wise kernel: operator `op` (an index into
/// [`crate::roofline::elementwise_bytes_per_token`]) moving `bytes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElementwisePoint {
    pub op: usize,
    pub bytes: f64,
    pub seconds: f64,
}

/// One measured collective: `wire_bytes` is the bytes each GPU sends (2 (n-1)/n x size for
/// a ring all-reduce, the size for send/recv).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectivePoint {
    pub wire_bytes: f64,
    pub seconds: f64,
}

/// A fitted model of one collective on one link: NCCL's large-message line
/// (latency + wire bytes / bandwidth), the small-message protocol's line where it is
/// faster, and a floor no call goes below:
/// max(floor, min(latency + w / bandwidth, small_latency + w / small_bandwidth)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectiveFit {
    pub latency_s: f64,
    pub bandwidth_gb_per_s: f64,
    /// Least time of a call, seconds; 0 for none.
    pub floor_s: f64,
    pub small_latency_s: f64,
    /// 0: no small-message protocol.
    pub small_bandwidth_gb_per_s: f64,
}

impl CollectiveFit {
    /// One line, latency + w / bandwidth (no floor, no small-message protocol).
    pub fn line(latency_s: f64, bandwidth_gb_per_s: f64) -> CollectiveFit {
        CollectiveFit {
            latency_s,
            bandwidth_gb_per_s,
            floor_s: 0.0,
            small_latency_s: 0.0,
            small_bandwidth_gb_per_s: 0.0,
        }
    }

    /// Predicted seconds for `wire_bytes`.
    pub fn seconds(&self, wire_bytes: f64) -> f64 {
        let large = self.latency_s + wire_bytes / (self.bandwidth_gb_per_s * 1e9);
        let small = if self.small_bandwidth_gb_per_s > 0.0 {
            self.small_latency_s + wire_bytes / (self.small_bandwidth_gb_per_s * 1e9)
        } else {
            f64::INFINITY
        };
        large.min(small).max(self.floor_s)
    }

    /// `params` with this fit as its all-reduce.
    pub fn apply(&self, params: RooflineParams) -> RooflineParams {
        RooflineParams {
            allreduce_latency_s: self.latency_s,
            allreduce_bandwidth_gb_per_s: self.bandwidth_gb_per_s,
            allreduce_floor_s: self.floor_s,
            allreduce_small_latency_s: self.small_latency_s,
            allreduce_small_bandwidth_gb_per_s: self.small_bandwidth_gb_per_s,
            ..params
        }
    }
}

/// Compass search: from `start`, try +-step on each coordinate in turn, keep any
/// improvement, halve the step when none helps; stop below `min_step` or after
/// `max_rounds` rounds. Deterministic.
pub fn compass_search(
    objective: impl Fn(&[f64]) -> f64,
    start: &[f64],
    step: f64,
    min_step: f64,
) -> Vec<f64> {
    let mut x = start.to_vec();
    let mut best = objective(&x);
    let mut step = step;
    let mut rounds = 0;
    while step >= min_step && rounds < 100_000 {
        rounds += 1;
        let mut improved = false;
        for i in 0..x.len() {
            for sign in [1.0, -1.0] {
                let mut trial = x.clone();
                trial[i] += sign * step;
                let value = objective(&trial);
                if value < best {
                    best = value;
                    x = trial;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    x
}

fn mean_sq_log_error(points: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut sum, mut n) = (0.0, 0.0);
    for (predicted, measured) in points {
        let e = (predicted.max(1e-15) / measured).ln();
        sum += e * e;
        n += 1.0;
    }
    if n == 0.0 {
        0.0
    } else {
        sum / n
    }
}

/// Fits compute and memory efficiency, the linear smooth-max knee and the per-kernel fixed cost
/// of linear layers on `gpu`, starting from `base` (whose other fields are kept).
pub fn fit_linear(points: &[LinearPoint], gpu: &GpuSpec, base: RooflineParams) -> RooflineParams {
    let params_of = |x: &[f64]| RooflineParams {
        compute_efficiency: x[0].exp(),
        memory_efficiency: x[1].exp(),
        linear_kernel_s: x[2].exp() * 1e-6,
        linear_knee_exponent: x[3].clamp(1.0, 16.0),
        ..base
    };
    let objective = |x: &[f64]| {
        let p = params_of(x);
        mean_sq_log_error(
            points.iter().map(|q| (linear_op_s(q.k, q.n, q.tokens, q.bytes_per_param, gpu, &p), q.seconds)),
        )
    };
    let start =
        [base.compute_efficiency.ln(), base.memory_efficiency.ln(), 2f64.ln(), base.linear_knee_exponent];
    params_of(&compass_search(objective, &start, 0.5, 1e-4))
}

/// Fits each element-wise operator's memory efficiency and per-kernel fixed cost on `gpu`
/// (operators without points keep `base`'s values).
pub fn fit_elementwise(points: &[ElementwisePoint], gpu: &GpuSpec, base: RooflineParams) -> RooflineParams {
    let mut fitted = base;
    for op in 0..base.elementwise_efficiency.len() {
        let mine: Vec<&ElementwisePoint> = points.iter().filter(|q| q.op == op).collect();
        if mine.is_empty() {
            continue;
        }
        let params_of = |x: &[f64]| {
            let mut p = base;
            p.elementwise_efficiency[op] = x[0].exp();
            p.elementwise_kernel_s[op] = x[1].exp() * 1e-6;
            p
        };
        let objective = |x: &[f64]| {
            let p = params_of(x);
            mean_sq_log_error(mine.iter().map(|q| (elementwise_op_s(op, q.bytes, gpu, &p), q.seconds)))
        };
        let x = compass_search(objective, &[base.elementwise_efficiency[op].ln(), 2f64.ln()], 0.5, 1e-4);
        fitted.elementwise_efficiency[op] = x[0].exp();
        fitted.elementwise_kernel_s[op] = x[1].exp() * 1e-6;
    }
    fitted
}

/// Fits latency and bandwidth of one collective on one link (one line, no floor, no
/// small-message protocol).
pub fn fit_collective_line(points: &[CollectivePoint]) -> CollectiveFit {
    let fit_of = |x: &[f64]| CollectiveFit::line(x[0].exp() * 1e-6, x[1].exp());
    let objective = |x: &[f64]| {
        let f = fit_of(x);
        mean_sq_log_error(points.iter().map(|q| (f.seconds(q.wire_bytes), q.seconds)))
    };
    fit_of(&compass_search(objective, &[10f64.ln(), 100f64.ln()], 0.5, 1e-4))
}

/// Fits the full collective model (large-message line, small-message protocol, floor)
/// of one collective on one link. The objective has kinks, so the search starts from the
/// one-line fit and from a fixed grid of small-protocol lines and floors (deterministic)
/// and keeps the best; a fit no better than the line alone is the line.
pub fn fit_collective(points: &[CollectivePoint]) -> CollectiveFit {
    let line = fit_collective_line(points);
    let error =
        |f: &CollectiveFit| mean_sq_log_error(points.iter().map(|q| (f.seconds(q.wire_bytes), q.seconds)));
    let fit_of = |x: &[f64]| CollectiveFit {
        latency_s: x[0].exp() * 1e-6,
        bandwidth_gb_per_s: x[1].exp(),
        floor_s: x[2].exp() * 1e-6,
        small_latency_s: x[3].exp() * 1e-6,
        small_bandwidth_gb_per_s: x[4].exp(),
    };
    let least = points.iter().map(|q| q.seconds).fold(f64::INFINITY, f64::min);
    let (mut best, mut best_error) = (line, error(&line));
    for floor in [0.5 * least, least] {
        for small_latency in [0.25, 1.0] {
            for small_bandwidth in [0.05, 0.25] {
                let start = [
                    (line.latency_s * 1e6).ln(),
                    line.bandwidth_gb_per_s.ln(),
                    (floor.max(1e-9) * 1e6).ln(),
                    (small_latency * line.latency_s * 1e6).ln(),
                    (small_bandwidth * line.bandwidth_gb_per_s).ln(),
                ];
                let fit = fit_of(&compass_search(|x| error(&fit_of(x)), &start, 0.5, 1e-3));
                let e = error(&fit);
                if e < best_error {
                    (best, best_error) = (fit, e);
                }
            }
        }
    }
    best
}

/// Median and 90th percentile of absolute relative errors |predicted / measured - 1|.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorStats {
    pub count: usize,
    pub median: f64,
    pub p90: f64,
    /// Mean signed relative error (positive: the model is slow).
    pub bias: f64,
}

impl ErrorStats {
    /// Statistics of (predicted, measured) pairs; percentiles by nearest rank.
    pub fn of(pairs: &[(f64, f64)]) -> ErrorStats {
        if pairs.is_empty() {
            return ErrorStats::default();
        }
        let signed: Vec<f64> = pairs.iter().map(|(p, m)| p / m - 1.0).collect();
        let mut abs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let rank = |q: f64| abs[((q * abs.len() as f64).ceil() as usize).clamp(1, abs.len()) - 1];
        ErrorStats {
            count: pairs.len(),
            median: rank(0.5),
            p90: rank(0.9),
            bias: signed.iter().sum::<f64>() / signed.len() as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::find_gpu;

    fn gpu() -> GpuSpec {
        *find_gpu("H100-SXM").expect("catalog")
    }

    #[test]
    fn linear_fit_recovers_known_parameters() {
        let truth = RooflineParams {
            compute_efficiency: 0.62,
            memory_efficiency: 0.81,
            linear_kernel_s: 7e-6,
            linear_knee_exponent: 4.0,
            ..RooflineParams::default()
        };
        let mut points = Vec::new();
        for (k, n) in [(4096.0, 6144.0), (4096.0, 28672.0), (14336.0, 4096.0), (8192.0, 1024.0)] {
            for tokens in [1.0, 8.0, 64.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0] {
                let seconds = linear_op_s(k, n, tokens, 2.0, &gpu(), &truth);
                points.push(LinearPoint { k, n, tokens, bytes_per_param: 2.0, seconds });
            }
        }
        let fitted = fit_linear(&points, &gpu(), RooflineParams::default());
        assert!((fitted.compute_efficiency - 0.62).abs() < 0.005, "{fitted:?}");
        assert!((fitted.memory_efficiency - 0.81).abs() < 0.005, "{fitted:?}");
        assert!((fitted.linear_kernel_s - 7e-6).abs() < 0.2e-6, "{fitted:?}");
        assert!((fitted.linear_knee_exponent - 4.0).abs() < 0.1, "{fitted:?}");
    }

    #[test]
    fn elementwise_and_collective_fits_recover_known_parameters() {
        let truth = RooflineParams {
            elementwise_efficiency: [0.55, 0.55, 0.8, 0.7, 0.9],
            elementwise_kernel_s: [4e-6, 4e-6, 2e-6, 3e-6, 1e-6],
            ..Default::default()
        };
        let mut points = Vec::new();
        for op in [0, 2, 3, 4] {
            for bytes in [1e4, 1e5, 1e6, 1e7, 1e8] {
                points.push(ElementwisePoint {
                    op,
                    bytes,
                    seconds: elementwise_op_s(op, bytes, &gpu(), &truth),
                });
            }
        }
        let fitted = fit_elementwise(&points, &gpu(), RooflineParams::default());
        for op in [0, 2, 3, 4] {
            assert!(
                (fitted.elementwise_efficiency[op] - truth.elementwise_efficiency[op]).abs() < 0.003,
                "{fitted:?}"
            );
            assert!(
                (fitted.elementwise_kernel_s[op] - truth.elementwise_kernel_s[op]).abs() < 0.05e-6,
                "{fitted:?}"
            );
        }
        // Operator 1 had no points and keeps the default.
        assert_eq!(fitted.elementwise_efficiency[1], 0.75);
        let link = CollectiveFit::line(35e-6, 180.0);
        let points: Vec<CollectivePoint> = [2048.0, 1e5, 1e6, 1e7, 6e7]
            .iter()
            .map(|&wire_bytes| CollectivePoint { wire_bytes, seconds: link.seconds(wire_bytes) })
            .collect();
        let fitted = fit_collective(&points);
        assert!((fitted.latency_s - 35e-6).abs() < 0.2e-6, "{fitted:?}");
        assert!((fitted.bandwidth_gb_per_s - 180.0).abs() < 1.0, "{fitted:?}");
    }

    /// The piecewise collective by hand: floor 30 us, large line 20 us + w / 200 GB/s,
    /// small line 5 us + w / 20 GB/s. At w = 100 KB: small 5 + 5 = 10 us, large 20 + 0.5
    /// = 20.5 us, min 10 us, floor -> 30 us. At 1 MB: small 55 us, large 25 us -> 30 us
    /// (floor). At 10 MB: large 70 us, small 505 us -> 70 us. At 600 KB with no floor:
    /// small 35 us, large 23 us -> 23 us.
    #[test]
    fn piecewise_collective_by_hand_and_fit() {
        let truth = CollectiveFit {
            latency_s: 20e-6,
            bandwidth_gb_per_s: 200.0,
            floor_s: 30e-6,
            small_latency_s: 5e-6,
            small_bandwidth_gb_per_s: 20.0,
        };
        assert!((truth.seconds(1e5) - 30e-6).abs() < 1e-12);
        assert!((truth.seconds(1e6) - 30e-6).abs() < 1e-12);
        assert!((truth.seconds(1e7) - 70e-6).abs() < 1e-12);
        let no_floor = CollectiveFit { floor_s: 0.0, ..truth };
        assert!((no_floor.seconds(6e5) - 23e-6).abs() < 1e-12);
        assert!((no_floor.seconds(1e4) - 5.5e-6).abs() < 1e-12);
        // A floor with a small-message protocol below a large one: the fit reproduces the
        // curve (parameters on a flat stretch are not identifiable, the times are).
        let curve = CollectiveFit { floor_s: 8e-6, ..truth };
        let points: Vec<CollectivePoint> = (0..60)
            .map(|i| 2048.0 * 1.2f64.powi(i))
            .map(|wire_bytes| CollectivePoint { wire_bytes, seconds: curve.seconds(wire_bytes) })
            .collect();
        let fitted = fit_collective(&points);
        let line = fit_collective_line(&points);
        let worst = |f: &CollectiveFit| {
            points.iter().map(|q| (f.seconds(q.wire_bytes) / q.seconds - 1.0).abs()).fold(0.0, f64::max)
        };
        assert!(worst(&fitted) < 0.02, "{fitted:?} {}", worst(&fitted));
        assert!(worst(&line) > 0.2, "the line alone cannot follow it: {line:?}");
    }

    #[test]
    fn error_stats_by_hand() {
        // Relative errors 0.1, -0.2, 0.05, 0.3: sorted |e| 0.05 0.1 0.2 0.3; median (rank 2)
        // 0.1; p90 (rank ceil(3.6) = 4) 0.3; bias (0.1 - 0.2 + 0.05 + 0.3) / 4 = 0.0625.
        let stats = ErrorStats::of(&[(1.1, 1.0), (0.8, 1.0), (2.1, 2.0), (1.3, 1.0)]);
        assert_eq!(stats.count, 4);
        assert!((stats.median - 0.1).abs() < 1e-12);
        assert!((stats.p90 - 0.3).abs() < 1e-12);
        assert!((stats.bias - 0.0625).abs() < 1e-12);
    }
}
