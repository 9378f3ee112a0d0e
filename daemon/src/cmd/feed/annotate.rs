//! `feed --annotate DIR`: each answered frame drawn with its objects (box, class and score),
//! pose skeletons and face results, written as a JPEG named after its source, so a person can
//! look rather than read.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use camdnn_protocol::{FrameResult, ObjectResult, PixelFormat};
use embedded_graphics::mono_font::{ascii::FONT_10X20, ascii::FONT_6X13_BOLD, MonoFont};
use embedded_graphics::mono_font::{MonoTextStyle, MonoTextStyleBuilder};
use embedded_graphics::pixelcolor::Rgb888;
use embedded_graphics::prelude::*;
use embedded_graphics::primitives::{Circle, Line, PrimitiveStyle, Rectangle};
use embedded_graphics::text::{Baseline, Text};

use super::answer::{class_name, face_words, tensor, KEYPOINT_SEEN};
use super::source::Source;

/// JPEG quality of the pictures written.
const JPEG_QUALITY: u8 = 88;
/// COCO keypoint pairs joined by the skeleton's lines (MoveNet order: nose, eyes, ears,
/// shoulders, elbows, wrists, hips, knees, ankles).
const SKELETON: [(usize, usize); 16] = [
    (0, 1),
    (0, 2),
    (1, 3),
    (2, 4),
    (5, 6),
    (5, 7),
    (7, 9),
    (6, 8),
    (8, 10),
    (5, 11),
    (6, 12),
    (11, 12),
    (11, 13),
    (13, 15),
    (12, 14),
    (14, 16),
];
/// Box colours, picked per class name so one class keeps one colour.
const PALETTE: [Rgb888; 6] = [
    Rgb888::new(255, 64, 64),
    Rgb888::new(64, 160, 255),
    Rgb888::new(255, 200, 0),
    Rgb888::new(64, 220, 64),
    Rgb888::new(220, 64, 255),
    Rgb888::new(0, 220, 220),
];
const SKELETON_COLOUR: Rgb888 = Rgb888::new(0, 255, 128);
const FACE_COLOUR: Rgb888 = Rgb888::new(255, 255, 255);

