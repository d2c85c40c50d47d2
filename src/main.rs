use clap::Parser;

fn main() -> std::process::ExitCode {
    // `kiln arch big.so | head` closes the pipe early: end quietly, as other Unix tools do, rather
    // than panic on the next print.
    // SAFETY: called once, before any thread starts; SIG_DFL is always a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    kiln::commands::run(kiln::cli::Cli::parse())
}
