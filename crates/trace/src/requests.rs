//! LLM request traces (Azure LLM inference 2023, Mooncake 2024).
//!
//! Both readers return a [`RequestTrace`]: arrivals in integer microseconds relative to
//! the first request, prompt and output token counts, and (Mooncake only) the prefix-cache
//! block hashes. Files may be plain or gzip (`.gz`). Bad input is an error naming the
//! file, the 1-based line and the field; nothing here panics on input.

use std::io::{BufRead, Read};
use std::path::Path;

use cotenant_core::limits::{MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_REQUEST_SPAN};
use serde_json::Value;

use crate::error::TraceError;
use crate::text::{decode_utf8, describe_span, gunzip_if_gzip, read_bytes, Row, Table};
use crate::SkipCount;

/// Tokens per prefix-cache block in the Mooncake trace (its README: block size 512).
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// Skip reasons, as they appear in [`RequestTrace::skipped`].
pub const SKIP_ZERO_OUTPUT: &str = "requests: no output tokens (0), nothing to generate";
pub const SKIP_ZERO_PROMPT: &str = "requests: empty prompt (0 prompt tokens)";

/// One request as read from a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Microseconds since the trace's first arrival.
    pub arrival_us: u64,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Prefix-cache block hashes (one per `block_tokens` of prompt); empty when unknown.
    pub prefix_hashes: Vec<u64>,
    /// 1-based line of the source file.
    pub line: u64,
}

/// A request trace sorted by arrival (ties keep file order).
#[derive(Clone, Debug, Default)]
pub struct RequestTrace {
    pub source: String,
    pub records: Vec<RequestRecord>,
    /// Tokens per prefix block when `prefix_hashes` are present.
    pub block_tokens: u32,
    /// Rows skipped on purpose (0 prompt or 0 output tokens), grouped by reason, with counts.
    pub skipped: Vec<SkipCount>,
    /// The file's own clock at arrival 0, in microseconds (since 1970 for Azure, since
    /// the trace's time 0 for Mooncake and cotenant JSONL): what [`align_origins`] uses
    /// to keep the offsets between files that are merged.
    pub origin_us: u64,
}

/// Reading a request trace failed. Every message names the file and, for a bad
/// row, its 1-based physical line and the field: `t.csv line 5, field
/// GeneratedTokens: ...` (the same form as [`TraceError`], which it wraps).
#[derive(Debug, thiserror::Error)]
pub enum RequestTraceError {
    /// Displayed as the wrapped error, which is not chained again (no repeated text).
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{file}: no requests")]
    Empty { file: String },
}

/// Reads an Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`),
/// plain or gzip (the magic bytes decide).
pub fn read_azure_csv(path: &Path) -> Result<RequestTrace, RequestTraceError> {
    let file = path.display().to_string();
    azure_from_bytes(read_bytes(path)?, &file)
}

/// Reads a Mooncake JSONL trace (`timestamp` ms, `input_length`, `output_length`,
/// `hash_ids`), plain or gzip (the magic bytes decide).
pub fn read_mooncake_jsonl(path: &Path) -> Result<RequestTrace, RequestTraceError> {
    let file = path.display().to_string();
    mooncake_from_bytes(read_bytes(path)?, &file)
}

fn read_all<R: Read>(mut reader: R, file: &str) -> Result<Vec<u8>, TraceError> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|error| TraceError::Io { file: file.to_string(), error })?;
    gunzip_if_gzip(file, bytes)
}

/// Parses Azure CSV text. Tolerates CRLF, blank lines and a missing final newline;
/// line numbers are physical lines of the file.
pub fn parse_azure_csv<R: Read>(reader: R, file: &str) -> Result<RequestTrace, RequestTraceError> {
    azure_from_bytes(read_all(reader, file)?, file)
}

