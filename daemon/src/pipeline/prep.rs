//! The preparation pool: decodes frames and cuts crops on its own threads so
//! the scheduler thread only decides, and the processors only infer.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use camdnn_engine::Tensor;
use camdnn_policy::ModelId;
use camdnn_protocol::RejectReason;
use camdnn_vision::{BBox, Frame, PixelFormat, Preprocessor, RgbImage, Transform};

use super::models::InputPrep;
use super::stats::Stats;

/// One object's crop for one model.
#[derive(Debug, Clone, Copy)]
pub struct CropSpec {
    /// Object index in the frame.
    pub object: usize,
    /// Model the crop feeds.
    pub model: ModelId,
    /// Region, frame pixels.
    pub bbox: BBox,
    /// Turn the crop 180 degrees first.
    pub rotate: bool,
}

/// Work for the pool.
pub enum Job {
    /// Decode a frame and make the detector's input.
    Detect {
        /// Frame id.
        frame: u64,
        /// The frame as received.
        raw: camdnn_protocol::Frame,
        /// The detector.
        model: ModelId,
    },
    /// Decode a frame that came with upstream detections and cut their crops.
    DecodeAndCrop {
        /// Frame id.
        frame: u64,
        /// The frame as received.
        raw: camdnn_protocol::Frame,
        /// The crops to cut.
        crops: Vec<CropSpec>,
    },
    /// Cut crops from an already decoded frame.
    Crop {
        /// Frame id.
        frame: u64,
        /// The decoded frame.
        image: Arc<RgbImage>,
        /// The crops to cut.
        crops: Vec<CropSpec>,
    },
}

/// What the pool sends back to the scheduler thread.
pub enum Prepared {
    /// The detector's items are ready: one per frame, or one per canvas of pyramid scales (none
    /// when the frame is too small for any scale).
    DetectorInput {
        /// Frame id.
        frame: u64,
        /// The decoded frame.
        image: Arc<RgbImage>,
        /// Batch-1 inputs, each with its regions' network-to-frame transforms.
        items: Vec<(Tensor, Vec<Transform>)>,
    },
    /// Crops are ready (an item whose crop failed carries the reason).
    Crops {
        /// Frame id.
        frame: u64,
        /// The decoded frame.
        image: Arc<RgbImage>,
        /// One per spec, in order.
        items: Vec<(CropSpec, Result<Tensor, String>)>,
    },
    /// The frame could not be decoded.
    Invalid {
        /// Frame id.
        frame: u64,
        /// Why, for the client.
        reason: RejectReason,
        /// Detail.
        message: String,
    },
}

/// A fixed pool of preparation threads.
pub struct PrepPool {
    tx: Option<mpsc::Sender<(u64, Job)>>,
    threads: Vec<JoinHandle<()>>,
}

impl PrepPool {
    /// Starts `n` threads that prepare inputs for `inputs` (by model id) and
    /// hand each result with its ticket to `done`, which says whether its
    /// receiver is still there (a thread ends when it is not).
    pub fn start(
        n: usize,
        inputs: Arc<Vec<InputPrep>>,
        stats: Stats,
        done: impl Fn(u64, Prepared) -> bool + Clone + Send + 'static,
    ) -> Self {
        // Unbounded, bounded by the scheduler thread, its only sender: at most
        // one job per admitted frame and per detector/crop step of it.
        let (tx, rx) = mpsc::channel::<(u64, Job)>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n.max(1))
            .map(|t| {
                let (rx, inputs, done) = (Arc::clone(&rx), Arc::clone(&inputs), done.clone());
                let stats = stats.clone();
                std::thread::Builder::new()
                    .name(format!("camdnn-prep-{t}"))
                    .spawn(move || {
                        let mut pre = Preprocessor::new();
                        loop {
                            let job = match rx.lock() {
                                Ok(guard) => guard.recv(),
                                Err(_) => return,
                            };
                            let Ok((ticket, job)) = job else { return };
                            let out = run_job(&mut pre, &inputs, &stats, job);
                            if !done(ticket, out) {
                                return;
                            }
                        }
                    })
                    .expect("spawning a preparation thread")
            })
            .collect();
        PrepPool {
            tx: Some(tx),
            threads,
        }
    }

    /// Queues a job, its result to carry `ticket` (dropped silently only
    /// after shutdown).
    pub fn send(&self, ticket: u64, job: Job) {
        if let Some(tx) = &self.tx {
            let _ = tx.send((ticket, job));
        }
    }
}

