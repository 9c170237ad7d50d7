//! `eddy bench freshness`: how soon an event's effect is visible in an
//! aggregating materialized view, at fixed event rates.
//!
//! For each rate the harness creates, in a server it starts (or one given
//! by --target-addr), a datagen source emitting that many rows per second
//! (`id` a sequence, `k` uniform over --keys values) and the view `SELECT
//! k, count(*), sum(id) ... GROUP BY k`; after --duration seconds it reads
//! the server's `/metrics`: `eddy_view_freshness_seconds` (per source row:
//! its arrival at the view operator to the return of the commit that makes
//! it visible to every reader, a point lookup included) and
//! `eddy_view_source_rows` (rows consumed, so the rate achieved). The view
//! and source are dropped before the next rate.

use std::time::{Duration, Instant};

use clap::Args;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{BenchError, Result};
use crate::harness::servers::EddyServer;

/// `eddy bench freshness`.
#[derive(Debug, Clone, Args)]
pub struct FreshnessArgs {
    /// Event rates (rows per second), comma-separated.
    #[arg(long, default_value = "10000,50000,100000,200000,400000")]
    pub rates: String,
    /// Seconds each rate runs.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Distinct group keys.
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// The view's checkpoint (commit) interval in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub checkpoint_interval_ms: u64,
    /// The `eddy` executable to start.
    #[arg(long)]
    pub eddy_bin: Option<std::path::PathBuf>,
}

/// One rate's figures.
#[derive(Debug, Clone)]
pub struct FreshnessRun {
    pub rate: u64,
    pub achieved: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub commits: u64,
}

/// The value of the sample `name{labels}` in a Prometheus exposition.
fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(name_and_labels)?;
        rest.trim().parse().ok()
    })
}

async fn scrape(port: u16) -> Result<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: eddy\r\n\r\n")
        .await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// Runs the benchmark and prints one table row per rate.
pub fn run(a: FreshnessArgs) -> Result<()> {
    let rates: Vec<u64> = a
        .rates
        .split(',')
        .map(|r| {
            r.trim()
                .parse::<u64>()
                .ok()
                .filter(|r| *r > 0)
                .ok_or_else(|| {
                    BenchError::InvalidArgument(format!("--rates: {r:?} is not a positive integer"))
                })
        })
        .collect::<Result<_>>()?;
    if a.keys == 0 || a.duration.is_nan() || a.duration <= 0.0 {
        return Err(BenchError::InvalidArgument(
            "--keys and --duration must be positive".into(),
        ));
    }
    let bin = EddyServer::find_binary(a.eddy_bin.clone())?;
    let server = EddyServer::start(&bin, &std::env::temp_dir())?;
    let target = server.target.clone();
    let http = server.http_port;
    let runs = crate::harness::block_on(async move {
        let c = crate::harness::pgwire::connect(&target).await?;
        let mut runs = Vec::new();
        for rate in rates {
            let (src, mv) = (format!("events_{rate}"), format!("fresh_{rate}"));
            c.batch_execute(&format!(
                "CREATE SOURCE {src} (id bigint, k bigint) WITH (connector = 'datagen', \
                 datagen.rows.per.second = {rate}, fields.id.kind = 'sequence', \
                 fields.k.kind = 'random', fields.k.min = 0, fields.k.max = {})",
                a.keys - 1
            ))
            .await?;
            let started = Instant::now();
            c.batch_execute(&format!(
                "CREATE MATERIALIZED VIEW {mv} WITH (checkpoint_interval_ms = {}) AS \
                 SELECT k, count(*) AS n, sum(id) AS s FROM {src} GROUP BY k",
                a.checkpoint_interval_ms
            ))
            .await?;
            let run_for = Duration::from_secs_f64(a.duration);
            while started.elapsed() < run_for {
                tokio::time::sleep(Duration::from_millis(500)).await;
                eprint!(
                    "\r{rate} rows/s: {:.0}/{:.0} s",
                    started.elapsed().as_secs_f64(),
                    a.duration
                );
            }
            let metrics = scrape(http).await?;
            let elapsed = started.elapsed().as_secs_f64();
            let q = |quantile: &str| {
                sample(
                    &metrics,
                    &format!(
                        "eddy_view_freshness_seconds{{view=\"{mv}\",quantile=\"{quantile}\"}}"
                    ),
                )
                .map_or(f64::NAN, |s| s * 1e3)
            };
            let rows =
                sample(&metrics, &format!("eddy_view_source_rows{{view=\"{mv}\"}}")).unwrap_or(0.0);
            let run = FreshnessRun {
                rate,
                achieved: rows / elapsed,
                p50_ms: q("0.5"),
                p99_ms: q("0.99"),
                p999_ms: q("0.999"),
                commits: sample(
                    &metrics,
                    &format!("eddy_view_commits_total{{view=\"{mv}\"}}"),
                )
                .unwrap_or(0.0) as u64,
            };
            eprintln!(
                "\r{rate} rows/s: achieved {:.0} rows/s, freshness p50 {:.1} ms p99 {:.1} ms \
                 p99.9 {:.1} ms, {} commits",
                run.achieved, run.p50_ms, run.p99_ms, run.p999_ms, run.commits
            );
            runs.push(run);
            c.batch_execute(&format!("DROP MATERIALIZED VIEW {mv}; DROP SOURCE {src}"))
                .await?;
        }
        Ok(runs)
    })?;
    drop(server);
    println!(
        "| offered rows/s | achieved rows/s | freshness p50 ms | p99 ms | p99.9 ms | commits |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        println!(
            "| {} | {:.0} | {:.1} | {:.1} | {:.1} | {} |",
            r.rate, r.achieved, r.p50_ms, r.p99_ms, r.p999_ms, r.commits
        );
    }
    println!(
        "\n{} ({}), {} keys, checkpoint interval {} ms, {} s per rate",
        crate::cli::command_line(),
        crate::harness::machine_description(),
        a.keys,
        a.checkpoint_interval_ms,
        a.duration
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_sample_of_the_exposition() {
        let text = "# HELP x\neddy_view_source_rows{view=\"a\"} 12\n\
                    eddy_view_source_rows{view=\"ab\"} 7\n";
        assert_eq!(
            sample(text, "eddy_view_source_rows{view=\"a\"}"),
            Some(12.0)
        );
        assert_eq!(
            sample(text, "eddy_view_source_rows{view=\"ab\"}"),
            Some(7.0)
        );
        assert_eq!(sample(text, "eddy_view_source_rows{view=\"b\"}"), None);
    }
}
