//! Synergy on the host-resource model: hand-computed TUNE and Greedy decisions,
//! OPT's bound, jobs wider than any node, and the invariant that CPUs and memory
//! are never over-committed (replayed from the command log).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use cotenant_core::host::split;
use cotenant_core::{
    Cluster, ClusterSpec, Command, EndReason, Engine, GpuId, GpuTypeId, HostAlloc, HostResource, Input,
    JobId, JobSpec, NodeId, Span, TenantSpec, Time,
};
use cotenant_perf::synergy::{PerGpu, SynergyMatrices};
use cotenant_policies::synergy::{opt_bound, OptJob};
use cotenant_policies::{build, PolicyParams};
use cotenant_sim::synergy_rates::SynergyRates;
use cotenant_sim::{simulate, Outcome, SimConfig};
use proptest::prelude::*;

const TYPES: [&str; 3] = ["image", "language", "speech"];
const IMAGE: u32 = 0;
const LANGUAGE: u32 = 1;
const SPEECH: u32 = 2;

/// Servers as Synergy's: 8 GPUs, 24 CPUs, 500 GiB.
fn servers(count: u32) -> ClusterSpec {
    let mut spec = ClusterSpec::homogeneous("v100", 0, 8);
    spec.add_nodes(GpuTypeId(0), count, 8, 24, 500);
    spec
}

fn job(id: u32, arrival_secs: u64, gpus: u32, class: u32) -> JobSpec {
    let mut job = JobSpec::new(id, 0, Time::from_secs(arrival_secs), gpus, 100_000.0);
    job.job_type = Some(class);
    job.duration_estimate = Some(Span::from_secs(100_000));
    job.cpus = 3 * gpus;
    job.memory_gib = 62 * gpus;
    job
}

fn engine(policy: &str, nodes: u32) -> Engine {
    let params = PolicyParams { job_types: TYPES.map(String::from).to_vec(), ..PolicyParams::default() };
    let cluster = Cluster::new(servers(nodes)).unwrap();
    Engine::new(cluster, vec![TenantSpec::new("t")], build(policy, &params).unwrap(), 0)
}

fn alloc(cpus: u32, memory_gib: u32) -> HostAlloc {
    HostAlloc { cpus, memory_gib }
}

fn host(e: &Engine, job: u32) -> HostAlloc {
    e.job(JobId(job)).unwrap().host
}

#[test]
fn tune_shrinks_a_running_job_back_to_proportional_to_admit_another() {
    // One server: 8 GPUs, 24 CPUs, 500 GiB. Image best case (bundled matrices) is
    // 12 CPUs and 125 GB per GPU; the proportional share of one GPU is
    // floor(24/8) = 3 CPUs and floor(500/8) = 62 GiB.
    let mut e = engine("synergy-tune", 1);
    // t=0: jobs 0 and 1 (image, 1 GPU) both get their best case: 2 x 12 = 24 CPUs
    // (none left), 2 x 125 = 250 GiB (250 left).
    let cmds = e.step(
        Time::ZERO,
        Input::Batch(vec![
            Input::JobSubmitted(job(0, 0, 1, IMAGE).into()),
            Input::JobSubmitted(job(1, 0, 1, IMAGE).into()),
        ]),
    );
    assert!(cmds.contains(&Command::Allocate { job: JobId(0), alloc: alloc(12, 125) }));
    assert_eq!((host(&e, 0), host(&e, 1)), (alloc(12, 125), alloc(12, 125)));
    // t=10 s (mid-round): job 2 (image) arrives. Best case (12, 125) needs 12 CPUs, 0
    // free; proportional (3, 62) needs 3, 0 free. So TUNE shrinks a co-located job
    // above proportional: both exceed it by 9 + 63 = 72, the tie goes to job 0, which
    // drops to (3, 62): 9 CPUs and 313 GiB free, and job 2 starts with (3, 62),
    // leaving 6 CPUs and 251 GiB. Job 0's rate changes: a Rerate follows.
    let cmds = e.step(Time::from_secs(10), Input::JobSubmitted(job(2, 10, 1, IMAGE).into()));
    assert_eq!(
        cmds,
        vec![
            Command::Allocate { job: JobId(0), alloc: alloc(3, 62) },
            Command::Allocate { job: JobId(2), alloc: alloc(3, 62) },
            Command::Start { job: JobId(2), gpus: vec![GpuId(2)] },
            Command::Rerate { job: JobId(0), partners: vec![] },
        ]
    );
    assert_eq!((host(&e, 0), host(&e, 1), host(&e, 2)), (alloc(3, 62), alloc(12, 125), alloc(3, 62)));
    let free = e.cluster().host().free(NodeId(0));
    assert_eq!(free, alloc(6, 251));
    // t=300 s, a round boundary: job 0 would grow back to (12, 125) but only 6 CPUs
    // are free: nothing changes.
    let cmds = e.step(Time::from_secs(300), Input::Wakeup);
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(e.violations().is_empty(), "{:?}", e.violations());
}

