//! cotenant-report: renders simulation results for people (aligned text
//! tables) and for programs (JSON summaries, per-job CSV). Serialization lives
//! here, at the edge; the simulator's types know nothing of formats.
//!
//! Output is deterministic: the same results give byte-identical text.

pub mod jobs_csv;
pub mod json;
pub mod serve_json;
pub mod serve_saved;
pub mod serve_table;
pub mod table;

pub use jobs_csv::write_jobs_csv;
pub use json::summaries_json;
pub use table::{comparison_table, health_block, human_duration, tenant_table, Table, COMPARISON_LEGEND};
