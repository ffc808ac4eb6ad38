//! What "meets the SLO" means for a goodput search or a plan: the share of requests that
//! meet their per-request SLO (the default, >= 90%), or chosen percentiles of latency
//! distributions each within a target (DistServe's goodput: the highest rate at which,
//! e.g., TTFT p90 <= 2 s and TBT p99 <= 100 ms).

use crate::metrics::percentile_sorted;
use crate::request::Workload;
use crate::sim::ServeResult;
use crate::summary::request_latencies;
use crate::Slo;

/// A latency distribution a percentile target can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyMetric {
    /// Arrival to first token, per finished request.
    Ttft,
    /// Every gap between consecutive output tokens of every request (the run's TBT
    /// histogram, values within 1/64).
    Tbt,
    /// (E2E - TTFT) / (output tokens - 1), per finished request with >= 2 outputs.
    Tpot,
    /// Arrival to last token, per finished request.
    E2e,
}

impl LatencyMetric {
    pub const ALL: [LatencyMetric; 4] =
        [LatencyMetric::Ttft, LatencyMetric::Tbt, LatencyMetric::Tpot, LatencyMetric::E2e];

    pub fn name(self) -> &'static str {
        match self {
            LatencyMetric::Ttft => "ttft",
            LatencyMetric::Tbt => "tbt",
            LatencyMetric::Tpot => "tpot",
            LatencyMetric::E2e => "e2e",
        }
    }

    pub fn parse(text: &str) -> Option<LatencyMetric> {
        LatencyMetric::ALL.into_iter().find(|m| m.name() == text.to_ascii_lowercase())
    }
}

/// One distribution's percentile and the bound it must stay within.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PercentileTarget {
    pub metric: LatencyMetric,
    /// In (0, 100]: 90 is p90.
    pub percentile: f64,
    pub target_ms: f64,
}

impl PercentileTarget {
    /// `ttft:p90<=2000 ms` style.
    pub fn describe(&self) -> String {
        format!("{} p{} <= {} ms", self.metric.name().to_uppercase(), self.percentile, self.target_ms)
    }
}

/// When a run meets the SLO.
#[derive(Clone, Debug, PartialEq)]
pub enum GoodputCriterion {
    /// At least this share of requests meets its TTFT and TPOT SLO.
    Attainment(f64),
    /// Every listed percentile is within its target.
    Percentiles(Vec<PercentileTarget>),
}

/// How one run measured against a criterion.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub met: bool,
    /// Share of requests meeting their per-request SLO (whatever the criterion).
    pub attainment: f64,
    /// Each percentile target's measured value, ms, in the criterion's order (empty for
    /// an attainment criterion).
    pub values_ms: Vec<f64>,
}

/// Most percentile targets one spec may list.
const MAX_TARGETS: usize = 16;
/// Longest target, ms (one day, as the SLO flags).
const MAX_TARGET_MS: f64 = 86_400_000.0;

impl GoodputCriterion {
    /// `METRIC:pQ=MS[,METRIC:pQ=MS...]` (metrics ttft, tbt, tpot, e2e; Q in (0, 100];
    /// MS > 0), e.g. `ttft:p90=2000,tbt:p99=100`. Errors name the part and what is wrong
    /// with it; the caller prefixes the flag.
    pub fn parse_percentiles(text: &str) -> Result<GoodputCriterion, String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if parts.len() > MAX_TARGETS {
            return Err(format!("{} targets; at most {MAX_TARGETS}", parts.len()));
        }
        let mut targets: Vec<PercentileTarget> = Vec::new();
        for (index, part) in parts.iter().enumerate() {
            let target = parse_target(part).map_err(|e| format!("part {} `{part}`: {e}", index + 1))?;
            if targets.iter().any(|t| t.metric == target.metric && t.percentile == target.percentile) {
                return Err(format!(
                    "part {} `{part}`: {} p{} is already given",
                    index + 1,
                    target.metric.name(),
                    target.percentile
                ));
            }
            targets.push(target);
        }
        Ok(GoodputCriterion::Percentiles(targets))
    }

    /// How the criterion reads in a table: `>= 90% attainment` or `TTFT p90 <= 2000 ms, ...`.
    pub fn describe(&self) -> String {
        match self {
            GoodputCriterion::Attainment(share) => format!(">= {:.0}% attainment", 100.0 * share),
            GoodputCriterion::Percentiles(targets) => {
                targets.iter().map(PercentileTarget::describe).collect::<Vec<_>>().join(", ")
            }
        }
    }

    /// Measures a finished run of `workload`.
    pub fn judge(&self, workload: &Workload, result: &ServeResult, slo: Slo) -> Verdict {
        let latencies = request_latencies(workload, result, slo);
        let attainment = latencies.iter().flatten().filter(|l| l.met_slo).count() as f64
            / workload.requests.len().max(1) as f64;
        match self {
            GoodputCriterion::Attainment(share) => {
                Verdict { met: attainment >= *share, attainment, values_ms: Vec::new() }
            }
            GoodputCriterion::Percentiles(targets) => {
                let sorted = |pick: fn(&crate::summary::RequestLatency) -> Option<f64>| {
                    let mut values: Vec<f64> = latencies.iter().flatten().filter_map(pick).collect();
                    values.sort_by(f64::total_cmp);
                    values
                };
                let (ttft, tpot, e2e) =
                    (sorted(|l| Some(l.ttft_ms)), sorted(|l| l.tpot_ms), sorted(|l| Some(l.e2e_ms)));
                let values_ms: Vec<f64> = targets
                    .iter()
                    .map(|t| {
                        let q = t.percentile / 100.0;
                        match t.metric {
                            LatencyMetric::Ttft => percentile_sorted(&ttft, q),
                            LatencyMetric::Tpot => percentile_sorted(&tpot, q),
                            LatencyMetric::E2e => percentile_sorted(&e2e, q),
                            LatencyMetric::Tbt => result.tbt.quantile_us(q) as f64 / 1e3,
                        }
                    })
                    .collect();
                let finished = latencies.iter().all(Option::is_some);
                let met = finished && targets.iter().zip(&values_ms).all(|(t, v)| *v <= t.target_ms);
                Verdict { met, attainment, values_ms }
            }
        }
    }
}

