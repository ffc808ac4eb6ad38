//! `--emit slurm DIR`: an sbatch job-array script, one array task per chunk of
//! cells, each task running this same sweep with `--cells I..J --out DIR`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::store::{write_atomic, Store};
use super::ExecArgs;

/// Flags that the array tasks set themselves (or that only the emitting run
/// reads), with the number of values each takes.
const TASK_FLAGS: [(&str, usize); 6] =
    [("--emit", 2), ("--chunk", 1), ("--cpus-per-task", 1), ("--threads", 1), ("--out", 1), ("--cells", 1)];

/// Writes `DIR/sweep.sbatch` (and records the grid in DIR); prints how to
/// submit and merge.
pub fn emit(cells: usize, canonical: &Value, emit: &[String], exec: &ExecArgs) -> Result<()> {
    let [format, dir] = emit else { bail!("--emit: expected FORMAT DIR, e.g. --emit slurm sweep-out") };
    if format != "slurm" {
        bail!("--emit {format}: unknown format (supported: slurm)");
    }
    if exec.chunk == 0 {
        bail!("--chunk 0: each array task needs at least one cell");
    }
    if exec.cpus_per_task == 0 || exec.cpus_per_task > cotenant_core::limits::MAX_THREADS {
        bail!(
            "--cpus-per-task {}: must be between 1 and {}",
            exec.cpus_per_task,
            cotenant_core::limits::MAX_THREADS
        );
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let dir = absolute(&cwd, Path::new(dir));
    let store = Store::new(&dir);
    store.open(canonical)?;
    std::fs::create_dir_all(dir.join("slurm"))
        .with_context(|| format!("creating {}", dir.join("slurm").display()))?;
    let exe = std::env::current_exe().context("locating the cotenant binary")?;
    let args = task_args(std::env::args().skip(1).collect());
    let tasks = cells.div_ceil(exec.chunk);
    let script = script(&exe, &cwd, &dir, &args, cells, exec.chunk, exec.cpus_per_task, tasks);
    let path = dir.join("sweep.sbatch");
    write_atomic(&path, script.as_bytes())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))?;
    }
    println!(
        "wrote {}: {tasks} array task(s) of up to {} cell(s) each, {cells} cells in all, {} CPU(s) per task",
        path.display(),
        exec.chunk,
        exec.cpus_per_task
    );
    if tasks > 1001 {
        println!(
            "note: {tasks} array tasks exceed Slurm's default MaxArraySize (1001); raise --chunk or the cluster's limit"
        );
    }
    println!("submit:  sbatch {}", path.display());
    println!("then, when every task has finished:  {} sweep --merge {}", exe.display(), dir.display());
    Ok(())
}

fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// This run's arguments (after the program name) without the flags the tasks set.
pub fn task_args(argv: Vec<String>) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip = 0;
    for arg in argv {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if let Some((_, values)) = TASK_FLAGS.iter().find(|(flag, _)| arg == *flag) {
            skip = *values;
            continue;
        }
        if let Some((_, values)) = TASK_FLAGS.iter().find(|(flag, _)| arg.starts_with(&format!("{flag}="))) {
            skip = values - 1;
            continue;
        }
        kept.push(arg);
    }
    kept
}

/// Single-quoted for sh.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[allow(clippy::too_many_arguments)]
fn script(
    exe: &Path,
    cwd: &Path,
    dir: &Path,
    args: &[String],
    cells: usize,
    chunk: usize,
    cpus: usize,
    tasks: usize,
) -> String {
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    let dir_text = dir.display().to_string();
    format!(
        r#"#!/bin/bash
# Written by `cotenant sweep --emit slurm`: {cells} cells in {tasks} array task(s) of up to {chunk},
# each running the sweep recorded in {dir_text}/grid.json on its cells.
#   submit:                        sbatch {dir_q}/sweep.sbatch
#   when every task has finished:  {exe_q} sweep --merge {dir_q}
# A task that fails can be rerun alone (sbatch --array=K ...): finished cells are skipped.
#SBATCH --job-name=cotenant-sweep
#SBATCH --array=0-{last_task}
#SBATCH --ntasks=1
#SBATCH --cpus-per-task={cpus}
#SBATCH --chdir={cwd}
#SBATCH --output={dir_text}/slurm/task-%A_%a.out
set -euo pipefail
CHUNK={chunk}
CELLS={cells}
first=$(( SLURM_ARRAY_TASK_ID * CHUNK ))
last=$(( first + CHUNK ))
if (( last > CELLS )); then last=$CELLS; fi
exec {exe_q} {args} --cells "$first..$last" --out {dir_q} --threads {cpus}
"#,
        last_task = tasks.saturating_sub(1),
        cwd = cwd.display(),
        dir_q = quote(&dir_text),
        exe_q = quote(&exe.display().to_string()),
        args = args.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_args_drop_the_flags_tasks_set() {
        let argv: Vec<String> = [
            "sweep",
            "--policy",
            "fifo",
            "--emit",
            "slurm",
            "d",
            "--chunk=3",
            "--threads",
            "2",
            "--load",
            "1,2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(task_args(argv), vec!["sweep", "--policy", "fifo", "--load", "1,2"]);
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a'b"), "'a'\\''b'");
    }
}
