//! `cotenant sweep`: a grid of policies x option alternatives x load factors x
//! seeds, each cell one `sim` (or `serve-sim`) run, run in parallel, resumable,
//! and splittable into Slurm job-array tasks whose parts merge into the same
//! results. docs/sweep.md describes the flags, the grid file, the result
//! columns and the determinism rules.

mod grid;
mod slurm;
mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use cotenant_core::limits::{MAX_ARRIVAL_SPAN, MAX_REQUEST_SPAN};
use cotenant_core::Time;
use cotenant_serve::SchedulerKind;
use cotenant_sim::summarize;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::serve_cmd::{load_workload, sweep_run, ServeSimArgs};
use crate::sim_cmd::{build_policies, rate_model, run_one, set_threads, sim_config, RunArgs};
use crate::workload::{prepare, Prepared, WorkloadArgs};
use grid::{parse_cells, parse_seeds, parse_vary, read_grid_file, show, Cell, Grid, LoadMode, Mode};
use store::{Field, Row, Store};

/// `cotenant sweep [sim|serve] ...`: without a subcommand, a `sim` sweep.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub mode: Option<SweepMode>,
    #[command(flatten)]
    pub sim: SimSweepArgs,
}

/// What each cell runs.
#[derive(Debug, Subcommand)]
pub enum SweepMode {
    /// Cells are `cotenant sim` runs (the default): policies x --vary x --load x --seeds.
    Sim(Box<SimSweepArgs>),
    /// Cells are `cotenant serve-sim` runs: schedulers (--scheduler) x --load (arrival rate) x --seeds.
    Serve(Box<ServeSweepArgs>),
}

/// The grid's axes besides the policies (`--policy`, or `--scheduler` for serve).
#[derive(Debug, Clone, clap::Args)]
pub struct GridArgs {
    /// Load factors, comma-separated (default 1: the workload as given), e.g. 0.5,1,1.5.
    #[arg(long = "load", value_delimiter = ',', value_name = "FACTORS", allow_negative_numbers = true)]
    pub loads: Vec<f64>,
    /// How a load factor applies: `rate` (default) divides every arrival gap by it, on the
    /// same cluster; `cluster` keeps the arrivals and sizes the cluster for
    /// --target-load x factor (sim only; not with --cluster).
    #[arg(long, value_name = "rate|cluster")]
    pub load_mode: Option<String>,
    /// Seeds: a list `0,1,2` or a range `0..3` (3 excluded); default 0. Synthetic workloads
    /// are generated with the seed; a trace is replayed as is for seed 0 and with seeded
    /// jitter of its arrival gaps otherwise (docs/sweep.md); the run's seed is set too.
    #[arg(long, value_name = "LIST")]
    pub seeds: Option<String>,
    /// A policy option to vary (repeatable): `KEY=V1,V2,...` (KEY as for --set, e.g.
    /// las.quantum=300s,600s). The grid holds every combination.
    #[arg(long = "vary", value_name = "KEY=V1,V2")]
    pub vary: Vec<String>,
    /// Read the grid from a TOML file (policies, loads, load_mode, seeds, [vary]; see
    /// docs/examples/sweep-grid.toml) instead of --load, --load-mode, --seeds and --vary;
    /// its policies, if given, replace --policy/--scheduler.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["loads", "load_mode", "seeds", "vary"])]
    pub grid: Option<PathBuf>,
}

/// Where and how the cells run.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecArgs {
    /// Results directory: grid.json, cells/ (one file per finished cell), results.csv and
    /// results.json. Rerunning into it skips finished cells; a different grid is refused.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Run only cells I..J (J excluded, 0-based, grid order): what each Slurm array task does.
    /// Writes cell files only; `--merge DIR` assembles the results.
    #[arg(long, value_name = "I..J")]
    pub cells: Option<String>,
    /// Write a job script instead of running: `--emit slurm DIR` writes DIR/sweep.sbatch, an
    /// sbatch job array with one task per --chunk cells, each writing into DIR.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "DIR"], conflicts_with_all = ["out", "cells"])]
    pub emit: Option<Vec<String>>,
    /// Cells per Slurm array task (with --emit).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub chunk: usize,
    /// CPUs per Slurm array task (with --emit); each task runs that many cells at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub cpus_per_task: usize,
    /// Assemble DIR/results.csv and results.json from the cell files in DIR (after the
    /// Slurm tasks finish); refuses, naming them, if cells are missing.
    #[arg(long, value_name = "DIR", exclusive = true)]
    pub merge: Option<PathBuf>,
}

