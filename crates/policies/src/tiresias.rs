//! Tiresias' discretized two-dimensional LAS (2D-LAS), preemptive, as its
//! simulator's `dlas-gpu` schedule.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::placement::Placement;
use cotenant_core::{
    Action, ClusterView, Decision, JobChange, JobId, JobState, Policy, PolicyCx, Span, Time,
};

use crate::greedy::{pass_contested, preemptive_pass, HeldVerdicts, Sized};
use crate::queue::{JobSize, WaitQueue};
use crate::running::{Contested, RunningSet};

const US: u64 = cotenant_core::MICROS_PER_SECOND;

/// How the demotion timer of a running job is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemotionTimer {
    /// At the exact time the job's attained service crosses its queue's limit.
    Exact,
    /// As Tiresias's simulator: `now + floor((limit - executed_wall_s) / gpus)`
    /// in whole seconds, with `executed_wall_s` the job's wall-clock seconds run
    /// since its last promotion. For a multi-GPU job this fires later than the
    /// crossing (the demotion waits for that timer or another event), or up to
    /// a second early (nothing happens then). Clamped to at least now + 1 s.
    Tiresias,
}

/// A job's place in the queues: `(queue, part, seq)`. Within a queue, part 0
/// holds the jobs running after the last pass, part 1 the jobs waiting after it
/// and then the jobs that entered the queue since (arrivals, demotions,
/// promotions), each part by `seq`. Newcomers take seqs above every seq given
/// before, so they follow part 1's waiting jobs, and a newcomer still waiting
/// after a pass is already where it belongs (the back of part 1) with no
/// rekeying; jobs preempted from part 0 take decreasing seqs (the front of part
/// 1). That is Tiresias's list order for a queue (running jobs ahead of waiting
/// ones after each pass, newcomers at the back), kept with work proportional to
/// the jobs that change, not to the queue.
type Key = (u32, u8, i64);

#[derive(Clone, Copy, Debug, Default)]
struct JobInfo {
    live: bool,
    running: bool,
    queue: u32,
    part: u8,
    seq: i64,
    /// Attained GPU-µs at the last promotion.
    promoted_at: u64,
    /// Wall µs waited since the last promotion while having run since it,
    /// up to `waiting_since`.
    last_pending: u64,
    /// Since when `last_pending` grows: set while the job waits having run
    /// since its last promotion.
    waiting_since: Option<Time>,
    /// Its entry in `demotions` (running, below the last queue).
    demote_at: Option<Time>,
    /// Its entry in `promotions`.
    promote_at: Option<Time>,
}

impl JobInfo {
    fn key(&self) -> Key {
        (self.queue, self.part, self.seq)
    }
}

/// Tiresias (NSDI'19) with the discretized 2D-LAS rule, as the `dlas-gpu`
/// schedule of Tiresias's simulator: jobs enter queue 0; a running job whose
/// attained service (GPU-seconds) since its last promotion reaches its queue's
/// limit moves one queue down, to the back; queues are served in order, each in
/// list order, taking every job that fits and preempting running jobs that do
/// not; after each pass a queue's running jobs come before its waiting ones.
///
/// Starvation guard (`starvation_knob` > 0): a waiting job below queue 0 that
/// has run since its last promotion is promoted to the back of queue 0 once the
/// time it has waited since that promotion (counted only after it first ran
/// since it) reaches `knob` times its wall-clock run time since it.
#[derive(Clone, Debug)]
pub struct Tiresias {
    pub placement: Placement,
    /// Queue limits in GPU-seconds, ascending.
    pub thresholds_gpu_secs: Vec<u64>,
    /// Promote after waiting this many times the job's run time; 0 disables.
    pub starvation_knob: u32,
    pub timer: DemotionTimer,
    jobs: Vec<JobInfo>,
    waiting: WaitQueue<Key>,
    /// Running jobs in list order, with their sizes.
    running: BTreeMap<(Key, JobId), JobSize>,
    /// Exact crossing times of running jobs below the last queue.
    demotions: BTreeSet<(Time, JobId)>,
    /// When waiting jobs become due for promotion (always after the pass that
    /// stopped them).
    promotions: BTreeSet<(Time, JobId)>,
    /// Jobs due for promotion at the next pass (stopped with enough wait already).
    promote_next: Vec<JobId>,
    /// Jobs demoted since the last pass (newcomers of part 1 while running).
    fresh: Vec<JobId>,
    next_seq: i64,
    front_seq: i64,
    next: Option<Time>,
    /// The jobs in `running` with their GPUs (the totals the settled shortcut needs).
    running_set: RunningSet,
    /// The running jobs that rank at or after the best waiting job, refilled
    /// each pass (kept to reuse its allocation).
    contested: Vec<Sized<Key>>,
    /// The `LowerPriority` verdicts the engine holds from earlier passes.
    held: HeldVerdicts,
}

