//! MISO (SoCC'22) on MIG GPUs, and its baselines: unpartitioned GPUs, one
//! static partition everywhere, and MISO with an oracle predictor.
//!
//! MISO: a new job goes (FIFO) to the eligible GPU with the fewest jobs. Alone
//! it gets the whole GPU (7g). Otherwise every job of that GPU moves to MPS
//! mode for a short profiling phase (30 s); then a predictor gives each job's
//! speed on each slice size (the true curve times 1 +- e, e ~ N(1.6%, 0.32%),
//! drawn from the run's seeded stream), and the partition and assignment with
//! the most total normalized throughput (exhaustive search, `mig_search`) is
//! applied. When a job leaves, the survivors are re-optimized with their
//! predictions. Every restart (to MPS, to a new instance) pays the world's
//! restore overhead: that is the reconfiguration cost. A job keeps running
//! when its instance survives a reconfiguration.
//!
//! The profiler lives here rather than in the simulator: the engine has no
//! input for "profile measured", so MPS measurement and MISO's predictor are
//! modelled together as a noisy draw from the job's true curve at the end of
//! the profiling phase, while the jobs really run (slower) under MPS.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cotenant_core::mig::{MigGeometry, MigInstance, MigLayout, MigState, MigTarget, MIG_COMPUTE_SLICES};
use cotenant_core::{
    Action, ClusterView, Decision, GpuId, JobChange, JobId, JobState, Policy, PolicyCx, Span, Time,
    WaitReason,
};
use cotenant_perf::slice_speed::SliceCurve;
use rand::Rng;

use crate::greedy::SCAN_LIMIT;
use crate::mig_search::{best_plan, speeds_of, Plan, Speeds};

/// MISO's MPS profiling phase.
pub const PROFILE_TIME: Span = Span(30_000_000);
/// MISO's predictor error: mean and standard deviation of the relative error.
pub const PREDICTION_ERROR_MEAN: f64 = 0.016;
pub const PREDICTION_ERROR_STD: f64 = 0.0032;

/// What MIG policies read: the curves per job type and the geometries.
#[derive(Clone, Debug, Default)]
pub struct MigData {
    /// Speed-versus-slice curve per job type (index = `JobSpec::job_type`).
    pub curves: Vec<SliceCurve>,
    pub geometries: Vec<MigGeometry>,
}

/// Shared by the MIG policies: curves by job, partitions by geometry.
#[derive(Debug)]
struct Knowledge {
    data: Arc<MigData>,
    linear: SliceCurve,
    /// Distinct valid partitions per geometry, by GPU type name.
    partitions: BTreeMap<String, Arc<Vec<Vec<MigInstance>>>>,
}

impl Knowledge {
    fn new(data: Arc<MigData>) -> Knowledge {
        let partitions =
            data.geometries.iter().map(|g| (g.gpu.clone(), Arc::new(g.distinct_partitions()))).collect();
        Knowledge { data, linear: SliceCurve::linear(), partitions }
    }

    /// The job's true curve (the linear one if its type has none).
    fn curve(&self, job: &JobState) -> &SliceCurve {
        job.spec.job_type.and_then(|t| self.data.curves.get(t as usize)).unwrap_or(&self.linear)
    }

    fn partitions(&self, geometry: &MigGeometry) -> Arc<Vec<Vec<MigInstance>>> {
        match self.partitions.get(&geometry.gpu) {
            Some(p) => p.clone(),
            None => Arc::new(geometry.distinct_partitions()),
        }
    }
}

/// Whether a GPU can take a job now: MIG-capable, its node up, no whole-GPU job on it.
fn usable<'a>(view: &ClusterView<'a>, mig: &'a MigState, gpu: GpuId) -> Option<&'a MigGeometry> {
    let up = view.cluster.is_up(view.cluster.node_of(gpu));
    mig.geometry(gpu).filter(|_| up && view.cluster.owner(gpu).is_none())
}

