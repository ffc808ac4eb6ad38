//! The bundled Philly trace: counts the design documents rely on.

mod common;

use std::sync::OnceLock;

use cotenant_core::Time;
use cotenant_trace::{
    apply_vc_quotas, bundled_data_dir, read_philly, read_philly_vc, read_trace, Slice, TraceKind, Workload,
    BUNDLED_PHILLY, BUNDLED_PHILLY_VC,
};

fn full_trace() -> &'static Workload {
    static FULL: OnceLock<Workload> = OnceLock::new();
    FULL.get_or_init(|| {
        read_philly(&bundled_data_dir().join(BUNDLED_PHILLY), &Slice::all()).expect("bundled philly")
    })
}

fn week() -> &'static Workload {
    static WEEK: OnceLock<Workload> = OnceLock::new();
    WEEK.get_or_init(|| {
        let path = bundled_data_dir().join(BUNDLED_PHILLY);
        read_trace(TraceKind::Philly, &path, &Slice::philly_default_week()).expect("bundled philly week")
    })
}

#[test]
fn full_trace_has_82247_jobs_from_15_vcs() {
    let w = full_trace();
    assert_eq!(w.jobs.len(), 82_247);
    assert_eq!(w.tenants.len(), 15);
    assert!(w.skipped.is_empty());
    assert_eq!(w.jobs[0].arrival, Time::ZERO);
    common::check_invariants(w);
    // Tenants are sorted by VC name.
    let names: Vec<&str> = w.tenants.iter().map(|t| t.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    // The README's first data row is line 2: 2017-10-09 07:01:55, 66 s, 1 GPU, VC 11cb48.
    let i = w.lines.iter().position(|&l| l == 2).expect("line 2 kept");
    assert_eq!(w.jobs[i].work, 66.0);
    assert_eq!(w.tenants[w.jobs[i].tenant.index()].name, "11cb48");
}

#[test]
fn default_week_has_6391_jobs_from_11_vcs() {
    let path = bundled_data_dir().join(BUNDLED_PHILLY);
    let week = week();
    assert_eq!(week.jobs.len(), 6_391);
    assert_eq!(week.tenants.len(), 11);
    common::check_invariants(week);
    // Rebased to the window start, 2017-11-06 00:00:00, not to the first job.
    assert!(week.jobs[0].arrival < Time::from_secs(86_400));
    assert!(week.jobs.last().expect("jobs").arrival < Time::from_secs(7 * 86_400));
    assert!(week.notes.iter().any(|n| n.contains("time 0 is 2017-11-06 00:00:00")), "{:?}", week.notes);
    // The same window written as strings gives the same jobs.
    let parsed = Slice::window(Some("2017-11-06"), Some("2017-11-13 00:00:00"), None).expect("window");
    assert_eq!(parsed, Slice::philly_default_week());
    // A full day: the README says 325 jobs from 9 VCs.
    let day = Slice::window(Some("2017-11-06"), Some("2017-11-07"), None).expect("day");
    let day = read_philly(&path, &day).expect("day");
    assert_eq!((day.jobs.len(), day.tenants.len()), (325, 9));
}

#[test]
fn job_limit_takes_the_first_jobs_in_arrival_order() {
    let path = bundled_data_dir().join(BUNDLED_PHILLY);
    let slice = Slice { max_jobs: Some(100), ..Slice::philly_default_week() };
    let first = read_philly(&path, &slice).expect("first 100");
    assert_eq!(first.jobs.len(), 100);
    common::check_invariants(&first);
}

#[test]
fn numeric_window_on_a_wall_clock_trace_is_an_error() {
    let path = bundled_data_dir().join(BUNDLED_PHILLY);
    let slice = Slice::window(Some("0"), Some("3600"), None).expect("numeric slice parses");
    let err = read_philly(&path, &slice).expect_err("relative window on philly");
    assert!(err.to_string().contains("wall-clock"), "{err}");
}

#[test]
fn vc_quotas_sum_to_the_cluster_for_the_default_week() {
    let mut tenants = week().tenants.clone();
    let vcs = read_philly_vc(&bundled_data_dir().join(BUNDLED_PHILLY_VC)).expect("vc file");
    assert_eq!(vcs.len(), 11);
    assert_eq!(vcs.iter().map(|v| v.nodes).sum::<u32>(), 352);
    let unlisted = apply_vc_quotas(&mut tenants, &vcs, 480);
    let total: u32 = tenants.iter().map(|t| t.gpu_quota.expect("quota set")).sum();
    assert_eq!(total, 480);
    // The week's 11 VCs are exactly the 11 VCs of philly_vc.csv.
    assert!(unlisted.is_empty(), "{unlisted:?}");
    // 6214e9 has 64 of 352 nodes: 480 * 64 / 352 = 87.27 GPUs.
    let vc = tenants.iter().find(|t| t.name == "6214e9").expect("6214e9");
    assert!(matches!(vc.gpu_quota, Some(87 | 88)), "{:?}", vc.gpu_quota);
}

/// Pollux's run-time model uses the median Philly GPU time of each size bucket,
/// after Pollux's own filters (duration >= 60 s, GPU time < 1000 GPU-hours).
#[test]
fn pollux_bucket_medians_match_the_bundled_philly_trace() {
    let w = full_trace();
    let mut buckets: [Vec<f64>; 4] = Default::default();
    for job in &w.jobs {
        let gpu_secs = job.work * f64::from(job.gpus);
        if job.work < 60.0 || gpu_secs >= 1000.0 * 3600.0 {
            continue;
        }
        let hours = gpu_secs / 3600.0;
        let bucket = if hours < 1.0 {
            0
        } else if hours < 10.0 {
            1
        } else if hours < 100.0 {
            2
        } else {
            3
        };
        buckets[bucket].push(gpu_secs);
    }
    for (values, (_, want)) in buckets.iter_mut().zip(cotenant_trace::POLLUX_BUCKET_MEDIAN_GPU_SECS) {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
        assert_eq!(median, want);
    }
}
