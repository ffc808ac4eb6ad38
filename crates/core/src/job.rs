//! Jobs as submitted, and the reasons a job ends.

use std::sync::Arc;

use crate::elastic::Elastic;
use crate::host::HostResource;
use crate::ids::{JobId, TenantId};
use crate::sharing::GpuMemory;
use crate::time::{Span, Time};

/// What kind of workload a job is. It selects parameter sets in the world model,
/// never code paths in a policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobKind {
    #[default]
    Training,
    Inference,
    Rlhf,
    Hpc,
    Etl,
}

/// A job as submitted.
///
/// `work` is in abstract work units: a job that runs at rate 1.0 (the reference
/// speed on its requested GPUs) does one unit per second, so for traces that
/// record run time, `work` equals the recorded duration in seconds. Traces that
/// record steps (Gavel) give steps, and the world model supplies steps/second.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub id: JobId,
    pub tenant: TenantId,
    pub arrival: Time,
    /// GPUs requested (gang size). Zero means a CPU-only job.
    pub gpus: u32,
    pub work: f64,
    /// What the scheduler may believe about the run time at reference speed
    /// (oracle policies get the truth; estimate-based ones get a guess).
    pub duration_estimate: Option<Span>,
    /// Larger is more important. Only policies that read it care.
    pub priority: i32,
    pub kind: JobKind,
    /// Index into the workload's job-type table (model and batch size), for
    /// throughput tables and performance models.
    pub job_type: Option<u32>,
    /// CPU cores requested (0: none stated).
    pub cpus: u32,
    /// Host memory requested in GiB (0: none stated).
    pub memory_gib: u32,
    /// GPU counts an elastic job accepts (`None`: rigid, exactly `gpus`).
    pub elastic: Option<Elastic>,
    /// GPU memory needed on each of its GPUs (0: not stated; `crate::sharing`).
    pub gpu_memory: GpuMemory,
    /// How the job communicates, how sensitive it is to slow GPUs and how often it
    /// checkpoints: read by the world's topology, variability and fault models.
    /// The default changes nothing anywhere.
    pub profile: JobProfile,
}

/// The communication pattern of a multi-GPU job's synchronous step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CommPattern {
    /// Ring all-reduce over the data-parallel group (and the pipeline's point-to-point
    /// sends): bound by the slowest link its ring crosses.
    #[default]
    AllReduce,
    /// Nearest-neighbour halo exchange (lattice QCD, particle codes): bound by the
    /// links between neighbouring ranks, so compact placements (sub-boxes of a torus)
    /// matter and the diameter does not.
    Halo,
    /// All-to-all (expert parallelism, distributed FFT): every pair exchanges, so the
    /// bisection of the placement bounds it.
    AllToAll,
}

/// A job's sensitivity to where it runs. Every field's default is neutral: a job that
/// states none runs exactly as before in every model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobProfile {
    /// Share of a step spent communicating across nodes when the job's links run at the
    /// reference bandwidth (a node's NIC, uncontended), in [0, 1]. 0: the job's speed
    /// does not depend on its placement.
    pub comm_fraction: f64,
    pub comm_pattern: CommPattern,
    /// Parallel layout of the job's GPUs (tensor x pipeline x data); `None` means pure
    /// data parallel over all its GPUs. Placement may keep each tensor group in one
    /// NVLink domain and each pipeline and data-parallel group within few switches.
    pub layout: Option<Layout>,
    /// How much of a slow GPU the job feels, alpha in [0, 1] (Not All GPUs Are Created
    /// Equal, SC'22): speed on a GPU of factor v is 1 - alpha (1 - v). 1 = compute bound.
    pub sensitivity: f64,
    /// How often the job saves its progress, overriding the run's default; work since
    /// its last checkpoint is lost when a node under it fails.
    pub checkpoint_interval: Option<Span>,
}

/// A (tensor, pipeline, data) parallel layout; t x p x d = the job's GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub tensor: u32,
    pub pipeline: u32,
    pub data: u32,
}

