//! Routers: which replica a new request goes to.

use crate::request::Request;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterKind {
    RoundRobin,
    /// The replica with the fewest prompt + output tokens still to serve.
    LeastOutstandingTokens,
    /// Requests sharing their first two prefix blocks go to the same replica (so its
    /// prefix cache hits), unless that replica has over twice the average outstanding
    /// tokens; requests without hashes go to the least loaded replica. Two blocks, not
    /// one: in Mooncake every request shares block 0 (a system prompt), and keying on it
    /// alone sends the whole trace to one replica.
    PrefixAffinity,
}

impl RouterKind {
    pub fn parse(text: &str) -> Option<RouterKind> {
        match text.to_ascii_lowercase().as_str() {
            "round-robin" | "rr" => Some(RouterKind::RoundRobin),
            "least-outstanding" | "least-outstanding-tokens" | "lot" => {
                Some(RouterKind::LeastOutstandingTokens)
            }
            "prefix-affinity" | "prefix" => Some(RouterKind::PrefixAffinity),
            _ => None,
        }
    }
}

/// Prefix blocks that make up the affinity key.
const AFFINITY_BLOCKS: usize = 2;

#[derive(Clone, Debug)]
pub struct Router {
    kind: RouterKind,
    next: usize,
}

impl Router {
    pub fn new(kind: RouterKind) -> Router {
        Router { kind, next: 0 }
    }

    /// `outstanding_tokens[r]` is replica r's unfinished work in tokens.
    pub fn route(&mut self, request: &Request, outstanding_tokens: &[u64]) -> usize {
        let replicas = outstanding_tokens.len();
        if replicas <= 1 {
            return 0;
        }
        let least = || (0..replicas).min_by_key(|&r| (outstanding_tokens[r], r)).unwrap_or(0);
        match self.kind {
            RouterKind::RoundRobin => {
                self.next = (self.next + 1) % replicas;
                (self.next + replicas - 1) % replicas
            }
            RouterKind::LeastOutstandingTokens => least(),
            RouterKind::PrefixAffinity => {
                match request.prefix_hashes.get(..AFFINITY_BLOCKS.min(request.prefix_hashes.len())) {
                    Some(key) if !key.is_empty() => {
                        let combined = key.iter().fold(0_u64, |acc, hash| mix64(acc ^ *hash));
                        let home = (combined % replicas as u64) as usize;
                        let average = outstanding_tokens.iter().sum::<u64>() / replicas as u64;
                        if outstanding_tokens[home] > 2 * average.max(1) {
                            least()
                        } else {
                            home
                        }
                    }
                    _ => least(),
                }
            }
        }
    }
}

/// SplitMix64 finalizer: spreads remapped (small, sequential) hash ids over replicas.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
