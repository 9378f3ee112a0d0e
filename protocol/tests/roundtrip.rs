//! Property tests: every message type survives encode -> decode, whole or split across reads.

mod common;

use camdnn_protocol::*;
use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn client_messages_round_trip(m in client_message()) {
        let bytes = enc_client(&m);
        prop_assert_eq!(ClientMessage::decode_exact(&bytes, MAX), Ok(m.clone()));
        prop_assert_eq!(ClientMessage::decode(&bytes, MAX), Ok(Some((m, bytes.len()))));
    }

    #[test]
    fn server_messages_round_trip(m in server_message()) {
        let bytes = enc_server(&m);
        prop_assert_eq!(ServerMessage::decode_exact(&bytes, MAX), Ok(m.clone()));
        prop_assert_eq!(ServerMessage::decode(&bytes, MAX), Ok(Some((m, bytes.len()))));
    }

    #[test]
    fn hello_round_trips(h in hello()) {
        let m = ClientMessage::Hello(h);
        prop_assert_eq!(ClientMessage::decode_exact(&enc_client(&m), MAX), Ok(m));
    }

    #[test]
    fn frame_round_trips(f in frame()) {
        let m = ClientMessage::Frame(f);
        prop_assert_eq!(ClientMessage::decode_exact(&enc_client(&m), MAX), Ok(m));
    }

    #[test]
    fn welcome_round_trips(w in welcome()) {
        let m = ServerMessage::Welcome(w);
        prop_assert_eq!(ServerMessage::decode_exact(&enc_server(&m), MAX), Ok(m));
    }

    #[test]
    fn result_round_trips(r in result()) {
        let m = ServerMessage::Result(r);
        prop_assert_eq!(ServerMessage::decode_exact(&enc_server(&m), MAX), Ok(m));
    }

    #[test]
    fn dropped_round_trips(d in dropped()) {
        let m = ServerMessage::Dropped(d);
        prop_assert_eq!(ServerMessage::decode_exact(&enc_server(&m), MAX), Ok(m));
    }

    #[test]
    fn rejected_round_trips(r in rejected()) {
        let m = ServerMessage::Rejected(r);
        prop_assert_eq!(ServerMessage::decode_exact(&enc_server(&m), MAX), Ok(m));
    }

    #[test]
    fn error_round_trips(e in server_error()) {
        let m = ServerMessage::Error(e);
        prop_assert_eq!(ServerMessage::decode_exact(&enc_server(&m), MAX), Ok(m));
    }

    /// A stream of messages cut at any point decodes to the same messages once all bytes arrive,
    /// and a prefix never decodes to a wrong message.
    #[test]
    fn streamed_messages_decode_in_order(msgs in proptest::collection::vec(server_message(), 1..5), cut in any::<proptest::sample::Index>()) {
        let stream: Vec<u8> = msgs.iter().flat_map(enc_server).collect();
        let cut = cut.index(stream.len() + 1);
        let mut got = Vec::new();
        let mut pos = 0;
        // First only the prefix is available, then everything.
        for available in [cut, stream.len()] {
            while let Some((m, used)) = ServerMessage::decode(&stream[pos..available], MAX).expect("valid stream") {
                got.push(m);
                pos += used;
            }
        }
        prop_assert_eq!(pos, stream.len());
        prop_assert_eq!(got, msgs);
    }

    /// Encoding under a limit either fits it or fails without writing anything.
    #[test]
    fn encode_respects_the_limit(m in server_message(), max in 0u32..200) {
        let mut buf = bytes::BytesMut::from(&b"xy"[..]);
        match m.encode(&mut buf, max) {
            Ok(()) => prop_assert!(buf.len() - 2 - HEADER_LEN <= max as usize),
            Err(EncodeError::TooLarge { body_len, max: m2, .. }) => {
                prop_assert!(body_len > max as usize);
                prop_assert_eq!(m2, max);
                prop_assert_eq!(&buf[..], b"xy");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}
