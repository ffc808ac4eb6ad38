//! The controller's history, read back from its journal: the submissions as a
//! workload the simulator can replay under any policy ([`load`]), and the
//! record/replay check that a fresh engine fed the journal issues exactly the
//! commands the live server recorded ([`replay_check`]).
//!
//! Both replay the journal through [`Live::apply`], the same function the
//! controller runs, starting from the setup stored in the database; neither
//! writes to it.
//!
//! **Measured run time.** A job's run time is the time its attempts held GPUs:
//! each attempt runs from its start (the agent-reported process start when the
//! journal replay knows it, else the engine's decision, `decided_us`) to the
//! record that ended it (its `Exited` report, a preemption, a lost node, a
//! failure). For a job preempted and requeued, the attempts' run times are
//! summed: that sum is the work it needed on this cluster, including the work
//! redone after each restart (progress since its last checkpoint). The journal
//! does not hold the agent's `Started` time (`Live::note_started` is not an
//! engine input), so a replay measures from the decision: the decision-to-launch
//! latency and the exit report's latency are counted as run time.
//!
//! **Jobs kept and skipped.** Completed jobs are kept. Failed jobs that ran are
//! kept with their run time until the failure: a crash is a property of the job,
//! and the GPUs it held are load any policy must carry. Every other job is
//! skipped and counted by reason ([`History::skipped`]): cancelled jobs (when a
//! user gives up depends on the schedule they saw), lost jobs (no exit status:
//! their run time is unknown), jobs that failed without running (refused by the
//! engine, or no process could be launched), and jobs still pending or running
//! when the journal ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cotenant_core::Command;

use crate::api::JobStatus;
use crate::journal::{Db, Entry, JournalError, Record};
use crate::setup::{Live, ServerSetup, SetupError};

/// Meta key of the stored [`ServerSetup`] (JSON).
pub const META_SETUP: &str = "setup";
/// Meta key of the engine's time zero (Unix µs, decimal).
pub const META_EPOCH: &str = "epoch_us";
/// Mismatches a [`ReplayReport`] keeps (it counts them all).
pub const MAX_MISMATCHES_KEPT: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("database {db}: {source}")]
    Journal { db: String, source: JournalError },
    #[error("database {db}: meta '{key}': {message}")]
    Meta { db: String, key: &'static str, message: String },
    #[error("database {db}: the stored setup does not build an engine: {source}")]
    Setup { db: String, source: SetupError },
    #[error("database {db}: no such file (give the server's --db file, or a postgres:// URL)")]
    Missing { db: String },
    #[error("database {db}: journal row {seq}: {message}")]
    Row { db: String, seq: u64, message: String },
}

/// A tenant as the journal declared it.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryTenant {
    pub name: String,
    pub weight: f64,
    pub quota: BTreeMap<String, u32>,
    /// The GPU cap the live engine enforced (derived from `quota`).
    pub gpu_limit: Option<u32>,
}

/// One job kept for replay.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryJob {
    /// The live server's job id.
    pub id: u32,
    /// The journal row that submitted it.
    pub seq: u64,
    /// Index into [`History::tenants`].
    pub tenant: u32,
    pub tenant_name: String,
    /// Microseconds after the first submission in the journal.
    pub arrival_us: u64,
    pub gpus: u32,
    pub estimate_secs: Option<f64>,
    /// Measured run time, summed over its attempts (module doc).
    pub run_us: u64,
    /// Attempts that ran (more than one: preempted or requeued).
    pub attempts: u32,
    /// `Completed` or `Failed` (kept with its run time until the failure).
    pub status: JobStatus,
    pub exit_code: Option<i32>,
    pub priority: i32,
    pub cpus: u32,
    pub memory_gib: u32,
}

impl HistoryJob {
    pub fn arrival_secs(&self) -> f64 {
        self.arrival_us as f64 / 1e6
    }
    pub fn run_secs(&self) -> f64 {
        self.run_us as f64 / 1e6
    }
}

/// Jobs skipped for one reason.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    pub reason: &'static str,
    pub jobs: u64,
    /// GPU-hours the skipped jobs held (measured as for kept jobs; a job still
    /// running, up to the journal's last row).
    pub gpu_hours: f64,
}

