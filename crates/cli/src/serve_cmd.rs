//! `cotenant serve-sim` and `cotenant plan serve`: flags in, serving simulations out.
//! Glue only: the simulator, schedulers and metrics live in `cotenant-serve`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cotenant_core::limits::{
    MAX_OUTPUT_TOKENS, MAX_RATE_SCALE, MAX_REQUEST_SPAN, MAX_SERVE_REPLICAS, MAX_SERVE_REQUESTS,
    MAX_SHARE_WINDOWS,
};
use cotenant_core::Span;
use cotenant_perf::{find_gpu, GpuSpec, ModelShape, Roofline, RooflineParams, GPU_CATALOG};
use cotenant_report::serve_json::{
    attribution_json, bench_json, diagnostics_json, goodput_json, kv_replicas_json, kv_windows_json,
    plan_json, serve_runs_json, summary_json, windows_json, BenchFigures, GoodputFigures,
};
use cotenant_report::serve_report::serve_report_html;
use cotenant_report::serve_saved::{read_saved_results, saved_results_json, saved_run_json};
use cotenant_report::serve_table::{plan_table_text, serve_run_text, ServeRunText};
use cotenant_serve::attribution::AttributionEval;
use cotenant_serve::closed_loop::offered;
use cotenant_serve::goodput::GoodputCriterion;
use cotenant_serve::plan::{goodput_search_with, plan_serve, with_windows_for, GOODPUT_ATTAINMENT};
use cotenant_serve::scheduler::{BatchLimits, DriftConfig};
use cotenant_serve::search::tensor_parallel_fits;
use cotenant_serve::sim::disagg::{disagg_search, DisaggConfig};
use cotenant_serve::synthetic::{expected_requests_bound, generate, SyntheticTenant};
use cotenant_serve::{
    simulate, summarize, RouterKind, SchedulerConfig, SchedulerKind, ServeConfig, Slo, Summary, Workload,
};
use cotenant_trace::request_files::{align_origins, read_request_file, RequestFormat, RequestSpec};
use cotenant_trace::requests::{read_azure_csv, read_mooncake_jsonl, RequestTrace};
use cotenant_trace::{bundled_data_dir, traces_dir, BUNDLED_AZURE_CODE, BUNDLED_AZURE_CONV};
use serde_json::Value;

use flag::{float_in, integer_in, Bound::Closed, Bound::Open};

/// Range-checked flag values. clap runs these parsers while it parses the command
/// line, so a bad value is an error naming the flag, the value and the allowed
/// range ("invalid value 'nan' for '--rate-scale <RATE_SCALE>': must be a finite
/// number in (0, 1000000]"), and the command exits non-zero before doing anything.
mod flag {
    use std::fmt::Display;
    use std::str::FromStr;

    #[derive(Clone, Copy, Debug)]
    pub enum Bound {
        Open(f64),
        Closed(f64),
    }

    impl Bound {
        /// As a lower bound: whether `value` is above it, and how a range opens.
        fn below(self, value: f64) -> (bool, String) {
            match self {
                Bound::Open(low) => (value > low, format!("({low}")),
                Bound::Closed(low) => (value >= low, format!("[{low}")),
            }
        }

        /// As an upper bound: whether `value` is below it, and how a range closes.
        fn above(self, value: f64) -> (bool, String) {
            match self {
                Bound::Open(high) => (value < high, format!("{high})")),
                Bound::Closed(high) => (value <= high, format!("{high}]")),
            }
        }
    }

    /// A finite number between `low` and `high`.
    pub fn float_in(low: Bound, high: Bound) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
        move |text: &str| {
            let value = text.trim().parse::<f64>().unwrap_or(f64::NAN);
            let ((above_low, opening), (below_high, closing)) = (low.below(value), high.above(value));
            if value.is_finite() && above_low && below_high {
                Ok(value)
            } else {
                Err(format!("must be a finite number in {opening}, {closing}"))
            }
        }
    }

    /// An integer in `low..=high`.
    pub fn integer_in<T>(low: T, high: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
    where
        T: FromStr + PartialOrd + Display + Copy + Send + Sync,
    {
        move |text: &str| match text.trim().parse::<T>() {
            Ok(v) if v >= low && v <= high => Ok(v),
            _ => Err(format!("must be an integer in [{low}, {high}]")),
        }
    }
}

/// Longest arrival span in seconds (core::limits::MAX_REQUEST_SPAN).
const MAX_SPAN_S: f64 = MAX_REQUEST_SPAN.0 as f64 / 1e6;
/// Most tensor-parallel GPUs per replica.
const MAX_TENSOR_PARALLEL: u32 = 1024;
/// Most pipeline stages per replica (the model's layers bound it further).
const MAX_PIPELINE_PARALLEL: u32 = 1024;
/// Most closed-loop clients.
const MAX_CONCURRENCY: u32 = 1 << 24;
/// Most sequences one replica batches.
const MAX_BATCH_SEQS: u32 = 1 << 16;
/// Largest per-iteration token budget.
const MAX_TOKEN_BUDGET: u32 = 1 << 21;
/// Largest KV capacity override per replica, in tokens.
const MAX_KV_TOKENS: u64 = 1 << 40;
/// Longest SLO objective: one day, in milliseconds.
const MAX_SLO_MS: f64 = 86_400_000.0;
/// Shortest service-difference window: one millisecond.
const MIN_WINDOW_S: f64 = 0.001;
/// Most permutations per sampled Shapley estimate.
const MAX_SHAPLEY_PERMUTATIONS: u32 = 1 << 16;
/// Largest target request rate for `plan serve`, req/s (the arrival span bounds it further).
const MAX_PLAN_RATE: f64 = 1e12;
/// Arrivals a plan needs at the target rate to measure a sustained load, seconds: a
/// rate that squeezes the trace into less is beyond what replaying it can plan.
pub(crate) const MIN_PLAN_ARRIVAL_SPAN_S: f64 = 60.0;

