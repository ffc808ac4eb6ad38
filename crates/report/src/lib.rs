//! cotenant-report: renders simulation results for people (aligned text
//! tables, figures, self-contained HTML reports) and for programs (JSON
//! summaries, per-job CSV). Serialization lives here, at the edge; the
//! simulator's types know nothing of formats.
//!
//! Output is deterministic: the same results give byte-identical text, SVG,
//! PNG and HTML.
//!
//! - [`figure`]: a figure as data ([`Figure`], [`Axis`], [`Series`]) rendered to SVG and PNG.
//! - [`html`]: a builder for one self-contained HTML file ([`HtmlReport`]).
//! - [`results`]: saved results (`sim --save`, a sweep's results.json) and their readers.
//! - [`sim_report`], [`sweep_report`]: the report sections of those results.

pub mod analysis;
pub mod evalstop;
pub mod figure;
pub mod html;
pub mod jobs_csv;
pub mod json;
pub mod results;
pub mod serve_json;
pub mod serve_report;
pub mod serve_saved;
pub mod serve_search;
pub mod serve_table;
pub mod sim_report;
pub mod svg_read;
pub mod sweep_report;
pub mod table;

pub use figure::{Axis, Figure, FigureError, LegendPosition, Scale, Series, SeriesKind};
pub use html::HtmlReport;
pub use jobs_csv::write_jobs_csv;
pub use json::{summaries_json, summary_json};
pub use results::{parse_results, sim_results, ResultsError, ResultsFile, SimResults, SweepResults};
pub use table::{comparison_table, health_block, human_duration, tenant_table, Table, COMPARISON_LEGEND};