fn azure_from_bytes(bytes: Vec<u8>, file: &str) -> Result<RequestTrace, RequestTraceError> {
    let text = decode_utf8(file, bytes)?;
    let table = Table::parse(file, &text, ',')?;
    let (time_col, context_col, generated_col) =
        (table.column("TIMESTAMP")?, table.column("ContextTokens")?, table.column("GeneratedTokens")?);
    let mut absolute_us = Vec::new();
    let mut records = Vec::new();
    let mut skips = Skips::default();
    for row in table.rows() {
        let row = row?;
        let time_us = azure_timestamp(&row, time_col)?;
        let prompt_tokens = tokens(&row, context_col, MAX_PROMPT_TOKENS, "MAX_PROMPT_TOKENS")?;
        let output_tokens = tokens(&row, generated_col, MAX_OUTPUT_TOKENS, "MAX_OUTPUT_TOKENS")?;
        if skips.zero_tokens(prompt_tokens, output_tokens) {
            continue;
        }
        absolute_us.push(time_us);
        records.push(RequestRecord {
            arrival_us: 0,
            prompt_tokens,
            output_tokens,
            prefix_hashes: Vec::new(),
            line: row.line,
        });
    }
    let first_us = absolute_us.iter().copied().min().ok_or(RequestTraceError::Empty { file: file.into() })?;
    for (record, time_us) in records.iter_mut().zip(absolute_us) {
        // Both are within [MIN_UNIX_SECONDS, MAX_UNIX_SECONDS]: no overflow.
        record.arrival_us = time_us.saturating_sub(first_us);
    }
    finish(file, records, 0, skips, "TIMESTAMP", first_us)
}

/// An Azure `TIMESTAMP` as microseconds since 1970, within the limits.
fn azure_timestamp(row: &Row<'_>, column: usize) -> Result<u64, TraceError> {
    let text = row.str(column);
    if !text.contains([' ', 'T']) {
        return Err(row.error(column, format!("expected `YYYY-MM-DD HH:MM:SS[.fraction]`, got {text:?}")));
    }
    let us = crate::wallclock::wall_clock_field(row, column)?;
    // Within core::limits::MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS, so positive.
    Ok(us.unsigned_abs())
}

/// A token count: an integer from 0 to `limit`.
fn tokens(row: &Row<'_>, column: usize, limit: u64, name: &str) -> Result<u32, TraceError> {
    let value = row.u64(column)?;
    if value > limit {
        return Err(
            row.error(column, format!("{value} tokens exceeds the limit of {limit} (core::limits::{name})"))
        );
    }
    // limit < 2^32, checked by a test.
    Ok(value as u32)
}

/// Counts of rows skipped for zero token counts.
#[derive(Debug, Default)]
pub(crate) struct Skips {
    zero_prompt: u64,
    zero_output: u64,
}

impl Skips {
    /// Whether a row with these counts is skipped (and counts it).
    pub(crate) fn zero_tokens(&mut self, prompt: u32, output: u32) -> bool {
        if output == 0 {
            self.zero_output += 1;
            true
        } else if prompt == 0 {
            self.zero_prompt += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn into_counts(self) -> Vec<SkipCount> {
        [(SKIP_ZERO_OUTPUT, self.zero_output), (SKIP_ZERO_PROMPT, self.zero_prompt)]
            .into_iter()
            .filter(|&(_, rows)| rows > 0)
            .map(|(reason, rows)| SkipCount { reason: reason.to_string(), rows })
            .collect()
    }
}

const MOONCAKE_FIELDS: [&str; 4] = ["timestamp", "input_length", "output_length", "hash_ids"];

/// Parses Mooncake JSONL text; blank lines are skipped (and counted in line numbers).
pub fn parse_mooncake_jsonl<R: BufRead>(reader: R, file: &str) -> Result<RequestTrace, RequestTraceError> {
    mooncake_from_bytes(read_all(reader, file)?, file)
}

fn mooncake_from_bytes(bytes: Vec<u8>, file: &str) -> Result<RequestTrace, RequestTraceError> {
    let text = decode_utf8(file, bytes)?;
    let mut records = Vec::new();
    let mut skips = Skips::default();
    for (line, content) in crate::text::data_lines(&text) {
        let row = JsonLine::parse(file, line, content, &MOONCAKE_FIELDS)?;
        let timestamp_ms = row.arrival(0, 1e3, "ms")?;
        let prompt_tokens = row.count(1, MAX_PROMPT_TOKENS, "MAX_PROMPT_TOKENS")?;
        let output_tokens = row.count(2, MAX_OUTPUT_TOKENS, "MAX_OUTPUT_TOKENS")?;
        let prefix_hashes = row.hashes(3)?;
        if skips.zero_tokens(prompt_tokens, output_tokens) {
            continue;
        }
        records.push(RequestRecord {
            // Bounded by MAX_REQUEST_SPAN above: the product fits in u64.
            arrival_us: (timestamp_ms * 1000.0).round() as u64,
            prompt_tokens,
            output_tokens,
            prefix_hashes,
            line,
        });
    }
    let first_us =
        records.iter().map(|r| r.arrival_us).min().ok_or(RequestTraceError::Empty { file: file.into() })?;
    for record in &mut records {
        record.arrival_us -= first_us;
    }
    finish(file, records, MOONCAKE_BLOCK_TOKENS, skips, "timestamp", first_us)
}

/// One JSONL line read as an object, with the field names its errors use: the row
/// reading that the Mooncake and cotenant JSONL readers share.
pub(crate) struct JsonLine<'a> {
    row: Row<'a>,
    pub object: serde_json::Map<String, Value>,
    names: &'a [&'a str],
}

