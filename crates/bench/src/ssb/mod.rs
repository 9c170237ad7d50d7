//! The Star Schema Benchmark (O'Neil, O'Neil, Chen, rev. 3): generator, schema and queries.
//!
//! Tables (names as in the specification; the date dimension is `date`):
//!
//! | table     | rows                                   |
//! |-----------|----------------------------------------|
//! | lineorder | 1..7 lines for each of 1.5M x SF orders (about 6M x SF) |
//! | customer  | 30k x SF                               |
//! | supplier  | 2k x SF                                |
//! | part      | 200k x floor(1 + log2 SF) (200k x SF below SF 1) |
//! | date      | 2556 days from 1992-01-01, as the classic `dbgen` |
//!
//! Value domains follow `dbgen` so the 13 standard queries keep their
//! standard selectivities; see [`gen`] for the per-column rules and
//! [`queries`] for the query texts.

pub mod gen;
pub mod queries;

pub use gen::{SsbGenerator, SsbOptions};

/// The SSB tables, fact table first.
pub const TABLES: [&str; 5] = ["lineorder", "customer", "supplier", "part", "date"];

/// The fact table whose rows define rows/s.
pub const FACT_TABLE: &str = "lineorder";

/// Orders at scale factor `sf` (each has 1..7 lineorder rows).
pub fn order_count(sf: f64) -> u64 {
    ((1_500_000.0 * sf).round() as u64).max(1)
}

/// Customers at scale factor `sf`.
pub fn customer_count(sf: f64) -> u64 {
    ((30_000.0 * sf).round() as u64).max(1)
}

/// Suppliers at scale factor `sf`.
pub fn supplier_count(sf: f64) -> u64 {
    ((2_000.0 * sf).round() as u64).max(1)
}

/// Parts at scale factor `sf`: 200k x floor(1 + log2 SF), linear below SF 1.
pub fn part_count(sf: f64) -> u64 {
    if sf >= 1.0 {
        200_000 * (1.0 + sf.log2()).floor() as u64
    } else {
        ((200_000.0 * sf).round() as u64).max(1)
    }
}

/// Days in the date dimension (as `dbgen`: 1992-01-01 .. 1998-12-30).
pub const DATE_ROWS: u64 = 2556;
