#!/usr/bin/env python3
"""A small, independent model of Tiresias's `dlas-gpu` scheduler (its simulator's
`dlas_sim_jobs(gputime=True, solve_starvation=KNOB)` in simulator/run_sim.py, commit
959f9b0 of SymbioticLab/Tiresias) with `--scheme=count`, written from a reading of its
semantics so that cotenant's `tiresias` policy can be compared with it on runs where jobs
are demoted and promoted. Standard library only; integer seconds throughout, as Tiresias.

Semantics modelled (see docs/experiments/tiresias-demotion.md for the full account):
  * Events: the next arrival time, the single earliest end time (all running jobs that
    end at that second), and the next "job jump" (a demotion or promotion timer). An
    arrival and an end at the same second are one event; a jump strictly earlier than
    both is an event of its own (nothing arrives or ends at it).
  * At each event: ended jobs leave; arrivals join the back of queue 0 (pending); then
    every runnable job is updated in arrival order: a running job adds the elapsed
    seconds to its executed time (since its last promotion) and to its total executed
    time, and is demoted at most one queue (to the back of the next queue) if
    executed * gpus >= the limit of its queue; a pending job adds the elapsed seconds to
    its pending time and, if it has executed since its last promotion, to its
    "last pending time"; a pending job in a queue below 0 that has run since its last
    promotion is promoted to the back of queue 0 when last_pending >= executed * knob
    (knob > 0), which zeroes executed and last_pending.
  * Then one pass over the queues in order and within each in list order: a job that
    fits in the GPUs still free is taken (started if pending), one that does not is
    skipped (preempted if running). Afterwards, in each queue, pending jobs move behind
    the running ones (order otherwise kept).
  * Next demotion timer of a running job in queue q (not the last): Tiresias computes
    now + ceil((limit[q] - executed) / gpus) with Python 2 integer division, i.e.
    now + floor((limit[q] - executed) / gpus), where executed is wall seconds, not
    GPU-seconds: for multi-GPU jobs the timer fires later than the true crossing (or,
    for a job with executed = 0, up to one second early, missing it). --exact-timer
    uses now + ceil((limit[q] - executed * gpus) / gpus) instead. Next promotion timer
    of a pending job in a queue below 0 with executed > 0: now + int(executed * knob -
    last_pending) when that is positive.

Usage:
  tiresias_model.py --trace 60_job.csv --gpus 8 [--limits 3250:7200] [--knob 0]
                    [--exact-timer] [--jobs-csv OUT.csv] [--json]
The per-job CSV has the columns of Tiresias's `*_job.csv` log.
"""

import argparse
import csv
import json
import math
import sys

INF = float("inf")


class Job:
    __slots__ = ("jid", "gpus", "submit", "duration", "running", "q", "executed",
                 "total", "checked", "pending", "last_pending", "start", "end",
                 "preempt", "resume", "promote", "demote", "overshoot", "stopped_at",
                 "promoted_in_wait")

    def __init__(self, jid, gpus, submit, duration):
        self.jid, self.gpus, self.submit, self.duration = jid, gpus, submit, duration
        self.running = False
        self.q = 0
        self.executed = 0       # wall seconds run since the last promotion (queue decision)
        self.total = 0          # wall seconds run in all
        self.checked = submit   # time of the last update
        self.pending = 0        # seconds spent waiting, in all
        self.last_pending = 0   # seconds waited while executed > 0, since the last promotion
        self.start = None
        self.end = None
        self.preempt = self.resume = self.promote = self.demote = 0
        self.overshoot = []     # GPU-seconds past the limit at each demotion
        self.stopped_at = None  # current-wait promotion: when the current wait began
        self.promoted_in_wait = False


def load_trace(path):
    jobs = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            jobs.append(Job(int(row["job_id"]), int(row["num_gpu"]), int(row["submit_time"]),
                            int(float(row["duration"]))))
    jobs.sort(key=lambda j: j.submit)  # stable: trace order among equal submit times
    return jobs


