//! Microsoft Philly (2017): `philly.csv` (one row per job, VC = tenant) and
//! `philly_vc.csv` (nodes per VC, used as quota shares).

use std::path::Path;

use cotenant_core::limits::MAX_CLUSTER_NODES;
use cotenant_core::{Span, TenantSpec};

use crate::error::TraceError;
use crate::slice::{assemble, check_clock, Clock, RawJob, ReadReport, Slice};
use crate::text::{read_bytes, read_text, text_from_bytes, Table};
use crate::wallclock::wall_clock_field;
use crate::Workload;

/// Reads `philly.csv` (`timestamp,duration,num_gpus,gpu_time,cluster`).
///
/// Tenants are the VCs (`cluster`) of the kept jobs, sorted by name. `work` is
/// the recorded duration in seconds and `duration_estimate` is that same
/// duration (an oracle). The file is not sorted; jobs come out sorted by
/// submission time, ties in file order.
pub fn read_philly(path: &Path, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    parse_philly(path, read_bytes(path)?, slice)
}

/// [`read_philly`] on bytes already in memory (plain or gzip); `path` only names them
/// (in errors, and the tenant where the file name is the tenant).
pub fn parse_philly(path: &Path, bytes: Vec<u8>, slice: &Slice) -> Result<Workload, TraceError> {
    check_clock(slice, Clock::WallClock)?;
    let file = path.display().to_string();
    let text = text_from_bytes(path, bytes)?;
    let table = Table::parse(&file, &text, ',')?;
    let timestamp = table.column("timestamp")?;
    let duration = table.column("duration")?;
    let num_gpus = table.column("num_gpus")?;
    let cluster = table.column("cluster")?;
    let gpu_time = table.column("gpu_time")?;
    let mut raw = Vec::new();
    for row in table.rows() {
        let row = row?;
        let arrival_us = wall_clock_field(&row, timestamp)?;
        let duration_secs = row.duration_secs(duration)?;
        let gpus = row.job_gpus(num_gpus)?;
        // Not used (it is duration * num_gpus), but checked like every numeric field.
        row.non_negative_f64(gpu_time)?;
        let vc = row.str(cluster);
        if vc.is_empty() {
            return Err(row.error(cluster, "expected a VC name, got an empty field"));
        }
        let mut job = RawJob::new(arrival_us, row.line, vc, gpus, duration_secs);
        job.duration_estimate = Some(Span::from_secs_f64_ceil(duration_secs));
        raw.push(job);
    }
    assemble(file, raw, slice, Clock::WallClock, ReadReport::arrivals_in("timestamp"))
}

/// One row of `philly_vc.csv`: a VC and its node count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VcNodes {
    pub vc: String,
    pub nodes: u32,
}

/// Reads `philly_vc.csv` (`vc,node num`), in file order.
pub fn read_philly_vc(path: &Path) -> Result<Vec<VcNodes>, TraceError> {
    let file = path.display().to_string();
    let text = read_text(path)?;
    let table = Table::parse(&file, &text, ',')?;
    let (vc, nodes) = (table.column("vc")?, table.column("node num")?);
    let mut out = Vec::new();
    for row in table.rows() {
        let row = row?;
        let count = row.u32(nodes)?;
        if u64::from(count) > MAX_CLUSTER_NODES {
            return Err(row.error(
                nodes,
                format!("{count} nodes exceeds the limit of {MAX_CLUSTER_NODES} (core::limits::MAX_CLUSTER_NODES)"),
            ));
        }
        if row.str(vc).is_empty() {
            return Err(row.error(vc, "expected a VC name, got an empty field"));
        }
        out.push(VcNodes { vc: row.str(vc).to_string(), nodes: count });
    }
    Ok(out)
}

/// Sets each tenant's `gpu_quota` to its VC's share of `cluster_gpus`.
///
/// Shares are the VCs' node counts among the tenants present in `tenants`
/// (VCs listed in the file but absent from the workload get nothing, so the
/// quotas of present tenants sum to the whole cluster). Rounding uses the
/// largest-remainder method (ties to the earlier tenant), so quotas sum exactly
/// to `cluster_gpus`. A tenant whose VC is not in the file gets quota 0: it
/// may still run jobs, it is just guaranteed nothing. If no tenant is listed,
/// every quota is 0. Returns the names of tenants that got quota 0 for
/// lack of a row, so callers can report them.
pub fn apply_vc_quotas(tenants: &mut [TenantSpec], vcs: &[VcNodes], cluster_gpus: u32) -> Vec<String> {
    let nodes: Vec<u64> = tenants
        .iter()
        .map(|t| vcs.iter().find(|v| v.vc == t.name).map_or(0, |v| u64::from(v.nodes)))
        .collect();
    let quotas = largest_remainder(&nodes, cluster_gpus);
    let mut unlisted = Vec::new();
    for ((tenant, quota), &n) in tenants.iter_mut().zip(quotas).zip(&nodes) {
        tenant.gpu_quota = Some(quota);
        if n == 0 && !vcs.iter().any(|v| v.vc == tenant.name) {
            unlisted.push(tenant.name.clone());
        }
    }
    unlisted
}

/// Splits `total` in proportion to `weights` so the parts sum to `total`
/// (all zeros when the weights are all zero).
pub fn largest_remainder(weights: &[u64], total: u32) -> Vec<u32> {
    let sum: u64 = weights.iter().sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let total = u64::from(total);
    let mut parts: Vec<u32> = weights.iter().map(|w| (w * total / sum) as u32).collect();
    let given: u64 = parts.iter().map(|&p| u64::from(p)).sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; the stable sort breaks ties by position.
    order.sort_by_key(|&i| std::cmp::Reverse(weights[i] * total % sum));
    for &i in order.iter().take((total - given) as usize) {
        parts[i] += 1;
    }
    parts
}
