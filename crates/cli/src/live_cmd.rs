//! The live face's commands: `server`, `agent` and `up` run the controller and
//! node agents (`live/daemon.rs`); `submit`, `jobs`, `show`, `cancel`, `logs`,
//! `nodes`, `queue`, `usage` and `admin` are clients of the server's API
//! (`cotenant_live::client`), reading `COTENANT_SERVER` and `COTENANT_TOKEN`.
//! Tables for people (`live/render.rs`), `--json` for scripts; a refusal prints
//! the server's message and exits non-zero.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args, Subcommand};
use cotenant_live::api::{
    JobQuery, JobStatus, LogQuery, Scope, SubmitRequest, TenantRequest, TokenRequest, UsageQuery, MAX_PAGE,
};
use cotenant_live::client::Client;
use cotenant_live::setup::NodeDecl;

#[path = "live/daemon.rs"]
mod daemon;
#[path = "live/render.rs"]
mod render;

#[derive(Debug, Subcommand)]
pub enum LiveCommand {
    /// Run the cotenant server: the scheduler (any policy from `cotenant policies`) behind an
    /// HTTP/JSON API, with a write-ahead journal in SQLite (or PostgreSQL).
    ///
    /// Prints the admin token once, on the first start of a database (and writes it to
    /// --admin-token-file). Agents (`cotenant agent`) bring the declared --nodes up.
    Server(Box<ServerArgs>),
    /// Run a node agent: registers this machine's GPUs (NVML, or --fake-gpus) with the server
    /// and runs the jobs the server places on it.
    Agent(Box<AgentArgs>),
    /// Start a one-machine cluster: a server and a local agent in one process (real GPUs if
    /// NVML finds any, else fake ones), a tenant `default`, and the commands to use it.
    Up(Box<UpArgs>),
    /// Submit a job: `cotenant submit --gpus 2 -- python train.py --epochs 3`.
    Submit(Box<SubmitArgs>),
    /// List jobs (your tenant's; all tenants' with an admin token).
    Jobs(JobsArgs),
    /// Show one job: its state, why it waits or how it ended, and its events.
    Show(JobArgs),
    /// Cancel a job (a running one is signalled and stopped).
    Cancel(JobArgs),
    /// Print a job's output (stdout, or --stderr); -f follows it until the job ends.
    Logs(LogsArgs),
    /// List the cluster's nodes: GPUs, free GPUs, agent state.
    Nodes(ListArgs),
    /// The pending jobs in the order the policy keeps them, with why each waits.
    Queue(ListArgs),
    /// GPU-hours per tenant over a period.
    Usage(UsageArgs),
    /// Tenants and tokens (admin token).
    Admin {
        #[command(subcommand)]
        what: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Add or list tenants.
    Tenant {
        #[command(subcommand)]
        what: TenantCommand,
    },
    /// Create tokens.
    Token {
        #[command(subcommand)]
        what: TokenCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Add a tenant; prints its first token (shown once).
    Add(TenantAddArgs),
    /// List the tenants with their weights, quotas and GPUs held.
    List(ListArgs),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for a tenant (--tenant T), for agents (--agent) or an admin (--admin).
    Add(TokenAddArgs),
}

/// Where the server is and who we are; default `COTENANT_SERVER` and `COTENANT_TOKEN`.
#[derive(Debug, Args, Clone, Default)]
pub struct Connection {
    /// Server URL (default: $COTENANT_SERVER, else http://127.0.0.1:8080).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token (default: $COTENANT_TOKEN). Prefer the variable: flags show in `ps`.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// SQLite file (created if missing) or a postgres:// URL.
    #[arg(long, default_value = "cotenant.db")]
    pub db: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// The cluster: COUNTxGPUSxTYPE[,...], e.g. 2x8xA100-80GB,1x4xH100. Agents bind to these nodes.
    #[arg(long, value_parser = parse_nodes_arg)]
    pub nodes: NodesArg,
    /// Scheduling policy (`cotenant policies` lists them).
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// A policy option, KEY=VALUE (as `sim --set`); repeat for several.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// Round or quantum length for round-based policies, whole seconds: 300s, 5m.
    #[arg(long, value_parser = parse_duration)]
    pub round: Option<Duration>,
    /// Seed of the policy's random choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// An agent silent this long is lost and its jobs are requeued.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub heartbeat_timeout: Duration,
    /// Where job logs are kept (default: the database file's name with `.logs`).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Also write the admin token (first start only) to this file, mode 0600.
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// Submissions per second each token may sustain.
    #[arg(long, default_value_t = 2000.0)]
    pub submit_rate: f64,
    /// Submissions a token may send in a burst above the rate.
    #[arg(long, default_value_t = 4000)]
    pub submit_burst: u32,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("token_source").args(["token", "token_file"])))]
