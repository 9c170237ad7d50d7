//! The report of an analytics run: JSON (everything), Markdown (tables) and a PNG chart.
//!
//! Units (BENCHMARKS.md): per query the median, min and max of the timed
//! runs; rows/s = fact-table rows / median; GB/s = Arrow bytes of the fact
//! columns the query references / median, and (as PG-Strom reports it) the
//! whole fact table's bytes / median; ratios are the first engine's median
//! over each other engine's; geometric means are over the queries every
//! engine that ran answered.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{compare, EngineRun, HarnessOptions, Workload};
use crate::error::{BenchError, Result};

/// One query on one engine, summarised.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueryStats {
    /// Median of the timed runs (s).
    pub median_s: Option<f64>,
    /// Fastest run (s).
    pub min_s: Option<f64>,
    /// Slowest run (s).
    pub max_s: Option<f64>,
    /// Every timed run (s).
    pub times_s: Vec<f64>,
    /// Fact rows / median.
    pub rows_per_s: Option<f64>,
    /// Referenced fact-column bytes / median, in GB/s.
    pub gb_per_s: Option<f64>,
    /// Whole fact-table bytes / median, in GB/s.
    pub total_gb_per_s: Option<f64>,
    /// Result rows returned.
    pub result_rows: usize,
    /// Error, when the query failed.
    pub error: Option<String>,
}

/// One query across engines.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueryReport {
    /// Query name.
    pub name: String,
    /// Fact-table columns the query references.
    pub fact_columns: Vec<String>,
    /// Their Arrow bytes.
    pub fact_column_bytes: u64,
    /// Engine whose answer the others were checked against.
    pub reference: Option<String>,
    /// True when every engine that answered agrees with the reference.
    pub agree: bool,
    /// What differs, per engine.
    pub mismatches: BTreeMap<String, String>,
    /// Per engine.
    pub engines: BTreeMap<String, QueryStats>,
    /// "first/other" -> ratio of medians.
    pub ratios: BTreeMap<String, f64>,
}

/// One engine, summarised.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineSummary {
    /// Version string.
    pub version: String,
    /// Load time (s).
    pub load_s: f64,
    /// Error when the engine could not run.
    pub error: Option<String>,
    /// Queries answered.
    pub queries_ok: usize,
    /// Geometric mean of medians over the common queries (s).
    pub geomean_s: Option<f64>,
}

/// A whole analytics run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// `ssb` / `tpch`.
    pub benchmark: String,
    /// Scale factor.
    pub scale_factor: f64,
    /// UTC date and time of the run.
    pub date: String,
    /// Machine description.
    pub machine: String,
    /// The command line.
    pub command: String,
    /// eddy-bench version.
    pub eddy_bench_version: String,
    /// Timed runs per query.
    pub runs: usize,
    /// Fact table.
    pub fact_table: String,
    /// Its rows.
    pub fact_rows: u64,
    /// Its Arrow bytes.
    pub fact_bytes: u64,
    /// Engines in run order.
    pub engine_order: Vec<String>,
    /// Per engine.
    pub engines: BTreeMap<String, EngineSummary>,
    /// Queries the geometric means are over.
    pub geomean_queries: Vec<String>,
    /// Per query.
    pub queries: Vec<QueryReport>,
}

/// Current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (y, m, d) = crate::ssb::gen::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        s / 3600,
        (s / 60) % 60
    )
}

