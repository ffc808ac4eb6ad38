//! The saved serving-results document (`cotenant serve-sim --save PATH`): what
//! `cotenant report` needs to draw a run's serving figures without rerunning it.
//!
//! ```text
//! {"kind": "cotenant-serve-results", "version": 1,
//!  "workload": {source, requests, request_rate_per_s, tenants: [{name, weight}]},
//!  "config": {model, gpu, tensor_parallel, replicas, router, kv_capacity_tokens,
//!             token_budget, max_seqs, slo: {ttft_ms, tbt_ms}, window_s},
//!  "quantiles": [0, 0.005, ..., 0.995, 0.999, 1],
//!  "runs": [{"scheduler", "summary": (as serve-sim --json),
//!            "latency_ms": {"ttft" | "tpot" | "e2e": {"all": SKETCH, "tenants": [SKETCH, ...]},
//!                           "tbt": {"all": SKETCH}},
//!            "windows": {"window_s", "service": [[per tenant], ...], "backlogged": [[...], ...],
//!                        "service_difference": [null | {"window", "accumulated"}, ...],
//!                        "kv_utilization_mean": [null | fraction, ...],
//!                        "kv_utilization_max": [fraction, ...]}}]}
//! ```
//!
//! A SKETCH is `{"count", "mean", "values"}`: the nearest-rank value at each level of
//! `quantiles` (ms), so a CDF is `(values[i], quantiles[i])` and the document's size
//! is bounded by tenants x levels, not by requests. TTFT, TPOT and E2E are per
//! finished request; TBT is every gap between consecutive output tokens (the
//! simulator keeps it as one histogram for all tenants, so it has no per-tenant
//! sketch). Windows start at time 0 of the run and are `window_s` long. KV utilization
//! (blocks in use / capacity, over all replicas) is per window of iterations that start
//! in it: the busy-time-weighted mean (null for a window without iterations) and the
//! maximum; documents written before it was recorded have neither key.
//! Everything is computed by `cotenant_serve`; this module only lays it out, and
//! reads it back with errors that name the file and the field.

use serde_json::{json, Value};

use cotenant_serve::metrics::{quantiles, Histogram};
use cotenant_serve::summary::{request_latencies, service_differences, RequestLatency};
use cotenant_serve::{ServeConfig, ServeResult, Summary, Workload};

use crate::serve_json::{summary_json, workload_json};

/// The `kind` of a saved serving-results document.
pub const SERVE_RESULTS_KIND: &str = "cotenant-serve-results";
/// The version this code writes and reads.
pub const SERVE_RESULTS_VERSION: u64 = 1;

/// Quantile levels every sketch is taken at: every 0.5% from 0 to 1, plus 0.999.
pub fn sketch_levels() -> Vec<f64> {
    let mut levels: Vec<f64> = (0..=200).map(|i| f64::from(i) / 200.0).collect();
    levels.insert(200, 0.999);
    levels
}

/// A distribution kept as its values at [`sketch_levels`].
#[derive(Clone, Debug, PartialEq)]
pub struct Sketch {
    /// How many values it summarizes.
    pub count: u64,
    /// Their mean; None when there are none.
    pub mean: Option<f64>,
    /// The value at each level (empty when `count` is 0), non-decreasing.
    pub values: Vec<f64>,
}

impl Sketch {
    fn of(values: &[f64], levels: &[f64]) -> Sketch {
        if values.is_empty() {
            return Sketch { count: 0, mean: None, values: Vec::new() };
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Sketch { count: values.len() as u64, mean: Some(mean), values: quantiles(values, levels) }
    }

    fn of_histogram_ms(histogram: &Histogram, levels: &[f64]) -> Sketch {
        if histogram.count() == 0 {
            return Sketch { count: 0, mean: None, values: Vec::new() };
        }
        Sketch {
            count: histogram.count(),
            mean: Some(histogram.mean_us() / 1e3),
            values: levels.iter().map(|&q| histogram.quantile_us(q) as f64 / 1e3).collect(),
        }
    }

    fn to_json(&self) -> Value {
        json!({"count": self.count, "mean": self.mean, "values": self.values})
    }
}

/// One latency measure: its sketch over all finished requests and per tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSketches {
    pub all: Sketch,
    /// Per tenant, in the workload's tenant order.
    pub tenants: Vec<Sketch>,
}

