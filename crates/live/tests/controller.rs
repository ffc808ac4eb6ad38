//! The controller end to end, without HTTP: a SQLite journal in a temporary
//! file, agents simulated by calling `register`, `desired`, `report` and
//! `log_chunk` directly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cotenant_live::agent_api::{
    AgentEvent, Desired, DesiredQuery, GpuInfo, LogChunk, Register, Registered, Report, RunningAttempt,
};
use cotenant_live::api::{JobStatus, JobView, SubmitRequest, TenantRequest};
use cotenant_live::controller::{Controller, ControllerConfig, ControllerError, LogRefusal, Refusal};
use cotenant_live::setup::{parse_nodes, Live, ServerSetup};

/// A database file and log directory under the temp dir, removed on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let unique = format!(
            "cotenant-controller-{name}-{}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let dir = std::env::temp_dir().join(unique);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }
    fn db(&self) -> String {
        self.dir.join("cotenant.db").display().to_string()
    }
    fn config(&self, setup: ServerSetup, heartbeat: Duration) -> ControllerConfig {
        ControllerConfig {
            db: self.db(),
            setup,
            heartbeat_timeout: heartbeat,
            log_dir: self.dir.join("logs"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn setup(nodes: &str, policy: &str) -> ServerSetup {
    ServerSetup {
        nodes: parse_nodes(nodes).unwrap(),
        policy: policy.into(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: 7,
    }
}

fn request(gpus: u32, command: &str) -> SubmitRequest {
    serde_json::from_value(serde_json::json!({ "command": [command], "gpus": gpus })).unwrap()
}

async fn tenant(controller: &Controller, name: &str) -> u32 {
    let req = TenantRequest { name: name.into(), weight: 1.0, quota: BTreeMap::new(), unix_user: None };
    controller.add_tenant(req).await.unwrap().id
}

fn gpus(host: &str, count: u32) -> Vec<GpuInfo> {
    (0..count)
        .map(|i| GpuInfo {
            uuid: format!("GPU-{host}-{i}"),
            model: "NVIDIA A100-SXM4-80GB".into(),
            memory_mib: 81920,
            index: i,
        })
        .collect()
}

async fn register(
    controller: &Controller,
    host: &str,
    count: u32,
    running: Vec<RunningAttempt>,
) -> Registered {
    let req = Register {
        name: host.into(),
        gpus: gpus(host, count),
        gpu_type: None,
        running,
        version: "test".into(),
    };
    controller.register(req).await.unwrap()
}

async fn desired_now(controller: &Controller, node: u32) -> Result<Desired, Refusal> {
    controller.desired(DesiredQuery { node, after: 0, wait_ms: 0 }).await
}

async fn report(controller: &Controller, node: u32, event: AgentEvent) {
    controller.report(Report { node, events: vec![event], gpu_stats: Vec::new() }).await.unwrap();
}

fn view(controller: &Controller, job: u32) -> JobView {
    controller.job(job).unwrap().1
}

/// Waits (up to 10 s) until `f` holds.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replays the journal into a fresh `Live` and compares each entry's commands
/// with the ones the controller recorded.
async fn assert_replay_reproduces_commands(controller: &Controller, setup: &ServerSetup) -> usize {
    // A barrier: the engine task answers this after every earlier batch has
    // recorded its commands.
    assert!(matches!(controller.cancel(u32::MAX).await, Err(Refusal::NotFound(_))));
    let db = controller.db();
    let epoch: u64 = db.meta("epoch_us").await.unwrap().unwrap().parse().unwrap();
    let recorded = db.read_commands().await.unwrap();
    let mut live = Live::new(setup.clone(), epoch).unwrap();
    let mut compared = 0;
    for record in db.read_all().await.unwrap() {
        let replayed: Vec<String> = live.apply(&record).iter().map(|c| format!("{c:?}")).collect();
        let expected = recorded.get(&record.seq).cloned().unwrap_or_default();
        assert_eq!(replayed, expected, "commands of journal entry {} ({:?})", record.seq, record.entry);
        compared += replayed.len();
    }
    compared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_for_an_agent_runs_and_completes_with_its_logs() {
    let scratch = Scratch::new("lifecycle");
    let setup = setup("1x2xA100-80GB", "fifo");
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    let job = controller.submit(alice, request(2, "train")).await.unwrap();
    assert_eq!((job.id, job.status, job.tenant.as_str()), (0, JobStatus::Pending, "alice"));
    assert!(job.reason.as_deref().unwrap().contains("needs 2 GPUs, 0 free"), "{:?}", job.reason);
    // No agent yet: the node is down and its desired set refused.
    assert!(matches!(desired_now(&controller, 0).await, Err(Refusal::Conflict(m)) if m.contains("register")));

    let registered = register(&controller, "host-a", 2, Vec::new()).await;
    assert_eq!((registered.node, registered.node_name.as_str()), (0, "a100-80gb-0"));
    assert_eq!(registered.heartbeat_ms, 5000);
    let desired = desired_now(&controller, 0).await.unwrap();
    assert_eq!(desired.attempts.len(), 1);
    let launch = &desired.attempts[0];
    assert_eq!((launch.job, launch.attempt, launch.tenant.as_str()), (0, 1, "alice"));
    assert_eq!(launch.gpu_uuids, ["GPU-host-a-0", "GPU-host-a-1"]);
    let running = view(&controller, 0);
    assert_eq!(
        (running.status, running.nodes.clone()),
        (JobStatus::Running, vec!["a100-80gb-0".to_string()])
    );
    assert_eq!(controller.nodes()[0].jobs, [0]);
    assert_eq!(controller.nodes()[0].free_gpus, 0);
    assert_eq!(controller.tenants()[0].gpus_held, 2);

    let started_at = controller.now_us();
    report(&controller, 0, AgentEvent::Started { job: 0, attempt: 1, pid: 4242, at_us: started_at }).await;
    assert_eq!(view(&controller, 0).started_us, Some(started_at));

    // Logs: appended only where the server's copy ends.
    let chunk = |offset: u64, data: &str| LogChunk {
        node: 0,
        job: 0,
        attempt: 1,
        stream: "stdout".into(),
        offset,
        data: data.into(),
    };
    controller.log_chunk(chunk(0, "hello\n")).await.unwrap();
    assert_eq!(controller.log_chunk(chunk(0, "hello\n")).await, Err(LogRefusal::Have(6)));
    assert_eq!(controller.log_chunk(chunk(9, "x")).await, Err(LogRefusal::Have(6)));
    controller.log_chunk(chunk(6, "world\n")).await.unwrap();
    let path = controller.log_path(0, 1, "stdout");
    assert_eq!(path, scratch.dir.join("logs").join("0").join("1.stdout"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\nworld\n");
    let bad_stream = LogChunk { stream: "stdin".into(), ..chunk(12, "x") };
    assert!(matches!(controller.log_chunk(bad_stream).await, Err(LogRefusal::Bad(Refusal::BadRequest(_)))));
    let bad_attempt = LogChunk { attempt: 2, ..chunk(12, "x") };
    assert!(matches!(controller.log_chunk(bad_attempt).await, Err(LogRefusal::Bad(Refusal::NotFound(_)))));

    let ended_at = controller.now_us();
    let exited = AgentEvent::Exited { job: 0, attempt: 1, code: Some(0), signal: None, at_us: ended_at };
    report(&controller, 0, exited).await;
    let done = view(&controller, 0);
    assert_eq!((done.status, done.exit_code), (JobStatus::Completed, Some(0)));
    let after = desired_now(&controller, 0).await.unwrap();
    assert!(after.attempts.is_empty());
    assert!(after.version > desired.version);
    let kinds: Vec<String> = controller.job_events(0).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "started", "running", "completed"]);

    // Usage: 2 GPUs from the engine's decision to the exit, in hours.
    let (decided, ended) = (done.decided_us.unwrap(), done.ended_us.unwrap());
    let usage = controller.usage(0, u64::MAX);
    assert_eq!(usage.len(), 1);
    let (id, row) = &usage[0];
    assert_eq!((*id, row.tenant.as_str(), row.jobs_started, row.jobs_completed), (alice, "alice", 1, 1));
    assert_eq!(row.gpu_hours, 2.0 * (ended - decided) as f64 / 3.6e9);
    // A window that ends before the decision sees nothing.
    assert_eq!(controller.usage(0, decided)[0].1.gpu_hours, 0.0);
    assert_eq!(controller.usage(0, decided)[0].1.jobs_started, 0);

    assert!(assert_replay_reproduces_commands(&controller, &setup).await >= 1);
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_answers_when_the_desired_set_changes_or_when_its_wait_ends() {
    let scratch = Scratch::new("longpoll");
    let controller =
        Controller::start(scratch.config(setup("1x1xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    let alice = tenant(&controller, "alice").await;
    let node = register(&controller, "host-a", 1, Vec::new()).await.node;
    let version = desired_now(&controller, node).await.unwrap().version;

    // Nothing changes: the poll ends after its wait, with the same version.
    let begun = Instant::now();
    let idle = controller.desired(DesiredQuery { node, after: version, wait_ms: 150 }).await.unwrap();
    assert!(begun.elapsed() >= Duration::from_millis(150));
    assert_eq!((idle.version, idle.attempts.len()), (version, 0));

    // A submission starts on the node: the held poll answers with it.
    let poller = controller.clone();
    let poll = tokio::spawn(async move {
        let begun = Instant::now();
        let desired = poller.desired(DesiredQuery { node, after: version, wait_ms: 20_000 }).await.unwrap();
        (desired, begun.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    controller.submit(alice, request(1, "train")).await.unwrap();
    let (desired, waited) = poll.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(desired.version > version);
    assert_eq!(desired.attempts.iter().map(|a| (a.job, a.attempt)).collect::<Vec<_>>(), [(0, 1)]);
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_gives_two_thousand_concurrent_submissions_dense_unique_ids() {
    let scratch = Scratch::new("group");
    let controller =
        Controller::start(scratch.config(setup("1x8xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    let tenants = [tenant(&controller, "alice").await, tenant(&controller, "bob").await];
    let mut tasks = Vec::new();
    for i in 0..2000u32 {
        let controller = controller.clone();
        let tenant = tenants[(i % 2) as usize];
        tasks.push(tokio::spawn(async move {
            let job = controller.submit(tenant, request(1, &format!("job-{i}"))).await.unwrap();
            assert_eq!(job.command, [format!("job-{i}")]);
            (tenant, job.id)
        }));
    }
    let mut ids = Vec::new();
    let mut per_tenant: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for task in tasks {
        let (tenant, id) = task.await.unwrap();
        ids.push(id);
        per_tenant.entry(tenant).or_default().insert(id);
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..2000).collect::<Vec<_>>());

    // Fewer transactions than submissions: the journal shows batches sharing a time.
    let records = controller.db().read_all().await.unwrap();
    assert_eq!(records.len(), 2 + 2000);
    let times: BTreeSet<u64> = records.iter().skip(2).map(|r| r.at_us).collect();
    // 2,000 requests queue at once: a handful of batches of up to 512 (5 here), not 2,000.
    assert!(times.len() <= 200, "{} distinct commit times for 2000 submissions", times.len());

    // Paging through everything, and through one tenant, in (submitted_us, id) order.
    for tenant in [None, Some(tenants[1])] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let (page, next) = controller.list_jobs(tenant, None, 0, u64::MAX, after, 300);
            assert!(page.len() <= 300);
            seen.extend(page.iter().map(|j| (j.submitted_us, j.id)));
            match next {
                Some(key) => after = Some(key),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(seen, sorted);
        let ids: BTreeSet<u32> = seen.iter().map(|&(_, id)| id).collect();
        match tenant {
            None => assert_eq!(ids.len(), 2000),
            Some(t) => assert_eq!(ids, per_tenant[&t]),
        }
    }
    // The queue holds them all, in order; none running without an agent.
    let queue = controller.queue();
    assert_eq!(queue.len(), 2000);
    assert!(queue.iter().enumerate().all(|(i, (_, e))| e.position == i as u32));
    let (running, _) = controller.list_jobs(None, Some(JobStatus::Running), 0, u64::MAX, None, 10);
    assert!(running.is_empty());
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_jobs_filters_by_window_status_and_cursor() {
    let scratch = Scratch::new("list");
    let controller =
        Controller::start(scratch.config(setup("1x1xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    let alice = tenant(&controller, "alice").await;
    let bob = tenant(&controller, "bob").await;
    for i in 0..6 {
        controller.submit(if i % 3 == 0 { bob } else { alice }, request(1, "x")).await.unwrap();
    }
    controller.cancel(1).await.unwrap();
    let all: Vec<JobView> = (0..6).map(|i| view(&controller, i)).collect();
    let ids = |page: &[JobView]| page.iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(&controller.list_jobs(Some(alice), None, 0, u64::MAX, None, 10).0), [1, 2, 4, 5]);
    assert_eq!(ids(&controller.list_jobs(Some(bob), None, 0, u64::MAX, None, 10).0), [0, 3]);
    let cancelled = controller.list_jobs(None, Some(JobStatus::Cancelled), 0, u64::MAX, None, 10).0;
    assert_eq!(ids(&cancelled), [1]);
    // [since, until) on submission time.
    let window = controller.list_jobs(None, None, all[2].submitted_us, all[4].submitted_us, None, 10).0;
    assert!(ids(&window).starts_with(&[2]) && !ids(&window).contains(&4), "{:?}", ids(&window));
    // A full page says where to go on; the last page says nothing.
    let (first, next) = controller.list_jobs(Some(alice), None, 0, u64::MAX, None, 2);
    assert_eq!((ids(&first), next), (vec![1, 2], Some((all[2].submitted_us, 2))));
    let (second, next) = controller.list_jobs(Some(alice), None, 0, u64::MAX, next, 2);
    assert_eq!((ids(&second), next), (vec![4, 5], None));
    // Degenerate windows are empty, not a panic.
    assert!(controller.list_jobs(None, None, 10, 5, None, 10).0.is_empty());
    assert!(controller.list_jobs(None, None, 0, u64::MAX, Some((u64::MAX, u32::MAX)), 10).0.is_empty());
    assert!(controller.list_jobs(None, None, 0, u64::MAX, None, 0).0.is_empty());
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_replays_to_the_same_views_and_the_same_next_job_id() {
    let scratch = Scratch::new("restart");
    let setup = setup("2x1xA100-80GB", "fifo");
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    register(&controller, "host-a", 1, Vec::new()).await;
    for _ in 0..3 {
        controller.submit(alice, request(1, "train")).await.unwrap();
    }
    // Job 0 completes, job 1 runs, job 2 waits.
    let exited = AgentEvent::Exited { job: 0, attempt: 1, code: Some(0), signal: None, at_us: 0 };
    report(&controller, 0, exited).await;
    let until = controller.now_us();
    // started_us and the "running" event come from the agent's report, which
    // is not journaled: none was sent here, so the views compare whole.
    let snapshot = |c: &Controller| {
        let views: Vec<JobView> = (0..3).map(|i| view(c, i)).collect();
        let mut nodes = c.nodes();
        for node in &mut nodes {
            node.last_heartbeat_us = None;
        }
        (views, c.queue(), nodes, c.tenants(), c.usage(0, until))
    };
    let before = snapshot(&controller);
    assert_eq!(
        before.0.iter().map(|j| j.status).collect::<Vec<_>>(),
        [JobStatus::Completed, JobStatus::Running, JobStatus::Pending]
    );
    let entries = controller.db().read_all().await.unwrap().len() as u64;
    controller.shutdown().await;
    drop(controller);

    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    assert_eq!(controller.health().replayed, entries);
    assert_eq!(snapshot(&controller), before);
    assert_eq!(controller.tenant_id("alice"), Some(alice));
    // The node that was up is still up (one heartbeat timeout of grace) and its job still desired.
    assert_eq!(desired_now(&controller, 0).await.unwrap().attempts[0].job, 1);
    let next = controller.submit(alice, request(1, "more")).await.unwrap();
    assert_eq!(next.id, 3);
    assert_replay_reproduces_commands(&controller, &setup).await;
    controller.shutdown().await;

    // Dropping the last handle without shutdown stops the tasks too: a third
    // start on the same file works and sees job 3.
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    drop(controller);
    let controller = Controller::start(scratch.config(setup, Duration::from_secs(15))).await.unwrap();
    assert_eq!(view(&controller, 3).command, ["more"]);
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_setup_on_restart_is_refused_naming_what_differs() {
    let scratch = Scratch::new("setup");
    // A setup that cannot run is refused and not stored.
    let err =
        Controller::start(scratch.config(setup("1x2xA100-80GB", "no-such-policy"), Duration::from_secs(15)))
            .await
            .unwrap_err();
    assert!(matches!(err, ControllerError::Setup(_)), "{err}");
    let controller =
        Controller::start(scratch.config(setup("1x2xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    controller.shutdown().await;
    drop(controller);
    let err = Controller::start(scratch.config(setup("1x4xA100-80GB", "sjf"), Duration::from_secs(15)))
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::SetupChanged { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("policy: stored fifo, given sjf"), "{message}");
    assert!(
        message.contains("nodes: stored a100-80gb-0=2xA100-80GB, given a100-80gb-0=4xA100-80GB"),
        "{message}"
    );
    assert!(!message.contains("seed"), "{message}");
    // The same setup still starts.
    let controller =
        Controller::start(scratch.config(setup("1x2xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_requeues_its_job_which_runs_on_another_node() {
    let scratch = Scratch::new("lost");
    let setup = setup("2x1xA100-80GB", "fifo");
    let controller =
        Controller::start(scratch.config(setup.clone(), Duration::from_millis(300))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    let a = register(&controller, "host-a", 1, Vec::new()).await.node;
    controller.submit(alice, request(1, "train")).await.unwrap();
    assert_eq!(view(&controller, 0).nodes, ["a100-80gb-0"]);
    let b = register(&controller, "host-b", 1, Vec::new()).await.node;
    assert_ne!(a, b);
    // Agent b keeps calling; agent a falls silent.
    let alive = controller.clone();
    let keeper = tokio::spawn(async move {
        loop {
            alive.report(Report { node: b, events: Vec::new(), gpu_stats: Vec::new() }).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    eventually("job 0 to run on node b", || {
        let job = view(&controller, 0);
        job.status == JobStatus::Running && job.attempt == 2
    })
    .await;
    let job = view(&controller, 0);
    assert_eq!(job.nodes, ["a100-80gb-1"]);
    let kinds: Vec<String> = controller.job_events(0).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "started", "requeued", "started"]);
    assert_eq!(controller.nodes()[a as usize].state, "down");
    let desired = desired_now(&controller, b).await.unwrap();
    assert_eq!(desired.attempts.iter().map(|l| (l.job, l.attempt)).collect::<Vec<_>>(), [(0, 2)]);
    // A report about attempt 2 from node a, where it does not run, is ignored.
    report(&controller, a, AgentEvent::Vanished { job: 0, attempt: 2 }).await;
    assert_eq!(view(&controller, 0).status, JobStatus::Running);
    // Agent a comes back: its exit report for the old attempt is stale and ignored.
    let stale = AgentEvent::Exited { job: 0, attempt: 1, code: Some(1), signal: None, at_us: 0 };
    report(&controller, a, stale).await;
    assert_eq!(view(&controller, 0).status, JobStatus::Running);
    assert!(matches!(desired_now(&controller, a).await, Err(Refusal::Conflict(_))));
    // It registers again, still reporting attempt 1: nothing wants it there.
    let running = vec![RunningAttempt { job: 0, attempt: 1, pid: 99 }];
    assert_eq!(register(&controller, "host-a", 1, running).await.node, a);
    assert!(desired_now(&controller, a).await.unwrap().attempts.is_empty());
    assert_eq!(view(&controller, 0).attempt, 2);
    keeper.abort();
    assert_replay_reproduces_commands(&controller, &setup).await;
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_job_removes_it_from_the_desired_set() {
    let scratch = Scratch::new("cancel");
    let setup = setup("1x2xA100-80GB", "fifo");
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    let node = register(&controller, "host-a", 2, Vec::new()).await.node;
    controller.submit(alice, request(1, "a")).await.unwrap();
    controller.submit(alice, request(1, "b")).await.unwrap();
    let before = desired_now(&controller, node).await.unwrap();
    assert_eq!(before.attempts.len(), 2);
    let cancelled = controller.cancel(0).await.unwrap();
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    let after = desired_now(&controller, node).await.unwrap();
    assert!(after.version > before.version);
    assert_eq!(after.attempts.iter().map(|l| l.job).collect::<Vec<_>>(), [1]);
    assert!(
        matches!(controller.cancel(0).await, Err(Refusal::Conflict(m)) if m.contains("already cancelled"))
    );
    assert!(matches!(controller.cancel(9).await, Err(Refusal::NotFound(_))));
    // The agent's exit report for the cancelled attempt (killed by SIGTERM) is stale.
    let killed = AgentEvent::Exited { job: 0, attempt: 1, code: None, signal: Some(15), at_us: 0 };
    report(&controller, node, killed).await;
    assert_eq!(view(&controller, 0).status, JobStatus::Cancelled);
    assert_eq!(view(&controller, 0).exit_code, None);
    // So are reports for attempts that never were and jobs that do not exist.
    report(&controller, node, AgentEvent::Vanished { job: 1, attempt: 5 }).await;
    report(&controller, node, AgentEvent::Vanished { job: 77, attempt: 1 }).await;
    assert_eq!(view(&controller, 1).status, JobStatus::Running);
    // A failure of the current attempt ends it.
    let failed = AgentEvent::Exited { job: 1, attempt: 1, code: Some(3), signal: None, at_us: 0 };
    report(&controller, node, failed).await;
    assert_eq!((view(&controller, 1).status, view(&controller, 1).exit_code), (JobStatus::Failed, Some(3)));
    assert_replay_reproduces_commands(&controller, &setup).await;
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restart_reconciles_vanished_attempts() {
    let scratch = Scratch::new("reconcile");
    let setup = setup("1x2xA100-80GB", "fifo");
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    register(&controller, "host-a", 2, Vec::new()).await;
    controller.submit(alice, request(1, "a")).await.unwrap();
    controller.submit(alice, request(1, "b")).await.unwrap();
    // The agent restarts and finds only job 1's process.
    let running = vec![RunningAttempt { job: 1, attempt: 1, pid: 1234 }];
    let node = register(&controller, "host-a", 2, running).await.node;
    assert_eq!(view(&controller, 0).status, JobStatus::Lost);
    assert_eq!(view(&controller, 1).status, JobStatus::Running);
    assert!(view(&controller, 1).started_us.is_some());
    let desired = desired_now(&controller, node).await.unwrap();
    assert_eq!(desired.attempts.iter().map(|l| l.job).collect::<Vec<_>>(), [1]);
    // Another agent with a different shape has no node to bind to.
    let other = Register {
        name: "host-z".into(),
        gpus: gpus("host-z", 3),
        gpu_type: None,
        running: Vec::new(),
        version: "test".into(),
    };
    let refusal = controller.register(other).await.unwrap_err();
    assert!(refusal.to_string().contains("no free declared node"), "{refusal}");
    assert_replay_reproduces_commands(&controller, &setup).await;
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_quotas_resolve_gpu_types_and_limit_submissions() {
    let scratch = Scratch::new("quota");
    let controller =
        Controller::start(scratch.config(setup("2x4xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    let quota = |pairs: &[(&str, u32)]| pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect();
    let req = |name: &str, q: BTreeMap<String, u32>| TenantRequest {
        name: name.into(),
        weight: 2.0,
        quota: q,
        unix_user: Some("alice".into()),
    };
    let alice = controller.add_tenant(req("alice", quota(&[("a100", 4)]))).await.unwrap();
    assert_eq!(alice.quota, quota(&[("A100-80GB", 4)]));
    assert_eq!((alice.weight, alice.unix_user.as_deref()), (2.0, Some("alice")));
    let refusal = controller.submit(alice.id, request(5, "x")).await.unwrap_err();
    assert!(refusal.to_string().contains("quota of 4"), "{refusal}");
    controller.submit(alice.id, request(4, "x")).await.unwrap();

    let unknown = controller.add_tenant(req("bob", quota(&[("H100", 2)]))).await.unwrap_err();
    assert!(matches!(&unknown, Refusal::BadRequest(m) if m.contains("'H100'") && m.contains("A100-80GB")));
    let mixed =
        controller.add_tenant(req("bob", quota(&[("total", 2), ("A100-80GB", 2)]))).await.unwrap_err();
    assert!(matches!(mixed, Refusal::BadRequest(_)));
    let bob = controller.add_tenant(req("bob", quota(&[("total", 6)]))).await.unwrap();
    assert_eq!(bob.id, 1);
    assert!(matches!(controller.add_tenant(req("bob", BTreeMap::new())).await, Err(Refusal::Conflict(_))));
    assert_eq!(controller.tenants().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wakeup_timer_journals_the_policys_rounds() {
    let scratch = Scratch::new("wakeup");
    let mut setup = setup("1x1xA100-80GB", "las");
    setup.round_secs = Some(1);
    let controller = Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
    let alice = tenant(&controller, "alice").await;
    register(&controller, "host-a", 1, Vec::new()).await;
    controller.submit(alice, request(1, "a")).await.unwrap();
    controller.submit(alice, request(1, "b")).await.unwrap();
    let db = controller.db().clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let records = db.read_all().await.unwrap();
        if records.iter().any(|r| r.entry == cotenant_live::journal::Entry::Wakeup) {
            break;
        }
        assert!(Instant::now() < deadline, "no wakeup journaled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_replay_reproduces_commands(&controller, &setup).await;
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_shutdown_are_refused() {
    let scratch = Scratch::new("shutdown");
    let controller =
        Controller::start(scratch.config(setup("1x1xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    let alice = tenant(&controller, "alice").await;
    let other = controller.clone();
    controller.shutdown().await;
    let refusal = other.submit(alice, request(1, "x")).await.unwrap_err();
    assert!(refusal.to_string().contains("shutting down"), "{refusal}");
}

/// The http layer runs these in axum handlers: the handle and every future it
/// returns must be `Send` (a lock guard held across an await would not be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handle_and_its_futures_are_send() {
    fn send<T: Send + 'static>(_: T) {}
    fn shared<T: Send + Sync + 'static>(_: &T) {}
    let scratch = Scratch::new("send");
    let controller =
        Controller::start(scratch.config(setup("1x1xA100-80GB", "fifo"), Duration::from_secs(15)))
            .await
            .unwrap();
    shared(&controller);
    let c = controller.clone();
    send(async move {
        let _ = c.submit(0, request(1, "x")).await;
        let _ = c.cancel(0).await;
        let _ = c
            .register(Register {
                name: "h".into(),
                gpus: gpus("h", 1),
                gpu_type: None,
                running: vec![],
                version: String::new(),
            })
            .await;
        let _ = c.desired(DesiredQuery { node: 0, after: 0, wait_ms: 0 }).await;
        let _ = c.report(Report { node: 0, events: vec![], gpu_stats: vec![] }).await;
        let chunk =
            LogChunk { node: 0, job: 0, attempt: 1, stream: "stdout".into(), offset: 0, data: String::new() };
        let _ = c.log_chunk(chunk).await;
        let _ = c
            .add_tenant(TenantRequest {
                name: "t".into(),
                weight: 1.0,
                quota: BTreeMap::new(),
                unix_user: None,
            })
            .await;
        c.shutdown().await;
    });
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_long_poll_keeps_a_node_alive_and_a_restart_gives_one_timeout_of_grace() {
    let scratch = Scratch::new("grace");
    let setup = setup("1x1xA100-80GB", "fifo");
    let timeout = Duration::from_millis(300);
    let controller = Controller::start(scratch.config(setup.clone(), timeout)).await.unwrap();
    let node = register(&controller, "host-a", 1, Vec::new()).await.node;
    let version = desired_now(&controller, node).await.unwrap().version;
    // Holding a poll for 1 s (over three timeouts) is not silence.
    let held = controller.desired(DesiredQuery { node, after: version, wait_ms: 1000 }).await.unwrap();
    assert_eq!(held.version, version);
    assert_eq!(controller.nodes()[0].state, "up");
    controller.shutdown().await;
    drop(controller);

    // After a restart the node is up (replayed) until one timeout passes without its agent.
    let controller = Controller::start(scratch.config(setup, timeout)).await.unwrap();
    assert_eq!(controller.nodes()[0].state, "up");
    assert!(controller.nodes()[0].last_heartbeat_us.is_some());
    eventually("the silent node to be lost", || controller.nodes()[0].state == "down").await;
    let records = controller.db().read_all().await.unwrap();
    assert!(matches!(records.last().unwrap().entry, cotenant_live::journal::Entry::NodeLost { node: 0 }));
    controller.shutdown().await;
}

/// A small deterministic generator (xorshift64*), so a failing seed replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// No GPU is in two desired sets, each running attempt is desired on exactly
/// its nodes with its GPU count, and tenants hold what their running jobs hold.
async fn assert_consistent(controller: &Controller, nodes: u32) {
    let mut uuids = BTreeSet::new();
    let mut desired: BTreeMap<(u32, u32), (u32, u32)> = BTreeMap::new();
    for node in 0..nodes {
        let Ok(set) = desired_now(controller, node).await else { continue };
        for launch in set.attempts {
            for uuid in &launch.gpu_uuids {
                assert!(uuids.insert(uuid.clone()), "GPU {uuid} desired twice");
            }
            let slot = desired.entry((launch.job, launch.attempt)).or_default();
            slot.0 += 1;
            slot.1 += launch.gpu_uuids.len() as u32;
        }
    }
    let (running, _) = controller.list_jobs(None, Some(JobStatus::Running), 0, u64::MAX, None, 1000);
    let expected: BTreeMap<(u32, u32), (u32, u32)> =
        running.iter().map(|j| ((j.id, j.attempt), (j.nodes.len() as u32, j.gpus))).collect();
    assert_eq!(desired, expected);
    let held: u32 = controller.tenants().iter().map(|t| t.gpus_held).sum();
    assert_eq!(held, running.iter().map(|j| j.gpus).sum::<u32>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_random_operations_keep_gpus_single_booked_and_replay_exactly() {
    const NODES: u32 = 3;
    for seed in 1..=3u64 {
        let scratch = Scratch::new("random");
        let setup = setup("3x2xA100-80GB", "fifo");
        let controller =
            Controller::start(scratch.config(setup.clone(), Duration::from_secs(15))).await.unwrap();
        let tenants = [tenant(&controller, "alice").await, tenant(&controller, "bob").await];
        for host in 0..NODES {
            register(&controller, &format!("host-{host}"), 2, Vec::new()).await;
        }
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for _step in 0..60 {
            // A burst of concurrent calls: they may share one batch (group commit).
            let mut burst = tokio::task::JoinSet::new();
            for _ in 0..1 + rng.below(8) {
                let c = controller.clone();
                let jobs = c.list_jobs(None, None, 0, u64::MAX, None, 1000).0;
                let pick = (!jobs.is_empty()).then(|| jobs[rng.below(jobs.len() as u64) as usize].clone());
                let node = rng.below(u64::from(NODES)) as u32;
                let choice = rng.below(6);
                let gpus = 1 + rng.below(2) as u32;
                let tenant = tenants[rng.below(2) as usize];
                let code = rng.below(2) as i32;
                burst.spawn(async move {
                    match (choice, pick) {
                        (0, _) | (_, None) => {
                            c.submit(tenant, request(gpus, "x")).await.unwrap();
                        }
                        (1, Some(job)) => {
                            let _ = c.cancel(job.id).await;
                        }
                        (2, Some(job)) => {
                            // The job's own node reports its exit (maybe stale by now).
                            let node =
                                c.nodes().iter().position(|n| job.nodes.contains(&n.name)).unwrap_or(0);
                            let exited = AgentEvent::Exited {
                                job: job.id,
                                attempt: job.attempt,
                                code: Some(code),
                                signal: None,
                                at_us: 0,
                            };
                            report(&c, node as u32, exited).await;
                        }
                        (3, Some(job)) => {
                            let started =
                                AgentEvent::Started { job: job.id, attempt: job.attempt, pid: 1, at_us: 1 };
                            report(&c, node, started).await;
                        }
                        (4, _) => {
                            // The agent restarts and finds only some of its processes.
                            let desired = desired_now(&c, node).await.unwrap();
                            let running = desired
                                .attempts
                                .iter()
                                .filter(|l| l.job % 2 == 0)
                                .map(|l| RunningAttempt { job: l.job, attempt: l.attempt, pid: 1 })
                                .collect();
                            register(&c, &format!("host-{node}"), 2, running).await;
                        }
                        (_, Some(job)) => {
                            let stale = AgentEvent::Vanished { job: job.id, attempt: job.attempt + 1 };
                            report(&c, node, stale).await;
                        }
                    }
                });
            }
            while let Some(result) = burst.join_next().await {
                result.unwrap();
            }
            assert_consistent(&controller, NODES).await;
        }
        assert_replay_reproduces_commands(&controller, &setup).await;
        // A restart rebuilds the same jobs (less what only the agents' Started
        // reports said: the process start time and the "running" event).
        let strip = |c: &Controller| {
            let (jobs, _) = c.list_jobs(None, None, 0, u64::MAX, None, 1000);
            jobs.into_iter()
                .map(|mut j| {
                    j.started_us = None;
                    let events: Vec<_> =
                        c.job_events(j.id).unwrap().into_iter().filter(|e| e.kind != "running").collect();
                    (j, events)
                })
                .collect::<Vec<_>>()
        };
        let before = strip(&controller);
        assert!(before.len() > 10, "seed {seed}: only {} jobs", before.len());
        controller.shutdown().await;
        drop(controller);
        let controller = Controller::start(scratch.config(setup, Duration::from_secs(15))).await.unwrap();
        assert_eq!(strip(&controller), before, "seed {seed}");
        assert_consistent(&controller, NODES).await;
        controller.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_show_the_agents_latest_gpu_readings() {
    let scratch = Scratch::new("gpu-stats");
    let controller =
        Controller::start(scratch.config(setup("2x2xA100-80GB", "fifo"), Duration::from_secs(30)))
            .await
            .unwrap();
    let node = register(&controller, "host-a", 2, Vec::new()).await.node;
    assert!(controller.nodes().iter().all(|n| n.gpu_stats.is_empty()), "no readings before a report");
    let reading = |uuid: &str, pct| cotenant_live::agent_api::GpuStat {
        uuid: uuid.into(),
        utilization_pct: pct,
        memory_used_mib: 1024,
    };
    let stats = vec![reading("GPU-host-a-0", 90), reading("GPU-host-a-1", 10)];
    controller.report(Report { node, events: Vec::new(), gpu_stats: stats.clone() }).await.unwrap();
    // A report without readings (fake GPUs, or a report of events only) keeps the last ones.
    controller.report(Report { node, events: Vec::new(), gpu_stats: Vec::new() }).await.unwrap();
    let nodes = controller.nodes();
    assert_eq!(nodes[node as usize].gpu_stats, stats);
    assert!(nodes[1 - node as usize].gpu_stats.is_empty());
    controller.shutdown().await;
}
