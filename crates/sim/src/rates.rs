//! How fast a job runs on a given allocation: the world model's rate function.

use cotenant_core::{Cluster, GpuId, JobSpec};

/// Work units per second for a job on an allocation. The simulator asks on
/// every start (and whenever an allocation's co-location changes) and
/// reschedules the job's finish event from the answer.
pub trait RateModel: Send + Sync {
    /// `gpus` is the job's allocation; `partners` are jobs sharing those GPUs
    /// (empty unless a policy space-shares GPUs).
    fn rate(&self, job: &JobSpec, gpus: &[GpuId], partners: &[&JobSpec], cluster: &Cluster) -> f64;
}

/// Every job runs at its reference speed (1 work unit per second) on the GPUs
/// it asked for: right for traces whose work is a measured duration.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceRate;

impl RateModel for ReferenceRate {
    fn rate(&self, _job: &JobSpec, _gpus: &[GpuId], _partners: &[&JobSpec], _cluster: &Cluster) -> f64 {
        1.0
    }
}
