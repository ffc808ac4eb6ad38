//! Processes: launching an attempt as its own process group, signalling the
//! group, and telling whether a pid found in a pid file is still that process.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::Stdio;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::{getpgid, Pid};

use crate::agent_api::Launch;

/// Variables of the agent's environment a job gets (then the job's own `env`,
/// then the agent's [`agent_env`]); the user's identity ones are replaced when
/// the job runs as another user.
const INHERITED_ENV: &[&str] =
    &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME"];

/// Environment variables the agent sets itself; a job's `env` cannot override them.
pub(super) fn agent_env(launch: &Launch) -> BTreeMap<String, String> {
    let uuids = launch.gpu_uuids.join(",");
    let mut env = BTreeMap::new();
    env.insert("CUDA_VISIBLE_DEVICES".to_string(), uuids.clone());
    env.insert("NVIDIA_VISIBLE_DEVICES".to_string(), uuids);
    env.insert("COTENANT_JOB".to_string(), launch.job.to_string());
    env.insert("COTENANT_ATTEMPT".to_string(), launch.attempt.to_string());
    env.insert("COTENANT_NODE_RANK".to_string(), launch.node_rank.to_string());
    env.insert("COTENANT_NODE_COUNT".to_string(), launch.node_count.to_string());
    if let Some(percentage) = launch.mps_percentage {
        env.insert("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_string(), percentage.to_string());
    }
    env
}

/// Who the attempt runs as.
#[derive(Debug)]
pub(super) enum RunAs {
    /// The agent's own user (it is not root, or the tenant names no user).
    Agent,
    User {
        name: String,
        uid: u32,
        gid: u32,
        home: PathBuf,
    },
}

/// Resolves `unix_user` when the agent is root. Err: the message of a launch failure.
pub(super) fn run_as(unix_user: Option<&str>, agent_is_root: bool) -> Result<RunAs, String> {
    let Some(name) = unix_user.filter(|_| agent_is_root) else { return Ok(RunAs::Agent) };
    match nix::unistd::User::from_name(name) {
        Ok(Some(user)) => Ok(RunAs::User {
            name: name.to_string(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            home: user.dir,
        }),
        Ok(None) => Err(format!("unknown unix user {name:?} on this node")),
        Err(error) => Err(format!("cannot look up unix user {name:?}: {error}")),
    }
}

/// What to spawn, fully resolved.
#[derive(Debug)]
pub(super) struct Spawn<'a> {
    pub launch: &'a Launch,
    pub cwd: PathBuf,
    pub run_as: RunAs,
    pub stdout: File,
    pub stderr: File,
}

/// Spawns the attempt as the leader of a new process group. The child is not
/// killed when its handle drops: agent restarts must not kill work.
pub(super) fn spawn(spec: Spawn<'_>) -> Result<tokio::process::Child, String> {
    let launch = spec.launch;
    let Some((program, arguments)) = launch.command.split_first() else {
        return Err("the job has an empty command".to_string());
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(arguments)
        .current_dir(&spec.cwd)
        .process_group(0)
        .kill_on_drop(false)
        .stdin(Stdio::null())
        .stdout(Stdio::from(spec.stdout))
        .stderr(Stdio::from(spec.stderr));
    // A clean environment: the agent's own (its token among it) is not the job's business.
    command.env_clear();
    command.envs(INHERITED_ENV.iter().filter_map(|name| Some((*name, std::env::var_os(name)?))));
    if let RunAs::User { name, uid, gid, home } = &spec.run_as {
        // std clears the supplementary groups when it changes the uid (setgroups(0)).
        command.uid(*uid).gid(*gid).env("USER", name).env("LOGNAME", name).env("HOME", home);
    }
    command.envs(&launch.env);
    command.envs(agent_env(launch));
    command.spawn().map_err(|error| format!("cannot start {program:?} in {}: {error}", spec.cwd.display()))
}

/// Sends `signal` to the process group led by `pid`; a group that is gone is no error.
pub(super) fn signal_group(pid: i32, signal: Signal) {
    match killpg(Pid::from_raw(pid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(error) => tracing::warn!(pid, %signal, %error, "cannot signal the process group"),
    }
}

/// Whether any process is left in the group led (once) by `pid`.
pub(super) fn group_exists(pid: i32) -> bool {
    matches!(killpg(Pid::from_raw(pid), None), Ok(()) | Err(Errno::EPERM))
}

/// The signal a job named, SIGTERM if the number is not one.
pub(super) fn checkpoint_signal(number: i32) -> Signal {
    Signal::try_from(number).unwrap_or_else(|_| {
        tracing::warn!(number, "unknown checkpoint signal; sending SIGTERM");
        Signal::SIGTERM
    })
}

/// Whether `pid` exists and is not a zombie.
pub(super) fn alive(pid: i32) -> bool {
    let exists = matches!(kill(Pid::from_raw(pid), None), Ok(()) | Err(Errno::EPERM));
    exists && !proc_stat(pid).is_some_and(|stat| matches!(stat.state, 'Z' | 'X'))
}

/// Whether `pid` is alive, leads its own process group, and (where the pid file
/// recorded one) started when the agent's process did: a pid reused by another
/// process is not adopted.
pub(super) fn is_our_group_leader(pid: i32, recorded_start: Option<u64>) -> bool {
    if !alive(pid) || getpgid(Some(Pid::from_raw(pid))) != Ok(Pid::from_raw(pid)) {
        return false;
    }
    match (recorded_start, start_time(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

/// The process's start time (clock ticks since boot), from /proc where there is one.
pub(super) fn start_time(pid: i32) -> Option<u64> {
    proc_stat(pid).map(|stat| stat.start_ticks)
}

struct ProcStat {
    state: char,
    start_ticks: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat { state: fields.first()?.chars().next()?, start_ticks: fields.get(19)?.parse().ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_start_time_and_is_alive() {
        let pid = std::process::id() as i32;
        assert!(alive(pid));
        assert!(start_time(pid).is_some());
    }

    #[test]
    fn unknown_users_are_a_launch_failure_only_for_root() {
        assert!(matches!(run_as(Some("no-such-user-cotenant"), false), Ok(RunAs::Agent)));
        let refused = run_as(Some("no-such-user-cotenant"), true);
        assert!(matches!(&refused, Err(message) if message.contains("no-such-user-cotenant")), "{refused:?}");
        assert!(matches!(run_as(None, true), Ok(RunAs::Agent)));
    }
}
