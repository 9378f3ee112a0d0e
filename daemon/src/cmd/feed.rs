//! `camdnnd feed`: streams frames to a running camdnnd at a given rate and
//! prints every answer as one JSON line on stdout (a summary goes to stderr).
//!
//! Sources: a folder of images (JPEG files are sent as JPEG, binary PPM as
//! RGB24), a scene trace replayed as synthetic frames carrying upstream
//! detections (`FRAMES R1 R2 ...` per line, the `simulate` format), or
//! synthetic frames without detections.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use bytes::Bytes;
use camdnn_protocol::{
    BBox, ClassRef, Client, ClientError, Deadline, Frame, OutputValue, PixelFormat, ServerMessage,
    UpstreamDetection,
};
use serde_json::json;

/// Options of `camdnnd feed`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's socket.
    #[arg(long, default_value = "/run/camdnn/camdnnd.sock")]
    pub socket: PathBuf,
    /// A folder of images (`.jpg`/`.jpeg` sent as JPEG, `.ppm` as RGB24), in name order.
    #[arg(long, conflicts_with_all = ["trace", "synthetic", "video"])]
    pub images: Option<PathBuf>,
    /// A video file, decoded by `ffmpeg` (on PATH) to RGB24 frames scaled to
    /// --width x --height, sent at --fps.
    #[arg(long, conflicts_with_all = ["trace", "synthetic"])]
    pub video: Option<PathBuf>,
    /// A scene trace (`FRAMES R1 R2 ...` per line): synthetic frames with
    /// R_i upstream detections of class i of --classes.
    #[arg(long, conflicts_with = "synthetic")]
    pub trace: Option<PathBuf>,
    /// This many synthetic frames without detections (the server's detector runs).
    #[arg(long)]
    pub synthetic: Option<u64>,
    /// Class names of the trace's columns.
    #[arg(long, value_delimiter = ',', default_value = "person,car,bicycle")]
    pub classes: Vec<String>,
    /// Frames per second (0: as fast as the window allows).
    #[arg(long, default_value_t = 14.0)]
    pub fps: f64,
    /// Send the source this many times.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Stop after this many frames.
    #[arg(long)]
    pub max_frames: Option<u64>,
    /// Stream id.
    #[arg(long, default_value_t = 0)]
    pub stream: u32,
    /// Priority (0-255); absent: the server's default.
    #[arg(long)]
    pub priority: Option<u8>,
    /// Deadline in ms after the server reads each frame; absent: none.
    #[arg(long)]
    pub deadline_ms: Option<u64>,
    /// Width of synthetic frames.
    #[arg(long, default_value_t = 640)]
    pub width: u32,
    /// Height of synthetic frames.
    #[arg(long, default_value_t = 480)]
    pub height: u32,
    /// Client name sent in Hello.
    #[arg(long, default_value = "camdnnd-feed")]
    pub name: String,
    /// Print only the summary, not one line per answer.
    #[arg(long)]
    pub quiet: bool,
}

/// One frame to send, before stream/seq/time are stamped.
#[derive(Clone)]
pub(crate) struct Source {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) format: PixelFormat,
    pub(crate) payload: Bytes,
    pub(crate) detections: Option<Vec<UpstreamDetection>>,
}

