//! Resizing with `fast_image_resize`: stretch and letterbox for the detector input (with the
//! [`Transform`] that maps boxes back to the frame) and per-object crops for the classifiers.

use fast_image_resize as fr;
use fr::images::{CroppedImageMut, Image, ImageRef};

use crate::{BBox, Result, RgbImage, VisionError};

/// Where a letterboxed image sits inside its padded canvas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Centred, padding split evenly (YOLO's letterbox).
    #[default]
    Center,
    /// At the top-left corner, padding right and bottom (PP-OCR recognition's right padding).
    TopLeft,
}

/// How network-input pixels relate to frame pixels: `input = frame * scale + pad`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    /// Horizontal scale from frame to input pixels.
    pub scale_x: f32,
    /// Vertical scale from frame to input pixels.
    pub scale_y: f32,
    /// Left padding in input pixels.
    pub pad_x: f32,
    /// Top padding in input pixels.
    pub pad_y: f32,
    /// Frame width, for clamping mapped boxes.
    pub frame_width: f32,
    /// Frame height, for clamping mapped boxes.
    pub frame_height: f32,
    /// Network input width (decoders scale normalised or map coordinates by it).
    pub input_width: f32,
    /// Network input height.
    pub input_height: f32,
}

impl Transform {
    /// The transform of an input that is the frame itself.
    pub fn identity(frame_width: u32, frame_height: u32) -> Self {
        Self {
            scale_x: 1.0,
            scale_y: 1.0,
            pad_x: 0.0,
            pad_y: 0.0,
            frame_width: frame_width as f32,
            frame_height: frame_height as f32,
            input_width: frame_width as f32,
            input_height: frame_height as f32,
        }
    }

    /// Maps a box in network-input pixels to frame pixels, clamped to the frame.
    pub fn to_frame(&self, b: BBox) -> BBox {
        BBox::new(
            (b.x0 - self.pad_x) / self.scale_x,
            (b.y0 - self.pad_y) / self.scale_y,
            (b.x1 - self.pad_x) / self.scale_x,
            (b.y1 - self.pad_y) / self.scale_y,
        )
        .clamp(self.frame_width, self.frame_height)
    }

    /// Maps a box in frame pixels to network-input pixels.
    pub fn to_input(&self, b: BBox) -> BBox {
        BBox::new(
            b.x0 * self.scale_x + self.pad_x,
            b.y0 * self.scale_y + self.pad_y,
            b.x1 * self.scale_x + self.pad_x,
            b.y1 * self.scale_y + self.pad_y,
        )
    }
}

/// One object cut out of a frame and resized for its classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Crop {
    /// Index of the box in the slice given to [`Preprocessor::crops`].
    pub index: usize,
    /// The box actually cut, clamped to the frame.
    pub bbox: BBox,
    /// The resized pixels.
    pub image: RgbImage,
}

/// Resizes, letterboxes and crops RGB images, reusing its scratch buffers between calls.
///
/// Bilinear interpolation with a fixed kernel (OpenCV's `INTER_LINEAR`), the resize most models
/// were trained with.
pub struct Preprocessor {
    resizer: fr::Resizer,
    options: fr::ResizeOptions,
}

impl Default for Preprocessor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Preprocessor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preprocessor").finish_non_exhaustive()
    }
}

fn check_out_size(width: u32, height: u32) -> Result<()> {
    if width == 0 || height == 0 || width > crate::MAX_SIDE || height > crate::MAX_SIDE {
        return Err(VisionError::Image(format!(
            "output size {width}x{height} must be between 1 and {} on each side",
            crate::MAX_SIDE
        )));
    }
    Ok(())
}

fn resize_err(e: impl std::fmt::Display) -> VisionError {
    VisionError::Image(format!("resize failed: {e}"))
}

impl Preprocessor {
    /// A preprocessor with bilinear interpolation.
    pub fn new() -> Self {
        Self {
            resizer: fr::Resizer::new(),
            options: fr::ResizeOptions::new()
                .resize_alg(fr::ResizeAlg::Interpolation(fr::FilterType::Bilinear)),
        }
    }

