//! Gavel's `.trace` files: tab-separated, no header, one job per line, in the
//! older 7-column form (`msr/seed=*/<vc>.trace`) or the current 10-column form
//! (`physical_cluster/*.trace`); and a writer for the 10-column form so a
//! cotenant workload can be fed to Gavel's own simulator.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use cotenant_core::limits::MAX_JOB_STEPS;

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{data_lines, file_stem, read_bytes, secs_to_us, split_trimmed, text_from_bytes, Row};
use crate::Workload;

const SEVEN: [&str; 7] =
    ["job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"];
const TEN: [&str; 10] = [
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
];

/// Column positions of the fields we use, for one of the two forms.
struct Layout {
    total_steps: usize,
    arrival: usize,
    scale_factor: usize,
    needs_data_dir: usize,
    priority_weight: Option<usize>,
    slo: Option<usize>,
}

const LAYOUT_7: Layout = Layout {
    total_steps: 4,
    arrival: 5,
    scale_factor: 6,
    needs_data_dir: 3,
    priority_weight: None,
    slo: None,
};
const LAYOUT_10: Layout = Layout {
    total_steps: 5,
    arrival: 9,
    scale_factor: 6,
    needs_data_dir: 4,
    priority_weight: Some(7),
    slo: Some(8),
};

/// Reads a Gavel trace. One tenant named after the file (the Philly VC for
/// `msr/seed=0/<vc>.trace`). `work` is `total_steps` (Gavel steps, not seconds:
/// the run time depends on the GPU type, through the throughput table), so
/// `duration_estimate` is `None`. `gpus` is `scale_factor`; the job type is the
/// `job_type` string exactly as written. Priority is `round(priority_weight) - 1`,
/// so Gavel's default weight 1 is cotenant's neutral priority 0 (the 7-column
/// form has no weight: priority 0). SLOs are not modelled: they are counted in
/// the notes.
pub fn read_gavel(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    parse_gavel(path, read_bytes(path)?, slice)
}

/// [`read_gavel`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_gavel(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    let file = path.display().to_string();
    // Every row's tenant, and each job type once: shared by the rows that name it.
    let tenant: Arc<str> = file_stem(path).into();
    let mut job_types: Vec<Arc<str>> = Vec::new();
    let text = text_from_bytes(path, bytes)?;
    let mut raw = Vec::new();
    let (mut with_slo, mut fractional_weights) = (0u64, 0u64);
    // Sized for the 10-column form up front, and handed from row to row.
    let mut fields: Vec<&str> = Vec::with_capacity(10);
    for (line, content) in data_lines(&text) {
        split_trimmed(content, b'\t', &mut fields);
        let (names, layout): (&[&str], &Layout) = match fields.len() {
            7 => (&SEVEN, &LAYOUT_7),
            10 => (&TEN, &LAYOUT_10),
            n => {
                return Err(TraceError::Row {
                    file,
                    line,
                    message: format!("expected 7 or 10 tab-separated fields, got {n}"),
                })
            }
        };
        let row = Row::headerless(&file, line, std::mem::take(&mut fields), names);
        let mut job = gavel_job(&row, layout, &tenant, &mut job_types)?;
        if let Some(w) = layout.priority_weight {
            let weight = row.f64(w)?;
            if weight.fract() != 0.0 {
                fractional_weights += 1;
            }
            job.priority = (weight.round() as i32).saturating_sub(1);
        }
        if let Some(s) = layout.slo {
            if row.f64(s)? >= 0.0 {
                with_slo += 1;
            }
        }
        raw.push(job);
        fields = row.fields;
    }
    let mut report = ReadReport::arrivals_in("arrival_time");
    if with_slo > 0 {
        report.notes.push(format!("gavel: {with_slo} jobs have an SLO, which cotenant does not model"));
    }
    if fractional_weights > 0 {
        report.notes.push(format!("gavel: {fractional_weights} non-integer priority weights were rounded"));
    }
    assemble(file, raw, slice, Clock::Relative, report)
}

fn gavel_job(
    row: &Row<'_>,
    layout: &Layout,
    tenant: &Arc<str>,
    job_types: &mut Vec<Arc<str>>,
) -> Result<RawJob, TraceError> {
    let job_type = row.str(0);
    if job_type.is_empty() {
        return Err(row.error(0, "expected a job type, got an empty field"));
    }
    if !matches!(row.str(layout.needs_data_dir), "0" | "1") {
        return Err(row.error(
            layout.needs_data_dir,
            format!("expected 0 or 1, got {:?}", row.str(layout.needs_data_dir)),
        ));
    }
    let steps = row.u64(layout.total_steps)?;
    if steps > MAX_JOB_STEPS {
        return Err(row.error(
            layout.total_steps,
            format!("{steps} steps exceeds the limit of {MAX_JOB_STEPS} steps (core::limits::MAX_JOB_STEPS)"),
        ));
    }
    let arrival_us = secs_to_us(row.relative_arrival_secs(layout.arrival)?);
    let mut job = RawJob::shared(
        arrival_us,
        row.line,
        tenant.clone(),
        row.job_gpus(layout.scale_factor)?,
        steps as f64,
    );
    let name = match job_types.iter().find(|known| ***known == *job_type) {
        Some(known) => known.clone(),
        None => {
            let name: Arc<str> = job_type.into();
            job_types.push(name.clone());
            name
        }
    };
    job.job_type = Some(name);
    Ok(job)
}

/// Writes `workload` as a 10-column Gavel trace.
///
/// `total_steps` is `ceil(work)` (at least 1), so `work` must already be in
/// Gavel steps: convert a workload whose work is seconds with Gavel's
/// throughput table first. Every job needs a job type that Gavel knows.
/// `priority_weight` is `priority + 1` (at least 1), the inverse of the
/// reader's mapping. The command, working directory and step flag are
/// placeholders: Gavel's simulator does not run them, a physical cluster would.
/// SLO is -1 (none); arrival is in seconds.
pub fn write_gavel_trace(workload: &Workload, out: &mut dyn Write) -> Result<(), TraceError> {
    let target = "gavel trace output";
    for job in &workload.jobs {
        let name = job.job_type.and_then(|t| workload.job_types.get(t as usize)).ok_or_else(|| {
            TraceError::file(target, format!("{} has no job type; Gavel needs one", job.id))
        })?;
        if name.contains(['\t', '\n']) {
            return Err(TraceError::file(target, format!("job type {name:?} contains a tab or newline")));
        }
        let steps = job.work.ceil().max(1.0) as u64;
        let weight = job.priority.saturating_add(1).max(1);
        let secs = job.arrival.0 / 1_000_000;
        let micros = job.arrival.0 % 1_000_000;
        let arrival = if micros == 0 { secs.to_string() } else { format!("{secs}.{micros:06}") };
        writeln!(
            out,
            "{name}\tcotenant-placeholder %s\t.\t--num_steps\t0\t{steps}\t{}\t{weight}\t-1.000000\t{arrival}",
            job.gpus
        )
        .map_err(|e| TraceError::Io { file: target.to_string(), error: e })?;
    }
    Ok(())
}
