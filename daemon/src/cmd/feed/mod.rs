//! `camdnnd feed`: streams frames to a running camdnnd at a given rate and prints every
//! answer, named by its source (file name, or video and frame index), as a JSON line or as
//! short lines a person reads; `--annotate DIR` also draws each answered frame. A summary goes
//! to stderr, and the command fails when a file could not be read or a frame was refused or
//! failed. With `--reconnect` a lost connection (the daemon restarted) is made again with
//! backoff; frames in flight on it are reported lost.
//!
//! Sources ([`source`]): a folder of images (JPEG sent as JPEG; PNG and binary PPM as RGB24), a
//! video decoded by ffmpeg at its own size, a scene trace replayed as synthetic frames carrying
//! upstream detections (`FRAMES R1 R2 ...` per line, the `simulate` format), or synthetic frames
//! without detections.

mod annotate;
mod answer;
pub(crate) mod source;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use camdnn_protocol::{
    Answer, Backoff, ClientError, Deadline, DropReason, Frame, ReconnectingClient, ServerMessage,
};
use serde_json::json;

pub(crate) use source::trace_detections;
use source::{Item, Source};

/// How answers are printed on stdout.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per answer (for programs).
    Json,
    /// One short line per answer and per object (for people).
    Text,
}

/// Options of `camdnnd feed`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's socket.
    #[arg(long, default_value = "/run/camdnn/camdnnd.sock")]
    pub socket: PathBuf,
    /// A folder of images, sent in name order, each after the previous answer (no faster than
    /// --fps): `.jpg`/`.jpeg` as JPEG, `.png` and binary `.ppm` as RGB24. Other image files are reported and skipped; files that are not images
    /// are counted in the summary.
    #[arg(long, conflicts_with_all = ["trace", "synthetic", "video"])]
    pub images: Option<PathBuf>,
    /// A video file, decoded by `ffmpeg` (on PATH) to RGB24 frames at the clip's own size
    /// (read with `ffprobe`; --width and --height scale it), sent at --fps.
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
    /// Frames per second (0: as fast as the window allows; frames of one stream then
    /// supersede each other while the pipeline is busy).
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
    /// Width of synthetic frames (default 640), or the width a video is scaled to.
    #[arg(long)]
    pub width: Option<u32>,
    /// Height of synthetic frames (default 480), or the height a video is scaled to.
    #[arg(long)]
    pub height: Option<u32>,
    /// Client name sent in Hello.
    #[arg(long, default_value = "camdnnd-feed")]
    pub name: String,
    /// How answers are printed: `json` lines (for programs) or `text` (for people).
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write each answered frame, with its boxes, labels, scores, pose skeletons and face
    /// results drawn, as a JPEG into this folder (created if missing).
    #[arg(long)]
    pub annotate: Option<PathBuf>,
    /// Print only the summary, not one line per answer.
    #[arg(long)]
    pub quiet: bool,
    /// When the connection is lost (the daemon restarted), reconnect with
    /// backoff (100 ms doubling to 5 s, for up to 5 minutes) and go on;
    /// frames in flight on the lost connection are printed as "lost".
    #[arg(long)]
    pub reconnect: bool,
}

/// What feed keeps of a frame until its answer arrives.
struct Pending {
    label: String,
    /// The frame itself, kept only when answers are drawn.
    source: Option<Source>,
}

/// Counts of everything sent and answered, for the summary and the exit status.
#[derive(Default)]
struct Tally {
    sent: u64,
    results: u64,
    dropped: BTreeMap<String, u64>,
    rejected: BTreeMap<String, u64>,
    unreadable: Vec<String>,
    annotated: u64,
    /// In flight when their connection was lost (`--reconnect`).
    lost: u64,
    /// Connections made after the first (`--reconnect`).
    reconnects: u64,
}

impl Tally {
    /// Frames that could not be sent or were refused or failed: the command then fails.
    fn failures(&self) -> u64 {
        let failed = self
            .dropped
            .get(crate::telemetry::drop_label(DropReason::ProcessingFailed))
            .copied()
            .unwrap_or(0);
        self.unreadable.len() as u64 + self.rejected.values().sum::<u64>() + failed
    }
}

