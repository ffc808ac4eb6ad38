//! `cotenant sim --trace journal:DB` and `cotenant replay-check --db DB` on
//! journals written without a server (`history::record` appends each record and
//! the commands a `Live` answered, as the controller does): hand-computed JCTs,
//! the declared cluster, skipped jobs reported, a tampered command named by row,
//! and errors for a missing database.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{cotenant, stderr, stdout};
use cotenant_live::api::SubmitRequest;
use cotenant_live::history;
use cotenant_live::journal::{Db, Entry, Record};
use cotenant_live::setup::{parse_nodes, ServerSetup};

const EPOCH_US: u64 = 1_764_600_000_000_000;

/// A SQLite file (and a CSV beside it) under the temp dir, unique per test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let scratch = Scratch(
            std::env::temp_dir().join(format!("cotenant-journal-trace-{}-{call}-{name}", std::process::id())),
        );
        scratch.remove();
        scratch
    }
    fn db(&self) -> String {
        format!("{}.db", self.0.display())
    }
    fn csv(&self) -> String {
        format!("{}.csv", self.0.display())
    }
    fn remove(&self) {
        for suffix in [".db", ".db-wal", ".db-shm", ".csv"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove();
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn submit(job: u32, tenant: u32, gpus: u32, estimate_secs: Option<f64>) -> Entry {
    let request: SubmitRequest = serde_json::from_value(serde_json::json!({
        "command": ["train"], "gpus": gpus, "estimate_secs": estimate_secs
    }))
    .unwrap();
    Entry::Submitted { job, tenant, request }
}

fn tenant(tenant: u32, name: &str, weight: f64) -> Entry {
    Entry::TenantAdded {
        tenant,
        name: name.into(),
        weight,
        quota: BTreeMap::new(),
        gpu_limit: None,
        unix_user: None,
    }
}

fn exited(job: u32, code: i32) -> Entry {
    Entry::Exited { job, attempt: 1, code: Some(code), signal: None }
}

/// Writes `(seconds after the epoch, entry)` rows into `db` for a FIFO server on one 2-GPU node.
fn record(db: &str, rows: Vec<(u64, Entry)>) {
    let setup = ServerSetup {
        nodes: parse_nodes("1x2xA100-80GB").unwrap(),
        policy: "fifo".into(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: 1,
    };
    let records: Vec<Record> = rows
        .into_iter()
        .enumerate()
        .map(|(i, (secs, entry))| Record { seq: i as u64 + 1, at_us: EPOCH_US + secs * 1_000_000, entry })
        .collect();
    block_on(history::record(db, &setup, EPOCH_US, &records)).unwrap();
}

/// One node of 2 GPUs under FIFO (rows 1-10):
///
/// | t (s) | row                                   | live engine               |
/// |-------|---------------------------------------|---------------------------|
/// | 0     | tenants alice (weight 1), bob (2), carol (4, no jobs) |           |
/// | 1     | node 0 joins                          |                           |
/// | 10    | job 0: alice, 2 GPUs, estimate 100 s  | starts (both GPUs)        |
/// | 20    | job 1: bob, 1 GPU                     | waits                     |
/// | 25    | job 2: alice, 1 GPU                   | waits                     |
/// | 70    | job 0 exits 0                         | starts jobs 1 and 2       |
/// | 100   | job 1 exits 0                         |                           |
/// | 110   | job 2 exits 0                         |                           |
///
/// As a workload: arrivals 0, 10, 15 s; run times 60, 30, 40 s; GPUs 2, 1, 1.
fn three_jobs() -> Vec<(u64, Entry)> {
    vec![
        (0, tenant(0, "alice", 1.0)),
        (0, tenant(1, "bob", 2.0)),
        (0, tenant(2, "carol", 4.0)),
        (1, Entry::NodeJoined { node: 0, name: "host-a".into(), gpu_uuids: Vec::new() }),
        (10, submit(0, 0, 2, Some(100.0))),
        (20, submit(1, 1, 1, None)),
        (25, submit(2, 0, 1, None)),
        (70, exited(0, 0)),
        (100, exited(1, 0)),
        (110, exited(2, 0)),
    ]
}

/// (job, tenant, arrival_s, work, jct_s) per row of a --jobs-csv file.
fn jobs_csv(path: &str) -> Vec<(u32, String, f64, f64, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (job, tenant, arrival, work, jct) =
        (col("job"), col("tenant"), col("arrival_s"), col("work"), col("jct_s"));
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (
                f[job].parse().unwrap(),
                f[tenant].to_string(),
                f[arrival].parse().unwrap(),
                f[work].parse().unwrap(),
                f[jct].parse().unwrap(),
            )
        })
        .collect()
}

/// FIFO on the declared 2 GPUs: job 0 runs 0-60 s; jobs 1 and 2 (arrived at 10
/// and 15 s) start at 60 s and end at 90 and 100 s. JCTs 60, 80, 85 s: the live
/// run's own timeline, shifted to the first arrival.
#[test]
fn fifo_on_the_declared_cluster_gives_the_hand_computed_jcts() {
    let scratch = Scratch::new("fifo");
    record(&scratch.db(), three_jobs());
    let trace = format!("journal:{}", scratch.db());
    let out = cotenant(&["sim", "--trace", &trace, "--policy", "fifo", "--jobs-csv", &scratch.csv()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(3 jobs, 3 tenants"), "{text}");
    assert!(
        text.contains(
            "cluster:  declared by the server that wrote the journal (--nodes 1x2xA100-80GB): 1 nodes, 2 GPUs; --cluster overrides"
        ),
        "{text}"
    );
    assert!(text.contains("note: run times are measured from the engine's decision"), "{text}");
    assert!(!text.contains("skipped"), "{text}");
    assert_eq!(
        jobs_csv(&scratch.csv()),
        [
            (0, "alice".to_string(), 0.0, 60.0, 60.0),
            (1, "bob".to_string(), 10.0, 30.0, 80.0),
            (2, "alice".to_string(), 15.0, 40.0, 85.0),
        ]
    );
}

/// Every tenant the journal added comes along with its weight (carol has no
/// job), so fair-share policies see the tenants the live server had; policies
/// that preempt run on the history too.
#[test]
fn tenants_come_along_and_other_policies_run_on_the_history() {
    let scratch = Scratch::new("tenants");
    record(&scratch.db(), three_jobs());
    let trace = format!("journal:{}", scratch.db());
    let out = cotenant(&["sim", "--trace", &trace, "--policy", "fair-share,las,tiresias", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["workload"]["tenants"], 3);
    assert_eq!(json["workload"]["cluster_gpus"], 2);
    assert_eq!(json["healthy"], true);
    assert_eq!(json["runs"].as_array().unwrap().len(), 3);
}

/// `--from 10` keeps jobs 1 and 2 (arrivals 10 and 15 s), rebased to 0 and 5 s:
/// on 2 free GPUs both start at once, JCTs 30 and 40 s.
#[test]
fn a_time_window_keeps_and_rebases_the_jobs_in_it() {
    let scratch = Scratch::new("window");
    record(&scratch.db(), three_jobs());
    let (trace, csv) = (format!("journal:{}", scratch.db()), scratch.csv());
    let out = cotenant(&["sim", "--trace", &trace, "--policy", "fifo", "--from", "10", "--jobs-csv", &csv]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("note: time window kept 2 of 3 jobs\n"), "{}", stdout(&out));
    let rows: Vec<(String, f64, f64)> = jobs_csv(&csv).into_iter().map(|r| (r.1, r.2, r.4)).collect();
    assert_eq!(rows, [("bob".to_string(), 0.0, 30.0), ("alice".to_string(), 5.0, 40.0)]);
}

/// On one GPU job 0 (2 GPUs) cannot run: an error naming the journal row that
/// submitted it (row 5), or with --drop-wide-jobs: job 1 runs 10-40 s (JCT 30),
/// job 2 waits until 40 s and ends at 80 s (JCT 65).
#[test]
fn another_cluster_names_the_row_of_a_job_too_wide_or_drops_it() {
    let scratch = Scratch::new("narrow");
    record(&scratch.db(), three_jobs());
    let trace = format!("journal:{}", scratch.db());
    let base = ["sim", "--trace", &trace, "--policy", "fifo", "--cluster", "nodes=1,gpus-per-node=1"];
    let out = cotenant(&base);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{} (server journal) line 5, field gpus: job asks for 2 GPUs but the cluster has 1",
            scratch.db()
        )),
        "{err}"
    );
    let csv = scratch.csv();
    let mut args = base.to_vec();
    args.extend(["--drop-wide-jobs", "--jobs-csv", &csv]);
    let out = cotenant(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let jcts: Vec<(u32, f64)> = jobs_csv(&scratch.csv()).into_iter().map(|r| (r.0, r.4)).collect();
    assert_eq!(jcts, [(0, 30.0), (1, 65.0)]);
}

/// After the three jobs (both GPUs free at 110 s), rows 11-18:
///
/// | t (s)   | row                        | outcome                               |
/// |---------|----------------------------|---------------------------------------|
/// | 111-112 | job 3 (bob, 2 GPUs) exits 0 | completed after 1 s: kept            |
/// | 120-125 | job 4 (alice, 1 GPU) exits 3 | failed after 5 s: kept              |
/// | 130     | job 5 (bob, 2 GPUs)        | starts; still running at the end      |
/// | 131-132 | job 6 (bob, 1 GPU) cancelled | cancelled before it started         |
/// | 133     | job 7 (alice, 1 GPU)       | still pending at the end              |
///
/// 5 jobs kept, 3 skipped, each reason on its own line.
#[test]
fn skipped_jobs_are_counted_with_their_reasons() {
    let scratch = Scratch::new("skipped");
    let mut rows = three_jobs();
    rows.extend([
        (111, submit(3, 1, 2, None)),
        (112, exited(3, 0)),
        (120, submit(4, 0, 1, None)),
        (125, exited(4, 3)),
        (130, submit(5, 1, 2, None)),
        (131, submit(6, 1, 1, None)),
        (132, Entry::Cancelled { job: 6 }),
        (133, submit(7, 0, 1, None)),
    ]);
    record(&scratch.db(), rows);
    let csv = scratch.csv();
    let out = cotenant(&[
        "sim",
        "--trace",
        &format!("journal:{}", scratch.db()),
        "--policy",
        "fifo",
        "--jobs-csv",
        &csv,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(5 jobs, 3 tenants"), "{text}");
    for line in [
        "note: skipped 1 rows: cancelled before it started (0.00 GPU-hours)",
        "note: skipped 1 rows: still pending when the journal ends (0.00 GPU-hours)",
        "note: skipped 1 rows: still running when the journal ends (run time not known yet; GPU-hours up to its last row) (0.00 GPU-hours)",
        "note: 1 failed jobs kept with their run time until the failure",
    ] {
        assert!(text.contains(&format!("{line}\n")), "{line} not in {text}");
    }
    let works: Vec<(f64, f64)> = jobs_csv(&csv).iter().map(|r| (r.2, r.3)).collect();
    assert_eq!(works, [(0.0, 60.0), (10.0, 30.0), (15.0, 40.0), (101.0, 1.0), (110.0, 5.0)]);
}

#[test]
fn replay_check_passes_on_a_faithful_journal_and_names_a_tampered_row() {
    let scratch = Scratch::new("replay");
    record(&scratch.db(), three_jobs());
    let out = cotenant(&["replay-check", "--db", &scratch.db()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Commands: row 5 starts job 0, row 8 starts jobs 1 and 2.
    assert!(text.starts_with("replayed 10 journal entries in "), "{text}");
    assert!(text.contains("; compared 3 commands with the recorded ones\nok: "), "{text}");

    // A forged command beside row 6 (job 1 waits: the engine answered nothing).
    block_on(async {
        let db = Db::open(&scratch.db()).await.unwrap();
        db.record_commands(&[(6, vec!["Start { job: JobId(1), gpus: [GpuId(0)] }".into()])]).await.unwrap();
        db.close().await;
    });
    let out = cotenant(&["replay-check", "--db", &scratch.db()]);
    assert!(!out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("mismatch: seq 6 command 0: recorded Start { job: JobId(1), gpus: [GpuId(0)] }, replay gave (none)\n"),
        "{text}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("1 of 4 commands differ from the recorded ones, the first at journal row 6"),
        "{err}"
    );
}

#[test]
fn a_missing_database_is_an_error_and_is_not_created() {
    let scratch = Scratch::new("missing");
    for args in [
        vec![
            "sim".to_string(),
            "--trace".into(),
            format!("journal:{}", scratch.db()),
            "--policy".into(),
            "fifo".into(),
        ],
        vec!["replay-check".into(), "--db".into(), scratch.db()],
    ] {
        let out = cotenant(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(&format!("database {}: no such file", scratch.db())), "{err}");
        assert!(!std::path::Path::new(&scratch.db()).exists());
    }
}
