//! What the live client commands print for people: aligned tables, UTC times
//! and ages. Pure functions of the server's answers and `now_us`, so tests pin
//! the exact text.

use cotenant_live::api::{JobEvent, JobStatus, JobView, NodeView, QueueEntry, TenantView, UsageRow};
use cotenant_trace::wallclock::{format_wall_clock, parse_wall_clock_us};

const MICROS_PER_SECOND: u64 = 1_000_000;
/// Longest command shown in a table cell (`show` prints it whole).
const MAX_COMMAND_CHARS: usize = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table whose columns are each left or right aligned; the last column is
/// not padded, so no line ends in spaces.
#[derive(Debug)]
pub struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Table {
        Table { columns: columns.to_vec(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let header: Vec<String> = self.columns.iter().map(|(name, _)| name.to_string()).collect();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, ((cell, width), (_, align))) in row.iter().zip(&widths).zip(&self.columns).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(width - cell.chars().count());
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `2026-12-01 13:37:44 UTC` (seconds; the server keeps microseconds).
pub fn utc(us: u64) -> String {
    format!("{} UTC", format_wall_clock(i64::try_from(us).unwrap_or(i64::MAX)))
}

/// `45s`, `12m`, `3h 05m`, `2d 04h`: a span a person reads at a glance.
pub fn span(us: u64) -> String {
    let secs = us / MICROS_PER_SECOND;
    match secs {
        0..=99 => format!("{secs}s"),
        100..=5_999 => format!("{}m {:02}s", secs / 60, secs % 60),
        6_000..=172_799 => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// `3m ago` (or `in 3m` for a time ahead of `now_us`, when clocks disagree).
pub fn age(now_us: u64, us: u64) -> String {
    let coarse = |d: u64| {
        let secs = d / MICROS_PER_SECOND;
        match secs {
            0..=99 => format!("{secs}s"),
            100..=5_999 => format!("{}m", secs / 60),
            6_000..=172_799 => format!("{}h", secs / 3600),
            _ => format!("{}d", secs / 86_400),
        }
    };
    if us <= now_us {
        format!("{} ago", coarse(now_us - us))
    } else {
        format!("in {}", coarse(us - now_us))
    }
}

/// A time with its age: `2026-12-01 13:37:44 UTC (3m ago)`.
fn when(now_us: u64, us: u64) -> String {
    format!("{} ({})", utc(us), age(now_us, us))
}

/// Parses `--since`/`--until`: a span back from now (`2h`, `7d`), a date
/// (`2026-12-01`, UTC midnight) or a UTC time (`2026-12-01T13:00:00Z`,
/// `2026-12-01 13:00:00`). Returns Unix microseconds.
pub fn parse_time(text: &str, now_us: u64) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(back) = cotenant_core::Span::parse(text) {
        return Ok(now_us.saturating_sub(back.0));
    }
    let utc = text.strip_suffix('Z').or_else(|| text.strip_suffix(" UTC")).unwrap_or(text);
    let us = parse_wall_clock_us(utc).map_err(|why| {
        format!("'{text}' is neither a span back from now (2h, 7d) nor a UTC time like 2026-12-01T13:00:00Z ({why})")
    })?;
    u64::try_from(us).map_err(|_| format!("'{text}' is before 1970"))
}

/// A word as a POSIX shell reads it back: bare when safe, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let safe =
        !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

pub fn command_line(command: &[String]) -> String {
    command.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars.saturating_sub(3)) {
        Some((cut, _)) if text.chars().count() > max_chars => format!("{}...", &text[..cut]),
        _ => text.to_string(),
    }
}

/// `failed (exit 3)`, `running`, ...
pub fn status(job: &JobView) -> String {
    match (job.status, job.exit_code) {
        (JobStatus::Failed, Some(code)) => format!("failed (exit {code})"),
        (status, _) => status.as_str().to_string(),
    }
}

/// How long the current (or last) attempt has run; `-` if it never started.
fn ran(job: &JobView, now_us: u64) -> String {
    match job.started_us {
        Some(start) => span(job.ended_us.unwrap_or(now_us).saturating_sub(start)),
        None => "-".into(),
    }
}

fn dash(text: Option<&str>) -> String {
    text.filter(|t| !t.is_empty()).unwrap_or("-").to_string()
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

pub fn jobs_table(jobs: &[JobView], now_us: u64, show_tenant: bool) -> String {
    use Align::{Left, Right};
    let mut columns = vec![("ID", Right)];
    if show_tenant {
        columns.push(("TENANT", Left));
    }
    columns.extend([
        ("NAME", Left),
        ("STATUS", Left),
        ("GPUS", Right),
        ("SUBMITTED", Left),
        ("RAN", Right),
        ("NODES", Left),
        ("COMMAND", Left),
    ]);
    let mut table = Table::new(&columns);
    for job in jobs {
        let mut row = vec![job.id.to_string()];
        if show_tenant {
            row.push(job.tenant.clone());
        }
        row.extend([
            dash(job.name.as_deref()),
            status(job),
            gpus(job),
            age(now_us, job.submitted_us),
            ran(job, now_us),
            list(&job.nodes),
            shorten(&command_line(&job.command), MAX_COMMAND_CHARS),
        ]);
        table.row(row);
    }
    table.render()
}

/// `2`, or `2 A100-80GB` when a type was asked for.
fn gpus(job: &JobView) -> String {
    match &job.gpu_type {
        Some(ty) => format!("{} {ty}", job.gpus),
        None => job.gpus.to_string(),
    }
}

/// `cotenant show`: the job's fields one per line, then its events.
pub fn job_details(job: &JobView, events: &[JobEvent], now_us: u64) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("job", job.id.to_string()),
        ("name", dash(job.name.as_deref())),
        ("tenant", job.tenant.clone()),
        ("status", status(job)),
        ("command", command_line(&job.command)),
        ("gpus", gpus(job)),
        ("submitted", when(now_us, job.submitted_us)),
    ];
    let times = [("decided", job.decided_us), ("started", job.started_us), ("ended", job.ended_us)];
    fields.extend(times.iter().filter_map(|(name, us)| us.map(|us| (*name, when(now_us, us)))));
    if job.started_us.is_some() {
        fields.push(("ran", ran(job, now_us)));
    }
    fields.push(("attempt", job.attempt.to_string()));
    if job.preemptions > 0 {
        fields.push(("preemptions", job.preemptions.to_string()));
    }
    if !job.nodes.is_empty() {
        fields.push(("nodes", list(&job.nodes)));
        fields.push(("gpu uuids", list(&job.gpu_uuids)));
    }
    if let Some(reason) = job.reason.as_deref().filter(|r| !r.is_empty()) {
        let label = if job.status == JobStatus::Pending { "waiting" } else { "reason" };
        fields.push((label, reason.to_string()));
    }
    let width = fields.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, value) in fields {
        out.push_str(&format!("{name:width$}  {value}\n"));
    }
    if !events.is_empty() {
        out.push_str("\nevents:\n");
        let mut table = Table::new(&[("AT", Align::Left), ("EVENT", Align::Left), ("DETAIL", Align::Left)]);
        for event in events {
            table.row(vec![utc(event.at_us), event.kind.clone(), event.detail.clone()]);
        }
        out.push_str(&table.render());
    }
    out
}

