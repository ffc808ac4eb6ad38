//! Invariants over random traces, clusters, policies and overheads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use cotenant_core::{
    Cluster, ClusterSpec, Command, Engine, GpuId, Input, JobId, JobSpec, Span, TenantSpec, Time,
};
use cotenant_policies::{build, policies, PolicyParams};
use cotenant_sim::{simulate, summarize, Outcome, Overheads, ReferenceRate, SimConfig, SimResult};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    nodes: u32,
    gpus_per_node: u32,
    tenants: usize,
    /// Hard GPU limit per tenant (`None`: unlimited).
    limits: Vec<Option<u32>>,
    jobs: Vec<JobSpec>,
    policy: &'static str,
    overheads: Overheads,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    // Every policy that builds without extra inputs (throughput tables, configs).
    let names: Vec<&'static str> = policies()
        .iter()
        .map(|p| p.name)
        .filter(|name| build(name, &PolicyParams::default()).is_ok())
        .collect();
    (1u32..4, 1u32..9, 1usize..4, prop::sample::select(names), 0u64..20, 0u64..5, any::<u64>()).prop_flat_map(
        |(nodes, per_node, tenants, policy, ckpt, restore, seed)| {
            let total = nodes * per_node;
            let job = (0u64..200, 1u32..=total + 1, 1u64..60, 0..tenants as u32, any::<bool>());
            let limits = prop::collection::vec(prop::option::of(1u32..=total), tenants);
            (prop::collection::vec(job, 1..25), limits).prop_map(move |(mut shape, limits)| {
                shape.sort_by_key(|j| j.0);
                let jobs = shape
                    .iter()
                    .enumerate()
                    .map(|(i, &(arrival, gpus, duration, tenant, estimated))| {
                        let mut job =
                            JobSpec::new(i as u32, tenant, Time::from_secs(arrival), gpus, duration as f64);
                        job.duration_estimate = estimated.then(|| Span::from_secs(duration));
                        job
                    })
                    .collect();
                Case {
                    nodes,
                    gpus_per_node: per_node,
                    tenants,
                    limits,
                    jobs,
                    policy,
                    overheads: Overheads {
                        checkpoint_interval: Span::from_secs(ckpt),
                        restore_overhead: Span::from_secs(restore),
                    },
                    seed,
                }
            })
        },
    )
}

fn tenants(case: &Case) -> Vec<TenantSpec> {
    (0..case.tenants)
        .map(|t| TenantSpec {
            weight: 1.0 + t as f64,
            gpu_limit: case.limits[t],
            ..TenantSpec::new(format!("t{t}"))
        })
        .collect()
}

