//! The event loop: arrivals and iteration completions on one or more replicas.
//!
//! Each replica runs one iteration at a time; its length comes from the roofline
//! model of the batch the scheduler formed. Events are ordered by (time, kind,
//! replica): completions before arrivals at the same microsecond, lower replica first.
//! Nothing random happens here; the same inputs give the same result.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use cotenant_core::limits::MAX_SHARE_WINDOWS;
use cotenant_core::{Span, TenantSpec, Time};
use cotenant_perf::transfer::Link;
use cotenant_perf::{ActivationBatch, BatchEntry, MemoryPlan, Roofline, GIB};

use crate::attribution::{llmvisor_shares_with_own, AttributionErrors, AttributionEval};
use crate::closed_loop::ClosedLoop;
use crate::features::{RequestFeatureStats, RequestFeatures};
use crate::kv::{KvPool, KvStats};
use crate::metrics::Histogram;
use crate::pipeline::{stage_memory_plan, stage_times, Stages};
use crate::request::{Request, RequestId, Workload};
use crate::router::{Router, RouterKind};
use crate::scheduler::{build_scheduler, BatchLimits, Pick, RequestScheduler, SchedCx, SchedulerConfig};
use crate::state::{Phase, Seq};
use crate::utilization::{ReplicaUsage, Usage};
use crate::Slo;

/// Builds a [`SchedCx`] from a replica's fields (a macro so the borrow of those fields
/// stays disjoint from the `&mut` borrow of the replica's scheduler).
macro_rules! sched_cx {
    ($world:expr, $seqs:expr, $replica:expr, $now:expr, $budget:expr) => {
        SchedCx {
            now: $now,
            requests: $world.requests,
            seqs: $seqs,
            tenants: $world.tenants,
            waiting: &$replica.waiting,
            running: &$replica.running,
            backlog: &$replica.backlog,
            waiting_per_tenant: &$replica.waiting_per_tenant,
            batch: &$replica.batch_entries,
            budget_left: $budget,
            kv_available_blocks: $replica.kv.available_blocks(),
            kv_capacity_blocks: $replica.kv.capacity_blocks,
            kv_block_tokens: $replica.kv.block_tokens,
            model: $world.model,
            slo: $world.slo,
        }
    };
}

/// Admission keeps 1/100 of KV blocks free (vLLM's default watermark).
const ADMISSION_WATERMARK_DIVISOR: u64 = 100;

/// Everything a run needs besides the workload.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub model: Roofline,
    pub replicas: u32,
    /// Pipeline-parallel stages per replica (each stage holds `layers / pp` layers on
    /// `model.tensor_parallel` GPUs); 1 = no pipeline parallelism.
    pub pipeline_parallel: u32,
    pub scheduler: SchedulerConfig,
    pub router: RouterKind,
    /// Tokens per KV block (vLLM: 16).
    pub kv_block_tokens: u32,
    /// Fraction of GPU memory the server may use (vLLM: 0.9).
    pub memory_utilization: f64,
    /// Memory kept for activations, bytes per GPU; `None` sizes it as vLLM's profile run
    /// does, from the model and the batch limits ([`cotenant_perf::ModelShape::activation_peak_bytes`]
    /// over `token_budget` tokens and `max_seqs` sampled rows).
    pub activation_reserve_bytes: Option<f64>,
    /// Overrides the KV capacity derived from memory (tests, what-ifs).
    pub kv_capacity_tokens: Option<u64>,
    pub slo: Slo,
    /// Length of the windows the service-difference metric is measured over.
    pub service_window: Span,
    pub attribution_eval: Option<AttributionEval>,
    /// Closed-loop clients: at most this many requests in flight, the next issued when
    /// one finishes (vLLM's benchmark `--max-concurrency`); `None` replays arrivals open-loop.
    pub max_concurrency: Option<u32>,
    /// Disaggregated prefill and decode pools (replaces `replicas`); `None` colocates.
    pub disagg: Option<DisaggConfig>,
    /// Speculative decoding (`--spec`); None decodes one token per step.
    pub spec: Option<crate::spec::SpecConfig>,
    /// LoRA adapters per tenant (`--lora`); None serves the base model only.
    pub lora: Option<crate::lora::LoraConfig>,
    /// KV swap to CPU memory on preemption (`--kv-offload`); None recomputes.
    pub kv_offload: Option<crate::offload::OffloadConfig>,
}

impl ServeConfig {
    /// One GPU's memory budget: weights, activation reserve and KV cache
    /// (see [`cotenant_perf::memory`]).
    pub fn memory_plan(&self) -> MemoryPlan {
        let limits = self.scheduler.limits;
        let batch = ActivationBatch { tokens: limits.token_budget, sequences: limits.max_seqs };
        let whole = MemoryPlan::new(
            &self.model.model,
            &self.model.gpu,
            self.model.tensor_parallel,
            self.memory_utilization,
            batch,
            self.activation_reserve_bytes,
        );
        stage_memory_plan(&self.model.model, self.model.tensor_parallel, self.pipeline_parallel, &whole)
    }

