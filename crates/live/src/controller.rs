//! STAND-IN controller written by the http helper so that `http` compiles and
//! its tests run: the contract's public signatures, implemented simply over a
//! mutex (no engine task, no group commit, no watchdog, `desired` answers at
//! once). The controller helper's real file replaces this one at merge.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::agent_api;
use crate::api;
use crate::journal::{self, Db, Entry, Record};
pub use crate::setup::Refusal;
use crate::setup::{Live, ServerSetup};

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    pub db: String,
    pub setup: ServerSetup,
    pub heartbeat_timeout: Duration,
    pub log_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error("setup: {0}")]
    Setup(String),
}

pub enum LogRefusal {
    Have(u64),
    Bad(Refusal),
}

impl std::fmt::Debug for LogRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogRefusal::Have(n) => write!(f, "Have({n})"),
            LogRefusal::Bad(r) => write!(f, "Bad({r:?})"),
        }
    }
}

struct Inner {
    db: Db,
    live: Mutex<Live>,
    /// Serializes check, append and apply (the real controller's engine task does this).
    commit: tokio::sync::Mutex<u64>,
    log_dir: PathBuf,
    replayed: u64,
    replay_ms: u64,
}

#[derive(Clone)]
pub struct Controller {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

impl Controller {
    pub async fn start(config: ControllerConfig) -> Result<Controller, ControllerError> {
        let db = Db::open(&config.db).await?;
        let text = serde_json::to_string(&config.setup).map_err(|e| ControllerError::Setup(e.to_string()))?;
        let stored = db.meta_init("setup", &text).await?;
        if stored != text {
            return Err(ControllerError::Setup(format!("database has setup {stored}, started with {text}")));
        }
        let epoch: u64 = db
            .meta_init("epoch_us", &wall_us().to_string())
            .await?
            .parse()
            .map_err(|_| ControllerError::Setup("meta epoch_us is not a number".into()))?;
        let started = Instant::now();
        let mut live = Live::new(config.setup, epoch).map_err(|e| ControllerError::Setup(e.to_string()))?;
        let records = db.read_all().await?;
        for record in &records {
            live.apply(record);
        }
        let next = db.next_seq().await?;
        Ok(Controller {
            inner: Arc::new(Inner {
                db,
                live: Mutex::new(live),
                commit: tokio::sync::Mutex::new(next),
                log_dir: config.log_dir,
                replayed: records.len() as u64,
                replay_ms: started.elapsed().as_millis() as u64,
            }),
        })
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks, journals and applies one entry built from the current state.
    async fn commit<T>(
        &self,
        make: impl FnOnce(&Live) -> Result<Entry, Refusal>,
        answer: impl FnOnce(&Live) -> T,
    ) -> Result<T, Refusal> {
        let mut seq = self.inner.commit.lock().await;
        let record = {
            let live = self.live();
            let entry = make(&live)?;
            live.check(&entry)?;
            Record { seq: *seq, at_us: wall_us().max(live.last_at_us()), entry }
        };
        if let Err(e) = self.inner.db.append(std::slice::from_ref(&record)).await {
            return Err(Refusal::Conflict(format!("storage: {e}")));
        }
        *seq += 1;
        let mut live = self.live();
        live.apply(&record);
        Ok(answer(&live))
    }

    pub fn db(&self) -> &Db {
        &self.inner.db
    }
    pub fn health(&self) -> api::Health {
        api::Health {
            ok: true,
            policy: self.live().setup().policy.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            replayed: self.inner.replayed,
            replay_ms: self.inner.replay_ms,
        }
    }
    pub fn now_us(&self) -> u64 {
        wall_us()
    }

    pub async fn add_tenant(&self, req: api::TenantRequest) -> Result<api::TenantView, Refusal> {
        let name = req.name.clone();
        self.commit(
            |live| {
                Ok(Entry::TenantAdded {
                    tenant: live.tenants().len() as u32,
                    name: req.name,
                    weight: req.weight,
                    gpu_limit: (!req.quota.is_empty()).then(|| req.quota.values().sum()),
                    quota: req.quota,
                    unix_user: req.unix_user,
                })
            },
            |_| (),
        )
        .await?;
        self.tenants()
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Refusal::NotFound(format!("tenant '{name}'")))
    }
    pub fn tenants(&self) -> Vec<api::TenantView> {
        let live = self.live();
        live.tenants()
            .iter()
            .enumerate()
            .map(|(i, t)| api::TenantView {
                id: i as u32,
                name: t.name.clone(),
                weight: t.weight,
                quota: t.quota.clone(),
                unix_user: t.unix_user.clone(),
                gpus_held: live
                    .jobs()
                    .iter()
                    .filter(|j| j.tenant == i as u32)
                    .map(|j| j.gpus.len() as u32)
                    .sum(),
            })
            .collect()
    }
    pub fn tenant_id(&self, name: &str) -> Option<u32> {
        self.live().tenant_id(name)
    }

