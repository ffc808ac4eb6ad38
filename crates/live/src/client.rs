//! The typed client of the server's API ([`crate::api`]): what `cotenant submit`,
//! `jobs`, `show`, ... call. One method per route; a refusal comes back as
//! [`ClientError::Api`] carrying the server's [`ApiError`], printed as
//! `server refused (409 conflict): <message>`; a server that cannot be reached
//! is named with its URL and where that URL came from (`COTENANT_SERVER` or not).

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::{
    self, ApiError, Health, JobEvent, JobQuery, JobView, LogQuery, NodeView, Page, QueueEntry, SubmitRequest,
    TenantCreated, TenantRequest, TenantView, TokenCreated, TokenRequest, UsageQuery, UsageRow,
};

/// The server a client talks to when neither `--server` nor `COTENANT_SERVER` names one.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";
/// Environment variables the client reads.
pub const SERVER_ENV: &str = "COTENANT_SERVER";
pub const TOKEN_ENV: &str = "COTENANT_TOKEN";

/// How long a request (other than a log stream) may take, and how long connecting may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest piece of a non-JSON error body quoted in a message.
const MAX_QUOTED_BODY: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a 4xx/5xx status and (usually) an [`ApiError`] body.
    #[error("server refused ({status} {}): {}", status_words(*status), error.message)]
    Api { status: u16, error: ApiError },
    /// The request never got an answer: connection refused, timeout, reset.
    #[error("{0}")]
    Http(String),
    /// The server answered 2xx with a body this client cannot read (a version mismatch?).
    #[error("{0}")]
    Decode(String),
    /// The client was given a server URL it cannot use.
    #[error("{0}")]
    Config(String),
}

impl ClientError {
    /// The HTTP status of a refusal (None: no answer came).
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// `409` -> `conflict`, `429` -> `too many requests`.
fn status_words(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("unknown status")
        .to_ascii_lowercase()
}

/// Where the client's server URL came from: said in connection errors, so that a
/// user who forgot `export COTENANT_SERVER=...` learns it from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerOrigin {
    /// Given explicitly (a `--server` flag, a test).
    Given,
    /// Read from `COTENANT_SERVER`.
    Env,
    /// [`DEFAULT_SERVER`], because `COTENANT_SERVER` is not set.
    Default,
}

#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    /// `http://host:port`, no trailing slash.
    base: String,
    token: Option<String>,
    origin: ServerOrigin,
}

impl Client {
    /// A client of `server` (`http://host:port`, or `host:port`) with an optional bearer token.
    pub fn new(server: &str, token: Option<String>) -> Result<Client, ClientError> {
        Client::with_origin(server, token, ServerOrigin::Given)
    }

    /// `COTENANT_SERVER` (default [`DEFAULT_SERVER`]) and `COTENANT_TOKEN`.
    pub fn from_env() -> Result<Client, ClientError> {
        Client::from_env_or(None, None)
    }

