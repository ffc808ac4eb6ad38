//! Crash tests for the live face: real `cotenant server` and `cotenant agent`
//! processes on loopback, killed with SIGKILL at awkward moments.
//!
//! - kill -9 the server while clients submit concurrently: after a restart every
//!   submission that got a 2xx exists exactly once, with dense unique ids;
//! - kill -9 the server while jobs run: after a restart the same processes keep
//!   running (no restart, no GPU given twice);
//! - kill -9 an agent: its job is requeued after the heartbeat timeout and runs on
//!   the other node; restarting the agent kills the orphaned process, so no
//!   duplicate survives.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_cotenant");

/// A temp directory and the processes started in it, killed and removed on drop.
struct Cluster {
    dir: PathBuf,
    port: u16,
    server: Option<Child>,
    agents: BTreeMap<String, Child>,
    nodes: String,
}

impl Cluster {
    fn new(name: &str, nodes: &str) -> Cluster {
        let dir = std::env::temp_dir().join(format!("cotenant-crash-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("marks")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Cluster { dir, port, server: None, agents: BTreeMap::new(), nodes: nodes.into() }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start_server(&mut self) {
        self.start_server_with(&["--policy", "fifo"]);
    }

    fn start_server_with(&mut self, extra: &[&str]) {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("server.log")).unwrap();
        let child = Command::new(BIN)
            .args(["server", "--listen", &format!("127.0.0.1:{}", self.port)])
            .args(extra)
            .args(["--nodes", &self.nodes, "--heartbeat-timeout", "2s"])
            .arg("--db")
            .arg(self.dir.join("state.db"))
            .arg("--log-dir")
            .arg(self.dir.join("logs"))
            .arg("--admin-token-file")
            .arg(self.dir.join("admin.token"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.server = Some(child);
        wait_for(Duration::from_secs(30), "the server to answer /v1/health", || {
            reqwest::blocking::get(format!("{}/v1/health", self.url())).is_ok_and(|r| r.status().is_success())
        });
    }

    fn kill_server(&mut self) {
        if let Some(mut child) = self.server.take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    fn start_agent(&mut self, name: &str, gpus: &str, token: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap();
        let child = Command::new(BIN)
            .args(["agent", "--server", &self.url(), "--token", token, "--name", name, "--fake-gpus", gpus])
            .arg("--state-dir")
            .arg(self.dir.join(format!("agent-{name}")))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.agents.insert(name.to_string(), child);
    }

    fn kill_agent(&mut self, name: &str) {
        let mut child = self.agents.remove(name).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    fn admin_token(&self) -> String {
        std::fs::read_to_string(self.dir.join("admin.token")).unwrap().trim().to_string()
    }

    fn marks(&self) -> PathBuf {
        self.dir.join("marks")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.server.iter_mut().chain(self.agents.values_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Job processes the agents left (their own process groups).
        if let Ok(entries) = std::fs::read_dir(self.marks()) {
            for entry in entries.flatten() {
                let pid =
                    std::fs::read_to_string(entry.path()).ok().and_then(|t| t.trim().parse::<i32>().ok());
                // `kill -9 -PID` is read as `kill -9 -1` (every process) by procps-ng 4.0:
                // name the signal and end the options, so only the job's group is hit.
                if let Some(pid) = pid.filter(|&p| p > 1) {
                    let _ = Command::new("kill")
                        .args(["-s", "KILL", "--", &format!("-{pid}")])
                        .stderr(std::process::Stdio::null())
                        .status();
                }
            }
        }
        if std::env::var_os("COTENANT_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn wait_for(limit: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

fn post(url: &str, token: &str, body: &Value) -> (u16, Value) {
    let response = http().post(url).bearer_auth(token).json(body).send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

fn get(url: &str, token: &str) -> Value {
    let response = http().get(url).bearer_auth(token).send().unwrap();
    assert!(response.status().is_success(), "GET {url}: {}", response.status());
    response.json().unwrap()
}

fn add_tenant(cluster: &Cluster, name: &str) -> String {
    let (status, body) = post(
        &format!("{}/v1/admin/tenants", cluster.url()),
        &cluster.admin_token(),
        &json!({ "name": name }),
    );
    assert_eq!(status, 201, "{body}");
    body["token"].as_str().unwrap().to_string()
}

fn agent_token(cluster: &Cluster) -> String {
    let (status, body) = post(
        &format!("{}/v1/admin/tokens", cluster.url()),
        &cluster.admin_token(),
        &json!({ "scope": "agent" }),
    );
    assert_eq!(status, 201, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// Every job, through the paged listing (admin sees all tenants).
fn all_jobs(cluster: &Cluster) -> Vec<Value> {
    let mut jobs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}/v1/jobs?limit=500", cluster.url());
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page = get(&url, &cluster.admin_token());
        jobs.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return jobs,
        }
    }
}

fn job(cluster: &Cluster, token: &str, id: u64) -> Value {
    get(&format!("{}/v1/jobs/{id}", cluster.url()), token)
}

/// A job that records its pid (= its process group) under marks/JOB.ATTEMPT and sleeps.
fn sleeper(cluster: &Cluster, gpus: u32, secs: u32) -> Value {
    json!({
        "command": ["sh", "-c", format!("echo $$ > \"$MARKS/$COTENANT_JOB.$COTENANT_ATTEMPT\"; exec sleep {secs}")],
        "env": { "MARKS": cluster.marks().display().to_string() },
        "gpus": gpus,
        "grace_secs": 1,
    })
}

fn alive(pid: i32) -> bool {
    // A zombie is not alive: read the state letter from /proc.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

fn mark_pid(dir: &Path, job: u64, attempt: u64) -> Option<i32> {
    std::fs::read_to_string(dir.join(format!("{job}.{attempt}"))).ok()?.trim().parse().ok()
}

#[test]
fn acknowledged_submissions_survive_kill_9_exactly_once() {
    let mut cluster = Cluster::new("submit", "1x2xA100-80GB");
    cluster.start_server();
    let token = add_tenant(&cluster, "alice");
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let mut clients = Vec::new();
    for client in 0..8 {
        let (stop, acked, url, token) = (stop.clone(), acked.clone(), cluster.url(), token.clone());
        clients.push(std::thread::spawn(move || {
            let http = http();
            for i in 0..5000 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let name = format!("c{client}-{i}");
                let body = json!({ "command": ["true"], "name": name });
                // Connection errors after the kill are expected: those were never acknowledged.
                let Ok(response) = http.post(format!("{url}/v1/jobs")).bearer_auth(&token).json(&body).send()
                else {
                    continue;
                };
                if response.status().as_u16() == 201 {
                    let view: Value = response.json().unwrap();
                    acked.lock().unwrap().push((view["id"].as_u64().unwrap(), name));
                }
            }
        }));
    }
    wait_for(Duration::from_secs(60), "200 acknowledged submissions", || acked.lock().unwrap().len() >= 200);
    cluster.kill_server();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    cluster.start_server();
    let jobs = all_jobs(&cluster);
    let by_id: BTreeMap<u64, String> =
        jobs.iter().map(|j| (j["id"].as_u64().unwrap(), j["name"].as_str().unwrap().to_string())).collect();
    assert_eq!(by_id.len(), jobs.len(), "a job id listed twice");
    let ids: Vec<u64> = by_id.keys().copied().collect();
    assert_eq!(ids, (0..jobs.len() as u64).collect::<Vec<_>>(), "ids are dense from 0");
    let names: BTreeSet<&String> = by_id.values().collect();
    assert_eq!(names.len(), jobs.len(), "a submission stored twice");
    for (id, name) in &acked {
        assert_eq!(by_id.get(id), Some(name), "acknowledged job {id} ({name}) lost or changed");
    }
    // Submissions journaled but not acknowledged (in flight at the kill) may exist;
    // nothing else may.
    assert!(
        jobs.len() >= acked.len() && jobs.len() <= acked.len() + 8 * 64,
        "{} jobs, {} acked",
        jobs.len(),
        acked.len()
    );
}

#[test]
fn running_jobs_keep_running_across_a_server_kill_9() {
    let mut cluster = Cluster::new("running", "2x2xA100-80GB");
    cluster.start_server();
    let token = add_tenant(&cluster, "alice");
    let agent = agent_token(&cluster);
    cluster.start_agent("a", "2xA100-80GB", &agent);
    cluster.start_agent("b", "2xA100-80GB", &agent);
    let mut ids = Vec::new();
    for _ in 0..6 {
        let (status, body) = post(&format!("{}/v1/jobs", cluster.url()), &token, &sleeper(&cluster, 1, 120));
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_u64().unwrap());
    }
    let marks = cluster.marks();
    wait_for(Duration::from_secs(30), "four jobs to start their processes", || {
        ids.iter().filter(|&&id| mark_pid(&marks, id, 1).is_some_and(alive)).count() == 4
    });
    let running_before: BTreeMap<u64, i32> =
        ids.iter().filter_map(|&id| Some((id, mark_pid(&marks, id, 1)?))).collect();
    cluster.kill_server();
    cluster.start_server();
    // The agents reconnect; give them a few heartbeats.
    std::thread::sleep(Duration::from_secs(3));
    let mut gpus_in_use = BTreeSet::new();
    for &id in &ids {
        let view = job(&cluster, &token, id);
        match running_before.get(&id) {
            Some(&pid) => {
                assert_eq!(view["status"], "running", "job {id}: {view}");
                assert_eq!(view["attempt"], 1, "job {id} restarted: {view}");
                assert!(alive(pid), "job {id}'s process {pid} died");
                for uuid in view["gpu_uuids"].as_array().unwrap() {
                    assert!(gpus_in_use.insert(uuid.as_str().unwrap().to_string()), "GPU {uuid} given twice");
                }
            }
            None => assert_eq!(view["status"], "pending", "job {id}: {view}"),
        }
        assert!(mark_pid(&marks, id, 2).is_none(), "job {id} got a second attempt");
    }
    assert_eq!(gpus_in_use.len(), 4);
}

#[test]
fn a_killed_agents_job_moves_and_its_orphan_dies_when_the_agent_returns() {
    let mut cluster = Cluster::new("agent", "2x2xA100-80GB");
    cluster.start_server();
    let token = add_tenant(&cluster, "alice");
    let agent = agent_token(&cluster);
    cluster.start_agent("a", "2xA100-80GB", &agent);
    cluster.start_agent("b", "2xA100-80GB", &agent);
    wait_for(Duration::from_secs(30), "both agents to join", || {
        get(&format!("{}/v1/nodes", cluster.url()), &cluster.admin_token())
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["state"] == "up")
            .count()
            == 2
    });
    let (status, body) = post(&format!("{}/v1/jobs", cluster.url()), &token, &sleeper(&cluster, 2, 120));
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_u64().unwrap();
    let marks = cluster.marks();
    wait_for(Duration::from_secs(30), "the job's first process", || {
        mark_pid(&marks, id, 1).is_some_and(alive)
    });
    let first = job(&cluster, &token, id);
    // Which agent runs it: fake GPU uuids are FAKE-<agent>-<index>.
    let uuid = first["gpu_uuids"][0].as_str().unwrap().to_string();
    let victim = if uuid.starts_with("FAKE-a-") { "a" } else { "b" };
    let orphan = mark_pid(&marks, id, 1).unwrap();
    cluster.kill_agent(victim);
    // Heartbeat timeout 2 s: the job is requeued and starts on the other node.
    wait_for(Duration::from_secs(30), "the job's second attempt to run", || {
        mark_pid(&marks, id, 2).is_some_and(alive)
    });
    let moved = job(&cluster, &token, id);
    assert_eq!(moved["attempt"], 2, "{moved}");
    assert_ne!(moved["nodes"][0], first["nodes"][0], "{moved}");
    assert!(alive(orphan), "the orphan keeps running while its agent is away");
    // The agent comes back: attempt 1 is not in its desired set, so it stops it (grace 1 s).
    cluster.start_agent(victim, "2xA100-80GB", &agent);
    wait_for(Duration::from_secs(30), "the orphaned attempt to be killed", || !alive(orphan));
    assert!(alive(mark_pid(&marks, id, 2).unwrap()), "the live attempt must survive");
    let live_attempts = (1..=3).filter(|&attempt| mark_pid(&marks, id, attempt).is_some_and(alive)).count();
    assert_eq!(live_attempts, 1, "exactly one process of the job survives");
}

#[test]
fn preemption_sends_the_checkpoint_signal_waits_and_requeues() {
    // One GPU under SRTF: a long job runs; a short one arrives and preempts it. The
    // long job's process gets SIGUSR1 (it checkpoints and exits), is requeued, and
    // runs again (attempt 2) once the short job has finished.
    let mut cluster = Cluster::new("preempt", "1x1xA100-80GB");
    cluster.start_server_with(&["--policy", "srtf"]);
    let token = add_tenant(&cluster, "alice");
    let agent = agent_token(&cluster);
    cluster.start_agent("a", "1xA100-80GB", &agent);
    let marks = cluster.marks().display().to_string();
    let long = json!({
        "command": ["sh", "-c", "echo $$ > \"$MARKS/$COTENANT_JOB.$COTENANT_ATTEMPT\"; trap 'echo checkpointed; exit 0' USR1; echo started; while true; do sleep 0.1; done"],
        "env": { "MARKS": marks },
        "estimate_secs": 36000,
        "checkpoint_signal": "SIGUSR1",
        "grace_secs": 10,
    });
    let (status, body) = post(&format!("{}/v1/jobs", cluster.url()), &token, &long);
    assert_eq!(status, 201, "{body}");
    let long_id = body["id"].as_u64().unwrap();
    let dir = cluster.marks();
    wait_for(Duration::from_secs(30), "the long job's process", || {
        mark_pid(&dir, long_id, 1).is_some_and(alive)
    });
    let first_pid = mark_pid(&dir, long_id, 1).unwrap();
    let short = json!({ "command": ["sh", "-c", "echo short done"], "estimate_secs": 60 });
    let (status, body) = post(&format!("{}/v1/jobs", cluster.url()), &token, &short);
    assert_eq!(status, 201, "{body}");
    let short_id = body["id"].as_u64().unwrap();
    wait_for(Duration::from_secs(30), "the short job to complete", || {
        job(&cluster, &token, short_id)["status"] == "completed"
    });
    wait_for(Duration::from_secs(30), "the long job's second attempt", || {
        mark_pid(&dir, long_id, 2).is_some_and(alive)
    });
    assert!(!alive(first_pid), "the first attempt's process is gone");
    let view = job(&cluster, &token, long_id);
    assert_eq!(
        (view["status"].as_str(), view["attempt"].as_u64(), view["preemptions"].as_u64()),
        (Some("running"), Some(2), Some(1)),
        "{view}"
    );
    let events = get(&format!("{}/v1/jobs/{long_id}/events", cluster.url()), &token);
    assert!(events.as_array().unwrap().iter().any(|e| e["kind"] == "preempted"), "{events}");
    // The first attempt's output shows it got the signal before it was killed.
    wait_for(Duration::from_secs(10), "the first attempt's log", || {
        http()
            .get(format!("{}/v1/jobs/{long_id}/logs?attempt=1", cluster.url()))
            .bearer_auth(&token)
            .send()
            .ok()
            .and_then(|r| r.text().ok())
            .is_some_and(|text| text.contains("started") && text.contains("checkpointed"))
    });
}
