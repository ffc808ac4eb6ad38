//! The grid of a sweep: its axes (policies, option alternatives, load factors,
//! seeds), from the command line or a TOML file, the cells in grid order, and
//! the canonical description that a results directory keeps to refuse a
//! changed grid.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// Most cells one sweep may hold.
pub const MAX_CELLS: usize = 10_000_000;
/// Largest load factor (the serve rate-scale limit, core::limits::MAX_RATE_SCALE).
pub const MAX_LOAD: f64 = cotenant_core::limits::MAX_RATE_SCALE;

/// `sim` or `serve` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sim,
    Serve,
}

impl Mode {
    /// The name results and grid files use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sim => "sim",
            Mode::Serve => "serve",
        }
    }
}

/// How a load factor changes the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadMode {
    /// Arrival gaps divided by the factor, anchored at the first arrival; same cluster.
    Rate,
    /// Arrivals as given; the cluster sized for target load x factor.
    Cluster,
}

impl LoadMode {
    /// Parses `rate` or `cluster`.
    pub fn parse(text: &str) -> Result<LoadMode> {
        match text.trim() {
            "rate" => Ok(LoadMode::Rate),
            "cluster" => Ok(LoadMode::Cluster),
            other => {
                bail!("load mode `{other}`: use rate (scale arrival rates) or cluster (size the cluster)")
            }
        }
    }

    /// The name results and grid files use.
    pub fn name(self) -> &'static str {
        match self {
            LoadMode::Rate => "rate",
            LoadMode::Cluster => "cluster",
        }
    }
}

/// The axes of a sweep. Cells are their product, in this order: policy, then
/// option alternatives (the last key varying fastest), then load, then seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub mode: Mode,
    pub policies: Vec<String>,
    /// `--set` options every cell gets, as given (`KEY=VALUE`).
    pub fixed_options: Vec<String>,
    /// Keys with their alternatives (`--vary KEY=V1,V2`).
    pub vary: Vec<(String, Vec<String>)>,
    pub loads: Vec<f64>,
    pub load_mode: LoadMode,
    pub seeds: Vec<u64>,
}

/// One run of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// 0-based index in grid order.
    pub index: usize,
    /// Index into `Grid::policies`.
    pub policy: usize,
    /// The varied options of this cell, `KEY=VALUE`, in `Grid::vary` order.
    pub varied: Vec<String>,
    pub load: f64,
    pub seed: u64,
}

impl Grid {
    /// Number of option combinations (1 without `--vary`).
    pub fn combos(&self) -> usize {
        self.vary.iter().map(|(_, values)| values.len()).product()
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.policies.len() * self.combos() * self.loads.len() * self.seeds.len()
    }

    /// The cell at `index` (< `len()`).
    pub fn cell(&self, index: usize) -> Cell {
        let seeds = self.seeds.len();
        let loads = self.loads.len();
        let combos = self.combos();
        let seed = self.seeds[index % seeds];
        let load = self.loads[(index / seeds) % loads];
        let mut combo = (index / seeds / loads) % combos;
        let policy = index / seeds / loads / combos;
        let mut varied = vec![String::new(); self.vary.len()];
        for (slot, (key, values)) in self.vary.iter().enumerate().rev() {
            varied[slot] = format!("{key}={}", values[combo % values.len()]);
            combo /= values.len();
        }
        Cell { index, policy, varied, load, seed }
    }

    /// The `options` column of a cell: fixed options then varied ones, joined with `;`.
    pub fn options_text(&self, cell: &Cell) -> String {
        self.fixed_options.iter().chain(cell.varied.iter()).cloned().collect::<Vec<_>>().join(";")
    }

    /// Checks the axes: non-empty, no duplicates, loads finite and in (0, MAX_LOAD].
    pub fn check(&self) -> Result<()> {
        if self.policies.is_empty() {
            bail!("the grid has no policies");
        }
        for (i, name) in self.policies.iter().enumerate() {
            if name.is_empty() {
                bail!("policy list: empty name at position {}", i + 1);
            }
            if self.policies[..i].contains(name) {
                bail!("policy `{name}` is listed twice");
            }
        }
        if self.loads.is_empty() {
            bail!("the grid has no load factors");
        }
        for (i, &load) in self.loads.iter().enumerate() {
            if !(load.is_finite() && load > 0.0 && load <= MAX_LOAD) {
                bail!(
                    "load factor {}: must be a finite number in (0, {MAX_LOAD}] (1 = the workload as given)",
                    show(load)
                );
            }
            if self.loads[..i].contains(&load) {
                bail!("load factor {} is listed twice", show(load));
            }
        }
        if self.seeds.is_empty() {
            bail!("the grid has no seeds");
        }
        for (i, seed) in self.seeds.iter().enumerate() {
            if self.seeds[..i].contains(seed) {
                bail!("seed {seed} is listed twice");
            }
        }
        for (i, (key, values)) in self.vary.iter().enumerate() {
            if key.is_empty() {
                bail!("--vary: empty option name");
            }
            if values.is_empty() || values.iter().any(|v| v.is_empty()) {
                bail!("--vary {key}: every alternative needs a value (KEY=V1,V2,...)");
            }
            if self.vary[..i].iter().any(|(k, _)| k == key) {
                bail!("--vary {key}: the key is varied twice");
            }
            if let Some(v) = values.iter().enumerate().find(|(j, v)| values[..*j].contains(v)) {
                bail!("--vary {key}: alternative `{}` is listed twice", v.1);
            }
            if self.fixed_options.iter().any(|o| o.split_once('=').is_some_and(|(k, _)| k.trim() == key)) {
                bail!("option {key} is both fixed (--set) and varied (--vary)");
            }
        }
        let cells = (self.policies.len() as u128)
            * (self.combos() as u128)
            * (self.loads.len() as u128)
            * (self.seeds.len() as u128);
        if cells > MAX_CELLS as u128 {
            bail!("the grid has {cells} cells; at most {MAX_CELLS} are supported");
        }
        Ok(())
    }