pub fn nodes_table(nodes: &[NodeView], now_us: u64) -> String {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("NODE", Left),
        ("TYPE", Left),
        ("GPUS", Right),
        ("FREE", Right),
        ("STATE", Left),
        ("HEARTBEAT", Left),
        ("GPU UTIL", Right),
        ("GPU MEM", Right),
        ("JOBS", Left),
    ]);
    for node in nodes {
        let (util, mem) = gpu_readings(node);
        table.row(vec![
            node.name.clone(),
            node.gpu_type.clone(),
            node.gpus.to_string(),
            node.free_gpus.to_string(),
            node.state.clone(),
            node.last_heartbeat_us.map(|us| age(now_us, us)).unwrap_or_else(|| "never".into()),
            util,
            mem,
            list(&node.jobs.iter().map(u32::to_string).collect::<Vec<_>>()),
        ]);
    }
    table.render()
}

/// Mean utilization and total memory used over a node's GPUs, from its agent's
/// latest NVML readings; `-` without readings (fake GPUs).
fn gpu_readings(node: &NodeView) -> (String, String) {
    if node.gpu_stats.is_empty() {
        return ("-".into(), "-".into());
    }
    let count = node.gpu_stats.len() as f64;
    let util = node.gpu_stats.iter().map(|s| f64::from(s.utilization_pct)).sum::<f64>() / count;
    let mib: u64 = node.gpu_stats.iter().map(|s| s.memory_used_mib).sum();
    (format!("{util:.0}%"), format!("{:.1} GiB", mib as f64 / 1024.0))
}

