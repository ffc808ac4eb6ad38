//! Reading text inputs: plain or gzip files, tolerant line splitting (CRLF, blank
//! lines, a missing final newline), simple delimited tables with a header, and
//! typed field parsers whose errors name file, line and field.

use std::io::Read;
use std::path::Path;

use cotenant_core::limits::{MAX_ARRIVAL_SPAN, MAX_GPUS_PER_JOB, MAX_JOB_DURATION};
use cotenant_core::Span;

use crate::error::TraceError;

/// Reads a whole file as UTF-8 text, decompressing it when it is gzip. The
/// gzip magic bytes decide, not the name, so a misnamed file still reads.
pub fn read_text(path: &Path) -> Result<String, TraceError> {
    let bytes = read_bytes(path)?;
    decode_utf8(&path.display().to_string(), bytes)
}

/// Bytes of a file already in memory as text: gunzipped when gzip, then UTF-8
/// (errors by line); `path` names them in errors.
pub fn text_from_bytes(path: &Path, bytes: Vec<u8>) -> Result<String, TraceError> {
    let file = path.display().to_string();
    decode_utf8(&file, gunzip_if_gzip(&file, bytes)?)
}

/// Reads a whole file's bytes, decompressing it when it is gzip (magic bytes decide).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, TraceError> {
    let bytes = std::fs::read(path).map_err(|e| TraceError::io(path, e))?;
    gunzip_if_gzip(&path.display().to_string(), bytes)
}

/// Decompresses `bytes` when they start with the gzip magic bytes.
pub fn gunzip_if_gzip(file: &str, bytes: Vec<u8>) -> Result<Vec<u8>, TraceError> {
    gunzip(bytes).map_err(|e| TraceError::Io { file: file.to_string(), error: e })
}

/// Most bytes reserved up front for a gzip file's text (the trailer's size is a hint).
const MAX_SIZE_HINT: usize = 64 << 20;

/// `bytes` decompressed when they start with the gzip magic bytes, else as
/// they are. A file of one member (as `gzip` writes it) is inflated in one
/// call ([`gunzip_member`]); anything else streams through the multi-member
/// decoder, which reports what is wrong with it.
pub(crate) fn gunzip(bytes: Vec<u8>) -> std::io::Result<Vec<u8>> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    if let Some(text) = gunzip_member(&bytes) {
        return Ok(text);
    }
    // The gzip trailer's last four bytes hold the text's size (mod 2^32): room
    // for it up front instead of doubling (a hint only, capped).
    let size = bytes.len().checked_sub(4).map_or(0, |at| {
        u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize
    });
    let mut out = Vec::with_capacity(size.min(MAX_SIZE_HINT) + 1);
    flate2::read::MultiGzDecoder::new(bytes.as_slice()).read_to_end(&mut out)?;
    Ok(out)
}

/// The text of a gzip file that is one member with its size in the trailer
/// (as `gzip` writes it), decompressed straight into a buffer of that size
/// (not zeroed first, no 32 KiB steps); `None` for anything else (plain text,
/// several members, a header with a CRC, bad data, a checksum or size that
/// does not match), which the streaming decoder then reads (or rejects, with
/// its own error). What it returns is what the streaming decoder returns
/// (`the_one_member_gunzip_is_the_decoder`).
fn gunzip_member(bytes: &[u8]) -> Option<Vec<u8>> {
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let (header, trailer) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    // Flags: an extra field, a name, a comment (a header CRC, 2, is declined).
    let flags = match header {
        [0x1f, 0x8b, 8, flags, ..] if header.len() >= 10 && flags & !(FEXTRA | FNAME | FCOMMENT) == 0 => {
            *flags
        }
        _ => return None,
    };
    let mut at = 10;
    if flags & FEXTRA != 0 {
        let len = usize::from(u16::from_le_bytes([*header.get(at)?, *header.get(at + 1)?]));
        at += 2 + len;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            at += header.get(at..)?.iter().position(|&c| c == 0)? + 1;
        }
    }
    let body = header.get(at..)?;
    let crc = u32::from_le_bytes(trailer[..4].try_into().ok()?);
    let size = u32::from_le_bytes(trailer[4..].try_into().ok()?) as usize;
    if size >= MAX_SIZE_HINT {
        return None;
    }
    let mut out = Vec::with_capacity(size + 1);
    let mut inflate = flate2::Decompress::new(false);
    let status = inflate.decompress_vec(body, &mut out, flate2::FlushDecompress::Finish).ok()?;
    // The whole body is the deflate stream, and it makes `size` bytes.
    if status != flate2::Status::StreamEnd || inflate.total_in() != body.len() as u64 || out.len() != size {
        return None;
    }
    let mut check = flate2::Crc::new();
    check.update(&out);
    (check.sum() == crc).then_some(out)
}

