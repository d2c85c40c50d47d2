//! `kiln gate -- COMMAND...`: the memory gate a build puts in front of each CUDA compile
//! ([`crate::apply::gate`]). It is called by the build's compilers, never by a person: `main`
//! hands it its arguments before the command line is parsed, so it starts fast and does none of
//! a kiln command's work (no recovery of an earlier run, no cache lock). It prints only to the
//! build's log (a unit that waits for memory, a gate that cannot work) and ends as the compiler
//! ended: its exit code, or the signal that killed it.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::apply::gate::{self, CompilerExit, Notice};

pub fn run(args: &[OsString]) -> ExitCode {
    let argv = match args.first() {
        Some(a) if a == "--" => &args[1..],
        _ => args,
    };
    let dir = std::env::var_os(gate::VAR).map(std::path::PathBuf::from);
    let notice = &mut |n: Notice| match n {
        Notice::Waits(w) => {
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
        }
        Notice::Ungated(why) => eprintln!(
            "kiln gate: compiling without the memory gate ({why}): this unit is neither held to the \
             build's memory nor measured"
        ),
    };
    match gate::run(argv, dir.as_deref(), notice) {
        Ok(CompilerExit::Code(c)) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        Ok(CompilerExit::Signal(s)) => {
            // End as the compiler did, so that what runs the build sees the same signal (an OOM
            // kill is a SIGKILL, and kiln retries with fewer jobs on it); without a core file of
            // kiln's own for a compiler that crashed.
            // SAFETY: setrlimit, signal and raise have no preconditions.
            unsafe {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
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
