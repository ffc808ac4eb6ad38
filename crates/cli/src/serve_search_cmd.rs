//! `cotenant plan serve --search`: the configuration search's flags in, its table or JSON
//! out. The search itself is `cotenant_serve::search`; configurations are evaluated in
//! parallel (rayon) and ranked in candidate order, so the output does not depend on the
//! thread count.

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use cotenant_core::limits::MAX_SERVE_REPLICAS;
use cotenant_perf::prices::{bundled_prices, parse_prices, GpuPrice};
use cotenant_report::serve_search::{search_json, search_table_text, SearchContext};
use cotenant_serve::goodput::GoodputCriterion;
use cotenant_serve::search::{evaluate, rank, Evaluation, LatencyPick, SearchSpace};
use cotenant_serve::{ServeConfig, Workload};

use crate::serve_cmd::{
    goodput_criterion, parse_schedulers, resolve_gpu, roofline_params, PlanServeArgs, MIN_PLAN_ARRIVAL_SPAN_S,
};

/// Most configurations one search may try.
const MAX_CONFIGURATIONS: usize = 100_000;

/// `text` as a comma-separated list of integers in `low..=high`; errors name `flag`.
fn integer_list<T>(flag: &str, text: &str, low: T, high: T) -> Result<Vec<T>>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let mut values = Vec::new();
    for part in text.split(',') {
        let value = part.trim().parse::<T>().ok().filter(|v| *v >= low && *v <= high).with_context(|| {
            format!("{flag} {text}: `{}` is not an integer in [{low}, {high}]", part.trim())
        })?;
        if !values.contains(&value) {
            values.push(value);
        }
    }
    Ok(values)
}

/// The price table: `--prices PATH` or the bundled one, with the name it is shown under.
fn prices(path: Option<&Path>) -> Result<(String, Vec<GpuPrice>)> {
    match path {
        None => Ok(("crates/perf/data/gpu_prices.toml (bundled)".to_string(), bundled_prices())),
        Some(path) => {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).with_context(|| format!("--prices: reading {name}"))?;
            let table = parse_prices(&name, &text).map_err(|e| anyhow!("--prices: {e}"))?;
            Ok((name, table))
        }
    }
}

pub fn run_search(args: &PlanServeArgs, workload: &Workload, base: &ServeConfig) -> Result<()> {
    let space = SearchSpace {
        gpus: args.gpus.split(',').map(|g| resolve_gpu(g.trim())).collect::<Result<Vec<_>>>()?,
        tensor_parallel: integer_list("--tp-options", &args.tp_options, 1, 1024)?,
        pipeline_parallel: integer_list("--pp-options", &args.pp_options, 1, 1024)?,
        replicas: integer_list("--replicas-options", &args.replicas_options, 1, MAX_SERVE_REPLICAS)?,
        token_budgets: integer_list("--token-budget-options", &args.token_budget_options, 1, 1 << 21)?,
        max_seqs: integer_list("--max-seqs-options", &args.max_seqs_options, 1, 1 << 16)?,
        schedulers: parse_schedulers(&args.schedulers).context("--schedulers")?,
    };
    let criterion = match &args.goodput {
        Some(spec) => goodput_criterion(Some(spec))?,
        None => GoodputCriterion::Attainment(args.target),
    };
    let latency = LatencyPick::parse(&args.pareto_latency)
        .map_err(|e| anyhow!("--pareto-latency {}: {e}", args.pareto_latency))?;
    let (prices_file, price_table) = prices(args.prices.as_deref())?;
    let price_of = |gpu: &str| price_table.iter().find(|p| p.gpu == gpu).map(|p| p.usd_per_gpu_hour);
    let candidates = space.candidates();
    if candidates.len() > MAX_CONFIGURATIONS {
        bail!(
            "--search: {} configurations (the product of the option lists); at most {MAX_CONFIGURATIONS}",
            candidates.len()
        );
    }
    // Shown (on a terminal) once the search has taken a second, as `cotenant sweep` does.
    let bar = ProgressBar::with_draw_target(Some(candidates.len() as u64), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} configurations, {elapsed} elapsed, ~{eta} left",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message("plan serve --search");
    let started = Instant::now();
    let evaluations: Vec<Evaluation> = candidates
        .par_iter()
        .map(|&candidate| {
            let evaluation = if price_of(candidate.gpu.name).is_none() {
                Evaluation {
                    candidate,
                    outcome: Err(format!(
                        "no price for {} in {prices_file} (add it with --prices PATH)",
                        candidate.gpu.name
                    )),
                }
            } else {
                let params = roofline_params(&args.deployment, &candidate.gpu, candidate.tensor_parallel);
                evaluate(workload, base, candidate, params, &criterion, latency)
            };
            if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.inc(1);
            evaluation
        })
        .collect();
    bar.finish_and_clear();
    let outcome = rank(evaluations, &price_of);
    let cx = SearchContext {
        workload,
        model: &base.model.model.name,
        criterion: &criterion,
        latency,
        prices_file: &prices_file,
        prices: &price_table,
        sustained_span_s: MIN_PLAN_ARRIVAL_SPAN_S,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&search_json(&cx, &outcome))?);
    } else {
        print!("{}", search_table_text(&cx, &outcome));
    }
    Ok(())
}