impl Layout {
    pub fn gpus(&self) -> u32 {
        self.tensor * self.pipeline * self.data
    }
}

impl Default for JobProfile {
    fn default() -> Self {
        JobProfile {
            comm_fraction: 0.0,
            comm_pattern: CommPattern::AllReduce,
            layout: None,
            sensitivity: 1.0,
            checkpoint_interval: None,
        }
    }
}

impl JobSpec {
    /// A training job with the given shape; other fields take neutral values.
    pub fn new(id: u32, tenant: u32, arrival: Time, gpus: u32, work: f64) -> JobSpec {
        JobSpec {
            id: JobId(id),
            tenant: TenantId(tenant),
            arrival,
            gpus,
            work,
            duration_estimate: None,
            priority: 0,
            kind: JobKind::Training,
            job_type: None,
            cpus: 0,
            memory_gib: 0,
            elastic: None,
            gpu_memory: GpuMemory::default(),
            profile: JobProfile::default(),
        }
    }
}

impl JobSpec {
    /// True if the job may run on `gpus` GPUs: its request, or any count in its
    /// elastic range.
    pub fn accepts_gpus(&self, gpus: u32) -> bool {
        match self.elastic {
            Some(range) => range.allows(gpus),
            None => gpus == self.gpus,
        }
    }
    /// The fewest GPUs the job can run on.
    pub fn min_gpus(&self) -> u32 {
        self.elastic.map_or(self.gpus, |range| range.min)
    }
}

/// A workload's job specs, shared by the job states that refer to them
/// ([`SpecRef::shared`]): a simulator hands the engine handles into its workload
/// instead of a copy of each spec. Make one per run (`SpecTable::new`), so that
/// runs in parallel threads count their handles on separate reference counts.
#[derive(Debug)]
pub struct SpecTable {
    specs: Arc<Vec<JobSpec>>,
}

impl SpecTable {
    pub fn new(specs: Arc<Vec<JobSpec>>) -> Arc<SpecTable> {
        Arc::new(SpecTable { specs })
    }
    pub fn specs(&self) -> &[JobSpec] {
        &self.specs
    }
}

/// A job's spec as the engine keeps it (`Input::JobSubmitted`, `JobState::spec`):
/// a handle into a shared [`SpecTable`] (16 bytes instead of a 152-byte copy per
/// job), or a spec of its own. Reads as a [`JobSpec`] (`Deref`); compares, prints
/// and clones as the spec it refers to would (a clone shares the same spec).
#[derive(Clone)]
pub struct SpecRef(SpecRepr);

#[derive(Clone)]
enum SpecRepr {
    Shared(Arc<SpecTable>, u32),
    Owned(Box<JobSpec>),
}

impl SpecRef {
    /// The spec at `index` of `table`; `None` past its end.
    pub fn shared(table: &Arc<SpecTable>, index: usize) -> Option<SpecRef> {
        let index32 = u32::try_from(index).ok()?;
        (index < table.specs.len()).then(|| SpecRef(SpecRepr::Shared(Arc::clone(table), index32)))
    }
    /// A copy of the spec, owned.
    pub fn to_spec(&self) -> JobSpec {
        JobSpec::clone(self)
    }
}

impl std::ops::Deref for SpecRef {
    type Target = JobSpec;
    #[inline]
    fn deref(&self) -> &JobSpec {
        match &self.0 {
            SpecRepr::Shared(table, index) => &table.specs[*index as usize],
            SpecRepr::Owned(spec) => spec,
        }
    }
}

impl From<JobSpec> for SpecRef {
    fn from(spec: JobSpec) -> SpecRef {
        SpecRef(SpecRepr::Owned(Box::new(spec)))
    }
}

impl PartialEq for SpecRef {
    fn eq(&self, other: &SpecRef) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for SpecRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        JobSpec::fmt(self, f)
    }
}

