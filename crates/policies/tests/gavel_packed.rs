//! Gavel's packed (space-sharing) policies through the engine, driven by a
//! minimal world that runs each job at its table rate alone or its co-located
//! rate next to its partner, re-rating on every co-location change (as the
//! simulator does). Hand-sized cases where pairing helps and where it does
//! not, the bundled table's best K80 pairs, and invariants over random mixes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cotenant_core::{
    Cluster, ClusterSpec, Command, Engine, GpuId, GpuTypeId, Input, JobId, JobSpec, Span, TenantSpec, Time,
};
use cotenant_perf::throughput::{JobTypeKey, PairRates, ThroughputTable};
use cotenant_policies::{build, PolicyParams};
use proptest::prelude::*;

/// What one run produced.
#[derive(Debug)]
struct Run {
    jct_s: Vec<f64>,
    /// Shared starts (`Command::StartShared`) over the run.
    shared_starts: usize,
    /// Preemptions (`Command::Stop`) over the run.
    stops: usize,
    /// Every command, with the time it was given.
    log: Vec<(Time, Command)>,
}

impl Run {
    fn mean_jct_s(&self) -> f64 {
        self.jct_s.iter().sum::<f64>() / self.jct_s.len() as f64
    }
}

/// A running job in the world: since when at which rate, on which GPUs.
#[derive(Debug)]
struct Running {
    since: Time,
    rate: f64,
    gpus: Vec<GpuId>,
}

/// (V100s, K80s, tenant limits, jobs as (arrival s, type, GPUs, tenant, work s), pair rates, policy).
type Case = (u32, u32, Vec<Option<u32>>, Vec<(u64, u32, u32, u32, u32)>, Vec<(f64, f64)>, usize);

/// A job's rate on `gpus` next to `partners`: the table's isolated rate, its
/// own co-located rate, or half the isolated rate for an unmeasured pair.
fn rate(
    table: &ThroughputTable,
    cluster: &Cluster,
    types: &[String],
    job: &JobSpec,
    gpus: &[GpuId],
    partners: &[&JobSpec],
) -> f64 {
    let t = table.gpu_type_index(&cluster.spec().gpu_types[cluster.gpu_type_of(gpus[0]).index()]).unwrap();
    let key = |j: &JobSpec| JobTypeKey::new(types[j.job_type.unwrap() as usize].clone(), j.gpus);
    let alone = table.consolidated(&key(job), t).unwrap();
    match partners {
        [] => alone,
        [p] => table.colocated(&key(job), &key(p), t).map_or(alone / 2.0, |r| r.own_steps_per_s),
        _ => panic!("more than one partner"),
    }
}

/// Drives `policy` over `jobs` to completion, checking the engine's
/// invariants at every step: no violation, at most two jobs per GPU, a shared
/// start only onto GPUs its partner holds alone, tenant limits respected.
fn run(
    spec: ClusterSpec,
    tenants: Vec<TenantSpec>,
    table: &ThroughputTable,
    types: &[String],
    jobs: &[JobSpec],
    policy: &str,
) -> Run {
    run_seeded(spec, tenants, table, types, jobs, policy, None)
}

