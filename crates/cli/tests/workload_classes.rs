//! `--synthetic ...,classes=...` from the command line: `sim` runs a mix of every
//! workload class end to end, deterministically, with one note per class in its
//! summary; `analyze` shows the same notes; bad class keys exit 1 naming the key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout};

const MIX: &str = "jobs=120,rate=6/h,seed=3,classes=llm-pretrain:2,rlhf:3,elastic:3,inference:1,hpc-dpd:1,hpc-snn:1,hpc-lqcd:1,mcl:1,etl:5";
const CLUSTER: &str = "nodes=300,gpus-per-node=8";

/// The text without each policy row's last column (`wall`, the run's own time).
fn without_wall(text: &str) -> String {
    let row = |l: &str| l.starts_with("fifo ") || l.starts_with("elastic-tiresias ");
    let lines = text.lines().map(|l| if row(l) { l.rsplit_once(' ').map_or(l, |(head, _)| head) } else { l });
    lines.collect::<Vec<_>>().join("\n")
}

#[test]
fn a_mix_of_every_class_simulates_end_to_end() {
    let args = ["sim", "--synthetic", MIX, "--cluster", CLUSTER, "--policy", "fifo,elastic-tiresias"];
    let first = cotenant(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    let text = stdout(&first);
    assert_eq!(without_wall(&text), without_wall(&stdout(&cotenant(&args))), "same spec, same results");
    assert!(text.contains("fifo              120/120"), "{text}");
    assert!(text.contains("elastic-tiresias  120/120"), "{text}");
    // One note per class, in the mix's order, whose counts add up to the jobs.
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note: class ")).collect();
    let names: Vec<&str> =
        notes.iter().map(|l| l["note: class ".len()..].split(':').next().unwrap()).collect();
    assert_eq!(
        names,
        ["llm-pretrain", "rlhf", "elastic", "inference", "hpc-dpd", "hpc-snn", "hpc-lqcd", "mcl", "etl"]
    );
    let jobs: usize = notes
        .iter()
        .map(|l| l.split(": ").nth(2).unwrap().split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(jobs, 120);
    // The JSON summary carries the same notes.
    let json = cotenant(&["sim", "--synthetic", MIX, "--cluster", CLUSTER, "--policy", "fifo", "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(stdout(&json).contains("\"class llm-pretrain: "), "{}", stdout(&json));
}

#[test]
fn analyze_shows_the_per_class_notes_and_plain_specs_show_none() {
    let out = cotenant(&["analyze", "--synthetic", MIX]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("  note: class mcl: "), "{}", stdout(&out));
    let plain = cotenant(&["analyze", "--synthetic", "jobs=120,rate=6/h,seed=3"]);
    assert!(plain.status.success() && !stdout(&plain).contains("note: class"), "{}", stdout(&plain));
}

#[test]
fn bad_class_keys_exit_1_naming_the_key_and_the_known_classes() {
    let out = cotenant(&["sim", "--synthetic", "jobs=10,classes=llm:2,rlhf", "--cluster", CLUSTER]);
    assert_eq!(out.status.code(), Some(1));
    let want = "synthetic spec, key `classes`: unknown workload class \"llm\" (known: llm-pretrain, rlhf, elastic, inference, hpc-dpd, hpc-snn, hpc-lqcd, mcl, etl)";
    assert!(stderr(&out).contains(want), "{}", stderr(&out));
    let out = cotenant(&["sim", "--synthetic", "jobs=10,class=etl,gpus=4", "--cluster", CLUSTER]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("key `gpus`: workload classes set each job's GPUs"), "{}", stderr(&out));
}
