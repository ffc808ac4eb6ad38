//! `cotenant sim`: run one workload under several policies and compare them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use cotenant_core::limits;
use cotenant_core::placement::Placement;
use cotenant_core::{Policy, Span};
use cotenant_policies::{PolicyError, PolicyParams};
use cotenant_report::{
    comparison_table, health_block, summaries_json, tenant_table, write_jobs_csv, COMPARISON_LEGEND,
};
use cotenant_sim::{simulate_shared, summarize, Overheads, RateModel, ReferenceRate, SimConfig, SimResult};
use rayon::prelude::*;
use serde_json::json;

use crate::progress::RunProgress;
use crate::workload::{prepare, Prepared, WorkloadArgs};

pub const DEFAULT_POLICIES: &str = "fifo,sjf,srtf,las,tiresias";

/// Flags shared by `sim` and `bench` that shape each run.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Policies to compare, comma-separated (`cotenant policies` lists them).
    #[arg(long = "policy", value_delimiter = ',', default_value = DEFAULT_POLICIES, value_name = "NAMES")]
    pub policies: Vec<String>,
    /// Where jobs go: consolidated (fewest nodes), strict-consolidated (wait rather than span
    /// more nodes than needed), spread (one GPU per node in turn), with a topology
    /// (docs/topology.md) arnold (fewest leaves per parallel group), vclos, torus, or
    /// variability-aware (fast, speed-matched GPUs first; needs --variability,
    /// docs/variability.md).
    #[arg(long, default_value = "consolidated", value_name = "STAGE")]
    pub placement: String,
    /// Round or quantum length for round-based policies (LAS quantum default 300s), e.g. 360s, 5m.
    #[arg(long, value_name = "DURATION")]
    pub round: Option<String>,
    /// A policy option (repeatable): `KEY=VALUE` for every policy in the run that takes KEY,
    /// or `POLICY.KEY=VALUE` for one, e.g. `--set tiresias.thresholds=1h:10h --set quantum=600s`.
    /// An option that no policy in the run takes is an error naming what they take.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Preempted jobs keep the work of their last checkpoint, taken this often. 0 (the
    /// default) is suspend-resume: a job checkpoints when told to stop and loses nothing.
    #[arg(long, default_value = "0", value_name = "DURATION")]
    pub checkpoint_interval: String,
    /// Time a resumed job spends restoring before it makes progress again.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub restore_overhead: String,
    /// Window over which tenant shares and Jain's index are measured.
    #[arg(long, default_value = "1h", value_name = "DURATION")]
    pub share_window: String,
    /// How elastic jobs change size (EDL): `stop-free` (background scale-out, graceful
    /// scale-in) or `stop-resume` (checkpoint and restart at every change).
    #[arg(long, default_value = "stop-free", value_name = "MODE")]
    pub scaling: String,
    /// Elastic jobs' scaling curve and resize costs, `KEY=VALUE,...`: efficiency (kept per
    /// GPU doubling, 0.9), prepare (20s), switch (0.5s), model-gib (0.5), bandwidth
    /// (GiB/s, 1.25), scale-in (0s), stop-resume (45s). docs/simulation.md explains each.
    #[arg(long, default_value = "", value_name = "KEY=VALUE,...")]
    pub elastic_model: String,
    /// Seed of the run's random stream (policies that draw randomness use it).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Throughput table (Gavel's simulation_throughputs.json, plain or .gz): jobs then run at
    /// their job type's steps/s on each GPU type, and heterogeneity-aware policies read it.
    #[arg(long, value_name = "PATH")]
    pub throughputs: Option<PathBuf>,
    /// Tenant config (TOML, docs/tenants.md): the account tree for fair-share and the quota
    /// queues (nominal GPUs per type, cohort, borrowing limit) for kueue.
    #[arg(long, value_name = "PATH")]
    pub tenant_config: Option<PathBuf>,
    /// GPU-sharing interference table (docs/policies.md, sjf-bsbf): jobs sharing GPUs run
    /// xi times slower, and the sharing policies (sjf-bsbf, sjf-ffs) read it.
    #[arg(long, value_name = "PATH", conflicts_with = "throughputs")]
    pub interference: Option<PathBuf>,
    #[command(flatten)]
    pub mig: crate::mig_args::MigArgs,
    /// Synergy's throughput matrices (`bundled`: the reconstructed ones in
    /// crates/perf/data/synergy_matrices.txt, or a file in that format): jobs then run at
    /// the rate of their CPUs and memory per GPU; job types name classes (image, language,
    /// speech) or models (res18, gnmt, deepspeech, ...). The synergy-* policies read it.
    #[arg(long, value_name = "bundled|PATH")]
    pub synergy_matrices: Option<String>,
    /// Node failures (docs/faults.md): `mtbf=DURATION,repair=DURATION[,seed=S]`, exponential
    /// up-times with mean mtbf per node; a failed job keeps its last checkpoint.
    #[arg(long, value_name = "mtbf=..,repair=..")]
    pub failures: Option<String>,
    /// Spot nodes (docs/faults.md): `fraction=F|nodes=N,reclaim=DURATION,notice=DURATION` and
    /// optionally away=30m, save=30s, price ($/GPU-h, on-demand / 5), on-demand=3.06, seed=S.
    #[arg(long, value_name = "fraction=..,reclaim=..,notice=..")]
    pub spot: Option<String>,
    /// Availability windows (docs/faults.md): a file of `NODE LEAVES [RETURNS]` lines; the
    /// departures are known to policies (varuna(BASE) moves services ahead of them).
    #[arg(long, value_name = "PATH")]
    pub availability: Option<PathBuf>,
    /// The cluster's network (docs/topology.md): a TOML file with a [topology] table, or
    /// inline `leaf=32,spines=8,oversubscription=2,nic-gbps=400[,torus=XxYxZ][,...]`. Multi-node
    /// jobs then run at the rate their placement's links give them (sim and bench; sweep refuses it).
    #[arg(long, value_name = "FILE|KEY=VALUE,...")]
    pub topology: Option<String>,
    /// How flows between leaves choose spines: ecmp (hashed; flows on one uplink share it)
    /// or vclos (isolated reserved uplinks; needs --placement vclos).
    #[arg(long, value_name = "ecmp|vclos")]
    pub routing: Option<String>,
    /// Gives jobs of min-gpus+ GPUs a communication fraction and layout for the topology
    /// model: `fraction=0.3[,tensor=8][,pipeline=4][,min-gpus=2]`.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub comm_profile: Option<String>,
    /// Persistent per-GPU speed factors (docs/variability.md): `default` (sigma 0.08, 1% of
    /// GPUs 1.5x slower), `stress` (22% spread), `sigma=F[,tail=F][,slow=X][,seed=N]`, or
    /// `file=PATH` (measured, one factor per GPU per line). Gangs run at their slowest GPU.
    #[arg(long, value_name = "SPEC")]
    pub variability: Option<String>,
    /// What tensor-parallel groups do about a slow GPU (with --variability): none, shrink
    /// (resize shards to speed), migrate (move part of the straggler's shard) or auto (by
    /// cost); then optionally every-gang, max-shrink=F, overhead=F, migrate-cost=SECONDS.
    #[arg(long, value_name = "MODE[,KEY=VALUE...]")]
    pub stragglers: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print the summary as JSON on stdout (instead of tables).
    #[arg(long)]
    pub json: bool,
    /// Write one CSV row per job and policy to this file.
    #[arg(long, value_name = "PATH")]
    pub jobs_csv: Option<PathBuf>,
    /// Save the results for `cotenant report` (JSON, kind cotenant-sim-results: the
    /// workload, and per policy the summary, per-job times and per-window series).
    #[arg(long, value_name = "PATH")]
    pub save: Option<PathBuf>,
    /// Write an HTML report of this run (figures and tables, self-contained; what
    /// `cotenant report` makes from --save's file).
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Explain one job: print, under each policy, when it waited and why, ran, was
    /// preempted and finished. JOB is its id (the `job` column of --jobs-csv).
    #[arg(long, value_name = "JOB")]
    pub explain: Option<u32>,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Most engine steps one run may take (default: 1,000 per job + 1M). A run that
    /// reaches it stops, its remaining jobs end unfinished, and it warns: a policy that
    /// livelocks (preempting jobs before they keep progress) cannot run forever.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u64>,
    /// Exit non-zero (status 2, after printing the results) if any run is unhealthy: it
    /// stopped at a limit (a livelock), left jobs unfinished, or a metric fell outside
    /// its range. The JSON field `healthy` says the same.
    #[arg(long)]
    pub strict: bool,
}