/// Which requests to replay.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeWorkloadArgs {
    /// azure (code and conv as two tenants), azure-conv, azure-code, mooncake, or synthetic
    /// (needs --tenant). Azure is read from the bundled data/ copy; Mooncake from --traces-dir.
    #[arg(long, default_value = "azure")]
    pub trace: String,
    /// Your own requests instead of --trace, repeatable: [TENANT=][KIND:]PATH, KIND azure
    /// (CSV), mooncake (JSONL) or cotenant (JSONL; see docs/serving.md), detected from the
    /// content when left out; plain or .gz. Each file is a tenant (named TENANT, else the
    /// file name), or cotenant JSONL names tenants per row.
    #[arg(long = "requests", value_name = "[TENANT=][KIND:]PATH", conflicts_with_all = ["trace", "tenants"])]
    pub requests: Vec<String>,
    /// Where the full trace collection lives (default $COTENANT_TRACES, else ../shared/traces).
    #[arg(long, value_name = "DIR")]
    pub traces_dir: Option<PathBuf>,
    /// A synthetic tenant, repeatable: name=a,rate=2[,weight=1,prompt=512,output=128,
    /// sigma=0.5,burst=ON/OFFxMULT,tier=premium|standard|batch,calls=1,think=5].
    #[arg(long = "tenant", value_name = "SPEC")]
    pub tenants: Vec<String>,
    /// Seconds of synthetic arrivals, in (0, 31622400] (366 days).
    #[arg(long, default_value_t = 600.0, value_parser = float_in(Open(0.0), Closed(MAX_SPAN_S)))]
    pub duration_s: f64,
    /// Seed of the synthetic generator (and of sampled Shapley permutations).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep only the first N requests (N >= 1).
    #[arg(long, value_name = "N", value_parser = integer_in(1, MAX_SERVE_REQUESTS as usize))]
    pub limit: Option<usize>,
    /// Multiply the arrival rate (2 = arrivals twice as dense), in (0, 1e6]; the scaled
    /// arrivals must span at most 366 days.
    #[arg(long, default_value_t = 1.0, value_parser = float_in(Open(0.0), Closed(MAX_RATE_SCALE)))]
    pub rate_scale: f64,
    /// Tenant weight override, repeatable: NAME=WEIGHT (e.g. conv=2).
    #[arg(long = "weight", value_name = "NAME=WEIGHT")]
    pub weights: Vec<String>,
}

