//! The bundled Gavel physical-cluster traces (10-column form, gzip).

mod common;

use cotenant_trace::{bundled_data_dir, read_trace, Slice, TraceKind, BUNDLED_GAVEL_PHYSICAL};

#[test]
fn every_bundled_physical_cluster_trace_reads() {
    let dir = bundled_data_dir().join(BUNDLED_GAVEL_PHYSICAL);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 8);
    let mut total = 0;
    for path in files {
        let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).unwrap_or_else(|e| panic!("{e}"));
        common::check_invariants(&w);
        assert!((8..=100).contains(&w.jobs.len()), "{}: {}", path.display(), w.jobs.len());
        assert!(w.jobs.iter().all(|j| j.job_type.is_some() && j.work >= 1.0));
        total += w.jobs.len();
    }
    assert!(total > 0);
}
