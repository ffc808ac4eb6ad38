//! GPU sharing in the world model: the interference table's file format and the
//! rate of a job that shares its GPUs.
//!
//! A job alone runs at its reference rate (1 work unit per second). Sharing its
//! GPUs with a partner in mode `m`, it runs `xi_m(own model | partner's model)`
//! times slower; with gradient accumulation `k` (read from the engine's
//! `JobState::sharing`), a further `1 + o (k - 1)`, `o` the table's
//! accumulation overhead. The table is data: `data/sjf-bsbf/interference.txt`
//! (its provenance is in docs/experiments/sjf-bsbf.md).
//!
//! File format, one record per line, `#` starts a comment:
//! ```text
//! models resnet18 resnet50 vgg16          # first record: the models, once
//! accumulation-overhead 0.05              # optional, default 0
//! time-slice resnet18 vgg16 1.62          # mode, job, partner, xi(job | partner) >= 1
//! ```
//! Every ordered pair of the models (a model with itself included) needs one
//! entry per mode: a missing pair is an error naming it, never a default.

use cotenant_core::sharing::{InterferenceTable, MAX_ACCUMULATION};
use cotenant_core::{JobSpec, SharingMode};

use crate::rates::{Placed, RateModel};

/// Most models one table may declare (its size grows with the square).
pub const MAX_MODELS: usize = 256;

/// Largest accepted xi: a job 100 times slower beside a partner is not sharing.
pub const MAX_XI: f64 = 100.0;

/// A table that cannot be read: the file, line (0: the file as a whole) and
/// field, and what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}{}, field {field}: {problem}", if *line > 0 { format!(" line {line}") } else { String::new() })]
pub struct InterferenceError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub problem: String,
}

/// Parses an interference table; `file` names it in errors.
pub fn parse_interference(text: &str, file: &str) -> Result<InterferenceTable, InterferenceError> {
    let err = |line: usize, field: &str, problem: String| InterferenceError {
        file: file.to_string(),
        line,
        field: field.to_string(),
        problem,
    };
    let mut table: Option<(InterferenceTable, usize)> = None;
    let mut seen: [Vec<Option<usize>>; 2] = [Vec::new(), Vec::new()];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let record = raw.split('#').next().unwrap_or("").trim();
        let fields: Vec<&str> = record.split_whitespace().collect();
        let Some(&head) = fields.first() else { continue };
        match (head, &mut table) {
            ("models", Some(_)) => return Err(err(line, "models", "declared twice".into())),
            ("models", None) => {
                let models: Vec<String> = fields[1..].iter().map(|m| m.to_string()).collect();
                if models.is_empty() || models.len() > MAX_MODELS {
                    return Err(err(line, "models", format!("expected 1 to {MAX_MODELS} model names")));
                }
                if let Some(dup) = models.iter().enumerate().find(|(j, m)| models[..*j].contains(m)) {
                    return Err(err(line, "models", format!("model '{}' listed twice", dup.1)));
                }
                let n = models.len();
                seen = [vec![None; n * n], vec![None; n * n]];
                table = Some((InterferenceTable::new(models, 1.0, 0.0), line));
            }
            (_, None) => {
                return Err(err(line, "models", "the first record must be 'models NAME...'".into()));
            }
            ("accumulation-overhead", Some((t, _))) => {
                let value = fields.get(1).copied().unwrap_or("");
                t.accumulation_overhead = match value.parse::<f64>() {
                    Ok(o) if fields.len() == 2 && (0.0..=1.0).contains(&o) => o,
                    _ => {
                        let problem = format!("expected one number from 0 to 1, got '{value}'");
                        return Err(err(line, "accumulation-overhead", problem));
                    }
                };
            }
            (mode, Some((t, _))) => {
                let Some(mode) = SharingMode::parse(mode) else {
                    let problem = format!("unknown sharing mode '{mode}' (known: time-slice, mps)");
                    return Err(err(line, "mode", problem));
                };
                if fields.len() != 4 {
                    let problem = format!("expected 4 fields (mode job partner xi), got {}", fields.len());
                    return Err(err(line, "line", problem));
                }
                let model = |field: &str, name: &str| {
                    t.models.iter().position(|m| m == name).ok_or_else(|| {
                        err(
                            line,
                            field,
                            format!("unknown model '{name}' (the models line lists {})", t.models.join(", ")),
                        )
                    })
                };
                let (a, b) = (model("job", fields[1])?, model("partner", fields[2])?);
                let xi = match fields[3].parse::<f64>() {
                    Ok(x) if (1.0..=MAX_XI).contains(&x) => x,
                    _ => {
                        let problem = format!("expected a number from 1 to {MAX_XI}, got '{}'", fields[3]);
                        return Err(err(line, "xi", problem));
                    }
                };
                let slot = &mut seen[mode.index()][a * t.models.len() + b];
                if let Some(first) = slot {
                    let problem = format!(
                        "{} {} | {} already given on line {first}",
                        mode.name(),
                        fields[1],
                        fields[2]
                    );
                    return Err(err(line, "partner", problem));
                }
                *slot = Some(line);
                t.set(mode, a, b, xi);
            }
        }
    }
    let Some((table, models_line)) = table else {
        return Err(err(0, "models", "no 'models' record: the file declares no models".into()));
    };
    let n = table.models.len();
    for mode in SharingMode::ALL {
        if let Some(missing) = seen[mode.index()].iter().position(Option::is_none) {
            let (a, b) = (&table.models[missing / n], &table.models[missing % n]);
            let problem =
                format!("no entry for {} {a} | {b}: every ordered pair needs one per mode", mode.name());
            return Err(err(models_line, "xi", problem));
        }
    }
    Ok(table)
}

