//! The controller: the async shell around [`Live`]. It owns the journal
//! ([`Db`]), replays it on start, and runs three tasks:
//!
//! - the **engine task** ([`engine`]), the only writer of the state: it takes the
//!   requests waiting on its channel as one batch, checks each with
//!   [`Live::check`], journals the accepted entries in ONE transaction (group
//!   commit), then applies them, records the engine's commands, publishes the
//!   node versions agents long-poll on, and answers the callers. Nothing is
//!   answered and no desired set changes before the commit;
//! - the **heartbeat watchdog**: an agent silent for `heartbeat_timeout` is lost
//!   (`Entry::NodeLost`, its jobs are requeued). Heartbeat times are in memory
//!   only: after a restart every node that was up gets one timeout of grace;
//! - the **wakeup timer**: `Entry::Wakeup` when the policy's timer passes.
//!
//! Failure semantics: an entry is answered only after its transaction commits,
//! so every answered request survives kill -9. If the journal cannot be written
//! the process exits (status 70) and a restart replays what was committed. The
//! commands of a batch are recorded in a second transaction after it is applied:
//! a crash between the two leaves the last batch's entries without recorded
//! commands (a replay check should treat a missing tail as unrecorded, not as a
//! mismatch). Agents' `Started` reports are not journaled: after a restart,
//! `started_us` and the `running` event of current attempts are unknown.
//!
//! Reads (`job`, `list_jobs`, `queue`, ...) lock the shared state briefly and
//! never wait on the engine task's channel. The state is behind a `Mutex`, not
//! an `RwLock`: the engine's policy is `Send` but not `Sync`.

mod engine;
mod state;
mod timers;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;

use self::engine::{Answer, Op, Request};
use self::state::State;
use crate::agent_api::{self, AgentEvent};
use crate::api;
use crate::journal::{Db, Entry, JournalError};
pub use crate::setup::Refusal;
use crate::setup::{Live, ServerSetup, SetupError};

/// Default time an agent may stay silent before its node is lost.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest a desired-set long-poll is held.
pub const MAX_POLL_WAIT: Duration = Duration::from_secs(30);
/// Requests the engine task's channel holds before callers wait to send.
const CHANNEL_CAPACITY: usize = 8192;

pub struct ControllerConfig {
    /// Path or URL, as [`Db::open`] takes it.
    pub db: String,
    /// Stored in meta `setup` on first start; a later start with a different setup is refused.
    pub setup: ServerSetup,
    /// An agent silent this long is lost (`Entry::NodeLost`).
    pub heartbeat_timeout: Duration,
    /// Job logs: `{log_dir}/{job}/{attempt}.{stdout|stderr}`.
    pub log_dir: PathBuf,
}

impl ControllerConfig {
    /// A configuration with the default heartbeat timeout and `logs` beside the database.
    pub fn new(db: &str, setup: ServerSetup) -> ControllerConfig {
        let log_dir = Path::new(db).parent().map_or_else(|| PathBuf::from("logs"), |p| p.join("logs"));
        ControllerConfig { db: db.to_string(), setup, heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT, log_dir }
    }
}

impl std::fmt::Debug for ControllerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerConfig")
            .field("db", &self.db)
            .field("policy", &self.setup.policy)
            .field("heartbeat_timeout", &self.heartbeat_timeout)
            .field("log_dir", &self.log_dir)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("server setup: {0}")]
    Setup(#[from] SetupError),
    #[error(
        "database {db} was created with another setup: {differences}; start with the stored setup or use a new database"
    )]
    SetupChanged { db: String, differences: String },
    #[error("database {db}: meta '{key}' = '{value}': {message}")]
    Meta { db: String, key: String, value: String, message: String },
}

/// Why a log chunk was not appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRefusal {
    /// The server's copy ends at this offset: send from there.
    Have(u64),
    Bad(Refusal),
}

/// A cheap handle on the running controller; the tasks stop when the last
/// handle is dropped (or at [`Controller::shutdown`]).
#[derive(Clone)]
pub struct Controller {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("policy", &self.core().health.policy).finish_non_exhaustive()
    }
}

/// Dropped with the last `Controller`: stops the tasks.
struct Handle {
    core: Arc<Core>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.core.stop.send_replace(true);
    }
}

