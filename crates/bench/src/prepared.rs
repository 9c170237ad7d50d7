//! `eddy bench prepared`: TPC-H Q6 with parameters, prepared once and
//! executed many times, against the same query sent as text each time.
//!
//! Issue 12 asks that a prepared analytical query be at least as fast as
//! the same query sent as text: Eddy plans a prepared query once, at Parse,
//! and binds the parameters into that plan at every Execute, so each
//! execution skips parsing and SQL planning (the optimizer and physical
//! planner still run, after binding, so scans see the values).
//!
//! One run: start Eddy (or use `--eddy-addr`), load TPC-H `lineitem` at
//! `--sf`, then `--runs` rounds; each round executes Q6 `--iterations`
//! times as text (simple query protocol, values written into the SQL) and
//! as one prepared statement (declared types date, numeric, numeric; text
//! parameters), cycling through the same parameter sets, and checks that
//! both give the same answer. Reported: per round the median milliseconds
//! of one execution each way, and the median over rounds of their ratio.
//! Nothing here knows Eddy's internals: it is a client, as a user is.

use std::path::PathBuf;
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use clap::Args;
use tokio_postgres::types::{Format, IsNull, ToSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::dataset::{dataset_dir_name, generate_or_reuse, WriteOptions};
use crate::error::{BenchError, Result};
use crate::harness::servers::{EddyServer, PgTarget};
use crate::harness::{block_on, pgwire, Workload};
use crate::tpch::TpchGenerator;

/// `eddy bench prepared`.
#[derive(Debug, Clone, Args)]
pub struct PreparedArgs {
    /// TPC-H scale factor of `lineitem`.
    #[arg(long, default_value_t = 0.1)]
    pub sf: f64,
    /// Directory that holds data sets (generated when missing).
    #[arg(long, default_value = "bench-data")]
    pub data: PathBuf,
    /// Rounds; the ratio reported is the median over rounds.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Executions of each form per round.
    #[arg(long, default_value_t = 20)]
    pub iterations: usize,
    /// Use a running Eddy server at host:port (user eddy, trust) with
    /// `lineitem` loaded instead of starting and loading one.
    #[arg(long)]
    pub eddy_addr: Option<String>,
    /// The `eddy` executable to start [default: this one / a sibling].
    #[arg(long)]
    pub eddy_bin: Option<PathBuf>,
}

/// Q6 with its three values as parameters: the first day of the year,
/// the discount, the quantity bound.
const Q6_PREPARED: &str = "select sum(l_extendedprice * l_discount) as revenue \
     from lineitem \
     where l_shipdate >= $1 \
       and l_shipdate < $1 + interval '1' year \
       and l_discount between $2 - 0.01 and $2 + 0.01 \
       and l_quantity < $3";

/// Q6 as text with the same values written in.
fn q6_text(p: &Q6Params) -> String {
    format!(
        "select sum(l_extendedprice * l_discount) as revenue \
         from lineitem \
         where l_shipdate >= date '{date}' \
           and l_shipdate < date '{date}' + interval '1' year \
           and l_discount between {disc} - 0.01 and {disc} + 0.01 \
           and l_quantity < {qty}",
        date = p.date,
        disc = p.discount,
        qty = p.quantity
    )
}

/// One parameter set of Q6 (the specification's substitution ranges).
struct Q6Params {
    date: String,
    discount: String,
    quantity: String,
}

fn parameter_sets() -> Vec<Q6Params> {
    let mut v = Vec::new();
    for (i, year) in (1993..=1997).enumerate() {
        let discount = 2 + (i * 2) % 8;
        v.push(Q6Params {
            date: format!("{year}-01-01"),
            discount: format!("0.0{discount}"),
            quantity: format!("{}", 24 + i % 2),
        });
    }
    v
}

/// A parameter in text format whatever its declared type (as pgjdbc and
/// psycopg 3 send them).
#[derive(Debug)]
struct TextParam<'a>(&'a str);

impl ToSql for TextParam<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    tokio_postgres::types::to_sql_checked!();
}

/// One round's medians, milliseconds per execution.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub text_ms: f64,
    pub prepared_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

async fn text_answer(c: &Client, sql: &str) -> Result<Option<String>> {
    let msgs = c.simple_query(sql).await?;
    Ok(msgs.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    }))
}

async fn prepared_answer(
    c: &Client,
    stmt: &tokio_postgres::Statement,
    p: &Q6Params,
) -> Result<Option<String>> {
    let params = [
        TextParam(&p.date),
        TextParam(&p.discount),
        TextParam(&p.quantity),
    ];
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|x| x as &(dyn ToSql + Sync)).collect();
    let rows = c.query(stmt, &refs).await?;
    Ok(match rows.first() {
        Some(r) => r.try_get::<_, Option<NumericText>>(0)?.map(|n| n.0),
        None => None,
    })
}

