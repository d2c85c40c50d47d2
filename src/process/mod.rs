//! The one way kiln runs other programs (pip, uv, git, tar, cargo, nvcc, the build commands):
//! through `duct`, with an explicit argument list (never a shell), an explicit working directory
//! and environment, and output either written to a log file (builds), captured (short queries)
//! or handed over line by line as it comes (the probe). Every run ends in a typed [`Exit`]; a
//! time limit kills the program and says so. Waiting never polls: duct waits on `SIGCHLD`, and
//! streamed lines arrive through a channel from a reader thread.
//!
//! Every program runs in a process group of its own that dies with kiln ([`group`]); a time
//! limit, a stall limit (no output and no CPU time for a while, for long builds) and an
//! interrupt kill the whole group ([`wait`]).
//!
//! It deliberately ignores what the programs mean; callers turn failures into their own errors.

mod capped;
pub mod group;
mod log;
pub mod secrets;
pub mod tree;
mod wait;

pub use group::{INTERRUPTED_EXIT, interrupted};
pub use log::{cause_lines, tail_lines};
pub use wait::Usage;
use wait::wait;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The signal the kernel's OOM killer sends.
pub const SIGKILL: i32 = 9;

/// How a program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code (0 = success).
    Code(i32),
    /// A signal killed it ([`SIGKILL`] is what the OOM killer sends).
    Signal(i32),
    /// kiln killed it after this long: its time limit ran out.
    TimedOut(Duration),
    /// kiln killed it after it wrote nothing and used no CPU time for this long (a stall limit).
    Stalled(Duration),
    /// kiln killed it when the overall time limit of the work it is part of (a whole build),
    /// this long, ran out.
    OverLimit(Duration),
    /// There is no exit status: the program could not be started (or its log opened), or it
    /// was lost. The reason, as a sentence.
    NoStatus(String),
}

impl Exit {
    pub fn of(s: std::process::ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (s.code(), s.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(sig)) => Exit::Signal(sig),
            _ => Exit::NoStatus("unknown status".into()),
        }
    }

    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }
}

/// `exit status 3`, `killed by signal 11 (SIGSEGV)`, `killed after 60 s`.
impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(SIGKILL) => f.write_str("killed by signal 9 (SIGKILL; out of memory?)"),
            Exit::Signal(11) => f.write_str("killed by signal 11 (SIGSEGV)"),
            Exit::Signal(6) => f.write_str("killed by signal 6 (SIGABRT)"),
            Exit::Signal(sig) => write!(f, "killed by signal {sig}"),
            Exit::TimedOut(d) => write!(f, "killed after {} s", d.as_secs()),
            Exit::Stalled(d) => write!(
                f,
                "killed by the stall limit: no output and no CPU time for {} s",
                d.as_secs()
            ),
            Exit::OverLimit(d) => write!(f, "killed by the time limit after {} s", d.as_secs()),
            Exit::NoStatus(why) => f.write_str(why),
        }
    }
}

/// Written as its sentence, the way it has always appeared in `--json` output.
impl serde::Serialize for Exit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A command to run.
#[derive(Debug, Clone)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(String, String)>,
    /// Killed once it has run this long (logged runs; captures take theirs as an argument).
    pub limit: Option<Duration>,
    /// Killed once it has written nothing to its log and used no CPU time for this long (logged
    /// runs).
    pub stall: Option<Duration>,
    /// It puts something back (an uninstall after a failed install): it may start after an
    /// interrupt, when nothing else may.
    pub restoring: bool,
    /// Where a logged run keeps the peak memory of its process group (sampled from `/proc`).
    pub usage: Option<std::sync::Arc<Usage>>,
}

