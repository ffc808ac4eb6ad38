//! The node agent: runs on each GPU node, registers with the server, long-polls
//! the node's desired set of job attempts ([`crate::agent_api`]) and makes the
//! node match it: each desired attempt it does not run is launched as its own
//! process group with `CUDA_VISIBLE_DEVICES` set to the GPUs the engine chose;
//! each process no longer desired is stopped (checkpoint signal, grace period,
//! SIGKILL of the group). It reports starts and exits, and ships the attempts'
//! stdout and stderr to the server.
//!
//! Everything an attempt needs to survive an agent restart lives in the state
//! directory (`{state_dir}/jobs/{job}.{attempt}.{launch,pid,stdout,stderr,exit,reported}`):
//! a restarted agent adopts the process groups that still run (and lists them in
//! `Register.running`), reports those that died meanwhile as vanished, resends
//! exit reports the server may not have received, and never launches an attempt
//! twice. Stopping the agent leaves its jobs running.
//!
//! A job starts from a clean environment: `PATH`, the locale, `TZ`, `TMPDIR`,
//! `LD_LIBRARY_PATH` and the user's `HOME`/`USER`/`LOGNAME` from the agent's
//! (the target user's when it runs as root and the tenant names one), then the
//! job's `env`, then the agent's own variables, which the job cannot override:
//! `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` (the assigned GPU UUIDs,
//! comma-separated), `COTENANT_JOB`, `COTENANT_ATTEMPT`, `COTENANT_NODE_RANK`,
//! `COTENANT_NODE_COUNT`, and `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` for MPS shares.
//! Its working directory is the job's `cwd`, else `{state_dir}/work/{job}`.
//!
//! An attempt's end: when its process group leader exits, whatever is left of the
//! group is SIGKILLed (as Slurm ends a step), and its GPUs are free for a waiting
//! launch once the group is gone (or 10 s later, if something of it lingers).
//!
//! What it must never do: decide anything. The server's engine decides which
//! attempt runs where; the agent only enacts the desired set and reports.

mod gpus;
mod outbox;
mod process;
mod state;
mod supervisor;
mod transport;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::agent_api::{self, Desired, GpuStat, Register};

pub use gpus::{FakeGpus, Nvml};

/// How one agent runs.
#[derive(Clone)]
pub struct AgentConfig {
    /// Base URL of the server: `http://127.0.0.1:8080`.
    pub server: String,
    /// An agent (or admin) token.
    pub token: String,
    /// The node's name (the CLI defaults it to the host name).
    pub name: String,
    pub gpus: GpuSource,
    /// Overrides the GPU type derived from the model name.
    pub gpu_type: Option<String>,
    /// Pid files, logs and exit statuses: survives an agent restart.
    pub state_dir: PathBuf,
    /// How long the server may hold a long-poll (stay under its heartbeat timeout).
    pub poll_wait: Duration,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("server", &self.server)
            .field("token", &"(hidden)")
            .field("name", &self.name)
            .field("gpus", &self.gpus)
            .field("gpu_type", &self.gpu_type)
            .field("state_dir", &self.state_dir)
            .field("poll_wait", &self.poll_wait)
            .finish()
    }
}

impl AgentConfig {
    /// A config with the default long-poll hold (5 s).
    pub fn new(server: &str, token: &str, name: &str, gpus: GpuSource, state_dir: PathBuf) -> AgentConfig {
        AgentConfig {
            server: server.to_string(),
            token: token.to_string(),
            name: name.to_string(),
            gpus,
            gpu_type: None,
            state_dir,
            poll_wait: DEFAULT_POLL_WAIT,
        }
    }
}

/// Longest a restarted agent tries to resend the last run's final reports before registering.
const RESEND_FIRST_LIMIT: Duration = Duration::from_secs(5);

/// Default long-poll hold, below the server's default heartbeat timeout (15 s).
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(5);