    fn src_view(img: &RgbImage) -> Result<ImageRef<'_>> {
        ImageRef::new(img.width(), img.height(), img.data(), fr::PixelType::U8x3)
            .map_err(resize_err)
    }

    /// Resizes to exactly `width` x `height`, ignoring the aspect ratio (SSD, PP-OCR det).
    pub fn stretch(
        &mut self,
        img: &RgbImage,
        width: u32,
        height: u32,
    ) -> Result<(RgbImage, Transform)> {
        check_out_size(width, height)?;
        let src = Self::src_view(img)?;
        let mut dst = Image::new(width, height, fr::PixelType::U8x3);
        self.resizer
            .resize(&src, &mut dst, &self.options)
            .map_err(resize_err)?;
        let transform = Transform {
            scale_x: width as f32 / img.width() as f32,
            scale_y: height as f32 / img.height() as f32,
            input_width: width as f32,
            input_height: height as f32,
            ..Transform::identity(img.width(), img.height())
        };
        Ok((RgbImage::new(width, height, dst.into_vec())?, transform))
    }

    /// Resizes keeping the aspect ratio so the image fits `width` x `height`, and fills the rest
    /// with `pad` (YOLO: centred, grey 114).
    pub fn letterbox(
        &mut self,
        img: &RgbImage,
        width: u32,
        height: u32,
        pad: [u8; 3],
        placement: Placement,
    ) -> Result<(RgbImage, Transform)> {
        check_out_size(width, height)?;
        let (iw, ih) = (img.width() as f64, img.height() as f64);
        let scale = (width as f64 / iw).min(height as f64 / ih);
        let nw = ((iw * scale).round() as u32).clamp(1, width);
        let nh = ((ih * scale).round() as u32).clamp(1, height);
        let (left, top) = match placement {
            Placement::Center => ((width - nw) / 2, (height - nh) / 2),
            Placement::TopLeft => (0, 0),
        };
        let src = Self::src_view(img)?;
        let canvas = pad.repeat(width as usize * height as usize);
        let mut dst =
            Image::from_vec_u8(width, height, canvas, fr::PixelType::U8x3).map_err(resize_err)?;
        {
            let mut view = CroppedImageMut::new(&mut dst, left, top, nw, nh).map_err(resize_err)?;
            self.resizer
                .resize(&src, &mut view, &self.options)
                .map_err(resize_err)?;
        }
        let transform = Transform {
            scale_x: nw as f32 / img.width() as f32,
            scale_y: nh as f32 / img.height() as f32,
            pad_x: left as f32,
            pad_y: top as f32,
            input_width: width as f32,
            input_height: height as f32,
            ..Transform::identity(img.width(), img.height())
        };
        Ok((RgbImage::new(width, height, dst.into_vec())?, transform))
    }

    /// Cuts `bbox` (frame pixels, clamped to the image) out of `img` and resizes it to
    /// `width` x `height`; fails when the clamped box is under one pixel on a side.
    pub fn crop(
        &mut self,
        img: &RgbImage,
        bbox: BBox,
        width: u32,
        height: u32,
    ) -> Result<RgbImage> {
        check_out_size(width, height)?;
        let b = clamp_box(img, bbox)?;
        let src = Self::src_view(img)?;
        let mut dst = Image::new(width, height, fr::PixelType::U8x3);
        let (left, top, w, h) = source_rect(img, b);
        let opts = self.options.crop(left, top, w, h);
        self.resizer
            .resize(&src, &mut dst, &opts)
            .map_err(resize_err)?;
        RgbImage::new(width, height, dst.into_vec())
    }

    /// Cuts `bbox` (clamped to the image) out of `img` and fits it into `width` x `height`
    /// keeping its aspect ratio, the rest filled with `pad` (PP-OCR's text-line crops: scaled
    /// to the input height and padded on the right with [`Placement::TopLeft`]).
    pub fn crop_fit(
        &mut self,
        img: &RgbImage,
        bbox: BBox,
        width: u32,
        height: u32,
        pad: [u8; 3],
        placement: Placement,
    ) -> Result<RgbImage> {
        check_out_size(width, height)?;
        let b = clamp_box(img, bbox)?;
        let dst = fit_rect(b, width, height, placement);
        self.resize_into(img, b, width, height, pad, dst)
    }

    /// Cuts `bbox` (clamped to the image) out of `img` and scales it to the full `height`,
    /// its width following the aspect ratio but capped at `width` (wider boxes are squeezed),
    /// at the left of a canvas padded with `pad` on the right: PP-OCR's `resize_norm_img` for
    /// the orientation and recognition models.
    pub fn crop_fit_height(
        &mut self,
        img: &RgbImage,
        bbox: BBox,
        width: u32,
        height: u32,
        pad: [u8; 3],
    ) -> Result<RgbImage> {
        check_out_size(width, height)?;
        let b = clamp_box(img, bbox)?;
        let ratio = b.width() as f64 / b.height() as f64;
        let nw = ((height as f64 * ratio).ceil() as u32).clamp(1, width);
        self.resize_into(img, b, width, height, pad, (0, 0, nw, height))
    }

    /// Cuts `bbox` out of `img` and stretches it to `width` x `height` **without clamping**: the
    /// part of the box outside the image is filled with `pad` (MTCNN's square candidate boxes,
    /// which may overhang the frame edge, are cut this way so the face keeps its aspect).
    /// Fails when the box is not finite or overlaps the image by under one pixel on a side.
    pub fn crop_padded(
        &mut self,
        img: &RgbImage,
        bbox: BBox,
        width: u32,
        height: u32,
        pad: [u8; 3],
    ) -> Result<RgbImage> {
        check_out_size(width, height)?;
        let inside = clamp_box(img, bbox)?;
        let (bw, bh) = (bbox.width() as f64, bbox.height() as f64);
        let to_x = |x: f32| ((x - bbox.x0) as f64 / bw * width as f64).round() as u32;
        let to_y = |y: f32| ((y - bbox.y0) as f64 / bh * height as f64).round() as u32;
        let left = to_x(inside.x0).min(width - 1);
        let top = to_y(inside.y0).min(height - 1);
        let nw = to_x(inside.x1).clamp(left + 1, width) - left;
        let nh = to_y(inside.y1).clamp(top + 1, height) - top;
        self.resize_into(img, inside, width, height, pad, (left, top, nw, nh))
    }

    /// Resizes the region `src` of `img` into the rectangle `dst` = (left, top, w, h) of a
    /// `width` x `height` canvas filled with `pad`.
    fn resize_into(
        &mut self,
        img: &RgbImage,
        src: BBox,
        width: u32,
        height: u32,
        pad: [u8; 3],
        dst: (u32, u32, u32, u32),
    ) -> Result<RgbImage> {
        let view = Self::src_view(img)?;
        let canvas = pad.repeat(width as usize * height as usize);
        let mut out =
            Image::from_vec_u8(width, height, canvas, fr::PixelType::U8x3).map_err(resize_err)?;
        {
            let (left, top, nw, nh) = dst;
            let mut part = CroppedImageMut::new(&mut out, left, top, nw, nh).map_err(resize_err)?;
            let (sl, st, sw, sh) = source_rect(img, src);
            let opts = self.options.crop(sl, st, sw, sh);
            self.resizer
                .resize(&view, &mut part, &opts)
                .map_err(resize_err)?;
        }
        RgbImage::new(width, height, out.into_vec())
    }

    /// One crop per box whose clamped width and height are both at least `min_size` pixels
    /// (and at least one pixel); smaller boxes are skipped, the others keep their index.
    pub fn crops(
        &mut self,
        img: &RgbImage,
        boxes: &[BBox],
        width: u32,
        height: u32,
        min_size: f32,
    ) -> Result<Vec<Crop>> {
        check_out_size(width, height)?;
        let mut out = Vec::with_capacity(boxes.len());
        for (index, b) in boxes.iter().enumerate() {
            let Ok(bbox) = clamp_box(img, *b) else {
                continue;
            };
            if bbox.width() < min_size || bbox.height() < min_size {
                continue;
            }
            let image = self.crop(img, bbox, width, height)?;
            out.push(Crop { index, bbox, image });
        }
        Ok(out)
    }
}