/// `--threads N`: at least 1, at most `core::limits::MAX_THREADS`.
pub fn set_threads(threads: Option<usize>) -> Result<()> {
    let Some(threads) = threads else { return Ok(()) };
    if !(1..=limits::MAX_THREADS).contains(&threads) {
        bail!(
            "--threads {threads}: must be between 1 and {} (core::limits::MAX_THREADS)",
            limits::MAX_THREADS
        );
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads);
    // One thread: this one (parallel iterators then run here, as a plain
    // loop would), rather than a pool thread that it hands the work to and
    // waits for.
    let pool = if threads == 1 { pool.use_current_thread() } else { pool };
    pool.build_global().ok();
    Ok(())
}

/// A run whose results are printed but must not be trusted: `--strict` exits with this.
#[derive(Debug)]
pub struct Unhealthy(pub usize);

impl std::fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--strict: {} run(s) unhealthy (see the warnings above)", self.0)
    }
}

impl std::error::Error for Unhealthy {}

pub fn run(args: SimArgs) -> Result<()> {
    set_threads(args.threads)?;
    let mut config = sim_config(&args.run)?;
    let mut prepared = prepare(&args.workload)?;
    crate::faults_args::setup(&args.run, &mut prepared, &mut config)?;
    crate::topology_args::apply(&args.run, &mut prepared)?;
    crate::variability_args::apply(&args.run, &mut prepared)?;
    let policies = build_policies(&args.run, &prepared)?;
    if let Some(job) = args.explain {
        if job as usize >= prepared.workload.jobs.len() {
            bail!("--explain {job}: the workload has jobs 0..{}", prepared.workload.jobs.len());
        }
        config.watch = Some(cotenant_core::JobId(job));
    }
    config.max_steps = args.max_steps;
    config.evals = prepared.evals.clone();
    let rates = crate::faults_args::wrap_rates(&args.run, rate_model(&args.run, &prepared)?, &config);
    let rates = crate::topology_args::wrap(&prepared, rates);
    let rates = crate::variability_args::wrap(&args.run, &prepared, rates)?;
    config.mig = crate::mig_args::setup(&args.run.mig, &prepared)?.map(|m| m.model);
    let progress = RunProgress::new(policies.len(), prepared.workload.jobs.len(), "simulating");
    let jobs = share_jobs(&mut prepared);
    let run = |(i, policy): (usize, Box<dyn Policy>)| {
        run_one_shared(&prepared, &jobs, policy, rates.as_ref(), &config, &mut |done| {
            progress.update(i, done)
        })
    };
    // One policy runs on this thread: without --threads 1 (which makes this
    // thread the pool's one worker, `set_threads`) the pool would start its
    // threads only to hand this one run to one of them (the same results).
    let outcomes: Vec<Result<(SimResult, f64)>> = if policies.len() == 1 {
        policies.into_iter().enumerate().map(run).collect()
    } else {
        policies.into_par_iter().enumerate().map(run).collect()
    };
    unshare_jobs(&mut prepared, jobs);
    progress.finish();
    let mut results = Vec::new();
    let mut walls = Vec::new();
    for outcome in outcomes {
        let (result, wall) = outcome?;
        results.push(result);
        walls.push(wall);
    }
    let summaries: Vec<_> = results.iter().map(summarize).collect();
    let evalstop: Vec<_> = match &prepared.evals {
        Some(curves) => {
            results.iter().map(|r| cotenant_sim::evalstop::metrics::evalstop_summary(r, curves)).collect()
        }
        None => Vec::new(),
    };
    if let Some(path) = &args.jobs_csv {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let refs: Vec<&SimResult> = results.iter().collect();
        write_jobs_csv(&refs, BufWriter::new(file)).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.save.is_some() || args.report.is_some() {
        let saved = cotenant_report::sim_results(workload_json(&prepared), &results)?;
        if let Some(path) = &args.save {
            crate::report_cmd::write_saved(path, &saved)?;
        }
        if let Some(path) = &args.report {
            crate::report_cmd::write_sim_report(path, &saved)?;
        }
    }
    let unhealthy = summaries.iter().filter(|s| !s.health.healthy()).count();
    // Written in one piece at the end (a locked stdout writes each line as
    // it ends: about 80 calls for one run's JSON).
    let mut out = BufWriter::new(std::io::stdout().lock());
    if args.json {
        let mut value = summaries_json(workload_json(&prepared), &summaries);
        if !evalstop.is_empty() {
            value["evalstop"] = cotenant_report::evalstop::evalstop_json(&evalstop);
        }
        if let Some(faults) = crate::faults_args::json(&results) {
            value["faults"] = faults;
        }
        if let Some(spread) = crate::topology_args::spread_json(&results) {
            value["topology"] = spread;
        }
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
        out.flush()?;
        if unhealthy > 0 {
            eprint!("{}", health_block(&summaries));
        }
        return strict_verdict(args.strict, unhealthy);
    }
    writeln!(out, "{}", describe(&prepared))?;
    writeln!(out, "\n{}", comparison_table(&summaries, Some(&walls)).render())?;
    writeln!(out, "{COMPARISON_LEGEND}\n")?;
    if !evalstop.is_empty() {
        writeln!(out, "EvalStop (stops against the curves' ground truth):")?;
        writeln!(out, "{}", cotenant_report::evalstop::evalstop_table(&evalstop).render())?;
        writeln!(out, "{}\n", cotenant_report::evalstop::EVALSTOP_LEGEND)?;
    }
    if let Some(faults) = crate::faults_args::table(&results) {
        writeln!(out, "{faults}\n")?;
    }
    let health = health_block(&summaries);
    if !health.is_empty() {
        writeln!(out, "{health}")?;
    }
    writeln!(out, "Mean JCT by tenant (share = GPU-time share under {}):", summaries[0].policy)?;
    writeln!(out, "{}", tenant_table(&summaries).render())?;
    if let Some(job) = args.explain {
        writeln!(out, "{}", explain(&prepared, job, &results))?;
    }
    for note in &prepared.notes {
        writeln!(out, "note: {note}")?;
    }
    for line in crate::topology_args::spread_lines(&results) {
        writeln!(out, "{line}")?;
    }
    if let Some(path) = &args.jobs_csv {
        writeln!(out, "per-job records: {}", path.display())?;
    }
    if let Some(path) = &args.save {
        writeln!(out, "saved results: {}", path.display())?;
    }
    if let Some(path) = &args.report {
        writeln!(out, "report: {}", path.display())?;
    }
    out.flush()?;
    if unhealthy > 0 {
        eprintln!("warning: {unhealthy} run(s) unhealthy; see the WARNING lines after the table");
    }
    strict_verdict(args.strict, unhealthy)
}

fn strict_verdict(strict: bool, unhealthy: usize) -> Result<()> {
    if strict && unhealthy > 0 {
        return Err(Unhealthy(unhealthy).into());
    }
    Ok(())
}

pub fn run_one(
    prepared: &Prepared,
    policy: Box<dyn Policy>,
    rates: &dyn RateModel,
    config: &SimConfig,
    progress: &mut dyn FnMut(usize),
) -> Result<(SimResult, f64)> {
    let jobs = std::sync::Arc::new(prepared.workload.jobs.clone());
    run_one_shared(prepared, &jobs, policy, rates, config, progress)
}

/// The workload's jobs moved out of `prepared` into a vector the runs share: each
/// run's engine then refers to these specs instead of copying each. Give them back
/// with [`unshare_jobs`] before reading `prepared.workload.jobs` again.
pub fn share_jobs(prepared: &mut Prepared) -> std::sync::Arc<Vec<cotenant_core::JobSpec>> {
    std::sync::Arc::new(std::mem::take(&mut prepared.workload.jobs))
}

/// Puts the jobs [`share_jobs`] took back (without a copy once the runs are over).
pub fn unshare_jobs(prepared: &mut Prepared, jobs: std::sync::Arc<Vec<cotenant_core::JobSpec>>) {
    prepared.workload.jobs = std::sync::Arc::try_unwrap(jobs).unwrap_or_else(|jobs| jobs.to_vec());
}

/// [`run_one`] on the workload's jobs as [`share_jobs`] shared them.
pub fn run_one_shared(
    prepared: &Prepared,
    jobs: &std::sync::Arc<Vec<cotenant_core::JobSpec>>,
    policy: Box<dyn Policy>,
    rates: &dyn RateModel,
    config: &SimConfig,
    progress: &mut dyn FnMut(usize),
) -> Result<(SimResult, f64)> {
    let name = policy.name();
    let started = Instant::now();
    let result = simulate_shared(
        jobs,
        &prepared.workload.tenants,
        prepared.cluster.clone(),
        policy,
        rates,
        config,
        &mut |p| progress(p.jobs_done),
    )
    .map_err(|e| anyhow!("policy {name}: {e}"))?;
    Ok((result, started.elapsed().as_secs_f64()))
}

pub fn build_policies(run: &RunArgs, prepared: &Prepared) -> Result<Vec<Box<dyn Policy>>> {
    let placement = match run.placement.as_str() {
        "consolidated" => Placement::Consolidated,
        "strict-consolidated" => Placement::StrictConsolidated,
        "spread" => Placement::Spread,
        "arnold" => Placement::Arnold,
        "vclos" => Placement::Vclos,
        "torus" => Placement::Torus,
        "variability-aware" => Placement::VariabilityAware,
        other => bail!(
            "unknown placement '{other}'; use consolidated, strict-consolidated, spread, arnold, vclos, torus or variability-aware"
        ),
    };
    let mut options = BTreeMap::new();
    for option in &run.options {
        let (key, value) =
            option.split_once('=').ok_or_else(|| anyhow!("--set {option}: expected KEY=VALUE"))?;
        options.insert(key.trim().to_string(), value.trim().to_string());
    }
    let round = run.round.as_deref().map(parse_span("--round")).transpose()?;
    if let Some(round) = round {
        check_span("--round", round, limits::MIN_ROUND, limits::MAX_ROUND)?;
    }
    let throughputs = load_throughputs(run)?;
    let params = PolicyParams {
        placement,
        round,
        options,
        job_types: prepared.workload.job_types.clone(),
        throughputs,
        interference: run
            .interference
            .as_deref()
            .map(|p| crate::interference::load(p, prepared))
            .transpose()?,
        mig: crate::mig_args::setup(&run.mig, prepared)?.map(|m| m.data),
        synergy_matrices: load_synergy_matrices(run)?.map(std::sync::Arc::new),
        ..PolicyParams::default()
    };
    let params = with_tenant_config(params, run, prepared)?;
    if run.policies.is_empty() {
        bail!("--policy needs at least one policy name");
    }
    build_with_scoped_options(&run.policies, params)
}

/// `--set POLICY.KEY=V` goes to that policy only; `--set KEY=V` to every policy
/// in the run that takes KEY, and at least one must.
fn build_with_scoped_options(names: &[String], params: PolicyParams) -> Result<Vec<Box<dyn Policy>>> {
    let (scoped, unscoped): (BTreeMap<String, String>, BTreeMap<String, String>) =
        params.options.iter().map(|(k, v)| (k.clone(), v.clone())).partition(|(k, _)| k.contains('.'));
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut built = Vec::new();
    for name in names.iter().map(|n| n.trim()) {
        let mut options: BTreeMap<String, String> = scoped
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .map(|k| (k.to_string(), v.clone()))
            })
            .collect();
        options.extend(unscoped.clone());
        loop {
            let attempt = PolicyParams { options: options.clone(), ..params.clone() };
            match cotenant_policies::build(name, &attempt) {
                Err(PolicyError::UnknownOption { key, .. }) if unscoped.contains_key(&key) => {
                    options.remove(&key);
                }
                Err(error) => return Err(error.into()),
                Ok(policy) => {
                    taken.extend(options.keys().filter(|k| unscoped.contains_key(*k)).cloned());
                    built.push(policy);
                    break;
                }
            }
        }
    }
    if let Some(key) = unscoped.keys().find(|k| !taken.contains(*k)) {
        bail!("--set {key}: no policy in this run takes option '{key}'");
    }
    for key in scoped.keys() {
        let policy = key.split('.').next().unwrap_or_default();
        if !names.iter().any(|n| n.trim() == policy) {
            bail!("--set {key}: policy '{policy}' is not in this run");
        }
    }
    Ok(built)
}