/// Where the agent's GPUs come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSource {
    /// `--fake-gpus 8xA100-80GB`: GPUs that do not exist, for machines without any.
    Fake(String),
    /// The NVIDIA driver's management library, loaded at run time.
    Nvml,
}

/// Finds the node's GPUs and reads their utilization.
pub trait GpuDiscovery: Send + Sync {
    fn gpus(&self) -> Result<Vec<agent_api::GpuInfo>, AgentError>;
    /// Current readings; empty where there are none (fake GPUs, or NVML failing).
    fn stats(&self) -> Vec<GpuStat>;
}

/// Opens the GPU source a config names.
pub fn discovery(source: &GpuSource, node_name: &str) -> Result<Box<dyn GpuDiscovery>, AgentError> {
    Ok(match source {
        GpuSource::Fake(spec) => Box::new(FakeGpus::parse(spec, node_name)?),
        GpuSource::Nvml => Box::new(Nvml::init()?),
    })
}

/// Why the agent stopped (or could not start).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("NVML is not usable ({0}); on a machine without NVIDIA GPUs use --fake-gpus, e.g. --fake-gpus 8xA100-80GB")]
    Nvml(String),
    #[error("bad --fake-gpus spec {spec:?}: {reason} (expected COUNTxTYPE, e.g. 8xA100-80GB)")]
    FakeGpus { spec: String, reason: String },
    #[error("the server refused the agent's token ({status}): {message}")]
    Unauthorized { status: u16, message: String },
    #[error("bad server address {server:?}: {message}")]
    Server { server: String, message: String },
    #[error("state directory {path}: {message}")]
    StateDir { path: PathBuf, message: String },
}

