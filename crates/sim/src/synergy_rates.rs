//! Synergy's world model: a job's speed depends on the CPUs and memory it holds
//! beside its GPUs (`JobState::host`), through its model class's throughput
//! matrix (`cotenant_perf::synergy`).
//!
//! A job's `work` is its run time at the GPU-proportional point (3 CPUs and
//! 62.5 GB per GPU), where every matrix is 1.0. The rate is the matrix's value at
//! the job's allocation per GPU (with the paper's capped-CPU interpolation S'),
//! times the span penalty when its GPUs sit on more than one server. A resource
//! the cluster does not model (node capacity 0), or an allocation that states
//! neither CPUs nor memory, counts as proportional; a job whose type names no
//! known class runs at 1.0.

use cotenant_core::JobSpec;
use cotenant_perf::synergy::{PerGpu, SynergyMatrices};

use crate::rates::{Placed, RateModel};

/// Rates from Synergy's matrices, per job type of the workload.
#[derive(Clone, Debug)]
pub struct SynergyRates {
    matrices: SynergyMatrices,
    /// Matrix index per job type (`JobSpec::job_type`); `None`: no known class.
    class_of_type: Vec<Option<usize>>,
}

/// A workload job type that names no class of the matrices.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("job type {name:?} names no class of the Synergy matrices (classes: {classes}; models such as res18, gnmt, deepspeech map to them)")]
pub struct UnknownClass {
    pub name: String,
    pub classes: String,
}

impl SynergyRates {
    /// Every job type must name a class (or a model of one): an unknown type is an error.
    pub fn new(matrices: SynergyMatrices, job_types: &[String]) -> Result<SynergyRates, UnknownClass> {
        let mut class_of_type = Vec::with_capacity(job_types.len());
        for name in job_types {
            let found =
                matrices.for_job_type(name).and_then(|m| matrices.classes.iter().position(|c| c == m));
            if found.is_none() {
                let classes: Vec<&str> = matrices.classes.iter().map(|c| c.class.as_str()).collect();
                return Err(UnknownClass { name: name.clone(), classes: classes.join(", ") });
            }
            class_of_type.push(found);
        }
        Ok(SynergyRates { matrices, class_of_type })
    }

    pub fn matrices(&self) -> &SynergyMatrices {
        &self.matrices
    }
}

impl RateModel for SynergyRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let class = job.job_type.and_then(|t| self.class_of_type.get(t as usize).copied().flatten());
        let Some(matrix) = class.map(|c| &self.matrices.classes[c]) else { return 1.0 };
        let gpus = placed.gpus.len();
        if gpus == 0 {
            return 1.0;
        }
        let cluster = placed.cluster;
        let mut nodes: Vec<_> = placed.gpus.iter().map(|&g| cluster.node_of(g)).collect();
        nodes.dedup();
        let fair = self.matrices.fair();
        let alloc = placed.state.map(|s| s.host).unwrap_or_default();
        let stated = alloc.cpus > 0 || alloc.memory_gib > 0;
        let modelled = |cap: fn(&cotenant_core::HostAlloc) -> u32| {
            stated && nodes.iter().all(|&n| cap(&cluster.host().capacity(n)) > 0)
        };
        let at = PerGpu {
            cpus: if modelled(|c| c.cpus) { f64::from(alloc.cpus) / gpus as f64 } else { fair.cpus },
            memory_gib: if modelled(|c| c.memory_gib) {
                f64::from(alloc.memory_gib) / gpus as f64
            } else {
                fair.memory_gib
            },
        };
        let span = if nodes.len() > 1 { self.matrices.span_penalty } else { 1.0 };
        self.matrices.rate(matrix, at) * span
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Cluster, ClusterSpec, GpuId, GpuTypeId};

    #[test]
    fn unknown_job_types_are_errors_naming_the_classes() {
        let e =
            SynergyRates::new(SynergyMatrices::bundled(), &["res50".into(), "bert-ish".into(), "x".into()])
                .unwrap_err();
        assert_eq!(e.name, "x");
        assert_eq!(e.classes, "image, speech, language");
    }

    #[test]
    fn spanning_servers_pays_the_penalty_and_unmodelled_is_proportional() {
        let rates = SynergyRates::new(SynergyMatrices::bundled(), &["image".into()]).unwrap();
        let mut spec = ClusterSpec::homogeneous("v100", 0, 8);
        spec.add_nodes(GpuTypeId(0), 2, 8, 0, 0);
        let cluster = Cluster::new(spec).unwrap();
        let mut job = JobSpec::new(0, 0, cotenant_core::Time::ZERO, 2, 10.0);
        job.job_type = Some(0);
        let one_node = [GpuId(0), GpuId(1)];
        let two_nodes = [GpuId(0), GpuId(8)];
        let placed = |gpus: &'static [GpuId]| Placed { gpus, partners: &[], state: None, cluster: &cluster };
        assert_eq!(rates.rate(&job, &placed(Box::leak(Box::new(one_node)))), 1.0);
        assert_eq!(rates.rate(&job, &placed(Box::leak(Box::new(two_nodes)))), 0.9);
    }
}
