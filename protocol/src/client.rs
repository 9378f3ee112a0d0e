//! A blocking client over a Unix socket: handshake, pipelined frames, answers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::message::{ClientMessage, Frame, Hello, ServerError, ServerMessage, Welcome};
use crate::wire::{MessageType, DEFAULT_MAX_MESSAGE_SIZE, SUPPORTED_VERSIONS};

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed (including read timeouts set on `Client::stream`).
    #[error("socket I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent bytes that are not a valid message.
    #[error("decoding a server message: {0}")]
    Decode(#[from] DecodeError),
    /// A message could not be encoded (too large for the server, invalid frame, ...).
    #[error("encoding: {0}")]
    Encode(#[from] EncodeError),
    /// The server answered `Hello` with `Error`.
    #[error("server refused the handshake: {:?}: {}", .0.code, .0.message)]
    Refused(ServerError),
    /// The server sent a message that is not allowed at this point.
    #[error("unexpected {got} from the server while {during}")]
    Unexpected {
        /// The message type received.
        got: MessageType,
        /// What the client was doing.
        during: &'static str,
    },
    /// The server chose a version the client did not offer.
    #[error("server chose version {chosen}, which this client did not offer")]
    VersionNotOffered {
        /// The version in `Welcome`.
        chosen: u16,
    },
    /// The server answered a frame that is not in flight.
    #[error("server answered stream {stream_id} seq {seq}, which is not in flight")]
    NotInFlight {
        /// Stream.
        stream_id: u32,
        /// Sequence number.
        seq: u64,
    },
    /// The frame's (stream, seq) is already in flight.
    #[error("stream {stream_id} seq {seq} is already in flight")]
    DuplicateInFlight {
        /// Stream.
        stream_id: u32,
        /// Sequence number.
        seq: u64,
    },
    /// The server closed the connection.
    #[error("server closed the connection")]
    Closed,
}

/// A blocking protocol client. Frames are pipelined: `send_frame` only waits when the frame's
/// stream already has `window` frames in flight, reading (and keeping for `recv`) answers until
/// there is room.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    read_buf: BytesMut,
    write_buf: BytesMut,
    welcome: Welcome,
    max_recv: u32,
    pending: VecDeque<ServerMessage>,
    in_flight: HashMap<u32, HashSet<u64>>,
    /// The server has closed its side; nothing more can be read.
    eof: bool,
}

impl Client {
    /// Connects to the server's socket at `path` and performs the handshake.
    pub fn connect(path: impl AsRef<Path>, client_name: &str) -> Result<Self, ClientError> {
        Self::handshake(UnixStream::connect(path)?, client_name)
    }

    /// Performs the handshake on an already connected stream: sends `Hello` offering every
    /// version this crate supports and waits for `Welcome`.
    pub fn handshake(stream: UnixStream, client_name: &str) -> Result<Self, ClientError> {
        let mut client = Client {
            stream,
            read_buf: BytesMut::with_capacity(64 * 1024),
            write_buf: BytesMut::new(),
            welcome: Welcome {
                version: 0,
                max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
                window: 1,
                server_name: String::new(),
            },
            max_recv: DEFAULT_MAX_MESSAGE_SIZE,
            pending: VecDeque::new(),
            in_flight: HashMap::new(),
            eof: false,
        };
        client.send(&ClientMessage::Hello(Hello {
            versions: SUPPORTED_VERSIONS.to_vec(),
            client_name: client_name.to_owned(),
        }))?;
        match client.read_message()? {
            ServerMessage::Welcome(w) => {
                if !SUPPORTED_VERSIONS.contains(&w.version) {
                    return Err(ClientError::VersionNotOffered { chosen: w.version });
                }
                client.welcome = w;
                Ok(client)
            }
            ServerMessage::Error(e) => Err(ClientError::Refused(e)),
            other => Err(ClientError::Unexpected {
                got: other.kind(),
                during: "waiting for Welcome",
            }),
        }
    }

    /// What the server said in `Welcome` (version, limits, window).
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The socket, for setting timeouts. Reading or writing it directly breaks the framing.
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Frames of `stream_id` sent and not yet answered.
    pub fn in_flight(&self, stream_id: u32) -> usize {
        self.in_flight.get(&stream_id).map_or(0, HashSet::len)
    }

