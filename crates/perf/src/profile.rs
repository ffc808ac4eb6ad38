//! Measured operator and collective times (Vidur's profile CSVs) and the profile-driven
//! latency model that interpolates them.
//!
//! Parsing takes the files' text (the caller reads and decompresses them), so this crate
//! still does no I/O. Two formats, both Vidur's (github.com/microsoft/vidur,
//! `data/profiling`):
//! - compute (`<gpu>_<model>_mlp.csv`): one row per (num_tokens,
//!   num_tensor_parallel_workers) with `time_stats.<op>.median` in milliseconds for the
//!   linear and element-wise operators of one layer, and the model shape columns
//!   `n_head, n_kv_head, n_embd, n_expanded_embd`;
//! - network (`<gpu>_<setup>_{all_reduce,send_recv}.csv`): one row per (num_workers,
//!   devices_per_node, size in bytes) with `time_stats.<collective>.median` in milliseconds.
//!
//! [`ProfileCurves`] is Vidur's interpolation: per operator and tensor-parallel degree,
//! piecewise linear in tokens between measured points (linear extrapolation past the
//! last one), summed over a layer's operators; all-reduce piecewise linear in bytes.

use std::fmt;

/// The operators of one layer that the compute profiles time.
pub const OPERATORS: [&str; 9] = [
    "attn_pre_proj",
    "attn_post_proj",
    "mlp_up_proj",
    "mlp_down_proj",
    "input_layernorm",
    "post_attention_layernorm",
    "attn_rope",
    "mlp_act",
    "add",
];

/// Number of linear operators at the head of [`OPERATORS`]; the rest are element-wise.
pub const LINEAR_OPERATORS: usize = 4;

/// A malformed profile: file, 1-based line, field and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: field `{}`: {}", self.file, self.line, self.field, self.message)
    }
}

impl std::error::Error for ProfileError {}

/// The model shape a compute profile was measured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileShape {
    pub query_heads: u32,
    pub kv_heads: u32,
    pub hidden: u32,
    pub ffn_hidden: u32,
}

/// One measured row of a compute profile: median seconds per operator of [`OPERATORS`].
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeRow {
    pub line: usize,
    pub tokens: u32,
    pub tensor_parallel: u32,
    pub seconds: [f64; OPERATORS.len()],
}

/// A parsed compute profile (one model on one GPU).
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeProfile {
    pub file: String,
    pub shape: ProfileShape,
    pub rows: Vec<ComputeRow>,
}

/// One measured collective: median seconds for `bytes` over `workers` GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveRow {
    pub line: usize,
    pub workers: u32,
    pub devices_per_node: u32,
    pub bytes: f64,
    pub seconds: f64,
}

/// A parsed network profile (one collective on one machine type).
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveProfile {
    pub file: String,
    /// `all_reduce` or `send_recv`.
    pub collective: String,
    pub rows: Vec<CollectiveRow>,
}

struct Table<'a> {
    file: &'a str,
    header: Vec<&'a str>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

impl<'a> Table<'a> {
    fn parse(file: &'a str, text: &'a str) -> Result<Table<'a>, ProfileError> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().ok_or_else(|| err(file, 1, "(header)", "empty file"))?;
        let header: Vec<&str> = header.split(',').map(str::trim).collect();
        let mut rows = Vec::new();
        for (index, line) in lines {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            if cells.len() != header.len() {
                return Err(err(
                    file,
                    index + 1,
                    "(row)",
                    &format!("{} fields, the header has {}", cells.len(), header.len()),
                ));
            }
            rows.push((index + 1, cells));
        }
        if rows.is_empty() {
            return Err(err(file, 2, "(row)", "no data rows"));
        }
        Ok(Table { file, header, rows })
    }

    fn column(&self, name: &str) -> Result<usize, ProfileError> {
        self.header.iter().position(|h| *h == name).ok_or_else(|| err(self.file, 1, name, "missing column"))
    }

    fn number(
        &self,
        line: usize,
        cells: &[&str],
        column: usize,
        positive: bool,
    ) -> Result<f64, ProfileError> {
        let name = self.header[column];
        let value: f64 = cells[column]
            .parse()
            .map_err(|_| err(self.file, line, name, &format!("`{}` is not a number", cells[column])))?;
        if !value.is_finite() || value < 0.0 || (positive && value == 0.0) {
            return Err(err(
                self.file,
                line,
                name,
                &format!("`{}` must be a finite number > 0", cells[column]),
            ));
        }
        Ok(value)
    }

    fn integer(&self, line: usize, cells: &[&str], column: usize) -> Result<u32, ProfileError> {
        let name = self.header[column];
        cells[column].parse::<u32>().ok().filter(|v| *v > 0).ok_or_else(|| {
            err(self.file, line, name, &format!("`{}` is not a positive integer", cells[column]))
        })
    }
}