impl TenantSketches {
    fn of(
        latencies: &[Option<RequestLatency>],
        tenant_of: &[usize],
        tenants: usize,
        levels: &[f64],
        measure: impl Fn(&RequestLatency) -> Option<f64>,
    ) -> TenantSketches {
        let mut all = Vec::new();
        let mut per_tenant = vec![Vec::new(); tenants];
        for (latency, &tenant) in latencies.iter().zip(tenant_of) {
            if let Some(value) = latency.as_ref().and_then(&measure) {
                all.push(value);
                per_tenant[tenant].push(value);
            }
        }
        TenantSketches {
            all: Sketch::of(&all, levels),
            tenants: per_tenant.iter().map(|v| Sketch::of(v, levels)).collect(),
        }
    }

    fn to_json(&self) -> Value {
        json!({"all": self.all.to_json(), "tenants": self.tenants.iter().map(Sketch::to_json).collect::<Vec<_>>()})
    }
}

/// One scheduler's run in a saved document.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedServeRun {
    pub scheduler: String,
    /// The run's summary object, exactly as `serve-sim --json` prints it.
    pub summary: Value,
    pub ttft_ms: TenantSketches,
    /// Per request: its mean gap between output tokens (requests with >= 2 outputs).
    pub tpot_ms: TenantSketches,
    pub e2e_ms: TenantSketches,
    /// Every gap between consecutive output tokens, all tenants.
    pub tbt_ms: Sketch,
    pub window_s: f64,
    /// Per window: service (VTC units) per tenant.
    pub window_service: Vec<Vec<f64>>,
    /// Per window: whether each tenant was backlogged through it.
    pub window_backlogged: Vec<Vec<bool>>,
    /// Per window: the accumulated service difference (see
    /// `cotenant_serve::summary::ServiceDifference`), None where < 2 tenants were backlogged.
    pub service_difference: Vec<Option<f64>>,
    /// Per window of iterations: KV blocks in use / capacity, busy-time-weighted mean over
    /// replicas (None without iterations); empty for older documents.
    pub kv_mean: Vec<Option<f64>>,
    /// Per window: the largest KV blocks in use / capacity of any replica.
    pub kv_max: Vec<f64>,
}

/// A saved serving-results document, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedServeResults {
    /// Where the requests came from (the workload's source).
    pub source: String,
    pub requests: u64,
    pub request_rate_per_s: f64,
    pub tenants: Vec<String>,
    pub weights: Vec<f64>,
    /// The `config` object as written.
    pub config: Value,
    pub slo_ttft_ms: f64,
    pub slo_tbt_ms: f64,
    pub quantiles: Vec<f64>,
    pub runs: Vec<SavedServeRun>,
}

/// One run's object in the saved document: the summary, latency sketches and windows.
pub fn saved_run_json(
    workload: &Workload,
    config: &ServeConfig,
    summary: &Summary,
    result: &ServeResult,
) -> Value {
    let levels = sketch_levels();
    let latencies = request_latencies(workload, result, config.slo);
    let tenant_of: Vec<usize> = workload.requests.iter().map(|r| r.tenant.index()).collect();
    let tenants = workload.tenants.len();
    let sketches = |measure: fn(&RequestLatency) -> Option<f64>| {
        TenantSketches::of(&latencies, &tenant_of, tenants, &levels, measure).to_json()
    };
    let weights: Vec<f64> = workload.tenants.iter().map(|t| t.weight).collect();
    let differences: Vec<Value> = service_differences(&result.windows, &weights)
        .iter()
        .map(|d| d.map_or(Value::Null, |d| json!({"window": d.window, "accumulated": d.accumulated})))
        .collect();
    json!({
        "scheduler": summary.scheduler,
        "summary": summary_json(summary),
        "latency_ms": {
            "ttft": sketches(|l| Some(l.ttft_ms)),
            "tpot": sketches(|l| l.tpot_ms),
            "e2e": sketches(|l| Some(l.e2e_ms)),
            "tbt": {"all": Sketch::of_histogram_ms(&result.tbt, &levels).to_json()},
        },
        "windows": {
            "window_s": config.service_window.as_secs_f64(),
            "service": result.windows.iter().map(|w| &w.service).collect::<Vec<_>>(),
            "backlogged": result.windows.iter().map(|w| &w.backlogged).collect::<Vec<_>>(),
            "service_difference": differences,
            "kv_utilization_mean": result.usage.kv_windows.iter().map(|w| w.mean()).collect::<Vec<_>>(),
            "kv_utilization_max": result.usage.kv_windows.iter().map(|w| w.max).collect::<Vec<_>>(),
        },
    })
}

