//! `eddy bench nexmark`: Nexmark queries as materialized views in the
//! server, events per second per core.
//!
//! For each query and run the harness creates, in a server it starts,
//! `nexmark` sources covering the first --events events of the Nexmark
//! stream, unthrottled (`nexmark.min.event.gap.in.ns = 0`), and the query's
//! materialized view; it times from the view's CREATE to its final commit
//! (the row of `eddy_stream_checkpoints` whose checkpoint is `i64::MAX`,
//! written once the source has ended) and divides the source rows that
//! commit records by that time. A view's job runs with parallelism 1 (one
//! source subtask feeding one view operator in one thread), so the rate is
//! per core. The median of --runs runs is reported.
//!
//! The queries are the ones the engine maintains, in the shapes
//! `crates/server/tests/stream_nexmark.rs` checks against batch SQL: q0-q2
//! in their plain form (append-only views without GROUP BY; q0g-q2g are
//! the grouped forms used before those existed: each distinct output row
//! with its multiplicity) and q3 as a lookup join of the auction stream with a
//! person table, which the harness fills first from a `person` source
//! through a view and `INSERT ... SELECT`; q3s is q3 in its plain form
//! over two sources (auction and person, an unbounded stream-stream
//! equi-join into an append-only view: the rate counts both sources'
//! rows); q7w is q7's window aggregate
//! (the highest bid of each 10 s tumbling window) without q7's join; q8
//! joins a TUMBLE aggregate of the persons with one of the auctions, both
//! emitting on window close, over watermarked sources (the rate counts
//! both sources' rows). q4-q7 are refused by the engine (see `docs/design/streams-into-tables.md`).

use std::time::{Duration, Instant};

use clap::Args;
use tokio_postgres::Client;

use crate::error::{BenchError, Result};
use crate::harness::servers::EddyServer;

/// `eddy bench nexmark`.
#[derive(Debug, Clone, Args)]
pub struct NexmarkArgs {
    /// Events of the Nexmark stream each source covers (46/50 of them are bids,
    /// 3/50 auctions).
    #[arg(long, default_value_t = 5_000_000)]
    pub events: u64,
    /// Runs per query (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Queries, comma-separated (supported: q0, q1, q2, q3, q3s: q3 over two sources, q7w:
    /// q7's window aggregate, q8: two window aggregates joined; q0g, q1g, q2g: q0-q2 grouped with count(*), as before
    /// append-only views).
    #[arg(long, default_value = "q0,q1,q2,q3,q7w")]
    pub queries: String,
    /// The views' checkpoint (commit) interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub checkpoint_interval_ms: u64,
    /// The `eddy` executable to start.
    #[arg(long)]
    pub eddy_bin: Option<std::path::PathBuf>,
}

/// A query: its view over the sources `bid` / `auction` (named per run).
struct NexmarkQuery {
    name: &'static str,
    /// The source type the view reads.
    reads: &'static str,
    /// The second source's type, for a join of two sources (`{src2}`).
    joins: Option<&'static str>,
    /// The sources carry a watermark on `date_time` (a view that emits on
    /// window close needs one).
    watermarked: bool,
    sql: &'static str,
}

