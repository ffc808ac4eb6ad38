//! cotenant-fuzz: a seeded, deterministic mutation fuzzer for every trace reader
//! and config parser, on stable Rust (no cargo-fuzz, no sanitizers).
//!
//! Each [`Target`] has a seed corpus (the first lines of the bundled files under
//! `data/` where one exists, plus hand-written tricky rows) and one entry point in
//! `cotenant_trace`. A run draws an input from the corpus, stacks one to four
//! [`mutate`] steps on it (byte flips, line and field deletion, duplication,
//! splicing and swapping, numbers replaced by extremes, dates by 0001/9999,
//! invalid UTF-8, CRLF, truncation, empty input) and checks an oracle:
//!
//! - **no panic** (`catch_unwind`);
//! - **a time bound**: each call runs on a worker thread and must answer within
//!   [`Config::call_timeout`];
//! - **limits**: a successful parse satisfies `cotenant_core::limits` (every
//!   duration, GPU count, arrival span, token count, cluster size) and the
//!   documented invariants (ids, sorted arrivals, tenant indices);
//! - **error quality**: an error names the input file, a line it names exists in the
//!   input, and no text is repeated between an error and its `source()` chain (what
//!   anyhow's `{:#}` prints).
//!
//! Inputs that produce an error message not seen before (digits and quoted values
//! ignored) join the corpus, a cheap stand-in for coverage feedback, and so do a
//! quarter of the inputs that still parse (bases for deeper mutation). Everything derives from one
//! seed: the same seed and execution count give the same inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cotenant_core::limits::{
    MAX_ACCOUNTS, MAX_ARRIVAL_SPAN, MAX_CLUSTER_GPUS, MAX_CLUSTER_NODES, MAX_GPUS_PER_JOB, MAX_GPUS_PER_NODE,
    MAX_JOB_DURATION, MAX_JOB_STEPS, MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_REQUEST_SPAN,
};
use cotenant_core::{ClusterSpec, Span};
use cotenant_trace::request_files::parse_request_bytes;
use cotenant_trace::requests::{parse_azure_csv, parse_mooncake_jsonl, RequestTrace};
use cotenant_trace::{parse_openb_nodes, parse_trace, Slice, TraceKind, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a target's entry point does with one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `read_trace(kind, file)`.
    Jobs(TraceKind),
    /// `read_openb_nodes(file)`.
    OpenbNodes,
    /// `requests::parse_azure_csv`.
    Azure,
    /// `requests::parse_mooncake_jsonl`.
    Mooncake,
    /// `request_files::parse_request_bytes` with the format detected (cotenant JSONL seeds).
    CotenantRequests,
    /// `parse_cluster_toml` or, for a one-line input, `parse_cluster_inline`.
    ClusterConfig,
    /// `accounts::parse_tenant_config`.
    TenantConfig,
    /// `mig::parse_mig_geometry`, then every geometry's partitions enumerated and checked.
    MigGeometry,
    /// `mig::parse_slice_curves`.
    MigCurves,
    /// `gavel_throughputs::parse_gavel_throughputs`.
    Throughputs,
    /// `cotenant_sim::sharing::parse_interference` (the GPU-sharing interference table).
    Interference,
    /// `cotenant_sim::faults::parse_availability` (availability windows) on a 4-node cluster.
    Availability,
    /// `cotenant report`'s inputs (saved sim and serve-sim runs, sweep results),
    /// read and, when they read, rendered into a report page.
    Results,
}

/// One fuzz target: a reader or parser and its seed corpus.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: &'static str,
    /// The file name inputs are written to (and errors must name).
    pub file_name: &'static str,
    pub entry: Entry,
    pub seeds: Vec<Vec<u8>>,
}

/// Lines of bundled data per seed file.
pub const SEED_LINES: usize = 12;