    /// `server` and `token` when given, else `COTENANT_SERVER` / `COTENANT_TOKEN`.
    pub fn from_env_or(server: Option<&str>, token: Option<String>) -> Result<Client, ClientError> {
        let token = token.or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.trim().is_empty()));
        match (server, std::env::var(SERVER_ENV).ok().filter(|s| !s.trim().is_empty())) {
            (Some(server), _) => Client::with_origin(server, token, ServerOrigin::Given),
            (None, Some(server)) => Client::with_origin(&server, token, ServerOrigin::Env),
            (None, None) => Client::with_origin(DEFAULT_SERVER, token, ServerOrigin::Default),
        }
    }

    pub fn with_origin(
        server: &str,
        token: Option<String>,
        origin: ServerOrigin,
    ) -> Result<Client, ClientError> {
        let base = server_url(server)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        let token = token.map(|t| t.trim().to_string());
        Ok(Client { http, base, token, origin })
    }

    /// The server URL, as used (`http://127.0.0.1:8080`).
    pub fn server(&self) -> &str {
        &self.base
    }
    pub fn origin(&self) -> ServerOrigin {
        self.origin
    }
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub async fn health(&self) -> Result<Health, ClientError> {
        self.call(self.http.get(self.url("/health"))).await
    }
    pub async fn submit(&self, req: &SubmitRequest) -> Result<JobView, ClientError> {
        self.call(self.http.post(self.url("/jobs")).json(req)).await
    }
    pub async fn jobs(&self, query: &JobQuery) -> Result<Page<JobView>, ClientError> {
        self.call(self.http.get(self.url("/jobs")).query(query)).await
    }
    pub async fn job(&self, id: u32) -> Result<JobView, ClientError> {
        self.call(self.http.get(self.url(&format!("/jobs/{id}")))).await
    }
    pub async fn cancel(&self, id: u32) -> Result<JobView, ClientError> {
        self.call(self.http.post(self.url(&format!("/jobs/{id}/cancel")))).await
    }
    pub async fn events(&self, id: u32) -> Result<Vec<JobEvent>, ClientError> {
        self.call(self.http.get(self.url(&format!("/jobs/{id}/events")))).await
    }
    pub async fn queue(&self) -> Result<Vec<QueueEntry>, ClientError> {
        self.call(self.http.get(self.url("/queue"))).await
    }
    pub async fn nodes(&self) -> Result<Vec<NodeView>, ClientError> {
        self.call(self.http.get(self.url("/nodes"))).await
    }
    pub async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>, ClientError> {
        self.call(self.http.get(self.url("/usage")).query(query)).await
    }
    pub async fn add_tenant(&self, req: &TenantRequest) -> Result<TenantCreated, ClientError> {
        self.call(self.http.post(self.url("/admin/tenants")).json(req)).await
    }
    pub async fn tenants(&self) -> Result<Vec<TenantView>, ClientError> {
        self.call(self.http.get(self.url("/admin/tenants"))).await
    }
    pub async fn create_token(&self, req: &TokenRequest) -> Result<TokenCreated, ClientError> {
        self.call(self.http.post(self.url("/admin/tokens")).json(req)).await
    }

    /// Streams a job's log: `sink` gets each piece as it arrives (with
    /// `follow`, until the job ends). Returns the number of bytes received.
    pub async fn logs(
        &self,
        id: u32,
        query: &LogQuery,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, ClientError> {
        let request = self.authorized(self.http.get(self.url(&format!("/jobs/{id}/logs"))).query(query));
        let mut response = self.check(request.send().await.map_err(|e| self.transport(e))?).await?;
        let mut received = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            received += chunk.len() as u64;
            sink(&chunk);
        }
        Ok(received)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}{path}", self.base, api::PREFIX)
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn call<T: DeserializeOwned>(&self, request: reqwest::RequestBuilder) -> Result<T, ClientError> {
        let request = self.authorized(request).timeout(REQUEST_TIMEOUT);
        let response = self.check(request.send().await.map_err(|e| self.transport(e))?).await?;
        let url = response.url().path().to_string();
        let body = response.bytes().await.map_err(|e| self.transport(e))?;
        decode(&url, &body)
    }

    /// A 2xx response as is; any other status as [`ClientError::Api`].
    async fn check(&self, response: reqwest::Response) -> Result<reqwest::Response, ClientError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.bytes().await.unwrap_or_default();
        let mut error = api_error(status.as_u16(), &body);
        if status == reqwest::StatusCode::UNAUTHORIZED && self.token.is_none() {
            error.message.push_str(&format!(" (no token was sent: set {TOKEN_ENV} or pass --token)"));
        }
        Err(ClientError::Api { status: status.as_u16(), error })
    }

    /// A request that got no answer: names the server and where its URL came from.
    fn transport(&self, error: reqwest::Error) -> ClientError {
        let what = if error.is_timeout() {
            "timed out talking to"
        } else if error.is_connect() {
            "cannot connect to"
        } else {
            "lost the connection to"
        };
        let origin = match self.origin {
            ServerOrigin::Given => "given on the command line".to_string(),
            ServerOrigin::Env => format!("from {SERVER_ENV}"),
            ServerOrigin::Default => format!("the default: {SERVER_ENV} is not set"),
        };
        ClientError::Http(format!(
            "{what} the cotenant server at {} ({origin}): {}",
            self.base,
            root_cause(&error)
        ))
    }
}

/// A server URL as the client and the agent use it: `host:port` -> `http://host:port`,
/// trailing slashes dropped; https refused (this build has no TLS).
pub fn server_url(server: &str) -> Result<String, ClientError> {
    let server = server.trim().trim_end_matches('/');
    if server.is_empty() {
        return Err(ClientError::Config("server URL is empty (expected http://HOST:PORT)".into()));
    }
    if server.starts_with("https://") {
        return Err(ClientError::Config(format!(
            "server '{server}': https is not supported by this build; use http:// (behind a TLS proxy if needed)"
        )));
    }
    let base = if server.starts_with("http://") { server.to_string() } else { format!("http://{server}") };
    reqwest::Url::parse(&base).map_err(|e| ClientError::Config(format!("server '{server}': {e}")))?;
    Ok(base)
}

fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| {
        ClientError::Decode(format!(
            "{path}: the server's answer is not what this client expects ({e}): {}",
            quote(body)
        ))
    })
}

/// The server's [`ApiError`], or one made from the status and whatever text came.
fn api_error(status: u16, body: &[u8]) -> ApiError {
    if let Ok(error) = serde_json::from_slice::<ApiError>(body) {
        return error;
    }
    let text = quote(body);
    ApiError {
        error: match status {
            400 => "bad_request",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            409 => "conflict",
            413 => "too_large",
            429 => "rate_limited",
            503 => "unavailable",
            _ => "internal",
        }
        .to_string(),
        message: if text.is_empty() { status_words(status) } else { text },
    }
}

/// Up to [`MAX_QUOTED_BODY`] characters of a body, trimmed, as text.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_BODY) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// The innermost cause (`Connection refused (os error 111)`), which says more
/// than reqwest's `error sending request for url`.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::extract::{Path, RawQuery};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use axum::{Json, Router};
    use serde::Serialize;

    /// A query as the client sends it.
    fn query_string<Q: Serialize>(query: &Q) -> Result<String, ClientError> {
        let url = reqwest::Url::parse("http://x/").map_err(|e| ClientError::Config(e.to_string())).and_then(
            |base| {
                reqwest::Client::new()
                    .get(base)
                    .query(query)
                    .build()
                    .map_err(|e| ClientError::Config(format!("query: {e}")))
            },
        )?;
        Ok(url.url().query().unwrap_or("").to_string())
    }

    fn refusal(status: StatusCode, code: &str, message: &str) -> axum::response::Response {
        (status, Json(ApiError { error: code.into(), message: message.into() })).into_response()
    }

    fn view(id: u32) -> JobView {
        let view = serde_json::json!({
            "id": id, "tenant": "a", "name": null, "status": "pending", "command": ["true"], "gpus": 1,
            "gpu_type": null, "submitted_us": 1, "decided_us": null, "started_us": null, "ended_us": null,
            "attempt": 0, "nodes": [], "gpu_uuids": [], "exit_code": null, "reason": null, "preemptions": 0
        });
        serde_json::from_value(view).expect("a JobView")
    }

    /// A canned server: submit refuses with 409 unless authorized by `Bearer good`;
    /// job 7 exists, others are a plain-text 404; logs stream in three chunks.
    async fn canned() -> String {
        let app = Router::new()
            .route(
                "/v1/jobs",
                post(|headers: HeaderMap, Json(req): Json<SubmitRequest>| async move {
                    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer good") {
                        return refusal(StatusCode::UNAUTHORIZED, "unauthorized", "missing or unknown token");
                    }
                    if req.gpus > 8 {
                        return refusal(
                            StatusCode::CONFLICT,
                            "conflict",
                            "job needs 16 GPUs of A100-80GB; the cluster has 8",
                        );
                    }
                    (StatusCode::CREATED, Json(view(7))).into_response()
                })
                .get(|RawQuery(query): RawQuery| async move {
                    let mut job = view(1);
                    job.name = query;
                    Json(Page { items: vec![job], next: Some("c1".to_string()) })
                }),
            )
            .route(
                "/v1/jobs/{id}",
                get(|Path(id): Path<u32>| async move {
                    if id == 7 {
                        Json(view(7)).into_response()
                    } else {
                        (StatusCode::NOT_FOUND, "no such thing").into_response()
                    }
                }),
            )
            .route("/v1/jobs/{id}/events", get(|| async { "not json" }))
            .route(
                "/v1/jobs/{id}/logs",
                get(|| async {
                    let pieces: Vec<Result<&'static str, std::io::Error>> =
                        vec![Ok("hel"), Ok("lo\n"), Ok("world\n")];
                    Body::from_stream(futures_util::stream::iter(pieces))
                }),
            )
            .route("/v1/queue", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "") }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn refusals_carry_the_servers_error_and_print_as_sentences() {
        let server = canned().await;
        let client = Client::new(&server, Some("good".into())).expect("client");
        let mut req: SubmitRequest =
            serde_json::from_value(serde_json::json!({"command": ["true"], "gpus": 16})).expect("request");
        let error = client.submit(&req).await.expect_err("too wide");
        assert_eq!(error.status(), Some(409));
        assert_eq!(
            error.to_string(),
            "server refused (409 conflict): job needs 16 GPUs of A100-80GB; the cluster has 8"
        );
        match &error {
            ClientError::Api { error, .. } => assert_eq!(error.error, "conflict"),
            other => panic!("expected Api, got {other:?}"),
        }
        req.gpus = 1;
        assert_eq!(client.submit(&req).await.expect("accepted").id, 7);

        let anonymous = Client::new(&server, None).expect("client");
        let error = anonymous.submit(&req).await.expect_err("no token");
        assert_eq!(
            error.to_string(),
            "server refused (401 unauthorized): missing or unknown token \
             (no token was sent: set COTENANT_TOKEN or pass --token)"
        );
    }

    #[tokio::test]
    async fn non_json_errors_and_bodies_are_reported_not_panicked_on() {
        let server = canned().await;
        let client = Client::new(&server, None).expect("client");
        let error = client.job(8).await.expect_err("404");
        assert_eq!(error.to_string(), "server refused (404 not found): no such thing");
        match error {
            ClientError::Api { error, .. } => assert_eq!(error.error, "not_found"),
            other => panic!("expected Api, got {other:?}"),
        }
        let error = client.queue().await.expect_err("500");
        assert_eq!(error.to_string(), "server refused (500 internal server error): internal server error");
        let error = client.events(7).await.expect_err("not json");
        let text = error.to_string();
        assert!(matches!(error, ClientError::Decode(_)), "{text}");
        assert!(
            text.starts_with("/v1/jobs/7/events: the server's answer is not what this client expects"),
            "{text}"
        );
        assert!(text.ends_with(": not json"), "{text}");
        assert_eq!(client.job(7).await.expect("job 7").id, 7);
    }

    #[tokio::test]
    async fn logs_arrive_chunk_by_chunk() {
        let server = canned().await;
        let client = Client::new(&server, None).expect("client");
        let mut pieces = Vec::new();
        let bytes = client
            .logs(7, &LogQuery { follow: Some(true), ..LogQuery::default() }, |piece| {
                pieces.push(piece.to_vec())
            })
            .await
            .expect("logs");
        assert_eq!(bytes, 12);
        assert_eq!(pieces.concat(), b"hello\nworld\n");
    }

    #[tokio::test]
    async fn queries_go_as_url_parameters_and_none_is_left_out() {
        let server = canned().await;
        let client = Client::new(&server, None).expect("client");
        let query = JobQuery { status: Some(api::JobStatus::Failed), limit: Some(5), ..JobQuery::default() };
        let page = client.jobs(&query).await.expect("jobs");
        assert_eq!(page.items[0].name.as_deref(), Some("status=failed&limit=5"));
        assert_eq!(page.next.as_deref(), Some("c1"));
        assert_eq!(query_string(&JobQuery::default()).expect("empty"), "");
        assert_eq!(query_string(&UsageQuery { since: Some(10), until: None }).expect("usage"), "since=10");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_with_where_its_url_came_from() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        for (origin, says) in [
            (ServerOrigin::Default, "(the default: COTENANT_SERVER is not set)"),
            (ServerOrigin::Env, "(from COTENANT_SERVER)"),
            (ServerOrigin::Given, "(given on the command line)"),
        ] {
            let client = Client::with_origin(&addr.to_string(), None, origin).expect("client");
            let text = client.health().await.expect_err("nothing listens").to_string();
            let want = format!("cannot connect to the cotenant server at http://{addr} {says}: ");
            assert!(text.starts_with(&want), "{text}\nwant prefix: {want}");
        }
    }

    #[test]
    fn server_urls_are_normalized_and_checked() {
        assert_eq!(server_url("127.0.0.1:8080").expect("bare"), "http://127.0.0.1:8080");
        assert_eq!(server_url(" http://h:1/ ").expect("slash"), "http://h:1");
        assert!(server_url("https://h").expect_err("tls").to_string().contains("https is not supported"));
        assert!(server_url("").is_err());
        assert!(server_url("http://exa mple").is_err());
    }
}
