//! TPC-H: data through the `tpchgen` / `tpchgen-arrow` crates (dbgen-identical
//! output), written to Parquet in the same layout as SSB, and the 22 queries.
//!
//! Each table is split into `tpchgen` parts; part `p` of `n` is generated
//! independently, so the files do not depend on the thread count.

pub mod queries;

use arrow::array::RecordBatch;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

use crate::dataset::{ChunkJob, ChunkSource};
use crate::error::{BenchError, Result};

/// The TPC-H tables, fact table first.
pub const TABLES: [&str; 8] = [
    "lineitem", "orders", "partsupp", "part", "customer", "supplier", "nation", "region",
];

/// The fact table whose rows define rows/s.
pub const FACT_TABLE: &str = "lineitem";

/// Rows per record batch.
const BATCH_ROWS: usize = 65_536;

/// The TPC-H generator; a [`ChunkSource`].
#[derive(Debug, Clone)]
pub struct TpchGenerator {
    sf: f64,
}

impl TpchGenerator {
    /// A generator at scale factor `sf` (> 0).
    pub fn new(sf: f64) -> Result<Self> {
        if !(sf > 0.0 && sf.is_finite()) {
            return Err(BenchError::InvalidArgument(format!(
                "scale factor must be positive, got {sf}"
            )));
        }
        Ok(TpchGenerator { sf })
    }

    /// (parts, rows of the whole table) of a table.
    fn layout(&self, table: &str) -> (i32, u64) {
        let sf = self.sf;
        let rows = |base: f64| ((base * sf) as u64).max(1);
        let parts_for = |r: u64, per: u64| (r.div_ceil(per)).clamp(1, 10_000) as i32;
        match table {
            "lineitem" => {
                let r = rows(6_001_215.0);
                (parts_for(r, 1_500_000), r)
            }
            "orders" => {
                let r = rows(1_500_000.0);
                (parts_for(r, 2_000_000), r)
            }
            "partsupp" => {
                let r = rows(800_000.0);
                (parts_for(r, 2_000_000), r)
            }
            "part" => (parts_for(rows(200_000.0), 2_000_000), rows(200_000.0)),
            "customer" => (parts_for(rows(150_000.0), 2_000_000), rows(150_000.0)),
            "supplier" => (1, rows(10_000.0)),
            "nation" => (1, 25),
            "region" => (1, 5),
            _ => (1, 0),
        }
    }

    /// Generates one whole table in memory (tests).
    pub fn generate_table(&self, table: &'static str) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for job in self.jobs().into_iter().filter(|j| j.table == table) {
            self.generate(&job, &mut |b| {
                out.push(b);
                Ok(())
            })?;
        }
        Ok(out)
    }
}

fn drain<I>(it: I, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()>
where
    I: Iterator<Item = std::result::Result<RecordBatch, arrow::error::ArrowError>>,
{
    for b in it {
        sink(b?)?;
    }
    Ok(())
}

impl ChunkSource for TpchGenerator {
    fn benchmark(&self) -> &'static str {
        "tpch"
    }

    fn scale_factor(&self) -> f64 {
        self.sf
    }

    fn seed(&self) -> u64 {
        0
    }

    fn jobs(&self) -> Vec<ChunkJob> {
        let mut jobs = Vec::new();
        for table in TABLES {
            let (parts, rows) = self.layout(table);
            for p in 0..parts {
                jobs.push(ChunkJob {
                    table,
                    chunk: p as usize,
                    est_rows: rows / parts as u64,
                });
            }
        }
        jobs
    }

    fn generate(
        &self,
        job: &ChunkJob,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let (parts, _) = self.layout(job.table);
        let part = job.chunk as i32 + 1;
        let sf = self.sf;
        match job.table {
            "lineitem" => drain(
                LineItemArrow::new(LineItemGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH_ROWS),
                sink,
            ),
            "orders" => drain(
                OrderArrow::new(OrderGenerator::new(sf, part, parts)).with_batch_size(BATCH_ROWS),
                sink,
            ),
            "partsupp" => drain(
                PartSuppArrow::new(PartSuppGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH_ROWS),
                sink,
            ),
            "part" => drain(
                PartArrow::new(PartGenerator::new(sf, part, parts)).with_batch_size(BATCH_ROWS),
                sink,
            ),
            "customer" => drain(
                CustomerArrow::new(CustomerGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH_ROWS),
                sink,
            ),
            "supplier" => drain(
                SupplierArrow::new(SupplierGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH_ROWS),
                sink,
            ),
            "nation" => drain(
                NationArrow::new(NationGenerator::new(sf, part, parts)).with_batch_size(BATCH_ROWS),
                sink,
            ),
            "region" => drain(
                RegionArrow::new(RegionGenerator::new(sf, part, parts)).with_batch_size(BATCH_ROWS),
                sink,
            ),
            other => Err(BenchError::InvalidArgument(format!(
                "no TPC-H table `{other}`"
            ))),
        }
    }
}
