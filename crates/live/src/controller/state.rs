//! The controller's shared state: [`Live`] (engine and derived tables) plus the
//! indexes the read API needs (jobs by tenant and submission time, per-attempt
//! GPU intervals for usage). Only the engine task changes it, through
//! [`State::apply`], the same function the start-up replay uses.

use std::collections::BTreeSet;
use std::ops::Bound;

use cotenant_core::{Command, JobId, NodeId};

use crate::api::{self, JobStatus, JobView};
use crate::journal::{Entry, Record};
use crate::setup::Live;

/// One attempt's hold on GPUs: `[start_us, end_us)` (open while it runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Interval {
    pub attempt: u32,
    pub start_us: u64,
    pub end_us: Option<u64>,
    pub gpus: u32,
}

/// A listing key: (submitted_us, job id).
pub(super) type ListKey = (u64, u32);

#[derive(Debug)]
pub(super) struct State {
    pub live: Live,
    /// Sequence number the next journal record gets.
    pub next_seq: u64,
    by_time: BTreeSet<ListKey>,
    by_tenant: BTreeSet<(u32, u64, u32)>,
    /// Per job (indexed by id): its attempts' GPU intervals.
    intervals: Vec<Vec<Interval>>,
}

impl State {
    pub fn new(live: Live, next_seq: u64) -> State {
        State { live, next_seq, by_time: BTreeSet::new(), by_tenant: BTreeSet::new(), intervals: Vec::new() }
    }

    /// Applies one journaled record and keeps the indexes in step. Returns the
    /// engine's commands.
    pub fn apply(&mut self, record: &Record) -> Vec<Command> {
        let commands = self.live.apply(record);
        let at_us = self.live.last_at_us();
        let mut touched: BTreeSet<u32> = commands.iter().map(|c| command_job(c).0).collect();
        match &record.entry {
            Entry::Submitted { job, tenant, .. } => {
                if let Some(submitted_us) = self.live.job(*job).map(|j| j.submitted_us) {
                    self.by_time.insert((submitted_us, *job));
                    self.by_tenant.insert((*tenant, submitted_us, *job));
                }
                touched.insert(*job);
            }
            Entry::Cancelled { job }
            | Entry::Exited { job, .. }
            | Entry::LaunchFailed { job, .. }
            | Entry::Vanished { job, .. } => {
                touched.insert(*job);
            }
            _ => {}
        }
        for job in touched {
            self.sync_intervals(job, at_us);
        }
        commands
    }

    /// Closes the job's open interval if its attempt ended, opens one if an
    /// attempt started.
    fn sync_intervals(&mut self, job: u32, at_us: u64) {
        let Some(record) = self.live.job(job) else { return };
        let current = (record.status == JobStatus::Running && !record.gpus.is_empty()).then(|| Interval {
            attempt: record.attempt,
            start_us: record.decided_us.unwrap_or(at_us),
            end_us: None,
            gpus: record.gpus.len() as u32,
        });
        let index = job as usize;
        if self.intervals.len() <= index {
            self.intervals.resize_with(index + 1, Vec::new);
        }
        let list = &mut self.intervals[index];
        let open = list.last_mut().filter(|i| i.end_us.is_none());
        if let (Some(open), Some(current)) = (&open, &current) {
            if open.attempt == current.attempt {
                return;
            }
        }
        if let Some(open) = open {
            open.end_us = Some(at_us);
        }
        if let Some(current) = current {
            list.push(current);
        }
    }

    pub fn intervals(&self, job: u32) -> &[Interval] {
        self.intervals.get(job as usize).map_or(&[], Vec::as_slice)
    }

    /// Running (job, attempt) pairs with a GPU on `node`.
    pub fn attempts_on(&self, node: u32) -> Vec<(u32, u32)> {
        self.live
            .jobs_on(node)
            .iter()
            .filter_map(|&j| {
                self.live.job(j).filter(|r| r.status == JobStatus::Running).map(|r| (j, r.attempt))
            })
            .collect()
    }

    /// The nodes job `job`'s current attempt runs on.
    pub fn nodes_of(&self, job: u32) -> BTreeSet<u32> {
        self.live.nodes_of(job)
    }

    pub fn job(&self, id: u32) -> Option<(u32, JobView)> {
        let tenant = self.live.job(id)?.tenant;
        self.live.view(id).map(|view| (tenant, view))
    }

