//! Elastic Tiresias (EDL's use case): Tiresias's discretized 2D-LAS order, with
//! elastic jobs that grow into idle GPUs and shrink to admit waiting jobs.
//!
//! Every pass (arrivals, completions, and a round timer for demotions):
//! 1. **Order** every job, running or waiting, by `(queue, arrival, id)`: the
//!    queue is how many of the attained-GPU-seconds thresholds the job has
//!    passed (Tiresias's queues; no starvation guard here).
//! 2. **Admit** in that order while the GPUs of nodes that are up suffice: each
//!    job counts at its smallest size (its elastic minimum, or its request if
//!    rigid). A job that does not fit is skipped, as Tiresias skips it.
//! 3. **Size**: GPUs left over go to admitted elastic jobs in the same order,
//!    first up to their request, then up to their maximum.
//! 4. **Enact**, so that the engine applies it in this order: preempt running
//!    jobs that were not admitted; shrink running elastic jobs above their size
//!    (graceful scale-in, dropping GPUs from the nodes where they hold fewest);
//!    start admitted waiting jobs (at their size, or smaller down to their
//!    minimum when placement cannot find that many); then grow running elastic
//!    jobs below their size into GPUs still free (their own nodes first), but
//!    only when no admitted job is left waiting (growing then would take the
//!    GPUs it waits for) and only if the job has not grown within `regrow`
//!    (each scale-out costs a preparation and a pause, so a job is not grown
//!    and shrunk every round).
//!
//! Rigid jobs are started at their request and preempted like Tiresias's.

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{
    Action, ClusterView, Decision, GpuId, JobId, JobState, NodeId, Policy, PolicyCx, Span, Time, WaitReason,
};

const US: u64 = cotenant_core::MICROS_PER_SECOND;

/// Elastic Tiresias; see the module doc.
#[derive(Debug)]
pub struct ElasticTiresias {
    placement: Placement,
    thresholds_gpu_secs: Vec<u64>,
    round: Span,
    regrow: Span,
    /// When each job last grew.
    grown_at: Vec<Option<Time>>,
    /// The next round, while one could change anything: jobs wait (a demotion
    /// may reorder them) or a growth was put off.
    next: Option<Time>,
}

impl ElasticTiresias {
    pub fn new(
        placement: Placement,
        thresholds_gpu_secs: Vec<u64>,
        round: Span,
        regrow: Span,
    ) -> ElasticTiresias {
        ElasticTiresias { placement, thresholds_gpu_secs, round, regrow, grown_at: Vec::new(), next: None }
    }

    fn queue(&self, job: &JobState, now: Time) -> usize {
        let attained_secs = job.attained_gpu_us(now) / US;
        self.thresholds_gpu_secs.iter().take_while(|&&t| attained_secs >= t).count()
    }

    fn may_grow(&self, id: JobId, now: Time) -> bool {
        match self.grown_at.get(id.index()).copied().flatten() {
            Some(at) => now >= at + self.regrow,
            None => true,
        }
    }

    fn note_growth(&mut self, id: JobId, now: Time) {
        if self.grown_at.len() <= id.index() {
            self.grown_at.resize(id.index() + 1, None);
        }
        self.grown_at[id.index()] = Some(now);
    }
}