/// The journal's submissions as a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    /// The database as given.
    pub db: String,
    pub setup: ServerSetup,
    pub epoch_us: u64,
    /// Unix µs of the first submission (arrival 0), if any.
    pub first_submitted_us: Option<u64>,
    pub tenants: Vec<HistoryTenant>,
    /// Kept jobs, by arrival (ties: job id).
    pub jobs: Vec<HistoryJob>,
    /// Skipped jobs by reason, in a fixed order; reasons with no job are left out.
    pub skipped: Vec<Skipped>,
    /// Journal rows replayed.
    pub entries: u64,
    /// Failed jobs kept (with their run time until the failure).
    pub failed_kept: u64,
    /// Rows the engine refused while replaying (a controller bug or a hand-edited
    /// journal; a faithful journal has none), one line each.
    pub warnings: Vec<String>,
}

impl History {
    /// Jobs skipped for all reasons.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.iter().map(|s| s.jobs).sum()
    }
}

/// One place where a replay and the recorded commands differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Journal sequence number of the entry.
    pub seq: u64,
    /// Position among that entry's commands.
    pub index: usize,
    /// The recorded command (`None`: the replay issued one more than was recorded).
    pub expected: Option<String>,
    /// The replay's command (`None`: the replay issued one fewer).
    pub got: Option<String>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |c: &Option<String>| c.clone().unwrap_or_else(|| "(none)".into());
        write!(
            f,
            "seq {} command {}: recorded {}, replay gave {}",
            self.seq,
            self.index,
            show(&self.expected),
            show(&self.got)
        )
    }
}

/// What [`replay_check`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    /// Journal rows replayed.
    pub entries: u64,
    /// Command positions compared (per entry: the longer of the recorded and replayed lists).
    pub commands_compared: u64,
    /// All mismatching positions.
    pub mismatch_count: u64,
    /// The first [`MAX_MISMATCHES_KEPT`] of them, in journal order.
    pub mismatches: Vec<Mismatch>,
    /// Time to read and replay the journal.
    pub elapsed: Duration,
}

impl ReplayReport {
    pub fn ok(&self) -> bool {
        self.mismatch_count == 0
    }
}

/// The stored setup, epoch and journal of `db`, and a fresh `Live` to replay them into.
struct Opened {
    setup: ServerSetup,
    epoch_us: u64,
    records: Vec<Record>,
    db: Db,
}

/// Opens an existing database (a SQLite file is never created by reading it).
async fn open_existing(db: &str) -> Result<Db, HistoryError> {
    let url = crate::journal::database_url(db);
    if let Some(path) = url.strip_prefix("sqlite://").and_then(|rest| rest.split('?').next()) {
        if !std::path::Path::new(path).is_file() {
            return Err(HistoryError::Missing { db: db.to_string() });
        }
    }
    Db::open(db).await.map_err(|source| HistoryError::Journal { db: db.to_string(), source })
}

/// The setup and epoch stored in `db`, without reading the journal.
pub async fn stored_setup(db: &str) -> Result<(ServerSetup, u64), HistoryError> {
    let handle = open_existing(db).await?;
    let meta = read_meta(db, &handle).await;
    handle.close().await;
    meta
}

async fn read_meta(db: &str, handle: &Db) -> Result<(ServerSetup, u64), HistoryError> {
    let journal_err = |source| HistoryError::Journal { db: db.to_string(), source };
    let meta = |key: &'static str, message: String| HistoryError::Meta { db: db.to_string(), key, message };
    let setup_text = handle.meta(META_SETUP).await.map_err(journal_err)?.ok_or_else(|| {
        meta(META_SETUP, "missing (not a cotenant server database, or it never started)".into())
    })?;
    let setup: ServerSetup = serde_json::from_str(&setup_text)
        .map_err(|e| meta(META_SETUP, format!("not a server setup: {e}")))?;
    let epoch_text = handle
        .meta(META_EPOCH)
        .await
        .map_err(journal_err)?
        .ok_or_else(|| meta(META_EPOCH, "missing".into()))?;
    let epoch_us: u64 = epoch_text
        .trim()
        .parse()
        .map_err(|_| meta(META_EPOCH, format!("'{epoch_text}' is not a count of microseconds")))?;
    Ok((setup, epoch_us))
}