#[test]
fn greedy_skips_a_job_whose_best_case_does_not_fit_and_starts_a_later_one() {
    // Job 0 (image) takes (12, 125), job 1 (speech, best case 9 CPUs, 125 GB) takes
    // (9, 125): 3 CPUs and 250 GiB left, 6 GPUs free.
    let mut e = engine("synergy-greedy", 1);
    e.step(
        Time::ZERO,
        Input::Batch(vec![
            Input::JobSubmitted(job(0, 0, 1, IMAGE).into()),
            Input::JobSubmitted(job(1, 0, 1, SPEECH).into()),
        ]),
    );
    assert_eq!((host(&e, 0), host(&e, 1)), (alloc(12, 125), alloc(9, 125)));
    // Job 2 (image) needs 12 CPUs: Greedy skips it (GPUs idle); job 3 (language,
    // best case 2 CPUs, 62.5 GB -> 62 GiB) fits and starts.
    let cmds = e.step(
        Time::from_secs(10),
        Input::Batch(vec![
            Input::JobSubmitted(job(2, 10, 1, IMAGE).into()),
            Input::JobSubmitted(job(3, 10, 1, LANGUAGE).into()),
        ]),
    );
    assert_eq!(
        cmds,
        vec![
            Command::Allocate { job: JobId(3), alloc: alloc(2, 62) },
            Command::Start { job: JobId(3), gpus: vec![GpuId(2)] },
        ]
    );
    assert!(e.pending().contains(&JobId(2)));
    // Its verdict (what `--explain` shows) names host resources, not the GPUs.
    assert_eq!(e.job(JobId(2)).unwrap().verdict, Some(cotenant_core::WaitReason::NoHostResources));
    assert_eq!(e.cluster().host().free(NodeId(0)), alloc(1, 188));
}

