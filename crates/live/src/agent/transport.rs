//! The agent's side of the HTTP protocol: one request per call, the answer
//! sorted into what the caller does next (retry later, resync, give up).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::AgentError;
use crate::agent_api::{Desired, DesiredQuery, LogChunk, Register, Registered, Report};

/// Longest a request other than the long-poll may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a long-poll gets beyond the hold it asked for.
const POLL_SLACK: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub(super) enum SendError {
    /// 401 or 403: the token is wrong; retrying cannot help.
    #[error("refused ({status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// Another 4xx: this request is wrong; retrying it cannot help.
    #[error("rejected ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// 409 on a log chunk: the server's copy has this many bytes.
    #[error("the server has {have} bytes")]
    Conflict { have: u64 },
    /// No answer, a timeout, or a 5xx/429: try again later.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// No Debug: it holds the token.
#[derive(Clone)]
pub(super) struct Transport {
    http: reqwest::Client,
    base: String,
    authorization: String,
    /// Whether the last request reached the server (to log changes once).
    reachable: Arc<AtomicBool>,
}

#[derive(Deserialize)]
struct Have {
    have: u64,
}

impl Transport {
    pub fn new(server: &str, token: &str) -> Result<Transport, AgentError> {
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(AgentError::Server {
                server: server.to_string(),
                message: "expected an http:// or https:// URL".to_string(),
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| AgentError::Server { server: server.to_string(), message: error.to_string() })?;
        Ok(Transport {
            http,
            base,
            authorization: format!("Bearer {}", token.trim()),
            reachable: Arc::new(AtomicBool::new(true)),
        })
    }

    /// Registers, retrying while the server is unreachable (it may be starting).
    pub async fn register_until_accepted(&self, register: &Register) -> Result<Registered, AgentError> {
        let mut backoff = Backoff::new();
        loop {
            match self.post("/v1/agent/register", register).await {
                Ok(response) => match response.json::<Registered>().await {
                    Ok(registered) => return Ok(registered),
                    Err(error) => tracing::error!(%error, "unreadable answer to register"),
                },
                Err(SendError::Unauthorized { status, message }) => {
                    return Err(AgentError::Unauthorized { status, message });
                }
                Err(SendError::Rejected { status, message }) => {
                    // The server may not know this node's GPUs yet (a declared node freed later).
                    tracing::error!(status, %message, "the server refused to register this node");
                }
                Err(_) => {}
            }
            backoff.wait().await;
        }
    }

    pub async fn desired(&self, query: &DesiredQuery, wait: Duration) -> Result<Desired, SendError> {
        let request = self.http.get(self.url("/v1/agent/desired")).query(query).timeout(wait + POLL_SLACK);
        let response = self.send(request).await?;
        json(response).await
    }

    pub async fn report(&self, report: &Report) -> Result<(), SendError> {
        self.post("/v1/agent/report", report).await.map(drop)
    }

    pub async fn log(&self, chunk: &LogChunk) -> Result<(), SendError> {
        self.post("/v1/agent/logs", chunk).await.map(drop)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, path: &str, body: &impl serde::Serialize) -> Result<reqwest::Response, SendError> {
        self.send(self.http.post(self.url(path)).json(body).timeout(REQUEST_TIMEOUT)).await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, SendError> {
        let request = request.header(reqwest::header::AUTHORIZATION, &self.authorization);
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let error = SendError::Unavailable(error.to_string());
                self.note_reachable(false, &error);
                return Err(error);
            }
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            self.note_reachable(true, &"");
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let error = match status {
            401 | 403 => SendError::Unauthorized { status, message: api_message(&text) },
            409 => match serde_json::from_str::<Have>(&text) {
                Ok(have) => SendError::Conflict { have: have.have },
                Err(_) => SendError::Rejected { status, message: api_message(&text) },
            },
            408 | 429 | 500..=599 => SendError::Unavailable(format!("{status}: {}", api_message(&text))),
            _ => SendError::Rejected { status, message: api_message(&text) },
        };
        let reached = !matches!(error, SendError::Unavailable(_));
        self.note_reachable(reached, &error);
        Err(error)
    }

    /// Logs the server becoming unreachable or reachable again, once per change.
    fn note_reachable(&self, reached: bool, why: &dyn std::fmt::Display) {
        if self.reachable.swap(reached, Ordering::Relaxed) != reached {
            if reached {
                tracing::info!(server = %self.base, "server reachable again");
            } else {
                tracing::warn!(server = %self.base, %why, "server unreachable; retrying");
            }
        }
    }
}

async fn json<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, SendError> {
    let status = response.status().as_u16();
    response
        .json::<T>()
        .await
        .map_err(|error| SendError::Rejected { status, message: format!("unreadable answer: {error}") })
}

/// The `message` of an `ApiError` body, or the body itself.
fn api_message(text: &str) -> String {
    serde_json::from_str::<crate::api::ApiError>(text)
        .map_or_else(|_| text.trim().to_string(), |error| error.message)
}

/// Exponential backoff between retries: 100 ms doubling to 5 s.
#[derive(Debug)]
pub(super) struct Backoff {
    next: Duration,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

impl Backoff {
    pub fn new() -> Backoff {
        Backoff { next: BACKOFF_FIRST }
    }

    pub fn reset(&mut self) {
        self.next = BACKOFF_FIRST;
    }

    /// The delay to wait now; the next one doubles.
    pub fn step(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        delay
    }

    pub async fn wait(&mut self) {
        tokio::time::sleep(self.step()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut backoff = Backoff::new();
        let delays: Vec<u128> = (0..8).map(|_| backoff.step().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        backoff.reset();
        assert_eq!(backoff.step().as_millis(), 100);
    }

    #[test]
    fn api_errors_give_their_message() {
        assert_eq!(api_message(r#"{"error":"unauthorized","message":"bad token"}"#), "bad token");
        assert_eq!(api_message(" plain text \n"), "plain text");
    }
}