async fn open(db: &str) -> Result<Opened, HistoryError> {
    let handle = open_existing(db).await?;
    let (setup, epoch_us) = read_meta(db, &handle).await?;
    let records =
        handle.read_all().await.map_err(|source| HistoryError::Journal { db: db.to_string(), source })?;
    Ok(Opened { setup, epoch_us, records, db: handle })
}

fn fresh_live(db: &str, opened: &Opened) -> Result<Live, HistoryError> {
    Live::new(opened.setup.clone(), opened.epoch_us)
        .map_err(|source| HistoryError::Setup { db: db.to_string(), source })
}

/// Reads the journal of `db` (a SQLite path or a PostgreSQL URL) and derives the
/// workload it records (module doc: what is measured, kept and skipped).
pub async fn load(db: &str) -> Result<History, HistoryError> {
    let opened = open(db).await?;
    opened.db.close().await;
    let mut live = fresh_live(db, &opened)?;
    let mut runs = Runs::default();
    let mut warnings = Vec::new();
    for record in &opened.records {
        check_references(db, &live, record)?;
        let refused = live.engine().violations().len();
        let commands = live.apply(record);
        if let Some(violation) = live.engine().violations().get(refused) {
            warnings.push(format!("journal row {}: the engine refused it: {violation:?}", record.seq));
        }
        runs.follow(&live, record, &commands);
    }
    // Attempts still running count up to the last record (for the skipped GPU-hours).
    let open: Vec<u32> = runs.open.keys().copied().collect();
    for job in open {
        runs.close(&live, job, live.last_at_us());
    }
    Ok(assemble(db, &opened, &live, &runs, warnings))
}

/// Rejects a row that names a tenant or job the journal never introduced, or
/// submits a job id twice: replaying it would attach work to the wrong job.
fn check_references(db: &str, live: &Live, record: &Record) -> Result<(), HistoryError> {
    let bad = |message: String| Err(HistoryError::Row { db: db.to_string(), seq: record.seq, message });
    let submitted = |job: u32| live.job(job).is_some_and(|j| !j.request.command.is_empty());
    match &record.entry {
        Entry::TenantAdded { tenant, name, .. } if *tenant as usize != live.tenants().len() => bad(format!(
            "tenant '{name}' has id {tenant}, but the journal has added {} tenants before it",
            live.tenants().len()
        )),
        Entry::Submitted { job, tenant, .. } => {
            if *tenant as usize >= live.tenants().len() {
                bad(format!("job {job} names tenant {tenant}, which the journal never added"))
            } else if submitted(*job) {
                bad(format!("job {job} is submitted a second time"))
            } else {
                Ok(())
            }
        }
        Entry::Cancelled { job }
        | Entry::Exited { job, .. }
        | Entry::LaunchFailed { job, .. }
        | Entry::Vanished { job, .. }
            if !submitted(*job) =>
        {
            bad(format!("{} names job {job}, which the journal never submitted", record.entry.kind()))
        }
        Entry::NodeJoined { node, .. } | Entry::NodeLost { node } if *node as usize >= live.nodes().len() => {
            bad(format!(
                "{} names node {node}; the setup declares {}",
                record.entry.kind(),
                live.nodes().len()
            ))
        }
        _ => Ok(()),
    }
}

/// Per-job attempt bookkeeping while replaying.
#[derive(Debug, Default)]
struct Runs {
    /// job -> (start of the running attempt, Unix µs)
    open: BTreeMap<u32, u64>,
    run_us: BTreeMap<u32, u64>,
    attempts: BTreeMap<u32, u32>,
    launch_failed: BTreeMap<u32, bool>,
    /// job -> the row that submitted it
    submitted_seq: BTreeMap<u32, u64>,
}

