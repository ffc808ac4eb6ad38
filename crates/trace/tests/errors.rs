//! Every error path: the message names the file, the 1-based line and the field,
//! and nothing panics.

mod common;

use common::{assert_names, TempDir};
use cotenant_trace::{parse_trace_arg, read_trace, Slice, TraceError, TraceKind};

const PHILLY_HEADER: &str = "timestamp,duration,num_gpus,gpu_time,cluster\n";

fn philly_error(body: &str) -> String {
    let dir = TempDir::new("philly-err");
    let path = dir.write("philly.csv", &format!("{PHILLY_HEADER}{body}"));
    read_trace(TraceKind::Philly, &path, &Slice::all()).expect_err("must fail").to_string()
}

#[test]
fn philly_non_numeric_gpus_names_line_and_field() {
    let ok = "2017-11-06 00:00:00,10.0,1,10.0,aaa\n";
    let body = format!("{}\n{ok}2017-11-06 00:00:00,10.0,x,10.0,aaa\n", ok.repeat(13));
    let msg = philly_error(&body);
    assert_names(&msg, "philly.csv", 17, "num_gpus");
    assert!(msg.ends_with("expected a positive integer, got \"x\""), "{msg}");
}

#[test]
fn philly_field_errors() {
    let cases = [
        ("2017-11-06 00:00:00,-5.0,1,10.0,aaa\n", "duration", "must not be negative"),
        ("2017-11-06 00:00:00,abc,1,10.0,aaa\n", "duration", "expected a non-negative number"),
        ("2017-11-06 00:00:00,NaN,1,10.0,aaa\n", "duration", "expected a non-negative number"),
        ("2017-11-06 00:00:00,5.0,0,10.0,aaa\n", "num_gpus", "expected a positive integer"),
        ("2017-11-06 00:00:00,5.0,-2,10.0,aaa\n", "num_gpus", "expected a positive integer"),
        ("2017-13-06 00:00:00,5.0,1,10.0,aaa\n", "timestamp", "expected a date"),
        ("2017-11-06 00:00:00,5.0,1,10.0,\n", "cluster", "empty field"),
    ];
    for (row, field, text) in cases {
        let msg = philly_error(row);
        assert_names(&msg, "philly.csv", 2, field);
        assert!(msg.contains(text), "{msg}");
    }
}

#[test]
fn wrong_field_count_and_missing_columns() {
    let msg = philly_error("2017-11-06 00:00:00,5.0,1,aaa\n");
    assert!(msg.contains("philly.csv line 2: expected 5 fields"), "{msg}");
    let dir = TempDir::new("missing");
    let path = dir.write("philly.csv", "timestamp,duration,gpus,gpu_time,cluster\n");
    let msg = read_trace(TraceKind::Philly, &path, &Slice::all()).unwrap_err().to_string();
    assert!(msg.contains("philly.csv line 1: missing column `num_gpus`"), "{msg}");
    let path = dir.write("empty.csv", "\n\n");
    let msg = read_trace(TraceKind::Itp, &path, &Slice::all()).unwrap_err().to_string();
    assert!(msg.contains("empty.csv: empty file"), "{msg}");
}

#[test]
fn missing_file_names_the_path() {
    let err =
        read_trace(TraceKind::Gavel, std::path::Path::new("/no/such/x.trace"), &Slice::all()).unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }));
    assert!(err.to_string().starts_with("/no/such/x.trace: "), "{err}");
}

#[test]
fn not_utf8_and_broken_gzip_are_errors() {
    let dir = TempDir::new("bytes");
    let path = dir.path().join("bad.csv");
    std::fs::write(&path, [0x66, 0xff, 0xfe, 0x0a]).unwrap();
    assert!(read_trace(TraceKind::Itp, &path, &Slice::all()).unwrap_err().to_string().contains("not UTF-8"));
    let path = dir.path().join("bad.csv.gz");
    std::fs::write(&path, [0x1f, 0x8b, 0x08, 0x00, 0x01]).unwrap();
    assert!(read_trace(TraceKind::Itp, &path, &Slice::all()).is_err());
}