    /// KV-cache tokens per replica: the override, or [`Self::memory_plan`]'s.
    pub fn kv_capacity_tokens(&self) -> u64 {
        self.kv_capacity_tokens
            .unwrap_or_else(|| crate::features::kv_capacity_tokens(self, &self.memory_plan()))
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ServeError {
    #[error(
        "model {model} does not fit on {tp} x {gpu}: per GPU, {usable_gib:.2} GiB usable minus {weights_gib:.2} GiB of weights and {activations_gib:.2} GiB of activations leaves {free_gib:.2} GiB for KV cache, less than one {block_tokens}-token block"
    )]
    ModelDoesNotFit {
        model: String,
        gpu: String,
        tp: u32,
        usable_gib: f64,
        weights_gib: f64,
        activations_gib: f64,
        free_gib: f64,
        block_tokens: u32,
    },
    #[error("request {request} needs {tokens} tokens of KV, more than the replica's {capacity}")]
    RequestTooLarge { request: usize, tokens: u64, capacity: u64 },
    #[error("no replicas")]
    NoReplicas,
    #[error("KV blocks of 0 tokens")]
    ZeroBlockTokens,
    #[error("the scheduler was configured for {scheduler} tenants, the workload has {workload}")]
    TenantMismatch { scheduler: usize, workload: usize },
    #[error("tenant {tenant}: weight {weight} must be a positive number")]
    BadWeight { tenant: String, weight: f64 },
    #[error("request {request} names a tenant beyond the {tenants} the workload declares")]
    UnknownTenant { request: usize, tenants: usize },
    #[error("request {request} arrives before request {previous}: requests must be sorted by arrival")]
    Unsorted { request: usize, previous: usize },
    #[error("request {request} has {prompt_tokens} prompt and {output_tokens} output tokens; both must be at least 1")]
    EmptyRequest { request: usize, prompt_tokens: u32, output_tokens: u32 },
    /// A configuration value outside its range.
    #[error("{field} = {value}: must be {allowed}")]
    BadConfig { field: &'static str, value: String, allowed: &'static str },
    /// The arrivals span more service windows than a run keeps.
    #[error(
        "{windows} service windows of {window_s} s before the last arrival; at most {MAX_SHARE_WINDOWS} are kept (widen the window)"
    )]
    TooManyWindows { windows: u64, window_s: f64 },
}

/// Service (VTC units: prompt tokens + 2 x output tokens) per tenant in one window,
/// and whether each tenant had requests waiting at every event of the window.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceWindow {
    pub service: Vec<f64>,
    pub backlogged: Vec<bool>,
}

/// What a run produced. Per-request figures are in `seqs` (indexed like the workload).
#[derive(Debug)]
pub struct ServeResult {
    pub seqs: Vec<Seq>,
    pub tbt: Histogram,
    pub iterations: u64,
    pub busy_us: u64,
    pub end: Time,
    pub preemptions: u64,
    /// Per tenant: VTC-weighted service and attributed GPU time (ns).
    pub tenant_service: Vec<f64>,
    pub tenant_attributed_ns: Vec<u64>,
    pub windows: Vec<ServiceWindow>,
    pub kv_capacity_tokens: u64,
    pub kv_stats: Vec<KvStats>,
    pub scheduler_name: &'static str,
    pub diagnostics: Vec<Vec<(String, f64)>>,
    pub attribution: Option<AttributionErrors>,
    /// Wall-clock-free work counter: attribution calls made (one per iteration).
    pub attribution_calls: u64,
    /// Closed loop: when each request was issued (its latency is measured from there);
    /// empty for an open-loop run. See [`crate::closed_loop::issued_workload`].
    pub issued: Vec<Time>,
    /// Disaggregated pools: KV transfers made and their total time, µs.
    pub kv_transfers: u64,
    pub kv_transfer_us: u64,
    /// Speculative decoding, LoRA and KV offload counters.
    pub request_features: RequestFeatureStats,
    /// Model FLOPs, bytes moved and KV blocks in use, per replica and service window.
    pub usage: Usage,
}

#[derive(Debug)]
struct Replica {
    scheduler: Box<dyn RequestScheduler>,
    limits: BatchLimits,
    kv: KvPool,
    waiting: Vec<RequestId>,
    running: Vec<RequestId>,
    backlog: Vec<u32>,
    waiting_per_tenant: Vec<u32>,
    batch_ids: Vec<RequestId>,
    batch_entries: Vec<BatchEntry>,
    batch_prefill: Vec<bool>,
    /// Each batch entry's own roofline term, kept from timing the batch for attribution.
    batch_own_s: Vec<f64>,
    busy: bool,
    batch_span: Span,
    outstanding_tokens: u64,
    admissions: u64,
    /// Pipeline parallelism (pp > 1): stages and the micro-batches in flight.
    pipeline: Option<Pipeline>,
    role: Role,
    usage: ReplicaUsage,
}

/// A replica's pipeline stages and the micro-batches in them, oldest first.
#[derive(Debug)]
struct Pipeline {
    depth: usize,
    stages: Stages,
    link: Link,
    in_flight: VecDeque<InFlight>,
    stage_s: Vec<f64>,
}

/// A launched micro-batch (the replica's batch fields, moved out until it completes).
#[derive(Debug)]
struct InFlight {
    ids: Vec<RequestId>,
    entries: Vec<BatchEntry>,
    prefill: Vec<bool>,
    own_s: Vec<f64>,
    span: Span,
}

/// Shared read-only context of a run.
struct World<'a> {
    requests: &'a [Request],
    tenants: &'a [TenantSpec],
    model: &'a Roofline,
    slo: Slo,
    prefix_block_tokens: u32,
}

