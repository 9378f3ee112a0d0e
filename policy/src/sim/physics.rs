//! The simulator's physics: what the board really does with the flow's
//! commands. Each processor runs its loads and batches in order, each
//! taking the board's time (slowed by any throttle in force when it
//! starts), plus the hand-over cost of a batch, plus the rest a
//! utilisation cap adds after it. Crops take their time in waves of the
//! crop threads. Nothing here decides anything.

use super::Throttle;
use crate::flow::Request;
use crate::{ModelId, ProcId, System};

/// Every processor's timeline.
#[derive(Debug)]
pub struct Units<'a> {
    board: &'a System,
    throttles: &'a [Throttle],
    overhead_ms: f64,
    free_at: Vec<f64>,
    rest_per_ms: Vec<f64>,
}

/// One job on a processor: when it starts and finishes, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// When it starts, ms.
    pub start_ms: f64,
    /// When it finishes, ms.
    pub finish_ms: f64,
}

impl<'a> Units<'a> {
    /// Idle processors from `start_ms`.
    pub fn new(
        board: &'a System,
        throttles: &'a [Throttle],
        overhead_ms: f64,
        start_ms: f64,
    ) -> Self {
        Units {
            board,
            throttles,
            overhead_ms,
            free_at: vec![start_ms; board.num_processors()],
            rest_per_ms: board
                .processors
                .iter()
                .map(|p| 1.0 / p.utilisation_cap - 1.0)
                .collect(),
        }
    }

    /// Processor j is busy until `at_ms` (a running start: work already queued).
    pub fn busy_until(&mut self, j: ProcId, at_ms: f64) {
        self.free_at[j.0] = self.free_at[j.0].max(at_ms);
    }

    /// Loads model i on p_j after what is queued there, from `now`.
    pub fn load(&mut self, now: f64, i: ModelId, j: ProcId) -> Span {
        let start = now.max(self.free_at[j.0]);
        let ms = self.board.load_ms(i, j) * Throttle::factor(self.throttles, j, start);
        self.occupy(j, start, start + ms)
    }

    /// Runs a batch of k requests of model i on p_j after what is queued
    /// there, from `now`; also returns its execution time alone.
    pub fn run(&mut self, now: f64, i: ModelId, j: ProcId, k: usize) -> (Span, f64) {
        let start = now.max(self.free_at[j.0]);
        let exec = self.board.exec_ms(i, j, k) * Throttle::factor(self.throttles, j, start);
        (self.occupy(j, start, start + exec + self.overhead_ms), exec)
    }

    fn occupy(&mut self, j: ProcId, start: f64, finish: f64) -> Span {
        self.free_at[j.0] = finish + (finish - start) * self.rest_per_ms[j.0];
        Span {
            start_ms: start,
            finish_ms: finish,
        }
    }
}

/// When each of `requests`' inputs is ready after `now`: the crop threads
/// take them in waves, `threads` at a time, `crop_ms` each. Waves ready at
/// the same time are one.
pub(super) fn crop_waves(
    now: f64,
    requests: Vec<Request>,
    crop_ms: f64,
    threads: usize,
) -> Vec<(f64, Vec<Request>)> {
    if crop_ms <= 0.0 {
        return vec![(now, requests)];
    }
    requests
        .chunks(threads.max(1))
        .enumerate()
        .map(|(w, c)| (now + crop_ms * (w + 1) as f64, c.to_vec()))
        .collect()
}

/// The objects of a simulated frame: its level-1 requests numbered model
/// by model, and the children each one's result releases, so that a model
/// gets exactly the trace's count of requests per frame.
pub struct SceneObjects<'a> {
    system: &'a System,
    /// The frame's scene (index = `ModelId`).
    scene: &'a [u32],
    /// Per model: the first object number of its level-1 ancestor.
    base: Vec<u32>,
    /// Per model: its level-1 ancestor.
    ancestor: Vec<ModelId>,
}

impl<'a> SceneObjects<'a> {
    /// The objects of a frame whose scene is `scene` (index = `ModelId`).
    pub fn new(system: &'a System, scene: &'a [u32]) -> Self {
        let mut base = vec![0; system.num_models()];
        let mut ancestor: Vec<ModelId> = system.model_ids().collect();
        let mut next = 0;
        for m in system.model_ids() {
            if system.models[m.0].level == 1 {
                base[m.0] = next;
                next += scene[m.0];
            }
        }
        for m in system.model_ids() {
            let mut a = m;
            while system.models[a.0].level > 1 {
                a = system.models[a.0]
                    .parent
                    .expect("deeper models have parents");
            }
            ancestor[m.0] = a;
            base[m.0] = base[a.0];
        }
        SceneObjects {
            system,
            scene,
            base,
            ancestor,
        }
    }

    /// The frame's level-1 requests, the models interleaved round robin
    /// (the order their crops are cut in).
    pub fn level1(&self) -> Vec<Request> {
        let models: Vec<ModelId> = self
            .system
            .model_ids()
            .filter(|m| self.system.models[m.0].level == 1)
            .collect();
        let mut out = Vec::new();
        let most = models.iter().map(|m| self.scene[m.0]).max().unwrap_or(0);
        for k in 0..most {
            for &m in &models {
                if k < self.scene[m.0] {
                    out.push(Request {
                        model: m,
                        object: self.base[m.0] + k,
                    });
                }
            }
        }
        out
    }

    /// The requests the result of (model, object) releases: each child
    /// model's count spread over its parent's requests, the first ones
    /// taking one more.
    pub fn children(&self, model: ModelId, object: u32) -> Vec<Request> {
        let rank = object - self.base[self.ancestor[model.0].0];
        let parent_count = self.scene[model.0].max(1);
        let mut out = Vec::new();
        for &c in &self.system.models[model.0].children {
            let total = self.scene[c.0];
            let n = total / parent_count + u32::from(rank < total % parent_count);
            for _ in 0..n {
                out.push(Request { model: c, object });
            }
        }
        out
    }
}

/// A frame's detector requests: each detector run `root_items` times.
pub(super) fn root_requests(system: &System, root_items: u32) -> Vec<Request> {
    system
        .roots()
        .flat_map(|r| {
            (0..root_items).map(move |k| Request {
                model: r,
                object: k,
            })
        })
        .collect()
}
