//! `cotenant server`, `cotenant agent` and `cotenant up`: flags to the
//! controller's, http's and agent's configurations, and ctrl-c to their
//! shutdown. Nothing here decides anything about jobs.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cotenant_live::agent::{self, AgentConfig, GpuSource};
use cotenant_live::api::{Scope, TenantRequest};
use cotenant_live::controller::{Controller, ControllerConfig};
use cotenant_live::http::{self, HttpOptions};
use cotenant_live::setup::{parse_nodes, ServerSetup};
use tokio::sync::watch;

use super::{AgentArgs, FakeGpus, ServerArgs, UpArgs};

/// GPUs `up` pretends to have when NVML finds none.
const UP_FAKE_GPUS: u32 = 4;
const UP_FAKE_TYPE: &str = "A100-80GB";
const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(15);
const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(5);
const DEFAULT_HTTP: HttpOptions = HttpOptions { submit_rate_per_s: 2000.0, submit_burst: 4000 };

pub async fn server(args: ServerArgs) -> Result<()> {
    let setup = ServerSetup {
        nodes: args.nodes.nodes.clone(),
        policy: args.policy.clone(),
        options: policy_options(&args.policy, &args.set),
        round_secs: args.round.map(round_secs).transpose()?,
        seed: args.seed,
    };
    check_setup(&setup)?;
    if !(args.submit_rate.is_finite() && args.submit_rate > 0.0) || args.submit_burst == 0 {
        bail!("--submit-rate and --submit-burst must be positive");
    }
    let log_dir = args.log_dir.clone().unwrap_or_else(|| default_log_dir(&args.db));
    let listener = bind(&args.listen).await?;
    let url = local_url(listener.local_addr()?);
    let summary = format!("policy {}, nodes {}", setup.policy, args.nodes.spec);
    let controller = Controller::start(ControllerConfig {
        db: args.db.clone(),
        setup,
        heartbeat_timeout: args.heartbeat_timeout,
        log_dir: log_dir.clone(),
    })
    .await
    .with_context(|| format!("starting the server on database {}", args.db))?;
    let health = controller.health();
    println!(
        "cotenant server on {url}: {summary}; database {} ({} journal entries replayed in {} ms), job logs in {}",
        args.db,
        health.replayed,
        health.replay_ms,
        log_dir.display()
    );
    match http::bootstrap_admin(controller.db()).await.context("creating the admin token")? {
        Some(token) => {
            if let Some(path) = &args.admin_token_file {
                write_secret(path, &token)?;
            }
            let saved = match &args.admin_token_file {
                Some(path) => format!(" (also written to {})", path.display()),
                None => String::new(),
            };
            println!("admin token, shown once{saved}:\n\n  {token}\n");
        }
        None => println!("admin token: created on this database's first start (not shown again)"),
    }
    std::io::stdout().flush()?;
    let options = HttpOptions { submit_rate_per_s: args.submit_rate, submit_burst: args.submit_burst };
    let served = http::serve(listener, controller.clone(), options, shutdown_signal()).await;
    controller.shutdown().await;
    served.context("serving HTTP")
}

pub async fn agent(args: AgentArgs) -> Result<()> {
    let token = match (&args.token, &args.token_file) {
        (Some(token), _) => token.trim().to_string(),
        (None, Some(path)) => read_secret(path)?,
        (None, None) => std::env::var(cotenant_live::client::TOKEN_ENV)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| anyhow!("no token: pass --token or --token-file, or set COTENANT_TOKEN"))?,
    };
    let server = match &args.server {
        Some(server) => server.clone(),
        None => std::env::var(cotenant_live::client::SERVER_ENV)
            .unwrap_or_else(|_| cotenant_live::client::DEFAULT_SERVER.to_string()),
    };
    let config = AgentConfig {
        server: cotenant_live::client::server_url(&server)?,
        token,
        name: args.name.clone().unwrap_or_else(host_name),
        gpus: match &args.fake_gpus {
            Some(fake) => GpuSource::Fake(fake.spec()),
            None => GpuSource::Nvml,
        },
        gpu_type: args.gpu_type.clone(),
        state_dir: args.state_dir.clone(),
        poll_wait: args.poll_wait,
    };
    agent::run(config, shutdown_signal()).await.map_err(|e| anyhow!("agent: {e}"))
}