/// Columns of `columns` that occur in `sql` as whole identifiers.
pub fn referenced_columns<'a>(sql: &str, columns: impl Iterator<Item = &'a String>) -> Vec<String> {
    let lower = sql.to_ascii_lowercase();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    columns
        .filter(|col| {
            let bytes = lower.as_bytes();
            lower.match_indices(col.as_str()).any(|(i, _)| {
                let before = i == 0 || !is_ident(bytes[i - 1]);
                let end = i + col.len();
                let after = end >= bytes.len() || !is_ident(bytes[end]);
                before && after
            })
        })
        .cloned()
        .collect()
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Builds the report from the engines' runs.
pub fn build(w: &Workload, runs: &[EngineRun], opts: &HarnessOptions) -> Report {
    let fact = w
        .manifest
        .tables
        .get(w.fact_table)
        .cloned()
        .unwrap_or_default();
    let fact_bytes: u64 = fact.column_bytes.values().sum();
    let mut rep = Report {
        benchmark: w.benchmark.to_string(),
        scale_factor: w.sf,
        date: now_utc(),
        machine: super::machine_description(),
        command: opts.command.clone(),
        eddy_bench_version: env!("CARGO_PKG_VERSION").to_string(),
        runs: opts.runs,
        fact_table: w.fact_table.to_string(),
        fact_rows: fact.rows,
        fact_bytes,
        engine_order: runs.iter().map(|r| r.engine.clone()).collect(),
        ..Report::default()
    };
    for (name, sql) in &w.queries {
        let cols = referenced_columns(sql, fact.column_bytes.keys());
        let col_bytes: u64 = cols.iter().filter_map(|c| fact.column_bytes.get(c)).sum();
        let mut q = QueryReport {
            name: name.clone(),
            fact_columns: cols,
            fact_column_bytes: col_bytes,
            agree: true,
            ..QueryReport::default()
        };
        let mut reference: Option<&super::QueryRun> = None;
        for r in runs.iter().filter(|r| r.error.is_none()) {
            let Some(qr) = r.queries.iter().find(|x| &x.name == name) else {
                continue;
            };
            let med = median(&qr.times_s);
            let st = QueryStats {
                median_s: med,
                min_s: qr.times_s.iter().copied().reduce(f64::min),
                max_s: qr.times_s.iter().copied().reduce(f64::max),
                times_s: qr.times_s.clone(),
                rows_per_s: med.map(|m| fact.rows as f64 / m),
                gb_per_s: med.map(|m| col_bytes as f64 / m / 1e9),
                total_gb_per_s: med.map(|m| fact_bytes as f64 / m / 1e9),
                result_rows: qr.rows.len(),
                error: qr.error.clone(),
            };
            if qr.error.is_none() {
                match reference {
                    None => {
                        reference = Some(qr);
                        q.reference = Some(r.engine.clone());
                    }
                    Some(rf) => {
                        if let Some(diff) = compare::compare_runs(rf, qr) {
                            q.agree = false;
                            q.mismatches.insert(r.engine.clone(), diff);
                        }
                    }
                }
            }
            q.engines.insert(r.engine.clone(), st);
        }
        if let Some(first) = rep.engine_order.first() {
            if let Some(fm) = q.engines.get(first).and_then(|s| s.median_s) {
                for (e, s) in &q.engines {
                    if e != first {
                        if let Some(m) = s.median_s.filter(|m| *m > 0.0) {
                            q.ratios.insert(format!("{first}/{e}"), fm / m);
                        }
                    }
                }
            }
        }
        rep.queries.push(q);
    }
    let ran: Vec<&EngineRun> = runs.iter().filter(|r| r.error.is_none()).collect();
    rep.geomean_queries = rep
        .queries
        .iter()
        .filter(|q| {
            ran.iter()
                .all(|r| q.engines.get(&r.engine).and_then(|s| s.median_s).is_some())
        })
        .map(|q| q.name.clone())
        .collect();
    for r in runs {
        let ok = rep
            .queries
            .iter()
            .filter(|q| {
                q.engines
                    .get(&r.engine)
                    .is_some_and(|s| s.error.is_none() && s.median_s.is_some())
            })
            .count();
        let logs: Vec<f64> = rep
            .queries
            .iter()
            .filter(|q| rep.geomean_queries.contains(&q.name))
            .filter_map(|q| q.engines.get(&r.engine).and_then(|s| s.median_s))
            .map(f64::ln)
            .collect();
        let geo = if logs.is_empty() || r.error.is_some() {
            None
        } else {
            Some((logs.iter().sum::<f64>() / logs.len() as f64).exp())
        };
        rep.engines.insert(
            r.engine.clone(),
            EngineSummary {
                version: r.version.clone(),
                load_s: r.load_s,
                error: r.error.clone(),
                queries_ok: ok,
                geomean_s: geo,
            },
        );
    }
    rep
}

fn ms(v: Option<f64>) -> String {
    v.map(|s| format!("{:.1}", s * 1000.0))
        .unwrap_or_else(|| "—".into())
}

/// The Markdown tables of a report.
pub fn markdown(rep: &Report) -> String {
    let mut s = String::new();
    let title = rep.benchmark.to_uppercase();
    let _ = writeln!(s, "# {title} SF{} — {}\n", rep.scale_factor, rep.date);
    let _ = writeln!(s, "- Machine: {}", rep.machine);
    let _ = writeln!(s, "- Command: `{}`", rep.command);
    let _ = writeln!(
        s,
        "- {} rows in `{}` ({:.2} GB as Arrow); median of {} runs after a warm-up",
        rep.fact_rows,
        rep.fact_table,
        rep.fact_bytes as f64 / 1e9,
        rep.runs
    );
    for e in &rep.engine_order {
        if let Some(es) = rep.engines.get(e) {
            match &es.error {
                Some(err) => {
                    let _ = writeln!(s, "- {e}: did not run: {err}");
                }
                None => {
                    let _ = writeln!(
                        s,
                        "- {e}: {} (load {:.1} s, {} queries answered)",
                        es.version, es.load_s, es.queries_ok
                    );
                }
            }
        }
    }
    let engines: Vec<&String> = rep
        .engine_order
        .iter()
        .filter(|e| rep.engines.get(*e).is_some_and(|x| x.error.is_none()))
        .collect();
    let _ = writeln!(s, "\n## Median time, ms (min–max)\n");
    let mut header = "| query |".to_string();
    let mut rule = "|---|".to_string();
    for e in &engines {
        let _ = write!(header, " {e} |");
        rule.push_str("---:|");
    }
    header.push_str(" answers |");
    rule.push_str("---|");
    let _ = writeln!(s, "{header}\n{rule}");
    for q in &rep.queries {
        let mut line = format!("| {} |", q.name);
        for e in &engines {
            let cell = match q.engines.get(*e) {
                Some(st) if st.error.is_some() => "error".to_string(),
                Some(st) => format!("{} ({}–{})", ms(st.median_s), ms(st.min_s), ms(st.max_s)),
                None => "—".into(),
            };
            let _ = write!(line, " {cell} |");
        }
        let agree = if q.reference.is_none() {
            "—".to_string()
        } else if q.agree {
            "agree".to_string()
        } else {
            format!(
                "DIFFER ({})",
                q.mismatches.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        let _ = writeln!(s, "{line} {agree} |");
    }
    let mut line = format!("| geomean ({} q) |", rep.geomean_queries.len());
    for e in &engines {
        let _ = write!(
            line,
            " {} |",
            ms(rep.engines.get(*e).and_then(|x| x.geomean_s))
        );
    }
    let _ = writeln!(s, "{line} |");
    let _ = writeln!(
        s,
        "\n## Throughput: M {} rows/s | GB/s of the referenced columns | GB/s of the whole table\n",
        rep.fact_table
    );
    let mut header = "| query | cols MB |".to_string();
    let mut rule = "|---|---:|".to_string();
    for e in &engines {
        let _ = write!(header, " {e} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for q in &rep.queries {
        let mut line = format!("| {} | {:.0} |", q.name, q.fact_column_bytes as f64 / 1e6);
        for e in &engines {
            let cell = match q.engines.get(*e) {
                Some(st) if st.error.is_none() && st.median_s.is_some() => format!(
                    "{:.0} \\| {:.2} \\| {:.2}",
                    st.rows_per_s.unwrap_or(0.0) / 1e6,
                    st.gb_per_s.unwrap_or(0.0),
                    st.total_gb_per_s.unwrap_or(0.0)
                ),
                _ => "—".into(),
            };
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(s, "{line}");
    }
    if let Some(first) = engines.first() {
        if engines.len() > 1 {
            let _ = writeln!(
                s,
                "\n## Ratio of medians, {first} / peer (below 1: {first} faster)\n"
            );
            let mut header = "| query |".to_string();
            let mut rule = "|---|".to_string();
            for e in engines.iter().skip(1) {
                let _ = write!(header, " {first}/{e} |");
                rule.push_str("---:|");
            }
            let _ = writeln!(s, "{header}\n{rule}");
            for q in &rep.queries {
                let mut line = format!("| {} |", q.name);
                for e in engines.iter().skip(1) {
                    let cell = q
                        .ratios
                        .get(&format!("{first}/{e}"))
                        .map(|r| format!("{r:.2}"))
                        .unwrap_or_else(|| "—".into());
                    let _ = write!(line, " {cell} |");
                }
                let _ = writeln!(s, "{line}");
            }
            let mut line = "| geomean |".to_string();
            let fg = rep.engines.get(*first).and_then(|x| x.geomean_s);
            for e in engines.iter().skip(1) {
                let g = rep.engines.get(*e).and_then(|x| x.geomean_s);
                let cell = match (fg, g) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                    _ => "—".into(),
                };
                let _ = write!(line, " {cell} |");
            }
            let _ = writeln!(s, "{line}");
        }
    }
    let bad: Vec<&QueryReport> = rep.queries.iter().filter(|q| !q.agree).collect();
    if !bad.is_empty() {
        let _ = writeln!(s, "\n## Answers that differ\n");
        for q in bad {
            for (e, d) in &q.mismatches {
                let _ = writeln!(
                    s,
                    "- {} {e} vs {}: {d}",
                    q.name,
                    q.reference.as_deref().unwrap_or("?")
                );
            }
        }
    }
    for e in &engines {
        for q in &rep.queries {
            if let Some(err) = q.engines.get(*e).and_then(|st| st.error.as_ref()) {
                let _ = writeln!(
                    s,
                    "- {} on {e} failed: {}",
                    q.name,
                    err.lines().next().unwrap_or("")
                );
            }
        }
    }
    s
}

/// Writes `<bench>-sf<N>.json`, `.md` and (when asked and possible) `.png` to the output directory.
pub fn write(rep: &Report, opts: &HarnessOptions) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(&opts.out_dir).map_err(|e| BenchError::io(&opts.out_dir, e))?;
    let stem = format!("{}-sf{}", rep.benchmark, rep.scale_factor);
    let json = opts.out_dir.join(format!("{stem}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(rep)?)
        .map_err(|e| BenchError::io(&json, e))?;
    let md = opts.out_dir.join(format!("{stem}.md"));
    std::fs::write(&md, markdown(rep)).map_err(|e| BenchError::io(&md, e))?;
    let mut out = vec![json.clone(), md];
    if opts.chart {
        let png = opts.out_dir.join(format!("{stem}.png"));
        let python = super::peer::find_python(opts.python.clone());
        match super::peer::chart(&python, &json, &png, &opts.scratch) {
            Ok(()) => out.push(png),
            Err(e) => eprintln!("note: no chart: {}", super::error_chain(&e)),
        }
    }
    for p in &out {
        eprintln!("wrote {}", p.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_whole_identifiers_only() {
        let cols = [
            "lo_quantity".to_string(),
            "lo_tax".to_string(),
            "lo_orderdate".to_string(),
        ];
        let got = referenced_columns(
            "select sum(lo_quantity) from lineorder where lo_orderdate = 1",
            cols.iter(),
        );
        assert_eq!(
            got,
            vec!["lo_quantity".to_string(), "lo_orderdate".to_string()]
        );
        let got = referenced_columns("select lo_taxes from t", cols.iter());
        assert!(got.is_empty());
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
