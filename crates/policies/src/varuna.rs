//! Varuna morphing (EuroSys'22) as a policy wrapper, `varuna(BASE)`, with Varuna's
//! AutoConfig and a simple pipeline model of our own (docs/faults.md), plus
//! Komet-style migration of services ahead of known departures.
//!
//! - Morph down: an elastic job that lost GPUs (a node under it went down) and that
//!   BASE does not start restarts at once on the GPUs that are free, with the
//!   (pipeline depth P, data width D, micro-batch b) that AutoConfig picks for them
//!   and that keeps its global batch B, instead of waiting for its lost nodes.
//! - Morph up: a job running on fewer GPUs than it asked for grows back (an
//!   `Action::Resize`) when free GPUs give it a faster configuration.
//! - Komet: a running inference service with a GPU on a node that leaves within
//!   `lead` (`ClusterSpec::departures`) moves to free GPUs on nodes that stay
//!   (a preemption and a start in one decision) instead of being killed there.
//!
//! Without the wrapper the base policy waits for capacity: the baseline.
//!
//! The pipeline model (ours, stated in docs/faults.md): one GPU processes one
//! example (forward and backward over the whole model) in time tau, so a stage of
//! a P-deep pipeline takes b tau / P per micro-batch of b; a pipeline runs its m =
//! ceil(B / (D b)) micro-batches in (m + P - 1) stage slots (GPipe/1F1B; bubble
//! fraction (P - 1) / m of the ideal), so an iteration takes
//! T = (m + P - 1) b tau / P. Memory: the model needs at least `min_stages` stages,
//! and the largest micro-batch that fits grows with the share of the model a stage
//! holds: b_max(P) = the largest power of two <= `mbs_at_min` x P / `min_stages`.
//! AutoConfig (Varuna, section 4.3): for every P that divides the cut points with
//! P >= `min_stages`, D = floor(G / P), every power-of-two b <= b_max(P): the
//! fastest T; ties go to the smaller P, then the smaller b. Data-parallel
//! all-reduce time is not modelled (a stated limitation).

use std::collections::BTreeSet;

use cotenant_core::{
    Action, ClusterView, Decision, Departure, GpuId, JobChange, JobId, JobKind, JobSet, JobSpec, JobState,
    NodeId, Policy, PolicyCx, Span, Time,
};

/// The name form `varuna(BASE)`.
const PREFIX: &str = "varuna(";
/// The policies `varuna(BASE)` may wrap: their passes read the running jobs from the
/// view, which the wrapper gives without the jobs it runs below their request.
pub const BASES: &[&str] = &["fifo", "fifo-backfill", "sjf", "srtf", "las"];
/// How long before a known departure services move, when not given (option `lead`).
pub const DEFAULT_LEAD: Span = Span(600_000_000);

/// The pipeline model's parameters for one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineModel {
    /// Layers where the model may be cut into stages (Varuna's cut points).
    pub cut_points: u32,
    /// Global batch in examples, kept through every morph.
    pub batch: u32,
    /// Fewest stages the model fits in (memory).
    pub min_stages: u32,
    /// Largest micro-batch that fits at `min_stages` stages.
    pub mbs_at_min: u32,
}

impl PipelineModel {
    /// Defaults: 24 cut points (24-layer BERT-large or GPT-2 medium, Varuna's
    /// evaluation models), a global batch of 8192 (Varuna's BERT-large runs), micro-
    /// batch 8 at the fewest stages. A job that states a layout fits in its
    /// `pipeline` stages and no fewer.
    pub fn of(job: &JobSpec) -> PipelineModel {
        let min_stages = job.profile.layout.map_or(1, |l| l.pipeline.max(1));
        PipelineModel { cut_points: 24, batch: 8192, min_stages, mbs_at_min: 8 }
    }

    fn mbs_max(&self, pipeline: u32) -> u32 {
        let cap =
            (u64::from(self.mbs_at_min) * u64::from(pipeline) / u64::from(self.min_stages.max(1))).max(1);
        1 << (63 - cap.leading_zeros())
    }
}

/// A configuration AutoConfig chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PipelineConfig {
    pub pipeline: u32,
    pub data: u32,
    pub micro_batch: u32,
    /// Micro-batches per pipeline per iteration, ceil(B / (D b)).
    pub micro_batches: u32,
    /// Iteration time in units of tau (one example's compute on one GPU).
    pub iteration: f64,
}

impl PipelineConfig {
    /// GPUs it uses, P x D.
    pub fn gpus(&self) -> u32 {
        self.pipeline * self.data
    }
    /// Pipeline bubble relative to the ideal, (P - 1) / m.
    pub fn bubble(&self) -> f64 {
        f64::from(self.pipeline - 1) / f64::from(self.micro_batches)
    }
}

