//! `cotenant bench --live`: the live server's control plane under load, in one
//! process on loopback. A real controller (SQLite journal, group commit) and the
//! real HTTP layer; many light in-process fake agents that speak the agent
//! protocol over HTTP but start no processes (they report a job started when its
//! desired set reaches them, and exited after its run time).
//!
//! Two figures: accepted submissions per second (concurrent clients, every reply
//! after the journal commit), and decision-to-launch latency (engine decision to
//! the agent's receipt of the desired set) in steady state with a full cluster
//! and a long queue.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use crate::agent_api::{AgentEvent, Desired, GpuInfo, Register, Registered, Report};
use crate::api::{JobStatus, Scope, SubmitRequest, TenantRequest};
use crate::controller::{Controller, ControllerConfig};
use crate::http::{self, HttpOptions};
use crate::setup::{parse_nodes, ServerSetup};

/// What to run.
#[derive(Clone, Debug)]
pub struct LiveBenchConfig {
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// Jobs kept waiting beyond the ones that fill the cluster.
    pub queued: u32,
    /// Concurrent submitting clients.
    pub clients: u32,
    /// Steady-state window after the cluster filled.
    pub measure: Duration,
    /// Run time of each fake job, drawn uniformly from this range (seconds).
    pub run_secs: (f64, f64),
    pub policy: String,
    pub dir: PathBuf,
    pub seed: u64,
}

impl Default for LiveBenchConfig {
    fn default() -> Self {
        LiveBenchConfig {
            nodes: 1000,
            gpus_per_node: 8,
            queued: 10_000,
            clients: 32,
            measure: Duration::from_secs(40),
            run_secs: (10.0, 30.0),
            policy: "fifo".into(),
            dir: std::env::temp_dir().join(format!("cotenant-bench-live-{}", std::process::id())),
            seed: 1,
        }
    }
}

/// What it measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveBenchReport {
    pub nodes: u32,
    pub gpus: u32,
    pub submissions: u64,
    pub submit_secs: f64,
    pub submits_per_sec: f64,
    pub submit_latency_ms: Percentiles,
    pub agents_registered_secs: f64,
    pub queued_at_measure_start: u64,
    pub queued_at_measure_end: u64,
    pub launches_measured: u64,
    pub decision_to_launch_ms: Percentiles,
    pub completions_per_sec: f64,
    pub journal_entries: u64,
    pub replay_ms: u64,
    pub db_bytes: u64,
    /// `replay-check` on the run's database: commands compared, mismatches, milliseconds.
    pub replay_check_commands: u64,
    pub replay_check_mismatches: u64,
    pub replay_check_ms: u64,
}

#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(mut values: Vec<f64>) -> Percentiles {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        Percentiles { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: values[values.len() - 1] }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Setup(String),
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("{what}: HTTP {status}: {body}")]
    Refused { what: &'static str, status: u16, body: String },
}

