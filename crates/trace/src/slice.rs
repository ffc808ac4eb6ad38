//! Cutting a trace down: a time window and/or the first N jobs, then turning the
//! surviving rows into a [`Workload`] whose invariants hold.

use std::collections::BTreeMap;
use std::sync::Arc;

use cotenant_core::{JobId, JobKind, JobSpec, Span, TenantId, TenantSpec, Time};

use cotenant_core::limits::{MAX_ARRIVAL_SPAN, MAX_UNIX_SECONDS, MIN_UNIX_SECONDS};

use crate::error::TraceError;
use crate::text::describe_span;
use crate::wallclock::{format_wall_clock, parse_wall_clock_us};
use crate::{SkipCount, Workload};

/// One end of a time window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SliceBound {
    /// A wall-clock instant, microseconds since 1970-01-01 in the trace's own zone
    /// (for traces with wall-clock timestamps: Philly).
    WallClock(i64),
    /// Microseconds since the start of the trace's clock (every other trace).
    Relative(i64),
}

impl SliceBound {
    /// `2017-11-06`, `2017-11-06 12:00:00` (wall clock) or `3600` / `3600.5` (seconds).
    pub fn parse(text: &str) -> Result<SliceBound, TraceError> {
        let text = text.trim();
        if let Ok(secs) = text.parse::<f64>() {
            if secs.is_finite() && secs >= 0.0 {
                return Ok(SliceBound::Relative(crate::text::secs_to_us(secs)));
            }
            return Err(TraceError::Slice {
                message: format!("bound {text:?} must be a non-negative number of seconds"),
            });
        }
        parse_wall_clock_us(text).map(SliceBound::WallClock).map_err(|reason| TraceError::Slice {
            message: format!("bound {text:?} is neither seconds nor a wall-clock time: {reason}"),
        })
    }
}

/// Which jobs of a trace to keep: those arriving in `[start, end)`, then at most
/// the first `max_jobs` of them in arrival order. Arrivals are rebased to `start`
/// when given, else to the first kept arrival.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slice {
    pub start: Option<SliceBound>,
    pub end: Option<SliceBound>,
    pub max_jobs: Option<usize>,
}

impl Slice {
    /// The whole trace.
    pub fn all() -> Slice {
        Slice::default()
    }

    /// The first `n` jobs.
    pub fn first_jobs(n: usize) -> Slice {
        Slice { max_jobs: Some(n), ..Slice::default() }
    }

    /// Parses optional start and end bounds (see [`SliceBound::parse`]).
    pub fn window(
        start: Option<&str>,
        end: Option<&str>,
        max_jobs: Option<usize>,
    ) -> Result<Slice, TraceError> {
        let slice = Slice {
            start: start.map(SliceBound::parse).transpose()?,
            end: end.map(SliceBound::parse).transpose()?,
            max_jobs,
        };
        if let (Some(a), Some(b)) = (slice.start, slice.end) {
            let ordered = match (a, b) {
                (SliceBound::WallClock(a), SliceBound::WallClock(b))
                | (SliceBound::Relative(a), SliceBound::Relative(b)) => a < b,
                _ => {
                    return Err(TraceError::Slice {
                        message: "start and end must both be wall-clock times or both seconds".into(),
                    })
                }
            };
            if !ordered {
                return Err(TraceError::Slice {
                    message: format!(
                        "the time window is empty or reversed: its start {} is not before its end {}",
                        describe_bound(a),
                        describe_bound(b)
                    ),
                });
            }
        }
        Ok(slice)
    }

    /// The default demo slice: Philly's week from 2017-11-06 (inclusive) to
    /// 2017-11-13 (exclusive), 6,391 jobs from 11 VCs.
    pub fn philly_default_week() -> Slice {
        Slice {
            start: Some(SliceBound::WallClock(PHILLY_WEEK_START_US)),
            end: Some(SliceBound::WallClock(PHILLY_WEEK_END_US)),
            max_jobs: None,
        }
    }
}

/// 2017-11-06 00:00:00 and 2017-11-13 00:00:00, microseconds since 1970.
const PHILLY_WEEK_START_US: i64 = 1_509_926_400_000_000;
const PHILLY_WEEK_END_US: i64 = 1_510_531_200_000_000;

/// Whether a trace's timestamps are wall-clock or relative seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    WallClock,
    Relative,
}

