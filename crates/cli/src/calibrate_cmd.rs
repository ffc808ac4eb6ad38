//! `cotenant calibrate`: the roofline against Vidur's measured kernel and NCCL times,
//! operator by operator, per layer and per iteration, before and after fitting the per-GPU
//! parameters; `--write-params` writes the fit as crates/perf/data/calibrated.toml.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cotenant_perf::calibration::{
    fit_collective, fit_collective_line, fit_elementwise, fit_linear, CollectiveFit, CollectivePoint,
    ElementwisePoint, ErrorStats, LinearPoint,
};
use cotenant_perf::profile::{
    parse_collective_profile, parse_compute_profile, CollectiveProfile, ComputeProfile, Curve, ProfileCurves,
    ProfileShape, LINEAR_OPERATORS, OPERATORS,
};
use cotenant_perf::roofline::{
    allreduce_s, elementwise_bytes_per_token, elementwise_op_s, linear_op_dims, linear_op_s,
};
use cotenant_perf::{find_gpu, GpuSpec, ModelShape, RooflineParams};

/// Arguments of `cotenant calibrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// The Vidur profiles (a folder with compute/ and network/; default
    /// vidur-profiles-2024 in $COTENANT_TRACES, else ../shared/traces).
    #[arg(long, value_name = "DIR")]
    pub profiles: Option<PathBuf>,
    /// Also write the fitted parameters as TOML (the embedded crates/perf/data/calibrated.toml).
    #[arg(long, value_name = "PATH")]
    pub write_params: Option<PathBuf>,
}

/// Which catalog GPU a profile file's prefix names (`a100` and `h100` are Vidur's
/// A100-80GB and H100-80GB SXM; other prefixes are looked up in the catalog).
pub fn profile_gpu(file_name: &str) -> Option<&'static GpuSpec> {
    match file_name.split('_').next()? {
        "a100" => find_gpu("A100-80G"),
        "h100" => find_gpu("H100-SXM"),
        other => find_gpu(other),
    }
}

/// The profile-driven latency curves for `model` on `gpu` at degree `tp` from the
/// Vidur-format profiles in `dir`; the error names what the profiles cover when they do
/// not cover this deployment.
pub fn profile_curves(dir: &Path, gpu: &GpuSpec, model: &ModelShape, tp: u32) -> Result<ProfileCurves> {
    let wanted = ProfileShape {
        query_heads: model.query_heads,
        kv_heads: model.kv_heads,
        hidden: model.hidden,
        ffn_hidden: model.ffn_hidden,
    };
    let mut covered = Vec::new();
    let mut found = None;
    for path in files(&dir.join("compute"))? {
        let name = file_name(&path);
        let Some(file_gpu) = profile_gpu(&name) else { continue };
        let text = cotenant_trace::text::read_text(&path)?;
        let profile = parse_compute_profile(&path.display().to_string(), &text)?;
        let shape = profile.shape;
        covered.push(format!(
            "{} (hidden {}, heads {}/{}, ffn {})",
            name, shape.hidden, shape.query_heads, shape.kv_heads, shape.ffn_hidden
        ));
        if file_gpu.name == gpu.name && shape == wanted && found.is_none() {
            found = Some(profile);
        }
    }
    let Some(compute) = found else {
        bail!(
            "{}: no compute profile for {} (hidden {}, heads {}/{}, ffn {}) on {}; the profiles cover: {}",
            dir.display(),
            model.name,
            model.hidden,
            model.query_heads,
            model.kv_heads,
            model.ffn_hidden,
            gpu.name,
            if covered.is_empty() { "nothing".to_string() } else { covered.join(", ") }
        );
    };
    if !compute.rows.iter().any(|r| r.tensor_parallel == tp) {
        // The compute profile's own error (naming the degrees it covers) comes first.
        return cotenant_perf::profile::curves_for(&compute, None, tp).map_err(anyhow::Error::msg);
    }
    let mut allreduce = None;
    if tp > 1 {
        let mut candidates: Vec<CollectiveProfile> = Vec::new();
        for path in files(&dir.join("network"))? {
            let name = file_name(&path);
            if profile_gpu(&name).map(|g| g.name) != Some(gpu.name) || !name.contains("all_reduce") {
                continue;
            }
            let text = cotenant_trace::text::read_text(&path)?;
            candidates.push(parse_collective_profile(&path.display().to_string(), &text)?);
        }
        // A single-node DGX profile first, then any other with rows for this degree.
        candidates.sort_by_key(|p| !p.file.contains("_dgx_"));
        allreduce = candidates
            .into_iter()
            .find(|p| p.rows.iter().any(|r| r.workers == tp && r.devices_per_node == tp));
        if allreduce.is_none() {
            bail!("{}: no all_reduce profile for {} with {tp} workers on one node", dir.display(), gpu.name);
        }
    }
    cotenant_perf::profile::curves_for(&compute, allreduce.as_ref(), tp).map_err(anyhow::Error::msg)
}