/// The whole saved document. `config` is any run's configuration (runs differ only
/// in their scheduler); `router` is the router's name as given on the command line.
pub fn saved_results_json(
    workload: &Workload,
    config: &ServeConfig,
    router: &str,
    runs: Vec<Value>,
) -> Value {
    let limits = config.scheduler.limits;
    json!({
        "kind": SERVE_RESULTS_KIND,
        "version": SERVE_RESULTS_VERSION,
        "workload": workload_json(workload),
        "config": {
            "model": config.model.model.name,
            "gpu": config.model.gpu.name,
            "tensor_parallel": config.model.tensor_parallel,
            "replicas": config.replicas,
            "router": router,
            "kv_capacity_tokens": config.kv_capacity_tokens(),
            "token_budget": limits.token_budget,
            "max_seqs": limits.max_seqs,
            "slo": {"ttft_ms": config.slo.ttft.0 as f64 / 1e3, "tbt_ms": config.slo.tbt.0 as f64 / 1e3},
            "window_s": config.service_window.as_secs_f64(),
        },
        "quantiles": sketch_levels(),
        "runs": runs,
    })
}

/// A saved document that cannot be read: which file, which field, what is wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{file}: field {field}: {problem}")]
pub struct SavedError {
    pub file: String,
    /// The field's path, e.g. `runs[1].latency_ms.ttft.tenants[0].values`.
    pub field: String,
    pub problem: String,
}

/// Reads a field at a time, naming the file and the field's path in every error.
struct Reader<'a> {
    file: &'a str,
}