/// A row that became a job, before slicing and id assignment.
#[derive(Clone, Debug)]
pub(crate) struct RawJob {
    /// Arrival on the trace's own clock, microseconds.
    pub arrival_us: i64,
    pub line: u64,
    /// Shared: a reader whose rows all name one tenant hands each the same name.
    pub tenant: Arc<str>,
    pub gpus: u32,
    pub work: f64,
    pub duration_estimate: Option<Span>,
    pub priority: i32,
    /// Shared: a reader may hand rows of one job type the same name.
    pub job_type: Option<Arc<str>>,
    pub cpus: u32,
    pub memory_gib: u32,
    /// The final status the trace records (sacct `State`, kubectl phase or condition), if any.
    pub status: Option<String>,
}

impl RawJob {
    pub fn new(arrival_us: i64, line: u64, tenant: &str, gpus: u32, work: f64) -> RawJob {
        RawJob::shared(arrival_us, line, Arc::from(tenant), gpus, work)
    }

    /// [`RawJob::new`] with a tenant name already shared.
    pub fn shared(arrival_us: i64, line: u64, tenant: Arc<str>, gpus: u32, work: f64) -> RawJob {
        RawJob {
            arrival_us,
            line,
            tenant,
            gpus,
            work,
            duration_estimate: None,
            priority: 0,
            job_type: None,
            cpus: 0,
            memory_gib: 0,
            status: None,
        }
    }
}

/// What a reader hands to [`assemble`] besides its jobs.
#[derive(Debug, Default)]
pub(crate) struct ReadReport {
    pub skipped: BTreeMap<String, u64>,
    pub notes: Vec<String>,
    /// The field arrivals come from, for errors about the trace's arrival span.
    pub arrival_field: &'static str,
}

impl ReadReport {
    pub fn arrivals_in(field: &'static str) -> ReadReport {
        ReadReport { arrival_field: field, ..ReadReport::default() }
    }

    pub fn skip(&mut self, reason: &str) {
        *self.skipped.entry(reason.to_string()).or_insert(0) += 1;
    }
}

fn bound_us(bound: SliceBound, clock: Clock) -> Result<i64, TraceError> {
    match (bound, clock) {
        (SliceBound::WallClock(us), Clock::WallClock) | (SliceBound::Relative(us), Clock::Relative) => Ok(us),
        (SliceBound::Relative(_), Clock::WallClock) => Err(TraceError::Slice {
            message: "this trace has wall-clock timestamps: give the window as dates such as 2017-11-06 or \"2017-11-06 12:00:00\"".into(),
        }),
        (SliceBound::WallClock(_), Clock::Relative) => Err(TraceError::Slice {
            message: "this trace has relative timestamps: give the window in seconds from the trace start".into(),
        }),
    }
}

/// Fails fast, before the file is read, when the slice's bounds do not fit the
/// trace's clock, lie outside the documented limits, or make an empty window.
pub(crate) fn check_clock(slice: &Slice, clock: Clock) -> Result<(), TraceError> {
    for bound in [slice.start, slice.end].into_iter().flatten() {
        bound_us(bound, clock)?;
        check_bound_limits(bound)?;
    }
    if let (Some(start), Some(end)) = (slice.start, slice.end) {
        let (a, b) = (bound_us(start, clock)?, bound_us(end, clock)?);
        if a >= b {
            let what = if a == b { "empty" } else { "reversed" };
            return Err(TraceError::Slice {
                message: format!(
                    "the time window is {what}: its start (--from) {} is not before its end (--to) {}; \
                     no job can arrive in [start, end)",
                    describe_bound(start),
                    describe_bound(end)
                ),
            });
        }
    }
    Ok(())
}

/// A bound as the user would write it: a date and time, or seconds.
pub(crate) fn describe_bound(bound: SliceBound) -> String {
    match bound {
        SliceBound::WallClock(us) => format_wall_clock(us),
        SliceBound::Relative(us) => format!("{} s", us as f64 / 1e6),
    }
}

