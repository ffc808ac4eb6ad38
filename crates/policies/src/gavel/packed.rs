//! Gavel's space-sharing (`_packed`) max-min allocation: variables for every
//! job alone and every pair of jobs with the same scale factor co-located on
//! the same GPUs, with the pair rates of the throughput table
//! (`MaxMinFairnessPolicyWithPacking.get_allocation`).
//!
//! - Job i's normalized throughput: `sum over combinations c containing i and
//!   types j of rate_i(c, j) * sf / (norm_i * w_i * prop_i) * X[c][j]`, with
//!   `norm_i` the sum of i's isolated rates over types and `prop_i` its
//!   proportional-share throughput (Gavel normalizes by both).
//! - A pair uses `sf` GPUs of a type once; a job's time over all its
//!   combinations is at most 1.
//! - Maximize the minimum over jobs.
//!
//! Not registered as a policy: running two jobs on one GPU needs the engine
//! change described in `notes/core-change-request.md`. Solved with good_lp's
//! simplex (pairs couple two jobs' rows, which the structured barrier solver
//! does not handle); ties are not centred.

use good_lp::{constraint, variable, Expression, Solution as _, SolverModel};

use super::allocation::AllocJob;
use super::solver::SolveError;

/// Indices of two co-located jobs, the smaller first.
pub type JobPair = (usize, usize);

/// A packed allocation: time fractions per type for each job alone and each pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedAllocation {
    pub singles: Vec<Vec<f64>>,
    /// (job index a, job index b, a < b) and its fractions per type.
    pub pairs: Vec<(JobPair, Vec<f64>)>,
    /// The optimal minimum normalized throughput.
    pub min_normalized: f64,
}

