//! Gavel (OSDI'20): heterogeneity-aware allocation policies over time fractions
//! X[job][gpu_type], and the round-based mechanism that turns X into per-round
//! GPU assignments.
pub mod allocation;
pub mod pyrandom;
pub mod solver;
