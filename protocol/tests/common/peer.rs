//! A minimal in-test server connection built from the codec's pure functions, and the frames
//! and answers the client tests exchange with it.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use bytes::{Bytes, BytesMut};
use camdnn_protocol::*;

use super::MAX;

/// Server side of one connection, built from the codec's pure functions.
pub struct Peer {
    pub stream: UnixStream,
    buf: BytesMut,
}

impl Peer {
    pub fn new(stream: UnixStream) -> Self {
        Peer {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Next client message, `None` at end of stream.
    pub fn read(&mut self) -> Option<ClientMessage> {
        loop {
            if let Some((m, used)) =
                ClientMessage::decode(&self.buf, MAX).expect("client sends valid messages")
            {
                let _ = self.buf.split_to(used);
                return Some(m);
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("read");
            if n == 0 {
                assert!(self.buf.is_empty(), "client closed mid-message");
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn send(&mut self, m: &ServerMessage) {
        let mut b = BytesMut::new();
        m.encode(&mut b, MAX).expect("encode");
        self.stream.write_all(&b).expect("write");
    }

    /// Reads `Hello` and answers `Welcome` with `window` and `max_message_size`.
    pub fn accept(&mut self, window: u16, max_message_size: u32) -> Hello {
        let Some(ClientMessage::Hello(h)) = self.read() else {
            panic!("first message must be Hello")
        };
        self.send(&ServerMessage::Welcome(Welcome {
            version: negotiate(&h.versions).expect("common version"),
            max_message_size,
            window,
            server_name: "test-server".into(),
        }));
        h
    }
}

pub fn frame(stream_id: u32, seq: u64) -> Frame {
    Frame {
        stream_id,
        seq,
        capture_ts_us: seq * 1000,
        width: 2,
        height: 1,
        pixel_format: PixelFormat::Bgr24,
        priority: Some(1),
        deadline: Some(Deadline::RelativeUs(50_000)),
        detections: None,
        payload: Bytes::from(vec![seq as u8; 6]),
    }
}

/// The answer the test server gives to frame `seq`: cycles through the three kinds.
pub fn answer(stream_id: u32, seq: u64) -> ServerMessage {
    match seq % 3 {
        0 => ServerMessage::Result(FrameResult {
            stream_id,
            seq,
            timing: Timing {
                queue_us: 1,
                detect_us: 2,
                classify_us: 3,
                total_us: 6,
            },
            objects: vec![],
            objects_dropped: 0,
        }),
        1 => ServerMessage::Dropped(Dropped {
            stream_id,
            seq,
            reason: DropReason::Superseded,
        }),
        _ => ServerMessage::Rejected(Rejected {
            stream_id,
            seq,
            reason: RejectReason::UnsupportedFormat,
            message: "BGR24 not enabled".into(),
        }),
    }
}
