//! The synthetic generator: spec parsing, determinism, distributions.

use cotenant_trace::{generate, DurationDist, GpuDist, SyntheticSpec};

#[test]
fn parses_the_documented_example() {
    let spec = SyntheticSpec::parse(
        "jobs=1000,rate=20/h,seed=1,tenants=4,weights=1:1:2:4,durations=gavel,gpus=gavel",
    )
    .unwrap();
    assert_eq!((spec.jobs, spec.jobs_per_hour, spec.seed), (1000, 20.0, 1));
    assert_eq!(spec.weights, [1.0, 1.0, 2.0, 4.0]);
    assert_eq!((spec.durations.clone(), spec.gpus.clone()), (DurationDist::Gavel, GpuDist::Gavel));
    assert_eq!(SyntheticSpec::parse("rate=2/min").unwrap().jobs_per_hour, 120.0);
    assert_eq!(SyntheticSpec::parse("rate=1/s").unwrap().jobs_per_hour, 3600.0);
    assert_eq!(SyntheticSpec::parse("tenants=3").unwrap().weights, [1.0; 3]);
    let spec =
        SyntheticSpec::parse("durations=600,gpus=2,job-types=ResNet-18 (batch size 64)|LM (batch size 5)")
            .unwrap();
    assert_eq!((spec.durations, spec.gpus), (DurationDist::FixedSecs(600.0), GpuDist::Fixed(2)));
    assert_eq!(spec.job_types, ["ResNet-18 (batch size 64)", "LM (batch size 5)"]);
    // The canonical text form parses back to the same spec.
    let spec = SyntheticSpec::parse("jobs=5,rate=3.5/h,weights=1:2,job-types=a|b").unwrap();
    assert_eq!(SyntheticSpec::parse(&spec.to_string()).unwrap(), spec);
}

#[test]
fn spec_errors_name_the_key() {
    let cases = [
        ("jobs=0", "key `jobs`"),
        ("rate=20/day", "key `rate`: unknown unit"),
        ("rate=-1/h", "key `rate`"),
        ("tenants=3,weights=1:2", "key `weights`: 2 weights given for 3 tenants"),
        ("weights=1:x", "key `weights`"),
        ("durations=philly", "key `durations`"),
        ("gpus=0", "key `gpus`"),
        ("seed=abc", "key `seed`"),
        ("job-types=a||b", "key `job-types`"),
        ("arrivals=poisson", "key `arrivals`: unknown key (known: jobs, rate"),
    ];
    for (text, want) in cases {
        let msg = SyntheticSpec::parse(text).unwrap_err().to_string();
        assert!(msg.starts_with("synthetic spec") && msg.contains(want), "{text}: {msg}");
    }
}

#[test]
fn same_seed_same_jobs_other_seed_other_jobs() {
    let spec = SyntheticSpec::parse("jobs=500,rate=30/h,seed=7,weights=1:3,job-types=a|b|c").unwrap();
    let (a, b) = (generate(&spec), generate(&spec));
    assert_eq!(a.jobs, b.jobs);
    assert_eq!(a.source, b.source);
    let other = generate(&SyntheticSpec { seed: 8, ..spec.clone() });
    assert_ne!(a.jobs, other.jobs);
    assert_eq!(a.tenants.iter().map(|t| t.weight).collect::<Vec<_>>(), [1.0, 3.0]);
    assert_eq!(a.job_types, ["a", "b", "c"]);
    assert_eq!(a.lines, vec![0; 500]);
    for (i, job) in a.jobs.iter().enumerate() {
        assert_eq!(job.id.index(), i);
        assert!(job.tenant.index() < 2 && job.job_type.is_some_and(|t| t < 3));
        assert!(i == 0 || a.jobs[i - 1].arrival <= job.arrival);
    }
    assert_eq!(a.jobs[0].arrival.0, 0);
}

#[test]
fn distributions_match_gavel_roughly() {
    let spec = SyntheticSpec::parse("jobs=20000,rate=60/h,seed=1,tenants=4").unwrap();
    let w = generate(&spec);
    let n = w.jobs.len() as f64;
    // Mean inter-arrival gap: 60 s.
    let span_secs = w.jobs.last().unwrap().arrival.as_secs_f64();
    let mean_gap = span_secs / (n - 1.0);
    assert!((mean_gap - 60.0).abs() < 3.0, "mean gap {mean_gap}");
    // GPU counts: 70% 1, 10% 2, 15% 4, 5% 8.
    for (gpus, share) in [(1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05)] {
        let got = w.jobs.iter().filter(|j| j.gpus == gpus).count() as f64 / n;
        assert!((got - share).abs() < 0.02, "{gpus} GPUs: {got}");
    }
    assert!(w.jobs.iter().all(|j| [1, 2, 4, 8].contains(&j.gpus)));
    // Durations: 80% in 10^[1.5,3) minutes, 20% in 10^[3,4) minutes.
    let minutes: Vec<f64> = w.jobs.iter().map(|j| j.work / 60.0).collect();
    assert!(minutes.iter().all(|&m| (10f64.powf(1.5) - 1e-9..1e4 + 1e-9).contains(&m)));
    let long = minutes.iter().filter(|&&m| m >= 1000.0).count() as f64 / n;
    assert!((long - 0.20).abs() < 0.02, "long share {long}");
    // Within the short class, log10(minutes) is uniform: median near 2.25.
    let mut short: Vec<f64> = minutes.iter().filter(|&&m| m < 1000.0).map(|m| m.log10()).collect();
    short.sort_by(f64::total_cmp);
    let median = short[short.len() / 2];
    assert!((median - 2.25).abs() < 0.05, "short median {median}");
    // Tenants are drawn uniformly.
    for t in 0..4 {
        let got = w.jobs.iter().filter(|j| j.tenant.index() == t).count() as f64 / n;
        assert!((got - 0.25).abs() < 0.02, "tenant {t}: {got}");
    }
    // The estimate is the run time.
    assert!(w
        .jobs
        .iter()
        .all(|j| j.duration_estimate.is_some_and(|d| (d.as_secs_f64() - j.work).abs() < 1e-5)));
}

#[test]
fn elastic_fraction_marks_jobs_without_changing_them() {
    let rigid = generate(&SyntheticSpec::parse("jobs=2000,seed=7").unwrap());
    let half = generate(&SyntheticSpec::parse("jobs=2000,seed=7,elastic=0.5").unwrap());
    let shape = |w: &cotenant_trace::Workload| -> Vec<_> {
        w.jobs.iter().map(|j| (j.arrival, j.gpus, j.work.to_bits())).collect()
    };
    assert_eq!(shape(&rigid), shape(&half), "the elastic draws have a stream of their own");
    assert!(rigid.jobs.iter().all(|j| j.elastic.is_none()));
    let elastic: Vec<_> = half.jobs.iter().filter_map(|j| j.elastic.map(|e| (e, j.gpus))).collect();
    assert!((900..1100).contains(&elastic.len()), "{} of 2000", elastic.len());
    for (range, gpus) in elastic {
        assert_eq!((range.min, range.max), ((gpus / 2).max(1), gpus * 2));
    }
    assert!(half.source.ends_with(",elastic=0.5"), "{}", half.source);
    let err = SyntheticSpec::parse("elastic=1.5").unwrap_err().to_string();
    assert!(err.contains("elastic") && err.contains("between 0 and 1"), "{err}");
}