#[test]
fn opt_bounds_tune_on_a_small_case() {
    // One server, 8 single-GPU jobs at t=0 in id order: 3 image, 1 speech, 4 language.
    // TUNE, by hand (free CPUs, GiB after each):
    //  job 0 image best (12,125) -> 12, 375      job 1 image (12,125) -> 0, 250
    //  job 2 image: best no, proportional (3,62) no; shrink job 0 to (3,62) -> 9, 313;
    //               takes (3,62) -> 6, 251
    //  job 3 speech best (9,125) no; proportional (3,62) -> 3, 189
    //  job 4 language best (2,62) -> 1, 127
    //  job 5 language (2,62) no (1 CPU); shrink job 1 to (3,62) -> 10, 190; takes (2,62) -> 8, 128
    //  jobs 6, 7 language (2,62) -> 6, 66 -> 4, 4
    // Every job at its proportional throughput: total 8.0.
    let mut e = engine("synergy-tune", 1);
    let classes = [IMAGE, IMAGE, IMAGE, SPEECH, LANGUAGE, LANGUAGE, LANGUAGE, LANGUAGE];
    let jobs: Vec<JobSpec> = classes.iter().enumerate().map(|(i, &c)| job(i as u32, 0, 1, c)).collect();
    e.step(
        Time::ZERO,
        Input::Batch(jobs.iter().cloned().map(|spec| Input::JobSubmitted(spec.into())).collect()),
    );
    let got: Vec<HostAlloc> = (0..8).map(|j| host(&e, j)).collect();
    let p = alloc(3, 62);
    let l = alloc(2, 62);
    assert_eq!(got, vec![p, p, p, p, l, l, l, l]);
    assert_eq!(e.cluster().host().free(NodeId(0)), alloc(4, 4));
    let matrices = SynergyMatrices::bundled();
    let rates = SynergyRates::new(matrices.clone(), &TYPES.map(String::from)).unwrap();
    let tune: f64 = (0..8u32)
        .map(|j| {
            let state = e.job(JobId(j)).unwrap();
            let placed = cotenant_sim::Placed {
                gpus: &state.gpus,
                partners: &[],
                state: Some(state),
                cluster: e.cluster(),
            };
            cotenant_sim::RateModel::rate(&rates, &state.spec, &placed)
        })
        .sum();
    assert!((tune - 8.0).abs() < 1e-9, "{tune}");
    // OPT's LP, by hand: language at (2, 62.5) is its cheapest point at 1.0 (8 CPUs,
    // 250 GB for four); no choice below 1.0, so the other four need >= (3, 62.5)
    // each: all 250 GB left, 12 of the 16 CPUs left. The 4 spare CPUs go where the
    // matrix gains most per CPU: image 3->4 (+0.25) three times, then image 4->5
    // (+0.23); speech gains only 0.15. Total 8 + 0.98 = 8.98 >= TUNE's 8.0.
    let image = matrices.for_job_type("image").unwrap();
    let speech = matrices.for_job_type("speech").unwrap();
    let language = matrices.for_job_type("language").unwrap();
    let lp_jobs: Vec<OptJob<'_>> = [image, image, image, speech, language, language, language, language]
        .into_iter()
        .map(|matrix| OptJob { gpus: 1, matrix })
        .collect();
    let opt = opt_bound(&matrices, &lp_jobs, 24.0, 500.0).unwrap();
    assert!((opt.throughput - 8.98).abs() < 1e-6, "{}", opt.throughput);
    assert!(opt.throughput >= tune);
    assert_eq!(opt.choices[4], PerGpu { cpus: 2.0, memory_gib: 62.5 });
}

#[test]
fn a_job_wider_than_any_node_ends_with_a_reason_naming_what_it_asked() {
    let mut wide = job(0, 0, 1, IMAGE);
    wide.cpus = 30;
    let mut heavy = job(1, 0, 2, LANGUAGE);
    heavy.memory_gib = 1_200; // 600 GiB per node even spread over two: more than 500.
    let params = PolicyParams { job_types: TYPES.map(String::from).to_vec(), ..PolicyParams::default() };
    let rates = SynergyRates::new(SynergyMatrices::bundled(), &TYPES.map(String::from)).unwrap();
    let result = simulate(
        &[wide, heavy, job(2, 0, 1, IMAGE)],
        &[TenantSpec::new("t")],
        servers(2),
        build("synergy-tune", &params).unwrap(),
        &rates,
        &SimConfig::default(),
        &mut |_| {},
    )
    .unwrap();
    let reason = EndReason::WiderThanNodes { resource: HostResource::Cpus, requested: 30, largest_node: 24 };
    assert_eq!(result.jobs[0].outcome, Outcome::Ended(reason));
    assert_eq!(reason.to_string(), "wider than any node (30 CPUs requested; the largest node has 24)");
    let reason =
        EndReason::WiderThanNodes { resource: HostResource::Memory, requested: 1200, largest_node: 500 };
    assert_eq!(result.jobs[1].outcome, Outcome::Ended(reason));
    assert_eq!(result.jobs[2].outcome, Outcome::Completed);
}

