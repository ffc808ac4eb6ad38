//! Workload classes: the kinds of jobs a large shared cluster hosts, each a parameter
//! set of the one job model (`JobSpec` with its `JobKind`, GPU count, run time, elastic
//! range, host memory and `JobProfile`), never a code path of its own.
//!
//! `--synthetic ...,classes=llm-pretrain:2|rlhf:3|etl:5` (or `class=NAME`) draws each
//! job's class by weight and the job's shape from that class. Every number below has
//! its source, or is marked an assumption or a reconstruction, in docs/workloads.md.
//!
//! The classes:
//! - `llm-pretrain`: Megatron-LM weak-scaling gangs of 256 to 2,048 GPUs, layout
//!   8 x p x 32, communication fraction from [`megatron_comm_fraction`], checkpoint
//!   interval from Young's formula with Llama 3's interruption rate ([`young_interval_secs`]).
//! - `rlhf`: `JobKind::Rlhf`, 4 to 32 GPUs, hours.
//! - `elastic`: Gavel's sizes and run times, elastic over `[max(1, g/2), 2g]` (EDL),
//!   the range the `elastic=` key gives.
//! - `inference`: `JobKind::Inference`, 1 to 8 GPUs, one to four weeks, low sensitivity.
//! - `hpc-dpd`, `hpc-snn`, `hpc-lqcd`: MPI gangs with near-linear weak scaling (run time
//!   independent of the GPU count; a communication share that does not grow with it):
//!   dissipative particle dynamics (halo), spiking-network construction (all-to-all),
//!   lattice QCD (halo, for a torus).
//! - `mcl`: HipMCL Markov clustering with its up-front memory estimate ([`hipmcl_memory`]).
//! - `etl`: short I/O-bound GPU ETL (RAPIDS/Dask style), low sensitivity.

use std::borrow::Cow;

use cotenant_core::{CommPattern, Elastic, JobKind, JobProfile, JobSpec, Layout, Span};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::error::TraceError;
use crate::SyntheticSpec;

/// A workload class. See the module doc and docs/workloads.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadClass {
    LlmPretrain,
    Rlhf,
    Elastic,
    Inference,
    HpcDpd,
    HpcSnn,
    HpcLqcd,
    Mcl,
    Etl,
}

impl WorkloadClass {
    pub const ALL: [WorkloadClass; 9] = [
        WorkloadClass::LlmPretrain,
        WorkloadClass::Rlhf,
        WorkloadClass::Elastic,
        WorkloadClass::Inference,
        WorkloadClass::HpcDpd,
        WorkloadClass::HpcSnn,
        WorkloadClass::HpcLqcd,
        WorkloadClass::Mcl,
        WorkloadClass::Etl,
    ];

    /// The name in specs and notes.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadClass::LlmPretrain => "llm-pretrain",
            WorkloadClass::Rlhf => "rlhf",
            WorkloadClass::Elastic => "elastic",
            WorkloadClass::Inference => "inference",
            WorkloadClass::HpcDpd => "hpc-dpd",
            WorkloadClass::HpcSnn => "hpc-snn",
            WorkloadClass::HpcLqcd => "hpc-lqcd",
            WorkloadClass::Mcl => "mcl",
            WorkloadClass::Etl => "etl",
        }
    }

    pub fn parse(name: &str) -> Option<WorkloadClass> {
        WorkloadClass::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The class's parameters (data; docs/workloads.md gives each one's source).
    pub fn params(self) -> &'static ClassParams {
        &PARAMS[self as usize]
    }
}

/// The known class names, for error messages.
pub fn known_classes() -> String {
    WorkloadClass::ALL.map(WorkloadClass::name).join(", ")
}

/// How a class checkpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Checkpointing {
    /// The run's default (`JobProfile::checkpoint_interval` stays `None`).
    RunDefault,
    /// A fixed interval in seconds.
    Every(f64),
    /// Young's optimum for the job's GPU count ([`young_interval_secs`]).
    Young,
}