    /// The canonical description: everything that decides the results. `fixed`
    /// describes the flags that apply to every cell (workload, cluster, run).
    pub fn canonical(&self, fixed: &str) -> Value {
        json!({
            "kind": "cotenant-sweep-grid",
            "version": 1,
            "cotenant": env!("CARGO_PKG_VERSION"),
            "mode": self.mode.name(),
            "cells": self.len(),
            "policies": self.policies,
            "options": self.fixed_options,
            "vary": self.vary.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "loads": self.loads,
            "load_mode": self.load_mode.name(),
            "seeds": self.seeds,
            "fixed": fixed,
        })
    }
}

/// A number for messages: plain, or in scientific notation when tiny or huge
/// (`1e-300`, not three hundred zeros).
pub fn show(value: f64) -> String {
    if value != 0.0 && !(1e-4..1e9).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// `0,1,2` or a half-open range `0..3`.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>> {
    let text = text.trim();
    if let Some((from, to)) = text.split_once("..") {
        let from: u64 = from
            .trim()
            .parse()
            .map_err(|_| anyhow!("--seeds {text}: `{from}` is not a non-negative integer"))?;
        let to: u64 =
            to.trim().parse().map_err(|_| anyhow!("--seeds {text}: `{to}` is not a non-negative integer"))?;
        if to <= from {
            bail!("--seeds {text}: the range A..B (B excluded) needs B > A");
        }
        if to - from > MAX_CELLS as u64 {
            bail!("--seeds {text}: more than {MAX_CELLS} seeds");
        }
        return Ok((from..to).collect());
    }
    text.split(',')
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| anyhow!("--seeds {text}: `{s}` is not a non-negative integer"))
        })
        .collect()
}

/// `KEY=V1,V2,...`.
pub fn parse_vary(text: &str) -> Result<(String, Vec<String>)> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("--vary {text}: expected KEY=V1,V2,... (e.g. quantum=300s,600s)"))?;
    Ok((key.trim().to_string(), values.split(',').map(|v| v.trim().to_string()).collect()))
}

/// `I..J` (J excluded) within `0..cells`.
pub fn parse_cells(text: &str, cells: usize) -> Result<std::ops::Range<usize>> {
    let bad = || anyhow!("--cells {text}: expected I..J (cells I to J-1, 0-based), e.g. --cells 0..10");
    let (from, to) = text.trim().split_once("..").ok_or_else(bad)?;
    let from: usize = from.trim().parse().map_err(|_| bad())?;
    let to: usize = to.trim().parse().map_err(|_| bad())?;
    if from >= to {
        bail!("--cells {text}: empty range (J must be larger than I)");
    }
    if to > cells {
        bail!("--cells {text}: the grid has {cells} cells (0..{cells})");
    }
    Ok(from..to)
}

/// The axes a grid TOML file gives (docs/sweep.md, docs/examples/sweep-grid.toml).
#[derive(Debug, Default)]
pub struct GridFile {
    pub mode: Option<Mode>,
    pub policies: Option<Vec<String>>,
    pub loads: Option<Vec<f64>>,
    pub load_mode: Option<LoadMode>,
    pub seeds: Option<Vec<u64>>,
    pub vary: Vec<(String, Vec<String>)>,
}

/// The line of `key = ...` (or of a `[key]` or `[[key]]` header) in a TOML text
/// (1-based), for error messages; 0 if not found.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|line| {
            let line = line.trim_start();
            let header = line.trim_start_matches('[').trim_end().trim_end_matches(']');
            if line.starts_with('[') && header.trim() == key {
                return true;
            }
            let rest = line
                .strip_prefix(key)
                .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
                .or_else(|| line.strip_prefix(&format!("'{key}'")));
            rest.is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(0, |i| i + 1)
}