pub async fn up(args: UpArgs) -> Result<()> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("--dir {}", args.dir.display()))?;
    let (gpus, source, found) = match &args.fake_gpus {
        Some(fake) => (fake.clone(), GpuSource::Fake(fake.spec()), "fake GPUs (--fake-gpus)".to_string()),
        None => match nvml_gpus() {
            Ok(Some(real)) => (real, GpuSource::Nvml, "GPUs found by NVML".to_string()),
            Ok(None) => up_fake("NVML found no GPU"),
            Err(why) => up_fake(&format!("no NVML: {why}")),
        },
    };
    let setup = ServerSetup {
        nodes: parse_nodes(&format!("1x{}x{}", gpus.count, gpus.gpu_type))?,
        policy: args.policy.clone(),
        options: policy_options(&args.policy, &args.set),
        round_secs: None,
        seed: 0,
    };
    check_setup(&setup)?;
    let listener = bind(&args.listen).await?;
    let url = local_url(listener.local_addr()?);
    let db = args.dir.join("cotenant.db");
    let controller = Controller::start(ControllerConfig {
        db: db.to_string_lossy().into_owned(),
        setup,
        heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT,
        log_dir: args.dir.join("logs"),
    })
    .await
    .with_context(|| format!("starting the server on {}", db.display()))?;
    let admin_file = args.dir.join("admin.token");
    if let Some(admin) = http::bootstrap_admin(controller.db()).await.context("creating the admin token")? {
        write_secret(&admin_file, &admin)?;
    }
    let tenant_file = args.dir.join("default.token");
    let tenant_token = default_tenant(&controller, &tenant_file).await?;
    let agent_token = http::create_token(controller.db(), Scope::Agent, None)
        .await
        .context("creating the agent's token")?;
    let config = AgentConfig {
        server: url.clone(),
        token: agent_token,
        name: host_name(),
        gpus: source,
        gpu_type: None,
        state_dir: args.dir.join("agent"),
        poll_wait: DEFAULT_POLL_WAIT,
    };
    println!(
        "cotenant up: server on {url}, policy {}, one node of {} {} ({found}); state in {}\n\
         Use it from another shell as tenant 'default' (token also in {}; admin token in {}):\n\n  \
         export COTENANT_SERVER={url}\n  export COTENANT_TOKEN={tenant_token}\n  \
         cotenant submit --gpus 1 -- sh -c 'echo hello from GPU $CUDA_VISIBLE_DEVICES'\n  \
         cotenant jobs\n  cotenant logs ID\n\nCtrl-C stops the server and the agent.",
        args.policy,
        gpus.count,
        gpus.gpu_type,
        args.dir.display(),
        tenant_file.display(),
        admin_file.display(),
    );
    std::io::stdout().flush()?;

    // The server, the agent and ctrl-c in one task: whichever ends first stops the others.
    let (stop, stopped) = watch::channel(false);
    let serving = async {
        let result = http::serve(listener, controller.clone(), DEFAULT_HTTP, until(stopped.clone())).await;
        let _ = stop.send(true);
        result
    };
    let agent = async {
        let result = agent::run(config, until(stopped.clone())).await;
        let _ = stop.send(true);
        result
    };
    let signal = async {
        tokio::select! {
            () = shutdown_signal() => {}
            () = until(stopped.clone()) => {}
        }
        let _ = stop.send(true);
    };
    let (served, ran, ()) = tokio::join!(serving, agent, signal);
    controller.shutdown().await;
    served.context("serving HTTP")?;
    ran.map_err(|e| anyhow!("agent: {e}"))
}

fn up_fake(why: &str) -> (FakeGpus, GpuSource, String) {
    let fake = FakeGpus { count: UP_FAKE_GPUS, gpu_type: UP_FAKE_TYPE.to_string() };
    let source = GpuSource::Fake(fake.spec());
    (fake, source, format!("fake GPUs: {why}"))
}

