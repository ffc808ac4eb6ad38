//! Gavel (OSDI'20): heterogeneity-aware allocation policies over time fractions
//! X[job][gpu_type] (and, packed, over pairs of jobs sharing GPUs), and the
//! round-based mechanism that turns X into per-round GPU assignments. See
//! `docs/policies.md` ("Heterogeneous policies"), `docs/experiments/gavel-parity.md`
//! and `docs/experiments/gavel-packed.md`.
pub mod allocation;
mod dense;
pub mod gandiva;
pub mod mechanism;
pub mod packed;
pub mod pyrandom;
pub mod solver;

pub use allocation::{AllocJob, Allocator, Objective, PackedObjective};
pub use mechanism::{
    Gavel, GavelConfig, GavelStats, DEFAULT_RESET_INTERVAL, DEFAULT_ROUND, MAX_PAIR_CANDIDATES,
};

use cotenant_core::Policy;

use crate::registry::{Options, PolicyError, PolicyParams};

/// Builds the Gavel policy `name` solving `objective`. Options: `seed` (0),
/// `reset_interval` (1920s) and, for packed objectives, `max_pairs` (20000);
/// the round length is `--round` (360s by default).
/// Without a throughput table, every job has rate 1 on every GPU type (the
/// reference speed of traces whose work is seconds).
pub fn build(
    name: &'static str,
    objective: Objective,
    params: &PolicyParams,
    options: &mut Options<'_>,
) -> Result<Box<dyn Policy>, PolicyError> {
    if objective.packs() && params.throughputs.is_none() {
        return Err(PolicyError::Missing {
            policy: name.into(),
            what: "a throughput table with co-located pair rates (--throughputs)".into(),
        });
    }
    let seed = options.u32("seed", 0)?;
    let reset_interval = options.span("reset_interval", DEFAULT_RESET_INTERVAL)?;
    // Only packed objectives take the pair limit (0: the packed objective, no pairs).
    let max_pairs = if objective.packs() { options.u32("max_pairs", MAX_PAIR_CANDIDATES)? } else { 0 };
    // Without a table every job runs at its reference speed on every type.
    let table = params.throughputs.clone().unwrap_or_default();
    let config = GavelConfig {
        name,
        objective,
        round: params.round.unwrap_or(DEFAULT_ROUND),
        reset_interval,
        seed: u64::from(seed),
        placement: params.placement,
        max_pairs,
    };
    Ok(Box::new(Gavel::new(config, table, params.job_types.clone())))
}