/// [`run`] with the policy's `seed` option set.
fn run_seeded(
    spec: ClusterSpec,
    tenants: Vec<TenantSpec>,
    table: &ThroughputTable,
    types: &[String],
    jobs: &[JobSpec],
    policy: &str,
    seed: Option<u32>,
) -> Run {
    let cluster = Cluster::new(spec).unwrap();
    let params = PolicyParams {
        round: Some(Span::from_secs(360)),
        job_types: types.to_vec(),
        throughputs: Some(Arc::new(table.clone())),
        options: seed.map(|s| ("seed".to_string(), s.to_string())).into_iter().collect(),
        ..PolicyParams::default()
    };
    let mut engine = Engine::new(cluster.clone(), tenants.clone(), build(policy, &params).unwrap(), 0);
    let n = jobs.len();
    let mut left: Vec<f64> = jobs.iter().map(|j| j.work).collect();
    let mut running: BTreeMap<JobId, Running> = BTreeMap::new();
    let mut end: Vec<Option<Time>> = vec![None; n];
    let mut owners: BTreeMap<GpuId, Vec<JobId>> = BTreeMap::new();
    let mut shared_starts = 0;
    let mut stops = 0;
    let mut log = Vec::new();
    let mut next = 0;
    for _ in 0..200_000 {
        let finish = running
            .iter()
            .map(|(&id, r)| (r.since + Span::from_secs_f64_ceil(left[id.index()] / r.rate), id))
            .min();
        let arrival = jobs.get(next).map(|j| j.arrival);
        let wake = engine.next_wakeup();
        let Some(now) = [arrival, finish.map(|f| f.0), wake].into_iter().flatten().min() else { break };
        let settle = |running: &mut BTreeMap<JobId, Running>, left: &mut Vec<f64>, id: JobId| {
            let entry = running.get_mut(&id).unwrap();
            left[id.index()] = (left[id.index()] - entry.rate * (now - entry.since).as_secs_f64()).max(0.0);
            entry.since = now;
        };
        let mut inputs = Vec::new();
        if let Some((_, id)) = finish.filter(|f| f.0 == now) {
            let gpus = running.remove(&id).unwrap().gpus;
            for g in gpus {
                owners.get_mut(&g).unwrap().retain(|j| *j != id);
            }
            end[id.index()] = Some(now);
            inputs.push(Input::JobFinished { job: id });
        }
        while jobs.get(next).is_some_and(|j| j.arrival == now) {
            inputs.push(Input::JobSubmitted(jobs[next].clone().into()));
            next += 1;
        }
        if wake == Some(now) {
            inputs.push(Input::Wakeup);
        }
        let mut reports = Vec::new();
        for command in engine.step(now, Input::Batch(inputs)) {
            log.push((now, command.clone()));
            let spec = |id: JobId| &jobs[id.index()];
            match command {
                Command::Start { job, gpus } => {
                    for g in &gpus {
                        assert!(owners.entry(*g).or_default().is_empty(), "{g} double-booked by {job}");
                        owners.get_mut(g).unwrap().push(job);
                    }
                    let r = rate(table, &cluster, types, spec(job), &gpus, &[]);
                    running.insert(job, Running { since: now, rate: r, gpus });
                    reports.push(Input::Progress {
                        job,
                        work_done: spec(job).work - left[job.index()],
                        rate: r,
                    });
                }
                Command::StartShared { job, gpus, partner } => {
                    shared_starts += 1;
                    assert_eq!(spec(job).gpus, spec(partner).gpus, "pairs have equal scale factors");
                    for g in &gpus {
                        assert_eq!(
                            owners.get(g),
                            Some(&vec![partner]),
                            "{job} shares {g}, which {partner} must hold alone"
                        );
                        owners.get_mut(g).unwrap().push(job);
                    }
                    assert_eq!(running[&partner].gpus, gpus, "a pair shares exactly the same GPUs");
                    let r = rate(table, &cluster, types, spec(job), &gpus, &[spec(partner)]);
                    running.insert(job, Running { since: now, rate: r, gpus });
                    reports.push(Input::Progress {
                        job,
                        work_done: spec(job).work - left[job.index()],
                        rate: r,
                    });
                }
                Command::Rerate { job, partners } => {
                    settle(&mut running, &mut left, job);
                    let partner_specs: Vec<&JobSpec> = partners.iter().map(|&p| spec(p)).collect();
                    let gpus = running[&job].gpus.clone();
                    let r = rate(table, &cluster, types, spec(job), &gpus, &partner_specs);
                    running.get_mut(&job).unwrap().rate = r;
                    reports.push(Input::Progress {
                        job,
                        work_done: spec(job).work - left[job.index()],
                        rate: r,
                    });
                }
                Command::Stop { job, .. } => {
                    stops += 1;
                    settle(&mut running, &mut left, job);
                    let gpus = running.remove(&job).unwrap().gpus;
                    for g in gpus {
                        owners.get_mut(&g).unwrap().retain(|j| *j != job);
                    }
                    reports.push(Input::Progress {
                        job,
                        work_done: spec(job).work - left[job.index()],
                        rate: 0.0,
                    });
                }
                Command::End { job, .. } => panic!("{job} ended"),
                Command::Resize { job, .. } => panic!("{job} resized: Gavel's jobs are rigid"),
                Command::Allocate { .. } => {}
            }
        }
        // Tenant limits hold (a shared GPU counts fully for each job on it).
        let mut per_tenant = vec![0u32; tenants.len()];
        for job in owners.values().flatten() {
            per_tenant[jobs[job.index()].tenant.index()] += 1;
        }
        for (t, held) in per_tenant.iter().enumerate() {
            assert!(tenants[t].gpu_limit.is_none_or(|limit| *held <= limit), "tenant {t} over its limit");
        }
        assert!(owners.values().all(|o| o.len() <= 2));
        if !reports.is_empty() {
            assert!(engine.step(now, Input::Batch(reports)).is_empty());
        }
        assert!(engine.violations().is_empty(), "{policy}: {:?}", engine.violations());
    }
    let jct_s = (0..n).map(|i| (end[i].expect("job completed") - jobs[i].arrival).as_secs_f64()).collect();
    Run { jct_s, shared_starts, stops, log }
}

