//! Request files a user brings (`serve-sim --requests [TENANT=][KIND:]PATH`): an Azure
//! LLM inference CSV, a Mooncake JSONL, or cotenant's own JSONL, named by `KIND:` or
//! detected from the content, plain or gzip. Several files are merged on one clock by
//! [`align_origins`], which keeps the offsets between their first arrivals.
//!
//! The cotenant JSONL format (documented in docs/serving.md, "Your own requests") is one
//! JSON object per line:
//!
//! ```text
//! {"arrival_s": 0.25, "prompt_tokens": 812, "output_tokens": 64, "tenant": "chat", "hash_ids": [7, 8]}
//! ```
//!
//! `arrival_s` (seconds, >= 0, any origin), `prompt_tokens` and `output_tokens` are
//! required; `tenant` (default: the file's tenant), `hash_ids` (prefix-cache block hashes)
//! and `block_tokens` (tokens per hashed block, default 512, the same on every line) are
//! optional. Other keys are errors, so a misspelt field does not pass silently.

use std::path::{Path, PathBuf};

use cotenant_core::limits::{MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_REQUEST_SPAN};
use serde_json::Value;

use crate::error::TraceError;
use crate::requests::{
    parse_azure_csv, parse_mooncake_jsonl, JsonLine, RequestRecord, RequestTrace, RequestTraceError, Skips,
    MOONCAKE_BLOCK_TOKENS,
};
use crate::text::{data_lines, decode_utf8, describe_span, read_bytes};

/// The request file formats `--requests` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestFormat {
    /// Azure LLM inference CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// Mooncake JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// cotenant JSONL: `arrival_s`, `prompt_tokens`, `output_tokens`, optional `tenant`,
    /// `hash_ids`, `block_tokens`.
    Cotenant,
}

/// The `KIND` names, in the order error messages list them.
pub const REQUEST_FORMAT_NAMES: &str = "azure, mooncake, cotenant";

impl RequestFormat {
    /// The `KIND` name.
    pub fn name(self) -> &'static str {
        match self {
            RequestFormat::Azure => "azure",
            RequestFormat::Mooncake => "mooncake",
            RequestFormat::Cotenant => "cotenant",
        }
    }

    /// The format a `KIND` name means, if any.
    pub fn from_name(name: &str) -> Option<RequestFormat> {
        match name {
            "azure" => Some(RequestFormat::Azure),
            "mooncake" => Some(RequestFormat::Mooncake),
            "cotenant" => Some(RequestFormat::Cotenant),
            _ => None,
        }
    }
}

/// One `--requests` argument: `[TENANT=][KIND:]PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// The tenant of rows that do not name one (default: the file name without extensions).
    pub tenant: Option<String>,
    /// The format, when named; `None` detects it from the content.
    pub format: Option<RequestFormat>,
    pub path: PathBuf,
}

impl RequestSpec {
    /// Parses `[TENANT=][KIND:]PATH`. A `KIND:` prefix that is not a known kind is an
    /// error unless the whole text (after `TENANT=`) names an existing file.
    pub fn parse(text: &str) -> Result<RequestSpec, String> {
        let (tenant, rest) = match text.split_once('=') {
            Some((name, rest)) if is_name(name) => (Some(name.to_string()), rest),
            _ => (None, text),
        };
        let (format, path) = match rest.split_once(':') {
            Some((kind, path)) if is_name(kind) && !Path::new(rest).exists() => {
                let format = RequestFormat::from_name(kind).ok_or_else(|| {
                    format!("unknown request format `{kind}` (known: {REQUEST_FORMAT_NAMES}) in `{text}`")
                })?;
                (Some(format), path)
            }
            _ => (None, rest),
        };
        if path.is_empty() {
            return Err(format!("no file in `{text}` (expected [TENANT=][KIND:]PATH)"));
        }
        Ok(RequestSpec { tenant, format, path: PathBuf::from(path) })
    }

    /// The default tenant: the given one, else the file name up to its first dot.
    pub fn default_tenant(&self) -> String {
        if let Some(tenant) = &self.tenant {
            return tenant.clone();
        }
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let stem = name.split('.').next().unwrap_or_default();
        if stem.is_empty() {
            "requests".to_string()
        } else {
            stem.to_string()
        }
    }
}

