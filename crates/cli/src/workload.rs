//! Turning `--trace`, `--synthetic`, `--cluster` and slice flags into a
//! workload, tenants and a cluster: the part of `sim` and `bench` they share.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cotenant_core::{ClusterSpec, JobId, TenantSpec};
use cotenant_trace::{
    apply_vc_quotas, bundled_data_dir, generate, parse_cluster_arg, parse_trace_arg, read_philly_vc,
    read_trace, Slice, SliceBound, SyntheticSpec, TraceKind, Workload,
};

/// The default week of Philly: dense enough that policies differ, small enough to run in seconds.
pub const DEFAULT_WEEK: (&str, &str) = ("2017-11-06", "2017-11-13");
/// Offered load the automatic cluster sizing aims for.
pub const DEFAULT_TARGET_LOAD: f64 = 0.86;
const GPUS_PER_NODE: u32 = 8;

/// Flags that choose the workload and the cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Trace to replay, as KIND:PATH. Kinds: philly, itp, gavel, pollux, tiresias, openb, sacct, kubectl,
    /// and journal (a `cotenant server` database: its recorded jobs, cluster and tenants).
    /// Plain or .gz files. Without --trace and --synthetic: the bundled Philly trace,
    /// sliced to the week 2017-11-06..2017-11-13 (6,391 jobs) unless --all or a slice is given.
    #[arg(long, value_name = "KIND:PATH")]
    pub trace: Option<String>,
    /// Generate a workload instead: key=value pairs, e.g.
    /// `jobs=1000,rate=20/h,seed=1,tenants=4,weights=1:1:2:4,durations=gavel,gpus=gavel`;
    /// or SJF-BSBF's model mix with GPU memory needs: `sjf-bsbf[,jobs=1000,rate=50/h,seed=1]`;
    /// add `classes=llm-pretrain:2|rlhf:3|etl:5` (or `class=NAME`) for workload classes (docs/workloads.md).
    #[arg(long, value_name = "SPEC", conflicts_with = "trace")]
    pub synthetic: Option<String>,
    /// Generate the EvalStop setup instead: RLHF jobs that report evaluation scores as
    /// they run, mixed with training jobs, e.g. `jobs=400,seed=1,rlhf=0.8,hacking=0.3,load=0.9,gpus=64,sigma=0.01,interval=0.05`
    /// (the defaults; docs/policies.md, EvalStop).
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["trace", "synthetic"])]
    pub rlhf: Option<String>,
    /// Cluster: inline `nodes=60,gpus-per-node=8[,gpu=v100]`, per GPU type `v100=2,k80=4[,gpus-per-node=N]`,
    /// or a TOML file (nodes and tenants; see docs/traces.md). Default: sized to --target-load.
    #[arg(long, value_name = "SPEC|FILE")]
    pub cluster: Option<String>,
    /// Without --cluster, size the cluster so that the workload's average GPU demand
    /// (GPU-seconds of work / arrival span) is this fraction of it, in nodes of 8 GPUs:
    /// nodes = ceil(demand / load / 8). The default week (413 GPUs of demand) gives 60 x 8 = 480 GPUs.
    #[arg(long, default_value_t = DEFAULT_TARGET_LOAD, value_name = "FRACTION")]
    pub target_load: f64,
    /// Keep jobs arriving at or after this time: `2017-11-06`, `2017-11-06 12:00:00` (Philly) or seconds.
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Keep jobs arriving before this time (same forms as --from).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Keep at most the first N jobs (after the time window).
    #[arg(long, value_name = "N")]
    pub max_jobs: Option<usize>,
    /// Use the whole default Philly trace (82,247 jobs) instead of the default week.
    #[arg(long)]
    pub all: bool,
    /// Per-VC node counts for Philly quotas (default: philly_vc.csv next to the trace, or the bundled one).
    #[arg(long, value_name = "PATH")]
    pub quotas: Option<PathBuf>,
    /// Drop jobs wider than the cluster (counted and reported) instead of failing.
    #[arg(long)]
    pub drop_wide_jobs: bool,
}

