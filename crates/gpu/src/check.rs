//! The GPU-vs-CPU check of the 13 SSB queries, behind `scripts/gpu-check.sh`.
//!
//! Loads SSB tables (Parquet, as written by `eddy bench gen ssb`) into one
//! DataFusion session with [`crate::OffloadToGpu`] registered, runs every
//! query with `SET eddy.gpu = off` and `= on`, checks that the answers are
//! equal (rows sorted; floats compared to 1e-9 relative), and times both.
//! The report ends with a table of rows/s, GB/s and the fraction of the
//! measured ceilings (host-to-device for host-resident data).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::Result as DfResult;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

/// The 13 SSB queries (O'Neil et al., rev. 3), over a date table named
/// `dwdate`. Each with the lineorder columns it reads (for GB/s).
pub const SSB_QUERIES: [(&str, &str, &[&str]); 13] = [
    ("Q1.1", "select sum(lo_extendedprice * lo_discount) as revenue from lineorder, dwdate where lo_orderdate = d_datekey and d_year = 1993 and lo_discount between 1 and 3 and lo_quantity < 25", &["lo_orderdate", "lo_extendedprice", "lo_discount", "lo_quantity"]),
    ("Q1.2", "select sum(lo_extendedprice * lo_discount) as revenue from lineorder, dwdate where lo_orderdate = d_datekey and d_yearmonthnum = 199401 and lo_discount between 4 and 6 and lo_quantity between 26 and 35", &["lo_orderdate", "lo_extendedprice", "lo_discount", "lo_quantity"]),
    ("Q1.3", "select sum(lo_extendedprice * lo_discount) as revenue from lineorder, dwdate where lo_orderdate = d_datekey and d_weeknuminyear = 6 and d_year = 1994 and lo_discount between 5 and 7 and lo_quantity between 26 and 35", &["lo_orderdate", "lo_extendedprice", "lo_discount", "lo_quantity"]),
    ("Q2.1", "select sum(lo_revenue), d_year, p_brand1 from lineorder, dwdate, part, supplier where lo_orderdate = d_datekey and lo_partkey = p_partkey and lo_suppkey = s_suppkey and p_category = 'MFGR#12' and s_region = 'AMERICA' group by d_year, p_brand1 order by d_year, p_brand1", &["lo_orderdate", "lo_partkey", "lo_suppkey", "lo_revenue"]),
    ("Q2.2", "select sum(lo_revenue), d_year, p_brand1 from lineorder, dwdate, part, supplier where lo_orderdate = d_datekey and lo_partkey = p_partkey and lo_suppkey = s_suppkey and p_brand1 between 'MFGR#2221' and 'MFGR#2228' and s_region = 'ASIA' group by d_year, p_brand1 order by d_year, p_brand1", &["lo_orderdate", "lo_partkey", "lo_suppkey", "lo_revenue"]),
    ("Q2.3", "select sum(lo_revenue), d_year, p_brand1 from lineorder, dwdate, part, supplier where lo_orderdate = d_datekey and lo_partkey = p_partkey and lo_suppkey = s_suppkey and p_brand1 = 'MFGR#2239' and s_region = 'EUROPE' group by d_year, p_brand1 order by d_year, p_brand1", &["lo_orderdate", "lo_partkey", "lo_suppkey", "lo_revenue"]),
    ("Q3.1", "select c_nation, s_nation, d_year, sum(lo_revenue) as revenue from customer, lineorder, supplier, dwdate where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_orderdate = d_datekey and c_region = 'ASIA' and s_region = 'ASIA' and d_year >= 1992 and d_year <= 1997 group by c_nation, s_nation, d_year order by d_year asc, revenue desc", &["lo_custkey", "lo_suppkey", "lo_orderdate", "lo_revenue"]),
    ("Q3.2", "select c_city, s_city, d_year, sum(lo_revenue) as revenue from customer, lineorder, supplier, dwdate where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_orderdate = d_datekey and c_nation = 'UNITED STATES' and s_nation = 'UNITED STATES' and d_year >= 1992 and d_year <= 1997 group by c_city, s_city, d_year order by d_year asc, revenue desc", &["lo_custkey", "lo_suppkey", "lo_orderdate", "lo_revenue"]),
    ("Q3.3", "select c_city, s_city, d_year, sum(lo_revenue) as revenue from customer, lineorder, supplier, dwdate where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_orderdate = d_datekey and (c_city = 'UNITED KI1' or c_city = 'UNITED KI5') and (s_city = 'UNITED KI1' or s_city = 'UNITED KI5') and d_year >= 1992 and d_year <= 1997 group by c_city, s_city, d_year order by d_year asc, revenue desc", &["lo_custkey", "lo_suppkey", "lo_orderdate", "lo_revenue"]),
    ("Q3.4", "select c_city, s_city, d_year, sum(lo_revenue) as revenue from customer, lineorder, supplier, dwdate where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_orderdate = d_datekey and (c_city = 'UNITED KI1' or c_city = 'UNITED KI5') and (s_city = 'UNITED KI1' or s_city = 'UNITED KI5') and d_yearmonth = 'Dec1997' group by c_city, s_city, d_year order by d_year asc, revenue desc", &["lo_custkey", "lo_suppkey", "lo_orderdate", "lo_revenue"]),
    ("Q4.1", "select d_year, c_nation, sum(lo_revenue - lo_supplycost) as profit from dwdate, customer, supplier, part, lineorder where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_partkey = p_partkey and lo_orderdate = d_datekey and c_region = 'AMERICA' and s_region = 'AMERICA' and (p_mfgr = 'MFGR#1' or p_mfgr = 'MFGR#2') group by d_year, c_nation order by d_year, c_nation", &["lo_custkey", "lo_suppkey", "lo_partkey", "lo_orderdate", "lo_revenue", "lo_supplycost"]),
    ("Q4.2", "select d_year, s_nation, p_category, sum(lo_revenue - lo_supplycost) as profit from dwdate, customer, supplier, part, lineorder where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_partkey = p_partkey and lo_orderdate = d_datekey and c_region = 'AMERICA' and s_region = 'AMERICA' and (d_year = 1997 or d_year = 1998) and (p_mfgr = 'MFGR#1' or p_mfgr = 'MFGR#2') group by d_year, s_nation, p_category order by d_year, s_nation, p_category", &["lo_custkey", "lo_suppkey", "lo_partkey", "lo_orderdate", "lo_revenue", "lo_supplycost"]),
    ("Q4.3", "select d_year, s_city, p_brand1, sum(lo_revenue - lo_supplycost) as profit from dwdate, customer, supplier, part, lineorder where lo_custkey = c_custkey and lo_suppkey = s_suppkey and lo_partkey = p_partkey and lo_orderdate = d_datekey and s_nation = 'UNITED STATES' and (d_year = 1997 or d_year = 1998) and p_category = 'MFGR#14' group by d_year, s_city, p_brand1 order by d_year, s_city, p_brand1", &["lo_custkey", "lo_suppkey", "lo_partkey", "lo_orderdate", "lo_revenue", "lo_supplycost"]),
];

