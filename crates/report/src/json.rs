//! JSON summaries. Keys are sorted (serde_json's default map), so output is stable.

use serde_json::{json, Value};

use cotenant_sim::{Distribution, Summary};

fn distribution(d: &Distribution) -> Value {
    json!({ "count": d.count, "mean": d.mean, "p50": d.p50, "p90": d.p90, "p99": d.p99, "max": d.max })
}

/// One run's summary as JSON (an element of [`summaries_json`]'s `runs`).
pub fn summary_json(s: &Summary) -> Value {
    let tenants: Vec<Value> = s
        .tenants
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "weight": t.weight,
                "gpu_quota": t.gpu_quota,
                "jobs": t.jobs,
                "completed": t.completed,
                "jct_secs": distribution(&t.jct),
                "queueing_secs": distribution(&t.queueing),
                "gpu_hours": t.gpu_hours,
                "gpu_share": t.gpu_share,
                "preemptions": t.preemptions,
                "lost_gpu_hours": t.lost_gpu_hours,
            })
        })
        .collect();
    let mut value = json!({
        "policy": s.policy,
        "cluster_gpus": s.cluster_gpus,
        "jobs": s.jobs,
        "completed": s.completed,
        "ended": s.ended,
        "unfinished": s.unfinished,
        "unfinished_reasons": s.unfinished_reasons,
        "healthy": s.health.healthy(),
        "warnings": s.health.warnings,
        "notes": s.health.notes,
        "jct_secs": distribution(&s.jct),
        "queueing_secs": distribution(&s.queueing),
        "makespan_secs": s.makespan_secs,
        "gpu_utilization": s.gpu_utilization,
        "goodput_utilization": s.goodput_utilization,
        "idle_while_waiting": s.idle_while_waiting,
        "preemptions": s.preemptions,
        "lost_gpu_hours": s.lost_gpu_hours,
        "jain_backlogged": s.jain_backlogged,
        "share_windows_measured": s.windows_measured,
        "events": s.events,
        "scheduling_passes": s.scheduling_passes,
        "tenants": tenants,
    });
    // Only runs with elastic resizes carry these, so other outputs keep their bytes.
    if s.resizes > 0 {
        value["resizes"] = json!(s.resizes);
        value["scaling_overhead_gpu_hours"] = json!(s.scaling_overhead_gpu_hours);
    }
    value
}

/// `{"workload": ..., "healthy": bool, "runs": [summary, ...]}` for a set of runs on one
/// workload; `healthy` is false when any run has a warning (see `cotenant_sim::Health`).
pub fn summaries_json(workload: Value, summaries: &[Summary]) -> Value {
    json!({
        "workload": workload,
        "healthy": summaries.iter().all(|s| s.health.healthy()),
        "runs": summaries.iter().map(summary_json).collect::<Vec<_>>(),
    })
}
