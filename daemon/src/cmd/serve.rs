//! `camdnnd serve`: the daemon. Loads the config, starts the pipeline, serves
//! the Unix socket (own or systemd's), metrics and health over HTTP, and
//! handles signals: SIGTERM/SIGINT drain and exit 0, SIGHUP reloads.
//!
//! Signals are caught before anything else happens, so none can end the
//! daemon by its default action: during start-up a SIGTERM/SIGINT ends it
//! (exit 0, logged) and a SIGHUP is logged and applied as a reload once
//! start-up is done. The socket and the metrics port are taken before any
//! model loads, so a bad path or a busy port fails at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use futures::StreamExt;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_tokio::Signals;

use crate::config::DaemonConfig;
use crate::pipeline::FrameProcessor;
use crate::server::listener::Listener;
use crate::server::{door, http, logging, systemd, Server, ServerHandle};
use crate::telemetry;

/// Options of `camdnnd serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's config file.
    #[arg(long, default_value = "/etc/camdnn/camdnnd.toml")]
    pub config: PathBuf,
}

/// Builds a frame processor from a config (the real one is
/// [`crate::pipeline::build`]).
pub type BuildFn = fn(&DaemonConfig) -> anyhow::Result<Arc<dyn FrameProcessor>>;

/// Runs the daemon until SIGTERM/SIGINT and the drain are over.
pub fn run(args: &Args) -> anyhow::Result<()> {
    run_with(args, |cfg| crate::pipeline::build(&cfg.pipeline))
}

/// [`run`] with another processor builder.
pub fn run_with(args: &Args, build: BuildFn) -> anyhow::Result<()> {
    crate::allocator::bound_arenas();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("camdnnd-io")
        .build()
        .context("starting the async runtime")?;
    // First: from here on a signal is queued for us, never acted on by default.
    let signals = {
        let _in_runtime = rt.enter();
        Signals::new([SIGTERM, SIGINT, SIGHUP]).context("installing signal handlers")?
    };
    let cfg = load(&args.config)?;
    logging::init(&cfg.log)?;
    let result = rt.block_on(serve(args.config.clone(), cfg, build, signals));
    if let Err(e) = &result {
        tracing::error!("camdnnd failed: {e:#}");
    }
    // Worker threads of the pipeline end with their owners; do not wait for
    // stray blocking tasks (a reload still building, say).
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

/// Reads and validates a config file (the same checks at start and reload).
fn load(path: &Path) -> anyhow::Result<DaemonConfig> {
    let cfg = DaemonConfig::load(path)?;
    cfg.server
        .validate()
        .and_then(|()| cfg.metrics.validate())
        .with_context(|| format!("in config {}", path.display()))?;
    Ok(cfg)
}

async fn build_blocking(
    build: BuildFn,
    cfg: DaemonConfig,
) -> anyhow::Result<Arc<dyn FrameProcessor>> {
    tokio::task::spawn_blocking(move || build(&cfg))
        .await
        .context("the pipeline builder panicked")?
}

async fn serve(
    path: PathBuf,
    mut cfg: DaemonConfig,
    build: BuildFn,
    mut signals: Signals,
) -> anyhow::Result<()> {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), config = %path.display(), "camdnnd starting");
    systemd::status("loading models");
    // The socket first (a bad path or a live server there fails before any
    // model loads), then health and metrics, so /health/live answers while
    // models load. Clients that connect meanwhile wait in the socket's
    // backlog until the pipeline is ready.
    let mut listener = Listener::open(&cfg.server)?;
    let socket = listener.take().context("the listener was already taken")?;
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(None::<ServerHandle>);
    let mut http_task = None;
    if cfg.metrics.enabled {
        let config_name = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let recorder = telemetry::install(&cfg.metrics, &config_name)
            .context("installing the metrics recorder")?;
        register_pipeline_metrics(&cfg);
        let upkeep = recorder.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                upkeep.run_upkeep();
            }
        });
        let listener = tokio::net::TcpListener::bind(cfg.metrics.listen)
            .await
            .with_context(|| format!("[metrics] binding {}", cfg.metrics.listen))?;
        tracing::info!(listen = %cfg.metrics.listen, "serving /metrics, /health/live, /health/ready");
        let ready: http::ReadyFn = Arc::new(move || {
            ready_rx
                .borrow()
                .as_ref()
                .map_or(Err("loading models".into()), ServerHandle::readiness)
        });
        http_task = Some(tokio::spawn(http::serve(listener, Some(recorder), ready)));
    }
    let Some((processor, hup_pending)) = start_up(build, &cfg, &mut signals).await? else {
        return Ok(());
    };
    let budget = door::fd_budget();
    if cfg.server.max_connections > budget {
        tracing::warn!(
            configured = cfg.server.max_connections,
            allowed = budget,
            "[server] max_connections lowered to what the file descriptor limit allows"
        );
        cfg.server.max_connections = budget;
    }
    let server = Server::new(cfg.server.clone(), processor);
    let handle = server.handle();
    ready_tx.send_replace(Some(handle.clone()));

    let signals_handle = signals.handle();
    let signal_task = tokio::spawn(handle_signals(
        signals,
        (path, cfg),
        build,
        handle.clone(),
        hup_pending,
    ));
    tokio::spawn(announce_ready(handle.clone()));
    if let Some(period) = systemd::watchdog_interval() {
        let h = handle.clone();
        tokio::spawn(systemd::watchdog(period, move || h.liveness()));
    }

    server.run(socket).await;
    drop(listener);
    signals_handle.close();
    signal_task.abort();
    if let Some(t) = http_task {
        t.abort();
    }
    tracing::info!("camdnnd stopped");
    Ok(())
}

