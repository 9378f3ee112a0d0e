//! The JPEG, NV12 and raw frame paths fuzzed on stable Rust as property tests: arbitrary bytes,
//! structure-aware mutations of real JPEG files (segment edits, a header declaring another
//! size, truncation, splices) and of the seed corpus in `tests/corpus/` (which also holds every
//! defect found), and raw frames of any declared size against any byte count. Nothing panics;
//! an accepted frame converts to exactly `3 x width x height` bytes; a JPEG is only accepted when
//! its bytes can hold the pixels it declares (so no input makes the decoder allocate more than
//! `1536 x` its size).
//!
//! Each property runs `CAMDNN_FUZZ_CASES` cases (default 256); the README says how to run it
//! longer.

use camdnn_vision::{jpeg_min_bytes, Frame, PixelFormat};
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use proptest::prelude::*;
use proptest::sample::Index;

/// Cases per property: `CAMDNN_FUZZ_CASES`, default 256 (each case may decode a JPEG).
fn cases() -> u32 {
    match std::env::var("CAMDNN_FUZZ_CASES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("CAMDNN_FUZZ_CASES={v:?} is not a number of cases")),
        Err(_) => 256,
    }
}

/// Real JPEG files made here (grey, colour, subsampled, progressive) plus `tests/corpus/*.jpg`.
fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (w, h, colour, quality, progressive, sampling) in [
        (8u16, 8u16, false, 50u8, false, SamplingFactor::R_4_4_4),
        (17, 9, true, 90, false, SamplingFactor::R_4_2_0),
        (32, 24, true, 30, true, SamplingFactor::R_4_2_2),
        (40, 16, false, 75, true, SamplingFactor::R_4_4_4),
    ] {
        let n = usize::from(w) * usize::from(h);
        let (px, ct) = if colour {
            let px: Vec<u8> = (0..n * 3).map(|i| (i * 37 % 251) as u8).collect();
            (px, ColorType::Rgb)
        } else {
            (
                (0..n).map(|i| (i * 13 % 256) as u8).collect(),
                ColorType::Luma,
            )
        };
        let mut file = Vec::new();
        let mut enc = Encoder::new(&mut file, quality);
        enc.set_progressive(progressive);
        enc.set_sampling_factor(sampling);
        enc.encode(&px, w, h, ct).expect("encodes");
        out.push(file);
    }
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jpg"))
        .collect();
    files.sort();
    out.extend(files.iter().map(|p| std::fs::read(p).expect("corpus file")));
    out
}

/// Offsets of `FF xx` markers in a JPEG.
fn markers(data: &[u8]) -> Vec<usize> {
    data.windows(2)
        .enumerate()
        .filter(|(_, m)| m[0] == 0xFF && m[1] != 0x00 && m[1] != 0xFF)
        .map(|(i, _)| i)
        .collect()
}

#[derive(Debug, Clone)]
enum Edit {
    /// Overwrite a byte.
    Set(Index, u8),
    /// Overwrite a byte just after a marker (segment lengths, table ids, SOF fields).
    InSegment(Index, usize, u8),
    /// Declare another size in the frame header (SOF0/SOF2).
    Declare(u16, u16),
    /// Cut the file.
    Truncate(Index),
    /// Remove a whole segment (from one marker to the next).
    DropSegment(Index),
    /// Repeat a segment.
    RepeatSegment(Index),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
}

fn edit() -> impl Strategy<Value = Edit> {
    let side = prop_oneof![
        1u16..64,
        Just(0),
        Just(8192),
        Just(8193),
        Just(u16::MAX),
        any::<u16>()
    ];
    prop_oneof![
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Edit::Set(i, v)),
        3 => (any::<Index>(), 0usize..12, any::<u8>()).prop_map(|(m, k, v)| Edit::InSegment(m, k, v)),
        2 => (side.clone(), side).prop_map(|(w, h)| Edit::Declare(w, h)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => any::<Index>().prop_map(Edit::DropSegment),
        1 => any::<Index>().prop_map(Edit::RepeatSegment),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Edit::Insert(i, v)),
    ]
}

