//! FairServe (2024), as we reconstruct it: a weighted service counter per application
//! (tenant), calls that continue an interaction already in progress before calls that
//! would start a new one, and throttling that acts only under overload and only at the
//! start of an interaction (a started interaction is never cut midway).
//!
//! Overload: the oldest waiting request has waited longer than the TTFT SLO, or less
//! than 5% of KV blocks are available. Under overload, a new interaction from a tenant
//! already holding more than its weighted share of the running requests is deferred
//! while another tenant has a new interaction waiting. Deferral, not rejection, and
//! never idling: every call runs, and throttled tenants are served when nobody else waits.

use super::{BatchLimits, Pick, RequestScheduler, SchedCx, VtcCounters};
use crate::request::{Request, RequestId};

/// Waiting requests examined per pick (a bound on scheduling cost).
const MAX_SCAN: usize = 65_536;
const KV_OVERLOAD_FRACTION: f64 = 0.05;

#[derive(Clone, Debug)]
pub struct FairServe {
    limits: BatchLimits,
    counters: VtcCounters,
    weights: Vec<f64>,
    pub deferred_picks: u64,
}

impl FairServe {
    pub fn new(limits: BatchLimits, weights: Vec<f64>) -> FairServe {
        FairServe { limits, counters: VtcCounters::new(weights.clone()), weights, deferred_picks: 0 }
    }

    fn overloaded(cx: &SchedCx<'_>) -> bool {
        let oldest_wait =
            cx.waiting.iter().take(MAX_SCAN).map(|&id| cx.now - cx.requests[id as usize].arrival).max();
        let kv_short = (cx.kv_available_blocks as f64) < KV_OVERLOAD_FRACTION * cx.kv_capacity_blocks as f64;
        kv_short || oldest_wait.is_some_and(|wait| wait > cx.slo.ttft)
    }

    /// Tenants whose running requests exceed their weighted share among backlogged tenants.
    fn over_share(&self, cx: &SchedCx<'_>) -> Vec<bool> {
        let mut running = vec![0_u32; self.weights.len()];
        for &id in cx.running {
            running[cx.requests[id as usize].tenant.index()] += 1;
        }
        let total_running: u32 = running.iter().sum();
        let backlogged_weight: f64 =
            (0..self.weights.len()).filter(|&t| cx.backlog[t] > 0).map(|t| self.weights[t]).sum();
        (0..self.weights.len())
            .map(|t| {
                let share = if backlogged_weight > 0.0 { self.weights[t] / backlogged_weight } else { 1.0 };
                f64::from(running[t]) > share * f64::from(total_running)
            })
            .collect()
    }
}

impl RequestScheduler for FairServe {
    fn name(&self) -> &'static str {
        "fairserve"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn on_arrival(&mut self, cx: &SchedCx<'_>, id: RequestId) {
        self.counters.lift_on_arrival(cx.requests[id as usize].tenant, cx.waiting_per_tenant);
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        if cx.waiting.is_empty() {
            return Pick::Stop;
        }
        // Each tenant's earliest continuing call and earliest new call, in one pass.
        let tenants = self.weights.len();
        let (mut continuing, mut starting) = (vec![None; tenants], vec![None; tenants]);
        for (index, &id) in cx.waiting.iter().enumerate().take(MAX_SCAN) {
            let request = &cx.requests[id as usize];
            let slot = if request.call_index > 0 { &mut continuing } else { &mut starting };
            slot[request.tenant.index()].get_or_insert(index);
        }
        let neediest = |candidates: &[Option<usize>], allowed: &dyn Fn(usize) -> bool| {
            (0..tenants)
                .filter(|&t| candidates[t].is_some() && allowed(t))
                .min_by(|&a, &b| {
                    self.counters.counters[a].total_cmp(&self.counters.counters[b]).then(a.cmp(&b))
                })
                .and_then(|t| candidates[t])
        };
        if let Some(index) = neediest(&continuing, &|_| true) {
            return Pick::admit(index);
        }
        let throttled = Self::overloaded(cx).then(|| self.over_share(cx));
        let allowed = |t: usize| throttled.as_ref().is_none_or(|over| !over[t]);
        match neediest(&starting, &allowed) {
            Some(index) => {
                let skipped = (0..tenants).any(|t| starting[t].is_some() && !allowed(t));
                self.deferred_picks += u64::from(skipped);
                Pick::admit(index)
            }
            // Throttling reorders, it never idles the server: with only throttled
            // tenants waiting, the neediest of them goes.
            None => neediest(&starting, &|_| true).map_or(Pick::Stop, Pick::admit),
        }
    }
    fn on_admit(&mut self, cx: &SchedCx<'_>, id: RequestId, first_time: bool) {
        if first_time {
            let request = &cx.requests[id as usize];
            self.counters.charge_prompt(request.tenant, request.prompt_tokens);
        }
    }
    fn on_service(&mut self, request: &Request, _prefill_tokens: u32, decode_tokens: u32) {
        self.counters.charge_output(request.tenant, decode_tokens);
    }
    fn diagnostics(&self) -> Vec<(String, f64)> {
        vec![("deferred_picks".into(), self.deferred_picks as f64)]
    }
}
