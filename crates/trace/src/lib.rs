//! cotenant-trace: readers and writers for real job and request traces, cluster
//! and tenant configuration files, and seeded synthetic workload generators.
//!
//! This crate owns file formats (serde lives here). It turns bytes into
//! `cotenant_core` values and never decides anything about scheduling.
//! Bad input is an error naming file, line and field ([`TraceError`]), never a
//! panic; rows dropped on purpose are counted in [`Workload::skipped`], and
//! transformations that keep a row but change it are described in
//! [`Workload::notes`]. See docs/traces.md for every format and its mapping.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cotenant_core::{JobId, JobSpec, TenantSpec};

mod cluster_config;
mod error;
mod gavel;
mod itp;
pub mod kubectl;
pub mod mig;
pub mod miso_workload;
mod openb;
mod philly;
mod pollux;
pub mod sacct;
mod sharing_mix;
mod slice;
pub mod suggest;
mod synthetic;
pub mod text;
mod tiresias;
pub mod topology_config;
pub mod wallclock;
pub mod workload_classes;

pub use cluster_config::{
    parse_cluster_arg, parse_cluster_inline, parse_cluster_toml, read_cluster_toml, ClusterConfig,
    DEFAULT_GPUS_PER_NODE,
};
pub use error::TraceError;
pub use gavel::{read_gavel, write_gavel_trace};
pub use itp::read_itp;
pub use kubectl::{parse_kubectl, read_kubectl, KUBECTL_COMMANDS};
pub use openb::{
    parse_openb_nodes, read_openb_nodes, read_openb_pods, SKIP_CPU_NODE, SKIP_CPU_ONLY, SKIP_NEVER_SCHEDULED,
    SKIP_NO_DELETION,
};
pub use philly::{apply_vc_quotas, largest_remainder, read_philly, read_philly_vc, VcNodes};
pub use pollux::{pollux_gpu_secs, read_pollux, POLLUX_BUCKET_MEDIAN_GPU_SECS};
pub use sacct::{parse_sacct, read_sacct, SACCT_COMMAND};
pub use sharing_mix::{generate_sharing_mix, MixModel, SharingMixSpec, MODELS as SHARING_MIX_MODELS};
pub use slice::{Slice, SliceBound};
pub use synthetic::{generate, DurationDist, GpuDist, SyntheticSpec, MAX_SYNTHETIC_JOBS};
pub use tiresias::read_tiresias;

/// A job workload ready to simulate.
///
/// Invariants: `jobs` is sorted by arrival (ties keep file order), `jobs[i].id == JobId(i)`,
/// every `jobs[i].tenant` indexes `tenants`, and `lines[i]` is the 1-based line of
/// the source file that job came from (0 for generated jobs).
#[derive(Clone, Debug, Default)]
pub struct Workload {
    /// What it was read from (a path, or a generator description).
    pub source: String,
    pub jobs: Vec<JobSpec>,
    pub tenants: Vec<TenantSpec>,
    /// Job-type names (model and batch size); `JobSpec::job_type` indexes this.
    pub job_types: Vec<String>,
    pub lines: Vec<u64>,
    /// Rows skipped on purpose, grouped by reason, with counts.
    pub skipped: Vec<SkipCount>,
    /// Transformations that kept rows but changed or modelled something
    /// (slicing, modelled run times, fractional GPUs rounded up, ...), one line each.
    pub notes: Vec<String>,
    /// The wall-clock instant of time 0 (microseconds since 1970-01-01 in the trace's
    /// own zone) for traces with wall-clock timestamps (Philly); `None` for traces whose
    /// times are relative to their start. `cotenant analyze` reads it for arrivals by
    /// hour of day and day of week.
    pub wall_clock_origin_us: Option<i64>,
    /// Each job's final status as the trace records it (sacct `State`, kubectl pod
    /// phase or Job condition), parallel to `jobs`; empty when the trace records none.
    /// `cotenant analyze` reports the status mix from it.
    pub statuses: Vec<String>,
}

impl Workload {
    /// Where job `job` came from, for error messages about one job found after
    /// reading (an unknown Gavel job type, a job too wide for the cluster):
    /// `"g.trace line 7"`, or `"job 7 of <source>"` for a generated job.
    pub fn locate(&self, job: JobId) -> String {
        match self.lines.get(job.0 as usize) {
            Some(&line) if line > 0 => format!("{} line {line}", self.source),
            _ => format!("job {} of {}", job.0, self.source),
        }
    }
}

/// A group of rows that a reader skipped on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipCount {
    pub reason: String,
    pub rows: u64,
}

/// The job-trace formats [`read_trace`] understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceKind {
    /// Microsoft Philly 2017 `philly.csv` (VCs as tenants).
    Philly,
    /// ElasticFlow's Microsoft ITP 2021 `clusterNN.csv`.
    Itp,
    /// Gavel `.trace` (7- or 10-column, tab-separated).
    Gavel,
    /// Pollux/Sia `workload-N.csv`.
    Pollux,
    /// Tiresias `60_job.csv`.
    Tiresias,
    /// Alibaba openb pod lists `openb_pod_list_*.csv`.
    Openb,
    /// Slurm accounting, `sacct --parsable2` output (accounts as tenants).
    Sacct,
    /// Kubernetes `kubectl get pods|jobs -A -o json` (namespaces as tenants).
    Kubectl,
}