impl Tiresias {
    pub fn new(
        placement: Placement,
        thresholds_gpu_secs: Vec<u64>,
        starvation_knob: u32,
        timer: DemotionTimer,
    ) -> Tiresias {
        Tiresias {
            placement,
            thresholds_gpu_secs,
            starvation_knob,
            timer,
            jobs: Vec::new(),
            waiting: WaitQueue::default(),
            running: BTreeMap::new(),
            demotions: BTreeSet::new(),
            promotions: BTreeSet::new(),
            promote_next: Vec::new(),
            fresh: Vec::new(),
            next_seq: 0,
            front_seq: -1,
            next: None,
            running_set: RunningSet::default(),
            contested: Vec::new(),
            held: HeldVerdicts::default(),
        }
    }

    fn info(&mut self, id: JobId) -> &mut JobInfo {
        if id.index() >= self.jobs.len() {
            self.jobs.resize(id.index() + 1, JobInfo::default());
        }
        &mut self.jobs[id.index()]
    }

    /// A job's requested GPUs and tenant: as the wait queue recorded them when
    /// it entered (every job waits first), read from its spec only for a job
    /// the queue never held (the spec is a cache miss on a large trace).
    fn size(&self, view: &ClusterView<'_>, id: JobId) -> JobSize {
        self.waiting.size(view, id)
    }

    fn last_queue(&self) -> u32 {
        self.thresholds_gpu_secs.len() as u32
    }

    fn seq(&mut self) -> i64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Attained GPU-µs since the job's last promotion.
    fn executed_gpu_us(&self, job: &JobState, now: Time) -> u64 {
        job.attained_gpu_us(now).saturating_sub(self.jobs[job.id().index()].promoted_at)
    }

    /// When a job running from `now` crosses its queue's limit, if it is below the last queue.
    fn crossing(&self, job: &JobState, now: Time) -> Option<Time> {
        let info = &self.jobs[job.id().index()];
        let gpus = u64::from(job.spec.gpus);
        if gpus == 0 || info.queue >= self.last_queue() {
            return None;
        }
        let limit_us = self.thresholds_gpu_secs[info.queue as usize].saturating_mul(US);
        let executed = self.executed_gpu_us(job, now);
        Some(now + Span(limit_us.saturating_sub(executed).div_ceil(gpus)))
    }

    /// Wall µs a job must wait (after its last promotion, having run) to be promoted.
    fn promotion_wait_us(&self, job: &JobState, now: Time) -> u64 {
        let gpus = u64::from(job.spec.gpus).max(1);
        let wall_us = self.executed_gpu_us(job, now) / gpus;
        let knob = u64::from(self.starvation_knob);
        match self.timer {
            DemotionTimer::Exact => wall_us.saturating_mul(knob),
            DemotionTimer::Tiresias => (wall_us / US).saturating_mul(knob).saturating_mul(US),
        }
    }

    /// A job stops running at `now` (preempted, or stopped by the engine).
    fn on_stop(&mut self, view: &ClusterView<'_>, id: JobId) {
        let now = view.now;
        let job = view.job(id);
        let key = self.jobs[id.index()].key();
        self.running.remove(&(key, id));
        self.running_set.remove(id);
        if let Some(at) = self.jobs[id.index()].demote_at.take() {
            self.demotions.remove(&(at, id));
        }
        let ran = self.executed_gpu_us(job, now) > 0;
        let info = &mut self.jobs[id.index()];
        info.running = false;
        if !ran {
            return;
        }
        info.waiting_since = Some(now);
        if self.starvation_knob == 0 || info.queue == 0 {
            return;
        }
        let (wait, waited) = (self.promotion_wait_us(job, now), self.jobs[id.index()].last_pending);
        if wait <= waited {
            self.promote_next.push(id);
        } else {
            let at = now + Span(wait - waited);
            self.jobs[id.index()].promote_at = Some(at);
            self.promotions.insert((at, id));
        }
    }

    /// A job starts running at `now`.
    fn on_start(&mut self, view: &ClusterView<'_>, id: JobId) {
        let now = view.now;
        let info = &mut self.jobs[id.index()];
        info.running = true;
        if let Some(since) = info.waiting_since.take() {
            info.last_pending += now.since(since).0;
        }
        if let Some(at) = info.promote_at.take() {
            self.promotions.remove(&(at, id));
        }
        if let Some(at) = self.crossing(view.job(id), now) {
            self.jobs[id.index()].demote_at = Some(at);
            self.demotions.insert((at, id));
        }
    }