pub struct AgentArgs {
    /// Server URL (default: $COTENANT_SERVER, else http://127.0.0.1:8080).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Agent (or admin) token (default: $COTENANT_TOKEN).
    #[arg(long)]
    pub token: Option<String>,
    /// Read the token from this file.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// This node's name (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Pretend to have these GPUs instead of asking NVML: COUNTxTYPE, e.g. 8xA100-80GB.
    #[arg(long, value_name = "SPEC", value_parser = parse_fake_gpus)]
    pub fake_gpus: Option<FakeGpus>,
    /// GPU type to register as, instead of the one derived from the NVML model name.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// Pid files, job output and exit statuses; keep it across agent restarts.
    #[arg(long, default_value = "cotenant-agent", value_name = "DIR")]
    pub state_dir: PathBuf,
    /// How long one long-poll for work is held (below the server's heartbeat timeout).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub poll_wait: Duration,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Directory for the database, logs and tokens.
    #[arg(long, default_value = "cotenant-up", value_name = "DIR")]
    pub dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Scheduling policy (`cotenant policies` lists them).
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// A policy option, KEY=VALUE; repeat for several.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// Use fake GPUs even if NVML finds real ones (without NVML GPUs: 4xA100-80GB).
    #[arg(long, value_name = "SPEC", value_parser = parse_fake_gpus)]
    pub fake_gpus: Option<FakeGpus>,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// GPUs the job needs.
    #[arg(long, default_value_t = 1)]
    pub gpus: u32,
    /// GPU type, as the cluster names it (e.g. A100-80GB); default: any.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// A name to recognise the job by.
    #[arg(long)]
    pub name: Option<String>,
    /// An environment variable for the job, KEY=VALUE (or KEY: its value here); repeat.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// Working directory on the node.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Your estimate of the run time (estimate-based policies use it): 90m, 2h.
    #[arg(long, value_parser = parse_duration)]
    pub estimate: Option<Duration>,
    /// Priority (higher first, for policies that read it).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// Signal sent first on preemption or cancel (default SIGTERM): SIGUSR1, USR2, 10.
    #[arg(long, value_parser = parse_signal_arg)]
    pub signal: Option<String>,
    /// Time between that signal and SIGKILL (default 30s).
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// CPUs the job needs (0: not tracked).
    #[arg(long, default_value_t = 0)]
    pub cpus: u32,
    /// Memory the job needs, GiB (0: not tracked).
    #[arg(long, default_value_t = 0)]
    pub memory_gib: u32,
    /// Print the accepted job as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
    /// The program and its arguments, after `--`; run without a shell.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Every tenant's jobs, with a TENANT column (admin token).
    #[arg(long, conflicts_with = "tenant")]
    pub all_tenants: bool,
    /// Only this tenant's jobs (admin token).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Only jobs in this state.
    #[arg(long, value_parser = parse_status)]
    pub status: Option<JobStatus>,
    /// Submitted at or after: a span back from now (2h, 7d) or a UTC time (2026-12-01T13:00:00Z).
    #[arg(long, value_parser = parse_when)]
    pub since: Option<u64>,
    /// Submitted before (same forms as --since).
    #[arg(long, value_parser = parse_when)]
    pub until: Option<u64>,
    /// Show at most this many jobs (pages are fetched as needed).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Print the jobs as a JSON array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job's id.
    pub id: u32,
    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The job's id.
    pub id: u32,
    /// Keep printing new output until the job ends.
    #[arg(short, long)]
    pub follow: bool,
    /// Print stderr instead of stdout.
    #[arg(long)]
    pub stderr: bool,
    /// Which attempt's output (default: the latest).
    #[arg(long)]
    pub attempt: Option<u32>,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// From: a span back from now (30d) or a UTC time; default: the beginning.
    #[arg(long, value_parser = parse_when)]
    pub since: Option<u64>,
    /// Until (same forms); default: now.
    #[arg(long, value_parser = parse_when)]
    pub until: Option<u64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
pub struct TenantAddArgs {
    /// The tenant's name.
    pub name: String,
    /// Its share weight (fair-share policies).
    #[arg(long, default_value_t = 1.0)]
    pub weight: f64,
    /// GPU quota: total=N or TYPE=N (e.g. A100-80GB=16); repeat or separate with commas.
    #[arg(long, value_name = "TYPE=N", value_delimiter = ',', value_parser = parse_quota)]
    pub quota: Vec<(String, u32)>,
    /// Unix user its jobs run as (when the agent runs as root).
    #[arg(long)]
    pub unix_user: Option<String>,
    /// Print the tenant and its token as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("scope").args(["tenant", "agent", "admin"]).required(true)))]
pub struct TokenAddArgs {
    /// A token of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
    /// A token for node agents.
    #[arg(long)]
    pub agent: bool,
    /// An admin token.
    #[arg(long)]
    pub admin: bool,
    /// Print the token as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// `--nodes`, parsed when the flags are.
#[derive(Clone, Debug, PartialEq)]
pub struct NodesArg {
    pub spec: String,
    pub nodes: Vec<NodeDecl>,
}

/// `--fake-gpus COUNTxTYPE`.
#[derive(Clone, Debug, PartialEq)]
pub struct FakeGpus {
    pub count: u32,
    pub gpu_type: String,
}

impl FakeGpus {
    pub fn spec(&self) -> String {
        format!("{}x{}", self.count, self.gpu_type)
    }
}

fn parse_nodes_arg(text: &str) -> Result<NodesArg, String> {
    let nodes = cotenant_live::setup::parse_nodes(text).map_err(|e| e.to_string())?;
    Ok(NodesArg { spec: text.to_string(), nodes })
}

fn parse_fake_gpus(text: &str) -> Result<FakeGpus, String> {
    let bad = || format!("'{text}': expected COUNTxTYPE, e.g. 8xA100-80GB");
    let (count, gpu_type) = text.trim().split_once('x').ok_or_else(bad)?;
    let count: u32 = count.parse().map_err(|_| bad())?;
    let max = cotenant_core::limits::MAX_GPUS_PER_NODE;
    if count == 0 || count > max {
        return Err(format!("'{text}': 1 to {max} GPUs per node"));
    }
    if gpu_type.is_empty() || gpu_type.contains(',') {
        return Err(bad());
    }
    Ok(FakeGpus { count, gpu_type: gpu_type.to_string() })
}

fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.to_string())),
        _ => Err(format!("'{text}': expected KEY=VALUE")),
    }
}