/// Where answers go.
struct Sink<'a> {
    args: &'a Args,
    out: std::io::StdoutLock<'static>,
    pending: HashMap<u64, Pending>,
    tally: Tally,
}

/// Runs the feeder.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.annotate {
        annotate::prepare_dir(dir, args.images.as_deref())?;
    }
    let listing = source::sources(args)?;
    let backoff = if args.reconnect {
        Backoff::default()
    } else {
        Backoff::never()
    };
    let mut client = ReconnectingClient::connect(&args.socket, &args.name, backoff)
        .with_context(|| format!("connecting to {}", args.socket.display()))?;
    let period = (args.fps > 0.0).then(|| Duration::from_secs_f64(1.0 / args.fps));
    let mut sink = Sink {
        args,
        out: std::io::stdout().lock(),
        pending: HashMap::new(),
        tally: Tally::default(),
    };
    // A folder of photos is sent one at a time, each after the previous answer (and no faster
    // than --fps), so a slow pipeline answers every photo rather than the newest; a video or
    // synthetic stream is paced like a camera.
    let one_at_a_time = args.images.is_some();
    let start = Instant::now();
    let mut seq = 0u64;
    for item in listing.items {
        let src = match item? {
            Item::Frame(src) => src,
            Item::Unreadable { label, error } => {
                sink.unreadable(label, error)?;
                continue;
            }
        };
        if one_at_a_time {
            drain_all(&mut client, &mut sink)?;
        }
        if let Some(p) = period {
            drain_until(&mut client, &mut sink, start + p.mul_f64(seq as f64))?;
        }
        client.stream().set_read_timeout(None)?;
        send(&mut client, &mut sink, seq, src)?;
        seq += 1;
    }
    client.stream().set_read_timeout(None)?;
    sink.tally.reconnects = client.reconnects();
    for a in client.bye()? {
        sink.answer(&a)?;
    }
    sink.out.flush()?;
    summary(&sink.tally, listing.ignored, start.elapsed().as_secs_f64())
}

/// Sends one frame, remembering its source until the answer.
fn send(
    client: &mut ReconnectingClient,
    sink: &mut Sink<'_>,
    seq: u64,
    src: Source,
) -> anyhow::Result<()> {
    let args = sink.args;
    let frame = Frame {
        stream_id: args.stream,
        seq,
        capture_ts_us: now_us(),
        width: src.width,
        height: src.height,
        pixel_format: src.format,
        priority: args.priority,
        deadline: args.deadline_ms.map(|ms| Deadline::RelativeUs(ms * 1000)),
        detections: src.detections.clone(),
        payload: src.payload.clone(),
    };
    client.send_frame(&frame).with_context(|| {
        format!(
            "sending {} ({}x{} {:?}, {} payload bytes)",
            src.label,
            frame.width,
            frame.height,
            frame.pixel_format,
            frame.payload.len()
        )
    })?;
    sink.tally.sent += 1;
    let label = src.label.clone();
    let source = args.annotate.is_some().then_some(src);
    sink.pending.insert(seq, Pending { label, source });
    Ok(())
}

/// Prints the summary on stderr; an error when any file or frame failed.
fn summary(t: &Tally, ignored: Vec<String>, secs: f64) -> anyhow::Result<()> {
    let mut s = json!({
        "sent": t.sent,
        "results": t.results,
        "dropped": t.dropped,
        "rejected": t.rejected,
        "unreadable": t.unreadable,
        "seconds": secs,
    });
    if t.lost > 0 || t.reconnects > 0 {
        s["lost"] = json!(t.lost);
        s["reconnects"] = json!(t.reconnects);
    }
    if !ignored.is_empty() {
        s["ignored_not_images"] = json!(ignored);
    }
    if t.annotated > 0 {
        s["annotated"] = json!(t.annotated);
    }
    eprintln!("{s}");
    let failures = t.failures();
    if failures > 0 {
        bail!(
            "{failures} frame(s) could not be read, or were refused or failed: see the lines above"
        );
    }
    Ok(())
}

