//! GPU variability and stragglers: a job's rate on GPUs of unequal speed.
//!
//! Each GPU has a persistent speed factor `v` (`ClusterSpec::gpu_speed`,
//! `core::variability`). A job of sensitivity `alpha` (`JobProfile::sensitivity`) runs
//! on it at `s = 1 - alpha (1 - v)` of its speed on a median GPU (Not All GPUs Are
//! Created Equal, SC'22: compute-bound jobs feel all of it, alpha = 1). A synchronous
//! multi-GPU job waits for its slowest GPU at every step, so it runs at `min s`.
//!
//! Tensor-parallel groups can do better (SEMI-migration, 2024): every rank of a group
//! holds a shard of each layer, so the shards can be resized to the ranks' speeds.
//! - `shrink` (ZERO-resizing): shards in proportion to speed, so the group runs at the
//!   mean of its speeds; a shard can shrink only so far (`max_shrink` of an equal share)
//!   before its matrices stop filling the GPU, so the group runs at
//!   `min(mean s, min s / (1 - max_shrink))`. No one-off cost.
//! - `migrate` (SEMI-migration): move part of the straggler's shard to faster peers:
//!   no bound on how much moves, but the moved slices cost extra communication every
//!   step (`overhead`) and moving their weights and optimizer state costs
//!   `migrate_cost` seconds once per placement: over the job's `W` work units the
//!   group runs at `W / (W / (mean s (1 - overhead)) + migrate_cost)`.
//! - `auto`: whichever of the two gives the higher rate (the cost model: mild
//!   heterogeneity stays within the shrink bound and pays nothing; heavy heterogeneity
//!   or a long job makes migrating worth its cost).
//!
//! A job with `layout.tensor = t > 1` has tensor groups of `t` consecutive GPUs of its
//! allocation (Megatron's rank order); the job runs at its slowest group. With
//! `every_gang` set, every multi-GPU job is treated as one tensor group. Without
//! speed factors on the cluster every job runs at the inner model's rate, unchanged.

use cotenant_core::JobSpec;

use crate::rates::{Placed, RateModel};

/// What tensor-parallel groups do about a straggler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stragglers {
    /// Nothing: every group runs at its slowest GPU.
    #[default]
    None,
    Shrink,
    Migrate,
    Auto,
}

impl Stragglers {
    pub fn parse(name: &str) -> Option<Stragglers> {
        Some(match name {
            "none" => Stragglers::None,
            "shrink" => Stragglers::Shrink,
            "migrate" => Stragglers::Migrate,
            "auto" => Stragglers::Auto,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Stragglers::None => "none",
            Stragglers::Shrink => "shrink",
            Stragglers::Migrate => "migrate",
            Stragglers::Auto => "auto",
        }
    }
}

/// Straggler mitigation and its costs (docs/variability.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StragglerModel {
    pub mode: Stragglers,
    /// Treat every multi-GPU job as one tensor-parallel group (not only `layout.tensor > 1`).
    pub every_gang: bool,
    /// Most a shard may shrink below an equal share under `shrink`, in [0, 1).
    pub max_shrink: f64,
    /// Share of a step the migrated slices add in communication under `migrate`, in [0, 1).
    pub overhead: f64,
    /// Seconds to move a shard's weights and optimizer state, once per placement.
    pub migrate_cost: f64,
}

impl Default for StragglerModel {
    fn default() -> Self {
        StragglerModel {
            mode: Stragglers::None,
            every_gang: false,
            max_shrink: 0.2,
            overhead: 0.03,
            migrate_cost: 60.0,
        }
    }
}

/// Which remedy a group got and at what rate (relative to a median GPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupRate {
    pub remedy: Stragglers,
    pub rate: f64,
}

impl StragglerModel {
    /// Rate of a synchronous group on GPUs of effective speeds `speeds` (non-empty),
    /// for a job of `work` work units at rate 1.
    pub fn group_rate(&self, speeds: &[f64], work: f64) -> GroupRate {
        let slowest = speeds.iter().copied().fold(f64::INFINITY, f64::min);
        let none = GroupRate { remedy: Stragglers::None, rate: slowest };
        if speeds.len() < 2 {
            return none;
        }
        let mean = speeds.iter().sum::<f64>() / speeds.len() as f64;
        let shrink =
            GroupRate { remedy: Stragglers::Shrink, rate: mean.min(slowest / (1.0 - self.max_shrink)) };
        let steady = mean * (1.0 - self.overhead);
        let migrate_rate = if work > 0.0 { work / (work / steady + self.migrate_cost) } else { steady };
        let migrate = GroupRate { remedy: Stragglers::Migrate, rate: migrate_rate };
        match self.mode {
            Stragglers::None => none,
            Stragglers::Shrink => shrink,
            Stragglers::Migrate => migrate,
            // Shrink never falls below doing nothing, so auto compares the two remedies;
            // ties go to shrink, which moves nothing.
            Stragglers::Auto => {
                if migrate.rate > shrink.rate {
                    migrate
                } else {
                    shrink
                }
            }
        }
    }
}

/// An inner rate model times the job's speed on its GPUs' factors.
pub struct VariabilityRates {
    inner: Box<dyn RateModel>,
    model: StragglerModel,
}

impl std::fmt::Debug for VariabilityRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VariabilityRates").field("model", &self.model).finish_non_exhaustive()
    }
}

impl VariabilityRates {
    pub fn new(inner: Box<dyn RateModel>, model: StragglerModel) -> VariabilityRates {
        VariabilityRates { inner, model }
    }

    /// The job's speed on `placed` relative to median GPUs (1.0 without factors).
    pub fn factor(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let factors = &placed.cluster.spec().gpu_speed;
        if factors.is_empty() || placed.gpus.is_empty() {
            return 1.0;
        }
        let alpha = job.profile.sensitivity.clamp(0.0, 1.0);
        let speeds: Vec<f64> = placed
            .gpus
            .iter()
            .map(|g| 1.0 - alpha * (1.0 - factors.get(g.index()).copied().unwrap_or(1.0)))
            .collect();
        let tensor = match job.profile.layout {
            Some(layout) if layout.tensor > 1 => layout.tensor as usize,
            _ if self.model.every_gang => speeds.len(),
            _ => 1,
        };
        if tensor < 2 || self.model.mode == Stragglers::None {
            return speeds.iter().copied().fold(f64::INFINITY, f64::min);
        }
        speeds
            .chunks(tensor)
            .map(|group| self.model.group_rate(group, job.work).rate)
            .fold(f64::INFINITY, f64::min)
    }
}

impl RateModel for VariabilityRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let base = self.inner.rate(job, placed);
        if placed.cluster.spec().gpu_speed.is_empty() {
            return base;
        }
        base * self.factor(job, placed)
    }
}
