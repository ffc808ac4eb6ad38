//! MIG (multi-instance GPU): a GPU type's partition geometry as data, partitions
//! validated against it, and the engine's per-GPU MIG state.
//!
//! A MIG GPU has `memory_slots` memory slots (8 on A100, H100 and H200) and 7
//! compute slices. A profile (`3g.20gb`) takes `compute_slices` compute slices and
//! `memory_slots` consecutive memory slots starting at one of its allowed start
//! slots. A partition is a set of instances (profile, start slot); it is valid
//! when no two instances share a memory slot, compute slices sum to at most 7,
//! every start is one its profile allows, no profile exceeds its instance count,
//! and (unless the geometry allows it) a 4-slice instance never sits beside a
//! 3-slice one. The geometry itself comes from a data file (see
//! `cotenant_trace::mig`); nothing here hard-codes a GPU.
//!
//! Besides partitions, a MIG-capable GPU may be in MPS mode (MIG off, several
//! jobs sharing the whole GPU through MPS): MISO's short profiling phase.

use crate::ids::{GpuId, GpuTypeId, JobId};

/// Compute slices of a whole MIG GPU.
pub const MIG_COMPUTE_SLICES: u8 = 7;
/// Most memory slots a geometry may declare (bits of a `u16` mask).
pub const MAX_MEMORY_SLOTS: u8 = 16;
/// Most jobs one GPU may hold in MPS mode (MISO co-locates at most 7 per GPU).
pub const MAX_MPS_JOBS: u32 = 7;
/// Most profiles a geometry may declare (real GPUs have 5 or 6).
pub const MAX_PROFILES: usize = 16;
/// Most valid partitions (counting start slots) a geometry may have: the search
/// enumerates them, so a made-up geometry cannot make every decision explode.
/// The bundled A100-40GB, H100-80GB and H200 have far fewer.
pub const MAX_PARTITIONS: usize = 20_000;

/// One MIG profile of a GPU type (`1g.5gb`, `3g.40gb`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigProfile {
    pub name: String,
    /// Compute slices (the `Ng` of the name), 1..=7.
    pub compute_slices: u8,
    /// Consecutive memory slots an instance occupies.
    pub memory_slots: u8,
    /// Memory slots an instance may start at.
    pub starts: Vec<u8>,
    /// Most instances of this profile on one GPU.
    pub max_instances: u8,
    /// Streaming multiprocessors of one instance.
    pub sms: u32,
}

/// The MIG geometry of one GPU type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigGeometry {
    /// GPU type name as the cluster names it (`A100-40GB`).
    pub gpu: String,
    pub memory_slots: u8,
    pub profiles: Vec<MigProfile>,
    /// Whether a 4-slice and a 3-slice instance may share a GPU (sources differ).
    pub allow_4g_3g: bool,
}

/// One instance of a partition: a profile (index into `MigGeometry::profiles`) at a start slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MigInstance {
    pub profile: u8,
    pub start: u8,
}

/// How a MIG-capable GPU is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigLayout {
    /// MIG on, with these instances (sorted by start slot).
    Partition(Vec<MigInstance>),
    /// MIG off, jobs share the whole GPU through MPS (profiling).
    Mps,
}