/// A workload with its tenants and the cluster to run it on.
#[derive(Debug)]
pub struct Prepared {
    pub workload: Workload,
    pub kind: Option<TraceKind>,
    pub cluster: ClusterSpec,
    pub cluster_rule: String,
    pub notes: Vec<String>,
    /// Tenant names the `--cluster` TOML declares (checked against the workload's).
    pub declared_tenants: Vec<String>,
    /// Evaluation curves of the jobs (`--rlhf`), for the simulator.
    pub evals: Option<std::sync::Arc<cotenant_sim::evalstop::EvalCurves>>,
}

pub fn prepare(args: &WorkloadArgs) -> Result<Prepared> {
    let (mut workload, kind, trace_path, evals) = match &args.rlhf {
        Some(spec) => {
            let spec = cotenant_sim::evalstop::workload::RlhfSpec::parse(spec)?;
            let (workload, curves) = cotenant_sim::evalstop::workload::rlhf_workload(&spec);
            (workload, None, None, Some(std::sync::Arc::new(curves)))
        }
        None => {
            let (workload, kind, path) = load(args)?;
            (workload, kind, path, None)
        }
    };
    let generated = workload.jobs.len();
    let mut notes: Vec<String> =
        workload.skipped.iter().map(|s| format!("skipped {} rows: {}", s.rows, s.reason)).collect();
    let (cluster, tenants, cluster_rule) = match &args.cluster {
        Some(spec) => {
            let config = parse_cluster_arg(spec)?;
            (config.cluster, config.tenants, format!("--cluster {spec}"))
        }
        None if crate::journal_trace::database(args).is_some() => {
            let (spec, rule) =
                crate::journal_trace::declared_cluster(crate::journal_trace::database(args).unwrap_or(""))?;
            (spec, Vec::new(), rule)
        }
        None => {
            if kind == Some(TraceKind::Gavel) {
                bail!("gavel traces measure work in steps, not seconds: give --cluster (for example v100=2,k80=4)");
            }
            let (spec, rule) = size_cluster(&workload, args.target_load)?;
            (spec, Vec::new(), rule)
        }
    };
    let mut cluster = cluster;
    fill_gpu_memory(&mut cluster);
    crate::interference::check_gpu_memory(&workload, &cluster)?;
    apply_tenant_config(&mut workload.tenants, &tenants, &mut notes);
    if kind == Some(TraceKind::Philly) && tenants.is_empty() {
        let vc_path = args.quotas.clone().or_else(|| find_vc_file(trace_path.as_deref()));
        if let Some(vc_path) = vc_path {
            let vcs = read_philly_vc(&vc_path)?;
            for name in apply_vc_quotas(&mut workload.tenants, &vcs, cluster.total_gpus()) {
                notes.push(format!("tenant {name} is not in {}: quota 0", vc_path.display()));
            }
        }
    }
    reject_wide_jobs(&mut workload, kind, &cluster, args.drop_wide_jobs, &mut notes)?;
    if evals.is_some() && workload.jobs.len() != generated {
        bail!("--rlhf: every job must fit the cluster (evaluation curves follow job ids); give a larger --cluster");
    }
    notes.extend(workload.notes.iter().cloned());
    let declared_tenants = tenants.iter().map(|t| t.name.clone()).collect();
    Ok(Prepared { workload, kind, cluster, cluster_rule, notes, declared_tenants, evals })
}