/// Creates the folder; refuses the image folder itself (pictures would be sent next time).
pub fn prepare_dir(dir: &Path, images: Option<&Path>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating --annotate folder {}", dir.display()))?;
    if let Some(images) = images {
        if std::fs::canonicalize(dir).ok() == std::fs::canonicalize(images).ok() {
            bail!(
                "--annotate {} is the --images folder: pick another folder for the pictures",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The frame's pixels as packed RGB.
fn pixels(src: &Source) -> anyhow::Result<(u32, u32, Vec<u8>)> {
    match src.format {
        PixelFormat::Rgb24 => Ok((src.width, src.height, src.payload.to_vec())),
        PixelFormat::Jpeg => {
            let img = camdnn_vision::Frame::jpeg(src.payload.to_vec())?.to_rgb()?;
            Ok((img.width(), img.height(), img.into_data()))
        }
        other => bail!("drawing {other:?} frames is not supported"),
    }
}

/// Draws `r` on the frame of `src` and writes it into `dir`; returns the file written.
pub fn write(dir: &Path, src: &Source, r: &FrameResult) -> anyhow::Result<PathBuf> {
    let (width, height, data) = pixels(src)?;
    let mut canvas = Canvas {
        width,
        height,
        data,
    };
    draw(&mut canvas, r);
    let path = dir.join(file_name(&src.label));
    let (w, h) = (u16::try_from(width)?, u16::try_from(height)?);
    jpeg_encoder::Encoder::new_file(&path, JPEG_QUALITY)
        .and_then(|e| e.encode(&canvas.data, w, h, jpeg_encoder::ColorType::Rgb))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The picture's file name: a JPEG keeps its name (`person.jpg`), others get `.jpg` added
/// (`kite.png.jpg`), a video frame is numbered (`clip.mp4#12` -> `clip.mp4-000012.jpg`).
/// Characters other than letters, digits, `.`, `-` and `_` become `_`.
fn file_name(label: &str) -> String {
    let base = match label.rsplit_once('#') {
        Some((name, index)) => format!("{name}-{:0>6}", index),
        None => label.to_owned(),
    };
    let clean: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let lower = clean.to_ascii_lowercase();
    if lower.ends_with(".jpg") || lower.ends_with(".jpeg") {
        clean
    } else {
        format!("{clean}.jpg")
    }
}

/// Packed RGB pixels embedded-graphics draws on.
struct Canvas {
    width: u32,
    height: u32,
    data: Vec<u8>,
}

impl OriginDimensions for Canvas {
    fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }
}

impl DrawTarget for Canvas {
    type Color = Rgb888;
    type Error = std::convert::Infallible;

    fn draw_iter<I: IntoIterator<Item = Pixel<Rgb888>>>(
        &mut self,
        pixels: I,
    ) -> Result<(), Self::Error> {
        for Pixel(p, c) in pixels {
            let (Ok(x), Ok(y)) = (u32::try_from(p.x), u32::try_from(p.y)) else {
                continue;
            };
            if x < self.width && y < self.height {
                let i = (y as usize * self.width as usize + x as usize) * 3;
                self.data[i..i + 3].copy_from_slice(&[c.r(), c.g(), c.b()]);
            }
        }
        Ok(())
    }
}

fn colour_of(class: &str) -> Rgb888 {
    let h = class
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    PALETTE[h as usize % PALETTE.len()]
}

fn point(x: f32, y: f32) -> Point {
    Point::new(x.round() as i32, y.round() as i32)
}

/// Line width and font for a frame of this size (thicker and larger on large frames).
fn scale(c: &Canvas) -> (u32, &'static MonoFont<'static>) {
    let side = c.width.min(c.height);
    let font = if side >= 600 {
        &FONT_10X20
    } else {
        &FONT_6X13_BOLD
    };
    ((side / 250).clamp(2, 6), font)
}

fn rect(c: &mut Canvas, b: [f32; 4], colour: Rgb888, stroke: u32) {
    let top_left = point(b[0], b[1]);
    let size = Size::new(
        (b[2] - b[0]).round().max(1.0) as u32,
        (b[3] - b[1]).round().max(1.0) as u32,
    );
    let _ = Rectangle::new(top_left, size)
        .into_styled(PrimitiveStyle::with_stroke(colour, stroke))
        .draw(c);
}

/// A label on a filled band, above `at` when there is room, else just inside it.
fn label(c: &mut Canvas, text: &str, at: Point, colour: Rgb888, font: &'static MonoFont<'static>) {
    let style: MonoTextStyle<'_, Rgb888> = MonoTextStyleBuilder::new()
        .font(font)
        .text_color(Rgb888::BLACK)
        .background_color(colour)
        .build();
    let h = font.character_size.height as i32;
    let y = if at.y >= h { at.y - h } else { at.y };
    let _ = Text::with_baseline(text, Point::new(at.x.max(0), y), style, Baseline::Top).draw(c);
}

fn draw(c: &mut Canvas, r: &FrameResult) {
    let (stroke, font) = scale(c);
    for o in &r.objects {
        let name = class_name(&o.class);
        let colour = colour_of(&name);
        let b = [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1];
        rect(c, b, colour, stroke);
        draw_pose(c, o, stroke);
        label(
            c,
            &format!("{name} {:.2}", o.score),
            point(b[0], b[1]),
            colour,
            font,
        );
    }
    // Faces last, so their labels sit on top of the person's lines.
    for o in &r.objects {
        if let Some(f) = tensor(o, None, "face_box") {
            let fb = [f.data[0], f.data[1], f.data[2], f.data[3]];
            rect(c, fb, FACE_COLOUR, stroke.div_ceil(2));
            let words = face_words(o).unwrap_or_else(|| "face".to_owned());
            label(
                c,
                &words,
                point(fb[0], fb[3] + font.character_size.height as f32),
                FACE_COLOUR,
                font,
            );
        }
    }
}

fn draw_pose(c: &mut Canvas, o: &ObjectResult, stroke: u32) {
    let Some(k) = tensor(o, None, "keypoints") else {
        return;
    };
    let kp: Vec<&[f32]> = k.data.chunks_exact(3).collect();
    if kp.len() != 17 {
        return;
    }
    let seen = |i: usize| kp[i][2] >= KEYPOINT_SEEN;
    for (a, b) in SKELETON {
        if seen(a) && seen(b) {
            let _ = Line::new(point(kp[a][0], kp[a][1]), point(kp[b][0], kp[b][1]))
                .into_styled(PrimitiveStyle::with_stroke(SKELETON_COLOUR, stroke))
                .draw(c);
        }
    }
    for p in kp.iter().filter(|p| p[2] >= KEYPOINT_SEEN) {
        let _ = Circle::with_center(point(p[0], p[1]), stroke * 2 + 2)
            .into_styled(PrimitiveStyle::with_fill(SKELETON_COLOUR))
            .draw(c);
    }
}

#[cfg(test)]
#[path = "annotate_tests.rs"]
mod tests;