/// Host memory a class states.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostMemory {
    /// None stated (the `mem-gib-per-gpu` key still applies).
    None,
    /// GiB per GPU.
    PerGpu(f64),
    /// HipMCL's estimate for the job's drawn network ([`hipmcl_memory`]).
    HipMcl,
}

/// One class as a parameter set of the job model.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassParams {
    pub kind: JobKind,
    /// GPU counts and their weights.
    pub gpus: &'static [(u32, f64)],
    /// Run time at reference speed: log-uniform between these hours (ignored when
    /// `gavel_durations`).
    pub hours: (f64, f64),
    /// Gavel's run-time mixture instead of `hours`.
    pub gavel_durations: bool,
    /// Communication fraction (ignored for `llm-pretrain`, which computes it).
    pub comm_fraction: f64,
    pub comm_pattern: CommPattern,
    pub sensitivity: f64,
    pub checkpoint: Checkpointing,
    /// Elastic over `[max(1, g / 2), 2 g]`.
    pub elastic: bool,
    pub host_memory: HostMemory,
}

const PARAMS: [ClassParams; 9] = [
    // llm-pretrain
    ClassParams {
        kind: JobKind::Training,
        gpus: &[(256, 4.0), (512, 3.0), (1024, 2.0), (2048, 1.0)],
        hours: (24.0, 336.0),
        gavel_durations: false,
        comm_fraction: 0.0,
        comm_pattern: CommPattern::AllReduce,
        sensitivity: 1.0,
        checkpoint: Checkpointing::Young,
        elastic: false,
        host_memory: HostMemory::None,
    },
    // rlhf
    ClassParams {
        kind: JobKind::Rlhf,
        gpus: &[(4, 3.0), (8, 4.0), (16, 2.0), (32, 1.0)],
        hours: (0.5, 8.0),
        gavel_durations: false,
        comm_fraction: 0.1,
        comm_pattern: CommPattern::AllReduce,
        sensitivity: 0.7,
        checkpoint: Checkpointing::Every(3600.0),
        elastic: false,
        host_memory: HostMemory::None,
    },
    // elastic
    ClassParams {
        kind: JobKind::Training,
        gpus: &[(1, 70.0), (2, 10.0), (4, 15.0), (8, 5.0)],
        hours: (0.0, 0.0),
        gavel_durations: true,
        comm_fraction: 0.1,
        comm_pattern: CommPattern::AllReduce,
        sensitivity: 1.0,
        checkpoint: Checkpointing::RunDefault,
        elastic: true,
        host_memory: HostMemory::None,
    },
    // inference
    ClassParams {
        kind: JobKind::Inference,
        gpus: &[(1, 50.0), (2, 25.0), (4, 15.0), (8, 10.0)],
        hours: (168.0, 720.0),
        gavel_durations: false,
        comm_fraction: 0.0,
        comm_pattern: CommPattern::AllReduce,
        sensitivity: 0.2,
        checkpoint: Checkpointing::RunDefault,
        elastic: false,
        host_memory: HostMemory::None,
    },
    // hpc-dpd
    ClassParams {
        kind: JobKind::Hpc,
        gpus: &[(16, 1.0), (32, 1.0), (64, 1.0), (128, 1.0), (256, 1.0)],
        hours: (2.0, 24.0),
        gavel_durations: false,
        comm_fraction: 0.1,
        comm_pattern: CommPattern::Halo,
        sensitivity: 1.0,
        checkpoint: Checkpointing::Every(3600.0),
        elastic: false,
        host_memory: HostMemory::None,
    },
    // hpc-snn
    ClassParams {
        kind: JobKind::Hpc,
        gpus: &[(4, 1.0), (8, 1.0), (16, 1.0), (32, 1.0), (64, 1.0)],
        hours: (1.0 / 6.0, 2.0),
        gavel_durations: false,
        comm_fraction: 0.2,
        comm_pattern: CommPattern::AllToAll,
        sensitivity: 0.6,
        checkpoint: Checkpointing::RunDefault,
        elastic: false,
        host_memory: HostMemory::PerGpu(32.0),
    },
    // hpc-lqcd
    ClassParams {
        kind: JobKind::Hpc,
        gpus: &[(64, 1.0), (128, 1.0), (256, 1.0), (512, 1.0), (1024, 1.0)],
        hours: (6.0, 24.0),
        gavel_durations: false,
        comm_fraction: 0.25,
        comm_pattern: CommPattern::Halo,
        sensitivity: 1.0,
        checkpoint: Checkpointing::Every(7200.0),
        elastic: false,
        host_memory: HostMemory::None,
    },
    // mcl
    ClassParams {
        kind: JobKind::Hpc,
        // The candidates; a job takes the smallest that fits its network ([`mcl_gpus`]).
        gpus: &[(16, 1.0), (64, 1.0), (256, 1.0), (1024, 1.0)],
        hours: (0.5, 6.0),
        gavel_durations: false,
        comm_fraction: 0.3,
        comm_pattern: CommPattern::AllToAll,
        sensitivity: 0.5,
        checkpoint: Checkpointing::RunDefault,
        elastic: false,
        host_memory: HostMemory::HipMcl,
    },
    // etl
    ClassParams {
        kind: JobKind::Etl,
        gpus: &[(1, 70.0), (2, 20.0), (4, 10.0)],
        hours: (1.0 / 60.0, 0.5),
        gavel_durations: false,
        comm_fraction: 0.3,
        comm_pattern: CommPattern::AllToAll,
        sensitivity: 0.2,
        checkpoint: Checkpointing::RunDefault,
        elastic: false,
        host_memory: HostMemory::PerGpu(64.0),
    },
];

