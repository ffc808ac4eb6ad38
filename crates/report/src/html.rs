//! One self-contained HTML file: inline CSS and inline SVG figures, no scripts,
//! no network, readable on screen and printed.
//!
//! Build it block by block, then [`HtmlReport::render`]:
//!
//! ```
//! use cotenant_report::{Axis, Figure, HtmlReport, Series, Table};
//! let mut report = HtmlReport::new("Policies on the Philly week");
//! report.section("Job completion time");
//! let mut figure = Figure::new("JCT CDF", Axis::log("JCT", "s"), Axis::linear("fraction of jobs", "0-1"));
//! figure.push(Series::step("fifo", vec![(10.0, 0.5), (100.0, 1.0)]));
//! report.figure(&figure, "Fraction of completed jobs with a JCT at most x.").unwrap();
//! let mut table = Table::new(&["policy", "JCT mean"]);
//! table.row(vec!["fifo".into(), "55s".into()]);
//! report.table(&table, "Every metric.");
//! let html = report.render();
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! ```
//!
//! All text is HTML-escaped; the output is deterministic (no time stamps).

use crate::figure::{Figure, FigureError};
use crate::table::Table;

/// A report being built: a title and a list of blocks, rendered in order.
#[derive(Clone, Debug, Default)]
pub struct HtmlReport {
    title: String,
    /// A line under the title (e.g. the command and version that made the report).
    subtitle: Option<String>,
    blocks: Vec<Block>,
    /// Figures added with [`HtmlReport::named_figure`], for export as files.
    named: Vec<(String, Figure)>,
}

#[derive(Clone, Debug)]
enum Block {
    /// `level` 2 (section, listed in the contents) or 3 (subsection).
    Heading {
        level: u8,
        text: String,
        anchor: String,
    },
    Paragraph(String),
    Note(String),
    Preformatted(String),
    Figure {
        svg: String,
        caption: String,
    },
    Table {
        table: Table,
        caption: String,
    },
    KeyValues(Vec<(String, String)>),
}

impl HtmlReport {
    /// An empty report titled `title`.
    pub fn new(title: &str) -> HtmlReport {
        HtmlReport { title: title.into(), subtitle: None, blocks: Vec::new(), named: Vec::new() }
    }

    /// Sets the line shown under the title.
    pub fn subtitle(&mut self, text: &str) {
        self.subtitle = Some(text.into());
    }

    /// Starts a section (a level-2 heading, listed in the table of contents).
    pub fn section(&mut self, title: &str) {
        let anchor = format!("s{}-{}", self.blocks.len(), slug(title));
        self.blocks.push(Block::Heading { level: 2, text: title.into(), anchor });
    }

    /// Starts a subsection (a level-3 heading).
    pub fn subsection(&mut self, title: &str) {
        let anchor = format!("s{}-{}", self.blocks.len(), slug(title));
        self.blocks.push(Block::Heading { level: 3, text: title.into(), anchor });
    }

    /// A paragraph of plain text.
    pub fn paragraph(&mut self, text: &str) {
        self.blocks.push(Block::Paragraph(text.into()));
    }

    /// A highlighted note (warnings, caveats the reader must see).
    pub fn note(&mut self, text: &str) {
        self.blocks.push(Block::Note(text.into()));
    }

    /// Preformatted text (a text table, a command line).
    pub fn preformatted(&mut self, text: &str) {
        self.blocks.push(Block::Preformatted(text.into()));
    }

    /// A figure, drawn inline as SVG, with a caption under it.
    pub fn figure(&mut self, figure: &Figure, caption: &str) -> Result<(), FigureError> {
        let svg = figure.to_svg()?;
        self.figure_svg(svg, caption);
        Ok(())
    }

    /// A figure, as [`HtmlReport::figure`], kept under `name` (a file stem: letters,
    /// digits, `-`, `_`) for [`HtmlReport::write_figures`].
    pub fn named_figure(&mut self, name: &str, figure: Figure, caption: &str) -> Result<(), FigureError> {
        self.figure(&figure, caption)?;
        self.named.push((name.to_string(), figure));
        Ok(())
    }

    /// The figures added with [`HtmlReport::named_figure`], in order.
    pub fn named_figures(&self) -> &[(String, Figure)] {
        &self.named
    }

    /// Writes each named figure as `DIR/NAME.svg` and `DIR/NAME.png` (creating `DIR`);
    /// returns the paths written.
    pub fn write_figures(&self, dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, FigureError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| FigureError::Io { path: dir.display().to_string(), source })?;
        let mut written = Vec::new();
        for (name, figure) in &self.named {
            figure.write_files(dir, name)?;
            written.push(dir.join(format!("{name}.svg")));
            written.push(dir.join(format!("{name}.png")));
        }
        Ok(written)
    }

    /// An already-rendered SVG document (from [`Figure::to_svg`]) with a caption.
    /// The SVG is inserted as it is: pass only SVG this crate produced.
    pub fn figure_svg(&mut self, svg: String, caption: &str) {
        self.blocks.push(Block::Figure { svg, caption: caption.into() });
    }

    /// A table: header row, then rows; columns after the first are right-aligned
    /// (as in the text tables).
    pub fn table(&mut self, table: &Table, caption: &str) {
        self.blocks.push(Block::Table { table: table.clone(), caption: caption.into() });
    }

    /// A two-column list of names and values (a workload description).
    pub fn key_values(&mut self, pairs: &[(&str, String)]) {
        self.blocks.push(Block::KeyValues(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()));
    }

    /// The number of figures added so far.
    pub fn figure_count(&self) -> usize {
        self.blocks.iter().filter(|b| matches!(b, Block::Figure { .. })).count()
    }

    /// The whole document.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(64 * 1024);
        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        out.push_str(&format!(
            "<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
            escape(&self.title)
        ));
        out.push_str(&format!("<header>\n<h1>{}</h1>\n", escape(&self.title)));
        if let Some(subtitle) = &self.subtitle {
            out.push_str(&format!("<p class=\"subtitle\">{}</p>\n", escape(subtitle)));
        }
        out.push_str("</header>\n");
        let sections: Vec<(&str, &str)> = self
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Heading { level: 2, text, anchor } => Some((text.as_str(), anchor.as_str())),
                _ => None,
            })
            .collect();
        if sections.len() > 1 {
            out.push_str("<nav>\n<h2>Contents</h2>\n<ol>\n");
            for (text, anchor) in sections {
                out.push_str(&format!("<li><a href=\"#{anchor}\">{}</a></li>\n", escape(text)));
            }
            out.push_str("</ol>\n</nav>\n");
        }
        out.push_str("<main>\n");
        let mut figures = 0;
        let mut tables = 0;
        let mut open_section = false;
        for block in &self.blocks {
            match block {
                Block::Heading { level, text, anchor } => {
                    if *level == 2 {
                        if open_section {
                            out.push_str("</section>\n");
                        }
                        out.push_str("<section>\n");
                        open_section = true;
                    }
                    out.push_str(&format!("<h{level} id=\"{anchor}\">{}</h{level}>\n", escape(text)));
                }
                Block::Paragraph(text) => out.push_str(&format!("<p>{}</p>\n", escape(text))),
                Block::Note(text) => out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(text))),
                Block::Preformatted(text) => out.push_str(&format!("<pre>{}</pre>\n", escape(text))),
                Block::Figure { svg, caption } => {
                    figures += 1;
                    out.push_str(&format!("<figure id=\"figure-{figures}\">\n"));
                    out.push_str(svg.trim_end());
                    out.push_str(&format!(
                        "\n<figcaption><b>Figure {figures}.</b> {}</figcaption>\n</figure>\n",
                        escape(caption)
                    ));
                }
                Block::Table { table, caption } => {
                    tables += 1;
                    render_table(&mut out, table, tables, caption);
                }
                Block::KeyValues(pairs) => {
                    out.push_str("<dl>\n");
                    for (key, value) in pairs {
                        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(key), escape(value)));
                    }
                    out.push_str("</dl>\n");
                }
            }
        }
        if open_section {
            out.push_str("</section>\n");
        }
        out.push_str("</main>\n</body>\n</html>\n");
        out
    }
}

fn render_table(out: &mut String, table: &Table, number: usize, caption: &str) {
    out.push_str(&format!(
        "<div class=\"table\"><table id=\"table-{number}\">\n<caption><b>Table {number}.</b> {}</caption>\n<thead><tr>",
        escape(caption)
    ));
    for cell in &table.header {
        out.push_str(&format!("<th>{}</th>", escape(cell)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let tag = if i == 0 { "th scope=\"row\"" } else { "td" };
            let close = if i == 0 { "th" } else { "td" };
            out.push_str(&format!("<{tag}>{}</{close}>", escape(cell)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, safe in element text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Lower-case letters and digits of `text`, other runs as one `-` (for anchors
/// and figure file names).
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The report's stylesheet: system fonts, figures that shrink to the page, tables
/// with right-aligned numbers, and print rules (no page breaks inside a figure or
/// table, black on white, no navigation).
const STYLE: &str = r#"
:root { --ink: #1a1a1a; --muted: #5a5a5a; --rule: #d0d0d0; --accent: #0072b2; --note: #fff6dd; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 70rem; padding: 1.5rem 2rem 4rem; color: var(--ink); background: #fff;
  font: 16px/1.5 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 1.8rem; margin: 0 0 .25rem; }
h2 { font-size: 1.35rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 2px solid var(--rule); }
h3 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
.subtitle { color: var(--muted); margin: 0; font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .85rem; }
nav ol { columns: 2; margin: .3rem 0; }
nav h2 { font-size: 1rem; border: 0; margin: 1rem 0 0; }
a { color: var(--accent); }
p.note { background: var(--note); border-left: 4px solid #e69f00; padding: .5rem .8rem; white-space: pre-wrap; }
pre { background: #f6f6f6; padding: .6rem .8rem; overflow-x: auto; font-size: .8rem; }
figure { margin: 1.2rem 0; }
figure svg { display: block; width: 100%; max-width: 60rem; height: auto; border: 1px solid #eee; }
figcaption { color: var(--muted); font-size: .9rem; margin-top: .3rem; max-width: 50rem; }
.table { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; font-size: .85rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; color: var(--muted); padding-bottom: .3rem; }
th, td { padding: .2rem .6rem; border-bottom: 1px solid var(--rule); text-align: right; white-space: nowrap; }
thead th { border-bottom: 2px solid var(--ink); vertical-align: bottom; }
tbody th { text-align: left; font-weight: normal; }
tbody tr:nth-child(even) { background: #fafafa; }
dl { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; }
dt { font-weight: bold; }
dd { margin: 0; }
@media print {
  @page { margin: 15mm; }
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  a { color: inherit; text-decoration: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  h3 { break-after: avoid; page-break-after: avoid; }
  figure, .table, table, dl { break-inside: avoid; page-break-inside: avoid; }
  figure svg { border: 0; max-height: 45vh; width: auto; }
  tbody tr:nth-child(even) { background: none; }
  p.note { border-left-color: #000; background: none; border: 1px solid #000; }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{Axis, Series};

    fn report() -> HtmlReport {
        let mut report = HtmlReport::new("A <title> & more");
        report.subtitle("cotenant report x.json");
        report.section("First");
        report.paragraph("1 < 2");
        report.note("careful: \"quoted\"");
        let mut figure = Figure::new("f", Axis::linear("x", "s"), Axis::linear("y", "GPUs"));
        figure.push(Series::line("only", vec![(0.0, 1.0), (1.0, 2.0)]));
        report.figure(&figure, "cap <1>").unwrap();
        report.section("Second");
        let mut table = Table::new(&["policy", "value"]);
        table.row(vec!["a&b".into(), "1".into()]);
        report.table(&table, "t");
        report.key_values(&[("jobs", "3".into())]);
        report
    }

    #[test]
    fn renders_a_self_contained_escaped_document() {
        let html = report().render();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>A &lt;title&gt; &amp; more</title>"));
        assert!(html.contains("<p>1 &lt; 2</p>"));
        assert!(html.contains("careful: &quot;quoted&quot;"));
        assert!(html.contains("<th scope=\"row\">a&amp;b</th><td>1</td>"));
        assert!(html.contains("<b>Figure 1.</b> cap &lt;1&gt;"));
        assert!(html.contains("@media print"));
        assert_eq!(html.matches("<svg").count(), 1);
        assert_eq!(html.matches("<section>").count(), html.matches("</section>").count());
        assert_eq!(html.matches("<section>").count(), 2);
        assert!(html.contains("<nav>"));
        // Nothing is fetched: no scripts, no external references.
        assert!(!html.contains("<script"));
        assert!(!html.contains("src=\"http"));
        assert!(!html.contains("href=\"http"));
        assert_eq!(report().figure_count(), 1);
    }

    #[test]
    fn rendering_is_deterministic() {
        assert_eq!(report().render(), report().render());
    }

    #[test]
    fn escape_and_slug() {
        assert_eq!(escape("<a href='x'>&</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
        assert_eq!(slug("JCT CDF, per policy!"), "jct-cdf-per-policy");
    }
}
