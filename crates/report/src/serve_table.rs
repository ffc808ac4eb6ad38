//! Text output for serving results: one block per serve-sim run (latency percentiles,
//! SLO attainment, throughput, fairness, tenants, optional attribution, goodput and
//! service windows) and the `plan serve` table. The blocks read the run's JSON
//! object (see [`crate::serve_json`]) for the optional parts, so text and JSON
//! always show the same numbers.

use std::fmt::{self, Write};

use serde_json::Value;

use cotenant_serve::goodput::GoodputCriterion;
use cotenant_serve::metrics::Percentiles;
use cotenant_serve::plan::PlanRow;
use cotenant_serve::{ServeConfig, Summary, Workload};

/// What one serve-sim run's text block shows.
#[derive(Clone, Copy, Debug)]
pub struct ServeRunText<'a> {
    pub workload: &'a Workload,
    pub config: &'a ServeConfig,
    pub summary: &'a Summary,
    /// The run's JSON object: `diagnostics`, `bench`, `attribution`, `goodput` and
    /// `windows` are printed when present.
    pub report: &'a Value,
    /// Print the per-window service table (`--windows`).
    pub windows: bool,
    /// Arrival spans shorter than this (seconds) are a burst, not a sustained rate:
    /// the goodput block warns about them.
    pub sustained_span_s: f64,
}

/// One serve-sim run as text, one line per figure, ending in a newline.
pub fn serve_run_text(run: &ServeRunText<'_>) -> String {
    let mut out = String::new();
    write_run(&mut out, run).expect("writing to a String cannot fail");
    out
}

/// `plan serve`'s answer: a header line and a Markdown table, one row per GPU type
/// and tensor-parallel degree that meets `target` within `max_replicas` replicas, or
/// `criterion` when the plan was made under one (`plan serve --goodput SPEC`).
pub fn plan_table_text(
    workload: &Workload,
    config: &ServeConfig,
    target: f64,
    criterion: Option<&GoodputCriterion>,
    rows: &[PlanRow],
    max_replicas: u32,
) -> String {
    let mut out = String::new();
    write_plan(&mut out, workload, config, target, criterion, rows, max_replicas)
        .expect("writing to a String cannot fail");
    out
}

fn write_plan(
    out: &mut String,
    workload: &Workload,
    config: &ServeConfig,
    target: f64,
    criterion: Option<&GoodputCriterion>,
    rows: &[PlanRow],
    max_replicas: u32,
) -> fmt::Result {
    let slo = criterion.map_or_else(
        || {
            format!(
                "TTFT <= {} ms and TPOT <= {} ms for {:.0}% of requests",
                config.slo.ttft.0 / 1000,
                config.slo.tbt.0 / 1000,
                100.0 * target
            )
        },
        GoodputCriterion::describe,
    );
    writeln!(
        out,
        "{} on {} requests at {:.2} req/s, scheduler {}, SLO {slo}:",
        config.model.model.name,
        workload.requests.len(),
        workload.request_rate_per_s(),
        config.scheduler.kind.name(),
    )?;
    writeln!(out, "| GPU | TP | replicas | GPUs | attainment |\n|---|---:|---:|---:|---:|")?;
    for r in rows {
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}% |",
            r.gpu,
            r.tensor_parallel,
            r.replicas,
            r.gpus,
            100.0 * r.attainment
        )?;
    }
    if rows.is_empty() {
        writeln!(out, "(no GPU type and TP degree meets the target within {max_replicas} replicas)")?;
    }
    Ok(())
}

/// Relative error vs Shapley, LLMVisor and the token proxy side by side, with the ratio.
fn attribution_text(out: &mut String, attribution: &Value) -> fmt::Result {
    let get = |method: &str, phase: &str, q: &str| attribution[method][phase][q].as_f64().unwrap_or(f64::NAN);
    writeln!(
        out,
        "  attribution vs Shapley ({} iterations, {} exact): relative error, LLMVisor | token proxy | proxy/LLMVisor",
        attribution["iterations_evaluated"], attribution["exact_iterations"]
    )?;
    for phase in ["prefill", "decode"] {
        let samples = attribution["llmvisor"][phase]["samples"].as_u64().unwrap_or(0);
        let cells: Vec<String> = ["p50", "p90", "p99"]
            .iter()
            .map(|q| {
                let (visor, proxy) = (get("llmvisor", phase, q), get("token_proxy", phase, q));
                format!("{q} {visor:.4} | {proxy:.4} | {:.1}x", proxy / visor)
            })
            .collect();
        writeln!(out, "    {phase:<7} ({samples} shares): {}", cells.join("   "))?;
    }
    Ok(())
}

