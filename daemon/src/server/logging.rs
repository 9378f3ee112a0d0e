//! Logging with `tracing` to stderr: plain lines without colours, and
//! without our own timestamps under journald (which stamps every line);
//! identical lines are written at most 3 times per window, the rest counted (`log_dedup`).

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use super::config::LogConfig;
use super::log_dedup::{Dedup, WINDOW};

/// Environment variable that overrides `[log] level`.
pub const LOG_ENV: &str = "CAMDNN_LOG";

/// Installs the global subscriber; the level comes from `CAMDNN_LOG` if set,
/// else from the config. Fails on an invalid filter or a second call.
pub fn init(cfg: &LogConfig) -> anyhow::Result<()> {
    let (source, spec) = match std::env::var(LOG_ENV) {
        Ok(s) if !s.trim().is_empty() => (LOG_ENV, s),
        _ => ("[log] level", cfg.level.clone()),
    };
    let filter = EnvFilter::try_new(&spec)
        .with_context(|| format!("{source} {spec:?} is not a valid log filter"))?;
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    // Identical lines are counted, not repeated; the writer stamps the time.
    let writer = Dedup::new(Box::new(std::io::stderr()), WINDOW, !journald);
    writer.start_flusher();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .try_init()
        .map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))
}
