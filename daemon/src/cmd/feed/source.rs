//! What `camdnnd feed` sends: every frame named by its source, read one at a time, so one bad
//! file is reported and skipped while the others are sent.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use bytes::Bytes;
use camdnn_protocol::{BBox, ClassRef, PixelFormat, UpstreamDetection};

use super::Args;

/// Frame size of synthetic frames when --width / --height are not given.
const SYNTHETIC_SIZE: (u32, u32) = (640, 480);
/// Largest synthetic frame, bytes.
const MAX_SYNTHETIC_BYTES: u64 = 64 << 20;
/// Image file extensions feed reads.
const READ: [&str; 4] = ["jpg", "jpeg", "png", "ppm"];
/// Image file extensions feed recognises but does not read: such a file is reported, never
/// skipped silently.
const NOT_READ: [&str; 10] = [
    "gif", "bmp", "webp", "tif", "tiff", "pgm", "pbm", "pnm", "avif", "heic",
];

/// One frame to send, before stream/seq/time are stamped.
#[derive(Clone)]
pub struct Source {
    /// What the answer is named by: the file name, or the video and frame index.
    pub label: String,
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    pub payload: Bytes,
    pub detections: Option<Vec<UpstreamDetection>>,
}

/// One entry of the source: a frame, or a file that could not be read.
pub enum Item {
    Frame(Source),
    Unreadable { label: String, error: String },
}

/// Every entry to send, in order, and the files of the folder that are not images.
pub struct Listing {
    pub items: Box<dyn Iterator<Item = anyhow::Result<Item>>>,
    pub ignored: Vec<String>,
}

