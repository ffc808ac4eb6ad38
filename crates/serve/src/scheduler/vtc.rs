//! Virtual Token Counter (VTC, OSDI'24): fair sharing of tokens between tenants.
//!
//! A counter per tenant counts weighted service: `w_p` per prompt token at admission
//! and `w_q` per generated token, divided by the tenant's weight. The tenant with the
//! smallest counter among those with waiting requests is served next. A tenant that
//! arrives to find itself not backlogged is lifted to the smallest counter of the
//! backlogged tenants, so idling never banks credit. (When no tenant is backlogged
//! we keep the counter: a simplification of the paper's "last client" rule.)

use cotenant_core::TenantId;

use super::{BatchLimits, Pick, RequestScheduler, SchedCx};
use crate::request::{Request, RequestId};

/// VTC's token weights (the paper's defaults).
pub const PROMPT_TOKEN_WEIGHT: f64 = 1.0;
pub const OUTPUT_TOKEN_WEIGHT: f64 = 2.0;

/// The counters alone, reusable by other schedulers.
#[derive(Clone, Debug)]
pub struct VtcCounters {
    pub counters: Vec<f64>,
    weights: Vec<f64>,
}

impl VtcCounters {
    pub fn new(weights: Vec<f64>) -> VtcCounters {
        VtcCounters { counters: vec![0.0; weights.len()], weights }
    }

    /// Lifts `tenant` to the smallest counter of the other tenants with waiting requests,
    /// if it had none before this arrival (`waiting_per_tenant` already counts it).
    pub fn lift_on_arrival(&mut self, tenant: TenantId, waiting_per_tenant: &[u32]) {
        if waiting_per_tenant[tenant.index()] > 1 {
            return;
        }
        let floor = (0..self.counters.len())
            .filter(|&t| t != tenant.index() && waiting_per_tenant[t] > 0)
            .map(|t| self.counters[t])
            .min_by(f64::total_cmp);
        if let Some(floor) = floor {
            self.counters[tenant.index()] = self.counters[tenant.index()].max(floor);
        }
    }

    pub fn charge_prompt(&mut self, tenant: TenantId, prompt_tokens: u32) {
        self.counters[tenant.index()] +=
            PROMPT_TOKEN_WEIGHT * f64::from(prompt_tokens) / self.weights[tenant.index()];
    }

    pub fn charge_output(&mut self, tenant: TenantId, output_tokens: u32) {
        self.counters[tenant.index()] +=
            OUTPUT_TOKEN_WEIGHT * f64::from(output_tokens) / self.weights[tenant.index()];
    }

    /// The tenant with waiting requests and the smallest counter (lowest id on ties).
    pub fn neediest(&self, waiting_per_tenant: &[u32]) -> Option<TenantId> {
        (0..self.counters.len())
            .filter(|&t| waiting_per_tenant[t] > 0)
            .min_by(|&a, &b| self.counters[a].total_cmp(&self.counters[b]).then(a.cmp(&b)))
            .map(|t| TenantId(t as u32))
    }
}

#[derive(Clone, Debug)]
pub struct Vtc {
    limits: BatchLimits,
    pub counters: VtcCounters,
}

impl Vtc {
    pub fn new(limits: BatchLimits, weights: Vec<f64>) -> Vtc {
        Vtc { limits, counters: VtcCounters::new(weights) }
    }
}

impl RequestScheduler for Vtc {
    fn name(&self) -> &'static str {
        "vtc"
    }
    fn limits(&self) -> BatchLimits {
        self.limits
    }
    fn on_arrival(&mut self, cx: &SchedCx<'_>, id: RequestId) {
        self.counters.lift_on_arrival(cx.requests[id as usize].tenant, cx.waiting_per_tenant);
    }
    fn pick(&mut self, cx: &SchedCx<'_>) -> Pick {
        let Some(tenant) = self.counters.neediest(cx.waiting_per_tenant) else { return Pick::Stop };
        cx.first_waiting_of(tenant).map_or(Pick::Stop, Pick::admit)
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
        self.counters.counters.iter().enumerate().map(|(t, c)| (format!("counter_tenant{t}"), *c)).collect()
    }
}
