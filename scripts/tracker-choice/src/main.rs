//! Cost per frame and identity accuracy of similari's SORT and norfair-rs on box sequences
//! whose identities are known: objects walking at constant velocity with noise, misses and
//! crossings (5 to 60 at once), and a slow pan and zoom across the boxes camdnn's CenterNet
//! finds in darknet's kite.jpg (the boxes moved by the known camera motion).
//!
//! Usage: `tracker-choice KITE_BOXES.json` (a JSON list of `[x0, y0, x1, y1]` in kite.jpg
//! pixels, written by scripts/tracker_choice.sh). Prints one table row per tracker and sequence.

use std::sync::Arc;
use std::time::Instant;

/// One detection of a sequence: the ground-truth identity and the observed box.
#[derive(Clone, Copy)]
struct Obs {
    gt: u32,
    bbox: [f32; 4],
}

type Sequence = Vec<Vec<Obs>>;

/// A small deterministic generator (xorshift64*), so every run sees the same sequences.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32) / (1u64 << 24) as f32
    }
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next_f32()
    }
    /// Zero-mean noise with standard deviation `sd` (a sum of uniforms).
    fn noise(&mut self, sd: f32) -> f32 {
        let s: f32 = (0..4).map(|_| self.next_f32() - 0.5).sum();
        s * sd * (3.0f32).sqrt()
    }
}

/// Noise of 3 % of the box size on each edge, 5 % of detections missed.
fn observe(rng: &mut Rng, gt: u32, b: [f32; 4], out: &mut Vec<Obs>) {
    if rng.next_f32() < 0.05 {
        return;
    }
    let sd = 0.03 * (b[2] - b[0]).max(b[3] - b[1]);
    let mut o = b;
    for v in &mut o {
        *v += rng.noise(sd);
    }
    if o[2] > o[0] + 1.0 && o[3] > o[1] + 1.0 {
        out.push(Obs { gt, bbox: o });
    }
}

/// `n` people-shaped boxes walking at constant velocity in a 1280x720 frame, bouncing at
/// the edges (so they cross each other), for `frames` frames.
fn walk(n: usize, frames: usize, seed: u64) -> Sequence {
    let mut rng = Rng(seed | 1);
    let mut objs: Vec<[f32; 6]> = (0..n)
        .map(|_| {
            let w = rng.uniform(30.0, 110.0);
            let h = w * 2.4;
            [
                rng.uniform(0.0, 1280.0 - w),
                rng.uniform(0.0, 720.0 - h),
                w,
                h,
                rng.uniform(-4.0, 4.0),
                rng.uniform(-1.5, 1.5),
            ]
        })
        .collect();
    (0..frames)
        .map(|_| {
            let mut f = Vec::new();
            for (i, o) in objs.iter_mut().enumerate() {
                o[0] += o[4];
                o[1] += o[5];
                if o[0] < 0.0 || o[0] + o[2] > 1280.0 {
                    o[4] = -o[4];
                }
                if o[1] < 0.0 || o[1] + o[3] > 720.0 {
                    o[5] = -o[5];
                }
                observe(
                    &mut rng,
                    i as u32,
                    [o[0], o[1], o[0] + o[2], o[1] + o[3]],
                    &mut f,
                );
            }
            f
        })
        .collect()
}

/// A 640-pixel-wide view panning right across kite.jpg (1352x900) while zooming in from a
/// 900x600 window to a 600x400 one over `frames` frames; an object is in the frame while its
/// centre is in view, clipped to it.
fn kite_pan(boxes: &[[f32; 4]], frames: usize) -> Sequence {
    let mut rng = Rng(7);
    (0..frames)
        .map(|t| {
            let a = t as f32 / (frames - 1) as f32;
            let vw = 900.0 - 300.0 * a;
            let vh = vw * 2.0 / 3.0;
            let cx = 450.0 + (1352.0 - 300.0 - 450.0) * a;
            let (x0, y0) = (cx - vw / 2.0, 450.0 - vh / 2.0);
            let s = 640.0 / vw;
            let mut f = Vec::new();
            for (i, b) in boxes.iter().enumerate() {
                let (mx, my) = ((b[0] + b[2]) / 2.0, (b[1] + b[3]) / 2.0);
                if mx < x0 || mx > x0 + vw || my < y0 || my > y0 + vh {
                    continue;
                }
                let v = [
                    ((b[0] - x0) * s).max(0.0),
                    ((b[1] - y0) * s).max(0.0),
                    ((b[2] - x0) * s).min(640.0),
                    ((b[3] - y0) * s).min(vh * s),
                ];
                observe(&mut rng, i as u32, v, &mut f);
            }
            f
        })
        .collect()
}

/// A tracker under test: one call per frame, the confirmed track id of each input box.
trait Under {
    fn name(&self) -> &'static str;
    fn update(&mut self, frame: &[Obs]) -> Vec<Option<u64>>;
}

struct Norfair {
    t: norfair_rs::Tracker,
    frame: u64,
}

impl Norfair {
    fn new() -> Self {
        use norfair_rs::distances::distance_function_by_name;
        // IoU above 0.3 to associate (SORT's threshold), confirmed after 3 hits, alive 15
        // frames without one.
        let mut c = norfair_rs::TrackerConfig::new(distance_function_by_name("iou"), 0.7);
        c.hit_counter_max = 15;
        c.initialization_delay = 2;
        c.past_detections_length = 1;
        Self {
            t: norfair_rs::Tracker::new(c).expect("valid norfair config"),
            frame: 0,
        }
    }
}

