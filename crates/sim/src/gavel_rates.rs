//! Heterogeneity-aware rates from a Gavel-style throughput table.
