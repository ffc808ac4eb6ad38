//! Plain aligned text tables.

use cotenant_sim::Summary;

/// A table of strings with a header row; columns after the first are right-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths = vec![0usize; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, row: &[String]| {
            for (i, cell) in row.iter().enumerate().take(columns) {
                let pad = widths[i] - cell.chars().count();
                if i == 0 {
                    out.push_str(cell);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str("  ");
                    out.push_str(&" ".repeat(pad));
                    out.push_str(cell);
                }
            }
            out.push('\n');
        };
        line(&mut out, &self.header);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&mut out, &rule);
        for row in &self.rows {
            line(&mut out, row);
        }
        out
    }
}

/// `42s`, `13.5m`, `2.41h`, `3.2d`: a duration a person reads at a glance.
pub fn human_duration(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0}s")
    } else if secs < 5400.0 {
        format!("{:.1}m", secs / 60.0)
    } else if secs < 172_800.0 {
        format!("{:.2}h", secs / 3600.0)
    } else {
        format!("{:.1}d", secs / 86400.0)
    }
}

/// One row per policy: JCT, queueing, makespan, utilization, preemption, fairness.
/// `wall_secs`, when given, adds the wall time of each run.
pub fn comparison_table(summaries: &[Summary], wall_secs: Option<&[f64]>) -> Table {
    let mut header = vec![
        "policy",
        "done",
        "JCT mean",
        "p50",
        "p90",
        "p99",
        "queue mean",
        "makespan",
        "util",
        "idle-wait",
        "preempt",
        "lost GPU-h",
        "Jain",
    ];
    if wall_secs.is_some() {
        header.push("wall");
    }
    let mut table = Table::new(&header);
    for (i, s) in summaries.iter().enumerate() {
        let mut row = vec![
            s.policy.clone(),
            format!("{}/{}", s.completed, s.jobs),
            human_duration(s.jct.mean),
            human_duration(s.jct.p50),
            human_duration(s.jct.p90),
            human_duration(s.jct.p99),
            human_duration(s.queueing.mean),
            human_duration(s.makespan_secs),
            format!("{:.1}%", s.gpu_utilization * 100.0),
            format!("{:.1}%", s.idle_while_waiting * 100.0),
            s.preemptions.to_string(),
            format!("{:.0}", s.lost_gpu_hours),
            s.jain_backlogged.map_or("-".into(), |j| format!("{j:.3}")),
        ];
        if let Some(wall) = wall_secs {
            row.push(format!("{:.2}s", wall[i]));
        }
        table.row(row);
    }
    table
}

/// What the comparison table's less obvious columns mean, printed under it.
pub const COMPARISON_LEGEND: &str = "\
done: jobs completed / jobs in the workload (ended and unfinished jobs are listed below the table).
util: GPU-time held by jobs / GPU-time available from the first arrival to the last completion;
  the offered load in the cluster line is demand / capacity over the arrival window, so util is
  lower when the makespan runs past the arrivals. idle-wait: GPU-time left free while jobs waited.
Jain: Jain's index of weighted GPU-time among backlogged tenants, averaged over share windows;
  \"-\" when no window had two or more tenants waiting at once (a single tenant, or no contention).";

/// The warning and note block printed after the tables: empty for a healthy run
/// with nothing to note.
pub fn health_block(summaries: &[Summary]) -> String {
    let mut out = String::new();
    for s in summaries {
        for warning in &s.health.warnings {
            out.push_str(&format!("WARNING [{}]: {}\n", s.policy, warning));
        }
    }
    for s in summaries {
        for note in &s.health.notes {
            out.push_str(&format!("note [{}]: {}\n", s.policy, note));
        }
    }
    if summaries.iter().any(|s| !s.health.healthy()) {
        out.push_str(
            "These results are not trustworthy as they stand: see the warnings above \
             (--jobs-csv lists every job's outcome; --strict makes this an error).\n",
        );
    }
    out
}

/// Tenants as rows, policies as columns: mean JCT, and each tenant's GPU share
/// under the first policy beside its quota.
pub fn tenant_table(summaries: &[Summary]) -> Table {
    let Some(first) = summaries.first() else { return Table::default() };
    let mut header: Vec<String> = vec!["tenant".into(), "jobs".into(), "quota".into(), "share".into()];
    header.extend(summaries.iter().map(|s| format!("{} JCT", s.policy)));
    let mut table = Table { header, rows: Vec::new() };
    for (t, tenant) in first.tenants.iter().enumerate() {
        let mut row = vec![
            tenant.name.clone(),
            tenant.jobs.to_string(),
            tenant.gpu_quota.map_or("-".into(), |q| q.to_string()),
            format!("{:.1}%", tenant.gpu_share * 100.0),
        ];
        row.extend(summaries.iter().map(|s| {
            let jct = &s.tenants[t].jct;
            if jct.count == 0 {
                "-".into()
            } else {
                human_duration(jct.mean)
            }
        }));
        table.row(row);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_columns() {
        let mut t = Table::new(&["a", "bb"]);
        t.row(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(), "a     bb\n----  --\nlong   1\n");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(42.0), "42s");
        assert_eq!(human_duration(810.0), "13.5m");
        assert_eq!(human_duration(8676.0), "2.41h");
        assert_eq!(human_duration(3.0 * 86400.0), "3.0d");
    }
}