fn percentiles_line(out: &mut String, label: &str, p: &Percentiles) -> fmt::Result {
    writeln!(out, "  {label:<22} p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}", p.p50, p.p90, p.p99)
}

fn write_run(out: &mut String, run: &ServeRunText<'_>) -> fmt::Result {
    let ServeRunText { workload, config, summary: s, report, windows, sustained_span_s } = *run;
    writeln!(
        out,
        "== {} | {} on {} (TP {}), {} replica(s), KV {} tokens/replica | {} requests ({:.2}/s) from {}",
        s.scheduler,
        config.model.model.name,
        config.model.gpu.name,
        config.model.tensor_parallel,
        config.replicas,
        config.kv_capacity_tokens(),
        s.requests,
        workload.request_rate_per_s(),
        workload.source
    )?;
    percentiles_line(out, "TTFT (ms)", &s.ttft_ms)?;
    percentiles_line(out, "TBT (ms)", &s.tbt_ms)?;
    percentiles_line(out, "TPOT (ms)", &s.tpot_ms)?;
    percentiles_line(out, "E2E (ms)", &s.e2e_ms)?;
    percentiles_line(out, "E2E/token (ms)", &s.normalized_latency_ms)?;
    writeln!(
        out,
        "  SLO attainment {:.1}% (TTFT <= {} ms, TPOT <= {} ms) | {:.2} req/s, {:.0} output tok/s, {:.0} total tok/s | {} iterations, {} preemptions, busy {:.1}%",
        100.0 * s.slo_attainment,
        config.slo.ttft.0 / 1000,
        config.slo.tbt.0 / 1000,
        s.requests_per_s,
        s.output_tokens_per_s,
        s.total_tokens_per_s,
        s.iterations,
        s.preemptions,
        100.0 * s.busy_fraction
    )?;
    let u = &s.utilization;
    writeln!(
        out,
        "  utilization: MFU {:.1}% busy, {:.1}% wall | MBU {:.1}% busy, {:.1}% wall | KV in use {:.1}% mean (busy time), {:.1}% max",
        100.0 * u.mfu,
        100.0 * u.mfu_wall,
        100.0 * u.mbu,
        100.0 * u.mbu_wall,
        100.0 * u.kv_mean,
        100.0 * u.kv_max
    )?;
    writeln!(
        out,
        "  fairness: Jain {:.3}, max window service difference {:.0}, max service difference {:.0} (service = prompt + 2 x output tokens, per weight)",
        s.jain_index, s.max_window_service_difference, s.max_service_difference
    )?;
    for t in &s.tenants {
        writeln!(
        out,
            "  tenant {:<10} w {:<4} {:>6} req  service {:>11.0}  GPU {:>8.1} s  TTFT p50 {:>8.1} p90 {:>8.1} ms  SLO {:.1}%",
            t.name,
            t.weight,
            t.requests,
            t.service,
            t.attributed_gpu_s,
            t.ttft_ms.p50,
            t.ttft_ms.p90,
            100.0 * t.slo_attainment
        )?;
    }
    for key in ["diagnostics", "bench"] {
        if let Some(Value::Object(fields)) =
            report.get(key).filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        {
            let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "  {key}: {}", parts.join(", "))?;
        }
    }
    if let Some(attribution) = report.get("attribution") {
        attribution_text(out, attribution)?;
    }
    if let Some(goodput) = report.get("goodput") {
        let field = |name: &str| goodput.get(name).and_then(Value::as_f64).unwrap_or(f64::NAN);
        let criterion = goodput.get("criterion").and_then(Value::as_str).unwrap_or_default();
        writeln!(
        out,
            "  goodput ({criterion}): rate scale {:.3} = {:.2} req/s, attainment {:.1}%, {:.0} output tok/s, {:.0} total tok/s, TBT p99 {:.1} ms ({} simulations)",
            field("rate_scale"),
            field("requests_per_s"),
            100.0 * field("attainment"),
            field("output_tokens_per_s"),
            field("total_tokens_per_s"),
            field("tbt_p99_ms"),
            field("simulations")
        )?;
        if let Some(Value::Array(targets)) =
            goodput.get("targets").filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
        {
            let cells: Vec<String> = targets
                .iter()
                .map(|t| {
                    let number = |key: &str| t.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN);
                    let metric = t.get("metric").and_then(Value::as_str).unwrap_or_default().to_uppercase();
                    format!(
                        "{metric} p{} {:.1} ms (target {})",
                        number("percentile"),
                        number("value_ms"),
                        number("target_ms")
                    )
                })
                .collect();
            writeln!(out, "  at the goodput: {}", cells.join(", "))?;
        }
        if goodput.get("capped").and_then(Value::as_bool) == Some(true) {
            writeln!(
        out,
                "  warning: every probe met the target up to the search's last doubling: the goodput is at least \
                 this, not measured"
            )?;
        }
        let span_s = field("arrival_span_s");
        if span_s < sustained_span_s {
            writeln!(
        out,
                "  warning: at this rate scale the requests arrive within {span_s:.3} s, a burst rather than a \
                 sustained rate (under {sustained_span_s:.0} s): use a longer or denser workload"
            )?;
        }
    }
    if windows {
        if let Some(Value::Array(rows)) = report.get("windows") {
            writeln!(
        out,
                "  service per tenant and window (prompt + 2 x output tokens; {} s windows; * = backlogged the whole window):",
                config.service_window.as_secs_f64()
            )?;
            let names: Vec<&str> = workload.tenants.iter().map(|t| t.name.as_str()).collect();
            writeln!(
                out,
                "    {:>6}  {}",
                "window",
                names.iter().map(|n| format!("{n:>12}")).collect::<String>()
            )?;
            for (index, row) in rows.iter().enumerate() {
                let service = row.get("service").and_then(Value::as_array).cloned().unwrap_or_default();
                let backlogged = row.get("backlogged").and_then(Value::as_array).cloned().unwrap_or_default();
                let cells: String = service
                    .iter()
                    .enumerate()
                    .map(|(t, s)| {
                        let star =
                            if backlogged.get(t).and_then(Value::as_bool) == Some(true) { "*" } else { " " };
                        format!("{:>11.0}{star}", s.as_f64().unwrap_or(f64::NAN))
                    })
                    .collect();
                writeln!(out, "    {index:>6}  {cells}")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentiles_line_aligns_one_decimal() {
        let mut out = String::new();
        percentiles_line(
            &mut out,
            "TTFT (ms)",
            &Percentiles { p50: 1.25, p90: 20.0, p99: 1234.56, mean: 0.0 },
        )
        .unwrap();
        assert_eq!(out, "  TTFT (ms)              p50       1.2  p90      20.0  p99    1234.6\n");
    }

    /// LLMVisor's p50 0.01 against the proxy's 0.05 is a 5.0x ratio.
    #[test]
    fn attribution_prints_both_methods_and_their_ratio() {
        let stats = |p50: f64| json!({"samples": 2, "p50": p50, "p90": p50, "p99": p50});
        let attribution = json!({
            "iterations_evaluated": 10, "exact_iterations": 9,
            "llmvisor": {"prefill": stats(0.01), "decode": stats(0.02)},
            "token_proxy": {"prefill": stats(0.05), "decode": stats(0.02)},
        });
        let mut out = String::new();
        attribution_text(&mut out, &attribution).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("(10 iterations, 9 exact)"), "{}", lines[0]);
        assert!(lines[1].starts_with("    prefill (2 shares): p50 0.0100 | 0.0500 | 5.0x"), "{}", lines[1]);
        assert!(lines[2].contains("p99 0.0200 | 0.0200 | 1.0x"), "{}", lines[2]);
    }
}
