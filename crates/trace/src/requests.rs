//! LLM request traces (Azure LLM inference 2023, Mooncake 2024).
//!
//! Both readers return a [`RequestTrace`]: arrivals in integer microseconds relative to
//! the first request, prompt and output token counts, and (Mooncake only) the prefix-cache
//! block hashes. Files may be plain or gzip (`.gz`). Bad input is an error naming the
//! file, the 1-based line and the field; nothing here panics on input.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;
use serde::Deserialize;

/// Tokens per prefix-cache block in the Mooncake trace (its README: block size 512).
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

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
}

#[derive(Debug, thiserror::Error)]
pub enum RequestTraceError {
    #[error("{file}: cannot read: {source}")]
    Io { file: String, source: std::io::Error },
    #[error("{file}:{line}: field `{field}`: {message}")]
    Field { file: String, line: u64, field: &'static str, message: String },
    #[error("{file}: missing header column `{column}`")]
    MissingColumn { file: String, column: &'static str },
    #[error("{file}: no requests")]
    Empty { file: String },
}

/// Opens `path`, transparently decompressing `.gz`.
fn open_text(path: &Path) -> Result<Box<dyn BufRead>, RequestTraceError> {
    let file_name = path.display().to_string();
    let file = File::open(path).map_err(|source| RequestTraceError::Io { file: file_name, source })?;
    let is_gzip = path.extension().is_some_and(|ext| ext == "gz");
    Ok(if is_gzip {
        Box::new(BufReader::new(MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

/// Reads an Azure LLM inference CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`).
pub fn read_azure_csv(path: &Path) -> Result<RequestTrace, RequestTraceError> {
    parse_azure_csv(open_text(path)?, &path.display().to_string())
}

/// Reads a Mooncake JSONL trace (`timestamp` ms, `input_length`, `output_length`, `hash_ids`).
pub fn read_mooncake_jsonl(path: &Path) -> Result<RequestTrace, RequestTraceError> {
    parse_mooncake_jsonl(open_text(path)?, &path.display().to_string())
}

/// Parses Azure CSV text. Tolerates CRLF and a missing final newline.
pub fn parse_azure_csv<R: Read>(reader: R, file: &str) -> Result<RequestTrace, RequestTraceError> {
    let mut csv_reader = csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_reader(reader);
    let headers = csv_reader
        .headers()
        .map_err(|err| RequestTraceError::Field {
            file: file.into(),
            line: 1,
            field: "header",
            message: err.to_string(),
        })?
        .clone();
    let column = |name: &'static str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or(RequestTraceError::MissingColumn { file: file.into(), column: name })
    };
    let (time_col, context_col, generated_col) =
        (column("TIMESTAMP")?, column("ContextTokens")?, column("GeneratedTokens")?);
    let mut absolute_us = Vec::new();
    let mut records = Vec::new();
    for (index, row) in csv_reader.records().enumerate() {
        let line = index as u64 + 2;
        let field_err = |field: &'static str, message: String| RequestTraceError::Field {
            file: file.into(),
            line,
            field,
            message,
        };
        let row = row.map_err(|err| field_err("row", err.to_string()))?;
        let get =
            |col: usize, field: &'static str| row.get(col).ok_or_else(|| field_err(field, "missing".into()));
        let timestamp = get(time_col, "TIMESTAMP")?;
        let time_us = parse_wall_clock_us(timestamp).map_err(|message| field_err("TIMESTAMP", message))?;
        let prompt_tokens =
            parse_tokens(get(context_col, "ContextTokens")?).map_err(|m| field_err("ContextTokens", m))?;
        let output_tokens = parse_tokens(get(generated_col, "GeneratedTokens")?)
            .map_err(|m| field_err("GeneratedTokens", m))?;
        absolute_us.push(time_us);
        records.push(RequestRecord {
            arrival_us: 0,
            prompt_tokens,
            output_tokens,
            prefix_hashes: Vec::new(),
            line,
        });
    }
    let first_us = absolute_us.iter().copied().min().ok_or(RequestTraceError::Empty { file: file.into() })?;
    for (record, time_us) in records.iter_mut().zip(absolute_us) {
        record.arrival_us = time_us - first_us;
    }
    Ok(finish(file, records, 0))
}

#[derive(Deserialize)]
struct MooncakeRow {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// Parses Mooncake JSONL text; blank lines are skipped.
pub fn parse_mooncake_jsonl<R: BufRead>(reader: R, file: &str) -> Result<RequestTrace, RequestTraceError> {
    let mut records = Vec::new();
    for (index, text) in reader.lines().enumerate() {
        let line = index as u64 + 1;
        let field_err = |field: &'static str, message: String| RequestTraceError::Field {
            file: file.into(),
            line,
            field,
            message,
        };
        let text = text.map_err(|source| RequestTraceError::Io { file: file.into(), source })?;
        if text.trim().is_empty() {
            continue;
        }
        let row: MooncakeRow =
            serde_json::from_str(&text).map_err(|err| field_err("json", err.to_string()))?;
        if !(row.timestamp.is_finite() && row.timestamp >= 0.0) {
            return Err(field_err(
                "timestamp",
                format!("must be a non-negative number of ms, got {}", row.timestamp),
            ));
        }
        let to_u32 = |value: u64, field: &'static str| {
            u32::try_from(value).map_err(|_| field_err(field, format!("{value} too large")))
        };
        records.push(RequestRecord {
            arrival_us: (row.timestamp * 1000.0).round() as u64,
            prompt_tokens: to_u32(row.input_length, "input_length")?,
            output_tokens: to_u32(row.output_length, "output_length")?,
            prefix_hashes: row.hash_ids,
            line,
        });
    }
    let first_us =
        records.iter().map(|r| r.arrival_us).min().ok_or(RequestTraceError::Empty { file: file.into() })?;
    for record in &mut records {
        record.arrival_us -= first_us;
    }
    Ok(finish(file, records, MOONCAKE_BLOCK_TOKENS))
}

fn finish(file: &str, mut records: Vec<RequestRecord>, block_tokens: u32) -> RequestTrace {
    // Stable: equal arrivals keep file order.
    records.sort_by_key(|r| r.arrival_us);
    RequestTrace { source: file.to_string(), records, block_tokens }
}

fn parse_tokens(text: &str) -> Result<u32, String> {
    text.parse::<u32>().map_err(|err| format!("`{text}` is not a token count: {err}"))
}

/// `YYYY-MM-DD HH:MM:SS[.fffffff]` (no time zone) to microseconds since 1970-01-01.
/// Fractional digits beyond microseconds are truncated.
pub fn parse_wall_clock_us(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not `YYYY-MM-DD HH:MM:SS[.fraction]`");
    let (date, clock) = text.split_once([' ', 'T']).ok_or_else(bad)?;
    let mut date_parts = date.split('-');
    let next_num = |parts: &mut std::str::Split<'_, char>| -> Result<i64, String> {
        parts.next().ok_or_else(bad)?.parse::<i64>().map_err(|_| bad())
    };
    let (year, month, day) =
        (next_num(&mut date_parts)?, next_num(&mut date_parts)?, next_num(&mut date_parts)?);
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut clock_parts = hms.split(':');
    let (hour, minute, second) =
        (next_num(&mut clock_parts)?, next_num(&mut clock_parts)?, next_num(&mut clock_parts)?);
    let in_range =
        (1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && minute < 60 && second < 61;
    if !in_range || year < 1970 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let mut micros: i64 = 0;
    for (position, digit) in fraction.bytes().take(6).enumerate() {
        micros += i64::from(digit - b'0') * 10_i64.pow(5 - position as u32);
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second;
    u64::try_from(seconds * 1_000_000 + micros).map_err(|_| bad())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(
            err.to_string().split(": ").take(2).collect::<Vec<_>>(),
            ["t.csv:2", "field `ContextTokens`"]
        );
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
        assert!(err.to_string().starts_with("m:1: field `timestamp`"), "{err}");
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