fn apply(data: &mut Vec<u8>, e: &Edit) {
    let len = data.len();
    let ms = markers(data);
    let segment = |i: &Index| {
        let k = i.index(ms.len());
        (ms[k], ms.get(k + 1).copied().unwrap_or(len))
    };
    match e {
        Edit::Set(i, v) if len > 0 => data[i.index(len)] = *v,
        Edit::InSegment(m, k, v) if !ms.is_empty() => {
            let at = ms[m.index(ms.len())] + 2 + k;
            if at < len {
                data[at] = *v;
            }
        }
        Edit::Declare(w, h) => {
            if let Some(sof) = data
                .windows(2)
                .position(|m| m == [0xFF, 0xC0] || m == [0xFF, 0xC2])
            {
                if sof + 9 <= len {
                    data[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
                    data[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
                }
            }
        }
        Edit::Truncate(i) => data.truncate(i.index(len + 1)),
        Edit::DropSegment(i) if !ms.is_empty() => {
            let (a, b) = segment(i);
            data.drain(a..b);
        }
        Edit::RepeatSegment(i) if !ms.is_empty() => {
            let (a, b) = segment(i);
            let chunk = data[a..b].to_vec();
            data.splice(b..b, chunk);
        }
        Edit::Insert(i, v) => {
            let at = i.index(len + 1);
            data.splice(at..at, v.iter().copied());
        }
        _ => {}
    }
}

/// The JPEG path end to end: declared size checked against the header, then decoded.
fn check_jpeg(declared: Option<(u32, u32)>, data: Vec<u8>) -> Result<(), TestCaseError> {
    let len = data.len() as u64;
    let frame = match declared {
        Some((w, h)) => Frame::new(w, h, PixelFormat::Jpeg, data),
        None => Frame::jpeg(data),
    };
    match frame {
        Err(e) => prop_assert!(!e.to_string().is_empty()),
        Ok(f) => {
            prop_assert!(len >= jpeg_min_bytes(f.width(), f.height()));
            if let Ok(rgb) = f.to_rgb() {
                let n = rgb.data().len() as u64;
                prop_assert_eq!(n, 3 * u64::from(f.width()) * u64::from(f.height()));
                prop_assert!(n <= 1536 * len + 3 * 64, "{} bytes decoded from {}", n, len);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Real JPEGs and the corpus under structure-aware edits never panic, and nothing accepted
    /// declares more pixels than its bytes can hold.
    #[test]
    fn mutated_jpegs_are_refused_or_decoded(
        seed in proptest::sample::select(seeds()),
        edits in prop::collection::vec(edit(), 1..5),
        declared in prop::option::of((1u32..70, 1u32..70)),
        splice in prop::option::weighted(0.1, (proptest::sample::select(seeds()), any::<Index>())),
    ) {
        let mut data = seed;
        for e in &edits {
            apply(&mut data, e);
        }
        if let Some((other, at)) = splice {
            data.extend_from_slice(&other[at.index(other.len() + 1)..]);
        }
        check_jpeg(declared, data)?;
    }

    /// Arbitrary bytes behind a JPEG start-of-image never panic.
    #[test]
    fn arbitrary_jpeg_bytes_never_panic(
        mut bytes in prop::collection::vec(any::<u8>(), 0..2000),
        soi in any::<bool>(),
        declared in prop::option::of((1u32..9000, 1u32..9000)),
    ) {
        if soi && bytes.len() >= 2 {
            bytes[..2].copy_from_slice(&[0xFF, 0xD8]);
        }
        check_jpeg(declared, bytes)?;
    }

    /// NV12 and raw frames of any declared size (up to past the 8192 limit) against any byte
    /// count: accepted exactly when the count matches, converted without panicking.
    #[test]
    fn raw_and_nv12_frames_accept_exactly_their_size(
        w in prop_oneof![1u32..40, Just(0), Just(8192), Just(8193), any::<u32>()],
        h in prop_oneof![1u32..40, Just(0), Just(8192), Just(8193), any::<u32>()],
        format in prop_oneof![Just(PixelFormat::Nv12), Just(PixelFormat::Rgb24), Just(PixelFormat::Bgr24)],
        len in prop_oneof![0usize..6000, Just(usize::MAX)],
        exact in any::<bool>(),
        fill in any::<u8>(),
    ) {
        let bytes_x2 = if format == PixelFormat::Nv12 { 3 } else { 6 };
        let need = (u64::from(w) * u64::from(h)).saturating_mul(bytes_x2) / 2;
        let small = need <= 6000;
        let len = if exact && small { need as usize } else { len.min(6000) };
        let ok_dims = (1..=8192).contains(&w) && (1..=8192).contains(&h)
            && (format != PixelFormat::Nv12 || (w % 2 == 0 && h % 2 == 0));
        match Frame::new(w, h, format, vec![fill; len]) {
            Ok(f) => {
                prop_assert!(ok_dims && len as u64 == need);
                let rgb = f.to_rgb().expect("a valid raw frame converts");
                prop_assert_eq!(rgb.data().len() as u64, 3 * u64::from(w) * u64::from(h));
            }
            Err(e) => prop_assert!(!ok_dims || len as u64 != need, "refused a valid frame: {}", e),
        }
    }
}

/// Every corpus file, as it is, goes through the JPEG path (the regression cases of defects
/// found run here on every test run, whatever the case count).
#[test]
fn every_corpus_file_is_handled() {
    for data in seeds() {
        check_jpeg(None, data.clone()).unwrap();
        check_jpeg(Some((8192, 8192)), data).unwrap();
    }
}