/// Varuna's AutoConfig on `gpus` GPUs: the fastest (P, D, b) under the pipeline
/// model; `None` if no depth fits in `gpus` GPUs.
pub fn autoconfig(gpus: u32, model: &PipelineModel) -> Option<PipelineConfig> {
    let mut best: Option<PipelineConfig> = None;
    for pipeline in
        (model.min_stages.max(1)..=gpus.min(model.cut_points)).filter(|p| model.cut_points.is_multiple_of(*p))
    {
        let data = gpus / pipeline;
        let mut micro_batch = 1;
        while micro_batch <= model.mbs_max(pipeline) {
            let micro_batches = model.batch.div_ceil(data * micro_batch);
            let iteration =
                f64::from(micro_batches + pipeline - 1) * f64::from(micro_batch) / f64::from(pipeline);
            if best.is_none_or(|b| iteration < b.iteration) {
                best = Some(PipelineConfig { pipeline, data, micro_batch, micro_batches, iteration });
            }
            micro_batch *= 2;
        }
    }
    best
}

/// Examples per tau on `gpus` GPUs (0 if none fits).
pub fn throughput(gpus: u32, model: &PipelineModel) -> f64 {
    autoconfig(gpus, model).map_or(0.0, |c| f64::from(model.batch) / c.iteration)
}

/// A job's speed on `gpus` GPUs relative to its speed on the GPUs it asked for.
pub fn relative_speed(job: &JobSpec, gpus: u32) -> f64 {
    let model = PipelineModel::of(job);
    let reference = throughput(job.gpus, &model);
    if reference <= 0.0 {
        return if gpus == job.gpus { 1.0 } else { 0.0 };
    }
    throughput(gpus, &model) / reference
}

/// The wrapper.
pub struct Varuna {
    name: &'static str,
    base: Box<dyn Policy>,
    lead: Span,
    /// Known departures, read from the cluster spec on the first pass.
    departures: Option<Vec<Departure>>,
    /// Jobs a node going down stopped, until they run again (the base's own
    /// preemptions are its business: the wrapper does not restart those).
    lost: BTreeSet<JobId>,
    /// Jobs the wrapper runs below their request. The base does not see them run
    /// (policies assume a running job holds its request): it cannot preempt them,
    /// and sees their GPUs as taken, until they are back at their request.
    morphed: BTreeSet<JobId>,
}

impl std::fmt::Debug for Varuna {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Varuna").field("name", &self.name).field("lead", &self.lead).finish()
    }
}

impl Varuna {
    pub fn new(name: &'static str, base: Box<dyn Policy>, lead: Span) -> Varuna {
        Varuna { name, base, lead, departures: None, lost: BTreeSet::new(), morphed: BTreeSet::new() }
    }

    /// Nodes that are gone or leave within `lead` of `now`.
    fn leaving(&self, now: Time) -> BTreeSet<NodeId> {
        self.departures
            .iter()
            .flatten()
            .filter(|d| d.leaves <= now + self.lead && d.returns.is_none_or(|r| r > now))
            .map(|d| d.node)
            .collect()
    }
}

/// Free GPUs by node, for the wrapper's own placements after the base's decision.
struct Free {
    nodes: Vec<(NodeId, Vec<GpuId>)>,
}

impl Free {
    fn new(view: &ClusterView<'_>, taken: &BTreeSet<GpuId>, avoid: &BTreeSet<NodeId>) -> Free {
        let cluster = view.cluster;
        let mut nodes = Vec::new();
        for n in 0..cluster.node_count() as u32 {
            let node = NodeId(n);
            if !cluster.is_up(node) || avoid.contains(&node) {
                continue;
            }
            let mask = cluster.free_mask(node);
            let gpus: Vec<GpuId> = (0..cluster.node(node).gpus)
                .filter(|slot| mask & (1u64 << slot) != 0)
                .map(|slot| cluster.gpu(node, slot))
                .filter(|g| !taken.contains(g))
                .collect();
            if !gpus.is_empty() {
                nodes.push((node, gpus));
            }
        }
        Free { nodes }
    }

    fn count(&self) -> u32 {
        self.nodes.iter().map(|(_, g)| g.len() as u32).sum()
    }

    /// `n` GPUs, consolidated: the best-fitting single node, else the most-free nodes first.
    fn take(&mut self, n: u32) -> Option<Vec<GpuId>> {
        if n == 0 || self.count() < n {
            return None;
        }
        let n = n as usize;
        let single = self.nodes.iter_mut().filter(|(_, g)| g.len() >= n).min_by_key(|(_, g)| g.len());
        let mut out: Vec<GpuId> = match single {
            Some((_, gpus)) => gpus.drain(..n).collect(),
            None => {
                self.nodes.sort_by_key(|(node, g)| (std::cmp::Reverse(g.len()), *node));
                let mut out = Vec::new();
                for (_, gpus) in &mut self.nodes {
                    let k = (n - out.len()).min(gpus.len());
                    out.extend(gpus.drain(..k));
                    if out.len() == n {
                        break;
                    }
                }
                out
            }
        };
        self.nodes.retain(|(_, g)| !g.is_empty());
        out.sort_unstable();
        Some(out)
    }
}

