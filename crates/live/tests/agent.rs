//! The node agent against an in-memory mock of the server's four agent routes:
//! launching with the assigned GPUs, logs before exits, checkpoint signal then
//! SIGKILL of the whole process group, GPUs held until a stopped process is
//! gone, adoption after an agent restart, resending unacknowledged exits, and
//! the errors for NVML, bad fake-GPU specs and bad tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cotenant_live::agent::{self, AgentConfig, AgentError, FakeGpus, GpuDiscovery, GpuSource, Nvml};
use cotenant_live::agent_api::{
    AgentEvent, Desired, DesiredQuery, Launch, LogChunk, Register, Registered, Report,
};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

const TOKEN: &str = "agent-token";
/// Longest any condition in these tests may take to come true.
const PATIENCE: Duration = Duration::from_secs(20);

/// What the mock saw, in order.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Log {
        job: u32,
        attempt: u32,
        stream: String,
        data: String,
    },
    Event(AgentEvent),
    /// The n-th registration (from 0).
    Register(usize),
}

struct Inner {
    desired: Desired,
    registers: Vec<Register>,
    seen: Vec<Seen>,
    /// The server's copy of each stream.
    logs: BTreeMap<(u32, u32, String), String>,
    /// Agent-file offsets the server's copies end at.
    have: BTreeMap<(u32, u32, String), u64>,
    refuse_reports: bool,
    log_conflicts: u32,
    /// The server counts the node as lost: desired-set queries get 409 until it registers again.
    node_down: bool,
}

#[derive(Clone)]
struct Mock {
    inner: Arc<Mutex<Inner>>,
    version: watch::Sender<u64>,
}

impl Mock {
    fn new() -> Mock {
        let inner = Inner {
            desired: Desired { version: 0, attempts: Vec::new() },
            registers: Vec::new(),
            seen: Vec::new(),
            logs: BTreeMap::new(),
            have: BTreeMap::new(),
            refuse_reports: false,
            log_conflicts: 0,
            node_down: false,
        };
        Mock { inner: Arc::new(Mutex::new(inner)), version: watch::channel(0).0 }
    }

    fn set_desired(&self, attempts: Vec<Launch>) {
        let mut inner = self.inner.lock().unwrap();
        inner.desired.version += 1;
        inner.desired.attempts = attempts;
        self.version.send_replace(inner.desired.version);
    }

    fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    fn events(&self) -> Vec<AgentEvent> {
        self.seen()
            .into_iter()
            .filter_map(|seen| match seen {
                Seen::Event(event) => Some(event),
                Seen::Log { .. } | Seen::Register(_) => None,
            })
            .collect()
    }

    fn registers(&self) -> Vec<Register> {
        self.inner.lock().unwrap().registers.clone()
    }

    fn log(&self, job: u32, attempt: u32, stream: &str) -> String {
        let inner = self.inner.lock().unwrap();
        inner.logs.get(&(job, attempt, stream.to_string())).cloned().unwrap_or_default()
    }

    /// Index in `seen` of the first event matching.
    fn position(&self, matches: impl Fn(&AgentEvent) -> bool) -> Option<usize> {
        self.seen().iter().position(|seen| matches!(seen, Seen::Event(event) if matches(event)))
    }

    fn started_pid(&self, job: u32) -> Option<i32> {
        self.events().iter().find_map(|event| match event {
            AgentEvent::Started { job: j, pid, .. } if *j == job => Some(*pid as i32),
            _ => None,
        })
    }

