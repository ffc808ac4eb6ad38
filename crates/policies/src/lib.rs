//! cotenant-policies: scheduling policies, one module each. Every policy reads
//! an immutable `ClusterView` and returns a `Decision`; none does I/O, reads a
//! clock or mutates the cluster. Shared passes live in `greedy`, ordered
//! waiting queues in `queue`, and the name → builder table in `registry`.

pub mod drf;
pub mod elastic;
pub mod evalstop;
pub mod fairshare;
pub mod fifo;
pub mod gavel;
pub mod greedy;
pub mod kueue;
pub mod las;
pub mod mig_search;
pub mod miso;
pub mod queue;
pub mod registry;
mod running;
pub mod sjf;
pub mod sjf_bsbf;
pub mod srtf;
pub mod synergy;
pub mod tiresias;
pub mod varuna;

#[cfg(test)]
mod test_world;

pub use registry::{build, policies, PolicyError, PolicyInfo, PolicyParams};