async fn rounds(target: PgTarget, runs: usize, iterations: usize) -> Result<Vec<Round>> {
    let c = pgwire::connect(&target).await?;
    let sets = parameter_sets();
    let stmt = c
        .prepare_typed(Q6_PREPARED, &[Type::DATE, Type::NUMERIC, Type::NUMERIC])
        .await?;
    // warm-up and the answers' check
    for p in &sets {
        let text = text_answer(&c, &q6_text(p)).await?;
        let prepared = prepared_answer(&c, &stmt, p).await?;
        if text != prepared {
            return Err(BenchError::Internal(format!(
                "Q6 answers differ for {}/{}/{}: text {text:?}, prepared {prepared:?}",
                p.date, p.discount, p.quantity
            )));
        }
    }
    let mut out = Vec::new();
    for _ in 0..runs {
        let mut text_ms = Vec::new();
        let mut prepared_ms = Vec::new();
        for i in 0..iterations {
            let p = &sets[i % sets.len()];
            let t = Instant::now();
            text_answer(&c, &q6_text(p)).await?;
            text_ms.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            prepared_answer(&c, &stmt, p).await?;
            prepared_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        out.push(Round {
            text_ms: median(text_ms),
            prepared_ms: median(prepared_ms),
        });
    }
    Ok(out)
}

/// A NUMERIC result read in binary as its decimal text.
struct NumericText(String);

impl<'a> tokio_postgres::types::FromSql<'a> for NumericText {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        numeric_binary_to_text(raw)
            .map(NumericText)
            .ok_or_else(|| "malformed binary numeric".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// PostgreSQL's binary NUMERIC (ndigits, weight, sign, dscale, base-10000
/// digits) as `numeric_out` writes it.
fn numeric_binary_to_text(raw: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<i16> {
        let b = raw.get(i..i + 2)?;
        Some(i16::from_be_bytes([b[0], b[1]]))
    };
    let ndigits = usize::try_from(word(0)?).ok()?;
    let weight = i32::from(word(2)?);
    let sign = u16::from_be_bytes([*raw.get(4)?, *raw.get(5)?]);
    let dscale = usize::try_from(word(6)?).ok()?;
    if sign == 0xC000 {
        return Some("NaN".into());
    }
    let digits: Vec<i16> = (0..ndigits)
        .map(|i| word(8 + 2 * i))
        .collect::<Option<_>>()?;
    let mut int = String::new();
    let mut d = 0i32;
    while d <= weight {
        let v = usize::try_from(d).ok().and_then(|i| digits.get(i)).copied();
        let v = v.unwrap_or(0);
        if int.is_empty() {
            int = v.to_string();
        } else {
            int.push_str(&format!("{v:04}"));
        }
        d += 1;
    }
    if int.is_empty() {
        int.push('0');
    }
    let mut frac = String::new();
    let mut i = weight + 1;
    while frac.len() < dscale {
        let v = usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .copied()
            .unwrap_or(0);
        frac.push_str(&format!("{v:04}"));
        i += 1;
    }
    frac.truncate(dscale);
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    s.push_str(&int);
    if dscale > 0 {
        s.push('.');
        s.push_str(&frac);
    }
    Some(s)
}

/// Runs `eddy bench prepared` and prints its report.
pub fn run(a: PreparedArgs) -> Result<()> {
    let runs = a.runs.max(1);
    let iterations = a.iterations.max(1);
    let mut _server = None;
    let target = match &a.eddy_addr {
        Some(addr) => PgTarget::from_addr(addr, "eddy", "", "eddy")?,
        None => {
            let gen = TpchGenerator::new(a.sf)?;
            let dir = a.data.join(dataset_dir_name("tpch", a.sf));
            let manifest = generate_or_reuse(&gen, &dir, &WriteOptions::default())?;
            let bin = EddyServer::find_binary(a.eddy_bin.clone())?;
            let scratch = a.data.join("scratch");
            std::fs::create_dir_all(&scratch).map_err(|e| BenchError::io(&scratch, e))?;
            let server = EddyServer::start(&bin, &scratch)?;
            let target = server.target.clone();
            _server = Some(server);
            let w = Workload {
                benchmark: "tpch",
                sf: a.sf,
                dir,
                manifest,
                tables: vec!["lineitem".into()],
                fact_table: crate::tpch::FACT_TABLE,
                queries: vec![],
            };
            let t = target.clone();
            let load_s =
                block_on(
                    async move { pgwire::load(&t, &w, pgwire::LoadPath::ParquetFile, 2).await },
                )?;
            eprintln!("lineitem (sf {}) loaded in {load_s:.1}s", a.sf);
            target
        }
    };
    let rounds = block_on(rounds(target, runs, iterations))?;
    println!("| round | text ms | prepared ms | text / prepared |");
    println!("|---|---|---|---|");
    let mut ratios = Vec::new();
    for (i, r) in rounds.iter().enumerate() {
        let ratio = r.text_ms / r.prepared_ms;
        ratios.push(ratio);
        println!(
            "| {} | {:.2} | {:.2} | {:.3} |",
            i + 1,
            r.text_ms,
            r.prepared_ms,
            ratio
        );
    }
    println!(
        "\nTPC-H Q6 sf {}: text / prepared = {:.3} (median of {runs} rounds of {iterations}; > 1: prepared is faster)",
        a.sf,
        median(ratios)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_numeric_reads_as_text() {
        // 12345.678 : ndigits 3, weight 1, +, dscale 3, digits 1 2345 6780
        let raw = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C];
        assert_eq!(numeric_binary_to_text(&raw).as_deref(), Some("12345.678"));
        // 0.05 : ndigits 1, weight -1, +, dscale 2, digits 500
        let raw = [0, 1, 0xFF, 0xFF, 0, 0, 0, 2, 0x01, 0xF4];
        assert_eq!(numeric_binary_to_text(&raw).as_deref(), Some("0.05"));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn both_forms_carry_the_same_values() {
        let p = &parameter_sets()[0];
        let text = q6_text(p);
        assert!(text.contains("date '1993-01-01'") && text.contains("0.02 - 0.01"));
        assert_eq!(Q6_PREPARED.matches('$').count(), 5);
    }
}
