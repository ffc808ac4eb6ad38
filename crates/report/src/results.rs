//! Saved results that `cotenant report` reads: a simulation's results
//! (`cotenant sim --save`, kind `cotenant-sim-results`) and a sweep's
//! `results.json` (kind `cotenant-sweep`).
//!
//! A saved simulation holds what the report's figures need and nothing the
//! report would have to recompute from the trace: the workload description,
//! the tenants, each job's arrival, size and tenant (the same under every
//! policy), and per policy the summary (exactly `sim --json`'s run object), each
//! job's queueing delay, JCT, outcome and productive run time, and the
//! per-window series (utilization, mean queue length, GPUs held per tenant).
//! Columns are arrays, one element per job or window, to keep files small.
//!
//! Readers name the file and the field of any error and never panic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use cotenant_core::MICROS_PER_SECOND;
use cotenant_sim::{summarize, Outcome, SimResult};

use crate::json::summary_json;

/// The `kind` of a saved simulation.
pub const SIM_RESULTS_KIND: &str = "cotenant-sim-results";
/// The version of the saved-simulation format this build writes and reads.
pub const SIM_RESULTS_VERSION: u32 = 1;
/// The `kind` of a sweep's results.json.
pub const SWEEP_KIND: &str = "cotenant-sweep";

/// A saved simulation: one workload under one or more policies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimResults {
    pub kind: String,
    pub version: u32,
    /// What `sim --json` prints as `workload` (source, kind, jobs, tenants, cluster).
    pub workload: Value,
    pub cluster_gpus: u32,
    pub tenants: Vec<SavedTenant>,
    pub jobs: SavedJobs,
    pub runs: Vec<SavedRun>,
}

/// A tenant's name and entitlement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedTenant {
    pub name: String,
    pub weight: f64,
    pub gpu_quota: Option<u32>,
}

/// Per job, what every policy saw alike (index = job id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedJobs {
    pub arrival_s: Vec<f64>,
    pub gpus: Vec<u32>,
    /// Index into [`SimResults::tenants`].
    pub tenant: Vec<usize>,
}

/// One policy's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedRun {
    pub summary: SavedSummary,
    /// Per job (same order as [`SimResults::jobs`]): time from arrival to first
    /// start, or null if it never started.
    pub queueing_s: Vec<Option<f64>>,
    /// Per job: arrival to completion, or null if it did not complete.
    pub jct_s: Vec<Option<f64>>,
    /// Per job: arrival to completion or end, or null if still there at the end of the run.
    pub end_s: Vec<Option<f64>>,
    /// Per job: time spent making progress, (held GPU-time - lost GPU-time) / GPUs;
    /// null for CPU-only jobs.
    pub run_s: Vec<Option<f64>>,
    /// Per job: `completed`, `ended: REASON` or `unfinished: WHY` (as in --jobs-csv).
    pub outcome: Vec<String>,
    pub windows: SavedWindows,
}

/// Per-window series of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedWindows {
    /// Window length (the one asked for with --share-window, or wider if the run outgrew it).
    pub window_s: f64,
    /// Start of window 0, seconds since the workload's epoch (the first arrival).
    pub origin_s: f64,
    /// GPU-time held / GPU-time available, per window (0-1).
    pub utilization: Vec<f64>,
    /// Mean number of waiting jobs over the window.
    pub queue_length: Vec<f64>,
    /// Per tenant (outer), per window (inner): mean GPUs held.
    pub tenant_gpus: Vec<Vec<f64>>,
}

/// A run's summary as `sim --json` prints it (the fields the report reads; others
/// are kept as they are in `rest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedSummary {
    pub policy: String,
    pub cluster_gpus: u32,
    pub jobs: usize,
    pub completed: usize,
    pub unfinished: usize,
    pub healthy: bool,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    pub jct_secs: SavedDistribution,
    pub queueing_secs: SavedDistribution,
    pub makespan_secs: f64,
    pub gpu_utilization: f64,
    pub goodput_utilization: f64,
    pub idle_while_waiting: f64,
    pub preemptions: u64,
    pub lost_gpu_hours: f64,
    pub jain_backlogged: Option<f64>,
    pub share_windows_measured: usize,
    pub events: u64,
    pub scheduling_passes: u64,
    pub tenants: Vec<SavedTenantSummary>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// Count, mean and nearest-rank percentiles, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedDistribution {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// A tenant's line of a run's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedTenantSummary {
    pub name: String,
    pub jobs: usize,
    pub completed: usize,
    pub jct_secs: SavedDistribution,
    pub queueing_secs: SavedDistribution,
    pub gpu_hours: f64,
    pub gpu_share: f64,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

