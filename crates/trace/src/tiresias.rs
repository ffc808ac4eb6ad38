//! Tiresias's example trace `60_job.csv`:
//! `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`, seconds.

use std::path::Path;

use cotenant_core::Span;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{file_stem, read_bytes, secs_to_us, text_from_bytes, Table};
use crate::Workload;

/// Reads a Tiresias job CSV. One tenant named after the file; `work` is
/// `duration` in seconds (also the oracle estimate); the job type is
/// `model_name`. `iterations` (an integer) and `interval` (the generator's
/// inter-arrival gap, a non-negative number) are checked but not used: `submit_time` already places the job.
pub fn read_tiresias(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    parse_tiresias(path, read_bytes(path)?, slice)
}

/// [`read_tiresias`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_tiresias(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    let file = path.display().to_string();
    let tenant = file_stem(path);
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let gpus = table.column("num_gpu")?;
    let submit = table.column("submit_time")?;
    let model = table.column("model_name")?;
    let duration = table.column("duration")?;
    let iterations = table.column("iterations")?;
    let interval = table.column("interval")?;
    table.column("job_id")?;
    let mut raw = Vec::new();
    for row in table.rows() {
        let row = row?;
        row.u64(iterations)?;
        row.non_negative_f64(interval)?;
        let duration_secs = row.duration_secs(duration)?;
        let mut job = RawJob::new(
            secs_to_us(row.relative_arrival_secs(submit)?),
            row.line,
            &tenant,
            row.job_gpus(gpus)?,
            duration_secs,
        );
        job.duration_estimate = Some(Span::from_secs_f64_ceil(duration_secs));
        job.job_type = Some(row.str(model).into());
        raw.push(job);
    }
    assemble(file, raw, slice, Clock::Relative, ReadReport::arrivals_in("submit_time"))
}
