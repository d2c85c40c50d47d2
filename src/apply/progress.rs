//! A wheel build's compile progress, read from its step log while it runs: ninja's status lines
//! (`[12/73] Building CUDA object ...`, printed as lines when its output is not a terminal; torch's
//! `BuildExtension` and CMake's Ninja generator both drive ninja), CMake's Makefile percentages
//! (`[ 45%] Building CXX object ...`), and otherwise compiler command lines counted as files
//! compiled (setuptools' plain `build_ext`, with no total). What it reads goes to
//! [`Reporter::progress`] whenever it moves. torch's `BuildExtension` runs `ninja -v` with its
//! output on fd 1 (torch 2.11 `torch/utils/cpp_extension.py:2741,2777`, `verbose=True` at
//! `:936`), so kiln's front end, which leaves the backend's output alone, puts those lines in the
//! log; `pip wheel` (a recipe's own wheel command) passes the backend's output on only with `-v`.
//!
//! It also counts the units kiln's memory gate held back (its `kiln gate: ... waits for` lines,
//! [`super::gate`]) and says so in the wheel phase.
//!
//! It deliberately ignores the rest of the log and never slows the build: the log is read twice
//! a second beside the command, from where it stood when the command started.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use super::Reporter;
use crate::resolve::Step;

/// How often the log is read.
const POLL: Duration = Duration::from_millis(500);

/// What one log line says about progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// `[n/N]` (or `[ p%]`: p of 100).
    Of(u64, u64),
    /// A compiler invoked on one source file.
    Compiled,
}

/// Reads one line of build output.
pub fn parse(line: &str) -> Option<Line> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[')
        && let Some((inside, _)) = rest.split_once(']')
    {
        let inside = inside.trim();
        if let Some((n, total)) = inside.split_once('/') {
            let (n, total) = (n.trim().parse().ok()?, total.trim().parse().ok()?);
            return (n <= total && total > 0).then_some(Line::Of(n, total));
        }
        if let Some(p) = inside.strip_suffix('%') {
            let p: u64 = p.trim().parse().ok()?;
            return (p <= 100).then_some(Line::Of(p, 100));
        }
        return None;
    }
    compiler_line(t).then_some(Line::Compiled)
}

/// `gcc ... -c src/a.c -o build/a.o`, `/usr/local/cuda/bin/nvcc ... -c x.cu -o x.o`, also behind
/// kiln's memory gate (`/path/kiln gate -- nvcc ...`).
fn compiler_line(t: &str) -> bool {
    let mut words = t.split_whitespace().peekable();
    let Some(mut program) = words.next() else { return false };
    if program.rsplit('/').next() == Some("kiln") && words.peek() == Some(&"gate") {
        words.next();
        words.next_if_eq(&"--");
        let Some(p) = words.next() else { return false };
        program = p;
    }
    let base = program.rsplit('/').next().unwrap_or(program);
    let compiler = ["gcc", "g++", "cc", "c++", "clang", "clang++", "nvcc"]
        .iter()
        .any(|c| base == *c || base.ends_with(&format!("-{c}")));
    let (mut c, mut o) = (false, false);
    for w in words {
        c |= w == "-c";
        o |= w == "-o";
    }
    compiler && c && o
}

/// The progress a log shows so far, fed line by line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct State {
    /// The latest `[n/N]`.
    of: Option<(u64, u64)>,
    compiled: u64,
    /// Units kiln's memory gate held back (its `kiln gate: UNIT waits for ...` lines).
    held: u64,
}

impl State {
    pub fn feed(&mut self, line: &str) {
        if line.starts_with("kiln gate: ") && line.contains(" waits for ") {
            self.held += 1;
            return;
        }
        match parse(line) {
            Some(Line::Of(n, total)) => self.of = Some((n, total)),
            Some(Line::Compiled) => self.compiled += 1,
            None => {}
        }
    }

    /// (done, total): `[n/N]` once seen (it says more than a count of command lines, which ninja
    /// prints beside its status under `-v`), else the files compiled.
    pub fn now(&self) -> Option<(u64, Option<u64>)> {
        match (self.of, self.compiled) {
            (Some((n, total)), _) => Some((n, Some(total))),
            (None, 0) => None,
            (None, c) => Some((c, None)),
        }
    }
}

