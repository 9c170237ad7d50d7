//! What a view's commits report to `/metrics` and the console: commits,
//! rows written, source rows and late rows covered, and freshness (source
//! row arrival at the view operator to the commit that shows it).

use crate::view_op::Pending;

/// What a view's commits report to `/metrics`.
pub struct ViewStats {
    inner: parking_lot::Mutex<StatsInner>,
}

struct StatsInner {
    commits: u64,
    rows_written: u64,
    source_rows: u64,
    late_rows: u64,
    held_rows: u64,
    /// Microseconds from a source row's arrival at the view operator to
    /// the commit that made its effect visible.
    freshness: Option<hdrhistogram::Histogram<u64>>,
}

/// A snapshot of [`ViewStats`].
#[derive(Debug, Clone, Default)]
pub struct ViewStatsReport {
    pub commits: u64,
    pub rows_written: u64,
    pub source_rows: u64,
    /// Source rows dropped as late up to the last commit.
    pub late_rows: u64,
    /// Source rows a join of two sources held at the last commit (its
    /// state: an equi-join's grows with its input).
    pub held_rows: u64,
    /// (quantile, seconds) of the freshness distribution since start.
    pub freshness: Vec<(f64, f64)>,
    pub freshness_count: u64,
}

impl Default for ViewStats {
    fn default() -> Self {
        ViewStats {
            inner: parking_lot::Mutex::new(StatsInner {
                commits: 0,
                rows_written: 0,
                source_rows: 0,
                late_rows: 0,
                held_rows: 0,
                freshness: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).ok(),
            }),
        }
    }
}

impl ViewStats {
    pub(crate) fn record(&self, p: &Pending, rows_written: usize, committed_at: i64) {
        let mut s = self.inner.lock();
        s.commits += 1;
        s.rows_written += rows_written as u64;
        s.source_rows = p.source_rows;
        s.late_rows = p.late_rows;
        s.held_rows = p.held_rows;
        if let Some(h) = s.freshness.as_mut() {
            for (arrived, rows) in &p.arrivals {
                let micros = u64::try_from(committed_at.saturating_sub(*arrived)).unwrap_or(0);
                let _ = h.record_n(micros.clamp(1, 3_600_000_000), *rows);
            }
        }
    }

    /// The figures so far.
    pub fn report(&self) -> ViewStatsReport {
        let s = self.inner.lock();
        let (freshness, freshness_count) = match &s.freshness {
            Some(h) if !h.is_empty() => (
                [0.5, 0.9, 0.99, 0.999]
                    .iter()
                    .map(|q| (*q, h.value_at_quantile(*q) as f64 / 1e6))
                    .collect(),
                h.len(),
            ),
            _ => (Vec::new(), 0),
        };
        ViewStatsReport {
            commits: s.commits,
            rows_written: s.rows_written,
            source_rows: s.source_rows,
            late_rows: s.late_rows,
            held_rows: s.held_rows,
            freshness,
            freshness_count,
        }
    }
}
