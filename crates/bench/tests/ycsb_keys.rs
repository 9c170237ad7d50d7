//! YCSB key choosers: range, skew and the shape of the zipfian distribution.

use eddy_bench::ycsb::keys::{fnv64, zeta, KeyChooser, Zipfian, ZIPFIAN_CONSTANT};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const N: u64 = 1_000;
const SAMPLES: usize = 200_000;

fn counts(chooser: &KeyChooser) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut c = vec![0u64; N as usize];
    for _ in 0..SAMPLES {
        let k = chooser.next(&mut rng);
        assert!(k < N, "key {k} out of range");
        c[k as usize] += 1;
    }
    c
}

#[test]
fn zipfian_frequencies_follow_rank_power_law() {
    let z = Zipfian::new(N, ZIPFIAN_CONSTANT);
    let c = counts(&KeyChooser::Zipfian(z.clone()));
    let zn = zeta(N, ZIPFIAN_CONSTANT);
    assert!((z.zetan() - zn).abs() < 1e-9);
    // P(rank i) = 1 / ((i+1)^theta * zeta(n)): exact for ranks 0 and 1 in
    // Gray et al.'s method, an approximation (as in YCSB) beyond.
    for (i, tol) in [(0usize, 0.05), (1, 0.05), (2, 0.25), (9, 0.35), (99, 0.5)] {
        let expect = SAMPLES as f64 / ((i as f64 + 1.0).powf(ZIPFIAN_CONSTANT) * zn);
        let got = c[i] as f64;
        assert!(
            (got - expect).abs() / expect < tol,
            "rank {i}: got {got}, expected {expect:.0}"
        );
    }
    // Popularity falls with rank: each decile of keys gets less than the one before.
    let deciles: Vec<u64> = c.chunks(100).map(|d| d.iter().sum()).collect();
    assert!(deciles.windows(2).all(|w| w[0] > w[1]), "{deciles:?}");
    // The hottest 1% of keys take a large share; uniform would give 1%.
    let head: u64 = c[..10].iter().sum();
    assert!(
        head as f64 / SAMPLES as f64 > 0.35,
        "top-10 share {}",
        head as f64 / SAMPLES as f64
    );
}

#[test]
fn scrambled_zipfian_is_skewed_but_spread() {
    let c = counts(&KeyChooser::ScrambledZipfian(Zipfian::new(
        N,
        ZIPFIAN_CONSTANT,
    )));
    let mut sorted = c.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let top10: u64 = sorted[..10].iter().sum();
    assert!(top10 as f64 / SAMPLES as f64 > 0.3);
    // The hottest key is not key 0 in general: it is fnv(0) mod n.
    let hottest = c
        .iter()
        .enumerate()
        .max_by_key(|(_, v)| **v)
        .map(|(i, _)| i as u64);
    assert_eq!(hottest, Some(fnv64(0) % N));
}

#[test]
fn uniform_is_flat() {
    let c = counts(&KeyChooser::Uniform(N));
    let mean = SAMPLES as f64 / N as f64;
    let max = *c.iter().max().unwrap_or(&0) as f64;
    let min = *c.iter().min().unwrap_or(&0) as f64;
    assert!(
        max < mean * 1.6 && min > mean * 0.4,
        "min {min} max {max} mean {mean}"
    );
}

#[test]
fn degenerate_sizes_stay_in_range() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for n in [1u64, 2, 3] {
        let z = KeyChooser::ScrambledZipfian(Zipfian::new(n, ZIPFIAN_CONSTANT));
        let zz = KeyChooser::Zipfian(Zipfian::new(n, ZIPFIAN_CONSTANT));
        for _ in 0..1000 {
            assert!(z.next(&mut rng) < n);
            assert!(zz.next(&mut rng) < n);
        }
    }
}

#[test]
fn usertable_rows_are_deterministic_csv() {
    let mut a = Vec::new();
    let mut b = Vec::new();
    eddy_bench::ycsb::rows_csv(5, 8, &mut a);
    eddy_bench::ycsb::rows_csv(5, 8, &mut b);
    assert_eq!(a, b);
    let text = String::from_utf8(a).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    let cells: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(cells.len(), 11);
    assert_eq!(cells[0], "5");
    assert!(cells[1..].iter().all(|c| c.len() == 100));
    assert!(eddy_bench::ycsb::create_table_sql().contains("ycsb_key BIGINT PRIMARY KEY"));
}
