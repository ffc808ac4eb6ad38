//! Gandiva (OSDI'18) as Gavel reimplements it (`scheduler/policies/gandiva.py`,
//! `GandivaPolicy`, name `Gandiva_Packing`): time slicing plus packing, with
//! the pair rates of Gavel's throughput table standing in for Gandiva's
//! introspection. Each time the mechanism asks for an allocation:
//!
//! 1. **Keep or separate.** Pairs formed earlier are kept while both jobs are
//!    active and their normalized throughput (each job's co-located rate over
//!    its rate alone, summed over both jobs and over every GPU type of the
//!    cluster; 0 if either job makes no progress together on some type) is at
//!    least 1. Any other pair is separated; a job alone always goes back to
//!    the pool.
//! 2. **No packing when everything fits.** If the active jobs ask for no more
//!    GPUs than the cluster has, every job alone gets an equal share of every
//!    type; kept pairs stay recorded for later, unused.
//! 3. **Random grouping.** Otherwise the jobs in no kept pair, in id order,
//!    are grouped at random: as many times as there were such jobs (and while
//!    two are left), two are drawn with `random.sample(jobs, 2)` from Gavel's
//!    stream (`random.Random(seed)`, [`PyRandom`]); if their scale factors are
//!    equal they become a pair, else the draw is wasted. Jobs left over run
//!    alone. The pair rates are *not* consulted here: a pair that interferes
//!    is formed anyway and separated at the next allocation (step 1).
//! 4. **Time slicing.** The m combinations (kept and new pairs, jobs alone)
//!    share the cluster equally: each gets `gpus of type j / m / scale factor`
//!    of type j, its row scaled down to sum to at most 1.
//!
//! The round mechanism (`mechanism.rs`) turns this X into rounds exactly as
//! for Gavel's other packed policies: priorities `X / time fraction`, pairs
//! started with `StartShared` on the same GPUs, leases extended.
//!
//! Differences from Gavel, all where Gavel would fail or cotenant has a limit:
//! a pair whose rates the mechanism does not track (unmeasured, zero on
//! every type, or past `max_pairs`) gets no time (in Gavel it has X but zero
//! priority, so it never runs either) and counts as normalized throughput 0;
//! a job with rate 0 alone on a type next to a positive co-located rate
//! counts as 0 too (Gavel divides by zero there).

use std::collections::BTreeMap;

use cotenant_core::JobId;

use super::allocation::{equal_share, equal_split, AllocJob};
use super::packed::{PackedAllocation, PairCandidate};
use super::pyrandom::PyRandom;

/// Normalized throughput at which Gavel's Gandiva keeps a pair (`< 1.0` separates).
pub const KEEP_THRESHOLD: f64 = 1.0;

/// Gandiva's memory across allocations: the pairs it formed, and its stream.
#[derive(Clone, Debug)]
pub struct Gandiva {
    /// Each job of a pair formed earlier, with its partner.
    partners: BTreeMap<JobId, JobId>,
    rng: PyRandom,
}

impl Gandiva {
    /// Gavel: `GandivaPolicy(seed=seed)`, seeding `random.Random()` with `seed`.
    pub fn new(seed: u64) -> Gandiva {
        Gandiva { partners: BTreeMap::new(), rng: PyRandom::new(seed) }
    }

    /// The pairs kept now, each once (smaller id first).
    pub fn pairs(&self) -> Vec<(JobId, JobId)> {
        self.partners.iter().filter(|(a, b)| a < b).map(|(&a, &b)| (a, b)).collect()
    }

