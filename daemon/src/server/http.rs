//! A minimal HTTP/1.1 listener for `/metrics`, `/health/live` and
//! `/health/ready` (GET only, one request per connection). It is ours rather
//! than the exporter's listener so the health endpoints share its port.
//!
//! It cannot be locked out by connections that send nothing: a request head
//! must arrive within [`READ_TIMEOUT`], at most [`MAX_CONNECTIONS`] are open
//! at once, and a new connection past that closes the oldest one still
//! waiting for its request head (or, when every one is past its head, the
//! oldest), so a health check always gets its turn.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::telemetry::Exporter;

/// Readiness as the HTTP listener sees it: `Err` says why not (the body of a 503).
pub type ReadyFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Most HTTP connections open at once (see the module docs).
pub const MAX_CONNECTIONS: usize = 64;
/// Longest request head read.
const MAX_REQUEST: usize = 8192;
/// Time allowed to send the request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Time allowed to write the response to a client that reads slowly.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// An open connection: its task and whether it still waits for its head.
struct Open {
    task: JoinHandle<()>,
    reading: Arc<AtomicBool>,
}

/// Serves requests on `listener` forever (drop the task to stop).
pub async fn serve(listener: TcpListener, metrics: Option<Exporter>, ready: ReadyFn) {
    // In accept order: the front is the oldest.
    let mut open: VecDeque<Open> = VecDeque::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        open.retain(|o| !o.task.is_finished());
        if open.len() >= MAX_CONNECTIONS {
            let oldest = open
                .iter()
                .position(|o| o.reading.load(Ordering::Acquire))
                .unwrap_or(0);
            if let Some(o) = open.remove(oldest) {
                o.task.abort();
            }
        }
        let (metrics, ready) = (metrics.clone(), Arc::clone(&ready));
        let reading = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&reading);
        let task = tokio::spawn(async move {
            let _ = handle(stream, metrics.as_ref(), &ready, &flag).await;
        });
        open.push_back(Open { task, reading });
    }
}

async fn handle(
    mut stream: TcpStream,
    metrics: Option<&Exporter>,
    ready: &ReadyFn,
    reading: &AtomicBool,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(512);
    let head = tokio::time::timeout(READ_TIMEOUT, async {
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
                return Ok(true);
            }
            if buf.len() > MAX_REQUEST {
                return Ok(false);
            }
        }
    })
    .await;
    reading.store(false, Ordering::Release);
    let (status, ctype, body) = match head {
        Ok(Ok(true)) => route(&buf, metrics, ready),
        _ => (400, "text/plain", "bad request\n".to_owned()),
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Bad Request",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    tokio::time::timeout(WRITE_TIMEOUT, write)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

fn route(head: &[u8], metrics: Option<&Exporter>, ready: &ReadyFn) -> (u16, &'static str, String) {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" {
        return (405, "text/plain", "only GET is served\n".into());
    }
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => match metrics {
            Some(h) => (200, "text/plain; version=0.0.4", h.render()),
            None => (
                404,
                "text/plain",
                "metrics are not recorded by this process\n".into(),
            ),
        },
        "/health/live" => (200, "text/plain", "live\n".into()),
        "/health/ready" => match ready() {
            Ok(()) => (200, "text/plain", "ready\n".into()),
            Err(reason) => (503, "text/plain", format!("not ready: {reason}\n")),
        },
        _ => (
            404,
            "text/plain",
            "not found; try /metrics, /health/live, /health/ready\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(head: &str, ready: bool) -> (u16, String) {
        let ready: ReadyFn = Arc::new(move || {
            if ready {
                Ok(())
            } else {
                Err("model a on cpu: out of service".into())
            }
        });
        let (status, _, body) = route(head.as_bytes(), None, &ready);
        (status, body)
    }

    #[test]
    fn routes_health_and_refuses_the_rest() {
        assert_eq!(get("GET /health/live HTTP/1.1\r\n\r\n", false).0, 200);
        assert_eq!(get("GET /health/ready HTTP/1.1\r\n\r\n", true).0, 200);
        assert_eq!(get("GET /health/ready?x=1 HTTP/1.1\r\n\r\n", false).0, 503);
        assert_eq!(
            get("GET /health/ready HTTP/1.1\r\n\r\n", false).1,
            "not ready: model a on cpu: out of service\n",
            "the reason is in the body"
        );
        assert_eq!(get("POST /health/live HTTP/1.1\r\n\r\n", true).0, 405);
        assert_eq!(get("GET /other HTTP/1.1\r\n\r\n", true).0, 404);
        assert_eq!(
            get("GET /metrics HTTP/1.1\r\n\r\n", true).0,
            404,
            "no recorder here"
        );
        assert_eq!(get("\u{0}\u{1} garbage", true).0, 405);
    }
}
