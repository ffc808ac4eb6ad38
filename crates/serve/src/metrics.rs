//! Latency distributions, SLO attainment and fairness figures.

/// A log-linear histogram of microsecond values: 64 linear sub-buckets per power of
/// two, so a reported percentile is within 1/64 (1.6%) of the exact value.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum_us: u128,
    max_us: u64,
}

const SUB_BUCKET_BITS: u32 = 7;
const SUB_BUCKETS: u64 = 1 << SUB_BUCKET_BITS;

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { counts: vec![0; (64 * SUB_BUCKETS) as usize], total: 0, sum_us: 0, max_us: 0 }
    }
}

impl Histogram {
    fn bucket(value: u64) -> usize {
        if value < SUB_BUCKETS {
            return value as usize;
        }
        let magnitude = 63 - value.leading_zeros() - SUB_BUCKET_BITS + 1;
        let sub = (value >> magnitude) - SUB_BUCKETS / 2;
        (u64::from(magnitude) * SUB_BUCKETS / 2 + SUB_BUCKETS / 2 + sub) as usize
    }

    /// The smallest value that lands in `bucket` (inverse of [`Self::bucket`]).
    fn lower_bound(bucket: usize) -> u64 {
        let bucket = bucket as u64;
        if bucket < SUB_BUCKETS {
            return bucket;
        }
        let magnitude = (bucket - SUB_BUCKETS / 2) / (SUB_BUCKETS / 2);
        let sub = (bucket - SUB_BUCKETS / 2) % (SUB_BUCKETS / 2) + SUB_BUCKETS / 2;
        sub << magnitude
    }

    pub fn record(&mut self, value_us: u64) {
        self.counts[Self::bucket(value_us)] += 1;
        self.total += 1;
        self.sum_us += u128::from(value_us);
        self.max_us = self.max_us.max(value_us);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// Exact mean (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.total as f64
        }
    }

    /// The `quantile` (0..=1) as a bucket's lower bound; 0 when empty; the exact max at 1.
    pub fn quantile_us(&self, quantile: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        if quantile >= 1.0 {
            return self.max_us;
        }
        let rank = ((quantile * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Self::lower_bound(bucket);
            }
        }
        self.max_us
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }
}

/// Nearest-rank percentile of an unsorted slice (sorts a copy); 0 when empty.
pub fn percentile(values: &[f64], quantile: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile_sorted(&sorted, quantile)
}

pub fn percentile_sorted(sorted: &[f64], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Nearest-rank quantiles of `values` at each of `levels` (each in 0..=1), in the
/// order given; all 0 when `values` is empty. A bounded sketch of a distribution.
pub fn quantiles(values: &[f64], levels: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    levels.iter().map(|&q| percentile_sorted(&sorted, q)).collect()
}

/// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one takes all.
pub fn jain_index(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let sum_squares: f64 = values.iter().map(|x| x * x).sum();
    if values.is_empty() || sum_squares == 0.0 {
        return 1.0;
    }
    sum * sum / (values.len() as f64 * sum_squares)
}

/// p50/p90/p99 of a distribution, in the unit of its input.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
}

impl Percentiles {
    pub fn of(values: &[f64]) -> Percentiles {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mean = if sorted.is_empty() { 0.0 } else { sorted.iter().sum::<f64>() / sorted.len() as f64 };
        Percentiles {
            p50: percentile_sorted(&sorted, 0.5),
            p90: percentile_sorted(&sorted, 0.9),
            p99: percentile_sorted(&sorted, 0.99),
            mean,
        }
    }

    pub fn of_histogram_ms(histogram: &Histogram) -> Percentiles {
        let ms = |q| histogram.quantile_us(q) as f64 / 1e3;
        Percentiles { p50: ms(0.5), p90: ms(0.9), p99: ms(0.99), mean: histogram.mean_us() / 1e3 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_within_resolution() {
        let mut histogram = Histogram::default();
        for value in 1..=10_000_u64 {
            histogram.record(value * 10);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.9, 90_000.0), (0.99, 99_000.0)] {
            let got = histogram.quantile_us(q) as f64;
            assert!((got - exact).abs() / exact < 0.02, "q{q}: {got}");
        }
        assert_eq!(histogram.quantile_us(1.0), 100_000);
        for value in [0, 1, 63, 64, 65, 127, 128, 1000, 123_456_789] {
            assert!(Histogram::lower_bound(Histogram::bucket(value)) <= value);
        }
    }

    #[test]
    fn jain_bounds() {
        assert_eq!(jain_index(&[3.0, 3.0, 3.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(percentile(&[5.0, 1.0, 3.0], 0.5), 3.0);
        // Nearest rank of 4 values: q 0 and 0.25 -> 1st, 0.5 -> 2nd, 0.6 -> 3rd, 1 -> 4th.
        assert_eq!(
            quantiles(&[40.0, 10.0, 30.0, 20.0], &[0.0, 0.25, 0.5, 0.6, 1.0]),
            [10.0, 10.0, 20.0, 30.0, 40.0]
        );
        assert_eq!(quantiles(&[], &[0.5]), [0.0]);
    }
}
