//! The agent's state directory: one set of files per attempt under `jobs/`,
//! written so that a restarted agent knows every attempt this node ever
//! launched (it never launches one twice), which still run, and which final
//! reports the server may not have received.
//!
//! `{job}.{attempt}.launch`: the attempt as the server sent it (JSON), written before the spawn;
//! `.pid`: the process group leader's pid (and its start time), written right after the spawn;
//! `.stdout`, `.stderr`: the output; `.exit`: the final event (JSON `AgentEvent`:
//! exited, launch failed, vanished); `.reported`: the server accepted that event.
//! The files of an attempt reported more than [`RETAIN_REPORTED`] ago are removed
//! (the server has its output by then); job working directories are never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{process, AgentError};
use crate::agent_api::{AgentEvent, Launch};

pub(super) type Key = (u32, u32);

/// How long an attempt's files stay after its final report was accepted.
pub(super) const RETAIN_REPORTED: Duration = Duration::from_secs(7 * 24 * 3600);

#[derive(Clone, Debug)]
pub(super) struct StateDir {
    jobs: PathBuf,
    work: PathBuf,
}

/// What a scan of the state directory found.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Attempts whose process group still runs: adopt them.
    pub adopted: Vec<(Launch, i32)>,
    /// Final events written but perhaps never accepted: resend them.
    pub unreported: Vec<AgentEvent>,
    /// Every attempt this node ever launched (or tried to).
    pub known: Vec<Key>,
}

impl StateDir {
    pub fn open(root: &Path) -> Result<StateDir, AgentError> {
        let state = StateDir { jobs: root.join("jobs"), work: root.join("work") };
        for dir in [&state.jobs, &state.work] {
            fs::create_dir_all(dir)
                .map_err(|error| AgentError::StateDir { path: dir.clone(), message: error.to_string() })?;
        }
        Ok(state)
    }

    pub fn path(&self, (job, attempt): Key, extension: &str) -> PathBuf {
        self.jobs.join(format!("{job}.{attempt}.{extension}"))
    }

    /// The default working directory of a job (shared by its attempts).
    pub fn work_dir(&self, job: u32) -> PathBuf {
        self.work.join(job.to_string())
    }

    pub fn write_launch(&self, launch: &Launch) -> std::io::Result<()> {
        let text = serde_json::to_string(launch).map_err(std::io::Error::other)?;
        write_atomic(&self.path((launch.job, launch.attempt), "launch"), text.as_bytes())
    }

    pub fn write_pid(&self, key: Key, pid: i32) -> std::io::Result<()> {
        let text = match process::start_time(pid) {
            Some(start) => format!("{pid}\n{start}\n"),
            None => format!("{pid}\n"),
        };
        write_atomic(&self.path(key, "pid"), text.as_bytes())
    }

    /// Records the attempt's final event; if `reported`, also that the server needs no copy.
    pub fn write_final(&self, key: Key, event: &AgentEvent, reported: bool) {
        let written = serde_json::to_string(event)
            .map_err(std::io::Error::other)
            .and_then(|text| write_atomic(&self.path(key, "exit"), text.as_bytes()));
        if let Err(error) = written {
            tracing::error!(job = key.0, attempt = key.1, %error, "cannot write the exit file");
        }
        if reported {
            self.mark_reported(key);
        }
    }

    /// The node index the server gave at the last registration.
    pub fn write_node(&self, node: u32) {
        if let Err(error) = write_atomic(&self.node_file(), format!("{node}\n").as_bytes()) {
            tracing::error!(%error, "cannot write the node file");
        }
    }

    pub fn read_node(&self) -> Option<u32> {
        fs::read_to_string(self.node_file()).ok()?.trim().parse().ok()
    }

    fn node_file(&self) -> PathBuf {
        self.jobs.with_file_name("node")
    }

    pub fn mark_reported(&self, key: Key) {
        if let Err(error) = write_atomic(&self.path(key, "reported"), b"") {
            tracing::error!(job = key.0, attempt = key.1, %error, "cannot write the reported marker");
        }
    }