/// Builds the first pipeline while answering signals: SIGTERM/SIGINT end
/// the start-up (`None`: exit 0), a SIGHUP is remembered (`true`: reload
/// once serving).
async fn start_up(
    build: BuildFn,
    cfg: &DaemonConfig,
    signals: &mut Signals,
) -> anyhow::Result<Option<(Arc<dyn FrameProcessor>, bool)>> {
    let building = build_blocking(build, cfg.clone());
    tokio::pin!(building);
    let mut hup = false;
    loop {
        tokio::select! {
            built = &mut building => return Ok(Some((built?, hup))),
            Some(sig) = signals.next() => {
                if sig == SIGHUP {
                    tracing::info!("SIGHUP during start-up: the config is reloaded once start-up is done");
                    hup = true;
                } else {
                    tracing::info!(signal = sig, "signal during start-up: stopping before serving");
                    systemd::stopping();
                    return Ok(None);
                }
            }
        }
    }
}

/// Makes the pipeline's per-model and per-processor series exist (at zero)
/// for the config's models and processors.
fn register_pipeline_metrics(cfg: &DaemonConfig) {
    telemetry::register_pipeline(
        cfg.pipeline.models.iter().map(|m| m.name.as_str()),
        cfg.pipeline.processors.iter().map(|p| p.name.as_str()),
    );
}

/// Tells systemd READY=1 once the pipeline reports ready, then keeps the
/// STATUS line, the `camdnn_ready` and `camdnn_scheduler_alive` gauges and
/// the log current as readiness comes and goes (a failed load, a dead
/// scheduler thread).
async fn announce_ready(handle: ServerHandle) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    while !handle.is_ready() {
        tick.tick().await;
    }
    ::metrics::gauge!(telemetry::READY).set(1.0);
    tracing::info!("ready");
    systemd::ready("serving");
    let mut was_ready = true;
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    for n in 0u64.. {
        tick.tick().await;
        if handle.is_draining() {
            return;
        }
        let readiness = handle.readiness();
        ::metrics::gauge!(telemetry::READY).set(if readiness.is_ok() { 1.0 } else { 0.0 });
        ::metrics::gauge!(telemetry::SCHEDULER_ALIVE).set(if handle.is_alive() {
            1.0
        } else {
            0.0
        });
        match (&readiness, was_ready) {
            (Err(reason), true) => tracing::warn!(%reason, "not ready"),
            (Ok(()), false) => tracing::info!("ready again"),
            _ => {}
        }
        if readiness.is_ok() != was_ready || n % 10 == 0 {
            let (pending, in_flight, conns) = handle.load();
            let state = match &readiness {
                Ok(()) => "serving".to_owned(),
                Err(reason) => format!("degraded ({reason})"),
            };
            systemd::status(&format!(
                "{state}: {conns} connections, {in_flight} frames in flight, {pending} waiting"
            ));
        }
        was_ready = readiness.is_ok();
    }
}

/// Handles signals. A reload runs in its own task (reloads one at a time),
/// so SIGTERM is acted on at once even while a new pipeline is being built.
/// `hup_pending`: a SIGHUP came during start-up; it reloads now.
async fn handle_signals(
    mut signals: Signals,
    (path, running): (PathBuf, DaemonConfig),
    build: BuildFn,
    handle: ServerHandle,
    hup_pending: bool,
) {
    let running = Arc::new(tokio::sync::Mutex::new(running));
    let path = Arc::new(path);
    if hup_pending {
        spawn_reload(&running, &path, build, &handle);
    }
    while let Some(sig) = signals.next().await {
        match sig {
            SIGHUP => spawn_reload(&running, &path, build, &handle),
            _ => {
                tracing::info!(signal = sig, "shutting down");
                systemd::stopping();
                ::metrics::gauge!(telemetry::READY).set(0.0);
                handle.shutdown();
            }
        }
    }
}

