//! Fuzz-style properties: arbitrary or corrupted bytes never panic a decoder; they give a message
//! or a typed error.

mod common;

use camdnn_protocol::*;
use common::*;
use proptest::prelude::*;

/// Runs every decoding entry point over `bytes`; the test fails if any panics.
fn decode_everything(bytes: &[u8], max: u32) {
    let _ = ClientMessage::decode(bytes, max);
    let _ = ClientMessage::decode_exact(bytes, max);
    let _ = ServerMessage::decode(bytes, max);
    let _ = ServerMessage::decode_exact(bytes, max);
    #[cfg(feature = "tokio")]
    codecs(bytes, max);
}

/// The tokio codecs over the same bytes, draining everything they can decode.
#[cfg(feature = "tokio")]
fn codecs(bytes: &[u8], max: u32) {
    use tokio_util::codec::Decoder;
    let mut server = ServerCodec::new(max);
    let mut buf = bytes::BytesMut::from(bytes);
    while let Ok(Some(_)) = server.decode(&mut buf) {}
    let _ = server.decode_eof(&mut buf);
    let mut client = ClientCodec::new(max);
    let mut buf = bytes::BytesMut::from(bytes);
    while let Ok(Some(_)) = client.decode(&mut buf) {}
    let _ = client.decode_eof(&mut buf);
}

/// A valid header for `kind` followed by arbitrary body bytes: reaches the body parsers, which
/// purely random bytes almost never do.
fn with_valid_header() -> impl Strategy<Value = Vec<u8>> {
    let kinds = vec![0x01u8, 0x02, 0x03, 0x81, 0x82, 0x83, 0x84, 0x85];
    (
        proptest::sample::select(kinds),
        0u8..16,
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(kind, flags, body)| {
            let mut v = b"CDNN".to_vec();
            v.extend_from_slice(&1u16.to_le_bytes());
            v.push(kind);
            v.push(flags);
            v.extend_from_slice(&(body.len() as u32).to_le_bytes());
            v.extend_from_slice(&body);
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), max in prop_oneof![Just(MAX), 0u32..64]) {
        decode_everything(&bytes, max);
    }

    #[test]
    fn arbitrary_bodies_never_panic(bytes in with_valid_header()) {
        decode_everything(&bytes, MAX);
    }

    /// Valid messages with a few bytes overwritten, truncated or extended never panic.
    #[test]
    fn corrupted_messages_never_panic(
        m in prop_oneof![client_message().prop_map(|m| enc_client(&m)), server_message().prop_map(|m| enc_server(&m))],
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<proptest::sample::Index>(),
        extra in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut bytes = m;
        for (at, v) in edits {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        decode_everything(&bytes, MAX);
        decode_everything(&bytes[..cut.index(bytes.len() + 1)], MAX);
        bytes.extend_from_slice(&extra);
        decode_everything(&bytes, MAX);
    }

    /// Whatever decodes re-encodes to a message that decodes to the same value (no value is
    /// accepted by the decoder that the encoder refuses).
    #[test]
    fn decoded_values_re_encode(bytes in with_valid_header()) {
        if let Ok(m) = ClientMessage::decode_exact(&bytes, MAX) {
            prop_assert_eq!(ClientMessage::decode_exact(&enc_client(&m), MAX), Ok(m));
        }
        if let Ok(m) = ServerMessage::decode_exact(&bytes, MAX) {
            let again = ServerMessage::decode_exact(&enc_server(&m), MAX).expect("re-decodes");
            // NaN != NaN, so compare the encodings.
            prop_assert_eq!(enc_server(&again), enc_server(&m));
        }
    }
}
