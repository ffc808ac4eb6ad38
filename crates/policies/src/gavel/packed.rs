//! Gavel's space-sharing (`_packed`) allocations: variables for every job alone
//! and every candidate pair of jobs co-located on the same GPUs, with the pair
//! rates of the throughput table (`scheduler/policies/*.py`, `...WithPacking`).
//! The mechanism builds the candidates: pairs of equal scale factor that the
//! table measured with both rates positive on some GPU type.
//!
//! Shared constraints: a pair uses `sf` GPUs of a type once (both jobs run on
//! the same GPUs); a job's time over all combinations that contain it is at
//! most 1; a pair gets no time on a type where either job would not progress.
//! Job i's throughput is `sum over combinations c containing i and types j of
//! rate_i(c, j) * X[c][j]`.
//!
//! - max-min fairness (`MaxMinFairnessPolicyWithPacking.get_allocation`):
//!   maximize the minimum of `throughput_i * sf / (w_i * prop_i)`, `prop_i`
//!   job i's throughput with a proportional share of every type, as the
//!   unpacked max-min-fairness-perf does, so that without pairs both solve the
//!   same problem. Gavel's packed code also divides by `norm_i`, the sum of i's
//!   isolated rates over types (left from before it normalized by `prop_i`):
//!   a per-job constant that changes the single-job objective too, giving more
//!   time to jobs fast on every type. We leave it out (see
//!   docs/experiments/gavel-packed.md).
//! - finish-time fairness: the same rho as the unpacked finish-time-fairness-perf
//!   (isolated time credited across calls, see `allocation.rs`), with the
//!   packed throughput; bisection on rho, each step a packed max-min.
//! - min total duration: the smallest horizon, on Gavel's 5% bisection grid, at
//!   which every job can finish with the packed throughput; the point returned
//!   is the packed max-min at that horizon.
//! - FIFO (`FIFOPolicy` in `packing` mode): FIFO-perf, then each job left in
//!   the queue, in arrival order, joins the scheduled job it packs best with
//!   if their normalized pair throughput exceeds `threshold` (Gavel: 1.5), and
//!   the queue stops at the first job that packs with none.
//!
//! Solved with good_lp's simplex (pairs couple two jobs' rows, which the
//! structured barrier solver does not handle): where the optimum is not unique
//! the answer is a vertex, not the centre that Gavel's ECOS and our unpacked
//! solver return.

use std::collections::BTreeMap;

use good_lp::{constraint, variable, Expression, Solution as _, SolverModel};

use super::allocation::{equal_split, gavel_horizon, isolated_throughputs};
use super::allocation::{fifo_perf_types, finish_time_search, isolated_finish_times, AllocJob, FtfHistory};
use super::solver::SolveError;

/// Indices of two co-located jobs, the smaller first.
pub type JobPair = (usize, usize);

/// A pair that may share GPUs: `rates[type] = (rate of a, rate of b)` together.
#[derive(Clone, Debug, PartialEq)]
pub struct PairCandidate {
    pub pair: JobPair,
    pub rates: Vec<(f64, f64)>,
}

impl PairCandidate {
    /// Whether both jobs progress on `gpu_type` together.
    pub fn runs_on(&self, gpu_type: usize) -> bool {
        let (a, b) = self.rates[gpu_type];
        a > 0.0 && b > 0.0
    }
}

/// A packed allocation: time fractions per type for each job alone and each pair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedAllocation {
    pub singles: Vec<Vec<f64>>,
    /// Fractions per type of each candidate pair, aligned with the candidates.
    pub pairs: Vec<Vec<f64>>,
    /// The optimal minimum of the max-min problem solved last (0 for FIFO).
    pub min_normalized: f64,
}

