//! The deterministic heart of the live face: the server's configuration
//! ([`ServerSetup`]) and [`Live`], which applies journal records to one
//! `core::Engine` and keeps the job, tenant and node tables derived from them.
//!
//! The controller, the start-up replay, the record/replay check and
//! `sim --trace journal:` all go through [`Live::apply`], so the live server and
//! a replay of its journal issue the same commands by construction: the same
//! records in the same order at the same times give the same engine steps.

use std::collections::{BTreeMap, BTreeSet};

use cotenant_core::{
    ClusterSpec, Command, EndReason, Engine, GpuId, GpuTypeId, Input, JobId, JobSpec, NodeId, Phase, Span,
    StopReason, TenantSpec, Time,
};
use cotenant_policies::registry::{self, PolicyParams};
use serde::{Deserialize, Serialize};

use crate::agent_api::{self, Desired, Launch};
use crate::api::{self, JobStatus, JobView, SubmitRequest, DEFAULT_GRACE_SECS};
use crate::journal::{Entry, Record};

/// Work units (seconds at reference speed) a job is given when its submitter
/// gave no estimate: policies that rank by size see every such job alike.
pub const DEFAULT_ESTIMATE_SECS: f64 = 3600.0;
/// Longest grace period a job may ask for.
pub const MAX_GRACE_SECS: f64 = 3600.0;

/// One declared node: agents bind to declared nodes, as Slurm's nodes are
/// declared in slurm.conf.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeDecl {
    pub name: String,
    pub gpu_type: String,
    pub gpus: u32,
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub memory_gib: u32,
}

/// What the server was started with; stored in the database on first start so
/// that every later start (and every replay) builds the same engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerSetup {
    pub nodes: Vec<NodeDecl>,
    pub policy: String,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    pub round_secs: Option<u64>,
    pub seed: u64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SetupError {
    #[error("--nodes '{spec}': {message}")]
    Nodes { spec: String, message: String },
    #[error("cluster: {0}")]
    Cluster(String),
    #[error("policy: {0}")]
    Policy(String),
}

/// Parses `COUNTxGPUSxTYPE[,...]`, e.g. `2x8xA100-80GB,1x4xH100`; nodes are
/// named `<type>-<n>` (lower case, numbered per type from 0).
pub fn parse_nodes(spec: &str) -> Result<Vec<NodeDecl>, SetupError> {
    let bad = |message: String| SetupError::Nodes { spec: spec.to_string(), message };
    let mut nodes = Vec::new();
    let mut per_type: BTreeMap<String, u32> = BTreeMap::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut fields = part.splitn(3, 'x');
        let (Some(count), Some(gpus), Some(gpu_type)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad(format!("'{part}': expected COUNTxGPUSxTYPE, e.g. 2x8xA100-80GB")));
        };
        let count: u32 =
            count.parse().map_err(|_| bad(format!("'{part}': node count '{count}' is not a number")))?;
        let gpus: u32 =
            gpus.parse().map_err(|_| bad(format!("'{part}': GPUs per node '{gpus}' is not a number")))?;
        if count == 0 || gpus == 0 || gpus > cotenant_core::limits::MAX_GPUS_PER_NODE {
            return Err(bad(format!(
                "'{part}': need at least one node of 1 to {} GPUs",
                cotenant_core::limits::MAX_GPUS_PER_NODE
            )));
        }
        if gpu_type.is_empty() {
            return Err(bad(format!("'{part}': GPU type is empty")));
        }
        let next = per_type.entry(gpu_type.to_ascii_lowercase()).or_default();
        for _ in 0..count {
            nodes.push(NodeDecl {
                name: format!("{}-{}", gpu_type.to_ascii_lowercase(), *next),
                gpu_type: gpu_type.to_string(),
                gpus,
                cpus: 0,
                memory_gib: 0,
            });
            *next += 1;
        }
    }
    if nodes.is_empty() {
        return Err(bad("no nodes".into()));
    }
    if nodes.len() > cotenant_core::limits::MAX_CLUSTER_NODES as usize {
        return Err(bad(format!(
            "{} nodes; at most {}",
            nodes.len(),
            cotenant_core::limits::MAX_CLUSTER_NODES
        )));
    }
    Ok(nodes)
}

impl ServerSetup {
    pub fn cluster_spec(&self) -> ClusterSpec {
        let mut spec = ClusterSpec::default();
        for node in &self.nodes {
            let ty = spec.gpu_type_id(&node.gpu_type);
            spec.add_nodes(ty, 1, node.gpus, node.cpus, node.memory_gib);
            if let Some(last) = spec.nodes.last_mut() {
                last.name = node.name.clone();
            }
        }
        spec
    }

