//! Workload classes (`--synthetic ...,classes=`): the estimates by hand, each class's
//! draws within its stated ranges, seeded determinism, the spec's errors, and every
//! existing synthetic spec producing the very workload it produced before classes.

use cotenant_core::{CommPattern, JobKind, Span};
use cotenant_trace::workload_classes::{
    hipmcl_memory, mcl_gpus, megatron_comm_fraction, young_interval_secs, WorkloadClass, HIPMCL_PROCESS_GB,
    LLM_ACHIEVED_FLOPS, LLM_SHAPES, MCL_DEGREE, MCL_VERTICES, NIC_BYTES_PER_SEC,
};
use cotenant_trace::{generate, SyntheticSpec, Workload};

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// The 18.4B row (256 GPUs, t = 8, p = 1, d = 32, B = 1,024, s = 2,048) by hand:
/// T_comp = 8 x 18.4e9 x 1024 x 2048 / (256 x 140e12) = 3.0870e17 / 3.584e16 = 8.61330 s;
/// all-reduce = 2 x 31/32 x 2 x 18.4e9 / 8 bytes = 8.9125e9 B, / 25e9 B/s = 0.35650 s;
/// no pipeline sends; f = 0.35650 / (8.61330 + 0.35650) = 0.039744.
/// The 39.1B row (512 GPUs, p = 2, d = 32, B = 1,536, h = 8,192):
/// T_comp = 8 x 39.1e9 x 1536 x 2048 / (512 x 140e12) = 13.72745 s;
/// all-reduce = 1.9375 x 2 x 39.1e9 / 16 = 9.4695e9 B -> 0.378781 s;
/// pipeline = 2 x 2 x 1536 x 2048 x 8192 / 32 = 3.2212e9 B -> 0.128849 s;
/// f = 0.507630 / (13.72745 + 0.507630) = 0.035661.
#[test]
fn megatron_comm_fraction_by_hand() {
    let f = megatron_comm_fraction(&LLM_SHAPES[0], LLM_ACHIEVED_FLOPS, NIC_BYTES_PER_SEC);
    assert!(close(f, 0.039744, 1e-4), "{f}");
    let f = megatron_comm_fraction(&LLM_SHAPES[1], LLM_ACHIEVED_FLOPS, NIC_BYTES_PER_SEC);
    assert!(close(f, 0.035661, 1e-4), "{f}");
    // Slower links weigh communication more.
    let slow = megatron_comm_fraction(&LLM_SHAPES[1], LLM_ACHIEVED_FLOPS, NIC_BYTES_PER_SEC / 4.0);
    assert!(slow > 3.5 * f && slow < 4.0 * f, "{slow}");
    for shape in LLM_SHAPES {
        let layout = shape.layout();
        assert_eq!((layout.tensor, layout.gpus(), layout.data), (8, shape.gpus, 32));
    }
}

/// Llama 3: 419 interruptions in 54 days on 16,384 GPUs -> 54 x 24 x 16384 / 419 =
/// 50,677.0 GPU-hours each. A 256-GPU gang: 197.957 h = 712,645 s between interruptions;
/// with a 60 s checkpoint, sqrt(2 x 60 x 712,645) = 9,247.6 s. 2,048 GPUs: 3,269.5 s.
#[test]
fn young_interval_by_hand() {
    assert!(close(young_interval_secs(256, 60.0), 9247.56, 1e-5));
    assert!(close(young_interval_secs(2048, 60.0), 3269.51, 1e-5));
}

/// HipMCL's estimate for 1e6 vertices of degree 20 on 16 processes (grid 4 x 4):
/// input = 2e7/16 x 24 x 4 = 1.2e8 B; unmerged A^2 = 1e6 x 400 / 16 = 2.5e7 nonzeros,
/// x 24 x 2 = 1.2e9 B; local columns 250,000; d = 2.5e7 x 4 / 250,000 = 400, so k = 400;
/// kselect = 250,000 x 400 x 24 = 2.4e9 B; output = 250,000 x 400 / 4 x 48 = 1.2e9 B.
/// With 64 GB: one phase, peak 4.92e9 B. With 3 GB: remaining 3e9 - 1.32e9 = 1.68e9,
/// phases = 1 + floor(3.6e9 / 1.68e9) = 3, peak 1.32e9 + 3.6e9 / 3 = 2.52e9 B.
#[test]
fn hipmcl_memory_by_hand() {
    let m = hipmcl_memory(1e6, 20.0, 16, 64.0);
    assert_eq!((m.input, m.asquare, m.kselect, m.output, m.phases), (1.2e8, 1.2e9, 2.4e9, 1.2e9, 1));
    assert!(close(m.per_process, 4.92e9, 1e-12));
    let m = hipmcl_memory(1e6, 20.0, 16, 3.0);
    assert_eq!(m.phases, 3);
    assert!(close(m.per_process, 2.52e9, 1e-12));
    // The job asks for the smallest grid whose input and output take at most half the
    // per-process memory: the small network fits 16 processes; 7e7 x 500 needs 256
    // (input + output = (3.36e12 + 4.704e12) / p <= 32e9 first at p = 256).
    assert_eq!(mcl_gpus(1e6, 20.0).0, 16);
    assert_eq!(mcl_gpus(7e7, 500.0).0, 256);
}