/// Every target, with its seeds. `data` is the bundled `data/` folder; a seed file
/// missing there is left out (the hand-written seeds remain).
pub fn targets(data: &Path) -> Vec<Target> {
    let bundled = |relative: &str| -> Vec<Vec<u8>> {
        match cotenant_trace::text::read_text(&data.join(relative)) {
            Ok(text) => vec![text.split_inclusive('\n').take(SEED_LINES).collect::<String>().into_bytes()],
            Err(_) => Vec::new(),
        }
    };
    let with = |mut seeds: Vec<Vec<u8>>, hand: &[&str]| {
        seeds.extend(hand.iter().map(|s| s.as_bytes().to_vec()));
        seeds
    };
    let gavel_files = ["artifact_evaluation.trace.gz", "debug.trace.gz"];
    let mut gavel_seeds = Vec::new();
    for name in gavel_files {
        gavel_seeds.extend(bundled(&format!("{}/{name}", cotenant_trace::BUNDLED_GAVEL_PHYSICAL)));
    }
    vec![
        Target {
            name: "philly",
            file_name: "philly.csv",
            entry: Entry::Jobs(TraceKind::Philly),
            seeds: with(bundled(cotenant_trace::BUNDLED_PHILLY), PHILLY_HAND),
        },
        Target {
            name: "itp",
            file_name: "cluster01.csv",
            entry: Entry::Jobs(TraceKind::Itp),
            seeds: with(Vec::new(), ITP_HAND),
        },
        Target {
            name: "gavel",
            file_name: "cluster.trace",
            entry: Entry::Jobs(TraceKind::Gavel),
            seeds: with(gavel_seeds, GAVEL_HAND),
        },
        Target {
            name: "pollux",
            file_name: "workload-1.csv",
            entry: Entry::Jobs(TraceKind::Pollux),
            seeds: with(Vec::new(), POLLUX_HAND),
        },
        Target {
            name: "tiresias",
            file_name: "60_job.csv",
            entry: Entry::Jobs(TraceKind::Tiresias),
            seeds: with(Vec::new(), TIRESIAS_HAND),
        },
        Target {
            name: "openb-pods",
            file_name: "openb_pod_list_default.csv",
            entry: Entry::Jobs(TraceKind::Openb),
            seeds: with(Vec::new(), OPENB_PODS_HAND),
        },
        Target {
            name: "sacct",
            file_name: "sacct.txt",
            entry: Entry::Jobs(TraceKind::Sacct),
            seeds: with(vec![SACCT_SAMPLE.as_bytes().to_vec()], SACCT_HAND),
        },
        Target {
            name: "kubectl",
            file_name: "pods.json",
            entry: Entry::Jobs(TraceKind::Kubectl),
            seeds: with(vec![KUBECTL_JOBS_SAMPLE.as_bytes().to_vec()], KUBECTL_HAND),
        },
        Target {
            name: "openb-nodes",
            file_name: "openb_node_list_gpu_node.csv",
            entry: Entry::OpenbNodes,
            seeds: with(Vec::new(), OPENB_NODES_HAND),
        },
        Target {
            name: "azure",
            file_name: "AzureLLMInferenceTrace_code.csv",
            entry: Entry::Azure,
            seeds: with(
                [cotenant_trace::BUNDLED_AZURE_CODE, cotenant_trace::BUNDLED_AZURE_CONV]
                    .iter()
                    .flat_map(|f| bundled(f))
                    .collect(),
                AZURE_HAND,
            ),
        },
        Target {
            name: "mooncake",
            file_name: "conversation_trace.jsonl",
            entry: Entry::Mooncake,
            seeds: with(Vec::new(), MOONCAKE_HAND),
        },
        Target {
            name: "cotenant_requests",
            file_name: "requests.jsonl",
            entry: Entry::CotenantRequests,
            seeds: with(Vec::new(), COTENANT_REQUESTS_HAND),
        },
        Target {
            name: "cluster_config",
            file_name: "cluster.toml",
            entry: Entry::ClusterConfig,
            seeds: with(Vec::new(), CLUSTER_HAND),
        },
        Target {
            name: "gavel_throughputs",
            file_name: "simulation_throughputs.json",
            entry: Entry::Throughputs,
            seeds: with(Vec::new(), THROUGHPUTS_HAND),
        },
        Target {
            name: "interference",
            file_name: "interference.txt",
            entry: Entry::Interference,
            seeds: with(bundled("sjf-bsbf/interference.txt"), INTERFERENCE_HAND),
        },
        Target {
            name: "availability",
            file_name: "availability.txt",
            entry: Entry::Availability,
            seeds: with(Vec::new(), AVAILABILITY_HAND),
        },
        Target {
            name: "results",
            file_name: "results.json",
            entry: Entry::Results,
            seeds: [SIM_RESULTS_SEED, SWEEP_SEED, SERVE_SWEEP_SEED, SERVE_RESULTS_SEED]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
        },
        Target {
            name: "tenant_config",
            file_name: "tenants.toml",
            entry: Entry::TenantConfig,
            seeds: with(Vec::new(), TENANT_HAND),
        },
        Target {
            name: "mig_geometry",
            file_name: "mig_geometry.toml",
            entry: Entry::MigGeometry,
            seeds: vec![cotenant_trace::mig::BUNDLED_GEOMETRY.0.as_bytes().to_vec()],
        },
        Target {
            name: "mig_curves",
            file_name: "mig_curves.toml",
            entry: Entry::MigCurves,
            seeds: vec![cotenant_trace::mig::BUNDLED_CURVES.0.as_bytes().to_vec()],
        },
    ]
}

const AVAILABILITY_HAND: &[&str] =
    &["# node leaves returns\n0 1h 3h\nv100-1 90m\n2 0s 10d # gone ten days\n"];

const INTERFERENCE_HAND: &[&str] = &["models a b # two\naccumulation-overhead 0.05\n\
     time-slice a a 1.9\ntime-slice a b 1.3\ntime-slice b a 1.6\ntime-slice b b 1.9\n\
     mps a a 1.5\nmps a b 1.1\nmps b a 1.2\nmps b b 1.5\n"];

/// A table that parsed keeps its limits: every xi in [1, MAX_XI], at most MAX_MODELS models.
fn check_interference(table: &cotenant_core::sharing::InterferenceTable) -> Vec<String> {
    use cotenant_sim::sharing::{MAX_MODELS, MAX_XI};
    let n = table.models.len();
    let mut problems = Vec::new();
    if n == 0 || n > MAX_MODELS {
        problems.push(format!("{n} models (limit {MAX_MODELS})"));
    }
    for mode in cotenant_core::SharingMode::ALL {
        for a in 0..n {
            for b in 0..n {
                match table.xi(mode, a, b) {
                    Some(xi) if (1.0..=MAX_XI).contains(&xi) => {}
                    other => problems.push(format!("xi {} {a}|{b} = {other:?}", mode.name())),
                }
            }
        }
    }
    problems
}

