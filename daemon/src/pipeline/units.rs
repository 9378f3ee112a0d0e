//! The seam between the scheduler thread and the processors: the commands a
//! processor's worker takes (`camdnn_engine::Command`). A real processor is
//! a `camdnn_engine` worker thread; a test may put a virtual processor here
//! that answers after the profiled time on a virtual clock.

use camdnn_engine::{Command, EngineError, WorkerHandle};

/// One processor as the scheduler thread drives it.
pub trait Unit: Send {
    /// Queues a command; fails only when the processor's worker has ended.
    fn send(&self, cmd: Command) -> Result<(), EngineError>;
    /// False once the processor's worker has ended.
    fn is_alive(&self) -> bool;
    /// Whether a thread of this processor is still stuck in an engine call
    /// of `model` (past its limit, abandoned).
    fn stuck_in(&self, _model: &str) -> bool {
        false
    }
}

impl Unit for WorkerHandle {
    fn send(&self, cmd: Command) -> Result<(), EngineError> {
        WorkerHandle::send(self, cmd)
    }

    fn is_alive(&self) -> bool {
        WorkerHandle::is_alive(self)
    }

    fn stuck_in(&self, model: &str) -> bool {
        self.status().stuck.iter().any(|s| s.model == model)
    }
}