    fn on_end(&mut self, id: JobId) {
        // A job ended at submission (wider than the cluster) was never seen.
        let Some(&info) = self.jobs.get(id.index()) else { return };
        if info.running {
            self.running.remove(&(info.key(), id));
            self.running_set.remove(id);
        }
        if let Some(at) = info.demote_at {
            self.demotions.remove(&(at, id));
        }
        if let Some(at) = info.promote_at {
            self.promotions.remove(&(at, id));
        }
        self.jobs[id.index()] = JobInfo::default();
    }

    /// Applies the change log, then this event's arrivals, demotions and
    /// promotions, in Tiresias's order (arrivals, then the others by arrival).
    fn sync(&mut self, view: &ClusterView<'_>) {
        let now = view.now;
        let mut arrivals = Vec::new();
        for change in view.changes {
            match *change {
                JobChange::Submitted(id) => {
                    *self.info(id) = JobInfo { live: true, ..JobInfo::default() };
                    arrivals.push((id, JobSize::of(view.job(id))));
                }
                JobChange::Stopped(id) => {
                    if self.jobs[id.index()].running {
                        self.on_stop(view, id);
                    }
                    let size = self.size(view, id);
                    self.waiting.insert(id, self.jobs[id.index()].key(), size.gpus, size.tenant);
                }
                JobChange::Started(id) => {
                    self.waiting.remove(id);
                    if !self.jobs[id.index()].running {
                        self.on_start(view, id);
                        let key = self.jobs[id.index()].key();
                        let size = self.size(view, id);
                        self.running.insert((key, id), size);
                        self.running_set.insert(id, size.gpus);
                    }
                }
                JobChange::Completed(id) | JobChange::Ended(id) => {
                    self.waiting.remove(id);
                    self.on_end(id);
                }
                // Tiresias itself never resizes; another policy's resize changes
                // nothing in its list order (attained service is read from the view).
                JobChange::Resized(_) => {}
            }
        }
        let by_arrival = |id: &JobId| (view.job(*id).spec.arrival, *id);
        arrivals.sort_unstable_by_key(|(id, _)| by_arrival(id));
        for (id, size) in arrivals {
            let seq = self.seq();
            let info = &mut self.jobs[id.index()];
            (info.queue, info.part, info.seq) = (0, 1, seq);
            let key = info.key();
            self.waiting.insert(id, key, size.gpus, size.tenant);
        }

        let mut demoted = Vec::new();
        while let Some(&(at, id)) = self.demotions.first() {
            if at > now {
                break;
            }
            self.demotions.pop_first();
            self.jobs[id.index()].demote_at = None;
            demoted.push(id);
        }
        demoted.sort_unstable_by_key(by_arrival);
        for id in demoted {
            let seq = self.seq();
            let info = &mut self.jobs[id.index()];
            let size = self.running.remove(&(info.key(), id)).unwrap_or_else(|| JobSize::of(view.job(id)));
            (info.queue, info.part, info.seq) = (info.queue + 1, 1, seq);
            self.running.insert((info.key(), id), size);
            self.fresh.push(id);
            // One queue per event: a job already past the next limit moves at the next one.
            if let Some(at) = self.crossing(view.job(id), now) {
                self.jobs[id.index()].demote_at = Some(at);
                self.demotions.insert((at, id));
            }
        }

        let mut promoted = std::mem::take(&mut self.promote_next);
        while let Some(&(at, id)) = self.promotions.first() {
            if at > now {
                break;
            }
            self.promotions.pop_first();
            self.jobs[id.index()].promote_at = None;
            promoted.push(id);
        }
        promoted.retain(|id| {
            let info = &self.jobs[id.index()];
            info.live && !info.running && info.queue > 0
        });
        promoted.sort_unstable_by_key(by_arrival);
        promoted.dedup();
        for id in promoted {
            let seq = self.seq();
            let attained = view.job(id).attained_gpu_us(now);
            let info = &mut self.jobs[id.index()];
            (info.queue, info.part, info.seq) = (0, 1, seq);
            info.promoted_at = attained;
            info.last_pending = 0;
            info.waiting_since = None;
            self.waiting.rekey(id, info.key());
        }
    }

