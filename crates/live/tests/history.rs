//! The journal read back: hand-computed arrivals and run times, attempts summed
//! over a requeue, every skip reason counted, the record/replay check on a
//! faithful and a tampered journal, and errors that name the database and row.
//!
//! Journals are written without a server: `history::record` appends each record
//! and the commands a `Live` answered, as the controller does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use cotenant_live::api::{JobStatus, SubmitRequest};
use cotenant_live::history::{self, HistoryError};
use cotenant_live::journal::{Db, Entry, Record};
use cotenant_live::setup::{parse_nodes, ServerSetup};

/// Unix µs of engine time zero in every journal here.
const EPOCH_US: u64 = 1_764_600_000_000_000;

/// A SQLite file under the temp dir, unique per test, removed (with its WAL) on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> TempDb {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("cotenant-history-{}-{call}-{name}.db", std::process::id()));
        let db = TempDb(path);
        db.remove();
        db
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.remove();
    }
}

fn setup(nodes: &str) -> ServerSetup {
    ServerSetup {
        nodes: parse_nodes(nodes).unwrap(),
        policy: "fifo".into(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: 1,
    }
}

fn request(gpus: u32, estimate_secs: Option<f64>) -> SubmitRequest {
    serde_json::from_value(serde_json::json!({
        "command": ["train"], "gpus": gpus, "estimate_secs": estimate_secs
    }))
    .unwrap()
}

/// Records at whole seconds after the epoch, numbered from 1.
#[derive(Default)]
struct Journal(Vec<Record>);

impl Journal {
    fn at(&mut self, secs: u64, entry: Entry) -> u64 {
        let seq = self.0.len() as u64 + 1;
        self.0.push(Record { seq, at_us: EPOCH_US + secs * 1_000_000, entry });
        seq
    }
    fn tenant(&mut self, secs: u64, tenant: u32, name: &str, weight: f64) {
        let entry = Entry::TenantAdded {
            tenant,
            name: name.into(),
            weight,
            quota: BTreeMap::new(),
            gpu_limit: None,
            unix_user: None,
        };
        self.at(secs, entry);
    }
    fn join(&mut self, secs: u64, node: u32) -> u64 {
        self.at(secs, Entry::NodeJoined { node, name: format!("host-{node}"), gpu_uuids: Vec::new() })
    }
    fn submit(&mut self, secs: u64, job: u32, tenant: u32, gpus: u32, estimate: Option<f64>) -> u64 {
        self.at(secs, Entry::Submitted { job, tenant, request: request(gpus, estimate) })
    }
    fn exit(&mut self, secs: u64, job: u32, attempt: u32, code: i32) {
        self.at(secs, Entry::Exited { job, attempt, code: Some(code), signal: None });
    }
}

/// The hand-computed case: one node of 2 GPUs, FIFO, three jobs.
///
/// | t (s) | row                                   | engine                       |
/// |-------|---------------------------------------|------------------------------|
/// | 0     | tenants alice (w 1), bob (w 2)         |                              |
/// | 1     | node 0 joins                          |                              |
/// | 10    | job 0: alice, 2 GPUs, estimate 100 s  | starts job 0 (both GPUs)     |
/// | 20    | job 1: bob, 1 GPU                     | waits                        |
/// | 25    | job 2: alice, 1 GPU                   | waits                        |
/// | 70    | job 0 exits 0                         | starts jobs 1 and 2          |
/// | 100   | job 1 exits 0                         |                              |
/// | 110   | job 2 exits 0                         |                              |
///
/// Arrivals (s after the first submission): 0, 10, 15. Run times: 60, 30, 40.
fn three_jobs() -> Journal {
    let mut j = Journal::default();
    j.tenant(0, 0, "alice", 1.0);
    j.tenant(0, 1, "bob", 2.0);
    j.join(1, 0);
    j.submit(10, 0, 0, 2, Some(100.0));
    j.submit(20, 1, 1, 1, None);
    j.submit(25, 2, 0, 1, None);
    j.exit(70, 0, 1, 0);
    j.exit(100, 1, 1, 0);
    j.exit(110, 2, 1, 0);
    j
}

#[tokio::test]
async fn three_jobs_give_hand_computed_arrivals_and_run_times() {
    let db = TempDb::new("three");
    history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &three_jobs().0).await.unwrap();
    let h = history::load(&db.path()).await.unwrap();
    assert_eq!(h.entries, 9);
    assert_eq!(h.first_submitted_us, Some(EPOCH_US + 10_000_000));
    let rows: Vec<(u32, &str, u64, u32, u64, u32)> = h
        .jobs
        .iter()
        .map(|j| (j.id, j.tenant_name.as_str(), j.arrival_us, j.gpus, j.run_us, j.attempts))
        .collect();
    assert_eq!(
        rows,
        [
            (0, "alice", 0, 2, 60_000_000, 1),
            (1, "bob", 10_000_000, 1, 30_000_000, 1),
            (2, "alice", 15_000_000, 1, 40_000_000, 1),
        ]
    );
    assert_eq!(h.jobs[0].estimate_secs, Some(100.0));
    assert_eq!(h.jobs[1].estimate_secs, None);
    assert!(h.jobs.iter().all(|j| j.status == JobStatus::Completed && j.exit_code == Some(0)));
    let tenants: Vec<(&str, f64)> = h.tenants.iter().map(|t| (t.name.as_str(), t.weight)).collect();
    assert_eq!(tenants, [("alice", 1.0), ("bob", 2.0)]);
    assert!(h.skipped.is_empty() && h.warnings.is_empty());
    assert_eq!((h.skipped_total(), h.failed_kept), (0, 0));
    assert_eq!(h.setup, setup("1x2xA100-80GB"));
}

