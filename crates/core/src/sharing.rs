//! GPU memory and GPU sharing: what a job needs of a GPU's memory, how two jobs
//! share a GPU (the declared mode and a job's gradient-accumulation factor), the
//! interference table as data, and the checks the engine applies to a share.
//!
//! The model (ARCHITECTURE.md, "GPU memory and sharing"):
//! - A GPU's memory is its node's `gpu_memory_gib` (filled from the perf catalog by
//!   the CLI; 0 = not modelled, and then nothing is checked against it).
//! - A job needs `JobSpec::gpu_memory` on each of its GPUs: a fixed part (weights,
//!   gradients, optimizer state, workspace) and an activation part that scales with
//!   the micro-batch. Gradient accumulation with factor `k` runs the global batch `b`
//!   as `k` micro-batches of `b / k`, so only the activation part shrinks, to `1 / k`:
//!   `need(k) = total - activation * (1 - 1 / k)`. 0 = not stated (needs nothing).
//! - At most two jobs hold a GPU (the cluster's owner and co-owner). A share is
//!   refused ([`ShareRefusal`]) if the two needs exceed the GPU's memory: time-slicing
//!   has no memory isolation and MPS only limits, so over-commit is never allowed.
//! - A share is between two jobs of the same GPU count on the same GPUs (a job has at
//!   most one partner): see [`Sharing`] for why.

use crate::cluster::Cluster;
use crate::ids::{GpuId, JobId};

/// Most micro-batches a job may split its batch into (gradient accumulation).
pub const MAX_ACCUMULATION: u32 = 64;

/// How two jobs on one GPU share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SharingMode {
    /// The driver's default: contexts take turns (no memory isolation).
    TimeSlice,
    /// NVIDIA MPS: kernels of both jobs run concurrently (memory limits only).
    Mps,
}

impl SharingMode {
    pub const ALL: [SharingMode; 2] = [SharingMode::TimeSlice, SharingMode::Mps];

    /// The name in files and options: `time-slice` or `mps`.
    pub fn name(self) -> &'static str {
        match self {
            SharingMode::TimeSlice => "time-slice",
            SharingMode::Mps => "mps",
        }
    }

    pub fn parse(name: &str) -> Option<SharingMode> {
        SharingMode::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// GPU memory a job needs on each of its GPUs, in GiB. Zero: not stated.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuMemory {
    /// Everything at the full batch.
    pub total_gib: f64,
    /// The part of `total_gib` that scales with the micro-batch (activations).
    pub activation_gib: f64,
}

impl GpuMemory {
    /// Need with gradient accumulation `k` (micro-batch `b / k`); `k` of 0 counts as 1.
    pub fn need_gib(self, k: u32) -> f64 {
        let k = f64::from(k.max(1));
        self.total_gib - self.activation_gib * (1.0 - 1.0 / k)
    }
}

/// How a running job shares its GPUs now. On [`crate::JobState`].
///
/// A job has at most one partner, which holds the same GPUs: the cluster's
/// "never three owners" invariant then holds by construction, the world model's
/// GPU-time accounting stays "half of each GPU to each job of a pair", and the
/// partner-left `Rerate` stays pairwise. A wider job sharing with several narrower
/// ones would need per-GPU sharer counts in that accounting; we do not model it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharing {
    /// The declared mode while the job has a partner (`None`: alone, or a pair
    /// formed with [`crate::Action::StartShared`], which declares none).
    pub mode: Option<SharingMode>,
    /// Gradient-accumulation factor the job runs with (1: none). Kept for the
    /// whole run, also after its partner leaves: changing it means a restart.
    pub accumulation: u32,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing { mode: None, accumulation: 1 }
    }
}

/// Start a pending job on the GPUs of `partner`, a running job with as many GPUs
/// that holds them alone, sharing them in `mode`; the job runs with gradient
/// accumulation `accumulation` (1: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub job: JobId,
    pub partner: JobId,
    pub mode: SharingMode,
    pub accumulation: u32,
}

/// Why the engine refused a share (or a start that does not fit in memory).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShareRefusal {
    /// Accumulation factor outside `1..=MAX_ACCUMULATION`.
    BadAccumulation(u32),
    /// The needs on `gpu` exceed its memory.
    OverCommitsMemory { gpu: GpuId, need_gib: f64, capacity_gib: f64 },
}

/// Memory of `gpu` in GiB, if modelled.
pub fn gpu_memory_gib(cluster: &Cluster, gpu: GpuId) -> Option<f64> {
    let gib = cluster.node(cluster.node_of(gpu)).gpu_memory_gib;
    (gib > 0.0).then_some(gib)
}

/// The first of `gpus` whose memory cannot hold `need_gib` GiB, as a refusal.
/// GPUs whose memory is not modelled hold anything.
pub fn check_memory(cluster: &Cluster, gpus: &[GpuId], need_gib: f64) -> Option<ShareRefusal> {
    if need_gib <= 0.0 {
        return None;
    }
    gpus.iter().find_map(|&gpu| {
        let capacity_gib = gpu_memory_gib(cluster, gpu)?;
        (need_gib > capacity_gib).then_some(ShareRefusal::OverCommitsMemory { gpu, need_gib, capacity_gib })
    })
}