/// A Megatron-LM weak-scaling configuration (Narayanan et al., SC'21, Table 1) for a
/// pre-training gang of `gpus` GPUs: tensor 8, pipeline `pipeline`, data `gpus / (8 p)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlmShape {
    pub gpus: u32,
    pub params: f64,
    pub hidden: f64,
    pub layers: u32,
    pub global_batch: f64,
    pub pipeline: u32,
}

/// Sequence length of every shape (Megatron's GPT runs: 2,048 tokens).
pub const LLM_SEQ: f64 = 2048.0;
/// Achieved model FLOP/s per GPU the estimate assumes: Megatron's ~140 TF/s per A100
/// for GPT-3 175B on 1,024 GPUs.
pub const LLM_ACHIEVED_FLOPS: f64 = 140e12;
/// Cross-node bandwidth per GPU: one 200 Gb/s HDR InfiniBand NIC per A100 (DGX A100).
pub const NIC_BYTES_PER_SEC: f64 = 25e9;
/// Bytes per gradient element and per activation element (bf16/fp16).
const BYTES_PER_ELEMENT: f64 = 2.0;

/// One shape per GPU count the class draws. 256, 512 and 1,024 are Table 1's rows with
/// t = 8 (18.4B, 39.1B, 76.1B); 2,048 takes the 145.6B row (run there on 1,536 GPUs)
/// with the data-parallel size raised to 32 like the others (a reconstruction).
pub const LLM_SHAPES: [LlmShape; 4] = [
    LlmShape { gpus: 256, params: 18.4e9, hidden: 6144.0, layers: 40, global_batch: 1024.0, pipeline: 1 },
    LlmShape { gpus: 512, params: 39.1e9, hidden: 8192.0, layers: 48, global_batch: 1536.0, pipeline: 2 },
    LlmShape { gpus: 1024, params: 76.1e9, hidden: 10240.0, layers: 60, global_batch: 1792.0, pipeline: 4 },
    LlmShape { gpus: 2048, params: 145.6e9, hidden: 12288.0, layers: 80, global_batch: 2304.0, pipeline: 8 },
];