/// Verdicts for jobs a MIG policy cannot consider at all.
fn no_mig(view: &ClusterView<'_>) -> Decision {
    let waiting = view.pending.iter().take(SCAN_LIMIT).map(|&id| (id, WaitReason::NoUsableGpuType)).collect();
    Decision { actions: Vec::new(), waiting }
}

/// MISO, or (with `oracle`) MISO that knows the true curves and skips profiling.
#[derive(Debug)]
pub struct Miso {
    knowledge: Knowledge,
    oracle: bool,
    profile_time: Span,
    predicted: BTreeMap<JobId, Speeds>,
    job_gpu: BTreeMap<JobId, GpuId>,
    profiling_until: BTreeMap<GpuId, Time>,
}

/// One decision's working state.
struct Pass<'v, 'a> {
    view: &'v ClusterView<'a>,
    mig: &'a MigState,
    jobs_on: Vec<Vec<JobId>>,
    touched: BTreeSet<GpuId>,
    decision: Decision,
}

impl Miso {
    pub fn new(data: Arc<MigData>, oracle: bool, profile_time: Span) -> Miso {
        Miso {
            knowledge: Knowledge::new(data),
            oracle,
            profile_time,
            predicted: BTreeMap::new(),
            job_gpu: BTreeMap::new(),
            profiling_until: BTreeMap::new(),
        }
    }

    /// The speeds the policy believes: the truth for the oracle, else the
    /// prediction (drawn once per job, at its first profiling).
    fn speeds(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>, job: JobId) -> Speeds {
        let truth = speeds_of(self.knowledge.curve(view.job(job)));
        if self.oracle {
            return truth;
        }
        *self.predicted.entry(job).or_insert_with(|| predict(cx, truth))
    }

    fn track_changes(&mut self, view: &ClusterView<'_>) -> BTreeSet<GpuId> {
        let mut dirty = BTreeSet::new();
        for change in view.changes {
            match *change {
                JobChange::Completed(job) | JobChange::Ended(job) => {
                    self.predicted.remove(&job);
                    dirty.extend(self.job_gpu.remove(&job));
                }
                JobChange::Stopped(job) => dirty.extend(self.job_gpu.remove(&job)),
                JobChange::Started(job) => {
                    if let Some(slot) = view.job(job).mig {
                        self.job_gpu.insert(job, slot.gpu);
                    }
                }
                // MIG jobs are one-GPU and rigid: never resized.
                JobChange::Submitted(_) | JobChange::Resized(_) => {}
            }
        }
        dirty
    }

    /// Plans `jobs` on `gpu` with the speeds the policy believes.
    fn plan(
        &mut self,
        cx: &mut PolicyCx<'_>,
        pass: &Pass<'_, '_>,
        gpu: GpuId,
        jobs: &[JobId],
    ) -> Option<Plan> {
        let geometry = pass.mig.geometry(gpu)?;
        let speeds: Vec<Speeds> = jobs.iter().map(|&j| self.speeds(cx, pass.view, j)).collect();
        best_plan(geometry, &self.knowledge.partitions(geometry), &speeds)
    }

    /// Re-optimizes a GPU whose job set changed; no action when every job would
    /// keep its slice size.
    fn reoptimize(&mut self, cx: &mut PolicyCx<'_>, pass: &mut Pass<'_, '_>, gpu: GpuId) {
        let jobs = pass.jobs_on[gpu.index()].clone();
        if jobs.is_empty() || self.profiling_until.contains_key(&gpu) {
            return;
        }
        let Some(plan) = self.plan(cx, pass, gpu, &jobs) else { return };
        let (Some(geometry), Some(MigLayout::Partition(_))) = (pass.mig.geometry(gpu), pass.mig.layout(gpu))
        else {
            return;
        };
        let unchanged = jobs.iter().enumerate().all(|(i, &job)| {
            let now = pass.view.job(job).mig.map(|slot| match slot.place {
                cotenant_core::mig::MigPlace::Instance { compute_slices, .. } => compute_slices,
                cotenant_core::mig::MigPlace::Mps { .. } => 0,
            });
            now == Some(geometry.compute_slices(plan.partition[plan.instance[i]]))
        });
        if !unchanged {
            apply_plan(pass, gpu, &plan, &jobs);
        }
    }