fn run(case: &Case) -> SimResult {
    let policy = build(case.policy, &PolicyParams::default()).unwrap();
    let config =
        SimConfig { seed: case.seed, overheads: case.overheads, record: true, ..SimConfig::default() };
    let cluster = ClusterSpec::homogeneous("v100", case.nodes, case.gpus_per_node);
    simulate(&case.jobs, &tenants(case), cluster, policy, &ReferenceRate, &config, &mut |_| {}).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold(case in case()) {
        let result = run(&case);
        let total_gpus = case.nodes * case.gpus_per_node;
        let log = result.log.as_ref().unwrap();

        // No GPU is ever double-booked: replay ownership from the step log. A GPU
        // has one owner, or two when a job was started to share it with its only owner.
        let mut owners: BTreeMap<GpuId, Vec<JobId>> = BTreeMap::new();
        let mut held: BTreeMap<JobId, Vec<GpuId>> = BTreeMap::new();
        let release = |owners: &mut BTreeMap<GpuId, Vec<JobId>>, held: &mut BTreeMap<JobId, Vec<GpuId>>, job: JobId| {
            for gpu in held.remove(&job).unwrap_or_default() {
                let list = owners.get_mut(&gpu).expect("held GPU has owners");
                list.retain(|j| *j != job);
                if list.is_empty() {
                    owners.remove(&gpu);
                }
            }
        };
        for (_, input, commands) in &log.steps {
            let finished: Vec<JobId> = match input {
                Input::JobFinished { job } => vec![*job],
                Input::Batch(inputs) => inputs.iter().filter_map(|i| match i {
                    Input::JobFinished { job } => Some(*job),
                    _ => None,
                }).collect(),
                _ => vec![],
            };
            for job in finished {
                prop_assert!(held.contains_key(&job), "{} finished without GPUs", job);
                release(&mut owners, &mut held, job);
            }
            for command in commands {
                match command {
                    Command::Start { job, gpus } => {
                        prop_assert_eq!(gpus.len() as u32, case.jobs[job.index()].gpus);
                        for gpu in gpus {
                            prop_assert!(owners.insert(*gpu, vec![*job]).is_none(), "{} double-booked", gpu);
                        }
                        held.insert(*job, gpus.clone());
                    }
                    Command::StartShared { job, gpus, partner } => {
                        prop_assert_eq!(gpus.len() as u32, case.jobs[job.index()].gpus);
                        for gpu in gpus {
                            let list = owners.get_mut(gpu).expect("shared GPU is held");
                            prop_assert_eq!(&*list, &vec![*partner], "{} shared with a job not alone on it", gpu);
                            list.push(*job);
                        }
                        held.insert(*job, gpus.clone());
                    }
                    Command::Rerate { job, .. } => prop_assert!(held.contains_key(job)),
                    Command::Resize { job, gpus, from } => {
                        let before = held.get(job).map_or(0, Vec::len);
                        prop_assert_eq!(before as u32, *from);
                        release(&mut owners, &mut held, *job);
                        for gpu in gpus {
                            prop_assert!(owners.insert(*gpu, vec![*job]).is_none(), "{} double-booked by a resize", gpu);
                        }
                        held.insert(*job, gpus.clone());
                    }
                    // Host allocations are checked in tests/synergy.rs.
                    Command::Allocate { .. } => {}
                    Command::Stop { job, .. } | Command::End { job, .. } => release(&mut owners, &mut held, *job),
                }
            }
            prop_assert!(owners.len() as u32 <= total_gpus);
            // Tenant limits hold at every step (a shared GPU counts for each job on it).
            let mut per_tenant = vec![0u32; case.tenants];
            for job in owners.values().flatten() {
                per_tenant[case.jobs[job.index()].tenant.index()] += 1;
            }
            for (t, held) in per_tenant.iter().enumerate() {
                prop_assert!(case.limits[t].is_none_or(|limit| *held <= limit), "tenant {} over its limit", t);
            }
        }

        // Every job completes, or ends with a stated reason.
        for (record, spec) in result.jobs.iter().zip(&case.jobs) {
            match &record.outcome {
                Outcome::Completed => {
                    let jct = record.jct().unwrap();
                    prop_assert!(jct >= Span::from_secs(spec.work as u64), "{} finished faster than its work", spec.id);
                }
                Outcome::Ended(_) => {
                    let limit = case.limits[spec.tenant.index()].unwrap_or(u32::MAX);
                    prop_assert!(spec.gpus > total_gpus || spec.gpus > limit);
                }
                Outcome::Unfinished(why) => prop_assert!(false, "{} unfinished: {}", spec.id, why),
            }
        }

        // Busy GPU-time equals the jobs' allocated time; tenants add up to the totals.
        let held_total: u128 = result.jobs.iter().map(|j| u128::from(j.held_gpu_us)).sum();
        prop_assert_eq!(result.usage.busy_gpu_us, held_total);
        prop_assert_eq!(result.usage.tenant_gpu_us.iter().sum::<u128>(), held_total);
        let summary = summarize(&result);
        prop_assert_eq!(summary.tenants.iter().map(|t| t.jobs).sum::<usize>(), summary.jobs);
        prop_assert_eq!(summary.tenants.iter().map(|t| t.completed).sum::<usize>(), summary.completed);
        prop_assert_eq!(summary.tenants.iter().map(|t| t.preemptions).sum::<u64>(), summary.preemptions);
        prop_assert!(summary.gpu_utilization <= 1.0 + 1e-9);
        let window_sum: u128 = result.usage.windows.iter().flat_map(|w| w.gpu_us.iter()).map(|&g| u128::from(g)).sum();
        prop_assert_eq!(window_sum, held_total);
    }

    /// Utilization, goodput, idle-wait and Jain stay in their ranges for every
    /// policy, with restore overhead and checkpoint loss, also when a run is cut
    /// short (a step limit or a horizon) with jobs unfinished; and a run is
    /// unhealthy exactly when it left jobs unfinished at a limit.
    #[test]
    fn metrics_stay_in_range_and_health_tells_the_truth(
        case in case(),
        max_steps in prop::option::of(1u64..120),
        horizon in prop::option::of(0u64..400),
    ) {
        let policy = build(case.policy, &PolicyParams::default()).unwrap();
        let config = SimConfig {
            seed: case.seed,
            overheads: case.overheads,
            max_steps,
            horizon: horizon.map(Time::from_secs),
            share_window: Span::from_secs(7),
            ..SimConfig::default()
        };
        let cluster = ClusterSpec::homogeneous("v100", case.nodes, case.gpus_per_node);
        let result =
            simulate(&case.jobs, &tenants(&case), cluster, policy, &ReferenceRate, &config, &mut |_| {}).unwrap();
        let s = summarize(&result);
        prop_assert!((0.0..=1.0 + 1e-9).contains(&s.gpu_utilization), "util {}", s.gpu_utilization);
        prop_assert!(s.goodput_utilization >= 0.0 && s.goodput_utilization <= s.gpu_utilization + 1e-9);
        prop_assert!((0.0..=1.0 + 1e-9).contains(&s.idle_while_waiting), "idle-wait {}", s.idle_while_waiting);
        prop_assert!(s.jain_backlogged.is_none_or(|j| (0.0..=1.0 + 1e-9).contains(&j)));
        prop_assert!(s.health.warnings.iter().all(|w| !w.contains("a bug")), "{:?}", s.health.warnings);
        prop_assert_eq!(s.completed + s.ended.values().sum::<usize>() + s.unfinished, s.jobs);
        let cut_by_limit = matches!(result.early_stop, Some(cotenant_sim::EarlyStop::StepLimit { .. }));
        let unhealthy_expected = cut_by_limit || (s.unfinished > 0 && result.early_stop.is_none());
        prop_assert_eq!(!s.health.healthy(), unhealthy_expected, "{:?} {:?}", result.early_stop, s.health);
    }

    #[test]
    fn replaying_the_input_log_reproduces_the_commands(case in case()) {
        let result = run(&case);
        let log = result.log.as_ref().unwrap();
        let cluster = Cluster::new(ClusterSpec::homogeneous("v100", case.nodes, case.gpus_per_node)).unwrap();
        let policy = build(case.policy, &PolicyParams::default()).unwrap();
        let mut engine = Engine::new(cluster, tenants(&case), policy, case.seed);
        for (now, input, commands) in &log.steps {
            prop_assert_eq!(&engine.step(*now, input.clone()), commands);
        }
    }

    #[test]
    fn same_input_same_output(case in case()) {
        let a = run(&case);
        let b = run(&case);
        prop_assert_eq!(format!("{:?}", a.jobs), format!("{:?}", b.jobs));
        prop_assert_eq!(format!("{:?}", summarize(&a)), format!("{:?}", summarize(&b)));
    }
}