/// The size each job gets this pass (0: not admitted), by admission then sizing,
/// within the cluster's `capacity` and each tenant's limit (`limits[tenant]`).
fn target_sizes(order: &[&JobState], capacity: u32, limits: &[Option<u32>]) -> Vec<u32> {
    let mut sizes = vec![0u32; order.len()];
    let mut left = capacity;
    let mut tenant_left: Vec<u32> = limits.iter().map(|l| l.unwrap_or(u32::MAX)).collect();
    for (size, job) in sizes.iter_mut().zip(order) {
        let least = job.spec.min_gpus();
        let t = job.spec.tenant.index();
        if least <= left && least <= tenant_left[t] {
            *size = least;
            left -= least;
            tenant_left[t] -= least;
        }
    }
    // Leftover GPUs: up to the request first, then up to the maximum, in order.
    for cap in [|j: &JobState| j.spec.gpus, |j: &JobState| j.spec.elastic.map_or(j.spec.gpus, |e| e.max)] {
        for (size, job) in sizes.iter_mut().zip(order) {
            if *size == 0 || job.spec.elastic.is_none() {
                continue;
            }
            let t = job.spec.tenant.index();
            let more = cap(job).saturating_sub(*size).min(left).min(tenant_left[t]);
            *size += more;
            left -= more;
            tenant_left[t] -= more;
        }
    }
    sizes
}

/// Which of `gpus` to drop to keep `keep`: from the nodes holding fewest of them first.
fn shrink_to(view: &ClusterView<'_>, gpus: &[GpuId], keep: usize) -> (Vec<GpuId>, Vec<GpuId>) {
    let cluster = view.cluster;
    let count_on = |node: NodeId| gpus.iter().filter(|&&g| cluster.node_of(g) == node).count();
    let mut ranked: Vec<GpuId> = gpus.to_vec();
    // Keep GPUs of the nodes holding most of the job; ties by GPU id, for determinism.
    ranked.sort_by_key(|&g| (std::cmp::Reverse(count_on(cluster.node_of(g))), g));
    let dropped = ranked.split_off(keep.min(ranked.len()));
    ranked.sort_unstable();
    (ranked, dropped)
}

/// Up to `extra` free GPUs for a job on `nodes`: its own nodes first, then any.
fn grow_into(free: &mut FreeMap<'_>, nodes: &[NodeId], extra: u32, how: Placement) -> Vec<GpuId> {
    let mut added = Vec::new();
    for &node in nodes {
        let want = (extra - added.len() as u32).min(free.free_on(node));
        if want > 0 {
            added.extend(free.place(want, Placement::Consolidated, |n| n == node).unwrap_or_default());
        }
    }
    let want = (extra - added.len() as u32).min(free.free());
    if want > 0 {
        added.extend(free.place(want, how, |_| true).unwrap_or_default());
    }
    added
}

impl Policy for ElasticTiresias {
    fn name(&self) -> &'static str {
        "elastic-tiresias"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let now = view.now;
        let mut decision = Decision::default();
        let mut order: Vec<&JobState> = view.running_jobs().chain(view.pending_jobs()).collect();
        order.sort_by_key(|j| (self.queue(j, now), j.spec.arrival, j.id()));
        let limits: Vec<Option<u32>> = view.tenants.iter().map(|t| t.gpu_limit).collect();
        let sizes = target_sizes(&order, view.cluster.up_gpus(), &limits);