    /// Applies the pass's starts and preemptions to the policy's state and moves
    /// jobs between parts: starters and demoted jobs still running to the back of
    /// part 0, preempted part-0 jobs to the front of part 1 (waiting newcomers
    /// already are at its back).
    fn apply(&mut self, view: &ClusterView<'_>, decision: &Decision) {
        let mut to_running: Vec<(Key, JobId)> = Vec::new();
        let mut preempted_front: Vec<(Key, JobId)> = Vec::new();
        for action in &decision.actions {
            match *action {
                Action::Start { job, .. }
                | Action::StartShared { job, .. }
                | Action::Share(cotenant_core::Share { job, .. })
                | Action::MigStart { job, .. } => {
                    self.on_start(view, job);
                    to_running.push((self.jobs[job.index()].key(), job));
                }
                Action::Preempt { job } => {
                    self.on_stop(view, job);
                    let key = self.jobs[job.index()].key();
                    if key.1 == 0 {
                        preempted_front.push((key, job));
                    }
                }
                Action::End { .. }
                | Action::Resize { .. }
                | Action::MigReconfigure { .. }
                | Action::Allocate { .. } => {}
            }
        }
        for id in std::mem::take(&mut self.fresh) {
            let info = &self.jobs[id.index()];
            // A demoted job kept running (starters are not in `running` yet).
            if info.live && info.running && self.running.remove(&(info.key(), id)).is_some() {
                to_running.push((info.key(), id));
            }
        }
        to_running.sort_unstable();
        for (_, id) in to_running {
            let seq = self.seq();
            let size = self.size(view, id);
            let info = &mut self.jobs[id.index()];
            (info.part, info.seq) = (0, seq);
            self.running.insert((info.key(), id), size);
            self.running_set.insert(id, size.gpus);
        }
        preempted_front.sort_unstable();
        for &(_, id) in preempted_front.iter().rev() {
            self.front_seq -= 1;
            let info = &mut self.jobs[id.index()];
            (info.part, info.seq) = (1, self.front_seq);
        }
    }

    /// The next demotion timer, after the pass at `now`.
    fn next_demotion(&self, view: &ClusterView<'_>) -> Option<Time> {
        let now = view.now;
        match self.timer {
            DemotionTimer::Exact => self.demotions.first().map(|&(at, _)| at.max(now + Span(1))),
            DemotionTimer::Tiresias => self
                .demotions
                .iter()
                .map(|&(_, id)| {
                    let job = view.job(id);
                    let info = &self.jobs[id.index()];
                    let gpus = i64::from(job.spec.gpus);
                    let executed_s = (self.executed_gpu_us(job, now) / gpus as u64 / US) as i64;
                    let limit = self.thresholds_gpu_secs[info.queue as usize] as i64;
                    let secs = (limit - executed_s).div_euclid(gpus).max(1) as u64;
                    now + Span::from_secs(secs)
                })
                .min(),
        }
    }
}

/// The running jobs at or after `head` in list order (the running set is in
/// key order: they are a range of it), with their sizes, into `out`; returns
/// their GPUs. Out of line, so that its code does not depend on how much of
/// the pass is inlined around it (docs/performance-history.md, fourteenth round).
#[inline(never)]
fn contested_from(
    running: &BTreeMap<(Key, JobId), JobSize>,
    head: (Key, JobId),
    out: &mut Vec<Sized<Key>>,
) -> u64 {
    out.clear();
    let mut gpus = 0;
    for (&entry, &size) in running.range(head..) {
        out.push((entry, size));
        gpus += u64::from(size.gpus);
    }
    gpus
}