    /// Every frame sent and not yet answered, by stream, then sequence number.
    pub fn in_flight_frames(&self) -> Vec<(u32, u64)> {
        let mut all: Vec<(u32, u64)> = self
            .in_flight
            .iter()
            .flat_map(|(s, seqs)| seqs.iter().map(move |q| (*s, *q)))
            .collect();
        all.sort_unstable();
        all
    }

    /// Sends one frame, first waiting for answers while its stream has `window` frames in flight.
    pub fn send_frame(&mut self, frame: &Frame) -> Result<(), ClientError> {
        let (stream_id, seq) = (frame.stream_id, frame.seq);
        if self
            .in_flight
            .get(&stream_id)
            .is_some_and(|s| s.contains(&seq))
        {
            return Err(ClientError::DuplicateInFlight { stream_id, seq });
        }
        while self.in_flight(stream_id) >= usize::from(self.welcome.window) {
            let m = self.read_answer()?;
            self.pending.push_back(m);
        }
        // Encode before recording, so a frame that fails to encode is not counted in flight.
        self.send(&ClientMessage::Frame(frame.clone()))?;
        self.in_flight.entry(stream_id).or_default().insert(seq);
        Ok(())
    }

    /// The next answer: `Result`, `Dropped`, `Rejected` or `Error`. Blocks until one arrives;
    /// `ClientError::Closed` when the server has closed the connection.
    pub fn recv(&mut self) -> Result<ServerMessage, ClientError> {
        match self.pending.pop_front() {
            Some(m) => Ok(m),
            None => self.read_answer(),
        }
    }

    /// Sends `Bye` and returns every answer that arrives until the server closes the connection.
    pub fn bye(mut self) -> Result<Vec<ServerMessage>, ClientError> {
        self.send(&ClientMessage::Bye)?;
        let mut answers: Vec<ServerMessage> = self.pending.drain(..).collect();
        loop {
            match self.read_answer() {
                Ok(m) => answers.push(m),
                Err(ClientError::Closed) => return Ok(answers),
                Err(e) => return Err(e),
            }
        }
    }

    fn send(&mut self, msg: &ClientMessage) -> Result<(), ClientError> {
        self.write_buf.clear();
        // Before the handshake `welcome.version` is 0: Hello carries version 1 whatever we pass.
        let version = match self.welcome.version {
            0 => crate::wire::PROTOCOL_VERSION,
            v => v,
        };
        msg.encode_version(&mut self.write_buf, self.welcome.max_message_size, version)?;
        self.stream.write_all(&self.write_buf)?;
        Ok(())
    }

    /// Reads one answer and updates the in-flight bookkeeping.
    fn read_answer(&mut self) -> Result<ServerMessage, ClientError> {
        let m = self.read_message()?;
        let key = match &m {
            ServerMessage::Result(r) => Some((r.stream_id, r.seq)),
            ServerMessage::Dropped(d) => Some((d.stream_id, d.seq)),
            ServerMessage::Rejected(r) => Some((r.stream_id, r.seq)),
            ServerMessage::Error(_) => None,
            ServerMessage::Welcome(_) => {
                return Err(ClientError::Unexpected {
                    got: MessageType::Welcome,
                    during: "waiting for answers",
                })
            }
        };
        if let Some((stream_id, seq)) = key {
            let removed = self
                .in_flight
                .get_mut(&stream_id)
                .is_some_and(|s| s.remove(&seq));
            if !removed {
                return Err(ClientError::NotInFlight { stream_id, seq });
            }
        }
        Ok(m)
    }

    /// Reads one whole message from the socket.
    fn read_message(&mut self) -> Result<ServerMessage, ClientError> {
        loop {
            if let Some((m, used)) = ServerMessage::decode(&self.read_buf, self.max_recv)? {
                let _ = self.read_buf.split_to(used);
                return Ok(m);
            }
            if self.eof {
                return Err(ClientError::Closed);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                self.eof = true;
                if self.read_buf.is_empty() {
                    return Err(ClientError::Closed);
                }
                // The server closed mid-message: name what is missing (once).
                let partial = self.read_buf.split();
                return Err(ServerMessage::decode_exact(&partial, self.max_recv)
                    .err()
                    .map_or(ClientError::Closed, ClientError::Decode));
            }
            self.read_buf.extend_from_slice(&chunk[..n]);
        }
    }
}
