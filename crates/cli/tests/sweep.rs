//! `cotenant sweep`: results that do not depend on the thread count, resume,
//! `--cells` parts merged into the local run's bytes, the TOML grid, serve
//! sweeps, cells that match plain `sim` runs, and clear errors on bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{cotenant, stderr, stdout, temp_dir};
use serde_json::Value;

/// A small synthetic workload: 150 jobs over ~7.5 h, 3 tenants.
const SYNTHETIC: &str = "jobs=150,rate=20/h,tenants=3";
/// A cluster small enough for those jobs to queue (the sizing rule, measured over 7.5 h of
/// arrivals of jobs that run for days, gives one where no job ever waits).
const SMALL: &str = "nodes=6,gpus-per-node=8";

fn sweep(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--cluster",
        SMALL,
        "--policy",
        "fifo,las",
        "--load",
        "0.8,1.25",
        "--seeds",
        "0..2",
    ];
    args.extend_from_slice(extra);
    cotenant(&args)
}

fn ok(out: &std::process::Output) -> String {
    assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", stdout(out), stderr(out));
    stdout(out)
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

fn csv_rows(dir: &Path) -> Vec<Vec<String>> {
    String::from_utf8(read(dir, "results.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn fails_naming(out: &std::process::Output, needle: &str) {
    let err = stderr(out);
    assert!(!out.status.success(), "expected a failure naming `{needle}`, got success:\n{}", stdout(out));
    assert!(err.contains(needle), "error should name `{needle}`:\n{err}");
    assert!(!err.contains("panicked"), "must not panic:\n{err}");
}

#[test]
fn results_are_identical_for_one_and_two_threads_and_hold_every_cell() {
    let dir = temp_dir("sweep-threads");
    let (one, two) = (dir.join("one"), dir.join("two"));
    let text = ok(&sweep(&["--threads", "1", "--out", one.to_str().unwrap()]));
    assert!(text.contains("8 cells = 2 policies x 1 option set(s) x 2 load(s) (rate) x 2 seed(s)"), "{text}");
    assert!(text.contains("ran 8 cell(s), skipped 0"), "{text}");
    ok(&sweep(&["--threads", "2", "--out", two.to_str().unwrap()]));
    assert_eq!(read(&one, "results.csv"), read(&two, "results.csv"));
    assert_eq!(read(&one, "results.json"), read(&two, "results.json"));

    let rows = csv_rows(&one);
    assert_eq!(
        rows[0][..10].join(","),
        "cell,kind,policy,load,load_mode,seed,options,jobs,completed,unfinished"
    );
    assert_eq!(rows.len(), 9, "a header and 8 cells");
    // Grid order: policy, then load, then seed (the fastest).
    let keys: Vec<String> = rows[1..].iter().map(|r| r[..6].join(",")).collect();
    assert_eq!(
        keys,
        [
            "0,sim,fifo,0.8,rate,0",
            "1,sim,fifo,0.8,rate,1",
            "2,sim,fifo,1.25,rate,0",
            "3,sim,fifo,1.25,rate,1",
            "4,sim,las,0.8,rate,0",
            "5,sim,las,0.8,rate,1",
            "6,sim,las,1.25,rate,0",
            "7,sim,las,1.25,rate,1",
        ]
    );
    let json: Value = serde_json::from_slice(&read(&one, "results.json")).unwrap();
    assert_eq!(json["kind"], "cotenant-sweep");
    assert_eq!(json["mode"], "sim");
    let json_rows = json["rows"].as_array().unwrap();
    assert_eq!(json_rows.len(), 8);
    let header = &rows[0];
    for (csv, row) in rows[1..].iter().zip(json_rows) {
        assert_eq!(row.as_object().unwrap().len(), header.len(), "same columns in CSV and JSON");
        for (column, text) in header.iter().zip(csv) {
            let value = &row[column.as_str()];
            match value {
                // serde_json's default float parser can miss the last bit (its
                // float_roundtrip feature is off), so compare to within a few ulps.
                Value::Number(n) => {
                    let (a, b) = (n.as_f64().unwrap(), text.parse::<f64>().unwrap());
                    assert!((a - b).abs() <= 1e-14 * a.abs().max(1.0), "{column}: {a} vs {b}");
                }
                Value::Bool(b) => assert_eq!(b.to_string(), *text, "{column}"),
                Value::String(s) => assert_eq!(s, text, "{column}"),
                Value::Null => assert_eq!(text, "", "{column}"),
                other => panic!("{column}: unexpected {other}"),
            }
        }
        assert_eq!(row["jobs"], 150);
        assert_eq!(row["completed"], 150, "every job finishes");
        assert_eq!(row["healthy"], true);
    }
    // Higher load on the same cluster: arrivals come faster, so mean queueing grows.
    let column = |name: &str| header.iter().position(|c| c == name).unwrap();
    let (queueing, gpus) = (column("queueing_mean_s"), column("cluster_gpus"));
    for (low, high) in [(1, 3), (2, 4)] {
        assert_eq!(rows[low][gpus], "48", "rate mode keeps the cluster");
        assert_eq!(rows[low][gpus], rows[high][gpus], "rate mode keeps the cluster");
        let (q_low, q_high): (f64, f64) =
            (rows[low][queueing].parse().unwrap(), rows[high][queueing].parse().unwrap());
        assert!(q_high > q_low, "rows {low} and {high}: FIFO queueing {q_low} at load 0.8, {q_high} at 1.25");
    }
    // Different seeds generate different workloads.
    assert_ne!(rows[1][column("jct_mean_s")], rows[2][column("jct_mean_s")]);
}

#[test]
fn a_rerun_skips_finished_cells_and_reproduces_the_bytes_and_a_changed_grid_is_refused() {
    let dir = temp_dir("sweep-resume").join("out");
    let out = dir.to_str().unwrap();
    ok(&sweep(&["--out", out]));
    let (csv, json) = (read(&dir, "results.csv"), read(&dir, "results.json"));
    // Lose two cells and the results, as an interrupted run would.
    for cell in ["cell-000002.txt", "cell-000005.txt"] {
        std::fs::remove_file(dir.join("cells").join(cell)).unwrap();
    }
    std::fs::remove_file(dir.join("results.csv")).unwrap();
    let text = ok(&sweep(&["--out", out]));
    assert!(text.contains("ran 2 cell(s), skipped 6 already finished"), "{text}");
    assert_eq!(read(&dir, "results.csv"), csv);
    assert_eq!(read(&dir, "results.json"), json);
    let text = ok(&sweep(&["--out", out]));
    assert!(text.contains("ran 0 cell(s), skipped 8"), "{text}");

    let changed = cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--cluster",
        SMALL,
        "--policy",
        "fifo,las",
        "--load",
        "0.8,1.5",
        "--seeds",
        "0..2",
        "--out",
        out,
    ]);
    fails_naming(&changed, "holds a different sweep");
    fails_naming(&changed, "field loads");
    let changed = cotenant(&[
        "sweep",
        "--synthetic",
        "jobs=151,rate=20/h,tenants=3",
        "--cluster",
        SMALL,
        "--policy",
        "fifo,las",
        "--load",
        "0.8,1.25",
        "--seeds",
        "0..2",
        "--out",
        out,
    ]);
    fails_naming(&changed, "field fixed");
}

#[test]
fn cell_ranges_merge_into_the_local_runs_bytes_and_missing_cells_are_named() {
    let dir = temp_dir("sweep-merge");
    let (local, parts) = (dir.join("local"), dir.join("parts"));
    ok(&sweep(&["--out", local.to_str().unwrap()]));
    let parts_arg = parts.to_str().unwrap();
    let text = ok(&sweep(&["--cells", "0..3", "--out", parts_arg, "--threads", "1"]));
    assert!(text.contains("ran 3 cell(s) of cells 0..3"), "{text}");
    assert!(!parts.join("results.csv").exists(), "a part does not write results");
    ok(&sweep(&["--cells", "6..8", "--out", parts_arg]));
    let early = cotenant(&["sweep", "--merge", parts_arg]);
    fails_naming(&early, "3 of 8 cells are not finished: 3..6");
    ok(&sweep(&["--cells", "3..6", "--out", parts_arg]));
    let text = ok(&cotenant(&["sweep", "--merge", parts_arg]));
    assert!(text.contains("merged 8 cells"), "{text}");
    assert_eq!(read(&local, "results.csv"), read(&parts, "results.csv"));
    assert_eq!(read(&local, "results.json"), read(&parts, "results.json"));
    fails_naming(&sweep(&["--cells", "0..9", "--out", parts_arg]), "the grid has 8 cells");
    fails_naming(&cotenant(&["sweep", "--merge", dir.join("nothing").to_str().unwrap()]), "grid.json");
}

#[test]
fn a_toml_grid_gives_the_same_results_as_the_same_grid_on_the_command_line() {
    let dir = temp_dir("sweep-toml");
    let grid = dir.join("grid.toml");
    std::fs::write(
        &grid,
        "# the CLI grid below, as a file\npolicies = [\"fifo\", \"las\"]\nloads = [0.8, 1.25]\nload_mode = \"rate\"\nseeds = \"0..2\"\n",
    )
    .unwrap();
    let (cli, file) = (dir.join("cli"), dir.join("file"));
    ok(&sweep(&["--out", cli.to_str().unwrap()]));
    ok(&cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--cluster",
        SMALL,
        "--grid",
        grid.to_str().unwrap(),
        "--out",
        file.to_str().unwrap(),
    ]));
    for name in ["results.csv", "results.json", "grid.json"] {
        assert_eq!(read(&cli, name), read(&file, name), "{name}");
    }
    // The bundled example parses and varies an option.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/sweep-grid.toml");
    let emitted = cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--grid",
        example.to_str().unwrap(),
        "--emit",
        "slurm",
        dir.join("example").to_str().unwrap(),
    ]);
    let text = ok(&emitted);
    assert!(text.contains("cells ="), "{text}");
    // Errors in a grid file name the file, the line and the field.
    std::fs::write(&grid, "policies = [\"fifo\"]\n\nloads = [\"high\"]\n").unwrap();
    fails_naming(
        &cotenant(&["sweep", "--synthetic", SYNTHETIC, "--grid", grid.to_str().unwrap(), "--out", "x"]),
        "grid.toml line 3, field loads: expected numbers",
    );
    std::fs::write(&grid, "policies = [\"fifo\"]\nload = [1.0]\n").unwrap();
    fails_naming(
        &cotenant(&["sweep", "--synthetic", SYNTHETIC, "--grid", grid.to_str().unwrap(), "--out", "x"]),
        "grid.toml line 2, field load: unknown field `load`",
    );
}

