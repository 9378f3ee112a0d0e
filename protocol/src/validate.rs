//! Content rules shared by the encoder and the decoder, so that whatever encodes also decodes.

use crate::error::BodyError;
use crate::message::{Frame, Hello, PixelFormat, UpstreamDetection, Welcome};

/// Checks a `Hello` (at least one version).
pub(crate) fn hello(h: &Hello) -> Result<(), BodyError> {
    if h.versions.is_empty() {
        return Err(BodyError::OutOfRange {
            field: "n_versions",
            value: 0,
            allowed: "1..=255",
        });
    }
    Ok(())
}

/// Checks a `Welcome` (window at least 1).
pub(crate) fn welcome(w: &Welcome) -> Result<(), BodyError> {
    if w.window == 0 {
        return Err(BodyError::OutOfRange {
            field: "window",
            value: 0,
            allowed: "1..=65535",
        });
    }
    Ok(())
}

/// Checks a frame's dimensions against its payload length and format.
pub(crate) fn frame_payload(
    format: PixelFormat,
    width: u32,
    height: u32,
    payload_len: u64,
) -> Result<(), BodyError> {
    if width == 0 || height == 0 {
        return Err(BodyError::ZeroDimension { width, height });
    }
    if format == PixelFormat::Nv12 && (width % 2 != 0 || height % 2 != 0) {
        return Err(BodyError::OddNv12Dimension { width, height });
    }
    match format.raw_len(width, height) {
        Some(expected) if expected != payload_len => Err(BodyError::PayloadSizeMismatch {
            format,
            width,
            height,
            expected,
            actual: payload_len,
        }),
        None if payload_len == 0 => Err(BodyError::EmptyJpeg { width, height }),
        _ => Ok(()),
    }
}

/// Checks one upstream detection: finite coordinates, `x0 <= x1`, `y0 <= y1`, score in [0, 1].
pub(crate) fn detection(index: usize, d: &UpstreamDetection) -> Result<(), BodyError> {
    let b = &d.bbox;
    for (field, v) in [
        ("x0", b.x0),
        ("y0", b.y0),
        ("x1", b.x1),
        ("y1", b.y1),
        ("score", d.score),
    ] {
        if !v.is_finite() {
            return Err(BodyError::NonFinite { index, field });
        }
    }
    if b.x0 > b.x1 || b.y0 > b.y1 {
        return Err(BodyError::InvertedBox { index });
    }
    if !(0.0..=1.0).contains(&d.score) {
        return Err(BodyError::ScoreOutOfRange {
            index,
            score: d.score,
        });
    }
    Ok(())
}

/// Checks a whole frame.
pub(crate) fn frame(f: &Frame) -> Result<(), BodyError> {
    frame_payload(f.pixel_format, f.width, f.height, f.payload.len() as u64)?;
    for (i, d) in f.detections.iter().flatten().enumerate() {
        detection(i, d)?;
    }
    Ok(())
}