/// `KEY=VALUE`, or `KEY` alone: the value this shell has.
fn parse_env(text: &str) -> Result<(String, String), String> {
    if text.contains('=') {
        return parse_key_value(text);
    }
    std::env::var(text)
        .map(|value| (text.to_string(), value))
        .map_err(|_| format!("'{text}': not KEY=VALUE, and no variable {text} is set here to pass on"))
}

fn parse_quota(text: &str) -> Result<(String, u32), String> {
    let (key, value) = parse_key_value(text)?;
    let gpus = value.trim().parse().map_err(|_| format!("'{text}': '{value}' is not a number of GPUs"))?;
    Ok((key, gpus))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    cotenant_core::Span::parse(text).map(|span| Duration::from_micros(span.0))
}

fn parse_signal_arg(text: &str) -> Result<String, String> {
    cotenant_live::agent_api::parse_signal(text)
        .map(|_| text.to_string())
        .ok_or_else(|| format!("'{text}': not a signal (SIGTERM, SIGUSR1, USR2, or a number 1-64)"))
}

fn parse_status(text: &str) -> Result<JobStatus, String> {
    JobStatus::ALL.into_iter().find(|s| s.as_str().eq_ignore_ascii_case(text.trim())).ok_or_else(|| {
        let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
        format!("'{text}': one of {}", names.join(", "))
    })
}

