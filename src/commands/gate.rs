//! `kiln gate -- COMMAND...`: the memory gate a build puts in front of each CUDA compile
//! ([`crate::apply::gate`]). It is called by the build's compilers, never by a person: `main`
//! hands it its arguments before the command line is parsed, so it starts fast and does none of
//! a kiln command's work (no recovery of an earlier run, no cache lock). It prints only when a
//! unit waits for memory (to the build's log) and ends as the compiler ended.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::apply::gate::{self, Ended};

pub fn run(args: &[OsString]) -> ExitCode {
    let argv = match args.first() {
        Some(a) if a == "--" => &args[1..],
        _ => args,
    };
    let dir = std::env::var_os(gate::VAR).map(std::path::PathBuf::from);
    let told = &mut |w: &gate::slots::Waiting| {
        let h = crate::apply::memory::human;
        eprintln!(
            "kiln gate: {} waits for {} of memory ({} held by {} unit{} of the build's {})",
            w.unit,
            h(w.bytes),
            h(w.in_use),
            w.running,
            if w.running == 1 { "" } else { "s" },
            h(w.limit)
        );
    };
    match gate::run(argv, dir.as_deref(), told) {
        Ok(Ended::Code(c)) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        Ok(Ended::Signal(s)) => {
            // End as the compiler did, so that what runs the build sees the same signal (an OOM
            // kill is a SIGKILL, and kiln retries with fewer jobs on it).
            // SAFETY: resetting a signal to its default and raising it has no preconditions.
            unsafe {
                libc::signal(s, libc::SIG_DFL);
                libc::raise(s);
            }
            ExitCode::from(u8::try_from(128 + s).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(127)
        }
    }
}
