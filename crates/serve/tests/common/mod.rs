//! Fixtures shared by the serving simulator's integration tests.

use cotenant_core::{TenantId, TenantSpec, Time};
use cotenant_serve::{Request, Tier, Workload};

/// A request of `tenant` arriving at `arrival_us`, with no prefix hashes.
pub fn request(tenant: u32, arrival_us: u64, prompt: u32, output: u32) -> Request {
    Request {
        tenant: TenantId(tenant),
        arrival: Time(arrival_us),
        prompt_tokens: prompt,
        output_tokens: output,
        prefix_hashes: Box::new([]),
        category: 0,
        tier: Tier::Standard,
        interaction: 0,
        call_index: 0,
    }
}

/// `requests` (sorted by arrival) of tenants t0, t1, ... with one category and no prefix cache.
pub fn workload(requests: Vec<Request>, tenants: usize) -> Workload {
    Workload {
        source: "test".into(),
        requests,
        tenants: (0..tenants).map(|t| TenantSpec::new(format!("t{t}"))).collect(),
        categories: vec!["all".into()],
        prefix_block_tokens: 0,
    }
}