/// What serves the requests.
#[derive(Debug, Clone, clap::Args)]
pub struct DeploymentArgs {
    /// Catalog name (Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-14B, Qwen2.5-32B, Mixtral-8x7B,
    /// DeepSeek-V3) or an explicit shape layers=..,hidden=..,heads=..,kv_heads=..,head_dim=..,
    /// ffn=..,vocab=..[,experts=E,top_k=K,expert_ffn=..,shared_experts=S,dense_layers=..]
    /// [,q_lora_rank=..,kv_lora_rank=..,rope_dim=..] (see docs/serving.md)
    #[arg(long, default_value = "Llama-3.1-8B")]
    pub model: String,
    /// GPU type: A100-80G, A100-40G, H100-SXM, H200, L4, V100, P100, K80.
    #[arg(long, default_value = "H100-SXM")]
    pub gpu: String,
    /// Tensor-parallel degree per replica: must divide the model's attention heads and
    /// divide (or be a multiple of) its KV heads (1, 2, 4 or 8 for Llama-3.1-8B).
    #[arg(long, default_value_t = 1, value_parser = integer_in(1, MAX_TENSOR_PARALLEL))]
    pub tp: u32,
    /// Replicas of the model, each on --tp GPUs (1 to 4096).
    #[arg(long, default_value_t = 1, value_parser = integer_in(1, MAX_SERVE_REPLICAS))]
    pub replicas: u32,
    /// round-robin, least-outstanding, prefix-affinity.
    #[arg(long, default_value = "least-outstanding")]
    pub router: String,
    /// Override the KV capacity per replica (tokens, >= 1) instead of deriving it from memory.
    #[arg(long, value_name = "TOKENS", value_parser = integer_in(1, MAX_KV_TOKENS))]
    pub kv_capacity_tokens: Option<u64>,
    /// Fraction of GPU memory for weights, activations and KV cache, in (0, 1] (vLLM's
    /// gpu_memory_utilization).
    #[arg(long, default_value_t = 0.9, value_parser = float_in(Open(0.0), Closed(1.0)))]
    pub memory_utilization: f64,
    /// Most tokens (prefill + decode) one iteration of a replica processes, >= 1.
    #[arg(long, default_value_t = 8192, value_parser = integer_in(1, MAX_TOKEN_BUDGET))]
    pub token_budget: u32,
    /// Most sequences one replica batches at once, >= 1.
    #[arg(long, default_value_t = 256, value_parser = integer_in(1, MAX_BATCH_SEQS))]
    pub max_seqs: u32,
    /// Roofline calibration: fraction of peak compute reached, in (0, 1] (default: the fit
    /// in crates/perf/data/calibrated.toml for A100-80G and H100-SXM, else 0.70).
    #[arg(long, value_parser = float_in(Open(0.0), Closed(1.0)))]
    pub eta_compute: Option<f64>,
    /// Roofline calibration: fraction of peak memory bandwidth reached, in (0, 1] (default:
    /// the fitted value for a calibrated GPU, else 0.75).
    #[arg(long, value_parser = float_in(Open(0.0), Closed(1.0)))]
    pub eta_memory: Option<f64>,
    /// Roofline calibration: fixed cost per iteration, milliseconds, in [0, 10000] (default 1).
    #[arg(long, value_parser = float_in(Closed(0.0), Closed(10_000.0)))]
    pub c0_ms: Option<f64>,
    /// Iteration latency model: `roofline` (analytical, calibrated per GPU), or
    /// `profile:DIR` to interpolate measured per-operator and all-reduce times from Vidur-format
    /// profiles in DIR (compute/<gpu>_<model>_mlp.csv[.gz], network/<gpu>_*_all_reduce.csv[.gz]),
    /// as Vidur does; attention, the LM head and c0 stay analytical.
    #[arg(long, default_value = "roofline", value_name = "MODEL")]
    pub latency_model: String,
    /// TTFT objective (ms to the first token), in (0, 86400000].
    #[arg(long, default_value_t = 2000.0, value_parser = float_in(Open(0.0), Closed(MAX_SLO_MS)))]
    pub slo_ttft_ms: f64,
    /// TBT/TPOT objective (ms per output token), in (0, 86400000].
    #[arg(long, default_value_t = 100.0, value_parser = float_in(Open(0.0), Closed(MAX_SLO_MS)))]
    pub slo_tbt_ms: f64,
    /// Pipeline-parallel stages per replica, each holding about layers/PP layers on --tp
    /// GPUs, with up to PP micro-batches in flight (1 to the model's layers).
    #[arg(long, default_value_t = 1, value_parser = integer_in(1, MAX_PIPELINE_PARALLEL))]
    pub pp: u32,
    /// Disaggregated prefill and decode pools instead of --replicas:
    /// prefill=N,decode=M[,link=GBPS][,latency_us=L] (default link: NVLink when all the
    /// GPUs fit one 8-GPU node, else a 50 GB/s NIC; see docs/serving.md).
    #[arg(long, value_name = "SPEC")]
    pub disagg: Option<String>,
    /// Expert-parallel degree of a mixture-of-experts model, in [1, 1024]: the routed experts
    /// are split over N groups of each replica's --tp GPUs (attention stays tensor-parallel),
    /// adding an all-to-all dispatch and combine per MoE layer; N must divide the experts and
    /// --tp (each of --tp-options for plan serve).
    #[arg(long, default_value_t = 1, value_parser = integer_in(1, MAX_TENSOR_PARALLEL))]
    pub ep: u32,
    /// Weight format: auto (the model's own, bf16), bf16, or fp8 (linear layers in one byte;
    /// FP8 tensor peak on H100, H200 and L4; weight-only with bf16 compute on GPUs without FP8).
    #[arg(long = "weights", default_value = "auto", value_parser = ["auto", "bf16", "fp8"])]
    pub weight_format: String,
    /// KV-cache format: auto (the model's, bf16), bf16, or fp8 (one byte per cached value:
    /// twice the KV tokens, half the KV reads), as vLLM's --kv-cache-dtype.
    #[arg(long = "kv-cache", default_value = "auto", value_parser = ["auto", "bf16", "fp8"])]
    pub kv_cache_format: String,
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
    /// DriftSched: prior output tokens for every category before any correction, in [1, 1048576].
    #[arg(long, default_value_t = 256.0, value_parser = float_in(Closed(1.0), Closed(MAX_OUTPUT_TOKENS as f64)))]
    pub drift_prior_tokens: f64,
    /// Compare attribution with Shapley values on every Nth iteration (N >= 1).
    #[arg(long, value_name = "N", value_parser = integer_in(1, u64::MAX))]
    pub attribution_eval: Option<u64>,
    /// Give LLMVisor a miscalibrated model, as a fitted one would be: compute efficiency
    /// x (1 + F), memory efficiency x (1 - F), fixed cost x (1 + F), F in [-0.9, 0.9].
    /// Shapley stays exact.
    #[arg(long, default_value_t = 0.0, value_name = "F", value_parser = float_in(Closed(-0.9), Closed(0.9)))]
    pub attribution_misfit: f64,
    /// Permutations (each with its reverse) per sampled Shapley estimate, in [1, 65536].
    #[arg(long, default_value_t = 64, value_parser = integer_in(1, MAX_SHAPLEY_PERMUTATIONS))]
    pub shapley_permutations: u32,
    /// Service-difference window, seconds, in [0.001, 31622400]; the run's arrival span
    /// may hold at most 100,000 windows.
    #[arg(long, default_value_t = 10.0, value_parser = float_in(Closed(MIN_WINDOW_S), Closed(MAX_SPAN_S)))]
    pub window_s: f64,
    /// Print per-window service per tenant (service / weight).
    #[arg(long)]
    pub windows: bool,
    /// Also search the goodput: the largest rate scale with >= 90% SLO attainment, or,
    /// given SPEC, at which chosen latency percentiles meet their targets (DistServe):
    /// METRIC:pQ=MS,... with METRIC ttft, tbt, tpot or e2e, e.g. ttft:p90=2000,tbt:p99=100.
    #[arg(long, value_name = "SPEC", num_args = 0..=1)]
    pub goodput: Option<Option<String>>,
    /// Closed-loop clients, as vLLM's benchmark_serving.py --max-concurrency: at most N
    /// requests in flight, the next issued when one finishes (at its trace arrival if
    /// later); latencies are measured from issue (1 to 16777216).
    #[arg(long, value_name = "N", value_parser = integer_in(1, MAX_CONCURRENCY))]
    pub max_concurrency: Option<u32>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Time the run (wall clock, iterations/s, attribution cost) and print it.
    #[arg(long)]
    pub bench: bool,
    /// Also write the runs to PATH as a saved serving-results document (JSON, kind
    /// cotenant-serve-results: summaries, latency CDF sketches per tenant, service per
    /// window) that `cotenant report` reads.
    #[arg(long, value_name = "PATH")]
    pub save: Option<PathBuf>,
    /// Also write a self-contained HTML report of the runs to PATH: latency CDFs per
    /// tenant and scheduler, service difference over time, every metric.
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Speculative decoding: draft=MODEL,k=K,accept=A[,seed=S] (MODEL a catalog name, or an
    /// explicit shape's key=value fields after draft=) or ngram,k=K,accept=A[,seed=S]; k in
    /// [1, 32], A (each proposed token's acceptance probability) in [0, 1].
    #[arg(long, value_name = "SPEC", value_parser = crate::serve_request::spec_flag)]
    pub spec: Option<cotenant_serve::spec::SpecArgs>,
    /// Multi-LoRA serving: rank=R[,slots=S][,pcie=GBPS][,targets=attn|all]: each tenant its
    /// own adapter of rank R (1..1024), S GPU adapter slots (default 4) taken from the KV
    /// cache, adapters loaded over PCIe (default 25 GB/s) on Q,K,V,O (attn) or all layers.
    #[arg(long, value_name = "SPEC", value_parser = crate::serve_request::lora_flag)]
    pub lora: Option<cotenant_serve::lora::LoraArgs>,
    /// A tenant's adapter instead of its own, repeatable: TENANT=NAME:RANK (tenants may share
    /// NAME) or TENANT=none (the base model). Needs --lora.
    #[arg(long = "lora-adapter", value_name = "TENANT=NAME:RANK", value_parser = crate::serve_request::lora_adapter_flag)]
    pub lora_adapters: Vec<(String, Option<cotenant_serve::lora::Adapter>)>,
    /// KV offload: cpu_gib=G[,pcie=GBPS]: a preempted request's KV is swapped to G GiB of host
    /// memory per GPU over PCIe (default 25 GB/s) instead of recomputed.
    #[arg(long, value_name = "SPEC", value_parser = crate::serve_request::kv_offload_flag)]
    pub kv_offload: Option<cotenant_serve::offload::OffloadConfig>,
}

pub fn run_serve_sim(args: ServeSimArgs) -> Result<()> {
    let workload = load_workload(&args.workload)?;
    check_window_count(&workload, args.window_s)?;
    let kinds = parse_schedulers(&args.scheduler)?;
    note_fp8_fallback(&model_shape(&args.deployment)?, &resolve_gpu(&args.deployment.gpu)?);
    let mut reports = Vec::new();
    let mut saved_runs = Vec::new();
    let mut last_config = None;
    for kind in kinds {
        let config = serve_config(&args, &workload, kind)?;
        let started = Instant::now();
        let result = simulate(&workload, &config).with_context(|| format!("simulating {}", kind.name()))?;
        let wall_s = started.elapsed().as_secs_f64();
        let summary: Summary = summarize(&offered(&workload, &result), &result, config.slo);
        if args.save.is_some() || args.report.is_some() {
            saved_runs.push(saved_run_json(&workload, &config, &summary, &result));
        }
        let mut report = summary_json(&summary);
        report["diagnostics"] = diagnostics_json(result.diagnostics.first().map(Vec::as_slice));
        if let Some(features) = crate::serve_request::features_json(&config, &result.request_features) {
            report["request_features"] = features;
        }
        if let Some(errors) = &result.attribution {
            report["attribution"] = attribution_json(errors);
        }
        if args.windows {
            report["windows"] = windows_json(&result.windows);
            report["kv_windows"] = kv_windows_json(&result.usage.kv_windows);
            report["kv_replicas"] = kv_replicas_json(&result.usage.replicas);
        }
        let structure = structure_json(&config, &result);
        if let Some(structure) = &structure {
            report["structure"] = structure.clone();
        }
        if args.bench {
            report["bench"] = bench_json(&bench_figures(&workload, &config, &result, wall_s));
        }
        if let Some(spec) = &args.goodput {
            let criterion = goodput_criterion(spec.as_deref())?;
            let search_started = Instant::now();
            let found = goodput_search_with(&workload, &config, &criterion, 1.0)?;
            let search_wall_s = search_started.elapsed().as_secs_f64();
            let at_goodput = workload.with_rate_scale(found.rate_scale.max(f64::MIN_POSITIVE));
            let at_config = with_windows_for(&config, &at_goodput);
            let at_summary = summarize(&at_goodput, &simulate(&at_goodput, &at_config)?, config.slo);
            report["goodput"] = goodput_json(&GoodputFigures {
                search: &found,
                at_goodput: &at_summary,
                arrival_span_s: arrival_span_s(&at_goodput),
                search_wall_s,
                criterion: &criterion,
            });
        }
        if !args.json {
            print!(
                "{}",
                serve_run_text(&ServeRunText {
                    workload: &workload,
                    config: &config,
                    summary: &summary,
                    report: &report,
                    windows: args.windows,
                    sustained_span_s: MIN_PLAN_ARRIVAL_SPAN_S,
                })
            );
            if let Some(structure) = &structure {
                println!("  {}", structure_text(structure));
            }
            print!("{}", crate::serve_request::features_text(&report));
        }
        reports.push(report);
        last_config = Some(config);
    }
    if let Some(config) = &last_config {
        if args.save.is_some() || args.report.is_some() {
            let document = saved_results_json(&workload, config, &args.deployment.router, saved_runs);
            if let Some(path) = &args.save {
                write_json(path, &document).context("--save")?;
            }
            if let Some(path) = &args.report {
                write_report(path, &document).context("--report")?;
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serve_runs_json(&workload, reports))?);
    }
    Ok(())
}

/// The goodput criterion of `--goodput [SPEC]`: >= 90% attainment without a SPEC, else
/// the percentile targets it lists (errors name the flag and the part).
pub(crate) fn goodput_criterion(spec: Option<&str>) -> Result<GoodputCriterion> {
    match spec {
        None => Ok(GoodputCriterion::Attainment(GOODPUT_ATTAINMENT)),
        Some(text) => {
            GoodputCriterion::parse_percentiles(text).map_err(|e| anyhow::anyhow!("--goodput {text}: {e}"))
        }
    }
}

/// `value` as pretty JSON and a newline, to `path`.
fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The HTML report of a saved serving-results document, to `path`.
fn write_report(path: &Path, document: &Value) -> Result<()> {
    let results = read_saved_results("serve-sim", document)?;
    let subtitle = format!("cotenant {} serve-sim --report ({})", env!("CARGO_PKG_VERSION"), results.source);
    let (html, _figures) = serve_report_html(&results, "cotenant report", &subtitle)?;
    std::fs::write(path, html).with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn parse_schedulers(text: &str) -> Result<Vec<SchedulerKind>> {
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

pub(crate) fn resolve_gpu(name: &str) -> Result<GpuSpec> {
    let known = || GPU_CATALOG.iter().map(|g| g.name).collect::<Vec<_>>().join(", ");
    find_gpu(name).copied().with_context(|| format!("--gpu: unknown GPU `{name}` (known: {})", known()))
}

/// The roofline parameters for `gpu` at `tp`: the GPU's fitted ones
/// (`RooflineParams::for_gpu`), with `--eta-compute`, `--eta-memory` and `--c0-ms` over them.
pub(crate) fn roofline_params(args: &DeploymentArgs, gpu: &GpuSpec, tp: u32) -> RooflineParams {
    let mut params = RooflineParams::for_gpu(gpu.name, tp);
    params.compute_efficiency = args.eta_compute.unwrap_or(params.compute_efficiency);
    params.memory_efficiency = args.eta_memory.unwrap_or(params.memory_efficiency);
    params.fixed_s = args.c0_ms.map_or(params.fixed_s, |ms| ms / 1e3);
    params
}

/// The model of `--model` with `--weights`, `--kv-cache` and `--ep` applied (`--ep` is
/// checked by [`check_expert_parallel`] once the tensor-parallel degree is known); its name
/// says which of them differ from the defaults (`Mixtral-8x7B fp8-weights EP2`).
fn model_shape(args: &DeploymentArgs) -> Result<ModelShape> {
    let mut model = ModelShape::parse(&args.model).context("--model")?;
    let mut notes = Vec::new();
    if args.weight_format == "fp8" {
        model.precision.fp8_weights = true;
        notes.push("fp8-weights".to_string());
    }
    if args.kv_cache_format == "fp8" {
        model.precision.fp8_kv_cache = true;
        notes.push("fp8-kv".to_string());
    }
    if args.ep > 1 {
        // Checked against the model and each tensor-parallel degree by check_expert_parallel.
        model.moe.expert_parallel = args.ep;
        notes.push(format!("EP{}", args.ep));
    }
    if !notes.is_empty() {
        model.name = format!("{} {}", model.name, notes.join(" "));
    }
    Ok(model)
}

/// Says on stderr how FP8 weights are modelled on a GPU without FP8 tensor cores.
fn note_fp8_fallback(model: &ModelShape, gpu: &GpuSpec) {
    if model.precision.fp8_weights && !gpu.has_fp8() {
        eprintln!(
            "note: --weights fp8 on {}: no FP8 tensor cores; modelled as vLLM's weight-only FP8 (W8A16, the FP8 \
             Marlin kernel): weights read in one byte, matrix multiplies at the bf16 peak",
            gpu.name
        );
    }
}

/// `--ep` must split each replica's `tp` GPUs into whole groups.
fn check_expert_parallel(flag: &str, tp: u32, model: &ModelShape) -> Result<()> {
    model
        .moe
        .check_expert_parallel(model.moe.ep(), tp)
        .map_err(|message| anyhow::anyhow!("--ep {message} (at {flag} {tp})"))
}

fn roofline(args: &DeploymentArgs, gpu: GpuSpec) -> Result<Roofline> {
    let model = model_shape(args)?;
    let params = roofline_params(args, &gpu, args.tp);
    if !(params.compute_efficiency > 0.0 && params.memory_efficiency > 0.0 && params.fixed_s >= 0.0) {
        bail!("--eta-compute and --eta-memory must be > 0 and --c0-ms >= 0");
    }
    check_tensor_parallel("--tp", args.tp, &model)?;
    let roofline = Roofline::new(model, gpu, args.tp, params);
    match args.latency_model.as_str() {
        "roofline" => Ok(roofline),
        other => match other.strip_prefix("profile:") {
            Some(dir) => {
                let model = &roofline.model;
                if model.moe.is_moe() || model.mla.is_some() || model.precision.fp8_weights {
                    bail!(
                        "--latency-model profile:{dir}: the profiles time dense bf16 layers; {} (experts, latent \
                         attention or FP8 weights) needs --latency-model roofline",
                        model.name
                    );
                }
                let curves =
                    crate::calibrate_cmd::profile_curves(Path::new(dir), &gpu, &roofline.model, args.tp)
                        .context("--latency-model")?;
                Ok(roofline.with_profile(curves))
            }
            None => bail!("--latency-model: expected `roofline` or `profile:DIR`, got `{other}`"),
        },
    }
}

/// A model that leaves no room for one KV block is an error naming the flags that decide
/// it (the simulator would refuse it too, without them).
fn check_fits(args: &DeploymentArgs, config: &ServeConfig) -> Result<()> {
    // The capacity the simulator will use (with every other field of the config already
    // set); the memory plan only explains a refusal.
    if config.kv_capacity_tokens() >= u64::from(config.kv_block_tokens) {
        return Ok(());
    }
    let plan = config.memory_plan();
    let gib = |bytes: f64| bytes / cotenant_perf::GIB;
    let fp8 = if config.model.model.precision.fp8_weights { "" } else { ", --weights fp8" };
    bail!(
        "--model {} does not fit --tp {} x --pp {} x --gpu {}: per GPU, {:.2} GiB usable (--memory-utilization {}) minus \
         {:.2} GiB of weights and {:.2} GiB of activations leaves {:.2} GiB for KV cache, less than one \
         {}-token block; try a larger --tp or --pp, a GPU with more memory{fp8}, or a smaller --token-budget",
        args.model,
        config.model.tensor_parallel,
        config.pipeline_parallel,
        config.model.gpu.name,
        gib(plan.usable_bytes),
        config.memory_utilization,
        gib(plan.weight_bytes),
        gib(plan.activation_bytes),
        gib(plan.kv_bytes),
        config.kv_block_tokens
    )
}

pub(crate) fn check_tensor_parallel(flag: &str, tp: u32, model: &ModelShape) -> Result<()> {
    if tensor_parallel_fits(tp, model) {
        return Ok(());
    }
    let valid: Vec<String> =
        (1..=model.query_heads).filter(|&t| tensor_parallel_fits(t, model)).map(|t| t.to_string()).collect();
    bail!(
        "{flag} {tp}: {} has {} attention heads and {} KV heads; the tensor-parallel degree must divide the \
         attention heads and divide (or be a multiple of) the KV heads: one of {}",
        model.name,
        model.query_heads,
        model.kv_heads,
        valid.join(", ")
    )
}

fn check_pipeline_parallel(flag: &str, pp: u32, model: &ModelShape) -> Result<()> {
    if pp >= 1 && pp <= model.layers {
        return Ok(());
    }
    bail!(
        "{flag} {pp}: {} has {} layers; the pipeline-parallel degree must be between 1 and that",
        model.name,
        model.layers
    )
}

/// Seconds between the first and the last arrival.
fn arrival_span_s(workload: &Workload) -> f64 {
    workload.arrival_span().as_secs_f64()
}

/// The service-difference windows of a run must fit core::limits::MAX_SHARE_WINDOWS.
fn check_window_count(workload: &Workload, window_s: f64) -> Result<()> {
    let span_s = arrival_span_s(workload);
    let windows = span_s / window_s;
    if windows > MAX_SHARE_WINDOWS as f64 {
        bail!(
            "--window-s {window_s}: {windows:.0} windows over the {span_s:.0} s of arrivals; at most \
             {MAX_SHARE_WINDOWS} are kept, so use --window-s {} or more",
            (span_s / MAX_SHARE_WINDOWS as f64 * 1000.0).ceil() / 1000.0
        );
    }
    Ok(())
}

/// A rate scale must keep the arrivals within core::limits::MAX_REQUEST_SPAN.
fn check_scaled_span(flag: &str, value: f64, workload: &Workload, scale: f64) -> Result<()> {
    let span_s = arrival_span_s(workload);
    let scaled_s = span_s / scale;
    if !(scaled_s.is_finite() && scaled_s <= MAX_SPAN_S) {
        bail!(
            "{flag} {value}: the {} requests would arrive over {scaled_s:.3e} s; at most {MAX_SPAN_S:.0} s \
             (366 days) are supported, so the rate scale must be at least {:.3e}",
            workload.requests.len(),
            span_s / MAX_SPAN_S
        );
    }
    Ok(())
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
        token_budget: deployment.token_budget,
        max_seqs: deployment.max_seqs,
        decode_first: false,
    };
    let drift = DriftConfig { default_prior_tokens: drift_prior_tokens, ..DriftConfig::default() };
    check_pipeline_parallel("--pp", deployment.pp, &model.model)?;
    let disagg = deployment
        .disagg
        .as_deref()
        .map(|spec| DisaggConfig::parse(spec).map_err(|e| anyhow::anyhow!("--disagg {spec}: {e}")))
        .transpose()?;
    Ok(ServeConfig {
        model,
        replicas: disagg.map_or(deployment.replicas, |d| d.prefill + d.decode),
        pipeline_parallel: deployment.pp,
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
        activation_reserve_bytes: None,
        kv_capacity_tokens: deployment.kv_capacity_tokens,
        slo,
        service_window: Span::from_secs(1),
        attribution_eval: None,
        max_concurrency: None,
        disagg,
        spec: None,
        lora: None,
        kv_offload: None,
    })
}

/// Pipeline stages, disaggregated pools and closed-loop clients of a run, when any is used.
fn structure_json(config: &ServeConfig, result: &cotenant_serve::ServeResult) -> Option<Value> {
    if config.pipeline_parallel == 1 && config.disagg.is_none() && config.max_concurrency.is_none() {
        return None;
    }
    let mut structure = serde_json::json!({"pipeline_parallel": config.pipeline_parallel});
    if config.pipeline_parallel > 1 {
        let link = cotenant_perf::transfer::Link::between_stages(
            &config.model.gpu,
            config.model.tensor_parallel,
            config.pipeline_parallel,
        );
        structure["stage_link"] =
            serde_json::json!({"gb_per_s": link.gb_per_s, "latency_us": link.latency_s * 1e6});
    }
    if let Some(disagg) = config.disagg {
        let link = disagg.link(config);
        let mean_ms = result.kv_transfer_us as f64 / 1e3 / result.kv_transfers.max(1) as f64;
        structure["disagg"] = serde_json::json!({"prefill": disagg.prefill, "decode": disagg.decode,
            "link_gb_per_s": link.gb_per_s, "latency_us": link.latency_s * 1e6,
            "kv_transfers": result.kv_transfers, "kv_transfer_ms_mean": mean_ms});
    }
    if let Some(clients) = config.max_concurrency {
        structure["max_concurrency"] = Value::from(clients);
    }
    Some(structure)
}

/// One line for the text output from [`structure_json`]'s value.
fn structure_text(structure: &Value) -> String {
    let mut parts = vec![format!("structure: PP {}", structure["pipeline_parallel"])];
    if let Some(link) = structure.get("stage_link") {
        parts[0] += &format!(" (send/recv {} GB/s, {} µs)", link["gb_per_s"], link["latency_us"]);
    }
    if let Some(d) = structure.get("disagg") {
        parts.push(format!(
            "pools {} prefill + {} decode, {} KV transfers of {:.2} ms mean over {} GB/s",
            d["prefill"],
            d["decode"],
            d["kv_transfers"],
            d["kv_transfer_ms_mean"].as_f64().unwrap_or(0.0),
            d["link_gb_per_s"]
        ));
    }
    if let Some(clients) = structure.get("max_concurrency") {
        parts.push(format!("closed loop, {clients} clients (latency from issue)"));
    }
    parts.join(" | ")
}

fn serve_config(args: &ServeSimArgs, workload: &Workload, kind: SchedulerKind) -> Result<ServeConfig> {
    let mut config = base_config(&args.deployment, workload, kind, args.drift_prior_tokens)?;
    config.max_concurrency = args.max_concurrency;
    check_expert_parallel("--tp", args.deployment.tp, &config.model.model)?;
    config.service_window = Span((args.window_s * 1e6).round() as u64);
    let flags = crate::serve_request::RequestFlags {
        spec: args.spec.as_ref(),
        lora: args.lora.as_ref(),
        lora_adapters: &args.lora_adapters,
        kv_offload: args.kv_offload,
    };
    let gpu = config.model.gpu;
    let params_for_tp = |tp| roofline_params(&args.deployment, &gpu, tp);
    crate::serve_request::apply(&mut config, flags, workload, &params_for_tp)?;
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
        every_nth_iteration: every,
        permutations: args.shapley_permutations,
        seed: args.workload.seed,
        fitted_params,
    });
    check_fits(&args.deployment, &config)?;
    Ok(config)
}

