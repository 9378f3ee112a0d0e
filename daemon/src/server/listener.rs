//! The Unix socket listener: adopted from systemd socket activation, or
//! created at the configured path with the configured mode and group (and
//! removed again when dropped).

use std::ffi::CString;
use std::os::fd::FromRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tokio::net::UnixListener;

use super::config::ServerConfig;

/// A bound listener; removes the socket file it created when dropped.
#[derive(Debug)]
pub struct Listener {
    listener: Option<UnixListener>,
    created: Option<PathBuf>,
}

impl Listener {
    /// The systemd-passed listener if there is one (`LISTEN_FDS`), else a
    /// new socket at `cfg.socket`. Needs a tokio runtime.
    pub fn open(cfg: &ServerConfig) -> anyhow::Result<Self> {
        let fds: Vec<i32> = sd_notify::listen_fds()
            .context("reading LISTEN_FDS from systemd")?
            .collect();
        match fds.as_slice() {
            [] => Self::bind(cfg),
            [fd] => Self::adopt(*fd),
            more => bail!(
                "systemd passed {} sockets; camdnnd.socket must declare exactly one ListenStream",
                more.len()
            ),
        }
    }

    /// Adopts an inherited listening Unix socket.
    fn adopt(fd: i32) -> anyhow::Result<Self> {
        // SAFETY: `fd` comes from LISTEN_FDS for this very process (sd_notify
        // checked LISTEN_PID) and nothing else in the process owns it.
        let std = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
        let addr = std
            .local_addr()
            .context("the socket passed by systemd is not a Unix socket")?;
        std.set_nonblocking(true)
            .context("setting the inherited socket non-blocking")?;
        let listener =
            UnixListener::from_std(std).context("registering the inherited socket with tokio")?;
        tracing::info!(?addr, "adopted the listener passed by systemd");
        Ok(Self {
            listener: Some(listener),
            created: None,
        })
    }

    /// Creates the socket at `cfg.socket`, replacing a stale socket file
    /// (one nobody listens on: connecting is refused) and refusing otherwise.
    pub fn bind(cfg: &ServerConfig) -> anyhow::Result<Self> {
        let path = &cfg.socket;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                bail!(
                    "{} exists and is not a socket; not replacing it",
                    path.display()
                );
            }
            stale(
                path,
                std::os::unix::net::UnixStream::connect(path).map(drop),
            )?;
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale socket {}", path.display()))?;
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating socket folder {}", dir.display()))?;
        }
        let listener =
            UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        let this = Self {
            listener: Some(listener),
            created: Some(path.clone()),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(cfg.socket_mode))
            .with_context(|| {
                format!("setting mode {:#o} on {}", cfg.socket_mode, path.display())
            })?;
        if let Some(group) = &cfg.socket_group {
            set_group(path, group)?;
        }
        tracing::info!(path = %path.display(), mode = format!("{:#o}", cfg.socket_mode), "listening");
        Ok(this)
    }

    /// Takes the tokio listener out (the file is still removed on drop).
    pub fn take(&mut self) -> Option<UnixListener> {
        self.listener.take()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(p) = &self.created {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Whether the socket file at `path` is stale, from what connecting to it
/// gave: only a refused connection means nobody listens. A connection that
/// succeeds is a live server; any other failure (no permission, say, when
/// another user's server owns it) leaves us unable to tell, and a live
/// socket must never be taken over.
fn stale(path: &Path, connected: std::io::Result<()>) -> anyhow::Result<()> {
    match connected {
        Ok(()) => bail!("{} is in use by a running server", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
        Err(e) => bail!(
            "cannot tell whether {} is in use (connecting to it failed: {e}); not replacing it",
            path.display()
        ),
    }
}

/// Gives `path` to group `group` (by name).
fn set_group(path: &Path, group: &str) -> anyhow::Result<()> {
    let name = CString::new(group).with_context(|| format!("group name {group:?}"))?;
    // SAFETY: getgrnam reads a NUL-terminated string and returns NULL or a
    // pointer to static storage that we read before any other call.
    let gid = unsafe {
        let g = libc::getgrnam(name.as_ptr());
        if g.is_null() {
            bail!("[server] socket_group {group:?}: no such group");
        }
        (*g).gr_gid
    };
    std::os::unix::fs::chown(path, None, Some(gid))
        .with_context(|| format!("giving {} to group {group}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn only_a_refused_connection_makes_a_socket_stale() {
        let p = Path::new("/run/x.sock");
        stale(p, Err(Error::from(ErrorKind::ConnectionRefused))).expect("stale");
        let live = stale(p, Ok(())).unwrap_err().to_string();
        assert!(live.contains("in use by a running server"), "{live}");
        for kind in [
            ErrorKind::PermissionDenied,
            ErrorKind::TimedOut,
            ErrorKind::Other,
        ] {
            let e = stale(p, Err(Error::from(kind))).unwrap_err().to_string();
            assert!(
                e.contains("cannot tell whether /run/x.sock is in use"),
                "{e}"
            );
        }
    }
}