#[test]
fn varied_options_multiply_the_grid_and_reach_the_policy() {
    let dir = temp_dir("sweep-vary").join("out");
    ok(&cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--cluster",
        SMALL,
        "--policy",
        "las",
        "--vary",
        "las.quantum=300s,3600s",
        "--out",
        dir.to_str().unwrap(),
    ]));
    let rows = csv_rows(&dir);
    assert_eq!(rows.len(), 3);
    let options = rows[0].iter().position(|c| c == "options").unwrap();
    let passes = rows[0].iter().position(|c| c == "scheduling_passes").unwrap();
    assert_eq!(rows[1][options], "las.quantum=300s");
    assert_eq!(rows[2][options], "las.quantum=3600s");
    assert_ne!(rows[1][passes], rows[2][passes], "the quantum changes the run");
}

/// One cell against a plain `cotenant sim --json` run with the same settings.
fn sim_metrics(args: &[&str]) -> Value {
    let out = cotenant(&[&["sim", "--json"], args].concat());
    let json: Value = serde_json::from_str(&ok(&out)).unwrap();
    json["runs"][0].clone()
}

fn check_same(row: &Value, run: &Value) {
    for (column, key, field) in [
        ("jct_mean_s", "jct_secs", "mean"),
        ("jct_p99_s", "jct_secs", "p99"),
        ("queueing_mean_s", "queueing_secs", "mean"),
        ("queueing_p90_s", "queueing_secs", "p90"),
    ] {
        assert_eq!(row[column], run[key][field], "{column}");
    }
    for column in [
        "cluster_gpus",
        "makespan_secs",
        "gpu_utilization",
        "preemptions",
        "events",
        "scheduling_passes",
        "jain_backlogged",
    ] {
        let sweep_column = if column == "makespan_secs" { "makespan_s" } else { column };
        assert_eq!(row[sweep_column], run[column], "{column}");
    }
}