    fn place(&mut self, cx: &mut PolicyCx<'_>, pass: &mut Pass<'_, '_>, job: JobId) -> bool {
        let view = pass.view;
        let mut best: Option<(usize, GpuId)> = None;
        for g in 0..pass.mig.gpu_count() {
            let gpu = GpuId(g as u32);
            let count = pass.jobs_on[g].len();
            let Some(geometry) = usable(view, pass.mig, gpu) else { continue };
            if self.profiling_until.contains_key(&gpu)
                || pass.touched.contains(&gpu)
                || count >= usize::from(MIG_COMPUTE_SLICES)
                || best.is_some_and(|(c, _)| c <= count)
            {
                continue;
            }
            // Eligible: some partition fits every job's memory (fit is known at submission).
            let fits: Vec<Speeds> = pass.jobs_on[g]
                .iter()
                .chain([&job])
                .map(|&j| speeds_of(self.knowledge.curve(view.job(j))).map(|s| f64::from(u8::from(s > 0.0))))
                .collect();
            if best_plan(geometry, &self.knowledge.partitions(geometry), &fits).is_some() {
                best = Some((count, gpu));
            }
        }
        let Some((count, gpu)) = best else { return false };
        let mut jobs = pass.jobs_on[gpu.index()].clone();
        jobs.push(job);
        // Alone, a job gets the whole GPU; the oracle plans at once.
        let plan = if count == 0 {
            let whole = pass.mig.geometry(gpu).and_then(MigGeometry::whole_gpu);
            whole.map(|w| Plan { partition: vec![w], instance: vec![0], throughput: 1.0 })
        } else if self.oracle {
            self.plan(cx, pass, gpu, &jobs)
        } else {
            None
        };
        if (count == 0 || self.oracle) && plan.is_none() {
            return false;
        }
        pass.touched.insert(gpu);
        self.job_gpu.insert(job, gpu);
        if let Some(plan) = plan {
            apply_plan(pass, gpu, &plan, &jobs);
        } else {
            for &j in &pass.jobs_on[gpu.index()] {
                pass.decision.actions.push(Action::Preempt { job: j });
            }
            pass.decision.actions.push(Action::MigReconfigure { gpu, layout: MigLayout::Mps });
            for &j in &jobs {
                pass.decision.actions.push(Action::MigStart { job: j, gpu, target: MigTarget::Mps });
            }
            self.profiling_until.insert(gpu, view.now + self.profile_time);
        }
        pass.jobs_on[gpu.index()] = jobs;
        true
    }
}

/// Moves `jobs` (all on `gpu`, running or just placed) into `plan`: a job
/// whose current instance is its planned one keeps running; the others are
/// stopped (if running) and started in their planned instance.
fn apply_plan(pass: &mut Pass<'_, '_>, gpu: GpuId, plan: &Plan, jobs: &[JobId]) {
    let mut starts = Vec::new();
    for (i, &job) in jobs.iter().enumerate() {
        let target = plan.partition[plan.instance[i]];
        let state = pass.view.job(job);
        let current = state.mig.and_then(|slot| match slot.place {
            cotenant_core::mig::MigPlace::Instance { start, .. } => pass.mig.instance_at(gpu, start),
            cotenant_core::mig::MigPlace::Mps { .. } => None,
        });
        if state.is_running() && current == Some(target) {
            continue;
        }
        if state.is_running() {
            pass.decision.actions.push(Action::Preempt { job });
        }
        starts.push(Action::MigStart { job, gpu, target: MigTarget::Instance { start: target.start } });
    }
    if pass.mig.layout(gpu) != Some(&MigLayout::Partition(sorted(&plan.partition))) {
        pass.decision
            .actions
            .push(Action::MigReconfigure { gpu, layout: MigLayout::Partition(plan.partition.clone()) });
    }
    pass.decision.actions.extend(starts);
    pass.touched.insert(gpu);
}