impl Under for Norfair {
    fn name(&self) -> &'static str {
        "norfair-rs 0.5.2"
    }
    fn update(&mut self, frame: &[Obs]) -> Vec<Option<u64>> {
        self.frame += 1;
        let dets = frame
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let b = o.bbox.map(f64::from);
                let mut d = norfair_rs::Detection::from_slice(&b, 2, 2).expect("2x2 box");
                d.label = Some("person".into());
                d.data = Some(Arc::new((self.frame, i)));
                d
            })
            .collect();
        let now = self.frame;
        let mut ids = vec![None; frame.len()];
        for o in self.t.update(dets, 1, None) {
            let Some(id) = o.id else { continue };
            let Some(tag) = o
                .last_detection
                .as_ref()
                .and_then(|d| d.data.as_ref())
                .and_then(|a| a.downcast_ref::<(u64, usize)>())
            else {
                continue;
            };
            if tag.0 == now {
                ids[tag.1] = Some(id as u64);
            }
        }
        ids
    }
}

struct Similari {
    t: similari::trackers::sort::simple_api::Sort,
}

impl Similari {
    fn new() -> Self {
        use similari::trackers::sort::PositionalMetricType::IoU;
        // One shard (its advice up to 100 objects), IoU 0.3, alive 15 frames without a box.
        Self {
            t: similari::trackers::sort::simple_api::Sort::new(1, 1, 15, IoU(0.3), 0.05, None),
        }
    }
}

impl Under for Similari {
    fn name(&self) -> &'static str {
        "similari 0.26.2 SORT"
    }
    fn update(&mut self, frame: &[Obs]) -> Vec<Option<u64>> {
        use similari::trackers::tracker_api::TrackerAPI;
        use similari::utils::bbox::BoundingBox;
        // Each box carries its index as similari's custom object id: the tracks come back
        // in the tracker's order, not the input's.
        let boxes: Vec<_> = frame
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let b = o.bbox;
                let bb =
                    BoundingBox::new_with_confidence(b[0], b[1], b[2] - b[0], b[3] - b[1], 1.0);
                (bb.as_xyaah(), Some(i as i64))
            })
            .collect();
        let out = self.t.predict(&boxes);
        self.t.clear_wasted();
        let mut ids = vec![None; frame.len()];
        for t in &out {
            if let Some(i) = t.custom_object_id.and_then(|i| usize::try_from(i).ok()) {
                if let Some(slot) = ids.get_mut(i) {
                    *slot = Some(t.id);
                }
            }
        }
        ids
    }
}

/// Identity measures of one run: switches (a ground-truth object's confirmed track id
/// changes), transfers (a track id that had followed one object is given to another: the
/// case that would hand one object's stored result to another), coverage (share of boxes
/// with a confirmed id).
#[derive(Default)]
struct Score {
    switches: usize,
    transfers: usize,
    covered: usize,
    boxes: usize,
    micros: Vec<f64>,
}

fn run(t: &mut dyn Under, seq: &Sequence) -> Score {
    use std::collections::HashMap;
    let mut s = Score::default();
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut owner: HashMap<u64, u32> = HashMap::new();
    for f in seq {
        let start = Instant::now();
        let ids = t.update(f);
        s.micros.push(start.elapsed().as_secs_f64() * 1e6);
        for (o, id) in f.iter().zip(ids) {
            s.boxes += 1;
            let Some(id) = id else { continue };
            s.covered += 1;
            if last.insert(o.gt, id).is_some_and(|prev| prev != id) {
                s.switches += 1;
            }
            if owner.insert(id, o.gt).is_some_and(|prev| prev != o.gt) {
                s.transfers += 1;
            }
        }
    }
    s
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: tracker-choice KITE_BOXES.json");
    let text = std::fs::read_to_string(&path).expect("reading the kite boxes");
    let kite: Vec<[f32; 4]> = serde_json::from_str(&text).expect("a JSON list of [x0,y0,x1,y1]");
    let mut seqs: Vec<(String, Sequence)> = [5usize, 10, 20, 40, 60]
        .iter()
        .map(|&n| (format!("walk-{n}"), walk(n, 400, 11 + n as u64)))
        .collect();
    seqs.push((
        format!("kite-pan ({} objects)", kite.len()),
        kite_pan(&kite, 200),
    ));
    println!("| tracker | sequence | us/frame median | p90 | id switches | transfers | covered |");
    println!("|---|---|---|---|---|---|---|");
    for (name, seq) in &seqs {
        let makers: [fn() -> Box<dyn Under>; 2] =
            [|| Box::new(Similari::new()), || Box::new(Norfair::new())];
        for make in makers {
            // Five runs on fresh trackers: the median of the per-run medians.
            let mut meds = Vec::new();
            let mut p90s = Vec::new();
            let mut last = Score::default();
            let mut label = "";
            for _ in 0..5 {
                let mut t = make();
                label = t.name();
                let mut s = run(t.as_mut(), seq);
                meds.push(median(&mut s.micros));
                p90s.push(percentile(&mut s.micros, 0.9));
                last = s;
            }
            println!(
                "| {label} | {name} | {:.1} ({:.1}-{:.1}) | {:.1} | {} | {} | {:.3} |",
                median(&mut meds.clone()),
                meds.iter().cloned().fold(f64::INFINITY, f64::min),
                meds.iter().cloned().fold(0.0, f64::max),
                median(&mut p90s),
                last.switches,
                last.transfers,
                last.covered as f64 / last.boxes.max(1) as f64,
            );
        }
    }
}