fn k80s(gpus: u32) -> ClusterSpec {
    let mut spec = ClusterSpec { gpu_types: vec!["k80".into()], ..Default::default() };
    spec.add_nodes(GpuTypeId(0), gpus, 1, 8, 64);
    spec
}

/// Job types A and B, 1 step/s alone on a K80; `ab` their rates together,
/// and A next to A (or B next to B) at 0.4 each (they interfere).
fn ab_table(ab: (f64, f64)) -> (ThroughputTable, Vec<String>) {
    let mut t = ThroughputTable::new();
    let (a, b) = (JobTypeKey::new("A", 1), JobTypeKey::new("B", 1));
    for key in [&a, &b] {
        t.set_consolidated(key, "k80", 1.0);
        t.set_colocated(key, key, "k80", PairRates { own_steps_per_s: 0.4, other_steps_per_s: 0.4 });
    }
    t.set_colocated(&a, &b, "k80", PairRates { own_steps_per_s: ab.0, other_steps_per_s: ab.1 });
    t.set_colocated(&b, &a, "k80", PairRates { own_steps_per_s: ab.1, other_steps_per_s: ab.0 });
    (t, vec!["A".into(), "B".into()])
}

/// Two A and two B jobs of 3,600 steps, all at time 0.
fn ab_jobs() -> Vec<JobSpec> {
    (0..4)
        .map(|i| {
            let mut j = JobSpec::new(i, 0, Time::ZERO, 1, 3_600.0);
            j.job_type = Some(i % 2);
            j
        })
        .collect()
}

const PACKED: [(&str, &str); 4] = [
    ("max-min-fairness-packed", "max-min-fairness-perf"),
    ("finish-time-fairness-packed", "finish-time-fairness-perf"),
    ("min-total-duration-packed", "min-total-duration-perf"),
    ("fifo-packed", "fifo-perf"),
];

#[test]
fn pairs_that_pack_well_cut_the_average_jct() {
    // 2 K80s, two A and two B jobs of 3,600 steps; A and B keep 0.8 steps/s each
    // together. Time sharing: 4 jobs x 3,600 GPU-s on 2 GPUs, the last done at
    // 7,200 s. Two A+B pairs on the two GPUs: everyone done at 3,600 / 0.8 = 4,500 s.
    let (table, types) = ab_table((0.8, 0.8));
    for (packed, unpacked) in PACKED {
        let with_pairs = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), packed);
        let alone = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), unpacked);
        assert_eq!(alone.shared_starts, 0);
        assert!(with_pairs.shared_starts >= 2, "{packed}: {with_pairs:?}");
        assert_eq!(with_pairs.stops, 0, "{packed}: the pairs stay together across rounds");
        for jct in &with_pairs.jct_s {
            assert!(
                (jct - 4_500.0).abs() < 1.0,
                "{packed}: pairs kept across rounds finish at 4,500 s: {with_pairs:?}"
            );
        }
        // FIFO-perf: 3,600, 3,600, 7,200, 7,200; the others time-share, worse.
        assert!(alone.mean_jct_s() >= 5_399.0, "{unpacked}: {alone:?}");
        assert!(with_pairs.mean_jct_s() < 0.85 * alone.mean_jct_s());
    }
}

