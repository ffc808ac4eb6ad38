//! The journal and the controller through sqlx's Any driver on PostgreSQL: the same
//! code path as SQLite, against a throwaway PostgreSQL cluster started in a temp
//! directory (initdb + pg_ctl, as an unprivileged user: PostgreSQL refuses root).
//! Skips, saying why, where no PostgreSQL server binaries exist.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use cotenant_live::journal::{Db, Entry, Record};

/// A running throwaway PostgreSQL; stopped and removed on drop.
struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    user: Option<String>,
}

fn find_bin() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    candidates.into_iter().find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    fn start(name: &str) -> Result<Postgres, String> {
        let bin = find_bin()
            .ok_or("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql")?;
        let dir = std::env::temp_dir().join(format!("cotenant-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // As root, run PostgreSQL as `nobody`, which must own the directory.
        let user = is_root().then(|| "nobody".to_string());
        if user.is_some() {
            let status =
                Command::new("chown").args(["-R", "nobody"]).arg(&dir).status().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err("chown of the data directory to nobody failed".into());
            }
        }
        let pg = Postgres { dir, bin, port, user };
        let data = pg.dir.join("data");
        pg.run("initdb", &["-D", &data.display().to_string(), "-A", "trust", "-U", "cotenant"])?;
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1", pg.port, pg.dir.display());
        let log = pg.dir.join("pg.log").display().to_string();
        pg.run("pg_ctl", &["-D", &data.display().to_string(), "-o", &options, "-l", &log, "-w", "start"])?;
        Ok(pg)
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let path = self.bin.join(program);
        let output = match &self.user {
            Some(user) => Command::new("runuser")
                .args(["-u", user, "--"])
                .arg(&path)
                .args(args)
                .current_dir(&self.dir)
                .output(),
            None => Command::new(&path).args(args).current_dir(&self.dir).output(),
        }
        .map_err(|e| format!("{}: {e}", path.display()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!("{program} failed: {}", String::from_utf8_lossy(&output.stderr)))
        }
    }

    fn url(&self) -> String {
        format!("postgres://cotenant@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data").display().to_string();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_or_skip(name: &str) -> Option<Postgres> {
    match Postgres::start(name) {
        Ok(pg) => Some(pg),
        Err(why) => {
            eprintln!("skipping the PostgreSQL test: {why}");
            None
        }
    }
}

fn data_dir_exists(dir: &Path) -> bool {
    dir.join("data").join("PG_VERSION").is_file()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_works_on_postgresql_through_the_same_code() {
    let Some(pg) = start_or_skip("journal") else { return };
    assert!(data_dir_exists(&pg.dir));
    let db = Db::open(&pg.url()).await.unwrap();
    assert!(!db.is_sqlite());
    assert_eq!(db.meta_init("epoch_us", "42").await.unwrap(), "42");
    assert_eq!(db.meta_init("epoch_us", "43").await.unwrap(), "42", "meta_init keeps the first value");
    assert_eq!(db.next_seq().await.unwrap(), 1);
    let records = vec![
        Record {
            seq: 1,
            at_us: 10,
            entry: Entry::TenantAdded {
                tenant: 0,
                name: "alice".into(),
                weight: 2.0,
                quota: BTreeMap::from([("total".to_string(), 4)]),
                gpu_limit: Some(4),
                unix_user: None,
            },
        },
        Record { seq: 2, at_us: 20, entry: Entry::Cancelled { job: 7 } },
        Record { seq: 3, at_us: 30, entry: Entry::Wakeup },
    ];
    db.append(&records).await.unwrap();
    db.record_commands(&[(2, vec!["End { job: JobId(7) }".into()])]).await.unwrap();
    assert_eq!(db.read_all().await.unwrap(), records);
    assert_eq!(db.next_seq().await.unwrap(), 4);
    assert_eq!(db.read_commands().await.unwrap()[&2], ["End { job: JobId(7) }"]);
    // A duplicate sequence number fails the whole transaction: nothing half-written.
    let clash = vec![
        Record { seq: 4, at_us: 40, entry: Entry::Wakeup },
        Record { seq: 3, at_us: 40, entry: Entry::Wakeup },
    ];
    assert!(db.append(&clash).await.is_err());
    assert_eq!(db.next_seq().await.unwrap(), 4);
    db.close().await;
    // Reopening finds everything (the schema statements are idempotent).
    let db = Db::open(&pg.url()).await.unwrap();
    assert_eq!(db.read_all().await.unwrap().len(), 3);
    db.close().await;
}

/// The controller on a PostgreSQL URL: a tenant, a submission that waits for an
/// agent, a start, an exit; then a restart on the same database replays to the
/// same job, and a replay of the journal reproduces the recorded commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_and_restarts_on_postgresql() {
    use cotenant_live::agent_api::{AgentEvent, DesiredQuery, GpuInfo, Register, Report};
    use cotenant_live::api::{JobStatus, SubmitRequest, TenantRequest};
    use cotenant_live::controller::{Controller, ControllerConfig};
    use cotenant_live::setup::{parse_nodes, ServerSetup};

    let Some(pg) = start_or_skip("controller") else { return };
    let setup = ServerSetup {
        nodes: parse_nodes("1x2xA100-80GB").unwrap(),
        policy: "fifo".into(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: 3,
    };
    let config = || ControllerConfig {
        db: pg.url(),
        setup: setup.clone(),
        heartbeat_timeout: std::time::Duration::from_secs(30),
        log_dir: pg.dir.join("logs"),
    };
    let controller = Controller::start(config()).await.unwrap();
    let tenant = TenantRequest { name: "alice".into(), weight: 1.0, quota: BTreeMap::new(), unix_user: None };
    let tenant = controller.add_tenant(tenant).await.unwrap().id;
    let request: SubmitRequest =
        serde_json::from_value(serde_json::json!({ "command": ["true"], "gpus": 2 })).unwrap();
    let job = controller.submit(tenant, request).await.unwrap();
    assert_eq!((job.id, job.status), (0, JobStatus::Pending));
    let gpus = (0..2)
        .map(|i| GpuInfo {
            uuid: format!("GPU-{i}"),
            model: "NVIDIA A100-SXM4-80GB".into(),
            memory_mib: 81920,
            index: i,
        })
        .collect();
    let register =
        Register { name: "host".into(), gpus, gpu_type: None, running: Vec::new(), version: "test".into() };
    let node = controller.register(register).await.unwrap().node;
    let desired = controller.desired(DesiredQuery { node, after: 0, wait_ms: 1000 }).await.unwrap();
    assert_eq!(desired.attempts.len(), 1);
    assert_eq!(desired.attempts[0].gpu_uuids, ["GPU-0", "GPU-1"]);
    let exited = AgentEvent::Exited { job: 0, attempt: 1, code: Some(0), signal: None, at_us: 0 };
    controller.report(Report { node, events: vec![exited], gpu_stats: Vec::new() }).await.unwrap();
    assert_eq!(controller.job(0).unwrap().1.status, JobStatus::Completed);
    controller.shutdown().await;

    let controller = Controller::start(config()).await.unwrap();
    let (owner, view) = controller.job(0).unwrap();
    assert_eq!(
        (owner, view.status, view.exit_code, view.attempt),
        (tenant, JobStatus::Completed, Some(0), 1)
    );
    assert_eq!(controller.health().replayed, 4, "tenant, submission, node joined, exit");
    controller.shutdown().await;
    let check = cotenant_live::history::replay_check(&pg.url()).await.unwrap();
    assert!(check.ok(), "{check:?}");
    assert!(check.commands_compared >= 1);
}
