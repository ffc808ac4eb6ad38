//! KV offload to CPU memory: a preempted request's KV cache is swapped out over PCIe
//! instead of being dropped and recomputed, and swapped back in when it is readmitted
//! (vLLM's `--swap-space`, preemption mode "swap").
//!
//! ```text
//! swap time = tokens x KV bytes per token per GPU / PCIe bandwidth     (each GPU over its own link)
//! CPU space = cpu_gib x 2^30 / KV bytes per token per GPU               (tokens per replica)
//! ```
//! Both copies are charged to an iteration of the replica: the swap-out to the iteration
//! whose batch formation preempted the request, the swap-in to the iteration that
//! readmits it (vLLM runs its swap operations before the step's forward). A swapped
//! request keeps every token it had computed (prefix-cache tokens included); when the
//! CPU space cannot hold it, the preemption falls back to recompute.

use crate::lora::parse_bandwidth;
use crate::lora::DEFAULT_PCIE_GB_PER_S;

/// Most CPU memory per GPU for swapped KV, GiB.
pub const MAX_CPU_GIB: f64 = 1_048_576.0;

/// `--kv-offload cpu_gib=G[,pcie=GBPS]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OffloadConfig {
    /// Host memory for swapped KV, GiB per GPU (vLLM's `--swap-space`, default 4).
    pub cpu_gib: f64,
    pub pcie_gb_per_s: f64,
}

impl OffloadConfig {
    pub fn parse(text: &str) -> Result<OffloadConfig, String> {
        let mut config = OffloadConfig { cpu_gib: f64::NAN, pcie_gb_per_s: DEFAULT_PCIE_GB_PER_S };
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("`{pair}`: expected key=value"))?;
            match key {
                "cpu_gib" => {
                    config.cpu_gib = value
                        .parse::<f64>()
                        .ok()
                        .filter(|g| g.is_finite() && *g >= 0.0 && *g <= MAX_CPU_GIB)
                        .ok_or_else(|| {
                            format!("cpu_gib=`{value}`: must be a number of GiB in [0, {MAX_CPU_GIB}]")
                        })?;
                }
                "pcie" => config.pcie_gb_per_s = parse_bandwidth(value)?,
                _ => return Err(format!("`{key}`: unknown field (expected cpu_gib, pcie)")),
            }
        }
        if config.cpu_gib.is_nan() {
            return Err("missing cpu_gib=G (host memory for swapped KV, GiB per GPU)".into());
        }
        Ok(config)
    }

    /// Tokens of KV the CPU space holds, with `bytes_per_token` KV bytes per token per GPU.
    pub fn capacity_tokens(&self, bytes_per_token: f64) -> u64 {
        (self.cpu_gib * cotenant_perf::GIB / bytes_per_token) as u64
    }

    /// Seconds to copy `tokens` tokens of KV one way.
    pub fn transfer_s(&self, tokens: u64, bytes_per_token: f64) -> f64 {
        tokens as f64 * bytes_per_token / (self.pcie_gb_per_s * 1e9)
    }
}

/// One replica's CPU swap space, in tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapSpace {
    pub capacity_tokens: u64,
    pub used_tokens: u64,
}

impl SwapSpace {
    /// Reserves room for `tokens`; false (taking nothing) when it does not fit.
    pub fn try_take(&mut self, tokens: u64) -> bool {
        if self.used_tokens + tokens > self.capacity_tokens {
            return false;
        }
        self.used_tokens += tokens;
        true
    }

    pub fn give_back(&mut self, tokens: u64) {
        assert!(
            tokens <= self.used_tokens,
            "swapping in {tokens} tokens, only {} swapped out",
            self.used_tokens
        );
        self.used_tokens -= tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3.1-8B keeps 2 x 32 x 8 x 128 x 2 = 131,072 B of KV per token on one GPU:
    /// 1,000 tokens over 25 GB/s take 131,072,000 / 25e9 = 5,242.88 us; over 50 GB/s
    /// half that. 4 GiB hold 4 x 2^30 / 131,072 = 32,768 tokens.
    #[test]
    fn swap_time_and_space_by_hand() {
        let offload = OffloadConfig::parse("cpu_gib=4").expect("parses");
        assert!((offload.transfer_s(1000, 131_072.0) - 5_242.88e-6).abs() < 1e-12);
        let fast = OffloadConfig::parse("cpu_gib=4,pcie=50").expect("parses");
        assert!((fast.transfer_s(1000, 131_072.0) - 2_621.44e-6).abs() < 1e-12);
        assert_eq!(offload.capacity_tokens(131_072.0), 32_768);
        let mut space = SwapSpace { capacity_tokens: 100, used_tokens: 0 };
        assert!(space.try_take(60));
        assert!(!space.try_take(41));
        assert_eq!(space.used_tokens, 60);
        space.give_back(60);
        assert!(space.try_take(100));
    }

    #[test]
    fn names_bad_fields() {
        for (text, needle) in [
            ("pcie=25", "missing cpu_gib"),
            ("cpu_gib=-1", "cpu_gib=`-1`"),
            ("cpu_gib=4,pcie=nan", "pcie=`nan`"),
            ("cpu_gib=4,disk=1", "unknown field"),
        ] {
            let err = OffloadConfig::parse(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