fn parse_when(text: &str) -> Result<u64, String> {
    render::parse_time(text, now_us())
}

pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

pub fn run(command: LiveCommand) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(dispatch(command))
}

async fn dispatch(command: LiveCommand) -> Result<()> {
    match command {
        LiveCommand::Server(args) => daemon::server(*args).await,
        LiveCommand::Agent(args) => daemon::agent(*args).await,
        LiveCommand::Up(args) => daemon::up(*args).await,
        LiveCommand::Submit(args) => submit(*args).await,
        LiveCommand::Jobs(args) => jobs(args).await,
        LiveCommand::Show(args) => show(args).await,
        LiveCommand::Cancel(args) => cancel(args).await,
        LiveCommand::Logs(args) => logs(args).await,
        LiveCommand::Nodes(args) => {
            let nodes = client(&args.connection)?.nodes().await?;
            print(args.json, &nodes, || render::nodes_table(&nodes, now_us()))
        }
        LiveCommand::Queue(args) => {
            let queue = client(&args.connection)?.queue().await?;
            print(args.json, &queue, || render::queue_table(&queue, now_us()))
        }
        LiveCommand::Usage(args) => {
            let query = UsageQuery { since: args.since, until: args.until };
            let rows = client(&args.connection)?.usage(&query).await?;
            print(args.json, &rows, || render::usage_table(&rows))
        }
        LiveCommand::Admin { what: AdminCommand::Tenant { what: TenantCommand::Add(args) } } => {
            tenant_add(args).await
        }
        LiveCommand::Admin { what: AdminCommand::Tenant { what: TenantCommand::List(args) } } => {
            let tenants = client(&args.connection)?.tenants().await?;
            print(args.json, &tenants, || render::tenants_table(&tenants))
        }
        LiveCommand::Admin { what: AdminCommand::Token { what: TokenCommand::Add(args) } } => {
            token_add(args).await
        }
    }
}

fn client(connection: &Connection) -> Result<Client> {
    Ok(Client::from_env_or(connection.server.as_deref(), connection.token.clone())?)
}

