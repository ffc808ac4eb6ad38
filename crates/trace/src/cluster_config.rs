//! Cluster and tenant configuration: an inline spec for the command line, or a
//! TOML file with node groups and tenants.
//!
//! Inline, one of two forms (keys separated by commas):
//! - `nodes=60,gpus-per-node=8[,gpu=v100][,cpus=48][,mem-gib=512]`: identical nodes.
//!   The GPU type defaults to `gpu`; CPUs and memory default to 0 ("not stated").
//! - `v100=16,k80=4[,gpus-per-node=8][,cpus=..][,mem-gib=..]`: GPU counts per type.
//!   Each type's GPUs are packed into nodes of `gpus-per-node`, the last node
//!   taking the remainder. Without `gpus-per-node`, a type with at most 8 GPUs
//!   sits on one node and a larger one is cut into nodes of 8.
//!
//! Racks are groups of 16 nodes in order unless a TOML group names its rack.
//!
//! Sizes are bounded before anything is allocated: at most [`MAX_CLUSTER_NODES`]
//! nodes, [`max_gpus_per_node`] GPUs per node and [`MAX_CLUSTER_GPUS`] GPUs in all
//! (`cotenant_core::limits`), with checked arithmetic. Unknown keys are errors
//! with a "did you mean" suggestion.

use std::path::Path;

use cotenant_core::limits::{MAX_CLUSTER_GPUS, MAX_CLUSTER_NODES};
use cotenant_core::{ClusterSpec, TenantSpec};
use serde::Deserialize;

use crate::error::TraceError;
use crate::suggest::{did_you_mean, suggestion, toml_error};
use crate::text::read_text;

/// Most GPUs on one node: the documented limit, or what the cluster model's
/// per-node bitmask holds, whichever is lower.
pub fn max_gpus_per_node() -> u32 {
    cotenant_core::limits::MAX_GPUS_PER_NODE.min(cotenant_core::cluster::MAX_GPUS_PER_NODE)
}

/// Running totals of a cluster being built, checked against the limits before
/// each group of nodes is allocated.
#[derive(Debug, Default)]
struct Budget {
    nodes: u64,
    gpus: u64,
}

impl Budget {
    /// Admits `count` nodes of `gpus` GPUs each, or names `key` and the limit.
    fn admit(&mut self, context: &str, key: &str, count: u64, gpus: u32) -> Result<(), TraceError> {
        let per_node = max_gpus_per_node();
        if gpus > per_node {
            return Err(TraceError::config(
                context,
                key,
                format!("{gpus} GPUs per node; at most {per_node} per node are supported"),
            ));
        }
        let nodes = self.nodes.checked_add(count).filter(|&n| n <= MAX_CLUSTER_NODES);
        let total = count.checked_mul(u64::from(gpus)).and_then(|g| g.checked_add(self.gpus));
        let Some(nodes) = nodes else {
            return Err(TraceError::config(
                context,
                key,
                format!("{count} nodes make the cluster larger than {MAX_CLUSTER_NODES} nodes, the most supported"),
            ));
        };
        match total {
            Some(total) if total <= MAX_CLUSTER_GPUS => {
                self.nodes = nodes;
                self.gpus = total;
                Ok(())
            }
            _ => Err(TraceError::config(
                context,
                key,
                format!(
                    "{count} nodes x {gpus} GPUs make the cluster larger than {MAX_CLUSTER_GPUS} GPUs, the most supported"
                ),
            )),
        }
    }
}

/// A cluster and, when the config names them, its tenants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterConfig {
    pub cluster: ClusterSpec,
    /// Empty when the config does not declare tenants (the workload's own are used).
    pub tenants: Vec<TenantSpec>,
}

/// GPUs per node when the per-type inline form does not say.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// `--cluster` argument: a TOML file when it ends in `.toml` or names an
/// existing file, otherwise an inline spec.
pub fn parse_cluster_arg(arg: &str) -> Result<ClusterConfig, TraceError> {
    let path = Path::new(arg);
    if arg.ends_with(".toml") || path.is_file() {
        return read_cluster_toml(path);
    }
    Ok(ClusterConfig { cluster: parse_cluster_inline(arg)?, tenants: Vec::new() })
}

const CONTEXT: &str = "cluster spec";

/// Settings of the inline forms.
const SETTING_KEYS: [&str; 5] = ["nodes", "gpus-per-node", "gpu", "cpus", "mem-gib"];

/// Words that look like settings, not GPU types: catching `node=60` here
/// stops it from silently becoming 60 GPUs of type "node".
const NOT_GPU_TYPES: [&str; 12] = [
    "node",
    "gpu",
    "gpus",
    "gpu-per-node",
    "gpus_per_node",
    "cpu",
    "mem",
    "memory",
    "memory-gib",
    "mem_gib",
    "rack",
    "racks",
];

