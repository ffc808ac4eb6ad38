//! Alibaba's GPU cluster trace 2023 ("openb", the FGD paper): pod lists become
//! jobs, node lists become a [`ClusterSpec`].

use std::path::Path;

use cotenant_core::limits::{
    MAX_ARRIVAL_SPAN, MAX_CLUSTER_GPUS, MAX_CLUSTER_NODES, MAX_GPUS_PER_NODE, MAX_JOB_DURATION,
};
use cotenant_core::{ClusterSpec, NodeSpec, Span};

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{exceeds_secs, file_stem, read_bytes, secs_to_us, text_from_bytes, Row, Table};
use crate::{SkipCount, Workload};

/// Skip reasons, as they appear in [`Workload::skipped`].
pub const SKIP_CPU_ONLY: &str = "openb: CPU-only pod (num_gpu = 0)";
pub const SKIP_NEVER_SCHEDULED: &str = "openb: never scheduled (no scheduled_time)";
pub const SKIP_NO_DELETION: &str = "openb: no deletion_time (run time unknown)";
pub const SKIP_CPU_NODE: &str = "openb: CPU-only node (gpu = 0)";

/// Column indices of a pod list.
struct PodColumns {
    cpu_milli: usize,
    memory_mib: usize,
    num_gpu: usize,
    gpu_milli: usize,
    gpu_spec: usize,
    qos: usize,
    creation: usize,
    deletion: usize,
    scheduled: usize,
}

fn pod_columns(table: &Table<'_>) -> Result<PodColumns, TraceError> {
    if table.column("creation_time").is_err() && table.column("num_gpu").is_ok() {
        return Err(TraceError::file(
            &table.file,
            "this pod list has no creation, scheduled or deletion times (the multigpu* variants), \
             so it cannot be replayed as a trace",
        ));
    }
    Ok(PodColumns {
        cpu_milli: table.column("cpu_milli")?,
        memory_mib: table.column("memory_mib")?,
        num_gpu: table.column("num_gpu")?,
        gpu_milli: table.column("gpu_milli")?,
        gpu_spec: table.column("gpu_spec")?,
        qos: table.column("qos")?,
        creation: table.column("creation_time")?,
        deletion: table.column("deletion_time")?,
        scheduled: table.column("scheduled_time")?,
    })
}

/// Reads an openb pod list (`openb_pod_list_*.csv`).
///
/// A pod becomes a job arriving at `creation_time`, running for
/// `deletion_time - scheduled_time` seconds (its observed run time; also the
/// oracle estimate). Skipped, with counts: CPU-only pods, pods never scheduled,
/// pods with no deletion time. A fractional pod (`gpu_milli` < 1000, GPU
/// sharing) becomes a 1-GPU job: cotenant does not share GPUs yet; the notes
/// count them. `gpu_spec` constraints are not modelled (counted in the notes).
/// CPUs are `ceil(cpu_milli / 1000)`, memory `ceil(memory_mib / 1024)` GiB.
/// Priority from QoS: LS (latency-sensitive) 2, Burstable 1, BE and others 0.
/// One tenant named after the file. The `multigpu*` variants have no times:
/// reading one is an error.
pub fn read_openb_pods(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    parse_openb_pods(path, read_bytes(path)?, slice)
}

/// [`read_openb_pods`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_openb_pods(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::Relative)?;
    let file = path.display().to_string();
    let tenant = file_stem(path);
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let cols = pod_columns(&table)?;
    let mut raw = Vec::new();
    let mut report = ReadReport::default();
    let (mut fractional, mut constrained) = (0u64, 0u64);
    for row in table.rows() {
        let row = row?;
        let Some(job) = pod_job(&row, &cols, &tenant, &mut report)? else { continue };
        if row.u64(cols.gpu_milli)? < 1000 {
            fractional += 1;
        }
        if !row.str(cols.gpu_spec).is_empty() {
            constrained += 1;
        }
        raw.push(job);
    }
    if fractional > 0 {
        report.notes.push(format!(
            "openb: {fractional} fractional-GPU pods (gpu_milli < 1000) run as whole 1-GPU jobs"
        ));
    }
    if constrained > 0 {
        report.notes.push(format!("openb: {constrained} pods' GPU-model constraints (gpu_spec) are ignored"));
    }
    report.arrival_field = "creation_time";
    assemble(file, raw, slice, Clock::Relative, report)
}