/// A tenant or kind name: 1 to 64 letters, digits, `_`, `-` or `.`, not starting with `.`
/// (so `./x.csv` and `/a=b/c` are paths, not names).
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && !text.starts_with('.')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// One file read: its format (and whether it was detected) and its requests, one
/// trace per tenant in order of first appearance.
#[derive(Clone, Debug)]
pub struct RequestFile {
    pub format: RequestFormat,
    /// True when the format was detected from the content rather than named.
    pub detected: bool,
    pub tenants: Vec<(String, RequestTrace)>,
}

/// Reads one `--requests` file (plain or gzip).
pub fn read_request_file(spec: &RequestSpec) -> Result<RequestFile, RequestTraceError> {
    let file = spec.path.display().to_string();
    parse_request_bytes(read_bytes(&spec.path)?, &file, spec.format, &spec.default_tenant())
}

/// Parses the (already decompressed) bytes of a request file; `format` `None` detects it.
pub fn parse_request_bytes(
    bytes: Vec<u8>,
    file: &str,
    format: Option<RequestFormat>,
    default_tenant: &str,
) -> Result<RequestFile, RequestTraceError> {
    let (format, detected) = match format {
        Some(format) => (format, false),
        None => (detect_format(&bytes, file)?, true),
    };
    let tenants = match format {
        RequestFormat::Azure => vec![(default_tenant.to_string(), parse_azure_csv(bytes.as_slice(), file)?)],
        RequestFormat::Mooncake => {
            vec![(default_tenant.to_string(), parse_mooncake_jsonl(bytes.as_slice(), file)?)]
        }
        RequestFormat::Cotenant => parse_cotenant_jsonl(bytes, file, default_tenant)?,
    };
    Ok(RequestFile { format, detected, tenants })
}

/// The format of a request file from its first non-blank line: a JSON object with
/// `input_length` is Mooncake, one with `prompt_tokens` is cotenant; a CSV header with
/// `TIMESTAMP` is Azure. Anything else is an error that says how to name the format.
pub fn detect_format(bytes: &[u8], file: &str) -> Result<RequestFormat, RequestTraceError> {
    let head = &bytes[..bytes.len().min(1 << 16)];
    let text = String::from_utf8_lossy(head);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Some((line, first)) = data_lines(text).find(|(_, l)| !l.trim().is_empty()) else {
        return Err(TraceError::File { file: file.to_string(), message: "empty: no requests".into() }.into());
    };
    let first = first.trim();
    let undetected = |what: &str| -> RequestTraceError {
        TraceError::Row {
            file: file.to_string(),
            line,
            message: format!(
                "cannot tell the request format: {what}; name it as KIND:PATH (kinds: {REQUEST_FORMAT_NAMES})"
            ),
        }
        .into()
    };
    if first.starts_with('{') {
        let has = |key: &str| first.contains(&format!("\"{key}\""));
        if has("input_length") || has("hash_ids") && has("timestamp") {
            Ok(RequestFormat::Mooncake)
        } else if has("prompt_tokens") || has("arrival_s") {
            Ok(RequestFormat::Cotenant)
        } else {
            Err(undetected(
                "a JSON line with neither `input_length` (mooncake) nor `prompt_tokens` (cotenant)",
            ))
        }
    } else if first.split(',').any(|c| c.trim() == "TIMESTAMP") {
        Ok(RequestFormat::Azure)
    } else {
        Err(undetected("the first line is neither a JSON object nor a CSV header with TIMESTAMP"))
    }
}

/// The cotenant JSONL fields, in the order errors name them.
pub const COTENANT_FIELDS: [&str; 6] =
    ["arrival_s", "prompt_tokens", "output_tokens", "tenant", "hash_ids", "block_tokens"];

/// Longest tenant name in a cotenant JSONL file.
const MAX_TENANT_NAME: usize = 64;
/// Largest `block_tokens` (tokens per hashed prefix block).
const MAX_BLOCK_TOKENS: u64 = 1 << 20;