fn secs(us: u64) -> f64 {
    us as f64 / MICROS_PER_SECOND as f64
}

/// The saved form of `results` (one run per policy, all on the same workload),
/// with `workload` as `sim --json` describes it.
pub fn sim_results(workload: Value, results: &[SimResult]) -> Result<SimResults, serde_json::Error> {
    let first = results.first();
    let tenants = first.map_or_else(Vec::new, |r| {
        r.tenants
            .iter()
            .map(|t| SavedTenant { name: t.name.clone(), weight: t.weight, gpu_quota: t.gpu_quota })
            .collect()
    });
    let jobs = first.map_or_else(
        || SavedJobs { arrival_s: Vec::new(), gpus: Vec::new(), tenant: Vec::new() },
        |r| SavedJobs {
            arrival_s: r.jobs.iter().map(|j| secs(j.arrival.0)).collect(),
            gpus: r.jobs.iter().map(|j| j.gpus).collect(),
            tenant: r.jobs.iter().map(|j| j.tenant.index()).collect(),
        },
    );
    let runs = results.iter().map(saved_run).collect::<Result<Vec<_>, _>>()?;
    Ok(SimResults {
        kind: SIM_RESULTS_KIND.into(),
        version: SIM_RESULTS_VERSION,
        workload,
        cluster_gpus: first.map_or(0, |r| r.cluster_gpus),
        tenants,
        jobs,
        runs,
    })
}

fn saved_run(result: &SimResult) -> Result<SavedRun, serde_json::Error> {
    let summary: SavedSummary = serde_json::from_value(summary_json(&summarize(result)))?;
    let jobs = &result.jobs;
    let usage = &result.usage;
    let tenants = result.tenants.len();
    let windows = SavedWindows {
        window_s: secs(usage.window().0),
        // The usage integrals start at the first arrival (the driver's `start_at`).
        origin_s: jobs.first().map_or(0.0, |j| secs(j.arrival.0)),
        utilization: usage.windows.iter().map(|w| w.utilization()).collect(),
        queue_length: usage.windows.iter().map(|w| w.mean_queue_length()).collect(),
        tenant_gpus: (0..tenants)
            .map(|t| {
                usage
                    .windows
                    .iter()
                    .map(|w| if w.span_us == 0 { 0.0 } else { w.gpu_us[t] as f64 / w.span_us as f64 })
                    .collect()
            })
            .collect(),
    };
    Ok(SavedRun {
        summary,
        queueing_s: jobs.iter().map(|j| j.queueing().map(|s| secs(s.0))).collect(),
        jct_s: jobs.iter().map(|j| j.jct().map(|s| secs(s.0))).collect(),
        end_s: jobs.iter().map(|j| j.end.map(|end| secs((end - j.arrival).0))).collect(),
        run_s: jobs
            .iter()
            .map(|j| {
                (j.gpus > 0).then(|| secs(j.held_gpu_us.saturating_sub(j.lost_gpu_us)) / f64::from(j.gpus))
            })
            .collect(),
        outcome: jobs
            .iter()
            .map(|j| match &j.outcome {
                Outcome::Completed => "completed".to_string(),
                Outcome::Ended(reason) => format!("ended: {reason}"),
                Outcome::Unfinished(why) => format!("unfinished: {why}"),
            })
            .collect(),
        windows,
    })
}

/// One sweep's results.json: rows of metrics, one per cell.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResults {
    /// `sim` or `serve`.
    pub mode: String,
    pub rows: Vec<SweepRow>,
}

