//! The server's HTTP face: the client and agent APIs of `crate::api` and
//! `crate::agent_api` over axum, in front of a [`Controller`].
//!
//! Every route is registered from [`ROUTES`], and one middleware checks the
//! caller's token against the scope [`ROUTES`] gives the matched route before
//! any handler runs: a route cannot exist without a scope, and the test that
//! walks [`ROUTES`] covers every route there is. Handlers then narrow what a
//! tenant sees (its own jobs; another tenant's job is 404, as one that does not
//! exist). Every refusal is an [`ApiError`] JSON body with a 4xx status; 5xx
//! only when the server's own storage fails.
//!
//! This layer never mutates state itself: it authenticates, checks scope,
//! parses, and calls the controller.

use std::future::Future;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use serde::de::DeserializeOwned;

use crate::api::{self, ApiError, Scope, MAX_BODY_BYTES};
use crate::controller::Controller;
use crate::journal::{self, JournalError};
use crate::setup::Refusal;

mod handlers;
mod logs;
mod metrics;
mod rate;
mod tokens;

pub use tokens::{bootstrap_admin, create_token};

/// Every route: (method, path as axum matches it, scope). Scopes: `none` (no
/// token), `tenant` (a tenant's or an admin's token; job routes narrow a tenant
/// to its own jobs), `admin` (admin only), `agent` (an agent's or an admin's token).
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/v1/health", "none"),
    ("POST", "/v1/jobs", "tenant"),
    ("GET", "/v1/jobs", "tenant"),
    ("GET", "/v1/jobs/{id}", "tenant"),
    ("POST", "/v1/jobs/{id}/cancel", "tenant"),
    ("GET", "/v1/jobs/{id}/events", "tenant"),
    ("GET", "/v1/jobs/{id}/logs", "tenant"),
    ("GET", "/v1/queue", "tenant"),
    ("GET", "/v1/nodes", "tenant"),
    ("GET", "/v1/usage", "tenant"),
    ("POST", "/v1/admin/tenants", "admin"),
    ("GET", "/v1/admin/tenants", "admin"),
    ("POST", "/v1/admin/tokens", "admin"),
    ("POST", "/v1/agent/register", "agent"),
    ("GET", "/v1/agent/desired", "agent"),
    ("POST", "/v1/agent/report", "agent"),
    ("POST", "/v1/agent/logs", "agent"),
    ("GET", "/metrics", "admin"),
];

/// Per-token limits on `POST /v1/jobs` (a token bucket: `submit_burst`
/// submissions at once, refilled at `submit_rate_per_s`).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpOptions {
    pub submit_rate_per_s: f64,
    pub submit_burst: u32,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions { submit_rate_per_s: 2000.0, submit_burst: 4000 }
    }
}

/// What every handler shares.
struct Shared {
    controller: Controller,
    tokens: tokens::Verifier,
    limiter: rate::Limiter,
    metrics: metrics::Metrics,
    /// Turns true when `serve` is shutting down: followed log streams end.
    closing: tokio::sync::watch::Receiver<bool>,
}

#[derive(Clone)]
struct App(Arc<Shared>);

/// The caller, as the token it presented says (put in the request by [`authorize`]).
#[derive(Clone, Debug)]
struct Caller {
    scope: Scope,
    /// Tenant id and name for a tenant's token.
    tenant: Option<(u32, String)>,
    /// The token's prefix: the key of its rate-limit bucket.
    prefix: String,
}

impl Caller {
    /// The tenant a listing or a job is narrowed to: `None` for an admin (everything).
    fn tenant_id(&self) -> Option<u32> {
        self.tenant.as_ref().map(|(id, _)| *id)
    }
}

/// The HTTP API in front of `controller`.
pub fn router(controller: Controller, options: HttpOptions) -> Router {
    let (_never, closing) = tokio::sync::watch::channel(false);
    build(controller, options, closing)
}

/// Serves the API on `listener` until `shutdown` resolves, then finishes the
/// requests in flight (followed log streams end at once) and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    controller: Controller,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (close, closing) = tokio::sync::watch::channel(false);
    let app = build(controller, options, closing);
    let signal = async move {
        shutdown.await;
        let _ = close.send(true);
    };
    axum::serve(listener, app).with_graceful_shutdown(signal).await
}

fn build(
    controller: Controller,
    options: HttpOptions,
    closing: tokio::sync::watch::Receiver<bool>,
) -> Router {
    let app = App(Arc::new(Shared {
        tokens: tokens::Verifier::new(controller.db().clone()),
        limiter: rate::Limiter::new(options.submit_rate_per_s, options.submit_burst),
        metrics: metrics::Metrics::default(),
        controller,
        closing,
    }));
    let mut router = Router::new();
    for &(method, path, scope) in ROUTES {
        let guard = Guard { app: app.clone(), method, path, scope };
        router = router.route(
            path,
            endpoint(method, path).route_layer(middleware::from_fn_with_state(guard, authorize)),
        );
    }
    router
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(app.clone(), metrics::time_request))
        .with_state(app)
}

