//! Cross-engine answer checks: the same rows, with float rounding normalised.
//!
//! Cells are compared as text; integers must be equal; when both parse as
//! numbers and one is not an integer they are equal
//! within a relative 1e-6 (absolute 1e-4 near zero), which absorbs float
//! summation order and decimal scale (`0.05` = `0.0500000`). Rows are
//! compared in order first; if that fails they are compared sorted, since
//! queries may order by a column with ties.

use super::QueryRun;

/// True when two cells hold the same value.
pub fn cells_equal(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let (x, y) = (x.trim_end(), y.trim_end());
            if x == y {
                return true;
            }
            // Integers (sums, counts) must match exactly.
            if let (Ok(ix), Ok(iy)) = (x.parse::<i128>(), y.parse::<i128>()) {
                return ix == iy;
            }
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(fx), Ok(fy)) => {
                    let diff = (fx - fy).abs();
                    diff <= 1e-4 || diff <= 1e-6 * fx.abs().max(fy.abs())
                }
                _ => false,
            }
        }
        _ => false,
    }
}

fn rows_equal(a: &[Vec<Option<String>>], b: &[Vec<Option<String>>]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{} rows vs {} rows", a.len(), b.len()));
    }
    for (i, (ra, rb)) in a.iter().zip(b).enumerate() {
        if ra.len() != rb.len() {
            return Some(format!("row {i}: {} columns vs {}", ra.len(), rb.len()));
        }
        if let Some(j) = (0..ra.len()).find(|&j| !cells_equal(&ra[j], &rb[j])) {
            return Some(format!("row {i} column {j}: {:?} vs {:?}", ra[j], rb[j]));
        }
    }
    None
}

fn sort_key(row: &[Option<String>]) -> Vec<String> {
    row.iter()
        .map(|c| match c {
            None => "\u{0}NULL".to_string(),
            Some(s) => match s.trim_end().parse::<f64>() {
                Ok(f) => format!("{:+.5e}", f),
                Err(_) => s.trim_end().to_string(),
            },
        })
        .collect()
}

/// `None` when `b` gives the same answer as `a`, else what differs.
pub fn compare_runs(a: &QueryRun, b: &QueryRun) -> Option<String> {
    let first = rows_equal(&a.rows, &b.rows)?;
    let mut sa = a.rows.clone();
    let mut sb = b.rows.clone();
    sa.sort_by_key(|r| sort_key(r));
    sb.sort_by_key(|r| sort_key(r));
    rows_equal(&sa, &sb).map(|_| first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[&[&str]]) -> QueryRun {
        QueryRun {
            rows: rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|c| {
                            if *c == "NULL" {
                                None
                            } else {
                                Some(c.to_string())
                            }
                        })
                        .collect()
                })
                .collect(),
            ..QueryRun::default()
        }
    }

    #[test]
    fn numbers_match_within_rounding() {
        assert!(cells_equal(
            &Some("0.05".into()),
            &Some("0.0500000000".into())
        ));
        assert!(cells_equal(
            &Some("38273.12973462".into()),
            &Some("38273.129734621".into())
        ));
        assert!(cells_equal(
            &Some("446031974".into()),
            &Some("446031974.0".into())
        ));
        assert!(!cells_equal(
            &Some("446031974".into()),
            &Some("446031975".into())
        ));
        assert!(!cells_equal(&Some("ASIA".into()), &Some("EUROPE".into())));
        assert!(cells_equal(&Some("ASIA  ".into()), &Some("ASIA".into())));
        assert!(!cells_equal(&None, &Some("".into())));
    }

    #[test]
    fn ties_in_another_order_agree() {
        let a = run(&[&["1", "x"], &["1", "y"]]);
        let b = run(&[&["1", "y"], &["1", "x"]]);
        assert_eq!(compare_runs(&a, &b), None);
        let c = run(&[&["1", "y"]]);
        assert!(compare_runs(&a, &c).is_some());
        let d = run(&[&["1", "x"], &["2", "y"]]);
        assert!(compare_runs(&a, &d).is_some());
    }
}