fn unix_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Runs the benchmark; `progress` gets one line per phase.
pub async fn run(
    config: LiveBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<LiveBenchReport, BenchError> {
    let setup_err = |e: &dyn std::fmt::Display| BenchError::Setup(e.to_string());
    std::fs::create_dir_all(&config.dir).map_err(|e| setup_err(&e))?;
    let db_path = config.dir.join("bench.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db_path.display()));
    }
    let setup = ServerSetup {
        nodes: parse_nodes(&format!("{}x{}xA100-80GB", config.nodes, config.gpus_per_node))
            .map_err(|e| setup_err(&e))?,
        policy: config.policy.clone(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: config.seed,
    };
    let controller_config = || ControllerConfig {
        db: db_path.display().to_string(),
        setup: setup.clone(),
        heartbeat_timeout: Duration::from_secs(60),
        log_dir: config.dir.join("logs"),
    };
    let controller = Controller::start(controller_config()).await.map_err(|e| setup_err(&e))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| setup_err(&e))?;
    let base = format!("http://{}", listener.local_addr().map_err(|e| setup_err(&e))?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let options = HttpOptions { submit_rate_per_s: 1e9, submit_burst: u32::MAX };
    let server = tokio::spawn(http::serve(listener, controller.clone(), options, async {
        let _ = stop_rx.await;
    }));
    let admin = http::bootstrap_admin(controller.db()).await.map_err(|e| setup_err(&e))?.unwrap_or_default();
    let agent_token =
        http::create_token(controller.db(), Scope::Agent, None).await.map_err(|e| setup_err(&e))?;
    controller
        .add_tenant(TenantRequest {
            name: "bench".into(),
            weight: 1.0,
            quota: BTreeMap::new(),
            unix_user: None,
        })
        .await
        .map_err(|e| setup_err(&e))?;
    let token =
        http::create_token(controller.db(), Scope::Tenant, Some("bench")).await.map_err(|e| setup_err(&e))?;
    let _ = admin;

    // Phase 1: submissions, no agents yet (everything queues).
    let total = config.nodes as u64 * config.gpus_per_node as u64 + config.queued as u64;
    progress(&format!("submitting {total} jobs from {} concurrent clients", config.clients));
    let http_client = reqwest::Client::builder().pool_max_idle_per_host(4096).build()?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..config.clients {
        let (client, next, base, token) = (http_client.clone(), next.clone(), base.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return Ok::<_, BenchError>(latencies);
                }
                let request: SubmitRequest = serde_json::from_value(
                    serde_json::json!({ "command": ["true"], "name": format!("bench-{n}") }),
                )
                .map_err(|e| BenchError::Setup(e.to_string()))?;
                let sent = Instant::now();
                let response =
                    client.post(format!("{base}/v1/jobs")).bearer_auth(&token).json(&request).send().await?;
                let status = response.status().as_u16();
                if status != 201 {
                    return Err(BenchError::Refused { what: "submit", status, body: response.text().await? });
                }
                response.bytes().await?;
                latencies.push(sent.elapsed().as_secs_f64() * 1e3);
            }
        }));
    }
    let mut submit_latencies = Vec::new();
    for task in tasks {
        submit_latencies.extend(task.await.map_err(|e| setup_err(&e))??);
    }
    let submit_secs = started.elapsed().as_secs_f64();
    progress(&format!("{total} submissions in {submit_secs:.2} s ({:.0}/s)", total as f64 / submit_secs));

    // Phase 2: fake agents join; the cluster fills; jobs finish and queued ones start.
    progress(&format!("starting {} fake agents ({} GPUs each)", config.nodes, config.gpus_per_node));
    let stop = Arc::new(AtomicBool::new(false));
    let completions = Arc::new(AtomicU64::new(0));
    let joined = Instant::now();
    let mut agents = Vec::new();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(config.seed);
    for node in 0..config.nodes {
        let agent = FakeAgent {
            client: http_client.clone(),
            base: base.clone(),
            token: agent_token.clone(),
            name: format!("bench-{node}"),
            gpus: config.gpus_per_node,
            run_secs: config.run_secs,
            seed: rng.random(),
            stop: stop.clone(),
            completions: completions.clone(),
        };
        agents.push(tokio::spawn(agent.run()));
    }
    // Wait until every GPU is busy: the steady state starts there.
    let gpus = config.nodes * config.gpus_per_node;
    loop {
        let nodes = controller.nodes();
        let up = nodes.iter().filter(|n| n.state == "up").count() as u32;
        let busy: u32 = nodes.iter().filter(|n| n.state == "up").map(|n| n.gpus - n.free_gpus).sum();
        if (up == config.nodes && busy >= gpus) || joined.elapsed() > Duration::from_secs(600) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let agents_registered_secs = joined.elapsed().as_secs_f64();
    let queued_at_measure_start = controller.queue().len() as u64;
    progress(&format!(
        "cluster full after {agents_registered_secs:.1} s with {queued_at_measure_start} jobs queued; measuring {:.0} s",
        config.measure.as_secs_f64()
    ));
    let window_start = unix_us();
    let completions_before = completions.load(Ordering::Relaxed);
    tokio::time::sleep(config.measure).await;
    let window_end = unix_us();
    let queued_at_measure_end = controller.queue().len() as u64;
    let completed = completions.load(Ordering::Relaxed) - completions_before;
    stop.store(true, Ordering::Relaxed);
    for agent in agents {
        agent.abort();
    }

    let (jobs, _) = controller.list_jobs(None, None, 0, u64::MAX, None, usize::MAX);
    let launch_ms: Vec<f64> = jobs
        .iter()
        .filter(|j| j.status != JobStatus::Pending)
        .filter_map(|j| Some((j.decided_us?, j.started_us?)))
        .filter(|&(decided, _)| decided >= window_start && decided < window_end)
        .map(|(decided, started)| started.saturating_sub(decided) as f64 / 1e3)
        .collect();
    let journal_entries = controller.health().replayed;
    let _ = stop_tx.send(());
    let _ = server.await;
    controller.shutdown().await;

    // Restart: how long the journal takes to replay.
    progress("restarting the controller to time the journal replay");
    let controller = Controller::start(controller_config()).await.map_err(|e| setup_err(&e))?;
    let health = controller.health();
    controller.shutdown().await;
    let db_bytes = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db_path.display())).ok())
        .map(|m| m.len())
        .sum();
    let _ = journal_entries;
    progress("checking that a replay of the journal issues the recorded commands");
    let check =
        crate::history::replay_check(&db_path.display().to_string()).await.map_err(|e| setup_err(&e))?;
    let _ = std::fs::remove_dir_all(&config.dir);
    Ok(LiveBenchReport {
        nodes: config.nodes,
        gpus,
        submissions: total,
        submit_secs,
        submits_per_sec: total as f64 / submit_secs,
        submit_latency_ms: Percentiles::of(submit_latencies),
        agents_registered_secs,
        queued_at_measure_start,
        queued_at_measure_end,
        launches_measured: launch_ms.len() as u64,
        decision_to_launch_ms: Percentiles::of(launch_ms),
        completions_per_sec: completed as f64 / config.measure.as_secs_f64(),
        journal_entries: health.replayed,
        replay_ms: health.replay_ms,
        db_bytes,
        replay_check_commands: check.commands_compared,
        replay_check_mismatches: check.mismatch_count,
        replay_check_ms: check.elapsed.as_millis() as u64,
    })
}

