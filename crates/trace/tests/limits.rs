//! Issue 7, "never a silently wrong answer": every reader bounds its values by
//! `cotenant_core::limits` and names file, physical line, field, value and limit.
//! Each case here was accepted (or badly reported) before the fix; several came
//! from the `cotenant-fuzz` harness.

mod common;

use std::error::Error;

use common::{assert_names, TempDir};
use cotenant_trace::requests::{
    parse_azure_csv, parse_mooncake_jsonl, read_azure_csv, read_mooncake_jsonl, SKIP_ZERO_OUTPUT,
};
use cotenant_trace::{read_openb_nodes, read_trace, Slice, SliceBound, TraceKind};

const PHILLY_HEADER: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n";
const OK_ROW: &str = "2017-11-06 00:00:00,10.0,1,10.0,aaa\n";

fn read_err(kind: TraceKind, name: &str, text: &str) -> String {
    let dir = TempDir::new("limits");
    let path = dir.write(name, text);
    read_trace(kind, &path, &Slice::all()).expect_err("must fail").to_string()
}

fn philly_err(rows: &str) -> String {
    read_err(TraceKind::Philly, "philly.csv", &format!("{PHILLY_HEADER}{rows}"))
}

/// What anyhow's `{:#}` prints: the error and its sources, joined by ": ".
fn chain(err: &dyn Error) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

#[test]
fn philly_durations_above_the_limit_are_errors() {
    for (value, shown) in [("1e12", "1e12"), ("1e308", "1e308"), ("31708800.5", "31708800.5")] {
        let msg = philly_err(&format!("{OK_ROW}2017-11-06 00:00:00,{value},1,10.0,aaa\n"));
        assert_names(&msg, "philly.csv", 3, "duration");
        assert!(
            msg.ends_with(&format!(
                "{shown} s exceeds the limit of 366 days (core::limits::MAX_JOB_DURATION)"
            )),
            "{msg}"
        );
    }
    // Exactly 366 days is allowed.
    let dir = TempDir::new("philly-366");
    let path = dir.write("philly.csv", &format!("{PHILLY_HEADER}2017-11-06 00:00:00,31622400,1,1,a\n"));
    assert_eq!(read_trace(TraceKind::Philly, &path, &Slice::all()).expect("366 days").jobs.len(), 1);
}

#[test]
fn philly_vc_name_swapped_into_a_number_column_is_caught() {
    // "6214e9" (a VC name) in the duration column parses as 6.2e12 s.
    let msg = philly_err("2017-11-06 00:00:00,6214e9,1,10.0,aaa\n");
    assert_names(&msg, "philly.csv", 2, "duration");
    assert!(msg.contains("6214e9 s exceeds the limit"), "{msg}");
}

#[test]
fn philly_dates_outside_1990_2100_are_errors() {
    for date in ["0001-01-01 00:00:00", "9999-12-31 23:59:59", "1970-01-01 00:00:00", "2100-01-01 00:00:01"] {
        let msg = philly_err(&format!("{date},10,1,10,aaa\n"));
        assert_names(&msg, "philly.csv", 2, "timestamp");
        assert!(
            msg.contains("is outside the accepted range 1990-01-01 00:00:00 to 2100-01-01 00:00:00"),
            "{msg}"
        );
        assert!(msg.contains("MIN_UNIX_SECONDS"), "{msg}");
    }
}

#[test]
fn gpu_counts_above_the_limit_are_errors() {
    // "+1048577" came from the fuzzer: a leading `+` slipped past the limit.
    for value in ["4294967295", "1048577", "+1048577", "99999999999999999999999", "1048577.0"] {
        let msg = philly_err(&format!("2017-11-06 00:00:00,10,{value},10,aaa\n"));
        assert_names(&msg, "philly.csv", 2, "num_gpus");
        assert!(
            msg.ends_with(&format!(
                "{value} GPUs exceeds the limit of 1048576 GPUs per job (core::limits::MAX_GPUS_PER_JOB)"
            )),
            "{msg}"
        );
    }
    let msg =
        read_err(TraceKind::Itp, "c.csv", "job_id,submission_time,duration,num_gpu\na,1,3,4294967295\n");
    assert_names(&msg, "c.csv", 2, "num_gpu");
    assert!(msg.contains("MAX_GPUS_PER_JOB"), "{msg}");
}

