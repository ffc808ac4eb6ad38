#!/usr/bin/env python3
"""Where a cotenant run first departs from Gavel's: per-job completion times against
Gavel's `.jct` file, and the rounds Gavel ran the first differing jobs in, from its
scheduling log.

Usage:
  scripts/gavel-log-compare.py JOBS_CSV GAVEL_JCT [GAVEL_LOG.gz] [--policy NAME]
      [--tolerance SECONDS] [--show N]

JOBS_CSV is cotenant's `--jobs-csv` output (the policy defaults to gavel-fifo);
GAVEL_JCT the `Job N: SECONDS` lines of Gavel's simulator (e.g.
../shared/traces/gavel-reference/synth3000_lam600_fifo_c8-8-8.jct); GAVEL_LOG its
scheduling log (`[Micro-task scheduled]` lines). Prints the mean JCT over prefixes of
the job list (does a difference grow with length?), how many jobs differ by more than
the tolerance, and for the first N of them Gavel's completion time against ours and the
rounds Gavel scheduled each in (time, GPU type, worker ids, priority), to set beside
`cotenant sim ... --explain JOB`. Plain python3, no packages.
"""
import argparse
import csv
import gzip
import re
import statistics

SCHEDULED = re.compile(
    r"^scheduler:INFO \[([\d.]+)\] \[Micro-task scheduled\]\tJob ID: (\d+)\t"
    r"Worker type: (\w+)\tWorker ID\(s\): ([\d,]+)\tPriority: ([\d.e+-]+)"
)


def gavel_jcts(path):
    out = {}
    for line in open(path):
        m = re.match(r"Job (\d+): ([\d.]+)", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def gavel_rounds(path, jobs):
    """Rounds (time, type, workers, priority) Gavel scheduled each of `jobs` in."""
    rounds = {j: [] for j in jobs}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            m = SCHEDULED.match(line)
            if m and int(m.group(2)) in rounds:
                rounds[int(m.group(2))].append((float(m.group(1)), m.group(3), m.group(4), m.group(5)))
    return rounds


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jobs_csv")
    p.add_argument("gavel_jct")
    p.add_argument("gavel_log", nargs="?")
    p.add_argument("--policy", default="gavel-fifo")
    p.add_argument("--tolerance", type=float, default=5.0, help="seconds (default 5)")
    p.add_argument("--show", type=int, default=3)
    a = p.parse_args()

    gavel = gavel_jcts(a.gavel_jct)
    ours, arrival = {}, {}
    for row in csv.DictReader(open(a.jobs_csv)):
        if row["policy"] == a.policy:
            ours[int(row["job"])] = float(row["jct_s"])
            arrival[int(row["job"])] = float(row["arrival_s"])
    jobs = sorted(set(gavel) & set(ours))
    if not jobs:
        raise SystemExit(f"no job of policy {a.policy} in both files")
    for n in sorted({min(len(jobs), k) for k in (300, 1000, 2000, 3000, len(jobs))}):
        g = statistics.mean(gavel[j] for j in jobs[:n])
        c = statistics.mean(ours[j] for j in jobs[:n])
        print(f"first {n:>6,} jobs: Gavel {g:12,.1f} s  cotenant {c:12,.1f} s  {(c - g) / g * 100:+7.2f}%")
    differ = [j for j in jobs if abs(ours[j] - gavel[j]) > a.tolerance]
    print(f"{len(differ):,} of {len(jobs):,} jobs differ by more than {a.tolerance:g} s")
    shown = differ[: a.show]
    rounds = gavel_rounds(a.gavel_log, shown) if a.gavel_log else {}
    for j in shown:
        end_g, end_c = arrival[j] + gavel[j], arrival[j] + ours[j]
        print(f"job {j}: arrives {arrival[j]:,.1f}; ends at {end_g:,.2f} in Gavel, {end_c:,.2f} here")
        for t, gpu, workers, priority in rounds.get(j, []):
            print(f"    Gavel round at {t:14,.4f}: {gpu:>4} worker(s) {workers:<8} priority {priority}")


if __name__ == "__main__":
    main()
