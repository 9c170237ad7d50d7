//! SSB generator: determinism, thread-count independence, cardinalities,
//! value domains and the standard selectivity of Q1.1.

use std::collections::HashSet;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int32Type, Int64Type};
use eddy_bench::dataset::{write_dataset, Manifest, WriteOptions};
use eddy_bench::ssb::{self, SsbGenerator, SsbOptions};

fn small(seed: u64) -> SsbGenerator {
    let gen = SsbGenerator::new(SsbOptions {
        sf: 0.01,
        seed,
        orders_per_chunk: 4_000,
        dim_rows_per_chunk: 700,
        batch_rows: 5_000,
    });
    match gen {
        Ok(g) => g,
        Err(e) => panic!("options rejected: {e}"),
    }
}

fn must_table(gen: &SsbGenerator, table: &'static str) -> Vec<RecordBatch> {
    match gen.generate_table(table) {
        Ok(b) => b,
        Err(e) => panic!("generating {table}: {e}"),
    }
}

fn i32_col(batches: &[RecordBatch], name: &str) -> Vec<i32> {
    batches
        .iter()
        .flat_map(|b| {
            let col = b
                .column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"));
            col.as_primitive::<Int32Type>().values().to_vec()
        })
        .collect()
}

fn str_col(batches: &[RecordBatch], name: &str) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| {
            let col = b
                .column_by_name(name)
                .unwrap_or_else(|| panic!("no column {name}"));
            let s = col.as_string::<i32>();
            (0..s.len())
                .map(|i| s.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

fn dir_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for table in ssb::TABLES {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(table))
            .unwrap_or_else(|e| panic!("read_dir {table}: {e}"))
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .collect();
        names.sort();
        for p in names {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
            out.push((
                p.strip_prefix(dir)
                    .map(|r| r.display().to_string())
                    .unwrap_or_default(),
                bytes,
            ));
        }
    }
    out
}

#[test]
fn output_is_identical_for_any_thread_count() {
    let gen = small(7);
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let m1 = write_dataset(
        &gen,
        a.path(),
        &WriteOptions {
            threads: 1,
            progress: false,
        },
    )
    .expect("gen 1");
    let m3 = write_dataset(
        &gen,
        b.path(),
        &WriteOptions {
            threads: 3,
            progress: false,
        },
    )
    .expect("gen 3");
    assert_eq!(m1, m3);
    assert!(
        m1.tables["lineorder"].files.len() >= 4,
        "several lineorder chunks expected"
    );
    let fa = dir_files(a.path());
    let fb = dir_files(b.path());
    assert_eq!(fa.len(), fb.len());
    for ((na, ba), (nb, bb)) in fa.iter().zip(&fb) {
        assert_eq!(na, nb);
        assert!(ba == bb, "{na} differs between 1 and 3 threads");
    }
    assert_eq!(Manifest::load(a.path()).as_ref(), Some(&m1));
}

#[test]
fn same_seed_same_rows_other_seed_other_rows() {
    let x = must_table(&small(1), "lineorder");
    let y = must_table(&small(1), "lineorder");
    let z = must_table(&small(2), "lineorder");
    assert_eq!(x, y);
    assert_ne!(i32_col(&x, "lo_custkey"), i32_col(&z, "lo_custkey"));
}

#[test]
fn cardinalities_scale_with_sf() {
    let gen = small(0);
    assert_eq!(rows(&must_table(&gen, "customer")), 300);
    assert_eq!(rows(&must_table(&gen, "supplier")), 20);
    assert_eq!(rows(&must_table(&gen, "part")), 2_000);
    assert_eq!(rows(&must_table(&gen, "date")), 2_556);
    let lo = must_table(&gen, "lineorder");
    let n = rows(&lo);
    // 15,000 orders of 1..=7 lines: about 60,000 rows.
    assert!((57_000..=63_000).contains(&n), "lineorder rows {n}");
    let keys: HashSet<i64> = lo
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    assert_eq!(keys.len(), 15_000);
    assert!(i32_col(&lo, "lo_linenumber")
        .iter()
        .all(|l| (1..=7).contains(l)));
    assert_eq!(ssb::part_count(1.0), 200_000);
    assert_eq!(ssb::part_count(10.0), 800_000);
    assert_eq!(ssb::order_count(10.0), 15_000_000);
    assert_eq!(ssb::customer_count(10.0), 300_000);
    assert_eq!(ssb::supplier_count(10.0), 20_000);
}

