//! The `cotenant` binary: argument parsing and glue. Every decision lives in
//! the library crates; this file only wires flags to them.

use clap::{Parser, Subcommand};

mod analyze_cmd;
mod bench_cmd;
mod calibrate_cmd;
mod faults_args;
mod interference;
mod journal_trace;
mod live_cmd;
mod mig_args;
mod plan_train_cmd;
mod progress;
mod replay_check_cmd;
mod report_cmd;
mod serve_cmd;
mod serve_request;
mod serve_search_cmd;
mod sim_cmd;
mod sweep;
mod topology_args;
mod variability_args;
mod workload;

/// Help text of `cotenant --help`: what the tool is for (the crate description,
/// which clap would use by default, describes the code, not the tool).
const ABOUT: &str = "Simulate and compare scheduling policies for GPU clusters that many tenants share \
(replaying real traces such as Philly), and for multi-tenant LLM serving (schedulers, fairness, \
capacity planning).";

#[derive(Debug, Parser)]
#[command(name = "cotenant", version, about = ABOUT, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a trace (default: one week of Philly) on a modelled cluster under one or more policies.
    Sim(sim_cmd::SimArgs),
    /// List the scheduling policies, one line each.
    Policies,
    /// Measure simulator speed (default: the full Philly trace under every baseline policy, one core).
    ///
    /// Prints a Markdown table, one row per policy: wall time, events and jobs simulated per
    /// second, scheduling passes, mean JCT; then peak memory. --week times the default week
    /// only; --decision-latency instead times single scheduling decisions on a full
    /// 40,000-GPU cluster with 10,000 jobs waiting (p50/p99/max per policy and the commands
    /// each decision sent, with a progress bar). Time a --release build: debug timings say
    /// little.
    Bench(bench_cmd::BenchArgs),
    /// Simulate multi-tenant LLM serving (default: the bundled Azure code + conv traces as two tenants).
    ServeSim(Box<serve_cmd::ServeSimArgs>),
    /// Make one self-contained HTML report (figures and tables) from saved results.
    ///
    /// Reads any mix of `cotenant sim --save` files and sweep results.json files; with
    /// --figures DIR also writes every figure as SVG and PNG. docs/report.md describes
    /// each figure.
    Report(report_cmd::ReportArgs),
    /// Run a grid of sim (or serve-sim) runs: policies x options x loads x seeds, in parallel,
    /// resumable, or as a Slurm job array (docs/sweep.md).
    ///
    /// `cotenant sweep [sim] --policy fifo,las --load 0.8,1,1.2 --seeds 0..3 --out DIR` writes
    /// DIR/results.csv and DIR/results.json, one row per cell; `cotenant sweep serve
    /// --scheduler fcfs,vtc ...` sweeps serve-sim. `--emit slurm DIR` writes an sbatch job
    /// array instead; `--merge DIR` assembles its parts.
    Sweep(Box<sweep::SweepArgs>),
    /// Plan capacity: the GPUs and replicas a serving load needs (`plan serve`).
    Plan {
        #[command(subcommand)]
        what: PlanCommand,
    },
    /// Characterize a job trace (default: the Philly week) or request traces (--requests): jobs
    /// and GPU-time by size, durations, arrivals by hour and weekday, tenants, demand over time,
    /// token distributions and request rate. Text, --json or --html.
    Analyze(Box<analyze_cmd::AnalyzeArgs>),
    /// Compare the serving roofline with measured kernel and NCCL times (Vidur's profiles), per
    /// operator, layer, iteration and collective, before and after fitting per-GPU parameters.
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Replay a server's journal into a fresh engine and check it issues exactly the recorded commands.
    ReplayCheck(replay_check_cmd::ReplayCheckArgs),
    /// The live face: server, agent, up and the client commands (submit, jobs, show, ...).
    #[command(flatten)]
    Live(live_cmd::LiveCommand),
}

#[derive(Debug, Subcommand)]
enum PlanCommand {
    /// GPUs and replicas needed to serve a request load at an SLO.
    Serve(Box<serve_cmd::PlanServeArgs>),
    /// Parallel layouts of a training run, best first: iteration time, TFLOP/s per GPU, memory, days (docs/training.md).
    Train(Box<plan_train_cmd::PlanTrainArgs>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Policies => {
            list_policies();
            Ok(())
        }
        Command::Bench(args) => bench_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::ServeSim(args) => serve_cmd::run_serve_sim(*args),
        Command::Sweep(args) => sweep::run(*args),
        Command::Plan { what: PlanCommand::Serve(args) } => serve_cmd::run_plan_serve(*args),
        Command::Plan { what: PlanCommand::Train(args) } => plan_train_cmd::run(*args),
        Command::Analyze(args) => analyze_cmd::run(*args),
        Command::Calibrate(args) => calibrate_cmd::run(&args),
        Command::ReplayCheck(args) => replay_check_cmd::run(&args),
        Command::Live(command) => live_cmd::run(command),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) if error.is::<sim_cmd::Unhealthy>() => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn list_policies() {
    let width = cotenant_policies::policies().iter().map(|p| p.name.len()).max().unwrap_or(0);
    for policy in cotenant_policies::policies() {
        println!("{:width$}  {}", policy.name, policy.summary);
    }
}