#[test]
fn philly_gpu_time_is_checked_as_the_doc_promises() {
    for value in ["abc", "-1", "NaN"] {
        let msg = philly_err(&format!("2017-11-06 00:00:00,10,1,{value},aaa\n"));
        assert_names(&msg, "philly.csv", 2, "gpu_time");
    }
}

#[test]
fn tiresias_interval_is_checked_as_the_doc_promises() {
    let text = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n0,1,0,10,vgg,1,abc\r\n";
    let msg = read_err(TraceKind::Tiresias, "t.csv", text);
    assert_names(&msg, "t.csv", 2, "interval");
}

#[test]
fn philly_arrival_span_above_the_limit_names_the_outlier_row() {
    // Rows 2-4 in November 2017, row 5 in 2099: 81 years, more than 10.
    let rows = format!("{OK_ROW}{OK_ROW}{OK_ROW}2099-01-01 00:00:00,10,1,10,aaa\n");
    let msg = philly_err(&rows);
    assert_names(&msg, "philly.csv", 5, "timestamp");
    assert!(msg.contains("more than the limit of 3653 days (core::limits::MAX_ARRIVAL_SPAN)"), "{msg}");
    assert!(msg.contains("farthest from the median"), "{msg}");
    // The outlier first in time is named too.
    let rows = format!("1991-01-01 00:00:00,10,1,10,aaa\n{OK_ROW}{OK_ROW}{OK_ROW}");
    assert_names(&philly_err(&rows), "philly.csv", 2, "timestamp");
}

#[test]
fn relative_traces_bound_arrivals_durations_and_steps() {
    let itp = "job_id,submission_time,duration,num_gpu\n";
    let cases: Vec<(TraceKind, &str, String, u64, &str, &str)> = vec![
        (TraceKind::Itp, "c.csv", format!("{itp}a,1e308,3,1\n"), 2, "submission_time", "MAX_ARRIVAL_SPAN"),
        (TraceKind::Itp, "c.csv", format!("{itp}a,1,1e12,1\n"), 2, "duration", "MAX_JOB_DURATION"),
        (
            TraceKind::Itp,
            "c.csv",
            format!("{itp}a,1,inf,1\n"),
            2,
            "duration",
            "expected a non-negative number",
        ),
        (
            TraceKind::Tiresias,
            "t.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,1,vgg,1e308,1\n"
                .into(),
            2,
            "duration",
            "MAX_JOB_DURATION",
        ),
        (
            TraceKind::Pollux,
            "w.csv",
            "name,time,application,num_replicas,batch_size\nx,1e12,ncf,1,32\n".into(),
            2,
            "time",
            "MAX_ARRIVAL_SPAN",
        ),
        (
            TraceKind::Pollux,
            "w.csv",
            "name,time,application,num_replicas,batch_size\nx,1,ncf,4294967295,32\n".into(),
            2,
            "num_replicas",
            "MAX_GPUS_PER_JOB",
        ),
        (
            TraceKind::Gavel,
            "g.trace",
            "A\tcmd\t-n\t1\t18446744073709551615\t0\t1\n".into(),
            1,
            "total_steps",
            "MAX_JOB_STEPS",
        ),
        (
            TraceKind::Gavel,
            "g.trace",
            "A\tcmd\t-n\t1\t10\t1e308\t1\n".into(),
            1,
            "arrival_time",
            "MAX_ARRIVAL_SPAN",
        ),
        (
            TraceKind::Gavel,
            "g.trace",
            "A\tcmd\tdir\t-n\t1\t10\t4294967295\t1\t-1\t0\n".into(),
            1,
            "scale_factor",
            "MAX_GPUS_PER_JOB",
        ),
    ];
    for (kind, name, text, line, field, limit) in cases {
        let msg = read_err(kind, name, &text);
        assert_names(&msg, name, line, field);
        assert!(msg.contains(limit), "{msg}");
    }
}

const OPENB_HEADER: &str =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";

