//! cotenant-perf: analytical performance models (GPU catalog, throughput, LLM roofline).
//!
//! Pure functions of their inputs: this crate must never do I/O, read a clock, draw
//! randomness or hold mutable global state. It depends on `core` for types only.
pub mod calibrated;
pub mod calibration;
pub mod gpu;
pub mod memory;
pub mod model;
pub mod moe;
pub mod prices;
pub mod profile;
pub mod roofline;
pub mod slice_speed;
pub mod synergy;
pub mod throughput;
pub mod train;
pub mod transfer;

pub use gpu::{find_gpu, Generation, GpuSpec, GIB, GPU_CATALOG};
pub use memory::{ActivationBatch, MemoryPlan};
pub use model::{model_catalog, MlaShape, ModelError, ModelShape, MoeShape, Precision};
pub use roofline::{BatchEntry, Roofline, RooflineParams, SharedCost};