    /// A fresh engine: the declared cluster with every node down (agents bring
    /// them up), no tenants yet (the journal adds them), the named policy.
    pub fn engine(&self) -> Result<Engine, SetupError> {
        let cluster = cotenant_core::Cluster::new(self.cluster_spec())
            .map_err(|e| SetupError::Cluster(e.to_string()))?;
        let params = PolicyParams {
            round: self.round_secs.map(Span::from_secs),
            options: self.options.clone(),
            ..PolicyParams::default()
        };
        let policy = registry::build(&self.policy, &params).map_err(|e| SetupError::Policy(e.to_string()))?;
        let mut engine = Engine::new(cluster, Vec::new(), policy, self.seed);
        let down = (0..self.nodes.len() as u32).map(|n| Input::NodeDown(NodeId(n))).collect();
        engine.step(Time::ZERO, Input::Batch(down));
        Ok(engine)
    }
}

/// A tenant as journaled.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantRecord {
    pub name: String,
    pub weight: f64,
    pub quota: BTreeMap<String, u32>,
    pub gpu_limit: Option<u32>,
    pub unix_user: Option<String>,
}

/// A job with everything the API shows about it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    pub id: u32,
    pub tenant: u32,
    pub request: SubmitRequest,
    pub status: JobStatus,
    pub submitted_us: u64,
    pub decided_us: Option<u64>,
    pub started_us: Option<u64>,
    pub ended_us: Option<u64>,
    pub attempt: u32,
    pub gpus: Vec<GpuId>,
    pub exit_code: Option<i32>,
    /// Why it ended, in words (from the engine's `EndReason` or the agent).
    pub end_reason: Option<String>,
    pub preemptions: u32,
    /// GPU-microseconds used by finished attempts (the running one is added on read).
    pub gpu_us: u64,
    /// Process ids reported per attempt (for events); the current attempt's is here.
    pub pid: Option<u32>,
    pub events: Vec<api::JobEvent>,
}

/// A declared node and the agent bound to it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRecord {
    pub decl: NodeDecl,
    /// The agent's name, once one registered (kept across restarts).
    pub agent: Option<String>,
    pub gpu_uuids: Vec<String>,
    pub up: bool,
    /// Grows each time the set of attempts that should run there changes.
    pub version: u64,
}

/// Why an entry is refused before it is journaled (the API answers 4xx).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A report about an attempt that is no longer current: ignored, not an error.
    #[error("stale report for job {job} attempt {attempt}")]
    Stale { job: u32, attempt: u32 },
}

/// The engine and the tables derived from the journal.
pub struct Live {
    setup: ServerSetup,
    epoch_us: u64,
    engine: Engine,
    tenants: Vec<TenantRecord>,
    jobs: Vec<JobRecord>,
    nodes: Vec<NodeRecord>,
    /// The jobs whose current attempt holds GPUs on each node (the desired sets' index).
    on_node: Vec<BTreeSet<u32>>,
    last_at_us: u64,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("policy", &self.setup.policy).field("jobs", &self.jobs.len()).finish()
    }
}

impl Live {
    /// `epoch_us`: Unix µs of engine time zero (stored in the database at creation).
    pub fn new(setup: ServerSetup, epoch_us: u64) -> Result<Live, SetupError> {
        let engine = setup.engine()?;
        let nodes = setup
            .nodes
            .iter()
            .map(|decl| NodeRecord {
                decl: decl.clone(),
                agent: None,
                gpu_uuids: Vec::new(),
                up: false,
                version: 0,
            })
            .collect();
        let on_node = vec![BTreeSet::new(); setup.nodes.len()];
        Ok(Live {
            setup,
            epoch_us,
            engine,
            tenants: Vec::new(),
            jobs: Vec::new(),
            nodes,
            on_node,
            last_at_us: epoch_us,
        })
    }

    pub fn setup(&self) -> &ServerSetup {
        &self.setup
    }
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    pub fn epoch_us(&self) -> u64 {
        self.epoch_us
    }
    pub fn tenants(&self) -> &[TenantRecord] {
        &self.tenants
    }
    pub fn jobs(&self) -> &[JobRecord] {
        &self.jobs
    }
    pub fn job(&self, id: u32) -> Option<&JobRecord> {
        self.jobs.get(id as usize)
    }
    pub fn nodes(&self) -> &[NodeRecord] {
        &self.nodes
    }
    pub fn tenant_id(&self, name: &str) -> Option<u32> {
        self.tenants.iter().position(|t| t.name == name).map(|i| i as u32)
    }
    /// Time of the last applied record (Unix µs); the next must not be earlier.
    pub fn last_at_us(&self) -> u64 {
        self.last_at_us
    }
    /// When the policy wants its next `Wakeup`, Unix µs.
    pub fn next_wakeup_us(&self) -> Option<u64> {
        self.engine.next_wakeup().map(|t| self.epoch_us.saturating_add(t.0))
    }
    fn time(&self, at_us: u64) -> Time {
        Time(at_us.saturating_sub(self.epoch_us))
    }