#[test]
fn openb_pods_and_nodes_are_bounded() {
    let cases = [
        ("p,1000,10,4294967295,1000,,LS,Running,5,30,20\n", "num_gpu", "MAX_GPUS_PER_JOB"),
        ("p,1000,10,1,1000,,LS,Running,999999999999,30,20\n", "creation_time", "MAX_ARRIVAL_SPAN"),
        ("p,1000,10,1,1000,,LS,Running,5,99999999999,20\n", "deletion_time", "MAX_JOB_DURATION"),
    ];
    for (row, field, limit) in cases {
        let msg = read_err(TraceKind::Openb, "p.csv", &format!("{OPENB_HEADER}{row}"));
        assert_names(&msg, "p.csv", 2, field);
        assert!(msg.contains(limit), "{msg}");
    }
    let dir = TempDir::new("openb-nodes");
    let path = dir.write("n.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,4294967295,V100M16\n");
    let msg = read_openb_nodes(&path).expect_err("too many GPUs").to_string();
    assert_names(&msg, "n.csv", 2, "gpu");
    assert!(msg.contains("MAX_GPUS_PER_NODE"), "{msg}");
}

#[test]
fn invalid_utf8_is_reported_by_line() {
    let dir = TempDir::new("utf8");
    let path = dir.path().join("c.csv");
    let mut bytes = b"job_id,submission_time,duration,num_gpu\n\na,1,3,1\nb,2,".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b",1\n");
    std::fs::write(&path, &bytes).expect("write");
    let msg = read_trace(TraceKind::Itp, &path, &Slice::all()).expect_err("not utf-8").to_string();
    assert!(msg.contains("c.csv line 4: not UTF-8 text (invalid byte at column 5)"), "{msg}");
    let path = dir.path().join("a.csv");
    let mut bytes = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,1,2\n".to_vec();
    bytes.extend_from_slice(&[0xc3, b'\n']);
    std::fs::write(&path, &bytes).expect("write");
    let msg = read_azure_csv(&path).expect_err("not utf-8").to_string();
    assert!(msg.contains("a.csv line 3: not UTF-8 text"), "{msg}");
}

#[test]
fn broken_gzip_is_not_reported_twice() {
    let dir = TempDir::new("gzip");
    let path = dir.path().join("bad.csv.gz");
    std::fs::write(&path, [0x1f, 0x8b, 0x08, 0x00, 0x01]).expect("write");
    let err = read_trace(TraceKind::Itp, &path, &Slice::all()).expect_err("broken gzip");
    let text = chain(&err);
    let parts: Vec<&str> = text.split(": ").collect();
    for pair in parts.windows(2) {
        assert_ne!(pair[0], pair[1], "repeated text in {text:?}");
    }
    let err = read_azure_csv(&path).expect_err("broken gzip");
    let text = chain(&err);
    assert!(!text.contains("stream: incomplete") && text.split(": ").count() <= 3, "{text}");
    let missing = read_mooncake_jsonl(&dir.path().join("none.jsonl")).expect_err("missing");
    assert!(chain(&missing).starts_with(&format!("{}", dir.path().join("none.jsonl").display())));
}

#[test]
fn slice_window_reversed_or_empty_is_said_explicitly() {
    let dir = TempDir::new("slice");
    let path = dir.write("philly.csv", &format!("{PHILLY_HEADER}{OK_ROW}"));
    let wall = |text: &str| SliceBound::parse(text).expect("bound");
    let reversed = Slice { start: Some(wall("2017-11-13")), end: Some(wall("2017-11-06")), max_jobs: None };
    let msg = read_trace(TraceKind::Philly, &path, &reversed).expect_err("reversed").to_string();
    assert!(msg.contains("reversed"), "{msg}");
    assert!(msg.contains("2017-11-13 00:00:00") && msg.contains("2017-11-06 00:00:00"), "{msg}");
    let empty = Slice { start: Some(wall("2017-11-06")), end: Some(wall("2017-11-06")), max_jobs: None };
    let msg = read_trace(TraceKind::Philly, &path, &empty).expect_err("empty").to_string();
    assert!(msg.contains("is empty") && msg.contains("--from") && msg.contains("--to"), "{msg}");
    let itp = dir.write("c.csv", "job_id,submission_time,duration,num_gpu\na,1,3,1\n");
    let secs = Slice { start: Some(wall("100")), end: Some(wall("50")), max_jobs: None };
    let msg = read_trace(TraceKind::Itp, &itp, &secs).expect_err("reversed").to_string();
    assert!(msg.contains("100 s") && msg.contains("50 s"), "{msg}");
    let msg = Slice::window(Some("200"), Some("200"), None).expect_err("empty").to_string();
    assert!(msg.contains("200 s"), "{msg}");
    // Bounds outside the limits.
    let ancient = Slice { start: Some(wall("0001-01-01")), end: None, max_jobs: None };
    let msg = read_trace(TraceKind::Philly, &path, &ancient).expect_err("year 1").to_string();
    assert!(msg.contains("MIN_UNIX_SECONDS"), "{msg}");
    let far = Slice { start: Some(wall("1e308")), end: None, max_jobs: None };
    let msg = read_trace(TraceKind::Itp, &itp, &far).expect_err("1e308").to_string();
    assert!(msg.contains("MAX_ARRIVAL_SPAN"), "{msg}");
}

