//! Sarathi-Serve: decodes first, then partial prefills, then new prefills, each prefill
//! chunk the largest whose iteration still meets the TBT target ("stall-free batching").
//!
//! The budget is not fixed: for every chunk it asks the roofline how long the iteration
//! would take with the entries already in the batch (the live decodes, earlier chunks)
//! plus the chunk, and takes the largest chunk that keeps it within the TBT target
//! ([`largest_chunk_within`]). A big decode batch leaves a small chunk; an idle replica
//! gets a large one. When not even one token fits beside the batch already formed, the
//! prefill waits for the next iteration; when the batch is empty, a prefill gets at least
//! [`MIN_CHUNK_TOKENS`] so the replica never stalls with work waiting.

use cotenant_perf::{BatchEntry, Roofline};

use super::{BatchLimits, Pick, RequestId, RequestScheduler, SchedCx};
use crate::Slo;

/// The chunk an empty batch always admits, even past the target (a prefill must move).
pub const MIN_CHUNK_TOKENS: u32 = 64;

/// The batch formed so far, folded into the sums the roofline needs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchSoFar {
    pub tokens: u64,
    pub rows: u64,
    /// Sum of the entries' own (attention and KV) terms, seconds.
    pub own_s: f64,
}

impl BatchSoFar {
    /// Folds `entries` (the batch being formed).
    pub fn of(model: &Roofline, entries: &[BatchEntry]) -> BatchSoFar {
        entries.iter().fold(BatchSoFar::default(), |acc, e| BatchSoFar {
            tokens: acc.tokens + u64::from(e.new_tokens),
            rows: acc.rows + u64::from(e.emits_token),
            own_s: acc.own_s + model.entry_s(*e),
        })
    }

    /// Iteration time of this batch plus a chunk of `chunk` tokens over `context` tokens
    /// of KV, which emits a token when it finishes a prefill of `prefill_left` tokens;
    /// equals [`Roofline::iteration_s`] of the batch with the chunk appended.
    pub fn with_chunk_s(&self, model: &Roofline, chunk: u32, context: u32, prefill_left: u32) -> f64 {
        let emits = chunk >= prefill_left;
        let entry = BatchEntry { new_tokens: chunk, context_tokens: context, emits_token: emits };
        model.shared_cost(self.tokens + u64::from(chunk), self.rows + u64::from(emits)).total_s()
            + self.own_s
            + model.entry_s(entry)
    }
}

/// The largest chunk, at most `max_chunk`, of a prefill with `prefill_left` tokens still
/// to compute over `context` cached tokens, whose iteration with `batch` takes at most
/// `target_s`; 0 if no chunk fits. Iteration time grows with the chunk, so a binary
/// search finds it (about 14 roofline evaluations for an 8,192-token budget).
pub fn largest_chunk_within(
    model: &Roofline,
    batch: &BatchSoFar,
    context: u32,
    prefill_left: u32,
    max_chunk: u32,
    target_s: f64,
) -> u32 {
    let high = max_chunk.min(prefill_left);
    let fits = |chunk: u32| batch.with_chunk_s(model, chunk, context, prefill_left) <= target_s;
    if high == 0 || !fits(1) {
        return 0;
    }
    if fits(high) {
        return high;
    }
    // Invariant: fits(low), !fits(high).
    let mut low = 1;
    let mut high = high;
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

#[derive(Clone, Debug)]
pub struct Sarathi {
    limits: BatchLimits,
    tbt_target_s: f64,
    /// Chunks sized (prefill tokens granted) and how many of them the target cut short.
    chunks: u64,
    chunk_tokens: u64,
    cut_short: u64,
}

impl Sarathi {
    /// Sarathi with `base`'s limits (its token budget is the cap on batched tokens, vLLM's
    /// `max_num_batched_tokens`), decodes first, chunks sized to `slo.tbt`.
    pub fn new(base: BatchLimits, slo: Slo) -> Sarathi {
        Sarathi {
            limits: BatchLimits { decode_first: true, ..base },
            tbt_target_s: slo.tbt.as_secs_f64(),
            chunks: 0,
            chunk_tokens: 0,
            cut_short: 0,
        }
    }

    /// The chunk for `id`'s prefill beside the batch in `cx`.
    fn chunk(&mut self, cx: &SchedCx<'_>, id: RequestId) -> u32 {
        let seq = &cx.seqs[id as usize];
        let left = seq.prefill_left();
        let max_chunk = cx.budget_left.min(left);
        let batch = BatchSoFar::of(cx.model, cx.batch);
        let mut chunk =
            largest_chunk_within(cx.model, &batch, seq.kv_tokens, left, max_chunk, self.tbt_target_s);
        if chunk == 0 && cx.batch.is_empty() {
            chunk = MIN_CHUNK_TOKENS.min(max_chunk).max(1);
        }
        if chunk > 0 {
            self.chunks += 1;
            self.chunk_tokens += u64::from(chunk);
            self.cut_short += u64::from(chunk < max_chunk);
        }
        chunk
    }
}

impl RequestScheduler for Sarathi {
    fn name(&self) -> &'static str {
        "sarathi"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        let Some(&id) = cx.waiting.first() else { return Pick::Stop };
        match self.chunk(cx, id) {
            0 => Pick::Stop,
            max_tokens => Pick::Admit { waiting_index: 0, max_tokens },
        }
    }
    fn running_chunk_cap(&mut self, cx: &SchedCx<'_>, id: RequestId) -> u32 {
        self.chunk(cx, id)
    }
    fn diagnostics(&self) -> Vec<(String, f64)> {
        let mean = if self.chunks == 0 { 0.0 } else { self.chunk_tokens as f64 / self.chunks as f64 };
        vec![
            ("tbt_target_ms".into(), self.tbt_target_s * 1e3),
            ("mean_chunk_tokens".into(), (mean * 10.0).round() / 10.0),
            ("chunks_cut_by_target".into(), self.cut_short as f64),
        ]
    }
}
