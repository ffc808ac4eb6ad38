//! Scheduler and router decisions on hand-built situations.

use cotenant_core::{Span, TenantId, TenantSpec, Time};
use cotenant_perf::{find_gpu, BatchEntry, ModelShape, Roofline, RooflineParams};
use cotenant_serve::router::Router;
use cotenant_serve::scheduler::{
    sarathi_budget, BatchLimits, DriftConfig, DriftSched, FairServe, Lookahead, Pick, RequestScheduler,
    SchedCx,
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

#[test]
fn sarathi_budget_grows_with_the_tbt_slo() {
    let model = model();
    let budgets: Vec<u32> =
        [0.03, 0.05, 0.1, 0.2].iter().map(|&slo_s| sarathi_budget(&model, slo_s, 8192)).collect();
    assert!(budgets.windows(2).all(|pair| pair[0] <= pair[1]), "{budgets:?}");
    // 4,352 before the roofline gained its element-wise term (docs/experiments/serve-calibration.md).
    assert_eq!(budgets[2], 4032, "the 100 ms budget of the default roofline");
    assert_eq!(sarathi_budget(&model, 0.001, 8192), 64, "never below one step");
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
