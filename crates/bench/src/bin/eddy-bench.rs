//! `eddy-bench`: the bench commands without the server, for developing this crate.
//! The same commands ship in the `eddy` binary as `eddy bench ...`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "eddy-bench", about = "Eddy benchmark generators and harnesses")]
struct Cli {
    #[command(subcommand)]
    cmd: eddy_bench::cli::BenchCommand,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = eddy_bench::cli::run(cli.cmd) {
        let mut msg = format!("error: {e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!("\n  caused by: {s}"));
            src = s.source();
        }
        eprintln!("{msg}");
        std::process::exit(1);
    }
}