fn parse_target(part: &str) -> Result<PercentileTarget, String> {
    let (name, rest) =
        part.split_once(':').ok_or("expected METRIC:pQ=MS (e.g. ttft:p90=2000)".to_string())?;
    let metric = LatencyMetric::parse(name.trim())
        .ok_or_else(|| format!("unknown metric `{name}` (known: ttft, tbt, tpot, e2e)"))?;
    let (level, target) = rest.split_once('=').ok_or("expected METRIC:pQ=MS: no `=MS` target".to_string())?;
    let level = level.trim();
    let percentile = level
        .strip_prefix(['p', 'P'])
        .and_then(|q| q.parse::<f64>().ok())
        .filter(|q| q.is_finite() && *q > 0.0 && *q <= 100.0)
        .ok_or_else(|| {
            format!("percentile `{level}` must be p followed by a number in (0, 100], e.g. p99")
        })?;
    let target_ms = target
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|ms| ms.is_finite() && *ms > 0.0 && *ms <= MAX_TARGET_MS)
        .ok_or_else(|| format!("target `{target}` must be a number of ms in (0, {MAX_TARGET_MS}]"))?;
    Ok(PercentileTarget { metric, percentile, target_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_specs_parse() {
        let parsed =
            GoodputCriterion::parse_percentiles("ttft:p90=2000, TBT:P99.9=100,e2e:p50=1.5").expect("valid");
        assert_eq!(
            parsed,
            GoodputCriterion::Percentiles(vec![
                PercentileTarget { metric: LatencyMetric::Ttft, percentile: 90.0, target_ms: 2000.0 },
                PercentileTarget { metric: LatencyMetric::Tbt, percentile: 99.9, target_ms: 100.0 },
                PercentileTarget { metric: LatencyMetric::E2e, percentile: 50.0, target_ms: 1.5 },
            ])
        );
        assert_eq!(parsed.describe(), "TTFT p90 <= 2000 ms, TBT p99.9 <= 100 ms, E2E p50 <= 1.5 ms");
        assert_eq!(GoodputCriterion::Attainment(0.9).describe(), ">= 90% attainment");
    }

    #[test]
    fn malformed_specs_name_the_part() {
        let error = |text: &str| GoodputCriterion::parse_percentiles(text).expect_err(text);
        assert_eq!(error("ttft:p90=2000,tbt"), "part 2 `tbt`: expected METRIC:pQ=MS (e.g. ttft:p90=2000)");
        assert!(error("latency:p90=1").starts_with("part 1 `latency:p90=1`: unknown metric `latency`"));
        assert!(error("ttft:90=1").contains("percentile `90` must be p followed by a number in (0, 100]"));
        assert!(error("ttft:p0=1").contains("percentile `p0`"));
        assert!(error("ttft:p101=1").contains("percentile `p101`"));
        assert!(error("tbt:p99=-3").contains("part 1 `tbt:p99=-3`: target `-3` must be a number of ms"));
        assert!(error("tbt:p99=nan").contains("target `nan`"));
        assert!(error("tbt:p99").contains("no `=MS` target"));
        assert!(error("ttft:p90=1,ttft:p90=2").contains("part 2 `ttft:p90=2`: ttft p90 is already given"));
        assert!(error("").starts_with("part 1 ``:"));
    }
}