    pub async fn submit(&self, tenant: u32, req: api::SubmitRequest) -> Result<api::JobView, Refusal> {
        let mut id = 0;
        self.commit(
            |live| {
                id = live.jobs().len() as u32;
                Ok(Entry::Submitted { job: id, tenant, request: req })
            },
            |_| (),
        )
        .await?;
        self.live().view(id).ok_or_else(|| Refusal::NotFound(format!("no job {id}")))
    }
    pub async fn cancel(&self, job: u32) -> Result<api::JobView, Refusal> {
        self.commit(|_| Ok(Entry::Cancelled { job }), |live| live.view(job))
            .await?
            .ok_or_else(|| Refusal::NotFound(format!("no job {job}")))
    }
    pub fn job(&self, id: u32) -> Option<(u32, api::JobView)> {
        let live = self.live();
        let record = live.job(id)?;
        Some((record.tenant, live.view(id)?))
    }
    pub fn job_events(&self, id: u32) -> Option<Vec<api::JobEvent>> {
        let live = self.live();
        live.view(id)?;
        live.job(id).map(|j| j.events.clone())
    }
    pub fn list_jobs(
        &self,
        tenant: Option<u32>,
        status: Option<api::JobStatus>,
        since: u64,
        until: u64,
        after: Option<(u64, u32)>,
        limit: usize,
    ) -> (Vec<api::JobView>, Option<(u64, u32)>) {
        let live = self.live();
        let mut keys: Vec<(u64, u32)> = live
            .jobs()
            .iter()
            .filter(|j| !j.request.command.is_empty())
            .filter(|j| tenant.is_none_or(|t| j.tenant == t))
            .filter(|j| status.is_none_or(|s| j.status == s))
            .filter(|j| (since..until).contains(&j.submitted_us))
            .map(|j| (j.submitted_us, j.id))
            .filter(|key| after.is_none_or(|a| *key > a))
            .collect();
        keys.sort_unstable();
        let more = keys.len() > limit;
        keys.truncate(limit);
        let last = if more { keys.last().copied() } else { None };
        (keys.iter().filter_map(|&(_, id)| live.view(id)).collect(), last)
    }
    pub fn queue(&self) -> Vec<(u32, api::QueueEntry)> {
        let live = self.live();
        let mut pending: Vec<_> = live
            .jobs()
            .iter()
            .filter(|j| j.status == api::JobStatus::Pending && live.is_live(j.id))
            .collect();
        pending.sort_by_key(|j| (j.submitted_us, j.id));
        pending
            .iter()
            .enumerate()
            .map(|(position, j)| {
                let view = live.view(j.id);
                let entry = api::QueueEntry {
                    position: position as u32,
                    job: j.id,
                    tenant: view.as_ref().map_or_else(String::new, |v| v.tenant.clone()),
                    gpus: j.request.gpus,
                    waiting_since_us: j.submitted_us,
                    reason: view.and_then(|v| v.reason),
                };
                (j.tenant, entry)
            })
            .collect()
    }
    pub fn nodes(&self) -> Vec<api::NodeView> {
        let live = self.live();
        live.nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let jobs: Vec<u32> = live.desired(i as u32).attempts.iter().map(|a| a.job).collect();
                let used: u32 =
                    live.desired(i as u32).attempts.iter().map(|a| a.gpu_uuids.len() as u32).sum();
                api::NodeView {
                    name: n.decl.name.clone(),
                    gpu_type: n.decl.gpu_type.clone(),
                    gpus: n.decl.gpus,
                    free_gpus: if n.up { n.decl.gpus.saturating_sub(used) } else { 0 },
                    state: if n.up { "up" } else { "down" }.into(),
                    last_heartbeat_us: None,
                    jobs,
                    gpu_uuids: n.gpu_uuids.clone(),
                }
            })
            .collect()
    }
    pub fn usage(&self, since: u64, until: u64) -> Vec<(u32, api::UsageRow)> {
        let live = self.live();
        let now = wall_us();
        let mut rows: BTreeMap<u32, api::UsageRow> = BTreeMap::new();
        for (i, t) in live.tenants().iter().enumerate() {
            rows.insert(
                i as u32,
                api::UsageRow { tenant: t.name.clone(), gpu_hours: 0.0, jobs_started: 0, jobs_completed: 0 },
            );
        }
        for job in live.jobs().iter().filter(|j| (since..until).contains(&j.submitted_us)) {
            if let Some(row) = rows.get_mut(&job.tenant) {
                row.gpu_hours += live.gpu_us(job.id, now) as f64 / 3.6e9;
                row.jobs_started += u32::from(job.attempt > 0);
                row.jobs_completed += u32::from(job.status == api::JobStatus::Completed);
            }
        }
        rows.into_iter().collect()
    }

    pub async fn register(&self, req: agent_api::Register) -> Result<agent_api::Registered, Refusal> {
        let gpu_type = req.gpu_type.clone().unwrap_or_else(|| {
            req.gpus.first().map(|g| agent_api::normalize_gpu_type(&g.model)).unwrap_or_default()
        });
        let node = self.live().bind_node(&req.name, &gpu_type, req.gpus.len() as u32)?;
        let entry = Entry::NodeJoined {
            node,
            name: req.name.clone(),
            gpu_uuids: req.gpus.iter().map(|g| g.uuid.clone()).collect(),
        };
        self.commit(|_| Ok(entry), |live| live.nodes()[node as usize].decl.name.clone())
            .await
            .map(|node_name| agent_api::Registered { node, node_name, heartbeat_ms: 1000 })
    }
    pub async fn desired(&self, q: agent_api::DesiredQuery) -> Result<agent_api::Desired, Refusal> {
        let live = self.live();
        if q.node as usize >= live.nodes().len() {
            return Err(Refusal::NotFound(format!("no node {}", q.node)));
        }
        Ok(live.desired(q.node))
    }
    pub async fn report(&self, r: agent_api::Report) -> Result<(), Refusal> {
        for event in r.events {
            let entry = match event {
                agent_api::AgentEvent::Started { job, attempt, pid, at_us } => {
                    self.live().note_started(job, attempt, pid, at_us);
                    continue;
                }
                agent_api::AgentEvent::Exited { job, attempt, code, signal, .. } => {
                    Entry::Exited { job, attempt, code, signal }
                }
                agent_api::AgentEvent::LaunchFailed { job, attempt, message, .. } => {
                    Entry::LaunchFailed { job, attempt, message }
                }
                agent_api::AgentEvent::Vanished { job, attempt } => Entry::Vanished { job, attempt },
            };
            match self.commit(|_| Ok(entry), |_| ()).await {
                Ok(()) | Err(Refusal::Stale { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    pub async fn log_chunk(&self, c: agent_api::LogChunk) -> Result<(), LogRefusal> {
        if c.stream != "stdout" && c.stream != "stderr" {
            return Err(LogRefusal::Bad(Refusal::BadRequest(format!("stream: '{}'", c.stream))));
        }
        if self.live().job(c.job).is_none() {
            return Err(LogRefusal::Bad(Refusal::NotFound(format!("no job {}", c.job))));
        }
        let path = self.log_path(c.job, c.attempt, &c.stream);
        let bad = |e: std::io::Error| LogRefusal::Bad(Refusal::Conflict(format!("{}: {e}", path.display())));
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(bad)?;
        }
        let have = tokio::fs::metadata(&path).await.map_or(0, |m| m.len());
        if have != c.offset {
            return Err(LogRefusal::Have(have));
        }
        use tokio::io::AsyncWriteExt;
        let mut file =
            tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await.map_err(bad)?;
        file.write_all(c.data.as_bytes()).await.map_err(bad)?;
        file.flush().await.map_err(bad)
    }
    pub fn log_path(&self, job: u32, attempt: u32, stream: &str) -> PathBuf {
        self.inner.log_dir.join(job.to_string()).join(format!("{attempt}.{stream}"))
    }
    pub async fn shutdown(&self) {
        self.inner.db.close().await;
    }
}
