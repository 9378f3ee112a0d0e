//! Offline side of camdnn's global step: the exact ILP oracle, demonstration
//! generation, imitation training and ONNX export. Never linked by the daemon.
//!
//! Map of the crate:
//! - [`oracle`]: the corrected ILP of the design brief (Sec. 4), solved with
//!   HiGHS through `good_lp`, and [`oracle::IlpPolicy`], a
//!   [`camdnn_policy::GlobalPolicy`] backed by it;
//! - [`brute`]: an exhaustive enumerator of the same problem, the ILP's
//!   independent check on tiny instances;
//! - [`demos`]: optimal demonstrations over scene complexities, in parallel,
//!   deterministic for a seed and resumable;
//! - [`train`] / [`export`]: imitation training of the policy MLP (candle),
//!   its fidelity evaluation, and ONNX + sidecar export; [`mlp_cli`]: the
//!   `ilmodel train`, `export`, `eval` and `calibrate` commands over both;
//! - [`reproduce`]: every experiment of the paper on one profile, written
//!   to a Markdown report with SVG plots;
//! - [`rng`]: the small, version-stable random generator the demos use;
//! - [`stream`]: the oracle that plans an epoch of the stream (residency,
//!   the detector's unit, splits and batches for the scenes expected), its
//!   brute-force check, and the policy the learned step imitates.

#![warn(missing_docs)]

pub mod brute;
pub mod demos;
mod error;
pub mod export;
pub mod mlp_cli;
pub mod oracle;
pub mod reproduce;
pub mod rng;
pub mod stream;
pub mod train;
pub mod visited;

pub use error::{BruteError, DemoError, OracleError};
pub use oracle::{solve, IlpPolicy, IlpSolution, OracleOptions, SolveStatus};
