//! Per-request latency attribution inside a joint batch.
//!
//! [`llmvisor_shares`] splits an iteration's time into additive per-request shares in
//! integer nanoseconds that sum exactly to the batch time (the LLMVisor form of
//! PAPERS.md, reconstructed): the fixed cost and the all-reduce latency split equally;
//! the weight-read floor of the linear layers split equally too (every request in the
//! batch needs the whole weight read, so a Shapley split of a constant is equal); the
//! linear time above that floor and the all-reduce bytes by each request's new tokens;
//! the LM head among the requests that sample a token; and each request's own
//! attention/KV term to itself. O(n) per iteration.
//!
//! Ground truth is each request's Shapley value of the same latency model
//! ([`shapley_exact`] for small batches, [`shapley_sampled`] beyond), and the baseline
//! is VTC's token proxy (n_in + 2 n_out).

use cotenant_perf::{BatchEntry, Roofline};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Largest batch whose Shapley values are computed exactly (2^n subsets).
pub const MAX_EXACT_SHAPLEY: usize = 12;

/// LLMVisor shares in seconds of the model's iteration time (sums to `iteration_s`
/// up to rounding). `out` is overwritten.
pub fn llmvisor_shares_s(model: &Roofline, entries: &[BatchEntry], out: &mut Vec<f64>) {
    let own: Vec<f64> = entries.iter().map(|e| model.entry_s(*e)).collect();
    llmvisor_shares_with_own_s(model, entries, &own, out);
}

/// [`llmvisor_shares_s`] with each entry's own term already computed (the simulator
/// has them from timing the batch).
pub fn llmvisor_shares_with_own_s(
    model: &Roofline,
    entries: &[BatchEntry],
    own_s: &[f64],
    out: &mut Vec<f64>,
) {
    out.clear();
    if entries.is_empty() {
        return;
    }
    let tokens: u64 = entries.iter().map(|e| u64::from(e.new_tokens)).sum();
    let rows: u64 = entries.iter().map(|e| u64::from(e.emits_token)).sum();
    let shared = model.shared_cost(tokens, rows);
    let n = entries.len() as f64;
    let equal_s = (shared.fixed_s + shared.linear_floor_s + shared.allreduce_fixed_s) / n;
    let per_token_s =
        if tokens > 0 { (shared.linear_excess_s + shared.allreduce_bytes_s) / tokens as f64 } else { 0.0 };
    let per_row_s =
        if rows > 0 { (shared.lm_head_floor_s + shared.lm_head_excess_s) / rows as f64 } else { 0.0 };
    out.extend(entries.iter().zip(own_s).map(|(e, own)| {
        let row_s = if e.emits_token { per_row_s } else { 0.0 };
        equal_s + per_token_s * f64::from(e.new_tokens) + row_s + own
    }));
}

/// Scales `shares_s` to integer nanoseconds summing exactly to `batch_ns`: floor each
/// scaled share, then hand the remainder (< n ns) out one by one in batch order.
pub fn exact_split_ns(shares_s: &[f64], batch_ns: u64, out: &mut Vec<u64>) {
    out.clear();
    let total_s: f64 = shares_s.iter().sum();
    if shares_s.is_empty() {
        return;
    }
    let scale = if total_s > 0.0 { batch_ns as f64 / total_s } else { 0.0 };
    let mut assigned = 0_u64;
    for share in shares_s {
        let ns = ((share * scale).floor() as u64).min(batch_ns - assigned);
        assigned += ns;
        out.push(ns);
    }
    let mut remainder = batch_ns - assigned;
    let n = out.len();
    let mut index = 0;
    // If the model gave all-zero shares, the whole batch is split evenly this way.
    while remainder > 0 {
        out[index % n] += 1;
        remainder -= 1;
        index += 1;
    }
}

/// LLMVisor shares in nanoseconds summing exactly to `batch_ns`, from precomputed own terms.
pub fn llmvisor_shares_with_own(
    model: &Roofline,
    entries: &[BatchEntry],
    own_s: &[f64],
    batch_ns: u64,
    scratch: &mut Vec<f64>,
    out: &mut Vec<u64>,
) {
    llmvisor_shares_with_own_s(model, entries, own_s, scratch);
    exact_split_ns(scratch, batch_ns, out);
}

/// LLMVisor shares in nanoseconds summing exactly to `batch_ns`.
pub fn llmvisor_shares(
    model: &Roofline,
    entries: &[BatchEntry],
    batch_ns: u64,
    scratch: &mut Vec<f64>,
    out: &mut Vec<u64>,
) {
    llmvisor_shares_s(model, entries, scratch);
    exact_split_ns(scratch, batch_ns, out);
}

/// VTC's token proxy: a prefill chunk costs its tokens, a decode costs 2; the model's
/// iteration time is split in proportion.
pub fn proxy_shares_s(model: &Roofline, entries: &[BatchEntry], is_prefill: &[bool], out: &mut Vec<f64>) {
    out.clear();
    let cost = |(e, prefill): (&BatchEntry, &bool)| if *prefill { f64::from(e.new_tokens) } else { 2.0 };
    let total_cost: f64 = entries.iter().zip(is_prefill).map(cost).sum();
    let batch_s = model.iteration_s(entries);
    out.extend(
        entries.iter().zip(is_prefill).map(|pair| batch_s * cost(pair) / total_cost.max(f64::MIN_POSITIVE)),
    );
}