impl LlmShape {
    pub fn layout(&self) -> Layout {
        Layout { tensor: 8, pipeline: self.pipeline, data: self.gpus / (8 * self.pipeline) }
    }
}

/// The share of an iteration spent in cross-node communication, estimated as
/// `T_comm / (T_comp + T_comm)` with no overlap:
/// - `T_comp = 8 P B s / (n F)`: Megatron's FLOPs per iteration with full recompute,
///   `96 B s l h^2 (...) ~ 8 P B s`, spread over `n` GPUs at `F` achieved FLOP/s;
/// - data-parallel ring all-reduce of the gradients: `2 (d - 1)/d x 2 P / (t p)` bytes per GPU;
/// - pipeline sends (p > 1): a `b s h` activation forward and its gradient backward per
///   micro-batch, `B / (b d)` micro-batches: `2 x 2 B s h / d` bytes per GPU;
/// - both over the GPU's NIC at `W` bytes/s. Tensor parallelism stays on NVLink inside
///   the 8-GPU node and is not counted.
pub fn megatron_comm_fraction(shape: &LlmShape, flops: f64, nic_bytes_per_sec: f64) -> f64 {
    let layout = shape.layout();
    let n = f64::from(shape.gpus);
    let d = f64::from(layout.data);
    let (t, p) = (f64::from(layout.tensor), f64::from(layout.pipeline));
    let compute = 8.0 * shape.params * shape.global_batch * LLM_SEQ / (n * flops);
    let allreduce = 2.0 * (d - 1.0) / d * BYTES_PER_ELEMENT * shape.params / (t * p);
    let pipeline = if layout.pipeline > 1 {
        2.0 * BYTES_PER_ELEMENT * shape.global_batch * LLM_SEQ * shape.hidden / d
    } else {
        0.0
    };
    let comm = (allreduce + pipeline) / nic_bytes_per_sec;
    comm / (compute + comm)
}

/// Llama 3's pre-training interruption rate: 419 unexpected interruptions in a 54-day
/// snapshot on 16,384 H100 GPUs, i.e. one per this many GPU-hours.
pub const GPU_HOURS_PER_INTERRUPTION: f64 = 54.0 * 24.0 * 16384.0 / 419.0;
/// Time to write one checkpoint, seconds (an assumption).
pub const CHECKPOINT_WRITE_SECS: f64 = 60.0;

/// Young's first-order optimum checkpoint interval `sqrt(2 delta M)` for a gang of
/// `gpus` GPUs, with `delta` the checkpoint write time and `M` the gang's mean time
/// between interruptions, `GPU_HOURS_PER_INTERRUPTION / gpus` hours.
pub fn young_interval_secs(gpus: u32, write_secs: f64) -> f64 {
    let mtbf_secs = GPU_HOURS_PER_INTERRUPTION / f64::from(gpus) * 3600.0;
    (2.0 * write_secs * mtbf_secs).sqrt()
}

/// HipMCL's defaults: selection number and recovery number (columns keep at most
/// this many entries after pruning).
pub const HIPMCL_SELECT: f64 = 1100.0;
pub const HIPMCL_RECOVER: f64 = 1400.0;
/// Memory per MPI process HipMCL may use (`-per-process-mem`, GB), an assumption:
/// a 512 GB node shared by 8 GPU processes.
pub const HIPMCL_PROCESS_GB: f64 = 64.0;

/// HipMCL's up-front memory estimate for one expansion (A x A), per process, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MclMemory {
    pub input: f64,
    pub asquare: f64,
    pub kselect: f64,
    pub output: f64,
    /// Phases the expansion is split into so that it fits `per_process_gb`.
    pub phases: u64,
    /// Peak per process with that many phases.
    pub per_process: f64,
}

