//! A frame's expected work before it enters the pipeline, in milliseconds of
//! processor time from the profile, so admission shares the pipeline by work
//! rather than by frames (`server::admission`).
//!
//! Each request is charged its model's fastest batch-1 t_e. A frame with
//! upstream detections costs what its routed boxes start (each box's model
//! and that model's children). A frame the pipeline detects itself costs
//! what the pipeline's own frames cost lately (an average of the requests
//! they made), since its objects are unknown until the detector has run.

use std::sync::atomic::{AtomicU64, Ordering};

use camdnn_policy::{ModelId, System};
use camdnn_protocol::{ClassRef, Frame};

/// Weight of the newest frame in the running average of detected frames' work.
const LEARN_RATE: f64 = 0.1;

/// Per-frame work estimates of one pipeline (shared by the server and the
/// scheduler thread).
pub struct WorkEstimate {
    system: System,
    /// Per model: fastest batch-1 t_e (0 when it never runs, e.g. upstream), ms.
    own_ms: Vec<f64>,
    /// Per model: its own t_e plus each descendant's once, ms.
    subtree_ms: Vec<f64>,
    root: ModelId,
    /// Running average work of frames the pipeline detects itself, ms (f64 bits).
    detected_ms: AtomicU64,
}

impl WorkEstimate {
    /// The estimates of `system`'s models; `upstream[i]` marks models that are
    /// never run (an upstream detector).
    pub fn new(system: &System, upstream: &[bool]) -> Self {
        let own_ms: Vec<f64> = system
            .model_ids()
            .map(|i| {
                let best = system
                    .proc_ids()
                    .map(|j| system.exec_ms(i, j, 1))
                    .fold(f64::INFINITY, f64::min);
                if upstream.get(i.0).copied().unwrap_or(false) || !best.is_finite() {
                    0.0
                } else {
                    best
                }
            })
            .collect();
        let mut subtree_ms = own_ms.clone();
        // Children come after their parents in a validated system: sum bottom-up.
        for i in system.model_ids().collect::<Vec<_>>().into_iter().rev() {
            let below: f64 = system.models[i.0]
                .children
                .iter()
                .map(|c| subtree_ms[c.0])
                .sum();
            subtree_ms[i.0] += below;
        }
        let root = system.roots().next().unwrap_or(ModelId(0));
        Self {
            system: system.clone(),
            detected_ms: AtomicU64::new(subtree_ms[root.0].max(own_ms[root.0]).to_bits()),
            own_ms,
            subtree_ms,
            root,
        }
    }

    /// The expected work of `frame`, ms (at least 0.001, so every frame costs something).
    pub fn frame_ms(&self, frame: &Frame) -> f64 {
        let ms = match &frame.detections {
            Some(dets) => {
                self.own_ms[self.root.0]
                    + dets
                        .iter()
                        .filter_map(|d| {
                            let m = match &d.class {
                                ClassRef::Name(s) => self.system.route(s),
                                ClassRef::Id(n) => self.system.route(&n.to_string()),
                            }?;
                            Some(self.subtree_ms[m.0])
                        })
                        .sum::<f64>()
            }
            None => f64::from_bits(self.detected_ms.load(Ordering::Relaxed)),
        };
        ms.max(1e-3)
    }

    /// Learns from a detected frame that ran `root_items` detector items and
    /// made `requests[i]` requests of model i.
    pub fn learn(&self, root_items: usize, requests: &[u32]) {
        let ms = root_items as f64 * self.own_ms[self.root.0]
            + requests
                .iter()
                .zip(&self.own_ms)
                .map(|(&n, &t)| f64::from(n) * t)
                .sum::<f64>();
        let old = f64::from_bits(self.detected_ms.load(Ordering::Relaxed));
        let new = old + LEARN_RATE * (ms - old);
        self.detected_ms.store(new.to_bits(), Ordering::Relaxed);
    }
}