/// The model a compute profile measured, with its layer count (the profiles do not
/// carry it; from each model's config.json).
pub fn profile_model(file_name: &str, shape: ProfileShape) -> Result<ModelShape> {
    let layers = match (shape.hidden, shape.ffn_hidden) {
        (4096, 11008) | (4096, 14336) => 32,
        (8192, 22016) => 48,
        (8192, 28672) | (8192, 24576) => 80,
        _ => bail!("{file_name}: unknown model shape {shape:?} (no layer count)"),
    };
    let name = file_name.split_once('_').map_or(file_name, |(_, rest)| rest).trim_end_matches(".gz");
    let name = name.trim_end_matches(".csv").trim_end_matches("_mlp");
    Ok(ModelShape {
        name: name.to_string(),
        layers,
        hidden: shape.hidden,
        query_heads: shape.query_heads,
        kv_heads: shape.kv_heads,
        head_dim: shape.hidden / shape.query_heads,
        ffn_hidden: shape.ffn_hidden,
        vocab: 32_000,
        bytes_per_param: 2,
        ..ModelShape::default()
    })
}

/// The profiles of one folder, sorted by file name.
pub struct Profiles {
    pub compute: Vec<(&'static GpuSpec, ModelShape, ComputeProfile)>,
    pub network: Vec<(&'static GpuSpec, CollectiveProfile)>,
}

fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".csv") || p.to_string_lossy().ends_with(".csv.gz"))
        .collect();
    out.sort();
    Ok(out)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Reads every compute and network profile under `dir`.
pub fn load_profiles(dir: &Path) -> Result<Profiles> {
    let mut compute = Vec::new();
    for path in files(&dir.join("compute"))? {
        let name = file_name(&path);
        let gpu = profile_gpu(&name).with_context(|| format!("{}: unknown GPU prefix", path.display()))?;
        let text = cotenant_trace::text::read_text(&path)?;
        let profile = parse_compute_profile(&path.display().to_string(), &text)?;
        let model = profile_model(&name, profile.shape)?;
        compute.push((gpu, model, profile));
    }
    let mut network = Vec::new();
    for path in files(&dir.join("network"))? {
        let name = file_name(&path);
        let gpu = profile_gpu(&name).with_context(|| format!("{}: unknown GPU prefix", path.display()))?;
        let text = cotenant_trace::text::read_text(&path)?;
        network.push((gpu, parse_collective_profile(&path.display().to_string(), &text)?));
    }
    if compute.is_empty() {
        bail!("{}: no compute profiles (expected compute/<gpu>_<model>_mlp.csv[.gz])", dir.display());
    }
    Ok(Profiles { compute, network })
}

/// Bytes each GPU sends in one collective of `size` bytes over `workers` GPUs.
fn wire_bytes(collective: &str, workers: u32, size: f64) -> f64 {
    if collective == "all_reduce" {
        2.0 * (workers as f64 - 1.0) / workers as f64 * size
    } else {
        size
    }
}

/// The fit for one GPU.
pub struct GpuFit {
    pub params: RooflineParams,
    /// Single-node DGX all-reduce fits by degree.
    pub allreduce: BTreeMap<u32, CollectiveFit>,
    pub compute_files: Vec<String>,
    pub network_file: Option<String>,
}

fn is_dgx_allreduce(profile: &CollectiveProfile) -> bool {
    profile.collective == "all_reduce" && profile.file.contains("_dgx_")
}

