//! ElasticFlow's Microsoft ITP traces (2021): `clusterNN.csv` with
//! `job_id,submission_time,duration,num_gpu`, times in seconds.

use std::path::Path;

use cotenant_core::Span;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{file_stem, read_bytes, secs_to_us, text_from_bytes, Table};
use crate::Workload;

/// Reads one ITP cluster file. The trace has no tenant column, so all jobs
/// belong to one tenant named after the file (`cluster10`). `work` is the
/// observed duration in seconds, also given as the (oracle) estimate.
pub fn read_itp(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    parse_itp(path, read_bytes(path)?, slice)
}

/// [`read_itp`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_itp(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    let file = path.display().to_string();
    let tenant = file_stem(path);
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let (submit, duration, gpus) =
        (table.column("submission_time")?, table.column("duration")?, table.column("num_gpu")?);
    table.column("job_id")?;
    let mut raw = Vec::new();
    for row in table.rows() {
        let row = row?;
        let arrival_us = secs_to_us(row.relative_arrival_secs(submit)?);
        let duration_secs = row.duration_secs(duration)?;
        let mut job = RawJob::new(arrival_us, row.line, &tenant, row.job_gpus(gpus)?, duration_secs);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(duration_secs));
        raw.push(job);
    }
    assemble(file, raw, slice, Clock::Relative, ReadReport::arrivals_in("submission_time"))
}
