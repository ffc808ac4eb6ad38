//! Output of `cotenant plan serve --search`: every configuration with its goodput and
//! cost, the skipped ones with their reasons, the Pareto front of cost against latency and
//! the cheapest configuration, as a Markdown table or JSON (keys sorted, so stable).

use std::fmt::{self, Write};

use serde_json::{json, Value};

use cotenant_perf::prices::GpuPrice;
use cotenant_serve::goodput::GoodputCriterion;
use cotenant_serve::search::{Candidate, LatencyPick, Ranked, SearchOutcome};
use cotenant_serve::Workload;

use crate::serve_json::workload_json;

/// What a search report shows besides its outcome.
#[derive(Clone, Copy, Debug)]
pub struct SearchContext<'a> {
    pub workload: &'a Workload,
    pub model: &'a str,
    pub criterion: &'a GoodputCriterion,
    pub latency: LatencyPick,
    /// Where the prices come from (a file name).
    pub prices_file: &'a str,
    pub prices: &'a [GpuPrice],
    /// Arrival spans at the goodput shorter than this (seconds) are marked `burst`.
    pub sustained_span_s: f64,
}

fn candidate_json(c: &Candidate) -> Value {
    json!({
        "gpu": c.gpu.name, "tensor_parallel": c.tensor_parallel, "pipeline_parallel": c.pipeline_parallel,
        "replicas": c.replicas, "gpus": c.gpus(), "token_budget": c.token_budget, "max_seqs": c.max_seqs,
        "scheduler": c.scheduler.name(),
    })
}

fn ranked_json(r: &Ranked) -> Value {
    let mut value = candidate_json(&r.evaluation.candidate);
    match &r.evaluation.outcome {
        Err(reason) => value["skipped"] = json!(reason),
        Ok(m) => {
            value["goodput_requests_per_s"] = json!(m.goodput.requests_per_s);
            value["goodput_rate_scale"] = json!(m.goodput.rate_scale);
            value["capped"] = json!(m.goodput.capped);
            value["attainment"] = json!(m.goodput.attainment);
            value["tokens_per_s"] = json!(m.tokens_per_s);
            value["latency_ms"] = json!(m.latency_ms);
            value["arrival_span_s"] = json!(m.arrival_span_s);
            value["simulations"] = json!(m.goodput.probes.len() + usize::from(m.latency_ms.is_some()));
        }
    }
    value["usd_per_hour"] = json!(r.usd_per_hour);
    value["usd_per_million_tokens"] = json!(r.usd_per_million_tokens);
    value["requests_per_s_per_usd_per_hour"] = json!(r.qps_per_dollar);
    value["pareto"] = json!(r.pareto);
    value
}

/// `{"workload", "model", "criterion", "latency", "prices", "configurations", "pareto", "best"}`.
pub fn search_json(cx: &SearchContext<'_>, outcome: &SearchOutcome) -> Value {
    json!({
        "workload": workload_json(cx.workload),
        "model": cx.model,
        "criterion": cx.criterion.describe(),
        "latency": cx.latency.describe(),
        "prices": {
            "file": cx.prices_file,
            "gpus": cx.prices.iter().map(|p| json!({
                "gpu": p.gpu, "usd_per_gpu_hour": p.usd_per_gpu_hour, "source": p.source, "date": p.date,
            })).collect::<Vec<_>>(),
        },
        "configurations": outcome.ranked.iter().map(ranked_json).collect::<Vec<_>>(),
        "pareto": outcome.pareto,
        "best": outcome.best,
    })
}

/// The search as text: a header, one table row per configuration that ran, the skipped
/// ones with reasons, the Pareto front and the best configuration.
pub fn search_table_text(cx: &SearchContext<'_>, outcome: &SearchOutcome) -> String {
    let mut out = String::new();
    write_search(&mut out, cx, outcome).expect("writing to a String cannot fail");
    out
}

