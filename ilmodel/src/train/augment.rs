//! Label-preserving copies of solved demonstrations (`ilmodel train
//! --augment K`): more training rows without more ILP solves.
//!
//! A demonstration's label is the ILP's plan P* at makespan T*. Two changes
//! of the instance keep P* optimal, because they leave P*'s makespan at T*
//! and can only make every other plan worse:
//! - **a unit is busier for longer**: rem_j rises, at most to T* - W_j(P*)
//!   (on the detector's unit, only as far as P* still ends by T*, since the
//!   detector's end delays every unit). Every plan's makespan is
//!   non-decreasing in each rem_j and no plan's work W_j depends on rem, so
//!   no plan that was worse than P* becomes better, and P* still ends at T*;
//! - **a model was not resident after all**: a_old(i,j) goes from 1 to 0 on
//!   a pair P* does not keep resident. P* pays no load there, so its work is
//!   unchanged; any other plan that keeps (i,j) now pays the load.
//!
//! The oracle's second stage (the least total work among plans with
//! T <= T*) keeps the label too: that set of plans can only lose members,
//! P* stays in it, its total work is unchanged and no other plan's falls.
//! Each copy is checked exactly ([`Plan::makespan_ms`] of P* against T*)
//! before it is used; only proven-optimal demonstrations are copied.
//!
//! The copies keep their demonstration's scene, so the held-out split (a
//! function of the scene) is unchanged; only training-split demonstrations
//! are ever copied.

use camdnn_policy::{Detector, Plan, PlanInput, System};

use crate::demos::{Demo, DemoStatus};
use crate::rng::SplitMix64;

/// Mixed into the seed so the copies' draws differ from the split's and
/// the initialisation's.
const AUGMENT_STREAM: u64 = 0xa06e_0e17_c0de_5eed;

/// Probability that a copy raises a given unit's rem_j, and that it forgets
/// a given unused previous residency.
const CHANGE_PROBABILITY: f64 = 0.5;

/// Up to `copies` label-preserving copies of each proven-optimal
/// demonstration in `demos`, deterministic for `seed`. rem_j never rises
/// past `rem_max_ms`, the demonstrations' own range. A draw that changes
/// nothing, or whose check fails, gives no copy.
pub fn label_preserving_copies(
    system: &System,
    demos: &[&Demo],
    copies: usize,
    seed: u64,
    rem_max_ms: f64,
) -> Vec<Demo> {
    let mut out = Vec::new();
    if copies == 0 {
        return out;
    }
    let detector = Detector::fastest(system);
    for d in demos {
        let Some(labelled) = Labelled::of(system, d) else {
            continue;
        };
        for c in 0..copies {
            let mut rng =
                SplitMix64::for_item(seed ^ AUGMENT_STREAM, d.index * copies as u64 + c as u64);
            if let Some(copy) = labelled.copy(system, detector, rem_max_ms, &mut rng) {
                out.push(copy);
            }
        }
    }
    out
}

/// A proven-optimal demonstration with its plan rebuilt.
struct Labelled<'a> {
    demo: &'a Demo,
    plan: Plan,
    t_ms: f64,
    /// W_j of the plan per unit, the same on every copy: W does not depend
    /// on rem, and copies only forget residencies the plan does not keep.
    work_ms: Vec<f64>,
}

impl<'a> Labelled<'a> {
    fn of(system: &System, demo: &'a Demo) -> Option<Self> {
        if demo.status != DemoStatus::Optimal {
            return None;
        }
        let (t_ms, resident, batches) =
            (demo.t_ms?, demo.resident.as_ref()?, demo.batches.as_ref()?);
        let mut plan = Plan::empty(system);
        for i in system.model_ids() {
            for j in system.proc_ids() {
                if *resident.get(i.0)?.get(j.0)? {
                    plan.set_resident(i, j, true);
                }
                for (k0, &n) in batches.get(i.0)?.get(j.0)?.iter().enumerate() {
                    if n > 0 {
                        plan.set_batches(i, j, k0 + 1, n);
                    }
                }
            }
        }
        let residency: Vec<bool> = demo.a_old.iter().flatten().copied().collect();
        let input = input_of(demo, &demo.rem_ms, &residency);
        let work_ms = system
            .proc_ids()
            .map(|j| plan.work_ms(system, &input, j))
            .collect();
        Some(Labelled {
            demo,
            plan,
            t_ms,
            work_ms,
        })
    }

    fn copy(
        &self,
        system: &System,
        detector: Detector,
        rem_max_ms: f64,
        rng: &mut SplitMix64,
    ) -> Option<Demo> {
        let d = self.demo;
        let mut changed = false;
        // Forget unused previous residencies.
        let mut a_old = d.a_old.clone();
        for i in system.model_ids() {
            for j in system.proc_ids() {
                if a_old[i.0][j.0]
                    && !self.plan.resident(i, j)
                    && rng.next_f64() < CHANGE_PROBABILITY
                {
                    a_old[i.0][j.0] = false;
                    changed = true;
                }
            }
        }
        let flat: Vec<bool> = a_old.iter().flat_map(|row| row.iter().copied()).collect();
        // Other units first: each one's cap is exact while D stays put.
        let mut rem = d.rem_ms.clone();
        for j in system.proc_ids().filter(|&j| j != detector.proc) {
            let cap = (self.t_ms - self.work_ms[j.0]).min(rem_max_ms);
            let draw = rng.next_f64();
            if cap > rem[j.0] && rng.next_f64() < CHANGE_PROBABILITY {
                rem[j.0] += draw * (cap - rem[j.0]);
                changed = true;
            }
        }
        let fits = |rem: &[f64]| {
            let t = self
                .plan
                .makespan_ms(system, &input_of(d, rem, &flat), detector);
            t <= self.t_ms + 1e-6 * self.t_ms.abs().max(1.0)
        };
        // The detector's end delays every unit's start: D + W_j <= T* on
        // every unit bounds it.
        let det = detector.proc.0;
        let most_work = self.work_ms.iter().copied().fold(0.0, f64::max);
        let cap = (self.t_ms - detector.exec_ms - most_work).min(rem_max_ms);
        let draw = rng.next_f64();
        if cap > rem[det] && rng.next_f64() < CHANGE_PROBABILITY {
            let before = rem[det];
            rem[det] += draw * (cap - before);
            if fits(&rem) {
                changed = true;
            } else {
                rem[det] = before;
            }
        }
        if !changed || !fits(&rem) {
            return None;
        }
        Some(Demo {
            rem_ms: rem,
            a_old,
            ..d.clone()
        })
    }
}

fn input_of<'a>(d: &'a Demo, rem: &'a [f64], residency: &'a [bool]) -> PlanInput<'a> {
    PlanInput {
        scene: &d.scene,
        rem_ms: rem,
        residency,
        frames_per_epoch: d.frames_per_epoch,
    }
}