        // Preemptions and shrinks first: they free the GPUs the starts use.
        let mut free = FreeMap::new(view.cluster);
        for (job, &size) in order.iter().zip(&sizes) {
            if !job.is_running() {
                continue;
            }
            if size == 0 {
                decision.actions.push(Action::Preempt { job: job.id() });
                free.give_back(&job.gpus);
            } else if job.spec.elastic.is_some() && (size as usize) < job.gpus.len() {
                let (kept, dropped) = shrink_to(view, &job.gpus, size as usize);
                decision.actions.push(Action::Resize { job: job.id(), gpus: kept });
                free.give_back(&dropped);
            }
        }
        // Starts in priority order, at the target size or as close above the minimum as placement allows.
        let mut blocked = false;
        for (job, &size) in order.iter().zip(&sizes) {
            if job.is_running() {
                continue;
            }
            if size == 0 {
                decision.waiting.push((job.id(), WaitReason::LowerPriority));
                continue;
            }
            let mut placed = Err(WaitReason::NoFreeGpus { needed: size, free: free.free() });
            for n in (job.spec.min_gpus()..=size).rev() {
                placed = free.place(n, self.placement, |_| true);
                if placed.is_ok() {
                    break;
                }
            }
            match placed {
                Ok(gpus) => decision.actions.push(Action::Start { job: job.id(), gpus }),
                Err(reason) => {
                    blocked = true;
                    decision.waiting.push((job.id(), reason));
                }
            }
        }
        // Growth into what is still free, unless an admitted job still waits.
        let mut put_off = false;
        if !blocked {
            let mut grown = Vec::new();
            for (job, &size) in order.iter().zip(&sizes) {
                let held = job.gpus.len() as u32;
                if !job.is_running() || job.spec.elastic.is_none() || size <= held {
                    continue;
                }
                if !self.may_grow(job.id(), now) {
                    put_off = true;
                    continue;
                }
                let mut nodes: Vec<NodeId> = job.gpus.iter().map(|&g| view.cluster.node_of(g)).collect();
                nodes.dedup();
                let added = grow_into(&mut free, &nodes, size - held, self.placement);
                if added.is_empty() {
                    continue;
                }
                let mut gpus = job.gpus.clone();
                gpus.extend(added);
                gpus.sort_unstable();
                decision.actions.push(Action::Resize { job: job.id(), gpus });
                grown.push(job.id());
            }
            for id in grown {
                self.note_growth(id, now);
            }
        }
        let waiting = !decision.waiting.is_empty()
            || decision.actions.iter().any(|a| matches!(a, Action::Preempt { .. }));
        self.next = (waiting || put_off).then(|| now + self.round);
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_core::{Elastic, JobSpec};

    fn job(id: u32, gpus: u32, range: Option<(u32, u32)>) -> JobSpec {
        let mut spec = JobSpec::new(id, 0, Time(u64::from(id)), gpus, 100.0);
        spec.elastic = range.map(|(min, max)| Elastic::new(min, max, gpus).unwrap());
        spec
    }

    fn state(spec: JobSpec) -> JobState {
        JobState {
            spec: spec.into(),
            phase: cotenant_core::Phase::Pending,
            gpus: Vec::new(),
            first_start: None,
            phase_since: Time::ZERO,
            run_before: Span::ZERO,
            attained_before_gpu_us: 0,
            preemptions: 0,
            progress: Default::default(),
            verdict: None,
            partner: None,
            gpus_since: Time::ZERO,
            resizes: 0,
            evals: Default::default(),
            sharing: Default::default(),
            mig: None,
            host: Default::default(),
        }
    }

    #[test]
    fn admission_at_minimum_then_request_then_maximum() {
        // 8 GPUs. A: elastic [2, 8] asking 4; B: rigid 4; C: elastic [1, 4] asking 2.
        // Admission at minimums: A 2, B 4, C 1 (7 used, 1 left).
        // Up to requests: A takes the 1 left (3); C gets none.
        let jobs = [state(job(0, 4, Some((2, 8)))), state(job(1, 4, None)), state(job(2, 2, Some((1, 4))))];
        let order: Vec<&JobState> = jobs.iter().collect();
        assert_eq!(target_sizes(&order, 8, &[None]), vec![3, 4, 1]);
        // 16 GPUs: minimums 2 + 4 + 1 = 7, 9 left; requests: A +2 (4), C +1 (2), 6 left;
        // maximums: A +4 (8), C +2 (4).
        assert_eq!(target_sizes(&order, 16, &[None]), vec![8, 4, 4]);
        // A tenant limit of 6 binds like a 6-GPU cluster: A 2 + B 4, C (1) left out.
        assert_eq!(target_sizes(&order, 16, &[Some(6)]), vec![2, 4, 0]);
        // 5 GPUs: A 2, B (4) skipped, C 1; then A +2 (its request), C +0 (none left).
        assert_eq!(target_sizes(&order, 5, &[None]), vec![4, 0, 1]);
    }
}
