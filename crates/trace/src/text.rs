//! Reading text inputs: plain or gzip files, tolerant line splitting (CRLF, blank
//! lines, a missing final newline), simple delimited tables with a header, and
//! typed field parsers whose errors name file, line and field.

use std::io::Read;
use std::path::Path;

use crate::error::TraceError;

/// Reads a whole file as UTF-8 text, decompressing it when it is gzip. The
/// gzip magic bytes decide, not the name, so a misnamed file still reads.
pub fn read_text(path: &Path) -> Result<String, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(bytes.len() * 4);
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| TraceError::io(path, e))?;
        out
    } else {
        bytes
    };
    String::from_utf8(bytes).map_err(|e| {
        TraceError::file(
            &path.display().to_string(),
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// The file name with any `.gz` and one more extension removed
/// (`cluster10.csv.gz` -> `cluster10`): used to name a single-tenant trace.
pub fn file_stem(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => name.to_string(),
    }
}

/// Non-blank lines with their 1-based line numbers; a trailing `\r` is dropped.
pub fn data_lines(text: &str) -> impl Iterator<Item = (u64, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, line)| (i as u64 + 1, line.strip_suffix('\r').unwrap_or(line)))
        .filter(|(_, line)| !line.trim().is_empty())
}

/// A delimited table whose first non-blank line is a header.
#[derive(Debug)]
pub struct Table<'a> {
    pub file: String,
    pub header_line: u64,
    pub columns: Vec<&'a str>,
    rows: Vec<(u64, &'a str)>,
    delimiter: char,
}

impl<'a> Table<'a> {
    pub fn parse(file: &str, text: &'a str, delimiter: char) -> Result<Table<'a>, TraceError> {
        let mut lines = data_lines(text);
        let (header_line, header) =
            lines.next().ok_or_else(|| TraceError::file(file, "empty file (no header)"))?;
        let header = header.strip_prefix('\u{feff}').unwrap_or(header);
        let columns = header.split(delimiter).map(str::trim).collect();
        Ok(Table { file: file.to_string(), header_line, columns, rows: lines.collect(), delimiter })
    }

    /// Index of a required column.
    pub fn column(&self, name: &str) -> Result<usize, TraceError> {
        self.columns.iter().position(|c| *c == name).ok_or_else(|| TraceError::MissingColumn {
            file: self.file.clone(),
            line: self.header_line,
            column: name.to_string(),
            header: self.columns.join(","),
        })
    }

    /// Data rows, split into exactly as many fields as the header has.
    pub fn rows(&self) -> impl Iterator<Item = Result<Row<'_>, TraceError>> + '_ {
        self.rows.iter().map(move |&(line, text)| {
            let fields: Vec<&str> = text.split(self.delimiter).map(str::trim).collect();
            if fields.len() != self.columns.len() {
                return Err(TraceError::Row {
                    file: self.file.clone(),
                    line,
                    message: format!(
                        "expected {} fields ({}), got {}",
                        self.columns.len(),
                        self.columns.join(","),
                        fields.len()
                    ),
                });
            }
            Ok(Row { file: &self.file, line, fields, names: &self.columns })
        })
    }
}

/// One data row with typed accessors by column index.
#[derive(Debug)]
pub struct Row<'a> {
    pub file: &'a str,
    pub line: u64,
    pub fields: Vec<&'a str>,
    names: &'a [&'a str],
}

impl<'a> Row<'a> {
    /// A row of a headerless file, with field names given by the format.
    pub fn headerless(file: &'a str, line: u64, fields: Vec<&'a str>, names: &'a [&'a str]) -> Row<'a> {
        Row { file, line, fields, names }
    }

    pub fn str(&self, column: usize) -> &'a str {
        self.fields.get(column).copied().unwrap_or("")
    }

    fn name(&self, column: usize) -> &str {
        self.names.get(column).copied().unwrap_or("?")
    }

    pub fn error(&self, column: usize, message: impl Into<String>) -> TraceError {
        TraceError::Field {
            file: self.file.to_string(),
            line: self.line,
            field: self.name(column).to_string(),
            message: message.into(),
        }
    }

    fn expected(&self, column: usize, what: &str) -> TraceError {
        self.error(column, format!("expected {what}, got {:?}", self.str(column)))
    }

    /// A finite number >= 0.
    pub fn non_negative_f64(&self, column: usize) -> Result<f64, TraceError> {
        match self.str(column).parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Ok(v) if v < 0.0 => {
                Err(self.error(column, format!("must not be negative, got {:?}", self.str(column))))
            }
            _ => Err(self.expected(column, "a non-negative number")),
        }
    }

    /// A finite number of any sign.
    pub fn f64(&self, column: usize) -> Result<f64, TraceError> {
        match self.str(column).parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.expected(column, "a number")),
        }
    }

    /// An integer >= 0 (a trailing `.0` is accepted, as pandas writes them).
    pub fn u64(&self, column: usize) -> Result<u64, TraceError> {
        let text = self.str(column);
        let digits = text.strip_suffix(".0").unwrap_or(text);
        match digits.parse::<u64>() {
            Ok(v) => Ok(v),
            Err(_) if digits.starts_with('-') && digits[1..].parse::<u64>().is_ok() => {
                Err(self.error(column, format!("must not be negative, got {text:?}")))
            }
            Err(_) => Err(self.expected(column, "a non-negative integer")),
        }
    }

    /// An integer >= 1 that fits in u32 (GPU counts, replicas).
    pub fn positive_u32(&self, column: usize) -> Result<u32, TraceError> {
        match self.u64(column) {
            Ok(v) if v >= 1 && v <= u64::from(u32::MAX) => Ok(v as u32),
            _ => Err(self.expected(column, "a positive integer")),
        }
    }

    /// An integer >= 0 that fits in u32.
    pub fn u32(&self, column: usize) -> Result<u32, TraceError> {
        let v = self.u64(column)?;
        u32::try_from(v).map_err(|_| self.expected(column, "an integer below 2^32"))
    }
}

/// Seconds (a float) as integer microseconds, rounded to the nearest.
pub fn secs_to_us(secs: f64) -> i64 {
    (secs * 1e6).round() as i64
}