impl Runs {
    fn follow(&mut self, live: &Live, record: &Record, commands: &[Command]) {
        let at_us = live.last_at_us();
        if let Entry::Submitted { job, .. } = &record.entry {
            self.submitted_seq.insert(*job, record.seq);
        }
        for command in commands {
            match command {
                Command::Start { job, .. } | Command::StartShared { job, .. } => {
                    self.open.insert(job.0, at_us);
                    *self.attempts.entry(job.0).or_default() += 1;
                }
                Command::Stop { job, .. } | Command::End { job, .. } => self.close(live, job.0, at_us),
                Command::Resize { .. } | Command::Rerate { .. } | Command::Allocate { .. } => {}
            }
        }
        // A completed attempt is closed by the record itself (the engine answers
        // `JobFinished` with no command for the job).
        if let Entry::Exited { job, .. } | Entry::LaunchFailed { job, .. } | Entry::Vanished { job, .. } =
            &record.entry
        {
            if live.job(*job).is_some_and(|j| j.status != JobStatus::Running) {
                self.close(live, *job, at_us);
            }
            self.launch_failed.insert(*job, matches!(record.entry, Entry::LaunchFailed { .. }));
        }
    }

    /// Ends the job's running attempt at `at_us`, from the agent-reported start if known.
    fn close(&mut self, live: &Live, job: u32, at_us: u64) {
        let Some(decided) = self.open.remove(&job) else { return };
        let started = live.job(job).and_then(|j| j.started_us).filter(|&s| s >= decided && s <= at_us);
        *self.run_us.entry(job).or_default() += at_us - started.unwrap_or(decided);
    }
}

const SKIP_CANCELLED_WAITING: &str = "cancelled before it started";
const SKIP_CANCELLED_RUNNING: &str =
    "cancelled after it ran (its run time says when the user gave up, not the work it needed)";
const SKIP_LOST: &str = "lost (its process vanished without an exit status: run time unknown)";
const SKIP_LAUNCH_FAILED: &str = "failed to launch (no process ran)";
const SKIP_NEVER_RAN: &str = "failed without running (ended by the engine before it started)";
const SKIP_PENDING: &str = "still pending when the journal ends";
const SKIP_RUNNING: &str =
    "still running when the journal ends (run time not known yet; GPU-hours up to its last row)";
/// Reasons in the order [`History::skipped`] lists them.
const SKIP_ORDER: [&str; 7] = [
    SKIP_CANCELLED_WAITING,
    SKIP_CANCELLED_RUNNING,
    SKIP_LOST,
    SKIP_LAUNCH_FAILED,
    SKIP_NEVER_RAN,
    SKIP_PENDING,
    SKIP_RUNNING,
];

fn assemble(db: &str, opened: &Opened, live: &Live, runs: &Runs, warnings: Vec<String>) -> History {
    let tenants = live
        .tenants()
        .iter()
        .map(|t| HistoryTenant {
            name: t.name.clone(),
            weight: t.weight,
            quota: t.quota.clone(),
            gpu_limit: t.gpu_limit,
        })
        .collect();
    let submitted: Vec<_> = live.jobs().iter().filter(|j| !j.request.command.is_empty()).collect();
    let first_submitted_us = submitted.iter().map(|j| j.submitted_us).min();
    let mut skipped: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    let mut jobs = Vec::new();
    let mut failed_kept = 0;
    for job in submitted {
        let run_us = runs.run_us.get(&job.id).copied().unwrap_or(0);
        let attempts = runs.attempts.get(&job.id).copied().unwrap_or(0);
        let skip = match job.status {
            JobStatus::Completed => None,
            JobStatus::Failed if runs.launch_failed.get(&job.id) == Some(&true) => Some(SKIP_LAUNCH_FAILED),
            JobStatus::Failed if attempts == 0 => Some(SKIP_NEVER_RAN),
            JobStatus::Failed => {
                failed_kept += 1;
                None
            }
            JobStatus::Cancelled if attempts == 0 => Some(SKIP_CANCELLED_WAITING),
            JobStatus::Cancelled => Some(SKIP_CANCELLED_RUNNING),
            JobStatus::Lost => Some(SKIP_LOST),
            JobStatus::Pending => Some(SKIP_PENDING),
            JobStatus::Running => Some(SKIP_RUNNING),
        };
        if let Some(reason) = skip {
            let slot = skipped.entry(reason).or_default();
            slot.0 += 1;
            slot.1 += run_us * u64::from(job.request.gpus);
            continue;
        }
        jobs.push(HistoryJob {
            id: job.id,
            seq: runs.submitted_seq.get(&job.id).copied().unwrap_or(0),
            tenant: job.tenant,
            tenant_name: live.tenants().get(job.tenant as usize).map_or_else(String::new, |t| t.name.clone()),
            arrival_us: job.submitted_us - first_submitted_us.unwrap_or(job.submitted_us),
            gpus: job.request.gpus,
            estimate_secs: job.request.estimate_secs,
            run_us,
            attempts,
            status: job.status,
            exit_code: job.exit_code,
            priority: job.request.priority,
            cpus: job.request.cpus,
            memory_gib: job.request.memory_gib,
        });
    }
    jobs.sort_by_key(|j| (j.arrival_us, j.id));
    let skipped = SKIP_ORDER
        .iter()
        .filter_map(|reason| {
            skipped.get(reason).map(|&(jobs, gpu_us)| Skipped {
                reason,
                jobs,
                gpu_hours: gpu_us as f64 / 3.6e9,
            })
        })
        .collect();
    History {
        db: db.to_string(),
        setup: opened.setup.clone(),
        epoch_us: opened.epoch_us,
        first_submitted_us,
        tenants,
        jobs,
        skipped,
        entries: opened.records.len() as u64,
        failed_kept,
        warnings,
    }
}