/// What the handle and the tasks share.
struct Core {
    db: Db,
    heartbeat_timeout: Duration,
    log_dir: PathBuf,
    health: api::Health,
    state: Mutex<State>,
    requests: mpsc::Sender<Request>,
    /// Per node: the version of its desired set, published after each commit.
    versions: Vec<watch::Sender<u64>>,
    beats: Mutex<Vec<Beat>>,
    stop: watch::Sender<bool>,
    /// Signalled after each committed batch (the wakeup timer re-reads its deadline).
    batch_done: Notify,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes log appends (offset check and write).
    log_lock: tokio::sync::Mutex<()>,
}

/// An agent's liveness, in memory only.
#[derive(Clone, Debug, Default)]
struct Beat {
    last: Option<Instant>,
    last_us: Option<u64>,
    /// Long-polls in flight: the agent is connected.
    polls: u32,
    /// The watchdog asked for `NodeLost` and waits for it to commit.
    lost_sent: bool,
    /// The agent's latest GPU readings (NVML; none for fake GPUs). Not journaled.
    gpu_stats: Vec<agent_api::GpuStat>,
}

/// Locks a mutex; a panic elsewhere while holding it leaves consistent data
/// (every change is made under one lock), so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Unix time, microseconds.
pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

fn shutting_down() -> Refusal {
    Refusal::Conflict("the controller is shutting down; try again".into())
}

