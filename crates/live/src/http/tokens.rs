//! Bearer tokens: `ct_<prefix>_<secret>`, stored in the `tokens` table as the
//! prefix (the row's key, not secret) and an argon2 hash of the whole token.
//! A token is shown once, when it is made. Argon2 is slow on purpose, so a
//! token that verified once is remembered in memory (by the whole token) and
//! only its row is re-read, every [`RECHECK`], to notice a revocation.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use sqlx::Row;

use crate::api::Scope;
use crate::journal::{Db, JournalError};

/// How long a remembered token is trusted before its row is read again.
pub(super) const RECHECK: Duration = Duration::from_secs(2);
/// Characters of the prefix and of the secret (hex: 32 and 128 random bits).
const PREFIX_CHARS: usize = 8;
const SECRET_CHARS: usize = 32;
/// Most tokens remembered at once (each entry is one verified token).
const MAX_REMEMBERED: usize = 100_000;

/// Creates an admin token if the database holds no live one; returns it (to
/// be shown once) or `None`.
pub async fn bootstrap_admin(db: &Db) -> Result<Option<String>, JournalError> {
    let row = sqlx::query("SELECT COUNT(*) FROM tokens WHERE scope = $1 AND revoked = 0")
        .bind(scope_name(Scope::Admin))
        .fetch_one(db.pool())
        .await?;
    if row.try_get::<i64, _>(0)? > 0 {
        return Ok(None);
    }
    create_token(db, Scope::Admin, None).await.map(Some)
}

/// Creates a token of `scope` (a tenant's names the tenant; others name none)
/// and stores its argon2 hash. Returns the token: it is not stored anywhere.
pub async fn create_token(db: &Db, scope: Scope, tenant: Option<&str>) -> Result<String, JournalError> {
    match (scope, tenant) {
        (Scope::Tenant, None) => {
            return Err(JournalError::Setup("a tenant token must name its tenant".into()))
        }
        (Scope::Admin | Scope::Agent, Some(name)) => {
            return Err(JournalError::Setup(format!(
                "an {} token names no tenant (got '{name}')",
                scope_name(scope)
            )))
        }
        _ => {}
    }
    let mut last_error = None;
    // A prefix collision (1 in 2^32 per pair) fails the insert; a new prefix is drawn.
    for _ in 0..3 {
        let prefix = random_hex(PREFIX_CHARS / 2)?;
        let token = format!("ct_{prefix}_{}", random_hex(SECRET_CHARS / 2)?);
        let hash = hash(token.clone()).await?;
        let created_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64);
        let inserted = sqlx::query(
            "INSERT INTO tokens (prefix, hash, scope, tenant, created_us, revoked) VALUES ($1, $2, $3, $4, $5, 0)",
        )
        .bind(prefix)
        .bind(hash)
        .bind(scope_name(scope))
        .bind(tenant.map(str::to_string))
        .bind(created_us)
        .execute(db.pool())
        .await;
        match inserted {
            Ok(_) => return Ok(token),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.map_or_else(|| JournalError::Setup("token not stored".into()), JournalError::Sql))
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Admin => "admin",
        Scope::Tenant => "tenant",
        Scope::Agent => "agent",
    }
}

fn parse_scope(text: &str) -> Option<Scope> {
    match text {
        "admin" => Some(Scope::Admin),
        "tenant" => Some(Scope::Tenant),
        "agent" => Some(Scope::Agent),
        _ => None,
    }
}

fn random_hex(bytes: usize) -> Result<String, JournalError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::getrandom(&mut buffer).map_err(|e| JournalError::Setup(format!("random: {e}")))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

async fn hash(token: String) -> Result<String, JournalError> {
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|e| JournalError::Setup(format!("random: {e}")))?;
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::encode_b64(&salt).map_err(|e| JournalError::Setup(format!("salt: {e}")))?;
        Argon2::default()
            .hash_password(token.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| JournalError::Setup(format!("argon2: {e}")))
    })
    .await
    .map_err(|e| JournalError::Setup(format!("hashing task: {e}")))?
}

