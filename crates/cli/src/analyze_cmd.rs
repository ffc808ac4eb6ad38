//! `cotenant analyze`: characterize a job trace or request traces (what the
//! workload looks like before anyone simulates it). The numbers come from
//! `cotenant_trace::analyze`, the layout from `cotenant_report::analysis`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use cotenant_core::Span;
use cotenant_report::analysis::{
    job_analysis_figures, job_analysis_html, job_analysis_json, job_analysis_text, request_analysis_figures,
    request_analysis_html, request_analysis_json, request_analysis_text,
};
use cotenant_report::Figure;
use cotenant_trace::analyze::{analyze_jobs, analyze_requests, JobOptions, WorkUnit};
use cotenant_trace::requests::{read_azure_csv, read_mooncake_jsonl, RequestTrace};
use cotenant_trace::{
    bundled_data_dir, generate, parse_trace_arg, read_trace, traces_dir, Slice, SliceBound, SyntheticSpec,
    TraceKind, Workload, BUNDLED_AZURE_CODE, BUNDLED_AZURE_CONV, BUNDLED_PHILLY,
};

use crate::workload::DEFAULT_WEEK;

#[derive(Debug, Clone, clap::Args)]
pub struct AnalyzeArgs {
    /// The job trace as KIND:PATH, the same as --trace (`cotenant analyze philly:my.csv`).
    #[arg(value_name = "KIND:PATH", conflicts_with_all = ["trace", "synthetic", "requests"])]
    pub trace_file: Option<String>,
    /// Job trace to analyze, as KIND:PATH. Kinds: philly, itp, gavel, pollux, tiresias, openb, sacct, kubectl.
    /// Plain or .gz files. Without --trace, --synthetic and --requests: the bundled Philly
    /// trace, sliced to the week 2017-11-06..2017-11-13 unless --all or a slice is given.
    #[arg(long, value_name = "KIND:PATH", conflicts_with_all = ["synthetic", "requests"])]
    pub trace: Option<String>,
    /// Analyze a generated workload instead (the same SPEC as `sim --synthetic`).
    #[arg(long, value_name = "SPEC", conflicts_with = "requests")]
    pub synthetic: Option<String>,
    /// Request trace(s) to analyze instead of a job trace, repeatable: azure (code and conv),
    /// azure-code, azure-conv (bundled), mooncake (from --traces-dir), or azure:PATH /
    /// mooncake:PATH for a file of that format.
    #[arg(long, value_name = "SPEC")]
    pub requests: Vec<String>,
    /// Where `--requests mooncake` looks (default: $COTENANT_TRACES or ../shared/traces).
    #[arg(long, value_name = "DIR")]
    pub traces_dir: Option<PathBuf>,
    /// Keep jobs arriving at or after this time: `2017-11-06`, `2017-11-06 12:00:00` (Philly) or seconds.
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Keep jobs arriving before this time (same forms as --from).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Keep at most the first N jobs (after the time window).
    #[arg(long, value_name = "N")]
    pub max_jobs: Option<usize>,
    /// Use the whole default Philly trace (82,247 jobs) instead of the default week.
    #[arg(long)]
    pub all: bool,
    /// Window for demanded GPUs (job traces) or the request rate (request traces) over
    /// time, e.g. 1h, 10m, 30s. Default: the shortest of 1s, 10s, 1m, 5m, 15m, 1h, 6h, 1d,
    /// 7d that covers the trace in at most 400 windows.
    #[arg(long, value_name = "DURATION")]
    pub window: Option<String>,
    /// Print the analysis as JSON on stdout (instead of tables).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report (figures and tables) to this file.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Also write every figure as SVG and PNG (for papers) into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub figures: Option<PathBuf>,
}

pub fn run(args: AnalyzeArgs) -> Result<()> {
    let window_us = args
        .window
        .as_deref()
        .map(|text| Span::parse(text).map(|s| s.0).map_err(|e| anyhow!("--window: {e}")))
        .transpose()?;
    if !args.requests.is_empty() {
        return run_requests(&args, window_us);
    }
    let (workload, kind) = load_jobs(&args)?;
    let work_unit = if kind == Some(TraceKind::Gavel) { WorkUnit::Steps } else { WorkUnit::Seconds };
    let analysis = analyze_jobs(&workload, JobOptions { work_unit, window_us })
        .with_context(|| format!("analyzing {}", workload.source))?;
    if let Some(path) = &args.html {
        write_file(path, &job_analysis_html(&analysis).context("--html")?)?;
    }
    if let Some(dir) = &args.figures {
        write_figures(dir, &job_analysis_figures(&analysis))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&job_analysis_json(&analysis))?);
    } else {
        print!("{}", job_analysis_text(&analysis));
    }
    Ok(())
}