/// Where [`Preprocessor::crop_fit`] draws the (clamped) box `b` in a `width` x `height` input:
/// `(left, top, scaled width, scaled height)`.
fn fit_rect(b: BBox, width: u32, height: u32, placement: Placement) -> (u32, u32, u32, u32) {
    let scale = (width as f64 / b.width() as f64).min(height as f64 / b.height() as f64);
    let nw = ((b.width() as f64 * scale).round() as u32).clamp(1, width);
    let nh = ((b.height() as f64 * scale).round() as u32).clamp(1, height);
    let (left, top) = match placement {
        Placement::Center => ((width - nw) / 2, (height - nh) / 2),
        Placement::TopLeft => (0, 0),
    };
    (left, top, nw, nh)
}

/// The transform between frame pixels and the input [`Preprocessor::crop_fit`] makes of
/// `bbox` in a `frame_width` x `frame_height` frame, so that a model's outputs on that crop
/// (keypoints, boxes) map back to the frame with [`Transform::to_frame`].
pub fn crop_fit_transform(
    frame_width: u32,
    frame_height: u32,
    bbox: BBox,
    width: u32,
    height: u32,
    placement: Placement,
) -> Result<Transform> {
    check_out_size(width, height)?;
    let b = clamp_to(frame_width, frame_height, bbox)?;
    let (left, top, nw, nh) = fit_rect(b, width, height, placement);
    let scale_x = nw as f32 / b.width();
    let scale_y = nh as f32 / b.height();
    Ok(Transform {
        scale_x,
        scale_y,
        pad_x: left as f32 - b.x0 * scale_x,
        pad_y: top as f32 - b.y0 * scale_y,
        frame_width: frame_width as f32,
        frame_height: frame_height as f32,
        input_width: width as f32,
        input_height: height as f32,
    })
}

