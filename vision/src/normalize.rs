//! Pixels to f32 tensors: per-channel `(pixel * scale - mean) / std`, RGB or BGR order, NCHW,
//! NHWC or NWHC layout, one image or a batch of k crops in one buffer.

use serde::{Deserialize, Serialize};

use crate::{Result, RgbImage, VisionError};

/// Channel order the model expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    /// Red, green, blue (PyTorch / ONNX classifiers, YOLO).
    #[default]
    Rgb,
    /// Blue, green, red (Caffe-era models, PP-OCR's OpenCV pipeline).
    Bgr,
}

/// Memory layout of the model's input tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Batch, channel, height, width (ONNX models).
    #[default]
    Nchw,
    /// Batch, height, width, channel (TFLite models).
    Nhwc,
    /// Batch, width, height, channel: NHWC with the image transposed (MTCNN's Caffe-born
    /// weights as the Keras/ONNX ports ship them).
    Nwhc,
}

/// How a model wants its input normalised: `out[c] = (pixel[c] * scale - mean[c]) / std[c]`,
/// with `mean` and `std` given in the model's channel order.
///
/// ImageNet: `scale = 1/255, mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225]`;
/// TF MobileNet-SSD: `scale = 1/127.5, mean = [1, 1, 1]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormConfig {
    /// Multiplier applied to the 0..=255 pixel value first (default 1).
    #[serde(default = "one")]
    pub scale: f32,
    /// Per-channel mean subtracted after scaling (default 0).
    #[serde(default)]
    pub mean: [f32; 3],
    /// Per-channel divisor applied last (default 1); must be finite and non-zero.
    #[serde(default = "ones")]
    pub std: [f32; 3],
    /// Channel order of the tensor (default RGB).
    #[serde(default)]
    pub channel_order: ChannelOrder,
    /// Layout of the tensor (default NCHW).
    #[serde(default)]
    pub layout: Layout,
}

fn one() -> f32 {
    1.0
}

fn ones() -> [f32; 3] {
    [1.0; 3]
}

impl Default for NormConfig {
    fn default() -> Self {
        Self {
            scale: 1.0,
            mean: [0.0; 3],
            std: [1.0; 3],
            channel_order: ChannelOrder::Rgb,
            layout: Layout::Nchw,
        }
    }
}

/// A dense f32 tensor in the layout its shape describes (`[n, c, h, w]`, `[n, h, w, c]` or
/// `[n, w, h, c]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Values, row-major.
    pub data: Vec<f32>,
    /// Shape, in the order of the layout.
    pub shape: [usize; 4],
}

/// Turns RGB images into normalised tensors with a per-channel lookup table.
#[derive(Debug, Clone)]
pub struct Normalizer {
    config: NormConfig,
    /// `lut[c][v]`: value of output channel `c` for source byte `v`.
    lut: Box<[[f32; 256]; 3]>,
    /// Source (RGB) channel of each output channel.
    src: [usize; 3],
}

impl Normalizer {
    /// Validates `config` and precomputes its lookup table.
    pub fn new(config: NormConfig) -> Result<Self> {
        if !config.scale.is_finite() {
            return Err(VisionError::config(
                "scale",
                format!("{} is not finite", config.scale),
            ));
        }
        for c in 0..3 {
            if !config.mean[c].is_finite() {
                return Err(VisionError::config(format!("mean[{c}]"), "not finite"));
            }
            if !config.std[c].is_finite() || config.std[c] == 0.0 {
                return Err(VisionError::config(
                    format!("std[{c}]"),
                    format!("{} must be finite and non-zero", config.std[c]),
                ));
            }
        }
        let src = match config.channel_order {
            ChannelOrder::Rgb => [0, 1, 2],
            ChannelOrder::Bgr => [2, 1, 0],
        };
        let mut lut = Box::new([[0f32; 256]; 3]);
        for (c, table) in lut.iter_mut().enumerate() {
            for (v, out) in table.iter_mut().enumerate() {
                *out = (v as f32 * config.scale - config.mean[c]) / config.std[c];
            }
        }
        Ok(Self { config, lut, src })
    }

    /// The configuration this normaliser applies.
    pub fn config(&self) -> &NormConfig {
        &self.config
    }

    /// The shape of a batch of `n` images of `width` x `height`.
    pub fn shape(&self, n: usize, width: u32, height: u32) -> [usize; 4] {
        let (w, h) = (width as usize, height as usize);
        match self.config.layout {
            Layout::Nchw => [n, 3, h, w],
            Layout::Nhwc => [n, h, w, 3],
            Layout::Nwhc => [n, w, h, 3],
        }
    }

    /// Writes one image into `out`, which must hold exactly `3 * width * height` values.
    pub fn write(&self, img: &RgbImage, out: &mut [f32]) -> Result<()> {
        let hw = img.width() as usize * img.height() as usize;
        if out.len() != hw * 3 {
            return Err(VisionError::tensor(
                "normalize output",
                format!(
                    "a {}x{} image needs {} values, buffer has {}",
                    img.width(),
                    img.height(),
                    hw * 3,
                    out.len()
                ),
            ));
        }
        let px = img.data();
        match self.config.layout {
            Layout::Nhwc => {
                for (o, p) in out.chunks_exact_mut(3).zip(px.chunks_exact(3)) {
                    for c in 0..3 {
                        o[c] = self.lut[c][p[self.src[c]] as usize];
                    }
                }
            }
            Layout::Nwhc => {
                let (w, h) = (img.width() as usize, img.height() as usize);
                for x in 0..w {
                    for y in 0..h {
                        let p = &px[(y * w + x) * 3..(y * w + x) * 3 + 3];
                        let o = &mut out[(x * h + y) * 3..(x * h + y) * 3 + 3];
                        for c in 0..3 {
                            o[c] = self.lut[c][p[self.src[c]] as usize];
                        }
                    }
                }
            }
            Layout::Nchw => {
                for (c, plane) in out.chunks_exact_mut(hw).enumerate() {
                    let (lut, s) = (&self.lut[c], self.src[c]);
                    for (o, p) in plane.iter_mut().zip(px.chunks_exact(3)) {
                        *o = lut[p[s] as usize];
                    }
                }
            }
        }
        Ok(())
    }