impl Controller {
    /// Opens the db, stores or checks the setup and the epoch (meta `epoch_us`),
    /// replays the journal into a fresh [`Live`] (timing it), and spawns the
    /// engine task, the heartbeat watchdog and the wakeup timer.
    pub async fn start(config: ControllerConfig) -> Result<Controller, ControllerError> {
        // A setup that cannot build an engine (unknown policy, bad option) is
        // refused before it is stored as the database's setup.
        config.setup.engine()?;
        let db = Db::open(&config.db).await?;
        check_setup(&db, &config.db, &config.setup).await?;
        let epoch_text = db.meta_init("epoch_us", &now_us().to_string()).await?;
        let epoch_us: u64 =
            epoch_text.parse().map_err(|e: std::num::ParseIntError| ControllerError::Meta {
                db: config.db.clone(),
                key: "epoch_us".into(),
                value: epoch_text.clone(),
                message: e.to_string(),
            })?;
        let replay_started = Instant::now();
        let records = db.read_all().await?;
        let next_seq = records.last().map_or(1, |r| r.seq + 1);
        let mut state = State::new(Live::new(config.setup.clone(), epoch_us)?, next_seq);
        for record in &records {
            state.apply(record);
        }
        let replay_ms = replay_started.elapsed().as_millis() as u64;
        tracing::info!(entries = records.len(), replay_ms, db = %config.db, "journal replayed");
        let start = Instant::now();
        let beats = state
            .live
            .nodes()
            .iter()
            .map(|n| Beat { last: n.up.then_some(start), last_us: n.up.then(now_us), ..Beat::default() })
            .collect();
        let versions = state.live.nodes().iter().map(|n| watch::Sender::new(n.version)).collect();
        let (requests, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        let (stop, _) = watch::channel(false);
        let core = Arc::new(Core {
            db,
            heartbeat_timeout: config.heartbeat_timeout,
            log_dir: config.log_dir,
            health: api::Health {
                ok: true,
                policy: config.setup.policy.clone(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                replayed: records.len() as u64,
                replay_ms,
            },
            state: Mutex::new(state),
            requests,
            versions,
            beats: Mutex::new(beats),
            stop,
            batch_done: Notify::new(),
            tasks: Mutex::new(Vec::new()),
            log_lock: tokio::sync::Mutex::new(()),
        });
        let tasks = vec![
            tokio::spawn(engine::run(core.clone(), receiver, core.stop.subscribe())),
            tokio::spawn(timers::watchdog(core.clone(), core.stop.subscribe())),
            tokio::spawn(timers::wakeups(core.clone(), core.stop.subscribe())),
        ];
        *lock(&core.tasks) = tasks;
        Ok(Controller { handle: Arc::new(Handle { core }) })
    }

    fn core(&self) -> &Core {
        &self.handle.core
    }

    pub fn db(&self) -> &Db {
        &self.core().db
    }

    pub fn health(&self) -> api::Health {
        self.core().health.clone()
    }

    /// Unix µs (wall clock).
    pub fn now_us(&self) -> u64 {
        now_us()
    }

    /// Stops the tasks (a batch being committed finishes first) and closes the db.
    pub async fn shutdown(&self) {
        let core = self.core();
        core.stop.send_replace(true);
        let tasks = std::mem::take(&mut *lock(&core.tasks));
        for task in tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "controller task ended abnormally");
            }
        }
        core.db.close().await;
    }

    // ---- tenants ----

    /// Adds a tenant. `quota`: `{"total": N}` or per declared GPU type `{TYPE: N}`;
    /// the engine enforces the sum as the tenant's GPU limit.
    pub async fn add_tenant(&self, req: api::TenantRequest) -> Result<api::TenantView, Refusal> {
        let quota = canonical_quota(&req.quota, &self.gpu_types())?;
        let gpu_limit = (!quota.is_empty()).then(|| quota.values().sum());
        let op = Op::AddTenant {
            name: req.name.clone(),
            weight: req.weight,
            quota,
            gpu_limit,
            unix_user: req.unix_user.clone(),
        };
        let Answer::Tenant(id) = call(self.core(), op).await? else {
            return Err(Refusal::Conflict("unexpected answer to add_tenant".into()));
        };
        self.tenants()
            .into_iter()
            .find(|t| t.id == id)
            .ok_or_else(|| Refusal::NotFound(format!("tenant {id} vanished")))
    }

    fn gpu_types(&self) -> Vec<String> {
        lock(&self.core().state).live.engine().cluster().spec().gpu_types.clone()
    }

    pub fn tenants(&self) -> Vec<api::TenantView> {
        lock(&self.core().state).tenants()
    }

    pub fn tenant_id(&self, name: &str) -> Option<u32> {
        lock(&self.core().state).live.tenant_id(name)
    }

    // ---- jobs (callers check scope first; these do not) ----

    pub async fn submit(&self, tenant: u32, req: api::SubmitRequest) -> Result<api::JobView, Refusal> {
        let Answer::Job(id) = call(self.core(), Op::Submit { tenant, request: req }).await? else {
            return Err(Refusal::Conflict("unexpected answer to submit".into()));
        };
        self.view_of(id)
    }

    pub async fn cancel(&self, job: u32) -> Result<api::JobView, Refusal> {
        call(self.core(), Op::Cancel { job }).await?;
        self.view_of(job)
    }

    fn view_of(&self, id: u32) -> Result<api::JobView, Refusal> {
        self.job(id).map(|(_, view)| view).ok_or_else(|| Refusal::NotFound(format!("no job {id}")))
    }

    /// The job and its tenant's id.
    pub fn job(&self, id: u32) -> Option<(u32, api::JobView)> {
        lock(&self.core().state).job(id)
    }

    pub fn job_events(&self, id: u32) -> Option<Vec<api::JobEvent>> {
        let state = lock(&self.core().state);
        state.live.view(id)?;
        state.live.job(id).map(|j| j.events.clone())
    }

    /// Jobs of `tenant` (None: all) submitted in `[since, until)`, optionally one
    /// status, ordered by (submitted_us, id), starting strictly after `after`; at
    /// most `limit`. Returns the page and the key of its last item if more follow.
    pub fn list_jobs(
        &self,
        tenant: Option<u32>,
        status: Option<api::JobStatus>,
        since: u64,
        until: u64,
        after: Option<(u64, u32)>,
        limit: usize,
    ) -> (Vec<api::JobView>, Option<(u64, u32)>) {
        lock(&self.core().state).list_jobs(tenant, status, since, until, after, limit)
    }

    /// How many jobs are in each status, in [`api::JobStatus::ALL`]'s order
    /// (for `/metrics`: no job views are built).
    pub fn status_counts(&self) -> [u64; 6] {
        lock(&self.core().state).status_counts()
    }

    /// (tenant id, entry) for every pending job, in the engine's order.
    pub fn queue(&self) -> Vec<(u32, api::QueueEntry)> {
        lock(&self.core().state).queue()
    }

    /// Nodes with the ids of the jobs on them (http hides them from tenants).
    pub fn nodes(&self) -> Vec<api::NodeView> {
        let (beats, stats): (Vec<Option<u64>>, Vec<Vec<agent_api::GpuStat>>) =
            lock(&self.core().beats).iter().map(|b| (b.last_us, b.gpu_stats.clone())).unzip();
        let mut nodes = lock(&self.core().state).nodes(&beats);
        for (node, stats) in nodes.iter_mut().zip(stats) {
            node.gpu_stats = stats;
        }
        nodes
    }

    /// GPU-hours per tenant in `[since, until)`, jobs whose first attempt
    /// started in it and jobs that completed in it.
    pub fn usage(&self, since: u64, until: u64) -> Vec<(u32, api::UsageRow)> {
        lock(&self.core().state).usage(since, until, now_us())
    }

    // ---- agents ----

    /// Binds the agent to a declared node (the one it had, else a free one of
    /// its GPU type and count), brings the node up, and ends as vanished each
    /// attempt the server thinks runs there that the agent does not report.
    pub async fn register(&self, req: agent_api::Register) -> Result<agent_api::Registered, Refusal> {
        if req.name.trim().is_empty() {
            return Err(Refusal::BadRequest("name: empty; give the node's name".into()));
        }
        let Some(first) = req.gpus.first() else {
            return Err(Refusal::BadRequest("gpus: the agent reports no GPUs".into()));
        };
        let gpu_type = req.gpu_type.clone().unwrap_or_else(|| agent_api::normalize_gpu_type(&first.model));
        let mut gpus = req.gpus.clone();
        gpus.sort_by_key(|g| g.index);
        // A known agent is alive from now on, even while its registration commits.
        let known = lock(&self.core().state).live.bind_node(&req.name, &gpu_type, req.gpus.len() as u32);
        if let Ok(node) = known {
            self.beat(node);
        }
        let running: BTreeSet<(u32, u32)> = req.running.iter().map(|r| (r.job, r.attempt)).collect();
        let op = Op::Register {
            name: req.name.clone(),
            gpu_type,
            gpu_uuids: gpus.into_iter().map(|g| g.uuid).collect(),
            running,
        };
        let Answer::Node(node) = call(self.core(), op).await? else {
            return Err(Refusal::Conflict("unexpected answer to register".into()));
        };
        self.beat(node);
        let node_name = {
            let mut state = lock(&self.core().state);
            let at_us = now_us();
            for attempt in &req.running {
                state.live.note_started(attempt.job, attempt.attempt, attempt.pid, at_us);
            }
            state.live.nodes()[node as usize].decl.name.clone()
        };
        tracing::info!(agent = %req.name, node = %node_name, "agent registered");
        let heartbeat_ms = (self.core().heartbeat_timeout.as_millis() as u64 / 3).max(1);
        Ok(agent_api::Registered { node, node_name, heartbeat_ms })
    }

    /// Long-poll: answers at once if the node's version > `after`, else when it
    /// changes or `wait_ms` (at most 30 s) passes. A node that is down (never
    /// registered, or lost) is refused: its agent must register again.
    pub async fn desired(&self, q: agent_api::DesiredQuery) -> Result<agent_api::Desired, Refusal> {
        let core = self.core();
        let node = self.known_node(q.node)?;
        let _poll = PollGuard::new(core, node);
        let mut version = core.versions[node as usize].subscribe();
        let current = {
            let state = lock(&core.state);
            if !state.live.nodes()[node as usize].up {
                return Err(down(&state, node));
            }
            state.live.desired(node)
        };
        if current.version > q.after || q.wait_ms == 0 {
            return Ok(current);
        }
        let wait = Duration::from_millis(q.wait_ms).min(MAX_POLL_WAIT);
        let mut stop = core.stop.subscribe();
        tokio::select! {
            _ = tokio::time::timeout(wait, version.wait_for(|v| *v > q.after)) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
        Ok(lock(&core.state).live.desired(node))
    }

    /// Started -> noted at once (not journaled); Exited, LaunchFailed and
    /// Vanished -> journaled through the engine task. Stale reports (an attempt
    /// that is no longer current) are dropped silently.
    pub async fn report(&self, r: agent_api::Report) -> Result<(), Refusal> {
        let core = self.core();
        let node = self.known_node(r.node)?;
        self.beat(node);
        if !r.gpu_stats.is_empty() {
            if let Some(beat) = lock(&core.beats).get_mut(node as usize) {
                beat.gpu_stats = r.gpu_stats.clone();
            }
        }
        let mut answers = Vec::new();
        for event in r.events {
            let entry = match event {
                AgentEvent::Started { job, attempt, pid, at_us } => {
                    lock(&core.state).live.note_started(job, attempt, pid, at_us);
                    continue;
                }
                AgentEvent::Exited { job, attempt, code, signal, .. } => {
                    Entry::Exited { job, attempt, code, signal }
                }
                AgentEvent::LaunchFailed { job, attempt, message, .. } => {
                    Entry::LaunchFailed { job, attempt, message }
                }
                AgentEvent::Vanished { job, attempt } => Entry::Vanished { job, attempt },
            };
            if let Entry::Exited { job, attempt, .. }
            | Entry::LaunchFailed { job, attempt, .. }
            | Entry::Vanished { job, attempt } = &entry
            {
                // Only a node the attempt runs on can say how it ended.
                if !lock(&core.state).nodes_of(*job).contains(&node) {
                    tracing::debug!(
                        job,
                        attempt,
                        node,
                        "report from a node the attempt does not run on dropped"
                    );
                    continue;
                }
            }
            answers.push(send(core, Op::Report(entry)).await?);
        }
        for answer in answers {
            answer.await.map_err(|_| shutting_down())??;
        }
        Ok(())
    }

    /// Appends a log chunk if `offset` is where the server's copy ends; else
    /// `Have(length)`.
    pub async fn log_chunk(&self, c: agent_api::LogChunk) -> Result<(), LogRefusal> {
        if c.stream != "stdout" && c.stream != "stderr" {
            return Err(LogRefusal::Bad(Refusal::BadRequest(format!(
                "stream: '{}'; use stdout or stderr",
                c.stream
            ))));
        }
        let node = self.known_node(c.node).map_err(LogRefusal::Bad)?;
        self.beat(node);
        let attempts = lock(&self.core().state).live.job(c.job).map(|j| j.attempt);
        match attempts {
            Some(last) if (1..=last).contains(&c.attempt) => {}
            Some(_) => {
                return Err(LogRefusal::Bad(Refusal::NotFound(format!(
                    "job {} has no attempt {}",
                    c.job, c.attempt
                ))))
            }
            None => return Err(LogRefusal::Bad(Refusal::NotFound(format!("no job {}", c.job)))),
        }
        let path = self.log_path(c.job, c.attempt, &c.stream);
        let _guard = self.core().log_lock.lock().await;
        let have = match tokio::fs::metadata(&path).await {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(log_io(&path, &e)),
        };
        if c.offset != have {
            return Err(LogRefusal::Have(have));
        }
        if c.data.is_empty() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|e| log_io(dir, &e))?;
        }
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
            .map_err(|e| log_io(&path, &e))?;
        file.write_all(c.data.as_bytes()).await.map_err(|e| log_io(&path, &e))?;
        file.flush().await.map_err(|e| log_io(&path, &e))?;
        Ok(())
    }

    /// `{log_dir}/{job}/{attempt}.{stream}`.
    pub fn log_path(&self, job: u32, attempt: u32, stream: &str) -> PathBuf {
        self.core().log_dir.join(job.to_string()).join(format!("{attempt}.{stream}"))
    }

    fn known_node(&self, node: u32) -> Result<u32, Refusal> {
        if (node as usize) < self.core().versions.len() {
            Ok(node)
        } else {
            Err(Refusal::NotFound(format!("no node {node}; register first")))
        }
    }

    /// Any call from the node's agent: it is alive.
    fn beat(&self, node: u32) {
        self.core().beat(node);
    }
}