/// A wall-clock bound within [`MIN_UNIX_SECONDS`, `MAX_UNIX_SECONDS`]; a relative
/// bound at most [`MAX_ARRIVAL_SPAN`] from the trace's time 0.
fn check_bound_limits(bound: SliceBound) -> Result<(), TraceError> {
    match bound {
        SliceBound::WallClock(us) => {
            let secs = us.div_euclid(1_000_000);
            if !(MIN_UNIX_SECONDS..=MAX_UNIX_SECONDS).contains(&secs) {
                return Err(TraceError::Slice {
                    message: format!(
                        "bound {} is outside the accepted range {} to {} (core::limits::MIN_UNIX_SECONDS, MAX_UNIX_SECONDS)",
                        format_wall_clock(us),
                        format_wall_clock(MIN_UNIX_SECONDS * 1_000_000),
                        format_wall_clock(MAX_UNIX_SECONDS * 1_000_000)
                    ),
                });
            }
        }
        SliceBound::Relative(us) => {
            if u64::try_from(us).is_ok_and(|us| us > MAX_ARRIVAL_SPAN.0) {
                return Err(TraceError::Slice {
                    message: format!(
                        "bound {} exceeds the limit of {} from the trace's time 0 (core::limits::MAX_ARRIVAL_SPAN)",
                        describe_bound(bound),
                        describe_span(MAX_ARRIVAL_SPAN)
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Rejects a trace whose arrivals (sorted) span more than [`MAX_ARRIVAL_SPAN`],
/// naming the row farthest from the median arrival (the likeliest typo).
fn check_arrival_span(
    file: &str,
    keys: &[(i64, usize)],
    raw: &[RawJob],
    field: &str,
) -> Result<(), TraceError> {
    let (Some(&(first, first_at)), Some(&(last, last_at))) = (keys.first(), keys.last()) else {
        return Ok(());
    };
    let span = i128::from(last) - i128::from(first);
    if span <= i128::from(MAX_ARRIVAL_SPAN.0) {
        return Ok(());
    }
    let median = i128::from(keys[keys.len() / 2].0);
    let (far, far_us) = if i128::from(last) - median >= median - i128::from(first) {
        (&raw[last_at], last)
    } else {
        (&raw[first_at], first)
    };
    Err(TraceError::Field {
        file: file.to_string(),
        line: far.line,
        field: if field.is_empty() { "arrival".to_string() } else { field.to_string() },
        message: format!(
            "the trace's arrivals span {:.0} days, more than the limit of {} (core::limits::MAX_ARRIVAL_SPAN); \
             this row is the farthest from the median arrival ({:.0} days away)",
            span as f64 / 86_400e6,
            describe_span(MAX_ARRIVAL_SPAN),
            (i128::from(far_us) - median).abs() as f64 / 86_400e6
        ),
    })
}

/// Sorts (stable: ties keep file order), slices, rebases and numbers the jobs.
/// Tenants are the distinct tenant names of the kept jobs, sorted by name.
pub(crate) fn assemble(
    source: String,
    raw: Vec<RawJob>,
    slice: &Slice,
    clock: Clock,
    mut report: ReadReport,
) -> Result<Workload, TraceError> {
    // Sort, check and slice (arrival, file position) keys; move only the kept jobs.
    let mut keys: Vec<(i64, usize)> = raw.iter().enumerate().map(|(i, j)| (j.arrival_us, i)).collect();
    sort_keys(&mut keys);
    check_arrival_span(&source, &keys, &raw, report.arrival_field)?;
    let start = slice.start.map(|b| bound_us(b, clock)).transpose()?;
    let end = slice.end.map(|b| bound_us(b, clock)).transpose()?;
    let total = keys.len();
    keys.retain(|&(at, _)| start.is_none_or(|s| at >= s) && end.is_none_or(|e| at < e));
    if keys.len() < total {
        report.notes.push(format!("time window kept {} of {} jobs", keys.len(), total));
    }
    if let Some(max) = slice.max_jobs {
        if keys.len() > max {
            report.notes.push(format!("job limit kept the first {max} of {} jobs", keys.len()));
            keys.truncate(max);
        }
    }
    let raw = in_key_order(raw, &keys);
    let epoch_us = start.or(raw.first().map(|j| j.arrival_us)).unwrap_or(0);
    if clock == Clock::WallClock {
        report.notes.push(format!("time 0 is {}", format_wall_clock(epoch_us)));
    }
    let mut workload = number_jobs(source, raw, epoch_us, report);
    workload.wall_clock_origin_us = (clock == Clock::WallClock).then_some(epoch_us);
    Ok(workload)
}

/// Sorts (arrival, file position) pairs given in file position order, as
/// `sort_unstable` would (the positions are distinct, so the order is unique):
/// a stable radix sort on the arrival's offset from the earliest, 11 bits a
/// pass, as many passes as the span needs (four for a few months in
/// microseconds), instead of O(n log n) comparisons. Small inputs and inputs
/// already in order take the plain path (`radix_sort_is_the_plain_sort`).
fn sort_keys(keys: &mut Vec<(i64, usize)>) {
    const BITS: u32 = 11;
    if keys.len() < 1024 || keys.is_sorted() {
        keys.sort_unstable();
        return;
    }
    debug_assert!(keys.windows(2).all(|w| w[0].1 < w[1].1), "keys come in file position order");
    let min = keys.iter().map(|k| k.0).min().expect("not empty");
    let span = keys.iter().map(|k| k.0.abs_diff(min)).max().expect("not empty");
    let passes = (u64::BITS - span.leading_zeros()).div_ceil(BITS);
    let mut from = std::mem::take(keys);
    let mut to = Vec::with_capacity(from.len());
    for pass in 0..passes {
        let shift = pass * BITS;
        let digit = |k: &(i64, usize)| (k.0.abs_diff(min) >> shift) as usize & ((1 << BITS) - 1);
        let mut starts = vec![0usize; 1 << BITS];
        for k in &from {
            starts[digit(k)] += 1;
        }
        let mut sum = 0;
        for count in &mut starts {
            (*count, sum) = (sum, sum + *count);
        }
        to.clear();
        to.resize(from.len(), (0, 0));
        for k in &from {
            let d = digit(k);
            to[starts[d]] = *k;
            starts[d] += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    *keys = from;
}

/// The jobs that `keys` (sorted (arrival, file position) pairs) name, in that order.
fn in_key_order(raw: Vec<RawJob>, keys: &[(i64, usize)]) -> Vec<RawJob> {
    // Every job, already in key order (a trace sorted by arrival): as it is.
    if keys.len() == raw.len() && keys.iter().enumerate().all(|(i, &(_, at))| at == i) {
        return raw;
    }
    let mut rank = vec![u32::MAX; raw.len()];
    for (r, &(_, i)) in keys.iter().enumerate() {
        rank[i] = r as u32;
    }
    // Each kept job moved once, straight to its place (no sort of whole jobs).
    let mut placed: Vec<Option<RawJob>> = std::iter::repeat_with(|| None).take(keys.len()).collect();
    for (job, r) in raw.into_iter().zip(rank) {
        if r != u32::MAX {
            placed[r as usize] = Some(job);
        }
    }
    placed.into_iter().map(|job| job.expect("keys name distinct jobs")).collect()
}

fn number_jobs(source: String, raw: Vec<RawJob>, epoch_us: i64, report: ReadReport) -> Workload {
    // Distinct names, sorted (a set of borrowed names: one copy per tenant, not per job).
    let tenant_names: Vec<String> = {
        // Inserted one by one: `collect` would gather and sort every job's name first.
        let mut names = std::collections::BTreeSet::new();
        for job in &raw {
            names.insert(&*job.tenant);
        }
        names.into_iter().map(str::to_string).collect()
    };
    let mut job_types: Vec<String> = Vec::new();
    let mut jobs = Vec::with_capacity(raw.len());
    let mut lines = Vec::with_capacity(raw.len());
    let has_status = raw.iter().any(|r| r.status.is_some());
    let mut statuses = Vec::with_capacity(if has_status { raw.len() } else { 0 });
    for (i, r) in raw.into_iter().enumerate() {
        if has_status {
            statuses.push(r.status.unwrap_or_else(|| "unknown".to_string()));
        }
        let tenant = tenant_names.binary_search_by(|name| name.as_str().cmp(&r.tenant)).unwrap_or(0) as u32;
        let job_type = r.job_type.map(|name| match job_types.iter().position(|t| **t == *name) {
            Some(k) => k as u32,
            None => {
                job_types.push(name.to_string());
                job_types.len() as u32 - 1
            }
        });
        let arrival = Time(u64::try_from(r.arrival_us.saturating_sub(epoch_us)).unwrap_or(0));
        jobs.push(JobSpec {
            id: JobId(i as u32),
            tenant: TenantId(tenant),
            arrival,
            gpus: r.gpus,
            work: r.work,
            duration_estimate: r.duration_estimate,
            priority: r.priority,
            kind: JobKind::Training,
            job_type,
            cpus: r.cpus,
            memory_gib: r.memory_gib,
            elastic: None,
            gpu_memory: Default::default(),
            profile: Default::default(),
        });
        lines.push(r.line);
    }
    Workload {
        source,
        jobs,
        tenants: tenant_names.into_iter().map(TenantSpec::new).collect(),
        job_types,
        lines,
        skipped: report.skipped.into_iter().map(|(reason, rows)| SkipCount { reason, rows }).collect(),
        notes: report.notes,
        wall_clock_origin_us: None,
        statuses,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::sort_keys;

    proptest! {
        #[test]
        fn radix_sort_is_the_plain_sort(
            arrivals in prop_oneof![
                proptest::collection::vec(any::<i64>(), 0..3000),
                proptest::collection::vec(-5_000_000_000i64..5_000_000_000, 1000..3000),
                proptest::collection::vec(0i64..50, 1000..3000),
                proptest::collection::vec(1_500_000_000_000_000i64..1_510_000_000_000_000, 1000..3000),
            ],
        ) {
            let mut keys: Vec<(i64, usize)> = arrivals.iter().enumerate().map(|(i, &a)| (a, i)).collect();
            let mut plain = keys.clone();
            plain.sort_unstable();
            sort_keys(&mut keys);
            prop_assert_eq!(keys, plain);
        }
    }
}