/// A sweep of `sim` runs. `--seed` is hidden: `--seeds` sets each cell's seed.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("seed", |a| a.hide(true)))]
pub struct SimSweepArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub grid: GridArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Most engine steps one run may take (as for `sim`).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u64>,
}

/// A sweep of `serve-sim` runs: the serve-sim flags, with `--scheduler` as the policy axis.
/// Hidden: `--seed` (`--seeds` sets each cell's seed) and the per-run outputs a sweep refuses.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("seed", |a| a.hide(true)))]
#[command(mut_arg("json", |a| a.hide(true)), mut_arg("bench", |a| a.hide(true)))]
#[command(mut_arg("goodput", |a| a.hide(true)), mut_arg("windows", |a| a.hide(true)))]
pub struct ServeSweepArgs {
    #[command(flatten)]
    pub serve: ServeSimArgs,
    #[command(flatten)]
    pub grid: GridArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
}

/// Runs `cotenant sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    match args.mode {
        None => run_sim(args.sim),
        Some(SweepMode::Sim(sim)) => run_sim(*sim),
        Some(SweepMode::Serve(serve)) => run_serve(*serve),
    }
}

/// The grid from the flags (or `--grid FILE`) and the policy list.
fn resolve_grid(
    mode: Mode,
    policies: Vec<String>,
    fixed_options: Vec<String>,
    args: &GridArgs,
) -> Result<Grid> {
    let mut grid = Grid {
        mode,
        policies,
        fixed_options,
        vary: args.vary.iter().map(|v| parse_vary(v)).collect::<Result<_>>()?,
        loads: if args.loads.is_empty() { vec![1.0] } else { args.loads.clone() },
        load_mode: args.load_mode.as_deref().map(LoadMode::parse).transpose()?.unwrap_or(LoadMode::Rate),
        seeds: args.seeds.as_deref().map(parse_seeds).transpose()?.unwrap_or_else(|| vec![0]),
    };
    if let Some(path) = &args.grid {
        let file = read_grid_file(path)?;
        if let Some(file_mode) = file.mode {
            if file_mode != mode {
                bail!(
                    "{}: field mode is \"{}\" but this is a {} sweep (use `cotenant sweep {}`)",
                    path.display(),
                    file_mode.name(),
                    mode.name(),
                    file_mode.name()
                );
            }
        }
        if let Some(policies) = file.policies {
            grid.policies = policies;
        }
        grid.loads = file.loads.unwrap_or(grid.loads);
        grid.load_mode = file.load_mode.unwrap_or(grid.load_mode);
        grid.seeds = file.seeds.unwrap_or(grid.seeds);
        grid.vary = file.vary;
        grid.check().with_context(|| format!("grid file {}", path.display()))?;
    } else {
        grid.check()?;
    }
    Ok(grid)
}

/// Dividing every arrival gap by `factor` (anchored at the first arrival), after
/// multiplying each by a factor drawn uniformly from [0.5, 1.5) with ChaCha8
/// seeded by `jitter` when given. Order is kept (arrivals stay sorted); the
/// offset is accumulated in f64 and rounded to the microsecond.
pub fn reshape_arrivals(arrivals: &[u64], jitter: Option<u64>, factor: f64) -> Vec<u64> {
    let Some(&first) = arrivals.first() else { return Vec::new() };
    let mut rng = jitter.map(ChaCha8Rng::seed_from_u64);
    let mut out = Vec::with_capacity(arrivals.len());
    out.push(first);
    let mut offset = 0.0_f64;
    let mut previous = first;
    for &at in &arrivals[1..] {
        let gap = at.saturating_sub(previous) as f64;
        previous = at;
        let stretch = rng.as_mut().map_or(1.0, |r| r.random_range(0.5..1.5));
        offset += gap * stretch / factor;
        out.push(first.saturating_add(offset.round() as u64));
    }
    out
}

