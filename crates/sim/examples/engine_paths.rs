//! Times the per-event paths every policy pays in the simulator, one at a time:
//!
//! ```console
//! $ cargo run --release -p cotenant-sim --example engine_paths
//! ```
//!
//! - `free map copy`: a scheduling pass's scratch copy of the free-GPU index on a
//!   5,000-node cluster (the first placement of a pass copies it; the copy reuses
//!   the previous pass's buffers), then one one-GPU placement;
//! - `16 GPUs across nodes`: a placement no single node takes on an empty 5,000-node
//!   cluster (consolidated: it reads the free index only as far as its plan goes);
//! - `engine step`: one submission and one completion through `Engine::step_into`
//!   (FIFO, 8 GPUs, commands into a kept buffer), per event;
//! - `preempt + restart`: one job's stop and start again in one decision, through
//!   `Engine::step_into` (a policy that preempts every running job and restarts it on
//!   its GPUs, 256 jobs on 32 x 8 GPUs), per cycle: the engine's side of what LAS does
//!   a million times on the full Philly trace;
//! - `usage advance`: the usage integrals over 100 tenants of which 3 hold GPUs or wait;
//! - `simulate`: a whole run of 200,000 one-GPU jobs under FIFO on 64 x 8 GPUs, per
//!   event (arrivals and completions), the figure `cotenant bench` sets beside its floor;
//!   `simulate_shared`, the same on jobs shared with the run (what `cotenant sim` and
//!   `bench` do), where the engine refers to the specs instead of copying them.
//!
//! Then the bytes each job costs in the simulator's per-job structures.
//!
//! Each figure is the best of 5 repetitions. A measurement, not a test: STYLE.md
//! keeps timings out of the test suite.

use std::time::Instant;

use cotenant_core::placement::{FreeMap, Placement};
use cotenant_core::{
    Action, Cluster, ClusterSpec, ClusterView, Command, Decision, Engine, Input, JobId, JobSpec, JobState,
    Policy, PolicyCx, Span, TenantSpec, Time,
};
use cotenant_sim::usage::UsageTracker;
use cotenant_sim::world::GPU_PARTS;
use cotenant_sim::{simulate, simulate_shared, JobRecord, ReferenceRate, SimConfig};

const REPEATS: usize = 5;

/// Best wall time of `REPEATS` runs of `f`, in nanoseconds per `per` operations.
fn best_ns(per: u64, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..REPEATS {
        let started = Instant::now();
        f();
        best = best.min(started.elapsed().as_secs_f64());
    }
    best * 1e9 / per as f64
}

/// A pass's free-map copy plus one consolidated placement of `gpus` GPUs on 5,000
/// nodes of 8: ns per pass, best of the repeats.
fn free_map_place(gpus: u32, passes: u64) -> f64 {
    let cluster = Cluster::new(ClusterSpec::homogeneous("gpu", 5_000, 8)).expect("a valid cluster");
    best_ns(passes, || {
        for _ in 0..passes {
            let mut free = FreeMap::new(&cluster);
            let placed = free.place(gpus, Placement::Consolidated, |_| true).expect("room on 5,000 nodes");
            std::hint::black_box(placed);
        }
    })
}

fn engine_step() -> f64 {
    let jobs = 100_000u32;
    best_ns(2 * u64::from(jobs), || {
        let cluster = Cluster::new(ClusterSpec::homogeneous("gpu", 1, 8)).expect("a valid cluster");
        let policy = cotenant_policies::build("fifo", &Default::default()).expect("fifo exists");
        let mut engine = Engine::new(cluster, vec![TenantSpec::new("t")], policy, 0);
        engine.reserve_jobs(jobs as usize);
        let mut commands: Vec<Command> = Vec::new();
        for id in 0..jobs {
            let now = Time::from_secs(u64::from(id));
            commands.clear();
            engine.step_into(
                now,
                Input::JobSubmitted(JobSpec::new(id, 0, now, 1, 1.0).into()),
                &mut commands,
            );
            commands.clear();
            engine.step_into(now, Input::JobFinished { job: JobId(id) }, &mut commands);
        }
        std::hint::black_box(engine.stats());
    })
}

/// Preempts every running job and starts it again on the same GPUs, in one decision;
/// on its first pass, starts every pending job on the next free GPU.
struct Flip;

impl Policy for Flip {
    fn name(&self) -> &'static str {
        "flip"
    }
    fn schedule(&mut self, _cx: &mut PolicyCx<'_>, view: &ClusterView<'_>) -> Decision {
        let mut decision = Decision::default();
        if view.running.is_empty() {
            let mut free = FreeMap::new(view.cluster);
            for &job in view.pending {
                let gpus = free.place(1, Placement::Consolidated, |_| true).expect("a GPU per job");
                decision.actions.push(Action::Start { job, gpus });
            }
            return decision;
        }
        for job in view.running_jobs() {
            decision.actions.push(Action::Preempt { job: job.id() });
        }
        for job in view.running_jobs() {
            decision.actions.push(Action::Start { job: job.id(), gpus: job.gpus.clone() });
        }
        decision
    }
}