/// HipMCL's estimate (CombBLAS `MemEfficientSpGEMM`, include/CombBLAS/ParFriends.h)
/// for a network of `vertices` with `degree` nonzeros per column on `processes`
/// processes in a square grid, 24 bytes per nonzero (two 8-byte indices, an 8-byte value):
/// - input  = nnz(A)/p x 24 x 4 (own and received pieces of A and B);
/// - asquare = nnz(A^2 unmerged)/p x 24 x 2, with the unmerged nonzeros = the
///   multiplications, `vertices x degree^2` for uniform degrees;
/// - k = min(max(select, recover), d) with d = nnz(A^2)/vertices = degree^2;
///   kselect = local columns x k x 8 x 3, local columns = vertices / sqrt(p);
/// - output = local columns x k / sqrt(p) x 24 x 2;
/// - phases = 1 + (asquare + kselect) / (M - input - output) (integer division, as
///   HipMCL does; 1 when the remainder is not positive), peak = input + output +
///   (asquare + kselect) / phases.
pub fn hipmcl_memory(vertices: f64, degree: f64, processes: u32, per_process_gb: f64) -> MclMemory {
    const NNZ_BYTES: f64 = 24.0;
    let p = f64::from(processes);
    let input = (vertices * degree / p).floor() * NNZ_BYTES * 4.0;
    let asquare_nnz = (vertices * degree * degree / p).floor();
    let asquare = asquare_nnz * NNZ_BYTES * 2.0;
    let local_cols = (vertices / p.sqrt()).floor();
    let d = (asquare_nnz * p.sqrt() / local_cols).ceil();
    let k = HIPMCL_SELECT.max(HIPMCL_RECOVER).min(d);
    let kselect = local_cols * k * 8.0 * 3.0;
    let output = (local_cols * k / p.sqrt()).floor() * NNZ_BYTES * 2.0;
    let remaining = per_process_gb * 1e9 - input - output;
    let phases = if remaining > 0.0 { 1 + ((asquare + kselect) / remaining).floor() as u64 } else { 1 };
    let per_process = input + output + (asquare + kselect) / phases as f64;
    MclMemory { input, asquare, kselect, output, phases, per_process }
}

/// Networks the `mcl` class draws: vertices log-uniform in this range ...
pub const MCL_VERTICES: (f64, f64) = (1e6, 7e7);
/// ... and nonzeros per column log-uniform in this range (assumptions).
pub const MCL_DEGREE: (f64, f64) = (20.0, 500.0);

/// A job's shape as its class draws it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassJob {
    pub class: WorkloadClass,
    pub kind: JobKind,
    pub gpus: u32,
    /// Run time at reference speed, seconds.
    pub secs: f64,
    pub profile: JobProfile,
    pub elastic: Option<Elastic>,
    /// Host memory in GiB (0: none stated). No class states GPU memory (docs/workloads.md).
    pub memory_gib: u32,
    /// The drawn network and HipMCL's estimate (`mcl` only).
    pub mcl: Option<(f64, f64, MclMemory)>,
}

fn log_uniform(rng: &mut ChaCha8Rng, (low, high): (f64, f64)) -> f64 {
    if low >= high {
        return low;
    }
    (low.ln() + rng.random::<f64>() * (high.ln() - low.ln())).exp()
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, choices: &[(T, f64)]) -> T {
    let total: f64 = choices.iter().map(|(_, w)| w).sum();
    let mut r = rng.random::<f64>() * total;
    for &(value, weight) in choices {
        if r < weight {
            return value;
        }
        r -= weight;
    }
    choices[choices.len() - 1].0
}

