//! Tenant configs checked against the workload and cluster they run with
//! (`accounts::validate`), including the examples of docs/tenants.md.

use std::path::Path;
use std::sync::OnceLock;

use cotenant_core::{ClusterSpec, JobSpec, TenantSpec, Time};
use cotenant_trace::accounts::{
    parse_tenant_config, read_tenant_config, validate, ClusterSummary, TenantNames,
};
use cotenant_trace::{bundled_data_dir, read_trace, Slice, TraceKind, BUNDLED_PHILLY};

/// The default Philly week's tenants and the default 60 x 8 cluster of type `gpu`.
fn philly_week() -> &'static (TenantNames, ClusterSummary) {
    static WEEK: OnceLock<(TenantNames, ClusterSummary)> = OnceLock::new();
    WEEK.get_or_init(|| {
        let path = bundled_data_dir().join(BUNDLED_PHILLY);
        let w = read_trace(TraceKind::Philly, &path, &Slice::philly_default_week()).expect("bundled week");
        (
            TenantNames::from_workload(&w.tenants, &w.jobs),
            ClusterSummary::from_spec(&ClusterSpec::homogeneous("gpu", 60, 8)),
        )
    })
}

fn repo_file(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// Every ```toml block of docs/tenants.md, joined into one config.
fn doc_example() -> String {
    let doc = std::fs::read_to_string(repo_file("docs/tenants.md")).expect("docs/tenants.md");
    let mut blocks = String::new();
    let mut inside = false;
    for line in doc.lines() {
        match (inside, line.trim_start().starts_with("```")) {
            (false, true) if line.trim() == "```toml" => inside = true,
            (true, true) => inside = false,
            (true, false) => {
                blocks.push_str(line);
                blocks.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn the_docs_example_validates_against_the_philly_week() {
    let text = doc_example();
    assert!(text.contains("[[account]]") && text.contains("[[queue]]"), "{text}");
    let config = parse_tenant_config(&text, "docs/tenants.md").unwrap();
    let (tenants, cluster) = philly_week();
    let warnings = validate(&config, tenants, cluster).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn the_bundled_philly_example_validates_without_warnings() {
    let config = read_tenant_config(&repo_file("docs/examples/philly-tenants.toml")).unwrap();
    let (tenants, cluster) = philly_week();
    let warnings = validate(&config, tenants, cluster).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn the_old_docs_example_matching_no_tenant_is_an_error() {
    let text = "[[account]]\nname = \"A\"\n[[account]]\nname = \"vc-6214e9\"\nparent = \"A\"\n";
    let config = parse_tenant_config(text, "t.toml").unwrap();
    let (tenants, cluster) = philly_week();
    let err = validate(&config, tenants, cluster).unwrap_err().to_string();
    assert_eq!(
        err,
        "t.toml, account 'vc-6214e9', key `name`: names no tenant of the workload (did you mean `6214e9`?)"
    );
}

fn small() -> (TenantNames, ClusterSummary) {
    let tenants = vec![TenantSpec::new("alpha"), TenantSpec::new("beta")];
    let jobs = vec![JobSpec::new(0, 0, Time::ZERO, 4, 10.0), JobSpec::new(1, 1, Time::ZERO, 1, 10.0)];
    (
        TenantNames::from_workload(&tenants, &jobs),
        ClusterSummary::from_spec(&ClusterSpec::homogeneous("gpu", 2, 8)),
    )
}

fn check(text: &str) -> Result<Vec<String>, String> {
    let (tenants, cluster) = small();
    let config = parse_tenant_config(text, "t.toml").map_err(|e| e.to_string())?;
    validate(&config, &tenants, &cluster)
        .map(|w| w.into_iter().map(|w| w.message).collect())
        .map_err(|e| e.to_string())
}

#[test]
fn a_queue_for_a_missing_tenant_is_an_error_with_a_suggestion() {
    let err = check("[[queue]]\ntenant = \"alpah\"\nnominal = { gpu = 1 }\n").unwrap_err();
    assert_eq!(
        err,
        "t.toml, queue 'alpah', key `tenant`: names no tenant of the workload (did you mean `alpha`?)"
    );
    let err = check("[[queue]]\ntenant = \"zzz\"\nnominal = { gpu = 1 }\n").unwrap_err();
    assert!(err.contains("names no tenant of the workload (tenants: alpha, beta)"), "{err}");
}

#[test]
fn a_name_absent_from_this_workload_but_no_typo_is_a_warning() {
    let warnings =
        check("[[queue]]\ntenant = \"alpha\"\nnominal = { gpu = 4 }\n[[queue]]\ntenant = \"zzz\"\nnominal = { gpu = 1 }\n")
            .unwrap();
    assert_eq!(
        warnings,
        vec!["t.toml, queue 'zzz': no tenant of this workload has that name; it has no jobs"]
    );
}

#[test]
fn an_unknown_gpu_type_is_an_error() {
    let err = check("[[queue]]\ntenant = \"alpha\"\nnominal = { v100 = 4 }\n").unwrap_err();
    assert_eq!(
        err,
        "t.toml, queue 'alpha', key `nominal`: GPU type 'v100' is not in the cluster (its types: gpu)"
    );
    let err = check("[[queue]]\ntenant = \"alpha\"\nnominal = { gpus = 4 }\n").unwrap_err();
    assert!(err.ends_with("(did you mean `gpu`?)"), "{err}");
    // Case does not matter, as in the kueue policy.
    assert!(check("[[queue]]\ntenant = \"alpha\"\nnominal = { GPU = 4 }\n").is_ok());
}

#[test]
fn quotas_above_capacity_are_errors() {
    let err = check("[[queue]]\ntenant = \"alpha\"\nnominal = { gpu = 10 }\n[[queue]]\ntenant = \"beta\"\nnominal = { gpu = 7 }\n")
        .unwrap_err();
    assert!(
        err.starts_with("t.toml: nominal quotas of GPU type 'gpu' sum to 17 but the cluster has 16"),
        "{err}"
    );
}

#[test]
fn jobs_wider_than_a_limit_are_warnings() {
    let (mut tenants, cluster) = small();
    tenants.tenants[0].gpu_limit = Some(0);
    let warnings = validate(&Default::default(), &tenants, &cluster).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].message.starts_with("tenant alpha: gpu_limit = 0, but 1 of its 1 jobs ask for more"),
        "{warnings:?}"
    );
    let warnings =
        check("[[queue]]\ntenant = \"alpha\"\nnominal = { gpu = 2 }\nborrowing_limit = { gpu = 1 }\n")
            .unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("at most 3 GPUs of one type"), "{warnings:?}");
}

#[test]
fn cluster_config_tenants_must_match_the_workload() {
    let (tenants, mut cluster) = small();
    cluster.declared_tenants = vec!["alpah".into()];
    let err = validate(&Default::default(), &tenants, &cluster).unwrap_err().to_string();
    assert_eq!(err, "the cluster config, [[tenants]] 'alpah', key `name`: names no tenant of the workload (did you mean `alpha`?)");
}
