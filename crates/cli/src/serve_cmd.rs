//! `cotenant serve-sim` and `cotenant plan serve`: flags in, serving simulations out.
//! Glue only: the simulator, schedulers and metrics live in `cotenant-serve`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cotenant_core::Span;
use cotenant_perf::{find_gpu, GpuSpec, ModelShape, Roofline, RooflineParams, GPU_CATALOG};
use cotenant_serve::attribution::AttributionEval;
use cotenant_serve::metrics::Percentiles;
use cotenant_serve::plan::{goodput_search, plan_serve, GOODPUT_ATTAINMENT};
use cotenant_serve::scheduler::{BatchLimits, DriftConfig};
use cotenant_serve::synthetic::{generate, SyntheticTenant};
use cotenant_serve::{
    simulate, summarize, RouterKind, SchedulerConfig, SchedulerKind, ServeConfig, Slo, Summary, Workload,
};
use cotenant_trace::requests::{read_azure_csv, read_mooncake_jsonl, RequestTrace};
use cotenant_trace::{bundled_data_dir, traces_dir, BUNDLED_AZURE_CODE, BUNDLED_AZURE_CONV};
use serde_json::{json, Value};

/// Which requests to replay.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeWorkloadArgs {
    /// azure (code and conv as two tenants), azure-conv, azure-code, mooncake, or synthetic
    /// (needs --tenant). Azure is read from the bundled data/ copy; Mooncake from --traces-dir.
    #[arg(long, default_value = "azure")]
    pub trace: String,
    /// Where the full trace collection lives (default $COTENANT_TRACES, else ../shared/traces).
    #[arg(long, value_name = "DIR")]
    pub traces_dir: Option<PathBuf>,
    /// A synthetic tenant, repeatable: name=a,rate=2[,weight=1,prompt=512,output=128,
    /// sigma=0.5,burst=ON/OFFxMULT,tier=premium|standard|batch,calls=1,think=5].
    #[arg(long = "tenant", value_name = "SPEC")]
    pub tenants: Vec<String>,
    /// Seconds of synthetic arrivals.
    #[arg(long, default_value_t = 600.0)]
    pub duration_s: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep only the first N requests.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Multiply the arrival rate (2 = arrivals twice as dense).
    #[arg(long, default_value_t = 1.0)]
    pub rate_scale: f64,
    /// Tenant weight override, repeatable: NAME=WEIGHT (e.g. conv=2).
    #[arg(long = "weight", value_name = "NAME=WEIGHT")]
    pub weights: Vec<String>,
}