const AZURE_HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

fn azure(text: &str) -> Result<cotenant_trace::requests::RequestTrace, String> {
    parse_azure_csv(text.as_bytes(), "az.csv").map_err(|e| e.to_string())
}

#[test]
fn azure_line_numbers_count_blank_lines() {
    let text = format!("{AZURE_HEADER}2023-11-16 18:15:46.0,1,2\n\n\n2023-11-16 18:15:47.0,x,2\n");
    let msg = azure(&text).expect_err("bad tokens");
    assert_names(&msg, "az.csv", 5, "ContextTokens");
    let text = format!("{AZURE_HEADER}\r\n2023-11-16 18:15:46.0,1,2\r\n\r\n2023-11-16 18:15:47.0,3,4\r\n");
    let trace = azure(&text).expect("reads");
    assert_eq!(trace.records.iter().map(|r| r.line).collect::<Vec<_>>(), [3, 5]);
}

#[test]
fn azure_timestamps_outside_1990_2100_are_errors() {
    for stamp in ["1970-01-01 00:00:00", "9999-12-31 00:00:00", "0001-01-01 00:00:00"] {
        let msg = azure(&format!("{AZURE_HEADER}2023-11-16 18:15:46.0,1,2\n{stamp},1,2\n")).expect_err(stamp);
        assert_names(&msg, "az.csv", 3, "TIMESTAMP");
        assert!(msg.contains("MIN_UNIX_SECONDS"), "{msg}");
    }
}

#[test]
fn azure_span_above_a_year_names_the_outlier() {
    let row = "2023-11-16 18:15:46.0,1,2\n";
    let msg = azure(&format!("{AZURE_HEADER}{row}{row}{row}2025-11-16 18:15:46.0,1,2\n")).expect_err("span");
    assert_names(&msg, "az.csv", 5, "TIMESTAMP");
    assert!(msg.contains("366 days (core::limits::MAX_REQUEST_SPAN)"), "{msg}");
}

#[test]
fn request_tokens_are_bounded() {
    let msg = azure(&format!("{AZURE_HEADER}2023-11-16 18:15:46.0,3000000,2\n")).expect_err("prompt");
    assert_names(&msg, "az.csv", 2, "ContextTokens");
    assert!(
        msg.contains("3000000 tokens exceeds the limit of 2097152 (core::limits::MAX_PROMPT_TOKENS)"),
        "{msg}"
    );
    let msg = azure(&format!("{AZURE_HEADER}2023-11-16 18:15:46.0,3,4294967296\n")).expect_err("output");
    assert_names(&msg, "az.csv", 2, "GeneratedTokens");
    assert!(msg.contains("MAX_OUTPUT_TOKENS"), "{msg}");
    let msg =
        mooncake("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 2000000}").expect_err("output");
    assert_names(&msg, "m.jsonl", 1, "output_length");
    assert!(msg.contains("MAX_OUTPUT_TOKENS"), "{msg}");
}

#[test]
fn zero_output_requests_are_skipped_and_counted() {
    let text = format!("{AZURE_HEADER}2023-11-16 18:15:46.0,10,0\n2023-11-16 18:15:47.0,10,5\n");
    let trace = azure(&text).expect("reads");
    assert_eq!(trace.records.len(), 1);
    assert_eq!(trace.records[0].line, 3);
    assert_eq!(trace.skipped.len(), 1);
    assert_eq!((trace.skipped[0].reason.as_str(), trace.skipped[0].rows), (SKIP_ZERO_OUTPUT, 1));
    let trace = mooncake(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 0}\n{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1}",
    )
    .expect("reads");
    assert_eq!((trace.records.len(), trace.skipped[0].rows), (1, 1));
    // A file of only zero-output requests has no requests.
    assert!(azure(&format!("{AZURE_HEADER}2023-11-16 18:15:46.0,10,0\n")).is_err());
}

