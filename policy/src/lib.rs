//! camdnn's scheduling core, pure: no I/O, no async runtime, no clock of its
//! own. Time is always passed in (milliseconds as `f64`), so the daemon, the
//! simulator and the offline tools run the same, deterministic code.
//!
//! Map of the crate:
//! - [`spec`] / [`System`]: the board, the model graph and the profile, from TOML, validated;
//! - [`rank`]: model priorities (upward + downward rank);
//! - [`Cluster`]: rem_j and residency a(i,j), with loads and LRU eviction;
//! - [`retry`]: pairs out of service after a failed load or engine panic, retried with backoff;
//! - [`batcher`]: the sync-timer batcher; [`dispatch`]: Algorithm 1's host choice;
//! - [`late_binding`]: placing released requests batch by batch (late binding), and
//!   [`scene`]: the scene a frame is planned for; the simulator and the daemon drive both;
//! - [`plan`]: global plans a(i,j), b_k(i,j), the [`GlobalPolicy`] trait and [`repair`];
//!   [`epoch`]: the scenes a step expects over the next epoch, which a policy that plans
//!   for the stream takes ([`GlobalPolicy::plan_epoch`]);
//! - [`flow`]: the frame flow, one state machine from a frame's arrival to its answer, driven
//!   by the simulator and the daemon alike; [`admission`]: how frames enter it;
//! - [`scheduler`]: the one interface every online scheduler implements; [`schedulers`]:
//!   camdnn's local dispatcher and the baselines (HEFT, CQ, static, LTF);
//! - [`features`] / [`mlp`]: the learned global policy (ONNX MLP, features, decoding);
//! - [`heft_dag`]: classic HEFT on a task graph (Static-DIST, golden test);
//! - [`sim`]: the discrete-event simulator, its traces and its measures;
//! - [`gen`]: seeded boards and scene-trace shapes nobody tuned to; [`suite`]: every
//!   scheduler over them, on a measure dropping frames cannot improve;
//! - [`bound`]: lower bounds on a frame's makespan and upper bounds on a stream's rate;
//! - [`estimate`]: live t_e / t_l estimates with their spread; [`drift`]: detectors of a
//!   lasting change in a processor's speed or the scene mix; [`adapt`]: both driving the
//!   scheduler's view of the profile and early global steps;
//! - [`reuse`]: whether a tracked object's earlier result stands for this frame's, per model,
//!   and each model's share of requests still inferred;
//! - [`stepper`]: when the global step runs and with what (epoch timer, frames counted,
//!   adaptation's triggers); the simulator and the daemon drive the same one.

#![warn(missing_docs)]

pub mod adapt;
pub mod admission;
pub mod batcher;
pub mod bound;
mod cluster;
pub mod dispatch;
pub mod drift;
pub mod epoch;
mod error;
pub mod estimate;
pub mod features;
pub mod flow;
pub mod frame_period;
pub mod gen;
mod global;
pub mod heft_dag;
pub mod late_binding;
pub mod mlp;
pub mod plan;
pub mod rank;
pub mod retry;
pub mod reuse;
pub mod rng;
pub mod scene;
pub mod scheduler;
pub mod schedulers;
pub mod sim;
pub mod spec;
pub mod stats;
pub mod stepper;
pub mod suite;
mod system;

pub use cluster::{Cluster, FinishMark, Placement};
pub use dispatch::{choose_host, idle_taker, preferred_fitting, Decision, HostRule};
pub use error::{InputError, SpecError};
pub use plan::{repair, Detector, GlobalPolicy, Infeasible, Plan, PlanInput};
pub use spec::{ProcessorKind, SystemSpec};
pub use system::{Model, ModelId, ProcId, Processor, System};