/// An agent with no processes: it reports each desired attempt started when it
/// sees it, and exited (status 0) after a random run time.
struct FakeAgent {
    client: reqwest::Client,
    base: String,
    token: String,
    name: String,
    gpus: u32,
    run_secs: (f64, f64),
    seed: u64,
    stop: Arc<AtomicBool>,
    completions: Arc<AtomicU64>,
}

impl FakeAgent {
    async fn post<T: serde::Serialize>(&self, path: &str, body: &T) -> Result<reqwest::Response, BenchError> {
        Ok(self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?)
    }

    async fn run(self) -> Result<(), BenchError> {
        let gpus = (0..self.gpus)
            .map(|i| GpuInfo {
                uuid: format!("FAKE-{}-{i}", self.name),
                model: "A100-80GB".into(),
                memory_mib: 81920,
                index: i,
            })
            .collect();
        let register = Register {
            name: self.name.clone(),
            gpus,
            gpu_type: None,
            running: Vec::new(),
            version: "bench".into(),
        };
        let response = self.post("/v1/agent/register", &register).await?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            return Err(BenchError::Refused { what: "register", status, body: response.text().await? });
        }
        let registered: Registered = response.json().await?;
        let node = registered.node;
        let agent = Arc::new(self);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(agent.seed);
        let mut version = 0;
        let mut running: BTreeSet<(u32, u32)> = BTreeSet::new();
        while !agent.stop.load(Ordering::Relaxed) {
            let url = format!("{}/v1/agent/desired?node={node}&after={version}&wait_ms=2000", agent.base);
            let desired: Desired =
                agent.client.get(url).bearer_auth(&agent.token).send().await?.json().await?;
            let seen_at = unix_us();
            version = desired.version;
            let wanted: BTreeSet<(u32, u32)> = desired.attempts.iter().map(|a| (a.job, a.attempt)).collect();
            let mut events = Vec::new();
            for &(job, attempt) in wanted.difference(&running) {
                events.push(AgentEvent::Started { job, attempt, pid: 0, at_us: seen_at });
                // The "process": exits with status 0 after its run time, reported at once
                // (a report about an attempt the server dropped meanwhile is ignored there).
                let secs = rng.random_range(agent.run_secs.0..=agent.run_secs.1);
                let agent = agent.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                    if agent.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let event =
                        AgentEvent::Exited { job, attempt, code: Some(0), signal: None, at_us: unix_us() };
                    let report = Report { node, events: vec![event], gpu_stats: Vec::new() };
                    if agent.post("/v1/agent/report", &report).await.is_ok_and(|r| r.status().is_success()) {
                        agent.completions.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            running = wanted;
            if !events.is_empty() {
                agent.post("/v1/agent/report", &Report { node, events, gpu_stats: Vec::new() }).await?;
            }
        }
        Ok(())
    }
}