/// Iteration time of a coalition given its aggregates (0 when empty).
fn coalition_s(model: &Roofline, tokens: u64, rows: u64, own_s: f64, members: usize) -> f64 {
    if members == 0 {
        0.0
    } else {
        model.shared_cost(tokens, rows).total_s() + own_s
    }
}

/// Exact Shapley values of the iteration time (`entries.len() <= MAX_EXACT_SHAPLEY`).
pub fn shapley_exact(model: &Roofline, entries: &[BatchEntry]) -> Vec<f64> {
    let n = entries.len();
    assert!(n <= MAX_EXACT_SHAPLEY, "exact Shapley over {n} > {MAX_EXACT_SHAPLEY} requests");
    let subsets = 1_usize << n;
    let own: Vec<f64> = entries.iter().map(|e| model.entry_s(*e)).collect();
    let mut value = vec![0.0; subsets];
    let (mut tokens, mut rows, mut own_sum) =
        (vec![0_u64; subsets], vec![0_u64; subsets], vec![0.0; subsets]);
    for mask in 1..subsets {
        let low = mask.trailing_zeros() as usize;
        let rest = mask & (mask - 1);
        tokens[mask] = tokens[rest] + u64::from(entries[low].new_tokens);
        rows[mask] = rows[rest] + u64::from(entries[low].emits_token);
        own_sum[mask] = own_sum[rest] + own[low];
        value[mask] = coalition_s(model, tokens[mask], rows[mask], own_sum[mask], mask.count_ones() as usize);
    }
    // weight(s) = s! (n - s - 1)! / n!
    let mut factorial = vec![1.0_f64; n + 1];
    for k in 1..=n {
        factorial[k] = factorial[k - 1] * k as f64;
    }
    let mut shapley = vec![0.0; n];
    for (i, phi) in shapley.iter_mut().enumerate() {
        let bit = 1 << i;
        for mask in (0..subsets).filter(|m| m & bit == 0) {
            let size = mask.count_ones() as usize;
            let weight = factorial[size] * factorial[n - size - 1] / factorial[n];
            *phi += weight * (value[mask | bit] - value[mask]);
        }
    }
    shapley
}