fn load(args: &WorkloadArgs) -> Result<(Workload, Option<TraceKind>, Option<PathBuf>)> {
    if let Some(rest) = args.synthetic.as_deref().and_then(|spec| spec.strip_prefix("sjf-bsbf")) {
        let spec = cotenant_trace::SharingMixSpec::parse(rest)?;
        return Ok((cotenant_trace::generate_sharing_mix(&spec), None, None));
    }
    if let Some(spec) = &args.synthetic {
        if let Some(miso) = spec.strip_prefix("miso") {
            return Ok((crate::mig_args::miso_workload(miso)?, None, None));
        }
        let spec = SyntheticSpec::parse(spec)?;
        return Ok((generate(&spec), None, None));
    }
    if let Some(db) = crate::journal_trace::database(args) {
        return Ok((crate::journal_trace::workload(db, args)?, None, None));
    }
    let (kind, path, default_week) = match &args.trace {
        Some(arg) => {
            let (kind, path) = parse_trace_arg(arg)?;
            (kind, path, false)
        }
        None => (TraceKind::Philly, bundled_data_dir().join("philly-2017/philly.csv.gz"), true),
    };
    let mut slice = Slice {
        start: args.from.as_deref().map(SliceBound::parse).transpose()?,
        end: args.to.as_deref().map(SliceBound::parse).transpose()?,
        max_jobs: args.max_jobs,
    };
    let sliced = slice.start.is_some() || slice.end.is_some() || slice.max_jobs.is_some();
    if default_week && !args.all && !sliced {
        slice.start = Some(SliceBound::parse(DEFAULT_WEEK.0)?);
        slice.end = Some(SliceBound::parse(DEFAULT_WEEK.1)?);
    }
    let workload = read_trace(kind, &path, &slice).with_context(|| format!("reading {}", path.display()))?;
    if workload.jobs.is_empty() {
        bail!(
            "{}: no jobs arrive in the selected slice (--from {}, --to {}, --max-jobs {})",
            path.display(),
            args.from.as_deref().unwrap_or("-"),
            args.to.as_deref().unwrap_or("-"),
            args.max_jobs.map_or("-".to_string(), |n| n.to_string())
        );
    }
    Ok((workload, Some(kind), Some(path)))
}

/// The sizing rule: nodes of 8 GPUs so that average demand is `load` of capacity,
/// and at least wide enough for the widest job.
pub fn size_cluster(workload: &Workload, load: f64) -> Result<(ClusterSpec, String)> {
    if !(load > 0.0 && load <= 1.5) {
        bail!("--target-load must be in (0, 1.5], got {load}");
    }
    let jobs = &workload.jobs;
    let gpu_seconds: f64 = jobs.iter().map(|j| f64::from(j.gpus) * j.work).sum();
    let first = jobs.first().map_or(0, |j| j.arrival.0);
    let last = jobs.last().map_or(0, |j| j.arrival.0);
    // Arrival span; a batch that arrives at once is measured over its longest job.
    let arrival_span_secs = (last - first) as f64 / 1e6;
    let span_secs = if arrival_span_secs > 0.0 {
        arrival_span_secs
    } else {
        jobs.iter().map(|j| j.work).fold(1.0, f64::max)
    };
    let demand = gpu_seconds / span_secs;
    let widest = jobs.iter().map(|j| j.gpus).max().unwrap_or(1);
    let wanted =
        (demand / load / f64::from(GPUS_PER_NODE)).ceil().max(f64::from(widest.div_ceil(GPUS_PER_NODE)));
    let max_nodes = cotenant_core::limits::MAX_CLUSTER_NODES
        .min(cotenant_core::limits::MAX_CLUSTER_GPUS / u64::from(GPUS_PER_NODE));
    if wanted.is_nan() || wanted > max_nodes as f64 {
        bail!(
            "the sizing rule asks for {wanted:.0} nodes of {GPUS_PER_NODE} GPUs (average demand {demand:.0} GPUs at \
             --target-load {load}, widest job {widest} GPUs), over the limit of {max_nodes} nodes \
             (core::limits::MAX_CLUSTER_NODES / MAX_CLUSTER_GPUS): give --cluster, or a larger --target-load"
        );
    }
    let nodes = (wanted as u32).max(1);
    let rule = format!(
        "average demand {demand:.0} GPUs / target load {load} -> {nodes} nodes x {GPUS_PER_NODE} GPUs = {} GPUs (offered load {:.0}%)",
        nodes * GPUS_PER_NODE,
        demand / f64::from(nodes * GPUS_PER_NODE) * 100.0
    );
    Ok((ClusterSpec::homogeneous("gpu", nodes, GPUS_PER_NODE), rule))
}