fn run_requests(args: &AnalyzeArgs, window_us: Option<u64>) -> Result<()> {
    if args.from.is_some() || args.to.is_some() || args.max_jobs.is_some() || args.all {
        bail!("--from, --to, --max-jobs and --all slice job traces; they do not apply to --requests");
    }
    let mut analyses = Vec::new();
    for spec in &args.requests {
        for trace in load_requests(spec, args.traces_dir.as_deref())? {
            analyses.push(
                analyze_requests(&trace, window_us).with_context(|| format!("analyzing {}", trace.source))?,
            );
        }
    }
    if let Some(path) = &args.html {
        write_file(path, &request_analysis_html(&analyses).context("--html")?)?;
    }
    if let Some(dir) = &args.figures {
        write_figures(dir, &request_analysis_figures(&analyses))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&request_analysis_json(&analyses))?);
    } else {
        print!("{}", request_analysis_text(&analyses));
    }
    Ok(())
}

fn write_figures(dir: &Path, figures: &[(String, Figure, String)]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--figures: creating {}", dir.display()))?;
    for (name, figure, _) in figures {
        figure.write_files(dir, name).context("--figures")?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("--html: writing {}", path.display()))
}

/// The job workload the flags name: as `sim` loads it (crates/cli/src/workload.rs),
/// without the cluster, quota and sizing steps that analysis does not need.
fn load_jobs(args: &AnalyzeArgs) -> Result<(Workload, Option<TraceKind>)> {
    if let Some(spec) = &args.synthetic {
        let spec = SyntheticSpec::parse(spec)?;
        return Ok((generate(&spec), None));
    }
    let (kind, path, default_trace) = match args.trace.as_ref().or(args.trace_file.as_ref()) {
        Some(arg) => {
            let (kind, path) = parse_trace_arg(arg)?;
            (kind, path, false)
        }
        None => (TraceKind::Philly, bundled_data_dir().join(BUNDLED_PHILLY), true),
    };
    let mut slice = Slice {
        start: args.from.as_deref().map(SliceBound::parse).transpose()?,
        end: args.to.as_deref().map(SliceBound::parse).transpose()?,
        max_jobs: args.max_jobs,
    };
    let sliced = slice.start.is_some() || slice.end.is_some() || slice.max_jobs.is_some();
    if default_trace && !args.all && !sliced {
        slice.start = Some(SliceBound::parse(DEFAULT_WEEK.0)?);
        slice.end = Some(SliceBound::parse(DEFAULT_WEEK.1)?);
    }
    let workload = read_trace(kind, &path, &slice).with_context(|| format!("reading {}", path.display()))?;
    if workload.jobs.is_empty() {
        bail!(
            "{}: no jobs arrive in the selected slice (--from {}, --to {}, --max-jobs {})",
            path.display(),
            args.from.as_deref().unwrap_or("-"),
            args.to.as_deref().unwrap_or("-"),
            args.max_jobs.map_or("-".to_string(), |n| n.to_string())
        );
    }
    Ok((workload, Some(kind)))
}

/// The request traces one `--requests` SPEC names.
fn load_requests(spec: &str, traces: Option<&Path>) -> Result<Vec<RequestTrace>> {
    let bundled_azure = |name: &str, file: &str| -> Result<RequestTrace> {
        let bundled = bundled_data_dir().join(file);
        let path = if bundled.exists() {
            bundled
        } else {
            traces_dir(traces)
                .join("azure-llm-inference-2023")
                .join(format!("AzureLLMInferenceTrace_{name}.csv"))
        };
        Ok(read_azure_csv(&path)?)
    };
    Ok(match spec {
        "azure" => vec![bundled_azure("code", BUNDLED_AZURE_CODE)?, bundled_azure("conv", BUNDLED_AZURE_CONV)?],
        "azure-code" => vec![bundled_azure("code", BUNDLED_AZURE_CODE)?],
        "azure-conv" => vec![bundled_azure("conv", BUNDLED_AZURE_CONV)?],
        "mooncake" => {
            vec![read_mooncake_jsonl(&traces_dir(traces).join("mooncake-2024").join("conversation_trace.jsonl"))?]
        }
        other => match other.split_once(':') {
            Some(("azure", path)) if !path.is_empty() => vec![read_azure_csv(Path::new(path))?],
            Some(("mooncake", path)) if !path.is_empty() => vec![read_mooncake_jsonl(Path::new(path))?],
            _ => bail!(
                "--requests {other}: expected azure, azure-code, azure-conv, mooncake, azure:PATH or mooncake:PATH"
            ),
        },
    })
}
