//! The streams of a capacity trial: N cameras playing one clip, each from its own point in
//! it, at one frame rate, their frames interleaved in arrival order.

use std::path::Path;

use bytes::Bytes;
use camdnn_protocol::{Frame, PixelFormat};

use super::super::stream::BenchFrame;
use crate::cmd::feed::source::decode_video;

/// A decoded clip: RGB frames of one size, in order.
pub(super) struct Clip {
    pub width: u32,
    pub height: u32,
    pub frames: Vec<Bytes>,
    /// Frames per second it was recorded at.
    pub fps: f64,
}

impl Clip {
    /// The first `max` frames of the video at `path`, scaled to `width` x `height`.
    pub fn decode(
        path: &Path,
        (width, height): (u32, u32),
        max: usize,
        fps: f64,
    ) -> anyhow::Result<Clip> {
        let frames = decode_video(path, (width, height), max)?;
        Ok(Clip {
            width,
            height,
            frames,
            fps,
        })
    }

    /// Clip frames between two frames of a camera running at `fps` (at least 1: a camera
    /// faster than the clip shows frames again).
    fn stride(&self, fps: f64) -> usize {
        (self.fps / fps).round().max(1.0) as usize
    }

    /// `cameras` cameras at `fps` each for `per_camera` frames: camera c is stream
    /// `first_stream + c`, starts `c` spacings of the clip's length / `cameras` into it and
    /// loops; the frames interleaved as they arrive when the cameras are evenly out of
    /// phase (camera c's frame k is frame k * cameras + c, at (k + c / cameras) / fps s),
    /// so the whole is one stream at cameras * fps.
    pub fn cameras(
        &self,
        cameras: usize,
        fps: f64,
        per_camera: usize,
        first_stream: u32,
    ) -> Vec<BenchFrame> {
        let len = self.frames.len();
        let stride = self.stride(fps);
        let mut out = Vec::with_capacity(cameras * per_camera);
        for k in 0..per_camera {
            for c in 0..cameras {
                let start = c * len / cameras.max(1);
                out.push(self.frame(
                    first_stream.wrapping_add(c as u32),
                    k as u64,
                    (start + k * stride) % len,
                ));
            }
        }
        out
    }

    /// Clip frame `index` as frame `seq` of `stream`.
    pub fn frame(&self, stream: u32, seq: u64, index: usize) -> BenchFrame {
        BenchFrame {
            frame: Frame {
                stream_id: stream,
                seq,
                capture_ts_us: 0,
                width: self.width,
                height: self.height,
                pixel_format: PixelFormat::Rgb24,
                priority: None,
                deadline: None,
                detections: None,
                payload: self.frames[index].clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(len: usize, fps: f64) -> Clip {
        Clip {
            width: 1,
            height: 1,
            frames: (0..len).map(|i| Bytes::from(vec![i as u8; 3])).collect(),
            fps,
        }
    }

    #[test]
    fn cameras_interleave_in_arrival_order_with_their_own_sequence() {
        let c = clip(10, 10.0);
        let frames = c.cameras(2, 5.0, 3, 100);
        let seen: Vec<(u32, u64, u8)> = frames
            .iter()
            .map(|f| (f.frame.stream_id, f.frame.seq, f.frame.payload[0]))
            .collect();
        // Two cameras at half the clip's rate: every other clip frame, the second camera
        // half the clip ahead.
        assert_eq!(
            seen,
            vec![
                (100, 0, 0),
                (101, 0, 5),
                (100, 1, 2),
                (101, 1, 7),
                (100, 2, 4),
                (101, 2, 9)
            ]
        );
    }

    #[test]
    fn a_camera_loops_the_clip_and_never_strides_below_one() {
        let c = clip(3, 5.0);
        let frames = c.cameras(1, 10.0, 5, 0);
        let idx: Vec<u8> = frames.iter().map(|f| f.frame.payload[0]).collect();
        assert_eq!(idx, vec![0, 1, 2, 0, 1]);
    }
}