impl<'a> JsonLine<'a> {
    /// Parses `content` (line `line` of `file`) as one JSON object.
    pub(crate) fn parse(
        file: &'a str,
        line: u64,
        content: &str,
        names: &'a [&'a str],
    ) -> Result<Self, TraceError> {
        let value: Value = serde_json::from_str(content).map_err(|err| TraceError::Row {
            file: file.to_string(),
            line,
            message: format!("not a JSON object: {}", json_reason(&err)),
        })?;
        let Value::Object(object) = value else {
            return Err(TraceError::Row {
                file: file.to_string(),
                line,
                message: "expected a JSON object".into(),
            });
        };
        Ok(JsonLine { row: Row::headerless(file, line, Vec::new(), names), object, names })
    }

    /// An error in field `column` of this line.
    pub(crate) fn error(&self, column: usize, message: impl Into<String>) -> TraceError {
        self.row.error(column, message)
    }

    /// Field `column`, present and not null.
    pub(crate) fn get(&self, column: usize) -> Option<&Value> {
        self.object.get(self.names[column]).filter(|v| !v.is_null())
    }

    /// Field `column` as a JSON number.
    pub(crate) fn number(&self, column: usize) -> Result<&serde_json::Number, TraceError> {
        match self.object.get(self.names[column]) {
            Some(Value::Number(n)) => Ok(n),
            Some(other) => Err(self.error(column, format!("expected a number, got {other}"))),
            None => Err(self.error(column, "missing")),
        }
    }

    /// Field `column` as an arrival time in `unit` (`per_second` of them a second):
    /// non-negative and within `MAX_REQUEST_SPAN` of time 0.
    pub(crate) fn arrival(&self, column: usize, per_second: f64, unit: &str) -> Result<f64, TraceError> {
        let n = self.number(column)?;
        let value = n.as_f64().unwrap_or(f64::NAN);
        if !(value.is_finite() && value >= 0.0) {
            return Err(self.error(column, format!("must be a non-negative number of {unit}, got {n}")));
        }
        if value > MAX_REQUEST_SPAN.as_secs_f64() * per_second {
            return Err(self.error(
                column,
                format!(
                    "{n} {unit} exceeds the limit of {} from the trace's time 0 (core::limits::MAX_REQUEST_SPAN)",
                    describe_span(MAX_REQUEST_SPAN)
                ),
            ));
        }
        Ok(value)
    }

    /// Field `column` as a token count of at most `limit` (`core::limits::{name}`).
    pub(crate) fn count(&self, column: usize, limit: u64, name: &str) -> Result<u32, TraceError> {
        let n = self.number(column)?;
        let value = n
            .as_u64()
            .ok_or_else(|| self.error(column, format!("expected a non-negative integer, got {n}")))?;
        if value > limit {
            return Err(self.error(
                column,
                format!("{value} tokens exceeds the limit of {limit} (core::limits::{name})"),
            ));
        }
        // limit < 2^32, checked by a test.
        Ok(value as u32)
    }

    /// Field `column` as prefix-block hashes (absent or null: none).
    pub(crate) fn hashes(&self, column: usize) -> Result<Vec<u64>, TraceError> {
        match self.get(column) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_u64().ok_or_else(|| {
                        self.error(column, format!("expected non-negative integers, got {item}"))
                    })
                })
                .collect(),
            Some(other) => Err(self.error(column, format!("expected an array, got {other}"))),
        }
    }
}

/// serde_json's reason without its "at line 1 column N" (always line 1 of one row).
fn json_reason(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rsplit_once(" at line ") {
        Some((reason, _)) => format!("{reason} (column {})", err.column()),
        None => text,
    }
}