const PHILLY_HAND: &[&str] = &[
    "timestamp,duration,num_gpus,gpu_time,cluster\n2017-11-06 00:00:10,100.0,1,100.0,6214e9\n\
     2017-11-06 00:05:00,3600,8,28800,ee9e8c\r\n\n2017-11-07 12:00:00.5,1,2,2,103959\n",
    "\u{feff}timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 23:59:59,31622400,1048576,1,a\n",
];
const ITP_HAND: &[&str] = &[
    "job_id,submission_time,duration,num_gpu\n965d744f-0445-c1a8-12af-97e4c536c66e,1932025,2429,64\n\
     fb10987f-20ac-3703-eb67-146a77a6e17c,2000581,1532,1\n",
    "job_id,submission_time,duration,num_gpu\r\na,0,0,1.0\r\n\r\nb,0.5,1e3,2\r\n",
];
const GAVEL_HAND: &[&str] = &[
    "ResNet-18 (batch size 64)\tcmd %s\t--num_steps\t0\t4000\t12.5\t2\n",
    "A3C\tpython3 main.py %s\tdir\t--max_steps\t1\t1000\t4\t1.5\t100.0\t3600\n\n",
];
const POLLUX_HAND: &[&str] =
    &["name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n\
     deepspeech2-1,110,deepspeech2,6,320\nimagenet-2,200,imagenet,64,1024\n"];
const TIRESIAS_HAND: &[&str] =
    &["job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n0,1,0,606,vgg19,164,30\r\n\
     1,8,30,133,vgg11,147,23\r\n2,2,53,157,inception4,127,26\r\n"];
const OPENB_PODS_HAND: &[&str] = &[
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
     openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n\
     openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n\
     openb-pod-0002,8000,0,0,0,,BE,Running,5,,\n\
     openb-pod-0003,8000,30,2,1000,V100M16|V100M32,Burstable,Pending,7,,\n",
];
/// The hand-built operator samples of docs/examples (the pod list is larger than
/// [`MAX_INPUT`], so its shapes are in [`KUBECTL_HAND`] instead).
// Small runs saved by the binary (docs/fuzzing.md says how they were made).
const SIM_RESULTS_SEED: &str = include_str!("../seeds/sim-results.json");
const SWEEP_SEED: &str = include_str!("../seeds/sweep-results.json");
const SERVE_SWEEP_SEED: &str = include_str!("../seeds/serve-sweep-results.json");
const SERVE_RESULTS_SEED: &str = include_str!("../seeds/serve-results.json");
const SACCT_SAMPLE: &str = include_str!("../../../docs/examples/sacct-sample.txt");
const KUBECTL_JOBS_SAMPLE: &str = include_str!("../../../docs/examples/kubectl-jobs.json");
const SACCT_HAND: &[&str] = &[
    "JobID|User|Account|Partition|Submit|Start|End|Elapsed|State|AllocTRES|ReqTRES|\r\n\
     7|ana||gpu|2026-01-05T09:00:00|2026-01-05T09:00:05|2026-01-06T10:00:05|1-01:00:00|CANCELLED by 0|\
     cpu=2,gres/gpu:v100=2,gres/gpu:a100=1,mem=1.5T|gres/gpu=3|\r\n\
     8_[1-3%1]|bo|x|gpu|2026-01-05T09:00:00|Unknown|Unknown|00:00:00|PENDING||gres/gpu=1|\r\n\
     9+1|bo|x|gpu|2026-01-05T09:00:00|None|None|00:00|REQUEUE_HOLD||cpu=1|\r\n",
    "State|End|Start|Submit|Account|AllocTRES|JobID\n\
     TIMEOUT|2026-01-05T12:00:00|2026-01-05T10:00:00|2026-01-05T09:00:00|vision|gres/gpu=8,node=1|12\n\
     COMPLETED|2026-01-05T12:00:00|2026-01-05T10:00:00|2026-01-05T09:00:00|vision|cpu=8,node=1|13\n",
];
const KUBECTL_HAND: &[&str] = &[
    r#"{"apiVersion": "v1", "kind": "List", "items": [
{"kind": "Pod", "metadata": {"name": "a", "namespace": "nlp", "creationTimestamp": "2026-01-05T10:00:00Z",
  "ownerReferences": [{"kind": "Job", "name": "gone"}]},
 "spec": {"initContainers": [{"restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
   {"resources": {"requests": {"nvidia.com/gpu": 4}}}],
  "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}}]},
 "status": {"phase": "Succeeded", "startTime": "2026-01-05T12:00:30+02:00",
  "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-01-05T11:00:00.25Z"}}}]}},
{"kind": "Pod", "metadata": {"name": "b", "namespace": "cv", "creationTimestamp": "2026-01-05T10:05:00Z"},
 "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
 "status": {"phase": "Pending"}},
{"kind": "Job", "metadata": {"name": "j", "namespace": "nlp", "creationTimestamp": "2026-01-05T09:00:00Z"},
 "spec": {"parallelism": 2, "completions": 3, "template": {"spec": {"containers": [
   {"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}},
 "status": {"startTime": "2026-01-05T09:00:10Z", "conditions": [
   {"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-05T09:30:00Z"}]}},
{"kind": "Service", "metadata": {"name": "s"}}
]}
"#,
    r#"{"kind": "Pod", "metadata": {"name": "solo", "namespace": "x", "creationTimestamp": "2026-01-05T10:00:00Z"},
 "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
 "status": {"phase": "Failed", "startTime": "2026-01-05T10:00:01Z",
  "containerStatuses": [{"state": {"terminated": {"finishedAt": null}}}, {"state": {"running": {}}}]}}"#,
];
const OPENB_NODES_HAND: &[&str] =
    &["sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n\
     openb-node-0001,96000,786432,8,V100M32\nopenb-node-0002,32000,131072,0,\n"];
const AZURE_HAND: &[&str] =
    &["TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n\r\n\
     2023-11-16 18:15:50.9951690,396,0\r\n2023-11-16T18:16:00,0,7"];
const MOONCAKE_HAND: &[&str] =
    &["{\"timestamp\": 0, \"input_length\": 6758, \"output_length\": 500, \"hash_ids\": [0, 1, 2, 3]}\n\
     {\"timestamp\": 27482, \"input_length\": 7322, \"output_length\": 490, \"hash_ids\": [0, 14]}\n\n\
     {\"timestamp\": 30535.5, \"input_length\": 1, \"output_length\": 0}\n"];
const COTENANT_REQUESTS_HAND: &[&str] = &[
    "{\"arrival_s\": 100.0, \"prompt_tokens\": 900, \"output_tokens\": 30, \"tenant\": \"chat\"}\n\
     {\"arrival_s\": 100.5, \"prompt_tokens\": 4000, \"output_tokens\": 200, \"tenant\": \"batch\"}\n\n\
     {\"arrival_s\": 101.25, \"prompt_tokens\": 700, \"output_tokens\": 0, \"tenant\": \"chat\"}\n\
     {\"arrival_s\": 102, \"prompt_tokens\": 650, \"output_tokens\": 25, \"hash_ids\": [11, 12], \"block_tokens\": 16}\n",
    "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"tenant\": null, \"hash_ids\": null}",
];
const CLUSTER_HAND: &[&str] = &[
    "nodes=60,gpus-per-node=8,gpu=v100,cpus=48,mem-gib=512",
    "v100=16,k80=4,gpus-per-node=4",
    "k80=20",
    "[[nodes]]\ncount = 60\ngpu = \"v100\"\ngpus = 8\ncpus = 48\nmemory_gib = 512\nrack = 3\n\n\
     [[nodes]]\ngpu = \"k80\"\ngpus = 4\n\n[[tenants]]\nname = \"research\"\nweight = 2.0\n\
     gpu_quota = 120\ngpu_limit = 200\n",
];
const THROUGHPUTS_HAND: &[&str] = &["{\"v100\": {\"('ResNet-18 (batch size 64)', 1)\": {\"null\": 10.5, \
     \"('A3C', 1)\": [4.25, 1.0]}, \"('A3C', 1)\": {\"null\": 2.0}},\n\
     \"v100_unconsolidated\": {\"('ResNet-18 (batch size 64)', 1)\": {\"null\": 9.0}},\n\
     \"k80\": {\"('Transformer (batch size, 16)', 2)\": {\"null\": 0.3472236920519382}}}\n"];
const TENANT_HAND: &[&str] = &[
    "[[account]]\nname = \"root-a\"\nshares = 2.0\n\n[[account]]\nname = \"alice\"\nparent = \"root-a\"\n\n\
     [[queue]]\ntenant = \"vc1\"\ncohort = \"gpu\"\nweight = 1.5\nnominal = { v100 = 8 }\n\
     borrowing_limit = { v100 = 4 }\n",
];

/// Fuzzer settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    /// Wall-clock budget per target.
    pub time_per_target: Duration,
    /// Execution budget per target (whichever of the two ends first).
    pub max_execs: u64,
    /// How long one call may take before it is a finding.
    pub call_timeout: Duration,
    /// When set, each input is written here before it runs, so that a crash the
    /// harness cannot catch (an allocation failure under `ulimit -v`, a stack
    /// overflow) leaves its reproducer behind. Slower; used to replay a crashed run.
    pub save_current: Option<PathBuf>,
}

