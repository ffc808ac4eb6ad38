//! Scheduler and router decisions on hand-built situations.

use cotenant_core::{Span, TenantId, TenantSpec, Time};
use cotenant_perf::{find_gpu, BatchEntry, ModelShape, Roofline, RooflineParams};
use cotenant_serve::router::Router;
use cotenant_serve::scheduler::{
    largest_chunk_within, BatchLimits, BatchSoFar, DriftConfig, DriftSched, FairServe, Lookahead, Pick,
    RequestScheduler, Sarathi, SchedCx, MIN_CHUNK_TOKENS,
};
use cotenant_serve::state::Seq;
use cotenant_serve::{Request, RouterKind, Slo, Tier};

fn model() -> Roofline {
    let gpu = *find_gpu("H100-SXM").expect("catalog");
    Roofline::new(ModelShape::parse("Llama-3.1-8B").expect("catalog"), gpu, 1, RooflineParams::default())
}

fn request(tenant: u32, arrival_s: u64, prompt: u32, output: u32, category: u32, call_index: u32) -> Request {
    Request {
        tenant: TenantId(tenant),
        arrival: Time::from_secs(arrival_s),
        prompt_tokens: prompt,
        output_tokens: output,
        prefix_hashes: Box::new([]),
        category,
        tier: Tier::Standard,
        interaction: 0,
        call_index,
    }
}

/// Everything a `SchedCx` borrows, owned by the test.
struct Situation {
    requests: Vec<Request>,
    seqs: Vec<Seq>,
    tenants: Vec<TenantSpec>,
    waiting: Vec<u32>,
    running: Vec<u32>,
    backlog: Vec<u32>,
    waiting_per_tenant: Vec<u32>,
    batch: Vec<BatchEntry>,
    model: Roofline,
    now: Time,
    slo: Slo,
}

impl Situation {
    fn new(requests: Vec<Request>, waiting: Vec<u32>) -> Situation {
        let tenants = 2;
        let mut waiting_per_tenant = vec![0; tenants];
        for &id in &waiting {
            waiting_per_tenant[requests[id as usize].tenant.index()] += 1;
        }
        Situation {
            seqs: requests.iter().map(|r| Seq::new(r.prompt_tokens)).collect(),
            requests,
            tenants: (0..tenants).map(|t| TenantSpec::new(format!("t{t}"))).collect(),
            backlog: waiting_per_tenant.clone(),
            waiting_per_tenant,
            waiting,
            running: Vec::new(),
            batch: Vec::new(),
            model: model(),
            now: Time::from_secs(100),
            slo: Slo::default(),
        }
    }

    fn cx(&self) -> SchedCx<'_> {
        SchedCx {
            now: self.now,
            requests: &self.requests,
            seqs: &self.seqs,
            tenants: &self.tenants,
            waiting: &self.waiting,
            running: &self.running,
            backlog: &self.backlog,
            waiting_per_tenant: &self.waiting_per_tenant,
            batch: &self.batch,
            budget_left: 8192,
            kv_available_blocks: 10_000,
            kv_capacity_blocks: 10_000,
            kv_block_tokens: 16,
            model: &self.model,
            slo: self.slo,
        }
    }
}

/// Prior 100 tokens. A finished request with 300 actual tokens moves the correction to
/// 0.9 x 1 + 0.1 x 3 = 1.2 (estimate 120); one with 10,000 would move it to
/// 0.9 x 1.2 + 0.1 x 100 = 11.08, clipped to 3 (estimate 300).
#[test]
fn driftsched_corrects_its_estimate_by_a_clipped_ema() {
    let situation =
        Situation::new(vec![request(0, 0, 10, 300, 0, 0), request(0, 0, 10, 10_000, 0, 0)], vec![0, 1]);
    let config = DriftConfig { default_prior_tokens: 100.0, ..DriftConfig::default() };
    let mut drift = DriftSched::new(BatchLimits::default(), 1, config);
    let cx = situation.cx();
    drift.on_admit(&cx, 0, true);
    drift.on_finish(0, &situation.requests[0]);
    assert!((drift.estimate(&situation.requests[0]) - 120.0).abs() < 1e-9);
    drift.on_admit(&cx, 1, true);
    drift.on_finish(1, &situation.requests[1]);
    assert!((drift.estimate(&situation.requests[0]) - 300.0).abs() < 1e-9);
    // Errors: corrected estimates 100 then 120; the static prior 100 both times.
    assert_eq!(drift.error.finished, 2);
    assert!((drift.error.corrected_abs_tokens - (200.0 + 9_880.0)).abs() < 1e-9);
    assert!((drift.error.static_abs_tokens - (200.0 + 9_900.0)).abs() < 1e-9);
}