/// The linear-operator points of one compute profile.
fn linear_points(model: &ModelShape, profile: &ComputeProfile) -> Vec<LinearPoint> {
    let mut out = Vec::with_capacity(profile.rows.len() * LINEAR_OPERATORS);
    for row in &profile.rows {
        for (i, (k, n)) in linear_op_dims(model, row.tensor_parallel).into_iter().enumerate() {
            out.push(LinearPoint {
                k,
                n,
                tokens: row.tokens as f64,
                bytes_per_param: 2.0,
                seconds: row.seconds[i],
            });
        }
    }
    out
}

/// (predicted, measured) for each point of one curve that shares its bin of `width`
/// tokens (ceil(T / width)) with others: the median of the others' times.
fn same_bin_predictions(points: &[LinearPoint], width: f64) -> Vec<(f64, f64)> {
    let mut bins: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for q in points {
        bins.entry((q.tokens / width).ceil() as u64).or_default().push(q.seconds);
    }
    let mut out = Vec::new();
    for q in points {
        let others: Vec<f64> = {
            let bin = &bins[&((q.tokens / width).ceil() as u64)];
            let mut rest = bin.clone();
            if let Some(at) = rest.iter().position(|s| *s == q.seconds) {
                rest.remove(at);
            }
            rest
        };
        if let Some(median) = median_of(others) {
            out.push((median, q.seconds));
        }
    }
    out
}

/// The median of `values` (the mean of the middle two for an even count); None when empty.
fn median_of(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

/// Fits one GPU's parameters to its profiles.
pub fn fit_gpu(profiles: &Profiles, gpu: &GpuSpec) -> GpuFit {
    let base = RooflineParams::default();
    let (mut linear, mut elementwise, mut compute_files) = (Vec::new(), Vec::new(), Vec::new());
    for (_, model, profile) in profiles.compute.iter().filter(|(g, _, _)| g.name == gpu.name) {
        compute_files.push(short(&profile.file));
        linear.extend(linear_points(model, profile));
        for row in &profile.rows {
            let tokens = row.tokens as f64;
            for (i, bytes) in elementwise_bytes_per_token(model, row.tensor_parallel).into_iter().enumerate()
            {
                elementwise.push(ElementwisePoint {
                    op: i,
                    bytes: bytes * tokens,
                    seconds: row.seconds[LINEAR_OPERATORS + i],
                });
            }
        }
    }
    let params = fit_linear(&linear, gpu, base);
    let params = fit_elementwise(&elementwise, gpu, params);
    let mut allreduce = BTreeMap::new();
    let mut network_file = None;
    for (_, profile) in profiles.network.iter().filter(|(g, p)| g.name == gpu.name && is_dgx_allreduce(p)) {
        network_file = Some(short(&profile.file));
        for (workers, points) in collective_groups(profile) {
            if workers.0 == workers.1 {
                allreduce.insert(workers.0, fit_collective(&points));
            }
        }
    }
    GpuFit { params, allreduce, compute_files, network_file }
}

/// Points of a network profile grouped by (workers, devices per node).
fn collective_groups(profile: &CollectiveProfile) -> BTreeMap<(u32, u32), Vec<CollectivePoint>> {
    let mut groups: BTreeMap<(u32, u32), Vec<CollectivePoint>> = BTreeMap::new();
    for row in &profile.rows {
        groups.entry((row.workers, row.devices_per_node)).or_default().push(CollectivePoint {
            wire_bytes: wire_bytes(&profile.collective, row.workers, row.bytes),
            seconds: row.seconds,
        });
    }
    groups
}

fn short(file: &str) -> String {
    let path = Path::new(file);
    let parent = path.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned());
    match parent {
        Some(parent) => format!("{parent}/{}", file_name(path)),
        None => file_name(path),
    }
}

/// (predicted, measured) pairs before and after calibration.
type BeforeAfter = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// (predicted, measured) pairs before calibration, with one fitted line, and after.
type BeforeLineAfter = (Vec<(f64, f64)>, Vec<(f64, f64)>, Vec<(f64, f64)>);

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn stats_cells(before: &[(f64, f64)], after: &[(f64, f64)]) -> String {
    stats_cells_with(before, after, None)
}

