//! Training performance model: how long one iteration of a dense transformer takes, and
//! how much memory each GPU needs, for a parallel layout on a GPU type and the links a
//! placement gives it (docs/training.md has every formula and source).
//!
//! - [`shape`]: model shapes and the presets of published runs;
//! - [`links`]: per-group link paths ([`Links`]) and hierarchical ring collectives
//!   ([`ring_allreduce_time`]);
//! - [`megatron`]: Megatron-LM PTD-P iteration time ([`iteration_time`]) and memory
//!   per GPU (Korthikanti et al. activations, ZeRO sharding);
//! - [`axonn`]: AxoNN's 4D (data x 3D tensor) communication model;
//! - [`hsdp`]: FL+HSDP (local steps, outer averaging over a slow link);
//! - [`search`]: every feasible layout for a GPU count and batch, best first.
//!
//! Pure functions: no I/O, no clock, no randomness.

pub mod axonn;
pub mod hsdp;
pub mod links;
pub mod megatron;
pub mod search;
pub mod shape;

pub use axonn::{axonn_iteration_time, axonn_search, AxonnBreakdown, Grid};
pub use hsdp::{fl_hsdp_time, FlHsdp, FlHsdpBreakdown};
pub use links::{ring_allreduce_time, ring_reduce_scatter_time, Fabric, Link, Links, Tier, TierPath};
pub use megatron::{
    achievable_fraction, iteration_time, memory_per_gpu, IterationBreakdown, Layout, MemoryBreakdown,
    Recompute,
};
pub use search::{evaluate, search, Plan, SearchLimits};
pub use shape::{preset, TrainShape, PRESET_NAMES};

/// Why a training plan cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TrainError {
    /// The layout is invalid for the model (degrees, heads, layers, schedule).
    #[error("{0}")]
    Layout(String),
    /// The global batch does not split into the layout's micro-batches.
    #[error("{0}")]
    Batch(String),
    /// No layout fits the GPU's memory.
    #[error(
        "the model fits no layout: the smallest needs {:.1} GiB per GPU, the GPU offers {:.1} GiB usable",
        smallest_bytes / crate::gpu::GIB,
        usable_bytes / crate::gpu::GIB
    )]
    DoesNotFit { smallest_bytes: f64, usable_bytes: f64 },
}

/// Divisors of `n`, ascending.
pub(crate) fn divisors(n: u32) -> Vec<u32> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut k = 1;
    while k * k <= n {
        if n.is_multiple_of(k) {
            small.push(k);
            if k * k != n {
                large.push(n / k);
            }
        }
        k += 1;
    }
    small.extend(large.into_iter().rev());
    small
}
