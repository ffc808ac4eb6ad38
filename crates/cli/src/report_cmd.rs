//! `cotenant report`: one self-contained HTML report from saved results (any
//! mix of `sim --save` files and sweep results.json), and the file writing that
//! `sim --save` / `sim --report` share with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cotenant_report::html::slug;
use cotenant_report::results::{parse_results, ResultsFile, SimResults};
use cotenant_report::serve_report::{is_serve_input, serve_report_sections};
use cotenant_report::sim_report::add_sim_sections;
use cotenant_report::sweep_report::add_sweep_sections;
use cotenant_report::HtmlReport;

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Results to report on: files written by `cotenant sim --save` or `cotenant serve-sim
    /// --save` and sweep results.json files, in any mix (each gets its own section, in
    /// the order given).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: PathBuf,
    /// Also write every figure as DIR/NAME.svg and DIR/NAME.png (PNG at twice the
    /// SVG's size), for papers.
    #[arg(long, value_name = "DIR")]
    pub figures: Option<PathBuf>,
    /// The report's title.
    #[arg(long, default_value = "cotenant report")]
    pub title: String,
}

/// One input file: results the sim and sweep sections read, or serving results (a
/// `serve-sim --save` document or a serve sweep) for the serving sections.
enum Input {
    Results(ResultsFile),
    Serve(serde_json::Value),
}

pub fn run(args: ReportArgs) -> Result<()> {
    let mut inputs = Vec::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        // Serving results (serve-sim --save, serve sweeps) go to the serving sections.
        let serve = serde_json::from_str::<serde_json::Value>(&text).ok().filter(is_serve_input);
        let input = match serve {
            Some(value) => Input::Serve(value),
            None => Input::Results(parse_results(&path.display().to_string(), &text)?),
        };
        inputs.push((path, input));
    }
    let mut report = HtmlReport::new(&args.title);
    let files: Vec<String> = args.files.iter().map(|p| p.display().to_string()).collect();
    report.subtitle(&format!("cotenant {} report {}", env!("CARGO_PKG_VERSION"), files.join(" ")));
    let mut prefixes: Vec<String> = Vec::new();
    for (path, input) in &inputs {
        // One input: figures are plain names (jct-cdf.svg); several: prefixed by the input.
        let prefix = if inputs.len() == 1 { String::new() } else { unique_prefix(path, &mut prefixes) };
        let label = path.display().to_string();
        match input {
            Input::Results(ResultsFile::Sim(results)) => {
                add_sim_sections(&mut report, results, &label, &prefix)?
            }
            Input::Results(ResultsFile::Sweep(sweep)) => {
                add_sweep_sections(&mut report, sweep, &label, &prefix)?
            }
            Input::Serve(serve) => serve_report_sections(&mut report, &label, serve, &prefix)?,
        }
    }
    write_report(&args.output, &report)?;
    println!("report: {} ({} figures)", args.output.display(), report.figure_count());
    if let Some(dir) = &args.figures {
        let written = report.write_figures(dir)?;
        println!("figures: {} files in {}", written.len(), dir.display());
    }
    Ok(())
}

/// A figure-name prefix for `path`: its stem (with its folder's name when the
/// stem is the generic `results`), made unique among `taken`.
fn unique_prefix(path: &Path, taken: &mut Vec<String>) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let folder = path.parent().and_then(|p| p.file_name()).map(|s| s.to_string_lossy().into_owned());
    let base = match folder {
        Some(folder) if stem == "results" => slug(&format!("{folder}-{stem}")),
        _ => slug(&stem),
    };
    let base = if base.is_empty() { "input".to_string() } else { base };
    let mut prefix = base.clone();
    let mut n = 2;
    while taken.contains(&prefix) {
        prefix = format!("{base}-{n}");
        n += 1;
    }
    taken.push(prefix.clone());
    prefix
}

fn write_report(path: &Path, report: &HtmlReport) -> Result<()> {
    std::fs::write(path, report.render()).with_context(|| format!("writing {}", path.display()))
}

/// `sim --save`: the saved results as compact JSON and a newline.
pub fn write_saved(path: &Path, saved: &SimResults) -> Result<()> {
    let mut text = serde_json::to_string(saved).context("serializing the saved results")?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `sim --report`: the report `cotenant report` makes from one saved simulation.
pub fn write_sim_report(path: &Path, saved: &SimResults) -> Result<()> {
    let source = saved.workload.get("source").and_then(|s| s.as_str()).unwrap_or("workload");
    let mut report = HtmlReport::new("cotenant report");
    report.subtitle(&format!("cotenant {} sim --report ({source})", env!("CARGO_PKG_VERSION")));
    add_sim_sections(&mut report, saved, source, "")?;
    write_report(path, &report)
}