/// The prefix of a well-formed token (`ct_` + 8 hex + `_` + 32 hex).
fn prefix_of(token: &str) -> Option<&str> {
    let rest = token.strip_prefix("ct_")?;
    let (prefix, secret) = rest.split_once('_')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(prefix, PREFIX_CHARS) && hex(secret, SECRET_CHARS)).then_some(prefix)
}

/// What a verified token allows.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Found {
    pub scope: Scope,
    pub tenant: Option<String>,
    pub prefix: String,
}

struct Remembered {
    found: Found,
    hash: String,
    checked: Instant,
}

/// Verifies tokens against the `tokens` table, remembering those that verified.
pub(super) struct Verifier {
    db: Db,
    remembered: Mutex<HashMap<String, Remembered>>,
    /// One argon2 check at a time: many first requests with one new token
    /// cost one check, and bad tokens cannot take every core from the engine.
    checking: tokio::sync::Mutex<()>,
}

impl Verifier {
    pub fn new(db: Db) -> Verifier {
        Verifier { db, remembered: Mutex::new(HashMap::new()), checking: tokio::sync::Mutex::new(()) }
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<String, Remembered>> {
        self.remembered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The token's scope and tenant, or `None` for a token that is malformed,
    /// unknown, revoked or wrong.
    pub async fn verify(&self, token: &str) -> Result<Option<Found>, JournalError> {
        let Some(prefix) = prefix_of(token) else { return Ok(None) };
        let known = self.remembered().get(token).map(|r| (r.found.clone(), r.hash.clone(), r.checked));
        if let Some((found, _, checked)) = &known {
            if checked.elapsed() < RECHECK {
                return Ok(Some(found.clone()));
            }
        }
        let row = sqlx::query("SELECT hash, scope, tenant, revoked FROM tokens WHERE prefix = $1")
            .bind(prefix)
            .fetch_optional(self.db.pool())
            .await?;
        let Some(row) = row else {
            self.remembered().remove(token);
            return Ok(None);
        };
        let stored: String = row.try_get(0)?;
        let scope: String = row.try_get(1)?;
        let tenant: Option<String> = row.try_get(2)?;
        let revoked: i64 = row.try_get(3)?;
        let Some(scope) = parse_scope(&scope).filter(|_| revoked == 0) else {
            self.remembered().remove(token);
            return Ok(None);
        };
        let found = Found { scope, tenant, prefix: prefix.to_string() };
        let _checking;
        if known.as_ref().is_none_or(|(_, hash, _)| *hash != stored) {
            _checking = self.checking.lock().await;
            // Another request may have checked this token while this one waited.
            let now_known = self.remembered().get(token).is_some_and(|r| r.hash == stored);
            if !now_known && !check(token.to_string(), stored.clone()).await {
                return Ok(None);
            }
        }
        let mut remembered = self.remembered();
        if remembered.len() >= MAX_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(
            token.to_string(),
            Remembered { found: found.clone(), hash: stored, checked: Instant::now() },
        );
        Ok(Some(found))
    }
}

async fn check(token: String, stored: String) -> bool {
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored)
            .is_ok_and(|hash| Argon2::default().verify_password(token.as_bytes(), &hash).is_ok())
    })
    .await
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_tokens_have_a_prefix() {
        assert_eq!(prefix_of("ct_0123abcd_0123456789abcdef0123456789abcdef"), Some("0123abcd"));
        assert_eq!(prefix_of("ct_0123abcd_0123456789abcdef0123456789abcde"), None);
        assert_eq!(prefix_of("ct_0123abcz_0123456789abcdef0123456789abcdef"), None);
        assert_eq!(prefix_of("xx_0123abcd_0123456789abcdef0123456789abcdef"), None);
        assert_eq!(prefix_of(""), None);
    }
}
