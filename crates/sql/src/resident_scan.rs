//! Eddy's scan as a source of device-resident columns
//! (`eddy_gpu::resident`): a GPU operator whose fact input is an
//! [`EddyScanExec`] reads the scan's immutable pieces (whole row groups of
//! column files, `ScanPartition::immutable_rows`) from device memory kept
//! between queries instead of running the scan.
//!
//! A partition is offered only when every unit it scans is such a piece
//! (or known empty), and then exactly those units: the rows are the ones
//! the scan's partition would produce, so the GPU operator's CPU fallback
//! for that partition reads the same rows.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::physical_plan::ExecutionPlan;
use eddy_gpu::resident::{ResidentPiece, ResidentSource};
use eddy_storage::{ImmutableRows, ScanPartition};

use crate::provider::EddyScanExec;

/// Registered with `eddy_gpu::resident::set_resolver`: the resident
/// source of `plan` when it is an Eddy scan that applies no filter or
/// limit of its own.
pub fn resident_source(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ResidentSource>> {
    let scan = plan.downcast_ref::<EddyScanExec>()?;
    let units = scan.whole_units()?;
    Some(Arc::new(ScanPieces {
        groups: units.groups.to_vec(),
        wanted: Arc::new(units.wanted.to_vec()),
        ncols: units.ncols,
    }))
}

struct ScanPieces {
    groups: Vec<Vec<Arc<ScanPartition>>>,
    wanted: Arc<Vec<usize>>,
    ncols: usize,
}

impl std::fmt::Debug for ScanPieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanPieces")
            .field("partitions", &self.groups.len())
            .field("wanted", &self.wanted)
            .finish()
    }
}

impl ResidentSource for ScanPieces {
    fn pieces(&self, partition: usize) -> Option<Vec<Arc<dyn ResidentPiece>>> {
        let Some(units) = self.groups.get(partition) else {
            // The scan reads nothing for a partition past its groups.
            return Some(Vec::new());
        };
        let mut out: Vec<Arc<dyn ResidentPiece>> = Vec::with_capacity(units.len());
        for unit in units {
            if unit.is_known_empty() {
                continue;
            }
            let id = unit.immutable_rows()?;
            let rows = usize::try_from(id.rows).ok()?;
            out.push(Arc::new(ScanPiece {
                unit: Arc::clone(unit),
                id,
                rows,
                wanted: Arc::clone(&self.wanted),
                ncols: self.ncols,
            }));
        }
        Some(out)
    }
}

struct ScanPiece {
    unit: Arc<ScanPartition>,
    id: ImmutableRows,
    rows: usize,
    wanted: Arc<Vec<usize>>,
    ncols: usize,
}

impl ScanPiece {
    /// The table column behind output column `column`; None for the key.
    fn table_column(&self, column: usize) -> Option<usize> {
        self.wanted.get(column).copied().filter(|&c| c < self.ncols)
    }
}

impl ResidentPiece for ScanPiece {
    fn rows(&self) -> usize {
        self.rows
    }

    fn column_key(&self, column: usize) -> Option<Vec<u64>> {
        let c = self.table_column(column)?;
        Some(vec![
            self.id.table,
            u64::from(self.id.schema_version),
            self.id.file,
            self.id.groups.start as u64,
            self.id.groups.end as u64,
            c as u64,
        ])
    }

    fn read_column(&self, column: usize) -> Result<ArrayRef, String> {
        let c = self
            .table_column(column)
            .ok_or_else(|| format!("output column {column} is not a stored column"))?;
        let mut batches = self
            .unit
            .scan(Some(&[c]), false, &|_| true)
            .map_err(|e| e.to_string())?
            .map(|b| b.map(|b| Arc::clone(b.column(0))))
            .collect::<Result<Vec<ArrayRef>, _>>()
            .map_err(|e| e.to_string())?;
        if batches.len() == 1 {
            return batches.pop().ok_or_else(|| "no batch".to_string());
        }
        let parts: Vec<&dyn datafusion::arrow::array::Array> =
            batches.iter().map(|a| a.as_ref()).collect();
        if parts.is_empty() {
            return Err("a resident piece read no batch".into());
        }
        datafusion::arrow::compute::concat(&parts).map_err(|e| e.to_string())
    }
}