/// The jitter seed of a trace replay: none for seed 0 (the trace as is).
fn jitter_of(synthetic: bool, seed: u64) -> Option<u64> {
    (!synthetic && seed != 0).then_some(seed)
}

// ---------------------------------------------------------------- sim cells

/// A prepared workload per (generator seed, cluster load): what `prepare` gives.
struct SimSweep {
    args: SimSweepArgs,
    grid: Grid,
    synthetic: bool,
    bases: BTreeMap<(u64, u64), Prepared>,
}

impl SimSweep {
    /// The key of a cell's base workload: its seed (synthetic only) and its load (cluster mode only).
    fn key(&self, cell: &Cell) -> (u64, u64) {
        let seed = if self.synthetic { cell.seed } else { 0 };
        let load = if self.grid.load_mode == LoadMode::Cluster { cell.load } else { 1.0 };
        (seed, load.to_bits())
    }

    fn workload_args(&self, (seed, load): (u64, u64)) -> WorkloadArgs {
        let mut args = self.args.workload.clone();
        if let Some(spec) = &args.synthetic {
            let kept: Vec<&str> = spec
                .split(',')
                .filter(|part| part.split_once('=').is_none_or(|(k, _)| k.trim() != "seed"))
                .filter(|part| !part.trim().is_empty())
                .collect();
            let mut spec = kept.join(",");
            if !spec.is_empty() {
                spec.push(',');
            }
            spec.push_str(&format!("seed={seed}"));
            args.synthetic = Some(spec);
        }
        args.target_load = self.args.workload.target_load * f64::from_bits(load);
        args
    }

    fn run_args(&self, cell: &Cell) -> RunArgs {
        let mut run = self.args.run.clone();
        run.policies = self.grid.policies.clone();
        run.options = self.grid.fixed_options.iter().chain(cell.varied.iter()).cloned().collect();
        run.seed = cell.seed;
        run
    }

    fn run_cell(&self, cell: &Cell) -> Result<Row> {
        let base = &self.bases[&self.key(cell)];
        let factor = if self.grid.load_mode == LoadMode::Rate { cell.load } else { 1.0 };
        let jitter = jitter_of(self.synthetic, cell.seed);
        let reshaped;
        let prepared = if factor != 1.0 || jitter.is_some() {
            reshaped = reshape_prepared(base, jitter, factor)?;
            &reshaped
        } else {
            base
        };
        let run = self.run_args(cell);
        let mut config = sim_config(&run)?;
        config.max_steps = self.args.max_steps;
        config.evals = prepared.evals.clone();
        config.mig = crate::mig_args::setup(&run.mig, prepared)?.map(|m| m.model);
        let mut policies = build_policies(&run, prepared)?;
        if cell.policy >= policies.len() {
            bail!("internal: policy {} of {}", cell.policy, policies.len());
        }
        let policy = policies.swap_remove(cell.policy);
        let rates = crate::faults_args::wrap_rates(&run, rate_model(&run, prepared)?, &config);
        let rates = crate::variability_args::wrap(&run, prepared, rates)?;
        let (result, _wall) = run_one(prepared, policy, rates.as_ref(), &config, &mut |_| {})?;
        Ok(sim_row(&self.grid, cell, &summarize(&result)))
    }
}