pub fn queue_table(entries: &[QueueEntry], now_us: u64) -> String {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("POS", Right),
        ("JOB", Right),
        ("TENANT", Left),
        ("GPUS", Right),
        ("WAITING", Right),
        ("REASON", Left),
    ]);
    for entry in entries {
        table.row(vec![
            entry.position.to_string(),
            entry.job.to_string(),
            entry.tenant.clone(),
            entry.gpus.to_string(),
            span(now_us.saturating_sub(entry.waiting_since_us)),
            dash(entry.reason.as_deref()),
        ]);
    }
    table.render()
}

/// GPU-hours per tenant with a total row.
pub fn usage_table(rows: &[UsageRow]) -> String {
    use Align::{Left, Right};
    let mut table =
        Table::new(&[("TENANT", Left), ("GPU-HOURS", Right), ("STARTED", Right), ("COMPLETED", Right)]);
    let (mut hours, mut started, mut completed) = (0.0, 0u64, 0u64);
    for row in rows {
        table.row(vec![
            row.tenant.clone(),
            format!("{:.2}", row.gpu_hours),
            row.jobs_started.to_string(),
            row.jobs_completed.to_string(),
        ]);
        hours += row.gpu_hours;
        started += u64::from(row.jobs_started);
        completed += u64::from(row.jobs_completed);
    }
    table.row(vec!["total".into(), format!("{hours:.2}"), started.to_string(), completed.to_string()]);
    table.render()
}