const QUERIES: &[NexmarkQuery] = &[
    NexmarkQuery {
        name: "q0",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, bidder, price, date_time FROM {src}",
    },
    NexmarkQuery {
        name: "q1",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, bidder, 0.908 * price AS price_eur, date_time FROM {src}",
    },
    NexmarkQuery {
        name: "q2",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, price FROM {src} WHERE auction % 123 = 0",
    },
    NexmarkQuery {
        name: "q0g",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, bidder, price, date_time, count(*) AS n FROM {src} \
              GROUP BY auction, bidder, price, date_time",
    },
    NexmarkQuery {
        name: "q1g",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, bidder, price, 0.908 * price AS price_eur, date_time, \
              count(*) AS n FROM {src} GROUP BY auction, bidder, price, date_time",
    },
    NexmarkQuery {
        name: "q2g",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT auction, price, count(*) AS n FROM {src} WHERE auction % 123 = 0 \
              GROUP BY auction, price",
    },
    NexmarkQuery {
        name: "q3",
        reads: "auction",
        joins: None,
        watermarked: false,
        sql: "SELECT p.name, p.city, p.state, a.id, count(*) AS n FROM {src} AS a \
              JOIN nexmark_person AS p ON a.seller = p.id WHERE a.category = 10 AND \
              (p.state = 'or' OR p.state = 'id' OR p.state = 'ca') \
              GROUP BY p.name, p.city, p.state, a.id",
    },
    NexmarkQuery {
        name: "q3s",
        reads: "auction",
        joins: Some("person"),
        watermarked: false,
        sql: "SELECT p.name, p.city, p.state, a.id FROM {src} AS a JOIN {src2} AS p \
              ON a.seller = p.id WHERE a.category = 10 AND p.state IN ('or', 'id', 'ca')",
    },
    NexmarkQuery {
        name: "q7w",
        reads: "bid",
        joins: None,
        watermarked: false,
        sql: "SELECT window_end, max(price) AS maxprice, count(*) AS n \
              FROM TUMBLE({src}, date_time, INTERVAL '10' SECOND) GROUP BY window_end",
    },
    // q8: a join of two TUMBLE aggregates emitting on window close; done,
    // like every view, at its final commit (which closes every window)
    NexmarkQuery {
        name: "q8",
        reads: "person",
        joins: Some("auction"),
        watermarked: true,
        sql: "SELECT p.id, p.name, p.starttime FROM (SELECT id, name, window_start AS \
              starttime, window_end AS endtime FROM TUMBLE({src}, date_time, INTERVAL '10' \
              SECOND) GROUP BY id, name, window_start, window_end) AS p JOIN (SELECT seller, \
              window_start AS starttime, window_end AS endtime FROM TUMBLE({src2}, date_time, \
              INTERVAL '10' SECOND) GROUP BY seller, window_start, window_end) AS a ON p.id = \
              a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime \
              EMIT ON WINDOW CLOSE",
    },
];

const BID_COLUMNS: &str = "auction bigint, bidder bigint, price bigint, channel varchar, \
                           url varchar, date_time timestamp, extra varchar";
const AUCTION_COLUMNS: &str = "id bigint, item_name varchar, description varchar, \
                               initial_bid bigint, reserve bigint, date_time timestamp, \
                               expires timestamp, seller bigint, category bigint, extra varchar";
const PERSON_COLUMNS: &str = "id bigint, name varchar, email_address varchar, \
                              credit_card varchar, city varchar, state varchar, \
                              date_time timestamp, extra varchar";

fn source_sql(name: &str, table: &str, events: u64, watermarked: bool) -> String {
    let columns = match table {
        "bid" => BID_COLUMNS,
        "auction" => AUCTION_COLUMNS,
        _ => PERSON_COLUMNS,
    };
    let watermark = if watermarked {
        ", WATERMARK FOR date_time AS date_time - INTERVAL '1 second'"
    } else {
        ""
    };
    format!(
        "CREATE SOURCE {name} ({columns}{watermark}) WITH (connector = 'nexmark', \
         nexmark.table.type = '{table}', nexmark.event.num = {events}, \
         nexmark.min.event.gap.in.ns = 0)"
    )
}