/// Parses an inline cluster spec (see the module doc).
pub fn parse_cluster_inline(text: &str) -> Result<ClusterSpec, TraceError> {
    let pairs = key_values(text, CONTEXT)?;
    let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let cpus = get("cpus").map(|v| parse_u32(CONTEXT, "cpus", v)).transpose()?.unwrap_or(0);
    let mem_gib = get("mem-gib").map(|v| parse_u32(CONTEXT, "mem-gib", v)).transpose()?.unwrap_or(0);
    let gpus_per_node =
        get("gpus-per-node").map(|v| parse_positive(CONTEXT, "gpus-per-node", v)).transpose()?;
    let mut spec = ClusterSpec::default();
    let mut budget = Budget::default();
    if let Some(nodes) = get("nodes") {
        for (key, _) in &pairs {
            if !SETTING_KEYS.contains(key) {
                return Err(TraceError::config(
                    CONTEXT,
                    key,
                    format!(
                        "unknown key with nodes= (known: nodes, gpus-per-node, gpu, cpus, mem-gib){}",
                        suggestion(key, SETTING_KEYS)
                    ),
                ));
            }
        }
        let nodes = parse_positive(CONTEXT, "nodes", nodes)?;
        let per_node = gpus_per_node
            .ok_or_else(|| TraceError::config(CONTEXT, "gpus-per-node", "required with nodes="))?;
        budget.admit(CONTEXT, "nodes", u64::from(nodes), per_node)?;
        let gpu = spec.gpu_type_id(get("gpu").unwrap_or("gpu"));
        spec.add_nodes(gpu, nodes, per_node, cpus, mem_gib);
    } else {
        if let Some(per_node) = gpus_per_node {
            budget.admit(CONTEXT, "gpus-per-node", 0, per_node)?;
        }
        for (key, value) in &pairs {
            if ["gpus-per-node", "cpus", "mem-gib"].contains(key) {
                continue;
            }
            if NOT_GPU_TYPES.contains(key) || did_you_mean(key, SETTING_KEYS).is_some() {
                return Err(TraceError::config(
                    CONTEXT,
                    key,
                    format!(
                        "not a GPU type; use nodes=N,gpus-per-node=G[,gpu=TYPE] or TYPE=COUNT,...{}",
                        suggestion(key, SETTING_KEYS)
                    ),
                ));
            }
            let count = parse_positive(CONTEXT, key, value)?;
            if u64::from(count) > MAX_CLUSTER_GPUS.saturating_sub(budget.gpus) {
                return Err(TraceError::config(
                    CONTEXT,
                    key,
                    format!("{count} GPUs make the cluster larger than {MAX_CLUSTER_GPUS} GPUs, the most supported"),
                ));
            }
            let gpu = spec.gpu_type_id(key);
            pack_gpus(&mut spec, &mut budget, gpu, count, gpus_per_node, cpus, mem_gib)?;
        }
    }
    validate(&spec, CONTEXT)?;
    Ok(spec)
}

fn pack_gpus(
    spec: &mut ClusterSpec,
    budget: &mut Budget,
    gpu: cotenant_core::GpuTypeId,
    count: u32,
    per_node: Option<u32>,
    cpus: u32,
    mem: u32,
) -> Result<(), TraceError> {
    let per_node =
        per_node.unwrap_or(if count <= DEFAULT_GPUS_PER_NODE { count } else { DEFAULT_GPUS_PER_NODE });
    let key = spec.gpu_types.get(gpu.index()).cloned().unwrap_or_default();
    budget.admit(CONTEXT, &key, u64::from(count / per_node), per_node)?;
    spec.add_nodes(gpu, count / per_node, per_node, cpus, mem);
    let remainder = count % per_node;
    if remainder > 0 {
        budget.admit(CONTEXT, &key, 1, remainder)?;
        spec.add_nodes(gpu, 1, remainder, cpus, mem);
    }
    Ok(())
}

/// Splits `k=v,k=v`, rejecting empty keys, missing `=` and duplicates.
pub(crate) fn key_values<'a>(text: &'a str, context: &str) -> Result<Vec<(&'a str, &'a str)>, TraceError> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .map(|(k, v)| (k.trim(), v.trim()))
            .ok_or_else(|| TraceError::config(context, part, "expected key=value"))?;
        if key.is_empty() {
            return Err(TraceError::config(context, part, "empty key"));
        }
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(TraceError::config(context, key, "given twice"));
        }
        pairs.push((key, value));
    }
    if pairs.is_empty() {
        return Err(TraceError::config(context, "", "empty spec"));
    }
    Ok(pairs)
}

