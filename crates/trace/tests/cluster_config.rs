//! Cluster specs, inline and TOML.

mod common;

use common::TempDir;
use cotenant_trace::{parse_cluster_arg, parse_cluster_inline, parse_cluster_toml};

fn shape(spec: &cotenant_core::ClusterSpec) -> Vec<(String, u32)> {
    spec.nodes.iter().map(|n| (spec.gpu_types[n.gpu_type.index()].clone(), n.gpus)).collect()
}

#[test]
fn homogeneous_inline() {
    let spec = parse_cluster_inline("nodes=60,gpus-per-node=8").unwrap();
    assert_eq!((spec.nodes.len(), spec.total_gpus()), (60, 480));
    assert_eq!(spec.gpu_types, ["gpu"]);
    assert_eq!((spec.nodes[17].rack, spec.nodes[0].cpus), (1, 0));
    let spec = parse_cluster_inline(" nodes=2 , gpus-per-node=4, gpu=v100, cpus=48, mem-gib=512 ").unwrap();
    assert_eq!(spec.gpu_types, ["v100"]);
    assert_eq!((spec.nodes[1].cpus, spec.nodes[1].memory_gib), (48, 512));
}

#[test]
fn per_type_inline_packs_gpus_into_nodes() {
    let spec = parse_cluster_inline("v100=2,k80=20").unwrap();
    let want: Vec<(String, u32)> =
        [("v100", 2), ("k80", 8), ("k80", 8), ("k80", 4)].iter().map(|(t, g)| (t.to_string(), *g)).collect();
    assert_eq!(shape(&spec), want);
    let spec = parse_cluster_inline("v100=10,p100=4,gpus-per-node=4").unwrap();
    assert_eq!(spec.nodes.iter().map(|n| n.gpus).collect::<Vec<_>>(), [4, 4, 2, 4]);
}

#[test]
fn inline_errors_name_the_key() {
    let cases = [
        ("nodes=60", "key `gpus-per-node`: required"),
        ("nodes=x,gpus-per-node=8", "key `nodes`: expected a positive integer"),
        ("nodes=6,gpus-per-node=8,racks=2", "key `racks`: unknown key"),
        ("node=60,gpus-per-node=8", "key `node`: not a GPU type"),
        ("v100=0", "key `v100`: expected a positive integer"),
        ("v100=2,v100=4", "key `v100`: given twice"),
        ("v100", "key `v100`: expected key=value"),
        ("nodes=1,gpus-per-node=65", "key `nodes`: 65 GPUs per node; at most 64 per node are supported"),
        ("", "empty spec"),
    ];
    for (text, want) in cases {
        let msg = parse_cluster_inline(text).unwrap_err().to_string();
        assert!(msg.starts_with("cluster spec") && msg.contains(want), "{text}: {msg}");
    }
}

const TOML: &str = r#"
[[nodes]]
count = 2
gpu = "v100"
gpus = 8
cpus = 48
memory_gib = 512

[[nodes]]
gpu = "k80"
gpus = 4
rack = 7

[[tenants]]
name = "research"
weight = 2.0
gpu_quota = 12
gpu_limit = 16

[[tenants]]
name = "prod"
"#;

#[test]
fn toml_nodes_and_tenants() {
    let config = parse_cluster_toml(TOML, "c.toml").unwrap();
    assert_eq!(config.cluster.total_gpus(), 20);
    assert_eq!(config.cluster.gpu_types, ["v100", "k80"]);
    assert_eq!((config.cluster.nodes[2].rack, config.cluster.nodes[1].memory_gib), (7, 512));
    assert_eq!(config.tenants.len(), 2);
    let r = &config.tenants[0];
    assert_eq!((r.weight, r.gpu_quota, r.gpu_limit), (2.0, Some(12), Some(16)));
    assert_eq!((config.tenants[1].weight, config.tenants[1].gpu_quota), (1.0, None));
    // From a file, through the --cluster argument.
    let dir = TempDir::new("toml");
    let path = dir.write("cluster.toml", TOML);
    assert_eq!(parse_cluster_arg(path.to_str().unwrap()).unwrap(), config);
    assert!(parse_cluster_arg("nodes=1,gpus-per-node=8").unwrap().tenants.is_empty());
}

#[test]
fn toml_errors_name_the_key() {
    let cases = [
        ("[[nodes]]\ngpu = \"v100\"\ngpus = 8\nmemory = 5\n", "unknown field `memory`"),
        ("[[nodes]]\ngpu = \"v100\"\n", "missing field `gpus`"),
        ("[[nodes]]\ngpu = \"v100\"\ngpus = 0\n", "key `gpus`: must be at least 1"),
        ("[cluster]\nx = 1\n", "unknown field `cluster`"),
        ("[[nodes]]\ngpu = \"v100\"\ngpus = 8\n[[tenants]]\nname = \"a\"\nweight = 0.0\n", "key `weight`"),
        (
            "[[nodes]]\ngpu = \"v100\"\ngpus = 8\n[[tenants]]\nname = \"a\"\n[[tenants]]\nname = \"a\"\n",
            "declared twice",
        ),
        (
            "[[nodes]]\ngpu = \"v100\"\ngpus = 8\n[[tenants]]\nname = \"a\"\nshare = 3\n",
            "unknown field `share`",
        ),
        ("", "the cluster has no GPUs"),
    ];
    for (text, want) in cases {
        let msg = parse_cluster_toml(text, "c.toml").unwrap_err().to_string();
        assert!(msg.starts_with("c.toml") && msg.contains(want), "{text:?}: {msg}");
    }
}

