//! Pollux/Sia workloads (`workload-N.csv`: `name,time,application,num_replicas,batch_size`).
//!
//! The files carry no run time. Pollux's simulator derives it from per-application
//! throughput and convergence profiles (petuum/adaptdl `simulator/applications.py`),
//! which are not bundled here. What the files do pin down is how each job was made:
//! Pollux's generator (`simulator/workload.py`) sampled a Philly job (after dropping
//! `duration < 60 s` and `gpu_time >= 1000 GPU-hours`) and chose the application by
//! that job's GPU time: cifar10 or ncf below 1 GPU-hour, deepspeech2 (half of them
//! relabelled bert) from 1 to 10, yolov3 from 10 to 100, imagenet from 100 to 1000.
//!
//! So we model a job's GPU time as the **median GPU time of the Philly jobs in its
//! application's bucket** (computed from `philly.csv` with Pollux's filters; a test
//! recomputes them from the bundled data), and its work as that GPU time divided
//! by `num_replicas` (perfect scaling, our assumption). This keeps the workload's
//! size classes and their ratios as Pollux intended; it does not reproduce
//! Pollux's goodput model. The workload's `notes` say so.

use std::path::Path;

use cotenant_core::Span;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{file_stem, read_bytes, secs_to_us, text_from_bytes, Table};
use crate::Workload;

/// Median GPU-seconds of the filtered Philly jobs in each of Pollux's buckets.
pub const POLLUX_BUCKET_MEDIAN_GPU_SECS: [(&str, f64); 4] =
    [("<1 GPU-h", 782.0), ("1-10 GPU-h", 6118.0), ("10-100 GPU-h", 88776.0), ("100-1000 GPU-h", 852992.0)];

/// The modelled GPU-seconds of one job of a Pollux application, if known.
pub fn pollux_gpu_secs(application: &str) -> Option<f64> {
    let bucket = match application {
        "cifar10" | "ncf" => 0,
        "deepspeech2" | "bert" => 1,
        "yolov3" => 2,
        "imagenet" => 3,
        _ => return None,
    };
    Some(POLLUX_BUCKET_MEDIAN_GPU_SECS[bucket].1)
}

/// Reads a Pollux workload. One tenant named after the file; GPUs are
/// `num_replicas` (the initial allocation); the job type is
/// `<application> (batch size <batch_size>)`; work as the module doc explains.
pub fn read_pollux(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    parse_pollux(path, read_bytes(path)?, slice)
}

/// [`read_pollux`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_pollux(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    let file = path.display().to_string();
    let tenant = file_stem(path);
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let time = table.column("time")?;
    let app = table.column("application")?;
    let replicas = table.column("num_replicas")?;
    let batch = table.column("batch_size")?;
    table.column("name")?;
    let mut raw = Vec::new();
    for row in table.rows() {
        let row = row?;
        let application = row.str(app);
        let gpu_secs = pollux_gpu_secs(application).ok_or_else(|| {
            row.error(app, format!("unknown application {application:?} (known: cifar10, ncf, deepspeech2, bert, yolov3, imagenet)"))
        })?;
        let gpus = row.job_gpus(replicas)?;
        let batch_size = row.positive_u32(batch)?;
        let work = gpu_secs / f64::from(gpus);
        let mut job =
            RawJob::new(secs_to_us(row.relative_arrival_secs(time)?), row.line, &tenant, gpus, work);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(work));
        job.job_type = Some(format!("{application} (batch size {batch_size})").into());
        raw.push(job);
    }
    let mut report = ReadReport::default();
    report.notes.push(
        "pollux: run times are modelled (median Philly GPU time of the job's size bucket / num_replicas), not recorded"
            .to_string(),
    );
    report.arrival_field = "time";
    assemble(file, raw, slice, Clock::Relative, report)
}