pub(crate) fn parse_u32(context: &str, key: &str, value: &str) -> Result<u32, TraceError> {
    value.parse().map_err(|_| {
        TraceError::config(context, key, format!("expected a non-negative integer, got {value:?}"))
    })
}

pub(crate) fn parse_positive(context: &str, key: &str, value: &str) -> Result<u32, TraceError> {
    match value.parse::<u32>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(TraceError::config(context, key, format!("expected a positive integer, got {value:?}"))),
    }
}

fn validate(spec: &ClusterSpec, context: &str) -> Result<(), TraceError> {
    spec.validate().map_err(|e| TraceError::config(context, "nodes", e.to_string()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlConfig {
    #[serde(default)]
    nodes: Vec<TomlNodeGroup>,
    #[serde(default)]
    tenants: Vec<TomlTenant>,
    /// The network (crate::topology_config, docs/topology.md).
    topology: Option<crate::topology_config::TomlTopology>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlNodeGroup {
    #[serde(default = "one")]
    count: u32,
    gpu: String,
    gpus: u32,
    #[serde(default)]
    cpus: u32,
    #[serde(default)]
    memory_gib: u32,
    rack: Option<u32>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlTenant {
    name: String,
    #[serde(default = "unit_weight")]
    weight: f64,
    gpu_quota: Option<u32>,
    gpu_limit: Option<u32>,
}

fn unit_weight() -> f64 {
    1.0
}

/// Reads a TOML cluster file:
///
/// ```toml
/// [[nodes]]            # one group of identical nodes; repeat for more
/// count = 60           # default 1
/// gpu = "v100"         # GPU type name
/// gpus = 8             # GPUs per node
/// cpus = 48            # optional, default 0 (not stated)
/// memory_gib = 512     # optional, default 0 (not stated)
/// rack = 3             # optional; default: racks of 16 nodes in order
///
/// [[tenants]]          # optional
/// name = "research"
/// weight = 2.0         # default 1
/// gpu_quota = 120      # optional
/// gpu_limit = 200      # optional
/// ```
/// Unknown keys are errors that name the key.
pub fn read_cluster_toml(path: &Path) -> Result<ClusterConfig, TraceError> {
    let text = read_text(path)?;
    parse_cluster_toml(&text, &path.display().to_string())
}

/// Parses TOML cluster text; `source` names it in errors.
pub fn parse_cluster_toml(text: &str, source: &str) -> Result<ClusterConfig, TraceError> {
    let config: TomlConfig =
        toml::from_str(text).map_err(|e| TraceError::Toml(toml_error(text, source, &e)))?;
    let mut cluster = ClusterSpec::default();
    let mut budget = Budget::default();
    for (i, group) in config.nodes.iter().enumerate() {
        let context = format!("{source} [[nodes]] #{}", i + 1);
        if group.gpus == 0 {
            return Err(TraceError::config(&context, "gpus", "must be at least 1"));
        }
        if group.gpu.trim().is_empty() {
            return Err(TraceError::config(&context, "gpu", "must name a GPU type"));
        }
        budget.admit(&context, "count", u64::from(group.count), group.gpus)?;
        let first = cluster.nodes.len();
        let gpu = cluster.gpu_type_id(group.gpu.trim());
        cluster.add_nodes(gpu, group.count, group.gpus, group.cpus, group.memory_gib);
        if let Some(rack) = group.rack {
            cluster.nodes[first..].iter_mut().for_each(|n| n.rack = rack);
        }
    }
    validate(&cluster, source)?;
    if let Some(table) = config.topology {
        let context = format!("{source} [topology]");
        crate::topology_config::table_config(table, source)?.apply(&mut cluster, &context)?;
    }
    let tenants = tenants_from_toml(&config.tenants, source)?;
    Ok(ClusterConfig { cluster, tenants })
}

fn tenants_from_toml(tenants: &[TomlTenant], source: &str) -> Result<Vec<TenantSpec>, TraceError> {
    let mut out: Vec<TenantSpec> = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        let context = format!("{source} [[tenants]] #{}", i + 1);
        if t.name.trim().is_empty() {
            return Err(TraceError::config(&context, "name", "must not be empty"));
        }
        if out.iter().any(|o| o.name == t.name) {
            return Err(TraceError::config(&context, "name", format!("tenant {:?} declared twice", t.name)));
        }
        if !(t.weight.is_finite() && t.weight > 0.0) {
            return Err(TraceError::config(
                &context,
                "weight",
                format!("must be a positive number, got {}", t.weight),
            ));
        }
        out.push(TenantSpec {
            name: t.name.clone(),
            weight: t.weight,
            gpu_quota: t.gpu_quota,
            gpu_limit: t.gpu_limit,
        });
    }
    Ok(out)
}
