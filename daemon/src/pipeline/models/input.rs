//! A model's input side: its input tensor made from a frame, a pyramid of
//! scales, or an object's crop.

use anyhow::Context;
use camdnn_engine::Tensor;
use camdnn_vision::face_landmarks;
use camdnn_vision::mtcnn::{self, PyramidConfig};
use camdnn_vision::{BBox, Normalizer, Placement, Preprocessor, RgbImage, Transform};

use crate::pipeline::config::{CropMode, ModelEntry, Resize};

/// A model's input side: resize and normalise an image (or a crop of one).
#[derive(Debug, Clone)]
pub struct InputPrep {
    width: u32,
    height: u32,
    resize: Resize,
    placement: Placement,
    crop: CropMode,
    pad: [u8; 3],
    norm: Normalizer,
    pyramid: Option<PyramidConfig>,
    roi_scale: Option<f32>,
}

impl InputPrep {
    pub(super) fn new(m: &ModelEntry) -> anyhow::Result<Self> {
        Ok(InputPrep {
            width: m.input.width,
            height: m.input.height,
            resize: m.input.resize,
            placement: m.input.placement.placement(),
            crop: m.input.crop,
            pad: m.input.pad,
            norm: Normalizer::new(m.input.norm.clone())
                .with_context(|| format!("model {:?}: input.norm", m.name))?,
            pyramid: m.input.pyramid.clone(),
            roi_scale: m.input.roi_scale,
        })
    }

    /// The detector's items for a whole frame: one (resized or letterboxed) input, or the
    /// input-sized canvases a pyramid's scales are packed on (`mtcnn::pack_scales`), each with
    /// its regions' transforms from network pixels back to frame pixels. Empty when the frame
    /// is too small for any pyramid scale.
    pub fn prepare_frame(
        &self,
        pre: &mut Preprocessor,
        image: &RgbImage,
    ) -> anyhow::Result<Vec<(Tensor, Vec<Transform>)>> {
        let Some(pyramid) = &self.pyramid else {
            let (t, transform) = self.prepare(pre, image, None, false)?;
            return Ok(vec![(t, vec![transform])]);
        };
        let (fw, fh) = (image.width(), image.height());
        let scales = mtcnn::pyramid_scales(fw, fh, self.width, self.height, pyramid)?;
        let sizes: Vec<(u32, u32)> = scales
            .iter()
            .map(|s| {
                let sw = ((fw as f32 * s).round() as u32).clamp(1, self.width);
                let sh = ((fh as f32 * s).round() as u32).clamp(1, self.height);
                (sw, sh)
            })
            .collect();
        let places = mtcnn::pack_scales(&sizes, self.width, self.height, pyramid.pack)?;
        let n_canvases = places.iter().map(|p| p.0 + 1).max().unwrap_or(0);
        let mut canvases = (0..n_canvases)
            .map(|_| RgbImage::filled(self.width, self.height, self.pad).map(|c| (c, Vec::new())))
            .collect::<Result<Vec<_>, _>>()?;
        let stride = self.width as usize * 3;
        for (&(sw, sh), &(n, x, y)) in sizes.iter().zip(&places) {
            let (scaled, _) = pre.stretch(image, sw, sh)?;
            let (canvas, regions) = &mut canvases[n];
            let row = sw as usize * 3;
            let dst = canvas.data_mut();
            for (r, src) in scaled.data().chunks_exact(row).enumerate() {
                let at = (y as usize + r) * stride + x as usize * 3;
                dst[at..at + row].copy_from_slice(src);
            }
            regions.push(Transform {
                scale_x: sw as f32 / fw as f32,
                scale_y: sh as f32 / fh as f32,
                pad_x: x as f32,
                pad_y: y as f32,
                input_width: self.width as f32,
                input_height: self.height as f32,
                ..Transform::identity(fw, fh)
            });
        }
        canvases
            .into_iter()
            .map(|(canvas, regions)| Ok((self.tensor(&canvas)?, regions)))
            .collect()
    }

    fn tensor(&self, img: &RgbImage) -> anyhow::Result<Tensor> {
        let t = self.norm.tensor(img);
        Ok(Tensor::from_f32(t.shape.to_vec(), t.data)?)
    }

    /// One item (batch 1) from the region `bbox` of `image` (the whole image
    /// when `None`), rotated 180 degrees when `rotate`; also the transform from
    /// network pixels back to frame pixels.
    pub fn prepare(
        &self,
        pre: &mut Preprocessor,
        image: &RgbImage,
        bbox: Option<BBox>,
        rotate: bool,
    ) -> anyhow::Result<(Tensor, Transform)> {
        let (w, h, pad) = (self.width, self.height, self.pad);
        let (mut img, transform) = match bbox {
            None => match self.resize {
                Resize::Stretch => pre.stretch(image, w, h)?,
                Resize::Letterbox => pre.letterbox(image, w, h, pad, self.placement)?,
            },
            Some(b) => {
                let b = self
                    .roi_scale
                    .map_or(b, |s| face_landmarks::landmark_roi(b, s));
                let crop = match self.crop {
                    CropMode::Stretch => pre.crop(image, b, w, h)?,
                    CropMode::Fit => pre.crop_fit(image, b, w, h, pad, self.placement)?,
                    CropMode::FitHeight => pre.crop_fit_height(image, b, w, h, pad)?,
                    CropMode::Pad => pre.crop_padded(image, b, w, h, pad)?,
                };
                (crop, Transform::identity(w, h))
            }
        };
        if rotate {
            img.rotate_180();
        }
        Ok((self.tensor(&img)?, transform))
    }
}