/// Runs the feeder.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let frames = sources(args)?;
    let mut client = Client::connect(&args.socket, &args.name)
        .with_context(|| format!("connecting to {}", args.socket.display()))?;
    let period = (args.fps > 0.0).then(|| Duration::from_secs_f64(1.0 / args.fps));
    let mut out = std::io::stdout().lock();
    let mut tally = Tally::default();
    let start = Instant::now();
    for (seq, src) in (0u64..).zip(frames) {
        let src = src?;
        if let Some(p) = period {
            let due = start + p.mul_f64(seq as f64);
            drain_until(
                &mut client,
                args.stream,
                due,
                &mut out,
                &mut tally,
                args.quiet,
            )?;
        }
        client.stream().set_read_timeout(None)?;
        let frame = Frame {
            stream_id: args.stream,
            seq,
            capture_ts_us: now_us(),
            width: src.width,
            height: src.height,
            pixel_format: src.format,
            priority: args.priority,
            deadline: args.deadline_ms.map(|ms| Deadline::RelativeUs(ms * 1000)),
            detections: src.detections,
            payload: src.payload,
        };
        client.send_frame(&frame).with_context(|| {
            format!(
                "sending frame {seq} ({}x{} {:?}, {} payload bytes)",
                frame.width,
                frame.height,
                frame.pixel_format,
                frame.payload.len()
            )
        })?;
        tally.sent += 1;
    }
    client.stream().set_read_timeout(None)?;
    for m in client.bye()? {
        print_answer(&m, &mut out, &mut tally, args.quiet)?;
    }
    out.flush()?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{}",
        json!({
            "sent": tally.sent,
            "results": tally.results,
            "dropped": tally.dropped,
            "rejected": tally.rejected,
            "seconds": secs,
        })
    );
    Ok(())
}

#[derive(Default)]
struct Tally {
    sent: u64,
    results: u64,
    dropped: BTreeMap<String, u64>,
    rejected: BTreeMap<String, u64>,
}

