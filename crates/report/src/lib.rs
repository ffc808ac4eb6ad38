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

pub mod figure;
pub mod html;
pub mod jobs_csv;
pub mod json;
pub mod serve_json;
pub mod serve_report;
pub mod serve_saved;
pub mod serve_table;
pub mod table;

pub use figure::{Axis, Figure, FigureError, LegendPosition, Scale, Series, SeriesKind};
pub use html::HtmlReport;
pub use jobs_csv::write_jobs_csv;
pub use json::summaries_json;
pub use table::{comparison_table, health_block, human_duration, tenant_table, Table, COMPARISON_LEGEND};
