//! Makes the node match its desired set: launches attempts, stops those no
//! longer desired (checkpoint signal, grace period, SIGKILL of the group),
//! notices exits, and hands every event to the outbox. No I/O with the server.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use super::outbox::Message;
use super::process::{self, RunAs};
use super::state::{self, Found, Key, StateDir};
use crate::agent_api::{AgentEvent, Desired, Launch, RunningAttempt};

/// How often stop deadlines, adopted processes and waiting launches are checked.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// Longest an ended attempt's GPUs stay held while what is left of its process
/// group dies (a process stuck in the GPU driver can take a while; a zombie that
/// nobody reaps would take forever).
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// How often old attempts' files are looked for.
const GARBAGE_INTERVAL: Duration = Duration::from_secs(3600);

/// A process's exit as its waiting task saw it.
pub(super) type Exit = (Key, Result<ExitStatus, String>);

#[derive(Debug)]
struct Running {
    launch: Launch,
    pid: i32,
    /// The task waiting for it (None: adopted after a restart, watched by polling).
    waiter: Option<JoinHandle<()>>,
    stopping: Option<Stop>,
}

/// An ended attempt whose group members were SIGKILLed but may not be gone yet.
#[derive(Debug)]
struct Draining {
    pid: i32,
    gpu_uuids: Vec<String>,
    until: Instant,
}

#[derive(Debug)]
struct Stop {
    kill_at: Instant,
    killed: bool,
}

#[derive(Debug)]
pub(super) struct Supervisor {
    state: StateDir,
    outbox: UnboundedSender<Message>,
    exits: UnboundedSender<Exit>,
    running: BTreeMap<Key, Running>,
    draining: BTreeMap<Key, Draining>,
    /// Every attempt this node ever launched or tried to: never launched again.
    known: BTreeSet<Key>,
    /// Desired attempts waiting for GPUs still held by a stopping process.
    waiting: BTreeMap<Key, Launch>,
    /// The last desired set (None before the first answer).
    desired: Option<BTreeSet<Key>>,
    agent_is_root: bool,
    /// When old state files were last collected.
    collected: Option<Instant>,
}

impl Supervisor {
    pub fn new(
        state: StateDir,
        outbox: UnboundedSender<Message>,
        exits: UnboundedSender<Exit>,
    ) -> Supervisor {
        Supervisor {
            state,
            outbox,
            exits,
            running: BTreeMap::new(),
            draining: BTreeMap::new(),
            known: BTreeSet::new(),
            waiting: BTreeMap::new(),
            desired: None,
            agent_is_root: nix::unistd::geteuid().is_root(),
            collected: None,
        }
    }

    /// Takes over what a previous agent left in the state directory.
    pub fn resume(&mut self, found: Found) {
        self.known.extend(found.known);
        for (launch, pid) in found.adopted {
            let key = (launch.job, launch.attempt);
            tracing::info!(job = key.0, attempt = key.1, pid, "adopted a running attempt");
            self.known.insert(key);
            self.running.insert(key, Running { launch, pid, waiter: None, stopping: None });
            self.send(Message::Track(key));
        }
        for event in found.unreported {
            let key = state::event_key(&event);
            self.send(Message::Final { key, event: Some(event) });
        }
    }

    pub fn reconcile(&mut self, desired: &Desired) {
        let keys: BTreeSet<Key> =
            desired.attempts.iter().map(|launch| (launch.job, launch.attempt)).collect();
        let unwanted: Vec<Key> = self
            .running
            .iter()
            .filter(|(key, running)| !keys.contains(key) && running.stopping.is_none())
            .map(|(key, _)| *key)
            .collect();
        for key in unwanted {
            self.stop(key);
        }
        self.waiting.retain(|key, _| keys.contains(key));
        for launch in &desired.attempts {
            let key = (launch.job, launch.attempt);
            if !self.known.contains(&key) && !self.waiting.contains_key(&key) {
                self.waiting.insert(key, launch.clone());
            }
        }
        self.desired = Some(keys);
        self.launch_waiting();
    }