/// Starts a reload in its own task (one at a time: they queue on `running`).
fn spawn_reload(
    running: &Arc<tokio::sync::Mutex<DaemonConfig>>,
    path: &Arc<PathBuf>,
    build: BuildFn,
    handle: &ServerHandle,
) {
    let (running, path, handle) = (Arc::clone(running), Arc::clone(path), handle.clone());
    tokio::spawn(async move {
        let mut running = running.lock().await;
        if handle.is_draining() {
            return;
        }
        systemd::reloading();
        match reload(&path, build, &handle).await {
            Ok(new) => {
                // Only now, with the reload applied: what it could not apply.
                for change in restart_only_changes(&running, &new) {
                    tracing::warn!("{change} changed: takes effect at the next restart");
                }
                *running = in_effect(&running, &new);
                ::metrics::counter!(telemetry::CONFIG_RELOADS, "result" => "ok").increment(1);
                tracing::info!(config = %path.display(), "config reloaded");
                systemd::ready("serving (config reloaded)");
            }
            Err(e) => {
                ::metrics::counter!(telemetry::CONFIG_RELOADS, "result" => "error").increment(1);
                tracing::error!("config reload failed, keeping the old config: {e:#}");
                systemd::ready("serving (last reload failed; old config kept)");
            }
        }
    });
}

/// Validates the new config and builds its pipeline before switching to it;
/// any failure leaves the running config untouched. Returns the new config
/// as read (see [`in_effect`] for what of it now runs).
async fn reload(
    path: &Path,
    build: BuildFn,
    handle: &ServerHandle,
) -> anyhow::Result<DaemonConfig> {
    let new = load(path)?;
    let processor = build_blocking(build, new.clone()).await?;
    register_pipeline_metrics(&new);
    handle.replace_processor(processor);
    handle.apply_limits(&new.server);
    Ok(new)
}

/// The config in effect after `new` was reloaded over `running`: the
/// pipeline and the flow-control limits are `new`'s; everything read only at
/// start (socket, connection settings, `[metrics]`, `[log]`) stays as it runs.
fn in_effect(running: &DaemonConfig, new: &DaemonConfig) -> DaemonConfig {
    let mut out = running.clone();
    out.pipeline = new.pipeline.clone();
    out.server.max_pending = new.server.max_pending;
    out.server.stream_max_in_flight = new.server.stream_max_in_flight;
    out
}

/// The settings `new` changes that a reload cannot apply, compared with the
/// RUNNING config (not the last file read: a change a reload skipped is still
/// pending at the next reload), as "[section] field".
fn restart_only_changes(running: &DaemonConfig, new: &DaemonConfig) -> Vec<String> {
    let effective = in_effect(running, new);
    let (old, new_s) = (&effective.server, &new.server);
    let mut changes: Vec<String> = [
        ("socket", old.socket != new_s.socket),
        ("socket_mode", old.socket_mode != new_s.socket_mode),
        ("socket_group", old.socket_group != new_s.socket_group),
        ("window", old.window != new_s.window),
        (
            "max_message_size",
            old.max_message_size != new_s.max_message_size,
        ),
        (
            "max_streams_per_connection",
            old.max_streams_per_connection != new_s.max_streams_per_connection,
        ),
        (
            "max_connections",
            old.max_connections != new_s.max_connections,
        ),
        (
            "max_connections_per_uid",
            old.max_connections_per_uid != new_s.max_connections_per_uid,
        ),
        (
            "max_connections_per_pid",
            old.max_connections_per_pid != new_s.max_connections_per_pid,
        ),
        ("write_queue", old.write_queue != new_s.write_queue),
        (
            "default_priority",
            old.default_priority != new_s.default_priority,
        ),
        (
            "drain_timeout_ms",
            old.drain_timeout_ms != new_s.drain_timeout_ms,
        ),
        ("server_name", old.server_name != new_s.server_name),
    ]
    .into_iter()
    .filter(|(_, changed)| *changed)
    .map(|(field, _)| format!("[server] {field}"))
    .collect();
    // Any other [server] field this list does not know yet is restart-only too.
    if changes.is_empty() && format!("{old:?}") != format!("{new_s:?}") {
        changes.push("[server]".into());
    }
    if format!("{:?}", effective.metrics) != format!("{:?}", new.metrics) {
        changes.push("[metrics]".into());
    }
    if format!("{:?}", effective.log) != format!("{:?}", new.log) {
        changes.push("[log]".into());
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(socket: &str, window: u16, max_pending: usize) -> DaemonConfig {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd-sim.toml"),
        )
        .expect("the shipped sim config");
        let mut cfg: DaemonConfig = toml::from_str(&text).expect("parses");
        cfg.server.socket = socket.into();
        cfg.server.window = window;
        cfg.server.max_pending = max_pending;
        cfg
    }

    /// The warnings compare with the config running, not the last file
    /// read: a second reload of the same file still names a socket change
    /// that has not taken effect.
    #[test]
    fn restart_only_changes_are_measured_against_the_running_config() {
        let started = config("/run/a.sock", 4, 64);
        let file = config("/run/b.sock", 4, 128);
        assert_eq!(restart_only_changes(&started, &file), ["[server] socket"]);
        let running = in_effect(&started, &file);
        assert_eq!(running.server.socket, started.server.socket);
        assert_eq!(running.server.max_pending, 128, "reloadable limits apply");
        assert_eq!(
            restart_only_changes(&running, &file),
            ["[server] socket"],
            "still not in effect at the next reload"
        );
        let back = config("/run/a.sock", 8, 128);
        assert_eq!(restart_only_changes(&running, &back), ["[server] window"]);
    }
}
