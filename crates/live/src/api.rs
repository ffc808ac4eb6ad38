//! The client API: what `cotenant submit`, `jobs`, `show`, ... send to the
//! server and get back, as JSON over HTTP. Paths are under [`PREFIX`].
//!
//! Routes (every one but `GET /v1/health` needs `Authorization: Bearer TOKEN`):
//!
//! | method and path                  | scope           | body / query            | answer              |
//! |----------------------------------|-----------------|-------------------------|---------------------|
//! | `GET  /v1/health`                | none            |                         | [`Health`]          |
//! | `POST /v1/jobs`                  | tenant          | [`SubmitRequest`]       | 201 [`JobView`]     |
//! | `GET  /v1/jobs`                  | tenant, admin   | [`JobQuery`]            | [`Page<JobView>`]   |
//! | `GET  /v1/jobs/{id}`             | owner, admin    |                         | [`JobView`]         |
//! | `POST /v1/jobs/{id}/cancel`      | owner, admin    |                         | [`JobView`]         |
//! | `GET  /v1/jobs/{id}/events`      | owner, admin    |                         | `Vec<`[`JobEvent`]`>` |
//! | `GET  /v1/jobs/{id}/logs`        | owner, admin    | [`LogQuery`]            | text, streamed      |
//! | `GET  /v1/queue`                 | tenant, admin   |                         | `Vec<`[`QueueEntry`]`>` (a tenant sees its own entries, with global positions) |
//! | `GET  /v1/nodes`                 | tenant, admin   |                         | `Vec<`[`NodeView`]`>` (a tenant sees no other tenant's job ids) |
//! | `GET  /v1/usage`                 | tenant, admin   | [`UsageQuery`]          | `Vec<`[`UsageRow`]`>` |
//! | `POST /v1/admin/tenants`         | admin           | [`TenantRequest`]       | 201 [`TenantCreated`] |
//! | `GET  /v1/admin/tenants`         | admin           |                         | `Vec<`[`TenantView`]`>` |
//! | `POST /v1/admin/tokens`          | admin           | [`TokenRequest`]        | 201 [`TokenCreated`] |
//! | agent routes (`crate::agent_api`) | agent, admin   |                         |                     |
//!
//! Errors are [`ApiError`] bodies with a 4xx status (5xx only when the server's
//! own storage fails). A tenant asking for another tenant's job gets 404, as
//! for a job that does not exist: ids of others' jobs are not disclosed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const PREFIX: &str = "/v1";
/// Largest request body the server reads; larger ones get 413.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Most items one page of a listing holds (`limit` is capped to it).
pub const MAX_PAGE: u32 = 1000;
/// Grace period between the checkpoint signal and SIGKILL when a job names none.
pub const DEFAULT_GRACE_SECS: f64 = 30.0;
/// Signal a preempted job gets first when it names none.
pub const DEFAULT_CHECKPOINT_SIGNAL: &str = "SIGTERM";

/// A job to run. `command` is the argv (program first), run without a shell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub command: Vec<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory on the node (default: the agent's work directory for the job).
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default = "one")]
    pub gpus: u32,
    /// GPU type name as the cluster declares it (e.g. `A100-80GB`).
    #[serde(default)]
    pub gpu_type: Option<String>,
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub memory_gib: u32,
    /// The submitter's estimate of the run time, seconds (estimate-based policies read it).
    #[serde(default)]
    pub estimate_secs: Option<f64>,
    #[serde(default)]
    pub priority: i32,
    /// Signal sent first on preemption (`SIGTERM`, `SIGUSR1`, `USR2`, or a number).
    #[serde(default)]
    pub checkpoint_signal: Option<String>,
    /// Seconds between the checkpoint signal and SIGKILL of the process group.
    #[serde(default)]
    pub grace_secs: Option<f64>,
}

fn one() -> u32 {
    1
}

/// The states a job goes through (docs/live.md draws the machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Waiting for GPUs (also after a preemption or a lost node: requeued).
    Pending,
    /// The engine started it; `attempt` counts starts.
    Running,
    Completed,
    /// Exited non-zero (or killed by a signal: 128 + signal).
    Failed,
    Cancelled,
    /// Its process vanished without an exit status, or the policy ended it.
    Lost,
}

impl JobStatus {
    /// Every status, in the order of the state machine.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Pending,
        JobStatus::Running,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::Cancelled,
        JobStatus::Lost,
    ];

    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Pending | JobStatus::Running)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
            JobStatus::Lost => "lost",
        }
    }
}