/// Watches `log` from where it ends now until `wait_done` (called with how long it may wait)
/// says the command finished, telling `reporter` whenever the progress moves, and whenever
/// kiln's memory gate held another unit back (the wheel phase's `detail`, then how many so
/// far). Run it beside the command that writes the log: `wait_done` returns at once when the
/// command ends.
pub fn watch(
    log: &Path,
    step: &Step,
    detail: &str,
    reporter: &dyn Reporter,
    mut wait_done: impl FnMut(Duration) -> bool,
) {
    let mut offset = std::fs::metadata(log).map_or(0, |m| m.len());
    let mut partial = Vec::new();
    let mut state = State::default();
    let mut said = None;
    let mut held = 0;
    loop {
        let finished = wait_done(POLL);
        if let Ok(mut f) = std::fs::File::open(log)
            && f.seek(SeekFrom::Start(offset)).is_ok()
        {
            let mut new = Vec::new();
            if let Ok(n) = f.read_to_end(&mut new) {
                offset += n as u64;
                partial.extend_from_slice(&new);
            }
        }
        if let Some(end) = partial.iter().rposition(|&b| b == b'\n' || b == b'\r') {
            for line in String::from_utf8_lossy(&partial[..end]).split(['\n', '\r']) {
                state.feed(line);
            }
            partial.drain(..=end);
        }
        if state.held > held {
            held = state.held;
            let units = if held == 1 { "unit" } else { "units" };
            let text = format!("{detail}; the memory gate held back {held} {units} until memory was free");
            reporter.phase(step, super::Phase::Wheel, &text);
        }
        let now = state.now();
        if let Some((done, total)) = now.filter(|_| now != said) {
            reporter.progress(step, done, total);
            said = now;
        }
        if finished {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_percentages_and_compiler_lines() {
        assert_eq!(
            parse("[12/73] Building CUDA object CMakeFiles/_C.dir/csrc/x.cu.o"),
            Some(Line::Of(12, 73))
        );
        assert_eq!(
            parse("  [3/8] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c a.cu -o a.o"),
            Some(Line::Of(3, 8))
        );
        assert_eq!(parse("[ 45%] Building CXX object foo.o"), Some(Line::Of(45, 100)));
        assert_eq!(
            parse("gcc -pthread -fPIC -I/usr/include/python3.12 -c pkg/_speedups.c -o build/temp/_speedups.o"),
            Some(Line::Compiled)
        );
        assert_eq!(parse("x86_64-linux-gnu-g++ -O2 -c a.cpp -o a.o"), Some(Line::Compiled));
        // Behind kiln's memory gate, the compiler after it.
        assert_eq!(
            parse("/home/u/.cargo/bin/kiln gate -- /cuda/bin/nvcc -c a.cu -o a.o"),
            Some(Line::Compiled)
        );
        for other in [
            "kiln gate -- true -c a -o b",
            "/bin/kiln gate --",
            "[build-system]",
            "[9/3] not a status",
            "[0/0]",
            "gcc -shared a.o -o a.so",
            "running build_ext",
            "",
            "[ 120%] nope",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[test]
    fn a_total_wins_over_counted_command_lines() {
        let mut s = State::default();
        assert_eq!(s.now(), None);
        s.feed("gcc -c a.c -o a.o");
        s.feed("gcc -c b.c -o b.o");
        assert_eq!(s.now(), Some((2, None)));
        s.feed("[1/4] c++ -c x.cpp -o x.o");
        assert_eq!(s.now(), Some((1, Some(4))));
        s.feed("[4/4] c++ -shared x.o -o x.so");
        assert_eq!(s.now(), Some((4, Some(4))));
        // The memory gate's waits are counted apart, never as progress.
        s.feed("kiln gate: csrc/k.cu waits for 3.6 GiB of memory (3.3 GiB held by 1 unit of the build's 6.0 GiB)");
        assert_eq!((s.now(), s.held), (Some((4, Some(4))), 1));
    }
}
