//! The agent protocol: what a node agent and the server say to each other, as
//! JSON over HTTP under `/v1/agent`. Agent tokens (scope `agent`) or admin tokens.
//!
//! It is level-triggered: the server holds, per node, the **desired set** of job
//! attempts that should run there ([`Desired`]), with a version that grows on
//! every change. The agent long-polls for a version newer than the one it has,
//! then reconciles: it launches each desired attempt it does not run, and stops
//! (checkpoint signal, grace period, SIGKILL of the process group) each process
//! that is no longer desired. A reconnecting or restarted agent converges the
//! same way, so no instruction can be lost or applied twice.
//!
//! | method and path             | body                | answer            |
//! |-----------------------------|---------------------|-------------------|
//! | `POST /v1/agent/register`   | [`Register`]        | [`Registered`]    |
//! | `GET  /v1/agent/desired`    | [`DesiredQuery`]    | [`Desired`] (held up to `wait_ms` until `version > after`) |
//! | `POST /v1/agent/report`     | [`Report`]          | 204               |
//! | `POST /v1/agent/logs`       | [`LogChunk`]        | 204, or 409 with the offset the server has |
//!
//! Every request from the agent counts as a heartbeat; a node that sends none for
//! the server's heartbeat timeout is lost (its jobs are requeued).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One GPU as the agent found it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// NVML UUID (`GPU-...`, or `MIG-...`), or `FAKE-<node>-<i>` for fake GPUs.
    pub uuid: String,
    /// Model name as NVML gives it (`NVIDIA H200`) or as `--fake-gpus` says.
    pub model: String,
    pub memory_mib: u64,
    pub index: u32,
}

/// A job attempt the agent is running (after a restart: found again from its state directory).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningAttempt {
    pub job: u32,
    pub attempt: u32,
    pub pid: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// The node's name (default: the host name); the server binds it to one of
    /// the declared nodes with the same GPU type and count, and keeps that binding.
    pub name: String,
    pub gpus: Vec<GpuInfo>,
    /// Overrides the GPU type derived from the model name (see [`normalize_gpu_type`]).
    #[serde(default)]
    pub gpu_type: Option<String>,
    pub running: Vec<RunningAttempt>,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    /// Index of the declared node this agent is.
    pub node: u32,
    pub node_name: String,
    /// The agent must send something at least this often.
    pub heartbeat_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesiredQuery {
    pub node: u32,
    /// The version the agent has (0 at first).
    pub after: u64,
    /// How long the server may hold the request waiting for a change.
    pub wait_ms: u64,
}

/// Everything that should run on a node now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Desired {
    pub version: u64,
    pub attempts: Vec<Launch>,
}

/// One job attempt to run: the agent runs `command` as its own process group,
/// with `CUDA_VISIBLE_DEVICES` set to `gpu_uuids` (comma-separated), `env`
/// added, as `unix_user` when the agent runs as root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub job: u32,
    pub attempt: u32,
    pub tenant: String,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub gpu_uuids: Vec<String>,
    pub unix_user: Option<String>,
    /// Signal number sent first when the attempt is no longer desired.
    pub checkpoint_signal: i32,
    pub grace_ms: u64,
    /// Set for MPS sharing: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`.
    pub mps_percentage: Option<u32>,
    /// For multi-node jobs: this node's rank and the job's node count.
    pub node_rank: u32,
    pub node_count: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub node: u32,
    pub events: Vec<AgentEvent>,
    /// Per-GPU readings where NVML works (empty for fake GPUs).
    #[serde(default)]
    pub gpu_stats: Vec<GpuStat>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The attempt's process is running (`at_us`: Unix µs when it was spawned).
    Started { job: u32, attempt: u32, pid: u32, at_us: u64 },
    /// It exited: `code` from exit(), or `signal` if a signal killed it.
    Exited { job: u32, attempt: u32, code: Option<i32>, signal: Option<i32>, at_us: u64 },
    /// It could not be started (no such program, bad cwd, unknown user).
    LaunchFailed { job: u32, attempt: u32, message: String, at_us: u64 },
    /// After a restart the agent found the attempt's state but no process and no
    /// exit status.
    Vanished { job: u32, attempt: u32 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuStat {
    pub uuid: String,
    pub utilization_pct: u32,
    pub memory_used_mib: u64,
}

/// A piece of an attempt's stdout or stderr. `offset` is where `data` starts in
/// the agent's file; the server appends it only if that is where its copy ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogChunk {
    pub node: u32,
    pub job: u32,
    pub attempt: u32,
    /// `stdout` or `stderr`.
    pub stream: String,
    pub offset: u64,
    /// Bytes, as text: invalid UTF-8 is replaced (U+FFFD) by the agent.
    pub data: String,
}

/// The GPU type a model name stands for: `NVIDIA H200` -> `H200`,
/// `NVIDIA A100-SXM4-80GB` -> `A100-80GB`, `Tesla V100-SXM2-16GB` -> `V100-16GB`.
/// Compared case-insensitively with the cluster's type names.
pub fn normalize_gpu_type(model: &str) -> String {
    let mut name = model.trim();
    for prefix in ["NVIDIA ", "Tesla ", "NVIDIA-"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            name = rest.trim();
        }
    }
    let parts: Vec<&str> = name.split(['-', ' ']).filter(|p| !p.is_empty()).collect();
    let kept: Vec<&str> = parts
        .iter()
        .copied()
        .filter(|p| {
            !["SXM", "SXM2", "SXM4", "SXM5", "PCIE", "NVL", "HBM3"].contains(&p.to_ascii_uppercase().as_str())
        })
        .collect();
    kept.join("-")
}

/// Parses a signal name or number: `SIGTERM`, `TERM`, `usr1`, `15`.
pub fn parse_signal(text: &str) -> Option<i32> {
    let text = text.trim();
    if let Ok(number) = text.parse::<i32>() {
        return (1..=64).contains(&number).then_some(number);
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_normalize_to_type_names() {
        assert_eq!(normalize_gpu_type("NVIDIA H200"), "H200");
        assert_eq!(normalize_gpu_type("NVIDIA A100-SXM4-80GB"), "A100-80GB");
        assert_eq!(normalize_gpu_type("Tesla V100-SXM2-16GB"), "V100-16GB");
        assert_eq!(normalize_gpu_type("NVIDIA H100 80GB HBM3"), "H100-80GB");
        assert_eq!(normalize_gpu_type("A100-80GB"), "A100-80GB");
    }

    #[test]
    fn signals_parse_by_name_or_number() {
        assert_eq!(parse_signal("SIGUSR1"), Some(10));
        assert_eq!(parse_signal("term"), Some(15));
        assert_eq!(parse_signal("12"), Some(12));
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("SIGFOO"), None);
    }
}