/// Gavel's packed max-min fairness.
pub fn max_min_packed(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
) -> Result<PackedAllocation, SolveError> {
    let total: f64 = capacity.iter().map(|&c| c as f64).sum::<f64>().max(1.0);
    let scale: Vec<f64> = jobs
        .iter()
        .map(|job| {
            let prop: f64 = job.steps_per_s.iter().zip(capacity).map(|(r, &c)| r * c as f64 / total).sum();
            if prop > 0.0 {
                job.scale_factor.max(1) as f64 / (job.weight.max(f64::MIN_POSITIVE) * prop)
            } else {
                0.0
            }
        })
        .collect();
    packed_max_min(jobs, capacity, pairs, &scale)
}

/// Packed finish-time fairness (heterogeneity-aware): minimize the worst rho.
pub fn finish_time_fairness_packed(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
    history: &mut FtfHistory,
) -> Result<PackedAllocation, SolveError> {
    let rates: Vec<Vec<f64>> = jobs.iter().map(|j| j.steps_per_s.clone()).collect();
    let iso = isolated_throughputs(&rates, jobs, capacity);
    let isolated_finish = isolated_finish_times(jobs, &iso, history);
    // Per-job multiplier of the throughput at rho: 1 / steps/s needed.
    let scale_of = |needs: &[f64]| -> Vec<f64> {
        needs.iter().map(|&need| if need.is_finite() && need > 0.0 { 1.0 / need } else { 1.0 }).collect()
    };
    let mut reaches = |needs: &[f64]| -> Result<bool, SolveError> {
        Ok(packed_max_min_value(jobs, capacity, pairs, &scale_of(needs))? >= 1.0)
    };
    match finish_time_search(jobs, &isolated_finish, &mut reaches)? {
        Some(needs) => packed_max_min(jobs, capacity, pairs, &scale_of(&needs)),
        None => {
            // As Gavel and the unpacked form: an equal split of every type.
            let singles = equal_split(jobs, capacity);
            Ok(PackedAllocation {
                singles,
                pairs: vec![vec![0.0; capacity.len()]; pairs.len()],
                min_normalized: 0.0,
            })
        }
    }
}

/// Packed min total duration.
pub fn min_total_duration_packed(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
) -> Result<PackedAllocation, SolveError> {
    // Feasible at horizon T iff the max-min of throughput_i * T / R_i reaches 1.
    // Solved as throughput_i * R_max / R_i (coefficients near 1, which the
    // simplex handles far faster than 1 / R_i), then scaled back.
    let most = jobs.iter().map(|j| j.steps_remaining.max(1.0)).fold(1.0, f64::max);
    let relative: Vec<f64> = jobs.iter().map(|j| most / j.steps_remaining.max(1.0)).collect();
    let unit = packed_max_min_value(jobs, capacity, pairs, &relative)? / most;
    let Some(horizon_s) = gavel_horizon(unit) else {
        return Ok(empty(jobs.len(), capacity.len(), pairs.len()));
    };
    let at_horizon: Vec<f64> = relative.iter().map(|s| s * horizon_s / most).collect();
    packed_max_min(jobs, capacity, pairs, &at_horizon)
}

/// Gavel's FIFO in packing mode; `type_names` order the types as Gavel sorts them.
pub fn fifo_packed(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
    type_names: &[String],
    threshold: f64,
) -> PackedAllocation {
    let n = capacity.len();
    let assigned = fifo_perf_types(jobs, capacity, type_names);
    let index: BTreeMap<JobPair, usize> = pairs.iter().enumerate().map(|(p, c)| (c.pair, p)).collect();
    let mut out = empty(jobs.len(), n, pairs.len());
    // Scheduled singles in the order they were assigned (arrival order), as
    // Gavel's allocation dict iterates them; a paired one leaves the list.
    let mut open: Vec<(usize, usize)> = (0..jobs.len()).filter_map(|i| assigned[i].map(|t| (i, t))).collect();
    for queued in (0..jobs.len()).filter(|&i| assigned[i].is_none()) {
        let mut best: Option<(usize, usize)> = None;
        let mut best_value = threshold;
        for (slot, &(scheduled, t)) in open.iter().enumerate() {
            if jobs[scheduled].scale_factor != jobs[queued].scale_factor {
                continue;
            }
            let key = (scheduled.min(queued), scheduled.max(queued));
            let Some(&p) = index.get(&key) else { continue };
            let (rate_a, rate_b) = pairs[p].rates[t];
            let mut value = 0.0;
            for (rate, member) in [(rate_a, key.0), (rate_b, key.1)] {
                let alone = jobs[member].steps_per_s[t];
                if rate > 0.0 && alone > 0.0 {
                    value += rate / alone;
                }
            }
            if value > best_value {
                best_value = value;
                best = Some((slot, p));
            }
        }
        let Some((slot, p)) = best else { break };
        let (_, t) = open.remove(slot);
        out.pairs[p][t] = 1.0;
    }
    for &(i, t) in &open {
        out.singles[i][t] = 1.0;
    }
    out
}

