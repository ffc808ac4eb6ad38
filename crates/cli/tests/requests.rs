//! `serve-sim --requests` and `plan serve --requests` on hand-made files in each format
//! (tests/data/requests/), format detection, errors naming file, line and field, and
//! the merged Azure trace keeping the offset between its two files (absolute times).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cotenant, stderr, stdout, temp_dir};
use serde_json::Value;

fn data(name: &str) -> String {
    format!("{}/tests/data/requests/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The `workload` object of a successful `serve-sim --json` run.
fn workload(args: &[&str]) -> Value {
    let out = cotenant(&[&["serve-sim", "--json"], args].concat());
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("json");
    json["workload"].clone()
}

fn tenants(workload: &Value) -> Vec<String> {
    workload["tenants"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn each_format_is_detected_and_simulated() {
    for (file, format, requests, names) in [
        ("code.csv", "azure", 3, vec!["code"]),
        ("mooncake.jsonl", "mooncake", 3, vec!["mooncake"]),
        ("mixed.jsonl", "cotenant", 5, vec!["chat", "batch", "mixed"]),
    ] {
        let path = data(file);
        let out = cotenant(&["serve-sim", "--requests", &path]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("note: {path}: detected format {format}")),
            "{}",
            stderr(&out)
        );
        assert!(stdout(&out).contains(&format!("{requests} requests")), "{file}: {}", stdout(&out));
        let w = workload(&["--requests", &path]);
        assert_eq!(w["requests"], requests, "{file}");
        assert_eq!(tenants(&w), names, "{file}");
    }
}

#[test]
fn skipped_rows_are_counted_with_their_reason() {
    let out = cotenant(&["serve-sim", "--requests", &data("mixed.jsonl")]);
    assert!(
        stderr(&out).contains("mixed.jsonl: skipped 1 rows: requests: no output tokens (0)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn named_kind_tenant_and_gzip() {
    let dir = temp_dir("requests-gz");
    let gz = dir.join("trace.log.gz");
    let plain = std::fs::read(data("conv.csv")).unwrap();
    let status = std::process::Command::new("gzip").arg("-c").arg(data("conv.csv")).output();
    let bytes = match status {
        Ok(out) if out.status.success() => out.stdout,
        // No gzip on this machine: the plain bytes still test naming the kind.
        _ => plain,
    };
    std::fs::write(&gz, bytes).unwrap();
    let spec = format!("web=azure:{}", gz.display());
    let out = cotenant(&["serve-sim", "--requests", &spec]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("detected"), "a named kind is not detected: {}", stderr(&out));
    let w = workload(&["--requests", &spec]);
    assert_eq!((w["requests"].as_u64(), tenants(&w)), (Some(3), vec!["web".to_string()]));
    std::fs::remove_dir_all(&dir).ok();
}

/// conv starts at 18:00:00 and code at 18:00:02 (its 18:00:03.5 row has 0 output tokens
/// and is skipped), code's last at 18:00:08: 6 requests over 8 s on one clock. Re-basing
/// each file to its own start would give 6 / 6 s.
#[test]
fn merged_files_keep_absolute_times() {
    let w = workload(&["--requests", &data("code.csv"), "--requests", &data("conv.csv")]);
    assert_eq!(w["requests"], 6);
    assert_eq!(w["request_rate_per_s"].as_f64(), Some(6.0 / 8.0));
    // Two files for one tenant merge into it, on the same clock.
    let one = workload(&[
        "--requests",
        &format!("all={}", data("code.csv")),
        "--requests",
        &format!("all={}", data("conv.csv")),
    ]);
    assert_eq!((one["requests"].as_u64(), tenants(&one)), (Some(6), vec!["all".to_string()]));
    assert_eq!(one["request_rate_per_s"].as_f64(), Some(6.0 / 8.0));
    // cotenant JSONL tenants keep their offsets: 100.0 .. 106.5 s, 5 requests.
    let mixed = workload(&["--requests", &data("mixed.jsonl")]);
    assert_eq!(mixed["request_rate_per_s"].as_f64(), Some(5.0 / 6.5));
}

/// The merged bundled Azure trace: its rate is the files' combined wall-clock rate
/// (requests / (last - first) over the union of both files), computed here from the
/// CSV text independently of the readers.
#[test]
fn merged_azure_rate_is_the_combined_wall_clock_rate() {
    let mut arrivals_s = Vec::new();
    for name in [cotenant_trace::BUNDLED_AZURE_CODE, cotenant_trace::BUNDLED_AZURE_CONV] {
        let bytes = cotenant_trace::text::read_bytes(&cotenant_trace::bundled_data_dir().join(name)).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let fields: Vec<&str> = line.trim_end().split(',').collect();
            let (date, time) = fields[0].split_once(' ').unwrap();
            assert_eq!(date, "2023-11-16", "both files are on one day");
            let hms: Vec<f64> = time.split(':').map(|x| x.parse().unwrap()).collect();
            let skipped = fields[1] == "0" || fields[2] == "0";
            if !skipped {
                arrivals_s.push(hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]);
            }
        }
    }
    let first = arrivals_s.iter().copied().fold(f64::INFINITY, f64::min);
    let last = arrivals_s.iter().copied().fold(0.0, f64::max);
    let expected = arrivals_s.len() as f64 / (last - first);
    let w = workload(&["--scheduler", "fcfs"]);
    assert_eq!(w["requests"].as_u64(), Some(arrivals_s.len() as u64));
    let rate = w["request_rate_per_s"].as_f64().unwrap();
    assert!(
        (rate - expected).abs() < 1e-9 * expected,
        "merged rate {rate} != combined wall-clock rate {expected}"
    );
}

#[test]
fn plan_serve_reads_requests() {
    let out =
        cotenant(&["plan", "serve", "--requests", &data("mixed.jsonl"), "--requests", &data("code.csv")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("H100-SXM"), "{}", stdout(&out));
    assert!(stderr(&out).contains("detected format cotenant"), "{}", stderr(&out));
}

#[test]
fn errors_name_file_line_and_field() {
    let dir = temp_dir("requests-errors");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let bad_field = write(
        "bad.jsonl",
        "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1}\n{\"arrival_s\": 1, \"prompt_tokens\": -5, \"output_tokens\": 1}\n",
    );
    let bad_json = write(
        "broken.jsonl",
        "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 1}\n\n{\"arrival_s\": 1,\n",
    );
    let bad_csv = write("bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,12x,4\n");
    let unknown = write("what.txt", "ts prompt output\n1 2 3\n");
    let cases = [
        (
            bad_field.clone(),
            format!("{bad_field} line 2, field prompt_tokens: expected a non-negative integer"),
        ),
        (bad_json.clone(), format!("{bad_json} line 3: not a JSON object")),
        (format!("cotenant:{bad_csv}"), format!("{bad_csv} line 1: not a JSON object")),
        (bad_csv.clone(), format!("{bad_csv} line 2, field ContextTokens: ")),
        (format!("mooncake:{bad_field}"), format!("{bad_field} line 1, field timestamp: missing")),
        (unknown.clone(), format!("{unknown} line 1: cannot tell the request format")),
        (format!("vllm:{bad_csv}"), format!("--requests vllm:{bad_csv}: unknown request format `vllm`")),
        (dir.join("nope.csv").display().to_string(), dir.join("nope.csv").display().to_string()),
    ];
    for (spec, expected) in cases {
        for command in [&["serve-sim"][..], &["plan", "serve"][..]] {
            let out = cotenant(&[command, &["--requests", &spec]].concat());
            assert!(!out.status.success(), "{spec} should fail");
            let err = stderr(&out);
            assert!(err.contains(&format!("error: {expected}")), "{spec}: expected `{expected}`, got {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// An Azure CSV (wall clock) and a JSONL file (its own time 0) cannot share a tenant.
#[test]
fn one_tenant_on_two_clocks_is_an_error() {
    let out = cotenant(&[
        "serve-sim",
        "--requests",
        &format!("web={}", data("code.csv")),
        "--requests",
        &format!("web={}", data("mooncake.jsonl")),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("tenant `web` is in both an Azure CSV (wall-clock time) and a JSONL file"),
        "{}",
        stderr(&out)
    );
}

/// The bundled Azure files given as `--requests` replay exactly what `--trace azure`
/// replays (the same merge, on the same clock).
#[test]
fn bundled_azure_files_as_requests_match_the_named_trace() {
    let dir = cotenant_trace::bundled_data_dir();
    let code = format!("code={}", dir.join(cotenant_trace::BUNDLED_AZURE_CODE).display());
    let conv = format!("conv={}", dir.join(cotenant_trace::BUNDLED_AZURE_CONV).display());
    let runs = |args: &[&str]| -> Value {
        let out = cotenant(
            &[&["serve-sim", "--limit", "2000", "--scheduler", "fcfs,vtc", "--json"], args].concat(),
        );
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_str::<Value>(&stdout(&out)).expect("json")["runs"].clone()
    };
    assert_eq!(runs(&["--requests", &code, "--requests", &conv]), runs(&[]));
}
