//! Small traces whose JCTs, queueing delays and preemptions were worked out on
//! paper; the derivation is in each test's comment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{jobs, outcome, run_placed, run_with, FREE_PREEMPTION};
use cotenant_core::placement::Placement;
use cotenant_core::Span;
use cotenant_sim::Overheads;

#[test]
fn fifo_three_jobs_two_gpus() {
    // J0 takes both GPUs 0-10. At 10, J1 (1 GPU) runs 10-15 and J2 (1 GPU) 10-13.
    let r = run_with("fifo", &[], 1, 2, &jobs(&[(0, 2, 10), (1, 1, 5), (2, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (14.0, 9.0, 0), (11.0, 8.0, 0)]);
}

#[test]
fn fifo_head_of_line_blocks() {
    // J0 0-10 on one GPU; J1 needs 2 and blocks J2 even though a GPU is free.
    // J1 runs 10-15, then J2 15-17.
    let r = run_with("fifo", &[], 1, 2, &jobs(&[(0, 1, 10), (1, 2, 5), (2, 1, 2)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (14.0, 9.0, 0), (15.0, 13.0, 0)]);
}

#[test]
fn easy_backfill_fills_hole_without_delaying_head() {
    // Head J1 is reserved for t=10 (J0's end). J2 (2 s) ends at 4 <= 10: backfilled at 2.
    let r = run_with("fifo-backfill", &[], 1, 2, &jobs(&[(0, 1, 10), (1, 2, 5), (2, 1, 2)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (14.0, 9.0, 0), (2.0, 0.0, 0)]);
}

#[test]
fn easy_backfill_refuses_job_that_would_delay_head() {
    // J2 (20 s) would end at 22 > 10 and the head needs every GPU: it waits until J1 ends at 15.
    let r =
        run_with("fifo-backfill", &[], 1, 2, &jobs(&[(0, 1, 10), (1, 2, 5), (2, 1, 20)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (14.0, 9.0, 0), (33.0, 13.0, 0)]);
}

#[test]
fn sjf_picks_shortest_waiting_job() {
    // One GPU. J0 0-10 (non-preemptive). At 10 the shortest waiting is J2: 10-13; J1 13-21.
    let r = run_with("sjf", &[], 1, 1, &jobs(&[(0, 1, 10), (1, 1, 8), (2, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (20.0, 12.0, 0), (11.0, 8.0, 0)]);
}

#[test]
fn sjf_starts_every_job_that_fits() {
    // Two GPUs. J0 (2 GPUs) 0-4. At 4: J2 (1 s) and J3 (2 s) are shortest and both fit: 4-5, 4-6.
    // At 5 one GPU frees; J1 needs 2: waits for 6, runs 6-16.
    let r =
        run_with("sjf", &[], 1, 2, &jobs(&[(0, 2, 4), (1, 2, 10), (1, 1, 1), (2, 1, 2)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(4.0, 0.0, 0), (15.0, 5.0, 0), (4.0, 3.0, 0), (4.0, 2.0, 0)]);
}

#[test]
fn srtf_preempts_longer_job() {
    // One GPU. At 2, J1 (3 s) beats J0's remaining 8 s: J0 preempted, J1 2-5, J0 resumes 5-13.
    let r = run_with("srtf", &[], 1, 1, &jobs(&[(0, 1, 10), (2, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(13.0, 0.0, 1), (3.0, 0.0, 0)]);
}

#[test]
fn srtf_preemption_loses_work_since_last_checkpoint() {
    // Checkpoint every 4 s, restore 1 s. At 6, J1 (3 s) beats J0's remaining 4 s.
    // J0 keeps its checkpoint at 4 s (2 s of work lost). J1 runs 6-9. J0 resumes at 9,
    // restores until 10, then runs its 6 s left: ends at 16. Lost GPU-time: 2 s + 1 s restore.
    let overheads =
        Overheads { checkpoint_interval: Span::from_secs(4), restore_overhead: Span::from_secs(1) };
    let r = run_with("srtf", &[], 1, 1, &jobs(&[(0, 1, 10), (6, 1, 3)]), overheads);
    assert_eq!(outcome(&r), vec![(16.0, 0.0, 1), (3.0, 0.0, 0)]);
    assert_eq!(r.jobs[0].lost_gpu_us, 3_000_000);
    assert_eq!(r.jobs[0].held_gpu_us, 13_000_000);
}

#[test]
fn srtf_keeps_job_when_newcomer_is_longer() {
    // Two GPUs, J0 (2 GPUs, 5 s). J1 (1 GPU, 9 s) at 1 cannot beat J0's 4 s left: waits, runs 5-14.
    let r = run_with("srtf", &[], 1, 2, &jobs(&[(0, 2, 5), (1, 1, 9)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(5.0, 0.0, 0), (13.0, 4.0, 0)]);
}

#[test]
fn las_new_job_preempts_job_with_more_service() {
    // One GPU, quantum 5 s. At 2, J1 (0 GPU-s) beats J0 (2 GPU-s): J1 runs 2-6.
    // At 6 J0 resumes with 8 s left: ends at 14.
    let r = run_with("las", &[("quantum", "5s")], 1, 1, &jobs(&[(0, 1, 10), (2, 1, 4)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(14.0, 0.0, 1), (4.0, 0.0, 0)]);
}

#[test]
fn las_round_boundaries_alternate_equal_jobs() {
    // One GPU, quantum 3 s, two 6 s jobs at 0. J0 runs 0-3; at 3 J1 (0) beats J0 (3): J1 3-6.
    // At 6 both have 3 GPU-s; the tie goes to the lower id: J0 6-9, then J1 9-12.
    let r = run_with("las", &[("quantum", "3s")], 1, 1, &jobs(&[(0, 1, 6), (0, 1, 6)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(9.0, 0.0, 1), (12.0, 3.0, 1)]);
}

#[test]
fn tiresias_demotes_at_threshold_crossing() {
    // Threshold 4 GPU-s. J0 (2 GPUs) crosses it at t=2 and drops to queue 1. J1 (queue 0,
    // waiting since 1 behind J0 by arrival) then runs 2-5 while one GPU idles (J0 needs
    // two); J0 resumes at 5 with 8 s left and ends at 13.
    let opts = [("thresholds", "4s"), ("knob", "0")];
    let r = run_with("tiresias", &opts, 1, 2, &jobs(&[(0, 2, 10), (1, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(13.0, 0.0, 1), (4.0, 1.0, 0)]);
}

#[test]
fn tiresias_fifo_within_a_queue() {
    // Threshold 100 GPU-s is never crossed: plain FIFO by arrival, no preemption.
    let opts = [("thresholds", "100s"), ("knob", "0")];
    let r = run_with("tiresias", &opts, 1, 1, &jobs(&[(0, 1, 5), (1, 1, 1), (2, 1, 1)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(5.0, 0.0, 0), (5.0, 4.0, 0), (5.0, 4.0, 0)]);
}

#[test]
fn tiresias_keeps_a_running_job_ahead_of_its_own_queue() {
    // One node of 2 GPUs, threshold 100 GPU-s (never crossed: one queue). J0 (1 GPU, 3 s)
    // runs 0-3. J1 (2 GPUs, 10 s) at 1 does not fit and is skipped; J2 (1 GPU, 10 s) at 2
    // takes the free GPU. At 3 J0 ends: the older J1 would fit if J2 stopped, but a running
    // job stays ahead of the waiting jobs of its own queue (Tiresias' semantics; ranking
    // by (queue, arrival) alone preempted J2 here). J2 runs to 12, then J1 12-22.
    let opts = [("thresholds", "100s"), ("knob", "0")];
    let r = run_with("tiresias", &opts, 1, 2, &jobs(&[(0, 1, 3), (1, 2, 10), (2, 1, 10)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(3.0, 0.0, 0), (21.0, 11.0, 0), (10.0, 0.0, 0)]);
}

#[test]
fn tiresias_starvation_guard_promotes_waiting_jobs() {
    // Threshold 1 GPU-s, knob 1, one GPU; J0 (3 s) at 0, J1 (5 s) at 1, J2 (5 s) at 2.
    // A running job is demoted to the back of queue 1 after 1 s of service since its last
    // promotion; a waiting job in queue 1 that ran x s since its last promotion is promoted
    // to the back of queue 0 after waiting x s (knob 1). Each second, in arrival order:
    // at 1 J1 arrives, J0 is demoted: J1 runs, J0 waits | 2: J2 arrives, then J0 is
    // promoted (behind J2) and J1 demoted: J2 runs | 3: J1 promoted, J2 demoted: J0 (ahead
    // in queue 0) runs | 4: J0 demoted, J2 promoted: J1 runs | 5: J0 promoted, J1 demoted:
    // J2 runs | 6: J1 promoted, J2 demoted: J0 runs its last second, ends at 7 (JCT 7) |
    // 7-12: J1 and J2 alternate the same way (J1 7-8, J2 8-9, J1 9-10, J2 10-11, J1 11-12:
    // J1's fifth second, JCT 11) | 12-13 J2's fifth second (JCT 11). Preemptions 2, 4, 4.
    let opts = [("thresholds", "1s"), ("knob", "1")];
    let r = run_with("tiresias", &opts, 1, 1, &jobs(&[(0, 1, 3), (1, 1, 5), (2, 1, 5)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(7.0, 0.0, 2), (11.0, 0.0, 4), (11.0, 0.0, 4)]);
}

#[test]
fn tiresias_demotion_then_promotion() {
    // Threshold 2 GPU-s, knob 1, one GPU; J0 (4 s) at 0, J1 (4 s) at 1.
    // 0-2 J0; J1 waits behind it in queue 0 (a running job keeps its place ahead). At 2 J0
    // has 2 GPU-s: demoted to queue 1, where it ranks below J1: J1 runs 2-4, J0 waits
    // (ran 2 s since its promotion, so it is promoted after waiting 2 s). At 4 both timers
    // fire; in arrival order J0 is promoted to queue 0 (its service counted afresh) and J1
    // demoted: J0 runs 4-6 and ends (4 s done; JCT 6; 2 GPU-s since its promotion, so it
    // would have been demoted again just then). J1 waited 4-6 = its 2 s run: promoted at
    // 6, runs 6-8 and ends (JCT 7, queued 1 s before its first start). One preemption each.
    let opts = [("thresholds", "2s"), ("knob", "1")];
    let r = run_with("tiresias", &opts, 1, 1, &jobs(&[(0, 1, 4), (1, 1, 4)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(6.0, 0.0, 1), (7.0, 1.0, 1)]);
}

#[test]
fn fifo_consolidated_placement_on_two_nodes() {
    // 2 nodes x 2 GPUs. J0 and J1 (1 GPU each) best-fit onto node 0; J2 (2 GPUs) gets
    // node 1 at 1 and runs 1-6; J3 (2 GPUs) at 2 finds no room until J2 ends: 6-9.
    let shape = [(0, 1, 10), (0, 1, 4), (1, 2, 5), (2, 2, 3)];
    let r = run_with("fifo", &[], 2, 2, &jobs(&shape), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(10.0, 0.0, 0), (4.0, 0.0, 0), (5.0, 0.0, 0), (7.0, 4.0, 0)]);
}

#[test]
fn strict_consolidation_waits_where_consolidated_spans_nodes() {
    // 2 nodes x 2 GPUs, FIFO. At 0: J0 (1 GPU) -> node 0, J1 (2 GPUs) -> node 1, J2 (1 GPU)
    // -> node 0. J1 ends at 3; J3 (1 GPU, arrived 1) takes a GPU of node 1, 3-11. J4 (2 GPUs,
    // arrived 2) waits. At 6 J2 ends: one free GPU on each node.
    // Consolidated: J4 spans both nodes, 6-8 (JCT 6). Strict: it waits for a whole node:
    // node 0 empties when J0 ends at 10, so 10-12 (JCT 10).
    let shape = [(0, 1, 10), (0, 2, 3), (0, 1, 6), (1, 1, 8), (2, 2, 2)];
    let loose = run_with("fifo", &[], 2, 2, &jobs(&shape), FREE_PREEMPTION);
    let expected = vec![(10.0, 0.0, 0), (3.0, 0.0, 0), (6.0, 0.0, 0), (10.0, 2.0, 0), (6.0, 4.0, 0)];
    assert_eq!(outcome(&loose), expected);
    let strict = run_placed("fifo", &[], Placement::StrictConsolidated, 2, 2, &jobs(&shape), FREE_PREEMPTION);
    assert_eq!(outcome(&strict)[4], (10.0, 8.0, 0));
}

#[test]
fn srtf_preempts_a_wide_job_for_two_short_ones() {
    // Two GPUs. At 1, J1 (2 s) and J2 (3 s) both beat J0's 9 s left and take a GPU each:
    // J0 (2 GPUs) is preempted. At 3 only one GPU is free: J0 still waits. J2 ends at 4,
    // J0 resumes and its 9 s end at 13.
    let r = run_with("srtf", &[], 1, 2, &jobs(&[(0, 2, 10), (1, 1, 2), (1, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(13.0, 0.0, 1), (2.0, 0.0, 0), (3.0, 0.0, 0)]);
}

#[test]
fn las_wide_job_yields_its_gpus_to_a_newcomer() {
    // Two GPUs, quantum 100 s. At 4, J0 has 8 GPU-s and J1 none: J1 takes one GPU, and J0
    // (needs both) is preempted; one GPU idles 4-7. J0 resumes at 7 with 6 s left: ends 13.
    let r = run_with("las", &[("quantum", "100s")], 1, 2, &jobs(&[(0, 2, 10), (4, 1, 3)]), FREE_PREEMPTION);
    assert_eq!(outcome(&r), vec![(13.0, 0.0, 1), (3.0, 0.0, 0)]);
}