#[test]
fn cells_match_plain_sim_runs_with_the_same_settings() {
    let dir = temp_dir("sweep-vs-sim");
    // Synthetic, seed 3: the seed goes into the generator and the run.
    let synthetic = dir.join("synthetic");
    ok(&cotenant(&[
        "sweep",
        "--synthetic",
        "jobs=150,rate=20/h,tenants=3,seed=99",
        "--cluster",
        SMALL,
        "--policy",
        "fifo,las",
        "--seeds",
        "3",
        "--out",
        synthetic.to_str().unwrap(),
    ]));
    let json: Value = serde_json::from_slice(&read(&synthetic, "results.json")).unwrap();
    let run = sim_metrics(&[
        "--synthetic",
        "jobs=150,rate=20/h,tenants=3,seed=3",
        "--cluster",
        SMALL,
        "--seed",
        "3",
        "--policy",
        "las",
    ]);
    check_same(&json["rows"][1], &run);

    // Cluster mode: load 1.25 = the sizing rule at target load 0.86 x 1.25.
    let cluster = dir.join("cluster");
    ok(&cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--policy",
        "srtf",
        "--load",
        "1,1.25",
        "--load-mode",
        "cluster",
        "--out",
        cluster.to_str().unwrap(),
    ]));
    let json: Value = serde_json::from_slice(&read(&cluster, "results.json")).unwrap();
    let target = format!("{}", 0.86_f64 * 1.25);
    let run = sim_metrics(&["--synthetic", SYNTHETIC, "--target-load", &target, "--policy", "srtf"]);
    check_same(&json["rows"][1], &run);
    assert!(
        json["rows"][1]["cluster_gpus"].as_u64() < json["rows"][0]["cluster_gpus"].as_u64(),
        "a higher load on a smaller cluster"
    );

    // A trace (one day of Philly on 128 GPUs): seed 0 replays it as is (the plain run);
    // seed 1 jitters the arrivals.
    let trace = dir.join("trace");
    let day = ["--from", "2017-11-06", "--to", "2017-11-07", "--cluster", "nodes=16,gpus-per-node=8"];
    let sweep_args = ["sweep", "--policy", "tiresias", "--seeds", "0,1", "--out", trace.to_str().unwrap()];
    ok(&cotenant(&[&sweep_args[..], &day[..]].concat()));
    let json: Value = serde_json::from_slice(&read(&trace, "results.json")).unwrap();
    let run = sim_metrics(&[&day[..], &["--policy", "tiresias"]].concat());
    check_same(&json["rows"][0], &run);
    assert_eq!(json["rows"][1]["jobs"], run["jobs"]);
    assert_ne!(json["rows"][1]["jct_mean_s"], run["jct_secs"]["mean"], "seed 1 perturbs the arrivals");
}

