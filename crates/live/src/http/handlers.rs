//! The handlers: scope was checked by `authorize`; here a tenant's view is
//! narrowed to its own jobs and rows, and requests go to the controller.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::metrics::Metrics;
use super::{App, Caller, Failure, JobId, JsonBody, Query};
use crate::agent_api::{DesiredQuery, LogChunk, Register, Report};
use crate::api::{
    self, JobQuery, Page, Scope, SubmitRequest, TenantRequest, TokenRequest, UsageQuery, MAX_PAGE,
};
use crate::controller::LogRefusal;

/// Items on a page when the query gives no `limit`.
const DEFAULT_PAGE: u32 = 100;
/// Longest an agent's long-poll is held (a longer `wait_ms` is shortened to it).
const MAX_WAIT_MS: u64 = 60_000;

pub(super) async fn health(State(app): State<App>) -> Json<api::Health> {
    Json(app.controller().health())
}

pub(super) async fn submit(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    JsonBody(request): JsonBody<SubmitRequest>,
) -> Result<(StatusCode, Json<api::JobView>), Failure> {
    let Some(tenant) = caller.tenant_id() else {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "submit with a tenant's token: jobs belong to a tenant".into(),
        ));
    };
    let metrics = &app.0.metrics;
    if let Err(seconds) = app.0.limiter.take(&caller.prefix) {
        Metrics::count(&metrics.rate_limited);
        let mut failure = Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many submissions with this token; retry in {seconds} s"),
        );
        failure.retry_after = Some(seconds);
        return Err(failure);
    }
    match app.controller().submit(tenant, request).await {
        Ok(view) => {
            Metrics::count(&metrics.accepted);
            Ok((StatusCode::CREATED, Json(view)))
        }
        Err(refusal) => {
            Metrics::count(&metrics.refused);
            Err(refusal.into())
        }
    }
}

/// What a cursor is bound to: the listing it was issued for (tenant and filters).
fn listing_key(tenant: Option<u32>, query: &JobQuery, since: u64, until: u64) -> String {
    let tenant = tenant.map_or_else(|| "*".to_string(), |t| t.to_string());
    let status = query.status.map_or("*", |s| s.as_str());
    format!("{tenant}|{status}|{since}|{until}")
}

