//! A raw protocol client that ignores the window and offers the versions it is told.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use bytes::BytesMut;
use camdnn_protocol::{ClientMessage, Frame, Hello, ServerMessage, DEFAULT_MAX_MESSAGE_SIZE};

pub struct Raw {
    s: UnixStream,
    buf: BytesMut,
}

impl Raw {
    pub fn connect(path: &std::path::Path) -> Self {
        Self::connect_offering(path, &[1]).0
    }

    /// Connects offering `versions`; returns the version the server chose.
    pub fn connect_offering(path: &std::path::Path, versions: &[u16]) -> (Self, u16) {
        let s = UnixStream::connect(path).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .expect("timeout");
        let mut r = Raw {
            s,
            buf: BytesMut::new(),
        };
        r.send(&ClientMessage::Hello(Hello {
            versions: versions.to_vec(),
            client_name: "raw".into(),
        }));
        let ServerMessage::Welcome(w) = r.recv() else {
            panic!("no Welcome")
        };
        (r, w.version)
    }

    /// The next whole message as it came off the socket.
    pub fn recv_bytes(&mut self) -> Vec<u8> {
        loop {
            if let Some((_, used)) =
                ServerMessage::decode(&self.buf, DEFAULT_MAX_MESSAGE_SIZE).expect("decode")
            {
                return self.buf.split_to(used).to_vec();
            }
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn send(&mut self, m: &ClientMessage) {
        let mut b = BytesMut::new();
        m.encode(&mut b, DEFAULT_MAX_MESSAGE_SIZE).expect("encode");
        self.s.write_all(&b).expect("write");
    }

    pub fn send_frame(&mut self, f: &Frame) {
        self.send(&ClientMessage::Frame(f.clone()));
    }

    /// Sends a frame; false once the connection is closed.
    pub fn try_send_frame(&mut self, f: &Frame) -> bool {
        let mut b = BytesMut::new();
        ClientMessage::Frame(f.clone())
            .encode(&mut b, DEFAULT_MAX_MESSAGE_SIZE)
            .expect("encode");
        self.s.write_all(&b).is_ok()
    }

    pub fn socket(&self) -> &UnixStream {
        &self.s
    }

    pub fn recv(&mut self) -> ServerMessage {
        loop {
            if let Some((m, used)) =
                ServerMessage::decode(&self.buf, DEFAULT_MAX_MESSAGE_SIZE).expect("decode")
            {
                let _ = self.buf.split_to(used);
                return m;
            }
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}
