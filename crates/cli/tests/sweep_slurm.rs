//! `cotenant sweep --emit slurm` on a real Slurm: the emitted job array runs through
//! `sbatch`, and `--merge` assembles the same bytes as a local run. Needs a Slurm whose
//! `sinfo` answers with a usable node (scripts/slurm-local.sh starts one on this host,
//! as .ci/run does); without one the test prints why it is skipped and passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::{cotenant, stderr, stdout, temp_dir};

/// Why Slurm cannot run jobs here, or None when it can.
fn slurm_unavailable() -> Option<String> {
    let out = match Command::new("sinfo").args(["-h", "-o", "%T"]).output() {
        Ok(out) => out,
        Err(e) => {
            return Some(format!("sinfo cannot run ({e}); scripts/slurm-local.sh installs and starts Slurm"))
        }
    };
    if !out.status.success() {
        return Some(format!("sinfo failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let states = String::from_utf8_lossy(&out.stdout).into_owned();
    if !states.lines().any(|s| matches!(s.trim(), "idle" | "mixed" | "allocated" | "completing")) {
        return Some(format!("no Slurm node is up (sinfo states: {:?})", states.trim()));
    }
    None
}

#[test]
fn an_emitted_job_array_runs_on_slurm_and_merges_into_the_local_runs_bytes() {
    if let Some(reason) = slurm_unavailable() {
        println!("skipped: {reason}");
        eprintln!("sweep_slurm: skipped: {reason}");
        return;
    }
    let dir = temp_dir("sweep-slurm");
    let (local, array) = (dir.join("local"), dir.join("array"));
    let _ = std::fs::remove_dir_all(&array);
    let grid = [
        "sweep",
        "--synthetic",
        "jobs=150,rate=20/h,tenants=3",
        "--cluster",
        "nodes=6,gpus-per-node=8",
        "--policy",
        "fifo,srtf,las",
        "--load",
        "0.8,1.25",
        "--seeds",
        "0..2",
    ];
    let out = cotenant(&[&grid[..], &["--out", local.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));

    // 12 cells in chunks of 5: three array tasks, the last one short.
    let out = cotenant(&[&grid[..], &["--emit", "slurm", array.to_str().unwrap(), "--chunk", "5"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("3 array task(s) of up to 5 cell(s) each, 12 cells in all"),
        "{}",
        stdout(&out)
    );
    let script = array.join("sweep.sbatch");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("#SBATCH --array=0-2"), "{text}");

    let early = cotenant(&["sweep", "--merge", array.to_str().unwrap()]);
    assert!(!early.status.success());
    assert!(stderr(&early).contains("12 of 12 cells are not finished: 0..12"), "{}", stderr(&early));

    // --wait: sbatch returns when every array task has ended, non-zero if one failed.
    let submitted = Command::new("timeout")
        .args(["120", "sbatch", "--parsable", "--wait", script.to_str().unwrap()])
        .output()
        .expect("sbatch runs");
    let logs: String = std::fs::read_dir(array.join("slurm"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    assert!(
        submitted.status.success(),
        "sbatch --wait failed ({}): {}\n{}\ntask logs:\n{logs}",
        submitted.status,
        String::from_utf8_lossy(&submitted.stdout),
        String::from_utf8_lossy(&submitted.stderr)
    );
    for part in ["cells 0..5", "cells 5..10", "cells 10..12"] {
        assert!(logs.contains(&format!("of {part}")), "no task ran {part}:\n{logs}");
    }

    let merged = cotenant(&["sweep", "--merge", array.to_str().unwrap()]);
    assert!(merged.status.success(), "{}", stderr(&merged));
    for name in ["results.csv", "results.json"] {
        assert_eq!(
            std::fs::read(local.join(name)).unwrap(),
            std::fs::read(array.join(name)).unwrap(),
            "{name}: Slurm parts merged differ from the local run"
        );
    }
}