    /// See `Controller::list_jobs`.
    pub fn list_jobs(
        &self,
        tenant: Option<u32>,
        status: Option<JobStatus>,
        since: u64,
        until: u64,
        after: Option<ListKey>,
        limit: usize,
    ) -> (Vec<JobView>, Option<ListKey>) {
        let end: ListKey = (until, 0);
        let start = match after {
            Some(after) if after >= (since, 0) => Bound::Excluded(after),
            _ => Bound::Included((since, 0)),
        };
        let empty = match start {
            Bound::Included(key) => key >= end,
            Bound::Excluded(key) => key >= end,
            Bound::Unbounded => false,
        };
        if empty || limit == 0 {
            return (Vec::new(), None);
        }
        let keys: Box<dyn Iterator<Item = ListKey> + '_> = match tenant {
            None => Box::new(self.by_time.range((start, Bound::Excluded(end))).copied()),
            Some(t) => {
                let start = match start {
                    Bound::Included((s, j)) => Bound::Included((t, s, j)),
                    Bound::Excluded((s, j)) => Bound::Excluded((t, s, j)),
                    Bound::Unbounded => Bound::Included((t, 0, 0)),
                };
                Box::new(
                    self.by_tenant
                        .range((start, Bound::Excluded((t, end.0, end.1))))
                        .map(|&(_, s, j)| (s, j)),
                )
            }
        };
        let mut page = Vec::new();
        let mut last = None;
        for key in keys {
            let Some(record) = self.live.job(key.1) else { continue };
            if status.is_some_and(|s| s != record.status) {
                continue;
            }
            if page.len() == limit {
                // One more item matches: the page is full and more follow.
                return (page, last);
            }
            if let Some(view) = self.live.view(key.1) {
                page.push(view);
                last = Some(key);
            }
        }
        (page, None)
    }

    /// Pending jobs in the engine's order, with their wait verdicts.
    /// How many jobs are in each status, in [`JobStatus::ALL`]'s order.
    pub fn status_counts(&self) -> [u64; 6] {
        let mut counts = [0; 6];
        for record in self.live.jobs().iter().filter(|j| !j.request.command.is_empty()) {
            if let Some(i) = JobStatus::ALL.iter().position(|&s| s == record.status) {
                counts[i] += 1;
            }
        }
        counts
    }

    pub fn queue(&self) -> Vec<(u32, api::QueueEntry)> {
        let tenants = self.live.tenants();
        self.live
            .engine()
            .pending()
            .iter()
            .filter_map(|id| self.live.job(id.0))
            .enumerate()
            .map(|(position, record)| {
                let entry = api::QueueEntry {
                    position: position as u32,
                    job: record.id,
                    tenant: tenants.get(record.tenant as usize).map_or_else(String::new, |t| t.name.clone()),
                    gpus: record.request.gpus,
                    waiting_since_us: record.events.last().map_or(record.submitted_us, |e| e.at_us),
                    reason: self
                        .live
                        .engine()
                        .job(JobId(record.id))
                        .and_then(|s| s.verdict.as_ref())
                        .map(|v| v.to_string()),
                };
                (record.tenant, entry)
            })
            .collect()
    }

    /// Nodes with the jobs running on them; `last_heartbeat_us` per node.
    pub fn nodes(&self, last_heartbeat_us: &[Option<u64>]) -> Vec<api::NodeView> {
        let cluster = self.live.engine().cluster();
        self.live
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let id = NodeId(i as u32);
                let free = if node.up { cluster.free_mask(id).count_ones() } else { 0 };
                api::NodeView {
                    name: node.decl.name.clone(),
                    gpu_type: node.decl.gpu_type.clone(),
                    gpus: node.decl.gpus,
                    free_gpus: free.min(node.decl.gpus),
                    state: if node.up { "up" } else { "down" }.to_string(),
                    last_heartbeat_us: last_heartbeat_us.get(i).copied().flatten(),
                    jobs: self.live.jobs_on(i as u32).iter().copied().collect(),
                    gpu_uuids: node.gpu_uuids.clone(),
                    gpu_stats: Vec::new(),
                }
            })
            .collect()
    }

    pub fn tenants(&self) -> Vec<api::TenantView> {
        let held = self.live.engine().tenant_gpus();
        self.live
            .tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| api::TenantView {
                id: i as u32,
                name: t.name.clone(),
                weight: t.weight,
                quota: t.quota.clone(),
                unix_user: t.unix_user.clone(),
                gpus_held: held.get(i).copied().unwrap_or(0),
            })
            .collect()
    }

    /// GPU-hours per tenant overlapping `[since, until)`, jobs whose first
    /// attempt started in it, and jobs that completed in it. Running attempts
    /// count up to `now_us`.
    pub fn usage(&self, since: u64, until: u64, now_us: u64) -> Vec<(u32, api::UsageRow)> {
        let tenants = self.live.tenants();
        let mut gpu_us = vec![0u128; tenants.len()];
        let mut started = vec![0u32; tenants.len()];
        let mut completed = vec![0u32; tenants.len()];
        let in_window = |t: u64| since <= t && t < until;
        for record in self.live.jobs() {
            let t = record.tenant as usize;
            if t >= tenants.len() {
                continue;
            }
            let intervals = self.intervals(record.id);
            for interval in intervals {
                let end = interval.end_us.unwrap_or(now_us).min(until);
                let start = interval.start_us.max(since);
                if end > start {
                    gpu_us[t] += u128::from(end - start) * u128::from(interval.gpus);
                }
            }
            if intervals.first().is_some_and(|i| in_window(i.start_us)) {
                started[t] += 1;
            }
            if record.status == JobStatus::Completed && record.ended_us.is_some_and(in_window) {
                completed[t] += 1;
            }
        }
        tenants
            .iter()
            .enumerate()
            .map(|(t, tenant)| {
                let row = api::UsageRow {
                    tenant: tenant.name.clone(),
                    gpu_hours: gpu_us[t] as f64 / 3.6e9,
                    jobs_started: started[t],
                    jobs_completed: completed[t],
                };
                (t as u32, row)
            })
            .collect()
    }
}