/// Checks a share of `gpus` by a job needing `job_need` (at its accumulation
/// factor `accumulation`) and a resident needing `resident_need`.
pub fn check_share(
    cluster: &Cluster,
    gpus: &[GpuId],
    accumulation: u32,
    job: GpuMemory,
    resident_need_gib: f64,
) -> Option<ShareRefusal> {
    if !(1..=MAX_ACCUMULATION).contains(&accumulation) {
        return Some(ShareRefusal::BadAccumulation(accumulation));
    }
    check_memory(cluster, gpus, job.need_gib(accumulation) + resident_need_gib)
}

/// Slowdown factors xi(a | b) >= 1 per sharing mode and ordered model pair: job
/// `a` runs `xi` times slower while `b` shares its GPUs. Models are indexed as the
/// workload's job types; `accumulation_overhead` is the extra time per iteration
/// of each micro-batch beyond the first (iteration time x (1 + o (k - 1))).
/// Built by `cotenant_sim::sharing::parse_interference` from a data file.
#[derive(Clone, Debug, PartialEq)]
pub struct InterferenceTable {
    pub models: Vec<String>,
    /// `xi[mode][a * models + b]`.
    xi: [Vec<f64>; 2],
    pub accumulation_overhead: f64,
}

impl InterferenceTable {
    /// A table with every entry `fill` (callers then set each pair).
    pub fn new(models: Vec<String>, fill: f64, accumulation_overhead: f64) -> InterferenceTable {
        let n = models.len() * models.len();
        InterferenceTable { models, xi: [vec![fill; n], vec![fill; n]], accumulation_overhead }
    }

    /// xi(a | b) in `mode`; `None` for a model index outside the table (never a
    /// silent default: a caller without the pair cannot reason about it).
    pub fn xi(&self, mode: SharingMode, a: usize, b: usize) -> Option<f64> {
        let n = self.models.len();
        (a < n && b < n).then(|| self.xi[mode.index()][a * n + b])
    }

    pub fn set(&mut self, mode: SharingMode, a: usize, b: usize, xi: f64) {
        let n = self.models.len();
        self.xi[mode.index()][a * n + b] = xi;
    }

    /// Iteration-time factor of gradient accumulation `k`.
    pub fn accumulation_factor(&self, k: u32) -> f64 {
        1.0 + self.accumulation_overhead * f64::from(k.max(1) - 1)
    }

    /// The same table with models in the order of `names` (the workload's job
    /// types), so that a job type indexes it; `Err(name)` for a name it lacks.
    pub fn reordered(&self, names: &[String]) -> Result<InterferenceTable, String> {
        let index: Vec<usize> = names
            .iter()
            .map(|name| self.models.iter().position(|m| m == name).ok_or_else(|| name.clone()))
            .collect::<Result<_, _>>()?;
        let mut out = InterferenceTable::new(names.to_vec(), 1.0, self.accumulation_overhead);
        for mode in SharingMode::ALL {
            for (a, &from_a) in index.iter().enumerate() {
                for (b, &from_b) in index.iter().enumerate() {
                    out.set(mode, a, b, self.xi[mode.index()][from_a * self.models.len() + from_b]);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;

    #[test]
    fn accumulation_shrinks_only_activations() {
        // 30 GiB of which 20 activations: k=2 -> 30 - 20/2 = 20; k=4 -> 30 - 15 = 15.
        let m = GpuMemory { total_gib: 30.0, activation_gib: 20.0 };
        assert_eq!(m.need_gib(1), 30.0);
        assert_eq!(m.need_gib(2), 20.0);
        assert_eq!(m.need_gib(4), 15.0);
        assert_eq!(GpuMemory::default().need_gib(8), 0.0);
    }

    #[test]
    fn memory_checks_only_modelled_gpus() {
        let mut spec = ClusterSpec::homogeneous("A6000", 1, 2);
        let cluster = Cluster::new(spec.clone()).unwrap();
        assert_eq!(check_memory(&cluster, &[GpuId(0)], 1e6), None, "not modelled");
        spec.set_gpu_memory_gib(crate::GpuTypeId(0), 48.0);
        let cluster = Cluster::new(spec).unwrap();
        let job = GpuMemory { total_gib: 30.0, activation_gib: 20.0 };
        // 30 + 20 = 50 > 48: refused; with k = 2, 20 + 20 = 40 fits.
        assert_eq!(
            check_share(&cluster, &[GpuId(0), GpuId(1)], 1, job, 20.0),
            Some(ShareRefusal::OverCommitsMemory { gpu: GpuId(0), need_gib: 50.0, capacity_gib: 48.0 })
        );
        assert_eq!(check_share(&cluster, &[GpuId(0), GpuId(1)], 2, job, 20.0), None);
        assert_eq!(check_share(&cluster, &[GpuId(0)], 0, job, 0.0), Some(ShareRefusal::BadAccumulation(0)));
    }

    #[test]
    fn reordering_follows_names() {
        let mut t = InterferenceTable::new(vec!["a".into(), "b".into()], 1.0, 0.0);
        t.set(SharingMode::Mps, 0, 1, 1.5);
        let r = t.reordered(&["b".into(), "a".into()]).unwrap();
        assert_eq!(r.xi(SharingMode::Mps, 1, 0), Some(1.5));
        assert_eq!(r.xi(SharingMode::Mps, 0, 1), Some(1.0));
        assert_eq!(r.xi(SharingMode::Mps, 2, 0), None);
        assert_eq!(t.reordered(&["c".into()]), Err("c".into()));
    }
}