    fn count(&self, matches: impl Fn(&AgentEvent) -> bool) -> usize {
        self.events().iter().filter(|event| matches(event)).count()
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {TOKEN}");
    headers.get("authorization").and_then(|value| value.to_str().ok()) == Some(expected.as_str())
}

fn refused() -> Response {
    let body = serde_json::json!({"error": "unauthorized", "message": "unknown token"});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

async fn register(State(mock): State<Mock>, headers: HeaderMap, Json(body): Json<Register>) -> Response {
    if !authorized(&headers) {
        return refused();
    }
    let name = body.name.clone();
    let mut inner = mock.inner.lock().unwrap();
    let nth = inner.registers.len();
    inner.seen.push(Seen::Register(nth));
    inner.registers.push(body);
    inner.node_down = false;
    Json(Registered { node: 0, node_name: name, heartbeat_ms: 15_000 }).into_response()
}

async fn desired(
    State(mock): State<Mock>,
    headers: HeaderMap,
    Query(query): Query<DesiredQuery>,
) -> Response {
    if !authorized(&headers) {
        return refused();
    }
    if mock.inner.lock().unwrap().node_down {
        let body = serde_json::json!({"error": "conflict", "message": "node 0 is down; register again"});
        return (StatusCode::CONFLICT, Json(body)).into_response();
    }
    let mut version = mock.version.subscribe();
    let wait = Duration::from_millis(query.wait_ms);
    let _ = tokio::time::timeout(wait, version.wait_for(|version| *version > query.after)).await;
    let desired = mock.inner.lock().unwrap().desired.clone();
    Json(desired).into_response()
}

async fn report(State(mock): State<Mock>, headers: HeaderMap, Json(body): Json<Report>) -> Response {
    if !authorized(&headers) {
        return refused();
    }
    let mut inner = mock.inner.lock().unwrap();
    if inner.refuse_reports {
        let body = serde_json::json!({"error": "unavailable", "message": "restarting"});
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    inner.seen.extend(body.events.into_iter().map(Seen::Event));
    StatusCode::NO_CONTENT.into_response()
}

async fn logs(State(mock): State<Mock>, headers: HeaderMap, Json(chunk): Json<LogChunk>) -> Response {
    if !authorized(&headers) {
        return refused();
    }
    let mut inner = mock.inner.lock().unwrap();
    let key = (chunk.job, chunk.attempt, chunk.stream.clone());
    let have = inner.have.get(&key).copied().unwrap_or(0);
    if chunk.offset != have {
        inner.log_conflicts += 1;
        return (StatusCode::CONFLICT, Json(serde_json::json!({ "have": have }))).into_response();
    }
    // As the server does: `have` is the length of its copy (U+FFFD and all).
    inner.have.insert(key.clone(), have + chunk.data.len() as u64);
    inner.logs.entry(key).or_default().push_str(&chunk.data);
    inner.seen.push(Seen::Log {
        job: chunk.job,
        attempt: chunk.attempt,
        stream: chunk.stream,
        data: chunk.data,
    });
    StatusCode::NO_CONTENT.into_response()
}

/// A mock server on a loopback port.
async fn serve(mock: Mock, listener: tokio::net::TcpListener) -> JoinHandle<()> {
    let app = Router::new()
        .route("/v1/agent/register", post(register))
        .route("/v1/agent/desired", get(desired))
        .route("/v1/agent/report", post(report))
        .route("/v1/agent/logs", post(logs))
        .with_state(mock);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

async fn start_mock() -> (Mock, String, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mock = Mock::new();
    let server = serve(mock.clone(), listener).await;
    (mock, url, server)
}

/// A running agent and the switch that stops it.
struct Agent {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), AgentError>>,
}

impl Agent {
    fn start(url: &str, token: &str, name: &str, state_dir: &Path) -> Agent {
        let mut config = AgentConfig::new(
            url,
            token,
            name,
            GpuSource::Fake("2xA100-80GB".to_string()),
            state_dir.to_path_buf(),
        );
        config.poll_wait = Duration::from_millis(500);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(agent::run(config, async move {
            let _ = stopped.await;
        }));
        Agent { stop: Some(stop), task }
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(PATIENCE, &mut self.task).await.expect("agent stops").unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
}

/// A directory removed at the end of the test, and the process groups killed then.
struct Scratch {
    dir: PathBuf,
    groups: Mutex<Vec<i32>>,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("cotenant-agent-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir, groups: Mutex::new(Vec::new()) }
    }

    fn kill_at_end(&self, pid: i32) {
        self.groups.lock().unwrap().push(pid);
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for pid in self.groups.lock().map(|groups| groups.clone()).unwrap_or_default() {
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn launch(job: u32, script: &str, gpus: &[&str]) -> Launch {
    Launch {
        job,
        attempt: 0,
        tenant: "t".to_string(),
        command: vec!["sh".to_string(), "-c".to_string(), script.to_string()],
        env: BTreeMap::new(),
        cwd: None,
        gpu_uuids: gpus.iter().map(|gpu| gpu.to_string()).collect(),
        unix_user: None,
        checkpoint_signal: 15,
        grace_ms: 5_000,
        mps_percentage: None,
        node_rank: 0,
        node_count: 1,
    }
}

async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn wait_some<T>(what: &str, find: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = find() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Whether the process is gone (a zombie no parent reaped yet counts as gone).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

fn exited(job: u32) -> impl Fn(&AgentEvent) -> bool {
    move |event| matches!(event, AgentEvent::Exited { job: j, .. } if *j == job)
}

fn started(job: u32) -> impl Fn(&AgentEvent) -> bool {
    move |event| matches!(event, AgentEvent::Started { job: j, .. } if *j == job)
}

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(90), test).await.expect("the test finishes within 90 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_runs_a_desired_attempt_runs_with_exactly_its_gpus_and_its_output_precedes_its_exit() {
    bounded(async {
        let scratch = Scratch::new("launch");
        let (mock, url, _server) = start_mock().await;
        let agent = Agent::start(&url, TOKEN, "n1", &scratch.dir);
        let mut job = launch(
            1,
            "echo $CUDA_VISIBLE_DEVICES; echo $NVIDIA_VISIBLE_DEVICES $COTENANT_JOB $COTENANT_ATTEMPT \
             $COTENANT_NODE_RANK $COTENANT_NODE_COUNT $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE $MINE; pwd; \
             echo ${CARGO_MANIFEST_DIR:-clean}; exit 3",
            &["FAKE-n1-1", "FAKE-n1-0"],
        );
        job.env.insert("CUDA_VISIBLE_DEVICES".to_string(), "not-the-agents-choice".to_string());
        job.env.insert("MINE".to_string(), "x".to_string());
        job.mps_percentage = Some(50);
        job.attempt = 2;
        mock.set_desired(vec![job.clone()]);

        wait_for("the exit report", || mock.position(exited(1)).is_some()).await;
        let events = mock.events();
        assert!(
            matches!(events[0], AgentEvent::Started { job: 1, attempt: 2, pid, .. } if pid > 1),
            "{events:?}"
        );
        assert!(
            events.iter().any(|event| matches!(
                event,
                AgentEvent::Exited { job: 1, attempt: 2, code: Some(3), signal: None, .. }
            )),
            "{events:?}"
        );
        let work_dir = scratch.dir.join("work").join("1");
        // The agent's own environment (cargo sets this one for tests) does not reach the job.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let expected =
            format!("FAKE-n1-1,FAKE-n1-0\nFAKE-n1-1,FAKE-n1-0 1 2 0 1 50 x\n{}\nclean\n", work_dir.display());
        assert_eq!(mock.log(1, 2, "stdout"), expected);
        // All the output was accepted before the exit report.
        let last_log = mock.seen().iter().rposition(|seen| matches!(seen, Seen::Log { job: 1, .. }));
        assert!(last_log.unwrap() < mock.position(exited(1)).unwrap());
        // The pid and exit files are where the contract says.
        let jobs = scratch.dir.join("jobs");
        let pid: u32 =
            std::fs::read_to_string(jobs.join("1.2.pid")).unwrap().lines().next().unwrap().parse().unwrap();
        assert!(matches!(events[0], AgentEvent::Started { pid: started, .. } if started == pid));
        assert!(std::fs::read_to_string(jobs.join("1.2.exit")).unwrap().contains("\"code\":3"));

        // Still desired (the server has not processed the exit yet): never launched twice.
        mock.set_desired(vec![job]);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(mock.count(started(1)), 1, "{:?}", mock.events());
        agent.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_stops_a_job_no_longer_desired_gets_its_signal_then_sigkill_with_its_group_and_frees_its_gpus_after(
) {
    bounded(async {
        let scratch = Scratch::new("stop");
        let (mock, url, _server) = start_mock().await;
        let agent = Agent::start(&url, TOKEN, "n2", &scratch.dir);
        let mut polite =
            launch(2, r#"trap "echo got-usr1; exit 0" USR1; while true; do sleep 0.1; done"#, &["FAKE-n2-0"]);
        polite.checkpoint_signal = 10;
        let mut stubborn = launch(
            3,
            r#"trap "" USR1; sleep 1000 & echo child=$!; while true; do sleep 0.1; done"#,
            &["FAKE-n2-1"],
        );
        stubborn.checkpoint_signal = 10;
        stubborn.grace_ms = 700;
        mock.set_desired(vec![polite, stubborn]);

        let child: i32 = wait_some("the stubborn job's child", || {
            mock.log(3, 0, "stdout").trim().strip_prefix("child=").and_then(|pid| pid.parse().ok())
        })
        .await;
        scratch.kill_at_end(child);
        let polite_pid = wait_some("job 2 started", || mock.started_pid(2)).await;
        let stubborn_pid = wait_some("job 3 started", || mock.started_pid(3)).await;
        scratch.kill_at_end(polite_pid);
        scratch.kill_at_end(stubborn_pid);

        // Job 4 wants job 3's GPU: it waits until job 3 is gone.
        // Its output is not UTF-8 and comes in two pieces: the second is appended where the first ended.
        let next = launch(4, "printf 'ne\\377'; sleep 0.5; printf 'xt\\n'", &["FAKE-n2-1"]);
        let removed_at = Instant::now();
        mock.set_desired(vec![next]);

        wait_for("job 2 exits", || mock.position(exited(2)).is_some()).await;
        assert_eq!(mock.log(2, 0, "stdout"), "got-usr1\n");
        assert!(mock
            .events()
            .iter()
            .any(|event| matches!(event, AgentEvent::Exited { job: 2, code: Some(0), .. })));

        wait_for("job 3 exits", || mock.position(exited(3)).is_some()).await;
        assert!(
            removed_at.elapsed() >= Duration::from_millis(650),
            "SIGKILL came before the grace period ended"
        );
        assert!(
            mock.events()
                .iter()
                .any(|event| matches!(event, AgentEvent::Exited { job: 3, signal: Some(9), .. })),
            "{:?}",
            mock.events()
        );
        wait_for("the stubborn job's child is gone too", || gone(child) && gone(stubborn_pid)).await;

        wait_for("job 4 exits", || mock.position(exited(4)).is_some()).await;
        assert!(mock.position(exited(3)) < mock.position(started(4)), "{:?}", mock.events());
        assert_eq!(mock.log(4, 0, "stdout"), "ne\u{fffd}xt\n");
        agent.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_restarted_adopts_what_runs_reports_what_died_and_resends_unacknowledged_exits() {
    bounded(async {
        let scratch = Scratch::new("restart");
        let (mock, url, _server) = start_mock().await;
        let first = Agent::start(&url, TOKEN, "n3", &scratch.dir);
        let survivor = launch(5, "printf 'hel\\377lo\\n'; while true; do sleep 0.1; done", &["FAKE-n3-0"]);
        let victim = launch(6, "while true; do sleep 0.1; done", &["FAKE-n3-1"]);
        mock.set_desired(vec![survivor.clone(), victim.clone()]);
        let survivor_pid = wait_some("job 5 started", || mock.started_pid(5)).await;
        let victim_pid = wait_some("job 6 started", || mock.started_pid(6)).await;
        scratch.kill_at_end(survivor_pid);
        scratch.kill_at_end(victim_pid);
        wait_for("job 5's output", || mock.log(5, 0, "stdout") == "hel\u{fffd}lo\n").await;

        // Job 7 exits while the server refuses reports: its exit is recorded but not acknowledged.
        mock.inner.lock().unwrap().refuse_reports = true;
        let short = launch(7, "exit 4", &[]);
        mock.set_desired(vec![survivor.clone(), victim.clone(), short.clone()]);
        let exit_file = scratch.dir.join("jobs").join("7.0.exit");
        wait_for("job 7's exit file", || exit_file.exists()).await;
        first.shutdown().await;
        assert!(mock.position(exited(7)).is_none());
        mock.inner.lock().unwrap().refuse_reports = false;

        // Job 6 dies while no agent runs; job 5 keeps running.
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(victim_pid), nix::sys::signal::Signal::SIGKILL)
            .unwrap();
        wait_for("job 6's process is gone", || gone(victim_pid)).await;
        assert!(!gone(survivor_pid));

        let second = Agent::start(&url, TOKEN, "n3", &scratch.dir);
        wait_for("the second registration", || mock.registers().len() == 2).await;
        let running = &mock.registers()[1].running;
        assert_eq!(running.len(), 1, "{running:?}");
        assert_eq!((running[0].job, running[0].attempt, running[0].pid as i32), (5, 0, survivor_pid));
        wait_for("job 6 reported vanished", || {
            mock.position(|event| matches!(event, AgentEvent::Vanished { job: 6, attempt: 0 })).is_some()
        })
        .await;
        wait_for("job 7's exit resent", || {
            mock.events()
                .iter()
                .any(|event| matches!(event, AgentEvent::Exited { job: 7, code: Some(4), .. }))
        })
        .await;
        // Both went out before the registration, under the node index the first agent had.
        let second_register = mock.seen().iter().position(|seen| *seen == Seen::Register(1));
        assert!(mock.position(exited(7)) < second_register, "{:?}", mock.seen());
        assert!(
            mock.position(|event| matches!(event, AgentEvent::Vanished { job: 6, .. })) < second_register
        );

        // Still desired, yet nothing is launched again.
        tokio::time::sleep(Duration::from_millis(800)).await;
        for job in [5, 6] {
            assert_eq!(mock.count(started(job)), 1, "job {job}: {:?}", mock.events());
        }
        // Job 7's start report was lost with the first agent; it was not started again.
        assert_eq!(mock.count(started(7)), 0, "{:?}", mock.events());
        // The adopted job's output is not shipped twice (the agent resyncs to what the server has).
        assert_eq!(mock.log(5, 0, "stdout"), "hel\u{fffd}lo\n");
        assert!(mock.inner.lock().unwrap().log_conflicts > 0);

        // No longer desired: the adopted process is stopped, and its end needs no report.
        mock.set_desired(Vec::new());
        wait_for("the adopted process is stopped", || gone(survivor_pid)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(mock.position(|event| matches!(event, AgentEvent::Vanished { job: 5, .. })).is_none());
        second.shutdown().await;
        // A third start finds nothing to adopt and nothing to resend.
        let third = Agent::start(&url, TOKEN, "n3", &scratch.dir);
        wait_for("the third registration", || mock.registers().len() == 3).await;
        assert!(mock.registers()[2].running.is_empty());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(mock.count(exited(7)), 1, "{:?}", mock.events());
        third.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_registers_again_listing_what_runs_when_the_server_lost_its_node() {
    bounded(async {
        let scratch = Scratch::new("lost");
        let (mock, url, _server) = start_mock().await;
        let agent = Agent::start(&url, TOKEN, "n8", &scratch.dir);
        mock.set_desired(vec![launch(13, "while true; do sleep 0.1; done", &["FAKE-n8-0"])]);
        let pid = wait_some("job 13 started", || mock.started_pid(13)).await;
        scratch.kill_at_end(pid);
        assert!(mock.registers()[0].running.is_empty());

        mock.inner.lock().unwrap().node_down = true;
        mock.set_desired(vec![launch(13, "while true; do sleep 0.1; done", &["FAKE-n8-0"])]);
        wait_for("the second registration", || mock.registers().len() == 2).await;
        let running = &mock.registers()[1].running;
        assert_eq!(running.len(), 1, "{running:?}");
        assert_eq!((running[0].job, running[0].pid as i32), (13, pid));

        // Polling goes on: the agent still enacts the desired set.
        mock.set_desired(Vec::new());
        wait_for("job 13 stopped", || mock.position(exited(13)).is_some()).await;
        assert!(gone(pid));
        assert_eq!(mock.count(started(13)), 1);
        agent.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reports_launch_failures() {
    bounded(async {
        let scratch = Scratch::new("failures");
        let (mock, url, _server) = start_mock().await;
        let agent = Agent::start(&url, TOKEN, "n4", &scratch.dir);
        let mut missing = launch(8, "", &[]);
        missing.command = vec!["/nonexistent/cotenant-program".to_string()];
        let mut stranger = launch(9, "id -un", &[]);
        stranger.unix_user = Some("no-such-user-cotenant".to_string());
        let mut bad_cwd = launch(10, "true", &[]);
        bad_cwd.cwd = Some("/nonexistent/cotenant-dir".to_string());
        mock.set_desired(vec![missing, stranger, bad_cwd]);

        let failure = |job: u32| {
            let events = mock.events();
            events.into_iter().find_map(|event| match event {
                AgentEvent::LaunchFailed { job: j, message, .. } if j == job => Some(message),
                _ => None,
            })
        };
        let message = wait_some("job 8 fails to launch", || failure(8)).await;
        assert!(message.contains("/nonexistent/cotenant-program"), "{message}");
        let message = wait_some("job 10 fails to launch", || failure(10)).await;
        assert!(message.contains("/nonexistent/cotenant-dir"), "{message}");
        if nix::unistd::geteuid().is_root() {
            let message = wait_some("job 9 fails to launch", || failure(9)).await;
            assert!(message.contains("no-such-user-cotenant"), "{message}");
        } else {
            wait_for("job 9 runs as the agent's user", || mock.position(exited(9)).is_some()).await;
            assert!(mock.log(9, 0, "stderr").contains("not running as root"));
        }
        agent.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_as_root_runs_a_job_as_its_tenants_unix_user() {
    if !nix::unistd::geteuid().is_root() || nix::unistd::User::from_name("nobody").ok().flatten().is_none() {
        // Without root there is no user to switch to; the other test checks that path.
        return;
    }
    bounded(async {
        let scratch = Scratch::new("user");
        let (mock, url, _server) = start_mock().await;
        let agent = Agent::start(&url, TOKEN, "n5", &scratch.dir);
        let mut job = launch(11, "id -un; echo $HOME", &[]);
        job.unix_user = Some("nobody".to_string());
        mock.set_desired(vec![job]);
        wait_for("job 11 exits", || mock.position(exited(11)).is_some()).await;
        let home = nix::unistd::User::from_name("nobody").unwrap().unwrap().dir;
        assert_eq!(mock.log(11, 0, "stdout"), format!("nobody\n{}\n", home.display()));
        agent.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_stops_on_a_refused_token_and_an_absent_server_is_waited_for() {
    bounded(async {
        let scratch = Scratch::new("token");
        let (_mock, url, _server) = start_mock().await;
        let refused = Agent::start(&url, "wrong-token", "n6", &scratch.dir);
        let result = tokio::time::timeout(PATIENCE, refused.task).await.expect("the agent gives up").unwrap();
        let error = result.expect_err("a wrong token is an error");
        assert!(matches!(error, AgentError::Unauthorized { status: 401, .. }), "{error:?}");
        assert!(error.to_string().contains("unknown token"), "{error}");

        // A server that is not up yet: the agent keeps trying, then registers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let late_url = format!("http://{address}");
        let agent = Agent::start(&late_url, TOKEN, "n6", &scratch.dir);
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(!agent.task.is_finished());
        let mock = Mock::new();
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let _late_server = serve(mock.clone(), listener).await;
        wait_for("the late registration", || mock.registers().len() == 1).await;
        assert_eq!(mock.registers()[0].gpus.len(), 2);
        agent.shutdown().await;
    })
    .await;
}

/// Without a driver (this machine): NVML fails with an error that names the
/// way out, and so does the agent. With one (a GPU machine): it lists the GPUs,
/// and a job given the first one sees only that one (`nvidia-smi -L`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_nvml_finds_gpus_a_job_sees_only_its_own_or_fails_with_a_clear_error() {
    let nvml = match Nvml::init() {
        Ok(nvml) => nvml,
        Err(error) => {
            assert!(matches!(error, AgentError::Nvml(_)), "{error:?}");
            let message = error.to_string();
            assert!(message.contains("NVML") && message.contains("--fake-gpus"), "{message}");
            let config =
                AgentConfig::new("http://127.0.0.1:9", TOKEN, "n7", GpuSource::Nvml, std::env::temp_dir());
            let result =
                tokio::time::timeout(PATIENCE, agent::run(config, std::future::pending())).await.unwrap();
            assert!(matches!(result, Err(AgentError::Nvml(_))), "{result:?}");
            return;
        }
    };
    let gpus = nvml.gpus().expect("NVML lists its GPUs");
    assert!(!gpus.is_empty());
    assert!(gpus.iter().all(|gpu| gpu.uuid.starts_with("GPU-") || gpu.uuid.starts_with("MIG-")), "{gpus:?}");
    assert!(gpus.iter().all(|gpu| gpu.memory_mib > 0), "{gpus:?}");
    assert_eq!(nvml.stats().len(), gpus.len());
    bounded(async {
        let scratch = Scratch::new("nvml");
        let (mock, url, _server) = start_mock().await;
        let config = AgentConfig {
            poll_wait: Duration::from_millis(500),
            ..AgentConfig::new(&url, TOKEN, "gpu-node", GpuSource::Nvml, scratch.dir.clone())
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(agent::run(config, async move {
            let _ = stopped.await;
        }));
        let agent = Agent { stop: Some(stop), task };
        wait_for("registration", || mock.registers().len() == 1).await;
        assert_eq!(mock.registers()[0].gpus, gpus);
        let mut job = launch(12, "", &[&gpus[0].uuid]);
        job.command = vec!["nvidia-smi".to_string(), "-L".to_string()];
        mock.set_desired(vec![job]);
        wait_for("nvidia-smi exits", || mock.position(exited(12)).is_some()).await;
        let listed = mock.log(12, 0, "stdout");
        println!("nvidia-smi -L inside the job:\n{listed}");
        assert_eq!(listed.lines().count(), 1, "{listed}");
        assert!(listed.contains(&gpus[0].uuid), "{listed}");
        agent.shutdown().await;
    })
    .await;
}

#[test]
fn agent_fake_gpu_specs_parse_or_are_refused_naming_the_spec() {
    let gpus = FakeGpus::parse("2xA100-80GB", "node-a").unwrap().gpus().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(
        (gpus[1].uuid.as_str(), gpus[1].model.as_str(), gpus[1].memory_mib, gpus[1].index),
        ("FAKE-node-a-1", "A100-80GB", 81920, 1)
    );
    assert_eq!(FakeGpus::parse("8xH200", "n").unwrap().gpus().unwrap()[7].memory_mib, 143771);
    assert_eq!(FakeGpus::parse("1xMI300X", "n").unwrap().gpus().unwrap()[0].memory_mib, 81920);
    assert!(FakeGpus::parse("1xH200", "n").unwrap().stats().is_empty());
    for spec in ["", "8", "xA100", "0xA100", "eightxA100", "8x", "8xA100 80GB", "5000xA100"] {
        let error = FakeGpus::parse(spec, "n").expect_err(spec);
        assert!(matches!(&error, AgentError::FakeGpus { spec: named, .. } if named == spec), "{error:?}");
        assert!(error.to_string().contains(&format!("{spec:?}")), "{error}");
    }
}