/// A job as the server knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: u32,
    pub tenant: String,
    pub name: Option<String>,
    pub status: JobStatus,
    pub command: Vec<String>,
    pub gpus: u32,
    pub gpu_type: Option<String>,
    /// Unix time, microseconds.
    pub submitted_us: u64,
    /// When the current (or last) attempt was decided by the engine, and when the
    /// agent reported its process started.
    pub decided_us: Option<u64>,
    pub started_us: Option<u64>,
    pub ended_us: Option<u64>,
    /// Starts so far (a requeued job runs again with the next attempt number).
    pub attempt: u32,
    /// Node names and GPU UUIDs of the current attempt.
    pub nodes: Vec<String>,
    pub gpu_uuids: Vec<String>,
    pub exit_code: Option<i32>,
    /// Why it waits (the engine's verdict, the same text `sim --explain` prints),
    /// or why it ended.
    pub reason: Option<String>,
    pub preemptions: u32,
}

/// `GET /v1/jobs` filters. A tenant's token lists only its own jobs whatever
/// `tenant` says (naming another tenant is 403). Times are Unix microseconds;
/// the window is on submission time, `[since, until)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub status: Option<JobStatus>,
    #[serde(default)]
    pub since: Option<u64>,
    #[serde(default)]
    pub until: Option<u64>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next` of the previous page, as given (opaque).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One page of a listing; `next` is the cursor for the following page (`None`: last page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// `GET /v1/jobs/{id}/logs` query: `stream` is `stdout` (default) or `stderr`;
/// `offset` a byte offset to start from; `follow` keeps the response open and
/// streams new output until the job ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    #[serde(default)]
    pub stream: Option<String>,
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub follow: Option<bool>,
    /// Which attempt's output (default: the latest).
    #[serde(default)]
    pub attempt: Option<u32>,
}

/// Something that happened to a job, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    /// Unix microseconds.
    pub at_us: u64,
    /// `submitted`, `started`, `running` (process up), `preempted`, `requeued`,
    /// `completed`, `failed`, `cancelled`, `lost`, `ended`.
    pub kind: String,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// 0-based position among all pending jobs, in the order the engine keeps them.
    pub position: u32,
    pub job: u32,
    pub tenant: String,
    pub gpus: u32,
    pub waiting_since_us: u64,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub gpu_type: String,
    pub gpus: u32,
    pub free_gpus: u32,
    /// `up` (agent heartbeating), `down` (never joined, or lost).
    pub state: String,
    pub last_heartbeat_us: Option<u64>,
    /// Running jobs on it (empty for a tenant's token: others' ids are not shown).
    pub jobs: Vec<u32>,
    pub gpu_uuids: Vec<String>,
    /// The agent's latest per-GPU utilization and memory readings, where NVML works
    /// (empty for fake GPUs, and until the agent's first report).
    #[serde(default)]
    pub gpu_stats: Vec<crate::agent_api::GpuStat>,
}

/// `GET /v1/usage`: GPU-hours per tenant in `[since, until)` (Unix µs; default: all time).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    #[serde(default)]
    pub since: Option<u64>,
    #[serde(default)]
    pub until: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    pub tenant: String,
    pub gpu_hours: f64,
    pub jobs_started: u32,
    pub jobs_completed: u32,
}

/// `POST /v1/admin/tenants`. `quota`: `{"total": 16}` or per type
/// `{"A100-80GB": 16}`; the engine enforces it as the tenant's GPU limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantRequest {
    pub name: String,
    #[serde(default = "unit_weight")]
    pub weight: f64,
    #[serde(default)]
    pub quota: BTreeMap<String, u32>,
    /// Unix user its jobs run as when the agent runs as root.
    #[serde(default)]
    pub unix_user: Option<String>,
}

fn unit_weight() -> f64 {
    1.0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantView {
    pub id: u32,
    pub name: String,
    pub weight: f64,
    pub quota: BTreeMap<String, u32>,
    pub unix_user: Option<String>,
    pub gpus_held: u32,
}

/// The new tenant and its first token: the token is shown here once and stored
/// only as an argon2 hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantCreated {
    pub tenant: TenantView,
    pub token: String,
}

/// `POST /v1/admin/tokens`: a new token for a tenant (`scope: "tenant"`, `tenant`
/// named), for agents (`"agent"`) or an admin (`"admin"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub scope: Scope,
    #[serde(default)]
    pub tenant: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenCreated {
    pub token: String,
    pub scope: Scope,
    pub tenant: Option<String>,
}

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Admin,
    Tenant,
    Agent,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub ok: bool,
    pub policy: String,
    pub version: String,
    /// Journal entries replayed at start-up, and how long that took.
    pub replayed: u64,
    pub replay_ms: u64,
}

/// Every refusal: a machine-readable `error` code and a sentence for people.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// `bad_request`, `unauthorized`, `forbidden`, `not_found`, `conflict`,
    /// `too_large`, `rate_limited`, `unavailable`, `internal`.
    pub error: String,
    pub message: String,
}
