//! Per-job records as CSV, one row per (policy, job).

use std::io::Write;

use cotenant_sim::{Outcome, SimResult};

/// Writes every job of every run. Times are seconds since the run's epoch.
pub fn write_jobs_csv(results: &[&SimResult], out: impl Write) -> Result<(), csv::Error> {
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record([
        "policy",
        "job",
        "tenant",
        "arrival_s",
        "gpus",
        "work",
        "first_start_s",
        "end_s",
        "jct_s",
        "queueing_s",
        "outcome",
        "preemptions",
        "gpu_seconds",
        "lost_gpu_seconds",
    ])?;
    let secs = |us: u64| format!("{:.6}", us as f64 / 1e6);
    for result in results {
        for job in &result.jobs {
            let outcome = match &job.outcome {
                Outcome::Completed => "completed".to_string(),
                Outcome::Ended(reason) => format!("ended: {reason}"),
                Outcome::Unfinished(why) => format!("unfinished: {why}"),
            };
            writer.write_record([
                result.policy.clone(),
                job.id.0.to_string(),
                result.tenants[job.tenant.index()].name.clone(),
                secs(job.arrival.0),
                job.gpus.to_string(),
                job.work.to_string(),
                job.first_start.map_or(String::new(), |t| secs(t.0)),
                job.end.map_or(String::new(), |t| secs(t.0)),
                job.jct().map_or(String::new(), |s| secs(s.0)),
                job.queueing().map_or(String::new(), |s| secs(s.0)),
                outcome,
                job.preemptions.to_string(),
                secs(job.held_gpu_us),
                secs(job.lost_gpu_us),
            ])?;
        }
    }
    writer.flush()?;
    Ok(())
}
