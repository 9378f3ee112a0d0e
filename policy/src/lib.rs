//! camdnn's scheduling core, pure: no I/O, no async runtime, no clock of its
//! own. Time is always passed in (milliseconds as `f64`), so the daemon, the
//! simulator and the offline tools run the same, deterministic code.
//!
//! Map of the crate:
//! - [`spec`] / [`System`]: the board, the model graph and the profile, from TOML, validated;
//! - [`rank`]: model priorities (upward + downward rank).

#![warn(missing_docs)]

mod error;
pub mod rank;
pub mod spec;
mod system;

pub use error::{InputError, SpecError};
pub use spec::{ProcessorKind, SystemSpec};
pub use system::{Model, ModelId, ProcId, Processor, System};