/// Adds the account tree and quota queues of `--tenant-config`, if given, after
/// checking it and the cluster config's tenants against the workload and the
/// cluster (errors stop the run; warnings are printed).
fn with_tenant_config(mut params: PolicyParams, run: &RunArgs, prepared: &Prepared) -> Result<PolicyParams> {
    use cotenant_trace::accounts::{read_tenant_config, validate, ClusterSummary, TenantConfig, TenantNames};
    let config = match &run.tenant_config {
        Some(path) => read_tenant_config(path)?,
        None => TenantConfig::default(),
    };
    let tenants = TenantNames::from_workload(&prepared.workload.tenants, &prepared.workload.jobs);
    let cluster = ClusterSummary {
        declared_tenants: prepared.declared_tenants.clone(),
        ..ClusterSummary::from_spec(&prepared.cluster)
    };
    for warning in validate(&config, &tenants, &cluster)? {
        eprintln!("warning: {warning}");
    }
    let Some(path) = &run.tenant_config else { return Ok(params) };
    if !config.accounts.is_empty() {
        let specs: Vec<(String, Option<String>, f64)> =
            config.accounts.iter().map(|a| (a.name.clone(), a.parent.clone(), a.shares)).collect();
        let tree = cotenant_policies::fairshare::AccountTree::from_specs(&specs)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        params.accounts = Some(tree);
    }
    if !config.queues.is_empty() {
        let queues = config
            .queues
            .into_iter()
            .map(|q| cotenant_policies::kueue::QueueSpec {
                tenant: q.tenant,
                cohort: q.cohort,
                weight: q.weight,
                nominal: q.nominal,
                borrowing_limit: q.borrowing_limit,
            })
            .collect();
        params.quotas = Some(cotenant_policies::kueue::QuotaConfig { queues });
    }
    Ok(params)
}

