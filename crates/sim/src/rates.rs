//! How fast a job runs on a given allocation: the world model's rate function.

use cotenant_core::{Cluster, GpuId, JobSpec, JobState};

/// Where and with what a job runs: everything a rate model may read.
///
/// New resources (CPU and memory allocations, GPU memory and sharing modes, MIG
/// instances, elastic sizes) live on the engine's [`JobState`]; a model that
/// needs one reads it from `state`, so adding a resource never changes this
/// trait's signature.
#[derive(Clone, Copy, Debug)]
pub struct Placed<'a> {
    /// The job's GPUs now.
    pub gpus: &'a [GpuId],
    /// Jobs sharing those GPUs (empty unless a policy space-shares GPUs).
    pub partners: &'a [&'a JobSpec],
    /// The engine's state of the job (its allocation), when the engine has it.
    pub state: Option<&'a JobState>,
    pub cluster: &'a Cluster,
}

/// Work units per second for a job on an allocation. The simulator asks on
/// every start (and whenever an allocation or its co-location changes) and
/// reschedules the job's finish event from the answer.
pub trait RateModel: Send + Sync {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64;
}

/// Every job runs at its reference speed (1 work unit per second) on the GPUs
/// it asked for: right for traces whose work is a measured duration.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceRate;

impl RateModel for ReferenceRate {
    fn rate(&self, _job: &JobSpec, _placed: &Placed<'_>) -> f64 {
        1.0
    }
}