impl Drop for PrepPool {
    fn drop(&mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn run_job(pre: &mut Preprocessor, inputs: &[InputPrep], stats: &Stats, job: Job) -> Prepared {
    match job {
        Job::Detect { frame, raw, model } => {
            let t0 = Instant::now();
            let out = detector_input(pre, inputs, frame, &raw, model);
            let took = t0.elapsed();
            metrics::histogram!("camdnn_frame_prep_seconds").record(took.as_secs_f64());
            stats.frame_prep(took);
            out
        }
        Job::DecodeAndCrop { frame, raw, crops } => match decode(&raw) {
            Err((reason, message)) => Prepared::Invalid {
                frame,
                reason,
                message,
            },
            Ok(image) => crop_all(pre, inputs, stats, frame, Arc::new(image), crops),
        },
        Job::Crop {
            frame,
            image,
            crops,
        } => crop_all(pre, inputs, stats, frame, image, crops),
    }
}

/// Decodes a frame and prepares the detector's input items.
fn detector_input(
    pre: &mut Preprocessor,
    inputs: &[InputPrep],
    frame: u64,
    raw: &camdnn_protocol::Frame,
    model: ModelId,
) -> Prepared {
    match decode(raw) {
        Err((reason, message)) => Prepared::Invalid {
            frame,
            reason,
            message,
        },
        Ok(image) => match inputs[model.0].prepare_frame(pre, &image) {
            Ok(items) => Prepared::DetectorInput {
                frame,
                image: Arc::new(image),
                items,
            },
            Err(e) => Prepared::Invalid {
                frame,
                reason: RejectReason::BadDimensions,
                message: format!("{e:#}"),
            },
        },
    }
}

fn crop_all(
    pre: &mut Preprocessor,
    inputs: &[InputPrep],
    stats: &Stats,
    frame: u64,
    image: Arc<RgbImage>,
    crops: Vec<CropSpec>,
) -> Prepared {
    let items = crops
        .into_iter()
        .map(|c| {
            let t0 = Instant::now();
            let t = inputs[c.model.0]
                .prepare(pre, &image, Some(c.bbox), c.rotate)
                .map(|(t, _)| t)
                .map_err(|e| format!("{e:#}"));
            let took = t0.elapsed();
            metrics::histogram!("camdnn_crop_seconds").record(took.as_secs_f64());
            stats.crop(took);
            (c, t)
        })
        .collect();
    Prepared::Crops {
        frame,
        image,
        items,
    }
}

/// Decodes a received frame to RGB, with the reject reason when it cannot be.
pub fn decode(raw: &camdnn_protocol::Frame) -> Result<RgbImage, (RejectReason, String)> {
    use camdnn_protocol::PixelFormat as P;
    use camdnn_vision::VisionError as E;
    let bytes = raw.payload.to_vec();
    let bad = |e: E| {
        let reason = match e {
            E::FrameDims { .. } => RejectReason::BadDimensions,
            E::TooLarge { .. } => RejectReason::TooLarge,
            E::FrameSize { .. } => RejectReason::PayloadSizeMismatch,
            _ => RejectReason::Malformed,
        };
        (reason, e.to_string())
    };
    let frame = match raw.pixel_format {
        P::Jpeg => {
            let f = Frame::jpeg(bytes).map_err(bad)?;
            if f.width() != raw.width || f.height() != raw.height {
                return Err((
                    RejectReason::BadDimensions,
                    format!(
                        "JPEG is {}x{} but the message says {}x{}",
                        f.width(),
                        f.height(),
                        raw.width,
                        raw.height
                    ),
                ));
            }
            f
        }
        other => {
            let fmt = match other {
                P::Rgb24 => PixelFormat::Rgb24,
                P::Bgr24 => PixelFormat::Bgr24,
                _ => PixelFormat::Nv12,
            };
            Frame::new(raw.width, raw.height, fmt, bytes).map_err(bad)?
        }
    };
    frame.into_rgb().map_err(bad)
}