/// Waits for view `job`'s final commit; the source rows it records.
async fn finished(c: &Client, job: &str, limit: Duration) -> Result<i64> {
    let deadline = Instant::now() + limit;
    loop {
        let row = c
            .query_opt(
                "SELECT source_rows, checkpoint FROM eddy_stream_checkpoints WHERE job = $1",
                &[&job],
            )
            .await?;
        if let Some(r) = row {
            if r.get::<_, i64>(1) == i64::MAX {
                return Ok(r.get(0));
            }
        }
        if Instant::now() > deadline {
            return Err(BenchError::Timeout(format!("view {job} did not finish")));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One query's figures.
#[derive(Debug, Clone)]
pub struct NexmarkRun {
    pub query: &'static str,
    pub rows: i64,
    /// Source rows per second of each run.
    pub rates: Vec<f64>,
}

impl NexmarkRun {
    fn median(&self) -> f64 {
        let mut r = self.rates.clone();
        r.sort_by(f64::total_cmp);
        r.get(r.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// Fills `nexmark_person (id primary key, name, city, state)` with the
/// persons among the first `events` events (through a view of a `person`
/// source and `INSERT ... SELECT`).
async fn load_persons(c: &Client, events: u64) -> Result<()> {
    c.batch_execute(&source_sql("nexmark_person_src", "person", events, false))
        .await?;
    c.batch_execute(
        "CREATE MATERIALIZED VIEW nexmark_person_v AS SELECT id, name, city, state, \
         count(*) AS n FROM nexmark_person_src GROUP BY id, name, city, state",
    )
    .await?;
    finished(c, "nexmark_person_v", Duration::from_secs(3600)).await?;
    c.batch_execute(
        "CREATE TABLE nexmark_person (id bigint PRIMARY KEY, name varchar, city varchar, \
         state varchar); INSERT INTO nexmark_person SELECT id, name, city, state FROM \
         nexmark_person_v; DROP MATERIALIZED VIEW nexmark_person_v; \
         DROP SOURCE nexmark_person_src",
    )
    .await?;
    Ok(())
}

/// Runs the benchmark and prints one table row per query.
pub fn run(a: NexmarkArgs) -> Result<()> {
    if a.events == 0 || a.runs == 0 {
        return Err(BenchError::InvalidArgument(
            "--events and --runs must be positive".into(),
        ));
    }
    if !(10..=3_600_000).contains(&a.checkpoint_interval_ms) {
        return Err(BenchError::InvalidArgument(
            "--checkpoint-interval-ms must be from 10 to 3600000".into(),
        ));
    }
    let mut queries = Vec::new();
    for name in a.queries.split(',').map(str::trim) {
        let q = QUERIES.iter().find(|q| q.name == name).ok_or_else(|| {
            BenchError::InvalidArgument(format!(
                "--queries: {name:?} is not one of q0, q1, q2, q3, q3s, q7w, q8, q0g, q1g, q2g \
                 (q4-q7 are refused by the engine)"
            ))
        })?;
        queries.push(q);
    }
    let bin = EddyServer::find_binary(a.eddy_bin.clone())?;
    let server = EddyServer::start(&bin, &std::env::temp_dir())?;
    let target = server.target.clone();
    let args = a.clone();
    let runs = crate::harness::block_on(async move {
        let c = crate::harness::pgwire::connect(&target).await?;
        if queries.iter().any(|q| q.name == "q3") {
            load_persons(&c, args.events).await?;
        }
        let mut out = Vec::new();
        for q in queries {
            let mut run = NexmarkRun {
                query: q.name,
                rows: 0,
                rates: Vec::new(),
            };
            for r in 0..args.runs {
                let (src, mv) = (format!("nx_{}_{r}", q.reads), format!("{}_{r}", q.name));
                c.batch_execute(&source_sql(&src, q.reads, args.events, q.watermarked))
                    .await?;
                let src2 = q.joins.map(|t| (format!("nx_{t}_{r}"), t));
                if let Some((name, t)) = &src2 {
                    c.batch_execute(&source_sql(name, t, args.events, q.watermarked))
                        .await?;
                }
                let sql = q.sql.replace("{src}", &src).replace(
                    "{src2}",
                    src2.as_ref().map_or("", |(name, _)| name.as_str()),
                );
                let started = Instant::now();
                c.batch_execute(&format!(
                    "CREATE MATERIALIZED VIEW {mv} WITH (checkpoint_interval_ms = {}) AS {}",
                    args.checkpoint_interval_ms, sql
                ))
                .await?;
                let rows = finished(&c, &mv, Duration::from_secs(3600)).await?;
                let secs = started.elapsed().as_secs_f64();
                run.rows = rows;
                run.rates.push(rows as f64 / secs);
                eprintln!(
                    "{} run {}: {rows} source rows in {secs:.2} s, {:.0} rows/s",
                    q.name,
                    r + 1,
                    rows as f64 / secs
                );
                c.batch_execute(&format!("DROP MATERIALIZED VIEW {mv}; DROP SOURCE {src}"))
                    .await?;
                if let Some((name, _)) = &src2 {
                    c.batch_execute(&format!("DROP SOURCE {name}")).await?;
                }
            }
            out.push(run);
        }
        Ok(out)
    })?;
    drop(server);
    println!("| query | source rows | rows/s per core (median) | runs (rows/s) |");
    println!("|---|---:|---:|---|");
    for r in &runs {
        println!(
            "| {} | {} | {:.0} | {} |",
            r.query,
            r.rows,
            r.median(),
            r.rates
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!(
        "\n{} ({}), {} Nexmark events per source, checkpoint interval {} ms, view jobs of \
         parallelism 1",
        crate::cli::command_line(),
        crate::harness::machine_description(),
        a.events,
        a.checkpoint_interval_ms
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_run() {
        let r = NexmarkRun {
            query: "q0",
            rows: 1,
            rates: vec![3.0, 1.0, 2.0],
        };
        assert_eq!(r.median(), 2.0);
        assert!(source_sql("b", "bid", 10, false).contains("nexmark.event.num = 10"));
        assert!(!source_sql("b", "bid", 10, false).contains("WATERMARK"));
        assert!(source_sql("p", "person", 10, true).contains("WATERMARK FOR date_time"));
    }
}