impl Cmd {
    pub fn new(program: impl Into<String>) -> Cmd {
        Cmd {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            limit: None,
            stall: None,
            restoring: false,
            usage: None,
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

    /// Kills the command once it has run `limit` (for [`Cmd::run_logged`] and
    /// [`Cmd::output_logged`]).
    pub fn timeout(mut self, limit: Duration) -> Cmd {
        self.limit = Some(limit);
        self
    }

    /// Kills the command once it has written nothing and used no CPU time for `stall` (for
    /// [`Cmd::run_logged`] and [`Cmd::output_logged`]).
    pub fn stall(mut self, stall: Duration) -> Cmd {
        self.stall = Some(stall);
        self
    }

    /// Samples the memory of the command's process group into `usage` while it runs (for
    /// [`Cmd::run_logged`] and [`Cmd::output_logged`]).
    pub fn measure(mut self, usage: std::sync::Arc<Usage>) -> Cmd {
        self.usage = Some(usage);
        self
    }

    /// Marks a command that puts something back: it may start after an interrupt.
    pub fn restoring(mut self) -> Cmd {
        self.restoring = true;
        self
    }

    /// The command as a std one: for library APIs that hand out a `std::process::Command`
    /// (`cargo_metadata`), so that it still runs through here.
    pub fn from_std(c: &std::process::Command) -> Cmd {
        let s = |o: &std::ffi::OsStr| o.to_string_lossy().into_owned();
        let mut cmd = Cmd::new(s(c.get_program())).args(c.get_args().map(s));
        if let Some(d) = c.get_current_dir() {
            cmd = cmd.cwd(d);
        }
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                cmd = cmd.env(s(k), s(v));
            }
        }
        cmd
    }

    fn expr(&self) -> duct::Expression {
        let mut e = duct::cmd(&self.program, &self.args);
        if let Some(d) = &self.cwd {
            e = e.dir(d);
        }
        for (k, v) in &self.env {
            e = e.env(k, v);
        }
        // Which kiln and step it belongs to, inherited by all it starts (see `group`).
        e = e.env(group::SCOPE_VAR, group::tag());
        e.unchecked().before_spawn(|c| {
            group::configure(c);
            Ok(())
        })
    }

    /// Refuses to start anything but a restoring command after an interrupt.
    fn may_start(&self) -> std::io::Result<()> {
        if group::may_start(self.restoring) {
            Ok(())
        } else {
            Err(std::io::Error::other("kiln was interrupted"))
        }
    }

    /// Runs with stdout and stderr appended to `log`; on failure returns the log's last lines.
    pub fn run_logged(&self, log: &Path) -> Result<(), CommandFailed> {
        self.logged(log, false).map(drop)
    }

    /// Runs with stderr appended to `log` and stdout returned (a tool that answers in JSON);
    /// the command line goes to the log as for [`Cmd::run_logged`].
    pub fn output_logged(&self, log: &Path) -> Result<String, CommandFailed> {
        self.logged(log, true)
    }

