//! Test helpers: fixture files written into a fresh temporary folder.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A temporary folder removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cotenant-trace-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` (gzip-compressed when `name` ends in `.gz`).
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        if name.ends_with(".gz") {
            let file = std::fs::File::create(&path).expect("create fixture");
            let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            gz.write_all(contents.as_bytes()).expect("write fixture");
            gz.finish().expect("finish gzip");
        } else {
            std::fs::write(&path, contents).expect("write fixture");
        }
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Asserts an error message names the file, the line and the field.
pub fn assert_names(message: &str, file: &str, line: u64, field: &str) {
    let want = format!("{file} line {line}, field {field}:");
    assert!(message.contains(&want), "error {message:?} should contain {want:?}");
}

/// Checks the `Workload` invariants.
pub fn check_invariants(w: &cotenant_trace::Workload) {
    assert_eq!(w.jobs.len(), w.lines.len());
    for (i, job) in w.jobs.iter().enumerate() {
        assert_eq!(job.id.0 as usize, i);
        assert!((job.tenant.0 as usize) < w.tenants.len());
        if let Some(t) = job.job_type {
            assert!((t as usize) < w.job_types.len());
        }
        if i > 0 {
            let prev = &w.jobs[i - 1];
            assert!(prev.arrival <= job.arrival);
            if prev.arrival == job.arrival && w.lines[i] != 0 {
                assert!(w.lines[i - 1] < w.lines[i], "ties keep file order");
            }
        }
    }
}