/// The job a command is about.
pub(super) fn command_job(command: &Command) -> JobId {
    match command {
        Command::Start { job, .. }
        | Command::StartShared { job, .. }
        | Command::Rerate { job, .. }
        | Command::Stop { job, .. }
        | Command::End { job, .. }
        | Command::Resize { job, .. }
        | Command::Allocate { job, .. } => *job,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::setup::{parse_nodes, ServerSetup};
    use std::collections::BTreeMap;

    const S: u64 = 1_000_000;

    fn state() -> State {
        let setup = ServerSetup {
            nodes: parse_nodes("1x2xA100-80GB").unwrap(),
            policy: "fifo".into(),
            options: BTreeMap::new(),
            round_secs: None,
            seed: 1,
        };
        State::new(Live::new(setup, 0).unwrap(), 1)
    }

    fn submit(job: u32, gpus: u32) -> Entry {
        let request = serde_json::from_value(serde_json::json!({ "command": ["x"], "gpus": gpus })).unwrap();
        Entry::Submitted { job, tenant: 0, request }
    }

    #[test]
    fn usage_counts_gpu_time_inside_the_window_from_each_attempts_interval() {
        // One 2-GPU node. Job 0 (1 GPU) runs 1 s..4 s and completes; job 1
        // (2 GPUs) waits, runs 4 s..5 s, and is requeued when the node is lost.
        let mut state = state();
        let entries = [
            (
                0,
                Entry::TenantAdded {
                    tenant: 0,
                    name: "a".into(),
                    weight: 1.0,
                    quota: BTreeMap::new(),
                    gpu_limit: None,
                    unix_user: None,
                },
            ),
            (0, Entry::NodeJoined { node: 0, name: "h".into(), gpu_uuids: vec![] }),
            (S, submit(0, 1)),
            (2 * S, submit(1, 2)),
            (4 * S, Entry::Exited { job: 0, attempt: 1, code: Some(0), signal: None }),
            (5 * S, Entry::NodeLost { node: 0 }),
        ];
        for (seq, (at_us, entry)) in entries.into_iter().enumerate() {
            state.apply(&Record { seq: seq as u64 + 1, at_us, entry });
        }
        let interval = |start_us, end_us, gpus| Interval { attempt: 1, start_us, end_us: Some(end_us), gpus };
        assert_eq!(state.intervals(0), [interval(S, 4 * S, 1)]);
        assert_eq!(state.intervals(1), [interval(4 * S, 5 * S, 2)]);
        // Whole time: 1 GPU x 3 s + 2 GPUs x 1 s = 5 GPU-seconds.
        let row = &state.usage(0, 10 * S, 10 * S)[0].1;
        assert_eq!((row.gpu_hours, row.jobs_started, row.jobs_completed), (5.0 / 3600.0, 2, 1));
        // [3 s, 4.5 s): 1 GPU x 1 s + 2 GPUs x 0.5 s; only job 1 first started
        // in it; job 0 completed in it.
        let row = &state.usage(3 * S, 4 * S + S / 2, 10 * S)[0].1;
        assert_eq!((row.gpu_hours, row.jobs_started, row.jobs_completed), (2.0 / 3600.0, 1, 1));
        // Job 1 is pending again: the queue shows it waiting since the requeue.
        let queue = state.queue();
        assert_eq!(queue.len(), 1);
        assert_eq!((queue[0].1.job, queue[0].1.waiting_since_us), (1, 5 * S));
    }
}