fn pod_job(
    row: &Row<'_>,
    c: &PodColumns,
    tenant: &str,
    report: &mut ReadReport,
) -> Result<Option<RawJob>, TraceError> {
    let gpus = row.gpus_or_zero(c.num_gpu)?;
    let gpu_milli = row.u64(c.gpu_milli)?;
    if gpu_milli > 1000 {
        return Err(
            row.error(c.gpu_milli, format!("expected at most 1000 (a share of one GPU), got {gpu_milli}"))
        );
    }
    let creation = row.u64(c.creation)?;
    row.at_most_secs(c.creation, creation as f64, MAX_ARRIVAL_SPAN, "MAX_ARRIVAL_SPAN")?;
    if gpus == 0 {
        report.skip(SKIP_CPU_ONLY);
        return Ok(None);
    }
    if gpus > 1 && gpu_milli < 1000 {
        // The notes would say "run as a whole 1-GPU job", which it would not be.
        return Err(row.error(
            c.gpu_milli,
            format!(
                "a GPU share (gpu_milli {gpu_milli} < 1000) is only meaningful for a 1-GPU pod, \
                 but num_gpu is {gpus}"
            ),
        ));
    }
    if row.str(c.scheduled).is_empty() {
        report.skip(SKIP_NEVER_SCHEDULED);
        return Ok(None);
    }
    if row.str(c.deletion).is_empty() {
        report.skip(SKIP_NO_DELETION);
        return Ok(None);
    }
    let (scheduled, deletion) = (row.u64(c.scheduled)?, row.u64(c.deletion)?);
    if deletion < scheduled {
        return Err(row.error(
            c.deletion,
            format!("negative duration: deletion_time {deletion} is before scheduled_time {scheduled}"),
        ));
    }
    let duration_secs = (deletion - scheduled) as f64;
    if duration_secs > MAX_JOB_DURATION.as_secs_f64() {
        return Err(row.error(
            c.deletion,
            format!(
                "run time deletion_time - scheduled_time = {} ({deletion} - {scheduled})",
                exceeds_secs(&(deletion - scheduled).to_string(), MAX_JOB_DURATION, "MAX_JOB_DURATION")
            ),
        ));
    }
    let mut job = RawJob::new(secs_to_us(creation as f64), row.line, tenant, gpus, duration_secs);
    job.duration_estimate = Some(Span::from_secs(deletion - scheduled));
    job.cpus = row.u64(c.cpu_milli)?.div_ceil(1000).min(u64::from(u32::MAX)) as u32;
    job.memory_gib = row.u64(c.memory_mib)?.div_ceil(1024).min(u64::from(u32::MAX)) as u32;
    job.priority = match row.str(c.qos) {
        "LS" => 2,
        "Burstable" => 1,
        _ => 0,
    };
    Ok(Some(job))
}

/// Reads an openb node list (`openb_node_list_*.csv`: `sn,cpu_milli,memory_mib,gpu,model`)
/// as a cluster. Each node keeps its name (`sn`); the GPU type is `model`;
/// CPUs are `cpu_milli / 1000` (rounded down), memory `memory_mib / 1024` GiB
/// (rounded down); racks are groups of 16 nodes in file order (the trace has no
/// topology). CPU-only nodes are skipped and counted.
pub fn read_openb_nodes(path: &Path) -> Result<(ClusterSpec, Vec<SkipCount>), TraceError> {
    parse_openb_nodes(path, read_bytes(path)?)
}

/// [`read_openb_nodes`] on bytes already in memory (plain or gzip); `path` only names them.
pub fn parse_openb_nodes(path: &Path, bytes: Vec<u8>) -> Result<(ClusterSpec, Vec<SkipCount>), TraceError> {
    let file = path.display().to_string();
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let (sn, cpu, mem, gpu, model) = (
        table.column("sn")?,
        table.column("cpu_milli")?,
        table.column("memory_mib")?,
        table.column("gpu")?,
        table.column("model")?,
    );
    let mut spec = ClusterSpec::default();
    let (mut cpu_only, mut total_gpus) = (0u64, 0u64);
    for row in table.rows() {
        let row = row?;
        let gpus = row.u32(gpu)?;
        if gpus > MAX_GPUS_PER_NODE {
            return Err(row.error(
                gpu,
                format!(
                    "{gpus} GPUs exceeds the limit of {MAX_GPUS_PER_NODE} GPUs per node (core::limits::MAX_GPUS_PER_NODE)"
                ),
            ));
        }
        let (cpu_milli, memory_mib) = (row.u64(cpu)?, row.u64(mem)?);
        if gpus == 0 {
            cpu_only += 1;
            continue;
        }
        let model_name = row.str(model);
        if model_name.is_empty() || model_name == "nan" {
            return Err(row.error(model, "a GPU node needs a GPU model, got an empty field"));
        }
        total_gpus += u64::from(gpus);
        if total_gpus > MAX_CLUSTER_GPUS {
            return Err(row.error(
                gpu,
                format!(
                    "the nodes up to this row hold {total_gpus} GPUs, more than the limit of {MAX_CLUSTER_GPUS} (core::limits::MAX_CLUSTER_GPUS)"
                ),
            ));
        }
        if spec.nodes.len() as u64 >= MAX_CLUSTER_NODES {
            return Err(row.error(
                sn,
                format!(
                    "more than {MAX_CLUSTER_NODES} GPU nodes, the limit (core::limits::MAX_CLUSTER_NODES)"
                ),
            ));
        }
        let gpu_type = spec.gpu_type_id(model_name);
        let n = spec.nodes.len() as u32;
        spec.nodes.push(NodeSpec {
            name: row.str(sn).to_string(),
            gpu_type,
            gpus,
            cpus: (cpu_milli / 1000).min(u64::from(u32::MAX)) as u32,
            memory_gib: (memory_mib / 1024).min(u64::from(u32::MAX)) as u32,
            rack: n / 16,
            gpu_memory_gib: 0.0,
        });
    }
    let skipped = if cpu_only > 0 {
        vec![SkipCount { reason: SKIP_CPU_NODE.to_string(), rows: cpu_only }]
    } else {
        vec![]
    };
    Ok((spec, skipped))
}
