//! Image files the commands read (`profile --image`, `bench --image`): a binary `.ppm` or a
//! JPEG, decoded to RGB as the pipeline decodes a frame.

use std::path::Path;

use anyhow::Context;
use camdnn_vision::RgbImage;

/// Whether `path` names a binary PPM (by its `.ppm` extension); anything else is read as JPEG.
pub(crate) fn is_ppm(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("ppm")
}

/// The RGB image in the `.ppm` or JPEG file at `path`.
pub(crate) fn read_image(path: &Path) -> anyhow::Result<RgbImage> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if is_ppm(path) {
        return camdnn_vision::read_ppm(&bytes).with_context(|| format!("in {}", path.display()));
    }
    camdnn_vision::Frame::jpeg(bytes)
        .and_then(|f| f.to_rgb())
        .with_context(|| {
            format!(
                "{} is not a JPEG camdnnd can decode (use .jpg or binary .ppm)",
                path.display()
            )
        })
}
