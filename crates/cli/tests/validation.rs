//! "Never a silently wrong answer" (issue 7): every flag of `serve-sim` and `plan serve`
//! is range-checked and documented, configs with unknown keys or impossible sizes are
//! refused with the file, line and a suggestion, and `--help` says what cotenant is.
//! Each case fails non-zero with a message naming the flag (or key), the value and the
//! allowed range.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};

/// Runs and expects failure with every `wanted` fragment in stderr.
fn fails_with(args: &[&str], wanted: &[&str]) {
    let out = cotenant(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
    for w in wanted {
        assert!(err.contains(w), "{args:?}: expected {w:?} in:\n{err}");
    }
}

/// A small, fast synthetic serving workload (about 120 requests over 60 s).
const SMALL: [&str; 6] = ["--trace", "synthetic", "--tenant", "name=a,rate=2", "--duration-s", "60"];

fn serve_sim(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["serve-sim".into()];
    args.extend(SMALL.iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn fails(args: Vec<String>, wanted: &[&str]) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, wanted);
}

#[test]
fn serve_sim_rejects_out_of_range_numbers_at_parse_time() {
    let cases: [(&str, &str, &str); 13] = [
        ("--rate-scale", "nan", "must be a finite number in (0, 1000000]"),
        ("--rate-scale", "0", "must be a finite number in (0, 1000000]"),
        ("--window-s", "0", "must be a finite number in [0.001, 31622400]"),
        ("--slo-ttft-ms", "nan", "must be a finite number in (0, 86400000]"),
        ("--slo-tbt-ms", "0", "must be a finite number in (0, 86400000]"),
        ("--memory-utilization", "2", "must be a finite number in (0, 1]"),
        ("--token-budget", "0", "must be an integer in [1, 2097152]"),
        ("--max-seqs", "0", "must be an integer in [1, 65536]"),
        ("--shapley-permutations", "0", "must be an integer in [1, 65536]"),
        ("--duration-s", "inf", "must be a finite number in (0, 31622400]"),
        ("--replicas", "0", "must be an integer in [1, 4096]"),
        ("--eta-compute", "1.5", "must be a finite number in (0, 1]"),
        ("--attribution-misfit", "nan", "must be a finite number in [-0.9, 0.9]"),
    ];
    for (flag, value, range) in cases {
        fails_with(&["serve-sim", flag, value], &[&format!("invalid value '{value}' for '{flag}"), range]);
    }
    fails_with(&["serve-sim", "--slo-tbt-ms=-1"], &["invalid value '-1' for '--slo-tbt-ms", "(0, 86400000]"]);
    fails_with(&["serve-sim", "--attribution-eval", "0"], &["'--attribution-eval <N>'", "[1, "]);
    fails_with(&["serve-sim", "--limit", "0"], &["'--limit <N>'", "[1, 10000000]"]);
}

#[test]
fn serve_sim_bounds_what_depends_on_the_workload() {
    // 1e-9 would stretch the arrivals over thousands of years (and allocate a window per second).
    fails(
        serve_sim(&["--rate-scale", "1e-9"]),
        &["--rate-scale 0.000000001", "at most 31622400 s (366 days)"],
    );
    fails(serve_sim(&["--window-s", "0.0001"]), &["'--window-s"]);
    fails(serve_sim(&["--window-s", "0.0005"]), &["must be a finite number in [0.001"]);
    fails(serve_sim(&["--window-s", "0.00l"]), &["must be a finite number"]);
    fails_with(
        &[
            "serve-sim",
            "--trace",
            "synthetic",
            "--tenant",
            "name=a,rate=0.2",
            "--duration-s",
            "600",
            "--window-s",
            "0.001",
        ],
        &["--window-s 0.001:", "windows over the", "at most 100000", "so use --window-s"],
    );
    fails(
        serve_sim(&["--tp", "3"]),
        &["--tp 3: Llama-3.1-8B has 32 attention heads and 8 KV heads", "one of 1, 2, 4, 8"],
    );
    fails(serve_sim(&["--tp", "1024"]), &["--tp 1024:"]);
    fails(serve_sim(&["--weight", "a=inf"]), &["--weight a=inf: weight must be a finite number > 0"]);
    fails_with(
        &["serve-sim", "--trace", "synthetic", "--tenant", "name=a,rate=1e9", "--duration-s", "600"],
        &["would generate about", "at most 10000000"],
    );
    fails_with(
        &["serve-sim", "--trace", "synthetic", "--tenant", "name=a,rate=inf"],
        &["--tenant name=a,rate=inf"],
    );
    // A valid TP above the KV heads (KV heads replicated) still runs.
    let out = cotenant(&serve_sim(&["--tp", "2"]).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn plan_serve_rejects_rates_and_targets_it_cannot_plan() {
    fails_with(&["plan", "serve", "--rate", "nan"], &["invalid value 'nan' for '--rate <REQ_PER_S>'"]);
    fails_with(
        &["plan", "serve", "--rate=-3"],
        &["invalid value '-3' for '--rate", "must be a finite number in (0, "],
    );
    fails_with(&["plan", "serve", "--target", "1.5"], &["invalid value '1.5' for '--target", "(0, 1]"]);
    fails_with(&["plan", "serve", "--max-replicas", "0"], &["'--max-replicas", "[1, 4096]"]);
    let mut args: Vec<&str> = vec!["plan", "serve"];
    args.extend(SMALL);
    args.extend(["--rate", "1e9"]);
    fails_with(
        &args,
        &["--rate 1000000000:", "a burst rather than a sustained rate", "supports --rate up to"],
    );
    let mut args: Vec<&str> = vec!["plan", "serve"];
    args.extend(SMALL);
    args.extend(["--tp-options", "1,3"]);
    fails_with(&args, &["--tp-options 3:"]);
}

#[test]
fn serve_sim_goodput_says_when_it_is_only_a_bound() {
    // 120 requests over 60 s: every doubling meets the SLO and the last squeezes them into a burst.
    let args = serve_sim(&["--goodput"]);
    let out = cotenant(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("warning: every probe met the target up to the search's last doubling"), "{text}");
    assert!(text.contains("a burst rather than a sustained rate"), "{text}");
}

/// The help column of each option in `--help` output: text other than defaults.
fn options_without_help(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let is_option = |l: &str| {
        let t = l.trim_start();
        l.starts_with("  ") && (t.starts_with("--") || (t.starts_with('-') && t.get(2..4) == Some(", ")))
    };
    let mut missing = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !is_option(line) {
            continue;
        }
        let flag = line.split_whitespace().find(|w| w.starts_with("--")).unwrap_or(line).to_string();
        // Same line: text after the flag column (two or more spaces); else the lines below.
        let same_line = line.trim_start().split_once("  ").map(|(_, rest)| rest.trim().to_string());
        let mut text: Vec<String> = same_line.into_iter().collect();
        for next in &lines[i + 1..] {
            if is_option(next) || next.trim().is_empty() || !next.starts_with("   ") {
                break;
            }
            text.push(next.trim().to_string());
        }
        let described = text.iter().any(|t| !t.is_empty() && !t.starts_with('['));
        if !described {
            missing.push(flag);
        }
    }
    missing
}

#[test]
fn every_serving_flag_has_help_text() {
    for command in [&["serve-sim", "--help"][..], &["plan", "serve", "--help"][..]] {
        let out = cotenant(command);
        assert!(out.status.success());
        let help = stdout(&out);
        let missing = options_without_help(&help);
        assert!(missing.is_empty(), "{command:?}: no help text for {missing:?}\n{help}");
        assert!(help.matches("\n      --").count() > 10, "{help}");
    }
}

#[test]
fn help_says_what_cotenant_does() {
    let help = stdout(&cotenant(&["--help"]));
    let first = help.lines().next().unwrap_or_default();
    assert!(!help.contains("glue"), "{help}");
    assert!(first.starts_with("Simulate and compare scheduling policies for GPU clusters"), "{help}");
    assert!(help.contains("LLM serving"), "{help}");
    let bench = stdout(&cotenant(&["bench", "--help"]));
    assert!(bench.starts_with("Measure simulator speed"), "{bench}");
    assert!(bench.contains("--decision-latency"), "{bench}");
}

#[test]
fn tenant_config_typos_name_the_line_and_suggest() {
    let dir = temp_dir("tenant-typo");
    let path = dir.join("tenants.toml");
    std::fs::write(&path, "[[account]]\nname = \"A\"\n\n[[acount]]\nname = \"6214e9\"\nparent = \"A\"\n")
        .unwrap();
    fails_with(
        &["sim", "--max-jobs", "20", "--policy", "fair-share", "--tenant-config", path.to_str().unwrap()],
        &["tenants.toml line 4: unknown field `acount`", "(did you mean `account`?)"],
    );
}

#[test]
fn cluster_sizes_are_bounded_before_allocation() {
    fails_with(
        &["sim", "--max-jobs", "20", "--cluster", "nodes=1000000000,gpus-per-node=8"],
        &["key `nodes`: 1000000000 nodes make the cluster larger than 262144 nodes"],
    );
    fails_with(
        &["sim", "--max-jobs", "20", "--cluster", "nodes=1,gpus-per-node=4294967295"],
        &["4294967295 GPUs per node; at most 64"],
    );
    let dir = temp_dir("cluster-typo");
    let path = dir.join("cluster.toml");
    std::fs::write(&path, "[[nodes]]\ncount = 2\ngpu = \"gpu\"\ngpus = 8\nmemory = 4\n").unwrap();
    fails_with(
        &["sim", "--max-jobs", "20", "--cluster", path.to_str().unwrap()],
        &["cluster.toml line 5: unknown field `memory`", "(did you mean `memory_gib`?)"],
    );
}

/// Was: a Kueue queue naming GPU type `v100` on a cluster whose type is `gpu` ran for
/// over 300 s and ended with no word about the mismatch.
#[test]
fn a_queue_naming_a_gpu_type_the_cluster_lacks_is_refused_by_sim() {
    let dir = temp_dir("kueue-v100");
    let config = dir.join("queues.toml");
    std::fs::write(&config, "[[queue]]\ntenant = \"6214e9\"\nnominal = { v100 = 8 }\n").unwrap();
    let out = cotenant(&[
        "sim",
        "--max-jobs",
        "50",
        "--policy",
        "kueue",
        "--tenant-config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("GPU type 'v100' is not in the cluster (its types: gpu)"), "{err}");
}

/// Was: `gpu_limit = 0` ended half the jobs with no note.
#[test]
fn a_gpu_limit_that_blocks_jobs_is_warned_about_and_noted() {
    let dir = temp_dir("limit-zero");
    let cluster = dir.join("cluster.toml");
    std::fs::write(
        &cluster,
        "[[nodes]]\ncount = 60\ngpu = \"gpu\"\ngpus = 8\n\n[[tenants]]\nname = \"6214e9\"\ngpu_limit = 0\n",
    )
    .unwrap();
    let out =
        cotenant(&["sim", "--max-jobs", "200", "--policy", "fifo", "--cluster", cluster.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning:") && stderr(&out).contains("6214e9"), "{}", stderr(&out));
    assert!(stdout(&out).contains("jobs ended without completing"), "{}", stdout(&out));
}