/// Runs the agent until `shutdown` resolves (then returns Ok, leaving the jobs
/// running) or the server refuses its token (Err).
pub async fn run(
    config: AgentConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AgentError> {
    let discovery = discovery(&config.gpus, &config.name)?;
    let gpus = discovery.gpus()?;
    let state = state::StateDir::open(&config.state_dir)?;
    let transport = transport::Transport::new(&config.server, &config.token)?;
    let mut found = state.scan();
    let running = found.adopted.iter().map(|(launch, pid)| agent_api::RunningAttempt {
        job: launch.job,
        attempt: launch.attempt,
        pid: *pid as u32,
    });
    let register = Register {
        name: config.name.clone(),
        gpus,
        gpu_type: config.gpu_type.clone(),
        running: running.collect(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    tokio::pin!(shutdown);
    let saved_node = state.read_node();
    let node = Arc::new(AtomicU32::new(saved_node.unwrap_or(0)));
    let mut outbox = outbox::Outbox::new(transport.clone(), state.clone(), node.clone(), discovery);
    let unreported = std::mem::take(&mut found.unreported);
    let resend_first = saved_node.is_some() && !unreported.is_empty();
    for event in unreported {
        outbox.accept(outbox::Message::Final { key: state::event_key(&event), event: Some(event) });
    }
    if resend_first {
        // Final reports of the last run, under the node index it had, before registering: after
        // a quick restart they reach the server before the registration declares those vanished.
        tokio::select! {
            sent = tokio::time::timeout(RESEND_FIRST_LIMIT, outbox.flush()) => {
                if let Ok(Err(transport::SendError::Unauthorized { status, message })) = sent {
                    return Err(AgentError::Unauthorized { status, message });
                }
            }
            () = &mut shutdown => return Ok(()),
        }
    }
    let registered = tokio::select! {
        registered = transport.register_until_accepted(&register) => registered?,
        () = &mut shutdown => return Ok(()),
    };
    tracing::info!(node = registered.node, name = %registered.node_name, "agent registered");
    node.store(registered.node, Ordering::Relaxed);
    state.write_node(registered.node);

    let (fatal_tx, mut fatal_rx) = mpsc::channel::<AgentError>(4);
    let (outbox_tx, outbox_rx) = mpsc::unbounded_channel();
    let outbox_task = tokio::spawn(outbox::run(outbox, outbox_rx, fatal_tx.clone()));
    let (desired_tx, mut desired_rx) = watch::channel::<Option<Desired>>(None);
    let (running_tx, running_rx) = watch::channel(register.running.clone());
    let poller = Poller {
        transport: transport.clone(),
        state: state.clone(),
        node,
        wait: config.poll_wait,
        register,
        running: running_rx,
    };
    let poll_task = tokio::spawn(poller.run(desired_tx, fatal_tx.clone()));

    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel();
    let mut supervisor = supervisor::Supervisor::new(state, outbox_tx, exit_tx);
    supervisor.resume(found);
    let mut tick = tokio::time::interval(supervisor::TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            Some(error) = fatal_rx.recv() => break Err(error),
            changed = desired_rx.changed() => {
                if changed.is_err() {
                    // The poller ended: it only does so after reporting a fatal error.
                    break fatal_rx.try_recv().map_or(Ok(()), Err);
                }
                let desired = desired_rx.borrow_and_update().clone();
                if let Some(desired) = desired {
                    supervisor.reconcile(&desired);
                }
            }
            Some(exit) = exit_rx.recv() => supervisor.on_exit(exit),
            _ = tick.tick() => supervisor.tick(),
        }
        let running = supervisor.running_attempts();
        running_tx.send_if_modified(|published| {
            let changed = *published != running;
            if changed {
                *published = running;
            }
            changed
        });
    };
    poll_task.abort();
    outbox_task.abort();
    // Returning means no task of this agent touches the state directory any more.
    let _ = poll_task.await;
    let _ = outbox_task.await;
    supervisor.detach();
    result
}

/// Long-polls the node's desired set, and registers again when the server has
/// lost the node (it answers 404 or 409: never registered, or declared lost
/// after a silence), listing what runs now.
struct Poller {
    transport: transport::Transport,
    state: state::StateDir,
    node: Arc<AtomicU32>,
    wait: Duration,
    /// The first registration; `running` is replaced by the current list.
    register: Register,
    running: watch::Receiver<Vec<agent_api::RunningAttempt>>,
}

impl Poller {
    /// Publishes each answer, forever. After an error it asks from version 0, so
    /// the next answer comes at once.
    async fn run(self, desired: watch::Sender<Option<Desired>>, fatal: mpsc::Sender<AgentError>) {
        let mut after = 0;
        let mut backoff = transport::Backoff::new();
        loop {
            let node = self.node.load(Ordering::Relaxed);
            let query = agent_api::DesiredQuery { node, after, wait_ms: self.wait.as_millis() as u64 };
            let error = match self.transport.desired(&query, self.wait).await {
                Ok(answer) => {
                    backoff.reset();
                    after = answer.version;
                    if desired.send(Some(answer)).is_err() {
                        return;
                    }
                    continue;
                }
                Err(transport::SendError::Rejected { status: 404 | 409, message }) => {
                    tracing::warn!(node, %message, "the server does not count this node as up: registering again");
                    let register =
                        Register { running: self.running.borrow().clone(), ..self.register.clone() };
                    match self.transport.register_until_accepted(&register).await {
                        Ok(registered) => {
                            tracing::info!(node = registered.node, "agent registered again");
                            self.node.store(registered.node, Ordering::Relaxed);
                            self.state.write_node(registered.node);
                            after = 0;
                            continue;
                        }
                        Err(error) => error,
                    }
                }
                Err(transport::SendError::Unauthorized { status, message }) => {
                    AgentError::Unauthorized { status, message }
                }
                Err(error) => {
                    if let transport::SendError::Rejected { .. } = error {
                        tracing::error!(%error, "the server rejected the desired-set query");
                    }
                    after = 0;
                    backoff.wait().await;
                    continue;
                }
            };
            let _ = fatal.send(error).await;
            return;
        }
    }
}
