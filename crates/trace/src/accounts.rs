//! Tenant account trees (Slurm fair share) and quota queues (Kueue-style) read
//! from TOML. The format is documented in `docs/tenants.md`:
//!
//! ```toml
//! [[account]]            # one per account or user; tenants are the leaves
//! name = "A"
//! shares = 40            # relative to siblings (default 1)
//! [[account]]
//! name = "vc-6214e9"
//! parent = "A"           # omitted: directly under the root
//!
//! [[queue]]              # one per tenant with a quota
//! tenant = "vc-6214e9"
//! cohort = "research"    # tenants of a cohort lend each other idle GPUs (default "default")
//! weight = 2.0           # share of borrowing among the cohort (default 1)
//! nominal = { v100 = 8, k80 = 16 }        # guaranteed GPUs per GPU type
//! borrowing_limit = { v100 = 4 }          # most GPUs borrowed beyond nominal; absent: no limit
//! ```
//!
//! The result is plain data; the CLI turns it into the policies' types.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

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

/// Accounts and queues of one config file. Other top-level keys (a cluster
/// config in the same file) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct TenantConfig {
    #[serde(default, rename = "account")]
    pub accounts: Vec<AccountEntry>,
    #[serde(default, rename = "queue")]
    pub queues: Vec<QueueEntry>,
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
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Toml { file: String, message: String },
    /// A value that parses but makes no sense, naming the table and key.
    #[error("{file}, {table} '{name}', key `{key}`: {message}")]
    Value { file: String, table: &'static str, name: String, key: &'static str, message: String },
}

/// Reads and checks a tenant config file.
pub fn read_tenant_config(path: &Path) -> Result<TenantConfig, TenantConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| TenantConfigError::Io { file: file.clone(), source })?;
    parse_tenant_config(&text, &file)
}

/// Parses and checks TOML text; `file` names it in errors.
pub fn parse_tenant_config(text: &str, file: &str) -> Result<TenantConfig, TenantConfigError> {
    let config: TenantConfig = toml::from_str(text)
        .map_err(|e| TenantConfigError::Toml { file: file.into(), message: e.to_string() })?;
    let bad = |table, name: &str, key, message: &str| TenantConfigError::Value {
        file: file.into(),
        table,
        name: name.into(),
        key,
        message: message.into(),
    };
    for (i, a) in config.accounts.iter().enumerate() {
        if !(a.shares.is_finite() && a.shares >= 0.0) {
            return Err(bad("account", &a.name, "shares", "must be a number >= 0"));
        }
        if config.accounts[..i].iter().any(|b| b.name == a.name) {
            return Err(bad("account", &a.name, "name", "defined twice"));
        }
        if let Some(parent) = &a.parent {
            if !config.accounts.iter().any(|b| &b.name == parent) {
                return Err(bad("account", &a.name, "parent", &format!("no account is named '{parent}'")));
            }
        }
    }
    for (i, q) in config.queues.iter().enumerate() {
        if !(q.weight.is_finite() && q.weight > 0.0) {
            return Err(bad("queue", &q.tenant, "weight", "must be a number > 0"));
        }
        if config.queues[..i].iter().any(|r| r.tenant == q.tenant) {
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
        assert!(err.to_string().starts_with("t.toml: "), "{err}");
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
    fn other_sections_are_ignored() {
        let c = parse_tenant_config("[cluster]\nnodes = 3\n[[account]]\nname = \"a\"\n", "t.toml").unwrap();
        assert_eq!(c.accounts.len(), 1);
    }
}