/// Runs the workload to completion.
pub fn simulate(workload: &Workload, config: &ServeConfig) -> Result<ServeResult, ServeError> {
    let capacity_tokens = validate(workload, config)?;
    let capacity_blocks = capacity_tokens / u64::from(config.kv_block_tokens);
    let replica_count = config.disagg.map_or(config.replicas, |d| d.prefill + d.decode);
    let mut replicas: Vec<Replica> = (0..replica_count)
        .map(|r| new_replica(workload, config, capacity_blocks, Role::of(config.disagg, r)))
        .collect();
    let mut run = Run::new(workload, config, capacity_tokens);
    let mut router = Router::new(config.router);
    let mut disagg = config.disagg.map(|d| Disagg::new(d, config));
    let mut closed = config.max_concurrency.map(ClosedLoop::new);
    // Closed loop: each request's arrival becomes its issue time, which schedulers see.
    let mut requests: Cow<'_, [Request]> = Cow::Borrowed(&workload.requests);
    if closed.is_some() {
        requests = Cow::Owned(workload.requests.clone());
    }
    let mut completions: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    // Pipelines: when a replica's first stage frees for its next micro-batch.
    let mut wakeups: BinaryHeap<Reverse<(Time, usize)>> = BinaryHeap::new();
    let mut next_arrival = 0;
    let arrival_replicas = config.disagg.map_or(replicas.len(), |d| d.prefill as usize);
    let mut outstanding = vec![0_u64; arrival_replicas];
    let issue_time = |closed: &Option<ClosedLoop>, next: usize, finished: u64| {
        let arrival = workload.requests.get(next)?.arrival;
        match closed {
            Some(closed) => closed.next_issue(arrival, finished),
            None => Some(arrival),
        }
    };
    loop {
        let next_event = [
            issue_time(&closed, next_arrival, run.finished),
            completions.peek().map(|Reverse((t, _))| *t),
            wakeups.peek().map(|Reverse((t, _))| *t),
            disagg.as_ref().and_then(Disagg::next_event),
        ];
        let Some(now) = next_event.into_iter().flatten().min() else { break };
        {
            let world = World::new(&requests, workload, config);
            let finished_before = run.finished;
            while let Some(&Reverse((t, r))) = completions.peek() {
                if t != now {
                    break;
                }
                completions.pop();
                run.complete_batch(&world, &mut replicas[r], now);
                if let Some(disagg) = disagg.as_mut() {
                    disagg.hand_off(&mut run, &world, &mut replicas, r);
                }
            }
            while wakeups.peek().is_some_and(|Reverse((t, _))| *t == now) {
                wakeups.pop();
            }
            if let Some(disagg) = disagg.as_mut() {
                disagg.finish_transfers(&mut run, &world, &mut replicas, now);
            }
            if let Some(closed) = closed.as_mut() {
                if run.finished > finished_before {
                    closed.on_finished(now);
                }
            }
        }
        let mut issued = next_arrival;
        while issue_time(&closed, issued, run.finished) == Some(now) {
            if let Some(closed) = closed.as_mut() {
                closed.issue(now);
                requests.to_mut()[issued].arrival = now;
            }
            issued += 1;
        }
        let world = World::new(&requests, workload, config);
        while next_arrival < issued {
            for (r, replica) in replicas.iter().take(arrival_replicas).enumerate() {
                outstanding[r] = replica.outstanding_tokens;
            }
            let target = router.route(&world.requests[next_arrival], &outstanding);
            run.arrive(&world, &mut replicas[target], target, next_arrival as RequestId, now);
            next_arrival += 1;
        }
        if let Some(disagg) = disagg.as_mut() {
            disagg.start_transfers(&mut run, &mut replicas, &config.model.model, now);
        }
        run.note_backlog(now);
        for (r, replica) in replicas.iter_mut().enumerate() {
            if let Some(pipeline) = &replica.pipeline {
                replica.busy =
                    pipeline.in_flight.len() >= pipeline.depth || pipeline.stages.first_free() > now;
            }
            if !replica.busy {
                if let Some(end) = run.start_iteration(&world, replica, now) {
                    completions.push(Reverse((end, r)));
                    if let Some(pipeline) = &replica.pipeline {
                        if pipeline.in_flight.len() < pipeline.depth {
                            wakeups.push(Reverse((pipeline.stages.first_free(), r)));
                        }
                    }
                }
            }
        }
    }
    let mut result = run.into_result(replicas);
    result.issued = closed.map(|c| c.times).unwrap_or_default();
    if let Some(disagg) = disagg {
        (result.kv_transfers, result.kv_transfer_us) = (disagg.transfers, disagg.transfer_us);
    }
    Ok(result)
}