impl Policy for Tiresias {
    fn name(&self) -> &'static str {
        "tiresias"
    }

    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        self.sync(view);
        self.held.sync(view);
        let decision = match self.running_set.safe_total(view) {
            Some(running_gpus) => {
                let contested_gpus = match self.waiting.iter().next() {
                    Some(head) => contested_from(&self.running, head, &mut self.contested),
                    None => {
                        self.contested.clear();
                        0
                    }
                };
                let contested = Contested { running_gpus, jobs: &self.contested, gpus: contested_gpus };
                pass_contested(view, contested, &mut self.waiting, self.placement, &mut self.held)
            }
            None => {
                // Already in key order: the pass finds it sorted.
                let mut running: Vec<(Key, JobId)> = self.running.keys().copied().collect();
                let smallest = self.waiting.smallest_request();
                let decision =
                    preemptive_pass(view, &mut running, self.waiting.iter(), smallest, self.placement);
                self.held.record(&decision);
                self.waiting.forget_held_prefix();
                decision
            }
        };
        #[cfg(test)]
        crate::greedy::assert_as_full_sort(
            view,
            self.running.keys().copied().collect(),
            &self.waiting,
            self.placement,
            &decision,
        );
        self.apply(view, &decision);
        let promotion = self.promotions.first().map(|&(at, _)| at);
        self.next = [promotion, self.next_demotion(view)].into_iter().flatten().min();
        decision
    }

    fn next_round(&self, _now: Time) -> Option<Time> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_world::{case, placement, run};
    use proptest::prelude::*;

    /// A case the proptest below drew once (its CI run then spent its time
    /// shrinking it): a first queue of 1 GPU-second and the starvation guard at
    /// 3 make jobs thrash by Tiresias's own rule (demoted after a fraction of a
    /// second, promoted back after three times that), and the run takes 204,551
    /// steps, past the 200,000 the test world once allowed for a whole run. It
    /// must finish, every pass as the full sort, and still be that long (else
    /// it no longer tests what it was kept for).
    #[test]
    fn a_thrashing_run_finishes() {
        let jobs = vec![
            (0, 0, 7, 2345.067841398621, false),
            (0, 0, 0, 1.0, false),
            (11, 0, 4, 2028.5927748976449, true),
            (13, 0, 8, 778.3083587582021, false),
            (46, 0, 7, 2005.345312914232, false),
            (161, 0, 7, 2002.4361952006, false),
            (214, 0, 5, 1153.3699428484797, false),
            (245, 1, 4, 1340.3311297930404, true),
            (296, 1, 8, 1577.8820806149818, false),
            (500, 1, 1, 1.0, false),
            (1000, 0, 1, 1.0, false),
            (1501, 0, 6, 2484.3519723696554, false),
            (1578, 0, 5, 1676.8806318721618, false),
            (1959, 0, 5, 453.67986331061724, false),
            (2910, 0, 2, 1330.550860173644, false),
            (3476, 0, 2, 671.7526747297555, false),
            (3592, 0, 6, 337.5406906493683, false),
            (3959, 0, 6, 579.5910114063761, false),
        ];
        let case = crate::test_world::Case {
            nodes: 4,
            gpus_per_node: 4,
            limits: vec![Some(8), Some(671_191_568)],
            jobs,
            node_events: vec![(256, 1, false), (1828, 2, false), (2952, 3, true)],
            jitter: false,
        };
        let steps = run(
            &case,
            Box::new(Tiresias::new(Placement::Consolidated, vec![1, 13241], 3, DemotionTimer::Exact)),
        );
        assert!(steps > 200_000, "{steps} steps");
    }

    /// One-GPU jobs finish one at a time on a full cluster while wide jobs
    /// wait ahead of the one-GPU jobs that wait: after the first such pass
    /// tells the wide ones `LowerPriority`, the next passes jump over them
    /// (`queue::HeldPrefix`), and every pass still decides as the full sort.
    #[test]
    fn passes_jump_over_held_wide_jobs() {
        let mut jobs: Vec<(u64, u32, u32, f64, bool)> =
            (0..8).map(|i| (0, 0, 1, 100.0 * f64::from(i + 1), true)).collect();
        jobs.extend((0..20).map(|i| (1 + i, 0, [4, 8, 2, 4][i as usize % 4], 500.0, true)));
        jobs.extend((0..10).map(|i| (30 + i, 0, 1, 1000.0, true)));
        let case = crate::test_world::Case {
            nodes: 2,
            gpus_per_node: 4,
            limits: vec![None],
            jobs,
            node_events: Vec::new(),
            jitter: false,
        };
        let before = crate::queue::JUMPS.with(std::cell::Cell::get);
        run(
            &case,
            Box::new(Tiresias::new(
                Placement::Consolidated,
                vec![1_000_000, 2_000_000],
                0,
                DemotionTimer::Exact,
            )),
        );
        let jumps = crate::queue::JUMPS.with(std::cell::Cell::get) - before;
        assert!(jumps >= 5, "{jumps} jumps");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The indexed pass (the contested jobs a range of the ordered running
        /// set) decides as the full sort at every pass (`assert_as_full_sort`),
        /// with demotions, promotions, both timers, tenant limits, CPU-only jobs,
        /// failing nodes and placements that may leave a chosen job waiting.
        #[test]
        fn tiresias_range_decides_as_the_full_sort(
            case in case(),
            first in 1u64..2000,
            second in 1u64..20_000,
            knob in 0u32..4,
            tiresias_timer in proptest::bool::ANY,
            placement in placement(),
        ) {
            let timer = if tiresias_timer { DemotionTimer::Tiresias } else { DemotionTimer::Exact };
            let thresholds = vec![first, first + second];
            run(&case, Box::new(Tiresias::new(placement, thresholds, knob, timer)));
        }
    }
}
