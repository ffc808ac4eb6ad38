//! How fast a job runs on each MIG slice size: speed-versus-slice curves
//! (MISO's model of a job), normalized to the whole GPU (7g = 1).
//!
//! A curve gives the speed on 1, 2, 3, 4 and 7 compute slices (the sizes MIG
//! profiles have); 0 means the job does not fit that slice's memory. Curves are
//! data (`crates/trace/data/mig_curves.toml`, read by `cotenant_trace::mig`).

/// Compute-slice counts a curve is given at.
pub const CURVE_SLICES: [u8; 5] = [1, 2, 3, 4, 7];

/// One job class's speed on each slice size.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceCurve {
    pub name: String,
    /// Speed on `CURVE_SLICES[i]` compute slices, normalized to 7 slices (`speeds[4] == 1`).
    pub speeds: [f64; 5],
}

impl SliceCurve {
    /// Speed proportional to compute: the curve a job without one gets.
    pub fn linear() -> SliceCurve {
        SliceCurve { name: "linear".into(), speeds: CURVE_SLICES.map(|s| f64::from(s) / 7.0) }
    }

    /// Speed on an instance of `compute_slices` slices (5 and 6, which no
    /// profile has, interpolate between 4 and 7; 0 for 0 slices).
    pub fn speed(&self, compute_slices: u8) -> f64 {
        self.at(f64::from(compute_slices), &self.speeds)
    }

    /// Whether the job fits an instance of `compute_slices` slices.
    pub fn fits(&self, compute_slices: u8) -> bool {
        self.speed(compute_slices) > 0.0
    }

    /// Speed on the whole GPU under MPS with `sharers` jobs: the curve at 7 /
    /// `sharers` slices (reconstructed: MPS splits compute about evenly). MPS
    /// shares the whole memory, so a size the job does not fit alone counts as
    /// proportional to the smallest size it fits.
    pub fn mps_speed(&self, sharers: u32) -> f64 {
        let share = 7.0 / f64::from(sharers.max(1));
        let first = self.speeds.iter().position(|&s| s > 0.0).unwrap_or(4);
        let base = CURVE_SLICES[first];
        let mut compute = self.speeds;
        for (i, speed) in compute.iter_mut().enumerate().take(first) {
            *speed = self.speeds[first] * f64::from(CURVE_SLICES[i]) / f64::from(base);
        }
        self.at(share, &compute)
    }

    /// Piecewise-linear interpolation of `speeds` at `slices` (0 at 0 slices).
    fn at(&self, slices: f64, speeds: &[f64; 5]) -> f64 {
        if slices <= 0.0 {
            return 0.0;
        }
        let mut previous = (0.0, 0.0);
        for (&s, &speed) in CURVE_SLICES.iter().zip(speeds) {
            let x = f64::from(s);
            if slices <= x {
                // A size the job does not fit stays 0 rather than interpolating up.
                if speed == 0.0 {
                    return 0.0;
                }
                let (x0, y0) = previous;
                return y0 + (speed - y0) * (slices - x0) / (x - x0);
            }
            previous = (x, speed);
        }
        speeds[4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_sizes_and_keeps_no_fit_at_zero() {
        let curve = SliceCurve { name: "c".into(), speeds: [0.0, 0.5, 0.6, 0.8, 1.0] };
        assert_eq!(curve.speed(1), 0.0);
        assert!(!curve.fits(1));
        assert_eq!(curve.speed(2), 0.5);
        assert!((curve.speed(5) - (0.8 + 0.2 / 3.0)).abs() < 1e-12);
        assert_eq!(curve.speed(7), 1.0);
        // MPS with 7 jobs: 1 slice each; 1g does not fit alone, so 2g's speed halved.
        assert!((curve.mps_speed(7) - 0.25).abs() < 1e-12);
        // Two jobs: 3.5 slices, halfway between 3g (0.6) and 4g (0.8).
        assert!((curve.mps_speed(2) - 0.7).abs() < 1e-12);
        assert_eq!(curve.mps_speed(1), 1.0);
    }
}