impl Core {
    fn beat(&self, node: u32) {
        if let Some(beat) = lock(&self.beats).get_mut(node as usize) {
            beat.last = Some(Instant::now());
            beat.last_us = Some(now_us());
            beat.lost_sent = false;
        }
    }
}

fn down(state: &State, node: u32) -> Refusal {
    let name = &state.live.nodes()[node as usize].decl.name;
    Refusal::Conflict(format!("node {node} ({name}) is down (never registered, or lost); register again"))
}

fn log_io(path: &Path, error: &std::io::Error) -> LogRefusal {
    tracing::error!(path = %path.display(), %error, "writing a job log failed");
    LogRefusal::Bad(Refusal::Conflict(format!("log file {}: {error}", path.display())))
}

/// A long-poll in flight counts as a heartbeat until it ends.
struct PollGuard<'a> {
    core: &'a Core,
    node: u32,
}

impl<'a> PollGuard<'a> {
    fn new(core: &'a Core, node: u32) -> PollGuard<'a> {
        core.beat(node);
        if let Some(beat) = lock(&core.beats).get_mut(node as usize) {
            beat.polls += 1;
        }
        PollGuard { core, node }
    }
}

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        if let Some(beat) = lock(&self.core.beats).get_mut(self.node as usize) {
            beat.polls = beat.polls.saturating_sub(1);
        }
        self.core.beat(self.node);
    }
}

