//! Tenant account trees (Slurm fair share) and quota queues (Kueue-style) read
//! from TOML. The format is documented in `docs/tenants.md`:
//!
//! ```toml
//! [[account]]            # one per account or user; tenants are the leaves
//! name = "A"
//! shares = 40            # relative to siblings (default 1)
//! [[account]]
//! name = "6214e9"        # a tenant (Philly: a VC id as in the trace, no "vc-" prefix)
//! parent = "A"           # omitted: directly under the root
//!
//! [[queue]]              # one per tenant with a quota
//! tenant = "6214e9"
//! cohort = "research"    # tenants of a cohort lend each other idle GPUs (default "default")
//! weight = 2.0           # share of borrowing among the cohort (default 1)
//! nominal = { v100 = 8, k80 = 16 }        # guaranteed GPUs per GPU type of --cluster
//! borrowing_limit = { v100 = 4 }          # most GPUs borrowed beyond nominal; absent: no limit
//! ```
//!
//! The result is plain data; the CLI turns it into the policies' types.
//!
//! Two steps, both errors naming file, table and key: [`parse_tenant_config`]
//! checks the file on its own (unknown tables and keys, with "did you mean";
//! shares, weights, duplicates, parents); [`validate`] checks it against the
//! workload and the cluster it will run with (every tenant and GPU type name
//! exists, quotas fit the cluster) and returns warnings, as data, for what is
//! legal but probably not meant (jobs that can never run under a limit).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use cotenant_core::limits::MAX_ACCOUNTS;
use cotenant_core::{ClusterSpec, JobSpec, TenantSpec};
use serde::Deserialize;

use crate::suggest::{did_you_mean, suggestion, toml_error};

/// One account or user of the fair-share tree.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountEntry {
    pub name: String,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default = "one")]
    pub shares: f64,
}

/// One tenant's quota queue.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueEntry {
    pub tenant: String,
    #[serde(default = "default_cohort")]
    pub cohort: String,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub nominal: BTreeMap<String, u32>,
    #[serde(default)]
    pub borrowing_limit: BTreeMap<String, u32>,
}

/// Accounts and queues of one config file. Any other top-level table or key is
/// an error (a typo such as `[[acount]]` must not silently drop the tree).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    #[serde(default, rename = "account")]
    pub accounts: Vec<AccountEntry>,
    #[serde(default, rename = "queue")]
    pub queues: Vec<QueueEntry>,
    /// The file it was read from, for messages.
    #[serde(skip)]
    pub source: String,
}

fn one() -> f64 {
    1.0
}

fn default_cohort() -> String {
    "default".to_string()
}

/// A tenant config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TenantConfigError {
    // The I/O error is shown, not chained, so that its text is not printed twice.
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    /// The TOML does not parse or has the wrong shape; `message` starts with the file and line.
    #[error("{message}")]
    Toml { file: String, message: String },
    /// A value that parses but makes no sense, naming the table and key.
    #[error("{file}, {table} '{name}', key `{key}`: {message}")]
    Value { file: String, table: &'static str, name: String, key: &'static str, message: String },
    /// The config does not fit the workload or the cluster as a whole.
    #[error("{file}: {message}")]
    Mismatch { file: String, message: String },
}

/// Reads and checks a tenant config file.
pub fn read_tenant_config(path: &Path) -> Result<TenantConfig, TenantConfigError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|error| TenantConfigError::Io { file: file.clone(), error })?;
    parse_tenant_config(&text, &file)
}

