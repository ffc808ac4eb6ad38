//! The training model as the simulator's step-time model (docs/topology.md, "Jobs
//! that name a model"): a job whose job type is a `perf::train` preset (`gpt3-175b`,
//! `llama3-70b`, ...) and whose profile gives a (tensor, pipeline, data) layout is timed
//! by Megatron's PTD-P iteration time on the links its actual placement gives it, so
//! `TopologyRates` slows it by `t(reference links) / t(actual links)` instead of by a
//! stated communication fraction.
//!
//! How the placement's bandwidths become the model's links: [`Links::best`] on the
//! cluster GPU's fabric (tensor groups inside an NVLink domain, data-parallel peers over
//! NVLink where the tensor group leaves room, the rest over the NIC), then every network
//! tier of a group is scaled by `min(1, B_group / B_nic)`, the share of an uncontended
//! NIC the placement gives that kind of group (`GroupLinks`). A tensor group the
//! placement splits across nodes (finite `tensor_gbps`) runs its all-reduces over the
//! network at that share; likewise a data-parallel group the best layout would have kept
//! inside a domain.
//!
//! Fixed choices (stated, not fitted): micro-batch 1, plain 1F1B (no interleaving), full
//! recomputation, no ZeRO, and a global batch of `4 p` micro-batches per pipeline
//! (`B = 4 p d`), which keeps the bubble at `(p - 1) / 4p`, under a quarter. Only the
//! ratio of two step times reaches the rate, so these choices move the slowdown, not
//! the job's reference speed (its work is still its recorded or drawn run time).

use cotenant_core::JobSpec;
use cotenant_perf::gpu::{find_gpu, GpuSpec};
use cotenant_perf::train::{
    iteration_time, preset, Fabric, Layout, Link, Links, Recompute, Tier, TrainShape,
};

use crate::topology_rates::{GroupLinks, StepTimeModel};

/// Megatron step times for the jobs whose job type names a training preset.
#[derive(Clone, Debug)]
pub struct TrainStepTimes {
    /// The preset of each job type of the workload, where it names one.
    shapes: Vec<Option<TrainShape>>,
    gpu: GpuSpec,
}

impl TrainStepTimes {
    /// `None` when no job type names a preset or the GPU type is not in the catalog
    /// (then every job keeps its communication fraction).
    pub fn new(job_types: &[String], gpu_type: &str) -> Option<TrainStepTimes> {
        let gpu = *find_gpu(gpu_type)?;
        let shapes: Vec<Option<TrainShape>> = job_types.iter().map(|name| preset(name.trim())).collect();
        shapes.iter().any(Option::is_some).then_some(TrainStepTimes { shapes, gpu })
    }

    /// The model's links for a job of `tensor` x `data` GPUs per stage on `groups`.
    pub fn links(&self, tensor: u32, data: u32, groups: &GroupLinks) -> Links {
        let fabric = Fabric::of(&self.gpu);
        let mut links = Links::best(&fabric, tensor, data);
        let share = |gbps: f64| (gbps / groups.nic_gbps).clamp(0.0, 1.0);
        let scaled = |link: Link, gbps: f64| Link { gb_per_s: link.gb_per_s * share(gbps), ..link };
        let over_network = |path: &mut Vec<Tier>, ranks: u32, gbps: f64| {
            if gbps.is_infinite() {
                return;
            }
            if path.iter().all(|tier| tier.link != fabric.nic) {
                // The best layout kept the group inside a domain; this placement did not.
                *path = vec![Tier { ranks, link: fabric.nic }];
            }
            for tier in path.iter_mut().filter(|tier| tier.link == fabric.nic) {
                tier.link = scaled(tier.link, gbps);
            }
        };
        if tensor > 1 {
            over_network(&mut links.tensor, tensor, groups.tensor_gbps);
        }
        if data > 1 {
            over_network(&mut links.data, data, groups.data_gbps);
        }
        if groups.pipeline_gbps.is_finite() {
            links.pipeline = scaled(fabric.nic, groups.pipeline_gbps);
        }
        links
    }
}