/// One cell of a sweep: its key columns and every metric (numbers; `healthy` as 0/1).
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    pub cell: u64,
    pub kind: String,
    pub policy: String,
    pub load: f64,
    pub load_mode: String,
    pub seed: u64,
    pub options: String,
    /// Every other column: numbers as they are, booleans as 0 or 1, null as `None`.
    pub metrics: BTreeMap<String, Option<f64>>,
}

impl SweepRow {
    /// A metric by column name (`None` if absent or null).
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied().flatten()
    }
}

/// What went wrong reading a results file; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    // The causes are in the message, not chained as `source`s: a chain printed
    // with `{:#}` would say them twice.
    #[error("{file}: {error}")]
    Read { file: String, error: std::io::Error },
    #[error("{file}: not JSON: {error}")]
    Json { file: String, error: serde_json::Error },
    #[error("{file}: missing field \"kind\": not a cotenant results file (expected {expected})")]
    NoKind { file: String, expected: String },
    #[error("{file}: field \"kind\": unknown kind {kind:?} (expected {expected})")]
    UnknownKind { file: String, kind: String, expected: String },
    #[error("{file}: field \"version\": {found}, but this build reads version {supported} of {kind}")]
    Version { file: String, kind: String, found: String, supported: u32 },
    #[error("{file}: {detail}")]
    Field { file: String, detail: String },
}

/// A results file's contents, by kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultsFile {
    Sim(Box<SimResults>),
    Sweep(SweepResults),
}

/// The kinds [`parse_results`] reads, for error messages.
pub const KNOWN_KINDS: &str = "cotenant-sim-results, cotenant-serve-results or cotenant-sweep";

/// The kind of a results document (its `kind` field), or an error naming `file`.
pub fn results_kind(file: &str, value: &Value) -> Result<String, ResultsError> {
    match value.get("kind") {
        Some(Value::String(kind)) => Ok(kind.clone()),
        Some(other) => Err(ResultsError::Field {
            file: file.into(),
            detail: format!("field \"kind\": expected a string, got {other}"),
        }),
        None => Err(ResultsError::NoKind { file: file.into(), expected: KNOWN_KINDS.into() }),
    }
}

/// Parses the text of a results file named `file` (used in errors), dispatching on its kind.
pub fn parse_results(file: &str, text: &str) -> Result<ResultsFile, ResultsError> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| ResultsError::Json { file: file.into(), error })?;
    let kind = results_kind(file, &value)?;
    match kind.as_str() {
        SIM_RESULTS_KIND => parse_sim_results(file, text, &value).map(|r| ResultsFile::Sim(Box::new(r))),
        SWEEP_KIND => parse_sweep(file, &value).map(ResultsFile::Sweep),
        _ => Err(ResultsError::UnknownKind { file: file.into(), kind, expected: KNOWN_KINDS.into() }),
    }
}

fn parse_sim_results(file: &str, text: &str, value: &Value) -> Result<SimResults, ResultsError> {
    let version = value.get("version");
    if version.and_then(Value::as_u64) != Some(u64::from(SIM_RESULTS_VERSION)) {
        return Err(ResultsError::Version {
            file: file.into(),
            kind: SIM_RESULTS_KIND.into(),
            found: version.map_or("missing".into(), |v| v.to_string()),
            supported: SIM_RESULTS_VERSION,
        });
    }
    // From the text, not the value, so that errors carry a line and column.
    let results: SimResults = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        let message = message.trim_end_matches(&format!(" at line {} column {}", e.line(), e.column()));
        // serde names a missing field but not the field of a value of the wrong type.
        let field =
            if message.starts_with("missing field") { None } else { key_before(text, e.line(), e.column()) };
        let detail = match field {
            Some(key) => format!("line {} column {}: field \"{key}\": {message}", e.line(), e.column()),
            None => format!("line {} column {}: {message}", e.line(), e.column()),
        };
        ResultsError::Field { file: file.into(), detail }
    })?;
    check_sim_results(file, &results)?;
    Ok(results)
}