fn preempt_restart() -> f64 {
    let (jobs, passes) = (256u32, 400u64);
    best_ns(u64::from(jobs) * passes, || {
        let cluster = Cluster::new(ClusterSpec::homogeneous("gpu", 32, 8)).expect("a valid cluster");
        let mut engine = Engine::new(cluster, vec![TenantSpec::new("t")], Box::new(Flip), 0);
        let submitted =
            (0..jobs).map(|id| Input::JobSubmitted(JobSpec::new(id, 0, Time::ZERO, 1, 1e9).into()));
        let mut commands: Vec<Command> = Vec::new();
        engine.step_into(Time::ZERO, Input::Batch(submitted.collect()), &mut commands);
        for pass in 1..=passes {
            commands.clear();
            engine.step_into(Time::from_secs(pass), Input::Wakeup, &mut commands);
        }
        assert_eq!(engine.stats().preemptions, u64::from(jobs) * passes, "every pass restarts every job");
    })
}

/// `defer`: whole-GPU tenants' steps added up when they change (as the simulator
/// runs it), else every tenant at every step.
fn usage_advance(defer: bool) -> f64 {
    let steps = 1_000_000u64;
    best_ns(steps, || {
        let mut usage = UsageTracker::new(100, 512, Span::from_secs(3600));
        if defer {
            usage.defer();
        }
        usage.set_tenant_gpu_parts(3, 8 * GPU_PARTS);
        usage.set_tenant_gpu_parts(40, 2 * GPU_PARTS);
        usage.set_tenant_waiting(77, 4);
        for s in 1..=steps {
            usage.advance(Time::from_secs(s));
        }
        usage.settle();
        std::hint::black_box(usage.busy_gpu_us);
    })
}

/// A whole FIFO run per event: `shared`, on jobs shared with the run (`simulate_shared`),
/// else through `simulate`, which copies them once for the run.
fn whole_run(shared: bool) -> f64 {
    let jobs: std::sync::Arc<Vec<JobSpec>> = std::sync::Arc::new(
        (0..200_000u32)
            .map(|i| JobSpec::new(i, i % 4, Time::from_secs(u64::from(i) * 7), 1, 3_000.0))
            .collect(),
    );
    let tenants: Vec<TenantSpec> = (0..4).map(|t| TenantSpec::new(format!("t{t}"))).collect();
    let mut events = 0;
    let ns = best_ns(1, || {
        let policy = cotenant_policies::build("fifo", &Default::default()).expect("fifo exists");
        let (cluster, config) = (ClusterSpec::homogeneous("gpu", 64, 8), SimConfig::default());
        let result = if shared {
            simulate_shared(&jobs, &tenants, cluster, policy, &ReferenceRate, &config, &mut |_| {})
        } else {
            simulate(&jobs, &tenants, cluster, policy, &ReferenceRate, &config, &mut |_| {})
        };
        events = result.expect("a valid run").events;
    });
    ns / events.max(1) as f64
}

fn main() {
    println!("| path | ns per operation (best of {REPEATS}) |");
    println!("|---|---:|");
    println!("| free map copy + one placement, 5,000 nodes | {:.0} |", free_map_place(1, 20_000));
    println!("| 16 GPUs across nodes, 5,000 nodes | {:.0} |", free_map_place(16, 2_000));
    println!("| engine step (fifo, submit or complete) | {:.0} |", engine_step());
    println!("| preempt + restart, per cycle (256 jobs, 32 x 8 GPUs) | {:.0} |", preempt_restart());
    println!(
        "| usage advance, 100 tenants, 3 active, every tenant at every step | {:.1} |",
        usage_advance(false)
    );
    println!(
        "| usage advance, 100 tenants, 3 active, whole-GPU steps deferred | {:.1} |",
        usage_advance(true)
    );
    println!("| simulate, fifo, 200,000 jobs, per event | {:.0} |", whole_run(false));
    println!("| simulate_shared, fifo, 200,000 jobs, per event | {:.0} |", whole_run(true));
    println!();
    println!("| per-job structure | bytes |");
    println!("|---|---:|");
    println!("| JobSpec (the workload's, shared with the engine) | {} |", size_of::<JobSpec>());
    println!("| JobState (engine) | {} |", size_of::<Option<JobState>>());
    println!("| WorldJob (simulator) | {} |", size_of::<cotenant_sim::world::WorldJob>());
    println!("| JobRecord (result) | {} |", size_of::<JobRecord>());
}