/// A geometry or partition that is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigError {
    #[error("{gpu}: unknown MIG profile '{profile}' (known: {known})")]
    UnknownProfile { gpu: String, profile: String, known: String },
    #[error("{gpu}: profile {profile} may not start at memory slot {start} (allowed: {allowed:?})")]
    BadStart { gpu: String, profile: String, start: u8, allowed: Vec<u8> },
    #[error("{gpu}: instances {first} and {second} overlap at memory slot {slot}")]
    Overlap { gpu: String, first: String, second: String, slot: u8 },
    #[error("{gpu}: {count} instances of {profile}, at most {max} allowed")]
    TooManyInstances { gpu: String, profile: String, count: usize, max: u8 },
    #[error("{gpu}: compute slices sum to {slices}, more than {MIG_COMPUTE_SLICES}")]
    TooManySlices { gpu: String, slices: u32 },
    #[error("{gpu}: a 4g and a 3g instance together are not allowed (allow_4g_3g = false)")]
    FourThreeNotAllowed { gpu: String },
    #[error("{gpu}: profile {profile}: {field} {problem}")]
    BadProfile { gpu: String, profile: String, field: &'static str, problem: String },
    #[error("{gpu}: no placement of {partition} fits the GPU's memory slots")]
    NoPlacement { gpu: String, partition: String },
    #[error("{gpu}: {what} exceeds the limit of {limit} (core::mig::MAX_PROFILES, MAX_PARTITIONS)")]
    TooLarge { gpu: String, what: &'static str, limit: usize },
    #[error("{gpu}: memory_slots must be between 1 and {MAX_MEMORY_SLOTS}, got {slots}")]
    BadMemorySlots { gpu: String, slots: u8 },
}

impl MigGeometry {
    /// Checks the geometry's own data: slots, slices and starts in range, names unique.
    pub fn validate(&self) -> Result<(), MigError> {
        if self.memory_slots == 0 || self.memory_slots > MAX_MEMORY_SLOTS {
            return Err(MigError::BadMemorySlots { gpu: self.gpu.clone(), slots: self.memory_slots });
        }
        for (i, p) in self.profiles.iter().enumerate() {
            let bad = |field, problem: String| MigError::BadProfile {
                gpu: self.gpu.clone(),
                profile: p.name.clone(),
                field,
                problem,
            };
            if self.profiles[..i].iter().any(|q| q.name == p.name) {
                return Err(bad("name", "appears twice".into()));
            }
            if !(1..=MIG_COMPUTE_SLICES).contains(&p.compute_slices) {
                return Err(bad("compute_slices", format!("must be 1..=7, got {}", p.compute_slices)));
            }
            if p.memory_slots == 0 || p.memory_slots > self.memory_slots {
                return Err(bad(
                    "memory_slots",
                    format!("must be 1..={}, got {}", self.memory_slots, p.memory_slots),
                ));
            }
            if p.starts.is_empty() {
                return Err(bad("starts", "is empty".into()));
            }
            if let Some(&s) = p
                .starts
                .iter()
                .find(|&&s| u32::from(s) + u32::from(p.memory_slots) > u32::from(self.memory_slots))
            {
                return Err(bad(
                    "starts",
                    format!(
                        "start {s} + {} slots passes the GPU's {} slots",
                        p.memory_slots, self.memory_slots
                    ),
                ));
            }
            if p.max_instances == 0 || p.max_instances > MIG_COMPUTE_SLICES {
                return Err(bad("max_instances", format!("must be 1..=7, got {}", p.max_instances)));
            }
        }
        let too_large = |what, limit| Err(MigError::TooLarge { gpu: self.gpu.clone(), what, limit });
        if self.profiles.len() > MAX_PROFILES {
            return too_large("the number of profiles", MAX_PROFILES);
        }
        if self.enumerate(MAX_PARTITIONS + 1).len() > MAX_PARTITIONS {
            return too_large("the number of valid partitions", MAX_PARTITIONS);
        }
        Ok(())
    }

    /// The profile called `name`, or an error listing the known ones.
    pub fn profile_index(&self, name: &str) -> Result<u8, MigError> {
        self.profiles.iter().position(|p| p.name == name).map(|i| i as u8).ok_or_else(|| {
            MigError::UnknownProfile {
                gpu: self.gpu.clone(),
                profile: name.to_string(),
                known: self.profiles.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
            }
        })
    }

    pub fn profile(&self, instance: MigInstance) -> Option<&MigProfile> {
        self.profiles.get(usize::from(instance.profile))
    }

    /// Compute slices of an instance (0 for an unknown profile).
    pub fn compute_slices(&self, instance: MigInstance) -> u8 {
        self.profile(instance).map_or(0, |p| p.compute_slices)
    }

    /// Memory-slot mask of an instance.
    fn mask(&self, instance: MigInstance) -> u16 {
        let slots = self.profile(instance).map_or(0, |p| p.memory_slots);
        (((1u32 << slots) - 1) << instance.start) as u16
    }

    /// Checks a partition against the geometry (see the module doc for the rules).
    pub fn check_partition(&self, instances: &[MigInstance]) -> Result<(), MigError> {
        let gpu = || self.gpu.clone();
        let mut used: u16 = 0;
        let mut slices: u32 = 0;
        let mut counts = vec![0usize; self.profiles.len()];
        for (i, &instance) in instances.iter().enumerate() {
            let Some(profile) = self.profile(instance) else {
                return Err(MigError::UnknownProfile {
                    gpu: gpu(),
                    profile: format!("#{}", instance.profile),
                    known: self.profiles.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
                });
            };
            if !profile.starts.contains(&instance.start) {
                return Err(MigError::BadStart {
                    gpu: gpu(),
                    profile: profile.name.clone(),
                    start: instance.start,
                    allowed: profile.starts.clone(),
                });
            }
            let mask = self.mask(instance);
            if used & mask != 0 {
                let other =
                    instances[..i].iter().find(|&&o| self.mask(o) & mask != 0).copied().unwrap_or(instance);
                return Err(MigError::Overlap {
                    gpu: gpu(),
                    first: self.describe(other),
                    second: self.describe(instance),
                    slot: (used & mask).trailing_zeros() as u8,
                });
            }
            used |= mask;
            slices += u32::from(profile.compute_slices);
            counts[usize::from(instance.profile)] += 1;
            if counts[usize::from(instance.profile)] > usize::from(profile.max_instances) {
                return Err(MigError::TooManyInstances {
                    gpu: gpu(),
                    profile: profile.name.clone(),
                    count: counts[usize::from(instance.profile)],
                    max: profile.max_instances,
                });
            }
        }
        if slices > u32::from(MIG_COMPUTE_SLICES) {
            return Err(MigError::TooManySlices { gpu: gpu(), slices });
        }
        let has = |n: u8| instances.iter().any(|&i| self.compute_slices(i) == n);
        if !self.allow_4g_3g && has(4) && has(3) {
            return Err(MigError::FourThreeNotAllowed { gpu: gpu() });
        }
        Ok(())
    }

    /// `3g.20gb@4`: an instance as text.
    pub fn describe(&self, instance: MigInstance) -> String {
        let name = self.profile(instance).map_or("?", |p| p.name.as_str());
        format!("{name}@{}", instance.start)
    }

    /// Every valid non-empty partition, instances sorted by start, in a fixed order
    /// (depth-first over instances by start slot, then profile).
    pub fn partitions(&self) -> Vec<Vec<MigInstance>> {
        self.enumerate(MAX_PARTITIONS)
    }

    /// At most `limit` partitions, in [`MigGeometry::partitions`] order.
    fn enumerate(&self, limit: usize) -> Vec<Vec<MigInstance>> {
        let mut candidates: Vec<MigInstance> = self
            .profiles
            .iter()
            .enumerate()
            .flat_map(|(p, profile)| {
                profile.starts.iter().map(move |&start| MigInstance { profile: p as u8, start })
            })
            .collect();
        candidates.sort_by_key(|i| (i.start, i.profile));
        let mut out = Vec::new();
        let mut current = Vec::new();
        self.extend_partitions(&candidates, 0, 0, &mut current, &mut out, limit);
        out
    }

    fn extend_partitions(
        &self,
        candidates: &[MigInstance],
        from: usize,
        used: u16,
        current: &mut Vec<MigInstance>,
        out: &mut Vec<Vec<MigInstance>>,
        limit: usize,
    ) {
        for (i, &candidate) in candidates.iter().enumerate().skip(from) {
            if out.len() >= limit {
                return;
            }
            if used & self.mask(candidate) != 0 {
                continue;
            }
            current.push(candidate);
            if self.check_partition(current).is_ok() {
                out.push(current.clone());
                self.extend_partitions(candidates, i + 1, used | self.mask(candidate), current, out, limit);
            }
            current.pop();
        }
    }

    /// One partition per distinct multiset of profiles (the first in
    /// [`MigGeometry::partitions`] order): what a throughput search needs, since
    /// start slots do not change speed.
    pub fn distinct_partitions(&self) -> Vec<Vec<MigInstance>> {
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut out = Vec::new();
        for partition in self.partitions() {
            let mut key: Vec<u8> = partition.iter().map(|i| i.profile).collect();
            key.sort_unstable();
            if !seen.contains(&key) {
                seen.push(key);
                out.push(partition);
            }
        }
        out
    }

    /// A partition written as profile names joined by `+` (`4g.20gb+2g.10gb+1g.5gb`),
    /// placed at the first start slots that work. Unknown profiles and impossible
    /// partitions are errors naming the profile or the rule broken.
    pub fn partition_from_names(&self, text: &str) -> Result<Vec<MigInstance>, MigError> {
        let mut wanted = Vec::new();
        for name in text.split('+').map(str::trim) {
            wanted.push(self.profile_index(name)?);
        }
        wanted.sort_unstable();
        let found = self.partitions().into_iter().find(|candidate| {
            let mut p: Vec<u8> = candidate.iter().map(|i| i.profile).collect();
            p.sort_unstable();
            p == wanted
        });
        if let Some(partition) = found {
            return Ok(partition);
        }
        // No placement works: name the rule the profiles break, if one does.
        let gpu = self.gpu.clone();
        let slices_of =
            |n: u8| wanted.iter().filter(|&&p| self.profiles[usize::from(p)].compute_slices == n).count();
        if !self.allow_4g_3g && slices_of(4) > 0 && slices_of(3) > 0 {
            return Err(MigError::FourThreeNotAllowed { gpu });
        }
        let slices: u32 =
            wanted.iter().map(|&p| u32::from(self.profiles[usize::from(p)].compute_slices)).sum();
        if slices > u32::from(MIG_COMPUTE_SLICES) {
            return Err(MigError::TooManySlices { gpu, slices });
        }
        for (p, profile) in self.profiles.iter().enumerate() {
            let count = wanted.iter().filter(|&&w| usize::from(w) == p).count();
            if count > usize::from(profile.max_instances) {
                return Err(MigError::TooManyInstances {
                    gpu,
                    profile: profile.name.clone(),
                    count,
                    max: profile.max_instances,
                });
            }
        }
        Err(MigError::NoPlacement { gpu, partition: text.to_string() })
    }

    /// The whole-GPU instance (the profile with every compute slice), if the geometry has one.
    pub fn whole_gpu(&self) -> Option<MigInstance> {
        let p = self.profiles.iter().position(|p| p.compute_slices == MIG_COMPUTE_SLICES)?;
        let start = *self.profiles[p].starts.first()?;
        Some(MigInstance { profile: p as u8, start })
    }
}

/// MIG geometries by GPU type (index = `GpuTypeId`); `None` where a type has no MIG.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigModel {
    pub geometries: Vec<Option<MigGeometry>>,
}

