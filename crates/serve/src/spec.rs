//! Speculative decoding: a proposer guesses `k` tokens, the target model verifies them in
//! one pass, and each decode step of a request emits between 1 and k + 1 tokens.
//!
//! The acceptance model is Leviathan et al. (ICML'23, "Fast Inference from Transformers
//! via Speculative Decoding"): each proposed token is accepted independently with
//! probability alpha, the step keeps the accepted prefix and adds one token of its own
//! (the correction of the first rejected proposal, or a bonus token when all k pass), so
//! a step emits `a + 1` tokens with `a` the number of leading acceptances and
//!
//! ```text
//! E[tokens per step] = (1 - alpha^(k+1)) / (1 - alpha)        (k + 1 when alpha = 1)
//! ```
//!
//! Cost of one step of a batch (the simulator's iteration):
//!
//! ```text
//! draft:   sum_{j<k} T_draft(decoding rows with more than j proposals, 1 new token at context c + j)
//!          + the draft's forward over this step's prefill chunks (its KV of the prompt), in step 0
//! ngram:   0 (prompt lookup runs on the CPU)
//! verify:  T_target(batch with k + 1 new tokens per decoding row)
//!          + the LM head over the k extra rows per decoding row
//! ```
//!
//! A request never proposes more than it still has to generate minus one, nor more than
//! the iteration's token budget allows: `k + 1` tokens of the budget, and KV blocks for
//! `k + 1` tokens, are reserved per decoding row, and the blocks of rejected tokens are
//! released when the step ends. The draws are a deterministic function of (seed, request,
//! tokens generated so far): the same run gives the same bytes, and two schedulers see
//! the same acceptances for the same request at the same point of its output.

use cotenant_perf::{BatchEntry, ModelShape, Roofline};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::kv::KvPool;
use crate::request::RequestId;
use crate::state::Seq;

/// Most tokens one step may propose (vLLM's `num_speculative_tokens` is typically 1-8).
pub const MAX_SPEC_TOKENS: u32 = 32;

/// Who proposes the tokens the target verifies.
#[derive(Clone, Debug)]
pub enum Proposer {
    /// A smaller model on the same GPUs: `k` sequential decode steps of its own per step.
    Draft(Box<Roofline>),
    /// Prompt lookup (vLLM's `[ngram]`): proposals by matching n-grams of the context on
    /// the CPU, no GPU time.
    Ngram,
}

/// `--spec`: the proposer, proposals per step and the acceptance rate.
#[derive(Clone, Debug)]
pub struct SpecConfig {
    pub proposer: Proposer,
    /// Tokens proposed per step, 1..=[`MAX_SPEC_TOKENS`].
    pub k: u32,
    /// Probability alpha that each proposed token is accepted, in [0, 1].
    pub acceptance: f64,
    /// Seed of the acceptance draws.
    pub seed: u64,
}

/// `--spec` as written, before the draft model is placed on the deployment's GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecArgs {
    /// The draft model's shape; None for the n-gram proposer.
    pub draft: Option<ModelShape>,
    /// The draft's tensor-parallel degree (`tp=`); None: the target's.
    pub draft_tp: Option<u32>,
    pub k: u32,
    pub acceptance: f64,
    pub seed: u64,
}