fn encode_cursor(listing: &str, (submitted_us, id): (u64, u32)) -> String {
    format!("{listing}|{submitted_us}|{id}").bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(listing: &str, cursor: &str) -> Result<(u64, u32), Failure> {
    let malformed = || Failure::bad("cursor: not one this server issued; start without it".into());
    if !cursor.len().is_multiple_of(2) || cursor.len() > 512 {
        return Err(malformed());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| cursor.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(malformed)?;
    let text = String::from_utf8(bytes).map_err(|_| malformed())?;
    let (bound, key) = text
        .rsplit_once('|')
        .and_then(|(rest, id)| {
            let (bound, submitted) = rest.rsplit_once('|')?;
            Some((bound, (submitted.parse().ok()?, id.parse().ok()?)))
        })
        .ok_or_else(malformed)?;
    if bound != listing {
        return Err(Failure::bad(
            "cursor: issued for another listing (another tenant or other filters); start without it".into(),
        ));
    }
    Ok(key)
}

pub(super) async fn list_jobs(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<JobQuery>,
) -> Result<Json<Page<api::JobView>>, Failure> {
    let tenant =
        match (&caller.tenant, &query.tenant) {
            (Some((_, own)), Some(named)) if named != own => {
                return Err(Failure::new(
                    StatusCode::FORBIDDEN,
                    format!("tenant '{named}': a tenant lists only its own jobs"),
                ))
            }
            (Some((id, _)), _) => Some(*id),
            (None, Some(named)) => Some(app.controller().tenant_id(named).ok_or_else(|| {
                Failure::new(StatusCode::NOT_FOUND, format!("tenant: no tenant '{named}'"))
            })?),
            (None, None) => None,
        };
    let (since, until) = window(query.since, query.until)?;
    let limit = match query.limit {
        Some(0) => return Err(Failure::bad(format!("limit: 0; give 1 to {MAX_PAGE}"))),
        Some(n) => n.min(MAX_PAGE),
        None => DEFAULT_PAGE,
    };
    let listing = listing_key(tenant, &query, since, until);
    let after = query.cursor.as_deref().map(|c| decode_cursor(&listing, c)).transpose()?;
    let (items, last) = app.controller().list_jobs(tenant, query.status, since, until, after, limit as usize);
    Ok(Json(Page { items, next: last.map(|key| encode_cursor(&listing, key)) }))
}

/// `[since, until)` with defaults (all time); an empty window is refused.
fn window(since: Option<u64>, until: Option<u64>) -> Result<(u64, u64), Failure> {
    let (since, until) = (since.unwrap_or(0), until.unwrap_or(u64::MAX));
    if since >= until {
        return Err(Failure::bad(format!("since {since} is not before until {until}")));
    }
    Ok((since, until))
}

pub(super) async fn show_job(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    JobId(id): JobId,
) -> Result<Json<api::JobView>, Failure> {
    app.visible_job(&caller, id).map(Json)
}

pub(super) async fn cancel_job(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    JobId(id): JobId,
) -> Result<Json<api::JobView>, Failure> {
    app.visible_job(&caller, id)?;
    Ok(Json(app.controller().cancel(id).await?))
}

pub(super) async fn job_events(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    JobId(id): JobId,
) -> Result<Json<Vec<api::JobEvent>>, Failure> {
    app.visible_job(&caller, id)?;
    app.controller().job_events(id).map(Json).ok_or_else(|| Failure::not_found_job(id))
}

pub(super) async fn queue(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<api::QueueEntry>> {
    Json(own_rows(&caller, app.controller().queue()))
}

/// The rows a caller may see: a tenant its own, an admin all.
fn own_rows<T>(caller: &Caller, rows: Vec<(u32, T)>) -> Vec<T> {
    let own = caller.tenant_id();
    rows.into_iter().filter(|(tenant, _)| own.is_none_or(|t| t == *tenant)).map(|(_, row)| row).collect()
}

pub(super) async fn nodes(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
) -> Json<Vec<api::NodeView>> {
    let mut nodes = app.controller().nodes();
    if caller.scope != Scope::Admin {
        for node in &mut nodes {
            node.jobs.clear();
        }
    }
    Json(nodes)
}

pub(super) async fn usage(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<UsageQuery>,
) -> Result<Json<Vec<api::UsageRow>>, Failure> {
    let (since, until) = window(query.since, query.until)?;
    Ok(Json(own_rows(&caller, app.controller().usage(since, until))))
}

pub(super) async fn add_tenant(
    State(app): State<App>,
    JsonBody(request): JsonBody<TenantRequest>,
) -> Result<(StatusCode, Json<api::TenantCreated>), Failure> {
    let tenant = app.controller().add_tenant(request).await?;
    let token =
        super::create_token(app.db(), Scope::Tenant, Some(&tenant.name)).await.map_err(Failure::storage)?;
    Ok((StatusCode::CREATED, Json(api::TenantCreated { tenant, token })))
}

pub(super) async fn tenants(State(app): State<App>) -> Json<Vec<api::TenantView>> {
    Json(app.controller().tenants())
}

pub(super) async fn add_token(
    State(app): State<App>,
    JsonBody(request): JsonBody<TokenRequest>,
) -> Result<(StatusCode, Json<api::TokenCreated>), Failure> {
    match (request.scope, &request.tenant) {
        (Scope::Tenant, None) => return Err(Failure::bad("tenant: a tenant token names its tenant".into())),
        (Scope::Tenant, Some(name)) if app.controller().tenant_id(name).is_none() => {
            return Err(Failure::new(StatusCode::NOT_FOUND, format!("tenant: no tenant '{name}'")))
        }
        (Scope::Admin | Scope::Agent, Some(name)) => {
            return Err(Failure::bad(format!(
                "tenant: '{name}' given, but an admin or agent token names no tenant"
            )))
        }
        _ => {}
    }
    let token = super::create_token(app.db(), request.scope, request.tenant.as_deref())
        .await
        .map_err(Failure::storage)?;
    Ok((StatusCode::CREATED, Json(api::TokenCreated { token, scope: request.scope, tenant: request.tenant })))
}

pub(super) async fn agent_register(
    State(app): State<App>,
    JsonBody(request): JsonBody<Register>,
) -> Result<Json<crate::agent_api::Registered>, Failure> {
    Ok(Json(app.controller().register(request).await?))
}

pub(super) async fn agent_desired(
    State(app): State<App>,
    Query(mut query): Query<DesiredQuery>,
) -> Result<Json<crate::agent_api::Desired>, Failure> {
    query.wait_ms = query.wait_ms.min(MAX_WAIT_MS);
    Ok(Json(app.controller().desired(query).await?))
}

pub(super) async fn agent_report(
    State(app): State<App>,
    JsonBody(report): JsonBody<Report>,
) -> Result<StatusCode, Failure> {
    app.controller().report(report).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn agent_logs(State(app): State<App>, JsonBody(chunk): JsonBody<LogChunk>) -> Response {
    match app.controller().log_chunk(chunk).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(LogRefusal::Have(have)) => {
            let mut failure = Failure::new(
                StatusCode::CONFLICT,
                format!("the server's copy ends at byte {have}; send from there"),
            );
            failure.have = Some(have);
            failure.into_response()
        }
        Err(LogRefusal::Bad(refusal)) => Failure::from(refusal).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_pages_only_the_listing_it_came_from() {
        let query = JobQuery::default();
        let a = listing_key(Some(0), &query, 0, u64::MAX);
        let b = listing_key(Some(1), &query, 0, u64::MAX);
        let cursor = encode_cursor(&a, (1_700_000_000_000_000, 42));
        assert_eq!(decode_cursor(&a, &cursor).ok(), Some((1_700_000_000_000_000, 42)));
        let refused = decode_cursor(&b, &cursor).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("another listing"), "{}", refused.message);
        let pending = JobQuery { status: Some(api::JobStatus::Pending), ..JobQuery::default() };
        assert!(decode_cursor(&listing_key(Some(0), &pending, 0, u64::MAX), &cursor).is_err());
        assert!(decode_cursor(&a, "zz").unwrap_err().message.contains("not one this server issued"));
        assert!(decode_cursor(&a, "").is_err());
    }
}
