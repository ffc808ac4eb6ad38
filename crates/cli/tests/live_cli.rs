//! The live client commands as a user runs them: the real `cotenant` binary.
//!
//! - Against a canned server (a tiny axum app in this test): the `--json`
//!   shapes, the tables, refusals printed as the server words them with a
//!   non-zero exit, and an unreachable server named with its URL.
//! - End to end (after the merge of controller, http and agent): a real
//!   `cotenant server` and `cotenant agent --fake-gpus` on loopback run two
//!   tenants' jobs; exit codes, logs and tenant isolation come back.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_cotenant");

/// Runs `cotenant ARGS` against `server` with `token` (no inherited COTENANT_* variables).
fn cotenant(server: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args).env("COTENANT_SERVER", server).env_remove("COTENANT_TOKEN");
    if let Some(token) = token {
        command.env("COTENANT_TOKEN", token);
    }
    command.stdin(Stdio::null()).output().expect("run cotenant")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A free loopback port (bound, then released for the process under test).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn job(id: u32, status: &str, exit_code: Option<i32>, command: &[&str]) -> Value {
    json!({
        "id": id, "tenant": "alpha", "name": null, "status": status, "command": command,
        "gpus": 1, "gpu_type": null, "submitted_us": 1_796_132_264_000_000u64,
        "decided_us": null, "started_us": null, "ended_us": null, "attempt": 0,
        "nodes": [], "gpu_uuids": [], "exit_code": exit_code, "reason": null, "preemptions": 0
    })
}

/// A canned server on a thread of its own: refuses wide jobs with 409, knows
/// jobs 7 (completed) and 8 (failed, exit 3), nothing else.
fn canned_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let app = Router::new()
        .route(
            "/v1/jobs",
            post(|Json(request): Json<Value>| async move {
                if request["gpus"].as_u64() > Some(2) {
                    let error = json!({"error": "conflict", "message": "job needs 16 GPUs of A100-80GB; the cluster has 2"});
                    return (StatusCode::CONFLICT, Json(error)).into_response();
                }
                let command: Vec<String> = serde_json::from_value(request["command"].clone()).expect("command");
                let words: Vec<&str> = command.iter().map(String::as_str).collect();
                (StatusCode::CREATED, Json(job(9, "pending", None, &words))).into_response()
            })
            .get(|| async {
                let items = [
                    job(7, "completed", Some(0), &["sh", "-c", "echo hello; exit 0"]),
                    job(8, "failed", Some(3), &["sh", "-c", "exit 3"]),
                ];
                Json(json!({"items": items, "next": null}))
            }),
        )
        .route(
            "/v1/jobs/{id}",
            get(|UrlPath(id): UrlPath<u32>| async move {
                match id {
                    7 => Json(job(7, "completed", Some(0), &["true"])).into_response(),
                    8 => Json(job(8, "failed", Some(3), &["sh", "-c", "exit 3"])).into_response(),
                    _ => {
                        let error = json!({"error": "not_found", "message": format!("no job {id}")});
                        (StatusCode::NOT_FOUND, Json(error)).into_response()
                    }
                }
            }),
        )
        .route("/v1/jobs/{id}/events", get(|| async { Json(json!([])) }))
        .route("/v1/jobs/{id}/logs", get(|| async { "hello\n" }));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    format!("http://{addr}")
}