fn mooncake(text: &str) -> Result<cotenant_trace::requests::RequestTrace, String> {
    parse_mooncake_jsonl(text.as_bytes(), "m.jsonl").map_err(|e| e.to_string())
}

#[test]
fn mooncake_errors_name_line_and_field_and_bound_timestamps() {
    let ok = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n";
    let cases = [
        (
            "{\"timestamp\": 1e308, \"input_length\": 1, \"output_length\": 1}",
            "timestamp",
            "MAX_REQUEST_SPAN",
        ),
        ("{\"timestamp\": 1e12, \"input_length\": 1, \"output_length\": 1}", "timestamp", "MAX_REQUEST_SPAN"),
        ("{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1}", "timestamp", "non-negative"),
        ("{\"timestamp\": 1, \"output_length\": 1}", "input_length", "missing"),
        (
            "{\"timestamp\": 1, \"input_length\": \"x\", \"output_length\": 1}",
            "input_length",
            "expected a number",
        ),
        ("{\"timestamp\": 1, \"input_length\": 1.5, \"output_length\": 1}", "input_length", "integer"),
        (
            "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [-1]}",
            "hash_ids",
            "integers",
        ),
    ];
    for (row, field, text) in cases {
        let msg = mooncake(&format!("{ok}\n{row}\n")).expect_err(row);
        assert_names(&msg, "m.jsonl", 3, field);
        assert!(msg.contains(text), "{msg}");
    }
    let msg = mooncake(&format!("{ok}{{\"timestamp\": 1,")).expect_err("bad json");
    assert!(msg.starts_with("m.jsonl line 2: not a JSON object"), "{msg}");
    assert!(!msg.contains("at line 1"), "{msg}");
}

#[test]
fn synthetic_specs_are_bounded() {
    use cotenant_trace::SyntheticSpec;
    let cases = [
        ("durations=1e308", "durations", "MAX_JOB_DURATION"),
        ("durations=1e12", "durations", "1e12 s exceeds the limit of 366 days"),
        ("gpus=4294967295", "gpus", "MAX_GPUS_PER_JOB"),
        ("gpus=x", "gpus", "expected `gavel` or a positive integer"),
        ("gpus=1048577", "gpus", "MAX_GPUS_PER_JOB"),
        ("tenants=1000000000", "tenants", "MAX_TENANTS"),
        ("jobs=10000000,rate=1e-300/h", "rate", "MAX_ARRIVAL_SPAN"),
        ("jobs=1000,rate=0.01/h", "rate", "MAX_ARRIVAL_SPAN"),
    ];
    for (spec, key, text) in cases {
        let msg = SyntheticSpec::parse(spec).expect_err(spec).to_string();
        assert!(msg.contains(&format!("key `{key}`")) && msg.contains(text), "{spec}: {msg}");
    }
    assert!(SyntheticSpec::parse("jobs=1000,rate=1/h,durations=31622400,gpus=1048576").is_ok());
}

#[test]
fn philly_vc_node_counts_are_bounded() {
    let dir = TempDir::new("vc");
    let path = dir.write("philly_vc.csv", "vc,node num\nabc,4294967295\n");
    let msg = cotenant_trace::read_philly_vc(&path).expect_err("too many nodes").to_string();
    assert_names(&msg, "philly_vc.csv", 2, "node num");
    assert!(msg.contains("MAX_CLUSTER_NODES"), "{msg}");
    let path = dir.write("philly_vc.csv", "vc,node num\n,4\n");
    assert_names(
        &cotenant_trace::read_philly_vc(&path).expect_err("no name").to_string(),
        "philly_vc.csv",
        2,
        "vc",
    );
}