/// Bytes as UTF-8 text; invalid UTF-8 is reported by its 1-based physical line
/// and column (bytes from the line start), not by its offset in the file.
pub fn decode_utf8(file: &str, bytes: Vec<u8>) -> Result<String, TraceError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        TraceError::Row {
            file: file.to_string(),
            line,
            message: format!("not UTF-8 text (invalid byte at column {})", at - line_start + 1),
        }
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

/// `line.split(delimiter).map(str::trim)` into `fields` (cleared first), for an
/// ASCII `delimiter`: one pass over the bytes, and `str::trim` called only on
/// a field that starts or ends with a byte that is whitespace or not ASCII (a
/// field with ASCII non-whitespace at both ends is its own trim). The same
/// fields as the plain split (`split_trimmed_is_split_then_trim`).
pub fn split_trimmed<'a>(line: &'a str, delimiter: u8, fields: &mut Vec<&'a str>) {
    debug_assert!(delimiter.is_ascii(), "an ASCII delimiter never splits a UTF-8 sequence");
    fields.clear();
    let bytes = line.as_bytes();
    let mut start = 0;
    let field = |from: usize, to: usize| -> &'a str {
        // Splitting at an ASCII byte keeps both sides valid UTF-8.
        let f = &line[from..to];
        match (f.as_bytes().first(), f.as_bytes().last()) {
            (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => f,
            _ => f.trim(),
        }
    };
    // Eight bytes at a time, every delimiter among them taken from one
    // mask, then the tail byte by byte.
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut hits = equal_bytes(chunk, delimiter);
        while hits != 0 {
            let at = i + (hits.trailing_zeros() / 8) as usize;
            fields.push(field(start, at));
            start = at + 1;
            hits &= hits - 1;
        }
        i += 8;
    }
    for (at, &b) in bytes.iter().enumerate().skip(i) {
        if b == delimiter {
            fields.push(field(start, at));
            start = at + 1;
        }
    }
    fields.push(field(start, bytes.len()));
}

/// Non-blank lines with their 1-based line numbers; a trailing `\r` is dropped.
/// Lines are split as `text.split('\n')` splits them (`data_lines_are_the_split_lines`),
/// each newline found eight bytes at a time.
pub fn data_lines(text: &str) -> impl Iterator<Item = (u64, &str)> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let piece = rest?;
        match find_byte(piece.as_bytes(), b'\n') {
            // Splitting at an ASCII byte keeps both sides valid UTF-8.
            Some(at) => {
                rest = Some(&piece[at + 1..]);
                Some(&piece[..at])
            }
            None => {
                rest = None;
                Some(piece)
            }
        }
    })
    .enumerate()
    .map(|(i, line)| (i as u64 + 1, line.strip_suffix('\r').unwrap_or(line)))
    .filter(|(_, line)| !line.trim().is_empty())
}

/// Where `byte` first is in `bytes`: eight bytes at a time ([`equal_bytes`]),
/// then the tail.
fn find_byte(bytes: &[u8], byte: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let hits = equal_bytes(chunk, byte);
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i..].iter().position(|&b| b == byte).map(|at| i + at)
}

