//! Rates of morphed jobs (Varuna, `policies::varuna`): an elastic training job on
//! `n` GPUs, other than the `gpus` it asked for, runs at its rate there times the
//! pipeline model's relative speed, throughput(n) / throughput(gpus) under
//! AutoConfig's best (P, D, micro-batch) for each count (docs/faults.md).
//!
//! The driver multiplies every elastic job's rate by the elastic model's scaling
//! curve (`ElasticModel::rate`); this wrapper divides that curve out, so that the
//! pipeline model alone sets the speed at other sizes. The CLI wraps the rates in
//! it when a `varuna(BASE)` policy is in the run (the same world for every policy).

use cotenant_core::{JobKind, JobSpec};

use crate::elastic::ElasticModel;
use crate::rates::{Placed, RateModel};

pub struct VarunaRates {
    pub inner: Box<dyn RateModel>,
    pub elastic: ElasticModel,
}

impl std::fmt::Debug for VarunaRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VarunaRates").field("elastic", &self.elastic).finish_non_exhaustive()
    }
}

impl RateModel for VarunaRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let rate = self.inner.rate(job, placed);
        let gpus = placed.gpus.len() as u32;
        if job.elastic.is_none() || gpus == job.gpus || job.kind == JobKind::Inference || gpus == 0 {
            return rate;
        }
        let curve = self.elastic.speedup(gpus) / self.elastic.speedup(job.gpus);
        if curve <= 0.0 {
            return rate;
        }
        rate * cotenant_policies::varuna::relative_speed(job, gpus) / curve
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::ReferenceRate;
    use cotenant_core::{Cluster, ClusterSpec, Elastic, GpuId, Time};

    /// An 8-GPU elastic job on 6 GPUs: the default model (fits on one stage,
    /// micro-batch up to 8, B = 8192). P = 1, D = 6: b = 8 gives m = ceil(8192 / 48)
    /// = 171, T = 171 x 8 = 1368; b = 1 gives m = ceil(8192 / 6) = 1366, T = 1366 (the
    /// least rounding; P = 2, D = 3, b = 1 ties at (2731 + 1) / 2 = 1366 and the smaller P
    /// wins). On 8 GPUs T = 8192 / 8 = 1024 exactly. So 1024 / 1366 of its rate,
    /// whatever the elastic curve (0.9 per doubling here).
    #[test]
    fn the_pipeline_model_sets_the_rate_at_other_sizes() {
        let rates = VarunaRates { inner: Box::new(ReferenceRate), elastic: ElasticModel::default() };
        let mut job = JobSpec::new(0, 0, Time::ZERO, 8, 100.0);
        job.elastic = Some(Elastic { min: 1, max: 8 });
        let cluster = Cluster::new(ClusterSpec::homogeneous("v100", 1, 8)).unwrap();
        let gpus: Vec<GpuId> = (0..6).map(GpuId).collect();
        let placed = Placed { gpus: &gpus, partners: &[], state: None, cluster: &cluster };
        let composed = ElasticModel::default().rate(&job, 6, rates.rate(&job, &placed));
        assert!((composed - 1024.0 / 1366.0).abs() < 1e-12, "{composed}");
    }
}
