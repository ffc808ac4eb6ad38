//! The one error type of this crate. Every message says which input failed:
//! the file, the 1-based line and the field (or the config key).

use std::path::Path;

/// Reading or parsing a trace, a cluster config or a generator spec failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file cannot be read (missing, unreadable, broken gzip). The I/O error's
    /// text is part of this message, so it is not also chained as a `source`
    /// (which would print it twice under anyhow's `{:#}`).
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    /// One field of one row is malformed.
    #[error("{file} line {line}, field {field}: {message}")]
    Field { file: String, line: u64, field: String, message: String },
    /// A row as a whole is malformed (wrong number of fields).
    #[error("{file} line {line}: {message}")]
    Row { file: String, line: u64, message: String },
    /// The header lacks a column the format needs.
    #[error("{file} line {line}: missing column `{column}` (header has: {header})")]
    MissingColumn { file: String, line: u64, column: String, header: String },
    /// The file as a whole cannot be used (empty, wrong shape, not UTF-8).
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("unknown trace kind `{given}`; known kinds: {known}")]
    UnknownKind { given: String, known: String },
    /// A key of an inline spec or a TOML file is unknown or has a bad value.
    #[error("{context}, key `{key}`: {message}")]
    Config { context: String, key: String, message: String },
    /// A TOML file that does not parse or has the wrong shape; the message names
    /// the file and line and, for an unknown key, suggests the closest known one.
    #[error("{0}")]
    Toml(String),
    /// A slice (time window or job count) that does not fit the trace.
    #[error("slice: {message}")]
    Slice { message: String },
}

impl TraceError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> TraceError {
        TraceError::Io { file: path.display().to_string(), error: source }
    }

    pub(crate) fn file(file: &str, message: impl Into<String>) -> TraceError {
        TraceError::File { file: file.to_string(), message: message.into() }
    }

    pub(crate) fn config(context: &str, key: &str, message: impl Into<String>) -> TraceError {
        TraceError::Config { context: context.to_string(), key: key.to_string(), message: message.into() }
    }
}
