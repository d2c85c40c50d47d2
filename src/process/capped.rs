//! A step log of bounded size (issue 23 F10): a command's output reaches its log through
//! [`Capped`], which writes the first [`HEAD`] bytes as they come, keeps the last [`TAIL`] bytes
//! in memory once the head is full and writes them, after a line saying how much was left out,
//! when the output ends; a line longer than [`LINE`] is cut there (at its last space before, so
//! no part of a credential is kept) and says how many bytes it lost. Memory stays within
//! `TAIL + LINE` per command however much or however long the lines it prints.
//!
//! It deliberately ignores what the lines say (masking is [`super::secrets`]'); while the head
//! is full the log does not grow, so a build's progress is read from it no further (the stall
//! limit still sees the build's CPU time).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, Write};

/// Bytes of a command's output written as they come.
pub const HEAD: u64 = 64 << 20;
/// Bytes kept from the end of the output once the head is full.
pub const TAIL: usize = 16 << 20;
/// The longest line kept whole.
pub const LINE: usize = 1 << 20;

/// The limits of one log (the constants above; smaller ones in tests).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub head: u64,
    pub tail: usize,
    pub line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head: HEAD,
            tail: TAIL,
            line: LINE,
        }
    }
}

/// A log being written within its [`Limits`].
pub struct Capped {
    file: File,
    limits: Limits,
    written: u64,
    /// Once a line did not fit in the head, every later one goes to the tail.
    head_full: bool,
    tail: VecDeque<String>,
    tail_bytes: usize,
    dropped: u64,
}

impl Capped {
    pub fn new(file: File, limits: Limits) -> Capped {
        Capped {
            file,
            limits,
            written: 0,
            head_full: false,
            tail: VecDeque::new(),
            tail_bytes: 0,
            dropped: 0,
        }
    }

    /// Appends one line (with its newline).
    pub fn push(&mut self, line: String) {
        if !self.head_full && self.written + line.len() as u64 <= self.limits.head {
            self.written += line.len() as u64;
            let _ = self.file.write_all(line.as_bytes());
            return;
        }
        self.head_full = true;
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > self.limits.tail {
            let Some(first) = self.tail.pop_front() else { break };
            self.tail_bytes -= first.len();
            self.dropped += first.len() as u64;
        }
    }

    /// Writes what the tail holds; the log is complete.
    pub fn finish(mut self) {
        if self.dropped > 0 {
            let _ = writeln!(
                self.file,
                "[kiln: {} bytes of output left out here; a log keeps the first {} and the last {} bytes]",
                self.dropped, self.limits.head, self.limits.tail
            );
        }
        for l in self.tail.drain(..) {
            let _ = self.file.write_all(l.as_bytes());
        }
    }
}

/// Reads `input` line by line, each at most `max` bytes, handing `on_line` the kept bytes and
/// how many were cut from the line (its newline included when it was cut).
pub fn lines(mut input: impl BufRead, max: usize, mut on_line: impl FnMut(&[u8], u64)) {
    let mut line = Vec::new();
    let mut cut = 0u64;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) if !b.is_empty() => b,
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let (take, ends) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let keep = take.min(max.saturating_sub(line.len()));
        line.extend_from_slice(&buf[..keep]);
        cut += (take - keep) as u64;
        input.consume(take);
        if ends {
            on_line(&line, cut);
            line.clear();
            cut = 0;
        }
    }
    if !line.is_empty() || cut > 0 {
        on_line(&line, cut);
    }
}

/// The text a cut line keeps: up to its last whitespace (the word it was cut in could be part
/// of a credential), then how much was left out.
pub fn cut_line(kept: &str, cut: u64) -> (String, String) {
    let at = kept.rfind(char::is_whitespace).unwrap_or(0);
    let lost = cut + (kept.len() - at) as u64;
    (
        kept[..at].to_string(),
        format!(" [kiln: {lost} bytes of this line left out]\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_keeps_its_head_and_tail_and_a_long_line_is_cut_at_a_space() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("log");
        let limits = Limits {
            head: 20,
            tail: 12,
            line: 8,
        };
        let mut log = Capped::new(File::create(&path).unwrap(), limits);
        let input = "aa\nbb\ncc\nab cdefghijklmn\n".to_string() + &"x\n".repeat(100) + "end\n";
        lines(input.as_bytes(), limits.line, |kept, cut| {
            let text = String::from_utf8_lossy(kept).into_owned();
            let line = if cut > 0 {
                let (keep, note) = cut_line(&text, cut);
                keep + &note
            } else {
                text
            };
            log.push(line);
        });
        log.finish();
        let got = std::fs::read_to_string(&path).unwrap();
        let mut want = "aa\nbb\ncc\n".to_string();
        want.push_str("[kiln: 234 bytes of output left out here; a log keeps the first 20 and the last 12 bytes]\n");
        want.push_str("x\nx\nx\nx\nend\n");
        assert_eq!(got, want);
        let mut seen = Vec::new();
        lines("ab cdefghijklmn\nshort\n".as_bytes(), 8, |k, c| {
            seen.push((k.to_vec(), c))
        });
        assert_eq!(seen, vec![(b"ab cdefg".to_vec(), 8), (b"short\n".to_vec(), 0)]);
        assert_eq!(
            cut_line("ab cdefg", 8),
            (
                "ab".to_string(),
                " [kiln: 14 bytes of this line left out]\n".to_string()
            )
        );
    }
}