proptest::proptest! {
    /// HipMCL's phases fit the memory: whenever the input and output copies leave room,
    /// the peak with the chosen phases is within the per-process memory, and with one
    /// phase fewer it would not be: phases = 1 + floor(X / R) is the smallest count
    /// with X / phases < R (X = asquare + kselect, R = memory - input - output).
    #[test]
    fn hipmcl_phases_fit_the_per_process_memory(
        vertices in 1e5f64..1e8, degree in 2f64..2000.0, grid in 1u32..40, gb in 1f64..512.0,
    ) {
        let p = grid * grid;
        let m = hipmcl_memory(vertices.round(), degree.round(), p, gb);
        let budget = gb * 1e9;
        if m.input + m.output < budget {
            proptest::prop_assert!(m.per_process <= budget * (1.0 + 1e-12), "{m:?}");
            if m.phases > 1 {
                let fewer = m.input + m.output + (m.asquare + m.kselect) / (m.phases - 1) as f64;
                proptest::prop_assert!(fewer >= budget * (1.0 - 1e-12), "{m:?}");
            }
        } else {
            proptest::prop_assert_eq!(m.phases, 1);
        }
    }
}

#[test]
fn each_class_draws_within_its_stated_ranges() {
    for class in WorkloadClass::ALL {
        let params = class.params();
        for seed in [1, 2] {
            let text = format!("jobs=1500,seed={seed},class={}", class.name());
            let w = generate(&SyntheticSpec::parse(&text).unwrap());
            let sizes: Vec<u32> = params.gpus.iter().map(|(g, _)| *g).collect();
            for job in &w.jobs {
                let name = class.name();
                assert!(sizes.contains(&job.gpus), "{name}: {} GPUs", job.gpus);
                assert_eq!(job.kind, params.kind, "{name}");
                let hours = job.work / 3600.0;
                if params.gavel_durations {
                    let minutes = job.work / 60.0;
                    assert!(
                        (10f64.powf(1.5) - 1e-9..=1e4 + 1e-9).contains(&minutes),
                        "{name}: {minutes} min"
                    );
                } else {
                    let (low, high) = params.hours;
                    assert!(hours >= low - 1.0 / 3600.0 && hours <= high + 1.0 / 3600.0, "{name}: {hours} h");
                }
                assert_eq!(job.duration_estimate, Some(Span::from_secs_f64_ceil(job.work)));
                let p = &job.profile;
                assert_eq!(p.comm_pattern, params.comm_pattern, "{name}");
                assert_eq!(p.sensitivity, params.sensitivity, "{name}");
                assert!((0.0..=1.0).contains(&p.comm_fraction), "{name}");
                match job.elastic {
                    Some(e) => {
                        assert!(params.elastic, "{name}");
                        assert_eq!((e.min, e.max), ((job.gpus / 2).max(1), job.gpus * 2), "{name}");
                    }
                    None => assert!(!params.elastic, "{name}"),
                }
                match class {
                    WorkloadClass::LlmPretrain => {
                        assert!(job.gpus.is_power_of_two() && (256..=2048).contains(&job.gpus));
                        let layout = p.layout.expect("a layout");
                        assert_eq!((layout.tensor, layout.gpus()), (8, job.gpus));
                        assert!((0.03..0.045).contains(&p.comm_fraction), "{}", p.comm_fraction);
                        let young = young_interval_secs(job.gpus, 60.0);
                        assert_eq!(p.checkpoint_interval, Some(Span::from_secs_f64_ceil(young)));
                    }
                    WorkloadClass::Mcl => {
                        // The host memory is HipMCL's peak per process times the processes,
                        // under the per-process memory.
                        let gib = f64::from(job.memory_gib);
                        assert!(gib > 0.0);
                        assert!(
                            gib * f64::from(1u32 << 30) / f64::from(job.gpus)
                                <= HIPMCL_PROCESS_GB * 1e9 + 2e9
                        );
                        assert_eq!(p.layout, None);
                    }
                    WorkloadClass::HpcLqcd | WorkloadClass::HpcDpd => {
                        assert_eq!(p.comm_pattern, CommPattern::Halo);
                        assert!(p.checkpoint_interval.is_some());
                    }
                    WorkloadClass::Inference => {
                        assert!(hours >= 168.0 - 1e-3 && p.sensitivity < 0.5 && p.comm_fraction == 0.0)
                    }
                    WorkloadClass::Etl => {
                        assert!(hours <= 0.5 + 1e-3 && p.sensitivity < 0.5);
                        assert_eq!(job.memory_gib, 64 * job.gpus);
                    }
                    _ => {}
                }
            }
            // Every stated size is drawn, and log-uniform run times spread over the range.
            for size in &sizes {
                let drawn = w.jobs.iter().any(|j| j.gpus == *size);
                assert!(drawn || class == WorkloadClass::Mcl, "{}: size {size} never drawn", class.name());
            }
        }
    }
    assert!(MCL_VERTICES.0 < MCL_VERTICES.1 && MCL_DEGREE.0 < MCL_DEGREE.1);
}