/// Two 1-GPU nodes. Job 0 starts at 1 s on node 0, which is lost at 11 s (10 s
/// run, requeued); node 1 joins at 15 s and job 0 runs there until it exits at
/// 35 s (20 s): 30 s over 2 attempts. The 4 s it waited in between are not run time.
#[tokio::test]
async fn a_requeued_job_needs_the_sum_of_its_attempts() {
    let db = TempDb::new("requeue");
    let mut j = Journal::default();
    j.tenant(0, 0, "t", 1.0);
    j.join(0, 0);
    j.submit(1, 0, 0, 1, None);
    j.at(11, Entry::NodeLost { node: 0 });
    j.join(15, 1);
    j.exit(35, 0, 2, 0);
    history::record(&db.path(), &setup("2x1xA100-80GB"), EPOCH_US, &j.0).await.unwrap();
    let h = history::load(&db.path()).await.unwrap();
    assert_eq!(h.jobs.len(), 1);
    assert_eq!((h.jobs[0].run_us, h.jobs[0].attempts), (30_000_000, 2));
}

/// One node of 2 GPUs; every way a job can end other than completing.
///
/// | t (s) | row                                | outcome                                   |
/// |-------|------------------------------------|-------------------------------------------|
/// | 0     | job 0 (2 GPUs)                     | starts                                    |
/// | 1, 2  | job 1 (1 GPU), cancelled           | cancelled before it started               |
/// | 10    | job 0 exits 1                      | failed after 10 s: KEPT                   |
/// | 11    | jobs 2 and 3 (1 GPU each)          | both start                                |
/// | 21    | job 2 cancelled                    | cancelled after it ran (10 GPU-s)         |
/// | 31    | job 3 vanishes                     | lost (20 GPU-s)                           |
/// | 32-33 | job 4 (1 GPU), launch fails        | failed to launch                          |
/// | 40    | job 5 (2 GPUs)                     | still running at the end (to 42 s: 4 GPU-s)|
/// | 41    | job 6 (1 GPU)                      | still pending at the end                  |
/// | 42    | job 7 (3 GPUs: wider than the cluster) | the engine ends it: never ran         |
fn every_ending() -> Journal {
    let mut j = Journal::default();
    j.tenant(0, 0, "t", 1.0);
    j.join(0, 0);
    j.submit(0, 0, 0, 2, None);
    j.submit(1, 1, 0, 1, None);
    j.at(2, Entry::Cancelled { job: 1 });
    j.exit(10, 0, 1, 1);
    j.submit(11, 2, 0, 1, None);
    j.submit(11, 3, 0, 1, None);
    j.at(21, Entry::Cancelled { job: 2 });
    j.at(31, Entry::Vanished { job: 3, attempt: 1 });
    j.submit(32, 4, 0, 1, None);
    j.at(33, Entry::LaunchFailed { job: 4, attempt: 1, message: "no such program".into() });
    j.submit(40, 5, 0, 2, None);
    j.submit(41, 6, 0, 1, None);
    j.submit(42, 7, 0, 3, None);
    j
}