/// The largest useful GPU count for `job` with at most `available` GPUs: the one
/// AutoConfig makes fastest (ties: fewer GPUs), within its elastic range, never
/// above its request. `None` if none fits.
fn morph_size(job: &JobSpec, available: u32) -> Option<(u32, f64)> {
    let model = PipelineModel::of(job);
    let mut best: Option<(u32, f64)> = None;
    for gpus in job.min_gpus()..=available.min(job.gpus) {
        let Some(config) = autoconfig(gpus, &model) else { continue };
        let used = config.gpus();
        if !job.accepts_gpus(used) {
            continue;
        }
        let speed = f64::from(model.batch) / config.iteration;
        if best.is_none_or(|(_, s)| speed > s) {
            best = Some((used, speed));
        }
    }
    best
}

fn morphable(job: &JobState) -> bool {
    job.spec.elastic.is_some()
        && job.spec.kind != JobKind::Inference
        && job.partner.is_none()
        && job.mig.is_none()
}

impl Policy for Varuna {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schedule(&mut self, cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        if self.departures.is_none() {
            self.departures = Some(view.cluster.spec().departures.clone());
        }
        if view.trigger.node_change {
            // A job stopped in this very step, with nodes changing: a node under it went down.
            for change in view.changes {
                if let JobChange::Stopped(id) = *change {
                    if view.job(id).phase_since == view.now {
                        self.lost.insert(id);
                    }
                }
            }
        }
        self.lost.retain(|id| view.pending.contains(id));
        self.morphed.retain(|id| {
            view.running.contains(id) && view.job(*id).gpus.len() < view.job(*id).spec.gpus as usize
        });
        let mut decision = if self.morphed.is_empty() {
            self.base.schedule(cx, view)
        } else {
            let running: JobSet =
                view.running.iter().filter(|id| !self.morphed.contains(id)).copied().collect();
            self.base.schedule(cx, &view.with_running(&running))
        };
        let mut taken: BTreeSet<GpuId> = BTreeSet::new();
        let mut touched: BTreeSet<JobId> = BTreeSet::new();
        for action in &decision.actions {
            match action {
                Action::Start { job, gpus } | Action::Resize { job, gpus } => {
                    taken.extend(gpus.iter().copied());
                    touched.insert(*job);
                }
                Action::Preempt { job }
                | Action::End { job, .. }
                | Action::MigStart { job, .. }
                | Action::Allocate { job, .. }
                | Action::StartShared { job, .. } => {
                    touched.insert(*job);
                }
                Action::Share(share) => {
                    touched.insert(share.job);
                    touched.insert(share.partner);
                }
                Action::MigReconfigure { .. } => {}
            }
        }
        let leaving = self.leaving(view.now);
        let mut free = Free::new(view, &taken, &leaving);
        // Komet: services on nodes about to leave move to nodes that stay.
        if !leaving.is_empty() {
            for job in view.running_jobs() {
                let on_leaving = job.gpus.iter().any(|g| leaving.contains(&view.cluster.node_of(*g)));
                if job.spec.kind != JobKind::Inference || touched.contains(&job.id()) || !on_leaving {
                    continue;
                }
                if job.partner.is_some() || job.mig.is_some() {
                    continue;
                }
                if let Some(gpus) = free.take(job.gpus.len() as u32) {
                    touched.insert(job.id());
                    decision.actions.push(Action::Preempt { job: job.id() });
                    decision.actions.push(Action::Start { job: job.id(), gpus });
                }
            }
        }
        // Morph down: interrupted jobs restart at once on what is free.
        for job in view.pending_jobs() {
            if !morphable(job) || !self.lost.contains(&job.id()) || touched.contains(&job.id()) {
                continue;
            }
            let Some((size, _)) = morph_size(&job.spec, free.count()) else { continue };
            if let Some(gpus) = free.take(size) {
                touched.insert(job.id());
                if size < job.spec.gpus {
                    self.morphed.insert(job.id());
                }
                decision.actions.push(Action::Start { job: job.id(), gpus });
            }
        }
        // Morph up: jobs it runs below their request grow when free GPUs make them faster.
        for job in view.running_jobs() {
            let held = job.gpus.len() as u32;
            if !self.morphed.contains(&job.id()) || !morphable(job) || touched.contains(&job.id()) {
                continue;
            }
            let model = PipelineModel::of(&job.spec);
            let now_speed = throughput(held, &model);
            let Some((size, speed)) = morph_size(&job.spec, held + free.count()) else { continue };
            if size <= held || speed <= now_speed {
                continue;
            }
            if let Some(added) = free.take(size - held) {
                let mut gpus = job.gpus.clone();
                gpus.extend(added);
                gpus.sort_unstable();
                decision.actions.push(Action::Resize { job: job.id(), gpus });
            }
        }
        decision
    }