/// Largest input the mutator builds (bytes).
pub const MAX_INPUT: usize = 64 * 1024;

/// Corpus entries added per target at most (inputs with new errors).
pub const MAX_CORPUS: usize = 512;

/// What the oracle found wrong with one input.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FindingKind {
    Panic,
    Timeout,
    LimitViolation,
    BadError,
}

/// One finding, with its reproducer.
#[derive(Clone, Debug)]
pub struct Finding {
    pub target: &'static str,
    pub kind: FindingKind,
    pub detail: String,
    pub input: Vec<u8>,
}

/// Per-target figures.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub target: &'static str,
    pub execs: u64,
    pub ok: u64,
    pub distinct_errors: usize,
    pub panics: u64,
    pub timeouts: u64,
    pub limit_violations: u64,
    pub bad_errors: u64,
    /// The first input of each distinct finding (by kind and detail).
    pub findings: Vec<Finding>,
    pub elapsed: Duration,
}

impl Report {
    pub fn has_findings(&self) -> bool {
        !self.findings.is_empty()
    }
}

/// The result of one call, as the worker thread reports it.
#[derive(Debug)]
enum Outcome {
    Ok(Vec<String>),
    Err { message: String, problems: Vec<String> },
    Panic(String),
}

/// Runs one input through a target's entry point and checks the oracle (all but
/// the time bound). Inputs stay in memory; `path` (the target's file name) names them.
fn call(entry: Entry, file_name: &str, path: &Path, input: &[u8]) -> Outcome {
    let run = || -> Result<Vec<String>, Box<dyn Error>> {
        match entry {
            Entry::Jobs(kind) => {
                let w = parse_trace(kind, path, input.to_vec(), &Slice::all())?;
                Ok(check_workload(&w, kind))
            }
            Entry::OpenbNodes => {
                let (spec, _) = parse_openb_nodes(path, input.to_vec())?;
                Ok(check_cluster(&spec))
            }
            Entry::Azure => Ok(check_requests(&parse_azure_csv(input, file_name)?)),
            Entry::Mooncake => Ok(check_requests(&parse_mooncake_jsonl(input, file_name)?)),
            Entry::CotenantRequests => {
                let file = parse_request_bytes(input.to_vec(), file_name, None, "requests")?;
                Ok(file.tenants.iter().flat_map(|(_, trace)| check_requests(trace)).collect())
            }
            Entry::ClusterConfig => {
                let text = String::from_utf8_lossy(input);
                if is_toml(input) {
                    let config = cotenant_trace::parse_cluster_toml(&text, file_name)?;
                    Ok(check_cluster(&config.cluster))
                } else {
                    Ok(check_cluster(&cotenant_trace::parse_cluster_inline(&text)?))
                }
            }
            Entry::Interference => {
                let text = String::from_utf8_lossy(input);
                let table = cotenant_sim::sharing::parse_interference(&text, file_name)?;
                Ok(check_interference(&table))
            }
            Entry::Availability => {
                let text = String::from_utf8_lossy(input);
                let cluster = ClusterSpec::homogeneous("v100", 4, 8);
                let windows = cotenant_sim::faults::parse_availability(file_name, &text, &cluster)?;
                Ok(windows
                    .iter()
                    .filter(|d| {
                        d.node.index() >= 4
                            || d.returns.is_some_and(|r| r <= d.leaves)
                            || d.leaves.0 > cotenant_core::limits::MAX_RUN_SPAN.0
                    })
                    .map(|d| format!("window out of range: {d:?}"))
                    .collect())
            }
            Entry::Throughputs => {
                let text = String::from_utf8_lossy(input);
                let table = cotenant_trace::gavel_throughputs::parse_gavel_throughputs(&text, file_name)?;
                let mut problems = Vec::new();
                for key in table.job_types() {
                    for t in 0..table.gpu_types().len() {
                        for rate in
                            [table.consolidated(key, t), table.unconsolidated(key, t)].into_iter().flatten()
                        {
                            if !(rate.is_finite() && rate >= 0.0) {
                                problems.push(format!("{key}: rate {rate} on GPU type {t}"));
                            }
                        }
                    }
                }
                Ok(problems)
            }
            Entry::Results => {
                render_results(file_name, &String::from_utf8_lossy(input))?;
                Ok(Vec::new())
            }
            Entry::TenantConfig => {
                let text = String::from_utf8_lossy(input);
                let config = cotenant_trace::accounts::parse_tenant_config(&text, file_name)?;
                let mut problems = Vec::new();
                if config.accounts.len() > MAX_ACCOUNTS {
                    problems.push(format!("{} accounts > MAX_ACCOUNTS", config.accounts.len()));
                }
                Ok(problems)
            }
            Entry::MigGeometry => {
                let text = String::from_utf8_lossy(input);
                let mut problems = Vec::new();
                for geometry in cotenant_trace::mig::parse_mig_geometry(&text, file_name)? {
                    for partition in geometry.partitions() {
                        if let Err(error) = geometry.check_partition(&partition) {
                            problems.push(format!("enumerated partition {partition:?} is invalid: {error}"));
                        }
                    }
                }
                Ok(problems)
            }
            Entry::MigCurves => {
                let text = String::from_utf8_lossy(input);
                let mut problems = Vec::new();
                for class in cotenant_trace::mig::parse_slice_curves(&text, file_name)? {
                    if class.curve.speed(7) != 1.0 {
                        problems.push(format!("{}: 7g speed {}", class.curve.name, class.curve.speed(7)));
                    }
                }
                Ok(problems)
            }
        }
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(problems)) => Outcome::Ok(problems),
        Ok(Err(err)) => {
            let message = chain(err.as_ref());
            let mut problems = Vec::new();
            // An inline cluster spec has no file; everything else must name its input.
            let inline = entry == Entry::ClusterConfig && !is_toml(input);
            if !inline && !message.contains(file_name) {
                problems.push(format!("error does not name the file {file_name}: {message}"));
            }
            if let Some(line) = named_line(&message, file_name) {
                let lines = physical_lines(input);
                if line == 0 || line > lines {
                    problems
                        .push(format!("error names line {line}, but the input has {lines} lines: {message}"));
                }
            }
            if let Some(repeat) = repeated_segment(&message) {
                problems.push(format!("error repeats {repeat:?}: {message}"));
            }
            Outcome::Err { message, problems }
        }
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-string panic payload)".to_string());
            Outcome::Panic(text)
        }
    }
}

