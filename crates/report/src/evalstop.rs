//! The EvalStop section of `cotenant sim` (runs with evaluation curves, `--rlhf`):
//! a table and a JSON value of `cotenant_sim::evalstop::metrics::EvalStopSummary`.

use cotenant_sim::evalstop::metrics::EvalStopSummary;
use serde_json::{json, Value};

use crate::table::Table;

fn percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.1}%", x * 100.0))
}

/// One row per policy: stops against the truth, mean JCT, wasted compute.
pub fn evalstop_table(summaries: &[EvalStopSummary]) -> Table {
    let mut table = Table::new(&[
        "policy",
        "stopped",
        "true/false",
        "precision",
        "recall",
        "FP rate",
        "mean JCT h",
        "training JCT h",
        "wasted GPU-h",
        "delivered/peak",
    ]);
    for s in summaries {
        table.row(vec![
            s.policy.clone(),
            s.stopped.to_string(),
            format!("{}/{}", s.true_stops, s.false_stops),
            percent(s.precision),
            percent(s.recall),
            percent(s.false_positive_rate),
            format!("{:.3}", s.mean_jct_hours),
            format!("{:.3}", s.mean_training_jct_hours),
            format!("{:.1}", s.wasted_gpu_hours),
            format!("{:.3}", s.delivered_quality),
        ]);
    }
    table
}

/// What the table says, per policy, for programs.
pub fn evalstop_json(summaries: &[EvalStopSummary]) -> Value {
    let rows: Vec<Value> = summaries
        .iter()
        .map(|s| {
            json!({
                "policy": s.policy,
                "rlhf_jobs": s.rlhf_jobs,
                "hacking_jobs": s.hacking_jobs,
                "stopped": s.stopped,
                "true_stops": s.true_stops,
                "false_stops": s.false_stops,
                "precision": s.precision,
                "recall": s.recall,
                "false_positive_rate": s.false_positive_rate,
                "mean_jct_hours": s.mean_jct_hours,
                "mean_training_jct_hours": s.mean_training_jct_hours,
                "wasted_gpu_hours": s.wasted_gpu_hours,
                "delivered_quality": s.delivered_quality,
                "unfinished": s.unfinished,
            })
        })
        .collect();
    Value::Array(rows)
}

/// What the columns mean (printed under the table).
pub const EVALSTOP_LEGEND: &str = "stopped: jobs ended after k declining evaluations (true: over-optimizing, false: healthy); \
precision = true/stopped, recall = true/over-optimizing, FP rate = false/healthy RLHF jobs; \
JCT counts completed and stopped jobs; wasted GPU-h: GPU-time on over-optimizing jobs' progress past their true peak; \
delivered/peak: true score of the checkpoint an over-optimizing job delivers over its peak score";