/// Priors 500 (category 1) and 50 (category 0): the short one goes first; after the
/// long one has waited 30 s more, aging (20 tokens/s) makes it 500 - 600 < 50 - 0.
#[test]
fn driftsched_is_shortest_first_with_aging() {
    let config = DriftConfig { prior_tokens: vec![50.0, 500.0], ..DriftConfig::default() };
    let mut drift = DriftSched::new(BatchLimits::default(), 2, config);
    let mut situation =
        Situation::new(vec![request(0, 100, 10, 1, 1, 0), request(0, 100, 10, 1, 0, 0)], vec![0, 1]);
    assert_eq!(drift.pick(&situation.cx()), Pick::admit(1));
    situation.requests[0].arrival = Time::from_secs(70);
    assert_eq!(drift.pick(&situation.cx()), Pick::admit(0));
}

#[test]
fn fairserve_continues_interactions_before_starting_new_ones() {
    let mut fair = FairServe::new(BatchLimits::default(), vec![1.0, 1.0]);
    // Tenant 1's new interaction arrived first; tenant 0 has a continuing call.
    let situation =
        Situation::new(vec![request(1, 10, 100, 5, 0, 0), request(0, 20, 100, 5, 0, 1)], vec![0, 1]);
    assert_eq!(fair.pick(&situation.cx()), Pick::admit(1));
}

/// Sarathi's chunk beside 64 decodes at 1,000 tokens of context, Llama-3.1-8B on one
/// H100, 50 ms TBT target, worked from the roofline of crates/perf/src/roofline.rs with its
/// default parameters (per-operator linear layers, element-wise term; see its hand tests):
/// fixed 1 + decodes 64 x 0.05222 = 3.342 + LM head over 64 rows 0.420 = 4.762 ms.
/// c = 1,900 (T = 1,964 tokens): linear, per operator smax(compute, memory) x 32 layers:
/// QKV 4.594, O 3.067, up 21.395, down 10.703 = 39.759 ms; element-wise 2.0867 us x 1,964
/// = 4.098 ms; the chunk's attention 0.75731 ns x 1,900^2 / 2 = 1.367 ms (its KV read
/// below the knee); total 49.986 ms <= 50.
/// c = 1,901: 50.010 ms > 50. So the chunk is 1,900 tokens (2,095 before the roofline's
/// element-wise term and per-operator split); with no decodes it is larger.
#[test]
fn sarathi_chunk_for_a_decode_batch_by_hand() {
    let model = model();
    let decodes = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 64];
    let batch = BatchSoFar::of(&model, &decodes);
    let chunk = largest_chunk_within(&model, &batch, 0, 6000, 8192, 0.050);
    assert_eq!(chunk, 1900);
    let at = |c: u32| batch.with_chunk_s(&model, c, 0, 6000);
    assert!((at(1900) - 0.049_986).abs() < 2e-6, "{}", at(1900));
    assert!((at(1901) - 0.050_010).abs() < 2e-6, "{}", at(1901));
    let alone = largest_chunk_within(&model, &BatchSoFar::default(), 0, 6000, 8192, 0.050);
    assert!(alone > chunk, "{alone}");

    // Through the scheduler: the same chunk for a waiting request, none when even one
    // token overshoots, and a minimal chunk on an empty batch so work never stalls.
    let mut situation = Situation::new(vec![request(0, 100, 6000, 10, 0, 0)], vec![0]);
    situation.slo = Slo { ttft: Span::from_secs(5), tbt: Span(50_000) };
    situation.batch = decodes;
    let mut sarathi = Sarathi::new(BatchLimits::default(), situation.slo);
    assert_eq!(sarathi.pick(&situation.cx()), Pick::Admit { waiting_index: 0, max_tokens: 1900 });
    situation.slo.tbt = Span(4_000);
    let mut tight = Sarathi::new(BatchLimits::default(), situation.slo);
    assert_eq!(tight.pick(&situation.cx()), Pick::Stop);
    situation.batch.clear();
    assert_eq!(tight.pick(&situation.cx()), Pick::Admit { waiting_index: 0, max_tokens: MIN_CHUNK_TOKENS });
}