impl Reader<'_> {
    fn error(&self, field: &str, problem: impl Into<String>) -> SavedError {
        SavedError { file: self.file.to_string(), field: field.to_string(), problem: problem.into() }
    }

    fn get<'v>(&self, value: &'v Value, path: &str, key: &str) -> Result<(&'v Value, String), SavedError> {
        let field = if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
        match value.get(key) {
            Some(found) => Ok((found, field)),
            None => Err(self.error(&field, "missing")),
        }
    }

    fn number(&self, value: &Value, path: &str, key: &str) -> Result<f64, SavedError> {
        let (found, field) = self.get(value, path, key)?;
        found.as_f64().filter(|v| v.is_finite()).ok_or_else(|| self.error(&field, "expected a finite number"))
    }

    fn string(&self, value: &Value, path: &str, key: &str) -> Result<String, SavedError> {
        let (found, field) = self.get(value, path, key)?;
        found.as_str().map(str::to_string).ok_or_else(|| self.error(&field, "expected a string"))
    }

    fn array<'v>(
        &self,
        value: &'v Value,
        path: &str,
        key: &str,
    ) -> Result<(&'v [Value], String), SavedError> {
        let (found, field) = self.get(value, path, key)?;
        match found.as_array() {
            Some(items) => Ok((items, field)),
            None => Err(self.error(&field, "expected an array")),
        }
    }

    fn numbers(&self, items: &[Value], field: &str) -> Result<Vec<f64>, SavedError> {
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_f64()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| self.error(&format!("{field}[{i}]"), "expected a finite number"))
            })
            .collect()
    }

    fn sketch(&self, value: &Value, field: &str, levels: usize) -> Result<Sketch, SavedError> {
        let (count_value, count_field) = self.get(value, field, "count")?;
        let count = count_value
            .as_u64()
            .ok_or_else(|| self.error(&count_field, "expected a count (integer >= 0)"))?;
        let (mean_value, mean_field) = self.get(value, field, "mean")?;
        let mean = match mean_value {
            Value::Null => None,
            other => {
                Some(other.as_f64().ok_or_else(|| self.error(&mean_field, "expected a number or null"))?)
            }
        };
        let (items, values_field) = self.array(value, field, "values")?;
        let values = self.numbers(items, &values_field)?;
        let expected = if count == 0 { 0 } else { levels };
        if values.len() != expected {
            return Err(self.error(
                &values_field,
                format!(
                    "{} values for a sketch of {count} values; expected {expected} (one per quantile level)",
                    values.len()
                ),
            ));
        }
        if let Some(i) = values.windows(2).position(|w| w[1] < w[0]) {
            return Err(
                self.error(&format!("{values_field}[{}]", i + 1), "quantile values must not decrease")
            );
        }
        Ok(Sketch { count, mean, values })
    }

    fn tenant_sketches(
        &self,
        value: &Value,
        field: &str,
        levels: usize,
        tenants: usize,
    ) -> Result<TenantSketches, SavedError> {
        let (all_value, all_field) = self.get(value, field, "all")?;
        let all = self.sketch(all_value, &all_field, levels)?;
        let (items, tenants_field) = self.array(value, field, "tenants")?;
        if items.len() != tenants {
            return Err(self.error(&tenants_field, format!("{} sketches for {tenants} tenants", items.len())));
        }
        let tenants = items
            .iter()
            .enumerate()
            .map(|(i, v)| self.sketch(v, &format!("{tenants_field}[{i}]"), levels))
            .collect::<Result<_, _>>()?;
        Ok(TenantSketches { all, tenants })
    }

    fn run(
        &self,
        value: &Value,
        field: &str,
        levels: usize,
        tenants: usize,
    ) -> Result<SavedServeRun, SavedError> {
        let scheduler = self.string(value, field, "scheduler")?;
        let (summary, summary_field) = self.get(value, field, "summary")?;
        if !summary.is_object() {
            return Err(self.error(&summary_field, "expected an object"));
        }
        let (latency, latency_field) = self.get(value, field, "latency_ms")?;
        let measure = |name: &str| -> Result<TenantSketches, SavedError> {
            let (found, measure_field) = self.get(latency, &latency_field, name)?;
            self.tenant_sketches(found, &measure_field, levels, tenants)
        };
        let (ttft_ms, tpot_ms, e2e_ms) = (measure("ttft")?, measure("tpot")?, measure("e2e")?);
        let (tbt, tbt_field) = self.get(latency, &latency_field, "tbt")?;
        let (tbt_all, tbt_all_field) = self.get(tbt, &tbt_field, "all")?;
        let tbt_ms = self.sketch(tbt_all, &tbt_all_field, levels)?;
        let (windows, windows_field) = self.get(value, field, "windows")?;
        let window_s = self.number(windows, &windows_field, "window_s")?;
        if window_s <= 0.0 {
            return Err(self.error(&format!("{windows_field}.window_s"), "must be > 0"));
        }
        let (service_items, service_field) = self.array(windows, &windows_field, "service")?;
        let window_service = service_items
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let row_field = format!("{service_field}[{i}]");
                let items = row.as_array().ok_or_else(|| self.error(&row_field, "expected an array"))?;
                if items.len() != tenants {
                    return Err(
                        self.error(&row_field, format!("{} values for {tenants} tenants", items.len()))
                    );
                }
                self.numbers(items, &row_field)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (backlogged_items, backlogged_field) = self.array(windows, &windows_field, "backlogged")?;
        let window_backlogged = backlogged_items
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let row_field = format!("{backlogged_field}[{i}]");
                let items = row.as_array().filter(|r| r.len() == tenants).ok_or_else(|| {
                    self.error(&row_field, format!("expected an array of {tenants} booleans"))
                })?;
                items
                    .iter()
                    .map(|b| b.as_bool().ok_or_else(|| self.error(&row_field, "expected booleans")))
                    .collect()
            })
            .collect::<Result<Vec<Vec<bool>>, _>>()?;
        let (difference_items, difference_field) =
            self.array(windows, &windows_field, "service_difference")?;
        let service_difference = difference_items
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Value::Null => Ok(None),
                other => self.number(other, &format!("{difference_field}[{i}]"), "accumulated").map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (kv_mean, kv_max) = self.kv_utilization(windows, &windows_field)?;
        let windows = window_service.len();
        if window_backlogged.len() != windows || service_difference.len() != windows {
            return Err(self.error(
                &windows_field,
                format!(
                    "{windows} service rows, {} backlogged rows and {} service differences: expected one of each per window",
                    window_backlogged.len(),
                    service_difference.len()
                ),
            ));
        }
        Ok(SavedServeRun {
            scheduler,
            summary: summary.clone(),
            ttft_ms,
            tpot_ms,
            e2e_ms,
            tbt_ms,
            window_s,
            window_service,
            window_backlogged,
            service_difference,
            kv_mean,
            kv_max,
        })
    }

    /// The optional KV-utilization series of a run's windows: both or neither, of equal length.
    #[allow(clippy::type_complexity)]
    fn kv_utilization(
        &self,
        windows: &Value,
        field: &str,
    ) -> Result<(Vec<Option<f64>>, Vec<f64>), SavedError> {
        if windows.get("kv_utilization_mean").is_none() && windows.get("kv_utilization_max").is_none() {
            return Ok((Vec::new(), Vec::new()));
        }
        let (mean_items, mean_field) = self.array(windows, field, "kv_utilization_mean")?;
        let mean = mean_items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Null => Ok(None),
                other => other.as_f64().filter(|v| v.is_finite()).map(Some).ok_or_else(|| {
                    self.error(&format!("{mean_field}[{i}]"), "expected a finite number or null")
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (max_items, max_field) = self.array(windows, field, "kv_utilization_max")?;
        let max = self.numbers(max_items, &max_field)?;
        if max.len() != mean.len() {
            return Err(self.error(
                field,
                format!(
                    "{} KV means and {} KV maxima: expected one of each per window",
                    mean.len(),
                    max.len()
                ),
            ));
        }
        Ok((mean, max))
    }
}

/// Reads a saved serving-results document; `file` names it in errors.
pub fn read_saved_results(file: &str, value: &Value) -> Result<SavedServeResults, SavedError> {
    let reader = Reader { file };
    let kind = reader.string(value, "", "kind")?;
    if kind != SERVE_RESULTS_KIND {
        return Err(reader.error("kind", format!("`{kind}`, expected `{SERVE_RESULTS_KIND}`")));
    }
    let (version, _) = reader.get(value, "", "version")?;
    if version.as_u64() != Some(SERVE_RESULTS_VERSION) {
        return Err(
            reader.error("version", format!("{version}; this build reads version {SERVE_RESULTS_VERSION}"))
        );
    }
    let (workload, _) = reader.get(value, "", "workload")?;
    let source = reader.string(workload, "workload", "source")?;
    let requests = reader.number(workload, "workload", "requests")?;
    let request_rate_per_s = reader.number(workload, "workload", "request_rate_per_s")?;
    let (tenant_items, tenants_field) = reader.array(workload, "workload", "tenants")?;
    let mut tenants = Vec::new();
    let mut weights = Vec::new();
    for (i, tenant) in tenant_items.iter().enumerate() {
        let field = format!("{tenants_field}[{i}]");
        tenants.push(reader.string(tenant, &field, "name")?);
        weights.push(reader.number(tenant, &field, "weight")?);
    }
    let (config, _) = reader.get(value, "", "config")?;
    let (slo, slo_field) = reader.get(config, "config", "slo")?;
    let slo_ttft_ms = reader.number(slo, &slo_field, "ttft_ms")?;
    let slo_tbt_ms = reader.number(slo, &slo_field, "tbt_ms")?;
    let (level_items, levels_field) = reader.array(value, "", "quantiles")?;
    let quantiles = reader.numbers(level_items, &levels_field)?;
    if quantiles.is_empty()
        || quantiles.windows(2).any(|w| w[1] <= w[0])
        || quantiles.iter().any(|q| !(0.0..=1.0).contains(q))
    {
        return Err(reader.error("quantiles", "expected increasing levels in [0, 1]"));
    }
    let (run_items, runs_field) = reader.array(value, "", "runs")?;
    let runs = run_items
        .iter()
        .enumerate()
        .map(|(i, run)| reader.run(run, &format!("{runs_field}[{i}]"), quantiles.len(), tenants.len()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SavedServeResults {
        source,
        requests: requests as u64,
        request_rate_per_s,
        tenants,
        weights,
        config: config.clone(),
        slo_ttft_ms,
        slo_tbt_ms,
        quantiles,
        runs,
    })
}

/// One run (cell) of a serve sweep's `results.json`: its key columns and every metric.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeSweepRow {
    /// The scheduler (the sweep's `policy` column).
    pub scheduler: String,
    /// Arrival-rate scale (1 = the trace's rate).
    pub load: f64,
    pub seed: u64,
    /// Every other numeric column, by name; None where the sweep wrote null.
    pub metrics: std::collections::BTreeMap<String, Option<f64>>,
}

impl ServeSweepRow {
    /// A metric's value, when the row has a finite one.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied().flatten().filter(|v| v.is_finite())
    }
}