/// The GPU count (one HipMCL process per GPU, a square grid) an `mcl` job asks for:
/// the smallest candidate whose input and output copies take at most half of the
/// per-process memory, leaving the other half to the expansion's phases; the largest
/// candidate if none does. Returns the count and HipMCL's estimate there.
pub fn mcl_gpus(vertices: f64, degree: f64) -> (u32, MclMemory) {
    let candidates = WorkloadClass::Mcl.params().gpus;
    let fits = |p: u32| {
        let estimate = hipmcl_memory(vertices, degree, p, HIPMCL_PROCESS_GB);
        (estimate.input + estimate.output <= HIPMCL_PROCESS_GB * 1e9 / 2.0).then_some((p, estimate))
    };
    candidates.iter().find_map(|&(p, _)| fits(p)).unwrap_or_else(|| {
        let p = candidates[candidates.len() - 1].0;
        (p, hipmcl_memory(vertices, degree, p, HIPMCL_PROCESS_GB))
    })
}

/// Draws one job of `class` from `rng` (the class stream). Draw order: the `mcl`
/// network (vertices, degree) when the class is `mcl`, else the GPU count; then the run time.
pub fn draw(class: WorkloadClass, rng: &mut ChaCha8Rng) -> ClassJob {
    let params = class.params();
    let mcl = (params.host_memory == HostMemory::HipMcl).then(|| {
        let vertices = log_uniform(rng, MCL_VERTICES).round();
        let degree = log_uniform(rng, MCL_DEGREE).round();
        let (gpus, estimate) = mcl_gpus(vertices, degree);
        (vertices, degree, gpus, estimate)
    });
    let gpus = match mcl {
        Some((_, _, gpus, _)) => gpus,
        None => pick(rng, params.gpus),
    };
    let secs = if params.gavel_durations {
        crate::synthetic::draw_duration_secs(rng, &crate::synthetic::DurationDist::Gavel)
    } else {
        (log_uniform(rng, params.hours) * 3600.0).round().max(1.0)
    };
    let mut profile = JobProfile {
        comm_fraction: params.comm_fraction,
        comm_pattern: params.comm_pattern,
        layout: None,
        sensitivity: params.sensitivity,
        checkpoint_interval: match params.checkpoint {
            Checkpointing::RunDefault => None,
            Checkpointing::Every(s) => Some(Span::from_secs_f64_ceil(s)),
            Checkpointing::Young => {
                Some(Span::from_secs_f64_ceil(young_interval_secs(gpus, CHECKPOINT_WRITE_SECS)))
            }
        },
    };
    if class == WorkloadClass::LlmPretrain {
        let shape = LLM_SHAPES.iter().find(|s| s.gpus == gpus).expect("a shape per drawn count");
        profile.layout = Some(shape.layout());
        profile.comm_fraction = megatron_comm_fraction(shape, LLM_ACHIEVED_FLOPS, NIC_BYTES_PER_SEC);
    }
    let elastic = params.elastic.then(|| Elastic::new((gpus / 2).max(1), gpus * 2, gpus).ok()).flatten();
    let (memory_gib, mcl) = match params.host_memory {
        HostMemory::None => (0, None),
        HostMemory::PerGpu(gib) => ((gib * f64::from(gpus)).floor() as u32, None),
        HostMemory::HipMcl => match mcl {
            Some((vertices, degree, _, estimate)) => {
                let gib = (estimate.per_process * f64::from(gpus) / f64::from(1u32 << 30)).ceil() as u32;
                (gib, Some((vertices, degree, estimate)))
            }
            None => (0, None),
        },
    };
    ClassJob { class, kind: params.kind, gpus, secs, profile, elastic, memory_gib, mcl }
}

/// Gives `job` (generated with Gavel's draws) the drawn class's shape; the spec's
/// per-GPU host requests follow the class's GPU count, and a class's own host
/// memory wins when larger.
pub(crate) fn apply(drawn: &ClassJob, job: &mut JobSpec, spec: &SyntheticSpec) {
    let gpus = f64::from(drawn.gpus);
    job.gpus = drawn.gpus;
    job.work = drawn.secs;
    job.duration_estimate = Some(Span::from_secs_f64_ceil(drawn.secs));
    job.kind = drawn.kind;
    job.cpus = (spec.cpus_per_gpu * gpus).ceil() as u32;
    job.memory_gib = drawn.memory_gib.max((spec.memory_gib_per_gpu * gpus).floor() as u32);
    job.elastic = drawn.elastic;
    job.profile = drawn.profile;
}