#[test]
fn a_job_whose_partner_leaves_keeps_its_gpus_and_takes_a_new_partner() {
    // One K80. A0 (360 steps) and B1 (7,200 steps) start as a pair at 0.8 steps/s
    // each; A0 is done at 450 s, B1 runs on alone (re-rated, not restarted). A2
    // arrives at 500 s; at the next round it joins B1 on B1's GPU.
    let (table, types) = ab_table((0.8, 0.8));
    let mut jobs = ab_jobs();
    jobs.truncate(3);
    (jobs[0].work, jobs[1].work, jobs[2].work) = (360.0, 7_200.0, 3_600.0);
    jobs[2].arrival = Time::from_secs(500);
    let run = run(k80s(1), vec![TenantSpec::new("t")], &table, &types, &jobs, "max-min-fairness-packed");
    assert_eq!(run.stops, 0, "{:?}", run.log);
    assert!((run.jct_s[0] - 450.0).abs() < 1e-3, "{:?}", run.jct_s);
    let b1 = JobId(1);
    let rerated = run.log.iter().any(|(at, c)| {
        *at == Time::from_secs(450)
            && matches!(c, Command::Rerate { job, partners } if *job == b1 && partners.is_empty())
    });
    assert!(rerated, "{:?}", run.log);
    let joined = run.log.iter().find(
        |(_, c)| matches!(c, Command::StartShared { job, partner, .. } if *job == JobId(2) && *partner == b1),
    );
    assert!(
        joined.is_some_and(|(at, _)| *at > Time::from_secs(500) && *at < Time::from_secs(1_100)),
        "{:?}",
        run.log
    );
}

#[test]
fn pairs_that_interfere_are_never_started() {
    // Together A and B keep 0.3 steps/s each (0.6 of one GPU): time sharing wins,
    // and FIFO's 1.5 threshold is not reached either.
    let (table, types) = ab_table((0.3, 0.3));
    for (packed, unpacked) in PACKED {
        let with_pairs = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), packed);
        assert_eq!(with_pairs.shared_starts, 0, "{packed}");
        let alone = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), unpacked);
        assert!(with_pairs.mean_jct_s() <= alone.mean_jct_s() * 1.05, "{packed} {with_pairs:?} vs {alone:?}");
    }
}

#[test]
fn fifo_packs_only_above_its_threshold() {
    // 0.7 + 0.7 = 1.4 of isolated: worth it for the optimizing policies, not for
    // FIFO's 1.5 threshold, which then behaves exactly as FIFO-perf.
    let (table, types) = ab_table((0.7, 0.7));
    let fifo = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), "fifo-packed");
    let perf = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), "fifo-perf");
    assert_eq!((fifo.shared_starts, &fifo.jct_s), (0, &perf.jct_s));
    let mmf = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &ab_jobs(), "max-min-fairness-packed");
    assert!(mmf.shared_starts >= 2, "{mmf:?}");
}

#[test]
fn gandiva_packs_a_pair_that_beats_time_slicing() {
    // One K80, A0 and B1 of 3,600 steps at 1 step/s alone, 0.8 each together
    // (normalized throughput 1.6). Two GPUs asked, one available: Gandiva packs;
    // its only draw pairs 0 with 1, which gets the whole K80 (m = 1). The pair
    // is kept at every round: both finish at 3,600 / 0.8 = 4,500 s. Time
    // slicing them (max-min-fairness-perf) finishes the first near 7,200 - 360
    // and the second at 7,200 s.
    let (table, types) = ab_table((0.8, 0.8));
    let jobs = &ab_jobs()[..2];
    let gandiva = run(k80s(1), vec![TenantSpec::new("t")], &table, &types, jobs, "gandiva");
    assert_eq!((gandiva.shared_starts, gandiva.stops), (1, 0), "{:?}", gandiva.log);
    for jct in &gandiva.jct_s {
        assert!((jct - 4_500.0).abs() < 1.0, "{gandiva:?}");
    }
    let sliced = run(k80s(1), vec![TenantSpec::new("t")], &table, &types, jobs, "max-min-fairness-perf");
    assert!(sliced.mean_jct_s() > 6_500.0, "{sliced:?}");
}

