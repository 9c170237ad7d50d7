//! `eddy-gpu-check --data DIR [--label SF10] [--runs 3] [--memory] [--explain Q1.1,Q4.1] [--only Q2.1,...] [--h2d-gbps X] [--d2d-gbps Y] [--json FILE]`
//!
//! Runs [`eddy_gpu::check::run`]: the 13 SSB queries with the GPU off and
//! on, compared and timed. Exit status 1 when any answer differs, 2 on a
//! setup error. Used by `scripts/gpu-check.sh`.

use std::path::PathBuf;
use std::process::ExitCode;

use eddy_gpu::check::{run, CheckConfig};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut cfg = CheckConfig {
        data_dir: PathBuf::from("."),
        label: "SSB".into(),
        runs: 3,
        h2d_gbps: None,
        d2d_gbps: None,
        in_memory: false,
        explain: Vec::new(),
        only: Vec::new(),
    };
    let mut json = None;
    // Warnings (a GPU chunk that fell back to the CPU, and why) go to stderr.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    while let Some(a) = args.next() {
        if a == "--memory" {
            cfg.in_memory = true;
            continue;
        }
        let v = args.next();
        match (a.as_str(), v) {
            ("--data", Some(v)) => cfg.data_dir = PathBuf::from(v),
            ("--label", Some(v)) => cfg.label = v,
            ("--runs", Some(v)) => cfg.runs = v.parse().unwrap_or(3),
            ("--h2d-gbps", Some(v)) => cfg.h2d_gbps = v.parse().ok(),
            ("--d2d-gbps", Some(v)) => cfg.d2d_gbps = v.parse().ok(),
            ("--json", Some(v)) => json = Some(PathBuf::from(v)),
            ("--only", Some(v)) => cfg.only = v.split(',').map(str::to_string).collect(),
            ("--explain", Some(v)) => cfg.explain = v.split(',').map(str::to_string).collect(),
            (other, _) => {
                eprintln!("eddy-gpu-check: unknown or incomplete argument {other}");
                return ExitCode::from(2);
            }
        }
    }
    println!("{}", eddy_gpu::discover());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("eddy-gpu-check: cannot start a runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(&cfg)) {
        Ok(report) => {
            if let Some(path) = json {
                if let Ok(text) = serde_json::to_string_pretty(&report) {
                    if let Err(e) = std::fs::write(&path, text) {
                        eprintln!("eddy-gpu-check: writing {}: {e}", path.display());
                    }
                }
            }
            print!("{}", report.table(cfg.h2d_gbps));
            println!(
                "{}",
                eddy_gpu::GPU_METRICS
                    .render_prometheus()
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            if report.all_equal() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("eddy-gpu-check: {e}");
            ExitCode::from(2)
        }
    }
}