/// Parses and checks TOML text; `file` names it in errors.
pub fn parse_tenant_config(text: &str, file: &str) -> Result<TenantConfig, TenantConfigError> {
    let mut config: TenantConfig = toml::from_str(text)
        .map_err(|e| TenantConfigError::Toml { file: file.into(), message: toml_error(text, file, &e) })?;
    config.source = file.to_string();
    let bad = |table, name: &str, key, message: &str| TenantConfigError::Value {
        file: file.into(),
        table,
        name: name.into(),
        key,
        message: message.into(),
    };
    if config.accounts.len() > MAX_ACCOUNTS {
        return Err(TenantConfigError::Mismatch {
            file: file.into(),
            message: format!("{} accounts; at most {MAX_ACCOUNTS} are supported", config.accounts.len()),
        });
    }
    let mut names: HashMap<&str, usize> = HashMap::with_capacity(config.accounts.len());
    for (i, a) in config.accounts.iter().enumerate() {
        if !(a.shares.is_finite() && a.shares >= 0.0) {
            return Err(bad("account", &a.name, "shares", "must be a number >= 0"));
        }
        if names.insert(a.name.as_str(), i).is_some() {
            return Err(bad("account", &a.name, "name", "defined twice"));
        }
    }
    for a in &config.accounts {
        if let Some(parent) = &a.parent {
            if !names.contains_key(parent.as_str()) {
                let hint = suggestion(parent, names.keys().copied());
                return Err(bad(
                    "account",
                    &a.name,
                    "parent",
                    &format!("no account is named '{parent}'{hint}"),
                ));
            }
        }
    }
    let mut queued: HashMap<&str, usize> = HashMap::with_capacity(config.queues.len());
    for (i, q) in config.queues.iter().enumerate() {
        if !(q.weight.is_finite() && q.weight > 0.0) {
            return Err(bad("queue", &q.tenant, "weight", "must be a number > 0"));
        }
        if queued.insert(q.tenant.as_str(), i).is_some() {
            return Err(bad("queue", &q.tenant, "tenant", "has two queues"));
        }
        if let Some(t) = q.borrowing_limit.keys().find(|t| !q.nominal.contains_key(*t)) {
            return Err(bad(
                "queue",
                &q.tenant,
                "borrowing_limit",
                &format!("GPU type '{t}' has no nominal quota"),
            ));
        }
    }
    Ok(config)
}

/// What a config's tenant names must match: the workload's tenants, with what
/// validation needs to know about each.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantNames {
    pub tenants: Vec<TenantFacts>,
}

/// One tenant of the workload, after the cluster config's weights and limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantFacts {
    pub name: String,
    /// GPUs each of its jobs asks for.
    pub job_gpus: Vec<u32>,
    pub gpu_quota: Option<u32>,
    pub gpu_limit: Option<u32>,
}

impl TenantNames {
    /// From the workload's tenants (after `--cluster`'s tenants were applied) and jobs.
    pub fn from_workload(tenants: &[TenantSpec], jobs: &[JobSpec]) -> TenantNames {
        let mut facts: Vec<TenantFacts> = tenants
            .iter()
            .map(|t| TenantFacts {
                name: t.name.clone(),
                job_gpus: Vec::new(),
                gpu_quota: t.gpu_quota,
                gpu_limit: t.gpu_limit,
            })
            .collect();
        for job in jobs {
            if let Some(f) = facts.get_mut(job.tenant.index()) {
                f.job_gpus.push(job.gpus);
            }
        }
        TenantNames { tenants: facts }
    }

    fn names(&self) -> impl Iterator<Item = &str> + Clone {
        self.tenants.iter().map(|t| t.name.as_str())
    }
}

/// What a config's GPU types and quotas must fit: the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSummary {
    /// GPU type names with the number of GPUs of each.
    pub gpu_types: Vec<(String, u64)>,
    pub total_gpus: u64,
    /// Tenant names the cluster config (`[[tenants]]`) declares, if any: they
    /// must match the workload's tenants too.
    pub declared_tenants: Vec<String>,
}

impl ClusterSummary {
    pub fn from_spec(spec: &ClusterSpec) -> ClusterSummary {
        let mut gpu_types: Vec<(String, u64)> = spec.gpu_types.iter().map(|t| (t.clone(), 0)).collect();
        for node in &spec.nodes {
            if let Some(entry) = gpu_types.get_mut(node.gpu_type.index()) {
                entry.1 += u64::from(node.gpus);
            }
        }
        let total_gpus = gpu_types.iter().map(|(_, n)| n).sum();
        ClusterSummary { gpu_types, total_gpus, declared_tenants: Vec::new() }
    }