#[test]
fn gandiva_separates_a_pair_below_one_at_the_next_allocation() {
    // Two K80s; A0 (1,000 steps), B1 and A2 (3,600 each), all at time 0, 1 step/s
    // alone; A with B keep 0.3 each together (normalized 0.6 < 1). Three jobs on
    // two GPUs: Gandiva packs. Its draw is `random.Random(0).sample([0, 1, 2], 2)`
    // = [1, 2] (python3): B1 and A2 pair although they interfere; A0 runs alone.
    // m = 2 combinations, each 2 / 2 = 1.0 of a K80.
    // Rounds are 360 s (A0 runs 360 steps, the pair 108 each). A0 finishes at
    // 1,000 s, in the third round. The departure asks for a new allocation, and
    // as in Gavel the first one after the reset at time 0 comes at once (Gavel
    // waits 1,920 s between resets only once its last reset time is not 0): at
    // the round starting at 1,080 s the pair (0.6 < 1) is separated, two jobs
    // fit on two K80s, each runs alone. B1 and A2 had 3 x 108 = 324 steps; the
    // last 3,276 at 1 step/s end at 1,080 + 3,276 = 4,356 s (together: 12,000 s).
    let (table, types) = ab_table((0.3, 0.3));
    let mut jobs = ab_jobs();
    jobs.truncate(3);
    jobs[0].work = 1_000.0;
    let run = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &jobs, "gandiva");
    let shared: Vec<&(Time, Command)> =
        run.log.iter().filter(|(_, c)| matches!(c, Command::StartShared { .. })).collect();
    assert_eq!(shared.len(), 1, "{:?}", run.log);
    assert!(matches!(shared[0], (at, Command::StartShared { job, partner, .. })
        if *at == Time::ZERO && (job.0, partner.0) == (2, 1)));
    let split = run.log.iter().find(|(_, c)| matches!(c, Command::Stop { .. }));
    assert!(split.is_some_and(|(at, _)| (at.as_secs_f64() - 1_080.0).abs() < 1.0), "{:?}", run.log);
    let expected = [1_000.0, 4_356.0, 4_356.0];
    for (jct, want) in run.jct_s.iter().zip(expected) {
        assert!((jct - want).abs() < 1.0, "{:?}", run.jct_s);
    }
}

#[test]
fn packed_policies_need_a_throughput_table() {
    assert!(build("gandiva", &PolicyParams::default()).is_err());
    for (packed, _) in PACKED {
        assert!(build(packed, &PolicyParams::default()).is_err(), "{packed}");
    }
}

fn bundled_table() -> ThroughputTable {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/gavel/simulation_throughputs.json.gz");
    cotenant_trace::gavel_throughputs::read_gavel_throughputs(&path).unwrap()
}

#[test]
fn the_bundled_tables_best_k80_pairs_help() {
    // The K80 pairs that pack best in Gavel's table: Recommendation (1024) with
    // LM (10), and ResNet-18 (128) with Recommendation (2048), each pair about
    // 1.27x of one job alone. Two of each on 2 K80s, about an hour of work each.
    let table = bundled_table();
    let types: Vec<String> = [
        "Recommendation (batch size 1024)",
        "LM (batch size 10)",
        "ResNet-18 (batch size 128)",
        "Recommendation (batch size 2048)",
    ]
    .map(String::from)
    .to_vec();
    let k80 = table.gpu_type_index("k80").unwrap();
    let jobs: Vec<JobSpec> = (0..4u32)
        .map(|i| {
            let steps_per_s =
                table.consolidated(&JobTypeKey::new(types[i as usize].clone(), 1), k80).unwrap();
            let mut j = JobSpec::new(i, 0, Time::ZERO, 1, (3_600.0 * steps_per_s).round());
            j.job_type = Some(i);
            j
        })
        .collect();
    let packed = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &jobs, "max-min-fairness-packed");
    let alone = run(k80s(2), vec![TenantSpec::new("t")], &table, &types, &jobs, "max-min-fairness-perf");
    assert!(packed.shared_starts >= 2, "{packed:?}");
    assert!(packed.mean_jct_s() < 0.9 * alone.mean_jct_s(), "{packed:?} vs {alone:?}");
}