fn find_vc_file(trace: Option<&Path>) -> Option<PathBuf> {
    let dir = trace?.parent()?;
    ["philly_vc.csv", "philly_vc.csv.gz"].iter().map(|f| dir.join(f)).find(|p| p.is_file())
}

/// GPU memory of each GPU type the perf catalog knows (others stay "not modelled").
fn fill_gpu_memory(cluster: &mut ClusterSpec) {
    for (i, name) in cluster.gpu_types.clone().iter().enumerate() {
        if let Some(gpu) = cotenant_perf::find_gpu(name) {
            cluster.set_gpu_memory_gib(cotenant_core::GpuTypeId(i as u32), gpu.memory_gib);
        }
    }
}

/// Tenants named in the cluster config override the workload's (matched by name).
fn apply_tenant_config(tenants: &mut [TenantSpec], config: &[TenantSpec], notes: &mut Vec<String>) {
    if config.is_empty() {
        return;
    }
    for tenant in tenants.iter_mut() {
        match config.iter().find(|c| c.name == tenant.name) {
            Some(c) => *tenant = c.clone(),
            None => {
                notes.push(format!("tenant {} is not in the cluster config: weight 1, no quota", tenant.name))
            }
        }
    }
}

fn gpu_field(kind: Option<TraceKind>) -> &'static str {
    match kind {
        Some(TraceKind::Philly) => "num_gpus",
        Some(TraceKind::Gavel) => "scale_factor",
        Some(TraceKind::Pollux) => "num_replicas",
        Some(TraceKind::Itp | TraceKind::Tiresias | TraceKind::Openb) => "num_gpu",
        Some(TraceKind::Sacct) => "AllocTRES",
        Some(TraceKind::Kubectl) => "nvidia.com/gpu",
        None => "gpus",
    }
}

/// A job wider than the cluster can never run: an error naming the file, line
/// and field, or (with --drop-wide-jobs) a counted, reported drop.
fn reject_wide_jobs(
    workload: &mut Workload,
    kind: Option<TraceKind>,
    cluster: &ClusterSpec,
    drop: bool,
    notes: &mut Vec<String>,
) -> Result<()> {
    let total = cluster.total_gpus();
    let wide: Vec<usize> = (0..workload.jobs.len()).filter(|&i| workload.jobs[i].gpus > total).collect();
    let Some(&first) = wide.first() else { return Ok(()) };
    if !drop {
        bail!(
            "{} line {}, field {}: job asks for {} GPUs but the cluster has {total} ({} such jobs; --drop-wide-jobs skips them)",
            workload.source,
            workload.lines.get(first).copied().unwrap_or(0),
            gpu_field(kind),
            workload.jobs[first].gpus,
            wide.len()
        );
    }
    notes.push(format!("dropped {} jobs wider than the cluster's {total} GPUs", wide.len()));
    let keep: Vec<bool> = workload.jobs.iter().map(|j| j.gpus <= total).collect();
    let mut index = 0;
    workload.lines.retain(|_| {
        index += 1;
        keep[index - 1]
    });
    workload.jobs.retain(|j| j.gpus <= total);
    if !workload.statuses.is_empty() {
        let mut index = 0;
        workload.statuses.retain(|_| {
            index += 1;
            keep[index - 1]
        });
    }
    for (i, job) in workload.jobs.iter_mut().enumerate() {
        job.id = JobId(i as u32);
    }
    Ok(())
}