impl<'a> World<'a> {
    fn new(requests: &'a [Request], workload: &'a Workload, config: &'a ServeConfig) -> World<'a> {
        World {
            requests,
            tenants: &workload.tenants,
            model: &config.model,
            slo: config.slo,
            prefix_block_tokens: workload.prefix_block_tokens,
        }
    }
}

fn new_replica(workload: &Workload, config: &ServeConfig, capacity_blocks: u64, role: Role) -> Replica {
    let scheduler = build_scheduler(&config.scheduler, &config.model);
    let tenants = workload.tenants.len();
    let pp = config.pipeline_parallel;
    let pipeline = (pp > 1).then(|| Pipeline {
        depth: pp as usize,
        stages: Stages::new(pp),
        link: Link::between_stages(&config.model.gpu, config.model.tensor_parallel, pp),
        in_flight: VecDeque::new(),
        stage_s: Vec::new(),
    });
    Replica {
        limits: scheduler.limits(),
        scheduler,
        kv: KvPool::new(capacity_blocks, config.kv_block_tokens, workload.prefix_block_tokens),
        waiting: Vec::new(),
        running: Vec::new(),
        backlog: vec![0; tenants],
        waiting_per_tenant: vec![0; tenants],
        batch_ids: Vec::new(),
        batch_entries: Vec::new(),
        batch_prefill: Vec::new(),
        batch_own_s: Vec::new(),
        busy: false,
        batch_span: Span::ZERO,
        outstanding_tokens: 0,
        admissions: 0,
        pipeline,
        role,
        usage: ReplicaUsage::default(),
    }
}

fn validate(workload: &Workload, config: &ServeConfig) -> Result<u64, ServeError> {
    if config.replicas == 0 {
        return Err(ServeError::NoReplicas);
    }
    if config.kv_block_tokens == 0 {
        return Err(ServeError::ZeroBlockTokens);
    }
    let bad = |field, value: String, allowed| Err(ServeError::BadConfig { field, value, allowed });
    let pp = config.pipeline_parallel;
    if pp == 0 || pp > config.model.model.layers {
        return bad("pipeline_parallel", pp.to_string(), "between 1 and the model's layers");
    }
    if config.max_concurrency == Some(0) {
        return bad("max_concurrency", "0".into(), "at least 1");
    }
    if let Some(disagg) = config.disagg {
        disagg.validate()?;
    }
    let utilization = config.memory_utilization;
    if !(utilization.is_finite() && utilization > 0.0 && utilization <= 1.0) {
        return bad("memory_utilization", utilization.to_string(), "a fraction in (0, 1]");
    }
    let limits = config.scheduler.limits;
    if limits.token_budget == 0 {
        return bad("token_budget", "0".into(), "at least 1");
    }
    if limits.max_seqs == 0 {
        return bad("max_seqs", "0".into(), "at least 1");
    }
    if config.service_window == Span::ZERO {
        return bad("service_window", "0".into(), "at least 1 µs");
    }
    let last_arrival = workload.requests.last().map_or(0, |r| r.arrival.0);
    let windows = last_arrival / config.service_window.0;
    if windows > MAX_SHARE_WINDOWS {
        return Err(ServeError::TooManyWindows { windows, window_s: config.service_window.as_secs_f64() });
    }
    crate::features::validate(config, workload.tenants.len())?;
    if config.disagg.is_some()
        && (config.spec.is_some() || config.lora.is_some() || config.kv_offload.is_some())
    {
        // The features keep per-replica state (adapter slots, swap space) that a KV
        // hand-off between pools would have to move; that is not modelled.
        return bad(
            "disagg",
            "with --spec, --lora or --kv-offload".into(),
            "used alone (these features are modelled on colocated replicas)",
        );
    }
    if config.scheduler.tenants.len() != workload.tenants.len() {
        return Err(ServeError::TenantMismatch {
            scheduler: config.scheduler.tenants.len(),
            workload: workload.tenants.len(),
        });
    }
    if let Some(tenant) = workload.tenants.iter().find(|t| !(t.weight.is_finite() && t.weight > 0.0)) {
        return Err(ServeError::BadWeight { tenant: tenant.name.clone(), weight: tenant.weight });
    }
    if let Some(request) = workload.requests.iter().position(|r| r.tenant.index() >= workload.tenants.len()) {
        return Err(ServeError::UnknownTenant { request, tenants: workload.tenants.len() });
    }
    let capacity = config.kv_capacity_tokens();
    if capacity < u64::from(config.kv_block_tokens) {
        let plan = config.memory_plan();
        return Err(ServeError::ModelDoesNotFit {
            model: config.model.model.name.clone(),
            gpu: config.model.gpu.name.to_string(),
            tp: config.model.tensor_parallel,
            usable_gib: plan.usable_bytes / GIB,
            weights_gib: plan.weight_bytes / GIB,
            activations_gib: plan.activation_bytes / GIB,
            free_gib: plan.kv_bytes / GIB,
            block_tokens: config.kv_block_tokens,
        });
    }
    // Rounded down to whole blocks; a request's blocks must fit alone.
    let capacity = capacity / u64::from(config.kv_block_tokens) * u64::from(config.kv_block_tokens);
    if let Some(index) = workload.requests.windows(2).position(|pair| pair[1].arrival < pair[0].arrival) {
        return Err(ServeError::Unsorted { request: index + 1, previous: index });
    }
    for (index, request) in workload.requests.iter().enumerate() {
        if request.prompt_tokens == 0 || request.output_tokens == 0 {
            let (prompt_tokens, output_tokens) = (request.prompt_tokens, request.output_tokens);
            return Err(ServeError::EmptyRequest { request: index, prompt_tokens, output_tokens });
        }
        let tokens = u64::from(request.prompt_tokens) + u64::from(request.output_tokens);
        if tokens > capacity {
            return Err(ServeError::RequestTooLarge { request: index, tokens, capacity });
        }
    }
    Ok(capacity)
}

/// Mutable books of a run.
struct Run {
    seqs: Vec<Seq>,
    tbt: Histogram,
    iterations: u64,
    busy_us: u64,
    end: Time,
    preemptions: u64,
    tenant_service: Vec<f64>,
    tenant_attributed_ns: Vec<u64>,
    global_waiting: Vec<u32>,
    windows: Vec<ServiceWindow>,
    window_us: u64,
    kv_capacity_tokens: u64,
    attribution_eval: Option<AttributionEval>,
    attribution: Option<AttributionErrors>,
    attribution_calls: u64,
    share_scratch: Vec<f64>,
    share_ns: Vec<u64>,
    order_scratch: Vec<RequestId>,
    /// Pipelines: whether each request is in a micro-batch in flight (empty when pp = 1).
    in_flight: Vec<bool>,
    /// Requests finished so far (closed-loop clients issue on each).
    finished: u64,
    features: RequestFeatures,
    usage: Usage,
}

impl Run {
    fn new(workload: &Workload, config: &ServeConfig, kv_capacity_tokens: u64) -> Run {
        let tenants = workload.tenants.len();
        Run {
            seqs: workload.requests.iter().map(|r| Seq::new(r.prompt_tokens)).collect(),
            tbt: Histogram::default(),
            iterations: 0,
            busy_us: 0,
            end: Time::ZERO,
            preemptions: 0,
            tenant_service: vec![0.0; tenants],
            tenant_attributed_ns: vec![0; tenants],
            global_waiting: vec![0; tenants],
            windows: Vec::new(),
            window_us: config.service_window.0.max(1),
            kv_capacity_tokens,
            attribution_eval: config.attribution_eval,
            attribution: config.attribution_eval.map(|_| AttributionErrors::default()),
            attribution_calls: 0,
            share_scratch: Vec::new(),
            share_ns: Vec::new(),
            order_scratch: Vec::new(),
            in_flight: if config.pipeline_parallel > 1 {
                vec![false; workload.requests.len()]
            } else {
                Vec::new()
            },
            finished: 0,
            features: RequestFeatures::new(config, workload.requests.len()),
            usage: Usage::new(
                &config.model,
                config.model.tensor_parallel * config.pipeline_parallel,
                config.service_window,
            ),
        }
    }