/// Invariant: whenever some chunk fits, the chosen chunk's iteration (computed by the
/// roofline on the whole batch) is within the target and one token more is not (or the
/// chunk is already the most allowed); when none fits, one token overshoots.
#[test]
fn sarathi_chunk_meets_the_target_whenever_one_fits() {
    let model = model();
    let mut checked = 0;
    for decodes in [0_usize, 1, 8, 32, 64, 128, 256] {
        for context in [100_u32, 1000, 4000] {
            for (prefill_done, prefill_left) in [(0_u32, 300_u32), (0, 6000), (2048, 3000)] {
                for target_s in [0.004, 0.010, 0.030, 0.050, 0.100, 0.200] {
                    let entries =
                        vec![
                            BatchEntry { new_tokens: 1, context_tokens: context, emits_token: true };
                            decodes
                        ];
                    let batch = BatchSoFar::of(&model, &entries);
                    let chunk =
                        largest_chunk_within(&model, &batch, prefill_done, prefill_left, 8192, target_s);
                    let with = |c: u32| {
                        let mut all = entries.clone();
                        all.push(BatchEntry {
                            new_tokens: c,
                            context_tokens: prefill_done,
                            emits_token: c >= prefill_left,
                        });
                        model.iteration_s(&all)
                    };
                    if chunk == 0 {
                        assert!(with(1) > target_s, "{decodes} {context} {target_s}");
                        continue;
                    }
                    let seconds = with(chunk);
                    let folded = batch.with_chunk_s(&model, chunk, prefill_done, prefill_left);
                    assert!((seconds - folded).abs() <= 1e-12 * seconds, "{seconds} {folded}");
                    assert!(seconds <= target_s, "{decodes} {context} {target_s}: {seconds}");
                    assert!(chunk == prefill_left.min(8192) || with(chunk + 1) > target_s);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "{checked}");
}

/// With 32 decodes running and a 30 ms TBT SLO, only small chunks keep the iteration
/// within the SLO; with nothing running, the largest chunk gives the most tokens/s.
#[test]
fn lookahead_sizes_chunks_to_the_running_decodes() {
    let mut situation = Situation::new(vec![request(0, 100, 6000, 10, 0, 0)], vec![0]);
    situation.slo = Slo { ttft: Span::from_secs(5), tbt: Span(30_000) };
    let mut lookahead = Lookahead::new(BatchLimits::default(), vec![1.0, 1.0]);
    let Pick::Admit { max_tokens: alone, .. } = lookahead.pick(&situation.cx()) else { panic!("admits") };
    situation.batch = vec![BatchEntry { new_tokens: 1, context_tokens: 1000, emits_token: true }; 32];
    let Pick::Admit { max_tokens: shared, .. } = lookahead.pick(&situation.cx()) else { panic!("admits") };
    assert_eq!(alone, 8192);
    assert!(shared <= 1024, "{shared}");
    let iteration_s = situation.model.iteration_s(&{
        let mut batch = situation.batch.clone();
        batch.push(BatchEntry { new_tokens: shared, context_tokens: 0, emits_token: false });
        batch
    });
    assert!(iteration_s <= 0.030, "{iteration_s}");
}

#[test]
fn routers_balance_or_keep_affinity() {
    let plain = request(0, 0, 10, 1, 0, 0);
    let mut round_robin = Router::new(RouterKind::RoundRobin);
    let picks: Vec<usize> = (0..4).map(|_| round_robin.route(&plain, &[0, 0, 0])).collect();
    assert_eq!(picks, vec![0, 1, 2, 0]);
    let mut least = Router::new(RouterKind::LeastOutstandingTokens);
    assert_eq!(least.route(&plain, &[50, 10, 10]), 1);
    let mut affinity = Router::new(RouterKind::PrefixAffinity);
    let with = |hashes: Vec<u64>| Request { prefix_hashes: hashes.into_boxed_slice(), ..plain.clone() };
    let home = affinity.route(&with(vec![0, 42, 7]), &[10, 10, 10, 10]);
    assert_eq!(affinity.route(&with(vec![0, 42, 99, 5]), &[10, 10, 10, 10]), home, "same first two blocks");
    let mut loads = [10, 10, 10, 10];
    loads[home] = 1_000;
    assert_ne!(affinity.route(&with(vec![0, 42]), &loads), home, "overloaded home falls back");
    assert_eq!(affinity.route(&plain, &[5, 1, 9, 9]), 1, "no hashes: least loaded");
}

/// Overload (the oldest request waited past the 2 s TTFT SLO): tenant 0 holds both
/// running requests, more than its half share, so its new interaction is deferred and
/// tenant 1's, although it arrived later and has the larger counter, goes first.
#[test]
fn fairserve_throttles_new_interactions_of_an_over_share_tenant_only_under_overload() {
    let requests = vec![
        request(0, 90, 100, 5, 0, 0),
        request(1, 95, 100, 5, 0, 0),
        request(0, 0, 100, 5, 0, 0),
        request(0, 0, 100, 5, 0, 0),
    ];
    let mut situation = Situation::new(requests, vec![0, 1]);
    situation.running = vec![2, 3];
    situation.backlog = vec![3, 1];
    let mut fair = FairServe::new(BatchLimits::default(), vec![1.0, 1.0]);
    fair.on_admit(&situation.cx(), 1, true); // tenant 1's counter: 100, tenant 0's: 0
    assert_eq!(fair.pick(&situation.cx()), Pick::admit(1), "overloaded: tenant 0 deferred");
    situation.now = Time::from_secs(91); // oldest waited 1 s: no overload, counters decide
    assert_eq!(fair.pick(&situation.cx()), Pick::admit(0));
    // Overloaded again, but only the throttled tenant waits: throttling never idles the server.
    situation.now = Time::from_secs(100);
    situation.waiting = vec![0];
    situation.waiting_per_tenant = vec![1, 0];
    assert_eq!(fair.pick(&situation.cx()), Pick::admit(0));
}
