//! The network of a cluster (docs/topology.md): a `[topology]` table in the cluster
//! TOML, or the inline form `--topology spines=8,oversubscription=2,...` (same keys,
//! dashes for underscores).
//!
//! Keys: `leaf` (nodes per leaf switch; re-racks the nodes in order; default: the
//! nodes' racks), `spines` (8), `oversubscription` (1), `nic-gbps` (400), `uplink-gbps`
//! (default: leaf nodes x NIC / (spines x oversubscription)), `nvlink-domain` (GPUs per
//! NVLink domain; default one node), `nvlink-gbps` (7200, per GPU), `torus` (`XxYxZ`
//! nodes), `torus-link-gbps` (default the NIC), `routing` (`ecmp` or `vclos`).

use std::path::Path;

use cotenant_core::topology::{Routing, Topology, Torus};
use cotenant_core::ClusterSpec;
use serde::Deserialize;

use crate::cluster_config::key_values;
use crate::error::TraceError;
use crate::suggest::{suggestion, toml_error};
use crate::text::read_text;

/// A topology and how it re-racks the nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopologyConfig {
    pub topology: Topology,
    /// Nodes per leaf, in node order (`None`: keep the nodes' racks).
    pub nodes_per_leaf: Option<u32>,
}

const KEYS: [&str; 10] = [
    "leaf",
    "spines",
    "oversubscription",
    "nic-gbps",
    "uplink-gbps",
    "nvlink-domain",
    "nvlink-gbps",
    "torus",
    "torus-link-gbps",
    "routing",
];

/// The `[topology]` table of a cluster TOML (keys as inline, with underscores).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TomlTopology {
    leaf: Option<u32>,
    spines: Option<u32>,
    oversubscription: Option<f64>,
    nic_gbps: Option<f64>,
    uplink_gbps: Option<f64>,
    nvlink_domain: Option<u32>,
    nvlink_gbps: Option<f64>,
    torus: Option<String>,
    torus_link_gbps: Option<f64>,
    routing: Option<String>,
}

fn number(context: &str, key: &str, value: &str) -> Result<f64, TraceError> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(TraceError::config(context, key, format!("expected a positive number, got {value:?}"))),
    }
}

fn count(context: &str, key: &str, value: &str) -> Result<u32, TraceError> {
    match value.parse::<u32>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(TraceError::config(context, key, format!("expected a positive integer, got {value:?}"))),
    }
}

fn routing(context: &str, value: &str) -> Result<Routing, TraceError> {
    match value {
        "ecmp" => Ok(Routing::Ecmp),
        "vclos" => Ok(Routing::Vclos),
        other => {
            Err(TraceError::config(context, "routing", format!("expected ecmp or vclos, got {other:?}")))
        }
    }
}

fn torus_dims(context: &str, value: &str) -> Result<[u32; 3], TraceError> {
    let parts: Vec<&str> = value.split('x').collect();
    let dims: Option<Vec<u32>> =
        parts.iter().map(|p| p.trim().parse::<u32>().ok().filter(|&d| d > 0)).collect();
    match dims {
        Some(d) if d.len() == 3 => Ok([d[0], d[1], d[2]]),
        _ => Err(TraceError::config(
            context,
            "torus",
            format!("expected XxYxZ (three positive integers), got {value:?}"),
        )),
    }
}

impl TomlTopology {
    fn into_config(self, context: &str) -> Result<TopologyConfig, TraceError> {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        let mut push = |k: &'static str, v: Option<String>| {
            if let Some(v) = v {
                pairs.push((k, v));
            }
        };
        push("leaf", self.leaf.map(|v| v.to_string()));
        push("spines", self.spines.map(|v| v.to_string()));
        push("oversubscription", self.oversubscription.map(|v| v.to_string()));
        push("nic-gbps", self.nic_gbps.map(|v| v.to_string()));
        push("uplink-gbps", self.uplink_gbps.map(|v| v.to_string()));
        push("nvlink-domain", self.nvlink_domain.map(|v| v.to_string()));
        push("nvlink-gbps", self.nvlink_gbps.map(|v| v.to_string()));
        push("torus", self.torus);
        push("torus-link-gbps", self.torus_link_gbps.map(|v| v.to_string()));
        push("routing", self.routing);
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        from_pairs(&refs, context, "_")
    }
}

/// Parses the inline form (`key=value,...`).
pub fn parse_topology_inline(text: &str) -> Result<TopologyConfig, TraceError> {
    let context = "--topology";
    from_pairs(&key_values(text, context)?, context, "-")
}

/// `--topology`: a TOML file with a `[topology]` table when the argument ends in `.toml`
/// or names a file, else the inline form.
pub fn parse_topology_arg(arg: &str) -> Result<TopologyConfig, TraceError> {
    let path = Path::new(arg);
    if arg.ends_with(".toml") || path.is_file() {
        let text = read_text(path)?;
        let source = path.display().to_string();
        #[derive(Deserialize)]
        struct File {
            topology: Option<TomlTopology>,
        }
        let file: File =
            toml::from_str(&text).map_err(|e| TraceError::Toml(toml_error(&text, &source, &e)))?;
        let table = file
            .topology
            .ok_or_else(|| TraceError::config(&source, "topology", "the file has no [topology] table"))?;
        return table_config(table, &source);
    }
    parse_topology_inline(arg)
}

