use clap::Parser;

fn main() -> std::process::ExitCode {
    // `kiln arch big.so | head` closes the pipe early: end quietly, as other Unix tools do, rather
    // than panic on the next print.
    // SAFETY: called once, before any thread starts; SIG_DFL is always a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // The memory gate in front of a build's compiles: no command line to parse, no recovery.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "gate") {
        return kiln::commands::gate::run(&args[2..]);
    }
    kiln::commands::run(kiln::cli::Cli::parse())
}