#[test]
fn toml_unknown_keys_name_the_line_and_suggest() {
    let cases = [
        (
            "[[nodes]]\ngpu = \"v100\"\ngpus = 8\nmemory = 5\n",
            "c.toml line 4: unknown field `memory`",
            "`memory_gib`",
        ),
        ("[[node]]\ngpu = \"v100\"\ngpus = 8\n", "c.toml line 1: unknown field `node`", "`nodes`"),
        (
            "[[nodes]]\ngpu = \"v100\"\ngpus = 8\n[[tenant]]\nname = \"a\"\n",
            "c.toml line 4: unknown field `tenant`",
            "`tenants`",
        ),
        (
            "[[nodes]]\ngpu = \"v100\"\ngpus = 8\n[[tenants]]\nname = \"a\"\ngpu_limt = 3\n",
            "c.toml line 6",
            "`gpu_limit`",
        ),
    ];
    for (text, start, hint) in cases {
        let msg = parse_cluster_toml(text, "c.toml").unwrap_err().to_string();
        assert!(msg.starts_with(start), "{text:?}: {msg}");
        assert!(msg.ends_with(&format!("(did you mean {hint}?)")), "{text:?}: {msg}");
    }
}

#[test]
fn sizes_are_bounded_before_allocation() {
    let cases = [
        (
            "nodes=1000000000,gpus-per-node=8",
            "key `nodes`: 1000000000 nodes make the cluster larger than 262144 nodes",
        ),
        (
            "nodes=200000,gpus-per-node=8",
            "key `nodes`: 200000 nodes x 8 GPUs make the cluster larger than 1048576 GPUs",
        ),
        ("nodes=1,gpus-per-node=4000000000", "key `nodes`: 4000000000 GPUs per node; at most 64"),
        ("v100=4000000000", "key `v100`: 4000000000 GPUs make the cluster larger than 1048576 GPUs"),
        ("v100=1000000,k80=1000000", "key `k80`: 1000000 GPUs make the cluster larger"),
        ("v100=8,gpus-per-node=100", "key `gpus-per-node`: 100 GPUs per node; at most 64"),
        (
            "v100=1000000,gpus-per-node=1",
            "key `v100`: 1000000 nodes make the cluster larger than 262144 nodes",
        ),
        // The fuzzer's reproducers: 3,952,801 nodes built, and over 2 s of allocation.
        ("k80=31622405", "key `k80`: 31622405 GPUs make the cluster larger than 1048576 GPUs"),
        ("nodes=315619200,gpus-per-node=8", "key `nodes`: 315619200 nodes make the cluster larger"),
    ];
    for (text, want) in cases {
        let msg = parse_cluster_inline(text).unwrap_err().to_string();
        assert!(msg.starts_with("cluster spec") && msg.contains(want), "{text}: {msg}");
    }
    let toml = "[[nodes]]\ncount = 4294967295\ngpu = \"v100\"\ngpus = 8\n";
    let msg = parse_cluster_toml(toml, "c.toml").unwrap_err().to_string();
    assert!(
        msg.contains("c.toml [[nodes]] #1, key `count`: 4294967295 nodes make the cluster larger"),
        "{msg}"
    );
    let toml = "[[nodes]]\ncount = 200000\ngpu = \"v100\"\ngpus = 8\n[[nodes]]\ncount = 200000\ngpu = \"k80\"\ngpus = 1\n";
    let msg = parse_cluster_toml(toml, "c.toml").unwrap_err().to_string();
    assert!(msg.contains("#1, key `count`: 200000 nodes x 8 GPUs make the cluster larger"), "{msg}");
    // At the limits exactly: accepted.
    assert_eq!(parse_cluster_inline("nodes=16384,gpus-per-node=64").unwrap().total_gpus(), 1 << 20);
}

#[test]
fn inline_typos_of_settings_are_not_gpu_types() {
    for (text, hint) in [
        ("v100=8,gpus-per-nod=4", "`gpus-per-node`"),
        ("nodes=2,gpus-per-node=8,cpu=4", "`cpus`"),
        ("nodes=2,gpus-per-node=8,mem-gb=4", "`mem-gib`"),
        ("node=60,gpus-per-node=8", "`nodes`"),
    ] {
        let msg = parse_cluster_inline(text).unwrap_err().to_string();
        assert!(msg.ends_with(&format!("(did you mean {hint}?)")), "{text}: {msg}");
    }
}
