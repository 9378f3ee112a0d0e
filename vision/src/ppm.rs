//! Binary PPM (`P6`, maxval 255) files: the test photos, `camdnnd feed
//! --images` and `camdnnd bench` read them here.
//!
//! Hand-written rather than zune-ppm: that decoder skips every whitespace
//! byte after the maxval (and a `#` there as a comment), so an image whose
//! first pixel bytes are 9-13, 32 or 35 is read shifted. The format allows
//! exactly one whitespace byte between the header and the pixels.

use crate::error::VisionError;
use crate::frame::RgbImage;

type Result<T> = std::result::Result<T, VisionError>;

fn bad(reason: impl Into<String>) -> VisionError {
    VisionError::Ppm(reason.into())
}

/// The image of a binary PPM file's bytes: `P6`, width, height and maxval
/// 255, separated by whitespace and `#` comments, then one whitespace byte
/// and `3 × width × height` pixel bytes (any bytes after them are ignored,
/// as the format allows several images in one file). Sizes over
/// [`crate::MAX_SIDE`] are refused before any pixel memory is allocated.
pub fn read_ppm(bytes: &[u8]) -> Result<RgbImage> {
    let mut at = 0;
    let mut fields = [0u32; 3];
    let magic = header_token(bytes, &mut at).ok_or_else(|| bad("empty file"))?;
    if magic != b"P6" {
        return Err(bad(format!(
            "not a binary PPM: starts with {:?}, not \"P6\"",
            String::from_utf8_lossy(&magic[..magic.len().min(8)])
        )));
    }
    for (field, name) in fields.iter_mut().zip(["width", "height", "maxval"]) {
        let token = header_token(bytes, &mut at)
            .ok_or_else(|| bad(format!("the header ends before its {name}")))?;
        *field = std::str::from_utf8(token)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| {
                bad(format!(
                    "{name} {:?} is not a number",
                    String::from_utf8_lossy(&token[..token.len().min(12)])
                ))
            })?;
    }
    let [width, height, maxval] = fields;
    if maxval != 255 {
        return Err(bad(format!(
            "maxval {maxval}; only 255 (8 bits a channel) is read"
        )));
    }
    let image = RgbImage::filled(width, height, [0; 3])?;
    let need = image.data().len();
    // `at` is on the one whitespace byte that ends the header.
    let pixels = bytes.get(at + 1..at + 1 + need).ok_or_else(|| {
        bad(format!(
            "{width}x{height} needs {need} pixel bytes, the file has {}",
            bytes.len().saturating_sub(at + 1)
        ))
    })?;
    RgbImage::new(width, height, pixels.to_vec())
}

/// The next header token from `at`, past whitespace and `#` comments;
/// `at` is left on the byte after it.
fn header_token<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    loop {
        match bytes.get(*at)? {
            b'#' => {
                while bytes.get(*at).is_some_and(|b| *b != b'\n') {
                    *at += 1;
                }
            }
            b if b.is_ascii_whitespace() => *at += 1,
            _ => break,
        }
    }
    let start = *at;
    while bytes.get(*at).is_some_and(|b| !b.is_ascii_whitespace()) {
        *at += 1;
    }
    Some(&bytes[start..*at])
}

#[cfg(test)]
mod tests {
    use super::read_ppm;

    fn ppm(header: &str, pixels: &[u8]) -> Vec<u8> {
        let mut b = header.as_bytes().to_vec();
        b.extend_from_slice(pixels);
        b
    }

    #[test]
    fn pixels_that_look_like_whitespace_or_comments_are_pixels() {
        let pixels = [b' ', b'\n', b'#', 9, 13, 255];
        let img = read_ppm(&ppm("P6\n# a comment\n2 1\n255\n", &pixels)).unwrap();
        assert_eq!((img.width(), img.height()), (2, 1));
        assert_eq!(img.data(), pixels);
    }

    #[test]
    fn bad_files_are_named_for_what_is_wrong() {
        let err = |b: &[u8]| read_ppm(b).unwrap_err().to_string();
        assert!(err(b"").contains("empty file"));
        assert!(err(b"P3\n1 1\n255\n").contains("not a binary PPM"));
        assert!(err(b"P6\n1").contains("before its height"));
        assert!(err(b"P6\n1 x 255\n").contains("height \"x\" is not a number"));
        assert!(err(b"P6\n1 1\n65535\n").contains("maxval 65535"));
        assert!(err(b"P6\n2 2\n255\n\x01\x02").contains("needs 12 pixel bytes, the file has 2"));
        assert!(err(b"P6\n0 2\n255\n").contains("at least 1"));
        assert!(err(b"P6\n100000 100000\n255\n").contains("side limit"));
    }
}
