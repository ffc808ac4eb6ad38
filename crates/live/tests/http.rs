//! The HTTP layer on loopback: a real server (axum on 127.0.0.1:0) in front of
//! a controller over a temporary SQLite file, driven with reqwest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cotenant_live::api::{ApiError, JobView, Page, QueueEntry, TenantCreated, TokenCreated, UsageRow};
use cotenant_live::controller::{Controller, ControllerConfig};
use cotenant_live::http::{self, HttpOptions, ROUTES};
use cotenant_live::setup::{parse_nodes, ServerSetup};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

struct Server {
    base: String,
    admin: String,
    client: reqwest::Client,
    controller: Controller,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unique_dir() -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cotenant-http-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn start(options: HttpOptions) -> Server {
    let dir = unique_dir();
    let setup = ServerSetup {
        nodes: parse_nodes("1x4xA100-80GB").unwrap(),
        policy: "fifo".into(),
        options: BTreeMap::new(),
        round_secs: None,
        seed: 1,
    };
    let config = ControllerConfig {
        db: dir.join("test.db").display().to_string(),
        setup,
        heartbeat_timeout: Duration::from_secs(15),
        log_dir: dir.join("logs"),
    };
    let controller = Controller::start(config).await.unwrap();
    let admin = http::bootstrap_admin(controller.db()).await.unwrap().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(http::serve(listener, controller.clone(), options, async move {
        let _ = stopped.await;
    }));
    Server {
        base,
        admin,
        client: reqwest::Client::new(),
        controller,
        stop: Some(stop),
        served: Some(served),
        dir,
    }
}

impl Server {
    fn request(&self, method: Method, path: &str, token: Option<&str>) -> reqwest::RequestBuilder {
        let builder = self.client.request(method, format!("{}{path}", self.base));
        match token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, String) {
        let mut builder = self.request(method, path, token);
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = builder.send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    async fn ok<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> T {
        let (status, text) = self.call(method.clone(), path, Some(token), body).await;
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e} in {text}"))
    }

    /// A new tenant; returns its token.
    async fn tenant(&self, name: &str) -> String {
        let admin = self.admin.clone();
        let created: TenantCreated =
            self.ok(Method::POST, "/v1/admin/tenants", &admin, Some(json!({ "name": name }))).await;
        assert_eq!(created.tenant.name, name);
        created.token
    }

    async fn token(&self, body: Value) -> String {
        let admin = self.admin.clone();
        let created: TokenCreated = self.ok(Method::POST, "/v1/admin/tokens", &admin, Some(body)).await;
        created.token
    }

    async fn submit(&self, token: &str, gpus: u32) -> JobView {
        self.ok(Method::POST, "/v1/jobs", token, Some(json!({ "command": ["sleep", "1"], "gpus": gpus })))
            .await
    }

    /// Registers a fake 4-GPU agent (node 0).
    async fn agent(&self, token: &str) {
        let gpus: Vec<Value> = (0..4)
            .map(|i| json!({ "uuid": format!("GPU-{i}"), "model": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "index": i }))
            .collect();
        let body = json!({ "name": "host-a", "gpus": gpus, "running": [], "version": "test" });
        let registered: Value = self.ok(Method::POST, "/v1/agent/register", token, Some(body)).await;
        assert_eq!(registered["node"], 0);
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            tokio::time::timeout(Duration::from_secs(10), served).await.unwrap().unwrap().unwrap();
        }
        self.controller.shutdown().await;
    }
}

/// The status and a parsed ApiError body (panics if the body is not one).
fn api_error(status: StatusCode, text: &str) -> ApiError {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{status}: body is not an ApiError ({e}): {text}"))
}

fn assert_refused(what: &str, (status, text): (StatusCode, String), expected: StatusCode) -> ApiError {
    assert_eq!(status, expected, "{what}: {text}");
    let error = api_error(status, &text);
    assert!(!error.message.is_empty(), "{what}: empty message");
    error
}