    fn is_in_flight(&self, id: RequestId) -> bool {
        self.in_flight.get(id as usize).copied().unwrap_or(false)
    }

    fn window(&mut self, now: Time) -> usize {
        let index = (now.0 / self.window_us) as usize;
        let tenants = self.tenant_service.len();
        while self.windows.len() <= index {
            self.windows.push(ServiceWindow { service: vec![0.0; tenants], backlogged: vec![true; tenants] });
        }
        index
    }

    /// A tenant with nothing waiting anywhere is not backlogged in this window.
    fn note_backlog(&mut self, now: Time) {
        let index = self.window(now);
        for (tenant, count) in self.global_waiting.iter().enumerate() {
            if *count == 0 {
                self.windows[index].backlogged[tenant] = false;
            }
        }
    }

    fn arrive(
        &mut self,
        world: &World<'_>,
        replica: &mut Replica,
        replica_index: usize,
        id: RequestId,
        now: Time,
    ) {
        let request = &world.requests[id as usize];
        let seq = &mut self.seqs[id as usize];
        seq.phase = Phase::Waiting;
        seq.replica = replica_index as u32;
        replica.waiting.push(id);
        replica.backlog[request.tenant.index()] += 1;
        replica.waiting_per_tenant[request.tenant.index()] += 1;
        self.global_waiting[request.tenant.index()] += 1;
        replica.outstanding_tokens += u64::from(request.prompt_tokens) + u64::from(request.output_tokens);
        let cx = sched_cx!(world, &self.seqs, replica, now, 0);
        replica.scheduler.on_arrival(&cx, id);
    }

    /// Forms a batch and returns when it completes, or None if there is nothing to run.
    fn start_iteration(&mut self, world: &World<'_>, replica: &mut Replica, now: Time) -> Option<Time> {
        self.form_batch(world, replica, now);
        if replica.batch_entries.is_empty() {
            return None;
        }
        let duration_s = world.model.iteration_s_with_own(&replica.batch_entries, &mut replica.batch_own_s)
            + self.features.iteration_extra_s(
                world.model,
                world.requests,
                &self.seqs,
                &replica.batch_ids,
                &replica.batch_entries,
                &replica.batch_prefill,
            );
        if replica.pipeline.is_some() {
            return Some(self.launch_micro_batch(world, replica, duration_s, now));
        }
        let duration = Span::from_secs_f64_ceil(duration_s).max(Span(1));
        replica.busy = true;
        replica.batch_span = duration;
        self.busy_us += duration.0;
        let (used, capacity) = (replica.kv.used_blocks(), replica.kv.capacity_blocks);
        self.usage.record(
            world.model,
            &mut replica.usage,
            &replica.batch_entries,
            now,
            duration,
            used,
            capacity,
        );
        Some(now + duration)
    }