fn err(file: &str, line: usize, field: &str, message: &str) -> ProfileError {
    ProfileError { file: file.into(), line, field: field.into(), message: message.into() }
}

/// Parses a compute profile's CSV text; `file` names it in errors.
pub fn parse_compute_profile(file: &str, text: &str) -> Result<ComputeProfile, ProfileError> {
    let table = Table::parse(file, text)?;
    let op_columns: Vec<usize> = OPERATORS
        .iter()
        .map(|op| table.column(&format!("time_stats.{op}.median")))
        .collect::<Result<_, _>>()?;
    let shape_columns: Vec<usize> = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd"]
        .iter()
        .map(|c| table.column(c))
        .collect::<Result<_, _>>()?;
    let (tokens_column, tp_column) =
        (table.column("num_tokens")?, table.column("num_tensor_parallel_workers")?);
    let mut shape = None;
    let mut rows = Vec::with_capacity(table.rows.len());
    for (line, cells) in &table.rows {
        let dims: Vec<u32> =
            shape_columns.iter().map(|&c| table.integer(*line, cells, c)).collect::<Result<_, _>>()?;
        let this =
            ProfileShape { query_heads: dims[0], kv_heads: dims[1], hidden: dims[2], ffn_hidden: dims[3] };
        match shape {
            None => shape = Some(this),
            Some(first) if first != this => {
                return Err(err(file, *line, "n_embd", "model shape differs from the first row's"));
            }
            Some(_) => {}
        }
        let mut seconds = [0.0; OPERATORS.len()];
        for (slot, &column) in seconds.iter_mut().zip(&op_columns) {
            *slot = table.number(*line, cells, column, true)? / 1e3;
        }
        rows.push(ComputeRow {
            line: *line,
            tokens: table.integer(*line, cells, tokens_column)?,
            tensor_parallel: table.integer(*line, cells, tp_column)?,
            seconds,
        });
    }
    let shape = shape.ok_or_else(|| err(file, 2, "(row)", "no data rows"))?;
    Ok(ComputeProfile { file: file.into(), shape, rows })
}

/// Parses a network profile's CSV text; `file` names it in errors.
pub fn parse_collective_profile(file: &str, text: &str) -> Result<CollectiveProfile, ProfileError> {
    let table = Table::parse(file, text)?;
    let collective_column = table.column("collective")?;
    let collective = table.rows[0].1[collective_column].to_string();
    if collective != "all_reduce" && collective != "send_recv" {
        return Err(err(file, table.rows[0].0, "collective", "expected all_reduce or send_recv"));
    }
    let time_column = table.column(&format!("time_stats.{collective}.median"))?;
    let (workers, per_node, size) =
        (table.column("num_workers")?, table.column("devices_per_node")?, table.column("size")?);
    let mut rows = Vec::with_capacity(table.rows.len());
    for (line, cells) in &table.rows {
        if cells[collective_column] != collective {
            return Err(err(
                file,
                *line,
                "collective",
                &format!("differs from the first row's `{collective}`"),
            ));
        }
        rows.push(CollectiveRow {
            line: *line,
            workers: table.integer(*line, cells, workers)?,
            devices_per_node: table.integer(*line, cells, per_node)?,
            bytes: table.number(*line, cells, size, true)?,
            seconds: table.number(*line, cells, time_column, true)? / 1e3,
        });
    }
    Ok(CollectiveProfile { file: file.into(), collective, rows })
}