/// [`stats_cells`] with `middle` (more cells) between the before and after columns.
fn stats_cells_with(before: &[(f64, f64)], after: &[(f64, f64)], middle: Option<&str>) -> String {
    let (b, a) = (ErrorStats::of(before), ErrorStats::of(after));
    let middle = middle.map_or(String::new(), |cells| format!("{cells} | "));
    format!(
        "{} | {} | {} | {middle}{} | {} | {:+.1}%",
        a.count,
        pct(b.median),
        pct(b.p90),
        pct(a.median),
        pct(a.p90),
        100.0 * a.bias
    )
}

/// A collective fit in words: the floor, the large-message line and the small-message one.
fn describe_collective(fit: &CollectiveFit) -> String {
    let mut parts = Vec::new();
    if fit.floor_s > 0.0 {
        parts.push(format!("floor {:.1} us", fit.floor_s * 1e6));
    }
    parts.push(format!("{:.1} us + w / {:.0} GB/s", fit.latency_s * 1e6, fit.bandwidth_gb_per_s));
    if fit.small_bandwidth_gb_per_s > 0.0 {
        parts.push(format!(
            "small {:.1} us + w / {:.1} GB/s",
            fit.small_latency_s * 1e6,
            fit.small_bandwidth_gb_per_s
        ));
    }
    parts.join("; ")
}

