//! The one error type of the crate: every bad input ends here with a message naming what was wrong.

use crate::frame::PixelFormat;

/// Why a vision operation refused its input.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum VisionError {
    /// A frame's byte count does not match its declared size and format.
    #[error("{format} frame {width}x{height} needs {expected} bytes, got {got}")]
    FrameSize {
        /// Declared pixel format.
        format: PixelFormat,
        /// Declared width in pixels.
        width: u32,
        /// Declared height in pixels.
        height: u32,
        /// Bytes the declared size needs.
        expected: usize,
        /// Bytes actually given.
        got: usize,
    },
    /// A frame has a zero dimension, or an odd one for NV12.
    #[error("{format} frame {width}x{height}: {reason}")]
    FrameDims {
        /// Declared pixel format.
        format: PixelFormat,
        /// Declared width in pixels.
        width: u32,
        /// Declared height in pixels.
        height: u32,
        /// What is wrong with the dimensions.
        reason: String,
    },
    /// A frame's width or height is over [`crate::MAX_SIDE`].
    #[error("{format} frame {width}x{height} is larger than the {limit}-pixel side limit (width and height must be at most {limit})")]
    TooLarge {
        /// Declared (or JPEG header) pixel format.
        format: PixelFormat,
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// The side limit, pixels.
        limit: u32,
    },
    /// JPEG bytes could not be decoded.
    #[error("JPEG frame: {0}")]
    Jpeg(String),
    /// A tensor handed to a decoder or post-processor has the wrong shape or length.
    #[error("{what}: {detail}")]
    Tensor {
        /// Which input (e.g. "YOLOv8 output").
        what: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// A configuration value is invalid.
    #[error("config field `{field}`: {reason}")]
    Config {
        /// The offending field.
        field: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An image operation got an argument it cannot work with (empty crop, zero output size...).
    #[error("{0}")]
    Image(String),
    /// A tracker was given a box it cannot follow.
    #[error("tracker: {0}")]
    Track(String),
}

impl VisionError {
    pub(crate) fn tensor(what: &'static str, detail: impl Into<String>) -> Self {
        Self::Tensor {
            what,
            detail: detail.into(),
        }
    }

    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