    /// The cluster of a `--cluster` config, with the tenants it declares.
    pub fn from_config(config: &crate::ClusterConfig) -> ClusterSummary {
        ClusterSummary {
            declared_tenants: config.tenants.iter().map(|t| t.name.clone()).collect(),
            ..ClusterSummary::from_spec(&config.cluster)
        }
    }

    /// Index of a GPU type; case-insensitive, as the kueue policy matches them.
    fn type_index(&self, name: &str) -> Option<usize> {
        self.gpu_types.iter().position(|(t, _)| t.eq_ignore_ascii_case(name))
    }
}

/// Something legal that is probably not what was meant; the CLI prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks a tenant config (possibly empty) and the cluster config's tenants
/// against the workload's tenants and the cluster. Errors:
/// - a leaf account, a queue's `tenant` or a cluster-config tenant that names no
///   tenant of the workload, when a tenant name is close to it (a typo) or when
///   no name of the file matches any tenant (the config matches nothing);
/// - a GPU type in `nominal` or `borrowing_limit` that the cluster lacks;
/// - nominal quotas of a GPU type summing above the cluster's GPUs of that type,
///   or `gpu_quota`s of the cluster config summing above its GPUs (the kueue
///   guarantee, "a tenant below its quota gets GPUs", cannot hold then).
///
/// Warnings: a name that matches no tenant of this workload but is not a typo
/// (a slice of a trace may lack a tenant), and jobs that can never run: wider
/// than their tenant's `gpu_limit`, or than its queue's nominal plus borrowing
/// limit on every type it may use.
pub fn validate(
    config: &TenantConfig,
    tenants: &TenantNames,
    cluster: &ClusterSummary,
) -> Result<Vec<ConfigWarning>, TenantConfigError> {
    let file = if config.source.is_empty() { "tenant config" } else { config.source.as_str() };
    let mut warnings = Vec::new();
    check_names(config, tenants, cluster, file, &mut warnings)?;
    check_gpu_types(config, cluster, file)?;
    check_capacity(config, tenants, cluster, file)?;
    warn_unrunnable_jobs(config, tenants, cluster, &mut warnings);
    Ok(warnings)
}

/// Every name that must be a tenant: leaf accounts, queues, cluster-config tenants.
fn check_names(
    config: &TenantConfig,
    tenants: &TenantNames,
    cluster: &ClusterSummary,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<(), TenantConfigError> {
    let known: std::collections::HashSet<&str> = tenants.names().collect();
    let parents: std::collections::HashSet<&str> =
        config.accounts.iter().filter_map(|a| a.parent.as_deref()).collect();
    let mut named: Vec<(&'static str, &str, &'static str)> = Vec::new();
    for a in config.accounts.iter().filter(|a| !parents.contains(a.name.as_str())) {
        named.push(("account", &a.name, "name"));
    }
    for q in &config.queues {
        named.push(("queue", &q.tenant, "tenant"));
    }
    let declared_file = "the cluster config";
    for t in &cluster.declared_tenants {
        named.push(("[[tenants]]", t, "name"));
    }
    let none_match = !named.is_empty() && named.iter().all(|(_, name, _)| !known.contains(name));
    for (table, name, key) in named {
        if known.contains(name) {
            continue;
        }
        let where_ = if table == "[[tenants]]" { declared_file } else { file };
        let close = did_you_mean(name, tenants.names());
        if close.is_some() || none_match {
            let hint = close.map_or_else(
                || format!(" (tenants: {})", list_some(tenants.names())),
                |c| format!(" (did you mean `{c}`?)"),
            );
            return Err(TenantConfigError::Value {
                file: where_.to_string(),
                table,
                name: name.to_string(),
                key,
                message: format!("names no tenant of the workload{hint}"),
            });
        }
        warnings.push(ConfigWarning {
            message: format!(
                "{where_}, {table} '{name}': no tenant of this workload has that name; it has no jobs"
            ),
        });
    }
    Ok(())
}

/// The first few names of a list, for a message.
fn list_some<'a>(names: impl Iterator<Item = &'a str> + Clone) -> String {
    let count = names.clone().count();
    let shown: Vec<&str> = names.take(12).collect();
    let more = if count > shown.len() { format!(", ... ({count} in all)") } else { String::new() };
    format!("{}{more}", shown.join(", "))
}