/// Queues `op` for the engine task; the receiver answers after the commit.
async fn send(core: &Core, op: Op) -> Result<oneshot::Receiver<Result<Answer, Refusal>>, Refusal> {
    if *core.stop.borrow() {
        return Err(shutting_down());
    }
    let (reply, answer) = oneshot::channel();
    core.requests.send(Request { op, reply }).await.map_err(|_| shutting_down())?;
    Ok(answer)
}

async fn call(core: &Core, op: Op) -> Result<Answer, Refusal> {
    send(core, op).await?.await.map_err(|_| shutting_down())?
}

/// `{"total": N}` or `{TYPE: N, ...}` with declared types (case-insensitive, or
/// a unique prefix before the memory size: `a100` for `A100-80GB`), keyed by
/// the declared spelling.
fn canonical_quota(
    quota: &BTreeMap<String, u32>,
    types: &[String],
) -> Result<BTreeMap<String, u32>, Refusal> {
    let mut out = BTreeMap::new();
    for (key, &gpus) in quota {
        let name = if key.eq_ignore_ascii_case("total") {
            "total".to_string()
        } else {
            resolve_type(key, types).ok_or_else(|| {
                Refusal::BadRequest(format!(
                    "quota: unknown GPU type '{key}'; the cluster has {} (or use total)",
                    types.join(", ")
                ))
            })?
        };
        *out.entry(name).or_insert(0) += gpus;
    }
    if out.contains_key("total") && out.len() > 1 {
        return Err(Refusal::BadRequest("quota: give either total or per-type limits, not both".into()));
    }
    Ok(out)
}