    fn next_round(&self, now: Time) -> Option<Time> {
        // A pass when a departure comes within the lead, to move services in time.
        let departure = self
            .departures
            .iter()
            .flatten()
            .map(|d| Time(d.leaves.0.saturating_sub(self.lead.0)))
            .filter(|&at| at > now)
            .min();
        match (self.base.next_round(now), departure) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn acts_on_evaluation(&self, job: &JobState) -> bool {
        self.base.acts_on_evaluation(job)
    }

    fn host_resources(&self) -> bool {
        self.base.host_resources()
    }
}

/// The base policy named by `varuna(BASE)`; `None` for any other name.
pub fn base_name(name: &str) -> Option<&str> {
    name.strip_prefix(PREFIX)?.strip_suffix(')')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On paper, B = 64, 24 cut points, fits in 2 stages with micro-batch 2 there
    /// (b_max(P) = 2 P / 2 = P, a power of two at most). On 8 GPUs:
    /// - P = 2, D = 4, b <= 2: b = 2 gives m = ceil(64 / 8) = 8, T = (8 + 1) 2 / 2 = 9;
    ///   b = 1: m = 16, T = 17 / 2 = 8.5.
    /// - P = 4, D = 2, b <= 4: b = 1: m = 32, T = 35 / 4 = 8.75; b = 2: m = 16,
    ///   T = 19 x 2 / 4 = 9.5; b = 4: m = 8, T = 11 x 4 / 4 = 11.
    /// - P = 8, D = 1, b <= 8: b = 1: m = 64, T = 71 / 8 = 8.875; larger b is slower.
    /// - P = 3 and 6 divide 24 too: P = 3, D = 2, b = 1: m = 32, T = 34 / 3 = 11.33;
    ///   P = 6, D = 1, b = 1: m = 64, T = 69 / 6 = 11.5 (two or six GPUs idle).
    ///
    /// So AutoConfig picks P = 2, D = 4, b = 1, T = 8.5 (the ideal is 64 / 8 = 8:
    /// bubble (P - 1) / m = 1 / 16). On 6 GPUs (two lost): P = 2, D = 3, b = 1,
    /// m = ceil(64 / 3) = 22, T = 23 / 2 = 11.5; P = 3, D = 2, b = 1: 34 / 3 = 11.33;
    /// P = 6, D = 1: 11.5: it morphs to P = 3, D = 2 at 8.5 / 11.33 = 0.75 of its speed.
    #[test]
    fn autoconfig_on_a_small_case() {
        let model = PipelineModel { cut_points: 24, batch: 64, min_stages: 2, mbs_at_min: 2 };
        let c = autoconfig(8, &model).unwrap();
        assert_eq!((c.pipeline, c.data, c.micro_batch, c.micro_batches), (2, 4, 1, 16));
        assert_eq!(c.iteration, 8.5);
        assert_eq!(c.bubble(), 1.0 / 16.0);
        let c = autoconfig(6, &model).unwrap();
        assert_eq!((c.pipeline, c.data, c.micro_batch, c.micro_batches), (3, 2, 1, 32));
        assert!((c.iteration - 34.0 / 3.0).abs() < 1e-12);
        assert!((throughput(6, &model) / throughput(8, &model) - 8.5 / (34.0 / 3.0)).abs() < 1e-12);
        // One GPU cannot hold the model (it needs two stages).
        assert_eq!(autoconfig(1, &model), None);
    }

    #[test]
    fn names_and_speeds() {
        assert_eq!(base_name("varuna(fifo)"), Some("fifo"));
        assert_eq!(base_name("fifo"), None);
        let mut job = JobSpec::new(0, 0, Time::ZERO, 8, 100.0);
        assert_eq!(relative_speed(&job, 8), 1.0);
        assert!(relative_speed(&job, 4) < 0.51 && relative_speed(&job, 4) > 0.49);
        job.elastic = Some(cotenant_core::Elastic { min: 4, max: 16 });
        // 5 GPUs: AutoConfig's best uses all 5 (P = 1, D = 5), inside the range.
        assert_eq!(morph_size(&job, 5).map(|(g, _)| g), Some(5));
        assert_eq!(morph_size(&job, 3), None);
        assert_eq!(morph_size(&job, 100).map(|(g, _)| g), Some(8));
    }
}
