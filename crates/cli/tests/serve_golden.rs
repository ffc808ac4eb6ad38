//! serve-sim and `plan serve` output, byte for byte: each case below must print exactly
//! its stored copy in `tests/data/serve/` (text tables and `--json`, every scheduler,
//! service windows, attribution, goodput, plans). The copies were written by the binary
//! before serving output moved into the report crate, so this test is what says the
//! move changed nothing. A change meant to alter results regenerates them on purpose:
//!
//! ```sh
//! COTENANT_BLESS=1 cargo test -p cotenant-cli --test serve_golden
//! ```
//!
//! and says in its commit message why the numbers moved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr};

/// (stored file, arguments). Small workloads, so the test runs in seconds; the JSON
/// cases leave out `--bench` and `--goodput`, whose wall times differ between runs.
const CASES: &[(&str, &str)] = &[
    ("all-schedulers-windows.txt", "serve-sim --scheduler all --limit 400 --windows --window-s 5"),
    ("all-schedulers.json", "serve-sim --scheduler all --limit 400 --json"),
    ("attribution.txt", "serve-sim --limit 300 --attribution-eval 5 --attribution-misfit 0.2"),
    ("attribution.json", "serve-sim --limit 300 --attribution-eval 5 --json"),
    (
        "synthetic-backlogged.json",
        "serve-sim --trace synthetic --tenant name=a,rate=40 --tenant name=b,rate=5,weight=2 --duration-s 60 \
         --scheduler vtc,fcfs,fairserve --windows --window-s 5 --max-seqs 16 --json",
    ),
    ("weights.txt", "serve-sim --limit 500 --weight conv=2 --scheduler vtc --rate-scale 2"),
    ("goodput.txt", "serve-sim --limit 300 --goodput"),
    ("plan.txt", "plan serve --limit 400"),
    ("plan.json", "plan serve --limit 400 --json"),
];

#[test]
fn serve_outputs_match_the_stored_copies_byte_for_byte() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/serve");
    let bless = std::env::var_os("COTENANT_BLESS").is_some();
    let mut differing = Vec::new();
    for (file, args) in CASES {
        let args: Vec<&str> = args.split_whitespace().collect();
        let out = cotenant(&args);
        assert!(out.status.success(), "cotenant {}: {}", args.join(" "), stderr(&out));
        let got = String::from_utf8(out.stdout).unwrap();
        if bless {
            std::fs::write(dir.join(file), &got).unwrap();
            continue;
        }
        let stored = std::fs::read_to_string(dir.join(file)).unwrap();
        if got != stored {
            let first = got.lines().zip(stored.lines()).position(|(a, b)| a != b);
            differing.push(format!(
                "{file} (cotenant {}): {}",
                args.join(" "),
                first.map_or("one is a prefix of the other".to_string(), |i| format!(
                    "line {}: got `{}`, stored `{}`",
                    i + 1,
                    got.lines().nth(i).unwrap_or(""),
                    stored.lines().nth(i).unwrap_or("")
                ))
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "serving output differs from tests/data/serve (rerun with COTENANT_BLESS=1 only if the change is \
         intended):\n{}",
        differing.join("\n")
    );
}
