//! Pixels to tensors and tensors to boxes: decoding, resizing, crops, normalisation, detector
//! decoders and NMS.
//!
//! The vision layer of camdnn. It is a pure library: no threads, no I/O beyond decoding the bytes
//! it is given, and every bad input is an [`VisionError`] that names what was wrong, never a panic.
//!
//! The usual path through it, for one camera frame:
//!
//! 1. [`Frame::new`] validates the bytes the camera sent; [`Frame::to_rgb`] gives an [`RgbImage`].
//! 2. [`Preprocessor::letterbox`] (or [`Preprocessor::stretch`]) makes the detector input and the
//!    [`Transform`] that maps boxes back; [`Normalizer`] turns it into a [`Tensor`].
//! 3. A decoder ([`yolo`], [`ssd`], [`dbnet`]) turns the detector output into [`Detection`]s in
//!    frame pixels, and [`nms()`] keeps the best non-overlapping ones.
//! 4. [`Router`] names each object's class and picks the classifier that handles it.
//! 5. [`Preprocessor::crop`] cuts each object out at the classifier's input size and
//!    [`Normalizer::batch`] packs k crops into one batch.
//! 6. [`classify`] (softmax, top-k, orientation) and [`ctc`] (PP-OCR text) read the classifier
//!    outputs.
//!
//! MediaPipe's TFLite face models are read by [`blazeface`] (the detector) and
//! [`face_landmarks`] (468 points on a square region around each face).
//! The COCO street graph decodes [`centernet`] detections, reads a person crop's [`pose`]
//! keypoints, whether they show a face seen from the front and large enough ([`pose_face`]), and
//! a face crop's [`age_gender`].
//!
//! [`track`] follows each stream's objects from frame to frame, so a per-object result can be
//! reused while its object persists.
//!
//! Face detection with [`mtcnn`] runs the detector on an image pyramid and refines each
//! candidate in two more stages.

#![warn(missing_docs)]

pub mod age_gender;
pub mod blazeface;
pub mod centernet;
pub mod classify;
pub mod ctc;
pub mod dbnet;
mod error;
pub mod face_landmarks;
mod frame;
mod geometry;
pub mod mtcnn;
mod nms;
mod normalize;
pub mod pose;
pub mod pose_face;
mod resize;
mod routing;
pub mod ssd;
pub mod track;
pub mod yolo;

pub use error::VisionError;
pub use frame::{jpeg_min_bytes, Frame, PixelFormat, RgbImage, MAX_SIDE};
pub use geometry::{BBox, Detection};
pub use nms::{nms, NmsConfig};
pub use normalize::{ChannelOrder, Layout, NormConfig, Normalizer, Tensor};
pub use resize::{crop_fit_transform, Crop, Placement, Preprocessor, Transform};
pub use routing::{keep_best, RoutedObject, Router, RoutingConfig};

/// Result type of this crate.
pub type Result<T, E = VisionError> = std::result::Result<T, E>;
