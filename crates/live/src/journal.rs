//! The write-ahead journal and the server's tables, in SQLite (default) or
//! PostgreSQL through one sqlx code path (`sqlx::Any`).
//!
//! The journal is the only source of truth: every engine input the controller
//! accepts is an [`Entry`], committed before the engine sees it. Everything else
//! (the job table the API serves, node states, usage) is derived by replaying it
//! (`crate::setup::Replayer`). The commands the engine answered are recorded
//! beside each entry (`commands`), so that a replay can be checked against what
//! the live server did.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Row};

use crate::api::SubmitRequest;

/// Schema, in SQL that SQLite and PostgreSQL both accept.
pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS journal (seq BIGINT PRIMARY KEY, at_us BIGINT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS commands (seq BIGINT NOT NULL, idx BIGINT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (seq, idx))",
    "CREATE TABLE IF NOT EXISTS tokens (prefix TEXT PRIMARY KEY, hash TEXT NOT NULL, scope TEXT NOT NULL, tenant TEXT, created_us BIGINT NOT NULL, revoked BIGINT NOT NULL DEFAULT 0)",
];

/// One accepted input, as journaled. Times are on the row (`at_us`, Unix µs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    TenantAdded {
        tenant: u32,
        name: String,
        weight: f64,
        quota: BTreeMap<String, u32>,
        /// The GPU limit the engine enforces (derived from `quota`).
        gpu_limit: Option<u32>,
        unix_user: Option<String>,
    },
    Submitted {
        job: u32,
        tenant: u32,
        request: SubmitRequest,
    },
    Cancelled {
        job: u32,
    },
    /// An agent registered and was bound to declared node `node`.
    NodeJoined {
        node: u32,
        name: String,
        gpu_uuids: Vec<String>,
    },
    /// Missed heartbeats (or the agent said it is leaving).
    NodeLost {
        node: u32,
    },
    /// The current attempt's process exited (exit status 0: completed).
    Exited {
        job: u32,
        attempt: u32,
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// The current attempt could not be started.
    LaunchFailed {
        job: u32,
        attempt: u32,
        message: String,
    },
    /// The current attempt's process vanished without an exit status.
    Vanished {
        job: u32,
        attempt: u32,
    },
    /// A timer the policy asked for fired.
    Wakeup,
}

impl Entry {
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::TenantAdded { .. } => "tenant_added",
            Entry::Submitted { .. } => "submitted",
            Entry::Cancelled { .. } => "cancelled",
            Entry::NodeJoined { .. } => "node_joined",
            Entry::NodeLost { .. } => "node_lost",
            Entry::Exited { .. } => "exited",
            Entry::LaunchFailed { .. } => "launch_failed",
            Entry::Vanished { .. } => "vanished",
            Entry::Wakeup => "wakeup",
        }
    }
}

/// A journal row.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub at_us: u64,
    pub entry: Entry,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("database {url}: {source}")]
    Open { url: String, source: sqlx::Error },
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("journal row {seq}: {message}")]
    Corrupt { seq: u64, message: String },
    #[error("{0}")]
    Setup(String),
}

/// `cotenant.db` or `sqlite:PATH` -> a SQLite URL that creates the file;
/// `postgres://...` is kept.
pub fn database_url(db: &str) -> String {
    if db.starts_with("postgres://") || db.starts_with("postgresql://") {
        db.to_string()
    } else {
        let path = db.strip_prefix("sqlite://").or_else(|| db.strip_prefix("sqlite:")).unwrap_or(db);
        format!("sqlite://{path}?mode=rwc")
    }
}

/// The server's database: journal, meta and tokens.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    sqlite: bool,
}