/// Runs `cotenant calibrate`.
pub fn run(args: &CalibrateArgs) -> Result<()> {
    let dir =
        args.profiles.clone().unwrap_or_else(|| cotenant_trace::traces_dir(None).join("vidur-profiles-2024"));
    let profiles = load_profiles(&dir)?;
    let mut gpus: Vec<&'static GpuSpec> = profiles.compute.iter().map(|(g, _, _)| *g).collect();
    gpus.dedup_by_key(|g| g.name);
    gpus.sort_by_key(|g| g.name);
    gpus.dedup_by_key(|g| g.name);
    let fits: Vec<(&GpuSpec, GpuFit)> = gpus.iter().map(|g| (*g, fit_gpu(&profiles, g))).collect();
    let before = RooflineParams::default();
    let mut out = String::new();

    // Operators.
    let _ = writeln!(out, "### Per operator\n");
    let _ = writeln!(
        out,
        "| GPU | operator | rows | before median | before p90 | after median | after p90 | after bias |\n|---|---|---|---|---|---|---|---|"
    );
    let mut class_pairs: BTreeMap<(String, &str), BeforeAfter> = BTreeMap::new();
    for (gpu, fit) in &fits {
        for (op_index, op) in OPERATORS.iter().enumerate() {
            let (mut b, mut a) = (Vec::new(), Vec::new());
            for (_, model, profile) in profiles.compute.iter().filter(|(g, _, _)| g.name == gpu.name) {
                for row in &profile.rows {
                    let measured = row.seconds[op_index];
                    let tokens = row.tokens as f64;
                    let (pb, pa) =
                        op_times(model, row.tensor_parallel, op_index, tokens, gpu, &before, &fit.params);
                    b.push((pb, measured));
                    a.push((pa, measured));
                }
            }
            let _ = writeln!(out, "| {} | {op} | {} |", gpu.name, stats_cells(&b, &a));
            let class = if op_index < LINEAR_OPERATORS { "linear" } else { "element-wise" };
            let entry = class_pairs.entry((gpu.name.to_string(), class)).or_default();
            entry.0.extend(b);
            entry.1.extend(a);
        }
    }
    for ((gpu, class), (b, a)) in &class_pairs {
        let _ = writeln!(out, "| {gpu} | **all {class}** | {} |", stats_cells(b, a));
    }

    // Layers and iterations.
    // Held-out models: the linear fit on the GPU's other models, scored on this one.
    let _ = writeln!(out, "\n### Linear layers on a held-out model\n");
    let _ = writeln!(out, "Each row fits eta_c, eta_m, the knee and the kernel cost on the GPU's other profiles only and scores the linear operators of the model left out (out of sample).\n");
    let _ = writeln!(out, "| GPU | held-out model | rows | median | p90 | bias |\n|---|---|---|---|---|---|");
    for (gpu, _) in &fits {
        let mine: Vec<&(&GpuSpec, ModelShape, ComputeProfile)> =
            profiles.compute.iter().filter(|(g, _, _)| g.name == gpu.name).collect();
        let mut all = Vec::new();
        for (held, (_, model, profile)) in mine.iter().enumerate() {
            let train: Vec<LinearPoint> = mine
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != held)
                .flat_map(|(_, (_, m, p))| linear_points(m, p))
                .collect();
            if train.is_empty() {
                continue;
            }
            let params = fit_linear(&train, gpu, RooflineParams::default());
            let pairs: Vec<(f64, f64)> = linear_points(model, profile)
                .iter()
                .map(|q| (linear_op_s(q.k, q.n, q.tokens, q.bytes_per_param, gpu, &params), q.seconds))
                .collect();
            let stats = ErrorStats::of(&pairs);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:+.1}% |",
                gpu.name,
                model.name,
                stats.count,
                pct(stats.median),
                pct(stats.p90),
                100.0 * stats.bias
            );
            all.extend(pairs);
        }
        let stats = ErrorStats::of(&all);
        let _ = writeln!(
            out,
            "| {} | **all, each held out** | {} | {} | {} | {:+.1}% |",
            gpu.name,
            stats.count,
            pct(stats.median),
            pct(stats.p90),
            100.0 * stats.bias
        );
    }

    // How far any model smooth in tokens can go: the same form fitted to each curve
    // alone, and each point predicted by its neighbours in the same 64-token bin.
    let _ = writeln!(out, "\n### Linear layers: what the measurements leave to a model\n");
    let _ = writeln!(out, "Per curve: the linear model's four parameters fitted separately to each (model, TP, operator) curve of measured times over token counts (a lower bound for any shape-dependent refinement of this form). Same 64-token bin: each point predicted by the median of the other points of its curve whose token counts share ceil(T/64) (what a model that knew each step of the staircase would reach).\n");
    let _ = writeln!(out, "| GPU | reference | rows | median | p90 | bias |\n|---|---|---|---|---|---|");
    for (gpu, fit) in &fits {
        let mut curves: BTreeMap<(String, u32, usize), Vec<LinearPoint>> = BTreeMap::new();
        for (_, model, profile) in profiles.compute.iter().filter(|(g, _, _)| g.name == gpu.name) {
            for (i, point) in linear_points(model, profile).into_iter().enumerate() {
                let row = &profile.rows[i / LINEAR_OPERATORS];
                curves
                    .entry((model.name.clone(), row.tensor_parallel, i % LINEAR_OPERATORS))
                    .or_default()
                    .push(point);
            }
        }
        let (mut global, mut per_curve, mut binned) = (Vec::new(), Vec::new(), Vec::new());
        for points in curves.values() {
            let params = fit_linear(points, gpu, RooflineParams::default());
            for q in points {
                global
                    .push((linear_op_s(q.k, q.n, q.tokens, q.bytes_per_param, gpu, &fit.params), q.seconds));
                per_curve.push((linear_op_s(q.k, q.n, q.tokens, q.bytes_per_param, gpu, &params), q.seconds));
            }
            binned.extend(same_bin_predictions(points, 64.0));
        }
        for (name, pairs) in [
            ("the fit above (one set of parameters per GPU)", &global),
            ("per curve", &per_curve),
            ("same 64-token bin", &binned),
        ] {
            let stats = ErrorStats::of(pairs);
            let _ = writeln!(
                out,
                "| {} | {name} | {} | {} | {} | {:+.1}% |",
                gpu.name,
                stats.count,
                pct(stats.median),
                pct(stats.p90),
                100.0 * stats.bias
            );
        }
    }

    let _ = writeln!(out, "\n### Per layer and per iteration\n");
    let _ = writeln!(out, "A layer is its nine profiled operators (no attention); an iteration is L layers plus, at TP > 1, 2L all-reduces of T x d x 2 bytes (measured: the single-node DGX all_reduce profile, interpolated in size).\n");
    let _ = writeln!(
        out,
        "| GPU | model | unit | rows | before median | before p90 | after median | after p90 | after bias |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (gpu, fit) in &fits {
        let allreduce_curves = allreduce_curves(&profiles, gpu);
        for (_, model, profile) in profiles.compute.iter().filter(|(g, _, _)| g.name == gpu.name) {
            let (mut lb, mut la, mut ib, mut ia) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for row in &profile.rows {
                let tokens = row.tokens as f64;
                let tp = row.tensor_parallel;
                let measured: f64 = row.seconds.iter().sum();
                let (mut pb, mut pa) = (0.0, 0.0);
                for op_index in 0..OPERATORS.len() {
                    let (b, a) = op_times(model, tp, op_index, tokens, gpu, &before, &fit.params);
                    pb += b;
                    pa += a;
                }
                lb.push((pb, measured));
                la.push((pa, measured));
                let layers = model.layers as f64;
                let bytes = tokens * model.hidden as f64 * 2.0;
                let (ar_measured, ar_after) = if tp > 1 {
                    let Some(curve) = allreduce_curves.get(&tp) else { continue };
                    let fitted = fit
                        .allreduce
                        .get(&tp)
                        .map_or(0.0, |f| f.seconds(wire_bytes("all_reduce", tp, bytes)));
                    (curve.at(bytes), fitted)
                } else {
                    (0.0, 0.0)
                };
                let ar_before = allreduce_s(bytes, tp, gpu, &before);
                let iteration = layers * (measured + 2.0 * ar_measured);
                ib.push((layers * (pb + 2.0 * ar_before), iteration));
                ia.push((layers * (pa + 2.0 * ar_after), iteration));
            }
            let _ = writeln!(out, "| {} | {} | layer | {} |", gpu.name, model.name, stats_cells(&lb, &la));
            let _ =
                writeln!(out, "| {} | {} | iteration | {} |", gpu.name, model.name, stats_cells(&ib, &ia));
        }
    }

    // Collectives.
    let _ = writeln!(out, "\n### Collectives\n");
    let _ = writeln!(out, "Before: the roofline's all-reduce (8 us + 2 (n-1)/n size / NVLink bandwidth; send/recv: 8 us + size / NVLink). Line: one latency + size/bandwidth fitted per file and (workers, devices per node), the form of the previous calibration. After: the piecewise form max(floor, min(alpha + w/B, alpha_s + w/B_s)) fitted the same way (w: bytes each GPU sends).\n");
    let _ = writeln!(
        out,
        "| file | workers x per node | rows | before median | before p90 | line median | line p90 | after median | after p90 | after bias | measured at 2 KiB | fitted (after) |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut collective_class: BTreeMap<String, BeforeLineAfter> = BTreeMap::new();
    for (gpu, profile) in &profiles.network {
        for ((workers, per_node), points) in collective_groups(profile) {
            let fitted = fit_collective(&points);
            let line = fit_collective_line(&points);
            let legacy = CollectiveFit::line(before.allreduce_latency_s, gpu.interconnect_gb_per_s);
            let pairs = |f: &CollectiveFit| -> Vec<(f64, f64)> {
                points.iter().map(|p| (f.seconds(p.wire_bytes), p.seconds)).collect()
            };
            let (b, l, a) = (pairs(&legacy), pairs(&line), pairs(&fitted));
            let smallest = profile
                .rows
                .iter()
                .filter(|r| r.workers == workers && r.devices_per_node == per_node)
                .min_by(|x, y| x.bytes.total_cmp(&y.bytes))
                .map_or(0.0, |r| r.seconds);
            let ls = ErrorStats::of(&l);
            let _ = writeln!(
                out,
                "| {} | {workers} x {per_node} | {} | {:.1} us | {} |",
                short(&profile.file),
                stats_cells_with(&b, &a, Some(&format!("{} | {}", pct(ls.median), pct(ls.p90)))),
                smallest * 1e6,
                describe_collective(&fitted)
            );
            let single_node = workers == per_node;
            let class = match (is_dgx_allreduce(profile), profile.collective.as_str(), single_node) {
                (true, _, true) => Some("single-node DGX all-reduce"),
                (_, "send_recv", true) => Some("single-node send/recv"),
                (_, "send_recv", false) => Some("cross-node send/recv"),
                _ => None,
            };
            for name in class.into_iter().chain(["collectives"]) {
                let entry = collective_class.entry(format!("{} {name}", gpu.name)).or_default();
                entry.0.extend(b.iter().copied());
                entry.1.extend(l.iter().copied());
                entry.2.extend(a.iter().copied());
            }
        }
    }
    for (gpu, (b, l, a)) in &collective_class {
        let ls = ErrorStats::of(l);
        let _ = writeln!(
            out,
            "| **all {gpu}** | | {} | | |",
            stats_cells_with(b, a, Some(&format!("{} | {}", pct(ls.median), pct(ls.p90))))
        );
    }

    // Parameters.
    let _ = writeln!(out, "\n### Fitted parameters\n");
    let _ = writeln!(out, "| GPU | eta_c | eta_m | linear knee | linear kernel | element-wise eta (norm, norm, rope, act, add) | element-wise kernel (us, same order) | all-reduce by degree (w: bytes each GPU sends) |\n|---|---|---|---|---|---|---|---|");
    for (gpu, fit) in &fits {
        let p = fit.params;
        let ar: Vec<String> =
            fit.allreduce.iter().map(|(d, f)| format!("{d}: {}", describe_collective(f))).collect();
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} | {:.2} | {:.2} us | {} | {} | {} |",
            gpu.name,
            p.compute_efficiency,
            p.memory_efficiency,
            p.linear_knee_exponent,
            p.linear_kernel_s * 1e6,
            list(&p.elementwise_efficiency, 1.0, 3),
            list(&p.elementwise_kernel_s, 1e6, 2),
            ar.join("; ")
        );
    }
    print!("{out}");
    if let Some(path) = &args.write_params {
        std::fs::write(path, params_toml(&fits))
            .with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// (before, after) predicted seconds of operator `op_index` of [`OPERATORS`].
fn op_times(
    model: &ModelShape,
    tp: u32,
    op_index: usize,
    tokens: f64,
    gpu: &GpuSpec,
    before: &RooflineParams,
    after: &RooflineParams,
) -> (f64, f64) {
    if op_index < LINEAR_OPERATORS {
        let (k, n) = linear_op_dims(model, tp)[op_index];
        (linear_op_s(k, n, tokens, 2.0, gpu, before), linear_op_s(k, n, tokens, 2.0, gpu, after))
    } else {
        let op = op_index - LINEAR_OPERATORS;
        let bytes = elementwise_bytes_per_token(model, tp)[op] * tokens;
        // The roofline before calibration had no element-wise term.
        (0.0, elementwise_op_s(op, bytes, gpu, after))
    }
}

/// Measured single-node DGX all-reduce time by bytes, per degree.
fn allreduce_curves(profiles: &Profiles, gpu: &GpuSpec) -> BTreeMap<u32, Curve> {
    let mut out = BTreeMap::new();
    for (_, profile) in profiles.network.iter().filter(|(g, p)| g.name == gpu.name && is_dgx_allreduce(p)) {
        let mut by_degree: BTreeMap<u32, Vec<(f64, f64)>> = BTreeMap::new();
        for row in profile.rows.iter().filter(|r| r.workers == r.devices_per_node) {
            by_degree.entry(row.workers).or_default().push((row.bytes, row.seconds));
        }
        for (degree, points) in by_degree {
            if let Some(curve) = Curve::new(points) {
                out.insert(degree, curve);
            }
        }
    }
    out
}

fn list(values: &[f64], scale: f64, decimals: usize) -> String {
    values.iter().map(|v| format!("{:.*}", decimals, v * scale)).collect::<Vec<_>>().join(", ")
}

fn params_toml(fits: &[(&GpuSpec, GpuFit)]) -> String {
    let mut out = String::from(
        "# Roofline parameters fitted to measured kernels; written by\n\
         #   cotenant calibrate --write-params crates/perf/data/calibrated.toml\n\
         # (scripts/serve-calibration.sh). Profiles: Vidur (github.com/microsoft/vidur, commit\n\
         # 7d47513363ec447a741ac5e47241580b47724fbf, MIT; ../shared/traces/vidur-profiles-2024).\n\
         # Fit: mean squared log error, deterministic compass search (crates/perf/src/calibration.rs):\n\
         # eta_c, eta_m, knee and linear kernel cost jointly on the 4 linear operators of every\n\
         # row of the GPU's compute profiles; element-wise eta and kernel cost on the 5 element-wise\n\
         # operators; all-reduce per degree on the single-node DGX all_reduce profile as\n\
         # max(floor, min(latency + w / bandwidth, small_latency + w / small_bandwidth)), w the\n\
         # bytes each GPU sends (floor and small-message protocol absent when they do not help).\n\
         # fixed_ms (c0, the per-iteration cost outside kernels: scheduler, sampling) is not in\n\
         # kernel profiles and stays at the default. GPUs with transfer_from have no profiles:\n\
         # they take that GPU's fitted efficiencies (fractions of each GPU's own datasheet\n\
         # peaks, so their own FLOP/s, HBM bandwidth and capacity from the catalog apply).\n",
    );
    for (gpu, fit) in fits {
        let p = fit.params;
        let _ = writeln!(out, "\n[gpu.{}]", gpu.name);
        let _ = writeln!(out, "compute_profiles = {:?}", fit.compute_files);
        let _ = writeln!(out, "compute_efficiency = {:.4}", p.compute_efficiency);
        let _ = writeln!(out, "memory_efficiency = {:.4}", p.memory_efficiency);
        let _ = writeln!(out, "linear_knee_exponent = {:.3}", p.linear_knee_exponent);
        let _ = writeln!(out, "linear_kernel_us = {:.3}", p.linear_kernel_s * 1e6);
        let _ = writeln!(out, "elementwise_efficiency = [{}]", list(&p.elementwise_efficiency, 1.0, 4));
        let _ = writeln!(out, "elementwise_kernel_us = [{}]", list(&p.elementwise_kernel_s, 1e6, 3));
        let _ = writeln!(out, "fixed_ms = {:.3}", p.fixed_s * 1e3);
        if let Some(file) = &fit.network_file {
            let _ = writeln!(out, "allreduce_profile = {file:?}");
        }
        for (degree, f) in &fit.allreduce {
            let mut fields = format!(
                "latency_us = {:.3}, bandwidth_gb_per_s = {:.2}",
                f.latency_s * 1e6,
                f.bandwidth_gb_per_s
            );
            if f.floor_s > 0.0 {
                let _ = write!(fields, ", floor_us = {:.3}", f.floor_s * 1e6);
            }
            if f.small_bandwidth_gb_per_s > 0.0 {
                let _ = write!(
                    fields,
                    ", small_latency_us = {:.3}, small_bandwidth_gb_per_s = {:.3}",
                    f.small_latency_s * 1e6,
                    f.small_bandwidth_gb_per_s
                );
            }
            let _ = writeln!(out, "allreduce.{degree} = {{ {fields} }}");
        }
    }
    let fitted: Vec<&str> = fits.iter().map(|(gpu, _)| gpu.name).collect();
    for (gpu, source, why) in TRANSFERS {
        if fitted.contains(&source) && !fitted.contains(&gpu) {
            let _ = writeln!(out, "\n[gpu.{gpu}]\ntransfer_from = {source:?}\n# {why}");
        }
    }
    out
}

/// GPUs without profiles that take a profiled GPU's fitted parameters: (GPU, source,
/// why), written to calibrated.toml with the fit.
pub const TRANSFERS: [(&str, &str, &str); 2] = [
    (
        "H200",
        "H100-SXM",
        "Same GH100 die, SMs, clocks and NVLink 4 as the H100 SXM (NVIDIA H200 datasheet: 989 dense bf16 TFLOP/s, 900 GB/s NVLink); only the memory differs (141 GB HBM3e at 4.8 TB/s). Its own bandwidth and capacity come from the catalog; the efficiencies, kernel costs and all-reduce are the H100's, unmeasured on an H200.",
    ),
    (
        "A100-40G",
        "A100-80G",
        "Same GA100 die, SMs, clocks and NVLink 3 as the A100 80GB (NVIDIA A100 datasheet: 312 dense bf16 TFLOP/s, 600 GB/s NVLink); only the memory differs (40 GB HBM2 at 1.555 TB/s). Its own bandwidth and capacity come from the catalog; the efficiencies, kernel costs and all-reduce are the A100 80GB's, unmeasured on a 40GB part.",
    ),
];
