//! camdnnd's library: everything with a side effect lives here (sockets,
//! engines' threads, metrics, signals, systemd), built on the pure
//! `camdnn-policy` scheduler.

pub mod allocator;
pub mod cmd;
pub mod config;
pub mod pipeline;
pub mod server;
pub mod telemetry;
