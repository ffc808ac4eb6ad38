//! Every fuzz target, a few thousand deterministic executions each, so that
//! `cargo test --workspace` exercises the harness and the oracle quickly.

use std::time::Duration;

use cotenant_fuzz::{escape, quiet_panics, run_target, targets, Config};

#[test]
fn every_target_runs_clean_for_2000_execs() {
    quiet_panics();
    let config = Config {
        seed: 7,
        time_per_target: Duration::from_secs(60),
        max_execs: 2_000,
        call_timeout: Duration::from_secs(10),
        save_current: None,
    };
    let all = targets(&cotenant_trace::bundled_data_dir());
    assert_eq!(all.len(), 20);
    let mut failures = Vec::new();
    for target in &all {
        assert!(!target.seeds.is_empty(), "{} has no seeds", target.name);
        let report = run_target(target, &config);
        assert_eq!(report.execs, 2_000, "{}", target.name);
        assert!(report.distinct_errors > 0, "{}: the mutator never produced an error", target.name);
        for f in &report.findings {
            failures.push(format!("{} {:?}: {}\n  {}", f.target, f.kind, f.detail, escape(&f.input)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let config = Config {
        seed: 3,
        time_per_target: Duration::from_secs(60),
        max_execs: 300,
        call_timeout: Duration::from_secs(10),
        save_current: None,
    };
    let all = targets(&cotenant_trace::bundled_data_dir());
    let philly = all.iter().find(|t| t.name == "philly").expect("philly target");
    let (a, b) = (run_target(philly, &config), run_target(philly, &config));
    assert_eq!((a.ok, a.distinct_errors), (b.ok, b.distinct_errors));
}

#[test]
fn oracle_helpers() {
    use cotenant_fuzz::{named_line, physical_lines, repeated_segment};
    assert_eq!(
        repeated_segment("f.gz: incomplete deflate stream: incomplete deflate stream").as_deref(),
        Some("incomplete deflate stream")
    );
    assert_eq!(repeated_segment("t.toml: TOML parse error\n x: x: x"), None);
    assert_eq!(named_line("/tmp/p.csv line 17, field x: y", "p.csv"), Some(17));
    assert_eq!(named_line("p.csv: empty file", "p.csv"), None);
    assert_eq!(physical_lines(b"a\n\nb"), 3);
}