    fn logged(&self, log: &Path, keep_stdout: bool) -> Result<String, CommandFailed> {
        // Only this command's output is searched for causes: the log may hold earlier runs.
        let start = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let secrets = secrets::Secrets::of(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let fail = |status: Exit| CommandFailed {
            command: secrets.mask(&self.to_string()).into_owned(),
            status,
            log: log.to_path_buf(),
            tail: tail_lines(log, 20),
            causes: cause_lines(log, start, 8),
        };
        let not_run = |what: String| fail(Exit::NoStatus(what));
        let mut file = open_log(log).map_err(|e| not_run(format!("could not open the log: {e}")))?;
        let _ = writeln!(file, "$ {}", secrets.mask(&self.to_string()));
        if let Some(d) = &self.cwd {
            let _ = writeln!(file, "# in {}", d.display());
        }
        for (k, v) in &self.env {
            let _ = writeln!(file, "{}", secrets.env_line(k, v));
        }
        // The output reaches the log through kiln, masked line by line.
        let (pipe, output_ended) = secrets
            .clone()
            .into_log(file)
            .map_err(|e| not_run(format!("could not open the log: {e}")))?;
        let err_pipe = pipe
            .try_clone()
            .map_err(|e| not_run(format!("could not open the log: {e}")))?;
        let base = self.expr().stdin_null().stderr_file(err_pipe);
        let e = if keep_stdout {
            drop(pipe);
            base.stdout_capture()
        } else {
            base.stdout_file(pipe)
        };
        drop(base);
        let handle = self
            .may_start()
            .and_then(|()| e.start())
            .map_err(|e| not_run(format!("could not start `{}`: {e}", self.program)))?;
        let stall = self.stall.map(|d| (d, log));
        let (exit, out) = wait(&handle, self.limit, stall, self.restoring, self.usage.as_deref());
        let stdout = out.map(|o| secrets.mask_values(&String::from_utf8_lossy(&o.stdout)).into_owned());
        // Its output is in the log once the pipe is drained (a daemon it left holding the
        // pipe is not waited for).
        drop((handle, e));
        let _ = output_ended.recv_timeout(Duration::from_secs(2));
        if exit.success() {
            Ok(stdout.unwrap_or_default())
        } else {
            Err(fail(exit))
        }
    }

    /// Runs with output captured, feeding `stdin`, killing it after `timeout`.
    pub fn capture(&self, stdin: &[u8], timeout: Duration) -> Result<Captured, std::io::Error> {
        self.may_start()?;
        let handle = self
            .expr()
            .stdin_bytes(stdin.to_vec())
            .stdout_capture()
            .stderr_capture()
            .start()?;
        let (status, out) = wait(&handle, Some(timeout), None, self.restoring, None);
        let secrets = secrets::Secrets::of(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let text = |b: &[u8]| secrets.mask_values(&String::from_utf8_lossy(b)).into_owned();
        let timed_out = matches!(status, Exit::TimedOut(_));
        Ok(Captured {
            success: status.success(),
            stdout: out.filter(|_| !timed_out).map(|o| text(&o.stdout)).unwrap_or_default(),
            stderr: out.filter(|_| !timed_out).map(|o| text(&o.stderr)).unwrap_or_default(),
            status,
        })
    }

    /// Runs with `stdin` fed to it and stderr kept, handing each line of stdout to `on_line` as
    /// it arrives. The command is killed when no line comes within the limit (`first` for the
    /// first line, then what `on_line` last answered; the exit is then [`Exit::TimedOut`]), or
    /// when `on_line` answers [`Next::Stop`].
    pub fn stream(
        &self,
        stdin: &[u8],
        first: Duration,
        mut on_line: impl FnMut(&str) -> Next,
    ) -> Result<Streamed, std::io::Error> {
        self.may_start()?;
        let reader = self.expr().stdin_bytes(stdin.to_vec()).stderr_capture().reader()?;
        let pids = reader.pids();
        group::started(&pids, self.restoring);
        let _ended = wait::Ended(pids.clone());
        let (tx, rx) = mpsc::channel::<String>();
        let killed = std::thread::scope(|scope| {
            let r = &reader;
            scope.spawn(move || {
                // Read to the end even when nobody listens any more: only then has it exited.
                for line in BufReader::new(r).lines() {
                    let Ok(l) = line else { break };
                    let _ = tx.send(l);
                }
            });
            let mut limit = first;
            let killed = loop {
                match rx.recv_timeout(limit) {
                    Ok(line) => match on_line(&line) {
                        Next::Wait(d) => limit = d,
                        Next::Stop => break Some(None),
                    },
                    Err(mpsc::RecvTimeoutError::Timeout) => break Some(Some(Exit::TimedOut(limit))),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                }
            };
            if killed.is_some() {
                pids.iter().for_each(|&p| group::kill_group(p));
                let _ = reader.kill();
            }
            killed
        });
        let (status, stderr) = match reader.try_wait() {
            Ok(Some(out)) => (Exit::of(out.status), String::from_utf8_lossy(&out.stderr).into_owned()),
            Ok(None) => (Exit::NoStatus("lost the process".into()), String::new()),
            Err(e) => (Exit::NoStatus(format!("lost the process: {e}")), String::new()),
        };
        Ok(Streamed {
            exit: killed.flatten().unwrap_or(status),
            stderr,
        })
    }
}

/// What a streaming reader wants after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait at most this long for the next line.
    Wait(Duration),
    /// Enough: kill the command.
    Stop,
}

/// How a streamed command ended: its exit (a kill after [`Next::Stop`] shows as the signal)
/// and what it wrote to stderr.
#[derive(Debug, Clone)]
pub struct Streamed {
    pub exit: Exit,
    pub stderr: String,
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

/// `s` as a POSIX shell reads it back as one word (single-quoted where it needs to be).
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Output of a captured command (empty when it was killed for its time limit).
#[derive(Debug, Clone)]
pub struct Captured {
    /// `status.success()`.
    pub success: bool,
    pub status: Exit,
    pub stdout: String,
    pub stderr: String,
}

/// A command that ran and failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("`{command}` failed ({status}); log: {}", log.display())]
pub struct CommandFailed {
    pub command: String,
    pub status: Exit,
    pub log: PathBuf,
    pub tail: Vec<String>,
    /// Lines anywhere in this command's output that say what went wrong (`#error`, `fatal`,
    /// `error:`, `CMake Error`, `Could not resolve host`, `Killed`, ...), as `line N: text`;
    /// the real cause is often far above the last lines of a traceback.
    pub causes: Vec<String>,
}

fn open_log(log: &Path) -> std::io::Result<File> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(log)
}

#[cfg(test)]
mod tests;
