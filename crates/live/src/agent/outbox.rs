//! Everything the agent tells the server after registering: reports (in order,
//! retried with backoff until accepted) and the attempts' output (shipped every
//! ~200 ms as log chunks). An attempt's final report goes out only after all of
//! its output has been accepted.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::state::{Key, StateDir};
use super::transport::{Backoff, SendError, Transport};
use super::{AgentError, GpuDiscovery};
use crate::agent_api::{AgentEvent, LogChunk, Report};

/// How often running attempts' output is shipped.
pub(super) const LOG_INTERVAL: Duration = Duration::from_millis(200);
/// Raw bytes per log chunk: even all escaped (6 bytes each in JSON) it fits `api::MAX_BODY_BYTES`.
const CHUNK_BYTES: usize = 32 * 1024;
/// Chunks per stream per flush, so one chatty job cannot hold up the rest for long.
const MAX_CHUNKS_PER_FLUSH: usize = 64;
/// Events per report.
const MAX_EVENTS_PER_REPORT: usize = 256;
/// GPU readings are sent this often (where there are any).
const STATS_INTERVAL: Duration = Duration::from_secs(10);
const STREAMS: [&str; 2] = ["stdout", "stderr"];

#[derive(Debug)]
pub(super) enum Message {
    /// Ship this attempt's output as it grows.
    Track(Key),
    /// Send this event, after those before it.
    Event(AgentEvent),
    /// The attempt is over: ship all its output, then send `event` (if any), then
    /// mark it reported in the state directory.
    Final { key: Key, event: Option<AgentEvent> },
}

/// How far a stream has been shipped, in the agent's file and in the server's
/// copy. They differ where the output is not UTF-8: each invalid sequence is one
/// U+FFFD (3 bytes) in the server's copy, whose length is the `offset` the
/// protocol speaks of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Position {
    file: u64,
    server: u64,
}

#[derive(Debug, Default)]
struct LogState {
    /// What of each stream the server has accepted.
    positions: [Position; 2],
    /// The attempt is over: its files no longer grow, ship every byte.
    finished: bool,
    /// Everything written so far has been accepted.
    caught_up: bool,
}

pub(super) struct Outbox {
    transport: Transport,
    state: StateDir,
    /// The node's index (it may change when the agent registers again).
    node: Arc<AtomicU32>,
    discovery: Box<dyn GpuDiscovery>,
    logs: BTreeMap<Key, LogState>,
    queue: VecDeque<Message>,
    stats_sent: Option<Instant>,
}

impl Outbox {
    pub fn new(
        transport: Transport,
        state: StateDir,
        node: Arc<AtomicU32>,
        discovery: Box<dyn GpuDiscovery>,
    ) -> Outbox {
        Outbox {
            transport,
            state,
            node,
            discovery,
            logs: BTreeMap::new(),
            queue: VecDeque::new(),
            stats_sent: None,
        }
    }

    fn node(&self) -> u32 {
        self.node.load(Ordering::Relaxed)
    }

    pub fn accept(&mut self, message: Message) {
        match message {
            Message::Track(key) => {
                self.logs.entry(key).or_default();
            }
            Message::Event(_) => self.queue.push_back(message),
            Message::Final { key, .. } => {
                let log = self.logs.entry(key).or_default();
                log.finished = true;
                log.caught_up = false;
                self.queue.push_back(message);
            }
        }
    }

