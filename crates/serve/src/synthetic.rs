//! Seeded synthetic tenants: Poisson arrivals with optional on/off bursts, lognormal
//! prompt and output lengths, tiers, and multi-call interactions.

use cotenant_core::limits::{MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS};
use cotenant_core::{TenantId, TenantSpec, Time, MICROS_PER_SECOND};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use crate::request::{length_bucket, Request, Tier, Workload, LENGTH_BUCKET_NAMES};

/// Bursts: `on_s` seconds at `multiplier` x the base rate, then `off_s` seconds at the base rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    pub on_s: f64,
    pub off_s: f64,
    pub multiplier: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticTenant {
    pub name: String,
    pub weight: f64,
    /// Interactions started per second (outside bursts).
    pub rate_per_s: f64,
    pub prompt_mean_tokens: f64,
    pub output_mean_tokens: f64,
    /// Lognormal shape (sigma of the underlying normal); 0 gives constant lengths.
    pub length_sigma: f64,
    pub burst: Option<Burst>,
    pub tier: Tier,
    /// Calls per interaction; call k arrives `think_s` after call k-1.
    pub calls_per_interaction: u32,
    pub think_s: f64,
}

impl SyntheticTenant {
    pub fn new(name: &str, rate_per_s: f64) -> SyntheticTenant {
        SyntheticTenant {
            name: name.into(),
            weight: 1.0,
            rate_per_s,
            prompt_mean_tokens: 512.0,
            output_mean_tokens: 128.0,
            length_sigma: 0.5,
            burst: None,
            tier: Tier::Standard,
            calls_per_interaction: 1,
            think_s: 5.0,
        }
    }

    /// Parses `name=a,weight=1,rate=2,prompt=512,output=128,sigma=0.5,burst=10/50x4,
    /// tier=premium,calls=3,think=5` (all but `name` and `rate` optional).
    pub fn parse(text: &str) -> Result<SyntheticTenant, String> {
        let mut tenant = SyntheticTenant::new("", 0.0);
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| format!("`{pair}`: expected key=value"))?;
            let number =
                || value.parse::<f64>().map_err(|_| format!("field `{key}`: `{value}` is not a number"));
            match key {
                "name" => tenant.name = value.to_string(),
                "weight" => tenant.weight = number()?,
                "rate" => tenant.rate_per_s = number()?,
                "prompt" => tenant.prompt_mean_tokens = number()?,
                "output" => tenant.output_mean_tokens = number()?,
                "sigma" => tenant.length_sigma = number()?,
                "think" => tenant.think_s = number()?,
                "calls" => {
                    tenant.calls_per_interaction =
                        value.parse().map_err(|_| format!("field `calls`: `{value}` is not a count"))?
                }
                "tier" => tenant.tier = parse_tier(value)?,
                "burst" => tenant.burst = Some(parse_burst(value)?),
                _ => return Err(format!("unknown field `{key}`")),
            }
        }
        let finite = [
            tenant.weight,
            tenant.rate_per_s,
            tenant.prompt_mean_tokens,
            tenant.output_mean_tokens,
            tenant.length_sigma,
            tenant.think_s,
        ]
        .iter()
        .all(|v| v.is_finite());
        let valid = finite
            && !tenant.name.is_empty()
            && tenant.weight > 0.0
            && tenant.rate_per_s > 0.0
            && tenant.prompt_mean_tokens >= 1.0
            && tenant.output_mean_tokens >= 1.0
            && tenant.length_sigma >= 0.0
            && tenant.prompt_mean_tokens <= MAX_PROMPT_TOKENS as f64
            && tenant.output_mean_tokens <= MAX_OUTPUT_TOKENS as f64
            && tenant.length_sigma <= MAX_LENGTH_SIGMA
            && tenant.think_s >= 0.0
            && (1..=MAX_CALLS_PER_INTERACTION).contains(&tenant.calls_per_interaction);
        if !valid {
            return Err(format!(
                "`{text}`: need name, finite numbers: weight > 0, rate > 0, prompt in [1, {MAX_PROMPT_TOKENS}], \
                 output in [1, {MAX_OUTPUT_TOKENS}], sigma in [0, {MAX_LENGTH_SIGMA}], think >= 0, \
                 calls in [1, {MAX_CALLS_PER_INTERACTION}]"
            ));
        }
        Ok(tenant)
    }
}

fn parse_tier(value: &str) -> Result<Tier, String> {
    match value {
        "premium" => Ok(Tier::Premium),
        "standard" => Ok(Tier::Standard),
        "batch" => Ok(Tier::Batch),
        _ => Err(format!("field `tier`: `{value}` is not premium, standard or batch")),
    }
}

/// `ON/OFFxMULT`, seconds and a rate multiplier: `10/50x4`.
fn parse_burst(value: &str) -> Result<Burst, String> {
    let bad = || format!("field `burst`: `{value}` is not ON/OFFxMULT (e.g. 10/50x4)");
    let (on, rest) = value.split_once('/').ok_or_else(bad)?;
    let (off, multiplier) = rest.split_once('x').ok_or_else(bad)?;
    let burst = Burst {
        on_s: on.parse().map_err(|_| bad())?,
        off_s: off.parse().map_err(|_| bad())?,
        multiplier: multiplier.parse().map_err(|_| bad())?,
    };
    let finite = burst.on_s.is_finite() && burst.off_s.is_finite() && burst.multiplier.is_finite();
    if !finite || burst.on_s <= 0.0 || burst.off_s < 0.0 || burst.multiplier <= 0.0 {
        return Err(bad());
    }
    Ok(burst)
}