/// A copy of `base` with its arrivals reshaped (see [`reshape_arrivals`]).
fn reshape_prepared(base: &Prepared, jitter: Option<u64>, factor: f64) -> Result<Prepared> {
    let arrivals: Vec<u64> = base.workload.jobs.iter().map(|j| j.arrival.0).collect();
    let reshaped = reshape_arrivals(&arrivals, jitter, factor);
    let span = reshaped.last().copied().unwrap_or(0) - reshaped.first().copied().unwrap_or(0);
    if span > MAX_ARRIVAL_SPAN.0 {
        bail!(
            "load factor {}: the arrivals would span {:.0} days, over core::limits::MAX_ARRIVAL_SPAN ({} days)",
            show(factor),
            span as f64 / 86_400e6,
            MAX_ARRIVAL_SPAN.0 / 86_400_000_000
        );
    }
    let mut workload = base.workload.clone();
    for (job, at) in workload.jobs.iter_mut().zip(reshaped) {
        job.arrival = Time(at);
    }
    Ok(Prepared {
        workload,
        kind: base.kind,
        cluster: base.cluster.clone(),
        cluster_rule: base.cluster_rule.clone(),
        notes: base.notes.clone(),
        declared_tenants: base.declared_tenants.clone(),
        evals: base.evals.clone(),
    })
}

fn key_columns(grid: &Grid, cell: &Cell) -> Row {
    vec![
        ("cell", Field::Int(cell.index as u64)),
        ("kind", Field::Text(grid.mode.name().into())),
        ("policy", Field::Text(grid.policies[cell.policy].clone())),
        ("load", Field::Float(cell.load)),
        ("load_mode", Field::Text(grid.load_mode.name().into())),
        ("seed", Field::Int(cell.seed)),
        ("options", Field::Text(grid.options_text(cell))),
    ]
}

fn sim_row(grid: &Grid, cell: &Cell, s: &cotenant_sim::Summary) -> Row {
    let mut row = key_columns(grid, cell);
    let f = Field::float;
    row.extend([
        ("jobs", Field::Int(s.jobs as u64)),
        ("completed", Field::Int(s.completed as u64)),
        ("unfinished", Field::Int(s.unfinished as u64)),
        ("cluster_gpus", Field::Int(u64::from(s.cluster_gpus))),
        ("jct_mean_s", f(s.jct.mean)),
        ("jct_p50_s", f(s.jct.p50)),
        ("jct_p90_s", f(s.jct.p90)),
        ("jct_p99_s", f(s.jct.p99)),
        ("jct_max_s", f(s.jct.max)),
        ("queueing_mean_s", f(s.queueing.mean)),
        ("queueing_p50_s", f(s.queueing.p50)),
        ("queueing_p90_s", f(s.queueing.p90)),
        ("queueing_p99_s", f(s.queueing.p99)),
        ("makespan_s", f(s.makespan_secs)),
        ("gpu_utilization", f(s.gpu_utilization)),
        ("goodput_utilization", f(s.goodput_utilization)),
        ("idle_while_waiting", f(s.idle_while_waiting)),
        ("preemptions", Field::Int(s.preemptions)),
        ("lost_gpu_hours", f(s.lost_gpu_hours)),
        ("jain_backlogged", s.jain_backlogged.map_or(Field::Empty, f)),
        ("healthy", Field::Bool(s.health.healthy())),
        ("events", Field::Int(s.events)),
        ("scheduling_passes", Field::Int(s.scheduling_passes)),
    ]);
    row
}