/// `pair_rates(a, b, type)` gives `(rate of a, rate of b)` when co-located,
/// `None` if unmeasured. Jobs pair only with equal scale factors and positive rates.
pub fn max_min_packed(
    jobs: &[AllocJob],
    capacity: &[u32],
    pair_rates: impl Fn(usize, usize, usize) -> Option<(f64, f64)>,
) -> Result<PackedAllocation, SolveError> {
    let (m, n) = (jobs.len(), capacity.len());
    if m == 0 {
        return Ok(PackedAllocation { singles: Vec::new(), pairs: Vec::new(), min_normalized: 0.0 });
    }
    let total: f64 = capacity.iter().map(|&c| c as f64).sum::<f64>().max(1.0);
    let scale: Vec<f64> = (0..m)
        .map(|i| {
            let job = &jobs[i];
            let norm: f64 = job.steps_per_s.iter().sum();
            let prop: f64 = job.steps_per_s.iter().zip(capacity).map(|(r, &c)| r * c as f64 / total).sum();
            if norm > 0.0 && prop > 0.0 {
                job.scale_factor.max(1) as f64 / (norm * job.weight.max(f64::MIN_POSITIVE) * prop)
            } else {
                0.0
            }
        })
        .collect();
    let mut pairs: Vec<(JobPair, Vec<(f64, f64)>)> = Vec::new();
    for a in 0..m {
        for b in a + 1..m {
            if jobs[a].scale_factor != jobs[b].scale_factor {
                continue;
            }
            let rates: Vec<(f64, f64)> = (0..n).map(|t| pair_rates(a, b, t).unwrap_or((0.0, 0.0))).collect();
            if rates.iter().any(|(x, y)| *x > 0.0 && *y > 0.0) {
                pairs.push(((a, b), rates));
            }
        }
    }
    let mut vars = good_lp::variables!();
    let singles: Vec<Vec<good_lp::Variable>> =
        (0..m).map(|_| (0..n).map(|_| vars.add(variable().min(0.0))).collect()).collect();
    let pair_vars: Vec<Vec<good_lp::Variable>> =
        pairs.iter().map(|_| (0..n).map(|_| vars.add(variable().min(0.0))).collect()).collect();
    let t = vars.add(variable());
    let mut model = vars.maximise(t).using(good_lp::microlp);
    for j in 0..n {
        let mut used: Expression = (0..m).map(|i| jobs[i].scale_factor.max(1) as f64 * singles[i][j]).sum();
        for (p, ((a, _), rates)) in pairs.iter().enumerate() {
            if rates[j].0 > 0.0 && rates[j].1 > 0.0 {
                used += jobs[*a].scale_factor.max(1) as f64 * pair_vars[p][j];
            }
        }
        model = model.with(constraint!(used <= capacity[j] as f64));
    }
    for i in 0..m {
        let mut time: Expression = singles[i].iter().copied().sum();
        let mut throughput: Expression =
            (0..n).map(|j| jobs[i].steps_per_s[j] * scale[i] * singles[i][j]).sum();
        for (p, ((a, b), rates)) in pairs.iter().enumerate() {
            if *a != i && *b != i {
                continue;
            }
            for j in 0..n {
                let own = if *a == i { rates[j].0 } else { rates[j].1 };
                time += pair_vars[p][j];
                throughput += own * scale[i] * pair_vars[p][j];
            }
        }
        model = model.with(constraint!(time <= 1.0));
        if scale[i] > 0.0 {
            model = model.with(constraint!(throughput >= t));
        }
    }
    // Pairs on a type where one job cannot run get no time.
    for (p, (_, rates)) in pairs.iter().enumerate() {
        for j in 0..n {
            if !(rates[j].0 > 0.0 && rates[j].1 > 0.0) {
                model = model.with(constraint!(pair_vars[p][j] <= 0.0));
            }
        }
    }
    let solution = model.solve().map_err(|_| SolveError::NoConvergence(0))?;
    let value = |v: good_lp::Variable| solution.value(v).clamp(0.0, 1.0);
    Ok(PackedAllocation {
        singles: singles.iter().map(|row| row.iter().map(|&v| value(v)).collect()).collect(),
        pairs: pairs
            .iter()
            .zip(&pair_vars)
            .map(|((ab, _), vs)| (*ab, vs.iter().map(|&v| value(v)).collect()))
            .collect(),
        min_normalized: solution.value(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::JobId;

    fn job(id: u32, rate: f64) -> AllocJob {
        AllocJob {
            id: JobId(id),
            steps_per_s: vec![rate],
            scale_factor: 1,
            weight: 1.0,
            steps_remaining: 1000.0,
            secs_since_arrival: 0.0,
        }
    }

    #[test]
    fn pairs_that_pack_well_beat_time_sharing() {
        // Two jobs, one GPU. Alone each runs at 10 steps/s; together each keeps 8.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let unpacked = max_min_packed(&jobs, &[1], |_, _, _| None).unwrap();
        let packed = max_min_packed(&jobs, &[1], |_, _, _| Some((8.0, 8.0))).unwrap();
        assert!(packed.min_normalized > 1.5 * unpacked.min_normalized, "{packed:?} vs {unpacked:?}");
        assert!(packed.pairs[0].1[0] > 0.99, "the pair takes the GPU: {packed:?}");
    }

    #[test]
    fn pairs_that_interfere_are_not_used() {
        // Together each keeps only 3 of 10 steps/s: time sharing (5 each) is better.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let unpacked = max_min_packed(&jobs, &[1], |_, _, _| None).unwrap();
        let packed = max_min_packed(&jobs, &[1], |_, _, _| Some((3.0, 3.0))).unwrap();
        assert!((packed.min_normalized - unpacked.min_normalized).abs() < 1e-9);
    }

    #[test]
    fn different_scale_factors_never_pair() {
        let mut jobs = vec![job(0, 10.0), job(1, 10.0)];
        jobs[1].scale_factor = 2;
        let packed = max_min_packed(&jobs, &[2], |_, _, _| Some((9.0, 9.0))).unwrap();
        assert!(packed.pairs.is_empty());
    }
}
