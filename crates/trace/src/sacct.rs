//! Slurm accounting: the `sacct --parsable2` (`-P`) output of an operator's own
//! cluster, one row per job allocation, `|`-separated with a header line.
//!
//! The recommended export is [`SACCT_COMMAND`]; docs/traces.md ("Your own
//! cluster's history") explains each flag. Columns are found by name in the
//! header (case-insensitively, in any order); unknown extra columns are ignored.

use std::collections::BTreeMap;
use std::path::Path;

use cotenant_core::limits::{MAX_GPUS_PER_JOB, MAX_JOB_DURATION};
use cotenant_core::Span;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{describe_span, exceeds_secs, read_bytes, text_from_bytes, Row, Table};
use crate::wallclock::wall_clock_field;
use crate::Workload;

/// The export this reader is written for (dates, time zone and format pinned; `-X`
/// leaves job steps out, `-a` takes every user's jobs).
pub const SACCT_COMMAND: &str =
    "TZ=UTC SLURM_TIME_FORMAT=standard sacct -a -X -P -S 2026-01-01 -E 2026-02-01 \
     --format=JobID,User,Account,Partition,Submit,Start,End,Elapsed,State,AllocTRES,ReqTRES";

/// Skip reasons, as they appear in [`Workload::skipped`].
pub const SKIP_STEP: &str =
    "sacct: job step (a JobID with `.`, such as 123.batch; export with -X to leave steps out)";
pub const SKIP_CPU_ONLY: &str =
    "sacct: CPU-only job (no gres/gpu in AllocTRES, or in ReqTRES for a job never allocated)";
pub const SKIP_NEVER_STARTED: &str =
    "sacct: never started (PENDING, cancelled before it started, or no Start or AllocTRES)";
pub const SKIP_RUNNING: &str = "sacct: still running (RUNNING, SUSPENDED, ... or no End yet)";

/// Column indices; `None` for an optional column the export left out.
struct Columns {
    job_id: usize,
    account: Option<usize>,
    user: Option<usize>,
    submit: usize,
    start: usize,
    end: usize,
    elapsed: Option<usize>,
    state: usize,
    alloc_tres: usize,
    req_tres: Option<usize>,
}

fn find(table: &Table<'_>, name: &str) -> Option<usize> {
    table.columns.iter().position(|c| c.eq_ignore_ascii_case(name))
}

fn required(table: &Table<'_>, name: &str) -> Result<usize, TraceError> {
    find(table, name).ok_or_else(|| TraceError::MissingColumn {
        file: table.file.clone(),
        line: table.header_line,
        column: name.to_string(),
        header: table.columns.join("|"),
    })
}

fn columns(table: &Table<'_>) -> Result<Columns, TraceError> {
    if table.columns.len() == 1 && find(table, "JobID").is_none() {
        return Err(TraceError::Row {
            file: table.file.clone(),
            line: table.header_line,
            message: "expected a `|`-separated header such as JobID|User|Account|...: \
                      export with sacct -P (--parsable2), not the fixed-width table"
                .to_string(),
        });
    }
    let job_id = required(table, "JobID")?;
    let (account, user) = (find(table, "Account"), find(table, "User"));
    if account.is_none() && user.is_none() {
        return Err(TraceError::MissingColumn {
            file: table.file.clone(),
            line: table.header_line,
            column: "Account".to_string(),
            header: format!(
                "{}; the tenant is Account, or User when there is no Account column",
                table.columns.join("|")
            ),
        });
    }
    Ok(Columns {
        job_id,
        account,
        user,
        submit: required(table, "Submit")?,
        start: required(table, "Start")?,
        end: required(table, "End")?,
        elapsed: find(table, "Elapsed"),
        state: required(table, "State")?,
        alloc_tres: required(table, "AllocTRES")?,
        req_tres: find(table, "ReqTRES"),
    })
}