/// What serves the requests.
#[derive(Debug, Clone, clap::Args)]
pub struct DeploymentArgs {
    /// Catalog name (Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-14B, Qwen2.5-32B) or an explicit
    /// shape layers=..,hidden=..,heads=..,kv_heads=..,head_dim=..,ffn=..,vocab=..
    #[arg(long, default_value = "Llama-3.1-8B")]
    pub model: String,
    /// GPU type: A100-80G, A100-40G, H100-SXM, H200, L4, V100, P100, K80.
    #[arg(long, default_value = "H100-SXM")]
    pub gpu: String,
    /// Tensor-parallel degree per replica.
    #[arg(long, default_value_t = 1)]
    pub tp: u32,
    #[arg(long, default_value_t = 1)]
    pub replicas: u32,
    /// round-robin, least-outstanding, prefix-affinity.
    #[arg(long, default_value = "least-outstanding")]
    pub router: String,
    /// Override the KV capacity per replica (tokens) instead of deriving it from memory.
    #[arg(long, value_name = "TOKENS")]
    pub kv_capacity_tokens: Option<u64>,
    #[arg(long, default_value_t = 0.9)]
    pub memory_utilization: f64,
    #[arg(long, default_value_t = 8192)]
    pub token_budget: u32,
    #[arg(long, default_value_t = 256)]
    pub max_seqs: u32,
    /// Roofline calibration: compute efficiency, memory efficiency, fixed cost per iteration.
    #[arg(long, default_value_t = RooflineParams::default().compute_efficiency)]
    pub eta_compute: f64,
    #[arg(long, default_value_t = RooflineParams::default().memory_efficiency)]
    pub eta_memory: f64,
    #[arg(long, default_value_t = RooflineParams::default().fixed_s * 1e3)]
    pub c0_ms: f64,
    #[arg(long, default_value_t = 2000.0)]
    pub slo_ttft_ms: f64,
    /// TBT/TPOT objective (ms per output token).
    #[arg(long, default_value_t = 100.0)]
    pub slo_tbt_ms: f64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeSimArgs {
    #[command(flatten)]
    pub workload: ServeWorkloadArgs,
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    /// Schedulers, comma-separated: fcfs (vllm), sarathi, vtc, fairserve, driftsched, lookahead; or all.
    #[arg(long, default_value = "fcfs")]
    pub scheduler: String,
    /// DriftSched: prior output tokens for every category before any correction.
    #[arg(long, default_value_t = 256.0)]
    pub drift_prior_tokens: f64,
    /// Compare attribution with Shapley values on every Nth iteration.
    #[arg(long, value_name = "N")]
    pub attribution_eval: Option<u64>,
    /// Give LLMVisor a miscalibrated model, as a fitted one would be: compute efficiency
    /// x (1 + F), memory efficiency x (1 - F), fixed cost x (1 + F). Shapley stays exact.
    #[arg(long, default_value_t = 0.0, value_name = "F")]
    pub attribution_misfit: f64,
    /// Permutations (each with its reverse) per sampled Shapley estimate.
    #[arg(long, default_value_t = 64)]
    pub shapley_permutations: u32,
    /// Service-difference window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub window_s: f64,
    /// Print per-window service per tenant (service / weight).
    #[arg(long)]
    pub windows: bool,
    /// Also search the goodput: the largest rate scale with >= 90% SLO attainment.
    #[arg(long)]
    pub goodput: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Time the run (wall clock, iterations/s, attribution cost) and print it.
    #[arg(long)]
    pub bench: bool,
}

pub fn run_serve_sim(args: ServeSimArgs) -> Result<()> {
    let workload = load_workload(&args.workload)?;
    let kinds = parse_schedulers(&args.scheduler)?;
    let mut reports = Vec::new();
    for kind in kinds {
        let config = serve_config(&args, &workload, kind)?;
        let started = Instant::now();
        let result = simulate(&workload, &config).with_context(|| format!("simulating {}", kind.name()))?;
        let wall_s = started.elapsed().as_secs_f64();
        let summary = summarize(&workload, &result, config.slo);
        let mut report = summary_json(&summary);
        report["diagnostics"] = json!(result
            .diagnostics
            .first()
            .map(|d| d.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>()));
        if let Some(errors) = &result.attribution {
            report["attribution"] = attribution_json(errors);
        }
        if args.windows {
            report["windows"] = json!(result
                .windows
                .iter()
                .map(|w| json!({"service": w.service, "backlogged": w.backlogged}))
                .collect::<Vec<_>>());
        }
        if args.bench {
            report["bench"] = bench_json(&workload, &config, &result, wall_s)?;
        }
        if args.goodput {
            let search_started = Instant::now();
            let found = goodput_search(&workload, &config, GOODPUT_ATTAINMENT, 1.0)?;
            let search_wall_s = search_started.elapsed().as_secs_f64();
            let at_goodput = workload.with_rate_scale(found.rate_scale.max(f64::MIN_POSITIVE));
            let at_summary = summarize(&at_goodput, &simulate(&at_goodput, &config)?, config.slo);
            report["goodput"] = json!({
                "rate_scale": found.rate_scale,
                "requests_per_s": found.requests_per_s,
                "attainment": found.attainment,
                "output_tokens_per_s": at_summary.output_tokens_per_s,
                "total_tokens_per_s": at_summary.total_tokens_per_s,
                "tbt_p99_ms": at_summary.tbt_ms.p99,
                "simulations": found.probes.len(),
                "search_wall_s": search_wall_s,
                "probes": found.probes,
            });
        }
        if !args.json {
            print_report(&workload, &config, &summary, &report, args.windows);
        }
        reports.push(report);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"workload": workload_json(&workload), "runs": reports}))?
        );
    }
    Ok(())
}

fn parse_schedulers(text: &str) -> Result<Vec<SchedulerKind>> {
    if text == "all" {
        return Ok(SchedulerKind::ALL.to_vec());
    }
    text.split(',')
        .map(|name| {
            SchedulerKind::parse(name.trim())
                .with_context(|| format!("--scheduler: unknown scheduler `{name}`"))
        })
        .collect()
}

fn resolve_gpu(name: &str) -> Result<GpuSpec> {
    let known = || GPU_CATALOG.iter().map(|g| g.name).collect::<Vec<_>>().join(", ");
    find_gpu(name).copied().with_context(|| format!("--gpu: unknown GPU `{name}` (known: {})", known()))
}

