//! Camera frames as they arrive (RGB24, BGR24, NV12, JPEG), validated on construction, and the
//! packed RGB image every later stage works on.

use std::fmt;

use serde::{Deserialize, Serialize};
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use crate::{Result, VisionError};

/// Largest accepted width or height, in pixels: bounds the memory a hostile header can claim
/// (8192 x 8192 RGB is 192 MiB).
pub const MAX_SIDE: u32 = 8192;

/// How a frame's bytes encode its pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PixelFormat {
    /// Packed 8-bit R, G, B; `3 * width * height` bytes.
    Rgb24,
    /// Packed 8-bit B, G, R; `3 * width * height` bytes.
    Bgr24,
    /// Full-resolution Y plane then interleaved half-resolution U, V plane (BT.601, video range);
    /// even width and height, `width * height * 3 / 2` bytes, no row padding.
    Nv12,
    /// A baseline or progressive JPEG file; its header must agree with the declared size.
    Jpeg,
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PixelFormat::Rgb24 => "RGB24",
            PixelFormat::Bgr24 => "BGR24",
            PixelFormat::Nv12 => "NV12",
            PixelFormat::Jpeg => "JPEG",
        })
    }
}

/// A camera frame whose size, format and byte count have been checked against each other.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    width: u32,
    height: u32,
    format: PixelFormat,
    data: Vec<u8>,
}

fn check_dims(format: PixelFormat, width: u32, height: u32) -> Result<()> {
    let bad = |reason: String| VisionError::FrameDims {
        format,
        width,
        height,
        reason,
    };
    if width == 0 || height == 0 {
        return Err(bad("width and height must be at least 1".into()));
    }
    if width > MAX_SIDE || height > MAX_SIDE {
        return Err(VisionError::TooLarge {
            format,
            width,
            height,
            limit: MAX_SIDE,
        });
    }
    if format == PixelFormat::Nv12 && (width % 2 != 0 || height % 2 != 0) {
        return Err(bad("NV12 needs an even width and height".into()));
    }
    Ok(())
}

fn jpeg_options() -> DecoderOptions {
    DecoderOptions::new_safe()
        .set_max_width(MAX_SIDE as usize)
        .set_max_height(MAX_SIDE as usize)
        .set_strict_mode(true)
        .jpeg_set_out_colorspace(ColorSpace::RGB)
}

/// Fewest bytes a JPEG of `width` x `height` pixels can have: every 8x8 block of its
/// full-resolution component takes at least one bit of entropy-coded data (a Huffman code is
/// never shorter, in a sequential scan and in a progressive DC scan alike), so a file smaller
/// than this cannot hold the image its header declares.
pub fn jpeg_min_bytes(width: u32, height: u32) -> u64 {
    let blocks = u64::from(width.div_ceil(8)) * u64::from(height.div_ceil(8));
    blocks.div_ceil(8)
}

/// Reads the width and height from a JPEG header without decoding the pixels, and refuses a
/// file too small to hold them ([`jpeg_min_bytes`]) before anything is allocated for them.
fn jpeg_dims(data: &[u8]) -> Result<(u32, u32)> {
    // The header is read with the decoder's limits at the format's own (65535), so a file over
    // MAX_SIDE is refused as too large, naming the limit, rather than as a decoder error.
    let header_options = jpeg_options()
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX));
    let mut dec = JpegDecoder::new_with_options(ZCursor::new(data), header_options);
    dec.decode_headers()
        .map_err(|e| VisionError::Jpeg(format!("bad header: {e:?}")))?;
    let info = dec
        .info()
        .ok_or_else(|| VisionError::Jpeg("header has no frame info".into()))?;
    let (w, h) = (u32::from(info.width), u32::from(info.height));
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(VisionError::TooLarge {
            format: PixelFormat::Jpeg,
            width: w,
            height: h,
            limit: MAX_SIDE,
        });
    }
    let min = jpeg_min_bytes(w, h);
    if (data.len() as u64) < min {
        return Err(VisionError::Jpeg(format!(
            "the header declares {w}x{h} pixels, which need at least {min} bytes of image data \
             (one bit per 8x8 block), but the file has {} bytes",
            data.len()
        )));
    }
    Ok((w, h))
}

impl Frame {
    /// Checks that `data` holds exactly one `width` x `height` frame in `format` and wraps it.
    ///
    /// For JPEG the header is read and must declare the same size; the pixels are decoded later
    /// by [`Frame::to_rgb`], which reports truncated or corrupt data.
    pub fn new(width: u32, height: u32, format: PixelFormat, data: Vec<u8>) -> Result<Self> {
        check_dims(format, width, height)?;
        let pixels = width as usize * height as usize;
        let expected = match format {
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => Some(pixels * 3),
            PixelFormat::Nv12 => Some(pixels * 3 / 2),
            PixelFormat::Jpeg => None,
        };
        match expected {
            Some(expected) if expected != data.len() => {
                return Err(VisionError::FrameSize {
                    format,
                    width,
                    height,
                    expected,
                    got: data.len(),
                })
            }
            Some(_) => {}
            None => {
                let (w, h) = jpeg_dims(&data)?;
                if (w, h) != (width, height) {
                    return Err(VisionError::FrameDims {
                        format,
                        width,
                        height,
                        reason: format!("the JPEG header says {w}x{h}"),
                    });
                }
            }
        }
        Ok(Self {
            width,
            height,
            format,
            data,
        })
    }

