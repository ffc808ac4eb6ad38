//! `cotenant replay-check --db PATH`: replays a server's journal into a fresh
//! engine and checks that it issues exactly the commands the live server
//! recorded (`cotenant_live::history::replay_check`). Exits non-zero on any
//! difference, naming the journal row.

use anyhow::{bail, Result};
use cotenant_live::history;

#[derive(Debug, clap::Args)]
pub struct ReplayCheckArgs {
    /// The server's database: its SQLite file (`cotenant server --db`) or a postgres:// URL.
    #[arg(long, value_name = "PATH|URL")]
    pub db: String,
}

pub fn run(args: &ReplayCheckArgs) -> Result<()> {
    let report = crate::journal_trace::block_on(history::replay_check(&args.db))??;
    println!(
        "replayed {} journal entries in {:.1} ms; compared {} commands with the recorded ones",
        report.entries,
        report.elapsed.as_secs_f64() * 1e3,
        report.commands_compared
    );
    if report.ok() {
        println!("ok: the replay issued exactly the commands the server recorded");
        return Ok(());
    }
    for mismatch in &report.mismatches {
        println!("mismatch: {mismatch}");
    }
    let shown = report.mismatches.len() as u64;
    if report.mismatch_count > shown {
        println!("... and {} more", report.mismatch_count - shown);
    }
    let first = report.mismatches.first().map_or(0, |m| m.seq);
    bail!(
        "{}: {} of {} commands differ from the recorded ones, the first at journal row {first}",
        args.db,
        report.mismatch_count,
        report.commands_compared
    )
}