/// Reads `sacct --parsable2` output (see [`SACCT_COMMAND`]).
///
/// One row per job allocation becomes a job: tenant = `Account` (else `User`),
/// GPUs = the `gres/gpu` count of `AllocTRES` (of `ReqTRES` when nothing was
/// allocated), arrival = `Submit`, run time (`work`, also the oracle estimate) =
/// `Elapsed`, or `End - Start` when there is no `Elapsed` column. Times are wall
/// clock in the zone sacct printed them in (`TZ`; no zone is written). Kept: jobs
/// that started and ended, whatever the end state (COMPLETED, FAILED, CANCELLED,
/// TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, ...: they held their GPUs).
/// Skipped, with counts: job steps, CPU-only jobs, jobs that never started, jobs
/// still running. Heterogeneous-job components (`123+0`) and array tasks
/// (`123_4`) are separate jobs. GPU types (`gres/gpu:a100`) are counted in the
/// notes, not modelled. CPUs and memory come from `AllocTRES` (`cpu`, `mem`).
pub fn read_sacct(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    parse_sacct(path, read_bytes(path)?, slice)
}

/// [`read_sacct`] on bytes already in memory (plain or gzip); `path` only names them.
pub fn parse_sacct(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    let file = path.display().to_string();
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, '|')?;
    let cols = columns(&table)?;
    let mut raw = Vec::new();
    let mut report = ReadReport::arrivals_in("Submit");
    let mut tally = Tally::default();
    for row in table.rows() {
        let row = row?;
        if let Some(job) = sacct_job(&row, &cols, &mut report, &mut tally)? {
            raw.push(job);
        }
    }
    let cpu_only = report.skipped.get(SKIP_CPU_ONLY).copied().unwrap_or(0);
    if raw.is_empty() && cpu_only > 0 && report.skipped.len() == 1 {
        return Err(TraceError::file(
            &file,
            format!(
                "none of the {cpu_only} jobs has a gres/gpu count in AllocTRES or ReqTRES; \
                 is gres/gpu in slurm.conf's AccountingStorageTRES?"
            ),
        ));
    }
    tally.notes(&cols, &mut report.notes);
    assemble(file, raw, slice, Clock::WallClock, report)
}

/// Counts behind the notes.
#[derive(Default)]
struct Tally {
    kept_by_state: BTreeMap<&'static str, u64>,
    gpu_types: BTreeMap<String, u64>,
    user_as_tenant: u64,
    heterogeneous: u64,
}

impl Tally {
    fn notes(&self, cols: &Columns, notes: &mut Vec<String>) {
        if !self.kept_by_state.is_empty() {
            let states: Vec<String> = self.kept_by_state.iter().map(|(s, n)| format!("{s} {n}")).collect();
            notes.push(format!("sacct: kept jobs by final state: {}", states.join(", ")));
        }
        notes.push(match cols.elapsed {
            Some(_) => "sacct: run time = Elapsed".to_string(),
            None => "sacct: run time = End - Start (no Elapsed column)".to_string(),
        });
        if cols.account.is_none() {
            notes.push("sacct: tenants are users (no Account column)".to_string());
        } else if self.user_as_tenant > 0 {
            notes.push(format!(
                "sacct: {} jobs with an empty Account use their User as tenant",
                self.user_as_tenant
            ));
        }
        if !self.gpu_types.is_empty() {
            let types: Vec<String> = self.gpu_types.iter().map(|(t, n)| format!("{t} {n}")).collect();
            notes.push(format!(
                "sacct: GPU types in TRES (jobs) are not modelled, any GPU serves: {}",
                types.join(", ")
            ));
        }
        if self.heterogeneous > 0 {
            notes.push(format!(
                "sacct: {} heterogeneous-job components (123+0) run as separate jobs",
                self.heterogeneous
            ));
        }
    }
}

/// What sacct's `State` says about whether a job ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not started yet (or waiting to be started again).
    Waiting,
    /// Holding its allocation now.
    Active,
    /// Ended, by any cause.
    Ended,
}

/// Slurm job states (sacct(1), "JOB STATE CODES") and what each means here.
const STATES: &[(&str, Phase)] = &[
    ("PENDING", Phase::Waiting),
    ("REQUEUE_HOLD", Phase::Waiting),
    ("REQUEUE_FED", Phase::Waiting),
    ("RUNNING", Phase::Active),
    ("SUSPENDED", Phase::Active),
    ("RESIZING", Phase::Active),
    ("COMPLETING", Phase::Active),
    ("CONFIGURING", Phase::Active),
    ("SIGNALING", Phase::Active),
    ("STAGE_OUT", Phase::Active),
    ("STOPPED", Phase::Active),
    ("COMPLETED", Phase::Ended),
    ("FAILED", Phase::Ended),
    ("CANCELLED", Phase::Ended),
    ("TIMEOUT", Phase::Ended),
    ("NODE_FAIL", Phase::Ended),
    ("OUT_OF_MEMORY", Phase::Ended),
    ("PREEMPTED", Phase::Ended),
    ("BOOT_FAIL", Phase::Ended),
    ("DEADLINE", Phase::Ended),
    ("REVOKED", Phase::Ended),
    ("REQUEUED", Phase::Ended),
    ("SPECIAL_EXIT", Phase::Ended),
];

