//! A token bucket per API token on `POST /v1/jobs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

pub(super) struct Limiter {
    rate_per_s: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Limiter {
    /// A non-finite or negative rate refills nothing.
    pub fn new(rate_per_s: f64, burst: u32) -> Limiter {
        let rate_per_s = if rate_per_s.is_finite() { rate_per_s.max(0.0) } else { 0.0 };
        Limiter { rate_per_s, burst: f64::from(burst), buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one submission from `key`'s bucket: `Ok`, or `Err(seconds)` until one is back.
    pub fn take(&self, key: &str) -> Result<(), u64> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket { tokens: self.burst, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate_per_s).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        if self.rate_per_s <= 0.0 {
            return Err(3600);
        }
        Err(((1.0 - bucket.tokens) / self.rate_per_s).ceil().max(1.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_refills_one_at_a_time() {
        // Burst 3 at 2/s: three pass at once, the fourth waits; after 0.5 s one more passes.
        let limiter = Limiter::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.take_at("a", t0), Ok(()));
        }
        assert_eq!(limiter.take_at("a", t0), Err(1));
        assert_eq!(limiter.take_at("b", t0), Ok(()), "buckets are per token");
        let later = t0 + Duration::from_millis(500);
        assert_eq!(limiter.take_at("a", later), Ok(()));
        assert!(limiter.take_at("a", later).is_err());
    }

    #[test]
    fn a_slow_rate_says_how_long_to_wait() {
        // 0.1/s: an empty bucket needs 10 s for the next token.
        let limiter = Limiter::new(0.1, 1);
        let t0 = Instant::now();
        assert_eq!(limiter.take_at("a", t0), Ok(()));
        assert_eq!(limiter.take_at("a", t0), Err(10));
    }
}