#[tokio::test]
async fn every_job_that_did_not_complete_is_kept_or_counted_with_its_reason() {
    let db = TempDb::new("endings");
    history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &every_ending().0).await.unwrap();
    let h = history::load(&db.path()).await.unwrap();
    // Only the failed job that ran is kept, with its run time until the failure.
    assert_eq!(h.jobs.len(), 1);
    let failed = &h.jobs[0];
    assert_eq!(
        (failed.id, failed.status, failed.exit_code, failed.run_us),
        (0, JobStatus::Failed, Some(1), 10_000_000)
    );
    assert_eq!(h.failed_kept, 1);
    let skipped: Vec<(&str, u64, f64)> =
        h.skipped.iter().map(|s| (s.reason, s.jobs, (s.gpu_hours * 3600.0 * 1e3).round() / 1e3)).collect();
    assert_eq!(
        skipped,
        [
            ("cancelled before it started", 1, 0.0),
            (
                "cancelled after it ran (its run time says when the user gave up, not the work it needed)",
                1,
                10.0
            ),
            ("lost (its process vanished without an exit status: run time unknown)", 1, 20.0),
            ("failed to launch (no process ran)", 1, 1.0),
            ("failed without running (ended by the engine before it started)", 1, 0.0),
            ("still pending when the journal ends", 1, 0.0),
            (
                "still running when the journal ends (run time not known yet; GPU-hours up to its last row)",
                1,
                4.0
            ),
        ]
    );
    assert_eq!(h.skipped_total(), 7);
}

#[tokio::test]
async fn a_faithful_journal_replays_to_the_recorded_commands_and_a_tampered_row_is_named() {
    let db = TempDb::new("replay");
    let journal = every_ending();
    history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &journal.0).await.unwrap();
    let report = history::replay_check(&db.path()).await.unwrap();
    let handle = Db::open(&db.path()).await.unwrap();
    let recorded = handle.read_commands().await.unwrap();
    let rows: usize = recorded.values().map(Vec::len).sum();
    assert!(report.ok(), "{:?}", report.mismatches);
    assert_eq!(report.entries, journal.0.len() as u64);
    assert_eq!(report.commands_compared, rows as u64);
    assert!(rows >= 8, "the journal should make the engine answer: {recorded:?}");

    // Row 8 (job 3 arrives at 11 s, one GPU free): the engine starts job 3.
    let (seq, original) = (8, recorded[&8][0].clone());
    assert!(original.starts_with("Start { job: JobId(3)"), "{original}");
    sqlx::query("UPDATE commands SET body = $1 WHERE seq = $2 AND idx = 0")
        .bind("Start { job: JobId(3), gpus: [GpuId(0)] }")
        .bind(seq as i64)
        .execute(handle.pool())
        .await
        .unwrap();
    handle.close().await;
    let report = history::replay_check(&db.path()).await.unwrap();
    assert!(!report.ok());
    assert_eq!(report.mismatch_count, 1);
    let m = &report.mismatches[0];
    assert_eq!((m.seq, m.index), (seq, 0));
    assert_eq!(m.expected.as_deref(), Some("Start { job: JobId(3), gpus: [GpuId(0)] }"));
    assert_eq!(m.got.as_deref(), Some(original.as_str()));
    assert!(m.to_string().starts_with("seq 8 command 0: recorded Start"), "{m}");
}

#[tokio::test]
async fn a_recorded_command_the_replay_does_not_issue_is_a_mismatch() {
    let db = TempDb::new("extra");
    history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &three_jobs().0).await.unwrap();
    let handle = Db::open(&db.path()).await.unwrap();
    handle.record_commands(&[(2, vec!["Wakeup".into()])]).await.unwrap();
    handle.close().await;
    let report = history::replay_check(&db.path()).await.unwrap();
    assert_eq!(report.mismatch_count, 1);
    let m = &report.mismatches[0];
    assert_eq!((m.seq, m.expected.as_deref(), m.got.as_deref()), (2, Some("Wakeup"), None));
}

async fn meta_only(db: &TempDb, setup_text: Option<&str>, epoch_text: Option<&str>) {
    let handle = Db::open(&db.path()).await.unwrap();
    if let Some(text) = setup_text {
        handle.meta_init("setup", text).await.unwrap();
    }
    if let Some(text) = epoch_text {
        handle.meta_init("epoch_us", text).await.unwrap();
    }
    handle.close().await;
}