/// What to check.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Directory holding the SSB tables (`lineorder`, `customer`,
    /// `supplier`, `part`, `date` or `dwdate`; each a `.parquet` file or a
    /// directory of them).
    pub data_dir: PathBuf,
    /// Label of the scale factor, for the report.
    pub label: String,
    /// Timed runs per query and mode (median reported), after one warm-up.
    pub runs: usize,
    /// Measured ceilings in GB/s, for the fraction column.
    pub h2d_gbps: Option<f64>,
    pub d2d_gbps: Option<f64>,
    /// Load every table into memory first (host-resident Arrow batches, one
    /// partition per core), so that the timings measure the operators and
    /// the copies, not Parquet decoding.
    pub in_memory: bool,
    /// Queries (`Q1.1`, ...) whose GPU plan is also run with EXPLAIN
    /// ANALYZE, printed to stderr.
    pub explain: Vec<String>,
    /// Run only these queries (all when empty).
    pub only: Vec<String>,
}

/// One query's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryOutcome {
    pub query: String,
    pub equal: bool,
    pub rows: usize,
    pub cpu_ms: f64,
    pub gpu_ms: f64,
    /// GPU operators in the GPU plan.
    pub gpu_operators: usize,
    pub lineorder_rows: usize,
    pub bytes_referenced: usize,
}

