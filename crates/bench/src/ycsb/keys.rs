//! YCSB key choosers: uniform, zipfian (Gray et al., as YCSB's `ZipfianGenerator`)
//! and scrambled zipfian (YCSB's default: the hot keys spread over the key space).

use rand::Rng;

/// YCSB's default zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Zipfian over `0..items`: item 0 most popular, then 1, ...
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

/// sum_{i=1..n} 1 / i^theta.
pub fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    /// A zipfian chooser over `items` (>= 1) with constant `theta` in (0, 1).
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        let zetan = zeta(items, theta);
        let zeta2 = zeta(2, theta);
        let eta = if items > 1 {
            (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            0.0
        };
        Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    /// The normalising constant zeta(items, theta).
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// The next rank in `0..items`.
    pub fn next<R: Rng>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }

    /// The constant theta.
    pub fn theta(&self) -> f64 {
        self.theta
    }
}

/// FNV-1a 64-bit of a u64's little-endian bytes (YCSB's `fnvhash64`).
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// How keys are chosen.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// Uniform over `0..n`.
    Uniform(u64),
    /// Zipfian by rank (key 0 hottest).
    Zipfian(Zipfian),
    /// Zipfian ranks hashed over the key space (YCSB's default).
    ScrambledZipfian(Zipfian),
}

impl KeyChooser {
    /// The next key in `0..n`.
    pub fn next<R: Rng>(&self, rng: &mut R) -> u64 {
        match self {
            KeyChooser::Uniform(n) => rng.random_range(0..(*n).max(1)),
            KeyChooser::Zipfian(z) => z.next(rng),
            KeyChooser::ScrambledZipfian(z) => fnv64(z.next(rng)) % z.items,
        }
    }
}
