//! A sweep's directory: the grid description (`grid.json`), one file per
//! finished cell (`cells/cell-NNNNNN.txt`, written atomically), and the
//! assembled `results.csv` and `results.json` (the shared format of
//! docs/sweep.md). Results are always assembled from the cell files, so a local
//! run, a resumed run and a merge of Slurm parts give the same bytes.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use super::grid::Mode;

/// One value of a results row.
#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Int(u64),
    Float(f64),
    Bool(bool),
    Text(String),
    /// Not measured (e.g. Jain's index without two backlogged tenants); NaN and
    /// infinite floats also end up here.
    Empty,
}

impl Field {
    /// A float, or `Empty` when it is not finite.
    pub fn float(value: f64) -> Field {
        if value.is_finite() {
            Field::Float(value)
        } else {
            Field::Empty
        }
    }

    fn csv(&self) -> String {
        match self {
            Field::Int(v) => v.to_string(),
            Field::Float(v) => v.to_string(),
            Field::Bool(v) => v.to_string(),
            Field::Text(s) if s.contains([',', '"', '\n', '\r']) => format!("\"{}\"", s.replace('"', "\"\"")),
            Field::Text(s) => s.clone(),
            Field::Empty => String::new(),
        }
    }

    fn json(&self) -> String {
        let value = match self {
            Field::Int(v) => Value::from(*v),
            Field::Float(v) => Value::from(*v),
            Field::Bool(v) => Value::from(*v),
            Field::Text(s) => Value::from(s.as_str()),
            Field::Empty => Value::Null,
        };
        value.to_string()
    }
}

/// A results row: column names and values, key columns first.
pub type Row = Vec<(&'static str, Field)>;

/// The directory's layout.
#[derive(Debug, Clone)]
pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    pub fn new(dir: &Path) -> Store {
        Store { dir: dir.to_path_buf() }
    }

    pub fn grid_path(&self) -> PathBuf {
        self.dir.join("grid.json")
    }

    pub fn cell_path(&self, index: usize) -> PathBuf {
        self.dir.join("cells").join(format!("cell-{index:06}.txt"))
    }

    /// Creates the directory and records the grid, or checks that the grid
    /// already recorded there is this one.
    pub fn open(&self, canonical: &Value) -> Result<()> {
        fs::create_dir_all(self.dir.join("cells"))
            .with_context(|| format!("creating {}", self.dir.join("cells").display()))?;
        let path = self.grid_path();
        let wanted = serde_json::to_string_pretty(canonical)? + "\n";
        if path.exists() {
            let found = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            if found != wanted {
                let difference = first_difference(&found, canonical);
                bail!(
                    "{} holds a different sweep ({difference}); use another --out directory, or delete {} to start over",
                    self.dir.display(),
                    self.dir.display()
                );
            }
            return Ok(());
        }
        if fs::read_dir(self.dir.join("cells"))?.next().is_some() {
            bail!(
                "{} has cell files but no grid.json: not a sweep directory this binary wrote; use another --out",
                self.dir.display()
            );
        }
        write_atomic(&path, wanted.as_bytes())
    }

    /// The recorded grid description.
    pub fn read_grid(&self) -> Result<Value> {
        let path = self.grid_path();
        let text = fs::read_to_string(&path).with_context(|| {
            format!("reading {} (is {} a sweep directory?)", path.display(), self.dir.display())
        })?;
        let value: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
        if value.get("kind").and_then(Value::as_str) != Some("cotenant-sweep-grid") {
            bail!("{}: field kind: expected \"cotenant-sweep-grid\"", path.display());
        }
        Ok(value)
    }

    /// Whether cell `index` is finished (its file exists and is well formed).
    pub fn has_cell(&self, index: usize) -> bool {
        self.read_cell(index).is_ok()
    }

    /// Writes a finished cell: its CSV line and its JSON object, one line each.
    pub fn write_cell(&self, index: usize, row: &Row) -> Result<()> {
        let csv: Vec<String> = row.iter().map(|(_, f)| f.csv()).collect();
        let json: Vec<String> =
            row.iter().map(|(k, f)| format!("{}: {}", Value::from(*k), f.json())).collect();
        let text = format!("{}\n{}\n{{{}}}\n", header(row), csv.join(","), json.join(", "));
        write_atomic(&self.cell_path(index), text.as_bytes())
    }

    /// A finished cell's header, CSV line and JSON object.
    fn read_cell(&self, index: usize) -> Result<(String, String, String)> {
        let path = self.cell_path(index);
        let text = fs::read_to_string(&path)?;
        let mut lines = text.lines();
        let (Some(header), Some(csv), Some(json), None) =
            (lines.next(), lines.next(), lines.next(), lines.next())
        else {
            bail!(
                "{}: expected 3 lines (header, CSV row, JSON row); delete it to rerun the cell",
                path.display()
            );
        };
        if !csv.starts_with(&format!("{index},")) {
            bail!("{}: the row is not cell {index}; delete it to rerun the cell", path.display());
        }
        Ok((header.to_string(), csv.to_string(), json.to_string()))
    }

    /// The cells of `0..cells` without a finished file.
    pub fn missing(&self, cells: usize) -> Vec<usize> {
        (0..cells).filter(|&i| !self.has_cell(i)).collect()
    }

    /// Assembles `results.csv` and `results.json` from every cell file, or
    /// refuses naming the missing cells.
    pub fn assemble(&self, mode: Mode, cells: usize) -> Result<(PathBuf, PathBuf)> {
        let missing = self.missing(cells);
        if !missing.is_empty() {
            bail!(
                "{}: {} of {cells} cells are not finished: {} (rerun them with --cells, or the whole sweep to resume)",
                self.dir.display(),
                missing.len(),
                ranges(&missing)
            );
        }
        let mut csv = String::new();
        let mut json =
            format!("{{\"kind\": \"cotenant-sweep\", \"mode\": \"{}\", \"rows\": [\n", mode.name());
        for index in 0..cells {
            let (header, line, object) = self.read_cell(index)?;
            if index == 0 {
                csv.push_str(&header);
                csv.push('\n');
            } else if !csv.starts_with(&format!("{header}\n")) {
                bail!("{}: its columns differ from cell 0's", self.cell_path(index).display());
            }
            csv.push_str(&line);
            csv.push('\n');
            json.push_str(&object);
            json.push_str(if index + 1 < cells { ",\n" } else { "\n" });
        }
        json.push_str("]}\n");
        let (csv_path, json_path) = (self.dir.join("results.csv"), self.dir.join("results.json"));
        write_atomic(&csv_path, csv.as_bytes())?;
        write_atomic(&json_path, json.as_bytes())?;
        Ok((csv_path, json_path))
    }
}

