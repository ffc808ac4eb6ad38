//! The controller's clocks: the heartbeat watchdog and the policy's wakeup timer.
//! Both only send requests to the engine task; neither changes state itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::engine::Op;
use super::{call, lock, now_us, Core};

/// How long the wakeup timer waits before firing again for a deadline it
/// already fired for (the policy kept it in the past).
const REFIRE_DELAY: Duration = Duration::from_millis(50);
/// Longest the wakeup timer sleeps without re-reading the deadline.
const IDLE_RECHECK: Duration = Duration::from_secs(60);

/// Declares lost each up node whose agent was silent longer than the timeout.
pub(super) async fn watchdog(core: Arc<Core>, mut stop: watch::Receiver<bool>) {
    let period = (core.heartbeat_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep(period) => {}
        }
        let up: Vec<u32> = {
            let state = lock(&core.state);
            state.live.nodes().iter().enumerate().filter(|(_, n)| n.up).map(|(i, _)| i as u32).collect()
        };
        let now = Instant::now();
        let lost: Vec<u32> = {
            let mut beats = lock(&core.beats);
            up.into_iter()
                .filter(|&node| {
                    let Some(beat) = beats.get_mut(node as usize) else { return false };
                    let last = *beat.last.get_or_insert(now);
                    let silent = beat.polls == 0
                        && !beat.lost_sent
                        && now.duration_since(last) > core.heartbeat_timeout;
                    if silent {
                        beat.lost_sent = true;
                    }
                    silent
                })
                .collect()
        };
        for node in lost {
            tracing::warn!(
                node,
                timeout_ms = core.heartbeat_timeout.as_millis() as u64,
                "agent silent; node lost"
            );
            if let Err(refusal) = call(&core, Op::NodeLost { node }).await {
                tracing::warn!(node, %refusal, "node lost not journaled");
            }
        }
    }
}

/// Journals `Wakeup` when the policy's timer (`Live::next_wakeup_us`) passes.
pub(super) async fn wakeups(core: Arc<Core>, mut stop: watch::Receiver<bool>) {
    let mut fired_for: Option<u64> = None;
    loop {
        let next = lock(&core.state).live.next_wakeup_us();
        let now = now_us();
        let sleep = match next {
            Some(at) if at <= now && fired_for != Some(at) => {
                fired_for = Some(at);
                if let Err(refusal) = call(&core, Op::Wakeup).await {
                    tracing::debug!(%refusal, "wakeup not journaled");
                }
                continue;
            }
            Some(at) if at <= now => REFIRE_DELAY,
            Some(at) => Duration::from_micros(at - now),
            None => IDLE_RECHECK,
        };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = core.batch_done.notified() => {}
            _ = tokio::time::sleep(sleep) => {}
        }
    }
}
