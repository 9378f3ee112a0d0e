//! A throttling drill: an engine slowed by a factor between two times, as
//! DVFS or thermal throttling slows a unit, so the real pipeline can be put
//! through what the simulator's `--throttle` does. The wrapped engine runs
//! each batch as usual; a batch that starts inside the window is then held
//! for (factor - 1) times its run, so the caller measures factor times the
//! engine's time. Loads are not slowed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{
    Engine, EngineError, EngineKind, LoadedModel, ModelInfo, ModelSource, ProcessorConfig, Tensor,
};

/// When and how much a processor is slowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttle {
    /// Run time multiplier inside the window (at least 1).
    pub factor: f64,
    /// Start of the window, from the engine's creation.
    pub from: Duration,
    /// End of the window (`None`: never ends).
    pub until: Option<Duration>,
}

impl Throttle {
    /// Whether a batch starting `since` after the engine's creation is slowed.
    pub fn active(&self, since: Duration) -> bool {
        since >= self.from && self.until.is_none_or(|u| since < u)
    }
}

/// `inner`, slowed as `throttle` says from the moment it is created.
pub struct ThrottledEngine {
    inner: Arc<dyn Engine>,
    throttle: Throttle,
    start: Instant,
}

impl ThrottledEngine {
    /// Wraps `inner`; the window's clock starts now. A factor below 1 (or
    /// not finite) is refused: the drill slows, it cannot speed up.
    pub fn new(inner: Arc<dyn Engine>, throttle: Throttle) -> Result<Self, EngineError> {
        if !(throttle.factor.is_finite() && throttle.factor >= 1.0) {
            return Err(EngineError::Processor {
                processor: "(throttle drill)".into(),
                reason: format!("the slow-down factor must be >= 1, got {}", throttle.factor),
            });
        }
        Ok(ThrottledEngine {
            inner,
            throttle,
            start: Instant::now(),
        })
    }
}

impl Engine for ThrottledEngine {
    fn kind(&self) -> EngineKind {
        self.inner.kind()
    }

    fn check_processor(&self, proc: &ProcessorConfig) -> Result<(), EngineError> {
        self.inner.check_processor(proc)
    }

    fn load(
        &self,
        model: &ModelSource,
        proc: &ProcessorConfig,
    ) -> Result<Box<dyn LoadedModel>, EngineError> {
        Ok(Box::new(ThrottledModel {
            inner: self.inner.load(model, proc)?,
            throttle: self.throttle,
            start: self.start,
        }))
    }
}

struct ThrottledModel {
    inner: Box<dyn LoadedModel>,
    throttle: Throttle,
    start: Instant,
}

impl LoadedModel for ThrottledModel {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }

    fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, EngineError> {
        let t0 = Instant::now();
        let out = self.inner.run(inputs);
        if self.throttle.active(t0 - self.start) {
            std::thread::sleep(t0.elapsed().mul_f64(self.throttle.factor - 1.0));
        }
        out
    }

    fn prepared_for(&self, batch: usize) -> bool {
        self.inner.prepared_for(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_half_open_and_may_never_end() {
        let t = Throttle {
            factor: 2.0,
            from: Duration::from_secs(2),
            until: Some(Duration::from_secs(4)),
        };
        assert!(!t.active(Duration::from_millis(1999)));
        assert!(t.active(Duration::from_secs(2)));
        assert!(!t.active(Duration::from_secs(4)));
        let open = Throttle { until: None, ..t };
        assert!(open.active(Duration::from_secs(3600)));
    }
}