    /// Sends the formed batch into the replica's pipeline (see [`crate::pipeline`]) and
    /// returns when it leaves the last stage. Its requests sit out until then.
    fn launch_micro_batch(
        &mut self,
        world: &World<'_>,
        replica: &mut Replica,
        duration_s: f64,
        now: Time,
    ) -> Time {
        let Some(pipeline) = replica.pipeline.as_mut() else { return now };
        let depth = pipeline.depth as u32;
        let transfer_s = stage_times(
            world.model,
            pipeline.link,
            depth,
            &replica.batch_entries,
            duration_s,
            &mut pipeline.stage_s,
        );
        let launch = pipeline.stages.launch(now, &pipeline.stage_s, transfer_s);
        // Utilization: the batch's model work over the stages' mean busy time.
        let (used, capacity) = (replica.kv.used_blocks(), replica.kv.capacity_blocks);
        let mean_stage_busy = Span(launch.stage_work.0 / u64::from(depth));
        self.usage.record(
            world.model,
            &mut replica.usage,
            &replica.batch_entries,
            now,
            mean_stage_busy,
            used,
            capacity,
        );
        for &id in &replica.batch_ids {
            self.in_flight[id as usize] = true;
        }
        pipeline.in_flight.push_back(InFlight {
            ids: std::mem::take(&mut replica.batch_ids),
            entries: std::mem::take(&mut replica.batch_entries),
            prefill: std::mem::take(&mut replica.batch_prefill),
            own_s: std::mem::take(&mut replica.batch_own_s),
            span: launch.stage_work,
        });
        replica.busy = true;
        // A replica's busy time: its stages' mean busy time.
        self.busy_us += mean_stage_busy.0;
        launch.end
    }

    /// An iteration (pp = 1) or the oldest micro-batch in flight (pp > 1) completes.
    fn complete_batch(&mut self, world: &World<'_>, replica: &mut Replica, now: Time) {
        if let Some(done) = replica.pipeline.as_mut().and_then(|p| p.in_flight.pop_front()) {
            for &id in &done.ids {
                self.in_flight[id as usize] = false;
            }
            replica.batch_ids = done.ids;
            replica.batch_entries = done.entries;
            replica.batch_prefill = done.prefill;
            replica.batch_own_s = done.own_s;
            replica.batch_span = done.span;
        }
        self.finish_iteration(world, replica, now);
    }

    fn form_batch(&mut self, world: &World<'_>, replica: &mut Replica, now: Time) {
        replica.batch_ids.clear();
        replica.batch_entries.clear();
        replica.batch_prefill.clear();
        let mut budget = replica.limits.token_budget;
        self.schedule_running(world, replica, now, &mut budget);
        self.admit_waiting(world, replica, now, &mut budget);
        // Liveness guard: a replica with nothing running never idles with work waiting.
        if replica.batch_entries.is_empty() && replica.running.is_empty() && !replica.waiting.is_empty() {
            let mut budget = replica.limits.token_budget.max(1);
            self.admit(world, replica, now, 0, u32::MAX, &mut budget);
        }
    }

    fn schedule_running(&mut self, world: &World<'_>, replica: &mut Replica, now: Time, budget: &mut u32) {
        let mut order = std::mem::take(&mut self.order_scratch);
        order.clear();
        order.extend_from_slice(&replica.running);
        if replica.limits.decode_first {
            // Stable: decodes keep admission order, then prefills keep theirs.
            order.sort_by_key(|&id| self.seqs[id as usize].in_prefill());
        }
        for &id in &order {
            let seq = &self.seqs[id as usize];
            if seq.phase != Phase::Running
                || self.is_in_flight(id)
                || replica.batch_ids.len() >= replica.limits.max_seqs as usize
                || *budget == 0
            {
                continue;
            }
            let tokens = if seq.in_prefill() {
                let cx = sched_cx!(world, &self.seqs, replica, now, *budget);
                let cap = replica.scheduler.running_chunk_cap(&cx, id);
                seq.prefill_left().min(*budget).min(cap)
            } else {
                self.features.decode_tokens(&world.requests[id as usize], seq, *budget)
            };
            // A cap of 0 from the scheduler: this prefill sits out one iteration.
            if tokens > 0 && self.reserve_blocks(world, replica, id, tokens) {
                self.push_entry(replica, id, tokens);
                *budget -= tokens;
            }
        }
        self.order_scratch = order;
    }

    /// Allocates the blocks `id` needs to compute `tokens` more, preempting the newest
    /// running requests not yet in this batch (recompute) until they fit. Returns false
    /// if `id` itself had to be preempted.
    fn reserve_blocks(
        &mut self,
        world: &World<'_>,
        replica: &mut Replica,
        id: RequestId,
        tokens: u32,
    ) -> bool {
        let need = self.private_blocks_needed(replica, id, tokens);
        while !replica.kv.try_allocate(need) {
            let victim = replica.running.iter().rev().copied().find(|&v| {
                v != id
                    && self.seqs[v as usize].phase == Phase::Running
                    && !replica.batch_ids.contains(&v)
                    && !self.is_in_flight(v)
            });
            match victim {
                Some(victim) => self.preempt(world, replica, victim),
                None => {
                    self.preempt(world, replica, id);
                    return false;
                }
            }
        }
        self.seqs[id as usize].private_blocks += need;
        true
    }

    fn private_blocks_needed(&self, replica: &Replica, id: RequestId, tokens: u32) -> u64 {
        let seq = &self.seqs[id as usize];
        let total = replica.kv.blocks_for_tokens(u64::from(seq.kv_tokens) + u64::from(tokens));
        let cached = u64::from(seq.prefix_entries) * replica.kv.blocks_per_prefix_entry();
        total.saturating_sub(cached).saturating_sub(seq.private_blocks)
    }