fn resolve_type(key: &str, types: &[String]) -> Option<String> {
    if let Some(exact) = types.iter().find(|t| t.eq_ignore_ascii_case(key)) {
        return Some(exact.clone());
    }
    let base = |t: &str| t.split('-').next().unwrap_or(t).to_ascii_lowercase();
    let matches: Vec<&String> = types.iter().filter(|t| base(t) == key.to_ascii_lowercase()).collect();
    match matches.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// Stores the setup on first start; on a later start, refuses a different one,
/// naming what differs.
async fn check_setup(db: &Db, url: &str, setup: &ServerSetup) -> Result<(), ControllerError> {
    let text = serde_json::to_string(setup).map_err(|e| ControllerError::Meta {
        db: url.to_string(),
        key: "setup".into(),
        value: String::new(),
        message: e.to_string(),
    })?;
    let stored_text = db.meta_init("setup", &text).await?;
    if stored_text == text {
        return Ok(());
    }
    let stored: ServerSetup = serde_json::from_str(&stored_text).map_err(|e| ControllerError::Meta {
        db: url.to_string(),
        key: "setup".into(),
        value: stored_text.clone(),
        message: e.to_string(),
    })?;
    let differences = setup_differences(&stored, setup);
    if differences.is_empty() {
        return Ok(());
    }
    Err(ControllerError::SetupChanged { db: url.to_string(), differences: differences.join("; ") })
}

fn setup_differences(stored: &ServerSetup, given: &ServerSetup) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |field: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{field}: stored {a}, given {b}"));
        }
    };
    let nodes = |s: &ServerSetup| {
        s.nodes.iter().map(|n| format!("{}={}x{}", n.name, n.gpus, n.gpu_type)).collect::<Vec<_>>().join(",")
    };
    differ("nodes", nodes(stored), nodes(given));
    differ("policy", stored.policy.clone(), given.policy.clone());
    differ("options", format!("{:?}", stored.options), format!("{:?}", given.options));
    differ("round_secs", format!("{:?}", stored.round_secs), format!("{:?}", given.round_secs));
    differ("seed", stored.seed.to_string(), given.seed.to_string());
    if out.is_empty() && stored != given {
        out.push("node resources (CPUs or memory) differ".into());
    }
    out
}