#[test]
fn other_readers_name_line_and_field() {
    let dir = TempDir::new("other-err");
    let cases: [(TraceKind, &str, &str, u64, &str); 9] = [
        (TraceKind::Itp, "c.csv", "job_id,submission_time,duration,num_gpu\na,1,-3,1\n", 2, "duration"),
        (TraceKind::Itp, "c.csv", "job_id,submission_time,duration,num_gpu\n\na,1,3,1.5\n", 3, "num_gpu"),
        (TraceKind::Gavel, "g.trace", "A\tcmd\t-n\t1\tmany\t0\t1\n", 1, "total_steps"),
        (TraceKind::Gavel, "g.trace", "A\tcmd\tdir\t-n\t1\t10\t1\tw\t-1\t0\n", 1, "priority_weight"),
        (TraceKind::Gavel, "g.trace", "A\tcmd\tdir\t-n\t1\t10\t0\t1\t-1\t0\n", 1, "scale_factor"),
        (TraceKind::Pollux, "w.csv", "name,time,application,num_replicas,batch_size\nx,1,resnet,1,32\n", 2, "application"),
        (TraceKind::Pollux, "w.csv", "name,time,application,num_replicas,batch_size\nx,-1,ncf,1,32\n", 2, "time"),
        (
            TraceKind::Tiresias,
            "t.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n0,1,0,x,vgg,1,1\r\n",
            2,
            "iterations",
        ),
        (
            TraceKind::Openb,
            "p.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
             p,1000,10,1,1000,,LS,Running,5,10,20\n",
            2,
            "deletion_time",
        ),
    ];
    for (kind, name, text, line, field) in cases {
        let path = dir.write(name, text);
        let msg = read_trace(kind, &path, &Slice::all()).expect_err(name).to_string();
        assert_names(&msg, name, line, field);
    }
}

#[test]
fn gavel_rows_of_the_wrong_width() {
    let dir = TempDir::new("gavel-width");
    let path = dir.write("g.trace", "A\tcmd\t1\n");
    let msg = read_trace(TraceKind::Gavel, &path, &Slice::all()).unwrap_err().to_string();
    assert!(msg.contains("g.trace line 1: expected 7 or 10 tab-separated fields, got 3"), "{msg}");
}

#[test]
fn negative_openb_duration_says_so() {
    let dir = TempDir::new("openb-neg");
    let text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
                p,1000,10,1,1000,,LS,Running,5,10,20\n";
    let msg = read_trace(TraceKind::Openb, &dir.write("p.csv", text), &Slice::all()).unwrap_err().to_string();
    assert!(msg.contains("negative duration"), "{msg}");
}

#[test]
fn unknown_trace_kind_lists_the_known_ones() {
    let err = "alibaba".parse::<TraceKind>().unwrap_err().to_string();
    assert_eq!(err, "unknown trace kind `alibaba`; known kinds: philly, itp, gavel, pollux, tiresias, openb, sacct, kubectl");
    let err = parse_trace_arg("helios:/x.csv").unwrap_err().to_string();
    assert!(err.contains("unknown trace kind `helios`"), "{err}");
    assert!(parse_trace_arg("philly").unwrap_err().to_string().contains("KIND:PATH"));
    assert!(parse_trace_arg("philly:").is_err());
    let (kind, path) = parse_trace_arg("gavel:C:/traces/a.trace").unwrap();
    assert_eq!((kind, path.to_str().unwrap()), (TraceKind::Gavel, "C:/traces/a.trace"));
}

#[test]
fn bad_slices() {
    assert!(Slice::window(Some("2017-11-13"), Some("2017-11-06"), None).is_err());
    assert!(Slice::window(Some("10"), Some("2017-11-06"), None).is_err());
    assert!(Slice::window(Some("-5"), None, None).is_err());
    assert!(Slice::window(Some("yesterday"), None, None).unwrap_err().to_string().contains("yesterday"));
}