/// The handler of each entry of [`ROUTES`].
fn endpoint(method: &str, path: &str) -> MethodRouter<App> {
    match (method, path) {
        ("GET", "/v1/health") => get(handlers::health),
        ("POST", "/v1/jobs") => post(handlers::submit),
        ("GET", "/v1/jobs") => get(handlers::list_jobs),
        ("GET", "/v1/jobs/{id}") => get(handlers::show_job),
        ("POST", "/v1/jobs/{id}/cancel") => post(handlers::cancel_job),
        ("GET", "/v1/jobs/{id}/events") => get(handlers::job_events),
        ("GET", "/v1/jobs/{id}/logs") => get(logs::job_logs),
        ("GET", "/v1/queue") => get(handlers::queue),
        ("GET", "/v1/nodes") => get(handlers::nodes),
        ("GET", "/v1/usage") => get(handlers::usage),
        ("POST", "/v1/admin/tenants") => post(handlers::add_tenant),
        ("GET", "/v1/admin/tenants") => get(handlers::tenants),
        ("POST", "/v1/admin/tokens") => post(handlers::add_token),
        ("POST", "/v1/agent/register") => post(handlers::agent_register),
        ("GET", "/v1/agent/desired") => get(handlers::agent_desired),
        ("POST", "/v1/agent/report") => post(handlers::agent_report),
        ("POST", "/v1/agent/logs") => post(handlers::agent_logs),
        ("GET", "/metrics") => get(metrics::render),
        // A ROUTES entry without a handler answers 500 (the route-walking test fails on it).
        _ => MethodRouter::new().fallback(unrouted),
    }
}

/// What [`authorize`] checks on one route: its entry in [`ROUTES`].
#[derive(Clone)]
struct Guard {
    app: App,
    method: &'static str,
    path: &'static str,
    scope: &'static str,
}

/// Checks the caller's token against the route's scope in [`ROUTES`] (every
/// route is registered with its guard) and hands the caller to the handler.
async fn authorize(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let Guard { app, method, path, scope } = guard;
    if scope == "none" {
        return next.run(request).await;
    }
    let caller = match caller(&app, request.headers().get(header::AUTHORIZATION)).await {
        Ok(caller) => caller,
        Err(failure) => return failure.into_response(),
    };
    let allowed = match scope {
        "tenant" => matches!(caller.scope, Scope::Tenant | Scope::Admin),
        "agent" => matches!(caller.scope, Scope::Agent | Scope::Admin),
        _ => caller.scope == Scope::Admin,
    };
    if !allowed {
        let needs = match scope {
            "tenant" => "a tenant's or an admin's token",
            "agent" => "an agent's or an admin's token",
            _ => "an admin token",
        };
        return Failure::new(StatusCode::FORBIDDEN, format!("{method} {path} needs {needs}")).into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

async fn caller(app: &App, header: Option<&HeaderValue>) -> Result<Caller, Failure> {
    let unauthorized = |m: &str| Failure::new(StatusCode::UNAUTHORIZED, m.to_string());
    let Some(value) = header else {
        return Err(unauthorized("missing 'Authorization: Bearer TOKEN' header"));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.get(..7).filter(|scheme| scheme.eq_ignore_ascii_case("bearer ")).map(|_| &v[7..]))
        .map(str::trim)
        .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer TOKEN'"))?;
    let Some(found) = app.0.tokens.verify(token).await.map_err(Failure::storage)? else {
        return Err(unauthorized("unknown or revoked token"));
    };
    let tenant = match (found.scope, found.tenant) {
        (Scope::Tenant, Some(name)) => match app.0.controller.tenant_id(&name) {
            Some(id) => Some((id, name)),
            None => return Err(unauthorized(&format!("the token's tenant '{name}' does not exist"))),
        },
        (Scope::Tenant, None) => return Err(unauthorized("tenant token without a tenant")),
        _ => None,
    };
    Ok(Caller { scope: found.scope, tenant, prefix: found.prefix })
}

async fn no_route(method: Method, uri: Uri) -> Failure {
    Failure::new(StatusCode::NOT_FOUND, format!("no route {method} {}", uri.path()))
}

async fn wrong_method(method: Method, uri: Uri) -> Failure {
    let path = uri.path();
    let allowed: Vec<&str> =
        ROUTES.iter().filter(|(_, p, _)| path_matches(p, path)).map(|(m, _, _)| *m).collect();
    let mut failure = Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {path}; use {}", allowed.join(" or ")),
    );
    failure.allow = Some(allowed.join(", "));
    failure
}

async fn unrouted() -> Failure {
    Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "route without a handler".into())
}