/// Shapley values with the constant and additive parts of the game in closed form and
/// only the rest sampled. The iteration time is a sum of games and Shapley values are
/// linear in the game, so: a cost every non-empty coalition pays (c0, the all-reduce
/// latency, the weight-read floor) splits equally; the LM-head floor, which every
/// coalition with a sampling row pays, splits equally among those rows; token-linear
/// and per-request terms are their own Shapley values. What is left, the smooth-max
/// excess of the linear layers and the LM head over their floors, is estimated from
/// `permutations` random orders and their reverses (antithetic pairs), seeded.
pub fn shapley_sampled(model: &Roofline, entries: &[BatchEntry], permutations: u32, seed: u64) -> Vec<f64> {
    let n = entries.len();
    if n == 0 {
        return Vec::new();
    }
    let tokens: u64 = entries.iter().map(|e| u64::from(e.new_tokens)).sum();
    let rows: u64 = entries.iter().map(|e| u64::from(e.emits_token)).sum();
    let whole = model.shared_cost(tokens, rows);
    let equal_s = (whole.fixed_s + whole.allreduce_fixed_s + whole.linear_floor_s) / n as f64;
    let per_token_s = if tokens > 0 { whole.allreduce_bytes_s / tokens as f64 } else { 0.0 };
    let per_row_s = if rows > 0 { whole.lm_head_floor_s / rows as f64 } else { 0.0 };
    let mut shapley: Vec<f64> = entries
        .iter()
        .map(|e| {
            equal_s
                + per_token_s * f64::from(e.new_tokens)
                + if e.emits_token { per_row_s } else { 0.0 }
                + model.entry_s(*e)
        })
        .collect();
    let excess = |tokens: u64, rows: u64| {
        let cost = model.shared_cost(tokens, rows);
        cost.linear_excess_s + cost.lm_head_excess_s
    };
    let mut sampled = vec![0.0; n];
    let walk = |order: &[usize], sampled: &mut [f64]| {
        let (mut tokens, mut rows, mut previous) = (0_u64, 0_u64, 0.0);
        for &i in order {
            tokens += u64::from(entries[i].new_tokens);
            rows += u64::from(entries[i].emits_token);
            let value = excess(tokens, rows);
            sampled[i] += value - previous;
            previous = value;
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for _ in 0..permutations.max(1) {
        order.shuffle(&mut rng);
        walk(&order, &mut sampled);
        order.reverse();
        walk(&order, &mut sampled);
    }
    let samples = 2.0 * f64::from(permutations.max(1));
    for (phi, part) in shapley.iter_mut().zip(&sampled) {
        *phi += part / samples;
    }
    shapley
}

/// Relative errors of attribution methods against Shapley, split prefill/decode.
#[derive(Clone, Debug, Default)]
pub struct AttributionErrors {
    pub llmvisor_prefill: Vec<f64>,
    pub llmvisor_decode: Vec<f64>,
    pub proxy_prefill: Vec<f64>,
    pub proxy_decode: Vec<f64>,
    pub iterations_evaluated: u64,
    pub exact_iterations: u64,
    /// The model LLMVisor splits with when it differs from the one that times the
    /// batch (a fitted model that misjudges the hardware); None: the same model.
    pub fitted: Option<Roofline>,
}

/// How to evaluate attribution during a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttributionEval {
    /// Evaluate one iteration in this many.
    pub every_nth_iteration: u64,
    pub permutations: u32,
    pub seed: u64,
    /// Calibration of the attribution model, if it differs from the simulator's.
    pub fitted_params: Option<cotenant_perf::RooflineParams>,
}

impl AttributionErrors {
    /// Compares LLMVisor and the proxy with Shapley on one batch.
    pub fn evaluate(
        &mut self,
        model: &Roofline,
        entries: &[BatchEntry],
        is_prefill: &[bool],
        eval: AttributionEval,
    ) {
        let shapley = if entries.len() <= MAX_EXACT_SHAPLEY {
            self.exact_iterations += 1;
            shapley_exact(model, entries)
        } else {
            shapley_sampled(model, entries, eval.permutations, eval.seed ^ self.iterations_evaluated)
        };
        self.iterations_evaluated += 1;
        let (mut visor, mut proxy) = (Vec::new(), Vec::new());
        if self.fitted.is_none() {
            if let Some(params) = eval.fitted_params {
                self.fitted =
                    Some(Roofline::new(model.model.clone(), model.gpu, model.tensor_parallel, params));
            }
        }
        llmvisor_shares_s(self.fitted.as_ref().unwrap_or(model), entries, &mut visor);
        // The shares split the batch time the hardware (here: the simulator) measured.
        let scale = model.iteration_s(entries) / visor.iter().sum::<f64>().max(f64::MIN_POSITIVE);
        visor.iter_mut().for_each(|share| *share *= scale);
        proxy_shares_s(model, entries, is_prefill, &mut proxy);
        for i in 0..entries.len() {
            let truth = shapley[i];
            if truth <= 0.0 {
                continue;
            }
            let (visor_err, proxy_err) = ((visor[i] - truth).abs() / truth, (proxy[i] - truth).abs() / truth);
            if is_prefill[i] {
                self.llmvisor_prefill.push(visor_err);
                self.proxy_prefill.push(proxy_err);
            } else {
                self.llmvisor_decode.push(visor_err);
                self.proxy_decode.push(proxy_err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::{find_gpu, ModelShape, RooflineParams};

    fn model() -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
    }

    fn mixed_batch() -> Vec<BatchEntry> {
        let mut entries = vec![BatchEntry { new_tokens: 512, context_tokens: 0, emits_token: false }];
        entries.extend((0..7).map(|i| BatchEntry {
            new_tokens: 1,
            context_tokens: 300 + 100 * i,
            emits_token: true,
        }));
        entries
    }

    #[test]
    fn shares_sum_exactly_to_the_batch_time() {
        let model = model();
        let entries = mixed_batch();
        let (mut scratch, mut shares) = (Vec::new(), Vec::new());
        for batch_ns in [0, 1, 7, 9_999_999, 12_345_678_901] {
            llmvisor_shares(&model, &entries, batch_ns, &mut scratch, &mut shares);
            assert_eq!(shares.iter().sum::<u64>(), batch_ns);
        }
        // A hand-checkable case: three shares of 1/3 s each over 1,000 ns give 334+333+333.
        exact_split_ns(&[1.0, 1.0, 1.0], 1_000, &mut shares);
        assert_eq!(shares, vec![334, 333, 333]);
    }

    #[test]
    fn shapley_is_efficient_and_sampling_agrees_with_exact() {
        let model = model();
        let entries = mixed_batch();
        let exact = shapley_exact(&model, &entries);
        assert!((exact.iter().sum::<f64>() - model.iteration_s(&entries)).abs() < 1e-12);
        let sampled = shapley_sampled(&model, &entries, 200, 7);
        for (e, s) in exact.iter().zip(&sampled) {
            assert!((e - s).abs() / e < 0.005, "{e} vs {s}");
        }
    }

    #[test]
    fn llmvisor_is_closer_to_shapley_than_the_proxy() {
        let model = model();
        let entries = mixed_batch();
        let prefill: Vec<bool> = entries.iter().map(|e| e.new_tokens > 1).collect();
        let mut errors = AttributionErrors::default();
        errors.evaluate(
            &model,
            &entries,
            &prefill,
            AttributionEval { every_nth_iteration: 1, permutations: 64, seed: 1, fitted_params: None },
        );
        let worst = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        assert!(worst(&errors.llmvisor_decode) < worst(&errors.proxy_decode));
        assert!(worst(&errors.llmvisor_prefill) < worst(&errors.proxy_prefill));
    }
}