/// Where in a MIG GPU a job runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigPlace {
    /// Alone in an instance with `compute_slices` compute slices.
    Instance { start: u8, compute_slices: u8 },
    /// On the whole GPU under MPS with `sharers` jobs (itself included).
    Mps { sharers: u32 },
}

/// A job's MIG placement (on `JobState::mig`): the GPU and where on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigSlot {
    pub gpu: GpuId,
    pub place: MigPlace,
}

/// Where a policy asks to start a job on a MIG GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigTarget {
    /// The instance starting at this memory slot.
    Instance { start: u8 },
    /// The GPU in MPS mode.
    Mps,
}

/// One GPU's MIG state: its layout (`None`: never configured) and its jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigGpu {
    pub layout: Option<MigLayout>,
    /// Jobs on the GPU: in an instance (by start slot) or under MPS (`None`).
    pub jobs: Vec<(JobId, Option<u8>)>,
}

/// The engine's MIG state: geometry per GPU and each GPU's layout and jobs.
///
/// Invariants (checked by the engine on every action, and by property tests):
/// every layout is a valid partition of its GPU's geometry or MPS; an instance
/// holds at most one job; a job is in an instance of the current layout, or the
/// layout is MPS with at most [`MAX_MPS_JOBS`] jobs.
#[derive(Clone, Debug)]
pub struct MigState {
    model: MigModel,
    gpu_types: Vec<GpuTypeId>,
    gpus: Vec<MigGpu>,
}