fn sorted(instances: &[MigInstance]) -> Vec<MigInstance> {
    let mut v = instances.to_vec();
    v.sort_by_key(|i| i.start);
    v
}

/// MISO's predictor: each slice's true speed times 1 +- e, e ~ N(1.6%, 0.32%)
/// (Box-Muller on the run's stream); 7g stays 1 and a slice the job does not fit stays 0.
fn predict(cx: &mut PolicyCx<'_>, truth: Speeds) -> Speeds {
    let mut out = truth;
    for speed in out.iter_mut().take(usize::from(MIG_COMPUTE_SLICES)).skip(1) {
        let (u1, u2): (f64, f64) = (cx.rng.random(), cx.rng.random());
        let normal = (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let error = PREDICTION_ERROR_MEAN + PREDICTION_ERROR_STD * normal;
        let sign = if cx.rng.random::<bool>() { 1.0 } else { -1.0 };
        if *speed > 0.0 {
            *speed = (*speed * (1.0 + sign * error)).max(f64::MIN_POSITIVE);
        }
    }
    out
}

fn new_pass<'v, 'a>(view: &'v ClusterView<'a>, mig: &'a MigState) -> Pass<'v, 'a> {
    let jobs_on = (0..mig.gpu_count())
        .map(|g| {
            mig.gpu(GpuId(g as u32)).map(|s| s.jobs.iter().map(|&(j, _)| j).collect()).unwrap_or_default()
        })
        .collect();
    Pass { view, mig, jobs_on, touched: BTreeSet::new(), decision: Decision::default() }
}

/// Verdicts for the jobs left waiting behind `head`.
fn wait_behind(pass: &mut Pass<'_, '_>, head: JobId, reason: WaitReason) {
    for &id in pass.view.pending.iter().filter(|&&id| id >= head).take(SCAN_LIMIT) {
        let verdict = if id == head { reason } else { WaitReason::BehindHeadOfLine { head } };
        pass.decision.waiting.push((id, verdict));
    }
}

impl Policy for Miso {
    fn name(&self) -> &'static str {
        if self.oracle {
            "miso-oracle"
        } else {
            "miso"
        }
    }

    fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let Some(mig) = view.mig else { return no_mig(view) };
        let dirty = self.track_changes(view);
        let mut pass = new_pass(view, mig);
        let done: Vec<GpuId> =
            self.profiling_until.iter().filter(|&(_, &t)| t <= view.now).map(|(&g, _)| g).collect();
        for gpu in done {
            self.profiling_until.remove(&gpu);
            let jobs = pass.jobs_on[gpu.index()].clone();
            if jobs.is_empty() {
                continue;
            }
            if let Some(plan) = self.plan(cx, &pass, gpu, &jobs) {
                apply_plan(&mut pass, gpu, &plan, &jobs);
            }
        }
        for gpu in dirty {
            if !pass.touched.contains(&gpu) {
                self.reoptimize(cx, &mut pass, gpu);
            }
        }
        for &job in view.pending.iter().take(SCAN_LIMIT) {
            if view.job(job).spec.gpus != 1 {
                pass.decision.waiting.push((job, WaitReason::NoUsableGpuType));
                continue;
            }
            if !self.place(cx, &mut pass, job) {
                wait_behind(&mut pass, job, WaitReason::NoFreeGpus { needed: 1, free: 0 });
                break;
            }
        }
        pass.decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.profiling_until.values().min().copied()
    }
}

/// One fixed partition on every MIG GPU (`None`: the whole GPU, unpartitioned);
/// jobs in arrival order take the largest free instance they fit (one that fits
/// none waits without blocking later ones), never moving.
#[derive(Debug)]
pub struct MigStatic {
    knowledge: Knowledge,
    /// Profile names joined by `+`; `None`: the whole-GPU profile.
    partition: Option<String>,
    /// The partition as instances, per geometry (by GPU type name).
    layouts: BTreeMap<String, Vec<MigInstance>>,
}

