//! Simulation-guided scheduling (the SliceScheduler idea, reconstructed): before each
//! admission, roll the replica forward a short horizon with the simulator's own
//! iteration-time model for several candidate prefill chunk sizes, and take the one
//! with the highest predicted token throughput whose predicted SLO slack stays >= 0
//! for every tenant: the TBT of the decodes already running (a hard constraint: a
//! chunk that breaks it is not computed this iteration) and the TTFT of the request
//! being prefilled (soft: if no chunk meets it, the one with the most slack). A request
//! already past its TTFT cannot be saved and does not constrain the choice.
//! Which request is admitted follows VTC's counters, so the comparison with VTC
//! isolates the effect of the look-ahead.
//!
//! The roll-forward freezes arrivals and KV: it prices the next `HORIZON_STEPS`
//! iterations of the batch being formed, not the whole replica. Decodes are summed
//! once per candidate, so one pick costs O(batch + candidates x horizon).

use cotenant_perf::BatchEntry;

use super::{BatchLimits, Pick, RequestScheduler, SchedCx, VtcCounters};
use crate::request::{Request, RequestId};

const HORIZON_STEPS: u32 = 8;
const CHUNK_CANDIDATES_TOKENS: [u32; 6] = [8192, 2048, 1024, 512, 256, 128];

#[derive(Clone, Debug)]
pub struct Lookahead {
    limits: BatchLimits,
    counters: VtcCounters,
    pub rollouts: u64,
}

/// The prediction for one candidate chunk size.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rollout {
    chunk_tokens: u32,
    tokens_per_s: f64,
    ttft_slack_s: f64,
    tbt_slack_s: f64,
}

impl Lookahead {
    pub fn new(limits: BatchLimits, weights: Vec<f64>) -> Lookahead {
        // Decodes first, so every running decode is in the batch before a prefill chunk
        // is sized against their TBT.
        Lookahead {
            limits: BatchLimits { decode_first: true, ..limits },
            counters: VtcCounters::new(weights),
            rollouts: 0,
        }
    }

    fn rollout(cx: &SchedCx<'_>, id: RequestId, chunk_tokens: u32) -> Rollout {
        let model = cx.model;
        let mut decode_own_s = 0.0;
        let (mut decodes, mut other_prefill_tokens, mut other_rows, mut other_own_s) =
            (0_u64, 0_u64, 0_u64, 0.0);
        for entry in cx.batch {
            if entry.new_tokens == 1 {
                decodes += 1;
                decode_own_s += model.entry_s(*entry);
            } else {
                other_prefill_tokens += u64::from(entry.new_tokens);
                other_rows += u64::from(entry.emits_token);
                other_own_s += model.entry_s(*entry);
            }
        }
        let request = &cx.requests[id as usize];
        let mut remaining = cx.prefill_left(id);
        let mut computed = request.prompt_tokens.saturating_sub(remaining);
        let (mut elapsed_s, mut tokens, mut worst_iteration_s, mut ttft_s) = (0.0, 0_u64, 0.0_f64, None);
        let mut steps = 0_u32;
        for step in 0..HORIZON_STEPS {
            let chunk = chunk_tokens.min(remaining);
            let done = chunk > 0 && chunk == remaining;
            let (extra_tokens, extra_rows, extra_own) =
                if step == 0 { (other_prefill_tokens, other_rows, other_own_s) } else { (0, 0, 0.0) };
            let entry = BatchEntry { new_tokens: chunk, context_tokens: computed, emits_token: done };
            let new_tokens = decodes + u64::from(chunk) + extra_tokens;
            let shared = model.shared_cost(new_tokens, decodes + u64::from(done) + extra_rows).total_s();
            let iteration_s = shared + decode_own_s + model.entry_s(entry) + extra_own;
            elapsed_s += iteration_s;
            tokens += new_tokens;
            worst_iteration_s = worst_iteration_s.max(iteration_s);
            steps += 1;
            (remaining, computed) = (remaining - chunk, computed + chunk);
            if done {
                // What follows depends on admissions the roll-out does not model; pricing
                // those steps as lone decodes would favour chunks that never finish.
                ttft_s = Some(elapsed_s);
                break;
            }
        }
        let waited_s = (cx.now - request.arrival).as_secs_f64();
        // A prefill still unfinished at the horizon is charged the remaining chunks at the horizon's pace.
        let remaining_steps = f64::from(remaining.div_ceil(chunk_tokens.max(1)));
        let ttft_s = ttft_s.unwrap_or(elapsed_s + elapsed_s / f64::from(steps.max(1)) * remaining_steps);
        // A request already past its TTFT SLO cannot be saved by this choice; like a
        // hopeless decode, it does not constrain the others.
        let ttft_slack_s = if waited_s >= cx.slo.ttft.as_secs_f64() {
            f64::INFINITY
        } else {
            cx.slo.ttft.as_secs_f64() - waited_s - ttft_s
        };
        // Every running decode's next gaps stay within the TBT SLO.
        let tbt_slack_s = if cx.batch.iter().any(|e| e.new_tokens == 1) {
            cx.slo.tbt.as_secs_f64() - worst_iteration_s
        } else {
            f64::INFINITY
        };
        Rollout { chunk_tokens, tokens_per_s: tokens as f64 / elapsed_s.max(1e-9), ttft_slack_s, tbt_slack_s }
    }

