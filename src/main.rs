use clap::Parser;

fn main() -> std::process::ExitCode {
    kiln::commands::run(kiln::cli::Cli::parse())
}