    /// Wraps a JPEG file, taking its size from the header.
    pub fn jpeg(data: Vec<u8>) -> Result<Self> {
        let (w, h) = jpeg_dims(&data)?;
        Self::new(w, h, PixelFormat::Jpeg, data)
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Pixel format of the bytes.
    pub fn format(&self) -> PixelFormat {
        self.format
    }

    /// The raw bytes, as given.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Converts (or decodes) the frame to packed RGB, reusing the frame's bytes where it is
    /// RGB or BGR already (no copy of a camera-sized buffer).
    pub fn into_rgb(self) -> Result<RgbImage> {
        match self.format {
            PixelFormat::Rgb24 => RgbImage::new(self.width, self.height, self.data),
            PixelFormat::Bgr24 => {
                let mut data = self.data;
                for px in data.chunks_exact_mut(3) {
                    px.swap(0, 2);
                }
                RgbImage::new(self.width, self.height, data)
            }
            PixelFormat::Nv12 | PixelFormat::Jpeg => self.to_rgb(),
        }
    }

    /// Converts (or decodes) the frame to packed RGB.
    pub fn to_rgb(&self) -> Result<RgbImage> {
        let (w, h) = (self.width as usize, self.height as usize);
        let data = match self.format {
            PixelFormat::Rgb24 | PixelFormat::Bgr24 => return self.clone().into_rgb(),
            PixelFormat::Nv12 => nv12_to_rgb(&self.data, w, h),
            PixelFormat::Jpeg => {
                let mut dec =
                    JpegDecoder::new_with_options(ZCursor::new(&self.data), jpeg_options());
                let out = dec
                    .decode()
                    .map_err(|e| VisionError::Jpeg(format!("{e:?}")))?;
                if out.len() != w * h * 3 {
                    return Err(VisionError::Jpeg(format!(
                        "decoded {} bytes, expected {} for {}x{} RGB",
                        out.len(),
                        w * h * 3,
                        w,
                        h
                    )));
                }
                out
            }
        };
        RgbImage::new(self.width, self.height, data)
    }
}

/// BT.601 video-range YUV to RGB in 8.8 fixed point (the usual integer approximation).
#[inline(always)]
fn yuv_to_rgb(y: u8, d: i32, e: i32) -> [u8; 3] {
    let c = 298 * (i32::from(y) - 16);
    let r = (c + 409 * e + 128) >> 8;
    let g = (c - 100 * d - 208 * e + 128) >> 8;
    let b = (c + 516 * d + 128) >> 8;
    [
        r.clamp(0, 255) as u8,
        g.clamp(0, 255) as u8,
        b.clamp(0, 255) as u8,
    ]
}

fn nv12_to_rgb(data: &[u8], w: usize, h: usize) -> Vec<u8> {
    let (y_plane, uv_plane) = data.split_at(w * h);
    let mut out = vec![0u8; w * h * 3];
    for (row, out_row) in out.chunks_exact_mut(w * 3).enumerate() {
        let y_row = &y_plane[row * w..(row + 1) * w];
        let uv_row = &uv_plane[(row / 2) * w..(row / 2 + 1) * w];
        for ((ys, uv), px) in y_row
            .chunks_exact(2)
            .zip(uv_row.chunks_exact(2))
            .zip(out_row.chunks_exact_mut(6))
        {
            let d = i32::from(uv[0]) - 128;
            let e = i32::from(uv[1]) - 128;
            px[..3].copy_from_slice(&yuv_to_rgb(ys[0], d, e));
            px[3..].copy_from_slice(&yuv_to_rgb(ys[1], d, e));
        }
    }
    out
}

/// A packed 8-bit RGB image, row-major, no padding: the working image of every stage.
#[derive(Debug, Clone, PartialEq)]
pub struct RgbImage {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

impl RgbImage {
    /// Wraps `3 * width * height` bytes of packed RGB.
    pub fn new(width: u32, height: u32, data: Vec<u8>) -> Result<Self> {
        check_dims(PixelFormat::Rgb24, width, height)?;
        let expected = width as usize * height as usize * 3;
        if data.len() != expected {
            return Err(VisionError::FrameSize {
                format: PixelFormat::Rgb24,
                width,
                height,
                expected,
                got: data.len(),
            });
        }
        Ok(Self {
            width,
            height,
            data,
        })
    }

    /// An image of one colour.
    pub fn filled(width: u32, height: u32, rgb: [u8; 3]) -> Result<Self> {
        check_dims(PixelFormat::Rgb24, width, height)?;
        let data = rgb.repeat(width as usize * height as usize);
        Ok(Self {
            width,
            height,
            data,
        })
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The packed RGB bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The packed RGB bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Gives back the bytes.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// The pixel at `(x, y)`, or `None` outside the image.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        Some([self.data[i], self.data[i + 1], self.data[i + 2]])
    }

