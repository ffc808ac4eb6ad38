//! `GET /v1/jobs/{id}/logs`: an attempt's stdout or stderr as a chunked
//! text body from `offset`; with `follow=true` the body stays open and new
//! bytes are sent as the agent ships them, until the job has ended and its
//! file has been sent to the end (or the server shuts down).

use std::io::SeekFrom;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::{App, Caller, Failure, JobId, Query};
use crate::api::LogQuery;

/// How often a followed log looks for new bytes.
const POLL: Duration = Duration::from_millis(100);
/// Largest piece read and sent at once.
const CHUNK: usize = 64 * 1024;

pub(super) async fn job_logs(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    JobId(id): JobId,
    Query(query): Query<LogQuery>,
) -> Result<Response, Failure> {
    app.visible_job(&caller, id)?;
    let stream = query.stream.unwrap_or_else(|| "stdout".to_string());
    if stream != "stdout" && stream != "stderr" {
        return Err(Failure::bad(format!("stream: '{stream}'; use stdout or stderr")));
    }
    let tail = Tail {
        app,
        job: id,
        pinned: query.attempt.is_some(),
        attempt: query.attempt,
        stream,
        offset: query.offset.unwrap_or(0),
        follow: query.follow.unwrap_or(false),
        file: None,
        done: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(tail, next_piece));
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response())
}

struct Tail {
    app: App,
    job: u32,
    /// The caller named the attempt: stay on it (else move to a newer attempt when one starts).
    pinned: bool,
    attempt: Option<u32>,
    stream: String,
    offset: u64,
    follow: bool,
    file: Option<tokio::fs::File>,
    done: bool,
}

async fn next_piece(mut tail: Tail) -> Option<(Result<Bytes, std::io::Error>, Tail)> {
    loop {
        if tail.done {
            return None;
        }
        // The job's state is read BEFORE the file: if it had ended, every byte
        // was shipped before the exit was reported, so reading to the end then is complete.
        let (_, view) = tail.app.controller().job(tail.job)?;
        let ended = view.status.is_terminal();
        if tail.attempt.is_none() && view.attempt > 0 {
            tail.attempt = Some(view.attempt);
        }
        if let Some(attempt) = tail.attempt {
            match read_piece(&mut tail, attempt).await {
                Ok(Some(bytes)) => return Some((Ok(bytes), tail)),
                Ok(None) => {}
                Err(error) => {
                    tail.done = true;
                    return Some((Err(error), tail));
                }
            }
            if view.attempt > attempt {
                if tail.pinned {
                    return None; // that attempt is over and sent
                }
                tail.attempt = Some(view.attempt);
                tail.offset = 0;
                tail.file = None;
                continue;
            }
        }
        if !tail.follow || ended || *tail.app.0.closing.borrow() {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The next bytes of the attempt's file from `offset`, or `None` at its end (or before it exists).
async fn read_piece(tail: &mut Tail, attempt: u32) -> std::io::Result<Option<Bytes>> {
    if tail.file.is_none() {
        let path = tail.app.controller().log_path(tail.job, attempt, &tail.stream);
        match tokio::fs::File::open(&path).await {
            Ok(mut file) => {
                file.seek(SeekFrom::Start(tail.offset)).await?;
                tail.file = Some(file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    let Some(file) = tail.file.as_mut() else { return Ok(None) };
    let mut buffer = vec![0u8; CHUNK];
    let n = file.read(&mut buffer).await?;
    if n == 0 {
        return Ok(None);
    }
    buffer.truncate(n);
    tail.offset += n as u64;
    Ok(Some(Bytes::from(buffer)))
}
