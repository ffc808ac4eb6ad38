//! Per-request simulation state.

use cotenant_core::Time;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    NotArrived,
    Waiting,
    Running,
    Done,
}

/// What the simulator knows about one request as it runs.
#[derive(Clone, Debug)]
pub struct Seq {
    pub phase: Phase,
    pub replica: u32,
    /// Tokens to prefill before the next token can be sampled: the prompt, plus the
    /// generated tokens after a recompute preemption.
    pub prefill_target: u32,
    /// Tokens whose KV is in memory (computed or taken from the prefix cache).
    pub kv_tokens: u32,
    pub generated: u32,
    pub private_blocks: u64,
    /// Prefix-cache entries this request references (a prefix of its hashes).
    pub prefix_entries: u32,
    pub admitted_order: u64,
    pub first_token: Option<Time>,
    pub last_token: Time,
    pub finish: Option<Time>,
    pub max_tbt_us: u64,
    pub preemptions: u32,
    pub prefix_hit_tokens: u32,
    /// Attributed GPU time, nanoseconds (LLMVisor shares).
    pub attributed_ns: u64,
}

impl Seq {
    pub fn new(prompt_tokens: u32) -> Seq {
        Seq {
            phase: Phase::NotArrived,
            replica: 0,
            prefill_target: prompt_tokens,
            kv_tokens: 0,
            generated: 0,
            private_blocks: 0,
            prefix_entries: 0,
            admitted_order: 0,
            first_token: None,
            last_token: Time::ZERO,
            finish: None,
            max_tbt_us: 0,
            preemptions: 0,
            prefix_hit_tokens: 0,
            attributed_ns: 0,
        }
    }

    pub fn in_prefill(&self) -> bool {
        self.kv_tokens < self.prefill_target
    }

    pub fn prefill_left(&self) -> u32 {
        self.prefill_target.saturating_sub(self.kv_tokens)
    }
}