    pub fn on_exit(&mut self, (key, status): Exit) {
        let Some(running) = self.running.remove(&key) else { return };
        self.end_group(key, running);
        let event = match status {
            Ok(status) => AgentEvent::Exited {
                job: key.0,
                attempt: key.1,
                code: status.code(),
                signal: status.signal(),
                at_us: now_us(),
            },
            Err(error) => {
                tracing::error!(job = key.0, attempt = key.1, %error, "lost track of the process");
                AgentEvent::Vanished { job: key.0, attempt: key.1 }
            }
        };
        tracing::info!(?event, "attempt ended");
        self.finish(key, event);
        self.launch_waiting();
    }

    pub fn tick(&mut self) {
        let now = Instant::now();
        let mut gone = Vec::new();
        for (key, running) in &mut self.running {
            if let Some(stop) = running.stopping.as_mut().filter(|stop| !stop.killed && now >= stop.kill_at) {
                tracing::info!(job = key.0, attempt = key.1, pid = running.pid, "grace period over: SIGKILL");
                process::signal_group(running.pid, Signal::SIGKILL);
                stop.killed = true;
            }
            if running.waiter.is_none() && !process::alive(running.pid) {
                gone.push(*key);
            }
        }
        for key in gone {
            self.adopted_gone(key);
        }
        if self.collected.is_none_or(|at| at.elapsed() >= GARBAGE_INTERVAL) {
            self.collected = Some(now);
            let keep: BTreeSet<Key> = self.running.keys().copied().collect();
            let removed = self.state.collect_garbage(state::RETAIN_REPORTED, &keep);
            if removed > 0 {
                tracing::info!(removed, "removed the state files of attempts reported long ago");
            }
        }
        self.draining.retain(|key, draining| {
            let held = process::group_exists(draining.pid);
            if held && now >= draining.until {
                tracing::warn!(
                    job = key.0,
                    attempt = key.1,
                    pgid = draining.pid,
                    "process group still present after SIGKILL; releasing its GPUs anyway"
                );
            }
            held && now < draining.until
        });
        self.launch_waiting();
    }

    /// What runs now (stopping included), as a registration lists it.
    pub fn running_attempts(&self) -> Vec<RunningAttempt> {
        let attempts = self.running.iter();
        attempts
            .map(|(&(job, attempt), running)| RunningAttempt { job, attempt, pid: running.pid as u32 })
            .collect()
    }

    /// The agent stops: forget the processes without touching them.
    pub fn detach(&mut self) {
        for running in self.running.values_mut() {
            if let Some(waiter) = running.waiter.take() {
                waiter.abort();
            }
        }
    }

    /// An adopted process is gone; its exit status is unknown. It vanished,
    /// unless the server no longer wants it (then nobody needs telling).
    fn adopted_gone(&mut self, key: Key) {
        let Some(running) = self.running.remove(&key) else { return };
        let (stopping, pid) = (running.stopping.is_some(), running.pid);
        self.end_group(key, running);
        let event = AgentEvent::Vanished { job: key.0, attempt: key.1 };
        let wanted = self.desired.as_ref().is_none_or(|desired| desired.contains(&key));
        if wanted && !stopping {
            tracing::warn!(job = key.0, attempt = key.1, pid, "adopted attempt vanished");
            self.finish(key, event);
        } else {
            self.state.write_final(key, &event, true);
            self.send(Message::Final { key, event: None });
        }
    }

    /// The leader is gone: whatever it left behind in its group goes with it,
    /// and its GPUs stay held until that is gone too (at most [`DRAIN_LIMIT`]).
    fn end_group(&mut self, key: Key, running: Running) {
        process::signal_group(running.pid, Signal::SIGKILL);
        if process::group_exists(running.pid) {
            let until = Instant::now() + DRAIN_LIMIT;
            self.draining
                .insert(key, Draining { pid: running.pid, gpu_uuids: running.launch.gpu_uuids, until });
        }
    }

    fn finish(&mut self, key: Key, event: AgentEvent) {
        self.state.write_final(key, &event, false);
        self.send(Message::Final { key, event: Some(event) });
    }

    fn stop(&mut self, key: Key) {
        let Some(running) = self.running.get_mut(&key) else { return };
        let signal = process::checkpoint_signal(running.launch.checkpoint_signal);
        tracing::info!(job = key.0, attempt = key.1, pid = running.pid, %signal, grace_ms = running.launch.grace_ms,
            "no longer desired: stopping");
        process::signal_group(running.pid, signal);
        let kill_at = Instant::now() + Duration::from_millis(running.launch.grace_ms);
        running.stopping = Some(Stop { kill_at, killed: false });
    }