/// The kind of a sweep's `results.json`.
pub const SWEEP_KIND: &str = "cotenant-sweep";
/// Key columns of a sweep row that are not metrics.
const SWEEP_KEYS: [&str; 7] = ["cell", "kind", "policy", "load", "load_mode", "seed", "options"];

/// Reads the rows of a serve sweep's `results.json` (`{"kind": "cotenant-sweep",
/// "mode": "serve", "rows": [...]}`); `file` names it in errors.
pub fn read_serve_sweep(file: &str, value: &Value) -> Result<Vec<ServeSweepRow>, SavedError> {
    let reader = Reader { file };
    let kind = reader.string(value, "", "kind")?;
    if kind != SWEEP_KIND {
        return Err(reader.error("kind", format!("`{kind}`, expected `{SWEEP_KIND}`")));
    }
    let mode = reader.string(value, "", "mode")?;
    if mode != "serve" {
        return Err(reader.error("mode", format!("`{mode}`: serving sections read serve sweeps only")));
    }
    let (rows, rows_field) = reader.array(value, "", "rows")?;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let field = format!("{rows_field}[{i}]");
            let scheduler = reader.string(row, &field, "policy")?;
            let load = reader.number(row, &field, "load")?;
            let (seed, seed_field) = reader.get(row, &field, "seed")?;
            let seed = seed.as_u64().ok_or_else(|| reader.error(&seed_field, "expected an integer >= 0"))?;
            let fields = row.as_object().ok_or_else(|| reader.error(&field, "expected an object"))?;
            let mut metrics = std::collections::BTreeMap::new();
            for (name, metric) in fields.iter().filter(|(name, _)| !SWEEP_KEYS.contains(&name.as_str())) {
                let value = match metric {
                    Value::Null => None,
                    Value::Bool(flag) => Some(f64::from(u8::from(*flag))),
                    Value::Number(number) => number.as_f64(),
                    Value::String(_) | Value::Array(_) | Value::Object(_) => {
                        return Err(
                            reader.error(&format!("{field}.{name}"), "expected a number, a boolean or null")
                        )
                    }
                };
                metrics.insert(name.clone(), value);
            }
            Ok(ServeSweepRow { scheduler, load, seed, metrics })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid document: two tenants, levels 0, 0.5, 1, one run, two windows.
    fn document() -> Value {
        let sketch = |values: [f64; 3]| json!({"count": 3, "mean": values[1], "values": values});
        let empty = json!({"count": 0, "mean": null, "values": []});
        json!({
            "kind": "cotenant-serve-results", "version": 1,
            "workload": {"source": "test", "requests": 6, "request_rate_per_s": 2.0,
                         "tenants": [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 2.0}]},
            "config": {"slo": {"ttft_ms": 2000.0, "tbt_ms": 100.0}},
            "quantiles": [0.0, 0.5, 1.0],
            "runs": [{
                "scheduler": "vtc", "summary": {"requests": 6},
                "latency_ms": {
                    "ttft": {"all": sketch([1.0, 2.0, 3.0]), "tenants": [sketch([1.0, 2.0, 3.0]), empty.clone()]},
                    "tpot": {"all": sketch([1.0, 1.0, 1.0]), "tenants": [sketch([1.0, 1.0, 1.0]), empty.clone()]},
                    "e2e": {"all": sketch([4.0, 5.0, 6.0]), "tenants": [sketch([4.0, 5.0, 6.0]), empty]},
                    "tbt": {"all": sketch([0.5, 0.5, 0.7])},
                },
                "windows": {"window_s": 10.0, "service": [[3.0, 4.0], [1.0, 0.0]],
                            "backlogged": [[true, true], [true, false]],
                            "service_difference": [{"window": 1.0, "accumulated": 1.0}, null]},
            }],
        })
    }

    #[test]
    fn a_valid_document_reads_back() {
        let saved = read_saved_results("doc.json", &document()).unwrap();
        assert_eq!(saved.tenants, ["a", "b"]);
        assert_eq!(saved.weights, [1.0, 2.0]);
        assert_eq!(saved.slo_tbt_ms, 100.0);
        let run = &saved.runs[0];
        assert_eq!(run.ttft_ms.tenants[0].values, [1.0, 2.0, 3.0]);
        assert_eq!(run.ttft_ms.tenants[1], Sketch { count: 0, mean: None, values: vec![] });
        assert_eq!(run.service_difference, [Some(1.0), None]);
        assert_eq!(run.window_backlogged[1], [true, false]);
    }

    fn error_of(edit: impl Fn(&mut Value)) -> String {
        let mut doc = document();
        edit(&mut doc);
        read_saved_results("doc.json", &doc).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        assert_eq!(
            error_of(|d| d["kind"] = json!("cotenant-sim-results")),
            "doc.json: field kind: `cotenant-sim-results`, expected `cotenant-serve-results`"
        );
        assert_eq!(
            error_of(|d| d["version"] = json!(2)),
            "doc.json: field version: 2; this build reads version 1"
        );
        assert_eq!(
            error_of(|d| d["runs"][0]["latency_ms"]["e2e"]["tenants"][0]["values"][2] = json!("x")),
            "doc.json: field runs[0].latency_ms.e2e.tenants[0].values[2]: expected a finite number"
        );
        assert_eq!(
            error_of(|d| d["runs"][0]["latency_ms"]["ttft"]["all"]["values"] = json!([3.0, 2.0, 4.0])),
            "doc.json: field runs[0].latency_ms.ttft.all.values[1]: quantile values must not decrease"
        );
        assert_eq!(
            error_of(|d| d["runs"][0]["latency_ms"]["tpot"]["all"]["values"] = json!([1.0])),
            "doc.json: field runs[0].latency_ms.tpot.all.values: 1 values for a sketch of 3 values; expected 3 \
             (one per quantile level)"
        );
        assert_eq!(
            error_of(|d| d["runs"][0]["windows"]["service"][1] = json!([1.0])),
            "doc.json: field runs[0].windows.service[1]: 1 values for 2 tenants"
        );
        assert_eq!(
            error_of(|d| d["runs"][0]["windows"]["service_difference"] = json!([null])),
            "doc.json: field runs[0].windows: 2 service rows, 2 backlogged rows and 1 service differences: expected \
             one of each per window"
        );
        // KV utilization: optional (older documents), but both series or neither, aligned.
        assert_eq!(
            error_of(|d| d["runs"][0]["windows"]["kv_utilization_mean"] = json!([0.5, null])),
            "doc.json: field runs[0].windows.kv_utilization_max: missing"
        );
        assert_eq!(
            error_of(|d| {
                d["runs"][0]["windows"]["kv_utilization_mean"] = json!([0.5, "x"]);
                d["runs"][0]["windows"]["kv_utilization_max"] = json!([0.5, 0.7]);
            }),
            "doc.json: field runs[0].windows.kv_utilization_mean[1]: expected a finite number or null"
        );
        assert_eq!(
            error_of(|d| {
                d["runs"][0]["windows"]["kv_utilization_mean"] = json!([0.5, null]);
                d["runs"][0]["windows"]["kv_utilization_max"] = json!([0.5]);
            }),
            "doc.json: field runs[0].windows: 2 KV means and 1 KV maxima: expected one of each per window"
        );
        assert_eq!(
            error_of(|d| {
                d["workload"].as_object_mut().unwrap().remove("tenants");
            }),
            "doc.json: field workload.tenants: missing"
        );
        assert_eq!(
            error_of(|d| d["quantiles"] = json!([0.5, 0.5])),
            "doc.json: field quantiles: expected increasing levels in [0, 1]"
        );
    }

    #[test]
    fn levels_rise_from_zero_to_one_through_the_tail() {
        let levels = sketch_levels();
        assert_eq!(levels.len(), 202);
        assert_eq!(
            (levels[0], levels[100], levels[199], levels[200], levels[201]),
            (0.0, 0.5, 0.995, 0.999, 1.0)
        );
        assert!(levels.windows(2).all(|w| w[0] < w[1]));
    }

    /// Nearest rank over 4 values at levels 0, 0.5, 1: the 1st, 2nd and 4th smallest.
    #[test]
    fn sketches_take_nearest_ranks() {
        let sketch = Sketch::of(&[40.0, 10.0, 30.0, 20.0], &[0.0, 0.5, 1.0]);
        assert_eq!(sketch, Sketch { count: 4, mean: Some(25.0), values: vec![10.0, 20.0, 40.0] });
        assert_eq!(Sketch::of(&[], &[0.5]).values, Vec::<f64>::new());
    }
}
