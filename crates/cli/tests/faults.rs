//! `cotenant sim --failures/--spot/--availability` (docs/faults.md): the fault
//! section appears only when on, runs are deterministic, and bad input names the
//! flag and the field (exit status 1, no panic).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

fn sim(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "sim",
        "--synthetic",
        "jobs=40,seed=3,elastic=1",
        "--cluster",
        "nodes=8,gpus-per-node=8",
        "--policy",
        "fifo,varuna(fifo)",
        "--checkpoint-interval",
        "30m",
    ];
    args.extend_from_slice(extra);
    cotenant(&args)
}

#[test]
fn the_fault_section_appears_only_when_on_and_is_deterministic() {
    let plain = sim(&["--json"]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let json: serde_json::Value = serde_json::from_str(&stdout(&plain)).unwrap();
    assert!(json.get("faults").is_none());
    let flags = [
        "--json",
        "--failures",
        "mtbf=100h,repair=4h,seed=5",
        "--spot",
        "fraction=0.5,reclaim=6h,notice=30s",
    ];
    let on = sim(&flags);
    assert!(on.status.success(), "{}", stderr(&on));
    let json: serde_json::Value = serde_json::from_str(&stdout(&on)).unwrap();
    let rows = json["faults"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["policy"], "varuna(fifo)");
    // The plan does not depend on the policy.
    assert_eq!(rows[0]["reclaims"], rows[1]["reclaims"]);
    assert!(rows[0]["reclaims"].as_u64().unwrap() > 0);
    for row in rows {
        let cost = row["cost_usd"].as_f64().unwrap();
        assert!(cost > 0.0 && cost < row["all_on_demand_cost_usd"].as_f64().unwrap());
    }
    assert_eq!(stdout(&sim(&flags)), stdout(&on), "same seed, same bytes");
    let table = sim(&flags[1..]);
    assert!(stdout(&table).contains("Faults (docs/faults.md):"));
    assert!(!stdout(&sim(&[])).contains("Faults"));
}

#[test]
fn an_availability_file_takes_nodes_away_on_schedule() {
    let dir = temp_dir("faults-availability");
    let path = dir.join("windows.txt");
    std::fs::write(&path, "# node leaves returns\n0 1h 3h\n1 2h\n").unwrap();
    let out = sim(&["--json", "--availability", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["faults"][0]["departures"], 2);
}

#[test]
fn bad_input_names_the_flag_and_the_field() {
    let dir = temp_dir("faults-bad");
    let bad_file = dir.join("bad.txt");
    std::fs::write(&bad_file, "0 1h 3h\nnode-x 2h\n").unwrap();
    let late = dir.join("late.txt");
    std::fs::write(&late, "0 3h 1h\n").unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["--failures", "mtbf=abc,repair=4h"], "--failures: mtbf: 'abc' is not a duration".into()),
        (vec!["--failures", "repair=4h"], "--failures: missing key 'mtbf'".into()),
        (vec!["--failures", "mtbf=0s,repair=4h"], "--failures: mtbf=0s: must be more than zero".into()),
        (vec!["--failures", "mtbf=10h,repair=4h,seed=x"], "--failures: seed=x".into()),
        (vec!["--spot", "fraction=2,reclaim=6h,notice=30s"], "--spot: fraction=2".into()),
        (vec!["--spot", "fraction=0.5,reclaim=6h,notice=30s,bogus=1"], "--spot: unknown key 'bogus'".into()),
        (vec!["--spot", "fraction=0.5,notice=30s"], "--spot: missing key 'reclaim'".into()),
        (vec!["--spot", "fraction=0.5,nodes=2,reclaim=6h,notice=30s"], "--spot: give one of".into()),
        (vec!["--availability", bad_file.to_str().unwrap()], format!("{}:2: NODE", bad_file.display())),
        (vec!["--availability", late.to_str().unwrap()], format!("{}:1: RETURNS", late.display())),
        (
            vec!["--availability", "/nonexistent/windows.txt"],
            "--availability /nonexistent/windows.txt".into(),
        ),
    ];
    let out = cotenant(&["sim", "--synthetic", "jobs=5", "--policy", "varuna(tiresias)"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("policy 'varuna(tiresias)' needs a base policy that reads"),
        "{}",
        stderr(&out)
    );
    for (flags, expected) in cases {
        let out = sim(&flags);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&expected), "{flags:?}: expected '{expected}' in {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}