impl MigStatic {
    /// Checks `partition` against every geometry it will meet.
    pub fn new(data: Arc<MigData>, partition: Option<String>) -> Result<MigStatic, String> {
        let mut layouts = BTreeMap::new();
        for geometry in &data.geometries {
            let layout = match &partition {
                Some(text) => geometry.partition_from_names(text).map_err(|e| e.to_string())?,
                None => geometry
                    .whole_gpu()
                    .map(|w| vec![w])
                    .ok_or(format!("{} has no 7g profile", geometry.gpu))?,
            };
            layouts.insert(geometry.gpu.clone(), sorted(&layout));
        }
        Ok(MigStatic { knowledge: Knowledge::new(data), partition, layouts })
    }
}

impl Policy for MigStatic {
    fn name(&self) -> &'static str {
        if self.partition.is_some() {
            "mig-static"
        } else {
            "mig-unpartitioned"
        }
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let Some(mig) = view.mig else { return no_mig(view) };
        let mut pass = new_pass(view, mig);
        // Free instances: (gpu, instance, compute slices).
        let mut free: Vec<(GpuId, MigInstance, u8)> = Vec::new();
        for g in 0..mig.gpu_count() {
            let gpu = GpuId(g as u32);
            let Some(geometry) = usable(view, mig, gpu) else { continue };
            let Some(wanted) = self.layouts.get(&geometry.gpu) else { continue };
            let layout = MigLayout::Partition(wanted.clone());
            if mig.layout(gpu) != Some(&layout) {
                if !pass.jobs_on[g].is_empty() {
                    continue;
                }
                pass.decision.actions.push(Action::MigReconfigure { gpu, layout });
            }
            let held: Vec<u8> = mig
                .gpu(gpu)
                .map(|s| s.jobs.iter().filter_map(|&(_, start)| start).collect())
                .unwrap_or_default();
            free.extend(
                wanted
                    .iter()
                    .filter(|i| !held.contains(&i.start))
                    .map(|&i| (gpu, i, geometry.compute_slices(i))),
            );
        }
        // Largest slices first, then GPU and start order.
        free.sort_by_key(|&(gpu, instance, slices)| (std::cmp::Reverse(slices), gpu, instance.start));
        let largest_slices = largest_slices(&self.knowledge.data.geometries, &self.layouts);
        for &job in view.pending.iter().take(SCAN_LIMIT) {
            let state = view.job(job);
            let curve = self.knowledge.curve(state);
            if !curve.fits(largest_slices) {
                // No instance of this partition holds the job's memory: it can never run here.
                pass.decision.waiting.push((job, WaitReason::NoUsableGpuType));
                continue;
            }
            let slot = free.iter().position(|&(_, _, slices)| curve.fits(slices));
            match slot.filter(|_| state.spec.gpus == 1) {
                Some(i) => {
                    let (gpu, instance, _) = free.remove(i);
                    pass.decision.actions.push(Action::MigStart {
                        job,
                        gpu,
                        target: MigTarget::Instance { start: instance.start },
                    });
                }
                None if state.spec.gpus != 1 => {
                    pass.decision.waiting.push((job, WaitReason::NoUsableGpuType))
                }
                None => pass
                    .decision
                    .waiting
                    .push((job, WaitReason::NoFreeGpus { needed: 1, free: free.len() as u32 })),
            }
        }
        pass.decision
    }
}

/// The most compute slices any instance of the static layouts has.
fn largest_slices(geometries: &[MigGeometry], layouts: &BTreeMap<String, Vec<MigInstance>>) -> u8 {
    geometries
        .iter()
        .filter_map(|g| {
            layouts.get(&g.gpu).map(|l| l.iter().map(|&i| g.compute_slices(i)).max().unwrap_or(0))
        })
        .max()
        .unwrap_or(0)
}