def demotion_timer(job, limit, now, exact):
    if exact:
        return now - ((job.executed * job.gpus - limit) // job.gpus)  # ceil division
    return now + (limit - job.executed) // job.gpus  # Python 2 int '/', floors


def simulate(jobs, total_gpus, limits, knob, exact, arrival_order=False, current_wait=False):
    """exact: demotion timer at the true crossing. arrival_order: within a queue, running
    jobs then waiting ones, each by submit time (cotenant's order) instead of Tiresias's
    list order (order of entry into the queue). current_wait: cotenant's promotion rule
    (a waiting job that has run, in any queue, is promoted once per wait when its current
    wait reaches knob x its total run time) instead of Tiresias's."""
    nq = len(limits) + 1
    arrivals = []  # [(time, [jobs])] ascending
    for j in jobs:
        if arrivals and arrivals[-1][0] == j.submit:
            arrivals[-1][1].append(j)
        else:
            arrivals.append([j.submit, [j], []])  # time, jobs, end list handed to it
    ai = 0
    runnable = []
    queues = [[] for _ in range(nq)]
    done = []
    next_end = None  # (time, [jobs])
    jump = INF
    stats = {"events": 0, "jump_events": 0, "demotions": 0, "promotions": 0,
             "demotions_at_timer": 0, "missed_timers": 0, "past_next_limit": 0,
             "ended_unfinished": 0}
    now = None
    while ai < len(arrivals) or runnable:
        if ai >= len(arrivals) and next_end is None:
            raise SystemExit("error: a job wider than the cluster never runs")
        t_arr = arrivals[ai][0] if ai < len(arrivals) else INF
        t_end = next_end[0] if next_end else INF
        t = min(t_arr, t_end)
        arriving = []
        if t_arr == t:
            # Tiresias hands the arrival event the end list when both fall on one second,
            # and the arrival event keeps it: if a job jump comes first, the list stays
            # attached and is used when the arrival is finally handled, even if its jobs
            # have since been preempted or rescheduled (they then end early, unfinished).
            if t_end == t:
                arrivals[ai][2] = next_end[1]
            arriving = arrivals[ai][1]
            ending = arrivals[ai][2]
        else:
            ending = next_end[1]
        is_jump = t > jump
        if is_jump:
            t, ending, arriving = jump, [], []
            stats["jump_events"] += 1
        elif arriving:
            ai += 1
        if now is not None and t <= now and is_jump:
            raise SystemExit(f"error: a job jump at {t} does not advance time (Tiresias would loop)")
        now = t
        stats["events"] += 1

        for j in ending:
            if j.end is not None:
                raise SystemExit(f"error: job {j.jid} ends twice (Tiresias would fail here)")
            if j.total + (now - j.checked if j.running else 0) < j.duration:
                stats["ended_unfinished"] += 1
            j.end = now
            j.running = False
            runnable.remove(j)
            queues[j.q].remove(j)
            done.append(j)
        for j in arriving:
            runnable.append(j)
            j.q = 0
            queues[0].append(j)

        moved_before = stats["demotions"] + stats["promotions"]
        for j in runnable:
            dt = now - j.checked
            j.checked = now
            if j.running:
                j.total += dt
                j.executed += dt
                if j.q < nq - 1 and j.executed * j.gpus >= limits[j.q]:
                    j.overshoot.append(j.executed * j.gpus - limits[j.q])
                    queues[j.q].remove(j)
                    j.q += 1
                    queues[j.q].append(j)
                    j.demote += 1
                    stats["demotions"] += 1
                    stats["demotions_at_timer"] += is_jump
                    if j.q < nq - 1 and j.executed * j.gpus >= limits[j.q]:
                        stats["past_next_limit"] += 1
            else:
                j.pending += dt
                if j.executed > 0:
                    j.last_pending += dt
                if current_wait:
                    due = (knob > 0 and j.total > 0 and not j.promoted_in_wait
                           and now - j.stopped_at >= j.total * knob)
                else:
                    due = (knob > 0 and j.q > 0 and j.total > 0 and j.executed > 0
                           and j.last_pending >= int(j.executed * knob))
                if due:
                    j.promoted_in_wait = True
                    queues[j.q].remove(j)
                    j.q = 0
                    queues[0].append(j)
                    j.executed = 0
                    j.last_pending = 0
                    j.promote += 1
                    stats["promotions"] += 1

        if is_jump and stats["demotions"] + stats["promotions"] == moved_before:
            stats["missed_timers"] += 1  # a timer that fired before its job crossed

        if arrival_order:
            for queue in queues:
                queue.sort(key=lambda j: (not j.running, j.submit))
        free = total_gpus
        start, stop = [], []
        for queue in queues:
            for j in queue:
                if j.gpus <= free:
                    free -= j.gpus
                    if not j.running:
                        start.append(j)
                elif j.running:
                    stop.append(j)
        for j in stop:
            j.running = False
            j.preempt += 1
            j.stopped_at = now
            j.promoted_in_wait = False
        for j in start:
            j.running = True
            j.resume += 1
            if j.start is None:
                j.start = now
        for i, queue in enumerate(queues):
            queues[i] = [j for j in queue if j.running] + [j for j in queue if not j.running]

        next_end = None
        for j in runnable:
            if j.running:
                t_e = now + j.duration - j.total
                if next_end is None or t_e < next_end[0]:
                    next_end = (t_e, [j])
                elif t_e == next_end[0]:
                    next_end[1].append(j)

        jump = INF
        for j in runnable:
            if j.running:
                if j.q < nq - 1:
                    jump = min(jump, demotion_timer(j, limits[j.q], now, exact))
            elif current_wait:
                if knob > 0 and j.total > 0 and not j.promoted_in_wait:
                    jump = min(jump, max(now + 1, j.stopped_at + math.ceil(j.total * knob)))
            elif knob > 0 and j.q > 0 and j.total > 0 and j.executed > 0:
                wait = int(j.executed * knob - j.last_pending)
                if wait > 0:
                    jump = min(jump, now + wait)
    return done, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--gpus", type=int, required=True, help="GPUs in the cluster")
    ap.add_argument("--limits", default="3250:7200", help="queue limits in GPU-seconds, a:b:...")
    ap.add_argument("--knob", type=float, default=0, help="starvation knob (0: off)")
    ap.add_argument("--exact-timer", action="store_true",
                    help="demotion timer at the true crossing, not Tiresias's wall-time division")
    ap.add_argument("--queue-order", choices=["tiresias", "arrival"], default="tiresias",
                    help="order within a queue: Tiresias's list order, or cotenant's "
                         "(running first, then by submit time)")
    ap.add_argument("--promotion", choices=["tiresias", "current-wait"], default="tiresias",
                    help="starvation rule: Tiresias's, or cotenant's (current wait >= knob x "
                         "total run time, any queue, once per wait)")
    ap.add_argument("--jobs-csv", help="write a per-job log in Tiresias's format")
    ap.add_argument("--json", action="store_true", help="print a JSON summary")
    a = ap.parse_args()
    limits = [int(x) for x in a.limits.split(":")]
    if limits != sorted(limits) or any(x <= 0 for x in limits):
        ap.error("--limits must be positive and ascending")
    knob = int(a.knob) if a.knob == int(a.knob) else a.knob
    done, stats = simulate(load_trace(a.trace), a.gpus, limits, knob, a.exact_timer,
                           a.queue_order == "arrival", a.promotion == "current-wait")
    done_sorted = sorted(done, key=lambda j: (j.end, j.jid))
    if a.jobs_csv:
        with open(a.jobs_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "job_id", "num_gpu", "submit_time", "start_time", "end_time",
                        "executed_time", "JCT", "duration", "pending_time", "preempt", "resume",
                        "promote", "demote", "demotion_overshoot_gpu_s"])
            for j in done:  # completion order, as Tiresias logs
                w.writerow([j.end, j.jid, j.gpus, j.submit, j.start, j.end, j.end - j.start,
                            j.end - j.submit, j.duration, j.pending, j.preempt, j.resume,
                            j.promote, j.demote, ";".join(map(str, j.overshoot))])
    jcts = [j.end - j.submit for j in done_sorted]
    over = [o for j in done for o in j.overshoot]
    summary = {
        "limits": limits, "knob": knob, "exact_timer": a.exact_timer, "gpus": a.gpus,
        "queue_order": a.queue_order, "promotion": a.promotion,
        "jobs": len(done), "avg_jct": sum(jcts) / len(jcts),
        "makespan": max(j.end for j in done),
        "preemptions": sum(j.preempt for j in done),
        "mean_demotion_overshoot_gpu_s": (sum(over) / len(over)) if over else 0.0,
        **stats,
    }
    if a.json:
        json.dump(summary, sys.stdout, indent=1)
        print()
    else:
        print(f"avg JCT {summary['avg_jct']:.2f} s, makespan {summary['makespan']} s, "
              f"preemptions {summary['preemptions']}, demotions {stats['demotions']}, "
              f"promotions {stats['promotions']}")


if __name__ == "__main__":
    main()
