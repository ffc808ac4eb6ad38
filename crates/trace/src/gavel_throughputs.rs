//! Gavel's `simulation_throughputs.json`: steps per second per (job type, scale factor) and GPU type.
//!
//! Shape: `{worker_type: {"('<model>', <sf>)": {"null": isolated, "('<other>', <sf>)": [own, other]}}}`.
//! Worker types ending in `_unconsolidated` (`v100_unconsolidated`) hold the rate
//! of a job spread over servers; they fold into the base type's entry. The file
//! may be plain or gzip (`.gz`, or gzip magic bytes).

use std::io::Read;
use std::path::Path;

use cotenant_core::limits::MAX_JOB_DURATION;
use cotenant_perf::throughput::{JobTypeKey, PairRates, ThroughputTable};
use serde_json::Value;

/// Suffix Gavel gives a worker type measured with the job spread over servers.
pub const UNCONSOLIDATED_SUFFIX: &str = "_unconsolidated";

/// A throughput file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ThroughputsError {
    /// The I/O error's text is in the message, so it is not chained as a source too.
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    #[error("{file}: not JSON: {message}")]
    Json { file: String, message: String },
    /// A key or value at `path` (worker type / job key / partner key) is malformed.
    #[error("{file}, at {path}: {message}")]
    Entry { file: String, path: String, message: String },
}

/// Reads a throughput table from `path` (plain JSON or gzip).
pub fn read_gavel_throughputs(path: &Path) -> Result<ThroughputTable, ThroughputsError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| ThroughputsError::Io { file: file.clone(), error })?;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|error| ThroughputsError::Io { file: file.clone(), error })?;
        out
    } else {
        bytes
    };
    // Invalid UTF-8 is reported by line and column, not by byte offset.
    let text = crate::text::decode_utf8(&file, bytes).map_err(|e| match e {
        crate::TraceError::Row { line, message, .. } => {
            ThroughputsError::Json { file: file.clone(), message: format!("line {line}: {message}") }
        }
        other => ThroughputsError::Json { file: file.clone(), message: other.to_string() },
    })?;
    parse_gavel_throughputs(&text, &file)
}

/// Parses the JSON text; `file` names it in errors.
pub fn parse_gavel_throughputs(text: &str, file: &str) -> Result<ThroughputTable, ThroughputsError> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| ThroughputsError::Json { file: file.into(), message: e.to_string() })?;
    let entry = |path: &str, message: &str| ThroughputsError::Entry {
        file: file.into(),
        path: path.into(),
        message: message.into(),
    };
    let workers =
        root.as_object().ok_or_else(|| entry("(top level)", "expected an object of worker types"))?;
    let mut table = ThroughputTable::new();
    // Base types first, so GPU type order does not depend on where the
    // unconsolidated variants appear; serde_json's map is sorted by key.
    let mut names: Vec<&String> = workers.keys().collect();
    names.sort_by_key(|n| (n.ends_with(UNCONSOLIDATED_SUFFIX), n.as_str()));
    for worker in names {
        let (gpu_type, unconsolidated) = match worker.strip_suffix(UNCONSOLIDATED_SUFFIX) {
            Some(base) => (base, true),
            None => (worker.as_str(), false),
        };
        let jobs =
            workers[worker].as_object().ok_or_else(|| entry(worker, "expected an object of job types"))?;
        table.add_gpu_type(gpu_type);
        for (job_text, values) in jobs {
            let path = format!("{worker} / {job_text}");
            let key = parse_job_key(job_text)
                .ok_or_else(|| entry(&path, "expected a key like ('<model>', <sf>)"))?;
            let values = values.as_object().ok_or_else(|| entry(&path, "expected an object"))?;
            for (other_text, value) in values {
                if other_text == "null" {
                    let rate = rate(value).ok_or_else(|| entry(&path, "\"null\" must be a number >= 0"))?;
                    if unconsolidated {
                        table.set_unconsolidated(&key, gpu_type, rate);
                    } else {
                        table.set_consolidated(&key, gpu_type, rate);
                    }
                    continue;
                }
                let pair_path = format!("{path} / {other_text}");
                if unconsolidated {
                    // Gavel never uses pairs of spread jobs; skip rather than guess.
                    continue;
                }
                let other = parse_job_key(other_text)
                    .ok_or_else(|| entry(&pair_path, "expected a key like ('<model>', <sf>)"))?;
                let pair = value
                    .as_array()
                    .filter(|a| a.len() == 2)
                    .and_then(|a| Some((rate(&a[0])?, rate(&a[1])?)));
                let (own, theirs) =
                    pair.ok_or_else(|| entry(&pair_path, "expected [own, other] numbers >= 0"))?;
                table.set_colocated(
                    &key,
                    &other,
                    gpu_type,
                    PairRates { own_steps_per_s: own, other_steps_per_s: theirs },
                );
            }
        }
    }
    Ok(table)
}

fn rate(value: &Value) -> Option<f64> {
    value.as_f64().filter(|r| r.is_finite() && *r >= 0.0)
}

/// Parses `('<model>', <sf>)`; the model may itself contain quotes and commas.
pub fn parse_job_key(text: &str) -> Option<JobTypeKey> {
    let inner = text.trim().strip_prefix("('")?.strip_suffix(')')?;
    let (model, scale) = inner.rsplit_once("',")?;
    let scale_factor: u32 = scale.trim().parse().ok()?;
    (scale_factor >= 1).then(|| JobTypeKey::new(model, scale_factor))
}