/// The classes a spec mixes, with their weights (`classes=` or `class=`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClassMix(pub Vec<(WorkloadClass, f64)>);

impl ClassMix {
    /// Parses `NAME[:WEIGHT]|NAME[:WEIGHT]...` (weight 1 when omitted) for `key`.
    pub fn parse(key: &str, value: &str) -> Result<ClassMix, TraceError> {
        let err = |message: String| TraceError::config("synthetic spec", key, message);
        let mut mix: Vec<(WorkloadClass, f64)> = Vec::new();
        for item in value.split('|').map(str::trim) {
            let (name, weight) = match item.split_once(':') {
                Some((name, weight)) => (name.trim(), Some(weight.trim())),
                None => (item, None),
            };
            let class = WorkloadClass::parse(name).ok_or_else(|| {
                err(format!("unknown workload class {name:?} (known: {})", known_classes()))
            })?;
            let weight = match weight {
                None => 1.0,
                Some(w) => match w.parse::<f64>() {
                    Ok(x) if x.is_finite() && x > 0.0 => x,
                    _ => return Err(err(format!("class {name}: expected a positive weight, got {w:?}"))),
                },
            };
            if mix.iter().any(|(c, _)| *c == class) {
                return Err(err(format!("class {name} given twice")));
            }
            mix.push((class, weight));
        }
        Ok(ClassMix(mix))
    }

    pub fn draw(&self, rng: &mut ChaCha8Rng) -> WorkloadClass {
        pick(rng, &self.0)
    }
}

impl std::fmt::Display for ClassMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.0.iter().map(|(c, w)| format!("{}:{w}", c.name())).collect();
        write!(f, "{}", items.join("|"))
    }
}

/// Lets `classes=` lists use commas as in the docs' example
/// (`classes=llm-pretrain:2,rlhf:3,etl`): a part with no `=` after a `classes=` part
/// (or after another such part) joins that list with `|`. Other text is unchanged.
pub(crate) fn join_class_lists(text: &str) -> Cow<'_, str> {
    let mut out = String::with_capacity(text.len());
    let mut in_list = false;
    let mut changed = false;
    for (i, part) in text.split(',').enumerate() {
        let continues = in_list && !part.contains('=') && !part.trim().is_empty();
        if i > 0 {
            out.push(if continues { '|' } else { ',' });
        }
        changed |= continues;
        if part.contains('=') {
            in_list = part.split_once('=').is_some_and(|(key, _)| key.trim() == "classes");
        }
        out.push_str(part);
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Per-class counts and GPU-hours of work, one note line per class in the mix.
pub(crate) fn class_notes(mix: &ClassMix, drawn: &[(WorkloadClass, u32, f64)]) -> Vec<String> {
    let total_jobs = drawn.len().max(1) as f64;
    let total_gpu_hours: f64 = drawn.iter().map(|(_, g, s)| f64::from(*g) * s / 3600.0).sum();
    mix.0
        .iter()
        .map(|(class, _)| {
            let jobs = drawn.iter().filter(|(c, _, _)| c == class).count();
            let gpu_hours: f64 =
                drawn.iter().filter(|(c, _, _)| c == class).map(|(_, g, s)| f64::from(*g) * s / 3600.0).sum();
            format!(
                "class {}: {jobs} jobs ({:.1}%), {gpu_hours:.0} GPU-hours of work ({:.1}%)",
                class.name(),
                jobs as f64 / total_jobs * 100.0,
                if total_gpu_hours > 0.0 { gpu_hours / total_gpu_hours * 100.0 } else { 0.0 }
            )
        })
        .collect()
}