/// Sorts (stable: equal arrivals keep file order) and checks the arrival span
/// against [`MAX_REQUEST_SPAN`], naming the row farthest from the median arrival.
fn finish(
    file: &str,
    mut records: Vec<RequestRecord>,
    block_tokens: u32,
    skips: Skips,
    arrival_field: &str,
    origin_us: u64,
) -> Result<RequestTrace, RequestTraceError> {
    records.sort_by_key(|r| r.arrival_us);
    if let (Some(first), Some(last)) = (records.first(), records.last()) {
        let span = last.arrival_us - first.arrival_us;
        if span > MAX_REQUEST_SPAN.0 {
            let median = records[records.len() / 2].arrival_us;
            let far = if last.arrival_us - median >= median - first.arrival_us { last } else { first };
            return Err(TraceError::Field {
                file: file.to_string(),
                line: far.line,
                field: arrival_field.to_string(),
                message: format!(
                    "the trace's arrivals span {:.0} days, more than the limit of {} (core::limits::MAX_REQUEST_SPAN); \
                     this row is the farthest from the median arrival ({:.0} days away)",
                    span as f64 / 86_400e6,
                    describe_span(MAX_REQUEST_SPAN),
                    far.arrival_us.abs_diff(median) as f64 / 86_400e6
                ),
            }
            .into());
        }
    }
    Ok(RequestTrace {
        source: file.to_string(),
        records,
        block_tokens,
        skipped: skips.into_counts(),
        origin_us,
    })
}

/// `YYYY-MM-DD HH:MM:SS[.fffffff]` (no time zone; also `T` between date and time)
/// to microseconds since 1970-01-01. Fractional digits beyond microseconds are truncated.
/// Dates before 1970 are errors (limits on the range are checked by the readers).
pub fn parse_wall_clock_us(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not `YYYY-MM-DD HH:MM:SS[.fraction]`");
    if !text.trim().contains([' ', 'T']) {
        return Err(bad());
    }
    let us = crate::wallclock::parse_wall_clock_us(text).map_err(|reason| format!("{}: {reason}", bad()))?;
    u64::try_from(us).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;

    #[test]
    fn azure_crlf_without_final_newline() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\
                    2023-11-16 18:15:46.6805900,374,44\r\n\
                    2023-11-16 18:15:50.9951690,396,109";
        let trace = parse_azure_csv(text.as_bytes(), "t.csv").expect("parses");
        assert_eq!(trace.records.len(), 2);
        assert_eq!(trace.records[0].arrival_us, 0);
        // 50.995169 - 46.680590 = 4.314579 s (seventh digit truncated).
        assert_eq!(trace.records[1].arrival_us, 4_314_579);
        assert_eq!(
            (trace.records[1].prompt_tokens, trace.records[1].output_tokens, trace.records[1].line),
            (396, 109, 3)
        );
    }

    #[test]
    fn azure_bad_field_names_file_line_and_field() {
        let text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68,12x,4\r\n";
        let err = parse_azure_csv(text.as_bytes(), "t.csv").expect_err("bad tokens");
        assert!(err.to_string().starts_with("t.csv line 2, field ContextTokens: "), "{err}");
    }

    #[test]
    fn wall_clock_crosses_midnight_and_months() {
        let a = parse_wall_clock_us("2023-02-28 23:59:59.9999999").expect("ok");
        let b = parse_wall_clock_us("2023-03-01 00:00:00").expect("ok");
        assert_eq!(b - a, 1);
        assert_eq!(parse_wall_clock_us("1970-01-02 00:00:00"), Ok(86_400_000_000));
        assert!(parse_wall_clock_us("2023-13-01 00:00:00").is_err());
    }

    #[test]
    fn mooncake_ms_and_hashes() {
        let text =
            "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [0, 1]}\n\n\
                    {\"timestamp\": 1005, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [9]}";
        let trace = parse_mooncake_jsonl(text.as_bytes(), "m.jsonl").expect("parses");
        assert_eq!(trace.block_tokens, 512);
        assert_eq!(trace.records[1].arrival_us, 1_000_000);
        assert_eq!(trace.records[0].prefix_hashes, vec![0, 1]);
        assert_eq!(trace.records[1].line, 3);
        let err = parse_mooncake_jsonl(
            "{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1}".as_bytes(),
            "m",
        )
        .expect_err("negative");
        assert!(err.to_string().starts_with("m line 1, field timestamp: "), "{err}");
    }

    #[test]
    fn gzip_is_read_transparently() {
        let dir = std::env::temp_dir().join(format!("cotenant-requests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let path = dir.join("t.csv.gz");
        let mut encoder =
            flate2::write::GzEncoder::new(File::create(&path).expect("create"), flate2::Compression::fast());
        encoder
            .write_all(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.0,1,2")
            .expect("write");
        encoder.finish().expect("finish");
        let trace = read_azure_csv(&path).expect("reads gz");
        assert_eq!(trace.records[0].output_tokens, 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
