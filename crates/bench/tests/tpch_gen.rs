//! TPC-H generation through tpchgen: cardinalities, part-independence and query texts.

use eddy_bench::dataset::{write_dataset, WriteOptions};
use eddy_bench::tpch::{queries, TpchGenerator, TABLES};

#[test]
fn small_scale_factor_has_tpch_cardinalities() {
    let gen = TpchGenerator::new(0.01).expect("sf");
    let dir = tempfile::tempdir().expect("tempdir");
    let m = write_dataset(
        &gen,
        dir.path(),
        &WriteOptions {
            threads: 2,
            progress: false,
        },
    )
    .expect("generate");
    assert_eq!(m.tables.len(), TABLES.len());
    assert_eq!(m.tables["region"].rows, 5);
    assert_eq!(m.tables["nation"].rows, 25);
    assert_eq!(m.tables["supplier"].rows, 100);
    assert_eq!(m.tables["customer"].rows, 1_500);
    assert_eq!(m.tables["part"].rows, 2_000);
    assert_eq!(m.tables["partsupp"].rows, 8_000);
    assert_eq!(m.tables["orders"].rows, 15_000);
    let li = m.tables["lineitem"].rows;
    assert!((55_000..=65_000).contains(&li), "lineitem {li}");
    assert!(m.table_bytes("lineitem") > 0);
}

#[test]
fn queries_are_complete_and_parameterised() {
    let q = queries::queries(10.0);
    assert_eq!(q.len(), 22);
    assert!(q
        .iter()
        .all(|(_, s)| !s.contains(":fraction") && s.to_lowercase().contains("select")));
    let q11 = &q[10].1;
    assert!(q11.contains("0.0000100000"), "{q11}");
    assert!(!q[14].1.to_lowercase().contains("create view"));
}

#[test]
fn bad_scale_factor_is_an_error() {
    assert!(TpchGenerator::new(-1.0).is_err());
}