impl StepTimeModel for TrainStepTimes {
    fn step_time(&self, job: &JobSpec, groups: &GroupLinks) -> Option<f64> {
        let shape = self.shapes.get(job.job_type? as usize)?.as_ref()?;
        let l = job.profile.layout?;
        if l.gpus() != job.gpus || l.gpus() == 0 {
            return None;
        }
        let layout = Layout {
            tensor: l.tensor,
            pipeline: l.pipeline,
            data: l.data,
            micro_batch: 1,
            interleave: 1,
            recompute: Recompute::Full,
            zero: 0,
        };
        let global_batch = 4 * l.pipeline * l.data;
        let links = self.links(l.tensor, l.data, groups);
        iteration_time(shape, global_batch, &layout, &self.gpu, &links).ok().map(|b| b.total_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{JobSpec, Time};

    fn gpt3_job(tensor: u32, pipeline: u32, data: u32) -> JobSpec {
        let mut job = JobSpec::new(0, 0, Time::ZERO, tensor * pipeline * data, 100.0);
        job.job_type = Some(1);
        job.profile.layout = Some(cotenant_core::Layout { tensor, pipeline, data });
        job
    }

    fn model() -> TrainStepTimes {
        TrainStepTimes::new(&["ResNet-50".to_string(), "gpt3-175b".to_string()], "a100").expect("a preset")
    }

    /// The reference links give the model's own best-links time, and a data-parallel
    /// group at half an uncontended NIC gives exactly the time `perf::train` computes
    /// with the NIC tier of the data path at half its bandwidth.
    #[test]
    fn step_time_is_the_training_model_on_the_placement_links() {
        let m = model();
        let job = gpt3_job(8, 8, 4);
        let reference = GroupLinks::reference(200.0, 2400.0);
        let gpu = *find_gpu("a100").unwrap();
        let layout = Layout {
            tensor: 8,
            pipeline: 8,
            data: 4,
            micro_batch: 1,
            interleave: 1,
            recompute: Recompute::Full,
            zero: 0,
        };
        let shape = preset("gpt3-175b").unwrap();
        let best = Links::best(&Fabric::of(&gpu), 8, 4);
        let direct = iteration_time(&shape, 128, &layout, &gpu, &best).unwrap().total_s;
        assert_eq!(m.step_time(&job, &reference), Some(direct));

        let halved = GroupLinks { data_gbps: 100.0, ..reference };
        let mut slow = best.clone();
        for tier in slow.data.iter_mut().filter(|t| t.link == Fabric::of(&gpu).nic) {
            tier.link.gb_per_s /= 2.0;
        }
        let expected = iteration_time(&shape, 128, &layout, &gpu, &slow).unwrap().total_s;
        let got = m.step_time(&job, &halved).unwrap();
        assert_eq!(got, expected);
        assert!(got > direct, "half the NIC is slower: {got} vs {direct}");
    }

    /// Jobs without a preset job type, without a layout, or whose layout does not cover
    /// their GPUs are not the model's: they keep their communication fraction.
    #[test]
    fn other_jobs_are_left_to_the_communication_fraction() {
        let m = model();
        let reference = GroupLinks::reference(200.0, 2400.0);
        let mut resnet = gpt3_job(8, 1, 2);
        resnet.job_type = Some(0);
        assert_eq!(m.step_time(&resnet, &reference), None);
        let mut no_layout = gpt3_job(8, 1, 2);
        no_layout.profile.layout = None;
        assert_eq!(m.step_time(&no_layout, &reference), None);
        let mut wrong = gpt3_job(8, 1, 2);
        wrong.gpus = 32;
        assert_eq!(m.step_time(&wrong, &reference), None);
        assert!(TrainStepTimes::new(&["ResNet-50".to_string()], "a100").is_none());
        assert!(TrainStepTimes::new(&["gpt3-175b".to_string()], "no-such-gpu").is_none());
    }

    /// A tensor group split across nodes pays its all-reduces on the network: slower
    /// than the same job with its tensor groups on NVLink.
    #[test]
    fn a_split_tensor_group_is_slower() {
        let m = model();
        let job = gpt3_job(8, 8, 4);
        let reference = GroupLinks::reference(200.0, 2400.0);
        let split = GroupLinks { tensor_gbps: 200.0, ..reference };
        assert!(m.step_time(&job, &split).unwrap() > m.step_time(&job, &reference).unwrap());
    }
}