/// `CANCELLED by 1234` -> (`CANCELLED`, Ended); a trailing `+` (sacct's
/// truncation mark) is dropped.
fn state(row: &Row<'_>, column: usize) -> Result<(&'static str, Phase), TraceError> {
    let text = row.str(column);
    let word = text.split_whitespace().next().unwrap_or("");
    let word = word.strip_suffix('+').unwrap_or(word);
    STATES.iter().find(|(name, _)| name.eq_ignore_ascii_case(word)).copied().ok_or_else(|| {
        let known: Vec<&str> = STATES.iter().map(|(name, _)| *name).collect();
        row.error(column, format!("unknown job state {text:?}; known states: {}", known.join(", ")))
    })
}

/// The resources of one TRES string (`billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1`).
#[derive(Clone, Debug, Default, PartialEq)]
struct Tres {
    /// Nothing listed (an empty field): no allocation.
    empty: bool,
    gpus: u32,
    /// GPU types named (`gres/gpu:a100=4`), in order.
    gpu_types: Vec<String>,
    cpus: u32,
    memory_gib: u32,
}

fn tres(row: &Row<'_>, column: usize) -> Result<Tres, TraceError> {
    let text = row.str(column);
    let mut out = Tres { empty: text.is_empty(), ..Tres::default() };
    let (mut total, mut typed): (Option<u64>, u64) = (None, 0);
    for item in text.split(',').filter(|s| !s.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(
                row.error(column, format!("expected NAME=VALUE items such as gres/gpu=4, got {item:?}"))
            );
        };
        let count = || {
            value.parse::<u64>().map_err(|_| {
                row.error(column, format!("expected a whole number of {key}, got {value:?} in {item:?}"))
            })
        };
        match key {
            "gres/gpu" => total = Some(count()?),
            "cpu" => out.cpus = u32::try_from(count()?).unwrap_or(u32::MAX),
            "mem" => {
                out.memory_gib = memory_gib(value).ok_or_else(|| {
                    row.error(
                        column,
                        format!("expected a memory size such as 64G or 4000M, got {value:?} in {item:?}"),
                    )
                })?
            }
            _ => {
                if let Some(kind) = key.strip_prefix("gres/gpu:") {
                    typed = typed.saturating_add(count()?);
                    if !out.gpu_types.iter().any(|t| t == kind) {
                        out.gpu_types.push(kind.to_string());
                    }
                }
            }
        }
    }
    // Slurm lists the untyped total when it tracks it; a cluster that tracks only
    // typed GPUs (AccountingStorageTRES=gres/gpu:a100) lists the types alone.
    let gpus = total.unwrap_or(typed);
    if gpus > u64::from(MAX_GPUS_PER_JOB) {
        return Err(row.error(
            column,
            format!("{gpus} GPUs exceeds the limit of {MAX_GPUS_PER_JOB} GPUs per job (core::limits::MAX_GPUS_PER_JOB)"),
        ));
    }
    out.gpus = gpus as u32;
    Ok(out)
}