/// Rates of jobs that may share GPUs: reference speed over the interference
/// factor of the pair and the accumulation overhead. The table must be indexed
/// by the workload's job types ([`InterferenceTable::reordered`]) and every job
/// must have one ([`check_jobs`]).
#[derive(Clone, Debug)]
pub struct InterferenceRates {
    pub table: InterferenceTable,
}

impl RateModel for InterferenceRates {
    fn rate(&self, job: &JobSpec, placed: &Placed<'_>) -> f64 {
        let sharing = placed.state.map(|s| s.sharing).unwrap_or_default();
        let k = sharing.accumulation.clamp(1, MAX_ACCUMULATION);
        let mode = sharing.mode.unwrap_or(SharingMode::TimeSlice);
        let xi = match (job.job_type, placed.partners.first().and_then(|p| p.job_type)) {
            (_, None) if placed.partners.is_empty() => 1.0,
            (Some(a), Some(b)) => self.table.xi(mode, a as usize, b as usize).unwrap_or(2.0),
            // Unreachable after `check_jobs`: time-slicing two equal jobs halves each.
            _ => 2.0,
        };
        1.0 / (xi * self.table.accumulation_factor(k))
    }
}

/// The first job without a job type the table knows, as (job id, what is wrong).
pub fn check_jobs(jobs: &[JobSpec], table: &InterferenceTable) -> Result<(), (u32, String)> {
    for job in jobs {
        match job.job_type {
            None => return Err((job.id.0, "has no model (job type)".into())),
            Some(t) if t as usize >= table.models.len() => {
                return Err((job.id.0, format!("names job type #{t}, the table has {}", table.models.len())))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# two models\nmodels a b\naccumulation-overhead 0.1\n\
        time-slice a a 1.9\ntime-slice a b 1.3\ntime-slice b a 1.6\ntime-slice b b 1.9\n\
        mps a a 1.5\nmps a b 1.1\nmps b a 1.2\nmps b b 1.5  # comment\n";

    #[test]
    fn reads_a_complete_table() {
        let t = parse_interference(GOOD, "t.txt").unwrap();
        assert_eq!(t.models, vec!["a", "b"]);
        assert_eq!(t.xi(SharingMode::TimeSlice, 0, 1), Some(1.3));
        assert_eq!(t.xi(SharingMode::Mps, 1, 0), Some(1.2));
        assert!((t.accumulation_factor(3) - 1.2).abs() < 1e-12);
    }

    fn error(text: &str) -> InterferenceError {
        parse_interference(text, "t.txt").unwrap_err()
    }

    #[test]
    fn a_missing_pair_is_an_error_naming_it() {
        let e = error(&GOOD.replace("mps b a 1.2\n", ""));
        assert_eq!((e.line, e.field.as_str()), (2, "xi"));
        assert_eq!(
            e.to_string(),
            "t.txt line 2, field xi: no entry for mps b | a: every ordered pair needs one per mode"
        );
    }

    #[test]
    fn bad_records_name_line_and_field() {
        let e = error(&GOOD.replace("mps a b 1.1", "mps a c 1.1"));
        assert_eq!((e.line, e.field.as_str()), (9, "partner"));
        assert!(e.problem.contains("unknown model 'c'"), "{e}");
        let e = error(&GOOD.replace("mps a b 1.1", "mps a b 1,1"));
        assert_eq!(e.to_string(), "t.txt line 9, field xi: expected a number from 1 to 100, got '1,1'");
        let e = error(&GOOD.replace("mps a b 1.1", "mps a b 0.9"));
        assert_eq!((e.line, e.field.as_str()), (9, "xi"));
        let e = error(&GOOD.replace("mps a b 1.1", "mpx a b 1.1"));
        assert_eq!((e.line, e.field.as_str()), (9, "mode"));
        let e = error(&GOOD.replace("mps a b 1.1", "mps a a 1.1"));
        assert!(e.problem.contains("already given on line 8"), "{e}");
        let e = error("time-slice a a 1\n");
        assert_eq!((e.line, e.field.as_str()), (1, "models"));
        let e = error("# nothing\n");
        assert_eq!(e.to_string(), "t.txt, field models: no 'models' record: the file declares no models");
        let e = error(&GOOD.replace("0.1", "lots"));
        assert_eq!((e.line, e.field.as_str()), (3, "accumulation-overhead"));
    }
}