fn empty(jobs: usize, types: usize, pairs: usize) -> PackedAllocation {
    PackedAllocation {
        singles: vec![vec![0.0; types]; jobs],
        pairs: vec![vec![0.0; types]; pairs],
        min_normalized: 0.0,
    }
}

/// Combined normalized throughputs at or below this never beat running alone
/// (1 less a margin for the rounding of the two quotients).
const PAIR_HELPS_ABOVE: f64 = 1.0 - 1e-12;

/// Whether pair `c` on `gpu_type` can do better than its two jobs sharing the
/// same GPUs by time slices. Time `x` of the pair on type j can be replaced by
/// `theta x` of job a alone and `(1 - theta) x` of job b alone on the same
/// GPUs (same capacity when the scale factors are equal; each job's time
/// row only shrinks); with `theta = r_a / alone_a` each job keeps at least
/// its pair throughput exactly when `r_a / alone_a + r_b / alone_b <= 1`. Such
/// a pair variable is dominated, and dropping it leaves every objective built
/// on the jobs' throughputs with the same optimal value.
fn pair_can_help(jobs: &[AllocJob], c: &PairCandidate, gpu_type: usize) -> bool {
    if !c.runs_on(gpu_type) {
        return false;
    }
    let (a, b) = c.pair;
    let (alone_a, alone_b) = (jobs[a].steps_per_s[gpu_type], jobs[b].steps_per_s[gpu_type]);
    if jobs[a].scale_factor != jobs[b].scale_factor || !(alone_a > 0.0 && alone_b > 0.0) {
        return true;
    }
    let (rate_a, rate_b) = c.rates[gpu_type];
    rate_a / alone_a + rate_b / alone_b > PAIR_HELPS_ABOVE
}

/// Maximize `t` with `scale_i * throughput_i >= t` for every job with
/// `scale_i > 0`, under the shared constraints.
fn packed_max_min(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
    scale: &[f64],
) -> Result<PackedAllocation, SolveError> {
    packed_max_min_with(jobs, capacity, pairs, scale, false)
}

/// The optimal minimum of `packed_max_min` from the LP without the pair
/// variables that cannot beat running alone (`pair_can_help`): the same
/// optimal value, from a smaller LP. Only the value is used (the searches'
/// feasibility tests); the allocation returned is always solved with every
/// pair, so that the simplex lands on the vertex it always has (a different
/// LP may return another optimal vertex where the optimum is not unique).
fn packed_max_min_value(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
    scale: &[f64],
) -> Result<f64, SolveError> {
    Ok(packed_max_min_with(jobs, capacity, pairs, scale, true)?.min_normalized)
}