#[test]
fn the_mix_follows_its_weights() {
    let spec = SyntheticSpec::parse("jobs=20000,seed=4,classes=llm-pretrain:1|rlhf:3|etl:6").unwrap();
    let w = generate(&spec);
    let n = w.jobs.len() as f64;
    let llm = w.jobs.iter().filter(|j| j.gpus >= 256).count() as f64 / n;
    let rlhf = w.jobs.iter().filter(|j| j.kind == JobKind::Rlhf).count() as f64 / n;
    let etl = w.jobs.iter().filter(|j| j.kind == JobKind::Etl).count() as f64 / n;
    assert!((llm - 0.1).abs() < 0.01 && (rlhf - 0.3).abs() < 0.015 && (etl - 0.6).abs() < 0.015);
    // One note per class: counts and GPU-hours of work, summing to the workload.
    assert_eq!(w.notes.len(), 3);
    assert!(w.notes[0].starts_with("class llm-pretrain: "), "{}", w.notes[0]);
    let counted: usize = w
        .notes
        .iter()
        .map(|note| note.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(counted, w.jobs.len());
}

#[test]
fn classes_keep_arrivals_tenants_and_job_types_and_are_seeded() {
    let plain = generate(&SyntheticSpec::parse("jobs=800,seed=5,tenants=3,job-types=a|b").unwrap());
    let text = "jobs=800,seed=5,tenants=3,job-types=a|b,classes=llm-pretrain:2,rlhf:3,elastic:3,inference:1,hpc-dpd:1,hpc-snn:1,hpc-lqcd:1,mcl:1,etl:5";
    let mixed = generate(&SyntheticSpec::parse(text).unwrap());
    let shape =
        |w: &Workload| -> Vec<_> { w.jobs.iter().map(|j| (j.arrival, j.tenant, j.job_type)).collect() };
    assert_eq!(shape(&plain), shape(&mixed), "the classes draw from a stream of their own");
    assert_ne!(plain.jobs, mixed.jobs);
    let again = generate(&SyntheticSpec::parse(text).unwrap());
    assert_eq!(mixed.jobs, again.jobs);
    assert_eq!((mixed.source.clone(), mixed.notes.clone()), (again.source, again.notes));
    let other = generate(&SyntheticSpec::parse(&text.replace("seed=5", "seed=6")).unwrap());
    assert_ne!(mixed.jobs, other.jobs);
    // Comma and `|` separated lists are the same spec, and its text form parses back.
    let piped =
        SyntheticSpec::parse(&text.replace(",rlhf", "|rlhf").replace(",elastic:", "|elastic:")).unwrap();
    let spec = SyntheticSpec::parse(text).unwrap();
    assert_eq!(piped, spec);
    assert_eq!(SyntheticSpec::parse(&spec.to_string()).unwrap(), spec);
    assert!(mixed.source.ends_with(
        ",classes=llm-pretrain:2|rlhf:3|elastic:3|inference:1|hpc-dpd:1|hpc-snn:1|hpc-lqcd:1|mcl:1|etl:5"
    ));
    // The `elastic=` key still marks jobs, at their class's size.
    let marked = generate(&SyntheticSpec::parse("jobs=300,seed=2,class=rlhf,elastic=1").unwrap());
    assert!(marked.jobs.iter().all(|j| j.elastic.is_some_and(|e| e.max == 2 * j.gpus)));
    // Per-GPU host requests follow the class's size; a class's own memory wins when larger.
    let host =
        generate(&SyntheticSpec::parse("jobs=50,class=etl,cpus-per-gpu=2,mem-gib-per-gpu=100").unwrap());
    assert!(host.jobs.iter().all(|j| j.cpus == 2 * j.gpus && j.memory_gib == 100 * j.gpus));
}

#[test]
fn bad_class_keys_are_errors_naming_the_key() {
    let cases = [
        ("classes=llm:2", "key `classes`: unknown workload class \"llm\" (known: llm-pretrain, rlhf, elastic, inference, hpc-dpd, hpc-snn, hpc-lqcd, mcl, etl)"),
        ("class=gpt", "key `class`: unknown workload class \"gpt\" (known: llm-pretrain"),
        ("classes=rlhf:0", "key `classes`: class rlhf: expected a positive weight, got \"0\""),
        ("classes=rlhf:x", "key `classes`: class rlhf: expected a positive weight"),
        ("classes=rlhf|rlhf", "key `classes`: class rlhf given twice"),
        ("class=rlhf|etl", "key `class`: expected one class name"),
        ("class=rlhf,classes=etl", "key `classes`: give either `classes` or `class`, once"),
        ("classes=rlhf,gpus=8", "key `gpus`: workload classes set each job's GPUs and run time"),
        ("durations=60,class=etl", "key `durations`: workload classes set"),
        ("classes=rlhf,bogus", "key `classes`: unknown workload class \"bogus\""),
        ("jobs=5,bogus", "expected key=value"),
    ];
    for (text, want) in cases {
        let msg = SyntheticSpec::parse(text).unwrap_err().to_string();
        assert!(msg.starts_with("synthetic spec") && msg.contains(want), "{text}: {msg}");
    }
}

fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Every field the generator sets, in a fixed text form (not `Debug`, so that a field
/// added to `JobSpec` later does not change it).
fn digest(w: &Workload) -> u64 {
    let mut text = format!("{}|{:?}|{:?}|", w.source, w.notes, w.job_types);
    for t in &w.tenants {
        text.push_str(&format!("{}:{};", t.name, t.weight));
    }
    for j in &w.jobs {
        let p = &j.profile;
        text.push_str(&format!(
            "{} {} {} {} {:x} {:?} {} {:?} {:?} {} {} {:?} {:x} {:x} {:x} {:?} {:?} {:x} {:?}\n",
            j.id.0,
            j.tenant.0,
            j.arrival.0,
            j.gpus,
            j.work.to_bits(),
            j.duration_estimate.map(|s| s.0),
            j.priority,
            j.kind,
            j.job_type,
            j.cpus,
            j.memory_gib,
            j.elastic.map(|e| (e.min, e.max)),
            j.gpu_memory.total_gib.to_bits(),
            j.gpu_memory.activation_gib.to_bits(),
            p.comm_fraction.to_bits(),
            p.comm_pattern,
            p.layout.map(|l| (l.tensor, l.pipeline, l.data)),
            p.sensitivity.to_bits(),
            p.checkpoint_interval.map(|s| s.0)
        ));
    }
    fnv(&text)
}

/// Digests of what main (before workload classes) generated for these specs, recorded
/// by running this digest on main's generator: adding the class keys moved nothing.
#[test]
fn existing_specs_generate_what_they_generated_before_classes() {
    let before: [(&str, u64); 6] = [
        ("jobs=300", 0x4c360cabfaf15af3),
        ("jobs=500,rate=30/h,seed=7,tenants=4,weights=1:1:2:4", 0x123556e1e283299c),
        ("jobs=400,seed=3,durations=600,gpus=2,job-types=a|b|c,job-mix=1:2:3", 0xd33756d92faf05c5),
        ("jobs=400,seed=9,elastic=0.5", 0x21d72d23a46e154d),
        ("jobs=400,seed=11,preset=synergy", 0x61d44c5d367ff509),
        ("jobs=200,seed=5,cpus-per-gpu=2.5,mem-gib-per-gpu=10,rate=2/min", 0xa5222e657b2726c5),
    ];
    for (spec, want) in before {
        let w = generate(&SyntheticSpec::parse(spec).unwrap());
        assert_eq!(digest(&w), want, "{spec}");
        assert!(w.notes.is_empty());
    }
}