/// The whole report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    pub label: String,
    pub inventory: String,
    pub queries: Vec<QueryOutcome>,
}

impl CheckReport {
    /// True when every query's GPU answer equals the CPU's.
    pub fn all_equal(&self) -> bool {
        self.queries.iter().all(|q| q.equal)
    }

    /// The short table printed last.
    pub fn table(&self, h2d: Option<f64>) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "SSB {} | {}", self.label, self.inventory);
        let _ = writeln!(
            s,
            "{:<5} {:>5} {:>9} {:>9} {:>7} {:>12} {:>8} {:>9} {:>5}",
            "query",
            "equal",
            "cpu_ms",
            "gpu_ms",
            "speedup",
            "gpu_rows/s",
            "gpu_GB/s",
            "of_h2d",
            "gpuops"
        );
        for q in &self.queries {
            let secs = q.gpu_ms / 1e3;
            let rows_s = if secs > 0.0 {
                q.lineorder_rows as f64 / secs
            } else {
                0.0
            };
            let gbs = if secs > 0.0 {
                q.bytes_referenced as f64 / secs / 1e9
            } else {
                0.0
            };
            let frac = h2d
                .map(|c| format!("{:.0}%", 100.0 * gbs / c))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "{:<5} {:>5} {:>9.1} {:>9.1} {:>6.2}x {:>12.3e} {:>8.2} {:>9} {:>5}",
                q.query,
                if q.equal { "yes" } else { "NO" },
                q.cpu_ms,
                q.gpu_ms,
                if q.gpu_ms > 0.0 {
                    q.cpu_ms / q.gpu_ms
                } else {
                    0.0
                },
                rows_s,
                gbs,
                frac,
                q.gpu_operators
            );
        }
        s
    }
}

fn find_table(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    for n in names {
        for cand in [dir.join(format!("{n}.parquet")), dir.join(n)] {
            if cand.exists() {
                return Some(cand);
            }
        }
    }
    None
}

/// A session with the rule and the `eddy.*` options registered: the same
/// wiring the server uses.
pub fn gpu_session() -> SessionContext {
    let config = crate::session::with_gpu_options(SessionConfig::new());
    let state = crate::session::with_gpu_rule(
        SessionStateBuilder::new()
            .with_config(config)
            .with_default_features(),
    )
    .build();
    SessionContext::new_with_state(state)
}

/// Rows of `batches` as sorted strings (floats rounded), for comparison.
pub fn canonical_rows(batches: &[RecordBatch]) -> DfResult<Vec<String>> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
            .collect::<Result<Vec<_>, _>>()?;
        for r in 0..b.num_rows() {
            let cells: Vec<String> = fmts
                .iter()
                .map(|f| {
                    let v = f.value(r).to_string();
                    match v.parse::<f64>() {
                        Ok(x) if v.contains('.') || v.contains('e') => format!("{:.9e}", x),
                        _ => v,
                    }
                })
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    Ok(rows)
}

async fn timed(ctx: &SessionContext, sql: &str, runs: usize) -> DfResult<(Vec<RecordBatch>, f64)> {
    let mut out = ctx.sql(sql).await?.collect().await?; // warm-up
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        out = ctx.sql(sql).await?.collect().await?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok((out, times[times.len() / 2]))
}

