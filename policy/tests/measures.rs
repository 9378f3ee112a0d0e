//! The headline measures cannot be gamed by dropping: on the bursty
//! trace (10 empty frames, then 10 frames of 14/14/14 objects, repeated), a
//! scheduler that drops the heavy frames looks faster on the served-frame
//! mean but scores worse on goodput and on delay over all offered frames.

use std::cmp::Ordering;

use camdnn_policy::schedulers::{self, Camdnn};
use camdnn_policy::sim::{simulate, Accounting, SimConfig, SimReport, Trace};
use camdnn_policy::{mlp::MlpPolicy, System};

const RB5: &str = include_str!("../../config/profiles/rb5.toml");
const ONNX: &[u8] = include_bytes!("../../config/policies/rb5.onnx");
const SIDECAR: &str = include_str!("../../config/policies/rb5.policy.json");

/// 10 empty frames, then 10 frames of 14/14/14 objects, 10 times.
fn bursty() -> Trace {
    Trace::parse(&"10 0 0 0\n10 14 14 14\n".repeat(10), 3).unwrap()
}

fn heavy(trace: &Trace) -> Vec<bool> {
    trace
        .segments
        .iter()
        .flat_map(|s| std::iter::repeat_n(s.scene.iter().any(|&r| r > 0), s.frames))
        .collect()
}

fn run(system: &System, name: &str, cfg: &SimConfig) -> SimReport {
    let mut s = schedulers::by_name(system, name, 5.0).unwrap();
    simulate(system, s.as_mut(), &bursty(), cfg).unwrap()
}

#[test]
fn dropping_every_heavy_frame_scores_worse_than_serving_them() {
    let system = System::from_toml(RB5).unwrap();
    let cfg = SimConfig::default().no_drop();
    let served = run(&system, "camdnn-local", &cfg);
    assert_eq!(served.dropped(), 0, "the no-drop mode queues every frame");
    // The same run, but every heavy frame dropped instead of served.
    let mut dropper = served.clone();
    for (f, heavy) in dropper.frames.iter_mut().zip(heavy(&bursty())) {
        if heavy {
            f.delay_ms = None;
        }
    }
    assert_eq!(dropper.dropped(), 100);
    // The served-frame mean is gamed: dropping the heavy frames halves the
    // sample to the empty, fast ones.
    assert!(dropper.delay().mean < served.delay().mean);
    let deadline = cfg.default_deadline_ms();
    let (s, d) = (served.accounting(deadline), dropper.accounting(deadline));
    assert!(d.goodput() < s.goodput(), "dropper {d:?}\nserver {s:?}");
    assert!(d.delay.p90 > s.delay.p90 && d.delay.p90 == f64::INFINITY);
    assert_eq!(d.rank_cmp(&s), Ordering::Greater, "the dropper ranks lower");
}

#[test]
fn a_scheduler_that_drops_under_load_ranks_below_one_that_keeps_up() {
    // The finding: with real-time dropping, HEFT's served-frame mean
    // looked better than camdnn's while it dropped far more frames.
    let system = System::from_toml(RB5).unwrap();
    let cfg = SimConfig::default();
    let heft = run(&system, "heft", &cfg);
    let mlp = MlpPolicy::new(&system, ONNX, SIDECAR).unwrap();
    let camdnn = simulate(&system, &mut Camdnn::new(mlp, 5.0), &bursty(), &cfg).unwrap();
    assert!(heft.dropped() > camdnn.dropped());
    let deadline = cfg.default_deadline_ms();
    let (h, c): (Accounting, Accounting) = (heft.accounting(deadline), camdnn.accounting(deadline));
    assert_eq!(h.offered, 200);
    assert_eq!(h.on_time + h.late + h.dropped, h.offered);
    assert!(h.goodput() < c.goodput(), "heft {h:?}\ncamdnn {c:?}");
    assert_eq!(c.rank_cmp(&h), Ordering::Less);
}

#[test]
fn the_no_drop_mode_serves_every_frame() {
    let system = System::from_toml(RB5).unwrap();
    let r = run(&system, "heft", &SimConfig::default().no_drop());
    let a = r.accounting(SimConfig::default().default_deadline_ms());
    assert_eq!((a.offered, a.dropped), (200, 0));
    assert!(a.delay.mean.is_some());
}
