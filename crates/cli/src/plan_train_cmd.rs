//! `cotenant plan train`: the parallel layouts of a training run, best first, from the
//! training performance model in `cotenant_perf::train` (docs/training.md). Glue only.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use cotenant_perf::train::{
    achievable_fraction, axonn_search, evaluate, fl_hsdp_time, preset, search, Fabric, FlHsdp,
    FlHsdpBreakdown, Layout, Link, Plan, Recompute, SearchLimits, TrainShape, PRESET_NAMES,
};
use cotenant_perf::{GpuSpec, GIB};
use serde_json::{json, Value};

use crate::serve_cmd::resolve_gpu;

/// Largest GPU count `plan train` accepts.
const MAX_GPUS: u32 = 1_000_000;

#[derive(Debug, clap::Args)]
pub struct PlanTrainArgs {
    /// Model preset: gpt3-175b, gpt-1t, gpt-530b, gpt-145b, gpt-1.7b, axonn-80b, llama3-70b,
    /// llama3-405b; or give --layers, --hidden, --heads, --seq and --vocab instead.
    #[arg(long)]
    pub model: Option<String>,
    /// Transformer layers (with --hidden, --heads, --seq, --vocab: a GPT-style shape).
    #[arg(long, conflicts_with = "model")]
    pub layers: Option<u32>,
    /// Hidden size h.
    #[arg(long, conflicts_with = "model")]
    pub hidden: Option<u32>,
    /// Attention heads.
    #[arg(long, conflicts_with = "model")]
    pub heads: Option<u32>,
    /// Sequence length, tokens (overrides a preset's).
    #[arg(long)]
    pub seq: Option<u32>,
    /// Vocabulary size.
    #[arg(long, conflicts_with = "model")]
    pub vocab: Option<u32>,
    /// GPU type (see `docs/training.md` for the catalog).
    #[arg(long, default_value = "A100-80G")]
    pub gpu: String,
    /// GPUs in the job (every layout uses all of them: t x p x d = GPUs).
    #[arg(long)]
    pub gpus: u32,
    /// Global batch, sequences per iteration.
    #[arg(long)]
    pub global_batch: u32,
    /// Token budget of the run (e.g. 300e9, 300B, 1.5T): adds days to train.
    #[arg(long, value_name = "TOKENS")]
    pub tokens: Option<String>,
    /// Layouts shown.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fix part of the layout: t,p,d[,b[,v[,recompute[,zero]]]] (recompute: none,
    /// selective, full); the fields left out are searched.
    #[arg(long, value_name = "T,P,D,...")]
    pub layout: Option<String>,
    /// GPUs per NVLink domain (default: the GPU's, 8 for HGX/DGX; 4 for Perlmutter nodes).
    #[arg(long)]
    pub node_gpus: Option<u32>,
    /// Network bandwidth per GPU, GB/s one direction (default: the catalog's).
    #[arg(long)]
    pub nic_gb_per_s: Option<f64>,
    /// Largest micro-batch tried.
    #[arg(long, default_value_t = 8)]
    pub max_micro_batch: u32,
    /// Largest interleaving factor tried.
    #[arg(long, default_value_t = 4)]
    pub max_interleave: u32,
    /// Keep layouts that exceed the GPU's memory (flagged `over` in the memory column):
    /// what a layout would do if the memory savings the model does not know were made.
    #[arg(long)]
    pub ignore_memory: bool,
    /// Search AxoNN 4D grids (data x 3D tensor) instead of Megatron layouts.
    #[arg(long, conflicts_with = "layout")]
    pub axonn: bool,
    /// FL+HSDP: this many independent FSDP groups (each of GPUs/G, ZeRO 3), averaging
    /// every --local-steps steps over --outer-gb-per-s.
    #[arg(long, value_name = "G", conflicts_with_all = ["layout", "axonn"])]
    pub fl_groups: Option<u32>,
    /// FL+HSDP: local steps H between outer averagings.
    #[arg(long, default_value_t = 8, requires = "fl_groups")]
    pub local_steps: u32,
    /// FL+HSDP: inter-group bandwidth per GPU, GB/s.
    #[arg(long, default_value_t = 1.0, requires = "fl_groups")]
    pub outer_gb_per_s: f64,
    /// FL+HSDP: convergence penalty per doubling of H (reconstructed, docs/training.md).
    #[arg(long, default_value_t = cotenant_perf::train::hsdp::DEFAULT_PENALTY_PER_DOUBLING, requires = "fl_groups")]
    pub fl_penalty: f64,
}