impl SpecArgs {
    /// Parses `draft=MODEL,k=K,accept=A[,seed=S][,tp=N]` or `ngram,k=K,accept=A[,seed=S]`.
    /// MODEL is a catalog name or an explicit shape whose `key=value` fields follow
    /// `draft=` (`draft=layers=16,hidden=2048,heads=32,kv_heads=8,head_dim=64,ffn=8192,vocab=128256,k=4,accept=0.7`):
    /// every field that is not `k`, `accept`, `seed` or `tp` belongs to the draft's shape.
    pub fn parse(text: &str) -> Result<SpecArgs, String> {
        let (mut draft_fields, mut ngram) = (Vec::new(), false);
        let (mut k, mut acceptance, mut seed, mut draft_tp) = (None, None, 0, None);
        for item in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match item.split_once('=') {
                None if item == "ngram" => ngram = true,
                None => return Err(format!("`{item}`: expected `ngram` or key=value")),
                Some(("k", value)) => {
                    let parsed = value.parse::<u32>().ok().filter(|k| (1..=MAX_SPEC_TOKENS).contains(k));
                    k = Some(parsed.ok_or_else(|| {
                        format!("k=`{value}`: must be an integer in [1, {MAX_SPEC_TOKENS}]")
                    })?);
                }
                Some(("accept", value)) => {
                    let parsed = value.parse::<f64>().ok().filter(|a| (0.0..=1.0).contains(a));
                    acceptance =
                        Some(parsed.ok_or_else(|| format!("accept=`{value}`: must be a number in [0, 1]"))?);
                }
                Some(("tp", value)) => {
                    let parsed = value.parse::<u32>().ok().filter(|tp| (1..=1024).contains(tp));
                    draft_tp =
                        Some(parsed.ok_or_else(|| format!("tp=`{value}`: must be an integer in [1, 1024]"))?);
                }
                Some(("seed", value)) => {
                    seed = value
                        .parse()
                        .map_err(|_| format!("seed=`{value}`: must be a non-negative integer"))?;
                }
                Some(("draft", value)) => draft_fields.insert(0, value),
                Some(_) => draft_fields.push(item),
            }
        }
        let k = k.ok_or("missing k=K (tokens proposed per step)")?;
        let acceptance = acceptance.ok_or("missing accept=A (acceptance rate per proposed token)")?;
        let draft = match (ngram, draft_fields.is_empty()) {
            (true, true) if draft_tp.is_some() => {
                return Err("tp= applies to a draft model, not ngram".into())
            }
            (true, true) => None,
            (false, false) => {
                if !text.contains("draft=") {
                    return Err(format!(
                        "`{}`: unknown field (expected draft=, ngram, k=, accept=, seed=)",
                        draft_fields[0]
                    ));
                }
                let shape = draft_fields.join(",");
                Some(ModelShape::parse(&shape).map_err(|e| format!("draft model: {e}"))?)
            }
            (true, false) => {
                return Err(format!("ngram takes no draft model (`{}`)", draft_fields.join(",")))
            }
            (false, true) => return Err("expected draft=MODEL or ngram".into()),
        };
        Ok(SpecArgs { draft, draft_tp, k, acceptance, seed })
    }
}

/// Expected tokens one step emits: (1 - alpha^(k+1)) / (1 - alpha), k + 1 when alpha = 1.
pub fn expected_tokens_per_step(k: u32, acceptance: f64) -> f64 {
    if acceptance >= 1.0 {
        return f64::from(k) + 1.0;
    }
    (1.0 - acceptance.powi(k as i32 + 1)) / (1.0 - acceptance)
}

impl SpecConfig {
    /// New tokens a decoding request computes this step (its last token plus the
    /// proposals): k + 1, fewer when it has fewer than k + 1 tokens left to generate
    /// or the budget is short. `remaining` >= 1 and `budget` >= 1.
    pub fn step_tokens(&self, remaining: u32, budget: u32) -> u32 {
        (self.k + 1).min(remaining).min(budget).max(1)
    }