impl MigState {
    /// State for a cluster whose GPUs have the given types (index = `GpuId`).
    pub fn new(model: MigModel, gpu_types: Vec<GpuTypeId>) -> MigState {
        let gpus = vec![MigGpu::default(); gpu_types.len()];
        MigState { model, gpu_types, gpus }
    }
    /// The GPU's geometry, if its type has MIG.
    pub fn geometry(&self, gpu: GpuId) -> Option<&MigGeometry> {
        let t = self.gpu_types.get(gpu.index())?;
        self.model.geometries.get(t.index())?.as_ref()
    }
    pub fn gpu(&self, gpu: GpuId) -> Option<&MigGpu> {
        self.gpus.get(gpu.index())
    }
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
    pub fn layout(&self, gpu: GpuId) -> Option<&MigLayout> {
        self.gpus.get(gpu.index())?.layout.as_ref()
    }
    /// Whether the GPU holds any MIG or MPS job.
    pub fn is_busy(&self, gpu: GpuId) -> bool {
        self.gpus.get(gpu.index()).is_some_and(|g| !g.jobs.is_empty())
    }
    /// Compute slices MIG and MPS jobs use, over all GPUs (the cluster counts
    /// their GPUs free: no whole-GPU job owns them): an occupied instance's
    /// slices, and all [`MIG_COMPUTE_SLICES`] of a GPU with MPS jobs on it.
    /// A partitioned GPU's empty instances and unpartitioned slices are idle.
    pub fn held_compute_slices(&self) -> u32 {
        let mut slices = 0;
        for (index, state) in self.gpus.iter().enumerate() {
            if state.jobs.is_empty() {
                continue;
            }
            let gpu = GpuId(index as u32);
            slices += match (&state.layout, self.geometry(gpu)) {
                (Some(MigLayout::Partition(_)), Some(geometry)) => state
                    .jobs
                    .iter()
                    .filter_map(|&(_, start)| self.instance_at(gpu, start?))
                    .map(|instance| u32::from(geometry.compute_slices(instance)))
                    .sum(),
                _ => u32::from(MIG_COMPUTE_SLICES),
            };
        }
        slices
    }
    /// Whether the GPU is configured for MIG or MPS (whole-GPU starts refused).
    pub fn is_configured(&self, gpu: GpuId) -> bool {
        self.layout(gpu).is_some()
    }