/// The model the flags name.
fn model(args: &PlanTrainArgs) -> Result<TrainShape> {
    let mut shape = match &args.model {
        Some(name) => preset(name).with_context(|| {
            format!("--model: unknown preset `{name}` (known: {})", PRESET_NAMES.join(", "))
        })?,
        None => {
            let need = |value: Option<u32>, flag: &str| {
                value.filter(|v| *v > 0).with_context(|| {
                    format!("{flag}: required (a positive integer) without --model; or name a preset with --model")
                })
            };
            let layers = need(args.layers, "--layers")?;
            let hidden = need(args.hidden, "--hidden")?;
            let heads = need(args.heads, "--heads")?;
            let seq = need(args.seq, "--seq")?;
            let vocab = need(args.vocab, "--vocab")?;
            if hidden % heads != 0 {
                bail!("--heads {heads}: must divide --hidden {hidden}");
            }
            TrainShape::gpt("custom", layers, hidden, heads, seq, vocab)
        }
    };
    if let Some(seq) = args.seq {
        if seq == 0 {
            bail!("--seq: must be at least 1");
        }
        shape.seq = seq;
    }
    Ok(shape)
}

/// `300e9`, `300B`, `1.5T`, `20M`: a positive token count.
fn parse_tokens(text: &str) -> Result<f64> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&trimmed[..trimmed.len() - 1], 1e3),
        Some('M') => (&trimmed[..trimmed.len() - 1], 1e6),
        Some('B' | 'G') => (&trimmed[..trimmed.len() - 1], 1e9),
        Some('T') => (&trimmed[..trimmed.len() - 1], 1e12),
        _ => (trimmed, 1.0),
    };
    let value = number.parse::<f64>().ok().map(|v| v * scale).filter(|v| v.is_finite() && *v > 0.0);
    value
        .with_context(|| format!("--tokens: `{text}` is not a positive token count (e.g. 300e9, 300B, 1.5T)"))
}

/// The fixed part of a layout: t, p, d and optionally b, v, recompute, ZeRO stage.
#[derive(Debug, Default)]
struct LayoutFilter {
    fields: Vec<u32>,
    recompute: Option<Recompute>,
    zero: Option<u8>,
}

fn parse_layout(text: &str, gpus: u32) -> Result<LayoutFilter> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() < 3 || parts.len() > 7 {
        bail!("--layout: `{text}` must be t,p,d[,b[,v[,recompute[,zero]]]]");
    }
    let mut filter = LayoutFilter::default();
    for (index, part) in parts.iter().enumerate().take(5) {
        let value =
            part.parse::<u32>().ok().filter(|v| *v >= 1).with_context(|| {
                format!("--layout: field {} `{part}` is not a positive integer", index + 1)
            })?;
        filter.fields.push(value);
    }
    if let Some(part) = parts.get(5) {
        filter.recompute = Some(match *part {
            "none" => Recompute::None,
            "selective" => Recompute::Selective,
            "full" => Recompute::Full,
            other => bail!("--layout: recompute `{other}` is not none, selective or full"),
        });
    }
    if let Some(part) = parts.get(6) {
        filter.zero = Some(
            part.parse::<u8>()
                .ok()
                .filter(|z| *z <= 3)
                .with_context(|| format!("--layout: ZeRO stage `{part}` is not 0 to 3"))?,
        );
    }
    let product = filter.fields[..3].iter().map(|v| u64::from(*v)).product::<u64>();
    if product != u64::from(gpus) {
        bail!("--layout: t x p x d = {product} but --gpus is {gpus}");
    }
    Ok(filter)
}