impl TraceKind {
    pub const ALL: [TraceKind; 8] = [
        TraceKind::Philly,
        TraceKind::Itp,
        TraceKind::Gavel,
        TraceKind::Pollux,
        TraceKind::Tiresias,
        TraceKind::Openb,
        TraceKind::Sacct,
        TraceKind::Kubectl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Philly => "philly",
            TraceKind::Itp => "itp",
            TraceKind::Gavel => "gavel",
            TraceKind::Pollux => "pollux",
            TraceKind::Tiresias => "tiresias",
            TraceKind::Openb => "openb",
            TraceKind::Sacct => "sacct",
            TraceKind::Kubectl => "kubectl",
        }
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceKind {
    type Err = TraceError;
    fn from_str(s: &str) -> Result<TraceKind, TraceError> {
        TraceKind::ALL.into_iter().find(|k| k.name() == s.trim()).ok_or_else(|| TraceError::UnknownKind {
            given: s.to_string(),
            known: TraceKind::ALL.map(TraceKind::name).join(", "),
        })
    }
}

/// Reads a job trace of the given kind, keeping the jobs `slice` selects.
pub fn read_trace(kind: TraceKind, path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    match kind {
        TraceKind::Philly => read_philly(path, slice),
        TraceKind::Itp => read_itp(path, slice),
        TraceKind::Gavel => read_gavel(path, slice),
        TraceKind::Pollux => read_pollux(path, slice),
        TraceKind::Tiresias => read_tiresias(path, slice),
        TraceKind::Openb => read_openb_pods(path, slice),
        TraceKind::Sacct => read_sacct(path, slice),
        TraceKind::Kubectl => read_kubectl(path, slice),
    }
}

/// [`read_trace`] on bytes already in memory (plain or gzip): `path` only names
/// them in errors and, for single-tenant formats, gives the tenant its name.
pub fn parse_trace(
    kind: TraceKind,
    path: &Path,
    bytes: Vec<u8>,
    slice: &Slice,
) -> Result<Workload, TraceError> {
    match kind {
        TraceKind::Philly => philly::parse_philly(path, bytes, slice),
        TraceKind::Itp => itp::parse_itp(path, bytes, slice),
        TraceKind::Gavel => gavel::parse_gavel(path, bytes, slice),
        TraceKind::Pollux => pollux::parse_pollux(path, bytes, slice),
        TraceKind::Tiresias => tiresias::parse_tiresias(path, bytes, slice),
        TraceKind::Openb => openb::parse_openb_pods(path, bytes, slice),
        TraceKind::Sacct => parse_sacct(path, bytes, slice),
        TraceKind::Kubectl => parse_kubectl(path, bytes, slice),
    }
}

/// Parses a `--trace KIND:PATH` argument (the path may itself contain `:`).
pub fn parse_trace_arg(arg: &str) -> Result<(TraceKind, PathBuf), TraceError> {
    let (kind, path) = arg.split_once(':').ok_or_else(|| {
        TraceError::config(
            "--trace",
            arg,
            "expected KIND:PATH, for example philly:data/philly-2017/philly.csv.gz",
        )
    })?;
    if path.is_empty() {
        return Err(TraceError::config("--trace", arg, "the path after KIND: is empty"));
    }
    Ok((kind.parse()?, PathBuf::from(path)))
}

/// Bundled Philly jobs, relative to [`bundled_data_dir`].
pub const BUNDLED_PHILLY: &str = "philly-2017/philly.csv.gz";
/// Bundled Philly per-VC node counts, relative to [`bundled_data_dir`].
pub const BUNDLED_PHILLY_VC: &str = "philly-2017/philly_vc.csv.gz";
/// Bundled Azure LLM inference traces, relative to [`bundled_data_dir`].
pub const BUNDLED_AZURE_CODE: &str = "azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv.gz";
pub const BUNDLED_AZURE_CONV: &str = "azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv.gz";
/// Bundled Gavel throughput table, relative to [`bundled_data_dir`].
pub const BUNDLED_GAVEL_THROUGHPUTS: &str = "gavel/simulation_throughputs.json.gz";
/// Bundled Gavel physical-cluster traces folder, relative to [`bundled_data_dir`].
pub const BUNDLED_GAVEL_PHYSICAL: &str = "gavel/physical_cluster";

/// The bundled `data/` folder: `$COTENANT_DATA` if set, else the workspace's `data/`.
pub fn bundled_data_dir() -> PathBuf {
    match std::env::var_os("COTENANT_DATA") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("data"),
    }
}

/// The full trace collection: `explicit` if given, else `$COTENANT_TRACES`, else
/// `../shared/traces` next to the workspace. It may not exist (a fresh clone).
pub fn traces_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    match std::env::var_os("COTENANT_TRACES") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join("..").join("shared").join("traces"),
    }
}

fn workspace_root() -> PathBuf {
    // This crate lives at <workspace>/crates/trace. Canonical when possible, so
    // paths in messages read `/repo/data/...` rather than `.../crates/trace/../../data`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    root.canonicalize().unwrap_or(root)
}

pub mod accounts;
pub mod analyze;
pub mod gavel_throughputs;
pub mod request_files;
pub mod requests;