    /// Checks an entry against the current state before it is journaled.
    pub fn check(&self, entry: &Entry) -> Result<(), Refusal> {
        match entry {
            Entry::TenantAdded { name, weight, .. } => {
                if name.is_empty()
                    || name.len() > 64
                    || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                {
                    return Err(Refusal::BadRequest(format!(
                        "tenant name '{name}': use 1 to 64 letters, digits, '-', '_' or '.'"
                    )));
                }
                if self.tenant_id(name).is_some() {
                    return Err(Refusal::Conflict(format!("tenant '{name}' exists")));
                }
                if !(weight.is_finite() && *weight > 0.0) {
                    return Err(Refusal::BadRequest(format!("weight {weight}: must be a positive number")));
                }
                Ok(())
            }
            Entry::Submitted { tenant, request, .. } => self.check_submit(*tenant, request),
            Entry::Cancelled { job } => match self.job(*job) {
                None => Err(Refusal::NotFound(format!("no job {job}"))),
                Some(record) if record.status.is_terminal() => {
                    Err(Refusal::Conflict(format!("job {job} is already {}", record.status.as_str())))
                }
                Some(_) => Ok(()),
            },
            Entry::NodeJoined { node, .. } | Entry::NodeLost { node } => {
                if (*node as usize) < self.nodes.len() {
                    Ok(())
                } else {
                    Err(Refusal::NotFound(format!("no node {node}")))
                }
            }
            Entry::Exited { job, attempt, .. }
            | Entry::LaunchFailed { job, attempt, .. }
            | Entry::Vanished { job, attempt } => match self.job(*job) {
                Some(record) if record.status == JobStatus::Running && record.attempt == *attempt => Ok(()),
                Some(_) => Err(Refusal::Stale { job: *job, attempt: *attempt }),
                None => Err(Refusal::NotFound(format!("no job {job}"))),
            },
            Entry::Wakeup => Ok(()),
        }
    }

    fn check_submit(&self, tenant: u32, request: &SubmitRequest) -> Result<(), Refusal> {
        let bad = |m: String| Err(Refusal::BadRequest(m));
        let Some(tenant_record) = self.tenants.get(tenant as usize) else {
            return Err(Refusal::NotFound(format!("no tenant {tenant}")));
        };
        if request.command.is_empty() || request.command[0].is_empty() {
            return bad("command: empty; give the program and its arguments".into());
        }
        let cluster_gpus = self.engine.cluster().gpu_count();
        if request.gpus > cluster_gpus {
            return bad(format!("gpus: {} requested, but the cluster has {cluster_gpus}", request.gpus));
        }
        if let Some(limit) = tenant_record.gpu_limit {
            if request.gpus > limit {
                return bad(format!(
                    "gpus: {} requested, but tenant '{}' has a quota of {limit}",
                    request.gpus, tenant_record.name
                ));
            }
        }
        if let Some(gpu_type) = &request.gpu_type {
            let types = &self.engine.cluster().spec().gpu_types;
            if !types.iter().any(|t| t.eq_ignore_ascii_case(gpu_type)) {
                return bad(format!(
                    "gpu_type: unknown type '{gpu_type}'; the cluster has {}",
                    types.join(", ")
                ));
            }
            if types.len() > 1 {
                return bad(format!(
                    "gpu_type: the cluster mixes {} and the engine does not constrain types per job yet; submit without gpu_type",
                    types.join(", ")
                ));
            }
        }
        if let Some(estimate) = request.estimate_secs {
            if !(estimate.is_finite() && estimate > 0.0) {
                return bad(format!("estimate_secs: {estimate}: must be a positive number of seconds"));
            }
        }
        if let Some(grace) = request.grace_secs {
            if !(grace.is_finite() && (0.0..=MAX_GRACE_SECS).contains(&grace)) {
                return bad(format!("grace_secs: {grace}: must be 0 to {MAX_GRACE_SECS} seconds"));
            }
        }
        if let Some(signal) = &request.checkpoint_signal {
            if agent_api::parse_signal(signal).is_none() {
                return bad(format!("checkpoint_signal: '{signal}' is not a signal name or number"));
            }
        }
        if let Some(key) = request.env.keys().find(|k| k.is_empty() || k.contains('=') || k.contains('\0')) {
            return bad(format!("env: '{key}' is not a valid variable name"));
        }
        Ok(())
    }