fn load_error(result: Result<history::History, HistoryError>) -> String {
    result.expect_err("the database is bad").to_string()
}

#[tokio::test]
async fn missing_or_corrupt_meta_names_the_database_and_the_key() {
    let good = serde_json::to_string(&setup("1x2xA100-80GB")).unwrap();
    let cases = [
        (None, Some("0"), "meta 'setup': missing"),
        (Some("{not json"), Some("0"), "meta 'setup': not a server setup"),
        (Some(good.as_str()), None, "meta 'epoch_us': missing"),
        (
            Some(good.as_str()),
            Some("yesterday"),
            "meta 'epoch_us': 'yesterday' is not a count of microseconds",
        ),
    ];
    for (i, (setup_text, epoch_text, wanted)) in cases.into_iter().enumerate() {
        let db = TempDb::new(&format!("meta{i}"));
        meta_only(&db, setup_text, epoch_text).await;
        for message in [
            load_error(history::load(&db.path()).await),
            history::replay_check(&db.path()).await.expect_err("bad meta").to_string(),
        ] {
            assert!(message.starts_with(&format!("database {}: ", db.path())), "{message}");
            assert!(message.contains(wanted), "{message} lacks {wanted}");
        }
    }
}

#[tokio::test]
async fn a_corrupt_journal_row_names_the_database_and_the_row() {
    let db = TempDb::new("corrupt");
    history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &three_jobs().0).await.unwrap();
    let handle = Db::open(&db.path()).await.unwrap();
    sqlx::query(
        "INSERT INTO journal (seq, at_us, kind, body) VALUES (10, 0, 'exited', '{\"kind\":\"exploded\"}')",
    )
    .execute(handle.pool())
    .await
    .unwrap();
    handle.close().await;
    for message in [
        load_error(history::load(&db.path()).await),
        history::replay_check(&db.path()).await.expect_err("corrupt row").to_string(),
    ] {
        assert!(message.starts_with(&format!("database {}: journal row 10: ", db.path())), "{message}");
        assert!(message.contains("exploded"), "{message}");
    }
}

#[tokio::test]
async fn a_row_naming_what_the_journal_never_introduced_is_refused() {
    let cases: [(Entry, &str); 3] = [
        (
            Entry::Submitted { job: 0, tenant: 4, request: request(1, None) },
            "job 0 names tenant 4, which the journal never added",
        ),
        (Entry::Cancelled { job: 9 }, "cancelled names job 9, which the journal never submitted"),
        (Entry::NodeLost { node: 7 }, "node_lost names node 7; the setup declares 1"),
    ];
    for (i, (entry, wanted)) in cases.into_iter().enumerate() {
        let db = TempDb::new(&format!("refs{i}"));
        let mut j = Journal::default();
        j.tenant(0, 0, "t", 1.0);
        j.at(1, entry);
        history::record(&db.path(), &setup("1x2xA100-80GB"), EPOCH_US, &j.0).await.unwrap();
        let message = load_error(history::load(&db.path()).await);
        assert_eq!(message, format!("database {}: journal row 2: {wanted}", db.path()));
    }
}

#[tokio::test]
async fn a_missing_database_is_an_error_and_reading_does_not_create_it() {
    let db = TempDb::new("missing");
    let message = load_error(history::load(&db.path()).await);
    assert!(message.starts_with(&format!("database {}: no such file", db.path())), "{message}");
    assert!(history::replay_check(&db.path()).await.is_err());
    assert!(!db.0.exists());
}

/// One step of a random cluster's life, turned into a journal entry only if the
/// live server would accept it (`Live::check`), as the controller does.
#[derive(Clone, Debug)]
enum Op {
    Submit { tenant: u32, gpus: u32 },
    Exit { pick: usize, code: i32 },
    Cancel { pick: usize },
    Vanish { pick: usize },
    NodeLost { node: u32 },
    NodeJoined { node: u32 },
}

fn op() -> impl proptest::strategy::Strategy<Value = (u64, Op)> {
    use proptest::prelude::*;
    let op = prop_oneof![
        4 => (0..2u32, 1..=4u32).prop_map(|(tenant, gpus)| Op::Submit { tenant, gpus }),
        4 => (any::<usize>(), prop_oneof![3 => Just(0), 1 => Just(1)]).prop_map(|(pick, code)| Op::Exit { pick, code }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Vanish { pick }),
        1 => (0..2u32).prop_map(|node| Op::NodeLost { node }),
        2 => (0..2u32).prop_map(|node| Op::NodeJoined { node }),
    ];
    (0..5_000_000u64, op)
}