/// The table given with `--throughputs`, if any. A run asks for it twice (the rate
/// model and the policies); the last file read is kept, so that it is parsed once
/// (about a fifth of a 3,000-job gavel-fifo run was the second parse), unless the
/// file's size or modification time changed since. Both share the one table.
pub fn load_throughputs(
    run: &RunArgs,
) -> Result<Option<std::sync::Arc<cotenant_perf::throughput::ThroughputTable>>> {
    type Stamp = (PathBuf, Option<std::time::SystemTime>, u64);
    type Table = std::sync::Arc<cotenant_perf::throughput::ThroughputTable>;
    static LAST: std::sync::Mutex<Option<(Stamp, Table)>> = std::sync::Mutex::new(None);
    let Some(path) = run.throughputs.as_deref() else { return Ok(None) };
    let meta = std::fs::metadata(path).ok();
    let stamp: Stamp = (
        path.to_path_buf(),
        meta.as_ref().and_then(|m| m.modified().ok()),
        meta.as_ref().map_or(0, |m| m.len()),
    );
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, table)) = last.as_ref().filter(|(loaded, _)| stamp.1.is_some() && *loaded == stamp) {
        return Ok(Some(table.clone()));
    }
    let table = Table::new(cotenant_trace::gavel_throughputs::read_gavel_throughputs(path)?);
    *last = Some((stamp, table.clone()));
    Ok(Some(table))
}