#[test]
fn openb_fractional_share_of_several_gpus_is_an_error() {
    let msg =
        read_err(TraceKind::Openb, "p.csv", &format!("{OPENB_HEADER}p,1000,10,4,500,,LS,Running,5,30,20\n"));
    assert_names(&msg, "p.csv", 2, "gpu_milli");
    assert!(msg.contains("num_gpu is 4"), "{msg}");
}

/// Gavel: a job type missing from the throughput table is named by file, line and field.
#[test]
fn gavel_job_type_missing_from_the_table_names_the_line() {
    use cotenant_trace::gavel_throughputs::{check_workload_rates, parse_gavel_throughputs};
    let table = parse_gavel_throughputs(
        r#"{"v100": {"('ResNet-18 (batch size 64)', 1)": {"null": 10.0}}, "k80": {"('ResNet-18 (batch size 64)', 1)": {"null": 2.0}}}"#,
        "t.json",
    )
    .expect("table");
    let dir = TempDir::new("gavel-types");
    let path = dir.write(
        "g.trace",
        "ResNet-18 (batch size 64)\tcmd\t-n\t1\t10\t0\t1\n\nLM (batch size 5)\tcmd\t-n\t1\t10\t5\t1\n\
         ResNet-18 (batch size 64)\tcmd\t-n\t1\t10\t9\t2\n",
    );
    let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
    let gpus = ["V100".to_string(), "k80".to_string()];
    let msg = check_workload_rates(&w, &table, &gpus).expect_err("unknown type").to_string();
    assert_names(&msg, "g.trace", 3, "job_type");
    assert!(msg.contains("no job type \"LM (batch size 5)\" at any scale factor"), "{msg}");
    let path = dir.write("h.trace", "ResNet-18 (batch size 64)\tcmd\t-n\t1\t10\t9\t2\n");
    let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
    let msg = check_workload_rates(&w, &table, &gpus).expect_err("scale 2").to_string();
    assert_names(&msg, "h.trace", 1, "job_type");
    assert!(msg.contains("at scale factor 2 on GPU type V100") && msg.contains("scale factors 1"), "{msg}");
    // 10^11 steps at 10 steps/s on V100 (checked first): 115,741 days.
    let path = dir.write("slow.trace", "ResNet-18 (batch size 64)\tcmd\t-n\t1\t100000000000\t9\t1\n");
    let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
    let msg = check_workload_rates(&w, &table, &gpus).expect_err("too slow").to_string();
    assert_names(&msg, "slow.trace", 1, "total_steps");
    assert!(msg.contains("10 steps/s on V100 take 115741 days") && msg.contains("MAX_JOB_DURATION"), "{msg}");
    let path = dir.write("ok.trace", "ResNet-18 (batch size 64)\tcmd\t-n\t1\t10\t9\t1\n");
    let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
    assert!(check_workload_rates(&w, &table, &gpus).is_ok());
}

#[test]
fn throughput_table_utf8_errors_name_the_line() {
    let dir = TempDir::new("tput");
    let path = dir.path().join("t.json");
    std::fs::write(&path, b"{\n\"v100\": {\"\xff\": {}}\n}\n").expect("write");
    let err = cotenant_trace::gavel_throughputs::read_gavel_throughputs(&path).expect_err("not utf-8");
    let msg = chain(&err);
    assert!(msg.contains("t.json: not JSON: line 2: not UTF-8 text (invalid byte at column 11)"), "{msg}");
}

/// The bundled Gavel traces pass the rate check on the bundled table (so the check
/// changes nothing for them).
#[test]
fn bundled_gavel_traces_pass_the_rate_check() {
    use cotenant_trace::gavel_throughputs::{check_workload_rates, read_gavel_throughputs};
    let data = cotenant_trace::bundled_data_dir();
    let table = read_gavel_throughputs(&data.join(cotenant_trace::BUNDLED_GAVEL_THROUGHPUTS)).expect("table");
    let gpus = ["v100".to_string(), "p100".to_string(), "k80".to_string()];
    let dir = data.join(cotenant_trace::BUNDLED_GAVEL_PHYSICAL);
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("physical_cluster") {
        let path = entry.expect("entry").path();
        let w = read_trace(TraceKind::Gavel, &path, &Slice::all()).expect("reads");
        check_workload_rates(&w, &table, &gpus).unwrap_or_else(|e| panic!("{e}"));
        checked += 1;
    }
    assert_eq!(checked, 8);
}