    /// The chunk to compute for `id` this iteration; 0 when every candidate would push
    /// the running decodes past their TBT SLO (the request waits an iteration).
    fn best_chunk(&mut self, cx: &SchedCx<'_>, id: RequestId) -> u32 {
        let mut best: Option<Rollout> = None;
        for chunk in CHUNK_CANDIDATES_TOKENS.into_iter().filter(|&c| c <= cx.budget_left.max(128)) {
            let candidate = Self::rollout(cx, id, chunk.min(cx.budget_left));
            self.rollouts += 1;
            if candidate.tbt_slack_s < 0.0 {
                continue; // the running decodes' TBT is a hard constraint
            }
            best = Some(match best {
                None => candidate,
                Some(current) => choose(current, candidate),
            });
        }
        best.map_or(0, |r| r.chunk_tokens)
    }
}

/// Among TBT-feasible candidates: one that meets the TTFT beats one that does not;
/// among those that do, higher throughput; among those that do not, more TTFT slack.
fn choose(a: Rollout, b: Rollout) -> Rollout {
    match (a.ttft_slack_s >= 0.0, b.ttft_slack_s >= 0.0) {
        (true, false) => a,
        (false, true) => b,
        (true, true) => {
            if b.tokens_per_s > a.tokens_per_s {
                b
            } else {
                a
            }
        }
        (false, false) => {
            if b.ttft_slack_s > a.ttft_slack_s {
                b
            } else {
                a
            }
        }
    }
}

impl RequestScheduler for Lookahead {
    fn name(&self) -> &'static str {
        "lookahead"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn on_arrival(&mut self, cx: &SchedCx<'_>, id: RequestId) {
        self.counters.lift_on_arrival(cx.requests[id as usize].tenant, cx.waiting_per_tenant);
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        let Some(tenant) = self.counters.neediest(cx.waiting_per_tenant) else { return Pick::Stop };
        let Some(index) = cx.first_waiting_of(tenant) else { return Pick::Stop };
        match self.best_chunk(cx, cx.waiting[index]) {
            0 => Pick::Stop,
            chunk => Pick::Admit { waiting_index: index, max_tokens: chunk },
        }
    }
    fn running_chunk_cap(&mut self, cx: &SchedCx<'_>, id: RequestId) -> u32 {
        self.best_chunk(cx, id)
    }
    fn on_admit(&mut self, cx: &SchedCx<'_>, id: RequestId, first_time: bool) {
        if first_time {
            let request = &cx.requests[id as usize];
            self.counters.charge_prompt(request.tenant, request.prompt_tokens);
        }
    }
    fn on_service(&mut self, request: &Request, _prefill_tokens: u32, decode_tokens: u32) {
        self.counters.charge_output(request.tenant, decode_tokens);
    }
    fn diagnostics(&self) -> Vec<(String, f64)> {
        vec![("rollouts".into(), self.rollouts as f64)]
    }
}
