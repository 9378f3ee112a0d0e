//! The frames `track-eval` replays: a real video decoded by ffmpeg, or a synthetic clip made
//! from a real photo (a slow pan and zoom across it, whose camera motion is known, so each
//! box can be mapped back to the photo to tell which object it is), optionally shuffled (a
//! stream of unrelated frames, on which no result may be reused).

use std::path::Path;

use anyhow::{bail, Context};
use camdnn_policy::rng::Rng;
use camdnn_vision::{BBox, Preprocessor, RgbImage};

use crate::cmd::feed::source::{decode_video, ppm};

/// A slow pan from the left edge to the right edge of a photo while zooming in from a view of
/// two thirds of its width to four ninths, over `frames` frames, each scaled to 640 pixels
/// wide.
pub struct Pan {
    base: RgbImage,
    frames: usize,
    out: (u32, u32),
}

impl Pan {
    /// A pan across the binary PPM at `path`.
    pub fn new(path: &Path, frames: usize) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "reading {} (scripts/fetch_test_images.sh makes it)",
                path.display()
            )
        })?;
        let (width, height, _, payload) =
            ppm(&bytes).with_context(|| format!("in {}", path.display()))?;
        let base = RgbImage::new(width, height, payload.to_vec())?;
        if frames < 2 {
            bail!("--frames must be at least 2 for a pan");
        }
        let out_h = (640.0 * height as f32 / width as f32).round().max(1.0) as u32;
        Ok(Pan {
            base,
            frames,
            out: (640, out_h),
        })
    }

    /// The photo itself.
    pub fn base(&self) -> &RgbImage {
        &self.base
    }

    /// Frames in the clip.
    pub fn frame_count(&self) -> usize {
        self.frames
    }

    /// The part of the photo frame `t` shows: x0, y0, width, height.
    fn view(&self, t: usize) -> (f32, f32, f32, f32) {
        let (w, h) = (self.base.width() as f32, self.base.height() as f32);
        let a = t as f32 / (self.frames - 1) as f32;
        let vw = w * (2.0 / 3.0 - a * 2.0 / 9.0);
        let vh = vw * h / w;
        let cx = vw / 2.0 + (w - vw / 2.0 - vw / 2.0) * a;
        (cx - vw / 2.0, (h - vh) / 2.0, vw, vh)
    }

    /// Frame `t` of the clip.
    pub fn frame(&self, pre: &mut Preprocessor, t: usize) -> anyhow::Result<RgbImage> {
        let (x0, y0, vw, vh) = self.view(t);
        Ok(pre.crop(
            &self.base,
            BBox::new(x0, y0, x0 + vw, y0 + vh),
            self.out.0,
            self.out.1,
        )?)
    }

    /// A box of frame `t` in the photo's pixels.
    pub fn to_base(&self, t: usize, b: BBox) -> BBox {
        let (x0, y0, vw, _) = self.view(t);
        let s = vw / self.out.0 as f32;
        BBox::new(x0 + b.x0 * s, y0 + b.y0 * s, x0 + b.x1 * s, y0 + b.y1 * s)
    }
}

/// Where the frames come from.
pub enum Clip {
    /// The synthetic pan, frames made on demand.
    Pan(Pan),
    /// Frames of a video, decoded up front (at most `--frames`).
    Video(Vec<RgbImage>),
}

impl Clip {
    /// The first `max` frames of a video, scaled to `width` x `height`.
    pub fn video(path: &Path, width: u32, height: u32, max: usize) -> anyhow::Result<Self> {
        let frames = decode_video(path, (width, height), max)?
            .into_iter()
            .map(|p| RgbImage::new(width, height, p.to_vec()))
            .collect::<Result<_, _>>()?;
        Ok(Clip::Video(frames))
    }

    /// Frames in the clip.
    pub fn frame_count(&self) -> usize {
        match self {
            Clip::Pan(p) => p.frame_count(),
            Clip::Video(v) => v.len(),
        }
    }

    /// Frame `t` (in clip order).
    pub fn frame(&self, pre: &mut Preprocessor, t: usize) -> anyhow::Result<RgbImage> {
        match self {
            Clip::Pan(p) => p.frame(pre, t),
            Clip::Video(v) => Ok(v[t].clone()),
        }
    }
}

/// The order frames are replayed in: the clip's, or a random permutation of it.
pub fn order(len: usize, shuffle: Option<u64>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    if let Some(seed) = shuffle {
        let mut rng = Rng::new(seed);
        for i in (1..len).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shuffled_order_is_a_permutation() {
        assert_eq!(order(5, None), vec![0, 1, 2, 3, 4]);
        let mut o = order(100, Some(3));
        assert_ne!(o, order(100, None));
        o.sort_unstable();
        assert_eq!(o, order(100, None));
    }

    #[test]
    fn the_pan_maps_frame_boxes_back_to_the_photo() {
        let pan = Pan {
            base: RgbImage::filled(1350, 900, [0, 0, 0]).unwrap(),
            frames: 11,
            out: (640, 427),
        };
        // First frame: a 900-wide view at the left edge; last: a 600-wide view at the right.
        assert_eq!(pan.view(0), (0.0, 150.0, 900.0, 600.0));
        let (x0, y0, vw, vh) = pan.view(10);
        assert!((x0 - 750.0).abs() < 1e-3 && (vw - 600.0).abs() < 1e-3);
        assert!((y0 - 250.0).abs() < 1e-3 && (vh - 400.0).abs() < 1e-3);
        let b = pan.to_base(10, BBox::new(0.0, 0.0, 640.0, 320.0));
        assert!((b.x0 - 750.0).abs() < 1e-3 && (b.x1 - 1350.0).abs() < 1e-3);
        assert!((b.y1 - (250.0 + 300.0)).abs() < 1e-3, "{b:?}");
    }
}