/// Whether `path` matches the template `pattern` (`{x}` matches one segment).
fn path_matches(pattern: &str, path: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (pattern.split('/').collect(), path.split('/').collect());
    a.len() == b.len() && a.iter().zip(&b).all(|(p, s)| p.starts_with('{') || p == s)
}

/// A refusal as the API answers it: an [`ApiError`] JSON body.
#[derive(Debug)]
pub(crate) struct Failure {
    status: StatusCode,
    message: String,
    /// For a log chunk at the wrong offset: the length the server has.
    have: Option<u64>,
    /// Seconds, for 429.
    retry_after: Option<u64>,
    /// Methods, for 405.
    allow: Option<String>,
}

impl Failure {
    fn new(status: StatusCode, message: String) -> Failure {
        Failure { status, message, have: None, retry_after: None, allow: None }
    }
    fn bad(message: String) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, message)
    }
    fn storage(error: JournalError) -> Failure {
        tracing::error!("storage: {error}");
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, format!("storage: {error}"))
    }
    fn not_found_job(id: u32) -> Failure {
        Failure::new(StatusCode::NOT_FOUND, format!("no job {id}"))
    }

    fn code(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::CONFLICT => "conflict",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::TOO_MANY_REQUESTS => "rate_limited",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            s if s.is_server_error() => "internal",
            _ => "bad_request",
        }
    }
}

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Failure {
        let status = match &refusal {
            Refusal::BadRequest(_) => StatusCode::BAD_REQUEST,
            Refusal::NotFound(_) => StatusCode::NOT_FOUND,
            Refusal::Conflict(_) | Refusal::Stale { .. } => StatusCode::CONFLICT,
        };
        Failure::new(status, refusal.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let error = ApiError { error: self.code().to_string(), message: self.message.clone() };
        let mut body = serde_json::to_value(&error).unwrap_or_default();
        if let (Some(have), Some(object)) = (self.have, body.as_object_mut()) {
            object.insert("have".into(), have.into());
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(allow) = self.allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
            response.headers_mut().insert(header::ALLOW, allow);
        }
        response
    }
}

/// A JSON body whose rejection is an [`ApiError`] (422 from axum becomes 400).
struct JsonBody<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Failure;
    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(JsonBody(value)),
            Err(rejection) => Err(json_failure(&rejection)),
        }
    }
}

fn json_failure(rejection: &JsonRejection) -> Failure {
    let status = match rejection.status() {
        StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
        other => other,
    };
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("request body over {MAX_BODY_BYTES} bytes")
    } else {
        rejection.body_text()
    };
    Failure::new(status, message)
}

/// A query string whose rejection is an [`ApiError`].
struct Query<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = Failure;
    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Failure> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|r: QueryRejection| Failure::new(StatusCode::BAD_REQUEST, r.body_text()))
    }
}

/// A job id in the path whose rejection is an [`ApiError`].
struct JobId(u32);

impl<S: Send + Sync> FromRequestParts<S> for JobId {
    type Rejection = Failure;
    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Failure> {
        axum::extract::Path::<u32>::from_request_parts(parts, state)
            .await
            .map(|p| JobId(p.0))
            .map_err(|r: PathRejection| Failure::bad(format!("job id: {}", r.body_text())))
    }
}

impl App {
    fn controller(&self) -> &Controller {
        &self.0.controller
    }
    fn db(&self) -> &journal::Db {
        self.0.controller.db()
    }
    /// The job if the caller may see it; another tenant's job is "no job", as one that does not exist.
    fn visible_job(&self, caller: &Caller, id: u32) -> Result<api::JobView, Failure> {
        match self.controller().job(id) {
            Some((owner, view)) if caller.tenant_id().is_none_or(|t| t == owner) => Ok(view),
            _ => Err(Failure::not_found_job(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_known_scope_and_is_listed_once() {
        for &(method, path, scope) in ROUTES {
            assert!(["none", "tenant", "admin", "agent"].contains(&scope), "{method} {path}: scope {scope}");
        }
        let mut seen: Vec<(&str, &str)> = ROUTES.iter().map(|r| (r.0, r.1)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), ROUTES.len(), "a route is listed twice");
    }

    #[test]
    fn path_templates_match_one_segment_per_parameter() {
        assert!(path_matches("/v1/jobs/{id}", "/v1/jobs/7"));
        assert!(!path_matches("/v1/jobs/{id}", "/v1/jobs/7/cancel"));
        assert!(path_matches("/v1/jobs", "/v1/jobs"));
        assert!(!path_matches("/v1/jobs", "/v1/queue"));
    }
}