fn check_gpu_types(
    config: &TenantConfig,
    cluster: &ClusterSummary,
    file: &str,
) -> Result<(), TenantConfigError> {
    let types = || cluster.gpu_types.iter().map(|(t, _)| t.as_str());
    for q in &config.queues {
        for (key, map) in [("nominal", &q.nominal), ("borrowing_limit", &q.borrowing_limit)] {
            if let Some(name) = map.keys().find(|t| cluster.type_index(t).is_none()) {
                let hint = match did_you_mean(name, types()) {
                    Some(c) => format!(" (did you mean `{c}`?)"),
                    None => String::new(),
                };
                return Err(TenantConfigError::Value {
                    file: file.to_string(),
                    table: "queue",
                    name: q.tenant.clone(),
                    key,
                    message: format!(
                        "GPU type '{name}' is not in the cluster (its types: {}){hint}",
                        list_some(types())
                    ),
                });
            }
        }
    }
    Ok(())
}

fn check_capacity(
    config: &TenantConfig,
    tenants: &TenantNames,
    cluster: &ClusterSummary,
    file: &str,
) -> Result<(), TenantConfigError> {
    let mut nominal = vec![0u64; cluster.gpu_types.len()];
    for q in &config.queues {
        for (name, &gpus) in &q.nominal {
            if let Some(ty) = cluster.type_index(name) {
                nominal[ty] += u64::from(gpus);
            }
        }
    }
    for (ty, (name, capacity)) in cluster.gpu_types.iter().enumerate() {
        if nominal[ty] > *capacity {
            return Err(TenantConfigError::Mismatch {
                file: file.to_string(),
                message: format!(
                    "nominal quotas of GPU type '{name}' sum to {} but the cluster has {capacity} such GPUs; \
                     quotas may not over-subscribe the cluster (docs/tenants.md)",
                    nominal[ty]
                ),
            });
        }
    }
    let quotas: u64 = tenants.tenants.iter().filter_map(|t| t.gpu_quota).map(u64::from).sum();
    if !cluster.declared_tenants.is_empty() && quotas > cluster.total_gpus {
        return Err(TenantConfigError::Mismatch {
            file: "the cluster config".to_string(),
            message: format!(
                "the tenants' gpu_quota values sum to {quotas} but the cluster has {} GPUs; \
                 quotas may not over-subscribe the cluster (docs/tenants.md)",
                cluster.total_gpus
            ),
        });
    }
    Ok(())
}