/// The `[topology]` table of a file named `source`.
pub(crate) fn table_config(table: TomlTopology, source: &str) -> Result<TopologyConfig, TraceError> {
    table.into_config(&format!("{source} [topology]"))
}

fn from_pairs(pairs: &[(&str, &str)], context: &str, sep: &str) -> Result<TopologyConfig, TraceError> {
    let mut config = TopologyConfig::default();
    let name = |key: &str| key.replace('-', sep);
    let t = &mut config.topology;
    let mut torus_link = None;
    for &(key, value) in pairs {
        let shown = name(key);
        match key {
            "leaf" => config.nodes_per_leaf = Some(count(context, &shown, value)?),
            "spines" => t.spines = count(context, &shown, value)?,
            "oversubscription" => {
                let v = number(context, &shown, value)?;
                if v < 1.0 {
                    return Err(TraceError::config(
                        context,
                        &shown,
                        format!("must be at least 1, got {value}"),
                    ));
                }
                t.oversubscription = v;
            }
            "nic-gbps" => t.nic_gbps = number(context, &shown, value)?,
            "uplink-gbps" => t.uplink_gbps = Some(number(context, &shown, value)?),
            "nvlink-domain" => t.nvlink_domain_gpus = count(context, &shown, value)?,
            "nvlink-gbps" => t.nvlink_gbps = number(context, &shown, value)?,
            "torus" => t.torus = Some(Torus { dims: torus_dims(context, value)?, link_gbps: 0.0 }),
            "torus-link-gbps" => torus_link = Some(number(context, &shown, value)?),
            "routing" => t.routing = routing(context, value)?,
            other => {
                return Err(TraceError::config(
                    context,
                    other,
                    format!("unknown topology key (known: {}){}", KEYS.join(", "), suggestion(other, KEYS)),
                ))
            }
        }
    }
    let nic = t.nic_gbps;
    match (&mut t.torus, torus_link) {
        (Some(torus), link) => torus.link_gbps = link.unwrap_or(nic),
        (None, Some(_)) => {
            return Err(TraceError::config(context, &name("torus-link-gbps"), "given without torus"));
        }
        (None, None) => {}
    }
    Ok(config)
}

impl TopologyConfig {
    /// Puts the topology on `spec` (re-racking its nodes if `leaf` is given) and checks
    /// that it fits; `context` names the file or flag in errors.
    pub fn apply(&self, spec: &mut ClusterSpec, context: &str) -> Result<(), TraceError> {
        if let Some(per_leaf) = self.nodes_per_leaf {
            for (n, node) in spec.nodes.iter_mut().enumerate() {
                node.rack = n as u32 / per_leaf;
            }
        }
        self.topology.validate(spec).map_err(|e| match e {
            cotenant_core::topology::TopologyError::Field { field, message } => {
                TraceError::config(context, field, message)
            }
        })?;
        spec.topology = Some(self.topology.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_toml_agree() {
        let inline = parse_topology_inline(
            "leaf=4,spines=2,oversubscription=2,nic-gbps=100,routing=vclos,nvlink-domain=16",
        )
        .unwrap();
        let text = "[topology]\nleaf = 4\nspines = 2\noversubscription = 2.0\nnic_gbps = 100.0\nrouting = \"vclos\"\nnvlink_domain = 16\n";
        let table: toml::Table = toml::from_str(text).unwrap();
        let table: TomlTopology = table["topology"].clone().try_into().unwrap();
        assert_eq!(table_config(table, "c.toml").unwrap(), inline);
        assert_eq!(inline.nodes_per_leaf, Some(4));
        assert_eq!(inline.topology.routing, Routing::Vclos);
    }

    #[test]
    fn cluster_toml_takes_a_topology_table() {
        let text = "[[nodes]]\ncount = 8\ngpu = \"h100\"\ngpus = 8\n\n[topology]\nleaf = 4\nspines = 2\n";
        let config = crate::cluster_config::parse_cluster_toml(text, "c.toml").unwrap();
        let topology = config.cluster.topology.expect("a topology");
        assert_eq!(topology.spines, 2);
        assert_eq!(
            config.cluster.nodes.iter().map(|n| n.rack).collect::<Vec<_>>(),
            vec![0, 0, 0, 0, 1, 1, 1, 1]
        );
        let err =
            crate::cluster_config::parse_cluster_toml(&text.replace("spines = 2", "spines = 0"), "c.toml")
                .unwrap_err()
                .to_string();
        assert!(err.contains("c.toml [topology]") && err.contains("spines"), "{err}");
        let err =
            crate::cluster_config::parse_cluster_toml(&text.replace("spines = 2", "spine = 2"), "c.toml")
                .unwrap_err()
                .to_string();
        assert!(err.contains("c.toml") && err.contains("spine"), "{err}");
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse_topology_inline("spines=0").unwrap_err().to_string();
        assert!(err.contains("spines"), "{err}");
        let err = parse_topology_inline("spine=2").unwrap_err().to_string();
        assert!(err.contains("spines"), "did you mean: {err}");
        let err = parse_topology_inline("torus=4x4").unwrap_err().to_string();
        assert!(err.contains("torus") && err.contains("XxYxZ"), "{err}");
        let config = parse_topology_inline("torus=2x2x2").unwrap();
        let mut spec = ClusterSpec::homogeneous("h100", 9, 8);
        let err = config.apply(&mut spec, "--topology").unwrap_err().to_string();
        assert!(err.contains("--topology") && err.contains("9 nodes"), "{err}");
    }
}