    fn preempt(&mut self, world: &World<'_>, replica: &mut Replica, id: RequestId) {
        let request = &world.requests[id as usize];
        self.features.preempted(request, id, &self.seqs[id as usize]);
        let seq = &mut self.seqs[id as usize];
        replica.kv.free(seq.private_blocks);
        replica.kv.release(&request.prefix_hashes[..seq.prefix_entries as usize]);
        seq.private_blocks = 0;
        seq.prefix_entries = 0;
        seq.kv_tokens = 0;
        seq.prefill_target = request.prompt_tokens + seq.generated;
        seq.phase = Phase::Waiting;
        seq.preemptions += 1;
        self.preemptions += 1;
        replica.running.retain(|&r| r != id);
        replica.waiting.insert(0, id);
        replica.waiting_per_tenant[request.tenant.index()] += 1;
        self.global_waiting[request.tenant.index()] += 1;
    }

    fn admit_waiting(&mut self, world: &World<'_>, replica: &mut Replica, now: Time, budget: &mut u32) {
        while *budget > 0
            && replica.batch_ids.len() < replica.limits.max_seqs as usize
            && !replica.waiting.is_empty()
        {
            let cx = sched_cx!(world, &self.seqs, replica, now, *budget);
            let Pick::Admit { waiting_index, max_tokens } = replica.scheduler.pick(&cx) else { break };
            if waiting_index >= replica.waiting.len()
                || !self.admit(world, replica, now, waiting_index, max_tokens, budget)
            {
                break;
            }
        }
    }

    /// Admits `waiting[index]` if its first chunk's KV fits; false otherwise.
    fn admit(
        &mut self,
        world: &World<'_>,
        replica: &mut Replica,
        now: Time,
        index: usize,
        max_tokens: u32,
        budget: &mut u32,
    ) -> bool {
        let id = replica.waiting[index];
        let request = &world.requests[id as usize];
        if !self.features.can_admit(request, self.seqs[id as usize].replica) {
            return false;
        }
        let hits = replica.kv.acquire_prefix(&request.prefix_hashes);
        let seq = &mut self.seqs[id as usize];
        seq.prefix_entries = hits;
        if hits > 0 {
            let cached_tokens = hits.saturating_mul(world.prefix_block_tokens).min(seq.prefill_target - 1);
            seq.kv_tokens = cached_tokens;
            seq.prefix_hit_tokens += cached_tokens;
            replica.kv.stats.prefix_hit_tokens += u64::from(cached_tokens);
        }
        let restored = self.features.restore_swapped(id, seq);
        let tokens = seq.prefill_left().min(*budget).min(max_tokens.max(1));
        let need = self.private_blocks_needed(replica, id, tokens);
        // vLLM's admission check: the whole remaining prefill must fit beside a 1%
        // watermark, or a request admitted on its first chunk is preempted midway
        // (recompute thrash under KV pressure).
        let whole_prefill = self.private_blocks_needed(replica, id, self.seqs[id as usize].prefill_left());
        let watermark = replica.kv.capacity_blocks / ADMISSION_WATERMARK_DIVISOR;
        let fits = whole_prefill + watermark <= replica.kv.available_blocks() || replica.running.is_empty();
        if !fits || !replica.kv.try_allocate(need) {
            let seq = &mut self.seqs[id as usize];
            seq.kv_tokens -= restored;
            replica.kv.release(&request.prefix_hashes[..seq.prefix_entries as usize]);
            seq.prefix_hit_tokens -= seq.kv_tokens;
            replica.kv.stats.prefix_hit_tokens -= u64::from(seq.kv_tokens);
            seq.prefix_entries = 0;
            seq.kv_tokens = 0;
            return false;
        }
        let seq = &mut self.seqs[id as usize];
        seq.private_blocks += need;
        let first_time = seq.admitted_order == 0 && seq.preemptions == 0;
        replica.admissions += 1;
        seq.admitted_order = replica.admissions;
        seq.phase = Phase::Running;
        replica.waiting.remove(index);
        replica.running.push(id);
        replica.waiting_per_tenant[request.tenant.index()] -= 1;
        self.global_waiting[request.tenant.index()] -= 1;
        self.features.admitted(request, id, seq.replica);
        self.push_entry(replica, id, tokens);
        *budget -= tokens;
        let cx = sched_cx!(world, &self.seqs, replica, now, *budget);
        replica.scheduler.on_admit(&cx, id, first_time);
        true
    }

    fn push_entry(&mut self, replica: &mut Replica, id: RequestId, tokens: u32) {
        let seq = &self.seqs[id as usize];
        let prefill = seq.in_prefill();
        let emits_token = !prefill || tokens == seq.prefill_left();
        replica.batch_ids.push(id);
        replica.batch_entries.push(BatchEntry {
            new_tokens: tokens,
            context_tokens: seq.kv_tokens,
            emits_token,
        });
        replica.batch_prefill.push(prefill);
    }

    fn finish_iteration(&mut self, world: &World<'_>, replica: &mut Replica, now: Time) {
        replica.busy = false;
        self.iterations += 1;
        self.end = self.end.max(now);
        self.attribute(world, replica);
        for position in 0..replica.batch_ids.len() {
            let (id, entry, prefill) = (
                replica.batch_ids[position],
                replica.batch_entries[position],
                replica.batch_prefill[position],
            );
            self.apply_entry(world, replica, id, entry, prefill, now);
        }
        replica.running.retain(|&id| self.seqs[id as usize].phase == Phase::Running);
    }

