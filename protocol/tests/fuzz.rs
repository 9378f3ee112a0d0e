//! The protocol fuzzer, on stable Rust as property tests: arbitrary bytes, arbitrary bodies
//! behind valid headers, and structure-aware mutations of valid messages and of the seed corpus
//! (`tests/golden/*.hex` and `tests/corpus/*.hex`, which also holds every defect the fuzzer has
//! found) never panic a decoder; they give a message or a typed error, and whatever decodes
//! re-encodes to the same value.
//!
//! Each property runs `CAMDNN_FUZZ_CASES` cases (default 2048); the README says how to run it
//! longer.

mod common;

use camdnn_protocol::*;
use common::*;
use proptest::prelude::*;
use proptest::sample::Index;

/// Cases per property: `CAMDNN_FUZZ_CASES`, default 2048.
fn cases() -> u32 {
    match std::env::var("CAMDNN_FUZZ_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("CAMDNN_FUZZ_CASES={v:?} is not a number of cases")),
        Err(_) => 2048,
    }
}

/// The seed corpus: every golden vector and every file of `tests/corpus/`.
fn corpus() -> Vec<Vec<u8>> {
    let corpus_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<std::path::PathBuf> = [golden_dir(), corpus_dir]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap_or_else(|e| panic!("{}: {e}", d.display())))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "hex"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "seed corpus too small: {files:?}");
    files.iter().map(|p| read_hex(p)).collect()
}

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

/// The version in a message's header (1 when the header is too short to say).
fn header_version(bytes: &[u8]) -> u16 {
    match bytes.get(4..6) {
        Some(v) => u16::from_le_bytes([v[0], v[1]]),
        None => 1,
    }
}

/// Whatever decodes re-encodes (in its own version) to bytes that decode to the same value, and
/// the decoder never accepts what the encoder refuses.
fn re_encodes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let v = header_version(bytes);
    if let Ok(m) = ClientMessage::decode_exact(bytes, MAX) {
        let mut b = bytes::BytesMut::new();
        m.encode_version(&mut b, MAX, v)
            .map_err(|e| TestCaseError::fail(format!("decoded {m:?} but cannot encode it: {e}")))?;
        prop_assert_eq!(ClientMessage::decode_exact(&b, MAX), Ok(m));
    }
    if let Ok(m) = ServerMessage::decode_exact(bytes, MAX) {
        let enc = |m: &ServerMessage| {
            let mut b = bytes::BytesMut::new();
            m.encode_version(&mut b, MAX, v).map(|()| b.to_vec())
        };
        let first = enc(&m)
            .map_err(|e| TestCaseError::fail(format!("decoded {m:?} but cannot encode it: {e}")))?;
        let again = ServerMessage::decode_exact(&first, MAX).expect("re-decodes");
        // NaN != NaN, so compare the encodings.
        prop_assert_eq!(enc(&again).expect("encodes"), first);
    }
    Ok(())
}

/// One structure-aware edit of a message.
#[derive(Debug, Clone)]
enum Edit {
    /// Overwrite one byte.
    Set(Index, u8),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Remove a range.
    Remove(Index, Index),
    /// Copy a range elsewhere (repeats fields and list entries).
    Duplicate(Index, Index, Index),
    /// Write a boundary value (0, 1, 0x7f.., 0xff..) over 1, 2 or 4 bytes (counts, lengths).
    Boundary(Index, u8, u8),
    /// Make the header's body length match the bytes after it (keeps framing intact, so the
    /// body parsers see the edits).
    FixLength,
    /// Set the header's version (1, 2, 3, or something unsupported).
    Version(u16),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Edit::Set(i, v)),
        2 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, v)| Edit::Insert(i, v)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Remove(a, b)),
        1 => (any::<Index>(), any::<Index>(), any::<Index>()).prop_map(|(a, b, c)| Edit::Duplicate(a, b, c)),
        3 => (any::<Index>(), 0u8..3, 0u8..4).prop_map(|(i, w, v)| Edit::Boundary(i, w, v)),
        4 => Just(Edit::FixLength),
        1 => prop_oneof![Just(1u16), Just(2), Just(3), any::<u16>()].prop_map(Edit::Version),
    ]
}

fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let len = bytes.len();
    match e {
        Edit::Set(i, v) if len > 0 => bytes[i.index(len)] = *v,
        Edit::Insert(i, v) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, v.iter().copied());
        }
        Edit::Remove(a, b) if len > 0 => {
            let (x, y) = (a.index(len), b.index(len));
            let lo = x.min(y);
            bytes.drain(lo..x.max(y).min(lo + 64));
        }
        Edit::Duplicate(a, b, c) if len > 0 => {
            let lo = a.index(len);
            let hi = (lo + 1 + b.index(32)).min(len);
            let chunk = bytes[lo..hi].to_vec();
            let at = c.index(len + 1);
            bytes.splice(at..at, chunk);
        }
        Edit::Boundary(i, width, which) if len > 0 => {
            let w = [1usize, 2, 4][usize::from(*width)];
            let at = i.index(len);
            let value: u32 = [0, 1, 0x7fff_ffff, u32::MAX][usize::from(*which)];
            for (k, b) in value.to_le_bytes().iter().take(w).enumerate() {
                if let Some(slot) = bytes.get_mut(at + k) {
                    *slot = *b;
                }
            }
        }
        Edit::FixLength if len >= HEADER_LEN => {
            let body = (len - HEADER_LEN) as u32;
            bytes[8..12].copy_from_slice(&body.to_le_bytes());
        }
        Edit::Version(v) if len >= 6 => bytes[4..6].copy_from_slice(&v.to_le_bytes()),
        _ => {}
    }
}

/// A corpus entry or a freshly generated valid message, in version 1, 2 or 3.
fn seed() -> impl Strategy<Value = Vec<u8>> {
    let corpus = corpus();
    let encode_in = |m: ServerMessage, v: u16| {
        let mut b = bytes::BytesMut::new();
        m.encode_version(&mut b, MAX, v).expect("encodes");
        b.to_vec()
    };
    prop_oneof![
        3 => proptest::sample::select(corpus),
        1 => (client_message(), 1u16..=3).prop_map(|(m, v)| {
            let mut b = bytes::BytesMut::new();
            m.encode_version(&mut b, MAX, v).expect("encodes");
            b.to_vec()
        }),
        1 => (server_message(), 1u16..=3).prop_map(move |(m, v)| encode_in(m, v)),
    ]
}

/// A valid header for `kind` followed by arbitrary body bytes: reaches the body parsers, which
/// purely random bytes almost never do.
fn with_valid_header() -> impl Strategy<Value = Vec<u8>> {
    let kinds = vec![0x01u8, 0x02, 0x03, 0x81, 0x82, 0x83, 0x84, 0x85];
    (
        proptest::sample::select(kinds),
        0u8..16,
        1u16..=3,
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(kind, flags, version, body)| {
            let mut v = b"CDNN".to_vec();
            v.extend_from_slice(&version.to_le_bytes());
            v.push(kind);
            v.push(flags);
            v.extend_from_slice(&(body.len() as u32).to_le_bytes());
            v.extend_from_slice(&body);
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The seed corpus and valid messages under structure-aware edits: no panic, and whatever
    /// still decodes re-encodes to the same value.
    #[test]
    fn mutated_corpus_never_panics_and_round_trips(
        seed in seed(),
        edits in proptest::collection::vec(edit(), 1..6),
        splice in proptest::option::weighted(0.1, (seed(), any::<Index>())),
    ) {
        let mut bytes = seed;
        for e in &edits {
            apply(&mut bytes, e);
        }
        if let Some((other, at)) = splice {
            // Two messages back to back, the second possibly cut: the stream decoders' framing.
            bytes.extend_from_slice(&other[..at.index(other.len() + 1)]);
        }
        decode_everything(&bytes, MAX);
        decode_everything(&bytes, 64);
        re_encodes(&bytes)?;
    }

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
        re_encodes(&bytes)?;
    }
}

/// Every corpus entry, as it is, decodes without panicking (the regression cases of defects the
/// fuzzer found run here on every test run, whatever the case count).
#[test]
fn every_corpus_entry_is_handled() {
    for bytes in corpus() {
        decode_everything(&bytes, MAX);
        re_encodes(&bytes).unwrap();
    }
}