    /// Proposals accepted for request `id` with `generated` tokens so far, out of `proposals`:
    /// the number of leading successes of independent Bernoulli(alpha) draws.
    pub fn accepted(&self, id: RequestId, generated: u32, proposals: u32) -> u32 {
        if proposals == 0 {
            return 0;
        }
        let stream = (u64::from(id) << 32) | u64::from(generated);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream);
        (0..proposals).take_while(|_| rng.random::<f64>() < self.acceptance).count() as u32
    }

    /// Seconds the proposer spends on a batch (`prefill[i]` says whether entry i is a
    /// prefill chunk; a decoding row's proposals are its new tokens minus one). `scratch`
    /// is reused between calls.
    pub fn proposal_s(&self, entries: &[BatchEntry], prefill: &[bool], scratch: &mut Vec<BatchEntry>) -> f64 {
        let Proposer::Draft(draft) = &self.proposer else { return 0.0 };
        let mut total_s = 0.0;
        for step in 0..self.k {
            scratch.clear();
            for (entry, &is_prefill) in entries.iter().zip(prefill) {
                if is_prefill {
                    if step == 0 {
                        scratch.push(*entry);
                    }
                } else if entry.new_tokens > step + 1 {
                    let context_tokens = entry.context_tokens + step;
                    scratch.push(BatchEntry { new_tokens: 1, context_tokens, emits_token: true });
                }
            }
            if scratch.is_empty() {
                break;
            }
            total_s += draft.iteration_s(scratch);
        }
        total_s
    }

    /// Seconds the verification adds beyond the target's roofline of the batch: the LM
    /// head over the proposals' rows (the roofline counts one row per sampling entry).
    pub fn verification_extra_s(target: &Roofline, entries: &[BatchEntry], prefill: &[bool]) -> f64 {
        let (mut tokens, mut rows, mut extra_rows) = (0_u64, 0_u64, 0_u64);
        for (entry, &is_prefill) in entries.iter().zip(prefill) {
            tokens += u64::from(entry.new_tokens);
            rows += u64::from(entry.emits_token);
            if !is_prefill {
                extra_rows += u64::from(entry.new_tokens - 1);
            }
        }
        if extra_rows == 0 {
            return 0.0;
        }
        target.shared_cost(tokens, rows + extra_rows).total_s() - target.shared_cost(tokens, rows).total_s()
    }

    /// Per-GPU bytes the draft model adds beside the target: its weights, and its KV
    /// cache per token (every token the target caches, the draft caches too).
    pub fn draft_memory(&self) -> (f64, f64) {
        match &self.proposer {
            Proposer::Draft(draft) => {
                (draft.weight_bytes_per_gpu(), draft.model.kv_bytes_per_token_per_gpu(draft.tensor_parallel))
            }
            Proposer::Ngram => (0.0, 0.0),
        }
    }
}

