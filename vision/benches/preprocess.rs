//! Preprocessing cost of one 1280x720 camera frame: detector input (300x300 letterbox, normalised
//! NCHW f32) plus 10 object crops at 224x224 packed into one batch, from NV12 and from RGB.
//!
//! `cargo bench -p camdnn-vision --bench preprocess` runs criterion and then prints the median of
//! each stage over a fixed number of timed runs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use camdnn_vision::{
    BBox, Frame, NormConfig, Normalizer, PixelFormat, Placement, Preprocessor, RgbImage,
};
use criterion::Criterion;

const W: u32 = 1280;
const H: u32 = 720;

fn nv12_frame() -> Frame {
    let (w, h) = (W as usize, H as usize);
    let mut d = Vec::with_capacity(w * h * 3 / 2);
    for y in 0..h {
        for x in 0..w {
            d.push(((x + y) % 220 + 16) as u8);
        }
    }
    for y in 0..h / 2 {
        for x in 0..w / 2 {
            d.push((x % 256) as u8);
            d.push((y % 256) as u8);
        }
    }
    Frame::new(W, H, PixelFormat::Nv12, d).unwrap()
}

fn boxes() -> Vec<BBox> {
    (0..10)
        .map(|i| {
            let x = 40.0 + 110.0 * i as f32;
            let y = 60.0 + 40.0 * (i % 5) as f32;
            BBox::new(
                x,
                y,
                x + 60.0 + 10.0 * i as f32,
                y + 120.0 + 20.0 * i as f32,
            )
        })
        .collect()
}

struct Pipeline {
    pre: Preprocessor,
    det_norm: Normalizer,
    cls_norm: Normalizer,
    boxes: Vec<BBox>,
}

impl Pipeline {
    fn new() -> Self {
        let det = NormConfig {
            scale: 1.0 / 127.5,
            mean: [1.0; 3],
            ..Default::default()
        };
        let cls = NormConfig {
            scale: 1.0 / 255.0,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            ..Default::default()
        };
        Self {
            pre: Preprocessor::new(),
            det_norm: Normalizer::new(det).unwrap(),
            cls_norm: Normalizer::new(cls).unwrap(),
            boxes: boxes(),
        }
    }

    fn detector_input(&mut self, rgb: &RgbImage) -> usize {
        let (img, _t) = self
            .pre
            .letterbox(rgb, 300, 300, [114; 3], Placement::Center)
            .unwrap();
        self.det_norm.tensor(&img).data.len()
    }

    fn crops(&mut self, rgb: &RgbImage) -> usize {
        let crops = self.pre.crops(rgb, &self.boxes, 224, 224, 8.0).unwrap();
        let imgs: Vec<&RgbImage> = crops.iter().map(|c| &c.image).collect();
        self.cls_norm.batch(&imgs).unwrap().data.len()
    }

    fn full(&mut self, frame: &Frame) -> usize {
        let rgb = frame.to_rgb().unwrap();
        self.detector_input(&rgb) + self.crops(&rgb)
    }
}

fn median_of(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..5 {
        f();
    }
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2]
}

fn main() {
    let nv12 = nv12_frame();
    let rgb = nv12.to_rgb().unwrap();
    let rgb_frame = Frame::new(W, H, PixelFormat::Rgb24, rgb.data().to_vec()).unwrap();
    let mut p = Pipeline::new();

    let mut c = Criterion::default().configure_from_args();
    c.bench_function("nv12_to_rgb_1280x720", |b| {
        b.iter(|| black_box(nv12.to_rgb().unwrap()))
    });
    c.bench_function("letterbox_norm_300x300", |b| {
        b.iter(|| black_box(p.detector_input(&rgb)))
    });
    c.bench_function("10_crops_norm_224x224", |b| {
        b.iter(|| black_box(p.crops(&rgb)))
    });
    c.bench_function("full_nv12_frame", |b| b.iter(|| black_box(p.full(&nv12))));
    c.bench_function("full_rgb_frame", |b| {
        b.iter(|| black_box(p.full(&rgb_frame)))
    });
    c.final_summary();

    // Medians, only in a real bench run (not `cargo test --benches` / `--test` mode).
    if std::env::args().any(|a| a == "--bench") {
        let runs = 101;
        let stages: [(&str, Duration); 5] = [
            (
                "nv12_to_rgb_1280x720",
                median_of(runs, || {
                    black_box(nv12.to_rgb().unwrap());
                }),
            ),
            (
                "letterbox_norm_300x300",
                median_of(runs, || {
                    black_box(p.detector_input(&rgb));
                }),
            ),
            (
                "10_crops_norm_224x224",
                median_of(runs, || {
                    black_box(p.crops(&rgb));
                }),
            ),
            (
                "full_nv12_frame",
                median_of(runs, || {
                    black_box(p.full(&nv12));
                }),
            ),
            (
                "full_rgb_frame",
                median_of(runs, || {
                    black_box(p.full(&rgb_frame));
                }),
            ),
        ];
        println!("\nmedian of {runs} runs (1280x720 frame -> 300x300 detector input + 10 crops at 224x224):");
        for (name, d) in stages {
            println!("  {name:<26} {:>9.3} ms", d.as_secs_f64() * 1e3);
        }
    }
}
