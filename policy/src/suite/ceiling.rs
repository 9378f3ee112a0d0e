//! The on-time share no schedule can beat on a trace: a frame whose makespan
//! bound exceeds the deadline is never on time, and the frames of one scene
//! answered within their deadlines cannot hold the units longer than the
//! scene lasts plus one deadline.

use std::collections::HashMap;

use crate::bound::{frame_bound_within_slots, sustainable_fps};
use crate::sim::{frame_scene, Trace};
use crate::System;

/// The highest on-time share any schedule could reach on `trace` at `fps`
/// with `deadline_ms`: the sum over its segments (a scene held for n
/// frames) of the frames that can be on time, over the frames offered. A
/// segment's frames can be on time only when their makespan bound
/// ([`frame_bound_within_slots`]) is within the deadline, and at most
/// ((n - 1) P + deadline) / c of them, c = 1000 / [`sustainable_fps`] the
/// least work per frame any split of the units carries: they arrive over
/// (n - 1) P and the last answer is due a deadline after the last arrival.
/// Each segment's count is a bound whatever the others do, so their sum
/// is. `root_items` is the detector's runs per frame.
pub fn on_time_ceiling(
    system: &System,
    trace: &Trace,
    fps: f64,
    deadline_ms: f64,
    root_items: u32,
) -> f64 {
    let period = 1000.0 / fps;
    let offered = trace.frames();
    if offered == 0 {
        return 1.0;
    }
    let mut known: HashMap<Vec<u32>, (f64, f64)> = HashMap::new();
    let mut can = 0.0;
    for seg in &trace.segments {
        let scene = frame_scene(system, &seg.scene, root_items);
        let &mut (bound, cycle) = known.entry(scene).or_insert_with_key(|scene| {
            let mean: Vec<f64> = scene.iter().map(|&r| f64::from(r)).collect();
            (
                frame_bound_within_slots(system, scene),
                1000.0 / sustainable_fps(system, &mean),
            )
        });
        if bound > deadline_ms {
            continue;
        }
        let n = seg.frames as f64;
        let by_work = if cycle > 0.0 {
            (((n - 1.0) * period + deadline_ms) / cycle).floor()
        } else {
            n
        };
        can += n.min(by_work.max(0.0));
    }
    can / offered as f64
}

#[cfg(test)]
mod tests {
    use super::on_time_ceiling;
    use crate::sim::{Segment, Trace};

    /// One CPU: the detector takes 20 ms, each request of the classifier
    /// 10 ms.
    fn one_cpu() -> crate::System {
        crate::System::from_toml(
            "name = \"one\"\nmax_batch = 1\n\
             [[processor]]\nname = \"cpu\"\nkind = \"cpu\"\nmax_resident = 2\n\
             [[model]]\nname = \"detector\"\n\
             [[model]]\nname = \"a\"\nparent = \"detector\"\nclasses = [\"person\"]\n\
             [profile.detector.cpu]\nexec_ms = [20.0]\nload_ms = 5.0\n\
             [profile.a.cpu]\nexec_ms = [10.0]\nload_ms = 5.0\n",
        )
        .unwrap()
    }

    #[test]
    fn the_ceiling_counts_frames_the_units_can_finish_within_their_deadline() {
        let system = one_cpu();
        let seg = |frames, r| Segment {
            frames,
            scene: vec![r],
        };
        // 10 empty frames at 20 fps (50 ms apart), deadline 100 ms: 20 ms of
        // work a frame, all on time.
        let light = Trace {
            segments: vec![seg(10, 0)],
        };
        assert_eq!(on_time_ceiling(&system, &light, 20.0, 100.0, 1), 1.0);
        // With 8 requests a frame the work is 100 ms a frame: of 10 frames
        // over 450 ms plus the 100 ms deadline, at most 5 can be on time.
        let heavy = Trace {
            segments: vec![seg(10, 8)],
        };
        let c = on_time_ceiling(&system, &heavy, 20.0, 100.0, 1);
        assert!((c - 0.5).abs() < 1e-12, "{c}");
        // A deadline under a frame's own makespan: none.
        let tight = on_time_ceiling(&system, &heavy, 20.0, 90.0, 1);
        assert_eq!(tight, 0.0);
        // Segments add up: 10 light and 10 heavy frames, 15 of 20.
        let both = Trace {
            segments: vec![seg(10, 0), seg(10, 8)],
        };
        let c = on_time_ceiling(&system, &both, 20.0, 100.0, 1);
        assert!((c - 0.75).abs() < 1e-12, "{c}");
    }
}