#[test]
fn value_domains_follow_dbgen() {
    let gen = small(3);
    let lo = must_table(&gen, "lineorder");
    assert!(i32_col(&lo, "lo_discount")
        .iter()
        .all(|d| (0..=10).contains(d)));
    assert!(i32_col(&lo, "lo_quantity")
        .iter()
        .all(|q| (1..=50).contains(q)));
    assert!(i32_col(&lo, "lo_tax").iter().all(|t| (0..=8).contains(t)));
    assert!(i32_col(&lo, "lo_orderdate")
        .iter()
        .all(|d| (19920101..=19980802).contains(d)));
    assert!(i32_col(&lo, "lo_custkey")
        .iter()
        .all(|c| (1..=300).contains(c) && c % 3 != 0));
    let supply = i32_col(&lo, "lo_supplycost");
    let rev = i32_col(&lo, "lo_revenue");
    let ext = i32_col(&lo, "lo_extendedprice");
    let disc = i32_col(&lo, "lo_discount");
    for i in 0..ext.len() {
        assert_eq!(rev[i] as i64, ext[i] as i64 * (100 - disc[i] as i64) / 100);
        assert!(supply[i] > 0);
    }

    let date = must_table(&gen, "date");
    let years = i32_col(&date, "d_year");
    assert!(years.iter().all(|y| (1992..=1998).contains(y)));
    let keys = i32_col(&date, "d_datekey");
    assert_eq!(keys.first(), Some(&19920101));
    assert_eq!(keys.last(), Some(&19981230));
    assert!(str_col(&date, "d_yearmonth").iter().any(|s| s == "Dec1997"));
    let weeks = i32_col(&date, "d_weeknuminyear");
    let week6_1994 = years
        .iter()
        .zip(&weeks)
        .filter(|(y, w)| **y == 1994 && **w == 6)
        .count();
    assert_eq!(week6_1994, 7);
    let leap = keys.iter().filter(|k| **k == 19960229).count();
    assert_eq!(leap, 1);

    let part = must_table(&gen, "part");
    for ((m, c), b) in str_col(&part, "p_mfgr")
        .iter()
        .zip(str_col(&part, "p_category"))
        .zip(str_col(&part, "p_brand1"))
    {
        assert!(m.len() == 6 && m.starts_with("MFGR#"), "mfgr {m}");
        assert!(c.len() == 7 && c.starts_with(m.as_str()), "category {c}");
        assert!(b.len() == 9 && b.starts_with(c.as_str()), "brand {b}");
        let brand: u32 = b[7..].parse().unwrap_or(0);
        assert!((1..=40).contains(&brand), "brand {b}");
    }
    let cust = must_table(&gen, "customer");
    for (city, nation) in str_col(&cust, "c_city")
        .iter()
        .zip(str_col(&cust, "c_nation"))
    {
        assert_eq!(city.len(), 10, "city {city:?}");
        let prefix: String = nation.chars().take(9).collect();
        assert_eq!(city[..9].trim_end(), prefix.trim_end());
    }
    assert!(str_col(&cust, "c_region")
        .iter()
        .all(|r| ssb::gen::REGIONS.contains(&r.as_str())));
}

/// Q1.1's filter: d_year = 1993, discount 1..=3, quantity < 25 selects about
/// 1/7 x 3/11 x 24/50 = 1.9% of lineorder.
#[test]
fn q1_1_selectivity_matches_the_standard() {
    let lo = must_table(&small(11), "lineorder");
    let dates = i32_col(&lo, "lo_orderdate");
    let disc = i32_col(&lo, "lo_discount");
    let qty = i32_col(&lo, "lo_quantity");
    let hits = (0..dates.len())
        .filter(|&i| dates[i] / 10000 == 1993 && (1..=3).contains(&disc[i]) && qty[i] < 25)
        .count();
    let sel = hits as f64 / dates.len() as f64;
    assert!((0.016..=0.023).contains(&sel), "Q1.1 selectivity {sel}");
}

#[test]
fn bad_options_are_errors_not_panics() {
    assert!(SsbGenerator::new(SsbOptions {
        sf: 0.0,
        ..SsbOptions::default()
    })
    .is_err());
    assert!(SsbGenerator::new(SsbOptions {
        sf: f64::NAN,
        ..SsbOptions::default()
    })
    .is_err());
    assert!(SsbGenerator::schema("nope").is_err());
    assert_eq!(ssb::queries::QUERIES.len(), 13);
    assert!(ssb::queries::query("q4.3").is_some_and(|q| q.contains("MFGR#14")));
}