/// A piecewise-linear curve through measured (x, seconds) points, averaging repeated x.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    points: Vec<(f64, f64)>,
}

impl Curve {
    /// Builds the curve; `None` when there are no points.
    pub fn new(mut points: Vec<(f64, f64)>) -> Option<Curve> {
        if points.is_empty() {
            return None;
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, f64, u32)> = Vec::new();
        for (x, y) in points {
            match merged.last_mut() {
                Some(last) if last.0 == x => {
                    last.1 += y;
                    last.2 += 1;
                }
                _ => merged.push((x, y, 1)),
            }
        }
        Some(Curve { points: merged.into_iter().map(|(x, y, n)| (x, y / n as f64)).collect() })
    }

    /// The interpolated value at `x`: the first point's value below it, linear between
    /// points, and linear extrapolation from the last two points above (never below 0).
    pub fn at(&self, x: f64) -> f64 {
        let p = &self.points;
        if p.len() == 1 || x <= p[0].0 {
            return p[0].1;
        }
        let i = p.partition_point(|pt| pt.0 < x).clamp(1, p.len() - 1);
        let ((x0, y0), (x1, y1)) = (p[i - 1], p[i]);
        (y0 + (y1 - y0) * (x - x0) / (x1 - x0)).max(0.0)
    }
}

/// The profile-driven latency terms of one deployment: one layer's linear and
/// element-wise operators by tokens, and one all-reduce by bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileCurves {
    /// Which files and degree these came from.
    pub source: String,
    layer: Curve,
    allreduce: Option<Curve>,
}

impl ProfileCurves {
    /// Seconds of one layer's operators (linear and element-wise, no attention) for `tokens`.
    pub fn layer_s(&self, tokens: f64) -> f64 {
        self.layer.at(tokens)
    }

    /// Seconds of one all-reduce of `bytes` (0 when the deployment has no all-reduce).
    pub fn allreduce_s(&self, bytes: f64) -> f64 {
        self.allreduce.as_ref().map_or(0.0, |c| c.at(bytes))
    }
}