/// The matrices `--synergy-matrices` names, if any (errors name file, line and field).
pub fn load_synergy_matrices(run: &RunArgs) -> Result<Option<cotenant_perf::synergy::SynergyMatrices>> {
    use cotenant_perf::synergy::SynergyMatrices;
    match run.synergy_matrices.as_deref() {
        None => Ok(None),
        Some("bundled") => Ok(Some(SynergyMatrices::bundled())),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            Ok(Some(SynergyMatrices::parse(path, &text)?))
        }
    }
}

/// Rates from `--interference`, `--mig`, `--synergy-matrices` or `--throughputs` (checked
/// against every job), else the reference rate.
pub fn rate_model(run: &RunArgs, prepared: &Prepared) -> Result<Box<dyn RateModel>> {
    if let Some(path) = &run.interference {
        let table = crate::interference::load(path, prepared)?;
        return Ok(Box::new(crate::interference::rates(&table)));
    }
    if let Some(mig) = crate::mig_args::setup(&run.mig, prepared)? {
        return Ok(Box::new(crate::mig_args::rates(&mig)));
    }
    if let Some(matrices) = load_synergy_matrices(run)? {
        if run.throughputs.is_some() {
            bail!("--synergy-matrices and --throughputs each set the jobs' rates: give one");
        }
        let rates = cotenant_sim::synergy_rates::SynergyRates::new(matrices, &prepared.workload.job_types)
            .with_context(|| format!("{}: --synergy-matrices", prepared.workload.source))?;
        return Ok(Box::new(rates));
    }
    let Some(table) = load_throughputs(run)? else { return Ok(Box::new(ReferenceRate)) };
    cotenant_trace::gavel_throughputs::check_workload_rates(
        &prepared.workload,
        &table,
        &prepared.cluster.gpu_types,
    )?;
    let rates = cotenant_sim::gavel_rates::GavelRates::new(
        table,
        prepared.workload.job_types.clone(),
        &prepared.cluster.gpu_types,
        cotenant_sim::gavel_rates::Consolidation::Always,
    )?;
    Ok(Box::new(rates))
}