impl LayoutFilter {
    fn admits(&self, layout: &Layout) -> bool {
        let values = [layout.tensor, layout.pipeline, layout.data, layout.micro_batch, layout.interleave];
        self.fields.iter().zip(values).all(|(want, got)| *want == got)
            && self.recompute.is_none_or(|r| r == layout.recompute)
            && self.zero.is_none_or(|z| z == layout.zero)
    }
}

fn fabric(args: &PlanTrainArgs, gpu: &GpuSpec) -> Result<Fabric> {
    let mut fabric = Fabric::of(gpu);
    if let Some(domain) = args.node_gpus {
        if domain == 0 {
            bail!("--node-gpus: must be at least 1");
        }
        fabric.domain_gpus = domain;
    }
    if let Some(nic) = args.nic_gb_per_s {
        if !(nic.is_finite() && nic > 0.0) {
            bail!("--nic-gb-per-s: `{nic}` must be a positive number");
        }
        fabric.nic.gb_per_s = nic;
    }
    Ok(fabric)
}

fn check_counts(args: &PlanTrainArgs) -> Result<()> {
    if args.gpus == 0 || args.gpus > MAX_GPUS {
        bail!("--gpus: {} is not in [1, {MAX_GPUS}]", args.gpus);
    }
    if args.global_batch == 0 {
        bail!("--global-batch: must be at least 1");
    }
    if args.top == 0 {
        bail!("--top: must be at least 1");
    }
    if args.max_micro_batch == 0 || args.max_interleave == 0 {
        bail!("--max-micro-batch and --max-interleave: must be at least 1");
    }
    Ok(())
}

/// The Megatron plans for the flags, best first (all of them, before --top).
pub fn plans(args: &PlanTrainArgs, shape: &TrainShape, gpu: &GpuSpec, fabric: &Fabric) -> Result<Vec<Plan>> {
    let limits = SearchLimits {
        max_micro_batch: args.max_micro_batch,
        max_interleave: args.max_interleave,
        memory_check: !args.ignore_memory,
    };
    let Some(text) = &args.layout else {
        return search(shape, args.global_batch, args.gpus, gpu, fabric, &limits)
            .map_err(|e| anyhow::anyhow!("{e}"));
    };
    let filter = parse_layout(text, args.gpus)?;
    let limits = SearchLimits {
        max_micro_batch: limits.max_micro_batch.max(filter.fields.get(3).copied().unwrap_or(0)),
        max_interleave: limits.max_interleave.max(filter.fields.get(4).copied().unwrap_or(0)),
        ..limits
    };
    let all = search(shape, args.global_batch, args.gpus, gpu, fabric, &limits)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let kept: Vec<Plan> = all.into_iter().filter(|plan| filter.admits(&plan.layout)).collect();
    if kept.is_empty() {
        // Say why the fixed layout fails: evaluate its most complete form.
        let f = &filter.fields;
        let layout = Layout {
            tensor: f[0],
            pipeline: f[1],
            data: f[2],
            micro_batch: f.get(3).copied().unwrap_or(1),
            interleave: f.get(4).copied().unwrap_or(1),
            recompute: filter.recompute.unwrap_or(Recompute::Full),
            zero: filter.zero.unwrap_or(0),
        };
        let plan = evaluate(shape, args.global_batch, &layout, gpu, fabric)
            .map_err(|e| anyhow::anyhow!("--layout: {e}"))?;
        bail!(
            "--layout {text}: no variant fits; {layout:?} needs {:.1} GiB per GPU, the {} offers {:.1} GiB usable",
            plan.memory.total / GIB,
            gpu.name,
            gpu.memory_bytes() * cotenant_perf::train::megatron::USABLE_MEMORY_FRACTION / GIB
        );
    }
    Ok(kept)
}