    /// Ships new output, then sends the queued events that may go.
    pub async fn flush(&mut self) -> Result<(), SendError> {
        let keys: Vec<Key> = self.logs.keys().copied().collect();
        for key in keys {
            self.ship_logs(key).await?;
        }
        while !self.queue.is_empty() {
            let ready = self.queue.iter().take(MAX_EVENTS_PER_REPORT).take_while(|message| match message {
                Message::Final { key, .. } => self.logs.get(key).is_none_or(|log| log.caught_up),
                _ => true,
            });
            let count = ready.clone().count();
            if count == 0 {
                break;
            }
            let events: Vec<AgentEvent> = ready
                .filter_map(|message| match message {
                    Message::Event(event) | Message::Final { event: Some(event), .. } => Some(event.clone()),
                    _ => None,
                })
                .collect();
            if !events.is_empty() {
                let report = Report { node: self.node(), events, gpu_stats: self.discovery.stats() };
                match self.transport.report(&report).await {
                    Ok(()) => self.stats_sent = Some(Instant::now()),
                    Err(SendError::Rejected { status: 404 | 409, message }) => {
                        // The server does not count the node as up: resend once it registered again.
                        return Err(SendError::Unavailable(message));
                    }
                    Err(SendError::Rejected { status, message }) => {
                        // Resending the same report cannot succeed; a restarted agent resends the finals.
                        tracing::error!(status, %message, ?report, "the server rejected a report; dropping it");
                    }
                    Err(error) => return Err(error),
                }
            }
            for message in self.queue.drain(..count) {
                if let Message::Final { key, event } = message {
                    self.logs.remove(&key);
                    if event.is_some() {
                        self.state.mark_reported(key);
                    }
                }
            }
        }
        self.send_stats().await
    }

