//! Config sections of the service shell: `[server]`, `[metrics]`, `[log]`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

/// `[server]`: the Unix socket listener and flow control.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Socket path (ignored when systemd passes a listener).
    pub socket: PathBuf,
    /// Permission bits of the socket file we create (octal in the file: `0o660`).
    #[serde(default = "default_socket_mode")]
    pub socket_mode: u32,
    /// Group that owns the socket file we create (name); `None` keeps the process's group.
    #[serde(default)]
    pub socket_group: Option<String>,
    /// Most frames per stream a client may have in flight (announced in `Welcome`).
    #[serde(default = "default_window")]
    pub window: u16,
    /// Largest message body accepted, bytes (announced in `Welcome`).
    #[serde(default = "default_max_message_size")]
    pub max_message_size: u32,
    /// Most frames of one stream inside the frame processor at once; a newer
    /// frame of the stream waits (and may be superseded) until one finishes.
    #[serde(default = "default_stream_max_in_flight")]
    pub stream_max_in_flight: usize,
    /// Most frames waiting for admission over all connections (one per stream
    /// at most); a frame of another stream beyond this is dropped as overloaded.
    #[serde(default = "default_max_pending")]
    pub max_pending: usize,
    /// Most streams one connection may use.
    #[serde(default = "default_max_streams")]
    pub max_streams_per_connection: usize,
    /// Most client connections at once (lowered at start to what the
    /// process's file descriptor limit allows). A new connection past it
    /// takes the slot of one with no frame in flight, one that never sent a
    /// frame first, then the longest idle; when there is none it is refused
    /// with an `Error` (`server::door`).
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Most connections of one user (the peer's uid) at once; past it, the
    /// same rule within that user's connections.
    #[serde(default = "default_max_connections_per_uid")]
    pub max_connections_per_uid: usize,
    /// Most connections of one process (the peer's pid) at once; past it,
    /// the same rule within that process's connections.
    #[serde(default = "default_max_connections_per_pid")]
    pub max_connections_per_pid: usize,
    /// Answers queued per connection before the server stops reading from it.
    #[serde(default = "default_write_queue")]
    pub write_queue: usize,
    /// Priority of frames that carry none (0 lowest, 255 highest).
    #[serde(default = "default_priority")]
    pub default_priority: u8,
    /// On SIGTERM/SIGINT, how long frames in flight may take before they are
    /// answered `Dropped{ShuttingDown}` and the daemon exits, milliseconds.
    #[serde(default = "default_drain_timeout_ms")]
    pub drain_timeout_ms: u64,
    /// Name sent in `Welcome`.
    #[serde(default = "default_server_name")]
    pub server_name: String,
    /// Most time from accepting a connection to having read its whole `Hello`, ms; a
    /// client that is silent or half-sends it is closed with `Error` (timeout).
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// Most time from the first byte of a message to its last, ms: a message left
    /// half-sent longer is a timeout and the connection is closed.
    #[serde(default = "default_message_timeout_ms")]
    pub message_timeout_ms: u64,
    /// Most time a welcomed connection may send nothing while none of its frames is in
    /// flight, ms (0: no limit).
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Most time writing one answer may block on a client that does not read, ms; then
    /// the connection is closed (its later answers are counted, not sent).
    #[serde(default = "default_write_timeout_ms")]
    pub write_timeout_ms: u64,
}

fn default_socket_mode() -> u32 {
    0o660
}
fn default_window() -> u16 {
    4
}
fn default_max_message_size() -> u32 {
    camdnn_protocol::DEFAULT_MAX_MESSAGE_SIZE
}
fn default_stream_max_in_flight() -> usize {
    2
}
fn default_max_pending() -> usize {
    64
}
fn default_max_streams() -> usize {
    64
}
fn default_max_connections() -> usize {
    1024
}
fn default_max_connections_per_uid() -> usize {
    512
}
fn default_max_connections_per_pid() -> usize {
    64
}
fn default_write_queue() -> usize {
    64
}
fn default_priority() -> u8 {
    128
}
fn default_drain_timeout_ms() -> u64 {
    5000
}
fn default_handshake_timeout_ms() -> u64 {
    2_000
}
fn default_message_timeout_ms() -> u64 {
    10_000
}
fn default_idle_timeout_ms() -> u64 {
    300_000
}
fn default_write_timeout_ms() -> u64 {
    10_000
}
fn default_server_name() -> String {
    format!("camdnnd {}", env!("CARGO_PKG_VERSION"))
}

