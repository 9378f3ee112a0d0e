//! JPEG frames: decode a real encoded image, and refuse corrupt, truncated or mis-sized ones.

use camdnn_vision::{Frame, PixelFormat, VisionError};
use jpeg_encoder::{ColorType, Encoder};

/// A 32x16 JPEG: left half red, right half blue.
fn red_blue_jpeg() -> Vec<u8> {
    let mut px = Vec::new();
    for _y in 0..16 {
        for x in 0..32 {
            px.extend_from_slice(if x < 16 {
                &[220, 20, 20]
            } else {
                &[20, 20, 220]
            });
        }
    }
    let mut out = Vec::new();
    Encoder::new(&mut out, 95)
        .encode(&px, 32, 16, ColorType::Rgb)
        .unwrap();
    out
}

fn near(a: [u8; 3], b: [u8; 3], tol: i32) -> bool {
    a.iter()
        .zip(b)
        .all(|(x, y)| (i32::from(*x) - i32::from(y)).abs() <= tol)
}

#[test]
fn decodes_a_real_jpeg() {
    let f = Frame::jpeg(red_blue_jpeg()).unwrap();
    assert_eq!(
        (f.width(), f.height(), f.format()),
        (32, 16, PixelFormat::Jpeg)
    );
    let rgb = f.to_rgb().unwrap();
    assert!(
        near(rgb.pixel(4, 8).unwrap(), [220, 20, 20], 12),
        "{:?}",
        rgb.pixel(4, 8)
    );
    assert!(
        near(rgb.pixel(28, 8).unwrap(), [20, 20, 220], 12),
        "{:?}",
        rgb.pixel(28, 8)
    );
    // Declared size must match the header.
    let f = Frame::new(32, 16, PixelFormat::Jpeg, red_blue_jpeg()).unwrap();
    assert_eq!(f.to_rgb().unwrap().width(), 32);
}

#[test]
fn wrong_declared_size_is_an_error() {
    let e = Frame::new(16, 16, PixelFormat::Jpeg, red_blue_jpeg()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "JPEG frame 16x16: the JPEG header says 32x16"
    );
}

#[test]
fn truncated_jpeg_is_an_error() {
    let full = red_blue_jpeg();
    // Cut inside the entropy-coded data: the header is intact, the pixels are not.
    let cut = full[..full.len() - 40].to_vec();
    let res = Frame::jpeg(cut).and_then(|f| f.to_rgb());
    assert!(matches!(res, Err(VisionError::Jpeg(_))), "{res:?}");
    // Cut inside the header.
    let res = Frame::jpeg(full[..20].to_vec());
    assert!(matches!(res, Err(VisionError::Jpeg(_))), "{res:?}");
    // Not a JPEG at all.
    assert!(Frame::jpeg(b"GIF89a not a jpeg".to_vec()).is_err());
}

#[test]
fn grayscale_jpeg_decodes_to_grey_rgb() {
    let px = vec![128u8; 16 * 8];
    let mut out = Vec::new();
    Encoder::new(&mut out, 95)
        .encode(&px, 16, 8, ColorType::Luma)
        .unwrap();
    let rgb = Frame::jpeg(out).unwrap().to_rgb().unwrap();
    assert!(
        near(rgb.pixel(3, 3).unwrap(), [128, 128, 128], 3),
        "{:?}",
        rgb.pixel(3, 3)
    );
}