impl Sink<'_> {
    fn unreadable(&mut self, label: String, error: String) -> anyhow::Result<()> {
        eprintln!("camdnnd feed: skipping {label}: {error}");
        if !self.args.quiet {
            let line = match self.args.format {
                Format::Json => {
                    json!({"type": "unreadable", "source": label, "error": error}).to_string()
                }
                Format::Text => format!("{label}: not sent: {error}"),
            };
            writeln!(self.out, "{line}")?;
        }
        self.tally.unreadable.push(label);
        Ok(())
    }

    /// A frame in flight on a connection that was lost (`--reconnect`).
    fn lost(&mut self, stream: u32, seq: u64) -> anyhow::Result<()> {
        self.tally.lost += 1;
        let label = self
            .pending
            .remove(&seq)
            .map_or_else(|| "?".to_owned(), |p| p.label);
        if !self.args.quiet {
            match self.args.format {
                Format::Json => writeln!(
                    self.out,
                    "{}",
                    json!({"type": "lost", "source": label, "stream": stream, "seq": seq})
                )?,
                Format::Text => writeln!(self.out, "{label}: lost with the connection")?,
            }
        }
        Ok(())
    }

    /// Prints (and draws) one answer and counts it.
    fn answer(&mut self, a: &Answer) -> anyhow::Result<()> {
        let m = match a {
            Answer::Message(m) => m,
            Answer::Lost { stream_id, seq } => return self.lost(*stream_id, *seq),
        };
        let seq = match m {
            ServerMessage::Result(r) => Some(r.seq),
            ServerMessage::Dropped(d) => Some(d.seq),
            ServerMessage::Rejected(r) => Some(r.seq),
            ServerMessage::Error(e) if !self.args.reconnect => {
                bail!("server error {:?}: {}", e.code, e.message)
            }
            ServerMessage::Error(_) | ServerMessage::Welcome(_) => None,
        };
        let pending = seq.and_then(|s| self.pending.remove(&s));
        let label = pending.as_ref().map_or("?", |p| p.label.as_str());
        let mut drawn = None;
        match m {
            ServerMessage::Result(r) => {
                self.tally.results += 1;
                if let (Some(dir), Some(src)) = (
                    &self.args.annotate,
                    pending.as_ref().and_then(|p| p.source.as_ref()),
                ) {
                    let path = annotate::write(dir, src, r)
                        .with_context(|| format!("drawing the answer for {label}"))?;
                    self.tally.annotated += 1;
                    drawn = Some(path);
                }
            }
            ServerMessage::Dropped(d) => {
                let reason = crate::telemetry::drop_label(d.reason).to_owned();
                *self.tally.dropped.entry(reason).or_default() += 1;
            }
            ServerMessage::Rejected(r) => {
                let reason = crate::telemetry::reject_label(r.reason).to_owned();
                eprintln!(
                    "camdnnd feed: {label} was refused ({reason}): {}",
                    r.message
                );
                *self.tally.rejected.entry(reason).or_default() += 1;
            }
            _ => {}
        }
        if !self.args.quiet {
            match self.args.format {
                Format::Json => writeln!(self.out, "{}", answer::json(m, label))?,
                Format::Text => write!(self.out, "{}", answer::text(m, label))?,
            }
            if let (Format::Text, Some(path)) = (self.args.format, &drawn) {
                writeln!(self.out, "  drawn in {}", path.display())?;
            }
        }
        Ok(())
    }
}

/// Prints answers until none of the stream's frames is in flight.
fn drain_all(c: &mut ReconnectingClient, sink: &mut Sink<'_>) -> anyhow::Result<()> {
    c.stream().set_read_timeout(None)?;
    while c.in_flight(sink.args.stream) > 0 {
        let m = c.recv()?;
        sink.answer(&m)?;
    }
    Ok(())
}

/// Prints answers that arrive before `due`.
fn drain_until(
    c: &mut ReconnectingClient,
    sink: &mut Sink<'_>,
    due: Instant,
) -> anyhow::Result<()> {
    let stream = sink.args.stream;
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
            Ok(m) => sink.answer(&m)?,
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

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