    /// Why `layout` may not replace the GPU's current one now: an invalid
    /// partition, or a job still in an instance the change removes.
    pub(crate) fn check_reconfigure(&self, gpu: GpuId, layout: &MigLayout) -> Result<(), MigRefusal> {
        let Some(geometry) = self.geometry(gpu) else { return Err(MigRefusal::NotMig) };
        if let MigLayout::Partition(instances) = layout {
            geometry.check_partition(instances).map_err(|e| MigRefusal::Invalid(Box::new(e)))?;
        }
        let state = &self.gpus[gpu.index()];
        for &(job, start) in &state.jobs {
            let kept = match (layout, start) {
                (MigLayout::Partition(new), Some(start)) => {
                    let old = self.instance_at(gpu, start);
                    old.is_some_and(|old| new.contains(&old))
                }
                _ => false,
            };
            if !kept {
                return Err(MigRefusal::Busy(job));
            }
        }
        Ok(())
    }

    pub(crate) fn set_layout(&mut self, gpu: GpuId, layout: MigLayout) {
        let layout = match layout {
            MigLayout::Partition(mut instances) => {
                instances.sort_by_key(|i| i.start);
                MigLayout::Partition(instances)
            }
            MigLayout::Mps => MigLayout::Mps,
        };
        self.gpus[gpu.index()].layout = Some(layout);
    }

