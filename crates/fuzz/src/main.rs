//! `cotenant-fuzz`: runs the seeded mutation fuzzer over every target (or those
//! named) and exits non-zero on any finding, printing each reproducer.
//!
//! ```text
//! cotenant-fuzz [--seconds-per-target N] [--seed S] [--target NAME]... [--max-execs M]
//!               [--findings DIR] [--timeout-ms T] [--data DIR] [--save-current FILE]
//!               [--no-header] [--list]
//! ```
//!
//! Columns: executions, inputs that parsed, distinct kinds of error, then findings
//! by kind (panics, calls over the time bound, limit violations on a successful
//! parse, errors that do not name the file or repeat themselves).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cotenant_fuzz::{escape, quiet_panics, run_target, targets, Config};

const USAGE: &str = "usage: cotenant-fuzz [--seconds-per-target N] [--seed S] [--target NAME]... \
[--max-execs M] [--findings DIR] [--timeout-ms T] [--data DIR] [--save-current FILE] [--no-header] [--list]";

struct Args {
    seconds: f64,
    seed: u64,
    targets: Vec<String>,
    max_execs: u64,
    findings: Option<PathBuf>,
    timeout_ms: u64,
    data: PathBuf,
    list: bool,
    header: bool,
    save_current: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 10.0,
        seed: 0,
        targets: Vec::new(),
        max_execs: u64::MAX,
        findings: None,
        timeout_ms: 2_000,
        data: cotenant_trace::bundled_data_dir(),
        list: false,
        header: true,
        save_current: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value\n{USAGE}"));
        let number = |name: &str, text: String| -> Result<u64, String> {
            text.parse().map_err(|_| format!("{name}: expected a non-negative integer, got {text:?}"))
        };
        match flag.as_str() {
            "--seconds-per-target" => {
                let text = value(&flag)?;
                args.seconds = text
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| {
                        format!("--seconds-per-target: expected 0 to 86400 seconds, got {text:?}")
                    })?;
            }
            "--seed" => args.seed = number(&flag, value(&flag)?)?,
            "--max-execs" => args.max_execs = number(&flag, value(&flag)?)?,
            "--timeout-ms" => args.timeout_ms = number(&flag, value(&flag)?)?.max(1),
            "--target" => args.targets.extend(value(&flag)?.split(',').map(str::to_string)),
            "--findings" => args.findings = Some(PathBuf::from(value(&flag)?)),
            "--data" => args.data = PathBuf::from(value(&flag)?),
            "--list" => args.list = true,
            "--no-header" => args.header = false,
            "--save-current" => args.save_current = Some(PathBuf::from(value(&flag)?)),
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let all = targets(&args.data);
    if args.list {
        for t in &all {
            println!("{}", t.name);
        }
        return ExitCode::SUCCESS;
    }
    for name in &args.targets {
        if !all.iter().any(|t| t.name == name) {
            let known: Vec<&str> = all.iter().map(|t| t.name).collect();
            eprintln!("unknown target {name:?}; known: {}", known.join(", "));
            return ExitCode::from(2);
        }
    }
    let config = Config {
        seed: args.seed,
        time_per_target: Duration::from_secs_f64(args.seconds),
        max_execs: args.max_execs,
        call_timeout: Duration::from_millis(args.timeout_ms),
        save_current: args.save_current.clone(),
    };
    quiet_panics();
    let mut findings = 0usize;
    if args.header {
        println!(
            "{:<15} {:>10} {:>9} {:>9} {:>7} {:>9} {:>11} {:>10} {:>8}",
            "target", "execs", "ok", "errors", "panics", "timeouts", "violations", "bad-error", "seconds"
        );
    }
    for target in all.iter().filter(|t| args.targets.is_empty() || args.targets.iter().any(|n| n == t.name)) {
        let report = run_target(target, &config);
        println!(
            "{:<15} {:>10} {:>9} {:>9} {:>7} {:>9} {:>11} {:>10} {:>8.1}",
            report.target,
            report.execs,
            report.ok,
            report.distinct_errors,
            report.panics,
            report.timeouts,
            report.limit_violations,
            report.bad_errors,
            report.elapsed.as_secs_f64()
        );
        for (i, finding) in report.findings.iter().enumerate() {
            findings += 1;
            println!("  FINDING {:?} in {}: {}", finding.kind, finding.target, finding.detail);
            println!("    reproducer: {}", escape(&finding.input));
            if let Some(dir) = &args.findings {
                let path = dir.join(format!("{}-{:?}-{i}.bin", finding.target, finding.kind).to_lowercase());
                let written =
                    std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &finding.input));
                match written {
                    Ok(()) => println!("    written to {}", path.display()),
                    Err(e) => eprintln!("    cannot write {}: {e}", path.display()),
                }
            }
        }
    }
    if findings > 0 {
        println!("{findings} finding(s)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
