//! systemd notifications (`Type=notify`): READY, STATUS, RELOADING,
//! STOPPING and WATCHDOG. Without `NOTIFY_SOCKET` every call is a no-op.

use std::time::Duration;

use sd_notify::NotifyState;

fn send(states: &[NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("notifying systemd failed: {e}");
    }
}

/// Startup is complete: READY=1 with a status line.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A new status line (shown by `systemctl status`).
pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// A reload has started (RELOADING=1 with the monotonic timestamp systemd
/// 253+ requires); call [`ready`] when it is over.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// The drain has started.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("draining")]);
}

/// The watchdog period systemd asked for (`WatchdogSec=`), if any.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
}

/// Pings the watchdog at half its period while `alive()` says the pipeline
/// is alive (a dead or stuck scheduler thread, a pipeline where nothing
/// moves, or a stalled runtime stops the pings and systemd restarts the
/// service); the reason it is not is logged once per spell.
pub async fn watchdog(period: Duration, alive: impl Fn() -> Result<(), String>) {
    let mut tick = tokio::time::interval(period / 2);
    let mut warned = false;
    loop {
        tick.tick().await;
        match alive() {
            Ok(()) => {
                if warned {
                    tracing::info!("the pipeline is alive again: feeding the watchdog");
                }
                send(&[NotifyState::Watchdog]);
                warned = false;
            }
            Err(reason) if !warned => {
                tracing::error!(%reason, "the pipeline is not alive: no longer feeding the watchdog");
                warned = true;
            }
            Err(_) => {}
        }
    }
}