/// Jobs wider than what their tenant may ever hold.
fn warn_unrunnable_jobs(
    config: &TenantConfig,
    tenants: &TenantNames,
    cluster: &ClusterSummary,
    warnings: &mut Vec<ConfigWarning>,
) {
    let queues: HashMap<&str, &QueueEntry> = config.queues.iter().map(|q| (q.tenant.as_str(), q)).collect();
    for t in &tenants.tenants {
        if let Some(limit) = t.gpu_limit {
            let blocked = t.job_gpus.iter().filter(|&&g| g > limit).count();
            if blocked > 0 {
                let widest = t.job_gpus.iter().max().copied().unwrap_or(0);
                warnings.push(ConfigWarning {
                    message: format!(
                        "tenant {}: gpu_limit = {limit}, but {blocked} of its {} jobs ask for more (the widest: {widest} \
                         GPU{}); they can never run",
                        t.name,
                        t.job_gpus.len(),
                        if widest == 1 { "" } else { "s" }
                    ),
                });
            }
        }
        let Some(q) = queues.get(t.name.as_str()) else { continue };
        // The most GPUs of one type the queue may ever hold (kueue places a job on one type).
        let ceiling = q
            .nominal
            .iter()
            .filter_map(|(name, &gpus)| {
                let capacity = cluster.gpu_types[cluster.type_index(name)?].1;
                let borrow = q.borrowing_limit.get(name).map_or(u64::MAX, |&l| u64::from(l));
                Some(u64::from(gpus).saturating_add(borrow).min(capacity))
            })
            .max()
            .unwrap_or(0);
        let blocked = t.job_gpus.iter().filter(|&&g| u64::from(g) > ceiling).count();
        if blocked > 0 {
            warnings.push(ConfigWarning {
                message: format!(
                    "queue '{}': at most {ceiling} GPUs of one type (nominal + borrowing_limit), but {blocked} of its jobs \
                     ask for more; under kueue they can never run",
                    t.name
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
        [[account]]
        name = "A"
        shares = 40
        [[account]]
        name = "u1"
        parent = "A"

        [[queue]]
        tenant = "u1"
        cohort = "research"
        weight = 2.0
        nominal = { v100 = 8, k80 = 16 }
        borrowing_limit = { v100 = 4 }
        [[queue]]
        tenant = "u2"
        nominal = { k80 = 2 }
    "#;

    #[test]
    fn reads_accounts_and_queues() {
        let c = parse_tenant_config(EXAMPLE, "t.toml").unwrap();
        assert_eq!(c.accounts.len(), 2);
        assert_eq!(c.accounts[1].parent.as_deref(), Some("A"));
        assert_eq!(c.accounts[1].shares, 1.0);
        assert_eq!(c.queues[0].nominal["k80"], 16);
        assert_eq!(c.queues[0].borrowing_limit["v100"], 4);
        assert_eq!(c.queues[1].cohort, "default");
        assert_eq!(c.queues[1].weight, 1.0);
    }

    #[test]
    fn errors_name_file_table_and_key() {
        let err = parse_tenant_config("[[account]]\nname = \"a\"\nparent = \"zz\"\n", "t.toml").unwrap_err();
        assert_eq!(err.to_string(), "t.toml, account 'a', key `parent`: no account is named 'zz'");
        let err = parse_tenant_config("[[queue]]\ntenant = \"a\"\nweight = 0\n", "t.toml").unwrap_err();
        assert!(err.to_string().contains("queue 'a', key `weight`"), "{err}");
        let err =
            parse_tenant_config("[[queue]]\ntenant = \"a\"\nborrowing_limit = { v100 = 1 }\n", "t.toml")
                .unwrap_err();
        assert!(err.to_string().contains("'v100' has no nominal quota"), "{err}");
        let err = parse_tenant_config("[[queue]]\ntenant = 3\n", "t.toml").unwrap_err();
        assert!(err.to_string().starts_with("t.toml line 2: "), "{err}");
    }

    #[test]
    fn the_philly_example_reads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/philly-tenants.toml");
        let config = read_tenant_config(&path).unwrap();
        assert_eq!(config.queues.len(), 11);
        assert_eq!(config.queues.iter().map(|q| q.nominal["gpu"]).sum::<u32>(), 480);
        assert_eq!(config.accounts.iter().filter(|a| a.parent.is_some()).count(), 11);
    }

    #[test]
    fn unknown_tables_and_keys_are_errors_with_suggestions() {
        let err = parse_tenant_config("[[account]]\nname = \"a\"\n\n[[acount]]\nname = \"b\"\n", "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.toml line 4: unknown field `acount`"), "{err}");
        assert!(err.ends_with("(did you mean `account`?)"), "{err}");
        let err = parse_tenant_config("[[queue]]\ntenant = \"a\"\nnominl = { gpu = 1 }\n", "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.toml line 3: unknown field `nominl`"), "{err}");
        assert!(err.ends_with("(did you mean `nominal`?)"), "{err}");
        let err = parse_tenant_config("[cluster]\nnodes = 3\n", "t.toml").unwrap_err().to_string();
        assert!(err.contains("unknown field `cluster`"), "{err}");
    }
}
