//! The one way kiln runs other programs (pip, uv, git, nvcc, the build commands): through `duct`,
//! with an explicit argument list (never a shell), an explicit working directory and environment,
//! output either captured (short queries) or written to a log file (builds).
//!
//! It deliberately ignores what the programs mean; callers turn failures into their own errors.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A command to run.
#[derive(Debug, Clone)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
}

impl Cmd {
    pub fn new(program: impl Into<String>) -> Cmd {
        Cmd {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
        }
    }

    pub fn arg(mut self, a: impl Into<String>) -> Cmd {
        self.args.push(a.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, a: I) -> Cmd {
        self.args.extend(a.into_iter().map(Into::into));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Cmd {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Cmd {
        self.env.push((k.into(), v.into()));
        self
    }

    fn expr(&self) -> duct::Expression {
        let mut e = duct::cmd(&self.program, &self.args);
        if let Some(d) = &self.cwd {
            e = e.dir(d);
        }
        for (k, v) in &self.env {
            e = e.env(k, v);
        }
        e.unchecked()
    }

    /// Runs with stdout and stderr appended to `log`; on failure returns the log's last lines.
    pub fn run_logged(&self, log: &Path) -> Result<(), CommandFailed> {
        let fail = |status: String| CommandFailed {
            command: self.to_string(),
            status,
            log: log.to_path_buf(),
            tail: tail_lines(log, 20),
        };
        let mut file = open_log(log).map_err(|e| fail(format!("could not open the log: {e}")))?;
        let _ = writeln!(file, "$ {self}");
        if let Some(d) = &self.cwd {
            let _ = writeln!(file, "# in {}", d.display());
        }
        for (k, v) in &self.env {
            let _ = writeln!(file, "# {k}={v}");
        }
        let err_file = file
            .try_clone()
            .map_err(|e| fail(format!("could not open the log: {e}")))?;
        let out = self
            .expr()
            .stdin_null()
            .stdout_file(file)
            .stderr_file(err_file)
            .run()
            .map_err(|e| fail(format!("could not start `{}`: {e}", self.program)))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(fail(describe_status(&out.status)))
        }
    }

    /// Runs with output captured, feeding `stdin`, killing it after `timeout`.
    pub fn capture(&self, stdin: &[u8], timeout: Duration) -> Result<Captured, std::io::Error> {
        let handle = self
            .expr()
            .stdin_bytes(stdin.to_vec())
            .stdout_capture()
            .stderr_capture()
            .start()?;
        let start = Instant::now();
        loop {
            if let Some(out) = handle.try_wait()? {
                return Ok(Captured {
                    success: out.status.success(),
                    status: describe_status(&out.status),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                    timed_out: false,
                });
            }
            if start.elapsed() > timeout {
                let _ = handle.kill();
                return Ok(Captured {
                    success: false,
                    status: format!("killed after {} s", timeout.as_secs()),
                    stdout: String::new(),
                    stderr: String::new(),
                    timed_out: true,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", quote(&self.program))?;
        for a in &self.args {
            write!(f, " {}", quote(a))?;
        }
        Ok(())
    }
}

fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Output of a captured command.
#[derive(Debug, Clone)]
pub struct Captured {
    pub success: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// A command that ran and failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("`{command}` failed ({status}); log: {}", log.display())]
pub struct CommandFailed {
    pub command: String,
    pub status: String,
    pub log: PathBuf,
    pub tail: Vec<String>,
}

fn open_log(log: &Path) -> std::io::Result<File> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(log)
}

/// `exit status 3`, `killed by signal 11 (SIGSEGV)`.
pub fn describe_status(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(9)) => "killed by signal 9 (SIGKILL; out of memory?)".into(),
        (None, Some(11)) => "killed by signal 11 (SIGSEGV)".into(),
        (None, Some(6)) => "killed by signal 6 (SIGABRT)".into(),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
    }
}

/// The last `n` lines of a file, read from its end (logs can be large).
pub fn tail_lines(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut f) = File::open(path) else { return Vec::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_failure_reports_status_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let e = Cmd::new("sh")
            .args(["-c", "echo one; echo two >&2; exit 3"])
            .run_logged(&log)
            .unwrap_err();
        assert_eq!(e.status, "exit status 3");
        assert_eq!(e.tail[e.tail.len() - 2..], ["one", "two"]);
        assert!(e.tail[0].starts_with("$ sh -c 'echo one;"));
    }

    #[test]
    fn capture_times_out() {
        let c = Cmd::new("sleep")
            .arg("5")
            .capture(b"", Duration::from_millis(100))
            .unwrap();
        assert!(c.timed_out && !c.success);
    }
}
