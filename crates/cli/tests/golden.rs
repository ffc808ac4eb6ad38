//! The default run, byte for byte: `cotenant sim --json` (one week of Philly under the
//! five baseline policies) must print exactly the stored summary, and its per-job CSV
//! must hash to the stored digest. A speed change must not change a single result; a
//! change that is meant to alter results regenerates both on purpose:
//!
//! ```sh
//! COTENANT_BLESS=1 cargo test -p cotenant-cli --test golden
//! ```
//!
//! and says in its commit message why the numbers moved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, temp_dir};

const STORED_JSON: &str = "tests/data/default-run.json";
const STORED_CSV_DIGEST: &str = "tests/data/default-run.csv.fnv";

/// FNV-1a (64 bits) of the bytes and their line count: enough to tell any change in a
/// 3.8 MB file without storing it.
fn digest(bytes: &[u8]) -> String {
    let hash = bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    format!("fnv1a64 {hash:016x} lines {lines} bytes {}\n", bytes.len())
}

#[test]
fn default_run_matches_the_stored_copy_byte_for_byte() {
    let dir = temp_dir("golden");
    let csv = dir.join("jobs.csv");
    let out = cotenant(&["sim", "--json", "--jobs-csv", csv.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let csv_digest = digest(&std::fs::read(&csv).unwrap());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The summary names the bundled trace by its absolute path: store it relative to
    // the checkout, so that any clone compares alike.
    let checkout = root.parent().and_then(|p| p.parent()).unwrap().to_str().unwrap();
    let json = String::from_utf8(out.stdout).unwrap().replace(checkout, "<checkout>");
    if std::env::var_os("COTENANT_BLESS").is_some() {
        std::fs::write(root.join(STORED_JSON), &json).unwrap();
        std::fs::write(root.join(STORED_CSV_DIGEST), &csv_digest).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(root.join(STORED_JSON)).unwrap();
    if json != stored {
        let (got, want) = (&json, &stored);
        let first = got.lines().zip(want.lines()).position(|(a, b)| a != b);
        panic!(
            "the default run's JSON differs from {STORED_JSON} (first differing line: {}); \
             rerun with COTENANT_BLESS=1 only if the change is intended",
            first.map_or("one is a prefix of the other".to_string(), |i| format!(
                "{}: got `{}`, stored `{}`",
                i + 1,
                got.lines().nth(i).unwrap_or(""),
                want.lines().nth(i).unwrap_or("")
            ))
        );
    }
    let stored_digest = std::fs::read_to_string(root.join(STORED_CSV_DIGEST)).unwrap();
    assert_eq!(csv_digest, stored_digest, "the default run's per-job CSV changed");
}

#[test]
fn the_digest_tells_one_changed_byte() {
    assert_ne!(digest(b"a,b\n1,2\n"), digest(b"a,b\n1,3\n"));
    assert_eq!(digest(b"x\ny\n"), digest(b"x\ny\n"));
}
