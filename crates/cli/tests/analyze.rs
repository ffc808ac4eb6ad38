//! `cotenant analyze`: hand-computed figures for a five-job trace, JSON
//! determinism, request traces, and errors that name what was wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{cotenant, stderr, stdout, temp_dir};
use serde_json::Value;

/// Five Philly jobs (rows deliberately out of order), two VCs; 2017-11-06 is a Monday.
///
/// | job | VC | submitted           | GPUs | duration | GPU-seconds |
/// | 0   | a  | 2017-11-06 00:00:00 | 1    | 100 s    | 100         |
/// | 1   | a  | 2017-11-06 00:30:00 | 1    | 300 s    | 300         |
/// | 2   | b  | 2017-11-06 01:00:00 | 4    | 1000 s   | 4000        |
/// | 3   | b  | 2017-11-06 02:00:00 | 8    | 50 s     | 400         |
/// | 4   | a  | 2017-11-07 01:00:00 | 16   | 7200 s   | 115200      |
const FIVE_JOBS: &str = "\
timestamp,duration,num_gpus,gpu_time,cluster
2017-11-06 01:00:00,1000.0,4,4000.0,b
2017-11-06 00:00:00,100.0,1,100.0,a
2017-11-07 01:00:00,7200.0,16,115200.0,a
2017-11-06 00:30:00,300.0,1,300.0,a
2017-11-06 02:00:00,50.0,8,400.0,b
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn json_of(args: &[&str]) -> Value {
    let out = cotenant(args);
    assert!(out.status.success(), "{args:?} failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn numbers(value: &Value, key: &str) -> Vec<f64> {
    value.as_array().expect("array").iter().map(|row| row[key].as_f64().expect("number")).collect()
}

/// The five-job trace in a file of its own per call: tests run in parallel threads of one
/// process, and a shared file could be read while another test rewrites it.
fn five_job_trace() -> String {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = temp_dir(&format!("analyze-five-{call}"));
    format!("philly:{}", write(&dir, "five.csv", FIVE_JOBS).display())
}

#[test]
fn five_jobs_by_hand() {
    let trace = five_job_trace();
    let doc = json_of(&["analyze", "--trace", &trace, "--window", "1h", "--json"]);
    assert_eq!(doc["kind"], "cotenant-job-analysis");
    let a = &doc["analysis"];
    assert_eq!(a["jobs"], 5);
    assert_eq!(a["tenants"], 2);
    assert_eq!(a["gpu_time"], 120_000.0);
    assert_eq!(a["arrival_span_s"], 90_000.0);
    // Sizes 1 (jobs 0, 1), 2-4 (job 2), 5-8 (job 3), >8 (job 4).
    assert_eq!(numbers(&a["by_size"], "jobs"), [2.0, 1.0, 1.0, 1.0]);
    assert_eq!(numbers(&a["by_size"], "gpu_time"), [400.0, 4000.0, 400.0, 115_200.0]);
    assert_eq!(
        numbers(&a["by_size"], "gpu_time_share"),
        [400.0 / 120e3, 4000.0 / 120e3, 400.0 / 120e3, 0.96]
    );
    // Durations 50, 100, 300, 1000, 7200: nearest-rank p25 = 100, p50 = 300, p75 = 1000.
    let d = &a["duration"]["stats"];
    assert_eq!(
        (d["p25"].as_f64(), d["p50"].as_f64(), d["p75"].as_f64()),
        (Some(100.0), Some(300.0), Some(1000.0))
    );
    assert_eq!(d["mean"], 1730.0);
    // Hours 00 (two jobs), 01 (Monday's job 2 and Tuesday's job 4), 02 (job 3).
    let hours = numbers(&a["wall_clock"]["by_hour"], "jobs");
    assert_eq!(&hours[..4], [2.0, 2.0, 1.0, 0.0]);
    assert_eq!(numbers(&a["wall_clock"]["by_weekday"], "jobs"), [4.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    // Tenant a: 115,600 GPU-s, medians 1 GPU and 300 s; b: 4,400, 4 GPUs (rank 1 of 2), 50 s.
    let tenants = &a["by_tenant"];
    assert_eq!(tenants[0]["name"], "a");
    assert_eq!(numbers(tenants, "gpu_time"), [115_600.0, 4400.0]);
    assert_eq!(numbers(tenants, "median_gpus"), [1.0, 4.0]);
    assert_eq!(numbers(tenants, "median_duration"), [300.0, 50.0]);
    // Demand in 1 h windows: hour 0 holds 400 GPU-s, hour 1 4,000, hour 2 400; hour 25 16 GPUs.
    let samples = &a["demand"]["samples"];
    assert_eq!(samples.as_array().map(Vec::len), Some(26));
    let means = numbers(samples, "mean_gpus");
    assert_eq!(&means[..4], [400.0 / 3600.0, 4000.0 / 3600.0, 400.0 / 3600.0, 0.0]);
    assert_eq!(means[25], 16.0);
    assert_eq!(a["demand"]["peak_gpus"], 16);
    assert_eq!(a["status"], Value::Null);
}

#[test]
fn the_trace_may_be_given_without_the_flag() {
    let trace = five_job_trace();
    let flagged = cotenant(&["analyze", "--trace", &trace, "--json"]);
    let positional = cotenant(&["analyze", &trace, "--json"]);
    assert!(positional.status.success(), "{}", stderr(&positional));
    assert_eq!(flagged.stdout, positional.stdout);
    let both = cotenant(&["analyze", &trace, "--trace", &trace]);
    assert!(!both.status.success(), "a trace given twice is refused");
}

#[test]
fn five_jobs_text_tables() {
    let trace = five_job_trace();
    let out = cotenant(&["analyze", "--trace", &trace]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let sizes = "\
GPUs  jobs  jobs %  GPU-hours  GPU-time %  median duration
----  ----  ------  ---------  ----------  ---------------
1        2   40.0%        0.1        0.3%             1.7m
2-4      1   20.0%        1.1        3.3%            16.7m
5-8      1   20.0%        0.1        0.3%              50s
>8       1   20.0%       32.0       96.0%            2.00h
";
    assert!(text.contains(sizes), "size table not found in:\n{text}");
    assert!(text.contains("Mon     1     4   80.0%           4.0"), "weekday row not found in:\n{text}");
    assert!(text.contains("Final status: not recorded"), "{text}");
}

#[test]
fn html_and_figure_files() {
    let trace = five_job_trace();
    let dir = temp_dir("analyze-html");
    let html = dir.join("five.html");
    let figures = dir.join("figures");
    let out = cotenant(&[
        "analyze",
        "--trace",
        &trace,
        "--html",
        html.to_str().unwrap(),
        "--figures",
        figures.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 6);
    assert!(page.contains("time since time 0 (h)"), "demand axis in hours for a 26 h series");
    for name in ["sizes", "duration-cdf", "arrivals-by-hour", "arrivals-by-weekday", "tenants", "demand"] {
        let svg = std::fs::read_to_string(figures.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{name}.svg");
        assert!(std::fs::metadata(figures.join(format!("{name}.png"))).unwrap().len() > 1000, "{name}.png");
    }
    let sizes = std::fs::read_to_string(figures.join("sizes.svg")).unwrap();
    for text in ["Jobs and GPU-time by job size", "GPUs per job (GPUs)", "2-4", "&gt;8", "GPU-time"] {
        assert!(sizes.contains(text), "{text} missing from sizes.svg");
    }

    let requests = dir.join("requests.html");
    let out = cotenant(&["analyze", "--requests", "azure-code", "--html", requests.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&requests).unwrap();
    assert_eq!(page.matches("<svg").count(), 2);
    assert!(page.contains("request rate (requests/s)") && page.contains("tokens per request (tokens)"));
}

#[test]
fn status_mix_of_an_operator_trace() {
    // docs/examples/sacct-sample.txt (the readers' sample): the reader's note counts the
    // kept jobs by state; the analysis's status table must agree with it.
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/sacct-sample.txt");
    let doc = json_of(&["analyze", &format!("sacct:{sample}"), "--json"]);
    let a = &doc["analysis"];
    let note = a["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find_map(|n| n.strip_prefix("sacct: kept jobs by final state: "))
        .expect("the reader counts states");
    let mut from_note: Vec<(String, u64)> = note
        .split(", ")
        .map(|pair| {
            let (state, count) = pair.rsplit_once(' ').unwrap();
            (state.to_string(), count.parse().unwrap())
        })
        .collect();
    let mut from_table: Vec<(String, u64)> = a["status"]
        .as_array()
        .expect("sacct records states")
        .iter()
        .map(|r| (r["status"].as_str().unwrap().to_string(), r["jobs"].as_u64().unwrap()))
        .collect();
    from_note.sort();
    from_table.sort();
    assert_eq!(from_table, from_note);
    let shares: f64 = numbers(&a["status"], "gpu_time_share").iter().sum();
    assert!((shares - 1.0).abs() < 1e-9, "GPU-time shares sum to {shares}");
}

#[test]
fn relative_traces_say_they_have_no_wall_clock() {
    let dir = temp_dir("analyze-itp");
    let path = write(&dir, "cluster.csv", "job_id,submission_time,duration,num_gpu\na,0,60,1\nb,30,120,2\n");
    let out = cotenant(&["analyze", "--trace", &format!("itp:{}", path.display())]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Arrivals by hour of day and day of week: not available"),
        "{}",
        stdout(&out)
    );
    let doc = json_of(&["analyze", "--trace", &format!("itp:{}", path.display()), "--json"]);
    assert_eq!(doc["analysis"]["wall_clock"], Value::Null);
    // 0-60 s at 1 GPU and 30-150 s at 2 GPUs: peak 3 in the 1 s window from 30 s.
    assert_eq!(doc["analysis"]["demand"]["peak_gpus"], 3);
}

#[test]
fn json_is_deterministic_on_the_default_week() {
    let first = cotenant(&["analyze", "--json"]);
    let second = cotenant(&["analyze", "--json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(first.stdout, second.stdout);
    let doc: Value = serde_json::from_slice(&first.stdout).unwrap();
    let a = &doc["analysis"];
    // The default week: 6,391 jobs from 11 VCs (the sim default), every job in some size class.
    assert_eq!(a["jobs"], 6391);
    assert_eq!(a["tenants"], 11);
    assert_eq!(numbers(&a["by_size"], "jobs").iter().sum::<f64>(), 6391.0);
    assert_eq!(numbers(&a["by_tenant"], "jobs").iter().sum::<f64>(), 6391.0);
    assert_eq!(numbers(&a["wall_clock"]["by_hour"], "jobs").iter().sum::<f64>(), 6391.0);
    assert_eq!(a["wall_clock"]["first_arrival"].as_str().map(|s| s.starts_with("2017-11-06")), Some(true));
}

#[test]
fn request_traces_by_hand() {
    let dir = temp_dir("analyze-requests");
    let azure = write(
        &dir,
        "azure.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n\
         2023-11-16 18:00:00.0000000,10,5\r\n\
         2023-11-16 18:00:05.0000000,100,1\r\n\
         2023-11-16 18:00:12.0000000,1000,20\r\n\
         2023-11-16 18:00:30.0000000,64,65",
    );
    let spec = format!("azure:{}", azure.display());
    let doc = json_of(&["analyze", "--requests", &spec, "--window", "10s", "--json"]);
    assert_eq!(doc["kind"], "cotenant-request-analysis");
    let a = &doc["traces"][0];
    assert_eq!(a["requests"], 4);
    assert_eq!(a["span_s"], 30.0);
    assert_eq!(numbers(&a["rate"], "requests"), [2.0, 1.0, 0.0, 1.0]);
    assert_eq!(numbers(&a["rate"], "prompt_tokens"), [110.0, 1000.0, 0.0, 64.0]);
    assert_eq!(a["prompt_tokens"]["total"], 1174);
    assert_eq!(a["prompt_tokens"]["stats"]["p50"], 64.0);
    assert_eq!(numbers(&a["prompt_tokens"]["histogram"], "requests"), [2.0, 1.0, 0.0, 0.0, 1.0]);
    assert_eq!(numbers(&a["output_tokens"]["histogram"], "requests"), [3.0, 1.0]);

    let mooncake = write(
        &dir,
        "mooncake.jsonl",
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 10, \"hash_ids\": [1, 2]}\n\
         {\"timestamp\": 2500, \"input_length\": 40, \"output_length\": 300, \"hash_ids\": [3]}\n",
    );
    let both = json_of(&[
        "analyze",
        "--requests",
        &spec,
        "--requests",
        &format!("mooncake:{}", mooncake.display()),
        "--json",
    ]);
    let m = &both["traces"][1];
    assert_eq!(m["requests"], 2);
    assert_eq!(m["span_s"], 2.5);
    assert_eq!(m["output_tokens"]["stats"]["max"], 300.0);
    let text = stdout(&cotenant(&["analyze", "--requests", &spec, "--window", "10s"]));
    assert!(
        text.contains("4 requests over 30s; mean rate 0.13 requests/s; 1,174 prompt and 91 output tokens"),
        "{text}"
    );
}

#[test]
fn errors_name_what_was_wrong() {
    let missing = cotenant(&["analyze", "--trace", "philly:/nonexistent/philly.csv"]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("/nonexistent/philly.csv"), "{}", stderr(&missing));

    let kind = cotenant(&["analyze", "--trace", "slurm-ish:x.csv"]);
    assert!(!kind.status.success());
    assert!(stderr(&kind).contains("unknown trace kind `slurm-ish`"), "{}", stderr(&kind));
    assert!(stderr(&kind).contains("philly, itp, gavel"), "{}", stderr(&kind));

    let dir = temp_dir("analyze-errors");
    let bad = write(
        &dir,
        "bad.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-06 00:00:00,ten,1,10,a\n",
    );
    let row = cotenant(&["analyze", "--trace", &format!("philly:{}", bad.display())]);
    assert!(!row.status.success());
    assert!(stderr(&row).contains("bad.csv line 2, field duration"), "{}", stderr(&row));

    let requests = cotenant(&["analyze", "--requests", "vllm:x.csv"]);
    assert!(!requests.status.success());
    assert!(stderr(&requests).contains("--requests vllm:x.csv: expected azure"), "{}", stderr(&requests));

    let missing_requests = cotenant(&["analyze", "--requests", "azure:/nonexistent/a.csv"]);
    assert!(!missing_requests.status.success());
    assert!(stderr(&missing_requests).contains("/nonexistent/a.csv"), "{}", stderr(&missing_requests));

    let window = cotenant(&["analyze", "--trace", &five_job_trace(), "--window", "1ms"]);
    assert!(!window.status.success());
    assert!(stderr(&window).contains("MIN_SHARE_WINDOW"), "{}", stderr(&window));

    let slice = cotenant(&["analyze", "--requests", "azure-code", "--from", "10"]);
    assert!(!slice.status.success());
    assert!(stderr(&slice).contains("do not apply to --requests"), "{}", stderr(&slice));

    let empty = cotenant(&["analyze", "--trace", &five_job_trace(), "--from", "2018-01-01"]);
    assert!(!empty.status.success());
    assert!(stderr(&empty).contains("no jobs arrive in the selected slice"), "{}", stderr(&empty));
}
