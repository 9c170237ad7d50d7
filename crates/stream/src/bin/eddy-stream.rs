//! `eddy-stream`: runs the stream CLI entry points before the `eddy` server binary exists.

use clap::Parser;

#[derive(Parser)]
#[command(name = "eddy-stream", about = "Eddy stream engine commands")]
struct Cli {
    #[command(subcommand)]
    cmd: eddy_stream::cli::StreamCommand,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = eddy_stream::cli::run(cli.cmd) {
        eprintln!("error: {}", eddy_stream::error::error_chain(&e));
        std::process::exit(1);
    }
}