fn money(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

fn write_search(out: &mut String, cx: &SearchContext<'_>, outcome: &SearchOutcome) -> fmt::Result {
    let ran = outcome.ranked.iter().filter(|r| r.evaluation.outcome.is_ok()).count();
    writeln!(
        out,
        "Configuration search: {} on {} requests ({:.2} req/s at rate scale 1) from {}; SLO {}; {} of {} configurations ran; prices from {}:",
        cx.model,
        cx.workload.requests.len(),
        cx.workload.request_rate_per_s(),
        cx.workload.source,
        cx.criterion.describe(),
        ran,
        outcome.ranked.len(),
        cx.prices_file
    )?;
    writeln!(
        out,
        "| # | GPU | TP | PP | replicas | GPUs | budget | max seqs | scheduler | goodput req/s | tokens/s | $/h | $/M tokens | req/s per $/h | {} ms | |",
        cx.latency.describe()
    )?;
    writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")?;
    for (index, r) in outcome.ranked.iter().enumerate() {
        let Ok(m) = &r.evaluation.outcome else { continue };
        let c = &r.evaluation.candidate;
        let mut marks = Vec::new();
        if outcome.best == Some(index) {
            marks.push("best");
        }
        if r.pareto {
            marks.push("Pareto");
        }
        if m.goodput.capped {
            marks.push("capped");
        }
        if m.goodput.rate_scale > 0.0 && m.arrival_span_s < cx.sustained_span_s {
            marks.push("burst");
        }
        writeln!(
            out,
            "| {index} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.0} | {} | {} | {} | {} | {} |",
            c.gpu.name,
            c.tensor_parallel,
            c.pipeline_parallel,
            c.replicas,
            c.gpus(),
            c.token_budget,
            c.max_seqs,
            c.scheduler.name(),
            m.goodput.requests_per_s,
            m.tokens_per_s,
            money(r.usd_per_hour, 2),
            money(r.usd_per_million_tokens, 3),
            money(r.qps_per_dollar, 3),
            m.latency_ms.map_or_else(|| "-".to_string(), |v| format!("{v:.1}")),
            marks.join(", ")
        )?;
    }
    let skipped: Vec<(usize, &Ranked, &String)> = outcome
        .ranked
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.evaluation.outcome.as_ref().err().map(|reason| (i, r, reason)))
        .collect();
    if !skipped.is_empty() {
        writeln!(out, "skipped ({}):", skipped.len())?;
        for (index, r, reason) in skipped {
            writeln!(out, "  #{index} {}: {reason}", r.evaluation.candidate.describe())?;
        }
    }
    let unpriced: Vec<String> = outcome
        .ranked
        .iter()
        .filter(|r| r.evaluation.outcome.is_ok() && r.usd_per_hour.is_none())
        .map(|r| r.evaluation.candidate.gpu.name.to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unpriced.is_empty() {
        writeln!(out, "no price for {} (add it with --prices PATH): not costed", unpriced.join(", "))?;
    }
    if outcome.ranked.iter().any(|r| {
        r.evaluation
            .outcome
            .as_ref()
            .is_ok_and(|m| m.goodput.rate_scale > 0.0 && m.arrival_span_s < cx.sustained_span_s)
    }) {
        writeln!(
            out,
            "burst: at its goodput the workload arrives within {:.0} s, so that goodput is how fast a burst drains, not a sustained rate (use more requests)",
            cx.sustained_span_s
        )?;
    }
    if outcome.ranked.iter().any(|r| r.evaluation.outcome.as_ref().is_ok_and(|m| m.goodput.capped)) {
        writeln!(
            out,
            "capped: every probe met the SLO up to the search's last doubling: the goodput is at least this"
        )?;
    }
    let front: Vec<String> = outcome.pareto.iter().map(|i| format!("#{i}")).collect();
    writeln!(
        out,
        "Pareto front ($/M tokens vs {}): {}",
        cx.latency.describe(),
        if front.is_empty() { "none".to_string() } else { front.join(", ") }
    )?;
    match outcome.best.map(|i| (i, &outcome.ranked[i])) {
        Some((index, r)) => {
            let m = r.evaluation.outcome.as_ref().ok();
            writeln!(
                out,
                "best: #{index} {}: {} GPUs, goodput {:.2} req/s, ${} per million tokens, {} req/s per $/h",
                r.evaluation.candidate.describe(),
                r.evaluation.candidate.gpus(),
                m.map_or(0.0, |m| m.goodput.requests_per_s),
                money(r.usd_per_million_tokens, 3),
                money(r.qps_per_dollar, 3)
            )?;
            let costs: Vec<f64> = outcome.ranked.iter().filter_map(|r| r.usd_per_million_tokens).collect();
            let (low, high) =
                costs.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &c| (lo.min(c), hi.max(c)));
            writeln!(out, "cost spread: ${low:.3} to ${high:.3} per million tokens ({:.1}x) over {} costed configurations", high / low, costs.len())?;
        }
        None => writeln!(out, "best: none (no priced configuration met the SLO at any rate)")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_perf::find_gpu;
    use cotenant_serve::goodput::LatencyMetric;
    use cotenant_serve::plan::GoodputResult;
    use cotenant_serve::scheduler::SchedulerKind;
    use cotenant_serve::search::{rank, Evaluation, Measured};

    /// Two configurations, one skipped: the table has one row, marked best and Pareto, a
    /// skipped line with the reason, and the JSON keeps both in order.
    #[test]
    fn table_and_json_show_every_configuration() {
        let candidate = |tp: u32, pp: u32| Candidate {
            gpu: *find_gpu("H100-SXM").expect("catalog"),
            tensor_parallel: tp,
            pipeline_parallel: pp,
            replicas: 1,
            token_budget: 8192,
            max_seqs: 256,
            scheduler: SchedulerKind::Fcfs,
        };
        let goodput = GoodputResult {
            rate_scale: 2.0,
            requests_per_s: 10.0,
            attainment: 0.95,
            probes: vec![(1.0, 1.0), (2.0, 0.95)],
            capped: false,
            values_ms: Vec::new(),
        };
        let evaluations = vec![
            Evaluation {
                candidate: candidate(1, 1),
                outcome: Ok(Measured {
                    goodput,
                    tokens_per_s: 3600.0,
                    latency_ms: Some(250.0),
                    arrival_span_s: 30.0,
                }),
            },
            Evaluation {
                candidate: candidate(1, 2),
                outcome: Err("pipeline_parallel = 2: must be 1".into()),
            },
        ];
        let outcome = rank(evaluations, &|_| Some(12.29));
        let workload = Workload {
            source: "test".into(),
            requests: Vec::new(),
            tenants: Vec::new(),
            categories: Vec::new(),
            prefix_block_tokens: 0,
        };
        let cx = SearchContext {
            workload: &workload,
            model: "Llama-3.1-8B",
            criterion: &GoodputCriterion::Attainment(0.9),
            latency: LatencyPick { metric: LatencyMetric::E2e, percentile: 90.0 },
            prices_file: "gpu_prices.toml",
            prices: &[],
            sustained_span_s: 60.0,
        };
        let text = search_table_text(&cx, &outcome);
        // $12.29/h / (3,600 tok/s x 3,600 s) x 1e6 = $0.948 per million tokens.
        assert!(text.contains("| 0 | H100-SXM | 1 | 1 | 1 | 1 | 8192 | 256 | fcfs | 10.00 | 3600 | 12.29 | 0.948 | 0.814 | 250.0 | best, Pareto, burst |"), "{text}");
        assert!(text.contains("  #1 H100-SXM TP 1 PP 2 x 1 replica(s), budget 8192, 256 seqs, fcfs: pipeline_parallel = 2: must be 1"), "{text}");
        assert!(text.contains("best: #0 "), "{text}");
        let value = search_json(&cx, &outcome);
        assert_eq!(value["best"], json!(0));
        assert_eq!(value["configurations"][1]["skipped"], json!("pipeline_parallel = 2: must be 1"));
        assert_eq!(value["configurations"][0]["simulations"], json!(3));
    }
}