/// Frees the blocks `seq` reserved for proposals that were rejected: it keeps blocks for
/// its `kv_tokens` (beside the prefix-cache entries it references).
pub fn release_rejected_blocks(kv: &mut KvPool, seq: &mut Seq) {
    let cached = u64::from(seq.prefix_entries) * kv.blocks_per_prefix_entry();
    let keep = kv.blocks_for_tokens(u64::from(seq.kv_tokens)).saturating_sub(cached);
    if seq.private_blocks > keep {
        kv.free(seq.private_blocks - keep);
        seq.private_blocks = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::{find_gpu, RooflineParams};

    fn h100(shape: &str) -> Roofline {
        let gpu = *find_gpu("H100-SXM").expect("catalog");
        Roofline::new(ModelShape::parse(shape).expect("shape"), gpu, 1, RooflineParams::default())
    }

    const DRAFT_1B: &str = "layers=16,hidden=2048,heads=32,kv_heads=8,head_dim=64,ffn=8192,vocab=128256";

    fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected.abs()
    }

    /// k = 4, alpha = 0.8: (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616 tokens per
    /// step; alpha = 0: 1; alpha = 1: 5; k = 1, alpha = 0.5: 1.5.
    #[test]
    fn expected_tokens_by_hand() {
        assert!(close(expected_tokens_per_step(4, 0.8), 3.3616, 1e-12));
        assert_eq!(expected_tokens_per_step(4, 0.0), 1.0);
        assert_eq!(expected_tokens_per_step(4, 1.0), 5.0);
        assert!(close(expected_tokens_per_step(1, 0.5), 1.5, 1e-12));
    }

    /// The seeded draws reproduce the formula: 200,000 steps of k = 4 at alpha = 0.8
    /// average 3.3616 tokens within 1% (the standard error is about 0.003), and
    /// the distribution of accepted prefixes is truncated geometric:
    /// P(a = 0) = 1 - alpha = 0.2, P(a = 4) = alpha^4 = 0.4096.
    #[test]
    fn draws_follow_the_acceptance_model() {
        let spec = SpecConfig { proposer: Proposer::Ngram, k: 4, acceptance: 0.8, seed: 7 };
        let (mut sum, mut none, mut all) = (0_u64, 0_u64, 0_u64);
        let steps = 200_000_u32;
        for step in 0..steps {
            let accepted = spec.accepted(step % 1000, step / 1000, 4);
            sum += u64::from(accepted) + 1;
            none += u64::from(accepted == 0);
            all += u64::from(accepted == 4);
        }
        let mean = sum as f64 / f64::from(steps);
        assert!(close(mean, 3.3616, 0.01), "{mean}");
        assert!(close(none as f64 / f64::from(steps), 0.2, 0.03), "{none}");
        assert!(close(all as f64 / f64::from(steps), 0.4096, 0.02), "{all}");
        // Deterministic: the same (seed, request, position) gives the same draw.
        assert_eq!(spec.accepted(3, 17, 4), spec.accepted(3, 17, 4));
        let never = SpecConfig { acceptance: 0.0, ..spec.clone() };
        let always = SpecConfig { acceptance: 1.0, ..spec };
        assert_eq!((never.accepted(1, 1, 4), always.accepted(1, 1, 4)), (0, 4));
    }

    #[test]
    fn step_tokens_respect_remaining_output_and_budget() {
        let spec = SpecConfig { proposer: Proposer::Ngram, k: 4, acceptance: 0.5, seed: 0 };
        assert_eq!(spec.step_tokens(100, 8192), 5);
        assert_eq!(spec.step_tokens(3, 8192), 3); // 2 proposals + the last token
        assert_eq!(spec.step_tokens(1, 8192), 1);
        assert_eq!(spec.step_tokens(100, 2), 2);
    }

    /// One speculative step of one request (context 1,000) with a Llama-3.2-1B-like draft
    /// (L 16, d 2048, 32 heads of 64, 8 KV heads, d_ff 8192, V 128256) for Llama-3.1-8B on
    /// one H100 (roofline defaults: F = 692.3e12 FLOP/s, BW = 2.5125e12 B/s, c0 1 ms, knee 3),
    /// k = 4, worked on paper:
    ///
    /// draft decode of one token at context c, per layer (k x n weight): compute 2 k n / F,
    ///   memory 2 (k n + k + n) / BW: QKV 2048x3072 0.0182 / 5.0122 us; O 2048x2048 0.0121 /
    ///   3.3420; up 2048x16384 0.0969 / 26.7247; down 8192x2048 0.0485 / 13.3631 (the smooth
    ///   max adds under 1e-6 us) = 48.442 us x 16 layers = 775.07 us
    ///   element-wise: 2 x 2 d b + 2 (32 + 8) 64 b + 3 d_ff b + 3 d b = 88,064 B x 16 / BW = 0.561 us
    ///   KV at c = 1000: 16 x 2 x 8 x 64 x 2 x 1001 / BW = 13.055 us (attention compute 0.19 us)
    ///   LM head: floor 2 x 262.67M / BW = 209.09 us (compute 0.76 us)
    ///   step at c = 1000: 1000 + 775.07 + 0.561 + 13.055 + 209.09 = 1,997.78 us; each later
    ///   step reads one more token of KV (+0.013 us): four steps = 7,991.2 us
    /// verification: the target with 5 new tokens at context 1000, per layer memory
    ///   2 (k n + 5 (k + n)) / BW: QKV 20.073, O 13.388, up 93.615, down 46.816 us (compute
    ///   0.36, 0.24, 1.70, 0.85 us) = 173.892 us x 32 = 5,564.56 us; element-wise
    ///   163,840 B x 5 x 32 / BW = 10.434 us; KV 32 x 2 x 8 x 128 x 2 x 1005 / BW = 52.429 us
    ///   (compute 3.80 us, smax 52.433); LM head over 5 rows: floor 418.18 us, compute 7.59 us,
    ///   smax 418.18; c0 1,000 us: 7,045.6 us
    /// step = 7,991.2 + 7,045.6 = 15,036.8 us; with the n-gram proposer, 7,045.6 us.
    #[test]
    fn one_speculative_step_by_hand() {
        let target = h100("Llama-3.1-8B");
        let draft = SpecConfig {
            proposer: Proposer::Draft(Box::new(h100(DRAFT_1B))),
            k: 4,
            acceptance: 0.8,
            seed: 1,
        };
        let entries = [BatchEntry { new_tokens: 5, context_tokens: 1000, emits_token: true }];
        let mut scratch = Vec::new();
        let proposal_s = draft.proposal_s(&entries, &[false], &mut scratch);
        assert!(close(proposal_s, 7_991.2e-6, 1e-4), "{proposal_s}");
        let verify_s =
            target.iteration_s(&entries) + SpecConfig::verification_extra_s(&target, &entries, &[false]);
        assert!(close(verify_s, 7_045.6e-6, 1e-4), "{verify_s}");
        assert!(close(proposal_s + verify_s, 15_036.8e-6, 1e-4));
        let ngram = SpecConfig { proposer: Proposer::Ngram, ..draft };
        assert_eq!(ngram.proposal_s(&entries, &[false], &mut scratch), 0.0);
    }

    /// A prefill chunk costs the draft one forward over the chunk, once; a decoding row with
    /// 2 proposals costs 2 draft steps, not k.
    #[test]
    fn draft_runs_prefills_once_and_stops_after_a_rows_proposals() {
        let draft_model = h100(DRAFT_1B);
        let spec = SpecConfig {
            proposer: Proposer::Draft(Box::new(draft_model.clone())),
            k: 4,
            acceptance: 0.5,
            seed: 0,
        };
        let chunk = BatchEntry { new_tokens: 512, context_tokens: 0, emits_token: true };
        let row = BatchEntry { new_tokens: 3, context_tokens: 100, emits_token: true };
        let one = |context_tokens| BatchEntry { new_tokens: 1, context_tokens, emits_token: true };
        let expected = draft_model.iteration_s(&[chunk, one(100)]) + draft_model.iteration_s(&[one(101)]);
        let actual = spec.proposal_s(&[chunk, row], &[true, false], &mut Vec::new());
        assert!(close(actual, expected, 1e-12), "{actual} {expected}");
    }

    /// A row at 1,020 tokens reserved ceil(1,025 / 16) = 65 blocks for its step and kept
    /// 1,021 tokens (64 blocks): one block goes back. At 1,024 tokens (still 64 blocks)
    /// nothing more does.
    #[test]
    fn rejected_proposals_give_back_their_blocks() {
        let mut kv = KvPool::new(100, 16, 0);
        let mut seq = Seq::new(10);
        assert!(kv.try_allocate(65));
        seq.private_blocks = 65;
        seq.kv_tokens = 1021;
        release_rejected_blocks(&mut kv, &mut seq);
        assert_eq!((seq.private_blocks, kv.used_blocks()), (64, 64));
        seq.kv_tokens = 1024;
        release_rejected_blocks(&mut kv, &mut seq);
        assert_eq!((seq.private_blocks, kv.used_blocks()), (64, 64));
    }

    #[test]
    fn parses_both_proposers_and_names_bad_fields() {
        let ngram = SpecArgs::parse("ngram,k=4,accept=0.7").expect("ngram");
        assert_eq!(ngram, SpecArgs { draft: None, draft_tp: None, k: 4, acceptance: 0.7, seed: 0 });
        let named = SpecArgs::parse("draft=Llama-3.1-8B,k=2,accept=0.5,seed=3").expect("catalog");
        assert_eq!(named.draft.expect("draft").name, "Llama-3.1-8B");
        let explicit = SpecArgs::parse(&format!("draft={DRAFT_1B},k=4,accept=0.8,tp=1")).expect("explicit");
        assert_eq!(explicit.draft_tp, Some(1));
        assert_eq!(explicit.draft.expect("draft").hidden, 2048);
        for (text, needle) in [
            ("ngram,k=0,accept=0.5", "k=`0`"),
            ("ngram,k=4,accept=1.5", "accept=`1.5`"),
            ("ngram,k=4", "missing accept"),
            ("draft=gpt-9,k=4,accept=0.5", "draft model"),
            ("k=4,accept=0.5", "expected draft=MODEL or ngram"),
            ("ngram,k=4,accept=0.5,bogus=1", "ngram takes no draft"),
            ("k=4,accept=0.5,bogus=1", "unknown field"),
            ("ngram,k=4,accept=0.5,tp=2", "tp= applies to a draft model"),
            ("draft=Llama-3.1-8B,k=4,accept=0.5,tp=0", "tp=`0`"),
        ] {
            let err = SpecArgs::parse(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