/// The source rectangle of a clamped box as the resizer takes it, `(left, top, width,
/// height)`: the size in f64 from the corners, capped at the image edge, since f32's
/// `x1 - x0` can round past it (a box from x = 2.79 to the edge of a 7-pixel frame).
fn source_rect(img: &RgbImage, b: BBox) -> (f64, f64, f64, f64) {
    let (left, top) = (b.x0 as f64, b.y0 as f64);
    let w = (b.x1 as f64).min(img.width() as f64) - left;
    let h = (b.y1 as f64).min(img.height() as f64) - top;
    (left, top, w, h)
}

fn clamp_box(img: &RgbImage, bbox: BBox) -> Result<BBox> {
    clamp_to(img.width(), img.height(), bbox)
}

/// `bbox` clamped to a `width` x `height` frame; an error when it is not finite or less than
/// a pixel wide or high inside.
fn clamp_to(width: u32, height: u32, bbox: BBox) -> Result<BBox> {
    if !bbox.is_finite() {
        return Err(VisionError::Image(format!(
            "crop box {bbox:?} is not finite"
        )));
    }
    let b = bbox.clamp(width as f32, height as f32);
    if b.width() < 1.0 || b.height() < 1.0 {
        return Err(VisionError::Image(format!(
            "crop box {bbox:?} is under one pixel wide or high inside the {width}x{height} frame"
        )));
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200x100 image: left half red, right half blue.
    fn two_halves() -> RgbImage {
        let mut d = Vec::new();
        for _y in 0..100 {
            for x in 0..200 {
                d.extend_from_slice(if x < 100 { &[255, 0, 0] } else { &[0, 0, 255] });
            }
        }
        RgbImage::new(200, 100, d).unwrap()
    }

    #[test]
    fn letterbox_pads_and_maps_back() {
        let img = two_halves();
        let mut p = Preprocessor::new();
        let (out, t) = p
            .letterbox(&img, 100, 100, [114, 114, 114], Placement::Center)
            .unwrap();
        assert_eq!((out.width(), out.height()), (100, 100));
        assert_eq!(
            (t.scale_x, t.scale_y, t.pad_x, t.pad_y),
            (0.5, 0.5, 0.0, 25.0)
        );
        assert_eq!(out.pixel(50, 5), Some([114, 114, 114]));
        assert_eq!(out.pixel(50, 95), Some([114, 114, 114]));
        assert_eq!(out.pixel(10, 50), Some([255, 0, 0]));
        assert_eq!(out.pixel(90, 50), Some([0, 0, 255]));
        // Round trip: frame box -> input box -> frame box.
        let b = BBox::new(20.0, 10.0, 120.0, 90.0);
        let inp = t.to_input(b);
        assert_eq!(inp, BBox::new(10.0, 30.0, 60.0, 70.0));
        let back = t.to_frame(inp);
        assert!((back.x0 - b.x0).abs() < 1e-4 && (back.y1 - b.y1).abs() < 1e-4);
        // A box in the padding is clamped into the frame.
        let pad_box = t.to_frame(BBox::new(0.0, 0.0, 10.0, 20.0));
        assert_eq!(pad_box.y1, 0.0);
    }

    #[test]
    fn letterbox_top_left_pads_right() {
        let img = RgbImage::filled(10, 48, [9, 9, 9]).unwrap();
        let mut p = Preprocessor::new();
        let (out, t) = p
            .letterbox(&img, 320, 48, [0, 0, 0], Placement::TopLeft)
            .unwrap();
        assert_eq!((t.pad_x, t.pad_y, t.scale_x), (0.0, 0.0, 1.0));
        assert_eq!(out.pixel(5, 20), Some([9, 9, 9]));
        assert_eq!(out.pixel(10, 20), Some([0, 0, 0]));
    }

    #[test]
    fn stretch_scales_independently() {
        let img = two_halves();
        let (out, t) = Preprocessor::new().stretch(&img, 50, 50).unwrap();
        assert_eq!((t.scale_x, t.scale_y), (0.25, 0.5));
        assert_eq!(out.pixel(5, 25), Some([255, 0, 0]));
        assert_eq!(out.pixel(45, 25), Some([0, 0, 255]));
        let back = t.to_frame(BBox::new(25.0, 0.0, 50.0, 50.0));
        assert_eq!(back, BBox::new(100.0, 0.0, 200.0, 100.0));
    }

    #[test]
    fn crop_fit_keeps_aspect_and_pads() {
        let img = two_halves();
        let mut p = Preprocessor::new();
        // 100x25 of red -> 64x16 at the left of a 128x16 canvas.
        let out = p
            .crop_fit(
                &img,
                BBox::new(0.0, 0.0, 100.0, 25.0),
                128,
                16,
                [7, 7, 7],
                Placement::TopLeft,
            )
            .unwrap();
        assert_eq!(out.pixel(10, 8), Some([255, 0, 0]));
        assert_eq!(out.pixel(63, 8), Some([255, 0, 0]));
        assert_eq!(out.pixel(64, 8), Some([7, 7, 7]));
        assert!(p
            .crop_fit(
                &img,
                BBox::new(500.0, 0.0, 600.0, 9.0),
                8,
                8,
                [0; 3],
                Placement::Center
            )
            .is_err());
    }

    #[test]
    fn crop_fit_height_pads_short_and_squeezes_long_boxes() {
        let img = two_halves();
        let mut p = Preprocessor::new();
        // 50x25 red -> 32x16 at the left of 64x16, then padding.
        let out = p
            .crop_fit_height(&img, BBox::new(0.0, 0.0, 50.0, 25.0), 64, 16, [7, 7, 7])
            .unwrap();
        assert_eq!(out.pixel(31, 15), Some([255, 0, 0]));
        assert_eq!(out.pixel(32, 0), Some([7, 7, 7]));
        // 200x10 (ratio 20) into 64x16: squeezed to the full canvas, half red half blue.
        let out = p
            .crop_fit_height(&img, BBox::new(0.0, 0.0, 200.0, 10.0), 64, 16, [7, 7, 7])
            .unwrap();
        assert_eq!(out.pixel(10, 15), Some([255, 0, 0]));
        assert_eq!(out.pixel(63, 0), Some([0, 0, 255]));
    }

    #[test]
    fn crop_padded_fills_outside_the_frame() {
        let img = two_halves();
        let mut p = Preprocessor::new();
        // A 100x100 box whose left half hangs off the frame: left half pad, right half red.
        let out = p
            .crop_padded(&img, BBox::new(-50.0, 0.0, 50.0, 100.0), 20, 20, [0, 9, 0])
            .unwrap();
        assert_eq!(out.pixel(2, 10), Some([0, 9, 0]));
        assert_eq!(out.pixel(9, 10), Some([0, 9, 0]));
        assert_eq!(out.pixel(10, 10), Some([255, 0, 0]));
        assert_eq!(out.pixel(19, 19), Some([255, 0, 0]));
        // Entirely inside: same as a plain crop.
        let inside = BBox::new(120.0, 20.0, 190.0, 80.0);
        assert_eq!(
            p.crop_padded(&img, inside, 8, 8, [0; 3]).unwrap(),
            p.crop(&img, inside, 8, 8).unwrap()
        );
        assert!(p
            .crop_padded(&img, BBox::new(300.0, 0.0, 400.0, 10.0), 8, 8, [0; 3])
            .is_err());
    }

    #[test]
    fn a_box_to_the_frame_edge_crops_though_its_f32_width_rounds_past_it() {
        // Found by vision/tests/no_panic.rs: 7.0 - 2.7883265 in f32 is a hair over the true
        // width, and left + width passed the frame's right edge.
        let img = RgbImage::new(7, 1, vec![200; 21]).unwrap();
        let b = BBox::new(2.7883265, 0.0, 739.6279, 513.66895);
        let mut p = Preprocessor::new();
        assert_eq!(p.crops(&img, &[b], 1, 1, 0.0).unwrap().len(), 1);
        p.crop_fit(&img, b, 4, 4, [0; 3], Placement::Center)
            .unwrap();
    }

    #[test]
    fn crops_clamp_filter_and_keep_index() {
        let img = two_halves();
        let mut p = Preprocessor::new();
        let boxes = [
            BBox::new(-50.0, -10.0, 60.0, 50.0), // clamped to 0,0-60,50: all red
            BBox::new(150.0, 10.0, 152.0, 12.0), // 2x2: below min size
            BBox::new(300.0, 0.0, 400.0, 10.0),  // outside the frame
            BBox::new(120.0, 20.0, 190.0, 80.0), // all blue
            BBox::new(f32::NAN, 0.0, 1.0, 1.0),  // not finite
        ];
        let crops = p.crops(&img, &boxes, 16, 16, 4.0).unwrap();
        assert_eq!(crops.len(), 2);
        assert_eq!(crops[0].index, 0);
        assert_eq!(crops[0].bbox, BBox::new(0.0, 0.0, 60.0, 50.0));
        assert!(crops[0].image.data().chunks(3).all(|p| p == [255, 0, 0]));
        assert_eq!(crops[1].index, 3);
        assert!(crops[1].image.data().chunks(3).all(|p| p == [0, 0, 255]));
        assert!(p.crop(&img, boxes[2], 16, 16).is_err());
        assert!(p.crop(&img, boxes[0], 0, 16).is_err());
    }
}