/// `64G` / `4000M` / `1.50T` / `512K` / `1024` (MiB, Slurm's default unit) in GiB, rounded up.
fn memory_gib(value: &str) -> Option<u32> {
    let (number, mib_per_unit) = match value.as_bytes().last()? {
        b'K' | b'k' => (&value[..value.len() - 1], 1.0 / 1024.0),
        b'M' | b'm' => (&value[..value.len() - 1], 1.0),
        b'G' | b'g' => (&value[..value.len() - 1], 1024.0),
        b'T' | b't' => (&value[..value.len() - 1], 1024.0 * 1024.0),
        b'P' | b'p' => (&value[..value.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (value, 1.0),
    };
    let amount: f64 = number.parse().ok()?;
    if !(amount.is_finite() && amount >= 0.0) {
        return None;
    }
    Some((amount * mib_per_unit / 1024.0).ceil().min(f64::from(u32::MAX)) as u32)
}

/// A time column: `None` for `Unknown`, `None` or an empty field (not started,
/// not ended), else a `YYYY-MM-DDTHH:MM:SS` wall-clock time.
fn time(row: &Row<'_>, column: usize) -> Result<Option<i64>, TraceError> {
    match row.str(column) {
        "" | "Unknown" | "None" => Ok(None),
        _ => wall_clock_field(row, column).map(Some),
    }
}

/// `Elapsed`: `[DD-]HH:MM:SS[.fraction]` (also `MM:SS`), in seconds.
fn elapsed_secs(row: &Row<'_>, column: usize) -> Result<f64, TraceError> {
    let text = row.str(column);
    let bad = || row.error(column, format!("expected an elapsed time [DD-]HH:MM:SS, got {text:?}"));
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().map_err(|_| bad())?, rest),
        None => (0, text),
    };
    let (clock, fraction) = match clock.split_once('.') {
        Some((c, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => (c, f),
        Some(_) => return Err(bad()),
        None => (clock, ""),
    };
    let parts: Vec<&str> = clock.split(':').collect();
    let numbers: Vec<u64> = parts
        .iter()
        .map(|p| if p.len() == 2 || (p.len() == 1 && parts.len() > 1) { p.parse().ok() } else { None })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let (hours, minutes, seconds) = match numbers[..] {
        [h, m, s] => (h, m, s),
        [m, s] if days == 0 => (0, m, s),
        _ => return Err(bad()),
    };
    if hours >= 24 || minutes >= 60 || seconds >= 60 {
        return Err(bad());
    }
    let fraction =
        if fraction.is_empty() { 0.0 } else { format!("0.{fraction}").parse::<f64>().unwrap_or(0.0) };
    // In floating point: a huge day count must not overflow before the limit check.
    let secs = days as f64 * 86_400.0 + ((hours * 60 + minutes) * 60 + seconds) as f64 + fraction;
    if secs > MAX_JOB_DURATION.as_secs_f64() {
        return Err(row.error(
            column,
            format!(
                "{text} ({secs} s) exceeds the limit of {} (core::limits::MAX_JOB_DURATION)",
                describe_span(MAX_JOB_DURATION)
            ),
        ));
    }
    Ok(secs)
}

/// Checks a JobID's shape: `123`, `123_4`, `123_[5-9%2]`, `123+0`, with an
/// optional step suffix (`.batch`, `.extern`, `.0`).
fn job_id<'a>(row: &Row<'a>, column: usize) -> Result<&'a str, TraceError> {
    let id = row.str(column);
    if !id.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(row.error(
            column,
            format!("expected a Slurm job id such as 123, 123_4, 123+0 or 123.batch, got {id:?}"),
        ));
    }
    Ok(id)
}

fn sacct_job(
    row: &Row<'_>,
    c: &Columns,
    report: &mut ReadReport,
    tally: &mut Tally,
) -> Result<Option<RawJob>, TraceError> {
    let id = job_id(row, c.job_id)?;
    if id.contains('.') {
        report.skip(SKIP_STEP);
        return Ok(None);
    }
    let (state_name, phase) = state(row, c.state)?;
    let alloc = tres(row, c.alloc_tres)?;
    let request = c.req_tres.map(|column| tres(row, column)).transpose()?;
    let submit = time(row, c.submit)?;
    let (start, end) = (time(row, c.start)?, time(row, c.end)?);
    let elapsed = c.elapsed.map(|column| elapsed_secs(row, column)).transpose()?;
    let used = if alloc.empty { request.unwrap_or_default() } else { alloc.clone() };
    if used.gpus == 0 {
        report.skip(SKIP_CPU_ONLY);
        return Ok(None);
    }
    let Some(submit) = submit else {
        return Err(row.error(c.submit, "expected the time the job was submitted, got no time"));
    };
    let (Some(start), false) = (start, phase == Phase::Waiting || alloc.empty) else {
        report.skip(SKIP_NEVER_STARTED);
        return Ok(None);
    };
    let (Some(end), false) = (end, phase == Phase::Active) else {
        report.skip(SKIP_RUNNING);
        return Ok(None);
    };
    if start < submit {
        return Err(
            row.error(c.start, format!("the job started before it was submitted ({})", row.str(c.submit)))
        );
    }
    if end < start {
        return Err(row.error(c.end, format!("the job ended before it started ({})", row.str(c.start))));
    }
    let duration_secs = match elapsed {
        Some(secs) => secs,
        None => {
            let secs = (end - start) as f64 / 1e6;
            if secs > MAX_JOB_DURATION.as_secs_f64() {
                return Err(row.error(
                    c.end,
                    format!(
                        "run time End - Start = {}",
                        exceeds_secs(&secs.to_string(), MAX_JOB_DURATION, "MAX_JOB_DURATION")
                    ),
                ));
            }
            secs
        }
    };
    let tenant = tenant(row, c, tally)?;
    let mut job = RawJob::new(submit, row.line, tenant, alloc.gpus, duration_secs);
    job.duration_estimate = Some(Span::from_secs_f64_ceil(duration_secs));
    job.cpus = alloc.cpus;
    job.memory_gib = alloc.memory_gib;
    job.status = Some(state_name.to_string());
    *tally.kept_by_state.entry(state_name).or_insert(0) += 1;
    for kind in &alloc.gpu_types {
        *tally.gpu_types.entry(kind.clone()).or_insert(0) += 1;
    }
    if id.contains('+') {
        tally.heterogeneous += 1;
    }
    Ok(Some(job))
}