fn roofline(args: &DeploymentArgs, gpu: GpuSpec) -> Result<Roofline> {
    let model = ModelShape::parse(&args.model).context("--model")?;
    let params = RooflineParams {
        compute_efficiency: args.eta_compute,
        memory_efficiency: args.eta_memory,
        fixed_s: args.c0_ms / 1e3,
        ..RooflineParams::default()
    };
    if !(params.compute_efficiency > 0.0 && params.memory_efficiency > 0.0 && params.fixed_s >= 0.0) {
        bail!("--eta-compute and --eta-memory must be > 0 and --c0-ms >= 0");
    }
    if args.tp == 0 {
        bail!("--tp must be at least 1");
    }
    Ok(Roofline::new(model, gpu, args.tp, params))
}

fn base_config(
    deployment: &DeploymentArgs,
    workload: &Workload,
    kind: SchedulerKind,
    drift_prior_tokens: f64,
) -> Result<ServeConfig> {
    let model = roofline(deployment, resolve_gpu(&deployment.gpu)?)?;
    let slo = Slo {
        ttft: Span((deployment.slo_ttft_ms * 1e3) as u64),
        tbt: Span((deployment.slo_tbt_ms * 1e3) as u64),
    };
    let router = RouterKind::parse(&deployment.router)
        .with_context(|| format!("--router: unknown router `{}`", deployment.router))?;
    let limits = BatchLimits {
        token_budget: deployment.token_budget.max(1),
        max_seqs: deployment.max_seqs.max(1),
        decode_first: false,
    };
    let drift = DriftConfig { default_prior_tokens: drift_prior_tokens, ..DriftConfig::default() };
    Ok(ServeConfig {
        model,
        replicas: deployment.replicas,
        scheduler: SchedulerConfig {
            kind,
            limits,
            tenants: workload.tenants.clone(),
            categories: workload.categories.len(),
            slo,
            drift,
        },
        router,
        kv_block_tokens: 16,
        memory_utilization: deployment.memory_utilization,
        activation_reserve_gb: 2.0,
        kv_capacity_tokens: deployment.kv_capacity_tokens,
        slo,
        service_window: Span::from_secs(1),
        attribution_eval: None,
    })
}

fn serve_config(args: &ServeSimArgs, workload: &Workload, kind: SchedulerKind) -> Result<ServeConfig> {
    let mut config = base_config(&args.deployment, workload, kind, args.drift_prior_tokens)?;
    config.service_window = Span((args.window_s * 1e6).max(1.0) as u64);
    let misfit = args.attribution_misfit;
    if !(-0.9..=0.9).contains(&misfit) {
        bail!("--attribution-misfit must be within -0.9..0.9");
    }
    let base = config.model.params;
    let fitted_params = (misfit != 0.0).then_some(RooflineParams {
        compute_efficiency: base.compute_efficiency * (1.0 + misfit),
        memory_efficiency: base.memory_efficiency * (1.0 - misfit),
        fixed_s: base.fixed_s * (1.0 + misfit),
        ..base
    });
    config.attribution_eval = args.attribution_eval.map(|every| AttributionEval {
        every_nth_iteration: every.max(1),
        permutations: args.shapley_permutations,
        seed: args.workload.seed,
        fitted_params,
    });
    Ok(config)
}