/// Eight bytes (`chunk`) as a mask with the high bit of each byte that equals
/// `byte` set, and no other bit: exact per byte, as no carry crosses a byte
/// (`(x & 0x7f) + 0x7f` sets a byte's high bit where its low seven bits are
/// not all zero).
#[inline]
fn equal_bytes(chunk: &[u8], byte: u8) -> u64 {
    const LOW7: u64 = u64::from_le_bytes([0x7f; 8]);
    let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes")) ^ u64::from_le_bytes([byte; 8]);
    !(((x & LOW7) + LOW7) | x | LOW7)
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
            let mut fields: Vec<&str> = Vec::with_capacity(self.columns.len());
            if self.delimiter.is_ascii() {
                split_trimmed(text, self.delimiter as u8, &mut fields);
            } else {
                fields.extend(text.split(self.delimiter).map(str::trim));
            }
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
        match parse_f64(self.str(column)) {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Ok(v) if v < 0.0 => {
                Err(self.error(column, format!("must not be negative, got {:?}", self.str(column))))
            }
            _ => Err(self.expected(column, "a non-negative number")),
        }
    }

    /// A finite number of any sign.
    pub fn f64(&self, column: usize) -> Result<f64, TraceError> {
        match parse_f64(self.str(column)) {
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

    /// A run time in seconds: a finite number >= 0 and at most
    /// [`MAX_JOB_DURATION`].
    pub fn duration_secs(&self, column: usize) -> Result<f64, TraceError> {
        let secs = self.non_negative_f64(column)?;
        self.at_most_secs(column, secs, MAX_JOB_DURATION, "MAX_JOB_DURATION")?;
        Ok(secs)
    }

    /// An arrival in seconds on a trace's relative clock: a finite number >= 0 and
    /// at most [`MAX_ARRIVAL_SPAN`] after the clock's zero.
    pub fn relative_arrival_secs(&self, column: usize) -> Result<f64, TraceError> {
        let secs = self.non_negative_f64(column)?;
        self.at_most_secs(column, secs, MAX_ARRIVAL_SPAN, "MAX_ARRIVAL_SPAN")?;
        Ok(secs)
    }

    /// Errors when `secs` is above `limit`, naming the value and the limit.
    pub fn at_most_secs(&self, column: usize, secs: f64, limit: Span, name: &str) -> Result<(), TraceError> {
        if secs > limit.as_secs_f64() {
            return Err(self.error(column, exceeds_secs(self.str(column), limit, name)));
        }
        Ok(())
    }

    /// A GPU count of one job: an integer from 1 to [`MAX_GPUS_PER_JOB`].
    pub fn job_gpus(&self, column: usize) -> Result<u32, TraceError> {
        match self.gpus_or_zero(column) {
            Ok(0) => Err(self.expected(column, "a positive integer")),
            Ok(gpus) => Ok(gpus),
            Err(e) if self.gpu_count_too_large(column) => Err(e),
            Err(_) => Err(self.expected(column, "a positive integer")),
        }
    }

    /// A GPU count of one job that may be 0 (CPU-only): at most [`MAX_GPUS_PER_JOB`].
    pub fn gpus_or_zero(&self, column: usize) -> Result<u32, TraceError> {
        if self.gpu_count_too_large(column) {
            return Err(self.error(
                column,
                format!(
                    "{} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} GPUs per job (core::limits::MAX_GPUS_PER_JOB)",
                    self.str(column)
                ),
            ));
        }
        let gpus = self.u64(column)?;
        // Below the limit (checked above), so it fits in u32.
        u32::try_from(gpus).map_err(|_| self.expected(column, "an integer below 2^32"))
    }

    /// Whether the field is an integer (of any size, `+` sign allowed) above
    /// [`MAX_GPUS_PER_JOB`].
    fn gpu_count_too_large(&self, column: usize) -> bool {
        let text = self.str(column);
        let digits = text.strip_suffix(".0").unwrap_or(text);
        let digits = digits.strip_prefix('+').unwrap_or(digits);
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.parse::<u64>().map_or(true, |v| v > u64::from(MAX_GPUS_PER_JOB))
    }
}

/// `text.parse::<f64>()`, with a short way for the commonest field: 1 to 15
/// ASCII digits, an integer below 10^15 < 2^53, which a float holds exactly,
/// so that the correctly rounded parse is the integer itself
/// (`parse_f64_is_the_parse`).
pub(crate) fn parse_f64(text: &str) -> Result<f64, std::num::ParseFloatError> {
    let digits = text.as_bytes();
    if (1..=15).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
        return Ok(digits.iter().fold(0u64, |v, &d| v * 10 + u64::from(d - b'0')) as f64);
    }
    text.parse()
}

/// `"1e12 s exceeds the limit of 366 days (core::limits::MAX_JOB_DURATION)"`.
pub(crate) fn exceeds_secs(value: &str, limit: Span, name: &str) -> String {
    format!("{value} s exceeds the limit of {} (core::limits::{name})", describe_span(limit))
}

/// A limit span in words: whole days when it is a number of days, else seconds.
pub(crate) fn describe_span(span: Span) -> String {
    const DAY_US: u64 = 86_400_000_000;
    if span.0 >= DAY_US && span.0.is_multiple_of(DAY_US) {
        format!("{} days", span.0 / DAY_US)
    } else {
        format!("{} s", span.as_secs_f64())
    }
}