#[tokio::test]
async fn every_route_refuses_missing_bad_and_wrong_scope_tokens() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let b = server.tenant("b").await;
    let agent = server.token(json!({ "scope": "agent" })).await;
    let job = server.submit(&a, 1).await;
    let malformed = "nonsense";
    let unknown = "ct_00000000_00000000000000000000000000000000";
    let mut checked = 0;
    for &(method, template, scope) in ROUTES {
        let path = template.replace("{id}", &job.id.to_string());
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let what = format!("{method} {path}");
        if scope == "none" {
            let (status, text) = server.call(method, &path, None, None).await;
            assert_eq!(status, StatusCode::OK, "{what}: {text}");
            continue;
        }
        for token in [None, Some(malformed), Some(unknown)] {
            let error = assert_refused(
                &what,
                server.call(method.clone(), &path, token, None).await,
                StatusCode::UNAUTHORIZED,
            );
            assert_eq!(error.error, "unauthorized");
        }
        let wrong: Vec<&str> = match scope {
            "tenant" => vec![&agent],
            "admin" => vec![&a, &agent],
            "agent" => vec![&a],
            other => panic!("{what}: unknown scope {other}"),
        };
        for token in wrong {
            let error = assert_refused(
                &what,
                server.call(method.clone(), &path, Some(token), None).await,
                StatusCode::FORBIDDEN,
            );
            assert_eq!(error.error, "forbidden");
        }
        if template.contains("{id}") {
            // Another tenant's job does not exist, as far as tenant b can tell.
            let error = assert_refused(
                &what,
                server.call(method.clone(), &path, Some(&b), None).await,
                StatusCode::NOT_FOUND,
            );
            assert_eq!(error.message, format!("no job {}", job.id));
        }
        // The right scopes get past authorization (whatever the missing body or query then earns).
        let right: Vec<&str> = match scope {
            "tenant" if what == "POST /v1/jobs" => vec![&a],
            "tenant" => vec![&a, &server.admin],
            "agent" => vec![&agent, &server.admin],
            _ => vec![&server.admin],
        };
        for token in right {
            let (status, text) = server.call(method.clone(), &path, Some(token), None).await;
            assert!(
                status != StatusCode::UNAUTHORIZED
                    && status != StatusCode::FORBIDDEN
                    && !status.is_server_error(),
                "{what} with the right token: {status} {text}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, ROUTES.len() - 1, "every route but health needs a token");
    server.stop().await;
}

#[tokio::test]
async fn a_tenant_sees_and_touches_only_its_own_jobs() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let b = server.tenant("b").await;
    let agent = server.token(json!({ "scope": "agent" })).await;
    server.agent(&agent).await;
    // Node 0 has 4 GPUs: a's first two 2-GPU jobs run, a's third and b's job wait.
    let a_jobs = [server.submit(&a, 2).await, server.submit(&a, 2).await, server.submit(&a, 2).await];
    let b_job = server.submit(&b, 1).await;
    let running = &a_jobs[0];
    let chunk = json!({ "node": 0, "job": running.id, "attempt": 1, "stream": "stdout", "offset": 0, "data": "secret\n" });
    let (status, text) = server.call(Method::POST, "/v1/agent/logs", Some(&agent), Some(chunk)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");

    for job in &a_jobs {
        for (method, suffix) in
            [(Method::GET, ""), (Method::GET, "/events"), (Method::GET, "/logs"), (Method::POST, "/cancel")]
        {
            let path = format!("/v1/jobs/{}{suffix}", job.id);
            assert_refused(&path, server.call(method, &path, Some(&b), None).await, StatusCode::NOT_FOUND);
        }
    }
    // b's cancel did nothing; a still sees its jobs and its log.
    let view: JobView = server.ok(Method::GET, &format!("/v1/jobs/{}", running.id), &a, None).await;
    assert_eq!(view.status, cotenant_live::api::JobStatus::Running);
    let (status, log) =
        server.call(Method::GET, &format!("/v1/jobs/{}/logs", running.id), Some(&a), None).await;
    assert_eq!((status, log.as_str()), (StatusCode::OK, "secret\n"));
    let events: Vec<Value> =
        server.ok(Method::GET, &format!("/v1/jobs/{}/events", running.id), &a, None).await;
    assert!(!events.is_empty());

    // Listings: b sees its one job; naming a is 403; a's cursor does not page b's listing.
    let page: Page<JobView> = server.ok(Method::GET, "/v1/jobs", &b, None).await;
    assert_eq!(page.items.iter().map(|j| j.id).collect::<Vec<_>>(), [b_job.id]);
    assert_refused(
        "b lists a",
        server.call(Method::GET, "/v1/jobs?tenant=a", Some(&b), None).await,
        StatusCode::FORBIDDEN,
    );
    let page_a: Page<JobView> = server.ok(Method::GET, "/v1/jobs?limit=1", &a, None).await;
    let cursor = page_a.next.expect("a has three jobs: a page of one has a next");
    let error = assert_refused(
        "a's cursor used by b",
        server.call(Method::GET, &format!("/v1/jobs?limit=1&cursor={cursor}"), Some(&b), None).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(error.message.contains("cursor"), "{}", error.message);
    let page_admin: Page<JobView> = server.ok(Method::GET, "/v1/jobs?tenant=b", &server.admin, None).await;
    assert_eq!(page_admin.items.len(), 1);

    // Queue: b sees only its own entries, at the positions the admin sees them.
    let all: Vec<QueueEntry> = server.ok(Method::GET, "/v1/queue", &server.admin, None).await;
    let mine: Vec<QueueEntry> = server.ok(Method::GET, "/v1/queue", &b, None).await;
    assert!(all.iter().any(|e| e.tenant == "a"), "{all:?}");
    assert!(!mine.is_empty() && mine.iter().all(|e| e.tenant == "b"), "{mine:?}");
    for entry in &mine {
        assert!(all.contains(entry), "{entry:?} not in {all:?}");
    }

    // Nodes: job ids only for the admin.
    let nodes: Vec<Value> = server.ok(Method::GET, "/v1/nodes", &server.admin, None).await;
    assert!(!nodes[0]["jobs"].as_array().unwrap().is_empty(), "{nodes:?}");
    for token in [&a, &b] {
        let nodes: Vec<Value> = server.ok(Method::GET, "/v1/nodes", token, None).await;
        assert!(nodes.iter().all(|n| n["jobs"].as_array().unwrap().is_empty()), "{nodes:?}");
    }

    // Usage: one row, the caller's.
    let rows: Vec<UsageRow> = server.ok(Method::GET, "/v1/usage", &b, None).await;
    assert_eq!(rows.iter().map(|r| r.tenant.as_str()).collect::<Vec<_>>(), ["b"]);
    let rows: Vec<UsageRow> = server.ok(Method::GET, "/v1/usage", &server.admin, None).await;
    assert_eq!(rows.len(), 2);
    server.stop().await;
}

#[tokio::test]
async fn bad_input_gets_a_4xx_api_error_naming_the_problem() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    assert_eq!(server.submit(&a, 1).await.id, 0, "the first job is job 0");
    let submit = |body: String| {
        server
            .request(Method::POST, "/v1/jobs", Some(&a))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let read = |r: reqwest::Response| async move { (r.status(), r.text().await.unwrap()) };

    let huge = format!("{{\"command\": [\"{}\"]}}", "x".repeat(cotenant_live::api::MAX_BODY_BYTES));
    let error =
        assert_refused("huge", read(submit(huge).await.unwrap()).await, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error.error, "too_large");

    let error = assert_refused(
        "wrong type",
        read(submit(r#"{"command": ["x"], "gpus": "two"}"#.into()).await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(error.message.contains("gpus"), "{}", error.message);
    let error = assert_refused(
        "syntax",
        read(submit(r#"{"command": ["x"], "#.into()).await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(error.message.contains("line 1 column"), "{}", error.message);
    let error = assert_refused(
        "unknown field",
        read(submit(r#"{"command": ["x"], "gpuz": 1}"#.into()).await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(error.message.contains("gpuz"), "{}", error.message);
    let error = assert_refused(
        "refused by the controller",
        read(submit(r#"{"command": ["x"], "gpus": 99}"#.into()).await.unwrap()).await,
        StatusCode::BAD_REQUEST,
    );
    assert!(error.message.contains("gpus"), "{}", error.message);
    let admin = server.admin.clone();
    let as_admin = server.call(Method::POST, "/v1/jobs", Some(&admin), Some(json!({ "command": ["x"] })));
    let error = assert_refused("an admin submits", as_admin.await, StatusCode::FORBIDDEN);
    assert!(error.message.contains("tenant"), "{}", error.message);
    let (status, text) =
        read(server.request(Method::POST, "/v1/jobs", Some(&a)).body("{}").send().await.unwrap()).await;
    assert!(status.is_client_error(), "{status}");
    api_error(status, &text);

    for (path, needle) in [
        ("/v1/jobs?limit=abc", "limit"),
        ("/v1/jobs?bogus=1", "bogus"),
        ("/v1/jobs?status=sleeping", "sleeping"),
        ("/v1/jobs?limit=0", "limit"),
        ("/v1/jobs?since=5&until=5", "since"),
        ("/v1/jobs?cursor=xyz", "cursor"),
        ("/v1/jobs/abc", "job id"),
        ("/v1/jobs/0/logs?stream=stdin", "stream"),
        ("/v1/usage?since=x", "since"),
    ] {
        let error = assert_refused(
            path,
            server.call(Method::GET, path, Some(&a), None).await,
            StatusCode::BAD_REQUEST,
        );
        assert!(error.message.contains(needle), "{path}: {}", error.message);
    }
    let error = assert_refused(
        "unknown route",
        server.call(Method::GET, "/v1/nothing", Some(&a), None).await,
        StatusCode::NOT_FOUND,
    );
    assert!(error.message.contains("/v1/nothing"), "{}", error.message);
    let error = assert_refused(
        "wrong method",
        server.call(Method::DELETE, "/v1/jobs", Some(&a), None).await,
        StatusCode::METHOD_NOT_ALLOWED,
    );
    assert!(
        error.message.contains("GET or POST") || error.message.contains("POST or GET"),
        "{}",
        error.message
    );
    let error = assert_refused(
        "unknown job",
        server.call(Method::GET, "/v1/jobs/4000000000", Some(&a), None).await,
        StatusCode::NOT_FOUND,
    );
    assert_eq!(error.error, "not_found");
    // Admin routes: a bad tenant is the controller's 400, a duplicate 409.
    let admin = server.admin.clone();
    assert_refused(
        "bad name",
        server.call(Method::POST, "/v1/admin/tenants", Some(&admin), Some(json!({ "name": "a b" }))).await,
        StatusCode::BAD_REQUEST,
    );
    assert_refused(
        "duplicate",
        server.call(Method::POST, "/v1/admin/tenants", Some(&admin), Some(json!({ "name": "a" }))).await,
        StatusCode::CONFLICT,
    );
    assert_refused(
        "token for nobody",
        server
            .call(
                Method::POST,
                "/v1/admin/tokens",
                Some(&admin),
                Some(json!({ "scope": "tenant", "tenant": "zz" })),
            )
            .await,
        StatusCode::NOT_FOUND,
    );
    assert_refused(
        "tenant token without a tenant",
        server.call(Method::POST, "/v1/admin/tokens", Some(&admin), Some(json!({ "scope": "tenant" }))).await,
        StatusCode::BAD_REQUEST,
    );
    server.stop().await;
}

#[tokio::test]
async fn submissions_beyond_the_burst_get_429_per_token() {
    let server = start(HttpOptions { submit_rate_per_s: 0.01, submit_burst: 3 }).await;
    let a = server.tenant("a").await;
    // The bucket refills from the first submission on, at 0.01 per second: after
    // `elapsed` seconds it holds 0.01 elapsed, so the wait for a whole token is
    // ceil(100 - elapsed) s, 100 s when the four requests take under a second (a
    // loaded CI machine can take longer, which is not a fault of the limiter).
    let started = std::time::Instant::now();
    for _ in 0..3 {
        server.submit(&a, 1).await;
    }
    let response = server
        .request(Method::POST, "/v1/jobs", Some(&a))
        .json(&json!({ "command": ["true"] }))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let retry: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let least = (100.0 - elapsed).ceil().max(1.0) as u64;
    assert!(
        (least..=100).contains(&retry),
        "one submission at 0.01/s takes 100 s less the {elapsed:.2} s the requests took: {retry}"
    );
    let error = assert_refused(
        "4th",
        (response.status(), response.text().await.unwrap()),
        StatusCode::TOO_MANY_REQUESTS,
    );
    assert_eq!(error.error, "rate_limited");
    // Another token of the same tenant has its own bucket.
    let second = server.token(json!({ "scope": "tenant", "tenant": "a" })).await;
    server.submit(&second, 1).await;
    let metrics = server.call(Method::GET, "/metrics", Some(&server.admin.clone()), None).await;
    assert_eq!(metrics.0, StatusCode::OK);
    assert!(metrics.1.contains("cotenant_submissions_total{result=\"accepted\"} 4"), "{}", metrics.1);
    assert!(metrics.1.contains("cotenant_submissions_total{result=\"rate_limited\"} 1"), "{}", metrics.1);
    assert!(metrics.1.contains("cotenant_jobs{status=\"pending\"} 4"), "{}", metrics.1);
    assert!(metrics.1.contains("cotenant_http_request_duration_seconds_count"), "{}", metrics.1);
    server.stop().await;
}

#[tokio::test]
async fn pages_return_every_job_exactly_once() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let b = server.tenant("b").await;
    let mut mine = Vec::new();
    for i in 0..23 {
        mine.push(server.submit(&a, 1).await.id);
        if i % 4 == 0 {
            server.submit(&b, 1).await;
        }
    }
    for (token, query) in [(&a, "/v1/jobs?limit=5"), (&server.admin, "/v1/jobs?limit=5&tenant=a")] {
        let mut seen = Vec::new();
        let mut path = query.to_string();
        let mut pages = 0;
        loop {
            let page: Page<JobView> = server.ok(Method::GET, &path, token, None).await;
            assert!(page.items.len() <= 5);
            seen.extend(page.items.iter().map(|j| j.id));
            pages += 1;
            assert!(pages <= 10, "paging does not end");
            match page.next {
                Some(next) => path = format!("{query}&cursor={next}"),
                None => break,
            }
        }
        assert_eq!(seen, mine, "{query}");
        assert_eq!(pages, 5, "23 jobs in pages of 5");
    }
    // The admin's unfiltered listing has everyone's jobs, once each.
    let page: Page<JobView> = server.ok(Method::GET, "/v1/jobs?limit=1000", &server.admin, None).await;
    assert_eq!(page.items.len(), 23 + 6);
    assert!(page.next.is_none());
    // A window on submission time, [since, until): the cursor is bound to it.
    let (since, until) = (page.items[5].submitted_us, page.items[20].submitted_us);
    let expected: Vec<u32> = page
        .items
        .iter()
        .filter(|j| j.tenant == "a" && (since..until).contains(&j.submitted_us))
        .map(|j| j.id)
        .collect();
    let query = format!("/v1/jobs?since={since}&until={until}&limit=4");
    let first: Page<JobView> = server.ok(Method::GET, &query, &a, None).await;
    let next = first.next.expect("more than 4 of a's jobs in the window");
    let rest: Page<JobView> = server
        .ok(Method::GET, &format!("/v1/jobs?since={since}&until={until}&limit=1000&cursor={next}"), &a, None)
        .await;
    let seen: Vec<u32> = first.items.iter().chain(&rest.items).map(|j| j.id).collect();
    assert_eq!(seen, expected);
    let other_window = format!("/v1/jobs?since={since}&limit=4&cursor={next}");
    assert_refused(
        "cursor, other window",
        server.call(Method::GET, &other_window, Some(&a), None).await,
        StatusCode::BAD_REQUEST,
    );
    server.stop().await;
}

#[tokio::test]
async fn bootstrap_makes_one_admin_token_stored_only_as_a_hash() {
    let server = start(HttpOptions::default()).await;
    let db = server.controller.db().clone();
    assert_eq!(http::bootstrap_admin(&db).await.unwrap(), None, "the server already made one");
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT prefix, hash, scope FROM tokens").fetch_all(db.pool()).await.unwrap();
    assert_eq!(rows.len(), 1);
    let (prefix, hash, scope) = &rows[0];
    assert_eq!(scope, "admin");
    assert!(server.admin.starts_with(&format!("ct_{prefix}_")), "{}", server.admin);
    let secret = server.admin.rsplit('_').next().unwrap();
    assert!(hash.starts_with("$argon2") && !hash.contains(secret) && *hash != server.admin, "{hash}");
    // The token works; a revoked one stops working (at once if never seen, else within the recheck).
    let tenant = server.tenant("a").await;
    let spare = server.token(json!({ "scope": "tenant", "tenant": "a" })).await;
    for token in [&tenant, &spare] {
        let prefix = &token[3..11];
        if *token == spare {
            sqlx::query("UPDATE tokens SET revoked = 1 WHERE prefix = $1")
                .bind(prefix)
                .execute(db.pool())
                .await
                .unwrap();
        } else {
            let (status, _) = server.call(Method::GET, "/v1/jobs", Some(token), None).await;
            assert_eq!(status, StatusCode::OK);
            sqlx::query("UPDATE tokens SET revoked = 1 WHERE prefix = $1")
                .bind(prefix)
                .execute(db.pool())
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(2100)).await;
        }
        assert_refused(
            "revoked",
            server.call(Method::GET, "/v1/jobs", Some(token), None).await,
            StatusCode::UNAUTHORIZED,
        );
    }
    // A tenant token whose tenant does not exist is refused.
    let ghost = http::create_token(&db, cotenant_live::api::Scope::Tenant, Some("ghost")).await.unwrap();
    let error = assert_refused(
        "ghost",
        server.call(Method::GET, "/v1/jobs", Some(&ghost), None).await,
        StatusCode::UNAUTHORIZED,
    );
    assert!(error.message.contains("ghost"), "{}", error.message);
    assert!(http::create_token(&db, cotenant_live::api::Scope::Tenant, None).await.is_err());
    assert!(http::create_token(&db, cotenant_live::api::Scope::Agent, Some("a")).await.is_err());
    // A token with the right prefix and a wrong secret is refused.
    let forged = format!("{}{}", &server.admin[..12], "f".repeat(32));
    assert_refused(
        "forged",
        server.call(Method::GET, "/metrics", Some(&forged), None).await,
        StatusCode::UNAUTHORIZED,
    );
    server.stop().await;
}

#[tokio::test]
async fn logs_stream_and_follow_until_the_job_ends() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let agent = server.token(json!({ "scope": "agent" })).await;
    server.agent(&agent).await;
    let job = server.submit(&a, 1).await;
    let chunk = |offset: u64, data: &str| json!({ "node": 0, "job": job.id, "attempt": 1, "stream": "stdout", "offset": offset, "data": data });
    let mut follow = server
        .request(Method::GET, &format!("/v1/jobs/{}/logs?follow=true", job.id), Some(&a))
        .send()
        .await
        .unwrap();
    assert_eq!(follow.status(), StatusCode::OK);
    assert!(follow.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let (status, _) =
        server.call(Method::POST, "/v1/agent/logs", Some(&agent), Some(chunk(0, "hello\n"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let first = tokio::time::timeout(Duration::from_secs(5), follow.chunk()).await.unwrap().unwrap().unwrap();
    assert_eq!(&first[..], b"hello\n");
    // A chunk at the wrong offset is refused with the length the server has.
    let (status, text) =
        server.call(Method::POST, "/v1/agent/logs", Some(&agent), Some(chunk(3, "lo\n"))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((body["error"].as_str(), body["have"].as_u64()), (Some("conflict"), Some(6)));
    let (status, _) =
        server.call(Method::POST, "/v1/agent/logs", Some(&agent), Some(chunk(6, "world\n"))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let exited = json!({ "node": 0, "events": [{ "kind": "exited", "job": job.id, "attempt": 1, "code": 0, "signal": null, "at_us": 0 }] });
    let (status, text) = server.call(Method::POST, "/v1/agent/report", Some(&agent), Some(exited)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    let mut rest = Vec::new();
    while let Some(piece) =
        tokio::time::timeout(Duration::from_secs(5), follow.chunk()).await.unwrap().unwrap()
    {
        rest.extend_from_slice(&piece);
    }
    assert_eq!(rest, b"world\n", "the follow ends once the job ended and the file was sent");
    let (status, text) =
        server.call(Method::GET, &format!("/v1/jobs/{}/logs?offset=6", job.id), Some(&a), None).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "world\n"));
    let (status, text) =
        server.call(Method::GET, &format!("/v1/jobs/{}/logs?stream=stderr", job.id), Some(&a), None).await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, ""));
    server.stop().await;
}

#[tokio::test]
async fn shutdown_ends_followed_logs_and_returns() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let job = server.submit(&a, 1).await;
    let mut follow = server
        .request(Method::GET, &format!("/v1/jobs/{}/logs?follow=true", job.id), Some(&a))
        .send()
        .await
        .unwrap();
    assert_eq!(follow.status(), StatusCode::OK);
    let reader = tokio::spawn(async move { while let Ok(Some(_)) = follow.chunk().await {} });
    server.stop().await; // panics if serve does not return within 10 s
    tokio::time::timeout(Duration::from_secs(5), reader).await.unwrap().unwrap();
}

/// Sends raw HTTP/1.1 and returns the status line and the body.
async fn raw(server: &Server, head: &str, body: &[u8]) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = server.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (and close) before the whole body is sent.
    let _ = socket.write_all(body).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn a_chunked_body_without_a_length_is_capped_too() {
    let server = start(HttpOptions::default()).await;
    let a = server.tenant("a").await;
    let piece = vec![b' '; 64 * 1024];
    let mut body = Vec::new();
    for _ in 0..(cotenant_live::api::MAX_BODY_BYTES / piece.len() + 2) {
        body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        body.extend_from_slice(&piece);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let (status, text) = raw(&server, &head, &body).await;
    assert!(status.contains(" 413 "), "{status}");
    assert!(text.contains("\"too_large\""), "{text}");
    // A header that is not text, and a token in the wrong form, are 401 with an ApiError.
    let head = "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YTpi\r\nConnection: close\r\n\r\n";
    let (status, text) = raw(&server, head, b"").await;
    assert!(status.contains(" 401 ") && text.contains("\"unauthorized\""), "{status} {text}");
    // The scheme is case-insensitive (RFC 9110).
    let head =
        format!("GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: bearer {a}\r\nConnection: close\r\n\r\n");
    let (status, _) = raw(&server, &head, b"").await;
    assert!(status.contains(" 200 "), "{status}");
    server.stop().await;
}