/// `packed_max_min`; with `prune`, only the pair variables that can beat
/// running alone exist.
fn packed_max_min_with(
    jobs: &[AllocJob],
    capacity: &[u32],
    pairs: &[PairCandidate],
    scale: &[f64],
    prune: bool,
) -> Result<PackedAllocation, SolveError> {
    let (m, n) = (jobs.len(), capacity.len());
    if m == 0 {
        return Ok(empty(0, n, pairs.len()));
    }
    if pairs.iter().any(|c| c.pair.0 >= c.pair.1 || c.pair.1 >= m || c.rates.len() != n) {
        return Err(SolveError::Malformed("pair candidate out of range"));
    }
    let mut vars = good_lp::variables!();
    let singles: Vec<Vec<good_lp::Variable>> =
        (0..m).map(|_| (0..n).map(|_| vars.add(variable().min(0.0))).collect()).collect();
    let keep = |c: &PairCandidate, j: usize| !prune || pair_can_help(jobs, c, j);
    let pair_vars: Vec<Vec<Option<good_lp::Variable>>> = pairs
        .iter()
        .map(|c| (0..n).map(|j| keep(c, j).then(|| vars.add(variable().min(0.0)))).collect())
        .collect();
    let t = vars.add(variable());
    let mut model = vars.maximise(t).using(good_lp::microlp);
    for j in 0..n {
        let mut used: Expression = (0..m).map(|i| jobs[i].scale_factor.max(1) as f64 * singles[i][j]).sum();
        for (p, candidate) in pairs.iter().enumerate() {
            let Some(var) = pair_vars[p][j] else { continue };
            if candidate.runs_on(j) {
                used += jobs[candidate.pair.0].scale_factor.max(1) as f64 * var;
            } else {
                model = model.with(constraint!(var <= 0.0));
            }
        }
        model = model.with(constraint!(used <= capacity[j] as f64));
    }
    let mut time: Vec<Expression> = singles.iter().map(|row| row.iter().copied().sum()).collect();
    let mut throughput: Vec<Expression> =
        (0..m).map(|i| (0..n).map(|j| jobs[i].steps_per_s[j] * scale[i] * singles[i][j]).sum()).collect();
    for (p, candidate) in pairs.iter().enumerate() {
        let (a, b) = candidate.pair;
        for (var, &(rate_a, rate_b)) in pair_vars[p].iter().zip(&candidate.rates) {
            let Some(var) = *var else { continue };
            time[a] += var;
            time[b] += var;
            throughput[a] += rate_a * scale[a] * var;
            throughput[b] += rate_b * scale[b] * var;
        }
    }
    for (i, (time, throughput)) in time.into_iter().zip(throughput).enumerate() {
        model = model.with(constraint!(time <= 1.0));
        if scale[i] > 0.0 {
            model = model.with(constraint!(throughput >= t));
        }
    }
    let solution = model.solve().map_err(|_| SolveError::NoConvergence(0))?;
    let value = |v: good_lp::Variable| solution.value(v).clamp(0.0, 1.0);
    Ok(PackedAllocation {
        singles: singles.iter().map(|row| row.iter().map(|&v| value(v)).collect()).collect(),
        pairs: pair_vars.iter().map(|row| row.iter().map(|v| v.map_or(0.0, value)).collect()).collect(),
        min_normalized: solution.value(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::JobId;
    use proptest::prelude::*;

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

    fn pair(rates: (f64, f64)) -> Vec<PairCandidate> {
        vec![PairCandidate { pair: (0, 1), rates: vec![rates] }]
    }

    #[test]
    fn pairs_that_pack_well_beat_time_sharing() {
        // Two jobs, one GPU. Alone each runs at 10 steps/s; together each keeps 8.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let unpacked = max_min_packed(&jobs, &[1], &[]).unwrap();
        let packed = max_min_packed(&jobs, &[1], &pair((8.0, 8.0))).unwrap();
        assert!(packed.min_normalized > 1.5 * unpacked.min_normalized, "{packed:?} vs {unpacked:?}");
        assert!(packed.pairs[0][0] > 0.99, "the pair takes the GPU: {packed:?}");
    }

    #[test]
    fn without_pairs_the_optimum_is_max_min_fairness_perfs() {
        // Three jobs on 1 V100 + 1 K80 (and a 2-GPU job): the packed problem with
        // no candidates reaches the same minimum normalized throughput as the
        // unpacked max-min-fairness-perf (vertices may differ, the optimum not).
        let mut jobs = vec![job(0, 10.0), job(1, 2.0), job(2, 3.0), job(3, 4.0)];
        for (j, k80) in jobs.iter_mut().zip([1.0, 1.0, 2.0, 3.0]) {
            j.steps_per_s.push(k80);
        }
        jobs[3].scale_factor = 2;
        jobs[1].weight = 2.0;
        let capacity = [2, 2];
        let names = vec!["v100".to_string(), "k80".to_string()];
        let x = super::super::Allocator::new(super::super::Objective::MaxMinFairness { perf: true }, 0)
            .allocate(&jobs, &capacity, &names)
            .unwrap();
        let total = 4.0;
        let unpacked_min = jobs
            .iter()
            .zip(&x)
            .map(|(j, x)| {
                let prop: f64 = j.steps_per_s.iter().zip(capacity).map(|(r, c)| r * c as f64 / total).sum();
                let throughput: f64 = j.steps_per_s.iter().zip(x).map(|(r, x)| r * x).sum();
                throughput * j.scale_factor as f64 / (j.weight * prop)
            })
            .fold(f64::INFINITY, f64::min);
        let packed = max_min_packed(&jobs, &capacity, &[]).unwrap();
        assert!(
            (packed.min_normalized - unpacked_min).abs() < 1e-6 * unpacked_min,
            "{packed:?} vs {unpacked_min}"
        );
    }

    #[test]
    fn pairs_that_interfere_are_not_used() {
        // Together each keeps only 3 of 10 steps/s: time sharing (5 each) is better.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let unpacked = max_min_packed(&jobs, &[1], &[]).unwrap();
        let packed = max_min_packed(&jobs, &[1], &pair((3.0, 3.0))).unwrap();
        assert!((packed.min_normalized - unpacked.min_normalized).abs() < 1e-9);
    }

    #[test]
    fn pairs_get_no_time_where_a_job_would_not_progress() {
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let packed = max_min_packed(&jobs, &[1], &pair((9.0, 0.0))).unwrap();
        assert!(packed.pairs[0][0] < 1e-9, "{packed:?}");
    }

    #[test]
    fn finish_time_fairness_and_min_total_duration_use_good_pairs() {
        // Two jobs, one GPU, 1000 steps each at 10 steps/s alone, 8 together:
        // time sharing finishes both at 200 s, the pair at 125 s.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let ftf =
            finish_time_fairness_packed(&jobs, &[1], &pair((8.0, 8.0)), &mut FtfHistory::default()).unwrap();
        assert!(ftf.pairs[0][0] > 0.99, "{ftf:?}");
        let mtd = min_total_duration_packed(&jobs, &[1], &pair((8.0, 8.0))).unwrap();
        assert!(mtd.pairs[0][0] > 0.99, "{mtd:?}");
        let alone = min_total_duration_packed(&jobs, &[1], &pair((3.0, 3.0))).unwrap();
        assert!(alone.pairs[0][0] < 1e-9 && (alone.singles[0][0] + alone.singles[1][0] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn fifo_packs_queued_jobs_only_above_the_threshold() {
        let jobs = vec![job(0, 10.0), job(1, 10.0), job(2, 10.0)];
        let names = vec!["k80".to_string()];
        let candidates = vec![
            PairCandidate { pair: (0, 1), rates: vec![(8.0, 8.0)] },
            PairCandidate { pair: (0, 2), rates: vec![(9.0, 9.0)] },
        ];
        // Job 0 gets the GPU; job 1 packs with it (1.6 > 1.5); job 2 finds no partner left.
        let x = fifo_packed(&jobs, &[1], &candidates, &names, 1.5);
        assert_eq!((x.singles.clone(), x.pairs.clone()), (vec![vec![0.0]; 3], vec![vec![1.0], vec![0.0]]));
        // At 1.7 job 1 packs with nobody, and FIFO stops the queue there.
        let x = fifo_packed(&jobs, &[1], &candidates, &names, 1.7);
        assert_eq!((x.singles, x.pairs), (vec![vec![1.0], vec![0.0], vec![0.0]], vec![vec![0.0], vec![0.0]]));
    }

    #[test]
    fn pairs_that_cannot_beat_running_alone_are_pruned() {
        // Alone 10 steps/s each; together 3 + 3: 3/10 + 3/10 = 0.6 <= 1, so half
        // the GPU each alone (5 steps/s) beats the pair: pruned, and the LP is
        // the one without pairs, answer for answer. Together 6 + 5: 0.6 + 0.5 =
        // 1.1 > 1, kept. With pair time p, job 1 alone s (job 0 alone 0):
        // 6p = 5p + 10s and p + s = 1 give p = 10/11, both at 60/11 steps/s,
        // 12/11 of the 5 steps/s of time sharing.
        let jobs = vec![job(0, 10.0), job(1, 10.0)];
        let weak = pair((3.0, 3.0));
        assert!(!pair_can_help(&jobs, &weak[0], 0));
        let alone = max_min_packed(&jobs, &[1], &[]).unwrap();
        let pruned = packed_max_min_with(&jobs, &[1], &weak, &[0.1, 0.1], true).unwrap();
        assert_eq!(pruned.singles, alone.singles);
        assert_eq!(pruned.min_normalized, alone.min_normalized);
        assert_eq!(packed_max_min_value(&jobs, &[1], &weak, &[0.1, 0.1]).unwrap(), alone.min_normalized);
        assert_eq!(pruned.pairs, vec![vec![0.0]]);
        let strong = pair((6.0, 5.0));
        assert!(pair_can_help(&jobs, &strong[0], 0));
        let packed = max_min_packed(&jobs, &[1], &strong).unwrap();
        assert!(
            (packed.min_normalized / alone.min_normalized - 12.0 / 11.0).abs() < 1e-9,
            "{packed:?} vs {alone:?}"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Dropping the pair variables that cannot beat running alone leaves
        /// the optimal minimum where the full LP has it, and gives no time to
        /// a dropped pair.
        #[test]
        fn pruning_keeps_the_optimum(
            rates in proptest::collection::vec((0.5f64..20.0, 0.5f64..20.0), 2..7),
            pair_rates in proptest::collection::vec((0usize..7, 0usize..7, 0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0), 0..10),
            capacity in (1u32..4, 1u32..4),
        ) {
            let jobs: Vec<AllocJob> = rates
                .iter()
                .enumerate()
                .map(|(i, &(v100, k80))| {
                    let mut j = job(i as u32, v100);
                    j.steps_per_s.push(k80);
                    j
                })
                .collect();
            let m = jobs.len();
            let mut seen = std::collections::BTreeSet::new();
            let candidates: Vec<PairCandidate> = pair_rates
                .iter()
                .filter_map(|&(a, b, fa0, fb0, fa1, fb1)| {
                    let (a, b) = (a % m, b % m);
                    let key = (a.min(b), a.max(b));
                    (a != b && seen.insert(key)).then(|| PairCandidate {
                        pair: key,
                        rates: vec![
                            (fa0 * jobs[key.0].steps_per_s[0], fb0 * jobs[key.1].steps_per_s[0]),
                            (fa1 * jobs[key.0].steps_per_s[1], fb1 * jobs[key.1].steps_per_s[1]),
                        ],
                    })
                })
                .collect();
            let capacity = [capacity.0, capacity.1];
            let scale = vec![1.0; m];
            let full = packed_max_min_with(&jobs, &capacity, &candidates, &scale, false).unwrap();
            let pruned = packed_max_min_with(&jobs, &capacity, &candidates, &scale, true).unwrap();
            prop_assert!(
                (full.min_normalized - pruned.min_normalized).abs() <= 1e-9 * full.min_normalized.max(1.0),
                "full {} vs pruned {}", full.min_normalized, pruned.min_normalized
            );
            for (c, x) in candidates.iter().zip(&pruned.pairs) {
                for (j, x) in x.iter().enumerate() {
                    prop_assert!(pair_can_help(&jobs, c, j) || *x == 0.0);
                }
            }
        }
    }
}