/// Reads the requested trace(s) or generates synthetic tenants, then applies
/// --limit, --rate-scale and --weight.
pub fn load_workload(args: &ServeWorkloadArgs) -> Result<Workload> {
    let mut workload = match args.trace.as_str() {
        "azure" => named(
            Workload::from_traces(&[("code", &azure("code")?), ("conv", &azure("conv")?)]),
            "Azure LLM 2023 code + conv",
        ),
        "azure-code" => named(Workload::from_traces(&[("code", &azure("code")?)]), "Azure LLM 2023 code"),
        "azure-conv" => named(Workload::from_traces(&[("conv", &azure("conv")?)]), "Azure LLM 2023 conv"),
        "mooncake" => {
            let path =
                traces_dir(args.traces_dir.as_deref()).join("mooncake-2024").join("conversation_trace.jsonl");
            named(
                Workload::from_traces(&[("mooncake", &read_mooncake_jsonl(&path)?)]),
                "Mooncake 2024 conversation",
            )
        }
        "synthetic" => {
            if args.tenants.is_empty() {
                bail!("--trace synthetic needs at least one --tenant SPEC");
            }
            let tenants = args
                .tenants
                .iter()
                .map(|spec| SyntheticTenant::parse(spec).map_err(|e| anyhow::anyhow!("--tenant {spec}: {e}")))
                .collect::<Result<Vec<_>>>()?;
            generate(&tenants, args.duration_s, args.seed)
        }
        other => {
            bail!("--trace: unknown trace `{other}` (azure, azure-code, azure-conv, mooncake, synthetic)")
        }
    };
    if let Some(limit) = args.limit {
        workload = workload.truncated(limit);
    }
    if args.rate_scale <= 0.0 {
        bail!("--rate-scale must be > 0");
    }
    if args.rate_scale != 1.0 {
        workload = workload.with_rate_scale(args.rate_scale);
    }
    for pair in &args.weights {
        let (name, weight) =
            pair.split_once('=').with_context(|| format!("--weight {pair}: expected NAME=WEIGHT"))?;
        let weight: f64 = weight
            .parse()
            .ok()
            .filter(|w: &f64| *w > 0.0)
            .with_context(|| format!("--weight {pair}: weight must be a number > 0"))?;
        let tenant = workload
            .tenants
            .iter_mut()
            .find(|t| t.name == name)
            .with_context(|| format!("--weight {pair}: no tenant named `{name}`"))?;
        tenant.weight = weight;
    }
    if workload.requests.is_empty() {
        bail!("the workload has no requests");
    }
    Ok(workload)
}

fn named(mut workload: Workload, name: &str) -> Workload {
    workload.source = name.to_string();
    workload
}

/// The bundled Azure trace, or the shared copy when the bundle is missing.
fn azure(which: &str) -> Result<RequestTrace> {
    let bundled =
        bundled_data_dir().join(if which == "code" { BUNDLED_AZURE_CODE } else { BUNDLED_AZURE_CONV });
    let path = if bundled.exists() {
        bundled
    } else {
        traces_dir(None).join("azure-llm-inference-2023").join(format!("AzureLLMInferenceTrace_{which}.csv"))
    };
    Ok(read_azure_csv(&path)?)
}

fn percentiles_json(p: &Percentiles) -> Value {
    let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    json!({"p50": p.p50, "p90": p.p90, "p99": p.p99, "mean": finite(p.mean)})
}

fn summary_json(s: &Summary) -> Value {
    json!({
        "scheduler": s.scheduler,
        "requests": s.requests,
        "finished": s.finished,
        "ttft_ms": percentiles_json(&s.ttft_ms),
        "tbt_ms": percentiles_json(&s.tbt_ms),
        "tpot_ms": percentiles_json(&s.tpot_ms),
        "e2e_ms": percentiles_json(&s.e2e_ms),
        "normalized_latency_ms_per_token": percentiles_json(&s.normalized_latency_ms),
        "slo_attainment": s.slo_attainment,
        "duration_s": s.duration_s,
        "requests_per_s": s.requests_per_s,
        "output_tokens_per_s": s.output_tokens_per_s,
        "total_tokens_per_s": s.total_tokens_per_s,
        "iterations": s.iterations,
        "preemptions": s.preemptions,
        "busy_fraction": s.busy_fraction,
        "prefix_hit_tokens": s.prefix_hit_tokens,
        "jain_index": s.jain_index,
        "max_window_service_difference": s.max_window_service_difference,
        "max_service_difference": s.max_service_difference,
        "tenants": s.tenants.iter().map(|t| json!({
            "name": t.name, "weight": t.weight, "requests": t.requests, "service": t.service,
            "attributed_gpu_s": t.attributed_gpu_s, "ttft_ms": percentiles_json(&t.ttft_ms),
            "e2e_ms": percentiles_json(&t.e2e_ms), "slo_attainment": t.slo_attainment,
        })).collect::<Vec<_>>(),
    })
}

fn attribution_json(errors: &cotenant_serve::attribution::AttributionErrors) -> Value {
    let stats = |v: &[f64]| {
        let p = Percentiles::of(v);
        json!({"samples": v.len(), "p50": p.p50, "p90": p.p90, "p99": p.p99})
    };
    json!({
        "iterations_evaluated": errors.iterations_evaluated,
        "exact_iterations": errors.exact_iterations,
        "llmvisor": {"prefill": stats(&errors.llmvisor_prefill), "decode": stats(&errors.llmvisor_decode)},
        "token_proxy": {"prefill": stats(&errors.proxy_prefill), "decode": stats(&errors.proxy_decode)},
    })
}