impl Db {
    /// Opens (creating if needed) the database at `db` (a path or URL) and its tables.
    /// SQLite runs in WAL mode with `synchronous=FULL`: a committed entry survives
    /// kill -9 and power loss.
    pub async fn open(db: &str) -> Result<Db, JournalError> {
        sqlx::any::install_default_drivers();
        let url = database_url(db);
        let sqlite = url.starts_with("sqlite:");
        let open_err = |source| JournalError::Open { url: url.clone(), source };
        let options = AnyConnectOptions::from_str(&url).map_err(open_err)?;
        let pool = AnyPoolOptions::new()
            .max_connections(if sqlite { 4 } else { 8 })
            .acquire_timeout(Duration::from_secs(30))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        sqlx::query("PRAGMA journal_mode=WAL").execute(&mut *conn).await?;
                        sqlx::query("PRAGMA synchronous=FULL").execute(&mut *conn).await?;
                        sqlx::query("PRAGMA busy_timeout=30000").execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(open_err)?;
        for statement in SCHEMA {
            sqlx::query(statement).execute(&pool).await?;
        }
        Ok(Db { pool, sqlite })
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }
    pub fn is_sqlite(&self) -> bool {
        self.sqlite
    }

    pub async fn meta(&self, key: &str) -> Result<Option<String>, JournalError> {
        let row =
            sqlx::query("SELECT value FROM meta WHERE key = $1").bind(key).fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.get::<String, _>(0)))
    }

    /// Sets `key` only if it has no value yet; returns the value it has afterwards.
    pub async fn meta_init(&self, key: &str, value: &str) -> Result<String, JournalError> {
        if let Some(existing) = self.meta(key).await? {
            return Ok(existing);
        }
        sqlx::query("INSERT INTO meta (key, value) VALUES ($1, $2)")
            .bind(key)
            .bind(value)
            .execute(&self.pool)
            .await?;
        Ok(value.to_string())
    }

    /// The next sequence number (1 for an empty journal).
    pub async fn next_seq(&self) -> Result<u64, JournalError> {
        let row = sqlx::query("SELECT MAX(seq) FROM journal").fetch_one(&self.pool).await?;
        let max: Option<i64> = row.try_get(0).ok();
        Ok(max.map_or(1, |m| m as u64 + 1))
    }

    /// Appends `records` in one transaction (group commit): all or none.
    pub async fn append(&self, records: &[Record]) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        for record in records {
            let body = serde_json::to_string(&record.entry)
                .map_err(|e| JournalError::Corrupt { seq: record.seq, message: e.to_string() })?;
            sqlx::query("INSERT INTO journal (seq, at_us, kind, body) VALUES ($1, $2, $3, $4)")
                .bind(record.seq as i64)
                .bind(record.at_us as i64)
                .bind(record.entry.kind())
                .bind(body)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records the commands the engine answered to entries (Debug text, one row each).
    pub async fn record_commands(&self, commands: &[(u64, Vec<String>)]) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        for (seq, texts) in commands {
            for (idx, text) in texts.iter().enumerate() {
                sqlx::query("INSERT INTO commands (seq, idx, body) VALUES ($1, $2, $3)")
                    .bind(*seq as i64)
                    .bind(idx as i64)
                    .bind(text.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The whole journal, in order.
    pub async fn read_all(&self) -> Result<Vec<Record>, JournalError> {
        let rows =
            sqlx::query("SELECT seq, at_us, body FROM journal ORDER BY seq").fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|row| {
                let seq = row.get::<i64, _>(0) as u64;
                let at_us = row.get::<i64, _>(1) as u64;
                let body: String = row.get(2);
                let entry = serde_json::from_str(&body)
                    .map_err(|e| JournalError::Corrupt { seq, message: format!("{e} in {body}") })?;
                Ok(Record { seq, at_us, entry })
            })
            .collect()
    }

    /// The recorded commands, by journal sequence number.
    pub async fn read_commands(&self) -> Result<BTreeMap<u64, Vec<String>>, JournalError> {
        let rows =
            sqlx::query("SELECT seq, body FROM commands ORDER BY seq, idx").fetch_all(&self.pool).await?;
        let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for row in rows {
            out.entry(row.get::<i64, _>(0) as u64).or_default().push(row.get(1));
        }
        Ok(out)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