fn header(row: &Row) -> String {
    row.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(",")
}

/// The first top-level field where a recorded grid differs from this one.
fn first_difference(found: &str, wanted: &Value) -> String {
    let Ok(found) = serde_json::from_str::<Value>(found) else { return "grid.json is not valid JSON".into() };
    if let (Some(found), Some(wanted)) = (found.as_object(), wanted.as_object()) {
        for (key, value) in wanted {
            if found.get(key) != Some(value) {
                let shown = |v: Option<&Value>| v.map_or("nothing".to_string(), Value::to_string);
                return format!(
                    "grid.json field {key}: recorded {}, now {}",
                    shown(found.get(key)),
                    shown(Some(value))
                );
            }
        }
    }
    "grid.json differs".into()
}

/// Cell indices as ranges: `3, 5..8, 12`.
pub fn ranges(cells: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cells.len() {
        let mut j = i;
        while j + 1 < cells.len() && cells[j + 1] == cells[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cells[i].to_string() } else { format!("{}..{}", cells[i], cells[j] + 1) });
        i = j + 1;
    }
    parts.join(", ")
}

/// Writes through a temporary file in the same directory, then renames: a
/// reader (or a crash) never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().ok_or_else(|| anyhow!("{}: not a file path", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_runs() {
        assert_eq!(ranges(&[3, 5, 6, 7, 12]), "3, 5..8, 12");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn fields_format_for_csv_and_json() {
        assert_eq!(Field::Text("a;b".into()).csv(), "a;b");
        assert_eq!(Field::Text("a,b".into()).csv(), "\"a,b\"");
        assert_eq!(Field::float(f64::NAN), Field::Empty);
        assert_eq!(Field::Empty.json(), "null");
        assert_eq!(Field::Float(0.5).json(), "0.5");
        assert_eq!(Field::Bool(true).csv(), "true");
    }
}