pub fn tenants_table(tenants: &[TenantView]) -> String {
    use Align::{Left, Right};
    let mut table = Table::new(&[
        ("ID", Right),
        ("TENANT", Left),
        ("WEIGHT", Right),
        ("QUOTA", Left),
        ("GPUS-HELD", Right),
        ("UNIX-USER", Left),
    ]);
    for tenant in tenants {
        let quota: Vec<String> = tenant.quota.iter().map(|(ty, n)| format!("{ty}={n}")).collect();
        table.row(vec![
            tenant.id.to_string(),
            tenant.name.clone(),
            format!("{}", tenant.weight),
            if quota.is_empty() { "none".into() } else { quota.join(",") },
            tenant.gpus_held.to_string(),
            dash(tenant.unix_user.as_deref()),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cotenant_live::agent_api::GpuStat;

    /// 2026-12-01 13:37:44 UTC (checked with Python's calendar.timegm).
    const NOW_US: u64 = 1_796_132_264 * MICROS_PER_SECOND;
    const MIN: u64 = 60 * MICROS_PER_SECOND;

    fn job(id: u32, status: JobStatus) -> JobView {
        JobView {
            id,
            tenant: "alpha".into(),
            name: None,
            status,
            command: vec!["sh".into(), "-c".into(), "echo hello; exit 0".into()],
            gpus: 1,
            gpu_type: None,
            submitted_us: NOW_US - 3 * MIN,
            decided_us: None,
            started_us: None,
            ended_us: None,
            attempt: 0,
            nodes: vec![],
            gpu_uuids: vec![],
            exit_code: None,
            reason: None,
            preemptions: 0,
        }
    }

    #[test]
    fn times_print_as_utc() {
        assert_eq!(utc(NOW_US), "2026-12-01 13:37:44 UTC");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
    }

    #[test]
    fn times_parse_as_spans_back_or_utc_dates() {
        assert_eq!(parse_time("2h", NOW_US), Ok(NOW_US - 120 * MIN));
        assert_eq!(parse_time("2026-12-01T13:37:44Z", 0), Ok(NOW_US));
        assert_eq!(parse_time("2026-12-01 13:37:44", 0), Ok(NOW_US));
        assert_eq!(parse_time("2026-12-01", 0), Ok(NOW_US - (13 * 3600 + 37 * 60 + 44) * MICROS_PER_SECOND));
        let error = parse_time("2026-02-30", 0).expect_err("no such day");
        assert!(error.ends_with("(expected a date YYYY-MM-DD, got \"2026-02-30\")"), "{error}");
        assert_eq!(parse_time("1969-12-31", 0), Err("'1969-12-31' is before 1970".into()));
        let error = parse_time("yesterday", NOW_US).expect_err("words");
        assert!(error.contains("'yesterday' is neither a span back from now"), "{error}");
        assert!(parse_time("2026-12-01T25:00Z", 0).is_err());
    }

    #[test]
    fn spans_and_ages_read_at_a_glance() {
        let s = MICROS_PER_SECOND;
        assert_eq!(span(45 * s), "45s");
        assert_eq!(span(125 * s), "2m 05s");
        assert_eq!(span(3 * 3600 * s + 5 * 60 * s), "3h 05m");
        assert_eq!(span(50 * 3600 * s), "2d 02h");
        assert_eq!(age(NOW_US, NOW_US - 3 * MIN), "3m ago");
        assert_eq!(age(NOW_US, NOW_US - 7 * s), "7s ago");
        assert_eq!(age(NOW_US, NOW_US + 2 * 3600 * s), "in 2h");
    }

    #[test]
    fn commands_are_quoted_as_a_shell_reads_them_back() {
        let command: Vec<String> =
            ["python", "train.py", "--lr=3e-4", "it's", ""].iter().map(|w| w.to_string()).collect();
        assert_eq!(command_line(&command), r#"python train.py --lr=3e-4 'it'\''s' ''"#);
        assert_eq!(shorten("abcdefghij", 8), "abcde...");
        assert_eq!(shorten("abcdefgh", 8), "abcdefgh");
    }

    #[test]
    fn jobs_table_aligns_columns_and_shows_exit_codes() {
        let mut running = job(9, JobStatus::Running);
        running.started_us = Some(NOW_US - 2 * MIN);
        running.nodes = vec!["a100-80gb-0".into()];
        running.gpus = 2;
        running.gpu_type = Some("A100-80GB".into());
        let mut failed = job(10, JobStatus::Failed);
        failed.name = Some("exit3".into());
        failed.command = vec!["sh".into(), "-c".into(), "exit 3".into()];
        failed.exit_code = Some(3);
        failed.started_us = Some(NOW_US - 2 * MIN);
        failed.ended_us = Some(NOW_US - MIN - 30 * MICROS_PER_SECOND);
        let jobs = [job(8, JobStatus::Pending), running, failed];
        let want = "\
ID  NAME   STATUS                  GPUS  SUBMITTED     RAN  NODES        COMMAND
 8  -      pending                    1  3m ago          -  -            sh -c 'echo hello; exit 0'
 9  -      running          2 A100-80GB  3m ago     2m 00s  a100-80gb-0  sh -c 'echo hello; exit 0'
10  exit3  failed (exit 3)            1  3m ago        30s  -            sh -c 'exit 3'
";
        assert_eq!(jobs_table(&jobs, NOW_US, false), want);
        let with_tenant = jobs_table(&jobs[..1], NOW_US, true);
        assert_eq!(
            with_tenant,
            "ID  TENANT  NAME  STATUS   GPUS  SUBMITTED  RAN  NODES  COMMAND\n \
             8  alpha   -     pending     1  3m ago       -  -      sh -c 'echo hello; exit 0'\n"
        );
        assert_eq!(
            jobs_table(&[], NOW_US, false),
            "ID  NAME  STATUS  GPUS  SUBMITTED  RAN  NODES  COMMAND\n"
        );
    }

    #[test]
    fn show_lists_fields_then_events() {
        let mut failed = job(10, JobStatus::Failed);
        failed.exit_code = Some(3);
        failed.attempt = 1;
        failed.decided_us = Some(NOW_US - 2 * MIN);
        failed.started_us = Some(NOW_US - 2 * MIN);
        failed.ended_us = Some(NOW_US - MIN);
        failed.nodes = vec!["a100-80gb-0".into()];
        failed.gpu_uuids = vec!["FAKE-a-0".into()];
        failed.reason = Some("exited with code 3".into());
        let events = [JobEvent { at_us: NOW_US - MIN, kind: "failed".into(), detail: "exit 3".into() }];
        let want = "\
job        10
name       -
tenant     alpha
status     failed (exit 3)
command    sh -c 'echo hello; exit 0'
gpus       1
submitted  2026-12-01 13:34:44 UTC (3m ago)
decided    2026-12-01 13:35:44 UTC (2m ago)
started    2026-12-01 13:35:44 UTC (2m ago)
ended      2026-12-01 13:36:44 UTC (60s ago)
ran        60s
attempt    1
nodes      a100-80gb-0
gpu uuids  FAKE-a-0
reason     exited with code 3

events:
AT                       EVENT   DETAIL
2026-12-01 13:36:44 UTC  failed  exit 3
";
        assert_eq!(job_details(&failed, &events, NOW_US), want);
        let mut pending = job(11, JobStatus::Pending);
        pending.reason = Some("needs 2 GPUs, 1 free".into());
        assert!(
            job_details(&pending, &[], NOW_US).ends_with("attempt    0\nwaiting    needs 2 GPUs, 1 free\n")
        );
    }

    #[test]
    fn nodes_queue_usage_and_tenant_tables() {
        let node = NodeView {
            name: "a100-80gb-0".into(),
            gpu_type: "A100-80GB".into(),
            gpus: 2,
            free_gpus: 1,
            state: "up".into(),
            last_heartbeat_us: Some(NOW_US - 2 * MICROS_PER_SECOND),
            jobs: vec![9, 12],
            gpu_uuids: vec![],
            gpu_stats: vec![
                GpuStat { uuid: "GPU-0".into(), utilization_pct: 90, memory_used_mib: 40960 },
                GpuStat { uuid: "GPU-1".into(), utilization_pct: 60, memory_used_mib: 20480 },
            ],
        };
        let mut down = node.clone();
        down.name = "a100-80gb-1".into();
        down.state = "down".into();
        down.last_heartbeat_us = None;
        down.jobs = vec![];
        down.gpu_stats = vec![];
        assert_eq!(
            nodes_table(&[node, down], NOW_US),
            "\
NODE         TYPE       GPUS  FREE  STATE  HEARTBEAT  GPU UTIL   GPU MEM  JOBS
a100-80gb-0  A100-80GB     2     1  up     2s ago          75%  60.0 GiB  9,12
a100-80gb-1  A100-80GB     2     1  down   never             -         -  -
"
        );
        let entry = QueueEntry {
            position: 0,
            job: 12,
            tenant: "beta".into(),
            gpus: 4,
            waiting_since_us: NOW_US - 3 * MIN,
            reason: Some("quota: beta holds 8 of 8 A100-80GB".into()),
        };
        assert_eq!(
            queue_table(&[entry], NOW_US),
            "\
POS  JOB  TENANT  GPUS  WAITING  REASON
  0   12  beta       4   3m 00s  quota: beta holds 8 of 8 A100-80GB
"
        );
        let rows = [
            UsageRow { tenant: "alpha".into(), gpu_hours: 1.5, jobs_started: 3, jobs_completed: 2 },
            UsageRow { tenant: "beta".into(), gpu_hours: 10.25, jobs_started: 1, jobs_completed: 0 },
        ];
        assert_eq!(
            usage_table(&rows),
            "\
TENANT  GPU-HOURS  STARTED  COMPLETED
alpha        1.50        3          2
beta        10.25        1          0
total       11.75        4          2
"
        );
        let tenant = TenantView {
            id: 1,
            name: "alpha".into(),
            weight: 2.0,
            quota: [("A100-80GB".to_string(), 16)].into_iter().collect(),
            unix_user: None,
            gpus_held: 3,
        };
        assert_eq!(
            tenants_table(&[tenant]),
            "\
ID  TENANT  WEIGHT  QUOTA         GPUS-HELD  UNIX-USER
 1  alpha        2  A100-80GB=16          3  -
"
        );
    }
}