/// JSON (pretty, one document) or the table `human` renders.
fn print<T: serde::Serialize>(json: bool, value: &T, human: impl FnOnce() -> String) -> Result<()> {
    let text = if json { serde_json::to_string_pretty(value)? + "\n" } else { human() };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

pub fn submit_request(args: &SubmitArgs) -> SubmitRequest {
    SubmitRequest {
        command: args.command.clone(),
        name: args.name.clone(),
        env: args.env.iter().cloned().collect::<BTreeMap<_, _>>(),
        cwd: args.cwd.clone(),
        gpus: args.gpus,
        gpu_type: args.gpu_type.clone(),
        cpus: args.cpus,
        memory_gib: args.memory_gib,
        estimate_secs: args.estimate.map(|d| d.as_secs_f64()),
        priority: args.priority,
        checkpoint_signal: args.signal.clone(),
        grace_secs: args.grace.map(|d| d.as_secs_f64()),
    }
}

async fn submit(args: SubmitArgs) -> Result<()> {
    let job = client(&args.connection)?.submit(&submit_request(&args)).await?;
    print(args.json, &job, || {
        let mut line = format!("submitted job {} ({})", job.id, render::status(&job));
        if let Some(reason) = job.reason.as_deref().filter(|r| !r.is_empty()) {
            line.push_str(&format!(": {reason}"));
        }
        line + "\n"
    })
}

async fn jobs(args: JobsArgs) -> Result<()> {
    let client = client(&args.connection)?;
    let mut query = JobQuery {
        tenant: args.tenant.clone(),
        status: args.status,
        since: args.since,
        until: args.until,
        limit: None,
        cursor: None,
    };
    let wanted = args.limit as usize;
    let mut jobs = Vec::new();
    let more = loop {
        query.limit = Some((wanted - jobs.len()).min(MAX_PAGE as usize) as u32);
        let page = client.jobs(&query).await?;
        let empty = page.items.is_empty();
        jobs.extend(page.items);
        match page.next {
            Some(next) if jobs.len() < wanted && !empty => query.cursor = Some(next),
            next => break next.is_some(),
        }
    };
    jobs.truncate(wanted);
    let several_tenants = jobs.windows(2).any(|w| w[0].tenant != w[1].tenant);
    print(args.json, &jobs, || render::jobs_table(&jobs, now_us(), args.all_tenants || several_tenants))?;
    if more && !args.json {
        eprintln!("(more jobs than --limit {}: showing the first {})", args.limit, jobs.len());
    }
    Ok(())
}

async fn show(args: JobArgs) -> Result<()> {
    let client = client(&args.connection)?;
    let job = client.job(args.id).await?;
    if args.json {
        return print(true, &job, String::new);
    }
    let events = client.events(args.id).await?;
    print(false, &job, || render::job_details(&job, &events, now_us()))
}

async fn cancel(args: JobArgs) -> Result<()> {
    let job = client(&args.connection)?.cancel(args.id).await?;
    print(args.json, &job, || format!("job {}: {}\n", job.id, render::status(&job)))
}

async fn logs(args: LogsArgs) -> Result<()> {
    let query = LogQuery {
        stream: Some(if args.stderr { "stderr" } else { "stdout" }.to_string()),
        offset: None,
        follow: Some(args.follow),
        attempt: args.attempt,
    };
    let mut out = std::io::stdout().lock();
    let mut write_error = None;
    client(&args.connection)?
        .logs(args.id, &query, |piece| {
            if write_error.is_none() {
                if let Err(e) = out.write_all(piece).and_then(|()| out.flush()) {
                    write_error = Some(e);
                }
            }
        })
        .await?;
    match write_error {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Some(e) => Err(e).context("writing the log to stdout"),
        None => Ok(()),
    }
}

async fn tenant_add(args: TenantAddArgs) -> Result<()> {
    if !(args.weight.is_finite() && args.weight > 0.0) {
        bail!("--weight {}: must be a positive number", args.weight);
    }
    let request = TenantRequest {
        name: args.name.clone(),
        weight: args.weight,
        quota: args.quota.iter().cloned().collect(),
        unix_user: args.unix_user.clone(),
    };
    let created = client(&args.connection)?.add_tenant(&request).await?;
    print(args.json, &created, || {
        format!(
            "tenant '{}' added (id {}). Its token, shown once:\n\n  export COTENANT_TOKEN={}\n",
            created.tenant.name, created.tenant.id, created.token
        )
    })
}

async fn token_add(args: TokenAddArgs) -> Result<()> {
    let scope = match (&args.tenant, args.agent) {
        (Some(_), _) => Scope::Tenant,
        (None, true) => Scope::Agent,
        (None, false) => Scope::Admin,
    };
    let request = TokenRequest { scope, tenant: args.tenant.clone() };
    let created = client(&args.connection)?.create_token(&request).await?;
    print(args.json, &created, || {
        let whose = match &created.tenant {
            Some(tenant) => format!("tenant '{tenant}'"),
            None => format!("{scope:?}").to_ascii_lowercase(),
        };
        format!("new {whose} token, shown once:\n\n  {}\n", created.token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(subcommand)]
        command: LiveCommand,
    }

    fn parse(line: &str) -> Result<LiveCommand, String> {
        let words = std::iter::once("cotenant").chain(line.split_whitespace());
        TestCli::try_parse_from(words).map(|cli| cli.command).map_err(|e| e.to_string())
    }

    fn refusal(line: &str) -> String {
        parse(line).expect_err(line)
    }

    #[test]
    fn server_flags_parse_with_defaults_and_clear_errors() {
        let Ok(LiveCommand::Server(args)) =
            parse("server --nodes 2x8xA100-80GB --policy las --set quantum=600s --round 5m --seed 3")
        else {
            panic!("server")
        };
        assert_eq!(args.db, "cotenant.db");
        assert_eq!(args.listen, "127.0.0.1:8080");
        assert_eq!(args.nodes.nodes.len(), 2);
        assert_eq!(args.nodes.nodes[1].name, "a100-80gb-1");
        assert_eq!(args.set, vec![("quantum".to_string(), "600s".to_string())]);
        assert_eq!(args.round, Some(Duration::from_secs(300)));
        assert_eq!(args.heartbeat_timeout, Duration::from_secs(15));
        assert_eq!(args.seed, 3);
        assert!(refusal("server").contains("--nodes <NODES>"));
        let error = refusal("server --nodes 2x8");
        assert!(error.contains("--nodes '2x8': '2x8': expected COUNTxGPUSxTYPE"), "{error}");
        assert!(refusal("server --nodes 1x8xA100 --set quantum").contains("'quantum': expected KEY=VALUE"));
        assert!(refusal("server --nodes 1x8xA100 --round soon").contains("'soon' is not a duration"));
    }

    #[test]
    fn agent_flags_parse_and_token_sources_exclude_each_other() {
        let Ok(LiveCommand::Agent(args)) =
            parse("agent --server http://h:1 --token-file t --fake-gpus 2xA100-80GB --name n1")
        else {
            panic!("agent")
        };
        assert_eq!(args.fake_gpus, Some(FakeGpus { count: 2, gpu_type: "A100-80GB".into() }));
        assert_eq!(args.fake_gpus.as_ref().map(FakeGpus::spec).as_deref(), Some("2xA100-80GB"));
        assert_eq!(args.token_file, Some(PathBuf::from("t")));
        assert_eq!(args.state_dir, PathBuf::from("cotenant-agent"));
        assert_eq!(args.poll_wait, Duration::from_secs(5));
        assert!(refusal("agent --token a --token-file b").contains("cannot be used with"));
        assert!(refusal("agent --fake-gpus 0xA100").contains("1 to"));
        assert!(refusal("agent --fake-gpus A100").contains("expected COUNTxTYPE"));
    }

    #[test]
    fn up_defaults() {
        let Ok(LiveCommand::Up(args)) = parse("up") else { panic!("up") };
        assert_eq!(args.dir, PathBuf::from("cotenant-up"));
        assert_eq!(args.listen, "127.0.0.1:8080");
        assert_eq!(args.policy, "fifo");
        assert_eq!(args.fake_gpus, None);
    }

    #[test]
    fn submit_builds_the_request_from_flags_and_the_command_after_dashes() {
        let Ok(LiveCommand::Submit(args)) = parse(
            "submit --gpus 2 --gpu-type A100-80GB --name t --env A=1 --env B=x=y --cwd /w --estimate 2h \
             --priority -3 --signal SIGUSR1 --grace 45s --cpus 8 --memory-gib 64 -- python train.py --lr 3",
        ) else {
            panic!("submit")
        };
        let request = submit_request(&args);
        assert_eq!(request.command, ["python", "train.py", "--lr", "3"]);
        assert_eq!(request.gpus, 2);
        assert_eq!(request.gpu_type.as_deref(), Some("A100-80GB"));
        assert_eq!(request.env.get("B").map(String::as_str), Some("x=y"));
        assert_eq!(request.estimate_secs, Some(7200.0));
        assert_eq!(request.priority, -3);
        assert_eq!(request.checkpoint_signal.as_deref(), Some("SIGUSR1"));
        assert_eq!(request.grace_secs, Some(45.0));
        assert_eq!((request.cpus, request.memory_gib), (8, 64));
        assert_eq!(request.cwd.as_deref(), Some("/w"));

        let Ok(LiveCommand::Submit(args)) = parse("submit -- true") else { panic!("minimal") };
        let request = submit_request(&args);
        assert_eq!((request.gpus, request.estimate_secs, request.grace_secs), (1, None, None));
        assert!(refusal("submit --gpus 2").contains("<COMMAND>"));
        assert!(refusal("submit --signal SIGFOO -- true").contains("'SIGFOO': not a signal"));
        assert!(refusal("submit --gpus two -- true").contains("invalid value 'two' for '--gpus"));
        assert!(refusal("submit --env =1 -- true").contains("expected KEY=VALUE"));
        let error = refusal("submit --env COTENANT_SURELY_UNSET_VARIABLE -- true");
        assert!(error.contains("no variable COTENANT_SURELY_UNSET_VARIABLE is set here"), "{error}");
    }

    #[test]
    fn jobs_filters_parse() {
        let Ok(LiveCommand::Jobs(args)) = parse("jobs --status failed --since 2h --limit 5 --json") else {
            panic!("jobs")
        };
        assert_eq!(args.status, Some(JobStatus::Failed));
        let since = args.since.expect("since");
        let two_hours_ago = now_us() - 7_200_000_000;
        assert!(since.abs_diff(two_hours_ago) < 60_000_000, "{since} vs {two_hours_ago}");
        assert_eq!((args.limit, args.json, args.all_tenants), (5, true, false));
        let Ok(LiveCommand::Jobs(args)) = parse("jobs --until 2026-12-01") else { panic!("until") };
        assert_eq!(args.until, Some(1_796_083_200_000_000));
        assert!(refusal("jobs --status done").contains("one of pending, running, completed, failed"));
        assert!(refusal("jobs --all-tenants --tenant a").contains("cannot be used with"));
        assert!(refusal("jobs --limit 0").contains("--limit"));
    }

    #[test]
    fn job_commands_take_an_id() {
        assert!(matches!(parse("show 12 --json"), Ok(LiveCommand::Show(JobArgs { id: 12, json: true, .. }))));
        assert!(matches!(parse("cancel 3"), Ok(LiveCommand::Cancel(JobArgs { id: 3, json: false, .. }))));
        let Ok(LiveCommand::Logs(args)) = parse("logs 4 -f --stderr --attempt 2") else { panic!("logs") };
        assert_eq!((args.id, args.follow, args.stderr, args.attempt), (4, true, true, Some(2)));
        assert!(refusal("show").contains("<ID>"));
        assert!(refusal("cancel x").contains("invalid value 'x'"));
    }

    #[test]
    fn listing_commands_take_json_and_a_connection() {
        let Ok(LiveCommand::Nodes(args)) = parse("nodes --json --server 10.0.0.1:9000 --token t") else {
            panic!("nodes")
        };
        assert!(args.json);
        assert_eq!(args.connection.server.as_deref(), Some("10.0.0.1:9000"));
        assert_eq!(args.connection.token.as_deref(), Some("t"));
        assert!(matches!(parse("queue"), Ok(LiveCommand::Queue(ListArgs { json: false, .. }))));
        let Ok(LiveCommand::Usage(args)) = parse("usage --since 2026-11-01 --until 2026-12-01") else {
            panic!("usage")
        };
        assert_eq!(args.since, Some(1_793_491_200_000_000));
        assert!(refusal("usage --since last-week").contains("neither a span back from now"));
    }

    #[test]
    fn admin_commands_parse() {
        let Ok(LiveCommand::Admin { what: AdminCommand::Tenant { what: TenantCommand::Add(args) } }) =
            parse("admin tenant add alpha --weight 2 --quota A100-80GB=16,total=20 --unix-user alice")
        else {
            panic!("tenant add")
        };
        assert_eq!(args.name, "alpha");
        assert_eq!(args.weight, 2.0);
        assert_eq!(args.quota, vec![("A100-80GB".to_string(), 16), ("total".to_string(), 20)]);
        assert_eq!(args.unix_user.as_deref(), Some("alice"));
        assert!(refusal("admin tenant add a --quota a100=lots").contains("'lots' is not a number of GPUs"));
        assert!(matches!(
            parse("admin tenant list --json"),
            Ok(LiveCommand::Admin {
                what: AdminCommand::Tenant { what: TenantCommand::List(ListArgs { json: true, .. }) }
            })
        ));
        let Ok(LiveCommand::Admin { what: AdminCommand::Token { what: TokenCommand::Add(args) } }) =
            parse("admin token add --tenant alpha")
        else {
            panic!("token add")
        };
        assert_eq!((args.tenant.as_deref(), args.agent, args.admin), (Some("alpha"), false, false));
        assert!(refusal("admin token add").contains("--tenant <TENANT>|--agent|--admin"));
        assert!(refusal("admin token add --agent --admin").contains("cannot be used with"));
    }
}
