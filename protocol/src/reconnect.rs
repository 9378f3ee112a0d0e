//! A client that reconnects with backoff when its connection is lost (the
//! daemon restarted, drained, or closed the connection). Opt-in, because the
//! protocol's answers are per connection: frames in flight on the lost
//! connection are never answered by the new one, so they are handed back as
//! [`Answer::Lost`] (by stream, then sequence number) before anything the
//! new connection answers. A frame whose send failed is sent again on the new
//! connection.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::client::{Client, ClientError};
use crate::message::{ErrorCode, Frame, ServerMessage};

/// How long to wait between connection attempts: `first`, doubling up to
/// `max`, for at most `give_up_after` in all (`None`: forever).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
    /// Stop trying after this long (`None`: never).
    pub give_up_after: Option<Duration>,
}

impl Default for Backoff {
    /// 100 ms doubling to 5 s, for at most 5 minutes.
    fn default() -> Self {
        Self {
            first: Duration::from_millis(100),
            max: Duration::from_secs(5),
            give_up_after: Some(Duration::from_secs(300)),
        }
    }
}

impl Backoff {
    /// No retries: the first failure is returned (a plain [`Client`]'s behaviour).
    pub fn never() -> Self {
        Self {
            first: Duration::ZERO,
            max: Duration::ZERO,
            give_up_after: Some(Duration::ZERO),
        }
    }
}

/// An answer of [`ReconnectingClient::recv`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// What the server sent.
    Message(ServerMessage),
    /// A frame that was in flight when its connection was lost: it will
    /// never be answered.
    Lost {
        /// Stream.
        stream_id: u32,
        /// Sequence number.
        seq: u64,
    },
}

/// Whether `e` means the connection is gone (try another) rather than a
/// mistake of the caller or a read timeout it set.
fn connection_lost(e: &ClientError) -> bool {
    match e {
        ClientError::Io(io) => !matches!(
            io.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        ClientError::Closed | ClientError::Decode(_) => true,
        _ => false,
    }
}

/// Whether a failed connection attempt is worth retrying: the socket is
/// missing or stale (the daemon is restarting) or the server is full.
fn retryable(e: &ClientError) -> bool {
    match e {
        ClientError::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::NotFound
                | std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        ),
        ClientError::Closed => true,
        ClientError::Refused(r) => {
            matches!(r.code, ErrorCode::ConnectionLimit | ErrorCode::ShuttingDown)
        }
        _ => false,
    }
}

/// A [`Client`] that reconnects (see the module docs).
#[derive(Debug)]
pub struct ReconnectingClient {
    path: PathBuf,
    name: String,
    backoff: Backoff,
    client: Client,
    lost: VecDeque<(u32, u64)>,
    reconnects: u64,
}

impl ReconnectingClient {
    /// Connects to `path`, retrying as `backoff` allows.
    pub fn connect(
        path: impl AsRef<Path>,
        client_name: &str,
        backoff: Backoff,
    ) -> Result<Self, ClientError> {
        let path = path.as_ref().to_owned();
        let client = connect_with_backoff(&path, client_name, backoff)?;
        Ok(Self {
            path,
            name: client_name.to_owned(),
            backoff,
            client,
            lost: VecDeque::new(),
            reconnects: 0,
        })
    }

    /// The current connection's socket, for setting timeouts (a new
    /// connection starts without any).
    pub fn stream(&self) -> &UnixStream {
        self.client.stream()
    }

    /// Frames of `stream_id` in flight on the current connection.
    pub fn in_flight(&self, stream_id: u32) -> usize {
        self.client.in_flight(stream_id)
    }

    /// Connections made after the first.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// Sends `frame`; when the connection is lost, reconnects and sends it again.
    pub fn send_frame(&mut self, frame: &Frame) -> Result<(), ClientError> {
        loop {
            match self.client.send_frame(frame) {
                Err(e) if connection_lost(&e) => self.reconnect(e)?,
                other => return other,
            }
        }
    }

    /// The next answer: frames lost with a connection first, then what the
    /// server sends. When the connection is lost while waiting, reconnects.
    pub fn recv(&mut self) -> Result<Answer, ClientError> {
        loop {
            if let Some((stream_id, seq)) = self.lost.pop_front() {
                return Ok(Answer::Lost { stream_id, seq });
            }
            match self.client.recv() {
                Ok(ServerMessage::Error(e)) if e.closing && self.reconnects_at_all() => {
                    // The server closes after this: what is in flight is lost.
                    self.reconnect(ClientError::Closed)?;
                    return Ok(Answer::Message(ServerMessage::Error(e)));
                }
                Ok(m) => return Ok(Answer::Message(m)),
                Err(e) if connection_lost(&e) => self.reconnect(e)?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `Bye` and returns every answer until the server closes the
    /// connection, lost frames first (no reconnection).
    pub fn bye(self) -> Result<Vec<Answer>, ClientError> {
        let mut out: Vec<Answer> = self
            .lost
            .into_iter()
            .map(|(stream_id, seq)| Answer::Lost { stream_id, seq })
            .collect();
        out.extend(self.client.bye()?.into_iter().map(Answer::Message));
        Ok(out)
    }

    /// Whether the backoff allows any reconnection ([`Backoff::never`] does not).
    fn reconnects_at_all(&self) -> bool {
        self.backoff.give_up_after != Some(Duration::ZERO)
    }

    /// The connection failed with `e`: its frames in flight are lost, and a
    /// new connection is made (or `e` returned when the backoff forbids it).
    fn reconnect(&mut self, e: ClientError) -> Result<(), ClientError> {
        if !self.reconnects_at_all() {
            return Err(e);
        }
        self.lost.extend(self.client.in_flight_frames());
        self.client = connect_with_backoff(&self.path, &self.name, self.backoff)?;
        self.reconnects += 1;
        Ok(())
    }
}

/// Connects, retrying retryable failures as `backoff` allows.
pub fn connect_with_backoff(
    path: &Path,
    client_name: &str,
    backoff: Backoff,
) -> Result<Client, ClientError> {
    let start = Instant::now();
    let mut wait = backoff.first;
    loop {
        match Client::connect(path, client_name) {
            Ok(c) => return Ok(c),
            Err(e) if retryable(&e) => {
                let elapsed = start.elapsed();
                if backoff.give_up_after.is_some_and(|g| elapsed + wait > g) {
                    return Err(e);
                }
                std::thread::sleep(wait);
                wait = (wait * 2).min(backoff.max).max(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}
