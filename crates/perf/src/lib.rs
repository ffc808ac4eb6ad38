//! cotenant-perf: analytical performance models (GPU catalog, throughput, LLM roofline). Pure functions: no I/O.
pub mod throughput;