    /// One image as a batch-of-one tensor.
    pub fn tensor(&self, img: &RgbImage) -> Tensor {
        let shape = self.shape(1, img.width(), img.height());
        let mut data = vec![0f32; shape.iter().product()];
        // Cannot fail: the buffer is sized from the image.
        let _ = self.write(img, &mut data);
        Tensor { data, shape }
    }

    /// Packs `images` (all the same size, at least one) into one batch tensor.
    pub fn batch(&self, images: &[&RgbImage]) -> Result<Tensor> {
        let first = images
            .first()
            .ok_or_else(|| VisionError::tensor("normalize batch", "no images given"))?;
        let (w, h) = (first.width(), first.height());
        let shape = self.shape(images.len(), w, h);
        let per = 3 * w as usize * h as usize;
        let mut data = vec![0f32; per * images.len()];
        for (i, (img, out)) in images.iter().zip(data.chunks_exact_mut(per)).enumerate() {
            if (img.width(), img.height()) != (w, h) {
                return Err(VisionError::tensor(
                    "normalize batch",
                    format!(
                        "image {i} is {}x{} but image 0 is {w}x{h}",
                        img.width(),
                        img.height()
                    ),
                ));
            }
            self.write(img, out)?;
        }
        Ok(Tensor { data, shape })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img2x1() -> RgbImage {
        // Two pixels: (10, 20, 30) and (40, 50, 60).
        RgbImage::new(2, 1, vec![10, 20, 30, 40, 50, 60]).unwrap()
    }

    #[test]
    fn nchw_rgb_plain() {
        let n = Normalizer::new(NormConfig::default()).unwrap();
        let t = n.tensor(&img2x1());
        assert_eq!(t.shape, [1, 3, 1, 2]);
        assert_eq!(t.data, vec![10.0, 40.0, 20.0, 50.0, 30.0, 60.0]);
    }

    #[test]
    fn nhwc_bgr_with_mean_std_scale() {
        let cfg = NormConfig {
            scale: 0.1,
            mean: [3.0, 2.0, 1.0], // in BGR order
            std: [2.0, 1.0, 0.5],
            channel_order: ChannelOrder::Bgr,
            layout: Layout::Nhwc,
        };
        let t = Normalizer::new(cfg).unwrap().tensor(&img2x1());
        assert_eq!(t.shape, [1, 1, 2, 3]);
        // pixel 0: B=30 -> (3-3)/2=0, G=20 -> (2-2)/1=0, R=10 -> (1-1)/0.5=0
        // pixel 1: B=60 -> (6-3)/2=1.5, G=50 -> 3, R=40 -> 6
        let want = [0.0, 0.0, 0.0, 1.5, 3.0, 6.0];
        for (g, w) in t.data.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{:?}", t.data);
        }
    }

    #[test]
    fn nwhc_is_transposed_nhwc() {
        // 2 wide, 3 high: pixel (x, y) = (10x + y, 0, 0).
        let mut d = Vec::new();
        for y in 0..3u8 {
            for x in 0..2u8 {
                d.extend_from_slice(&[10 * x + y, 0, 0]);
            }
        }
        let img = RgbImage::new(2, 3, d).unwrap();
        let n = Normalizer::new(NormConfig {
            layout: Layout::Nwhc,
            ..Default::default()
        })
        .unwrap();
        let t = n.tensor(&img);
        assert_eq!(t.shape, [1, 2, 3, 3]);
        let red: Vec<f32> = t.data.chunks(3).map(|p| p[0]).collect();
        // Row-major over (x, y): x = 0 first, then y.
        assert_eq!(red, vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    }

    #[test]
    fn batch_of_crops() {
        let n = Normalizer::new(NormConfig::default()).unwrap();
        let a = RgbImage::filled(2, 2, [1, 2, 3]).unwrap();
        let b = RgbImage::filled(2, 2, [7, 8, 9]).unwrap();
        let t = n.batch(&[&a, &b]).unwrap();
        assert_eq!(t.shape, [2, 3, 2, 2]);
        assert_eq!(&t.data[..4], &[1.0; 4]);
        assert_eq!(&t.data[12..16], &[7.0; 4]);
        assert_eq!(&t.data[20..24], &[9.0; 4]);
        let c = RgbImage::filled(3, 2, [0, 0, 0]).unwrap();
        assert!(n
            .batch(&[&a, &c])
            .unwrap_err()
            .to_string()
            .contains("image 1 is 3x2"));
        assert!(n.batch(&[]).is_err());
        assert!(n.write(&a, &mut [0.0; 5]).is_err());
    }

    #[test]
    fn config_from_toml_and_validation() {
        let cfg: NormConfig = toml::from_str(
            "scale = 0.00392156862745098\nmean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\nlayout = \"nhwc\"\nchannel_order = \"bgr\"",
        )
        .unwrap();
        assert_eq!(cfg.layout, Layout::Nhwc);
        assert_eq!(cfg.channel_order, ChannelOrder::Bgr);
        let d: NormConfig = toml::from_str("").unwrap();
        assert_eq!(d, NormConfig::default());
        assert!(toml::from_str::<NormConfig>("sclae = 1.0").is_err());
        let e = Normalizer::new(NormConfig {
            std: [1.0, 0.0, 1.0],
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("std[1]"), "{e}");
    }
}