    /// X for `jobs` alone and for the candidate `pairs` (rows aligned with
    /// them) on GPU types with `capacity` GPUs each.
    pub fn allocate(
        &mut self,
        jobs: &[AllocJob],
        pairs: &[PairCandidate],
        capacity: &[u32],
    ) -> PackedAllocation {
        let index: BTreeMap<JobId, usize> = jobs.iter().enumerate().map(|(i, j)| (j.id, i)).collect();
        let candidate: BTreeMap<(usize, usize), usize> =
            pairs.iter().enumerate().map(|(p, c)| (c.pair, p)).collect();
        let pair_of = |a: JobId, b: JobId| -> Option<usize> {
            let (i, j) = (*index.get(&a)?, *index.get(&b)?);
            candidate.get(&(i.min(j), i.max(j))).copied()
        };
        // 1. Keep pairs of two active jobs that pack at least as well as time slicing.
        let before = std::mem::take(&mut self.partners);
        for (&a, &b) in &before {
            let kept = pair_of(a, b).is_some_and(|p| {
                normalized_throughput(&pairs[p], &jobs[pairs[p].pair.0], &jobs[pairs[p].pair.1], capacity)
                    >= KEEP_THRESHOLD
            });
            if kept {
                self.partners.insert(a, b);
            }
        }
        let mut out = PackedAllocation {
            singles: vec![vec![0.0; capacity.len()]; jobs.len()],
            pairs: vec![vec![0.0; capacity.len()]; pairs.len()],
            min_normalized: 0.0,
        };
        let requested: u64 = jobs.iter().map(|j| u64::from(j.scale_factor)).sum();
        let available: u64 = capacity.iter().map(|&c| u64::from(c)).sum();
        if requested <= available {
            // 2. Everything fits: time slicing of jobs alone, no packing.
            out.singles = equal_split(jobs, capacity);
            return out;
        }
        // 3. Group the jobs in no kept pair at random.
        let mut pool: Vec<usize> =
            (0..jobs.len()).filter(|&i| !self.partners.contains_key(&jobs[i].id)).collect();
        let draws = pool.len();
        let mut tries = 0;
        while pool.len() > 1 && tries < draws {
            tries += 1;
            let [first, second] = self.rng.sample(pool.len(), 2)[..] else { break };
            let (x, y) = (pool[first], pool[second]);
            if jobs[x].scale_factor != jobs[y].scale_factor {
                continue;
            }
            pool.retain(|&i| i != x && i != y);
            self.partners.insert(jobs[x].id, jobs[y].id);
            self.partners.insert(jobs[y].id, jobs[x].id);
        }
        // 4. Equal time slices over the combinations.
        let formed = self.pairs();
        let m = formed.len() + pool.len();
        for &i in &pool {
            out.singles[i] = equal_share(capacity, m, jobs[i].scale_factor);
        }
        for (a, b) in formed {
            if let Some(p) = pair_of(a, b) {
                out.pairs[p] = equal_share(capacity, m, jobs[index[&a]].scale_factor);
            }
        }
        out
    }
}