/// The GPUs NVML sees, as one count and type (None: NVML works but sees none).
fn nvml_gpus() -> Result<Option<FakeGpus>, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
    let count = nvml.device_count().map_err(|e| e.to_string())?;
    let mut types: BTreeMap<String, u32> = BTreeMap::new();
    for index in 0..count {
        let device = nvml.device_by_index(index).map_err(|e| format!("GPU {index}: {e}"))?;
        let model = device.name().map_err(|e| format!("GPU {index}: {e}"))?;
        *types.entry(cotenant_live::agent_api::normalize_gpu_type(&model)).or_default() += 1;
    }
    match types.len() {
        0 => Ok(None),
        1 => Ok(types.into_iter().next().map(|(gpu_type, count)| FakeGpus { count, gpu_type })),
        _ => Err(format!(
            "GPUs of several types ({}): run `cotenant server` and `cotenant agent` instead",
            types.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Tenant `default` (added if absent) and a token of it: the one `up` saved
/// before, or a new one (saved for the next start).
async fn default_tenant(controller: &Controller, token_file: &Path) -> Result<String> {
    const NAME: &str = "default";
    if controller.tenant_id(NAME).is_none() {
        let request =
            TenantRequest { name: NAME.to_string(), weight: 1.0, quota: BTreeMap::new(), unix_user: None };
        controller.add_tenant(request).await.map_err(|e| anyhow!("adding tenant '{NAME}': {e}"))?;
    } else if let Ok(token) = read_secret(token_file) {
        return Ok(token);
    }
    let token = http::create_token(controller.db(), Scope::Tenant, Some(NAME))
        .await
        .with_context(|| format!("creating a token for tenant '{NAME}'"))?;
    write_secret(token_file, &token)?;
    Ok(token)
}

/// Builds the engine once before opening anything, so that an unknown policy
/// or option is reported as such.
fn check_setup(setup: &ServerSetup) -> Result<()> {
    setup.engine().map(drop).map_err(|e| anyhow!("{e} (see `cotenant policies`)"))
}

/// `--set KEY=V` (or `POLICY.KEY=V` naming this policy) as the setup's options.
fn policy_options(policy: &str, set: &[(String, String)]) -> BTreeMap<String, String> {
    let prefix = format!("{policy}.");
    set.iter()
        .map(|(key, value)| (key.strip_prefix(&prefix).unwrap_or(key).to_string(), value.clone()))
        .collect()
}

fn round_secs(round: Duration) -> Result<u64> {
    if round.subsec_nanos() != 0 || round.as_secs() == 0 {
        bail!("--round {round:?}: must be a whole number of seconds, at least 1");
    }
    Ok(round.as_secs())
}

/// `cotenant.db` -> `cotenant.logs`; a PostgreSQL URL -> `cotenant-logs`.
fn default_log_dir(db: &str) -> PathBuf {
    if db.starts_with("postgres://") || db.starts_with("postgresql://") {
        return PathBuf::from("cotenant-logs");
    }
    let path = db.strip_prefix("sqlite://").or_else(|| db.strip_prefix("sqlite:")).unwrap_or(db);
    let path = path.split('?').next().unwrap_or(path);
    Path::new(path).with_extension("logs")
}

async fn bind(listen: &str) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen).await.with_context(|| format!("--listen {listen}"))
}

/// The URL a local client uses: a wildcard address becomes loopback.
fn local_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        ip if !ip.is_unspecified() => ip,
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Writes a token to a file only its owner can read (mode 0600, also when the file existed).
pub fn write_secret(path: &Path, secret: &str) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let context = || format!("writing {}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(context)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).with_context(context)?;
    writeln!(file, "{secret}").with_context(context)?;
    Ok(())
}

fn read_secret(path: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the token in {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("{} is empty (expected a token)", path.display());
    }
    Ok(token.to_string())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// Resolves once the watch turns true (or its sender is gone).
async fn until(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_options_drop_this_policys_prefix_only() {
        let set = vec![
            ("las.quantum".to_string(), "600s".to_string()),
            ("tiresias.x".to_string(), "1".to_string()),
        ];
        let options = policy_options("las", &set);
        assert_eq!(options.get("quantum").map(String::as_str), Some("600s"));
        assert_eq!(options.get("tiresias.x").map(String::as_str), Some("1"));
    }

    #[test]
    fn setups_with_unknown_policies_are_refused_before_anything_opens() {
        let setup = |policy: &str| ServerSetup {
            nodes: parse_nodes("1x2xA100-80GB").expect("nodes"),
            policy: policy.to_string(),
            options: BTreeMap::new(),
            round_secs: None,
            seed: 0,
        };
        check_setup(&setup("fifo")).expect("fifo exists");
        let error = check_setup(&setup("no-such-policy")).expect_err("unknown").to_string();
        assert!(error.starts_with("policy: ") && error.contains("no-such-policy"), "{error}");
        assert!(round_secs(Duration::from_millis(1500)).is_err());
        assert_eq!(round_secs(Duration::from_secs(300)).expect("5m"), 300);
    }

    #[test]
    fn log_dirs_and_local_urls() {
        assert_eq!(default_log_dir("cotenant.db"), PathBuf::from("cotenant.logs"));
        assert_eq!(
            default_log_dir("sqlite:/var/lib/c/state.db?mode=rwc"),
            PathBuf::from("/var/lib/c/state.logs")
        );
        assert_eq!(default_log_dir("postgres://u@h/db"), PathBuf::from("cotenant-logs"));
        let wildcard: SocketAddr = "0.0.0.0:8080".parse().expect("addr");
        assert_eq!(local_url(wildcard), "http://127.0.0.1:8080");
        let given: SocketAddr = "10.1.2.3:9".parse().expect("addr");
        assert_eq!(local_url(given), "http://10.1.2.3:9");
    }

    #[test]
    fn secrets_are_written_owner_only_and_read_back_trimmed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cotenant-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("admin.token");
        std::fs::write(&path, "old").expect("pre-existing");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_secret(&path, "ct_abc").expect("write");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_secret(&path).expect("read"), "ct_abc");
        std::fs::write(&path, "\n").expect("empty");
        assert!(read_secret(&path).expect_err("empty").to_string().ends_with("is empty (expected a token)"));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