/// Writes `records` to the journal of `db` the way the controller does: the
/// setup and epoch into meta (if absent), then per record the row appended and
/// the commands a [`Live`] answered recorded beside it. For tests and tools that
/// build a journal without a server; the records must be in sequence order, and a
/// database that already holds another setup or epoch is refused.
pub async fn record(
    db: &str,
    setup: &ServerSetup,
    epoch_us: u64,
    records: &[Record],
) -> Result<(), HistoryError> {
    let journal_err = |source| HistoryError::Journal { db: db.to_string(), source };
    let handle = Db::open(db).await.map_err(journal_err)?;
    let setup_json = serde_json::to_string(setup).map_err(|e| HistoryError::Meta {
        db: db.to_string(),
        key: META_SETUP,
        message: e.to_string(),
    })?;
    for (key, value) in [(META_SETUP, setup_json), (META_EPOCH, epoch_us.to_string())] {
        let stored = handle.meta_init(key, &value).await.map_err(journal_err)?;
        if stored != value {
            let message = format!("holds {stored}, not {value}: record into a new database");
            return Err(HistoryError::Meta { db: db.to_string(), key, message });
        }
    }
    let mut live = Live::new(setup.clone(), epoch_us)
        .map_err(|source| HistoryError::Setup { db: db.to_string(), source })?;
    for record in records {
        handle.append(std::slice::from_ref(record)).await.map_err(journal_err)?;
        let commands = live.apply(record).iter().map(|c| format!("{c:?}")).collect();
        handle.record_commands(&[(record.seq, commands)]).await.map_err(journal_err)?;
    }
    handle.close().await;
    Ok(())
}

/// Replays the journal of `db` into a fresh engine built from the stored setup
/// and compares each entry's commands (`format!("{c:?}")`) with those recorded
/// beside it. Recorded commands for a sequence number the journal lacks count
/// as mismatches too.
pub async fn replay_check(db: &str) -> Result<ReplayReport, HistoryError> {
    let started = Instant::now();
    let opened = open(db).await?;
    let mut recorded = opened
        .db
        .read_commands()
        .await
        .map_err(|source| HistoryError::Journal { db: db.to_string(), source })?;
    opened.db.close().await;
    let mut live = fresh_live(db, &opened)?;
    let mut report = ReplayReport {
        entries: opened.records.len() as u64,
        commands_compared: 0,
        mismatch_count: 0,
        mismatches: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for record in &opened.records {
        let got: Vec<String> = live.apply(record).iter().map(|c| format!("{c:?}")).collect();
        let expected = recorded.remove(&record.seq).unwrap_or_default();
        compare(&mut report, record.seq, &expected, &got);
    }
    for (seq, expected) in recorded {
        compare(&mut report, seq, &expected, &[]);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

fn compare(report: &mut ReplayReport, seq: u64, expected: &[String], got: &[String]) {
    for index in 0..expected.len().max(got.len()) {
        report.commands_compared += 1;
        let (e, g) = (expected.get(index), got.get(index));
        if e != g {
            report.mismatch_count += 1;
            if report.mismatches.len() < MAX_MISMATCHES_KEPT {
                report.mismatches.push(Mismatch { seq, index, expected: e.cloned(), got: g.cloned() });
            }
        }
    }
}
