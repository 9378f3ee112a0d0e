//! The service shell around the frame path: Unix socket server, flow
//! control, metrics and health, signals and systemd integration.

pub mod config;