/// `Account`, or `User` when there is no Account column or it is empty.
fn tenant<'a>(row: &Row<'a>, c: &Columns, tally: &mut Tally) -> Result<&'a str, TraceError> {
    if let Some(account) = c.account.map(|column| row.str(column)).filter(|a| !a.is_empty()) {
        return Ok(account);
    }
    match c.user.map(|column| row.str(column)).filter(|u| !u.is_empty()) {
        Some(user) => {
            if c.account.is_some() {
                tally.user_as_tenant += 1;
            }
            Ok(user)
        }
        None => Err(row.error(
            c.account.or(c.user).unwrap_or(0),
            "expected an account or a user name, got an empty field",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "JobID|JobName|User|Account|Partition|Submit|Start|End|Elapsed|State|ExitCode|AllocTRES|ReqTRES|NNodes\n";

    fn parse(body: &str) -> Result<Workload, TraceError> {
        parse_sacct(Path::new("sacct.txt"), format!("{HEADER}{body}").into_bytes(), &Slice::all())
    }

    fn skipped(w: &Workload, reason: &str) -> u64 {
        w.skipped.iter().find(|s| s.reason == reason).map_or(0, |s| s.rows)
    }

    #[test]
    fn maps_times_gpus_and_tenants() {
        let w = parse(
            "101|train|ana|vision|gpu|2026-01-05T09:00:00|2026-01-05T09:10:00|2026-01-05T11:10:30|02:00:30|COMPLETED|0:0|billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|1\n\
             102|eval|bo||gpu|2026-01-05T08:59:00|2026-01-05T09:00:00|2026-01-06T10:00:00|1-01:00:00|CANCELLED by 1001|0:15|cpu=2,gres/gpu=1,mem=1500M,node=1|cpu=2,gres/gpu=1,mem=1500M,node=1|1\n",
        )
        .unwrap();
        assert_eq!(w.lines, [3, 2], "sorted by Submit");
        let names: Vec<&str> = w.tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["bo", "vision"], "an empty Account falls back to User");
        let (first, second) = (&w.jobs[0], &w.jobs[1]);
        assert_eq!((first.gpus, first.work, first.arrival.0), (1, 25.0 * 3600.0, 0));
        assert_eq!((first.cpus, first.memory_gib), (2, 2), "1500M rounds up to 2 GiB");
        assert_eq!((second.gpus, second.work, second.arrival.0), (4, 7230.0, 60_000_000));
        assert_eq!((second.cpus, second.memory_gib), (8, 64));
        assert_eq!(second.duration_estimate, Some(Span::from_secs(7230)));
        assert!(
            w.notes.contains(&"sacct: kept jobs by final state: CANCELLED 1, COMPLETED 1".to_string()),
            "{:?}",
            w.notes
        );
        assert!(w.notes.iter().any(|n| n.contains("a100 1")), "{:?}", w.notes);
        assert!(w.notes.iter().any(|n| n.contains("1 jobs with an empty Account")), "{:?}", w.notes);
        assert!(w.notes.iter().any(|n| n == "time 0 is 2026-01-05 08:59:00"), "{:?}", w.notes);
    }

    #[test]
    fn every_skip_reason_is_counted() {
        let w = parse(
            "1|a|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|01:00:00|COMPLETED|0:0|cpu=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1,node=1|1\n\
             1.batch|batch|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|01:00:00|COMPLETED|0:0|cpu=1,gres/gpu=1,node=1||1\n\
             1.extern|extern|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|01:00:00|COMPLETED|0:0|cpu=1,gres/gpu=1,node=1||1\n\
             2|cpu|u|acct|cpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|01:00:00|COMPLETED|0:0|cpu=4,mem=8G,node=1|cpu=4,mem=8G,node=1|1\n\
             3|wait|u|acct|gpu|2026-01-05T09:00:00|Unknown|Unknown|00:00:00|PENDING|0:0||cpu=1,gres/gpu=8,node=1|1\n\
             4_[1-5%2]|arr|u|acct|gpu|2026-01-05T09:00:00|None|None|00:00:00|PENDING|0:0||cpu=1,gres/gpu=2,node=1|1\n\
             5|gone|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:30:00|2026-01-05T09:30:00|00:00:00|CANCELLED by 0|0:0||cpu=1,gres/gpu=2,node=1|1\n\
             6|run|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|Unknown|05:00:00|RUNNING|0:0|cpu=1,gres/gpu=2,node=1|cpu=1,gres/gpu=2,node=1|1\n\
             7|cpuwait|u|acct|cpu|2026-01-05T09:00:00|Unknown|Unknown|00:00:00|PENDING|0:0||cpu=1,node=1|1\n",
        )
        .unwrap();
        assert_eq!(w.jobs.len(), 1);
        assert_eq!(skipped(&w, SKIP_STEP), 2);
        assert_eq!(skipped(&w, SKIP_CPU_ONLY), 2, "a pending CPU job is CPU-only by its ReqTRES");
        assert_eq!(skipped(&w, SKIP_NEVER_STARTED), 3);
        assert_eq!(skipped(&w, SKIP_RUNNING), 1);
    }

    #[test]
    fn typed_gpus_only_arrays_and_heterogeneous_jobs() {
        let w = parse(
            "9_3|a|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T09:01:00|01:00|TIMEOUT|0:0|gres/gpu:v100=2,gres/gpu:a100=1|gres/gpu=3|1\n\
             10+0|h|u|acct|gpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T09:01:00|00:01:00.5|NODE_FAIL|0:0|gres/gpu=8|gres/gpu=8|1\n",
        )
        .unwrap();
        assert_eq!(w.jobs.iter().map(|j| j.gpus).collect::<Vec<_>>(), [3, 8]);
        assert_eq!(w.jobs[1].work, 60.5);
        assert!(w.notes.iter().any(|n| n.contains("a100 1, v100 1")), "{:?}", w.notes);
        assert!(w.notes.iter().any(|n| n.contains("1 heterogeneous-job components")), "{:?}", w.notes);
    }

    #[test]
    fn columns_by_name_in_any_order_with_a_trailing_bar_and_no_elapsed() {
        let text = "State|End|Start|Submit|User|AllocTRES|JobID|Comment|\n\
                    COMPLETED|2026-01-05T12:00:00|2026-01-05T10:00:00|2026-01-05T09:00:00|ana|gres/gpu=2|7|x|\n";
        let w = parse_sacct(Path::new("p.txt"), text.as_bytes().to_vec(), &Slice::all()).unwrap();
        assert_eq!((w.jobs[0].gpus, w.jobs[0].work), (2, 7200.0));
        assert_eq!(w.tenants[0].name, "ana");
        assert!(w.notes.iter().any(|n| n == "sacct: tenants are users (no Account column)"), "{:?}", w.notes);
        assert!(
            w.notes.iter().any(|n| n == "sacct: run time = End - Start (no Elapsed column)"),
            "{:?}",
            w.notes
        );
    }

    #[test]
    fn malformed_rows_name_file_line_and_field() {
        let row = |submit: &str, elapsed: &str, state: &str, alloc: &str| {
            format!("1|a|u|acct|gpu|{submit}|2026-01-05T09:00:00|2026-01-05T10:00:00|{elapsed}|{state}|0:0|{alloc}||1\n")
        };
        let cases = [
            (
                row("2026-13-05T09:00:00", "01:00:00", "COMPLETED", "gres/gpu=1"),
                "field Submit: expected a date",
            ),
            (
                row("2026-01-05T09:00:00", "1:0:0:0", "COMPLETED", "gres/gpu=1"),
                "field Elapsed: expected an elapsed time",
            ),
            (
                row("2026-01-05T09:00:00", "01:00:00", "DONE", "gres/gpu=1"),
                "field State: unknown job state \"DONE\"",
            ),
            (
                row("2026-01-05T09:00:00", "01:00:00", "COMPLETED", "gres/gpu=four"),
                "field AllocTRES: expected a whole number of gres/gpu",
            ),
            (
                row("2026-01-05T09:00:00", "01:00:00", "COMPLETED", "gres/gpu"),
                "field AllocTRES: expected NAME=VALUE",
            ),
            (row("2026-01-05T09:00:00", "01:00:00", "COMPLETED", "gres/gpu=1048577"), "MAX_GPUS_PER_JOB"),
            (
                row("2026-01-05T09:00:00", "367-00:00:00", "COMPLETED", "gres/gpu=1"),
                "field Elapsed: 367-00:00:00 (31708800 s) exceeds the limit of 366 days",
            ),
            (
                row("2026-01-05T11:00:00", "01:00:00", "COMPLETED", "gres/gpu=1"),
                "field Start: the job started before it was submitted",
            ),
            (row("Unknown", "01:00:00", "COMPLETED", "gres/gpu=1"), "field Submit: expected the time"),
            (row("1989-01-05T09:00:00", "01:00:00", "COMPLETED", "gres/gpu=1"), "MIN_UNIX_SECONDS"),
        ];
        for (body, expected) in cases {
            let err = parse(&body).unwrap_err().to_string();
            assert!(err.starts_with("sacct.txt line 2, "), "{err}");
            assert!(err.contains(expected), "{body}: {err}");
        }
        let err = parse_sacct(
            Path::new("s.txt"),
            b"JobID|Submit|Start|End|State|Account\n".to_vec(),
            &Slice::all(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("s.txt line 1: missing column `AllocTRES`"), "{err}");
        let err = parse("x1|a|u|acct|gpu|||||COMPLETED|0:0|||1\n").unwrap_err().to_string();
        assert!(err.contains("field JobID"), "{err}");
        let table = "JobID    JobName  User\n------- -------- ----\n123      train    ana\n";
        let err = parse_sacct(Path::new("t.txt"), table.as_bytes().to_vec(), &Slice::all())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.txt line 1: expected a `|`-separated header"), "{err}");
        let err = parse("1|a|u\n").unwrap_err().to_string();
        assert!(err.starts_with("sacct.txt line 2: expected 14 fields"), "{err}");
    }

    #[test]
    fn only_cpu_jobs_is_an_error_with_a_hint() {
        let err = parse("2|cpu|u|acct|cpu|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|01:00:00|COMPLETED|0:0|cpu=4,node=1|cpu=4|1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("AccountingStorageTRES"), "{err}");
    }

    #[test]
    fn the_sample_reads_the_same_without_its_steps() {
        let sample = include_str!("../../../docs/examples/sacct-sample.txt");
        let is_step = |line: &str| line.split('|').next().is_some_and(|id| id.contains('.'));
        let allocations: String = sample.lines().filter(|l| !is_step(l)).map(|l| format!("{l}\n")).collect();
        assert_eq!(sample.lines().count() - allocations.lines().count(), 6);
        let with_steps = parse_sacct(Path::new("a.txt"), sample.as_bytes().to_vec(), &Slice::all()).unwrap();
        let without = parse_sacct(Path::new("x.txt"), allocations.into_bytes(), &Slice::all()).unwrap();
        assert_eq!(with_steps.jobs.len(), 32);
        assert_eq!(with_steps.jobs, without.jobs, "what -X leaves out is exactly what is skipped");
        assert_eq!(skipped(&with_steps, SKIP_STEP), 6);
        assert_eq!(skipped(&without, SKIP_STEP), 0);
    }

    #[test]
    fn memory_units() {
        assert_eq!(memory_gib("64G"), Some(64));
        assert_eq!(memory_gib("1.50T"), Some(1536));
        assert_eq!(memory_gib("4000M"), Some(4));
        assert_eq!(memory_gib("2048"), Some(2));
        assert_eq!(memory_gib("512K"), Some(1));
        assert_eq!(memory_gib("xG"), None);
        assert_eq!(memory_gib(""), None);
    }
}