fn workload_json(workload: &Workload) -> Value {
    json!({
        "source": workload.source,
        "requests": workload.requests.len(),
        "request_rate_per_s": workload.request_rate_per_s(),
        "tenants": workload.tenants.iter().map(|t| json!({"name": t.name, "weight": t.weight})).collect::<Vec<_>>(),
    })
}

/// Times the attribution step alone over batches shaped like the run's, and reports
/// the run's own wall time and iteration rate.
fn bench_json(
    workload: &Workload,
    config: &ServeConfig,
    result: &cotenant_serve::ServeResult,
    wall_s: f64,
) -> Result<Value> {
    let batch: Vec<cotenant_perf::BatchEntry> = (0..64)
        .map(|i| cotenant_perf::BatchEntry {
            new_tokens: if i == 0 { 512 } else { 1 },
            context_tokens: 500 + 10 * i,
            emits_token: i != 0,
        })
        .collect();
    let (mut scratch, mut shares) = (Vec::new(), Vec::new());
    let calls = 200_000;
    let started = Instant::now();
    for i in 0..calls {
        cotenant_serve::attribution::llmvisor_shares(
            &config.model,
            &batch,
            20_000_000 + i,
            &mut scratch,
            &mut shares,
        );
    }
    let per_call_us = started.elapsed().as_secs_f64() / calls as f64 * 1e6;
    // The simulator's own path: roofline terms already computed when the batch was timed.
    let mut own = Vec::new();
    config.model.iteration_s_with_own(&batch, &mut own);
    let started = Instant::now();
    for i in 0..calls {
        cotenant_serve::attribution::llmvisor_shares_with_own(
            &config.model,
            &batch,
            &own,
            20_000_000 + i,
            &mut scratch,
            &mut shares,
        );
    }
    let split_only_us = started.elapsed().as_secs_f64() / calls as f64 * 1e6;
    Ok(json!({
        "requests": workload.requests.len(),
        "wall_s": wall_s,
        "iterations": result.iterations,
        "iterations_per_s": result.iterations as f64 / wall_s,
        "requests_per_s_wall": workload.requests.len() as f64 / wall_s,
        "attribution_us_per_iteration_64_requests": per_call_us,
        "attribution_split_us_per_iteration_64_requests": split_only_us,
    }))
}

/// Relative error vs Shapley, LLMVisor and the token proxy side by side, with the ratio.
fn print_attribution(attribution: &Value) {
    let get = |method: &str, phase: &str, q: &str| attribution[method][phase][q].as_f64().unwrap_or(f64::NAN);
    println!(
        "  attribution vs Shapley ({} iterations, {} exact): relative error, LLMVisor | token proxy | proxy/LLMVisor",
        attribution["iterations_evaluated"], attribution["exact_iterations"]
    );
    for phase in ["prefill", "decode"] {
        let samples = attribution["llmvisor"][phase]["samples"].as_u64().unwrap_or(0);
        let cells: Vec<String> = ["p50", "p90", "p99"]
            .iter()
            .map(|q| {
                let (visor, proxy) = (get("llmvisor", phase, q), get("token_proxy", phase, q));
                format!("{q} {visor:.4} | {proxy:.4} | {:.1}x", proxy / visor)
            })
            .collect();
        println!("    {phase:<7} ({samples} shares): {}", cells.join("   "));
    }
}

fn print_percentiles(label: &str, p: &Percentiles) {
    println!("  {label:<22} p50 {:>9.1}  p90 {:>9.1}  p99 {:>9.1}", p.p50, p.p90, p.p99);
}