    /// Binds an agent to a declared node: the node it had before (same name),
    /// else the first unbound one whose GPU type and count match.
    pub fn bind_node(&self, name: &str, gpu_type: &str, gpus: u32) -> Result<u32, Refusal> {
        if let Some(i) = self.nodes.iter().position(|n| n.agent.as_deref() == Some(name)) {
            let decl = &self.nodes[i].decl;
            if decl.gpus != gpus || !decl.gpu_type.eq_ignore_ascii_case(gpu_type) {
                return Err(Refusal::Conflict(format!(
                    "agent '{name}' was node {} with {}x{}, now reports {gpus}x{gpu_type}",
                    decl.name, decl.gpus, decl.gpu_type
                )));
            }
            return Ok(i as u32);
        }
        self.nodes
            .iter()
            .position(|n| {
                n.agent.is_none() && n.decl.gpus == gpus && n.decl.gpu_type.eq_ignore_ascii_case(gpu_type)
            })
            .map(|i| i as u32)
            .ok_or_else(|| {
                Refusal::Conflict(format!(
                    "agent '{name}' has {gpus}x{gpu_type}; no free declared node matches (declared: {})",
                    self.declared_summary()
                ))
            })
    }

    fn declared_summary(&self) -> String {
        let mut counts: BTreeMap<(String, u32), (u32, u32)> = BTreeMap::new();
        for node in &self.nodes {
            let slot = counts.entry((node.decl.gpu_type.clone(), node.decl.gpus)).or_default();
            slot.0 += 1;
            slot.1 += u32::from(node.agent.is_none());
        }
        counts
            .iter()
            .map(|((ty, g), (n, free))| format!("{n}x{g}x{ty} ({free} unbound)"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Applies one journaled record: the engine steps, the tables follow its
    /// commands. Returns the commands (the record/replay check compares them).
    pub fn apply(&mut self, record: &Record) -> Vec<Command> {
        let at_us = record.at_us.max(self.last_at_us);
        self.last_at_us = at_us;
        let now = self.time(at_us);
        let input = match &record.entry {
            Entry::TenantAdded { name, weight, quota, gpu_limit, unix_user, .. } => {
                let spec = TenantSpec {
                    name: name.clone(),
                    weight: *weight,
                    gpu_quota: *gpu_limit,
                    gpu_limit: *gpu_limit,
                };
                self.engine.add_tenant(spec);
                self.tenants.push(TenantRecord {
                    name: name.clone(),
                    weight: *weight,
                    quota: quota.clone(),
                    gpu_limit: *gpu_limit,
                    unix_user: unix_user.clone(),
                });
                return Vec::new();
            }
            Entry::Submitted { job, tenant, request } => {
                let estimate = request.estimate_secs;
                let mut spec =
                    JobSpec::new(*job, *tenant, now, request.gpus, estimate.unwrap_or(DEFAULT_ESTIMATE_SECS));
                spec.duration_estimate = estimate.map(Span::from_secs_f64_ceil);
                spec.priority = request.priority;
                spec.cpus = request.cpus;
                spec.memory_gib = request.memory_gib;
                while self.jobs.len() < *job as usize {
                    // Ids are dense; a gap would be a corrupt journal. Keep indexes aligned.
                    self.jobs.push(placeholder(self.jobs.len() as u32));
                }
                let mut job_record = JobRecord {
                    id: *job,
                    tenant: *tenant,
                    request: request.clone(),
                    status: JobStatus::Pending,
                    submitted_us: at_us,
                    decided_us: None,
                    started_us: None,
                    ended_us: None,
                    attempt: 0,
                    gpus: Vec::new(),
                    exit_code: None,
                    end_reason: None,
                    preemptions: 0,
                    gpu_us: 0,
                    pid: None,
                    events: Vec::new(),
                };
                job_record.event(at_us, "submitted", format!("{} GPUs", request.gpus));
                if (*job as usize) < self.jobs.len() {
                    self.jobs[*job as usize] = job_record;
                } else {
                    self.jobs.push(job_record);
                }
                Input::JobSubmitted(spec.into())
            }
            Entry::Cancelled { job } => Input::JobEnded { job: JobId(*job), reason: EndReason::Cancelled },
            Entry::NodeJoined { node, name, gpu_uuids } => {
                if let Some(record) = self.nodes.get_mut(*node as usize) {
                    record.agent = Some(name.clone());
                    record.gpu_uuids = gpu_uuids.clone();
                    record.up = true;
                    record.version += 1;
                }
                Input::NodeUp(NodeId(*node))
            }
            Entry::NodeLost { node } => {
                if let Some(record) = self.nodes.get_mut(*node as usize) {
                    record.up = false;
                    record.version += 1;
                }
                Input::NodeDown(NodeId(*node))
            }
            Entry::Exited { job, code, signal, .. } => {
                let exit_code = code.unwrap_or_else(|| 128 + signal.unwrap_or(0));
                if let Some(record) = self.jobs.get_mut(*job as usize) {
                    record.exit_code = Some(exit_code);
                }
                if exit_code == 0 {
                    self.close_attempt(
                        *job,
                        at_us,
                        JobStatus::Completed,
                        "completed",
                        "exit status 0".into(),
                    );
                    Input::JobFinished { job: JobId(*job) }
                } else {
                    Input::JobEnded { job: JobId(*job), reason: EndReason::Failed { exit_code } }
                }
            }
            Entry::LaunchFailed { job, message, .. } => {
                if let Some(record) = self.jobs.get_mut(*job as usize) {
                    record.exit_code = Some(127);
                    record.event(at_us, "launch_failed", message.clone());
                }
                Input::JobEnded { job: JobId(*job), reason: EndReason::Failed { exit_code: 127 } }
            }
            Entry::Vanished { job, .. } => Input::JobEnded { job: JobId(*job), reason: EndReason::Lost },
            Entry::Wakeup => Input::Wakeup,
        };
        let commands = self.engine.step(now, input);
        for command in &commands {
            self.follow(command, at_us);
        }
        commands
    }

    /// Records that the agent started the current attempt's process.
    pub fn note_started(&mut self, job: u32, attempt: u32, pid: u32, at_us: u64) {
        if let Some(record) = self.jobs.get_mut(job as usize) {
            if record.status == JobStatus::Running && record.attempt == attempt && record.started_us.is_none()
            {
                record.started_us = Some(at_us);
                record.pid = Some(pid);
                record.event(at_us, "running", format!("attempt {attempt}, pid {pid}"));
            }
        }
    }

    fn follow(&mut self, command: &Command, at_us: u64) {
        match command {
            Command::Start { job, gpus }
            | Command::StartShared { job, gpus, .. }
            | Command::Resize { job, gpus, .. } => {
                if matches!(command, Command::Resize { .. }) {
                    self.close_attempt(
                        job.0,
                        at_us,
                        JobStatus::Running,
                        "resized",
                        format!("to {} GPUs", gpus.len()),
                    );
                }
                let nodes = nodes_of_gpus(self.engine.cluster(), gpus);
                if let Some(record) = self.jobs.get_mut(job.index()) {
                    record.status = JobStatus::Running;
                    record.attempt += 1;
                    record.decided_us = Some(at_us);
                    record.started_us = None;
                    record.pid = None;
                    record.gpus = gpus.clone();
                    let detail = format!("attempt {} on {} GPUs", record.attempt, gpus.len());
                    record.event(at_us, "started", detail);
                }
                for &n in &nodes {
                    if let Some(set) = self.on_node.get_mut(n as usize) {
                        set.insert(job.0);
                    }
                }
                self.bump(&nodes);
            }
            Command::Stop { job, reason } => {
                let (kind, detail) = match reason {
                    StopReason::Preempted => ("preempted", "by the policy; requeued".to_string()),
                    StopReason::NodeDown => ("requeued", "its node was lost".to_string()),
                };
                if *reason == StopReason::Preempted {
                    if let Some(record) = self.jobs.get_mut(job.index()) {
                        record.preemptions += 1;
                    }
                }
                self.close_attempt(job.0, at_us, JobStatus::Pending, kind, detail);
            }
            Command::End { job, reason } => {
                let status = match reason {
                    EndReason::Cancelled => JobStatus::Cancelled,
                    EndReason::Failed { .. } => JobStatus::Failed,
                    EndReason::Lost => JobStatus::Lost,
                    EndReason::WiderThanCluster { .. }
                    | EndReason::WiderThanNodes { .. }
                    | EndReason::OverTenantLimit { .. } => JobStatus::Failed,
                    _ => JobStatus::Cancelled,
                };
                if let Some(record) = self.jobs.get_mut(job.index()) {
                    record.end_reason = Some(reason.to_string());
                }
                self.close_attempt(job.0, at_us, status, status.as_str(), reason.to_string());
            }
            Command::Rerate { .. } | Command::Allocate { .. } => {}
        }
    }

    /// Ends the current attempt (if any) and moves the job to `status`.
    fn close_attempt(&mut self, job: u32, at_us: u64, status: JobStatus, kind: &str, detail: String) {
        let cluster = self.engine.cluster();
        let Some(record) = self.jobs.get_mut(job as usize) else { return };
        let nodes = nodes_of_gpus(cluster, &record.gpus);
        if let Some(decided) = record.decided_us.filter(|_| !record.gpus.is_empty()) {
            record.gpu_us += at_us.saturating_sub(decided) * record.gpus.len() as u64;
        }
        record.gpus.clear();
        record.status = status;
        if status.is_terminal() {
            record.ended_us = Some(at_us);
        }
        record.event(at_us, kind, detail);
        for &n in &nodes {
            if let Some(set) = self.on_node.get_mut(n as usize) {
                set.remove(&job);
            }
        }
        self.bump(&nodes);
    }

    fn bump(&mut self, nodes: &BTreeSet<u32>) {
        for &n in nodes {
            if let Some(node) = self.nodes.get_mut(n as usize) {
                node.version += 1;
            }
        }
    }

    /// The attempts that should run on `node` now.
    pub fn desired(&self, node: u32) -> Desired {
        let Some(record) = self.nodes.get(node as usize) else {
            return Desired { version: 0, attempts: Vec::new() };
        };
        let cluster = self.engine.cluster();
        let mut attempts = Vec::new();
        if record.up {
            for &job in &self.on_node[node as usize] {
                let Some(state) = self.jobs.get(job as usize) else { continue };
                let job_nodes = nodes_of_gpus(cluster, &state.gpus);
                let Some(rank) = job_nodes.iter().position(|&n| n == node) else { continue };
                let uuids = state
                    .gpus
                    .iter()
                    .filter(|&&g| cluster.node_of(g).0 == node)
                    .map(|&g| {
                        let slot = cluster.slot_of(g) as usize;
                        record.gpu_uuids.get(slot).cloned().unwrap_or_else(|| format!("{slot}"))
                    })
                    .collect();
                attempts.push(self.launch(state, uuids, rank as u32, job_nodes.len() as u32));
            }
        }
        Desired { version: record.version, attempts }
    }

    fn launch(&self, job: &JobRecord, gpu_uuids: Vec<String>, node_rank: u32, node_count: u32) -> Launch {
        let tenant = &self.tenants[job.tenant as usize];
        let request = &job.request;
        let signal = request.checkpoint_signal.as_deref().and_then(agent_api::parse_signal).unwrap_or(15);
        let mps_percentage = self.engine.job(JobId(job.id)).and_then(|s| match s.sharing.mode {
            Some(cotenant_core::SharingMode::Mps) => Some(50),
            _ => None,
        });
        Launch {
            job: job.id,
            attempt: job.attempt,
            tenant: tenant.name.clone(),
            command: request.command.clone(),
            env: request.env.clone(),
            cwd: request.cwd.clone(),
            gpu_uuids,
            unix_user: tenant.unix_user.clone(),
            checkpoint_signal: signal,
            grace_ms: (request.grace_secs.unwrap_or(DEFAULT_GRACE_SECS) * 1000.0) as u64,
            mps_percentage,
            node_rank,
            node_count,
        }
    }

    /// The job as the API shows it.
    pub fn view(&self, id: u32) -> Option<JobView> {
        let job = self.jobs.get(id as usize).filter(|j| !j.request.command.is_empty())?;
        let cluster = self.engine.cluster();
        let nodes = nodes_of_gpus(cluster, &job.gpus);
        let reason = match job.status {
            JobStatus::Pending => self.engine.job(JobId(id)).and_then(|s| s.verdict).map(|v| v.to_string()),
            _ => job.end_reason.clone(),
        };
        Some(JobView {
            id,
            tenant: self.tenants.get(job.tenant as usize).map_or_else(String::new, |t| t.name.clone()),
            name: job.request.name.clone(),
            status: job.status,
            command: job.request.command.clone(),
            gpus: job.request.gpus,
            gpu_type: job.request.gpu_type.clone(),
            submitted_us: job.submitted_us,
            decided_us: job.decided_us,
            started_us: job.started_us,
            ended_us: job.ended_us,
            attempt: job.attempt,
            nodes: nodes.iter().map(|&n| self.nodes[n as usize].decl.name.clone()).collect(),
            gpu_uuids: job
                .gpus
                .iter()
                .map(|&g| {
                    let node = &self.nodes[cluster.node_of(g).index()];
                    let slot = cluster.slot_of(g) as usize;
                    node.gpu_uuids.get(slot).cloned().unwrap_or_else(|| format!("{}:{slot}", node.decl.name))
                })
                .collect(),
            exit_code: job.exit_code,
            reason,
            preemptions: job.preemptions,
        })
    }

    /// GPU-µs a job used up to `now_us` (finished attempts plus the running one).
    pub fn gpu_us(&self, id: u32, now_us: u64) -> u64 {
        let Some(job) = self.jobs.get(id as usize) else { return 0 };
        let running = match (job.status, job.decided_us) {
            (JobStatus::Running, Some(decided)) => now_us.saturating_sub(decided) * job.gpus.len() as u64,
            _ => 0,
        };
        job.gpu_us + running
    }

    /// Whether the engine still counts the job as in the system (pending or running).
    pub fn is_live(&self, id: u32) -> bool {
        self.engine.job(JobId(id)).is_some_and(|s| matches!(s.phase, Phase::Pending | Phase::Running))
    }

    /// The nodes job `id`'s current attempt holds GPUs on (empty when it holds none).
    pub fn nodes_of(&self, id: u32) -> BTreeSet<u32> {
        self.jobs
            .get(id as usize)
            .map_or_else(BTreeSet::new, |j| nodes_of_gpus(self.engine.cluster(), &j.gpus))
    }

    /// The jobs whose current attempt holds GPUs on `node` (none for an unknown node).
    pub fn jobs_on(&self, node: u32) -> &BTreeSet<u32> {
        static NONE: BTreeSet<u32> = BTreeSet::new();
        self.on_node.get(node as usize).unwrap_or(&NONE)
    }

    /// GPU type id of a declared node (for `api::NodeView`).
    pub fn node_type(&self, node: u32) -> GpuTypeId {
        self.engine.cluster().node(NodeId(node)).gpu_type
    }
}

/// The nodes that hold any of `gpus`, ascending.
fn nodes_of_gpus(cluster: &cotenant_core::Cluster, gpus: &[GpuId]) -> BTreeSet<u32> {
    gpus.iter().map(|&g| cluster.node_of(g).0).collect()
}

impl JobRecord {
    fn event(&mut self, at_us: u64, kind: &str, detail: String) {
        self.events.push(api::JobEvent { at_us, kind: kind.to_string(), detail });
    }
}

fn placeholder(id: u32) -> JobRecord {
    JobRecord {
        id,
        tenant: 0,
        request: SubmitRequest {
            command: Vec::new(),
            name: None,
            env: BTreeMap::new(),
            cwd: None,
            gpus: 0,
            gpu_type: None,
            cpus: 0,
            memory_gib: 0,
            estimate_secs: None,
            priority: 0,
            checkpoint_signal: None,
            grace_secs: None,
        },
        status: JobStatus::Lost,
        submitted_us: 0,
        decided_us: None,
        started_us: None,
        ended_us: None,
        attempt: 0,
        gpus: Vec::new(),
        exit_code: None,
        end_reason: Some("missing from the journal".into()),
        preemptions: 0,
        gpu_us: 0,
        pid: None,
        events: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn setup(policy: &str) -> ServerSetup {
        ServerSetup {
            nodes: parse_nodes("2x2xA100-80GB").unwrap(),
            policy: policy.into(),
            options: BTreeMap::new(),
            round_secs: None,
            seed: 1,
        }
    }

    fn request(gpus: u32) -> SubmitRequest {
        serde_json::from_value(serde_json::json!({ "command": ["true"], "gpus": gpus })).unwrap()
    }

    /// Tenant 0, weight 1, no quota map.
    fn tenant(name: &str, gpu_limit: Option<u32>) -> Entry {
        let name = name.to_string();
        Entry::TenantAdded {
            tenant: 0,
            name,
            weight: 1.0,
            quota: BTreeMap::new(),
            gpu_limit,
            unix_user: None,
        }
    }

    fn rec(seq: u64, at_us: u64, entry: Entry) -> Record {
        Record { seq, at_us, entry }
    }

    #[test]
    fn nodes_parse_and_bad_specs_say_why() {
        let nodes = parse_nodes("2x8xA100-80GB,1x4xH100").unwrap();
        assert_eq!(
            nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["a100-80gb-0", "a100-80gb-1", "h100-0"]
        );
        let err = parse_nodes("2x8").unwrap_err().to_string();
        assert!(err.contains("expected COUNTxGPUSxTYPE"), "{err}");
        assert!(parse_nodes("0x8xA100").is_err());
        assert!(parse_nodes("1x65xA100").is_err());
    }

    #[test]
    fn a_job_waits_for_an_agent_runs_and_completes() {
        // Two 2-GPU nodes, both down until an agent joins. Job 0 (2 GPUs) waits,
        // starts on node 0 when it joins, and completes when its process exits 0.
        let mut live = Live::new(setup("fifo"), 1_000).unwrap();
        let tenant = tenant("alice", None);
        live.apply(&rec(1, 1_000, tenant));
        let submit = Entry::Submitted { job: 0, tenant: 0, request: request(2) };
        assert_eq!(live.check(&submit), Ok(()));
        assert!(live.apply(&rec(2, 2_000, submit)).is_empty());
        assert_eq!(live.view(0).unwrap().status, JobStatus::Pending);
        assert!(live.view(0).unwrap().reason.unwrap().contains("needs 2 GPUs, 0 free"));
        let node = live.bind_node("host-a", "a100-80gb", 2).unwrap();
        assert_eq!(node, 0);
        let joined = Entry::NodeJoined {
            node,
            name: "host-a".into(),
            gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
        };
        let commands = live.apply(&rec(3, 3_000, joined));
        assert_eq!(commands, vec![Command::Start { job: JobId(0), gpus: vec![GpuId(0), GpuId(1)] }]);
        let desired = live.desired(0);
        assert_eq!(desired.attempts.len(), 1);
        assert_eq!(desired.attempts[0].gpu_uuids, ["GPU-a", "GPU-b"]);
        assert_eq!(desired.attempts[0].attempt, 1);
        assert!(live.desired(1).attempts.is_empty());
        // A report for another attempt is stale; the current one is taken.
        let stale = Entry::Exited { job: 0, attempt: 2, code: Some(0), signal: None };
        assert!(matches!(live.check(&stale), Err(Refusal::Stale { .. })));
        let exited = Entry::Exited { job: 0, attempt: 1, code: Some(0), signal: None };
        assert_eq!(live.check(&exited), Ok(()));
        live.apply(&rec(4, 10_003_000, exited));
        let view = live.view(0).unwrap();
        assert_eq!((view.status, view.exit_code), (JobStatus::Completed, Some(0)));
        // 2 GPUs for 10 s.
        assert_eq!(live.gpu_us(0, 99_000_000), 20_000_000);
        assert!(live.desired(0).attempts.is_empty());
        assert!(live.desired(0).version > desired.version);
    }

    #[test]
    fn refusals_name_the_field() {
        let mut live = Live::new(setup("fifo"), 0).unwrap();
        let tenant = tenant("bob", Some(2));
        live.apply(&rec(1, 0, tenant));
        let wide = Entry::Submitted { job: 0, tenant: 0, request: request(5) };
        assert!(live.check(&wide).unwrap_err().to_string().contains("cluster has 4"));
        let over = Entry::Submitted { job: 0, tenant: 0, request: request(3) };
        assert!(live.check(&over).unwrap_err().to_string().contains("quota of 2"));
        let mut typed = request(1);
        typed.gpu_type = Some("H100".into());
        let err =
            live.check(&Entry::Submitted { job: 0, tenant: 0, request: typed }).unwrap_err().to_string();
        assert!(err.contains("unknown type 'H100'") && err.contains("A100-80GB"), "{err}");
        assert!(matches!(live.check(&Entry::Cancelled { job: 3 }), Err(Refusal::NotFound(_))));
    }

    #[test]
    fn a_lost_node_requeues_its_job_and_a_failure_ends_it() {
        let mut live = Live::new(setup("fifo"), 0).unwrap();
        let tenant = tenant("c", None);
        live.apply(&rec(1, 0, tenant));
        live.apply(&rec(2, 1, Entry::NodeJoined { node: 0, name: "a".into(), gpu_uuids: vec![] }));
        live.apply(&rec(3, 2, Entry::Submitted { job: 0, tenant: 0, request: request(1) }));
        assert_eq!(live.view(0).unwrap().status, JobStatus::Running);
        live.apply(&rec(4, 3, Entry::NodeLost { node: 0 }));
        let view = live.view(0).unwrap();
        assert_eq!((view.status, view.attempt), (JobStatus::Pending, 1));
        live.apply(&rec(5, 4, Entry::NodeJoined { node: 1, name: "b".into(), gpu_uuids: vec![] }));
        assert_eq!(live.view(0).unwrap().nodes, ["a100-80gb-1"]);
        assert_eq!(live.view(0).unwrap().attempt, 2);
        live.apply(&rec(6, 5, Entry::Exited { job: 0, attempt: 2, code: None, signal: Some(9) }));
        let view = live.view(0).unwrap();
        assert_eq!((view.status, view.exit_code), (JobStatus::Failed, Some(137)));
        assert_eq!(live.engine().cluster().free_gpus(), 2);
    }
}