/// Widest lognormal spread of request lengths (`sigma`): beyond it the mean says little.
pub const MAX_LENGTH_SIGMA: f64 = 4.0;
/// Most calls in one synthetic interaction (`calls`).
pub const MAX_CALLS_PER_INTERACTION: u32 = 1000;

/// Requests that `duration_s` seconds of these tenants generate at most on
/// average (every tenant at its peak rate): checked against a limit before
/// [`generate`] allocates them.
pub fn expected_requests_bound(tenants: &[SyntheticTenant], duration_s: f64) -> f64 {
    tenants
        .iter()
        .map(|t| {
            let peak = t.rate_per_s * t.burst.map_or(1.0, |b| b.multiplier.max(1.0));
            peak * duration_s * f64::from(t.calls_per_interaction)
        })
        .sum()
}

fn rate_at(tenant: &SyntheticTenant, time_s: f64) -> f64 {
    match tenant.burst {
        Some(b) if time_s % (b.on_s + b.off_s) < b.on_s => tenant.rate_per_s * b.multiplier,
        _ => tenant.rate_per_s,
    }
}

/// Lognormal with the given mean (mu = ln(mean) - sigma^2/2), at least 1 token.
fn draw_tokens(rng: &mut ChaCha8Rng, mean: f64, sigma: f64) -> u32 {
    if sigma <= 0.0 {
        return mean.round().max(1.0) as u32;
    }
    let mu = mean.ln() - sigma * sigma / 2.0;
    let Ok(distribution) = LogNormal::new(mu, sigma) else { return mean.round().max(1.0) as u32 };
    distribution.sample(rng).round().clamp(1.0, 1_000_000.0) as u32
}

/// Generates `duration_s` seconds of requests. Each tenant draws from its own stream
/// (seed, tenant index), so adding a tenant does not change the others' requests.
pub fn generate(tenants: &[SyntheticTenant], duration_s: f64, seed: u64) -> Workload {
    let mut requests = Vec::new();
    let mut categories = Vec::new();
    let mut interaction = 0_u32;
    for (index, tenant) in tenants.iter().enumerate() {
        for bucket in LENGTH_BUCKET_NAMES {
            categories.push(format!("{}/{bucket}", tenant.name));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        // Thinning: draw at the peak rate, keep with probability rate(t) / peak.
        let peak = tenant.rate_per_s * tenant.burst.map_or(1.0, |b| b.multiplier.max(1.0));
        let Ok(gaps) = Exp::new(peak) else { continue };
        let mut time_s = 0.0;
        loop {
            time_s += gaps.sample(&mut rng);
            if time_s >= duration_s {
                break;
            }
            if rng.random::<f64>() * peak > rate_at(tenant, time_s) {
                continue;
            }
            let mut context_tokens = 0_u32;
            for call in 0..tenant.calls_per_interaction {
                let prompt =
                    context_tokens + draw_tokens(&mut rng, tenant.prompt_mean_tokens, tenant.length_sigma);
                let output = draw_tokens(&mut rng, tenant.output_mean_tokens, tenant.length_sigma);
                let arrival_s = time_s + f64::from(call) * tenant.think_s;
                requests.push(Request {
                    tenant: TenantId(index as u32),
                    arrival: Time((arrival_s * MICROS_PER_SECOND as f64) as u64),
                    prompt_tokens: prompt,
                    output_tokens: output,
                    prefix_hashes: Box::new([]),
                    category: (index * LENGTH_BUCKET_NAMES.len() + length_bucket(prompt)) as u32,
                    tier: tenant.tier,
                    interaction,
                    call_index: call,
                });
                context_tokens = prompt + output;
            }
            interaction += 1;
        }
    }
    // Stable sort: equal arrivals keep tenant order, then generation order.
    requests.sort_by_key(|r| r.arrival);
    let tenant_specs =
        tenants.iter().map(|t| TenantSpec { weight: t.weight, ..TenantSpec::new(t.name.clone()) }).collect();
    Workload {
        source: format!("synthetic (seed {seed}, {duration_s} s)"),
        requests,
        tenants: tenant_specs,
        categories,
        prefix_block_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_generate_deterministically() {
        let a = SyntheticTenant::parse(
            "name=a,rate=5,prompt=100,output=10,burst=2/8x4,tier=premium,calls=2,think=1",
        )
        .expect("valid");
        assert_eq!(a.burst, Some(Burst { on_s: 2.0, off_s: 8.0, multiplier: 4.0 }));
        assert!(SyntheticTenant::parse("name=b,rate=0").is_err());
        assert!(SyntheticTenant::parse("name=b,rate=1,burst=3").is_err());
        let b = SyntheticTenant::new("b", 2.0);
        let first = generate(&[a.clone(), b.clone()], 60.0, 42);
        let again = generate(&[a, b], 60.0, 42);
        assert_eq!(first.requests, again.requests);
        assert!(first.requests.windows(2).all(|w| w[0].arrival <= w[1].arrival));
        // 2 s of each 10 s at 20/s and 8 s at 5/s: 8 interactions/s x 2 calls, plus 2/s = 18/s.
        let per_s = first.requests.len() as f64 / 60.0;
        assert!((14.0..22.0).contains(&per_s), "{per_s}");
    }
}