    /// Launches each waiting attempt whose GPUs no running or stopping process holds.
    fn launch_waiting(&mut self) {
        let ready: Vec<Key> = self
            .waiting
            .iter()
            .filter(|(key, launch)| !self.gpus_held(**key, launch))
            .map(|(key, _)| *key)
            .collect();
        for key in ready {
            if let Some(launch) = self.waiting.remove(&key) {
                self.launch(launch);
            }
        }
    }

    fn gpus_held(&self, key: Key, launch: &Launch) -> bool {
        let overlaps = |uuids: &[String]| uuids.iter().any(|uuid| launch.gpu_uuids.contains(uuid));
        self.running.iter().any(|(other, running)| *other != key && overlaps(&running.launch.gpu_uuids))
            || self.draining.values().any(|draining| overlaps(&draining.gpu_uuids))
    }

    fn launch(&mut self, launch: Launch) {
        let key = (launch.job, launch.attempt);
        self.known.insert(key);
        match self.spawn(&launch) {
            Ok(child) => self.started(launch, child),
            Err(message) => {
                tracing::warn!(job = key.0, attempt = key.1, %message, "launch failed");
                let event = AgentEvent::LaunchFailed { job: key.0, attempt: key.1, message, at_us: now_us() };
                self.finish(key, event);
            }
        }
    }

    fn spawn(&self, launch: &Launch) -> Result<tokio::process::Child, String> {
        let key = (launch.job, launch.attempt);
        let file_error =
            |path: &PathBuf, error: std::io::Error| format!("cannot write {}: {error}", path.display());
        let launch_path = self.state.path(key, "launch");
        self.state.write_launch(launch).map_err(|error| file_error(&launch_path, error))?;
        let run_as = process::run_as(launch.unix_user.as_deref(), self.agent_is_root)?;
        let stdout_path = self.state.path(key, "stdout");
        let stderr_path = self.state.path(key, "stderr");
        let stdout = File::create(&stdout_path).map_err(|error| file_error(&stdout_path, error))?;
        let mut stderr = File::create(&stderr_path).map_err(|error| file_error(&stderr_path, error))?;
        if let (Some(user), RunAs::Agent) = (&launch.unix_user, &run_as) {
            let note = format!(
                "cotenant agent: not running as root, so this job runs as the agent's user, not {user:?}\n"
            );
            tracing::warn!(
                job = key.0,
                attempt = key.1,
                user,
                "agent is not root: running the job as itself"
            );
            let _ = stderr.write_all(note.as_bytes());
        }
        let cwd = match &launch.cwd {
            Some(cwd) => PathBuf::from(cwd),
            None => {
                let dir = self.state.work_dir(launch.job);
                fs::create_dir_all(&dir).map_err(|error| file_error(&dir, error))?;
                if let RunAs::User { uid, gid, .. } = &run_as {
                    std::os::unix::fs::chown(&dir, Some(*uid), Some(*gid))
                        .map_err(|error| file_error(&dir, error))?;
                }
                dir
            }
        };
        process::spawn(process::Spawn { launch, cwd, run_as, stdout, stderr })
    }

    fn started(&mut self, launch: Launch, mut child: tokio::process::Child) {
        let key = (launch.job, launch.attempt);
        let at_us = now_us();
        let Some(pid) = child.id() else {
            // Already reaped: cannot happen before the first wait.
            self.finish(key, AgentEvent::Vanished { job: key.0, attempt: key.1 });
            return;
        };
        if let Err(error) = self.state.write_pid(key, pid as i32) {
            tracing::error!(job = key.0, attempt = key.1, %error, "cannot write the pid file");
        }
        tracing::info!(job = key.0, attempt = key.1, pid, gpus = ?launch.gpu_uuids, "launched");
        self.send(Message::Track(key));
        self.send(Message::Event(AgentEvent::Started { job: key.0, attempt: key.1, pid, at_us }));
        let exits = self.exits.clone();
        let waiter = tokio::spawn(async move {
            let status = child.wait().await.map_err(|error| error.to_string());
            let _ = exits.send((key, status));
        });
        self.running.insert(key, Running { launch, pid: pid as i32, waiter: Some(waiter), stopping: None });
    }

    fn send(&self, message: Message) {
        // The outbox ends only when the agent does.
        let _ = self.outbox.send(message);
    }
}

/// Unix time in microseconds.
pub(super) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_micros() as u64)
}