fn run_sim(args: SimSweepArgs) -> Result<()> {
    if let Some(dir) = &args.exec.merge {
        return merge(dir);
    }
    if args.run.seed != 0 {
        bail!(
            "--seed {}: a sweep sets each run's seed from --seeds (e.g. --seeds {})",
            args.run.seed,
            args.run.seed
        );
    }
    let grid = resolve_grid(Mode::Sim, args.run.policies.clone(), args.run.options.clone(), &args.grid)?;
    let synthetic = args.workload.synthetic.is_some();
    if grid.load_mode == LoadMode::Cluster {
        if args.workload.cluster.is_some() {
            bail!("--load-mode cluster sizes the cluster for each load factor: drop --cluster, or use --load-mode rate");
        }
        for &load in &grid.loads {
            let target = args.workload.target_load * load;
            if !(target > 0.0 && target <= 1.5) {
                bail!(
                    "load factor {}: --load-mode cluster sizes the cluster for target load {} x {} = {}, \
                     outside the sizing rule's (0, 1.5]",
                    show(load),
                    args.workload.target_load,
                    show(load),
                    show(target)
                );
            }
        }
    }
    let mut fixed_run = args.run.clone();
    fixed_run.policies.clear();
    fixed_run.options.clear();
    let fixed = format!("{:?} {:?} max_steps={:?}", args.workload, fixed_run, args.max_steps);
    let exec = args.exec.clone();
    set_threads(exec.threads)?;
    let mut sweep = SimSweep { args, grid, synthetic, bases: BTreeMap::new() };
    // Every base workload, prepared once (in parallel; each is deterministic).
    let keys: Vec<(u64, u64)> = (0..sweep.grid.len())
        .map(|i| sweep.key(&sweep.grid.cell(i)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let prepared: Vec<Result<Prepared>> =
        keys.par_iter().map(|&key| prepare(&sweep.workload_args(key))).collect();
    for (key, prepared) in keys.iter().zip(prepared) {
        let (seed, load) = (key.0, f64::from_bits(key.1));
        let prepared = prepared.with_context(|| {
            let mut what = Vec::new();
            if sweep.synthetic {
                what.push(format!("seed {seed}"));
            }
            if sweep.grid.load_mode == LoadMode::Cluster {
                what.push(format!("load factor {}", show(load)));
            }
            if what.is_empty() {
                "preparing the workload".to_string()
            } else {
                format!("preparing the workload ({})", what.join(", "))
            }
        })?;
        sweep.bases.insert(*key, prepared);
    }
    // Every option combination builds with every policy before any cell runs.
    let per_combo = sweep.grid.loads.len() * sweep.grid.seeds.len();
    let first = sweep.bases.values().next().ok_or_else(|| anyhow!("no workload"))?;
    for combo in 0..sweep.grid.combos() {
        let cell = sweep.grid.cell(combo * per_combo);
        let run = sweep.run_args(&cell);
        build_policies(&run, first).with_context(|| describe_options(&sweep.grid, &cell))?;
        sim_config(&run)?;
        crate::faults_args::no_availability(&run, "sweep")?;
        crate::topology_args::refuse(&run, "sweep")?;
        crate::variability_args::wrap(&run, first, rate_model(&run, first)?)?;
    }
    execute(&sweep.grid, &fixed, &exec, &|cell| sweep.run_cell(cell))
}

fn describe_options(grid: &Grid, cell: &Cell) -> String {
    let options = grid.options_text(cell);
    if options.is_empty() {
        "building the policies".into()
    } else {
        format!("building the policies with options {options}")
    }
}

// ---------------------------------------------------------------- serve cells

struct ServeSweep {
    args: ServeSimArgs,
    grid: Grid,
    synthetic: bool,
    kinds: Vec<SchedulerKind>,
    /// Loaded workloads by generator seed (synthetic) or 0 (traces).
    bases: BTreeMap<u64, cotenant_serve::Workload>,
}

impl ServeSweep {
    fn run_cell(&self, cell: &Cell) -> Result<Row> {
        let base = &self.bases[&if self.synthetic { cell.seed } else { 0 }];
        let jitter = jitter_of(self.synthetic, cell.seed);
        let reshaped;
        let workload = if cell.load != 1.0 || jitter.is_some() {
            reshaped = reshape_requests(base, jitter, cell.load)?;
            &reshaped
        } else {
            base
        };
        let mut args = self.args.clone();
        args.workload.seed = cell.seed;
        let summary = sweep_run(&args, workload, self.kinds[cell.policy])?;
        Ok(serve_row(&self.grid, cell, &summary))
    }
}

fn reshape_requests(
    base: &cotenant_serve::Workload,
    jitter: Option<u64>,
    factor: f64,
) -> Result<cotenant_serve::Workload> {
    let arrivals: Vec<u64> = base.requests.iter().map(|r| r.arrival.0).collect();
    let reshaped = reshape_arrivals(&arrivals, jitter, factor);
    let span = reshaped.last().copied().unwrap_or(0) - reshaped.first().copied().unwrap_or(0);
    if span > MAX_REQUEST_SPAN.0 {
        bail!(
            "load factor {}: the requests would arrive over {:.3e} s, over core::limits::MAX_REQUEST_SPAN ({} s)",
            show(factor),
            span as f64 / 1e6,
            MAX_REQUEST_SPAN.0 / 1_000_000
        );
    }
    let mut workload = base.clone();
    for (request, at) in workload.requests.iter_mut().zip(reshaped) {
        request.arrival = Time(at);
    }
    Ok(workload)
}

fn serve_row(grid: &Grid, cell: &Cell, s: &cotenant_serve::Summary) -> Row {
    let mut row = key_columns(grid, cell);
    let ms = |v: f64| Field::float(v / 1e3);
    let f = Field::float;
    row.extend([
        ("requests", Field::Int(s.requests as u64)),
        ("completed", Field::Int(s.finished as u64)),
        ("ttft_mean_s", ms(s.ttft_ms.mean)),
        ("ttft_p50_s", ms(s.ttft_ms.p50)),
        ("ttft_p90_s", ms(s.ttft_ms.p90)),
        ("ttft_p99_s", ms(s.ttft_ms.p99)),
        ("tbt_mean_s", ms(s.tbt_ms.mean)),
        ("tbt_p50_s", ms(s.tbt_ms.p50)),
        ("tbt_p90_s", ms(s.tbt_ms.p90)),
        ("tbt_p99_s", ms(s.tbt_ms.p99)),
        ("tpot_mean_s", ms(s.tpot_ms.mean)),
        ("tpot_p50_s", ms(s.tpot_ms.p50)),
        ("tpot_p90_s", ms(s.tpot_ms.p90)),
        ("tpot_p99_s", ms(s.tpot_ms.p99)),
        ("e2e_mean_s", ms(s.e2e_ms.mean)),
        ("e2e_p50_s", ms(s.e2e_ms.p50)),
        ("e2e_p90_s", ms(s.e2e_ms.p90)),
        ("e2e_p99_s", ms(s.e2e_ms.p99)),
        ("normalized_latency_p50_s_per_token", ms(s.normalized_latency_ms.p50)),
        ("normalized_latency_p99_s_per_token", ms(s.normalized_latency_ms.p99)),
        ("slo_attainment", f(s.slo_attainment)),
        ("duration_s", f(s.duration_s)),
        ("requests_per_s", f(s.requests_per_s)),
        ("output_tokens_per_s", f(s.output_tokens_per_s)),
        ("total_tokens_per_s", f(s.total_tokens_per_s)),
        ("iterations", Field::Int(s.iterations)),
        ("preemptions", Field::Int(s.preemptions)),
        ("busy_fraction", f(s.busy_fraction)),
        ("prefix_hit_tokens", Field::Int(s.prefix_hit_tokens)),
        ("jain_index", f(s.jain_index)),
        ("max_window_service_difference", f(s.max_window_service_difference)),
        ("max_service_difference", f(s.max_service_difference)),
    ]);
    row
}

fn run_serve(args: ServeSweepArgs) -> Result<()> {
    if let Some(dir) = &args.exec.merge {
        return merge(dir);
    }
    let serve = &args.serve;
    for (set, flag) in [
        (serve.json, "--json"),
        (serve.bench, "--bench"),
        (serve.goodput.is_some(), "--goodput"),
        (serve.windows, "--windows"),
        (serve.save.is_some(), "--save"),
        (serve.report.is_some(), "--report"),
    ] {
        if set {
            bail!("{flag}: not available in a sweep (run `cotenant serve-sim` on one cell for it)");
        }
    }
    if serve.workload.seed != 1 {
        bail!(
            "--seed {}: a sweep sets each run's seed from --seeds (e.g. --seeds {})",
            serve.workload.seed,
            serve.workload.seed
        );
    }
    let names: Vec<String> = serve.scheduler.split(',').map(|s| s.trim().to_string()).collect();
    let mut grid = resolve_grid(Mode::Serve, names, Vec::new(), &args.grid)?;
    let mut kinds = Vec::new();
    let mut canonical_names = Vec::new();
    for name in &grid.policies {
        if name == "all" {
            kinds.extend(SchedulerKind::ALL);
            continue;
        }
        kinds.push(SchedulerKind::parse(name).with_context(|| {
            let known: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown scheduler `{name}` (known: {}, or all)", known.join(", "))
        })?);
    }
    for kind in &kinds {
        canonical_names.push(kind.name().to_string());
    }
    grid.policies = canonical_names;
    grid.check()?;
    if !grid.vary.is_empty() {
        bail!("--vary: serve schedulers take no --set options; vary the deployment with separate sweeps");
    }
    if grid.load_mode == LoadMode::Cluster {
        bail!("--load-mode cluster: a serve sweep scales the arrival rate (--load-mode rate); give --replicas per sweep");
    }
    let mut fixed_args = args.serve.clone();
    fixed_args.scheduler.clear();
    let fixed = format!("{fixed_args:?}");
    set_threads(args.exec.threads)?;
    let synthetic = serve.workload.trace == "synthetic";
    let seeds: Vec<u64> = if synthetic { grid.seeds.clone() } else { vec![0] };
    let loaded: Vec<Result<cotenant_serve::Workload>> = seeds
        .par_iter()
        .map(|&seed| {
            let mut workload = serve.workload.clone();
            workload.seed = seed;
            load_workload(&workload)
        })
        .collect();
    let mut bases = BTreeMap::new();
    for (seed, workload) in seeds.iter().zip(loaded) {
        bases.insert(*seed, workload.with_context(|| format!("loading the requests (seed {seed})"))?);
    }
    let sweep = ServeSweep { args: args.serve.clone(), grid, synthetic, kinds, bases };
    execute(&sweep.grid, &fixed, &args.exec, &|cell| sweep.run_cell(cell))
}

// ---------------------------------------------------------------- running

fn describe_cell(grid: &Grid, cell: &Cell) -> String {
    let options = grid.options_text(cell);
    format!(
        "cell {} ({} {}, load {} ({}), seed {}{})",
        cell.index,
        if grid.mode == Mode::Sim { "policy" } else { "scheduler" },
        grid.policies[cell.policy],
        show(cell.load),
        grid.load_mode.name(),
        cell.seed,
        if options.is_empty() { String::new() } else { format!(", options {options}") }
    )
}

/// Runs the cells (all, or `--cells`) that have no file yet, in parallel, then
/// assembles the results (unless only a range ran), or writes the Slurm script.
fn execute(
    grid: &Grid,
    fixed: &str,
    exec: &ExecArgs,
    run_cell: &(dyn Fn(&Cell) -> Result<Row> + Sync),
) -> Result<()> {
    let canonical = grid.canonical(fixed);
    let shape = format!(
        "{} cells = {} {} x {} option set(s) x {} load(s) ({}) x {} seed(s)",
        grid.len(),
        grid.policies.len(),
        if grid.mode == Mode::Sim { "policies" } else { "schedulers" },
        grid.combos(),
        grid.loads.len(),
        grid.load_mode.name(),
        grid.seeds.len()
    );
    if let Some(emit) = &exec.emit {
        println!("sweep {}: {shape}", grid.mode.name());
        return slurm::emit(grid.len(), &canonical, emit, exec);
    }
    let out = exec.out.as_ref().ok_or_else(|| {
        anyhow!("give --out DIR (where the results go), or --emit slurm DIR to write a job array")
    })?;
    let range = match &exec.cells {
        Some(text) => parse_cells(text, grid.len())?,
        None => 0..grid.len(),
    };
    let store = Store::new(out);
    store.open(&canonical)?;
    let todo: Vec<usize> = range.clone().filter(|&i| !store.has_cell(i)).collect();
    let skipped = range.len() - todo.len();
    let threads = rayon::current_num_threads();
    // Like `progress::RunProgress`: shown (on a terminal) once the sweep has taken a second.
    let bar = ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} cells, {elapsed} elapsed, ~{eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(format!("sweep {}", grid.mode.name()));
    let started = Instant::now();
    let outcomes: Vec<(usize, Result<bool>)> = todo
        .par_iter()
        .map(|&index| {
            let cell = grid.cell(index);
            let outcome = run_cell(&cell)
                .and_then(|row| {
                    let healthy = !row.iter().any(|(k, v)| *k == "healthy" && *v == Field::Bool(false));
                    store.write_cell(index, &row).map(|()| healthy)
                })
                .with_context(|| describe_cell(grid, &cell));
            if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.inc(1);
            (index, outcome)
        })
        .collect();
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    let mut failed = Vec::new();
    let mut unhealthy = 0;
    for (index, outcome) in outcomes {
        match outcome {
            Ok(true) => {}
            Ok(false) => unhealthy += 1,
            Err(error) => failed.push((index, error)),
        }
    }
    let ran = todo.len() - failed.len();
    println!("sweep {}: {shape}", grid.mode.name());
    let part = if exec.cells.is_some() {
        format!(" of cells {}..{}", range.start, range.end)
    } else {
        String::new()
    };
    println!(
        "ran {ran} cell(s){part}, skipped {skipped} already finished in {}, in {wall:.1} s on {threads} thread(s)",
        out.display()
    );
    if unhealthy > 0 {
        println!("warning: {unhealthy} cell(s) unhealthy (healthy = false in the results; see docs/reliability.md)");
    }
    if let Some((_, error)) = failed.first() {
        let others = failed.len() - 1;
        let more = if others > 0 { format!(" (and {others} more failed cell(s))") } else { String::new() };
        return Err(anyhow!("{error:#}{more}"));
    }
    if exec.cells.is_some() {
        let missing = store.missing(grid.len()).len();
        if missing == 0 {
            println!(
                "every cell is finished: `cotenant sweep --merge {}` assembles the results",
                out.display()
            );
        } else {
            println!(
                "{missing} cell(s) of the grid still to run; then `cotenant sweep --merge {}`",
                out.display()
            );
        }
        return Ok(());
    }
    let (csv, json) = store.assemble(grid.mode, grid.len())?;
    println!("results: {}, {}", csv.display(), json.display());
    Ok(())
}

/// `--merge DIR`: the results of the cell files in DIR.
fn merge(dir: &std::path::Path) -> Result<()> {
    let store = Store::new(dir);
    let grid = store.read_grid()?;
    let path = store.grid_path();
    let cells =
        grid.get("cells")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| anyhow!("{}: field cells: expected a count", path.display()))? as usize;
    let mode = match grid.get("mode").and_then(serde_json::Value::as_str) {
        Some("sim") => Mode::Sim,
        Some("serve") => Mode::Serve,
        _ => bail!("{}: field mode: expected \"sim\" or \"serve\"", path.display()),
    };
    let (csv, json) = store.assemble(mode, cells)?;
    println!("merged {cells} cells: {}, {}", csv.display(), json.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_scales_gaps_from_the_first_arrival() {
        assert_eq!(reshape_arrivals(&[100, 300, 700], None, 2.0), vec![100, 200, 400]);
        assert_eq!(reshape_arrivals(&[100, 300, 700], None, 0.5), vec![100, 500, 1300]);
        assert_eq!(reshape_arrivals(&[], None, 2.0), Vec::<u64>::new());
    }

    #[test]
    fn jitter_keeps_order_and_is_deterministic() {
        let arrivals: Vec<u64> = (0..1000).map(|i| i * 1_000_000 + (i % 3) * 7).collect();
        let a = reshape_arrivals(&arrivals, Some(5), 1.0);
        assert_eq!(a, reshape_arrivals(&arrivals, Some(5), 1.0));
        assert_ne!(a, reshape_arrivals(&arrivals, Some(6), 1.0));
        assert_ne!(a, arrivals);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(a[0], arrivals[0]);
        // every gap is stretched by a factor in [0.5, 1.5)
        for (i, w) in a.windows(2).enumerate() {
            let gap = (arrivals[i + 1] - arrivals[i]) as f64;
            let new = (w[1] - w[0]) as f64;
            assert!(new >= 0.5 * gap - 1.0 && new <= 1.5 * gap + 1.0, "gap {i}: {gap} -> {new}");
        }
    }
}