/// Builds the curves for tensor-parallel degree `tp` from a compute profile and, for
/// `tp > 1`, an all-reduce profile with `tp` workers on one node. The error names what
/// the profiles cover when they do not cover `tp`.
pub fn curves_for(
    compute: &ComputeProfile,
    allreduce: Option<&CollectiveProfile>,
    tp: u32,
) -> Result<ProfileCurves, String> {
    let points: Vec<(f64, f64)> = compute
        .rows
        .iter()
        .filter(|r| r.tensor_parallel == tp)
        .map(|r| (r.tokens as f64, r.seconds.iter().sum()))
        .collect();
    let layer = Curve::new(points).ok_or_else(|| {
        let mut degrees: Vec<u32> = compute.rows.iter().map(|r| r.tensor_parallel).collect();
        degrees.sort_unstable();
        degrees.dedup();
        format!("{} has no rows for tensor-parallel degree {tp} (it covers {degrees:?})", compute.file)
    })?;
    let mut source = format!("{} (TP {tp})", compute.file);
    let allreduce = if tp > 1 {
        let profile = allreduce.ok_or_else(|| format!("TP {tp} needs an all_reduce network profile"))?;
        let points: Vec<(f64, f64)> = profile
            .rows
            .iter()
            .filter(|r| r.workers == tp && r.devices_per_node == tp)
            .map(|r| (r.bytes, r.seconds))
            .collect();
        let curve = Curve::new(points).ok_or_else(|| {
            let mut degrees: Vec<u32> =
                profile.rows.iter().filter(|r| r.workers == r.devices_per_node).map(|r| r.workers).collect();
            degrees.sort_unstable();
            degrees.dedup();
            format!("{} has no single-node rows for {tp} workers (it covers {degrees:?})", profile.file)
        })?;
        source.push_str(&format!(", {}", profile.file));
        Some(curve)
    } else {
        None
    };
    Ok(ProfileCurves { source, layer, allreduce })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> String {
        let mut cols: Vec<String> = OPERATORS.iter().map(|op| format!("time_stats.{op}.median")).collect();
        cols.extend(
            ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "num_tokens", "num_tensor_parallel_workers"]
                .map(String::from),
        );
        cols.join(",")
    }

    /// Two token counts at TP 1; every operator takes 0.1 ms at 1 token and 0.3 ms at 101,
    /// so a layer (9 operators) is 0.9 ms and 2.7 ms; at 51 tokens 1.8 ms by hand, at
    /// 201 (extrapolated) 4.5 ms.
    #[test]
    fn tiny_profile_interpolates() {
        let text = format!(
            "{}\n{}32,8,4096,14336,1,1\n{}32,8,4096,14336,101,1\n",
            header(),
            "0.1,".repeat(9),
            "0.3,".repeat(9)
        );
        let profile = parse_compute_profile("tiny.csv", &text).expect("parses");
        assert_eq!(
            profile.shape,
            ProfileShape { query_heads: 32, kv_heads: 8, hidden: 4096, ffn_hidden: 14336 }
        );
        let curves = curves_for(&profile, None, 1).expect("covers TP 1");
        assert!((curves.layer_s(51.0) - 1.8e-3).abs() < 1e-12);
        assert!((curves.layer_s(1.0) - 0.9e-3).abs() < 1e-12);
        assert!((curves.layer_s(201.0) - 4.5e-3).abs() < 1e-12);
        assert_eq!(curves.allreduce_s(1e6), 0.0);
        let missing = curves_for(&profile, None, 2).expect_err("no TP 2");
        assert!(missing.contains("tiny.csv") && missing.contains("[1]"), "{missing}");
    }

    #[test]
    fn malformed_profiles_name_file_line_and_field() {
        let bad_number = format!(
            "{}\n{}32,8,4096,14336,1,1\n{}x,8,4096,14336,2,1\n",
            header(),
            "0.1,".repeat(9),
            "0.1,".repeat(9)
        );
        let e = parse_compute_profile("a.csv", &bad_number).expect_err("bad n_head");
        assert_eq!((e.line, e.field.as_str()), (3, "n_head"), "{e}");
        let negative = format!("{}\n-0.1,{}32,8,4096,14336,1,1\n", header(), "0.1,".repeat(8));
        let e = parse_compute_profile("a.csv", &negative).expect_err("negative time");
        assert_eq!((e.line, e.field.as_str()), (2, "time_stats.attn_pre_proj.median"), "{e}");
        let short = format!("{}\n0.1,0.2\n", header());
        assert_eq!(parse_compute_profile("a.csv", &short).expect_err("short row").line, 2);
        let e = parse_compute_profile("a.csv", "num_tokens\n1\n").expect_err("missing column");
        assert_eq!((e.line, e.field.as_str()), (1, "time_stats.attn_pre_proj.median"));
        assert!(e.to_string().starts_with("a.csv:1: field `time_stats.attn_pre_proj.median`"), "{e}");
        let net = ",time_stats.all_reduce.median,num_workers,devices_per_node,size,collective\n0,0.03,2,2,2048,all_reduce\n1,0.04,2,2,0,all_reduce\n";
        let e = parse_collective_profile("n.csv", net).expect_err("zero size");
        assert_eq!((e.line, e.field.as_str()), (3, "size"));
        assert!(parse_compute_profile("e.csv", "").is_err());
    }

    #[test]
    fn allreduce_curve_by_bytes() {
        let net = ",time_stats.all_reduce.median,num_workers,devices_per_node,size,collective\n\
                   0,0.030,2,2,1000,all_reduce\n1,0.050,2,2,3000,all_reduce\n2,0.500,2,1,1000,all_reduce\n";
        let profile = parse_collective_profile("n.csv", net).expect("parses");
        let text = format!("{}\n{}32,8,4096,14336,1,2\n", header(), "0.1,".repeat(9));
        let compute = parse_compute_profile("c.csv", &text).expect("parses");
        let curves = curves_for(&compute, Some(&profile), 2).expect("TP 2");
        // Midway between 30 us and 50 us; the two-node row (devices_per_node 1) is ignored.
        assert!((curves.allreduce_s(2000.0) - 40e-6).abs() < 1e-12);
        assert!(curves_for(&compute, Some(&profile), 4).is_err());
    }
}