fn print_report(workload: &Workload, config: &ServeConfig, s: &Summary, report: &Value, windows: bool) {
    println!(
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
    );
    print_percentiles("TTFT (ms)", &s.ttft_ms);
    print_percentiles("TBT (ms)", &s.tbt_ms);
    print_percentiles("TPOT (ms)", &s.tpot_ms);
    print_percentiles("E2E (ms)", &s.e2e_ms);
    print_percentiles("E2E/token (ms)", &s.normalized_latency_ms);
    println!(
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
    );
    println!(
        "  fairness: Jain {:.3}, max window service difference {:.0}, max service difference {:.0} (service = prompt + 2 x output tokens, per weight)",
        s.jain_index, s.max_window_service_difference, s.max_service_difference
    );
    for t in &s.tenants {
        println!(
            "  tenant {:<10} w {:<4} {:>6} req  service {:>11.0}  GPU {:>8.1} s  TTFT p50 {:>8.1} p90 {:>8.1} ms  SLO {:.1}%",
            t.name,
            t.weight,
            t.requests,
            t.service,
            t.attributed_gpu_s,
            t.ttft_ms.p50,
            t.ttft_ms.p90,
            100.0 * t.slo_attainment
        );
    }
    for key in ["diagnostics", "bench"] {
        if let Some(value) = report.get(key).filter(|v| !v.is_null()) {
            println!("  {key}: {value}");
        }
    }
    if let Some(attribution) = report.get("attribution") {
        print_attribution(attribution);
    }
    if let Some(goodput) = report.get("goodput") {
        let field = |name: &str| goodput.get(name).and_then(Value::as_f64).unwrap_or(f64::NAN);
        println!(
            "  goodput (>= {:.0}% attainment): rate scale {:.3} = {:.2} req/s, attainment {:.1}%, {:.0} output tok/s, {:.0} total tok/s, TBT p99 {:.1} ms ({} simulations)",
            100.0 * GOODPUT_ATTAINMENT,
            field("rate_scale"),
            field("requests_per_s"),
            100.0 * field("attainment"),
            field("output_tokens_per_s"),
            field("total_tokens_per_s"),
            field("tbt_p99_ms"),
            field("simulations")
        );
    }
    if windows {
        if let Some(Value::Array(rows)) = report.get("windows") {
            println!(
                "  window service per tenant ({} s windows; * = backlogged all window):",
                config.service_window.as_secs_f64()
            );
            for (index, row) in rows.iter().enumerate() {
                println!("    {index:>4} {row}");
            }
        }
    }
}

/// `cotenant plan serve`: GPUs needed for a load at an SLO.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanServeArgs {
    #[command(flatten)]
    pub workload: ServeWorkloadArgs,
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    #[arg(long, default_value = "fcfs")]
    pub scheduler: String,
    /// Target request rate (requests/s); the trace's arrivals are scaled to it.
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
    /// GPU types to consider, comma-separated.
    #[arg(long, default_value = "L4,A100-80G,H100-SXM,H200")]
    pub gpus: String,
    /// Tensor-parallel degrees to consider, comma-separated.
    #[arg(long, default_value = "1,2,4,8")]
    pub tp_options: String,
    /// Required SLO attainment.
    #[arg(long, default_value_t = GOODPUT_ATTAINMENT)]
    pub target: f64,
    #[arg(long, default_value_t = 64)]
    pub max_replicas: u32,
    #[arg(long)]
    pub json: bool,
}

pub fn run_plan_serve(args: PlanServeArgs) -> Result<()> {
    let mut workload = load_workload(&args.workload)?;
    if let Some(rate) = args.rate {
        if rate <= 0.0 {
            bail!("--rate must be > 0");
        }
        workload = workload.with_rate_scale(rate / workload.request_rate_per_s());
    }
    let kind = parse_schedulers(&args.scheduler)?.first().copied().context("--scheduler: none given")?;
    let base = base_config(&args.deployment, &workload, kind, 256.0)?;
    let gpus = args.gpus.split(',').map(|g| resolve_gpu(g.trim())).collect::<Result<Vec<_>>>()?;
    let tps = args
        .tp_options
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|t| *t > 0)
                .with_context(|| format!("--tp-options: `{t}` is not a positive integer"))
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = plan_serve(&workload, &base, &gpus, &tps, args.target, args.max_replicas);
    if args.json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| json!({"gpu": r.gpu, "tensor_parallel": r.tensor_parallel, "replicas": r.replicas, "gpus": r.gpus, "attainment": r.attainment}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"workload": workload_json(&workload), "target": args.target, "plans": rows})
            )?
        );
        return Ok(());
    }
    println!(
        "{} on {} requests at {:.2} req/s, scheduler {}, SLO TTFT <= {} ms and TPOT <= {} ms for {:.0}% of requests:",
        base.model.model.name,
        workload.requests.len(),
        workload.request_rate_per_s(),
        kind.name(),
        base.slo.ttft.0 / 1000,
        base.slo.tbt.0 / 1000,
        100.0 * args.target
    );
    println!("| GPU | TP | replicas | GPUs | attainment |\n|---|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {:.1}% |",
            r.gpu,
            r.tensor_parallel,
            r.replicas,
            r.gpus,
            100.0 * r.attainment
        );
    }
    if rows.is_empty() {
        println!("(no GPU type and TP degree meets the target within {} replicas)", args.max_replicas);
    }
    Ok(())
}
