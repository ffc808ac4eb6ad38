//! `GET /metrics` in the Prometheus text format: jobs by status, nodes up,
//! submissions accepted and refused, and a summary of request latency.

use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use crate::api::JobStatus;

/// Latencies kept for the quantiles (the most recent ones).
const WINDOW: usize = 4096;

#[derive(Default)]
pub(super) struct Metrics {
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub rate_limited: AtomicU64,
    latency: Mutex<Latency>,
}

#[derive(Default)]
struct Latency {
    recent_us: VecDeque<u64>,
    sum_us: u64,
    count: u64,
}

impl Metrics {
    fn record(&self, micros: u64) {
        let mut latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        if latency.recent_us.len() == WINDOW {
            latency.recent_us.pop_front();
        }
        latency.recent_us.push_back(micros);
        latency.sum_us = latency.sum_us.saturating_add(micros);
        latency.count += 1;
    }

    pub fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Times every request (to its response head: a streamed body is not waited for).
pub(super) async fn time_request(State(app): State<App>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let response = next.run(request).await;
    app.0.metrics.record(started.elapsed().as_micros() as u64);
    response
}

pub(super) async fn render(State(app): State<App>) -> Response {
    let controller = app.controller();
    let counts = controller.status_counts();
    let nodes = controller.nodes();
    let metrics = &app.0.metrics;
    let mut out = String::new();
    out.push_str("# HELP cotenant_jobs Jobs by status.\n# TYPE cotenant_jobs gauge\n");
    for (status, n) in JobStatus::ALL.iter().zip(counts) {
        let _ = writeln!(out, "cotenant_jobs{{status=\"{}\"}} {n}", status.as_str());
    }
    let _ = writeln!(
        out,
        "# HELP cotenant_pending_jobs Jobs waiting in the queue.\n# TYPE cotenant_pending_jobs gauge\ncotenant_pending_jobs {}",
        counts[0]
    );
    let _ = writeln!(
        out,
        "# HELP cotenant_nodes Declared nodes by state.\n# TYPE cotenant_nodes gauge\ncotenant_nodes{{state=\"up\"}} {}\ncotenant_nodes{{state=\"down\"}} {}",
        nodes.iter().filter(|n| n.state == "up").count(),
        nodes.iter().filter(|n| n.state != "up").count()
    );
    out.push_str("# HELP cotenant_submissions_total Submissions by outcome.\n# TYPE cotenant_submissions_total counter\n");
    for (result, counter) in [
        ("accepted", &metrics.accepted),
        ("refused", &metrics.refused),
        ("rate_limited", &metrics.rate_limited),
    ] {
        let _ = writeln!(
            out,
            "cotenant_submissions_total{{result=\"{result}\"}} {}",
            counter.load(Ordering::Relaxed)
        );
    }
    let (mut recent, sum_us, count) = {
        let latency = metrics.latency.lock().unwrap_or_else(|e| e.into_inner());
        (latency.recent_us.iter().copied().collect::<Vec<u64>>(), latency.sum_us, latency.count)
    };
    recent.sort_unstable();
    out.push_str(
        "# HELP cotenant_http_request_duration_seconds Time to answer a request (quantiles over the last 4096).\n# TYPE cotenant_http_request_duration_seconds summary\n",
    );
    for q in [0.5, 0.9, 0.99] {
        let value =
            quantile(&recent, q).map_or_else(|| "NaN".to_string(), |us| format!("{}", us as f64 / 1e6));
        let _ = writeln!(out, "cotenant_http_request_duration_seconds{{quantile=\"{q}\"}} {value}");
    }
    let _ = writeln!(out, "cotenant_http_request_duration_seconds_sum {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "cotenant_http_request_duration_seconds_count {count}");
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}

/// The nearest-rank quantile of sorted values.
fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let values: Vec<u64> = (1..=10).collect();
        assert_eq!(quantile(&values, 0.5), Some(5));
        assert_eq!(quantile(&values, 0.9), Some(9));
        assert_eq!(quantile(&values, 0.99), Some(10));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