pub fn sim_config(run: &RunArgs) -> Result<SimConfig> {
    let checkpoint_interval = parse_span("--checkpoint-interval")(&run.checkpoint_interval)?;
    check_span("--checkpoint-interval", checkpoint_interval, Span::ZERO, limits::MAX_JOB_DURATION)?;
    let restore_overhead = parse_span("--restore-overhead")(&run.restore_overhead)?;
    check_span("--restore-overhead", restore_overhead, Span::ZERO, limits::MAX_JOB_DURATION)?;
    let share_window = parse_span("--share-window")(&run.share_window)?;
    check_span("--share-window", share_window, limits::MIN_SHARE_WINDOW, limits::MAX_ARRIVAL_SPAN)?;
    Ok(SimConfig {
        seed: run.seed,
        overheads: Overheads { checkpoint_interval, restore_overhead },
        share_window,
        record: false,
        horizon: None,
        watch: None,
        max_steps: None,
        elastic: cotenant_sim::elastic::parse_model(&run.scaling, &run.elastic_model)
            .map_err(|e| anyhow!("--scaling/--elastic-model: {e}"))?,
        evals: None,
        mig: None,
        faults: crate::faults_args::config(run)?,
    })
}

fn parse_span(flag: &'static str) -> impl Fn(&str) -> Result<Span> {
    move |text| Span::parse(text).map_err(|e| anyhow!("{flag}: {e}"))
}