#[test]
fn policies_that_ignore_host_resources_are_not_held_to_them() {
    // FIFO on servers that state CPUs: two jobs asking 20 CPUs each share a 24-CPU
    // server as before the host model existed (no refusal, no Allocate commands).
    let mut e = Engine::new(
        Cluster::new(servers(1)).unwrap(),
        vec![TenantSpec::new("t")],
        build("fifo", &PolicyParams::default()).unwrap(),
        0,
    );
    let mut a = job(0, 0, 1, IMAGE);
    a.cpus = 20;
    let mut b = job(1, 0, 1, IMAGE);
    b.cpus = 20;
    let cmds =
        e.step(Time::ZERO, Input::Batch(vec![Input::JobSubmitted(a.into()), Input::JobSubmitted(b.into())]));
    assert_eq!(cmds.len(), 2);
    assert!(cmds.iter().all(|c| matches!(c, Command::Start { .. })));
    assert!(!e.cluster().host().enabled());
}

#[derive(Clone, Debug)]
struct Case {
    nodes: u32,
    cpus: u32,
    memory_gib: u32,
    policy: &'static str,
    order: &'static str,
    jobs: Vec<JobSpec>,
}

fn case() -> impl Strategy<Value = Case> {
    let policies =
        prop::sample::select(vec!["synergy-tune", "synergy-greedy", "synergy-proportional", "synergy-opt"]);
    let orders = prop::sample::select(vec!["fifo", "srtf", "las", "ftf"]);
    (1u32..4, 8u32..40, 100u32..600, policies, orders).prop_flat_map(
        |(nodes, cpus, memory_gib, policy, order)| {
            let job = (
                0u64..3_000,
                prop::sample::select(vec![1u32, 1, 1, 2, 4, 8, 12]),
                60u64..20_000,
                0u32..3,
                0u32..5,
                0u32..80,
            );
            prop::collection::vec(job, 1..30).prop_map(move |mut shape| {
                shape.sort_by_key(|j| j.0);
                let jobs = shape
                    .iter()
                    .enumerate()
                    .map(|(i, &(arrival, gpus, secs, class, cpus_per_gpu, mem_per_gpu))| {
                        let mut j = JobSpec::new(i as u32, 0, Time::from_secs(arrival), gpus, secs as f64);
                        j.duration_estimate = Some(Span::from_secs(secs));
                        j.job_type = Some(class);
                        j.cpus = cpus_per_gpu * gpus;
                        j.memory_gib = mem_per_gpu * gpus;
                        j
                    })
                    .collect();
                Case { nodes, cpus, memory_gib, policy, order, jobs }
            })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Replays each run's commands on an independent ledger: per node, the CPUs and
    /// memory of the running jobs (their Allocate split over their GPUs' nodes)
    /// never exceed the node's.
    #[test]
    fn cpus_and_memory_are_never_over_committed(case in case()) {
        let mut spec = ClusterSpec::homogeneous("v100", 0, 8);
        spec.add_nodes(GpuTypeId(0), case.nodes, 8, case.cpus, case.memory_gib);
        let params = PolicyParams {
            job_types: TYPES.map(String::from).to_vec(),
            options: [("order".to_string(), case.order.to_string())].into(),
            ..PolicyParams::default()
        };
        let policy = build(case.policy, &params).unwrap();
        let rates = SynergyRates::new(SynergyMatrices::bundled(), &TYPES.map(String::from)).unwrap();
        let config = SimConfig { record: true, ..SimConfig::default() };
        let result = simulate(&case.jobs, &[TenantSpec::new("t")], spec, policy, &rates, &config, &mut |_| {}).unwrap();
        let node_of = |g: GpuId| g.0 / 8;
        let mut alloc: BTreeMap<JobId, HostAlloc> = BTreeMap::new();
        let mut held: BTreeMap<JobId, Vec<GpuId>> = BTreeMap::new();
        let used = |held: &BTreeMap<JobId, Vec<GpuId>>, alloc: &BTreeMap<JobId, HostAlloc>| {
            let mut per_node = vec![(0u32, 0u32); case.nodes as usize];
            for (job, gpus) in held {
                let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
                for &g in gpus {
                    *counts.entry(node_of(g)).or_default() += 1;
                }
                let weights: Vec<u32> = counts.values().copied().collect();
                let a = alloc.get(job).copied().unwrap_or_default();
                let (cpus, memory) = (split(a.cpus, &weights), split(a.memory_gib, &weights));
                for (i, node) in counts.keys().enumerate() {
                    per_node[*node as usize].0 += cpus[i];
                    per_node[*node as usize].1 += memory[i];
                }
            }
            per_node
        };
        for (_, input, commands) in &result.log.as_ref().unwrap().steps {
            let inputs = match input { Input::Batch(all) => all.clone(), one => vec![one.clone()] };
            for i in inputs {
                if let Input::JobFinished { job } = i {
                    held.remove(&job);
                }
            }
            for command in commands {
                match command {
                    Command::Allocate { job, alloc: a } => { alloc.insert(*job, *a); }
                    Command::Start { job, gpus } => {
                        prop_assert!(alloc.contains_key(job), "{} started without an Allocate", job);
                        held.insert(*job, gpus.clone());
                    }
                    Command::Stop { job, .. } | Command::End { job, .. } => { held.remove(job); }
                    Command::StartShared { .. } => prop_assert!(false, "synergy never shares GPUs"),
                    Command::Resize { .. } => prop_assert!(false, "synergy never resizes jobs"),
                    Command::Rerate { job, .. } => prop_assert!(held.contains_key(job)),
                }
            }
            for (node, (cpus, memory)) in used(&held, &alloc).into_iter().enumerate() {
                prop_assert!(cpus <= case.cpus, "node {} over-committed: {} of {} CPUs", node, cpus, case.cpus);
                prop_assert!(memory <= case.memory_gib, "node {} over-committed: {} of {} GiB", node, memory, case.memory_gib);
            }
        }
        prop_assert!(result.early_stop.is_none(), "{:?}", result.early_stop);
        for (record, spec) in result.jobs.iter().zip(&case.jobs) {
            match record.outcome {
                Outcome::Completed => {}
                Outcome::Ended(EndReason::WiderThanNodes { .. }) => {
                    prop_assert!(spec.cpus.div_ceil(spec.gpus) > case.cpus || spec.memory_gib.div_ceil(spec.gpus) > case.memory_gib);
                }
                Outcome::Ended(EndReason::WiderThanCluster { .. }) => prop_assert!(spec.gpus > case.nodes * 8),
                ref other => prop_assert!(false, "job {} {:?}", record.id, other),
            }
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let jobs: Vec<JobSpec> = (0..40).map(|i| job(i, u64::from(i) * 97, 1 + i % 3, i % 3)).collect();
    let params = PolicyParams { job_types: TYPES.map(String::from).to_vec(), ..PolicyParams::default() };
    let rates = SynergyRates::new(SynergyMatrices::bundled(), &TYPES.map(String::from)).unwrap();
    let run = || {
        let config = SimConfig { record: true, ..SimConfig::default() };
        let r = simulate(
            &jobs,
            &[TenantSpec::new("t")],
            servers(2),
            build("synergy-opt", &params).unwrap(),
            &rates,
            &config,
            &mut |_| {},
        )
        .unwrap();
        format!("{:?}", r.log.unwrap().steps)
    };
    assert_eq!(run(), run());
}