fn random_case() -> impl Strategy<Value = Case> {
    (1u32..3, 1u32..4, prop::collection::vec(prop::option::of(1u32..5), 1..3)).prop_flat_map(
        |(v, k, limits)| {
            let tenants = limits.len() as u32;
            let job = (0u64..900, 0u32..3, 1u32..3, 0..tenants, 300u32..3_000);
            (
                Just(v),
                Just(k),
                Just(limits),
                prop::collection::vec(job, 1..12),
                prop::collection::vec((0.0f64..1.0, 0.0f64..1.0), 12),
                0usize..PACKED.len(),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random mixes of three job types (with random pair rates, some zero) on
    /// V100s and K80s: every packed policy finishes every job, never breaks an
    /// engine rule, and shares only equal-size jobs on identical GPU sets
    /// (checked inside `run`).
    #[test]
    fn packed_policies_keep_the_invariants(case in random_case()) {
        let (v100s, k80s, limits, shape, pair_rates, policy) = case;
        let names = ["X", "Y", "Z"];
        let mut table = ThroughputTable::new();
        for (i, name) in names.iter().enumerate() {
            for sf in 1..3u32 {
                let key = JobTypeKey::new(*name, sf);
                table.set_consolidated(&key, "v100", 2.0 + i as f64);
                table.set_consolidated(&key, "k80", 1.0);
            }
        }
        let mut next = 0;
        for a in 0..3 {
            for b in a..3 {
                for sf in 1..3u32 {
                    // Two jobs of one type slow each other down alike.
                    let (x, y) = if a == b { (pair_rates[next].0, pair_rates[next].0) } else { pair_rates[next] };
                    next += 1;
                    let (ka, kb) = (JobTypeKey::new(names[a], sf), JobTypeKey::new(names[b], sf));
                    for (gpu, scale) in [("v100", 2.0), ("k80", 1.0)] {
                        // A pair rate under 0.1 is "does not run" (0), as some table entries are.
                        let own = |r: f64| if r < 0.1 { 0.0 } else { r * scale };
                        let (x, y) = (own(x), own(y));
                        table.set_colocated(&ka, &kb, gpu, PairRates { own_steps_per_s: x, other_steps_per_s: y });
                        table.set_colocated(&kb, &ka, gpu, PairRates { own_steps_per_s: y, other_steps_per_s: x });
                    }
                }
            }
        }
        let mut shape = shape;
        shape.sort_by_key(|j| j.0);
        let total = v100s.min(k80s.max(v100s));
        let jobs: Vec<JobSpec> = shape
            .iter()
            .enumerate()
            .map(|(i, &(arrival, ty, gpus, tenant, work))| {
                // Every job fits on one type and within its tenant's limit.
                let limit = limits[tenant as usize].unwrap_or(u32::MAX);
                let gpus = gpus.min(total).min(limit).max(1);
                let mut j = JobSpec::new(i as u32, tenant, Time::from_secs(arrival), gpus, f64::from(work));
                j.job_type = Some(ty);
                j
            })
            .collect();
        let tenants: Vec<TenantSpec> = limits
            .iter()
            .enumerate()
            .map(|(t, &gpu_limit)| TenantSpec { gpu_limit, ..TenantSpec::new(format!("t{t}")) })
            .collect();
        let mut spec = ClusterSpec { gpu_types: vec!["v100".into(), "k80".into()], ..Default::default() };
        spec.add_nodes(GpuTypeId(0), 1, v100s, 8, 64);
        spec.add_nodes(GpuTypeId(1), 1, k80s, 8, 64);
        let types: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let result = run(spec.clone(), tenants.clone(), &table, &types, &jobs, PACKED[policy].0);
        prop_assert_eq!(result.jct_s.len(), jobs.len());
        // Gandiva on the same case, twice with one seed: every job finishes, no
        // GPU ever has more than two jobs (checked in `run`), the same commands.
        let seed = policy as u32;
        let once = run_seeded(spec.clone(), tenants.clone(), &table, &types, &jobs, "gandiva", Some(seed));
        let again = run_seeded(spec, tenants, &table, &types, &jobs, "gandiva", Some(seed));
        prop_assert_eq!(once.jct_s.len(), jobs.len());
        prop_assert_eq!(&once.log, &again.log);
    }
}