/// Reads a grid TOML file. Errors name the file, the line and the field.
pub fn read_grid_file(path: &Path) -> Result<GridFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading grid file {}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map_or(0, |s| text[..s.start.min(text.len())].lines().count().max(1));
        anyhow!("{} line {line}: {}", path.display(), e.message())
    })?;
    let at = |key: &str| format!("{} line {}, field {key}", path.display(), line_of(&text, key));
    let strings = |key: &str, value: &toml::Value| -> Result<Vec<String>> {
        match value {
            toml::Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    toml::Value::Integer(i) => Ok(i.to_string()),
                    toml::Value::Float(f) => Ok(f.to_string()),
                    other => Err(anyhow!("{}: expected strings, found {}", at(key), other.type_str())),
                })
                .collect(),
            toml::Value::String(s) => Ok(s.split(',').map(|p| p.trim().to_string()).collect()),
            other => bail!("{}: expected an array of strings, found {}", at(key), other.type_str()),
        }
    };
    let mut grid = GridFile::default();
    for (key, value) in &table {
        match key.as_str() {
            "mode" => {
                grid.mode = Some(match value.as_str() {
                    Some("sim") => Mode::Sim,
                    Some("serve") => Mode::Serve,
                    _ => bail!("{}: expected \"sim\" or \"serve\"", at(key)),
                })
            }
            "policies" | "schedulers" => {
                if grid.policies.is_some() {
                    bail!("{}: give policies or schedulers, not both", at(key));
                }
                grid.policies = Some(strings(key, value)?);
            }
            "loads" => {
                let items = value
                    .as_array()
                    .ok_or_else(|| anyhow!("{}: expected an array of numbers, e.g. [0.5, 1.0]", at(key)))?;
                let loads = items
                    .iter()
                    .map(|v| match v {
                        toml::Value::Float(f) => Ok(*f),
                        toml::Value::Integer(i) => Ok(*i as f64),
                        other => Err(anyhow!("{}: expected numbers, found {}", at(key), other.type_str())),
                    })
                    .collect::<Result<Vec<_>>>()?;
                grid.loads = Some(loads);
            }
            "load_mode" => {
                let text = value.as_str().ok_or_else(|| anyhow!("{}: expected \"rate\" or \"cluster\"", at(key)))?;
                grid.load_mode = Some(LoadMode::parse(text).with_context(|| at(key))?);
            }
            "seeds" => {
                grid.seeds = Some(match value {
                    toml::Value::String(s) => parse_seeds(s).with_context(|| at(key))?,
                    toml::Value::Array(items) => items
                        .iter()
                        .map(|v| match v {
                            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
                            other => Err(anyhow!("{}: expected non-negative integers, found {other}", at(key))),
                        })
                        .collect::<Result<Vec<_>>>()?,
                    other => bail!("{}: expected an array of integers or \"A..B\", found {}", at(key), other.type_str()),
                })
            }
            "vary" => {
                let vary = value
                    .as_table()
                    .ok_or_else(|| anyhow!("{}: expected a table of KEY = [alternatives]", at(key)))?;
                for (option, values) in vary {
                    let values = strings(option, values)?;
                    grid.vary.push((option.clone(), values));
                }
            }
            other => bail!(
                "{}: unknown field `{other}` (fields: mode, policies or schedulers, loads, load_mode, seeds, [vary])",
                at(other)
            ),
        }
    }
    Ok(grid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Grid {
        Grid {
            mode: Mode::Sim,
            policies: vec!["fifo".into(), "las".into()],
            fixed_options: vec![],
            vary: vec![
                ("a".into(), vec!["1".into(), "2".into()]),
                ("b".into(), vec!["x".into(), "y".into(), "z".into()]),
            ],
            loads: vec![0.5, 1.0],
            load_mode: LoadMode::Rate,
            seeds: vec![7, 8, 9],
        }
    }

    #[test]
    fn cells_enumerate_in_grid_order() {
        let g = grid();
        assert_eq!(g.len(), 2 * 6 * 2 * 3);
        let c = g.cell(0);
        assert_eq!(
            (c.policy, c.varied.clone(), c.load, c.seed),
            (0, vec!["a=1".into(), "b=x".into()], 0.5, 7)
        );
        let c = g.cell(1);
        assert_eq!((c.load, c.seed), (0.5, 8));
        let c = g.cell(3);
        assert_eq!((c.load, c.seed), (1.0, 7));
        // one combination = 6 cells; the last key varies fastest
        assert_eq!(g.cell(6).varied, vec!["a=1".to_string(), "b=y".to_string()]);
        assert_eq!(g.cell(18).varied, vec!["a=2".to_string(), "b=x".to_string()]);
        let last = g.cell(71);
        assert_eq!(
            (last.policy, last.varied.clone(), last.load, last.seed),
            (1, vec!["a=2".into(), "b=z".into()], 1.0, 9)
        );
    }

    #[test]
    fn seeds_and_cells_parse() {
        assert_eq!(parse_seeds("0..3").unwrap_or_default(), vec![0, 1, 2]);
        assert_eq!(parse_seeds("4, 2").unwrap_or_default(), vec![4, 2]);
        assert!(parse_seeds("3..3").is_err());
        assert!(parse_seeds("x").is_err());
        assert_eq!(parse_cells("2..5", 5).ok(), Some(2..5));
        assert!(parse_cells("2..6", 5).is_err());
        assert!(parse_cells("3..3", 5).is_err());
    }
}