pub fn run(args: PlanTrainArgs) -> Result<()> {
    check_counts(&args)?;
    let shape = model(&args)?;
    let gpu = resolve_gpu(&args.gpu)?;
    let fabric = fabric(&args, &gpu)?;
    let tokens = args.tokens.as_deref().map(parse_tokens).transpose()?;
    if args.axonn {
        return run_axonn(&args, &shape, &gpu, &fabric, tokens);
    }
    if let Some(groups) = args.fl_groups {
        return run_fl_hsdp(&args, &shape, &gpu, &fabric, groups, tokens);
    }
    let plans = plans(&args, &shape, &gpu, &fabric)?;
    let shown = &plans[..plans.len().min(args.top)];
    if args.json {
        let rows: Vec<Value> =
            shown.iter().map(|plan| plan_json(plan, &shape, &gpu, args.global_batch, tokens)).collect();
        let out = json!({
            "model": model_json(&shape),
            "gpu": gpu.name,
            "gpus": args.gpus,
            "global_batch": args.global_batch,
            "achievable_fraction": achievable_fraction(gpu.generation),
            "feasible_layouts": plans.len(),
            "plans": rows,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_header(&shape, &gpu, &fabric, &args, plans.len());
    println!(
        "{:>4} {:>3} {:>4} {:>5} {:>3} {:>2} {:>9} {:>4} {:>9} {:>11} {:>6} {:>5} {:>13} {:>7} {:>10}{}",
        "rank",
        "t",
        "p",
        "d",
        "b",
        "v",
        "recompute",
        "zero",
        "iter_s",
        "TFLOP/s/GPU",
        "%peak",
        "MFU%",
        "mem_GiB",
        "bubble",
        "Mtok/day",
        if tokens.is_some() { "       days" } else { "" }
    );
    for (rank, plan) in shown.iter().enumerate() {
        let l = plan.layout;
        let per_day = plan.tokens_per_day(&shape, args.global_batch);
        let days = tokens.map(|t| format!(" {:>10.1}", t / per_day)).unwrap_or_default();
        println!(
            "{:>4} {:>3} {:>4} {:>5} {:>3} {:>2} {:>9} {:>4} {:>9.3} {:>11.1} {:>6.1} {:>5.1} {:>8.1}{} {:>7.3} {:>10.0}{days}",
            rank + 1,
            l.tensor,
            l.pipeline,
            l.data,
            l.micro_batch,
            l.interleave,
            l.recompute.name(),
            l.zero,
            plan.time.total_s,
            plan.tflops_per_gpu(),
            100.0 * plan.tflops_per_gpu() / gpu.dense_tflops,
            100.0 * plan.mfu(&gpu),
            plan.memory.total / GIB,
            over(plan, &gpu),
            plan.time.bubble_fraction,
            per_day / 1e6,
        );
    }
    Ok(())
}

/// ` over` after the memory figure of a plan that exceeds the usable memory (only with
/// --ignore-memory), five blanks otherwise.
fn over(plan: &Plan, gpu: &GpuSpec) -> &'static str {
    if plan.memory.total > gpu.memory_bytes() * cotenant_perf::train::megatron::USABLE_MEMORY_FRACTION {
        " over"
    } else {
        "     "
    }
}

fn print_header(shape: &TrainShape, gpu: &GpuSpec, fabric: &Fabric, args: &PlanTrainArgs, feasible: usize) {
    println!(
        "model {}: {:.1}B params, {} layers, h {}, {} heads, s {}, V {}",
        shape.name,
        shape.params() / 1e9,
        shape.layers,
        shape.hidden,
        shape.heads,
        shape.seq,
        shape.vocab
    );
    println!(
        "{} x {} ({} TFLOP/s dense 16-bit, {:.0} GiB; NVLink {} GB/s in {}-GPU domains, NIC {} GB/s per GPU); \
         global batch {} sequences ({:.2}M tokens)",
        gpu.name,
        args.gpus,
        gpu.dense_tflops,
        gpu.memory_gib,
        fabric.nvlink.gb_per_s,
        fabric.domain_gpus,
        fabric.nic.gb_per_s,
        args.global_batch,
        f64::from(args.global_batch) * f64::from(shape.seq) / 1e6
    );
    println!(
        "compute at {:.2} of peak ({:?}); TFLOP/s counts recomputed FLOPs (Megatron), MFU does not; {feasible} feasible layouts",
        achievable_fraction(gpu.generation),
        gpu.generation
    );
}

fn model_json(shape: &TrainShape) -> Value {
    json!({
        "name": shape.name,
        "params": shape.params(),
        "layers": shape.layers,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "ffn_hidden": shape.ffn_hidden,
        "seq": shape.seq,
        "vocab": shape.vocab,
    })
}

fn plan_json(
    plan: &Plan,
    shape: &TrainShape,
    gpu: &GpuSpec,
    global_batch: u32,
    tokens: Option<f64>,
) -> Value {
    let l = plan.layout;
    let t = plan.time;
    let per_day = plan.tokens_per_day(shape, global_batch);
    json!({
        "tensor": l.tensor,
        "pipeline": l.pipeline,
        "data": l.data,
        "micro_batch": l.micro_batch,
        "interleave": l.interleave,
        "recompute": l.recompute.name(),
        "zero": l.zero,
        "iteration_s": t.total_s,
        "tflops_per_gpu": plan.tflops_per_gpu(),
        "percent_of_peak": 100.0 * plan.tflops_per_gpu() / gpu.dense_tflops,
        "mfu": plan.mfu(gpu),
        "memory_gib": plan.memory.total / GIB,
        "fits": plan.memory.total <= gpu.memory_bytes() * cotenant_perf::train::megatron::USABLE_MEMORY_FRACTION,
        "memory": {
            "weights_gib": plan.memory.weights / GIB,
            "gradients_gib": plan.memory.gradients / GIB,
            "optimizer_gib": plan.memory.optimizer / GIB,
            "activations_gib": plan.memory.activations / GIB,
        },
        "breakdown": {
            "micro_batches": t.micro_batches,
            "bubble_fraction": t.bubble_fraction,
            "steady_s": t.steady_s,
            "bubble_s": t.bubble_s,
            "compute_per_micro_batch_s": t.compute_per_micro_batch_s,
            "elementwise_per_micro_batch_s": t.elementwise_per_micro_batch_s,
            "tensor_comm_per_micro_batch_s": t.tensor_comm_per_micro_batch_s,
            "pipeline_comm_per_micro_batch_s": t.pipeline_comm_per_micro_batch_s,
            "data_comm_s": t.data_comm_s,
            "optimizer_s": t.optimizer_s,
        },
        "tokens_per_day": per_day,
        "days": tokens.map(|t| t / per_day),
    })
}

fn run_axonn(
    args: &PlanTrainArgs,
    shape: &TrainShape,
    gpu: &GpuSpec,
    fabric: &Fabric,
    tokens: Option<f64>,
) -> Result<()> {
    let grids = axonn_search(shape, args.global_batch, args.gpus, gpu, fabric);
    if grids.is_empty() {
        bail!(
            "no AxoNN 4D grid of {} GPUs fits the model in {} memory with global batch {} (d must divide the batch)",
            args.gpus,
            gpu.name,
            args.global_batch
        );
    }
    let shown = &grids[..grids.len().min(args.top)];
    let n = f64::from(args.gpus);
    let batch_tokens = f64::from(args.global_batch) * f64::from(shape.seq);
    if args.json {
        let rows: Vec<Value> = shown
            .iter()
            .map(|(grid, time)| {
                let per_day = batch_tokens / time.total_s * 86_400.0;
                json!({
                    "x": grid.x, "y": grid.y, "z": grid.z, "data": grid.data,
                    "iteration_s": time.total_s,
                    "tflops_per_gpu": time.hardware_flops / time.total_s / n / 1e12,
                    "mfu": time.model_flops / time.total_s / n / (gpu.dense_tflops * 1e12),
                    "comm_s": time.comm_s,
                    "exposed_comm_s": time.exposed_comm_s,
                    "memory_gib": time.memory_bytes / GIB,
                    "tokens_per_day": per_day,
                    "days": tokens.map(|t| t / per_day),
                })
            })
            .collect();
        let out = json!({"model": model_json(shape), "gpu": gpu.name, "gpus": args.gpus,
            "global_batch": args.global_batch, "feasible_grids": grids.len(), "axonn": rows});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_header(shape, gpu, fabric, args, grids.len());
    println!(
        "{:>4} {:>4} {:>4} {:>4} {:>5} {:>9} {:>11} {:>6} {:>5} {:>8} {:>9} {:>10}",
        "rank",
        "x",
        "y",
        "z",
        "d",
        "iter_s",
        "TFLOP/s/GPU",
        "%peak",
        "MFU%",
        "mem_GiB",
        "exposed_s",
        "Mtok/day"
    );
    for (rank, (grid, time)) in shown.iter().enumerate() {
        let tflops = time.hardware_flops / time.total_s / n / 1e12;
        println!(
            "{:>4} {:>4} {:>4} {:>4} {:>5} {:>9.3} {:>11.1} {:>6.1} {:>5.1} {:>8.1} {:>9.3} {:>10.0}",
            rank + 1,
            grid.x,
            grid.y,
            grid.z,
            grid.data,
            time.total_s,
            tflops,
            100.0 * tflops / gpu.dense_tflops,
            100.0 * time.model_flops / time.total_s / n / (gpu.dense_tflops * 1e12),
            time.memory_bytes / GIB,
            time.exposed_comm_s,
            batch_tokens / time.total_s * 86_400.0 / 1e6
        );
    }
    Ok(())
}

fn run_fl_hsdp(
    args: &PlanTrainArgs,
    shape: &TrainShape,
    gpu: &GpuSpec,
    fabric: &Fabric,
    groups: u32,
    tokens: Option<f64>,
) -> Result<()> {
    if groups == 0 || !args.gpus.is_multiple_of(groups) {
        bail!("--fl-groups {groups}: must divide --gpus {}", args.gpus);
    }
    if args.local_steps == 0 {
        bail!("--local-steps: must be at least 1");
    }
    if !(args.outer_gb_per_s.is_finite() && args.outer_gb_per_s > 0.0) {
        bail!("--outer-gb-per-s: must be a positive number");
    }
    if !(args.fl_penalty.is_finite() && args.fl_penalty >= 0.0) {
        bail!("--fl-penalty: must be a non-negative number");
    }
    let group_gpus = args.gpus / groups;
    if !args.global_batch.is_multiple_of(args.gpus) {
        bail!(
            "--global-batch {}: FL+HSDP gives each of the {} GPUs whole sequences; use a multiple of --gpus",
            args.global_batch,
            args.gpus
        );
    }
    let outer = FlHsdp {
        groups,
        local_steps: args.local_steps,
        outer: Link {
            gb_per_s: args.outer_gb_per_s,
            latency_s: cotenant_perf::train::links::NIC_STEP_LATENCY_S,
        },
        penalty: args.fl_penalty,
    };
    let per_gpu = args.global_batch / args.gpus;
    let mut best = None;
    for micro_batch in (1..=per_gpu.min(args.max_micro_batch)).filter(|b| per_gpu.is_multiple_of(*b)) {
        let zero = if group_gpus > 1 { 3 } else { 0 };
        let inner = Layout {
            tensor: 1,
            pipeline: 1,
            data: group_gpus,
            micro_batch,
            interleave: 1,
            recompute: Recompute::Full,
            zero,
        };
        let result = fl_hsdp_time(shape, args.global_batch, &inner, gpu, fabric, &outer)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let memory = cotenant_perf::train::memory_per_gpu(shape, args.global_batch / groups, &inner)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if memory.total > gpu.memory_bytes() * cotenant_perf::train::megatron::USABLE_MEMORY_FRACTION {
            continue;
        }
        let best_step_s = best.as_ref().map_or(f64::INFINITY, |(r, _): &(FlHsdpBreakdown, f64)| r.per_step_s);
        if result.per_step_s < best_step_s {
            best = Some((result, memory.total));
        }
    }
    let Some((result, memory)) = best else {
        bail!("FL+HSDP: the model does not fit one FSDP group of {group_gpus} {} GPUs (ZeRO 3, full recomputation)", gpu.name);
    };
    let batch_tokens = f64::from(args.global_batch) * f64::from(shape.seq);
    let per_day = batch_tokens / result.effective_step_s * 86_400.0;
    let out = json!({
        "model": model_json(shape),
        "gpu": gpu.name,
        "gpus": args.gpus,
        "groups": groups,
        "local_steps": args.local_steps,
        "inner_step_s": result.inner.total_s,
        "outer_step_s": result.outer_s,
        "outer_bytes_per_gpu": result.outer_bytes_per_gpu,
        "per_step_s": result.per_step_s,
        "convergence_factor": result.convergence_factor,
        "effective_step_s": result.effective_step_s,
        "memory_gib": memory / GIB,
        "tokens_per_day": per_day,
        "days": tokens.map(|t| t / per_day),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_header(shape, gpu, fabric, args, 1);
    println!(
        "FL+HSDP: {groups} groups x {group_gpus} GPUs (FSDP), H = {} local steps, outer link {} GB/s per GPU",
        args.local_steps, args.outer_gb_per_s
    );
    println!("  inner step        {:>10.3} s", result.inner.total_s);
    println!(
        "  outer averaging   {:>10.3} s  ({:.2} GB sent per GPU), {:.3} s per step amortized",
        result.outer_s,
        result.outer_bytes_per_gpu / 1e9,
        result.outer_s / f64::from(args.local_steps)
    );
    println!("  per step          {:>10.3} s", result.per_step_s);
    println!(
        "  convergence       {:>10.3} x  (reconstructed penalty {} per doubling of H)",
        result.convergence_factor, args.fl_penalty
    );
    println!("  effective step    {:>10.3} s", result.effective_step_s);
    println!("  memory per GPU    {:>10.1} GiB", memory / GIB);
    match tokens {
        Some(t) => {
            println!("  {:.0}M tokens/day (effective), {:.1} days to the budget", per_day / 1e6, t / per_day)
        }
        None => println!("  {:.0}M tokens/day (effective)", per_day / 1e6),
    }
    Ok(())
}

/// `cotenant bench --plan-train`: wall time of 10,000-GPU `plan train` searches (the
/// search alone, one thread), median and max of `repeats` runs each: llama3-405b on H100
/// with global batch 2000, and gpt-1t on A100 with global batch 20000 (160 heads and a
/// batch with many divisors: the most layouts of the presets).
pub fn bench(repeats: u32) -> Result<()> {
    for (name, gpu, batch) in [("llama3-405b", "H100", 2000), ("gpt-1t", "A100", 20_000)] {
        let shape = preset(name).context("preset")?;
        let gpu = resolve_gpu(gpu)?;
        let fabric = Fabric::of(&gpu);
        let limits = SearchLimits::default();
        let mut times = Vec::new();
        let mut count = 0;
        for _ in 0..repeats.max(1) {
            let started = Instant::now();
            let plans =
                search(&shape, batch, 10_000, &gpu, &fabric, &limits).map_err(|e| anyhow::anyhow!("{e}"))?;
            times.push(started.elapsed().as_secs_f64());
            count = plans.len();
        }
        times.sort_by(f64::total_cmp);
        println!(
            "plan train search: {name}, 10,000 x {}, global batch {batch}: {count} feasible layouts; \
             median {:.1} ms, max {:.1} ms over {} runs (one thread)",
            gpu.name,
            times[times.len() / 2] * 1e3,
            times[times.len() - 1] * 1e3,
            times.len()
        );
    }
    Ok(())
}