/// Prints answers that arrive before `due`.
fn drain_until(
    c: &mut Client,
    stream: u32,
    due: Instant,
    out: &mut impl Write,
    tally: &mut Tally,
    quiet: bool,
) -> anyhow::Result<()> {
    loop {
        let now = Instant::now();
        if now >= due {
            return Ok(());
        }
        if c.in_flight(stream) == 0 {
            std::thread::sleep(due - now);
            return Ok(());
        }
        c.stream()
            .set_read_timeout(Some((due - now).max(Duration::from_millis(1))))?;
        match c.recv() {
            Ok(m) => print_answer(&m, out, tally, quiet)?,
            Err(ClientError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(())
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn print_answer(
    m: &ServerMessage,
    out: &mut impl Write,
    tally: &mut Tally,
    quiet: bool,
) -> anyhow::Result<()> {
    let v = answer_json(m);
    match m {
        ServerMessage::Result(_) => tally.results += 1,
        ServerMessage::Dropped(d) => {
            *tally
                .dropped
                .entry(crate::server::metrics::drop_label(d.reason).to_owned())
                .or_default() += 1
        }
        ServerMessage::Rejected(r) => {
            *tally
                .rejected
                .entry(crate::server::metrics::reject_label(r.reason).to_owned())
                .or_default() += 1
        }
        ServerMessage::Error(e) => bail!("server error {:?}: {}", e.code, e.message),
        ServerMessage::Welcome(_) => {}
    }
    if !quiet {
        writeln!(out, "{v}")?;
    }
    Ok(())
}

fn class_json(c: &ClassRef) -> serde_json::Value {
    match c {
        ClassRef::Id(i) => json!(i),
        ClassRef::Name(n) => json!(n),
    }
}

/// One answer as JSON.
pub fn answer_json(m: &ServerMessage) -> serde_json::Value {
    match m {
        ServerMessage::Result(r) => json!({
            "type": "result",
            "stream": r.stream_id,
            "seq": r.seq,
            "timing_us": {
                "queue": r.timing.queue_us,
                "detect": r.timing.detect_us,
                "classify": r.timing.classify_us,
                "total": r.timing.total_us,
            },
            "objects": r.objects.iter().map(|o| json!({
                "bbox": [o.bbox.x0, o.bbox.y0, o.bbox.x1, o.bbox.y1],
                "class": class_json(&o.class),
                "score": o.score,
                "outputs": o.outputs.iter().map(|out| match &out.value {
                    OutputValue::TopK(labels) => json!({
                        "model": out.model,
                        "topk": labels.iter().map(|l| json!([l.label, l.score])).collect::<Vec<_>>(),
                    }),
                    OutputValue::Tensors(ts) => json!({
                        "model": out.model,
                        "tensors": ts.iter().map(|t| json!({"name": t.name, "dims": t.dims, "data": t.data})).collect::<Vec<_>>(),
                    }),
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "objects_dropped": r.objects_dropped,
        }),
        ServerMessage::Dropped(d) => json!({
            "type": "dropped", "stream": d.stream_id, "seq": d.seq,
            "reason": crate::server::metrics::drop_label(d.reason).to_owned(),
        }),
        ServerMessage::Rejected(r) => json!({
            "type": "rejected", "stream": r.stream_id, "seq": r.seq,
            "reason": crate::server::metrics::reject_label(r.reason).to_owned(), "message": r.message,
        }),
        ServerMessage::Error(e) => json!({
            "type": "error", "code": crate::server::metrics::error_label(e.code), "message": e.message,
        }),
        ServerMessage::Welcome(w) => json!({
            "type": "welcome", "version": w.version, "window": w.window,
        }),
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Every frame to send, in order: the source repeated `--repeat` times, at
/// most `--max-frames`.
fn sources(args: &Args) -> anyhow::Result<Box<dyn Iterator<Item = anyhow::Result<Source>>>> {
    let max = args.max_frames.unwrap_or(u64::MAX);
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if let Some(path) = &args.video {
        if args.width == 0 || args.height == 0 {
            bail!("--width and --height must be at least 1");
        }
        let (path, w, h) = (path.clone(), args.width, args.height);
        let frames = (0..args.repeat).flat_map(move |_| match VideoFrames::spawn(&path, w, h) {
            Ok(v) => Box::new(v) as Box<dyn Iterator<Item = anyhow::Result<Source>>>,
            Err(e) => Box::new(std::iter::once(Err(e))),
        });
        return Ok(Box::new(frames.take(max)));
    }
    let list = load_sources(args)?;
    if list.is_empty() {
        bail!("nothing to send: the source is empty");
    }
    let n = list.len().saturating_mul(args.repeat as usize);
    Ok(Box::new(list.into_iter().cycle().take(n.min(max)).map(Ok)))
}

/// RGB24 frames decoded from a video by an `ffmpeg` child process.
pub(crate) struct VideoFrames {
    child: std::process::Child,
    stdout: std::process::ChildStdout,
    width: u32,
    height: u32,
    done: bool,
}

impl VideoFrames {
    pub(crate) fn spawn(path: &Path, width: u32, height: u32) -> anyhow::Result<Self> {
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
            width,
            height,
            done: false,
        })
    }
}

impl Iterator for VideoFrames {
    type Item = anyhow::Result<Source>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::io::Read;
        if self.done {
            return None;
        }
        let len = PixelFormat::Rgb24.raw_len(self.width, self.height)? as usize;
        let mut buf = vec![0u8; len];
        match self.stdout.read_exact(&mut buf) {
            Ok(()) => Some(Ok(Source {
                width: self.width,
                height: self.height,
                format: PixelFormat::Rgb24,
                payload: Bytes::from(buf),
                detections: None,
            })),
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

fn load_sources(args: &Args) -> anyhow::Result<Vec<Source>> {
    if let Some(dir) = &args.images {
        return images(dir);
    }
    let gray = |w: u32, h: u32| -> anyhow::Result<Bytes> {
        let len = PixelFormat::Rgb24
            .raw_len(w, h)
            .filter(|l| *l <= 64 << 20)
            .with_context(|| format!("synthetic frames of {w}x{h} are too large"))?;
        Ok(Bytes::from(vec![128u8; len as usize]))
    };
    if args.width == 0 || args.height == 0 {
        bail!("--width and --height must be at least 1");
    }
    let payload = gray(args.width, args.height)?;
    if let Some(path) = &args.trace {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading trace {}", path.display()))?;
        let trace =
            camdnn_policy::sim::Trace::parse(&text, args.classes.len()).with_context(|| {
                format!("in trace {} (columns: {:?})", path.display(), args.classes)
            })?;
        let mut out = Vec::new();
        for seg in &trace.segments {
            let dets = trace_detections(&seg.scene, &args.classes, args.width, args.height);
            for _ in 0..seg.frames {
                out.push(Source {
                    width: args.width,
                    height: args.height,
                    format: PixelFormat::Rgb24,
                    payload: payload.clone(),
                    detections: Some(dets.clone()),
                });
            }
        }
        return Ok(out);
    }
    let n = args.synthetic.unwrap_or(100);
    Ok((0..n)
        .map(|_| Source {
            width: args.width,
            height: args.height,
            format: PixelFormat::Rgb24,
            payload: payload.clone(),
            detections: None,
        })
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

fn images(dir: &Path) -> anyhow::Result<Vec<Source>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading image folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let ext = p
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let bytes = match ext.as_str() {
            "jpg" | "jpeg" | "ppm" => {
                std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?
            }
            _ => continue,
        };
        let src = if ext == "ppm" {
            ppm(&bytes).with_context(|| format!("in {}", p.display()))?
        } else {
            let (width, height) =
                jpeg_size(&bytes).with_context(|| format!("in {}", p.display()))?;
            Source {
                width,
                height,
                format: PixelFormat::Jpeg,
                payload: Bytes::from(bytes),
                detections: None,
            }
        };
        out.push(src);
    }
    if out.is_empty() {
        bail!("{} holds no .jpg, .jpeg or .ppm files", dir.display());
    }
    Ok(out)
}

/// Width and height from a JPEG's start-of-frame marker.
fn jpeg_size(b: &[u8]) -> anyhow::Result<(u32, u32)> {
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
pub(crate) fn ppm(b: &[u8]) -> anyhow::Result<Source> {
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 && i < b.len() {
        if b[i] == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i].is_ascii_whitespace() {
            i += 1;
        } else {
            let s = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            fields.push(String::from_utf8_lossy(&b[s..i]).into_owned());
        }
    }
    i += 1; // the single whitespace after maxval
    if fields.len() < 4 || fields[0] != "P6" {
        bail!("not a binary PPM (P6) file");
    }
    let num = |s: &str, what: &str| -> anyhow::Result<u32> {
        s.parse().with_context(|| format!("PPM {what} {s:?}"))
    };
    let (w, h, max) = (
        num(&fields[1], "width")?,
        num(&fields[2], "height")?,
        num(&fields[3], "maxval")?,
    );
    if max != 255 {
        bail!("PPM maxval {max}; only 255 (8-bit) is supported");
    }
    let need = PixelFormat::Rgb24
        .raw_len(w, h)
        .context("PPM size overflows")? as usize;
    let data = b
        .get(i..i + need)
        .with_context(|| format!("PPM {w}x{h} needs {need} pixel bytes, the file is too short"))?;
    Ok(Source {
        width: w,
        height: h,
        format: PixelFormat::Rgb24,
        payload: Bytes::copy_from_slice(data),
        detections: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jpeg_size_reads_the_sof_marker() {
        // SOI, APP0 (len 4), SOF0 (len 11): 8-bit, h=480, w=640.
        let b = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x01,
            0xE0, 0x02, 0x80, 0x03, 0x01, 0x22, 0x00,
        ];
        assert_eq!(jpeg_size(&b).unwrap(), (640, 480));
        assert!(jpeg_size(b"not a jpeg").is_err());
    }

    #[test]
    fn ppm_parses_header_and_checks_length() {
        let mut b = b"P6\n# c\n2 1\n255\n".to_vec();
        b.extend([1, 2, 3, 4, 5, 6]);
        let s = ppm(&b).unwrap();
        assert_eq!((s.width, s.height, s.payload.len()), (2, 1, 6));
        assert!(ppm(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn trace_detections_match_counts_and_stay_in_the_frame() {
        let classes = vec!["person".to_owned(), "car".to_owned()];
        let d = trace_detections(&[3, 2], &classes, 640, 480);
        assert_eq!(d.len(), 5);
        assert_eq!(
            d.iter()
                .filter(|x| x.class == ClassRef::Name("car".into()))
                .count(),
            2
        );
        assert!(d.iter().all(|x| x.bbox.x1 <= 640.0 && x.bbox.y1 <= 480.0));
    }
}