/// The object key whose value holds position (`line`, `column`, 1-based) of
/// `text`: the nearest `"key":` before it (for a value inside an array, the
/// array's key).
fn key_before(text: &str, line: usize, column: usize) -> Option<String> {
    let line_start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    let end = (line_start + column).min(text.len());
    let before = text.get(..end)?;
    let colon = before.rfind("\":")?;
    let key_start = before[..colon].rfind('"')? + 1;
    Some(before[key_start..colon].to_string())
}

/// Cross-field checks serde cannot make: column lengths and indices.
fn check_sim_results(file: &str, results: &SimResults) -> Result<(), ResultsError> {
    let error = |detail: String| Err(ResultsError::Field { file: file.into(), detail });
    let jobs = results.jobs.arrival_s.len();
    if results.jobs.gpus.len() != jobs || results.jobs.tenant.len() != jobs {
        return error(format!(
            "field \"jobs\": columns differ in length (arrival_s {jobs}, gpus {}, tenant {})",
            results.jobs.gpus.len(),
            results.jobs.tenant.len()
        ));
    }
    if let Some(index) = results.jobs.tenant.iter().position(|&t| t >= results.tenants.len()) {
        return error(format!(
            "field \"jobs.tenant\"[{index}]: tenant {} but there are {} tenants",
            results.jobs.tenant[index],
            results.tenants.len()
        ));
    }
    if let Some(index) = results.jobs.arrival_s.iter().position(|a| !a.is_finite() || *a < 0.0) {
        return error(format!(
            "field \"jobs.arrival_s\"[{index}]: not a time ({})",
            results.jobs.arrival_s[index]
        ));
    }
    for (r, run) in results.runs.iter().enumerate() {
        let columns = [
            ("queueing_s", run.queueing_s.len()),
            ("jct_s", run.jct_s.len()),
            ("end_s", run.end_s.len()),
            ("run_s", run.run_s.len()),
            ("outcome", run.outcome.len()),
        ];
        for (name, len) in columns {
            if len != jobs {
                return error(format!("field \"runs\"[{r}].{name}: {len} values for {jobs} jobs"));
            }
        }
        let w = &run.windows;
        if w.tenant_gpus.len() != results.tenants.len() {
            return error(format!(
                "field \"runs\"[{r}].windows.tenant_gpus: {} tenants, expected {}",
                w.tenant_gpus.len(),
                results.tenants.len()
            ));
        }
        let windows = w.utilization.len();
        if w.queue_length.len() != windows || w.tenant_gpus.iter().any(|t| t.len() != windows) {
            return error(format!(
                "field \"runs\"[{r}].windows: series differ in length (utilization {windows})"
            ));
        }
        if !(w.window_s.is_finite() && w.window_s > 0.0) {
            return error(format!(
                "field \"runs\"[{r}].windows.window_s: must be positive, got {}",
                w.window_s
            ));
        }
    }
    Ok(())
}

/// The key columns every sweep row has, in order.
pub const SWEEP_KEY_COLUMNS: [&str; 7] = ["cell", "kind", "policy", "load", "load_mode", "seed", "options"];