#[test]
fn a_serve_sweep_runs_schedulers_by_rate_and_seed() {
    let dir = temp_dir("sweep-serve");
    let args = |out: &Path, threads: &str| {
        cotenant(&[
            "sweep",
            "serve",
            "--trace",
            "synthetic",
            "--tenant",
            "name=a,rate=2",
            "--tenant",
            "name=b,rate=1,weight=2",
            "--duration-s",
            "60",
            "--scheduler",
            "fcfs,vtc",
            "--load",
            "1,2",
            "--seeds",
            "0..2",
            "--threads",
            threads,
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let (one, two) = (dir.join("one"), dir.join("two"));
    let text = ok(&args(&one, "1"));
    assert!(text.contains("8 cells = 2 schedulers"), "{text}");
    ok(&args(&two, "2"));
    assert_eq!(read(&one, "results.csv"), read(&two, "results.csv"));
    let json: Value = serde_json::from_slice(&read(&one, "results.json")).unwrap();
    assert_eq!(json["mode"], "serve");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    for column in [
        "requests",
        "completed",
        "ttft_p50_s",
        "ttft_p99_s",
        "tbt_p50_s",
        "tbt_p99_s",
        "e2e_p50_s",
        "e2e_p99_s",
        "slo_attainment",
    ] {
        assert!(rows[0].get(column).is_some(), "column {column}");
    }
    assert_eq!(rows[0]["kind"], "serve");
    assert_eq!(rows[4]["policy"], "vtc");
    // Load 2 halves every arrival gap: the same requests arrive in half the span.
    let duration = |row: &Value| row["requests"].as_f64().unwrap() / row["requests_per_s"].as_f64().unwrap();
    assert_eq!(rows[0]["requests"], rows[2]["requests"]);
    assert!(duration(&rows[2]) < duration(&rows[0]));

    // The load 1, seed 0 cell is `serve-sim --seed 0`.
    let plain = cotenant(&[
        "serve-sim",
        "--trace",
        "synthetic",
        "--tenant",
        "name=a,rate=2",
        "--tenant",
        "name=b,rate=1,weight=2",
        "--duration-s",
        "60",
        "--scheduler",
        "vtc",
        "--seed",
        "0",
        "--json",
    ]);
    let plain: Value = serde_json::from_str(&ok(&plain)).unwrap();
    let run = &plain["runs"][0];
    assert_eq!(rows[4]["requests"], run["requests"]);
    assert_eq!(rows[4]["ttft_p99_s"].as_f64().unwrap(), run["ttft_ms"]["p99"].as_f64().unwrap() / 1e3);
    assert_eq!(rows[4]["slo_attainment"], run["slo_attainment"]);
}

#[test]
fn bad_inputs_are_errors_naming_the_problem() {
    let out = temp_dir("sweep-bad").join("out");
    let out = out.to_str().unwrap();
    let run =
        |args: &[&str]| cotenant(&[&["sweep", "--synthetic", SYNTHETIC], args, &["--out", out]].concat());
    fails_naming(&run(&["--policy", "fifo,nosuch"]), "nosuch");
    fails_naming(&run(&["--policy", "fifo,fifo"]), "policy `fifo` is listed twice");
    fails_naming(&run(&["--policy", "fifo", "--vary", "quantum=60s"]), "quantum");
    fails_naming(&run(&["--policy", "las", "--vary", "quantum"]), "expected KEY=V1,V2");
    fails_naming(&run(&["--load", "0"]), "load factor 0");
    fails_naming(&run(&["--load", "-1"]), "load factor -1");
    fails_naming(&run(&["--load", "nan"]), "load factor NaN");
    fails_naming(&run(&["--load", "fast"]), "--load");
    fails_naming(&run(&["--load", "1,1"]), "load factor 1 is listed twice");
    fails_naming(&run(&["--load", "2", "--load-mode", "cluster"]), "outside the sizing rule's (0, 1.5]");
    fails_naming(&run(&["--load-mode", "sideways"]), "load mode `sideways`");
    fails_naming(&run(&["--seeds", "1..x"]), "--seeds 1..x");
    fails_naming(&run(&["--seed", "4"]), "--seeds");
    fails_naming(&run(&["--cells", "3"]), "expected I..J");
    fails_naming(&run(&["--topology", "leaf=4"]), "--topology: only `cotenant sim` and `cotenant bench`");
    fails_naming(&run(&["--comm-profile", "fraction=0.3"]), "--comm-profile: only");
    fails_naming(&cotenant(&["sweep", "--synthetic", SYNTHETIC, "--emit", "pbs", out]), "unknown format");
    fails_naming(&cotenant(&["sweep", "--synthetic", SYNTHETIC]), "give --out DIR");
    fails_naming(
        &cotenant(&[
            "sweep",
            "serve",
            "--trace",
            "synthetic",
            "--tenant",
            "name=a,rate=1",
            "--scheduler",
            "nosuch",
            "--out",
            out,
        ]),
        "unknown scheduler `nosuch`",
    );
    fails_naming(
        &cotenant(&[
            "sweep",
            "serve",
            "--trace",
            "synthetic",
            "--tenant",
            "name=a,rate=1",
            "--load-mode",
            "cluster",
            "--out",
            out,
        ]),
        "--load-mode cluster",
    );
}

#[test]
fn the_emitted_job_script_runs_each_chunk_without_slurm_and_merges_into_the_local_runs_bytes() {
    // What each Slurm array task does, run here by hand: bash with SLURM_ARRAY_TASK_ID set.
    let dir = temp_dir("sweep-emit");
    let (local, array) = (dir.join("local"), dir.join("array"));
    ok(&sweep(&["--out", local.to_str().unwrap()]));
    let text =
        ok(&sweep(&["--emit", "slurm", array.to_str().unwrap(), "--chunk", "3", "--cpus-per-task", "2"]));
    assert!(
        text.contains("3 array task(s) of up to 3 cell(s) each, 8 cells in all, 2 CPU(s) per task"),
        "{text}"
    );
    let script = std::fs::read_to_string(array.join("sweep.sbatch")).unwrap();
    for line in ["#SBATCH --array=0-2", "#SBATCH --cpus-per-task=2", "CHUNK=3", "CELLS=8", "--threads 2"] {
        assert!(script.contains(line), "{line} missing:\n{script}");
    }
    let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    assert!(!exec.contains("--emit") && !exec.contains("--chunk"), "the tasks must not emit again:\n{exec}");
    assert!(exec.contains("'--policy' 'fifo,las' '--load' '0.8,1.25'"), "{exec}");
    for task in ["2", "0", "1"] {
        let out = std::process::Command::new("bash")
            .arg(array.join("sweep.sbatch"))
            .env("SLURM_ARRAY_TASK_ID", task)
            .output()
            .unwrap();
        assert!(out.status.success(), "task {task}: {}", stderr(&out));
        let expected = ["cells 0..3", "cells 3..6", "cells 6..8"][task.parse::<usize>().unwrap()];
        assert!(stdout(&out).contains(expected), "task {task}: {}", stdout(&out));
    }
    ok(&cotenant(&["sweep", "--merge", array.to_str().unwrap()]));
    assert_eq!(read(&local, "results.csv"), read(&array, "results.csv"));
    assert_eq!(read(&local, "results.json"), read(&array, "results.json"));
    fails_naming(&sweep(&["--emit", "slurm", array.to_str().unwrap(), "--chunk", "0"]), "--chunk 0");
}

#[test]
fn unhealthy_cells_are_kept_flagged_and_counted() {
    let dir = temp_dir("sweep-unhealthy").join("out");
    // 40 engine steps cannot finish 150 jobs: every run stops at the limit.
    let text = ok(&cotenant(&[
        "sweep",
        "--synthetic",
        SYNTHETIC,
        "--cluster",
        SMALL,
        "--policy",
        "fifo",
        "--max-steps",
        "40",
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert!(text.contains("warning: 1 cell(s) unhealthy"), "{text}");
    let json: Value = serde_json::from_slice(&read(&dir, "results.json")).unwrap();
    assert_eq!(json["rows"][0]["healthy"], false);
    assert!(json["rows"][0]["unfinished"].as_u64().unwrap() > 0);
}

#[test]
fn a_grid_file_for_the_other_mode_is_refused() {
    let dir = temp_dir("sweep-mode");
    let grid = dir.join("serve.toml");
    std::fs::write(&grid, "mode = \"serve\"\nschedulers = [\"fcfs\"]\n").unwrap();
    fails_naming(
        &cotenant(&["sweep", "--synthetic", SYNTHETIC, "--grid", grid.to_str().unwrap(), "--out", "x"]),
        "field mode is \"serve\" but this is a sim sweep",
    );
    fails_naming(
        &cotenant(&[
            "sweep",
            "--synthetic",
            SYNTHETIC,
            "--grid",
            grid.to_str().unwrap(),
            "--load",
            "2",
            "--out",
            "x",
        ]),
        "cannot be used with",
    );
}