/// Seconds (a float) as integer microseconds, rounded to the nearest. Saturates
/// (and maps NaN to 0) instead of overflowing; readers bound their values first.
pub fn secs_to_us(secs: f64) -> i64 {
    (secs * 1e6).round() as i64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{data_lines, gunzip_member, parse_f64, split_trimmed};

    /// The one-member reader gives the streaming decoder's text or declines:
    /// the shipped table; members with a name, a comment, an extra field;
    /// and what it must decline (two members, a header CRC, trailing bytes,
    /// a wrong checksum or size, a cut stream, plain text). (Checked to catch
    /// seeded bugs: the checksum not compared; the size not compared.)
    #[test]
    fn the_one_member_gunzip_is_the_decoder() {
        use std::io::Read;
        let slow = |bytes: &[u8]| {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut out).ok().map(|_| out)
        };
        let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/gavel/simulation_throughputs.json.gz");
        let text: Vec<u8> = b"{\"k80\": {\"('A', 1)\": {\"null\": 1.5}}}\n".repeat(50);
        let gz = |builder: flate2::GzBuilder, text: &[u8]| {
            let mut enc = builder.write(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut enc, text).unwrap();
            enc.finish().unwrap()
        };
        let plain = gz(flate2::GzBuilder::new(), &text);
        let named = gz(flate2::GzBuilder::new().filename("t.json").comment("c").extra(vec![1, 2, 3]), &text);
        let mut accepted = vec![plain.clone(), named.clone(), gz(flate2::GzBuilder::new(), b"")];
        if let Ok(bytes) = std::fs::read(&shipped) {
            accepted.push(bytes);
        }
        for bytes in &accepted {
            let fast = gunzip_member(bytes).expect("one plain member");
            assert_eq!(Some(fast), slow(bytes));
        }
        let n = plain.len();
        let bad = |k: usize, f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = plain.clone();
            f(&mut b);
            assert_eq!(gunzip_member(&b), None, "case {k}");
            b
        };
        let declined = [
            bad(0, &|b| b.extend_from_slice(&named)),
            bad(1, &|b| b[3] |= 2),
            bad(2, &|b| b.push(0)),
            bad(3, &|b| b[n - 8] ^= 1),
            bad(4, &|b| b[n - 4] ^= 1),
            bad(5, &|b| {
                b.drain(n - 20..n - 8);
            }),
            bad(6, &|b| *b = text.clone()),
            bad(7, &|b| b.truncate(9)),
        ];
        // Those the decoder reads (two members) it still reads.
        assert_eq!(slow(&declined[0]).map(|t| t.len()), Some(2 * text.len()));
    }

    proptest! {
        /// The digits' short way gives the parse's value, bit for bit, and
        /// anything else is the parse: digit strings of every length around
        /// the cut (15 digits, 16, up to 20 that overflow u64), leading
        /// zeros, signs, points, exponents, spaces and empty fields. (Checked
        /// to catch a seeded bug: a cut at 20 digits, whose sums wrap.)
        #[test]
        fn parse_f64_is_the_parse(
            digits in proptest::collection::vec(proptest::sample::select(b"0123456789".to_vec()), 0..21),
            extra in proptest::collection::vec(
                proptest::sample::select(b"0123456789+-.eE x".to_vec()), 0..8),
            at in 0usize..22,
        ) {
            let plain = String::from_utf8(digits).unwrap();
            let mut mixed = plain.clone();
            mixed.insert_str(at.min(mixed.len()), std::str::from_utf8(&extra).unwrap());
            for text in [&plain, &mixed] {
                let (fast, slow) = (parse_f64(text), text.parse::<f64>());
                prop_assert_eq!(fast.clone().map(f64::to_bits), slow.clone().map(f64::to_bits), "{:?}", text);
            }
        }

        /// The lines (numbers and text) are those of the plain split. (Checked
        /// to catch a seeded bug: the tail after the last whole eight bytes
        /// not searched.)
        #[test]
        fn data_lines_are_the_split_lines(
            text in proptest::collection::vec(
                prop_oneof![Just('\n'), Just('\r'), Just(' '), Just('\t'), Just('a'), Just('é'), any::<char>()],
                0..60,
            ).prop_map(|c| c.into_iter().collect::<String>()),
        ) {
            let plain: Vec<(u64, &str)> = text
                .split('\n')
                .enumerate()
                .map(|(i, line)| (i as u64 + 1, line.strip_suffix('\r').unwrap_or(line)))
                .filter(|(_, line)| !line.trim().is_empty())
                .collect();
            prop_assert_eq!(data_lines(&text).collect::<Vec<_>>(), plain);
        }

        #[test]
        fn split_trimmed_is_split_then_trim(
            line in proptest::collection::vec(
                prop_oneof![
                    Just('\t'), Just(' '), Just('\u{a0}'), Just('\u{2003}'), Just('\r'), Just(','),
                    Just('a'), Just('Z'), Just('7'), Just('é'), Just('\u{85}'), Just('('), any::<char>(),
                ],
                0..40,
            ).prop_map(|c| c.into_iter().collect::<String>()),
            comma in any::<bool>(),
        ) {
            let delimiter = if comma { ',' } else { '\t' };
            let mut fields = Vec::new();
            split_trimmed(&line, delimiter as u8, &mut fields);
            let plain: Vec<&str> = line.split(delimiter).map(str::trim).collect();
            prop_assert_eq!(fields, plain);
        }
    }
}