#[test]
fn refusals_print_the_servers_message_and_exit_non_zero() {
    let server = canned_server();
    let out = cotenant(&server, Some("t"), &["submit", "--gpus", "16", "--", "true"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "error: server refused (409 conflict): job needs 16 GPUs of A100-80GB; the cluster has 2\n"
    );
    assert!(out.stdout.is_empty());
    let out = cotenant(&server, Some("t"), &["show", "99"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "error: server refused (404 not found): no job 99\n");
}

#[test]
fn json_output_is_the_servers_job_view() {
    let server = canned_server();
    let out = cotenant(&server, Some("t"), &["submit", "--json", "--", "sh", "-c", "echo hi"]);
    assert!(out.status.success(), "{out:?}");
    let submitted: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(submitted["id"], 9);
    assert_eq!(submitted["command"], json!(["sh", "-c", "echo hi"]));
    let out = cotenant(&server, Some("t"), &["show", "8", "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!((shown["status"].as_str(), shown["exit_code"].as_i64()), (Some("failed"), Some(3)));
    let out = cotenant(&server, Some("t"), &["jobs", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).expect("json");
    let ids: Vec<u64> = listed.as_array().expect("array").iter().filter_map(|j| j["id"].as_u64()).collect();
    assert_eq!(ids, [7, 8]);
}

#[test]
fn people_get_tables_and_plain_sentences() {
    let server = canned_server();
    let out = cotenant(&server, Some("t"), &["submit", "--", "true"]);
    assert_eq!(text(&out.stdout), "submitted job 9 (pending)\n");
    let out = cotenant(&server, Some("t"), &["jobs"]);
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("ID  NAME  STATUS           GPUS  SUBMITTED"), "{table}");
    assert!(lines[1].starts_with(" 7  -     completed           1  "), "{table}");
    assert!(lines[2].starts_with(" 8  -     failed (exit 3)     1  "), "{table}");
    assert!(lines[2].ends_with("  -  -      sh -c 'exit 3'"), "{table}");
    let out = cotenant(&server, Some("t"), &["show", "8"]);
    assert!(text(&out.stdout).contains("status     failed (exit 3)\n"), "{}", text(&out.stdout));
    let out = cotenant(&server, Some("t"), &["logs", "7"]);
    assert_eq!(text(&out.stdout), "hello\n");
}

#[test]
fn an_unreachable_server_is_named_and_where_its_address_came_from() {
    let port = free_port();
    let server = format!("http://127.0.0.1:{port}");
    let out = cotenant(&server, Some("t"), &["jobs"]);
    assert_eq!(out.status.code(), Some(1));
    let error = text(&out.stderr);
    let want = format!("error: cannot connect to the cotenant server at {server} (from COTENANT_SERVER): ");
    assert!(error.starts_with(&want), "{error}");
    let out = Command::new(BIN)
        .args(["queue", "--server", &server])
        .env_remove("COTENANT_SERVER")
        .output()
        .expect("run");
    assert!(text(&out.stderr).contains("(given on the command line)"), "{}", text(&out.stderr));
}

/// Child processes killed when the test ends, however it ends.
struct Processes(Vec<(String, Child)>);

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Processes {
    /// Starts `cotenant ARGS` with stdout and stderr in `dir/NAME.log`.
    fn start(&mut self, name: &str, dir: &Path, args: &[&str]) {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
        let child = Command::new(BIN)
            .args(args)
            .env_remove("COTENANT_SERVER")
            .env_remove("COTENANT_TOKEN")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn cotenant");
        self.0.push((name.to_string(), child));
    }

    /// Panics with the processes' output if one of them has exited.
    fn check_alive(&mut self, dir: &Path) {
        for (name, child) in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
                panic!("cotenant {name} exited ({status}):\n{log}");
            }
        }
    }
}

/// Polls `probe` every 100 ms for up to `limit`; panics with `what` (and the logs) after.
fn wait_for<T>(
    processes: &mut Processes,
    dir: &Path,
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        processes.check_alive(dir);
        if Instant::now() > deadline {
            let logs: Vec<String> = processes
                .0
                .iter()
                .map(|(name, _)| {
                    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
                    format!("--- {name}:\n{log}")
                })
                .collect();
            panic!("timed out after {limit:?} waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cotenant-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn json_of(out: &Output) -> Option<Value> {
    out.status.success().then(|| serde_json::from_slice(&out.stdout).ok()).flatten()
}

#[test]
fn server_and_agent_run_two_tenants_jobs_end_to_end() {
    let dir = temp_dir("live-e2e");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let url = format!("http://{listen}");
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let mut processes = Processes(Vec::new());
    processes.start(
        "server",
        &dir,
        &[
            "server",
            "--db",
            &path("cotenant.db"),
            "--listen",
            &listen,
            "--nodes",
            "1x2xA100-80GB",
            "--log-dir",
            &path("logs"),
            "--admin-token-file",
            &path("admin.token"),
        ],
    );
    let admin = wait_for(&mut processes, &dir, "the admin token file", Duration::from_secs(60), || {
        let token = std::fs::read_to_string(dir.join("admin.token")).ok()?;
        let token = token.trim().to_string();
        (!token.is_empty()).then_some(token)
    });
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("admin.token")).expect("token file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    wait_for(&mut processes, &dir, "the server to answer", Duration::from_secs(30), || {
        json_of(&cotenant(&url, Some(&admin), &["nodes", "--json"]))
    });

    let agent_token = json_of(&cotenant(&url, Some(&admin), &["admin", "token", "add", "--agent", "--json"]))
        .and_then(|created| created["token"].as_str().map(str::to_string))
        .expect("agent token");
    std::fs::write(dir.join("agent.token"), &agent_token).expect("agent token file");
    processes.start(
        "agent",
        &dir,
        &[
            "agent",
            "--server",
            &url,
            "--token-file",
            &path("agent.token"),
            "--name",
            "e2e-node",
            "--fake-gpus",
            "2xA100-80GB",
            "--state-dir",
            &path("agent"),
        ],
    );
    let mut tokens = Vec::new();
    for tenant in ["alpha", "beta"] {
        let out =
            cotenant(&url, Some(&admin), &["admin", "tenant", "add", tenant, "--quota", "total=2", "--json"]);
        let created = json_of(&out).unwrap_or_else(|| panic!("tenant add {tenant}: {out:?}"));
        assert_eq!(created["tenant"]["name"], tenant);
        tokens.push(created["token"].as_str().expect("token").to_string());
    }
    let (alpha, beta) = (tokens[0].as_str(), tokens[1].as_str());
    let listed =
        json_of(&cotenant(&url, Some(&admin), &["admin", "tenant", "list", "--json"])).expect("tenants");
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");

    wait_for(&mut processes, &dir, "the agent's node to be up", Duration::from_secs(60), || {
        let nodes = json_of(&cotenant(&url, Some(&admin), &["nodes", "--json"]))?;
        (nodes[0]["state"] == "up").then_some(())
    });

    let submit = |command: &[&str]| -> u64 {
        let mut args = vec!["submit", "--json", "--"];
        args.extend_from_slice(command);
        let out = cotenant(&url, Some(alpha), &args);
        json_of(&out)
            .and_then(|job| job["id"].as_u64())
            .unwrap_or_else(|| panic!("submit {command:?}: {out:?}"))
    };
    let hello = submit(&["sh", "-c", "echo hello; exit 0"]);
    let three = submit(&["sh", "-c", "exit 3"]);
    let ended = |id: u64| {
        let show = cotenant(&url, Some(alpha), &["show", &id.to_string(), "--json"]);
        let job = json_of(&show)?;
        let status = job["status"].as_str()?.to_string();
        (status != "pending" && status != "running").then_some(job)
    };
    let done =
        wait_for(&mut processes, &dir, "job 'echo hello' to end", Duration::from_secs(90), || ended(hello));
    assert_eq!(done["status"], "completed", "{done}");
    let failed =
        wait_for(&mut processes, &dir, "job 'exit 3' to end", Duration::from_secs(90), || ended(three));
    assert_eq!(
        (failed["status"].as_str(), failed["exit_code"].as_i64()),
        (Some("failed"), Some(3)),
        "{failed}"
    );

    let logs = cotenant(&url, Some(alpha), &["logs", &hello.to_string()]);
    assert!(logs.status.success(), "{logs:?}");
    assert_eq!(text(&logs.stdout), "hello\n");
    let shown = cotenant(&url, Some(alpha), &["show", &three.to_string()]);
    assert!(text(&shown.stdout).contains("failed (exit 3)"), "{}", text(&shown.stdout));

    // logs -f follows a running job's output until it ends.
    let ticking = submit(&["sh", "-c", "echo a; sleep 1; echo b"]);
    let followed = cotenant(&url, Some(alpha), &["logs", "-f", &ticking.to_string()]);
    assert!(followed.status.success(), "{followed:?}");
    assert_eq!(text(&followed.stdout), "a\nb\n");

    // Cancelling a running job stops it.
    let sleeper = submit(&["sleep", "600"]);
    wait_for(&mut processes, &dir, "the sleeper to run", Duration::from_secs(60), || {
        let job = json_of(&cotenant(&url, Some(alpha), &["show", &sleeper.to_string(), "--json"]))?;
        (job["status"] == "running").then_some(())
    });
    let cancel = cotenant(&url, Some(alpha), &["cancel", &sleeper.to_string()]);
    assert!(cancel.status.success(), "{cancel:?}");
    let cancelled =
        wait_for(&mut processes, &dir, "the sleeper to end", Duration::from_secs(60), || ended(sleeper));
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let queue = cotenant(&url, Some(alpha), &["queue"]);
    assert_eq!(text(&queue.stdout), "POS  JOB  TENANT  GPUS  WAITING  REASON\n");

    // Tenant isolation: beta neither sees nor touches alpha's jobs.
    for args in [vec!["show", "x"], vec!["cancel", "x"], vec!["logs", "x"]] {
        let args: Vec<String> =
            args.iter().map(|a| if *a == "x" { hello.to_string() } else { a.to_string() }).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cotenant(&url, Some(beta), &args);
        assert_eq!(out.status.code(), Some(1), "beta {args:?}: {out:?}");
        assert!(
            text(&out.stderr).starts_with("error: server refused (404 not found): "),
            "{}",
            text(&out.stderr)
        );
    }
    let seen_by_beta = json_of(&cotenant(&url, Some(beta), &["jobs", "--json"])).expect("beta's jobs");
    assert_eq!(seen_by_beta, json!([]));
    let seen_by_alpha = json_of(&cotenant(&url, Some(alpha), &["jobs", "--json"])).expect("alpha's jobs");
    assert_eq!(seen_by_alpha.as_array().map(Vec::len), Some(4));
    let everyone = cotenant(&url, Some(&admin), &["jobs", "--all-tenants"]);
    assert!(text(&everyone.stdout).starts_with("ID  TENANT"), "{}", text(&everyone.stdout));

    // A job wider than the cluster is refused with the server's words.
    let wide = cotenant(&url, Some(alpha), &["submit", "--gpus", "16", "--", "true"]);
    assert_eq!(wide.status.code(), Some(1));
    assert!(text(&wide.stderr).starts_with("error: server refused (4"), "{}", text(&wide.stderr));

    drop(processes);
    let _ = std::fs::remove_dir_all(&dir);
}
