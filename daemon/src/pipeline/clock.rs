//! The scheduler thread's clock: milliseconds since the pipeline started,
//! from the wall clock, or from a virtual clock a test advances (the frame
//! flow's times are then exact, so the daemon's decisions can be compared
//! with the simulator's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Milliseconds since the pipeline started.
#[derive(Clone, Debug)]
pub enum Clock {
    /// The wall clock, from `start`.
    Wall {
        /// The pipeline's start.
        start: Instant,
    },
    /// A clock only a test moves (ms as f64 bits).
    Virtual(Arc<AtomicU64>),
}

impl Clock {
    /// The wall clock from now.
    pub fn wall() -> Clock {
        Clock::Wall {
            start: Instant::now(),
        }
    }

    /// A virtual clock at 0 ms, and the handle that moves it.
    pub fn virtual_at_zero() -> (Clock, VirtualTime) {
        let t = Arc::new(AtomicU64::new(0f64.to_bits()));
        (Clock::Virtual(Arc::clone(&t)), VirtualTime(t))
    }

    /// Now, ms.
    pub fn now_ms(&self) -> f64 {
        match self {
            Clock::Wall { start } => start.elapsed().as_secs_f64() * 1e3,
            Clock::Virtual(t) => f64::from_bits(t.load(Ordering::Acquire)),
        }
    }

    /// An instant of the wall clock in this clock's ms (a virtual clock
    /// takes every report as arriving now: the test delivers it on time).
    pub fn ms_of(&self, at: Instant) -> f64 {
        match self {
            Clock::Wall { start } => at.saturating_duration_since(*start).as_secs_f64() * 1e3,
            Clock::Virtual(_) => self.now_ms(),
        }
    }

    /// `ms` of this clock as an instant of the wall clock (a virtual clock
    /// maps to now plus the difference).
    pub fn instant_of(&self, ms: f64) -> Instant {
        let now = Instant::now();
        let ahead = ms - self.now_ms();
        if ahead >= 0.0 {
            now.checked_add(Duration::from_secs_f64(ahead.min(1e12) / 1e3))
                .unwrap_or(now)
        } else {
            now.checked_sub(Duration::from_secs_f64((-ahead).min(1e12) / 1e3))
                .unwrap_or(now)
        }
    }

    /// Whether a test moves this clock.
    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }
}

/// Moves a virtual clock.
#[derive(Clone, Debug)]
pub struct VirtualTime(Arc<AtomicU64>);

impl VirtualTime {
    /// Sets the clock to `ms`.
    pub fn set(&self, ms: f64) {
        self.0.store(ms.to_bits(), Ordering::Release);
    }
}