/// Parses cotenant JSONL (see the module docs): one trace per tenant, in order of first
/// appearance, each re-based to its own first arrival with [`RequestTrace::origin_us`]
/// set (so [`align_origins`] restores the offsets between tenants). Blank lines are
/// skipped; rows with 0 prompt or 0 output tokens are skipped and counted on the first
/// tenant's trace.
pub fn parse_cotenant_jsonl(
    bytes: Vec<u8>,
    file: &str,
    default_tenant: &str,
) -> Result<Vec<(String, RequestTrace)>, RequestTraceError> {
    let text = decode_utf8(file, bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut tenants: Vec<(String, Vec<RequestRecord>)> = Vec::new();
    let mut skips = Skips::default();
    let mut block_tokens: Option<(u64, u64)> = None;
    for (line, content) in data_lines(text) {
        if content.trim().is_empty() {
            continue;
        }
        let row = JsonLine::parse(file, line, content, &COTENANT_FIELDS)?;
        if let Some(key) = row.object.keys().find(|k| !COTENANT_FIELDS.contains(&k.as_str())) {
            return Err(TraceError::Field {
                file: file.to_string(),
                line,
                field: key.clone(),
                message: format!("unknown field (known: {})", COTENANT_FIELDS.join(", ")),
            }
            .into());
        }
        let arrival_s = row.arrival(0, 1.0, "seconds")?;
        let prompt_tokens = row.count(1, MAX_PROMPT_TOKENS, "MAX_PROMPT_TOKENS")?;
        let output_tokens = row.count(2, MAX_OUTPUT_TOKENS, "MAX_OUTPUT_TOKENS")?;
        let tenant = match row.get(3) {
            None => default_tenant,
            Some(Value::String(name)) if is_name(name) && name.len() <= MAX_TENANT_NAME => name.as_str(),
            Some(other) => {
                return Err(row
                    .error(
                        3,
                        format!(
                            "expected a name of 1 to {MAX_TENANT_NAME} letters, digits, `_`, `-` or `.`, got {other}"
                        ),
                    )
                    .into())
            }
        };
        let prefix_hashes = row.hashes(4)?;
        if row.get(5).is_some() {
            let n = row.number(5)?;
            let value = n.as_u64().filter(|v| (1..=MAX_BLOCK_TOKENS).contains(v)).ok_or_else(|| {
                row.error(5, format!("expected an integer from 1 to {MAX_BLOCK_TOKENS}, got {n}"))
            })?;
            match block_tokens {
                Some((first, first_line)) if first != value => {
                    return Err(row
                        .error(
                            5,
                            format!("{value} differs from {first} on line {first_line}; one size per file"),
                        )
                        .into())
                }
                Some(_) => {}
                None => block_tokens = Some((value, line)),
            }
        }
        if skips.zero_tokens(prompt_tokens, output_tokens) {
            continue;
        }
        let record = RequestRecord {
            // Bounded by MAX_REQUEST_SPAN above: fits in u64.
            arrival_us: (arrival_s * 1e6).round() as u64,
            prompt_tokens,
            output_tokens,
            prefix_hashes,
            line,
        };
        match tenants.iter_mut().find(|(name, _)| name == tenant) {
            Some((_, records)) => records.push(record),
            None => tenants.push((tenant.to_string(), vec![record])),
        }
    }
    if tenants.is_empty() {
        return Err(RequestTraceError::Empty { file: file.to_string() });
    }
    let block = block_tokens.map_or(MOONCAKE_BLOCK_TOKENS, |(b, _)| b as u32);
    let mut skipped = skips.into_counts();
    let mut traces = Vec::with_capacity(tenants.len());
    for (name, mut records) in tenants {
        records.sort_by_key(|r| r.arrival_us);
        // Non-empty: a tenant exists only with a record.
        let origin_us = records.first().map_or(0, |r| r.arrival_us);
        for record in &mut records {
            record.arrival_us -= origin_us;
        }
        let has_hashes = records.iter().any(|r| !r.prefix_hashes.is_empty());
        let trace = RequestTrace {
            source: file.to_string(),
            records,
            block_tokens: if has_hashes { block } else { 0 },
            skipped: std::mem::take(&mut skipped),
            origin_us,
        };
        traces.push((name, trace));
    }
    Ok(traces)
}

/// Puts traces read from different files (or tenants) on one clock: each is shifted by
/// its origin's distance from the earliest origin, so the offsets between their first
/// arrivals are kept and the merged trace starts at 0. Origins are comparable only
/// between files of the same clock (Azure files are on wall-clock time; Mooncake and
/// cotenant files on their own time 0). Fails, naming the file and its first row, when
/// the merged arrivals would span more than [`MAX_REQUEST_SPAN`].
pub fn align_origins(traces: &mut [&mut RequestTrace]) -> Result<(), RequestTraceError> {
    let Some(earliest) = traces.iter().map(|t| t.origin_us).min() else {
        return Ok(());
    };
    for trace in traces.iter_mut() {
        let shift = trace.origin_us - earliest;
        let last = trace.records.last().map_or(0, |r| r.arrival_us);
        if shift.saturating_add(last) > MAX_REQUEST_SPAN.0 {
            return Err(TraceError::Field {
                file: trace.source.clone(),
                line: trace.records.first().map_or(0, |r| r.line),
                field: "arrival".to_string(),
                message: format!(
                    "merged with the other request files, the arrivals would span {:.0} days, more than the \
                     limit of {} (core::limits::MAX_REQUEST_SPAN)",
                    shift.saturating_add(last) as f64 / 86_400e6,
                    describe_span(MAX_REQUEST_SPAN)
                ),
            }
            .into());
        }
        for record in &mut trace.records {
            record.arrival_us += shift;
        }
        trace.origin_us = earliest;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::SKIP_ZERO_OUTPUT;

    fn cotenant(text: &str) -> Result<Vec<(String, RequestTrace)>, RequestTraceError> {
        parse_cotenant_jsonl(text.as_bytes().to_vec(), "r.jsonl", "r")
    }

    #[test]
    fn spec_forms() {
        let spec = RequestSpec::parse("chat=cotenant:dir/a.jsonl.gz").expect("parses");
        assert_eq!(spec.tenant.as_deref(), Some("chat"));
        assert_eq!(spec.format, Some(RequestFormat::Cotenant));
        assert_eq!(spec.path, PathBuf::from("dir/a.jsonl.gz"));
        let plain = RequestSpec::parse("dir/code.csv.gz").expect("parses");
        assert_eq!((plain.tenant, plain.format), (None, None));
        assert_eq!(RequestSpec::parse("x/code.csv.gz").expect("ok").default_tenant(), "code");
        let err = RequestSpec::parse("vllm:a.json").expect_err("unknown kind");
        assert!(err.contains("unknown request format `vllm`") && err.contains("a.json"), "{err}");
        assert!(RequestSpec::parse("azure:").is_err());
    }

    #[test]
    fn detection() {
        let detect = |t: &str| detect_format(t.as_bytes(), "f");
        assert_eq!(detect("\n{\"timestamp\": 0, \"input_length\": 1}").ok(), Some(RequestFormat::Mooncake));
        assert_eq!(detect("{\"arrival_s\": 0, \"prompt_tokens\": 1}").ok(), Some(RequestFormat::Cotenant));
        assert_eq!(detect("TIMESTAMP,ContextTokens,GeneratedTokens\r\n").ok(), Some(RequestFormat::Azure));
        let err = detect("\n\nts,prompt\n").expect_err("unknown");
        assert!(err.to_string().starts_with("f line 3: cannot tell the request format"), "{err}");
    }

    #[test]
    fn cotenant_tenants_offsets_and_skips() {
        let text = "{\"arrival_s\": 10.5, \"prompt_tokens\": 100, \"output_tokens\": 5, \"tenant\": \"b\"}\n\
                    \n\
                    {\"arrival_s\": 10, \"prompt_tokens\": 7, \"output_tokens\": 3, \"hash_ids\": [1, 2]}\n\
                    {\"arrival_s\": 12, \"prompt_tokens\": 7, \"output_tokens\": 0}\n\
                    {\"arrival_s\": 13.25, \"prompt_tokens\": 9, \"output_tokens\": 1, \"tenant\": \"b\"}\n";
        let mut traces = cotenant(text).expect("parses");
        let names: Vec<&str> = traces.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "r"]);
        let (b, r) = (&traces[0].1, &traces[1].1);
        assert_eq!((b.origin_us, r.origin_us), (10_500_000, 10_000_000));
        assert_eq!(b.records.iter().map(|x| x.arrival_us).collect::<Vec<_>>(), [0, 2_750_000]);
        assert_eq!((r.records[0].line, r.records[0].prefix_hashes.clone()), (3, vec![1, 2]));
        assert_eq!((r.block_tokens, b.block_tokens), (512, 0));
        assert_eq!(b.skipped.len(), 1);
        assert_eq!((b.skipped[0].reason.as_str(), b.skipped[0].rows), (SKIP_ZERO_OUTPUT, 1));
        let (first, rest) = traces.split_at_mut(1);
        align_origins(&mut [&mut first[0].1, &mut rest[0].1]).expect("aligns");
        assert_eq!(traces[0].1.records[0].arrival_us, 500_000);
        assert_eq!(traces[1].1.records[0].arrival_us, 0);
    }

    #[test]
    fn cotenant_errors_name_file_line_and_field() {
        let cases = [
            (
                "{\"arrival_s\": -1, \"prompt_tokens\": 1, \"output_tokens\": 1}",
                "r.jsonl line 1, field arrival_s: ",
            ),
            (
                "\n{\"arrival_s\": 1, \"prompt_tokens\": 1.5, \"output_tokens\": 1}",
                "r.jsonl line 2, field prompt_tokens: ",
            ),
            ("{\"arrival_s\": 1, \"prompt_tokens\": 1}", "r.jsonl line 1, field output_tokens: missing"),
            ("{\"arrival_s\": 1, \"prompt\": 1}", "r.jsonl line 1, field prompt: unknown field"),
            (
                "{\"arrival_s\": 1, \"prompt_tokens\": 1, \"output_tokens\": 1, \"tenant\": \"a b\"}",
                "r.jsonl line 1, field tenant: ",
            ),
            ("{\"arrival_s\": 1,", "r.jsonl line 1: not a JSON object: "),
            ("[1]", "r.jsonl line 1: expected a JSON object"),
            ("\n", "r.jsonl: no requests"),
        ];
        for (text, expected) in cases {
            let err = cotenant(text).expect_err(text);
            assert!(err.to_string().starts_with(expected), "{text}: {err}");
        }
        let mixed = "{\"arrival_s\": 1, \"prompt_tokens\": 1, \"output_tokens\": 1, \"block_tokens\": 16}\n\
                     {\"arrival_s\": 2, \"prompt_tokens\": 1, \"output_tokens\": 1, \"block_tokens\": 32}";
        let err = cotenant(mixed).expect_err("two block sizes");
        assert!(
            err.to_string().starts_with("r.jsonl line 2, field block_tokens: 32 differs from 16 on line 1"),
            "{err}"
        );
    }

    #[test]
    fn merged_span_over_the_limit_is_an_error() {
        let mut a = cotenant("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}").expect("a");
        let far = format!(
            "{{\"arrival_s\": {}, \"prompt_tokens\": 1, \"output_tokens\": 1}}",
            MAX_REQUEST_SPAN.as_secs_f64()
        );
        let mut b = cotenant(&far).expect("b");
        b[0].1.records[0].arrival_us = 1;
        let err = align_origins(&mut [&mut a[0].1, &mut b[0].1]).expect_err("too long");
        assert!(err.to_string().starts_with("r.jsonl line 1, field arrival: "), "{err}");
    }

    /// The bundled Azure files merged: conv's first arrival stays at 0 and code's first
    /// arrival keeps its wall-clock offset (18:17:03.97996 - 18:15:46.68059 = 77.29937 s).
    #[test]
    fn bundled_azure_offset_is_kept() {
        let read = |name: &str| crate::requests::read_azure_csv(&crate::bundled_data_dir().join(name));
        let (Ok(mut code), Ok(mut conv)) = (read(crate::BUNDLED_AZURE_CODE), read(crate::BUNDLED_AZURE_CONV))
        else {
            panic!("the bundled Azure files read");
        };
        let (code_last, conv_last) =
            (code.records.last().map(|r| r.arrival_us), conv.records.last().map(|r| r.arrival_us));
        align_origins(&mut [&mut code, &mut conv]).expect("aligns");
        assert_eq!(conv.records[0].arrival_us, 0);
        assert_eq!(code.records[0].arrival_us, 77_299_370);
        assert_eq!(code.records.last().map(|r| r.arrival_us), code_last.map(|t| t + 77_299_370));
        assert_eq!(conv.records.last().map(|r| r.arrival_us), conv_last);
    }
}