/// A duration flag within `[min, max]`, or an error naming the flag, the value and the range.
fn check_span(flag: &str, value: Span, min: Span, max: Span) -> Result<()> {
    if value < min || value > max {
        bail!(
            "{flag} {}: must be between {} and {} (core::limits)",
            show_span(value),
            show_span(min),
            show_span(max)
        );
    }
    Ok(())
}

/// A span in the largest unit that divides it: `360s`, `7d`, `1ms`.
fn show_span(span: Span) -> String {
    const UNITS: [(&str, u64); 6] = [
        ("d", 86_400_000_000),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
        ("us", 1),
    ];
    if span == Span::ZERO {
        return "0s".into();
    }
    let (unit, size) =
        UNITS.iter().find(|(_, size)| span.0.is_multiple_of(*size)).copied().unwrap_or(("us", 1));
    format!("{}{unit}", span.0 / size)
}

/// A job's history under each policy, times relative to its arrival.
fn explain(prepared: &Prepared, job: u32, results: &[SimResult]) -> String {
    use cotenant_core::Phase;
    use cotenant_report::human_duration;
    let spec = &prepared.workload.jobs[job as usize];
    let line = prepared.workload.lines.get(job as usize).copied().unwrap_or(0);
    let mut text = format!(
        "Job {job} ({} line {line}): tenant {}, {} GPUs, {:.0} s of work, arrives at {}\n",
        prepared.workload.source,
        prepared.workload.tenants[spec.tenant.index()].name,
        spec.gpus,
        spec.work,
        human_duration(spec.arrival.as_secs_f64()),
    );
    // Only for GPU -> node lookups.
    let cluster = cotenant_core::Cluster::new(prepared.cluster.clone()).ok();
    for result in results {
        text.push_str(&format!("  {}:\n", result.policy));
        for point in &result.watched {
            let at = format!("+{}", human_duration((point.at - spec.arrival).as_secs_f64()));
            let what = match point.phase {
                Phase::Pending => match point.verdict {
                    Some(verdict) => format!("waiting: {verdict}"),
                    None => "waiting: not yet considered (jobs ahead of it in the policy's order come first)"
                        .to_string(),
                },
                Phase::Running => {
                    let nodes = cluster.as_ref().map_or(0, |c| {
                        let nodes: BTreeSet<_> = point.gpus.iter().map(|g| c.node_of(*g)).collect();
                        nodes.len()
                    });
                    format!("running on {} GPUs across {nodes} node(s)", point.gpus.len())
                }
                Phase::Completed => "completed".to_string(),
                Phase::Ended(reason) => format!("ended: {reason}"),
            };
            text.push_str(&format!("    {at:>9}  {what}\n"));
        }
    }
    text
}

fn describe(prepared: &Prepared) -> String {
    let w = &prepared.workload;
    let span_days = w.jobs.last().map_or(0.0, |j| j.arrival.as_secs_f64() / 86400.0);
    format!(
        "workload: {} ({} jobs, {} tenants, arrivals over {span_days:.1} days)\ncluster:  {}",
        w.source,
        w.jobs.len(),
        w.tenants.len(),
        prepared.cluster_rule
    )
}

fn workload_json(prepared: &Prepared) -> serde_json::Value {
    json!({
        "source": prepared.workload.source,
        "kind": prepared.kind.map_or("synthetic", |k| k.name()),
        "jobs": prepared.workload.jobs.len(),
        "tenants": prepared.workload.tenants.len(),
        "cluster_gpus": prepared.cluster.total_gpus(),
        "cluster_nodes": prepared.cluster.nodes.len(),
        "cluster_rule": prepared.cluster_rule,
        "notes": prepared.notes,
    })
}