impl ServerConfig {
    /// A config with every default and the given socket path.
    pub fn with_socket(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            socket_mode: default_socket_mode(),
            socket_group: None,
            window: default_window(),
            max_message_size: default_max_message_size(),
            stream_max_in_flight: default_stream_max_in_flight(),
            max_pending: default_max_pending(),
            max_streams_per_connection: default_max_streams(),
            max_connections: default_max_connections(),
            max_connections_per_uid: default_max_connections_per_uid(),
            max_connections_per_pid: default_max_connections_per_pid(),
            write_queue: default_write_queue(),
            default_priority: default_priority(),
            drain_timeout_ms: default_drain_timeout_ms(),
            server_name: default_server_name(),
            handshake_timeout_ms: default_handshake_timeout_ms(),
            message_timeout_ms: default_message_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            write_timeout_ms: default_write_timeout_ms(),
        }
    }

    /// The drain limit as a duration.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.drain_timeout_ms)
    }

    /// Checks values serde cannot: zero limits, a mode with bits beyond 0o777.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, v) in [
            ("window", usize::from(self.window)),
            ("stream_max_in_flight", self.stream_max_in_flight),
            ("max_pending", self.max_pending),
            (
                "max_streams_per_connection",
                self.max_streams_per_connection,
            ),
            ("max_connections", self.max_connections),
            ("max_connections_per_uid", self.max_connections_per_uid),
            ("max_connections_per_pid", self.max_connections_per_pid),
            ("write_queue", self.write_queue),
            ("handshake_timeout_ms", self.handshake_timeout_ms as usize),
            ("message_timeout_ms", self.message_timeout_ms as usize),
            ("write_timeout_ms", self.write_timeout_ms as usize),
        ] {
            if v == 0 {
                bail!("[server] {name} must be at least 1");
            }
        }
        if self.max_message_size < 64 {
            bail!(
                "[server] max_message_size is {}; at least 64 bytes are needed for any frame",
                self.max_message_size
            );
        }
        if self.socket_mode > 0o777 {
            bail!(
                "[server] socket_mode {:#o} has bits beyond 0o777",
                self.socket_mode
            );
        }
        if self.socket.as_os_str().is_empty() {
            bail!("[server] socket must not be empty");
        }
        Ok(())
    }
}

/// `[log]`: logging (tracing to stderr, which journald captures).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// Filter in `tracing_subscriber::EnvFilter` syntax (`info`,
    /// `camdnn_daemon=debug,info`, ...); the `CAMDNN_LOG` environment variable
    /// overrides it.
    #[serde(default = "default_level")]
    pub level: String,
}

fn default_level() -> String {
    "info".to_owned()
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: default_level(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::MetricsConfig;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        server: ServerConfig,
        #[serde(default)]
        metrics: MetricsConfig,
        #[serde(default)]
        log: LogConfig,
    }

    #[test]
    fn defaults_fill_everything_but_the_socket() {
        let d: Doc = toml::from_str("[server]\nsocket = \"/run/x.sock\"\n").unwrap();
        d.server.validate().unwrap();
        assert_eq!(d.server.socket_mode, 0o660);
        assert_eq!(d.server.window, 4);
        assert_eq!(d.metrics.listen.to_string(), "127.0.0.1:9464");
        assert_eq!(d.log.level, "info");
    }

    #[test]
    fn octal_modes_and_limits_parse_and_bad_values_are_named() {
        let d: Doc = toml::from_str(
            "[server]\nsocket = \"s\"\nsocket_mode = 0o600\nwindow = 0\n[metrics]\nlisten = \"0.0.0.0:1\"\n",
        )
        .unwrap();
        assert_eq!(d.server.socket_mode, 0o600);
        let e = d.server.validate().unwrap_err().to_string();
        assert!(e.contains("window"), "{e}");
        let e = toml::from_str::<Doc>("[server]\nsocket = \"s\"\nwindow_size = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("window_size"), "{e}");
        let mut c = ServerConfig::with_socket("s");
        c.socket_mode = 0o4755;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("socket_mode"));
    }

    #[test]
    fn fleet_labels_are_few_valid_and_not_the_daemons_own() {
        let parse = |labels: &str| -> MetricsConfig {
            toml::from_str(&format!("labels = {{ {labels} }}")).unwrap()
        };
        parse(r#"board = "rb5-07", site = "depot 3""#)
            .validate()
            .unwrap();
        for (labels, named) in [
            (r#""2board" = "x""#, "2board"),
            (r#"__board = "x""#, "__board"),
            (r#"processor = "x""#, "processor"),
            (r#"instance = "x""#, "instance"),
            (r#"board = """#, "board"),
        ] {
            let e = parse(labels).validate().unwrap_err().to_string();
            assert!(e.contains(named), "{labels}: {e}");
        }
        let many: Vec<String> = (0..9).map(|i| format!("l{i} = \"v\"")).collect();
        let e = parse(&many.join(", ")).validate().unwrap_err().to_string();
        assert!(e.contains("at most 8"), "{e}");
    }
}