/// Why a job left the system without completing its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndReason {
    /// The job asks for more GPUs than the cluster will ever have.
    WiderThanCluster { requested: u32, cluster_gpus: u32 },
    /// The job asks for more CPUs or memory than any placement of its GPUs can
    /// give it (crate::host): even one GPU per node, a node's share exceeds the largest node.
    WiderThanNodes { resource: HostResource, requested: u32, largest_node: u32 },
    /// The job asks for more GPUs than its tenant's hard limit.
    OverTenantLimit { requested: u32, limit: u32 },
    /// A policy decided it will never run (for example an early-stop wrapper).
    StoppedByPolicy,
    /// An early-stop wrapper (EvalStop) ended the job after `declines` consecutive
    /// declining evaluations; the job keeps the checkpoint of its best evaluation
    /// (`best_eval`, 1-based, its score in millionths and its work units).
    EvalDeclined { declines: u32, best_eval: u32, best_score_micro: i64, best_work: u64 },
    /// The run ended (time horizon reached) while the job was still in the system.
    Unfinished,
    /// Its tenant or an admin cancelled it (the live controller).
    Cancelled,
    /// Its process exited with a non-zero status (`exit_code`), or was killed by a
    /// signal (`exit_code` = 128 + signal, as shells report it).
    Failed { exit_code: i32 },
    /// Its process disappeared without an exit status (the agent that ran it
    /// restarted and found it gone).
    Lost,
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::WiderThanCluster { requested, cluster_gpus } => {
                write!(f, "wider than cluster ({requested} GPUs requested, {cluster_gpus} exist)")
            }
            EndReason::WiderThanNodes { resource, requested, largest_node } => write!(
                f,
                "wider than any node ({requested} {resource} requested; the largest node has {largest_node})"
            ),
            EndReason::OverTenantLimit { requested, limit } => {
                write!(f, "over tenant limit ({requested} GPUs requested, limit {limit})")
            }
            EndReason::StoppedByPolicy => write!(f, "stopped by policy"),
            EndReason::EvalDeclined { declines, best_eval, best_score_micro, best_work } => write!(
                f,
                "evalstop after {declines} declining evaluations; kept best checkpoint: evaluation {best_eval}, score {:.3}, at work {best_work}",
                *best_score_micro as f64 / 1e6
            ),
            EndReason::Unfinished => write!(f, "unfinished at end of run"),
            EndReason::Cancelled => write!(f, "cancelled"),
            EndReason::Failed { exit_code } => write!(f, "failed with exit code {exit_code}"),
            EndReason::Lost => write!(f, "lost (its process vanished without an exit status)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn table() -> Arc<SpecTable> {
        SpecTable::new(Arc::new(
            (0..3).map(|i| JobSpec::new(i, 0, Time::from_secs(u64::from(i)), i + 1, 10.0)).collect(),
        ))
    }

    /// A shared handle reads, compares and prints as the spec it refers to; one
    /// past the table's end is refused; a clone shares the table (one more count).
    #[test]
    fn a_shared_spec_reads_as_its_table_entry() {
        let table = table();
        let second = SpecRef::shared(&table, 1).expect("in the table");
        assert_eq!((second.id, second.gpus, second.arrival), (JobId(1), 2, Time::from_secs(1)));
        assert!(SpecRef::shared(&table, 3).is_none());
        let owned = SpecRef::from(table.specs()[1].clone());
        assert_eq!(second, owned);
        assert_ne!(second, SpecRef::shared(&table, 2).unwrap());
        assert_eq!(format!("{second:?}"), format!("{:?}", table.specs()[1]));
        assert_eq!(second.to_spec(), table.specs()[1]);
        assert_eq!(Arc::strong_count(&table), 2);
        let copy = second.clone();
        assert_eq!(Arc::strong_count(&table), 3);
        drop((second, copy));
        assert_eq!(Arc::strong_count(&table), 1);
    }

    /// The handle is two words (a table pointer and an index, or a box): what a job
    /// state holds instead of a 152-byte spec.
    #[test]
    fn a_spec_handle_is_two_words() {
        assert_eq!(size_of::<SpecRef>(), 2 * size_of::<usize>());
        assert!(size_of::<JobSpec>() >= 150);
    }
}