/// The source repeated `--repeat` times, at most `--max-frames` entries.
pub fn sources(args: &Args) -> anyhow::Result<Listing> {
    let max = usize::try_from(args.max_frames.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
    if let Some(path) = &args.video {
        let size = match (args.width, args.height) {
            (Some(w), Some(h)) if w > 0 && h > 0 => (w, h),
            (None, None) => probe_video_size(path)?,
            _ => bail!(
                "--width and --height scale a video together: give both (at least 1) or neither"
            ),
        };
        let (path, repeat) = (path.clone(), args.repeat);
        let frames = (0..repeat).flat_map(move |_| match VideoFrames::spawn(&path, size) {
            Ok(v) => Box::new(v) as Box<dyn Iterator<Item = anyhow::Result<Item>>>,
            Err(e) => Box::new(std::iter::once(Err(e))),
        });
        return Ok(Listing {
            items: Box::new(frames.take(max)),
            ignored: Vec::new(),
        });
    }
    if let Some(dir) = &args.images {
        let (paths, ignored) = list_images(dir)?;
        let n = paths.len().saturating_mul(args.repeat as usize).min(max);
        let items = paths
            .into_iter()
            .cycle()
            .take(n)
            .map(|p| Ok(read_image(&p)));
        return Ok(Listing {
            items: Box::new(items),
            ignored,
        });
    }
    let list = synthetic(args)?;
    if list.is_empty() {
        bail!("nothing to send: the source is empty");
    }
    let n = list.len().saturating_mul(args.repeat as usize).min(max);
    Ok(Listing {
        items: Box::new(list.into_iter().cycle().take(n).map(|s| Ok(Item::Frame(s)))),
        ignored: Vec::new(),
    })
}

fn extension(p: &Path) -> String {
    p.extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase()
}

fn file_label(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The folder's image files in name order (those feed reads and those it reports as
/// unreadable), and the names of the files that are not images.
fn list_images(dir: &Path) -> anyhow::Result<(Vec<PathBuf>, Vec<String>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading image folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let (images, others): (Vec<PathBuf>, Vec<PathBuf>) = paths.into_iter().partition(|p| {
        let ext = extension(p);
        READ.contains(&ext.as_str()) || NOT_READ.contains(&ext.as_str())
    });
    if images.is_empty() {
        bail!(
            "{} holds no image files (feed reads .jpg, .jpeg, .png and .ppm)",
            dir.display()
        );
    }
    Ok((images, others.iter().map(|p| file_label(p)).collect()))
}

/// Reads one image file, or says why it cannot be sent.
fn read_image(path: &Path) -> Item {
    let label = file_label(path);
    let ext = extension(path);
    let read = || -> anyhow::Result<Source> {
        if NOT_READ.contains(&ext.as_str()) {
            bail!(".{ext} images are not read by feed: convert it to JPEG, PNG or PPM");
        }
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let (width, height, format, payload) = match ext.as_str() {
            "ppm" => ppm(&bytes)?,
            "png" => png(&bytes)?,
            _ => {
                let (w, h) = jpeg_size(&bytes)?;
                (w, h, PixelFormat::Jpeg, Bytes::from(bytes))
            }
        };
        Ok(Source {
            label: label.clone(),
            width,
            height,
            format,
            payload,
            detections: None,
        })
    };
    match read() {
        Ok(s) => Item::Frame(s),
        Err(e) => Item::Unreadable {
            label,
            error: format!("{e:#}"),
        },
    }
}

type Pixels = (u32, u32, PixelFormat, Bytes);

/// A PNG decoded to RGB24 (grey, alpha and 16-bit samples are converted; alpha is dropped).
fn png(b: &[u8]) -> anyhow::Result<Pixels> {
    use zune_png::zune_core::bytestream::ZCursor;
    use zune_png::zune_core::colorspace::ColorSpace;
    use zune_png::zune_core::options::DecoderOptions;
    let max = camdnn_vision::MAX_SIDE;
    if b.len() >= 24 && &b[12..16] == b"IHDR" {
        let w = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
        let h = u32::from_be_bytes([b[20], b[21], b[22], b[23]]);
        if w > max || h > max {
            bail!("PNG {w}x{h} is larger than the {max}-pixel side limit");
        }
    }
    let options = DecoderOptions::new_safe()
        .png_set_strip_to_8bit(true)
        .set_max_width(max as usize)
        .set_max_height(max as usize);
    let mut dec = zune_png::PngDecoder::new_with_options(ZCursor::new(b), options);
    let pixels = dec
        .decode_raw()
        .map_err(|e| anyhow::anyhow!("not a readable PNG: {e:?}"))?;
    let (w, h) = dec.dimensions().context("PNG has no size")?;
    let colorspace = dec.colorspace().context("PNG has no colour type")?;
    let channels = colorspace.num_components();
    if pixels.len() != w * h * channels {
        bail!(
            "PNG decoded to {} bytes, not {w}x{h}x{channels}",
            pixels.len()
        );
    }
    let rgb: Vec<u8> = match colorspace {
        ColorSpace::RGB => pixels,
        ColorSpace::RGBA => pixels
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        ColorSpace::Luma => pixels.iter().flat_map(|&v| [v, v, v]).collect(),
        ColorSpace::LumaA => pixels
            .chunks_exact(2)
            .flat_map(|p| [p[0], p[0], p[0]])
            .collect(),
        other => bail!("PNG colour type {other:?} is not supported"),
    };
    Ok((w as u32, h as u32, PixelFormat::Rgb24, Bytes::from(rgb)))
}

/// Width and height from a JPEG's start-of-frame marker.
pub(super) fn jpeg_size(b: &[u8]) -> anyhow::Result<(u32, u32)> {
    if b.len() < 4 || b[0] != 0xFF || b[1] != 0xD8 {
        bail!("not a JPEG file (no SOI marker)");
    }
    let mut i = 2;
    while i + 4 <= b.len() {
        if b[i] != 0xFF {
            bail!("corrupt JPEG: expected a marker at byte {i}");
        }
        let marker = b[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([b[i + 2], b[i + 3]]));
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            if i + 9 > b.len() {
                break;
            }
            let h = u16::from_be_bytes([b[i + 5], b[i + 6]]);
            let w = u16::from_be_bytes([b[i + 7], b[i + 8]]);
            if w == 0 || h == 0 {
                bail!("JPEG states a {w}x{h} size");
            }
            return Ok((u32::from(w), u32::from(h)));
        }
        i += 2 + len;
    }
    bail!("JPEG has no start-of-frame marker")
}

/// A binary PPM (P6, maxval 255) as an RGB24 frame.
pub(crate) fn ppm(b: &[u8]) -> anyhow::Result<Pixels> {
    let image = camdnn_vision::read_ppm(b)?;
    let (w, h) = (image.width(), image.height());
    Ok((w, h, PixelFormat::Rgb24, Bytes::from(image.into_data())))
}

/// The first video stream's width and height, read by `ffprobe`.
fn probe_video_size(path: &Path) -> anyhow::Result<(u32, u32)> {
    if !path.is_file() {
        bail!("video {} does not exist", path.display());
    }
    let out = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=width,height", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .context("starting ffprobe to read the video's size (is ffmpeg installed and on PATH?)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let size = text.trim().split_once(',').and_then(|(w, h)| {
        let (w, h) = (w.trim().parse::<u32>().ok()?, h.trim().parse::<u32>().ok()?);
        (w > 0 && h > 0).then_some((w, h))
    });
    size.with_context(|| {
        format!(
            "ffprobe found no video stream size in {} ({}); give --width and --height",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

/// The first `max` frames of the video at `path`, scaled to `size`, as RGB24 payloads (a
/// clip the evaluation commands hold in memory).
pub(crate) fn decode_video(
    path: &Path,
    size: (u32, u32),
    max: usize,
) -> anyhow::Result<Vec<Bytes>> {
    if !path.is_file() {
        bail!(
            "video {} does not exist (scripts/fetch_test_video.sh fetches testdata/vtest.avi)",
            path.display()
        );
    }
    let mut frames = Vec::new();
    for item in VideoFrames::spawn(path, size)?.take(max) {
        match item.with_context(|| format!("decoding {}", path.display()))? {
            Item::Frame(s) => frames.push(s.payload),
            Item::Unreadable { label, error } => bail!("{label}: {error}"),
        }
    }
    if frames.is_empty() {
        bail!("{} has no frames", path.display());
    }
    Ok(frames)
}

/// RGB24 frames decoded from a video by an `ffmpeg` child process.
pub struct VideoFrames {
    child: std::process::Child,
    stdout: std::process::ChildStdout,
    name: String,
    size: (u32, u32),
    index: u64,
    done: bool,
}

impl VideoFrames {
    pub(crate) fn spawn(path: &Path, (width, height): (u32, u32)) -> anyhow::Result<Self> {
        if !path.is_file() {
            bail!("video {} does not exist", path.display());
        }
        let mut child = std::process::Command::new("ffmpeg")
            .args(["-v", "error", "-nostdin", "-i"])
            .arg(path)
            .args(["-vf", &format!("scale={width}:{height}")])
            .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("starting ffmpeg to decode --video (is ffmpeg installed and on PATH?)")?;
        let stdout = child.stdout.take().context("ffmpeg stdout")?;
        Ok(Self {
            child,
            stdout,
            name: file_label(path),
            size: (width, height),
            index: 0,
            done: false,
        })
    }
}

impl Iterator for VideoFrames {
    type Item = anyhow::Result<Item>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::io::Read;
        if self.done {
            return None;
        }
        let (width, height) = self.size;
        let len = PixelFormat::Rgb24.raw_len(width, height)? as usize;
        let mut buf = vec![0u8; len];
        match self.stdout.read_exact(&mut buf) {
            Ok(()) => {
                let label = format!("{}#{}", self.name, self.index);
                self.index += 1;
                Some(Ok(Item::Frame(Source {
                    label,
                    width,
                    height,
                    format: PixelFormat::Rgb24,
                    payload: Bytes::from(buf),
                    detections: None,
                })))
            }
            Err(_) => {
                self.done = true;
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                match self.child.wait() {
                    Ok(st) if st.success() => None,
                    Ok(st) => Some(Err(anyhow::anyhow!(
                        "ffmpeg failed ({st}) decoding the video: {}",
                        err.trim()
                    ))),
                    Err(e) => Some(Err(anyhow::anyhow!("waiting for ffmpeg: {e}"))),
                }
            }
        }
    }
}

impl Drop for VideoFrames {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Synthetic frames: the trace's (with upstream detections) or --synthetic's (without).
fn synthetic(args: &Args) -> anyhow::Result<Vec<Source>> {
    let width = args.width.unwrap_or(SYNTHETIC_SIZE.0);
    let height = args.height.unwrap_or(SYNTHETIC_SIZE.1);
    if width == 0 || height == 0 {
        bail!("--width and --height must be at least 1");
    }
    let len = PixelFormat::Rgb24
        .raw_len(width, height)
        .filter(|l| *l <= MAX_SYNTHETIC_BYTES)
        .with_context(|| format!("synthetic frames of {width}x{height} are too large"))?;
    let payload = Bytes::from(vec![128u8; len as usize]);
    let frame = |label: String, detections| Source {
        label,
        width,
        height,
        format: PixelFormat::Rgb24,
        payload: payload.clone(),
        detections,
    };
    if let Some(path) = &args.trace {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading trace {}", path.display()))?;
        let trace =
            camdnn_policy::sim::Trace::parse(&text, args.classes.len()).with_context(|| {
                format!("in trace {} (columns: {:?})", path.display(), args.classes)
            })?;
        let mut out = Vec::new();
        for seg in &trace.segments {
            let dets = trace_detections(&seg.scene, &args.classes, width, height);
            for _ in 0..seg.frames {
                out.push(frame(format!("trace#{}", out.len()), Some(dets.clone())));
            }
        }
        return Ok(out);
    }
    let n = args.synthetic.unwrap_or(100);
    Ok((0..n)
        .map(|i| frame(format!("synthetic#{i}"), None))
        .collect())
}

/// Boxes laid out on a grid, `counts[i]` of class `classes[i]`.
pub(crate) fn trace_detections(
    counts: &[u32],
    classes: &[String],
    width: u32,
    height: u32,
) -> Vec<UpstreamDetection> {
    let n: u32 = counts.iter().sum();
    let cols = (f64::from(n).sqrt().ceil() as u32).max(1);
    let (cw, ch) = (width as f32 / cols as f32, height as f32 / cols as f32);
    let mut out = Vec::new();
    let mut k = 0u32;
    for (class, &count) in classes.iter().zip(counts) {
        for _ in 0..count {
            let (x, y) = ((k % cols) as f32 * cw, (k / cols) as f32 * ch);
            out.push(UpstreamDetection {
                bbox: BBox {
                    x0: x,
                    y0: y,
                    x1: x + cw,
                    y1: y + ch,
                },
                class: ClassRef::Name(class.clone()),
                score: 0.9,
            });
            k += 1;
        }
    }
    out
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