fn parse_sweep(file: &str, value: &Value) -> Result<SweepResults, ResultsError> {
    let error = |detail: String| ResultsError::Field { file: file.into(), detail };
    let mode = match value.get("mode") {
        Some(Value::String(mode)) if mode == "sim" || mode == "serve" => mode.clone(),
        Some(other) => {
            return Err(error(format!("field \"mode\": expected \"sim\" or \"serve\", got {other}")))
        }
        None => return Err(error("missing field \"mode\"".into())),
    };
    let rows = match value.get("rows") {
        Some(Value::Array(rows)) => rows,
        Some(other) => {
            return Err(error(format!("field \"rows\": expected an array, got {}", kind_of(other))))
        }
        None => return Err(error("missing field \"rows\"".into())),
    };
    let mut parsed = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let Value::Object(map) = row else {
            return Err(error(format!("rows[{i}]: expected an object, got {}", kind_of(row))));
        };
        let field =
            |name: &str| map.get(name).ok_or_else(|| error(format!("rows[{i}]: missing field \"{name}\"")));
        let string = |name: &str| match field(name)? {
            Value::String(s) => Ok(s.clone()),
            Value::Null if name == "options" => Ok(String::new()),
            other => Err(error(format!("rows[{i}]: field \"{name}\": expected a string, got {other}"))),
        };
        let number = |name: &str| match field(name)? {
            Value::Number(n) => {
                n.as_f64().ok_or_else(|| error(format!("rows[{i}]: field \"{name}\": not a number")))
            }
            other => Err(error(format!("rows[{i}]: field \"{name}\": expected a number, got {other}"))),
        };
        let integer = |name: &str| match field(name)? {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| error(format!("rows[{i}]: field \"{name}\": expected an integer, got {n}"))),
            other => Err(error(format!("rows[{i}]: field \"{name}\": expected an integer, got {other}"))),
        };
        let load = number("load")?;
        if !(load.is_finite() && load > 0.0) {
            return Err(error(format!("rows[{i}]: field \"load\": must be positive, got {load}")));
        }
        let mut metrics = BTreeMap::new();
        for (name, value) in map.iter().filter(|(k, _)| !SWEEP_KEY_COLUMNS.contains(&k.as_str())) {
            let metric = match value {
                Value::Number(n) => n.as_f64(),
                Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                Value::Null => None,
                Value::String(s) if s.is_empty() => None,
                other => {
                    return Err(error(format!("rows[{i}]: field \"{name}\": expected a number, got {other}")))
                }
            };
            metrics.insert(name.clone(), metric);
        }
        parsed.push(SweepRow {
            cell: integer("cell")?,
            kind: string("kind")?,
            policy: string("policy")?,
            load,
            load_mode: string("load_mode")?,
            seed: integer("seed")?,
            options: string("options")?,
            metrics,
        });
    }
    Ok(SweepResults { mode, rows: parsed })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_text(rows: &str) -> String {
        format!(r#"{{"kind": "cotenant-sweep", "mode": "sim", "rows": [{rows}]}}"#)
    }

    const ROW: &str = r#"{"cell": 0, "kind": "sim", "policy": "fifo", "load": 1.5, "load_mode": "rate", "seed": 2,
        "options": "", "jct_mean_s": 10.5, "healthy": true, "jain_backlogged": null}"#;

    #[test]
    fn reads_a_sweep_row() {
        let ResultsFile::Sweep(sweep) = parse_results("s.json", &sweep_text(ROW)).unwrap() else { panic!() };
        assert_eq!(sweep.mode, "sim");
        let row = &sweep.rows[0];
        assert_eq!((row.cell, row.policy.as_str(), row.load, row.seed), (0, "fifo", 1.5, 2));
        assert_eq!(row.metric("jct_mean_s"), Some(10.5));
        assert_eq!(row.metric("healthy"), Some(1.0));
        assert_eq!(row.metric("jain_backlogged"), None);
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let message = |text: &str| parse_results("bad.json", text).unwrap_err().to_string();
        assert_eq!(
            message(r#"{"rows": []}"#),
            "bad.json: missing field \"kind\": not a cotenant results file (expected cotenant-sim-results, cotenant-serve-results or cotenant-sweep)"
        );
        assert!(message(r#"{"kind": "nope"}"#).contains("bad.json: field \"kind\": unknown kind \"nope\""));
        assert!(message("{").starts_with("bad.json: not JSON"));
        let bad_load = sweep_text(&ROW.replace("1.5", "\"high\""));
        assert_eq!(message(&bad_load), "bad.json: rows[0]: field \"load\": expected a number, got \"high\"");
        let no_seed = sweep_text(&ROW.replace("\"seed\": 2,", ""));
        assert_eq!(message(&no_seed), "bad.json: rows[0]: missing field \"seed\"");
        assert!(message(r#"{"kind": "cotenant-sim-results", "version": 7}"#)
            .contains("field \"version\": 7, but this build reads version 1"));
        assert!(message(r#"{"kind": "cotenant-sim-results", "version": 1, "workload": {}}"#)
            .contains("missing field `cluster_gpus`"));
        assert_eq!(
            message("{\"kind\":\"cotenant-sim-results\",\"version\":1,\n\"cluster_gpus\":\"many\"}"),
            "bad.json: line 2 column 21: field \"cluster_gpus\": invalid type: string \"many\", expected u32"
        );
    }
}
