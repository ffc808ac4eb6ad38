"""Helpers shared by scripts/topology-arnold.sh and scripts/topology-vclos.sh: read one
run's summary JSON and per-job CSV, and format a mean with its spread over seeds."""
import csv
import json
import os
import statistics


def read_run(runs, tag):
    """(the run's summary, its topology entry, speed while running of each job):
    work over time from first start to end (FIFO never preempts), 1.0 = the reference."""
    summary = json.load(open(os.path.join(runs, tag + ".json")))
    rows = list(csv.DictReader(open(os.path.join(runs, tag + ".csv"))))
    speeds = [float(r["work"]) / (float(r["end_s"]) - float(r["first_start_s"]))
              for r in rows if r["first_start_s"] and r["end_s"] and float(r["end_s"]) > float(r["first_start_s"])]
    return summary["runs"][0], summary["topology"][0], speeds, rows


def ms(values, fmt="{:.2f}"):
    """Mean ± standard deviation (the mean alone for one value)."""
    mean = statistics.mean(values)
    if len(values) < 2:
        return fmt.format(mean)
    return fmt.format(mean) + " ± " + fmt.replace("+", "").format(statistics.stdev(values))