/// Builds a valid journal from `ops` on two 2-GPU nodes, returning it and the
/// `Live` that applied it.
fn random_journal(ops: &[(u64, Op)]) -> (Vec<Record>, cotenant_live::setup::Live) {
    let mut live = cotenant_live::setup::Live::new(setup("2x2xA100-80GB"), EPOCH_US).unwrap();
    let mut records = Vec::new();
    let mut at_us = EPOCH_US;
    let mut push = |live: &mut cotenant_live::setup::Live, at_us: u64, entry: Entry| {
        if live.check(&entry).is_ok() {
            let record = Record { seq: records.len() as u64 + 1, at_us, entry };
            live.apply(&record);
            records.push(record);
        }
    };
    for name in ["a", "b"] {
        let tenant = live.tenants().len() as u32;
        let entry = Entry::TenantAdded {
            tenant,
            name: name.into(),
            weight: 1.0 + f64::from(tenant),
            quota: BTreeMap::new(),
            gpu_limit: None,
            unix_user: None,
        };
        push(&mut live, at_us, entry);
    }
    for (step_us, op) in ops {
        at_us += step_us;
        let running: Vec<(u32, u32)> = live
            .jobs()
            .iter()
            .filter(|j| j.status == JobStatus::Running)
            .map(|j| (j.id, j.attempt))
            .collect();
        let pick = |i: usize| running.get(i % running.len().max(1)).copied();
        let entry = match *op {
            Op::Submit { tenant, gpus } => {
                Some(Entry::Submitted { job: live.jobs().len() as u32, tenant, request: request(gpus, None) })
            }
            Op::Exit { pick: i, code } => {
                pick(i).map(|(job, attempt)| Entry::Exited { job, attempt, code: Some(code), signal: None })
            }
            Op::Cancel { pick: i } => {
                (!live.jobs().is_empty()).then(|| Entry::Cancelled { job: (i % live.jobs().len()) as u32 })
            }
            Op::Vanish { pick: i } => pick(i).map(|(job, attempt)| Entry::Vanished { job, attempt }),
            Op::NodeLost { node } => live.nodes()[node as usize].up.then_some(Entry::NodeLost { node }),
            Op::NodeJoined { node } => (!live.nodes()[node as usize].up).then(|| Entry::NodeJoined {
                node,
                name: format!("host-{node}"),
                gpu_uuids: Vec::new(),
            }),
        };
        if let Some(entry) = entry {
            push(&mut live, at_us, entry);
        }
    }
    (records, live)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// On any journal the controller could write: every submission is kept or
    /// counted as skipped; a kept job's run time times its GPUs is the GPU time
    /// `Live` accounts for it (an independent sum over its attempts); arrivals are
    /// sorted from 0; and the replay reproduces every recorded command.
    #[test]
    fn any_valid_journal_accounts_for_every_job_and_replays_exactly(ops in proptest::collection::vec(op(), 1..60)) {
        let (records, live) = random_journal(&ops);
        let db = TempDb::new("prop");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (h, report) = runtime.block_on(async {
            history::record(&db.path(), &setup("2x2xA100-80GB"), EPOCH_US, &records).await.unwrap();
            (history::load(&db.path()).await.unwrap(), history::replay_check(&db.path()).await.unwrap())
        });
        let submitted = live.jobs().len() as u64;
        proptest::prop_assert_eq!(h.jobs.len() as u64 + h.skipped_total(), submitted);
        for job in &h.jobs {
            proptest::prop_assert_eq!(job.run_us * u64::from(job.gpus), live.gpu_us(job.id, live.last_at_us()));
            let status = live.job(job.id).unwrap().status;
            proptest::prop_assert!(status == JobStatus::Completed || status == JobStatus::Failed);
        }
        proptest::prop_assert!(h.jobs.windows(2).all(|w| w[0].arrival_us <= w[1].arrival_us));
        proptest::prop_assert!(h.jobs.first().is_none_or(|j| j.arrival_us == 0) || h.skipped_total() > 0);
        proptest::prop_assert!(h.warnings.is_empty(), "{:?}", h.warnings);
        proptest::prop_assert!(report.ok(), "{:?}", report.mismatches);
        proptest::prop_assert_eq!(report.entries, records.len() as u64);
    }
}