/// Checks, before a run, that every job of `workload` has an isolated (consolidated)
/// rate in `table` for its job type and scale factor on every GPU type of the cluster
/// (`gpu_types`, matched ignoring ASCII case as the simulator matches them), and that
/// at each positive rate its steps take at most `MAX_JOB_DURATION`. An error
/// names the job's file, line and field (`g.trace line 7, field job_type: ...`), which
/// the simulator's own check, by job id, cannot.
pub fn check_workload_rates(
    workload: &crate::Workload,
    table: &ThroughputTable,
    gpu_types: &[String],
) -> Result<(), crate::TraceError> {
    let table_types: Vec<(usize, &String)> = gpu_types
        .iter()
        .filter_map(|name| {
            table.gpu_types().iter().position(|t| t.eq_ignore_ascii_case(name)).map(|i| (i, name))
        })
        .collect();
    for (i, job) in workload.jobs.iter().enumerate() {
        let line = workload.lines.get(i).copied().unwrap_or(0);
        let fail = |field: &str, message: String| match line {
            0 => crate::TraceError::File {
                file: workload.source.clone(),
                message: format!("job {i}, {field}: {message}"),
            },
            _ => crate::TraceError::Field {
                file: workload.source.clone(),
                line,
                field: field.to_string(),
                message,
            },
        };
        let Some(name) = job.job_type.and_then(|t| workload.job_types.get(t as usize)) else {
            return Err(fail("job_type", "no job type; a throughput table needs one".to_string()));
        };
        let key = JobTypeKey::new(name.clone(), job.gpus.max(1));
        for &(t, gpu_type) in &table_types {
            let rate = table.consolidated(&key, t);
            if let Some(rate) = rate.filter(|&r| r > 0.0) {
                let secs = job.work / rate;
                if secs > MAX_JOB_DURATION.as_secs_f64() {
                    return Err(fail(
                        "total_steps",
                        format!(
                            "{} steps at {rate} steps/s on {gpu_type} take {:.0} days, more than the limit of {} \
                             (core::limits::MAX_JOB_DURATION)",
                            job.work,
                            secs / 86_400.0,
                            crate::text::describe_span(MAX_JOB_DURATION)
                        ),
                    ));
                }
            }
            if rate.is_none() {
                let scales: Vec<String> = table
                    .job_types()
                    .filter(|k| k.model == *name)
                    .map(|k| k.scale_factor.to_string())
                    .collect();
                let known = if scales.is_empty() {
                    format!("the table has no job type {name:?} at any scale factor")
                } else {
                    format!("the table has {name:?} at scale factors {}", scales.join(", "))
                };
                return Err(fail(
                    "job_type",
                    format!(
                        "no throughput for {name:?} at scale factor {} on GPU type {gpu_type} ({known})",
                        job.gpus
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{
        "k80": {"('ResNet-18 (batch size 64)', 1)": {"null": 4.5,
                 "('LM (batch size 10)', 1)": [2.0, 1.5]}},
        "v100_unconsolidated": {"('ResNet-18 (batch size 64)', 2)": {"null": 20.0}},
        "v100": {"('ResNet-18 (batch size 64)', 1)": {"null": 13.0},
                 "('ResNet-18 (batch size 64)', 2)": {"null": 24.0}}
    }"#;

    #[test]
    fn reads_isolated_unconsolidated_and_pairs() {
        let t = parse_gavel_throughputs(SAMPLE, "sample.json").unwrap();
        assert_eq!(t.gpu_types(), ["k80", "v100"]);
        assert_eq!(t.get("ResNet-18 (batch size 64)", 1, "k80"), Some(4.5));
        let two = JobTypeKey::new("ResNet-18 (batch size 64)", 2);
        assert_eq!(t.consolidated(&two, 1), Some(24.0));
        assert_eq!(t.unconsolidated(&two, 1), Some(20.0));
        let one = JobTypeKey::new("ResNet-18 (batch size 64)", 1);
        let pair = t.colocated(&one, &JobTypeKey::new("LM (batch size 10)", 1), 0).unwrap();
        assert_eq!((pair.own_steps_per_s, pair.other_steps_per_s), (2.0, 1.5));
    }

    #[test]
    fn parses_keys() {
        assert_eq!(parse_job_key("('A3C', 1)"), Some(JobTypeKey::new("A3C", 1)));
        assert_eq!(parse_job_key("('x', y', 4)"), Some(JobTypeKey::new("x', y", 4)));
        assert_eq!(parse_job_key("('A3C', 0)"), None);
        assert_eq!(parse_job_key("A3C"), None);
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let bad = r#"{"k80": {"('A3C', 1)": {"null": "fast"}}}"#;
        let err = parse_gavel_throughputs(bad, "t.json").unwrap_err().to_string();
        assert!(err.contains("t.json") && err.contains("k80 / ('A3C', 1)"), "{err}");
        let err = parse_gavel_throughputs(r#"{"k80": {"A3C": {}}}"#, "t.json").unwrap_err().to_string();
        assert!(err.contains("k80 / A3C"), "{err}");
        assert!(parse_gavel_throughputs("[", "t.json")
            .unwrap_err()
            .to_string()
            .starts_with("t.json: not JSON"));
    }

    #[test]
    fn reads_the_shipped_table_plain_and_gzip() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/traces/gavel/simulation_throughputs.json");
        let Ok(text) = std::fs::read(&shipped) else { return };
        let t = read_gavel_throughputs(&shipped).unwrap();
        assert_eq!(t.len(), 83);
        assert_eq!(t.gpu_types(), ["k80", "p100", "v100"]);
        let dir = std::env::temp_dir().join(format!("cotenant-gavel-tput-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("t.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &text).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        assert_eq!(read_gavel_throughputs(&gz).unwrap(), t);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