    /// Rotates the image by 180 degrees in place (PP-OCR's fix for upside-down text crops).
    pub fn rotate_180(&mut self) {
        let n = self.data.len() / 3;
        for i in 0..n / 2 {
            let j = n - 1 - i;
            for c in 0..3 {
                self.data.swap(i * 3 + c, j * 3 + c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nv12_solid(w: usize, h: usize, y: u8, u: u8, v: u8) -> Vec<u8> {
        let mut d = vec![y; w * h];
        for _ in 0..(w * h / 4) {
            d.push(u);
            d.push(v);
        }
        d
    }

    #[test]
    fn nv12_known_colours() {
        // BT.601 video range: pure red, green, blue, white and black.
        let cases: [((u8, u8, u8), [u8; 3]); 5] = [
            ((81, 90, 240), [255, 0, 0]),
            ((145, 54, 34), [0, 255, 0]),
            ((41, 240, 110), [0, 0, 255]),
            ((235, 128, 128), [255, 255, 255]),
            ((16, 128, 128), [0, 0, 0]),
        ];
        for ((y, u, v), want) in cases {
            let f = Frame::new(4, 2, PixelFormat::Nv12, nv12_solid(4, 2, y, u, v)).unwrap();
            let rgb = f.to_rgb().unwrap();
            for yy in 0..2 {
                for xx in 0..4 {
                    let got = rgb.pixel(xx, yy).unwrap();
                    for c in 0..3 {
                        assert!(
                            (i32::from(got[c]) - i32::from(want[c])).abs() <= 2,
                            "yuv ({y},{u},{v}) gave {got:?}, want {want:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn nv12_chroma_is_per_2x2_block() {
        // 4x2 frame: left block red, right block blue.
        let mut d = vec![81, 81, 41, 41, 81, 81, 41, 41];
        d.extend_from_slice(&[90, 240, 240, 110]);
        let rgb = Frame::new(4, 2, PixelFormat::Nv12, d)
            .unwrap()
            .to_rgb()
            .unwrap();
        assert_eq!(rgb.pixel(1, 1).unwrap()[0], 255);
        assert!(rgb.pixel(2, 0).unwrap()[2] >= 254);
        assert!(rgb.pixel(2, 0).unwrap()[0] <= 1);
    }

    #[test]
    fn bgr_is_swapped() {
        let f = Frame::new(1, 1, PixelFormat::Bgr24, vec![1, 2, 3]).unwrap();
        assert_eq!(f.to_rgb().unwrap().data(), &[3, 2, 1]);
        assert_eq!(f.into_rgb().unwrap().data(), &[3, 2, 1]);
        let f = Frame::new(1, 1, PixelFormat::Rgb24, vec![1, 2, 3]).unwrap();
        assert_eq!(f.to_rgb().unwrap().data(), &[1, 2, 3]);
        assert_eq!(f.into_rgb().unwrap().data(), &[1, 2, 3]);
    }

    #[test]
    fn bad_frames_give_clear_errors() {
        let e = Frame::new(640, 480, PixelFormat::Nv12, vec![0; 1000]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "NV12 frame 640x480 needs 460800 bytes, got 1000"
        );
        let e = Frame::new(3, 2, PixelFormat::Nv12, vec![0; 9]).unwrap_err();
        assert!(e.to_string().contains("even"), "{e}");
        let e = Frame::new(0, 2, PixelFormat::Rgb24, vec![]).unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        let e = Frame::new(MAX_SIDE + 1, 1, PixelFormat::Rgb24, vec![]).unwrap_err();
        assert!(
            matches!(
                e,
                VisionError::TooLarge {
                    limit: MAX_SIDE,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("8192-pixel side limit"), "{e}");
        let e = Frame::new(2, 2, PixelFormat::Bgr24, vec![0; 13]).unwrap_err();
        assert_eq!(e.to_string(), "BGR24 frame 2x2 needs 12 bytes, got 13");
        let e = Frame::new(2, 2, PixelFormat::Jpeg, vec![1, 2, 3]).unwrap_err();
        assert!(matches!(e, VisionError::Jpeg(_)), "{e}");
        assert!(Frame::jpeg(vec![]).is_err());
    }

    #[test]
    fn rotate_180_reverses_pixels() {
        let mut img = RgbImage::new(3, 1, vec![1, 1, 1, 2, 2, 2, 3, 3, 3]).unwrap();
        img.rotate_180();
        assert_eq!(img.data(), &[3, 3, 3, 2, 2, 2, 1, 1, 1]);
        let mut img = RgbImage::new(2, 2, (0..12).collect()).unwrap();
        img.rotate_180();
        assert_eq!(img.pixel(0, 0), Some([9, 10, 11]));
        assert_eq!(img.pixel(1, 1), Some([0, 1, 2]));
    }
}