/// Reads a `cotenant report` input as the command does and renders its sections.
fn render_results(file_name: &str, text: &str) -> Result<String, Box<dyn Error>> {
    use cotenant_report::{results::ResultsFile, serve_report, sim_report, sweep_report, HtmlReport};
    let mut report = HtmlReport::new("fuzz");
    let serve = serde_json::from_str::<serde_json::Value>(text).ok().filter(serve_report::is_serve_input);
    match serve {
        Some(value) => serve_report::serve_report_sections(&mut report, file_name, &value, "")?,
        None => match cotenant_report::parse_results(file_name, text)? {
            ResultsFile::Sim(results) => sim_report::add_sim_sections(&mut report, &results, file_name, "")?,
            ResultsFile::Sweep(sweep) => {
                sweep_report::add_sweep_sections(&mut report, &sweep, file_name, "")?
            }
        },
    }
    Ok(report.render())
}

/// Whether a cluster-config input is TOML (more than one line, or a table) rather
/// than an inline spec.
fn is_toml(input: &[u8]) -> bool {
    let text = String::from_utf8_lossy(input);
    text.trim().contains('\n') || text.contains('[')
}

/// The line an error names right after the file name (`"f.csv line 17, ..."`).
pub fn named_line(message: &str, file_name: &str) -> Option<u64> {
    let rest = &message[message.find(file_name)? + file_name.len()..];
    let digits = rest.strip_prefix(" line ")?;
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Physical lines of an input as a reader counts them (gzip inputs are not mutated
/// into being, so bytes are the text): newlines plus one.
pub fn physical_lines(input: &[u8]) -> u64 {
    input.iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

/// The error and its sources joined by ": " (anyhow's `{:#}`).
pub fn chain(err: &dyn Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A `": "`-separated segment that immediately repeats (`"x: y: y"` -> `"y"`), on the
/// message's first line (later lines may quote the input, which may repeat itself).
pub fn repeated_segment(message: &str) -> Option<String> {
    let parts: Vec<&str> = message.lines().next().unwrap_or("").split(": ").collect();
    parts.windows(2).find(|w| w[0] == w[1] && w[0].len() > 3).map(|w| w[0].to_string())
}

/// Limits and invariants of a job workload read with `Slice::all()`.
pub fn check_workload(w: &Workload, kind: TraceKind) -> Vec<String> {
    let mut problems = Vec::new();
    if w.lines.len() != w.jobs.len() {
        problems.push(format!("{} lines for {} jobs", w.lines.len(), w.jobs.len()));
    }
    let max_work = match kind {
        TraceKind::Gavel => MAX_JOB_STEPS as f64,
        _ => MAX_JOB_DURATION.as_secs_f64(),
    };
    for (i, job) in w.jobs.iter().enumerate() {
        let at = w.lines.get(i).copied().unwrap_or(0);
        if job.id.0 as usize != i {
            problems.push(format!("job {i} has id {}", job.id.0));
        }
        if job.tenant.0 as usize >= w.tenants.len() {
            problems.push(format!("line {at}: tenant {} of {}", job.tenant.0, w.tenants.len()));
        }
        if job.gpus == 0 || job.gpus > MAX_GPUS_PER_JOB {
            problems.push(format!("line {at}: {} GPUs outside 1..=MAX_GPUS_PER_JOB", job.gpus));
        }
        if !(job.work.is_finite() && job.work >= 0.0 && job.work <= max_work) {
            problems.push(format!("line {at}: work {} outside 0..={max_work}", job.work));
        }
        if job.duration_estimate.is_some_and(|d| d > MAX_JOB_DURATION) {
            problems.push(format!("line {at}: estimate {:?} > MAX_JOB_DURATION", job.duration_estimate));
        }
        if let Some(t) = job.job_type {
            if t as usize >= w.job_types.len() {
                problems.push(format!("line {at}: job type {t} of {}", w.job_types.len()));
            }
        }
        if i > 0 && w.jobs[i - 1].arrival > job.arrival {
            problems.push(format!("line {at}: arrivals not sorted"));
        }
    }
    if let (Some(first), Some(last)) = (w.jobs.first(), w.jobs.last()) {
        if Span(last.arrival.0.saturating_sub(first.arrival.0)) > MAX_ARRIVAL_SPAN || first.arrival.0 != 0 {
            problems
                .push(format!("arrivals {}..{} us exceed MAX_ARRIVAL_SPAN", first.arrival.0, last.arrival.0));
        }
    }
    problems
}

/// Limits of a cluster.
pub fn check_cluster(spec: &ClusterSpec) -> Vec<String> {
    let mut problems = Vec::new();
    if spec.nodes.len() as u64 > MAX_CLUSTER_NODES {
        problems.push(format!("{} nodes > MAX_CLUSTER_NODES", spec.nodes.len()));
    }
    let total: u64 = spec.nodes.iter().map(|n| u64::from(n.gpus)).sum();
    if total > MAX_CLUSTER_GPUS {
        problems.push(format!("{total} GPUs > MAX_CLUSTER_GPUS"));
    }
    if let Some(n) = spec.nodes.iter().find(|n| n.gpus > MAX_GPUS_PER_NODE) {
        problems.push(format!("node {} has {} GPUs > MAX_GPUS_PER_NODE", n.name, n.gpus));
    }
    problems
}

/// Limits and invariants of a request trace.
pub fn check_requests(trace: &RequestTrace) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, r) in trace.records.iter().enumerate() {
        if u64::from(r.prompt_tokens) > MAX_PROMPT_TOKENS || r.prompt_tokens == 0 {
            problems.push(format!("line {}: {} prompt tokens", r.line, r.prompt_tokens));
        }
        if u64::from(r.output_tokens) > MAX_OUTPUT_TOKENS || r.output_tokens == 0 {
            problems.push(format!("line {}: {} output tokens", r.line, r.output_tokens));
        }
        if r.arrival_us > MAX_REQUEST_SPAN.0 {
            problems.push(format!("line {}: arrival {} us > MAX_REQUEST_SPAN", r.line, r.arrival_us));
        }
        if i > 0 && trace.records[i - 1].arrival_us > r.arrival_us {
            problems.push(format!("line {}: arrivals not sorted", r.line));
        }
    }
    problems
}

/// Numbers that break readers: zero, negatives, huge, non-finite, type limits.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1e308",
    "-1e308",
    "1e12",
    "6214e9",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "infinity",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "1048577",
    "31622401",
    "315619200",
    "100000000001",
    "2097153",
    "0.5",
    "1.0",
    "1e-308",
    "0x10",
    "+5",
    "",
];

/// Timestamps at and beyond the accepted range.
const DATES: &[&str] = &[
    "0001-01-01 00:00:00",
    "9999-12-31 23:59:59",
    "1970-01-01 00:00:00",
    "1989-12-31 23:59:59",
    "2100-01-01 00:00:01",
    "2017-02-29 00:00:00",
    "2017-11-06",
    "2017-11-06T25:61:61",
    "-001-01-01 00:00:00",
];

/// Bytes worth inserting: delimiters, line ends, quotes, broken UTF-8.
const BYTES: &[u8] = b",\t\n\r\"{}[]:=. -e\x00\xff\xfe\xc3\xe2";

/// Applies one random mutation to `input`; `other` is another corpus entry for splicing.
pub fn mutate(rng: &mut ChaCha8Rng, input: &mut Vec<u8>, other: &[u8]) {
    match rng.random_range(0..16) {
        0 if !input.is_empty() => {
            let i = rng.random_range(0..input.len());
            input[i] ^= 1 << rng.random_range(0..8);
        }
        1 => {
            let i = rng.random_range(0..=input.len());
            input.insert(i, BYTES[rng.random_range(0..BYTES.len())]);
        }
        2 if !input.is_empty() => {
            let i = rng.random_range(0..input.len());
            let n = rng.random_range(1..=(input.len() - i).min(16));
            input.drain(i..i + n);
        }
        3 => edit_lines(rng, input, |rng, lines| {
            if !lines.is_empty() {
                let i = rng.random_range(0..lines.len());
                lines.remove(i);
            }
        }),
        4 => edit_lines(rng, input, |rng, lines| {
            if !lines.is_empty() {
                let i = rng.random_range(0..lines.len());
                let copies = if rng.random_bool(0.9) { 1 } else { rng.random_range(2..64) };
                for _ in 0..copies {
                    lines.insert(i, lines[i].clone());
                }
            }
        }),
        5 => edit_lines(rng, input, |rng, lines| {
            if lines.len() > 1 {
                let (a, b) = (rng.random_range(0..lines.len()), rng.random_range(0..lines.len()));
                lines.swap(a, b);
            }
        }),
        6 => {
            // Splice: a line of another input replaces or joins one of ours.
            let theirs: Vec<&[u8]> = other.split(|&b| b == b'\n').collect();
            let line = theirs[rng.random_range(0..theirs.len())].to_vec();
            edit_lines(rng, input, move |rng, lines| {
                let i = rng.random_range(0..=lines.len());
                lines.insert(i, line);
            });
        }
        7 => edit_fields(rng, input, |rng, fields| {
            if fields.len() > 1 {
                let (a, b) = (rng.random_range(0..fields.len()), rng.random_range(0..fields.len()));
                fields.swap(a, b);
            }
        }),
        8 => edit_fields(rng, input, |rng, fields| {
            if !fields.is_empty() {
                let i = rng.random_range(0..fields.len());
                if rng.random_bool(0.5) {
                    fields.remove(i);
                } else {
                    fields.insert(i, fields[i].clone());
                }
            }
        }),
        9 | 10 => replace_number(rng, input),
        11 => replace_date(rng, input),
        12 => {
            if rng.random_bool(0.5) {
                let crlf: Vec<u8> = input
                    .iter()
                    .flat_map(|&b| if b == b'\n' { vec![b'\r', b'\n'] } else { vec![b] })
                    .collect();
                *input = crlf;
            } else {
                edit_lines(rng, input, |rng, lines| {
                    let i = rng.random_range(0..=lines.len());
                    lines.insert(i, if rng.random_bool(0.5) { Vec::new() } else { b"  \r".to_vec() });
                });
            }
        }
        13 => {
            let cut = rng.random_range(0..=input.len());
            input.truncate(cut);
        }
        14 => {
            // Invalid UTF-8 somewhere.
            let i = rng.random_range(0..=input.len());
            let bad: &[u8] = [&b"\xff"[..], b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"][rng.random_range(0..4)];
            input.splice(i..i, bad.iter().copied());
        }
        _ => {
            if rng.random_bool(0.1) {
                input.clear();
            } else {
                replace_number(rng, input);
            }
        }
    }
    input.truncate(MAX_INPUT);
}

fn edit_lines(
    rng: &mut ChaCha8Rng,
    input: &mut Vec<u8>,
    edit: impl FnOnce(&mut ChaCha8Rng, &mut Vec<Vec<u8>>),
) {
    let mut lines: Vec<Vec<u8>> = input.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    edit(rng, &mut lines);
    *input = lines.join(&b'\n');
}

fn edit_fields(
    rng: &mut ChaCha8Rng,
    input: &mut Vec<u8>,
    edit: impl FnOnce(&mut ChaCha8Rng, &mut Vec<Vec<u8>>),
) {
    let delimiter = if input.contains(&b'\t') { b'\t' } else { b',' };
    edit_lines(rng, input, |rng, lines| {
        if lines.is_empty() {
            return;
        }
        let i = rng.random_range(0..lines.len());
        let mut fields: Vec<Vec<u8>> = lines[i].split(|&b| b == delimiter).map(<[u8]>::to_vec).collect();
        edit(rng, &mut fields);
        lines[i] = fields.join(&delimiter);
    });
}

/// Byte ranges of number-like tokens (digits, with `.eE+-` inside).
fn number_spans(input: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < input.len() {
        if input[i].is_ascii_digit() {
            let start = if i > 0 && input[i - 1] == b'-' { i - 1 } else { i };
            let mut end = i;
            while end < input.len() && (input[end].is_ascii_digit() || b".eE+".contains(&input[end])) {
                end += 1;
            }
            spans.push((start, end));
            i = end;
        } else {
            i += 1;
        }
    }
    spans
}

fn replace_number(rng: &mut ChaCha8Rng, input: &mut Vec<u8>) {
    let spans = number_spans(input);
    if spans.is_empty() {
        return;
    }
    let (start, end) = spans[rng.random_range(0..spans.len())];
    let value = EXTREMES[rng.random_range(0..EXTREMES.len())];
    input.splice(start..end, value.bytes());
}

fn replace_date(rng: &mut ChaCha8Rng, input: &mut Vec<u8>) {
    // A date is four digits, '-', two digits, '-', two digits.
    let starts: Vec<usize> = (0..input.len().saturating_sub(9))
        .filter(|&i| {
            let w = &input[i..i + 10];
            w[..4].iter().all(u8::is_ascii_digit) && w[4] == b'-' && w[7] == b'-'
        })
        .collect();
    let date = DATES[rng.random_range(0..DATES.len())];
    if starts.is_empty() {
        replace_number(rng, input);
        return;
    }
    let start = starts[rng.random_range(0..starts.len())];
    // Replace the date and, when present, the time after it.
    let mut end = start + 10;
    if input.get(end).is_some_and(|&b| b == b' ' || b == b'T') {
        let time_end = input[end + 1..]
            .iter()
            .position(|&b| !(b.is_ascii_digit() || b == b':' || b == b'.'))
            .map_or(input.len(), |p| end + 1 + p);
        end = time_end;
    }
    input.splice(start..end, date.bytes());
}

/// A stable 64-bit seed for one target from the run's seed and its name (FNV-1a).
pub fn target_seed(seed: u64, name: &str) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for b in name.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Error text reduced to its kind, to count distinct errors: the field name and
/// the first words of the message, without digits or quoted values.
pub fn error_shape(message: &str) -> String {
    let rest = message.find(" line ").map_or(message, |i| &message[i..]);
    let (location, text) = rest.split_once(": ").unwrap_or(("", rest));
    let field: String = location.split_once(", field ").map_or("", |(_, f)| f).chars().take(24).collect();
    let text = text.split(['(', ':', ',']).next().unwrap_or("");
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !w.contains(|c: char| c.is_ascii_digit() || c == '"' || c == '`' || c == '\''))
        .take(5)
        .collect();
    format!("{field}: {}", words.join(" "))
}

type Job = (Vec<u8>, mpsc::Sender<Outcome>);

/// Fuzzes one target. Panics inside the target are caught and reported; a call
/// that overruns `call_timeout` ends the run with a `Timeout` finding (its worker
/// thread is abandoned).
pub fn run_target(target: &Target, config: &Config) -> Report {
    let started = Instant::now();
    let mut report = Report { target: target.name, ..Report::default() };
    let path = PathBuf::from(target.file_name);
    let (entry, file_name) = (target.entry, target.file_name);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let worker_path = path.clone();
    let worker = std::thread::Builder::new().name(format!("fuzz-{}", target.name)).spawn(move || {
        for (input, reply) in job_rx {
            let outcome = call(entry, file_name, &worker_path, &input);
            if reply.send(outcome).is_err() {
                break;
            }
        }
    });
    if worker.is_err() {
        report.findings.push(Finding {
            target: target.name,
            kind: FindingKind::Timeout,
            detail: "could not start a worker thread".into(),
            input: Vec::new(),
        });
        return report;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(target_seed(config.seed, target.name));
    let mut corpus: Vec<Vec<u8>> = target.seeds.clone();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let seeds = corpus.len();
    let mut errors: BTreeSet<String> = BTreeSet::new();
    // COTENANT_FUZZ_SHOW_ERRORS=1 prints each new kind of error (to judge messages).
    let show_errors = std::env::var_os("COTENANT_FUZZ_SHOW_ERRORS").is_some();
    let mut seen: BTreeMap<(FindingKind, String), ()> = BTreeMap::new();
    let mut record = |report: &mut Report, kind: FindingKind, detail: String, input: &[u8]| {
        match kind {
            FindingKind::Panic => report.panics += 1,
            FindingKind::Timeout => report.timeouts += 1,
            FindingKind::LimitViolation => report.limit_violations += 1,
            FindingKind::BadError => report.bad_errors += 1,
        }
        let key = (kind.clone(), error_shape(&detail));
        if seen.insert(key, ()).is_none() && report.findings.len() < 50 {
            report.findings.push(Finding { target: target.name, kind, detail, input: input.to_vec() });
        }
    };
    while report.execs < config.max_execs && started.elapsed() < config.time_per_target {
        // The seeds themselves run first, unmutated.
        let input = if (report.execs as usize) < seeds {
            corpus[report.execs as usize].clone()
        } else {
            let mut input = corpus[rng.random_range(0..corpus.len())].clone();
            let other = corpus[rng.random_range(0..corpus.len())].clone();
            for _ in 0..rng.random_range(1..=4) {
                mutate(&mut rng, &mut input, &other);
            }
            input
        };
        report.execs += 1;
        if let Some(current) = &config.save_current {
            let _ = std::fs::write(current, &input);
        }
        let (reply_tx, reply_rx) = mpsc::channel();
        if job_tx.send((input.clone(), reply_tx)).is_err() {
            break;
        }
        match reply_rx.recv_timeout(config.call_timeout) {
            Ok(Outcome::Ok(problems)) => {
                report.ok += 1;
                // Inputs that still parse are good bases for further mutation.
                if problems.is_empty() && corpus.len() < seeds + MAX_CORPUS && rng.random_bool(0.25) {
                    corpus.push(input.clone());
                }
                for p in problems {
                    record(&mut report, FindingKind::LimitViolation, p, &input);
                }
            }
            Ok(Outcome::Err { message, problems }) => {
                for p in problems {
                    record(&mut report, FindingKind::BadError, p, &input);
                }
                let shape = error_shape(&message);
                if show_errors && !errors.contains(&shape) {
                    eprintln!("{}: new error: {message}", target.name);
                }
                if errors.insert(shape) && corpus.len() < seeds + MAX_CORPUS {
                    corpus.push(input);
                }
            }
            Ok(Outcome::Panic(message)) => record(&mut report, FindingKind::Panic, message, &input),
            Err(_) => {
                record(
                    &mut report,
                    FindingKind::Timeout,
                    format!("no answer within {:?}", config.call_timeout),
                    &input,
                );
                break;
            }
        }
    }
    report.distinct_errors = errors.len();
    report.elapsed = started.elapsed();
    report
}

/// Silences the default panic message (panics are caught and reported as findings).
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}

/// An input as a Rust byte-string literal, for reports and regression tests.
pub fn escape(input: &[u8]) -> String {
    format!("b\"{}\"", input.escape_ascii())
}