/// Runs the check. Errors only for setup problems (missing tables, SQL
/// errors); wrong answers are reported, not raised.
pub async fn run(cfg: &CheckConfig) -> DfResult<CheckReport> {
    let ctx = gpu_session();
    let tables: [(&str, &[&str]); 5] = [
        ("lineorder", &["lineorder"]),
        ("customer", &["customer"]),
        ("supplier", &["supplier"]),
        ("part", &["part"]),
        ("dwdate", &["dwdate", "date", "dates", "date1"]),
    ];
    for (name, files) in tables {
        let path = find_table(&cfg.data_dir, files).ok_or_else(|| {
            datafusion::error::DataFusionError::Plan(format!(
                "SSB table {name} not found under {}",
                cfg.data_dir.display()
            ))
        })?;
        ctx.register_parquet(
            name,
            path.to_string_lossy().as_ref(),
            ParquetReadOptions::default(),
        )
        .await?;
        if cfg.in_memory {
            let df = ctx.table(name).await?;
            let schema = df.schema().as_arrow().clone();
            // Round-robin over one partition per core: the Parquet files
            // would give lineorder as many partitions as files (6 at SF1).
            let n = ctx.state().config().target_partitions().max(1);
            let mut parts = vec![Vec::new(); n];
            for (i, b) in df.collect().await?.into_iter().enumerate() {
                parts[i % n].push(b);
            }
            let mem = datafusion::datasource::MemTable::try_new(Arc::new(schema), parts)?;
            ctx.deregister_table(name)?;
            ctx.register_table(name, Arc::new(mem))?;
        }
    }
    let lo_rows = ctx
        .sql("select count(*) from lineorder")
        .await?
        .collect()
        .await?;
    let lineorder_rows = lo_rows
        .first()
        .and_then(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .map(|a| a.value(0) as usize)
        })
        .unwrap_or(0);
    let lo_schema = ctx.table("lineorder").await?.schema().as_arrow().clone();
    let widths: BTreeMap<String, usize> = lo_schema
        .fields()
        .iter()
        .map(|f| {
            (
                f.name().clone(),
                f.data_type().primitive_width().unwrap_or(8),
            )
        })
        .collect();
    let mut queries = Vec::new();
    for (name, sql, cols) in SSB_QUERIES {
        if !cfg.only.is_empty() && !cfg.only.iter().any(|q| q == name) {
            continue;
        }
        ctx.sql("SET eddy.gpu = 'off'").await?.collect().await?;
        let (cpu, cpu_ms) = timed(&ctx, sql, cfg.runs).await?;
        ctx.sql("SET eddy.gpu = 'on'").await?.collect().await?;
        let plan = ctx.sql(sql).await?.create_physical_plan().await?;
        let shown = datafusion::physical_plan::displayable(plan.as_ref())
            .indent(false)
            .to_string();
        let gpu_operators = shown.matches("Gpu").count();
        let (gpu, gpu_ms) = timed(&ctx, sql, cfg.runs).await?;
        if cfg.explain.iter().any(|q| q == name) {
            // Operator times of the GPU plan, for finding where time goes.
            let analyzed = ctx
                .sql(&format!("explain analyze {sql}"))
                .await?
                .collect()
                .await?;
            eprintln!("EXPLAIN ANALYZE {name} (GPU on)");
            for b in &analyzed {
                eprintln!(
                    "{}",
                    arrow::util::pretty::pretty_format_batches(std::slice::from_ref(b))?
                );
            }
        }
        let cpu_rows = canonical_rows(&cpu)?;
        let equal = cpu_rows == canonical_rows(&gpu)?;
        if !equal {
            tracing::error!(query = name, "GPU answer differs from the CPU answer");
        }
        let bytes_referenced = cols
            .iter()
            .map(|c| widths.get(*c).copied().unwrap_or(8) * lineorder_rows)
            .sum();
        queries.push(QueryOutcome {
            query: name.to_string(),
            equal,
            rows: cpu_rows.len(),
            cpu_ms,
            gpu_ms,
            gpu_operators,
            lineorder_rows,
            bytes_referenced,
        });
    }
    ctx.sql("SET eddy.gpu = 'auto'").await?.collect().await?;
    Ok(CheckReport {
        label: if cfg.in_memory {
            format!("{} (in memory)", cfg.label)
        } else {
            cfg.label.clone()
        },
        inventory: crate::discover().to_string(),
        queries,
    })
}