    async fn send_stats(&mut self) -> Result<(), SendError> {
        if self.stats_sent.is_some_and(|sent| sent.elapsed() < STATS_INTERVAL) {
            return Ok(());
        }
        let gpu_stats = self.discovery.stats();
        self.stats_sent = Some(Instant::now());
        if gpu_stats.is_empty() {
            return Ok(());
        }
        match self.transport.report(&Report { node: self.node(), events: Vec::new(), gpu_stats }).await {
            Ok(())
            | Err(SendError::Rejected { .. } | SendError::Unavailable(_) | SendError::Conflict { .. }) => {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Ships what the server does not have of this attempt's output.
    async fn ship_logs(&mut self, key: Key) -> Result<(), SendError> {
        let Some(log) = self.logs.get(&key) else { return Ok(()) };
        let finished = log.finished;
        let mut caught_up = true;
        for (stream_index, stream) in STREAMS.iter().enumerate() {
            let path = self.state.path(key, stream);
            let mut chunks = 0;
            loop {
                let position =
                    self.logs.get(&key).map_or_else(Position::default, |log| log.positions[stream_index]);
                let Some(bytes) = read_from(&path, position.file) else { break };
                let length = if finished { bytes.len() } else { complete_utf8_prefix(&bytes) };
                if length == 0 {
                    break;
                }
                if chunks == MAX_CHUNKS_PER_FLUSH {
                    caught_up = false;
                    break;
                }
                chunks += 1;
                let chunk = LogChunk {
                    node: self.node(),
                    job: key.0,
                    attempt: key.1,
                    stream: stream.to_string(),
                    offset: position.server,
                    data: String::from_utf8_lossy(&bytes[..length]).into_owned(),
                };
                let next = match self.transport.log(&chunk).await {
                    Ok(()) => Position {
                        file: position.file + length as u64,
                        server: position.server + chunk.data.len() as u64,
                    },
                    Err(SendError::Conflict { have }) => locate(&path, have),
                    Err(SendError::Rejected { status, message }) => {
                        tracing::error!(job = key.0, attempt = key.1, stream, status, %message,
                            "the server rejected a log chunk; skipping the rest of this output");
                        let end =
                            std::fs::metadata(&path).map_or(position.file + length as u64, |meta| meta.len());
                        Position { file: end, server: position.server }
                    }
                    Err(error) => return Err(error),
                };
                if let Some(log) = self.logs.get_mut(&key) {
                    log.positions[stream_index] = next;
                }
            }
        }
        if let Some(log) = self.logs.get_mut(&key) {
            log.caught_up = caught_up;
        }
        Ok(())
    }
}

/// Up to [`CHUNK_BYTES`] of the file from `offset`; None if there is nothing there.
fn read_from(path: &std::path::Path, offset: u64) -> Option<Vec<u8>> {
    // One stat instead of open, seek and read for the usual case: nothing new.
    if std::fs::metadata(path).ok()?.len() <= offset {
        return None;
    }
    let mut file = File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::with_capacity(CHUNK_BYTES);
    file.take(CHUNK_BYTES as u64).read_to_end(&mut bytes).ok()?;
    (!bytes.is_empty()).then_some(bytes)
}

/// Where in the file the server's copy of `have` bytes ends (after an agent
/// restart, or any disagreement): the file is converted again from its start,
/// unit by unit (a character, or an invalid sequence and its U+FFFD). A server
/// with more than the file holds keeps its length; the agent sends from the end.
fn locate(path: &std::path::Path, have: u64) -> Position {
    let mut position = Position::default();
    while position.server < have {
        let Some(bytes) = read_from(path, position.file) else { break };
        let length = match complete_utf8_prefix(&bytes) {
            0 => bytes.len(),
            length => length,
        };
        for piece in bytes[..length].utf8_chunks() {
            let characters =
                piece.valid().chars().map(|character| (character.len_utf8(), character.len_utf8()));
            let invalid =
                (!piece.invalid().is_empty()).then_some((piece.invalid().len(), '\u{fffd}'.len_utf8()));
            for (raw, converted) in characters.chain(invalid) {
                if position.server == have {
                    return position;
                }
                if position.server + converted as u64 > have {
                    // The server holds part of a unit (never from this agent): skip the unit.
                    return Position { file: position.file + raw as u64, server: have };
                }
                position.file += raw as u64;
                position.server += converted as u64;
            }
        }
    }
    Position { file: position.file, server: position.server.max(have) }
}

/// The length of `bytes` without a UTF-8 sequence cut off at its end (the rest
/// of it is still being written), so a character is never split between chunks.
fn complete_utf8_prefix(bytes: &[u8]) -> usize {
    let tail_start = bytes.len().saturating_sub(3);
    for index in (tail_start..bytes.len()).rev() {
        let byte = bytes[index];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for its lead
        }
        let needed = match byte {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            _ => 1,
        };
        return if index + needed > bytes.len() { index } else { bytes.len() };
    }
    bytes.len()
}

/// Runs the outbox until its channel closes or the server refuses the token.
pub(super) async fn run(
    mut outbox: Outbox,
    mut messages: mpsc::UnboundedReceiver<Message>,
    fatal: mpsc::Sender<AgentError>,
) {
    let mut interval = tokio::time::interval(LOG_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backoff = Backoff::new();
    let mut retry_at: Option<Instant> = None;
    loop {
        tokio::select! {
            message = messages.recv() => match message {
                Some(message) => outbox.accept(message),
                None => return,
            },
            _ = interval.tick() => {}
        }
        while let Ok(message) = messages.try_recv() {
            outbox.accept(message);
        }
        if retry_at.is_some_and(|at| Instant::now() < at) {
            continue;
        }
        match outbox.flush().await {
            Ok(()) => {
                backoff.reset();
                retry_at = None;
            }
            Err(SendError::Unauthorized { status, message }) => {
                let _ = fatal.send(AgentError::Unauthorized { status, message }).await;
                return;
            }
            Err(_) => retry_at = Some(Instant::now() + backoff.step()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_length_maps_back_to_the_file() {
        let path = std::env::temp_dir().join(format!("cotenant-outbox-locate-{}", std::process::id()));
        // a, an invalid byte (3 bytes on the server), é (2 bytes both sides), b
        std::fs::write(&path, b"a\xff\xc3\xa9b").unwrap();
        let at = |file, server| Position { file, server };
        assert_eq!(locate(&path, 0), at(0, 0));
        assert_eq!(locate(&path, 1), at(1, 1));
        assert_eq!(locate(&path, 2), at(2, 2)); // inside the U+FFFD: go on after it
        assert_eq!(locate(&path, 4), at(2, 4));
        assert_eq!(locate(&path, 6), at(4, 6));
        assert_eq!(locate(&path, 7), at(5, 7));
        assert_eq!(locate(&path, 100), at(5, 100)); // the server has more than the file
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_character_cut_at_the_end_waits_for_the_next_chunk() {
        let text = "ab\u{e9}\u{20ac}".as_bytes(); // a b é (2 bytes) € (3 bytes)
        assert_eq!(complete_utf8_prefix(text), text.len());
        assert_eq!(complete_utf8_prefix(&text[..text.len() - 1]), 4);
        assert_eq!(complete_utf8_prefix(&text[..text.len() - 2]), 4);
        assert_eq!(complete_utf8_prefix(&text[..3]), 2);
        assert_eq!(complete_utf8_prefix(b"plain"), 5);
        assert_eq!(complete_utf8_prefix(&[0xff, 0xfe]), 2);
    }
}