    /// The instance of the current partition that starts at `start`.
    pub fn instance_at(&self, gpu: GpuId, start: u8) -> Option<MigInstance> {
        match self.layout(gpu)? {
            MigLayout::Partition(instances) => instances.iter().find(|i| i.start == start).copied(),
            MigLayout::Mps => None,
        }
    }

    /// Where `target` puts a job now, or why it cannot.
    pub(crate) fn check_start(&self, gpu: GpuId, target: MigTarget) -> Result<MigPlace, MigRefusal> {
        let Some(geometry) = self.geometry(gpu) else { return Err(MigRefusal::NotMig) };
        let state = &self.gpus[gpu.index()];
        match (target, &state.layout) {
            (MigTarget::Instance { start }, Some(MigLayout::Partition(_))) => {
                let instance = self.instance_at(gpu, start).ok_or(MigRefusal::NoSuchInstance)?;
                if state.jobs.iter().any(|&(_, s)| s == Some(start)) {
                    return Err(MigRefusal::Occupied);
                }
                Ok(MigPlace::Instance { start, compute_slices: geometry.compute_slices(instance) })
            }
            (MigTarget::Mps, Some(MigLayout::Mps)) => {
                let sharers = state.jobs.len() as u32 + 1;
                if sharers > MAX_MPS_JOBS {
                    return Err(MigRefusal::Occupied);
                }
                Ok(MigPlace::Mps { sharers })
            }
            _ => Err(MigRefusal::WrongMode),
        }
    }

    /// Records `job` at `place`; returns the other MPS jobs whose sharing changed.
    pub(crate) fn occupy(&mut self, gpu: GpuId, job: JobId, place: MigPlace) -> Vec<JobId> {
        let state = &mut self.gpus[gpu.index()];
        match place {
            MigPlace::Instance { start, .. } => {
                state.jobs.push((job, Some(start)));
                Vec::new()
            }
            MigPlace::Mps { .. } => {
                let peers = state.jobs.iter().map(|&(j, _)| j).collect();
                state.jobs.push((job, None));
                peers
            }
        }
    }

    /// Removes `job` from its GPU; returns the MPS jobs left there (their sharing changed).
    pub(crate) fn release(&mut self, gpu: GpuId, job: JobId) -> Vec<JobId> {
        let Some(state) = self.gpus.get_mut(gpu.index()) else { return Vec::new() };
        let before = state.jobs.len();
        state.jobs.retain(|&(j, _)| j != job);
        assert_eq!(state.jobs.len() + 1, before, "{job} was on MIG GPU {gpu}");
        match state.layout {
            Some(MigLayout::Mps) => state.jobs.iter().map(|&(j, _)| j).collect(),
            _ => Vec::new(),
        }
    }

    /// Jobs on the given GPUs.
    pub fn jobs_on(&self, gpus: impl Iterator<Item = GpuId>) -> Vec<JobId> {
        gpus.filter_map(|g| self.gpus.get(g.index())).flat_map(|g| g.jobs.iter().map(|&(j, _)| j)).collect()
    }
}

/// Why the engine refused a MIG action (wrapped in a `Violation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigRefusal {
    /// The GPU's type has no MIG geometry (or MIG is not enabled for the run).
    NotMig,
    /// Boxed: it carries names, and `Violation` should stay small.
    Invalid(Box<MigError>),
    /// This job runs in an instance the reconfiguration removes.
    Busy(JobId),
    /// A whole-GPU job holds the GPU.
    HeldWhole,
    NoSuchInstance,
    Occupied,
    /// An instance asked for on a GPU in MPS mode, or MPS on a partitioned one.
    WrongMode,
}