/// Gavel's `_get_normalized_throughput`: the sum, over GPU types with GPUs and
/// both jobs, of the co-located rate over the rate alone; 0 if either job does
/// not progress together on one of those types.
pub fn normalized_throughput(pair: &PairCandidate, a: &AllocJob, b: &AllocJob, capacity: &[u32]) -> f64 {
    let mut total = 0.0;
    for (t, &gpus) in capacity.iter().enumerate() {
        if gpus == 0 {
            continue;
        }
        let Some(&(rate_a, rate_b)) = pair.rates.get(t) else { return 0.0 };
        for (together, job) in [(rate_a, a), (rate_b, b)] {
            let alone = job.steps_per_s.get(t).copied().unwrap_or(0.0);
            if together <= 0.0 || alone <= 0.0 {
                return 0.0;
            }
            total += together / alone;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, rates: &[f64], scale_factor: u32) -> AllocJob {
        AllocJob {
            id: JobId(id),
            steps_per_s: rates.to_vec(),
            scale_factor,
            weight: 1.0,
            steps_remaining: 1000.0,
            secs_since_arrival: 0.0,
        }
    }

    fn candidate(pair: (usize, usize), rates: &[(f64, f64)]) -> PairCandidate {
        PairCandidate { pair, rates: rates.to_vec() }
    }

    #[test]
    fn two_jobs_on_one_gpu_are_packed_and_share_it() {
        // One K80, two 1-GPU jobs at 10 steps/s alone, 8 each together:
        // normalized throughput 8/10 + 8/10 = 1.6. 2 GPUs asked > 1 available:
        // packing. The only draw pairs 0 with 1; one combination (m = 1) gets
        // 1 K80 / 1 / 1 = 1.0 of the K80.
        let jobs = [job(0, &[10.0], 1), job(1, &[10.0], 1)];
        let pairs = [candidate((0, 1), &[(8.0, 8.0)])];
        assert!((normalized_throughput(&pairs[0], &jobs[0], &jobs[1], &[1]) - 1.6).abs() < 1e-12);
        let mut g = Gandiva::new(0);
        let x = g.allocate(&jobs, &pairs, &[1]);
        assert_eq!((x.singles, x.pairs), (vec![vec![0.0], vec![0.0]], vec![vec![1.0]]));
        assert_eq!(g.pairs(), [(JobId(0), JobId(1))]);
        // Kept at the next allocation (1.6 >= 1), with no new draw needed.
        let x = g.allocate(&jobs, &pairs, &[1]);
        assert_eq!(x.pairs, vec![vec![1.0]]);
    }

    #[test]
    fn a_pair_below_one_is_formed_at_random_then_separated() {
        // One K80, two jobs that keep 3 of 10 steps/s each together: 0.3 + 0.3 =
        // 0.6 < 1. The random grouping does not look at rates, so the first
        // allocation packs them anyway (m = 1, 1.0 of the K80)...
        let jobs = [job(0, &[10.0], 1), job(1, &[10.0], 1)];
        let pairs = [candidate((0, 1), &[(3.0, 3.0)])];
        let mut g = Gandiva::new(0);
        assert_eq!(g.allocate(&jobs, &pairs, &[1]).pairs, vec![vec![1.0]]);
        // ...and the next separates them: with 2 K80s both fit (2 asked <= 2),
        // no packing, each alone gets 2 / 2 / 1 = 1.0; the pair is forgotten.
        let x = g.allocate(&jobs, &pairs, &[2]);
        assert_eq!((x.singles, x.pairs), (vec![vec![1.0], vec![1.0]], vec![vec![0.0]]));
        assert!(g.pairs().is_empty());
    }

    #[test]
    fn a_good_pair_survives_an_allocation_without_packing() {
        // Three 1-GPU jobs; jobs 1 and 2 pack at 0.9 + 0.9 on each type.
        let jobs = [job(0, &[10.0, 2.0], 1), job(1, &[10.0, 2.0], 1), job(2, &[10.0, 2.0], 1)];
        let pairs = [candidate((1, 2), &[(9.0, 9.0), (1.8, 1.8)])];
        let mut g = Gandiva::new(0);
        // On one V100, 3 asked > 1: packing. The first draw is
        // `random.Random(0).sample([0, 1, 2], 2)` = [1, 2] (python3): jobs 1 and 2
        // pair, job 0 is left alone; m = 2, each combination 1 / 2 = 0.5 of the V100.
        let x = g.allocate(&jobs, &pairs, &[1, 0]);
        assert_eq!(g.pairs(), [(JobId(1), JobId(2))]);
        assert_eq!((x.singles[0][0], x.pairs[0][0], x.singles[1][0]), (0.5, 0.5, 0.0));
        // On 2 V100 + 4 K80 all 3 fit: no packing, each job alone gets
        // [2/3, 4/3] scaled to sum 1, [1/3, 2/3]; the pair (normalized 3.6) is
        // kept in Gandiva's memory, unused.
        let x = g.allocate(&jobs, &pairs, &[2, 4]);
        for row in &x.singles {
            assert!((row[0] - 1.0 / 3.0).abs() < 1e-12 && (row[1] - 2.0 / 3.0).abs() < 1e-12, "{row:?}");
        }
        assert_eq!(x.pairs, vec![vec![0.0, 0.0]]);
        assert_eq!(g.pairs(), [(JobId(1), JobId(2))]);
        // Back on one V100 the kept pair is used again without a draw.
        let x = g.allocate(&jobs, &pairs, &[1, 0]);
        assert_eq!((x.singles[0][0], x.pairs[0][0]), (0.5, 0.5));
    }

    #[test]
    fn draws_of_unequal_scale_factors_are_wasted() {
        // Two jobs of 1 and 2 GPUs on 2 GPUs: 3 asked > 2. Every draw pairs a
        // 1-GPU with a 2-GPU job: both run alone, m = 2: [2/2/1] = 1.0 and [2/2/2] = 0.5.
        let jobs = [job(0, &[1.0], 1), job(1, &[1.0], 2)];
        let pairs = [];
        let mut g = Gandiva::new(3);
        let x = g.allocate(&jobs, &pairs, &[2]);
        assert_eq!(x.singles, vec![vec![1.0], vec![0.5]]);
        assert!(g.pairs().is_empty());
    }

    #[test]
    fn a_pair_that_stops_on_one_type_counts_zero() {
        // Fine on the V100 (1.8) but one job makes no progress together on the
        // K80: Gavel's normalized throughput is 0, so the pair is separated.
        let jobs = [job(0, &[10.0, 2.0], 1), job(1, &[10.0, 2.0], 1)];
        let pair = candidate((0, 1), &[(9.0, 9.0), (0.0, 1.5)]);
        assert_eq!(normalized_throughput(&pair, &jobs[0], &jobs[1], &[1, 1]), 0.0);
        // Without K80s in the cluster only the V100 counts: 0.9 + 0.9.
        assert!((normalized_throughput(&pair, &jobs[0], &jobs[1], &[1, 0]) - 1.8).abs() < 1e-12);
    }
}