/// Reads the requested trace(s) or generates synthetic tenants, then applies
/// --limit, --rate-scale and --weight.
pub fn load_workload(args: &ServeWorkloadArgs) -> Result<Workload> {
    let mut workload = match args.trace.as_str() {
        _ if !args.requests.is_empty() => requests_workload(&args.requests)?,
        "azure" => {
            let (mut code, mut conv) = (azure("code")?, azure("conv")?);
            // One clock for both services: their offset is part of the trace.
            align_origins(&mut [&mut code, &mut conv])?;
            named(Workload::from_traces(&[("code", &code), ("conv", &conv)]), "Azure LLM 2023 code + conv")
        }
        "azure-code" => named(Workload::from_traces(&[("code", &azure("code")?)]), "Azure LLM 2023 code"),
        "azure-conv" => named(Workload::from_traces(&[("conv", &azure("conv")?)]), "Azure LLM 2023 conv"),
        "mooncake" => {
            let path =
                traces_dir(args.traces_dir.as_deref()).join("mooncake-2024").join("conversation_trace.jsonl");
            named(
                Workload::from_traces(&[("mooncake", &noting_skips(read_mooncake_jsonl(&path)?))]),
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
            let expected = expected_requests_bound(&tenants, args.duration_s);
            if expected.is_nan() || expected > MAX_SERVE_REQUESTS as f64 {
                bail!(
                    "--tenant rates x --duration-s {} would generate about {expected:.3e} requests; at most \
                     {MAX_SERVE_REQUESTS} are supported (lower the rates or the duration)",
                    args.duration_s
                );
            }
            generate(&tenants, args.duration_s, args.seed)
        }
        other => {
            bail!("--trace: unknown trace `{other}` (azure, azure-code, azure-conv, mooncake, synthetic)")
        }
    };
    if let Some(limit) = args.limit {
        workload = workload.truncated(limit);
    }
    if args.rate_scale != 1.0 {
        check_scaled_span("--rate-scale", args.rate_scale, &workload, args.rate_scale)?;
        workload = workload.with_rate_scale(args.rate_scale);
    }
    for pair in &args.weights {
        let (name, weight) =
            pair.split_once('=').with_context(|| format!("--weight {pair}: expected NAME=WEIGHT"))?;
        let weight: f64 = weight
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w > 0.0)
            .with_context(|| format!("--weight {pair}: weight must be a finite number > 0"))?;
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

/// The workload of `--requests` files: each file read (its format named or detected,
/// which is said on stderr), tenants of the same name merged, and every file put on one
/// clock by [`align_origins`] (Azure files on wall-clock time, JSONL files on their own
/// time 0; when both kinds are given, each kind starts at 0).
fn requests_workload(specs: &[String]) -> Result<Workload> {
    let mut tenants: Vec<(String, RequestTrace, bool)> = Vec::new();
    let mut names = Vec::new();
    for text in specs {
        let spec = RequestSpec::parse(text).map_err(|e| anyhow::anyhow!("--requests {text}: {e}"))?;
        let file = read_request_file(&spec)?;
        let path = spec.path.display();
        if file.detected {
            eprintln!("note: {path}: detected format {}", file.format.name());
        }
        names.push(format!("{path} ({})", file.format.name()));
        let wall_clock = file.format == RequestFormat::Azure;
        for (name, trace) in file.tenants {
            let trace = noting_skips(trace);
            if tenants.iter().any(|(other, _, clock)| *other == name && *clock != wall_clock) {
                bail!(
                    "--requests {text}: tenant `{name}` is in both an Azure CSV (wall-clock time) and a JSONL file (its own time 0); give them different tenants"
                );
            }
            tenants.push((name, trace, wall_clock));
        }
    }
    for wall_clock in [true, false] {
        let mut group: Vec<&mut RequestTrace> =
            tenants.iter_mut().filter(|(_, _, clock)| *clock == wall_clock).map(|(_, t, _)| t).collect();
        align_origins(&mut group)?;
    }
    // Tenants of the same name (from several files) become one, in order of first appearance.
    let mut merged: Vec<(String, RequestTrace)> = Vec::new();
    for (name, trace, _) in tenants {
        match merged.iter_mut().find(|(other, _)| *other == name) {
            Some((_, into)) => {
                into.records.extend(trace.records);
                into.records.sort_by_key(|r| r.arrival_us);
                into.block_tokens = into.block_tokens.max(trace.block_tokens);
            }
            None => merged.push((name, trace)),
        }
    }
    let pairs: Vec<(&str, &RequestTrace)> = merged.iter().map(|(n, t)| (n.as_str(), t)).collect();
    Ok(named(Workload::from_traces(&pairs), &names.join(" + ")))
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
    Ok(noting_skips(read_azure_csv(&path)?))
}

/// Says on stderr how many rows a request reader skipped on purpose, and why.
fn noting_skips(trace: RequestTrace) -> RequestTrace {
    for skip in &trace.skipped {
        eprintln!("note: {}: skipped {} rows: {}", trace.source, skip.rows, skip.reason);
    }
    trace
}

/// Times the attribution step alone over batches shaped like the run's, and reports
/// the run's own wall time and iteration rate.
fn bench_figures(
    workload: &Workload,
    config: &ServeConfig,
    result: &cotenant_serve::ServeResult,
    wall_s: f64,
) -> BenchFigures {
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
    BenchFigures {
        requests: workload.requests.len(),
        wall_s,
        iterations: result.iterations,
        attribution_us: per_call_us,
        attribution_split_us: split_only_us,
    }
}

/// `cotenant plan serve`: GPUs needed for a load at an SLO.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanServeArgs {
    #[command(flatten)]
    pub workload: ServeWorkloadArgs,
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    /// Scheduler of every replica: fcfs (vllm), sarathi, vtc, fairserve, driftsched, lookahead.
    #[arg(long, default_value = "fcfs")]
    pub scheduler: String,
    /// Target request rate (requests/s, > 0); the trace's arrivals are scaled to it. The
    /// scaled trace must still span at least 60 s of arrivals (a sustained load).
    #[arg(long, value_name = "REQ_PER_S", value_parser = float_in(Open(0.0), Closed(MAX_PLAN_RATE)))]
    pub rate: Option<f64>,
    /// GPU types to consider, comma-separated.
    #[arg(long, default_value = "L4,A100-80G,H100-SXM,H200")]
    pub gpus: String,
    /// Tensor-parallel degrees to consider, comma-separated; each must fit the model (see --tp).
    #[arg(long, default_value = "1,2,4,8")]
    pub tp_options: String,
    /// Required SLO attainment, a fraction in (0, 1] (0.9: 90% of requests meet the SLO).
    #[arg(long, default_value_t = GOODPUT_ATTAINMENT, value_parser = float_in(Open(0.0), Closed(1.0)))]
    pub target: f64,
    /// Most replicas tried per GPU type and TP degree (1 to 4096).
    #[arg(long, default_value_t = 64, value_parser = integer_in(1, MAX_SERVE_REPLICAS))]
    pub max_replicas: u32,
    /// Pipeline-parallel degrees to consider (plans and --search), comma-separated (each 1 to the model's layers).
    #[arg(long, default_value = "1")]
    pub pp_options: String,
    /// Size disaggregated pools instead: for each GPU type and TP degree, the fewest
    /// replicas (within the replica limit) split into prefill and decode pools, every split
    /// tried, that meet the target; over the link a given disagg spec names, else the default.
    #[arg(long)]
    pub disagg_search: bool,
    /// Meet chosen latency percentiles instead of --target attainment: METRIC:pQ=MS,...
    /// (ttft, tbt, tpot, e2e), e.g. ttft:p90=2000,tbt:p99=100; with --search, the SLO each
    /// configuration's goodput is searched at.
    #[arg(long, value_name = "SPEC")]
    pub goodput: Option<String>,
    /// Configuration search (Vidur-Search) over every combination of GPU type (--gpus),
    /// TP, PP, replicas, token budget, batch size (their -options lists) and scheduler
    /// (--schedulers): each configuration's goodput (highest rate meeting the SLO given by
    /// --goodput SPEC, else by --target attainment), its cost per million tokens (from
    /// --prices), the Pareto front of cost against --pareto-latency and the cheapest one.
    #[arg(long)]
    pub search: bool,
    /// Replicas to try with --search, comma-separated.
    #[arg(long, default_value = "1,2", value_name = "LIST")]
    pub replicas_options: String,
    /// Token budgets (tokens per iteration) to try with --search, comma-separated.
    #[arg(long, default_value = "2048,8192", value_name = "LIST")]
    pub token_budget_options: String,
    /// Batch sizes (most sequences per iteration) to try with --search, comma-separated.
    #[arg(long, default_value = "256", value_name = "LIST")]
    pub max_seqs_options: String,
    /// Schedulers to try with --search, comma-separated (as --scheduler).
    #[arg(long, default_value = "fcfs,sarathi", value_name = "LIST")]
    pub schedulers: String,
    /// GPU prices for --search: a TOML file as crates/perf/data/gpu_prices.toml ([gpu."NAME"]
    /// usd_per_gpu_hour, source, date); default: that bundled table.
    #[arg(long, value_name = "PATH")]
    pub prices: Option<PathBuf>,
    /// With --search, the latency the Pareto front trades cost against, METRIC:pQ (ttft, tbt,
    /// tpot, e2e), measured at each configuration's goodput.
    #[arg(long, default_value = "e2e:p90", value_name = "METRIC:pQ")]
    pub pareto_latency: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run_plan_serve(args: PlanServeArgs) -> Result<()> {
    let mut workload = load_workload(&args.workload)?;
    if let Some(rate) = args.rate {
        let current = workload.request_rate_per_s();
        if current <= 0.0 {
            bail!("--rate {rate}: the workload's arrivals span no time, so its rate cannot be scaled");
        }
        let scaled_span_s = arrival_span_s(&workload) * current / rate;
        if scaled_span_s < MIN_PLAN_ARRIVAL_SPAN_S {
            bail!(
                "--rate {rate}: the workload's {} requests would all arrive within {scaled_span_s:.3e} s, a burst \
                 rather than a sustained rate; a plan needs at least {MIN_PLAN_ARRIVAL_SPAN_S:.0} s of arrivals, \
                 so this workload supports --rate up to {:.2} req/s (for more, a longer workload: e.g. \
                 --trace synthetic --tenant name=a,rate=R --duration-s 600)",
                workload.requests.len(),
                workload.requests.len() as f64 / MIN_PLAN_ARRIVAL_SPAN_S
            );
        }
        check_scaled_span("--rate", rate, &workload, rate / current)?;
        workload = workload.with_rate_scale(rate / current);
    }
    let kind = parse_schedulers(&args.scheduler)?.first().copied().context("--scheduler: none given")?;
    let base = base_config(&args.deployment, &workload, kind, 256.0)?;
    if args.search {
        return crate::serve_search_cmd::run_search(&args, &workload, &base);
    }
    let gpus = args.gpus.split(',').map(|g| resolve_gpu(g.trim())).collect::<Result<Vec<_>>>()?;
    for gpu in &gpus {
        note_fp8_fallback(&base.model.model, gpu);
    }
    let tps = args
        .tp_options
        .split(',')
        .map(|t| {
            let tp =
                t.trim().parse::<u32>().ok().filter(|t| (1..=MAX_TENSOR_PARALLEL).contains(t)).with_context(
                    || format!("--tp-options: `{t}` is not an integer in [1, {MAX_TENSOR_PARALLEL}]"),
                )?;
            check_tensor_parallel("--tp-options", tp, &base.model.model)?;
            check_expert_parallel("--tp-options", tp, &base.model.model)?;
            Ok(tp)
        })
        .collect::<Result<Vec<_>>>()?;
    let params = |gpu: &GpuSpec, tp: u32| roofline_params(&args.deployment, gpu, tp);
    let pps = args
        .pp_options
        .split(',')
        .map(|p| {
            let pp = p
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|p| (1..=MAX_PIPELINE_PARALLEL).contains(p))
                .with_context(|| {
                    format!("--pp-options: `{p}` is not an integer in [1, {MAX_PIPELINE_PARALLEL}]")
                })?;
            check_pipeline_parallel("--pp-options", pp, &base.model.model)?;
            Ok(pp)
        })
        .collect::<Result<Vec<_>>>()?;
    if base.disagg.is_some() && !args.disagg_search {
        bail!(
            "--disagg: plan serve sizes replicas of one kind; use --disagg-search to size prefill and decode pools (its link= and latency_us= are kept)"
        );
    }
    if args.disagg_search {
        return print_disagg_plan(&args, &workload, &base, &gpus, &tps, &params);
    }
    // One plan per pipeline-parallel degree (GPUs = replicas x TP x PP); with the default
    // PP 1 alone, the single plan as before.
    let criterion = match &args.goodput {
        Some(spec) => goodput_criterion(Some(spec))?,
        None => GoodputCriterion::Attainment(args.target),
    };
    let shown = args.goodput.is_some().then_some(&criterion);
    let mut plans = Vec::new();
    for &pp in &pps {
        let mut staged = base.clone();
        staged.pipeline_parallel = pp;
        let rows = plan_serve(&workload, &staged, &gpus, &tps, &params, &criterion, args.max_replicas);
        if args.json {
            let mut plan = plan_json(&workload, args.target, &rows);
            if args.goodput.is_some() {
                plan["criterion"] = criterion.describe().into();
            }
            plans.push(if pps == [1] {
                plan
            } else {
                serde_json::json!({"pipeline_parallel": pp, "plan": plan})
            });
        } else {
            if pps != [1] {
                println!("Pipeline-parallel degree {pp} (GPUs = replicas x TP x {pp}):");
            }
            print!("{}", plan_table_text(&workload, &staged, args.target, shown, &rows, args.max_replicas));
        }
    }
    if args.json {
        let document = if pps == [1] { plans.remove(0) } else { Value::Array(plans) };
        println!("{}", serde_json::to_string_pretty(&document)?);
    }
    Ok(())
}

/// `plan serve --disagg-search`: the cheapest prefill:decode split per GPU type and TP.
fn print_disagg_plan(
    args: &PlanServeArgs,
    workload: &Workload,
    base: &ServeConfig,
    gpus: &[GpuSpec],
    tps: &[u32],
    params: &dyn Fn(&GpuSpec, u32) -> RooflineParams,
) -> Result<()> {
    let link = base.disagg.map_or((None, None), |d| (d.link_gb_per_s, d.latency_s));
    let rows = disagg_search(workload, base, gpus, tps, params, link, args.target, args.max_replicas);
    if args.json {
        let plans: Vec<Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"gpu": r.gpu, "tensor_parallel": r.tensor_parallel,
                    "pipeline_parallel": r.pipeline_parallel, "prefill": r.prefill, "decode": r.decode,
                    "gpus": r.gpus, "attainment": r.attainment, "colocated_attainment": r.colocated_attainment})
            })
            .collect();
        let document = serde_json::json!({"target": args.target, "requests_per_s": workload.request_rate_per_s(), "plans": plans});
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(());
    }
    println!(
        "{} on {} requests at {:.2} req/s, disaggregated pools meeting {:.0}% SLO attainment (TTFT <= {} ms, TPOT <= {} ms):",
        base.model.model.name,
        workload.requests.len(),
        workload.request_rate_per_s(),
        100.0 * args.target,
        base.slo.ttft.0 / 1000,
        base.slo.tbt.0 / 1000
    );
    println!("| GPU | TP | PP | prefill | decode | GPUs | attainment | colocated, same replicas |\n|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1}% | {:.1}% |",
            r.gpu,
            r.tensor_parallel,
            r.pipeline_parallel,
            r.prefill,
            r.decode,
            r.gpus,
            100.0 * r.attainment,
            100.0 * r.colocated_attainment
        );
    }
    if rows.is_empty() {
        println!("(no split of up to {} replicas meets the target)", args.max_replicas);
    }
    Ok(())
}

/// One serve-sim run for `cotenant sweep serve`: `kind` on `workload` (already
/// loaded, seeded and scaled by the sweep) with the deployment and scheduler
/// flags of `args`, checked and configured exactly as `serve-sim` does.
pub fn sweep_run(args: &ServeSimArgs, workload: &Workload, kind: SchedulerKind) -> Result<Summary> {
    check_window_count(workload, args.window_s)?;
    let config = serve_config(args, workload, kind)?;
    let result = simulate(workload, &config).with_context(|| format!("simulating {}", kind.name()))?;
    Ok(summarize(&offered(workload, &result), &result, config.slo))
}
