//! The readers on the real traces in the shared collection, when it is present
//! (`COTENANT_TRACES` or ../shared/traces). A fresh clone without it skips
//! these checks with a message; the fixtures in the other tests still run.

mod common;

use std::path::PathBuf;

use common::check_invariants;
use cotenant_trace::{
    read_openb_nodes, read_trace, traces_dir, Slice, TraceKind, SKIP_CPU_NODE, SKIP_CPU_ONLY,
};

fn shared(relative: &str) -> Option<PathBuf> {
    let path = traces_dir(None).join(relative);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipping: {} not found (set COTENANT_TRACES to the trace collection)", path.display());
        None
    }
}

fn count(kind: TraceKind, relative: &str) -> Option<usize> {
    let path = shared(relative)?;
    let w = read_trace(kind, &path, &Slice::all()).unwrap_or_else(|e| panic!("{e}"));
    check_invariants(&w);
    Some(w.jobs.len())
}

#[test]
fn itp_clusters() {
    assert!(matches!(count(TraceKind::Itp, "elasticflow-itp-2021/cluster10.csv"), Some(260) | None));
    assert!(matches!(count(TraceKind::Itp, "elasticflow-itp-2021/cluster01.csv"), Some(1595) | None));
}

#[test]
fn gavel_msr_seed0_has_15264_jobs() {
    let Some(dir) = shared("gavel/msr/seed=0") else { return };
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).unwrap_or_else(|e| panic!("{e}"));
        check_invariants(&w);
        assert!(w.jobs.len() <= 2000);
        total += w.jobs.len();
    }
    assert_eq!(total, 15_264);
}

#[test]
fn pollux_and_tiresias() {
    for n in 1..=8 {
        let file = format!("pollux/workloads/workload-{n}.csv");
        assert!(matches!(count(TraceKind::Pollux, &file), Some(160) | None), "{file}");
    }
    assert!(matches!(count(TraceKind::Tiresias, "tiresias/60_job.csv"), Some(60) | None));
}

#[test]
fn openb_default_pods_and_nodes() {
    if let Some(path) = shared("alibaba-gpu-2023-openb/openb_pod_list_default.csv") {
        let w = read_trace(TraceKind::Openb, &path, &Slice::all()).unwrap_or_else(|e| panic!("{e}"));
        check_invariants(&w);
        assert_eq!(w.jobs.len(), 6203);
        let skipped: u64 = w.skipped.iter().map(|s| s.rows).sum();
        assert_eq!(skipped, 8152 - 6203);
        assert!(w.skipped.iter().any(|s| s.reason == SKIP_CPU_ONLY && s.rows == 1088));
        assert!(w.notes.iter().any(|n| n.contains("2573 fractional-GPU pods")), "{:?}", w.notes);
    }
    if let Some(path) = shared("alibaba-gpu-2023-openb/openb_node_list_all_node.csv") {
        let (cluster, skipped) = read_openb_nodes(&path).unwrap();
        assert_eq!((cluster.nodes.len(), cluster.total_gpus()), (1213, 6212));
        assert_eq!(skipped[0].reason, SKIP_CPU_NODE);
        assert_eq!(skipped[0].rows, 310);
    }
    if let Some(path) = shared("alibaba-gpu-2023-openb/openb_pod_list_multigpu20.csv") {
        assert!(read_trace(TraceKind::Openb, &path, &Slice::all()).is_err());
    }
}

/// The request readers, rewritten for issue 7 (line numbers, limits, skips), read the
/// real traces unchanged: every row kept, nothing skipped.
#[test]
fn request_traces_read_unchanged() {
    use cotenant_trace::requests::{read_azure_csv, read_mooncake_jsonl};
    let data = cotenant_trace::bundled_data_dir();
    for (file, rows) in
        [(cotenant_trace::BUNDLED_AZURE_CODE, 8_819), (cotenant_trace::BUNDLED_AZURE_CONV, 19_366)]
    {
        let trace = read_azure_csv(&data.join(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((trace.records.len(), trace.skipped.len()), (rows, 0), "{file}");
        assert_eq!(trace.records[0].arrival_us, 0);
    }
    if let Some(path) = shared("mooncake-2024/conversation_trace.jsonl") {
        let trace = read_mooncake_jsonl(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((trace.records.len(), trace.skipped.len()), (12_031, 0));
    }
}