    fn attribute(&mut self, world: &World<'_>, replica: &Replica) {
        let started = self.iterations; // a cheap, deterministic sampling clock
        let duration_ns = replica.batch_span.0 * 1_000;
        llmvisor_shares_with_own(
            world.model,
            &replica.batch_entries,
            &replica.batch_own_s,
            duration_ns,
            &mut self.share_scratch,
            &mut self.share_ns,
        );
        self.attribution_calls += 1;
        for (position, &id) in replica.batch_ids.iter().enumerate() {
            self.seqs[id as usize].attributed_ns += self.share_ns[position];
            self.tenant_attributed_ns[world.requests[id as usize].tenant.index()] += self.share_ns[position];
        }
        if let (Some(eval), Some(errors)) = (self.attribution_eval, self.attribution.as_mut()) {
            if started.is_multiple_of(eval.every_nth_iteration.max(1)) {
                errors.evaluate(world.model, &replica.batch_entries, &replica.batch_prefill, eval);
            }
        }
    }

    fn apply_entry(
        &mut self,
        world: &World<'_>,
        replica: &mut Replica,
        id: RequestId,
        entry: BatchEntry,
        prefill: bool,
        now: Time,
    ) {
        let request = &world.requests[id as usize];
        let seq = &mut self.seqs[id as usize];
        if seq.phase != Phase::Running {
            return; // preempted after it was placed (cannot happen today; kept safe)
        }
        let emitted = self.features.emitted_tokens(id, seq, entry, prefill);
        // A decoding row keeps the KV of the tokens it emits (a speculative step's
        // rejected proposals are dropped, and their blocks released).
        seq.kv_tokens += if prefill { entry.new_tokens } else { emitted };
        if !prefill && entry.new_tokens > emitted {
            crate::spec::release_rejected_blocks(&mut replica.kv, seq);
        }
        if prefill && !seq.in_prefill() {
            self.publish_prefix(world, replica, id);
        }
        let seq = &mut self.seqs[id as usize];
        // Tokens of one step share its end time: after the first, their gaps are 0.
        for _ in 0..emitted {
            seq.generated += 1;
            if seq.first_token.is_none() {
                seq.first_token = Some(now);
            } else {
                let gap_us = (now - seq.last_token).0;
                self.tbt.record(gap_us);
                seq.max_tbt_us = seq.max_tbt_us.max(gap_us);
            }
            seq.last_token = now;
        }
        let prefill_tokens = if prefill { entry.new_tokens } else { 0 };
        let service = f64::from(prefill_tokens) + 2.0 * f64::from(emitted);
        self.tenant_service[request.tenant.index()] += service;
        let window = self.window(now);
        self.windows[window].service[request.tenant.index()] += service;
        replica.scheduler.on_service(request, prefill_tokens, emitted);
        if self.seqs[id as usize].generated >= request.output_tokens {
            self.complete(world, replica, id, now);
        }
    }

    fn publish_prefix(&mut self, world: &World<'_>, replica: &mut Replica, id: RequestId) {
        let request = &world.requests[id as usize];
        if world.prefix_block_tokens == 0 {
            return;
        }
        let seq = &mut self.seqs[id as usize];
        let full_blocks = (request.prompt_tokens / world.prefix_block_tokens) as usize;
        let to = full_blocks.min(request.prefix_hashes.len());
        let from = seq.prefix_entries as usize;
        if to > from {
            let (published, released) =
                replica.kv.publish(&request.prefix_hashes, from, to, seq.private_blocks);
            seq.private_blocks -= released;
            seq.prefix_entries = (from + published) as u32;
        }
    }

    fn complete(&mut self, world: &World<'_>, replica: &mut Replica, id: RequestId, now: Time) {
        let request = &world.requests[id as usize];
        let seq = &mut self.seqs[id as usize];
        replica.kv.free(seq.private_blocks);
        replica.kv.release(&request.prefix_hashes[..seq.prefix_entries as usize]);
        seq.private_blocks = 0;
        seq.phase = Phase::Done;
        seq.finish = Some(now);
        self.finished += 1;
        replica.backlog[request.tenant.index()] -= 1;
        replica.outstanding_tokens -= u64::from(request.prompt_tokens) + u64::from(request.output_tokens);
        self.features.completed(request, seq.replica);
        replica.scheduler.on_finish(id, request);
    }

    fn into_result(self, replicas: Vec<Replica>) -> ServeResult {
        let scheduler_name = replicas.first().map_or("none", |r| r.scheduler.name());
        ServeResult {
            kv_stats: replicas.iter().map(|r| r.kv.stats).collect(),
            diagnostics: replicas.iter().map(|r| r.scheduler.diagnostics()).collect(),
            scheduler_name,
            seqs: self.seqs,
            tbt: self.tbt,
            iterations: self.iterations,
            busy_us: self.busy_us,
            end: self.end,
            preemptions: self.preemptions,
            tenant_service: self.tenant_service,
            tenant_attributed_ns: self.tenant_attributed_ns,
            windows: self.windows,
            kv_capacity_tokens: self.kv_capacity_tokens,
            attribution: self.attribution,
            attribution_calls: self.attribution_calls,
            issued: Vec::new(),
            kv_transfers: 0,
            kv_transfer_us: 0,
            request_features: self.features.stats,
            usage: Usage { replicas: replicas.iter().map(|r| r.usage.clone()).collect(), ..self.usage },
        }
    }
}

// After `sched_cx!`, which it uses.
#[path = "disagg.rs"]
pub mod disagg;
use disagg::Disagg;
pub use disagg::{DisaggConfig, Role};
