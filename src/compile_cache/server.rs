//! One sccache server for one build step. Each step gets its own server on its own Unix socket
//! (`SCCACHE_SERVER_UDS`, under `$TMPDIR`, short enough for the 108-byte socket path limit), so
//! the statistics read when the step ends are that step's alone even while other steps build
//! side by side, and two kiln caches on one machine never share a server.
//!
//! The server is started with the backend's variables, its error log beside the step logs
//! (`SCCACHE_ERROR_LOG`), no user config file (`SCCACHE_CONF` points at a file that does not
//! exist, so `~/.config/sccache/config` cannot switch the backend), and an idle limit of an
//! hour (`SCCACHE_IDLE_TIMEOUT`) so that a server kiln could not stop (kiln killed) goes away
//! by itself.
//!
//! [`Server::fall_back`] is what kiln does when the backend stops answering during a build:
//! sccache 0.16 waits 30 s for a Redis connection on every read and every write (measured: a
//! one-file nvcc compile took 4 min 31 s with Redis gone), so kiln stops that server and starts
//! one on a local directory on the same socket; a compile that was waiting on the old server
//! compiles locally (`SCCACHE_IGNORE_SERVER_IO_ERROR=1` in the build's environment: sccache
//! prints "The server looks like it shut down unexpectedly, compiling locally instead").
//!
//! It deliberately ignores when to fall back (the build watches the backend) and what to say.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::Backend;
use super::stats::Stats;
use crate::process::Cmd;

/// How long one sccache client command (start, stats, stop) may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(60);

/// A running sccache server.
#[derive(Debug)]
pub struct Server {
    sccache: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    shown: String,
    stopped: bool,
}

/// A socket path no other server of this process uses.
fn fresh_socket() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("kiln-sccache-{}-{n}.sock", std::process::id()))
}

impl Server {
    /// Starts a server on a fresh socket with `backend`; its output goes to `log` (and
    /// sccache's own error log beside it, `<log>.server`).
    pub fn start(sccache: &Path, backend: &Backend, log: &Path) -> Result<Server, String> {
        let mut s = Server {
            sccache: sccache.to_path_buf(),
            socket: fresh_socket(),
            log: log.to_path_buf(),
            shown: backend.shown(),
            stopped: true,
        };
        s.launch(backend)?;
        Ok(s)
    }

    fn launch(&mut self, backend: &Backend) -> Result<(), String> {
        let _ = std::fs::remove_file(&self.socket);
        let server_log = self.log.with_extension("server.log");
        let mut c = self
            .client("--start-server")
            .env("SCCACHE_ERROR_LOG", server_log.display().to_string())
            .env("SCCACHE_LOG", "info")
            .env("SCCACHE_IDLE_TIMEOUT", "3600")
            .timeout(CLIENT_LIMIT);
        for (k, v) in backend.env() {
            c = c.env(k, v);
        }
        c.run_logged(&self.log).map_err(|e| {
            let cause = e.causes.last().or(e.tail.last()).cloned().unwrap_or_default();
            format!("sccache --start-server: {} {cause}", e.status)
                .trim_end()
                .to_string()
        })?;
        self.stopped = false;
        self.shown = backend.shown();
        Ok(())
    }

    /// An sccache client command that talks to this server.
    fn client(&self, arg: &str) -> Cmd {
        Cmd::new(self.sccache.display().to_string())
            .arg(arg)
            .env("SCCACHE_SERVER_UDS", self.socket.display().to_string())
            .env(
                "SCCACHE_CONF",
                self.socket.with_extension("none.toml").display().to_string(),
            )
    }

    /// The socket the build's compilers talk to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the server saw so far.
    pub fn stats(&self) -> Result<Stats, String> {
        if self.stopped {
            return Err("the sccache server is not running".into());
        }
        let json = self
            .client("--show-stats")
            .args(["--stats-format", "json"])
            .timeout(CLIENT_LIMIT)
            .output_logged(&self.log)
            .map_err(|e| format!("sccache --show-stats: {}", e.status))?;
        Stats::parse(&json, &self.shown)
    }

    /// Stops the server (once).
    pub fn stop(&mut self) {
        if !self.stopped {
            let _ = self.client("--stop-server").timeout(CLIENT_LIMIT).run_logged(&self.log);
            self.stopped = true;
        }
        let _ = std::fs::remove_file(&self.socket);
    }

    /// The backend stopped answering: reads what this server saw, stops it, and starts one on
    /// the local directory `local` on the same socket. Returns the first server's statistics.
    pub fn fall_back(&mut self, local: &Path) -> Result<Stats, String> {
        let before = self.stats();
        self.stop();
        self.launch(&Backend::Dir(local.to_path_buf()))?;
        before
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
