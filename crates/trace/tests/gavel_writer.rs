//! Writing a workload as a Gavel 10-column trace and reading it back.

mod common;

use common::TempDir;
use cotenant_trace::{generate, read_gavel, write_gavel_trace, Slice, SyntheticSpec};

#[test]
fn generated_workload_round_trips_through_the_gavel_format() {
    let spec = SyntheticSpec::parse(
        "jobs=50,rate=40/h,seed=3,job-types=ResNet-18 (batch size 64)|LM (batch size 5)",
    )
    .unwrap();
    let mut w = generate(&spec);
    w.jobs[3].priority = 2;
    let mut out = Vec::new();
    write_gavel_trace(&w, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(first.split('\t').count(), 10);
    assert!(first.ends_with("\t-1.000000\t0"), "{first}");
    let dir = TempDir::new("gavel-write");
    let back = read_gavel(&dir.write("synthetic.trace", &text), &Slice::all()).unwrap();
    assert_eq!(back.jobs.len(), w.jobs.len());
    for (a, b) in w.jobs.iter().zip(&back.jobs) {
        assert_eq!(a.gpus, b.gpus);
        assert_eq!(a.priority, b.priority);
        assert_eq!(b.work, a.work.ceil());
        assert_eq!(w.job_types[a.job_type.unwrap() as usize], back.job_types[b.job_type.unwrap() as usize]);
        assert_eq!(a.arrival, b.arrival);
    }
}

#[test]
fn jobs_without_a_type_cannot_be_written() {
    let w = generate(&SyntheticSpec::parse("jobs=2").unwrap());
    let err = write_gavel_trace(&w, &mut Vec::new()).unwrap_err().to_string();
    assert!(err.contains("job0 has no job type"), "{err}");
}