    /// Reads every attempt's files. An attempt with a pid file but no exit file
    /// is adopted if its process group leader is alive (and is the process the
    /// agent started), else it gets a `Vanished` final event.
    pub fn scan(&self) -> Found {
        let mut extensions: BTreeMap<Key, Vec<String>> = BTreeMap::new();
        let entries = match fs::read_dir(&self.jobs) {
            Ok(entries) => entries,
            Err(error) => {
                tracing::error!(path = %self.jobs.display(), %error, "cannot read the state directory");
                return Found::default();
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((key, extension)) = name.to_str().and_then(parse_name) else { continue };
            extensions.entry(key).or_default().push(extension.to_string());
        }
        let mut found = Found::default();
        for (key, extensions) in extensions {
            let has = |extension: &str| extensions.iter().any(|e| e == extension);
            if !has("launch") && !has("exit") {
                continue;
            }
            found.known.push(key);
            if has("exit") {
                if !has("reported") {
                    match self.read_final(key) {
                        Some(event) => found.unreported.push(event),
                        None => self.vanish(key, &mut found),
                    }
                }
                continue;
            }
            let launch = self.read_launch(key);
            let pid = self.read_pid(key);
            match (launch, pid) {
                (Some(launch), Some((pid, start))) if process::is_our_group_leader(pid, start) => {
                    found.adopted.push((launch, pid));
                }
                // Dead, or never got a pid file (the agent died between spawn and pid file): the
                // server requeues it as a new attempt.
                _ => self.vanish(key, &mut found),
            }
        }
        found
    }

    /// Removes the files of attempts whose final report was accepted more than
    /// `older_than` ago, except those in `keep`. Returns how many attempts went.
    pub fn collect_garbage(&self, older_than: Duration, keep: &BTreeSet<Key>) -> usize {
        let Ok(entries) = fs::read_dir(&self.jobs) else { return 0 };
        let now = SystemTime::now();
        let mut old = BTreeSet::new();
        let mut files: BTreeMap<Key, Vec<PathBuf>> = BTreeMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((key, extension)) = name.to_str().and_then(parse_name) else { continue };
            if extension == "reported" {
                let modified = entry.metadata().and_then(|meta| meta.modified());
                if modified.is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age >= older_than)) {
                    old.insert(key);
                }
            }
            files.entry(key).or_default().push(entry.path());
        }
        let mut removed = 0;
        for key in old.difference(keep) {
            for path in files.get(key).into_iter().flatten() {
                if let Err(error) = fs::remove_file(path) {
                    tracing::warn!(path = %path.display(), %error, "cannot remove an old state file");
                }
            }
            removed += 1;
        }
        removed
    }

    fn vanish(&self, key: Key, found: &mut Found) {
        let event = AgentEvent::Vanished { job: key.0, attempt: key.1 };
        self.write_final(key, &event, false);
        found.unreported.push(event);
    }

    fn read_launch(&self, key: Key) -> Option<Launch> {
        let text = fs::read_to_string(self.path(key, "launch")).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn read_final(&self, key: Key) -> Option<AgentEvent> {
        let text = fs::read_to_string(self.path(key, "exit")).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn read_pid(&self, key: Key) -> Option<(i32, Option<u64>)> {
        let text = fs::read_to_string(self.path(key, "pid")).ok()?;
        let mut lines = text.lines();
        let pid = lines.next()?.trim().parse::<i32>().ok().filter(|pid| *pid > 1)?;
        let start = lines.next().and_then(|line| line.trim().parse::<u64>().ok());
        Some((pid, start))
    }
}

/// The attempt an event is about.
pub(super) fn event_key(event: &AgentEvent) -> Key {
    match event {
        AgentEvent::Started { job, attempt, .. }
        | AgentEvent::Exited { job, attempt, .. }
        | AgentEvent::LaunchFailed { job, attempt, .. }
        | AgentEvent::Vanished { job, attempt } => (*job, *attempt),
    }
}

/// `12.3.stdout` -> ((12, 3), "stdout").
fn parse_name(name: &str) -> Option<(Key, &str)> {
    let mut parts = name.splitn(3, '.');
    let job = parts.next()?.parse().ok()?;
    let attempt = parts.next()?.parse().ok()?;
    Some(((job, attempt), parts.next()?))
}

/// Writes through a temporary file and a rename, so a crash leaves the old file or the new one.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let mut file = fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_attempts_are_collected_and_others_kept() {
        let root = std::env::temp_dir().join(format!("cotenant-state-gc-{}", std::process::id()));
        let state = StateDir::open(&root).unwrap();
        for (key, extensions) in [
            ((1, 0), &["launch", "pid", "stdout", "exit", "reported"][..]),
            ((2, 0), &["launch", "pid", "stdout", "exit", "reported"][..]),
            ((3, 0), &["launch", "pid", "stdout"][..]),
        ] {
            for extension in extensions {
                fs::write(state.path(key, extension), b"x").unwrap();
            }
        }
        assert_eq!(state.collect_garbage(RETAIN_REPORTED, &BTreeSet::new()), 0);
        assert_eq!(state.collect_garbage(Duration::ZERO, &BTreeSet::from([(2, 0)])), 1);
        let mut left: Vec<String> = fs::read_dir(root.join("jobs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "2.0.exit",
                "2.0.launch",
                "2.0.pid",
                "2.0.reported",
                "2.0.stdout",
                "3.0.launch",
                "3.0.pid",
                "3.0.stdout"
            ]
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn file_names_parse_into_attempt_and_extension() {
        assert_eq!(parse_name("12.3.stdout"), Some(((12, 3), "stdout")));
        assert_eq!(parse_name("12.3.reported"), Some(((12, 3), "reported")));
        assert_eq!(parse_name("x.3.pid"), None);
        assert_eq!(parse_name("12.pid"), None);
    }
}
