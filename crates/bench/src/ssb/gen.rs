//! SSB data generator: `dbgen`-compatible value domains, chunked and seeded per chunk.
//!
//! Invariant: the rows of chunk `c` of table `t` depend only on (seed, t, c)
//! and the scale factor, never on the thread that generates them, so the
//! output is identical for any thread count.
//!
//! Column rules (after `dbgen` for SSB, itself derived from TPC-H's):
//! * `lo_orderkey` is TPC-H's sparse order key (8 of every 32 keys used);
//!   each order has 1..=7 lines; `lo_custkey` is uniform over customers
//!   whose key is not a multiple of 3 (TPC-H's "dead" customers);
//! * `lo_orderdate` uniform over 1992-01-01 .. 1998-08-02 (the last order
//!   date that leaves room for shipping), `lo_commitdate` 30..=90 days later;
//! * `lo_quantity` 1..=50, `lo_discount` 0..=10, `lo_tax` 0..=8;
//!   `lo_extendedprice` = quantity x the part's retail price in cents,
//!   `lo_revenue` = extendedprice x (100 - discount) / 100,
//!   `lo_supplycost` = 6/10 of the retail price, `lo_ordtotalprice` the
//!   order's sum of discounted, taxed line prices;
//! * cities are the first 9 letters of the nation padded with spaces plus a
//!   digit (`UNITED KI1`); `p_mfgr` `MFGR#1..5`, `p_category` `MFGR#11..55`,
//!   `p_brand1` category + `01..40` (`MFGR#1101`);
//! * the date dimension has every `d_*` column of the specification,
//!   `d_weeknuminyear` = (day of year - 1) / 7 + 1.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Builder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{customer_count, order_count, part_count, supplier_count, DATE_ROWS};
use crate::dataset::{ChunkJob, ChunkSource};
use crate::error::{BenchError, Result};

/// The 25 TPC-H nations: (name, region index).
pub const NATIONS: [(&str, usize); 25] = [
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
];

/// The 5 TPC-H regions.
pub const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];

const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "MACHINERY",
    "HOUSEHOLD",
];
const PRIORITIES: [&str; 5] = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];
const SHIPMODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const TYPE_S1: [&str; 6] = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"];
const TYPE_S2: [&str; 5] = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"];
const TYPE_S3: [&str; 5] = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"];
const CONTAINER_S1: [&str; 5] = ["SM", "LG", "MED", "JUMBO", "WRAP"];
const CONTAINER_S2: [&str; 8] = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"];
const COLORS: [&str; 92] = [
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Last order date as a day index from 1992-01-01 (dbgen: end - 121 - 30 - 1).
const ORDERDATE_MAX_DAY: i32 = 2557 - 151 - 1;

/// Options of the SSB generator.
#[derive(Debug, Clone)]
pub struct SsbOptions {
    /// Scale factor (> 0; fractions such as 0.01 scale every table but `date`).
    pub sf: f64,
    /// Seed of every chunk RNG.
    pub seed: u64,
    /// Orders per lineorder chunk (= file).
    pub orders_per_chunk: u64,
    /// Rows per dimension chunk (= file).
    pub dim_rows_per_chunk: u64,
    /// Rows per record batch.
    pub batch_rows: usize,
}

impl Default for SsbOptions {
    fn default() -> Self {
        SsbOptions {
            sf: 1.0,
            seed: 0,
            orders_per_chunk: 250_000,
            dim_rows_per_chunk: 500_000,
            batch_rows: 65_536,
        }
    }
}

/// The SSB generator; a [`ChunkSource`] for [`crate::dataset::write_dataset`].
#[derive(Debug, Clone)]
pub struct SsbGenerator {
    opts: SsbOptions,
}

impl SsbGenerator {
    /// Validates the options.
    pub fn new(opts: SsbOptions) -> Result<Self> {
        if !(opts.sf > 0.0 && opts.sf.is_finite()) {
            return Err(BenchError::InvalidArgument(format!(
                "scale factor must be positive, got {}",
                opts.sf
            )));
        }
        if opts.orders_per_chunk == 0 || opts.dim_rows_per_chunk == 0 || opts.batch_rows == 0 {
            return Err(BenchError::InvalidArgument(
                "chunk and batch sizes must be positive".into(),
            ));
        }
        Ok(SsbGenerator { opts })
    }

    /// The options.
    pub fn options(&self) -> &SsbOptions {
        &self.opts
    }

    /// Arrow schema of an SSB table.
    pub fn schema(table: &str) -> Result<SchemaRef> {
        let i32f = |n: &str| Field::new(n, DataType::Int32, false);
        let strf = |n: &str| Field::new(n, DataType::Utf8, false);
        let fields = match table {
            "lineorder" => vec![
                Field::new("lo_orderkey", DataType::Int64, false),
                i32f("lo_linenumber"),
                i32f("lo_custkey"),
                i32f("lo_partkey"),
                i32f("lo_suppkey"),
                i32f("lo_orderdate"),
                strf("lo_orderpriority"),
                strf("lo_shippriority"),
                i32f("lo_quantity"),
                i32f("lo_extendedprice"),
                i32f("lo_ordtotalprice"),
                i32f("lo_discount"),
                i32f("lo_revenue"),
                i32f("lo_supplycost"),
                i32f("lo_tax"),
                i32f("lo_commitdate"),
                strf("lo_shipmode"),
            ],
            "customer" => vec![
                i32f("c_custkey"),
                strf("c_name"),
                strf("c_address"),
                strf("c_city"),
                strf("c_nation"),
                strf("c_region"),
                strf("c_phone"),
                strf("c_mktsegment"),
            ],
            "supplier" => vec![
                i32f("s_suppkey"),
                strf("s_name"),
                strf("s_address"),
                strf("s_city"),
                strf("s_nation"),
                strf("s_region"),
                strf("s_phone"),
            ],
            "part" => vec![
                i32f("p_partkey"),
                strf("p_name"),
                strf("p_mfgr"),
                strf("p_category"),
                strf("p_brand1"),
                strf("p_color"),
                strf("p_type"),
                i32f("p_size"),
                strf("p_container"),
            ],
            "date" => vec![
                i32f("d_datekey"),
                strf("d_date"),
                strf("d_dayofweek"),
                strf("d_month"),
                i32f("d_year"),
                i32f("d_yearmonthnum"),
                strf("d_yearmonth"),
                i32f("d_daynuminweek"),
                i32f("d_daynuminmonth"),
                i32f("d_daynuminyear"),
                i32f("d_monthnuminyear"),
                i32f("d_weeknuminyear"),
                strf("d_sellingseason"),
                i32f("d_lastdayinweekfl"),
                i32f("d_lastdayinmonthfl"),
                i32f("d_holidayfl"),
                i32f("d_weekdayfl"),
            ],
            other => {
                return Err(BenchError::InvalidArgument(format!(
                    "no SSB table `{other}`"
                )));
            }
        };
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Rows of a table at this scale factor (lineorder: the number of orders x 4, an estimate).
    pub fn table_rows(&self, table: &str) -> u64 {
        let sf = self.opts.sf;
        match table {
            "lineorder" => order_count(sf) * 4,
            "customer" => customer_count(sf),
            "supplier" => supplier_count(sf),
            "part" => part_count(sf),
            "date" => DATE_ROWS,
            _ => 0,
        }
    }

    /// Generates one whole table in memory (tests, small scale factors).
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

    fn rng(&self, table_id: u64, chunk: usize) -> ChaCha8Rng {
        let mut x = splitmix64(self.opts.seed ^ 0x5353_4221_0000_0000);
        x = splitmix64(x ^ table_id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        x = splitmix64(x ^ chunk as u64);
        ChaCha8Rng::seed_from_u64(x)
    }

    fn chunk_range(total: u64, per: u64, chunk: usize) -> (u64, u64) {
        let start = chunk as u64 * per;
        (start, (start + per).min(total))
    }

    fn gen_lineorder(
        &self,
        chunk: usize,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let sf = self.opts.sf;
        let (start, end) = Self::chunk_range(order_count(sf), self.opts.orders_per_chunk, chunk);
        let customers = customer_count(sf) as i64;
        let parts = part_count(sf) as i64;
        let suppliers = supplier_count(sf) as i64;
        let day_keys = date_keys();
        let mut rng = self.rng(1, chunk);
        let schema = Self::schema("lineorder")?;
        let mut b = LineorderBuilders::new(self.opts.batch_rows + 8);
        for index in start..end {
            let okey = sparse_order_key(index + 1);
            let mut custkey = rng.random_range(1..=customers);
            let mut delta = 1i64;
            let mut guard = 0;
            while custkey % 3 == 0 && guard < 8 {
                custkey = (custkey + delta).clamp(1, customers);
                delta = -delta;
                guard += 1;
            }
            let orderday = rng.random_range(0..=ORDERDATE_MAX_DAY);
            let priority = PRIORITIES[rng.random_range(0..PRIORITIES.len())];
            let lines = rng.random_range(1..=7);
            let first_row = b.rows;
            let mut total: i64 = 0;
            for line in 1..=lines {
                let partkey = rng.random_range(1..=parts);
                let suppkey = rng.random_range(1..=suppliers);
                let quantity: i64 = rng.random_range(1..=50);
                let discount: i64 = rng.random_range(0..=10);
                let tax: i64 = rng.random_range(0..=8);
                let commit = orderday + rng.random_range(30..=90);
                let shipmode = SHIPMODES[rng.random_range(0..SHIPMODES.len())];
                let rprice = retail_price_cents(partkey);
                let eprice = quantity * rprice;
                let revenue = eprice * (100 - discount) / 100;
                total += revenue * (100 + tax) / 100;
                b.orderkey.append_value(okey as i64);
                b.linenumber.append_value(line);
                b.custkey.append_value(custkey as i32);
                b.partkey.append_value(partkey as i32);
                b.suppkey.append_value(suppkey as i32);
                b.orderdate.append_value(day_keys[orderday as usize]);
                b.orderpriority.append_value(priority);
                b.shippriority.append_value("0");
                b.quantity.append_value(quantity as i32);
                b.extendedprice.append_value(eprice as i32);
                b.discount.append_value(discount as i32);
                b.revenue.append_value(revenue as i32);
                b.supplycost.append_value((6 * rprice / 10) as i32);
                b.tax.append_value(tax as i32);
                b.commitdate.append_value(day_keys[commit as usize]);
                b.shipmode.append_value(shipmode);
                b.rows += 1;
            }
            for _ in first_row..b.rows {
                b.ordtotalprice.append_value(total as i32);
            }
            if b.rows >= self.opts.batch_rows || index + 1 == end {
                sink(b.finish(&schema)?)?;
            }
        }
        Ok(())
    }

    fn gen_customer(
        &self,
        chunk: usize,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let (start, end) = Self::chunk_range(
            customer_count(self.opts.sf),
            self.opts.dim_rows_per_chunk,
            chunk,
        );
        let mut rng = self.rng(2, chunk);
        let schema = Self::schema("customer")?;
        let cap = self.opts.batch_rows;
        let mut key = Int32Builder::with_capacity(cap);
        let mut cols: Vec<StringBuilder> = (0..7).map(|_| StringBuilder::new()).collect();
        let mut rows = 0usize;
        for i in start..end {
            let k = i + 1;
            let nation = rng.random_range(0..NATIONS.len());
            key.append_value(k as i32);
            cols[0].append_value(format!("Customer#{k:09}"));
            cols[1].append_value(random_text(&mut rng, 10, 40));
            cols[2].append_value(city(nation, rng.random_range(0..10)));
            cols[3].append_value(NATIONS[nation].0);
            cols[4].append_value(REGIONS[NATIONS[nation].1]);
            cols[5].append_value(phone(&mut rng, nation));
            cols[6].append_value(SEGMENTS[rng.random_range(0..SEGMENTS.len())]);
            rows += 1;
            if rows >= cap || i + 1 == end {
                let mut arrays: Vec<ArrayRef> = vec![Arc::new(key.finish())];
                arrays.extend(cols.iter_mut().map(|c| Arc::new(c.finish()) as ArrayRef));
                sink(RecordBatch::try_new(schema.clone(), arrays)?)?;
                rows = 0;
            }
        }
        Ok(())
    }

    fn gen_supplier(
        &self,
        chunk: usize,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let (start, end) = Self::chunk_range(
            supplier_count(self.opts.sf),
            self.opts.dim_rows_per_chunk,
            chunk,
        );
        let mut rng = self.rng(3, chunk);
        let schema = Self::schema("supplier")?;
        let cap = self.opts.batch_rows;
        let mut key = Int32Builder::with_capacity(cap);
        let mut cols: Vec<StringBuilder> = (0..6).map(|_| StringBuilder::new()).collect();
        let mut rows = 0usize;
        for i in start..end {
            let k = i + 1;
            let nation = rng.random_range(0..NATIONS.len());
            key.append_value(k as i32);
            cols[0].append_value(format!("Supplier#{k:09}"));
            cols[1].append_value(random_text(&mut rng, 10, 40));
            cols[2].append_value(city(nation, rng.random_range(0..10)));
            cols[3].append_value(NATIONS[nation].0);
            cols[4].append_value(REGIONS[NATIONS[nation].1]);
            cols[5].append_value(phone(&mut rng, nation));
            rows += 1;
            if rows >= cap || i + 1 == end {
                let mut arrays: Vec<ArrayRef> = vec![Arc::new(key.finish())];
                arrays.extend(cols.iter_mut().map(|c| Arc::new(c.finish()) as ArrayRef));
                sink(RecordBatch::try_new(schema.clone(), arrays)?)?;
                rows = 0;
            }
        }
        Ok(())
    }

    fn gen_part(
        &self,
        chunk: usize,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let (start, end) = Self::chunk_range(
            part_count(self.opts.sf),
            self.opts.dim_rows_per_chunk,
            chunk,
        );
        let mut rng = self.rng(4, chunk);
        let schema = Self::schema("part")?;
        let cap = self.opts.batch_rows;
        let mut key = Int32Builder::with_capacity(cap);
        let mut size = Int32Builder::with_capacity(cap);
        // name, mfgr, category, brand1, color, type, container
        let mut cols: Vec<StringBuilder> = (0..7).map(|_| StringBuilder::new()).collect();
        let mut rows = 0usize;
        for i in start..end {
            let k = i + 1;
            let c1 = COLORS[rng.random_range(0..COLORS.len())];
            let c2 = COLORS[rng.random_range(0..COLORS.len())];
            let mfgr = rng.random_range(1..=5);
            let cat = rng.random_range(1..=5);
            let brand = rng.random_range(1..=40);
            let color = COLORS[rng.random_range(0..COLORS.len())];
            let ptype = format!(
                "{} {} {}",
                TYPE_S1[rng.random_range(0..TYPE_S1.len())],
                TYPE_S2[rng.random_range(0..TYPE_S2.len())],
                TYPE_S3[rng.random_range(0..TYPE_S3.len())]
            );
            let psize = rng.random_range(1..=50);
            let container = format!(
                "{} {}",
                CONTAINER_S1[rng.random_range(0..CONTAINER_S1.len())],
                CONTAINER_S2[rng.random_range(0..CONTAINER_S2.len())]
            );
            key.append_value(k as i32);
            cols[0].append_value(format!("{c1} {c2}"));
            cols[1].append_value(format!("MFGR#{mfgr}"));
            cols[2].append_value(format!("MFGR#{mfgr}{cat}"));
            cols[3].append_value(format!("MFGR#{mfgr}{cat}{brand:02}"));
            cols[4].append_value(color);
            cols[5].append_value(ptype);
            size.append_value(psize);
            cols[6].append_value(container);
            rows += 1;
            if rows >= cap || i + 1 == end {
                let [name, mfgr, category, brand1, color, ptype, container] = &mut cols[..] else {
                    return Err(BenchError::Internal("part builders".into()));
                };
                let arrays: Vec<ArrayRef> = vec![
                    Arc::new(key.finish()),
                    Arc::new(name.finish()),
                    Arc::new(mfgr.finish()),
                    Arc::new(category.finish()),
                    Arc::new(brand1.finish()),
                    Arc::new(color.finish()),
                    Arc::new(ptype.finish()),
                    Arc::new(size.finish()),
                    Arc::new(container.finish()),
                ];
                sink(RecordBatch::try_new(schema.clone(), arrays)?)?;
                rows = 0;
            }
        }
        Ok(())
    }

    fn gen_date(&self, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let schema = Self::schema("date")?;
        let n = DATE_ROWS as usize;
        let mut ints: Vec<Int32Builder> = (0..12).map(|_| Int32Builder::with_capacity(n)).collect();
        let mut strs: Vec<StringBuilder> = (0..5).map(|_| StringBuilder::new()).collect();
        let base = days_from_civil(1992, 1, 1);
        for day in 0..n as i64 {
            let (y, m, d) = civil_from_days(base + day);
            let (ny, nm, _) = civil_from_days(base + day + 1);
            // 1970-01-01 was a Thursday; weekday 0 = Sunday.
            let wd = ((base + day + 4).rem_euclid(7)) as usize;
            let doy = (base + day - days_from_civil(y, 1, 1) + 1) as i32;
            let season = match m {
                12 => "Christmas",
                1 | 2 => "Winter",
                3..=5 => "Spring",
                6..=8 => "Summer",
                _ => "Fall",
            };
            let holiday = matches!(
                (m, d),
                (1, 1) | (7, 4) | (11, 11) | (12, 24) | (12, 25) | (12, 31)
            );
            let month_name = MONTHS[(m - 1) as usize];
            // d_datekey, d_year, d_yearmonthnum, d_daynuminweek, d_daynuminmonth,
            // d_daynuminyear, d_monthnuminyear, d_weeknuminyear, d_lastdayinweekfl,
            // d_lastdayinmonthfl, d_holidayfl, d_weekdayfl
            let vals = [
                (y * 10000 + m * 100 + d) as i32,
                y as i32,
                (y * 100 + m) as i32,
                wd as i32 + 1,
                d as i32,
                doy,
                m as i32,
                (doy - 1) / 7 + 1,
                (wd == 6) as i32,
                (nm != m || ny != y) as i32,
                holiday as i32,
                (1..=5).contains(&wd) as i32,
            ];
            for (b, v) in ints.iter_mut().zip(vals) {
                b.append_value(v);
            }
            strs[0].append_value(format!("{month_name} {d}, {y}"));
            strs[1].append_value(WEEKDAYS[wd]);
            strs[2].append_value(month_name);
            strs[3].append_value(format!("{}{y}", &month_name[..3]));
            strs[4].append_value(season);
        }
        let mut i: Vec<ArrayRef> = ints
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef)
            .collect();
        let mut s: Vec<ArrayRef> = strs
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef)
            .collect();
        // Schema order: key, date, dayofweek, month, year, yearmonthnum, yearmonth,
        // daynuminweek, daynuminmonth, daynuminyear, monthnuminyear, weeknuminyear,
        // sellingseason, 4 flags.
        let mut take_i =
            |k: usize| std::mem::replace(&mut i[k], Arc::new(Int32Builder::new().finish()));
        let mut take_s =
            |k: usize| std::mem::replace(&mut s[k], Arc::new(StringBuilder::new().finish()));
        let arrays = vec![
            take_i(0),
            take_s(0),
            take_s(1),
            take_s(2),
            take_i(1),
            take_i(2),
            take_s(3),
            take_i(3),
            take_i(4),
            take_i(5),
            take_i(6),
            take_i(7),
            take_s(4),
            take_i(8),
            take_i(9),
            take_i(10),
            take_i(11),
        ];
        sink(RecordBatch::try_new(schema, arrays)?)
    }
}

impl ChunkSource for SsbGenerator {
    fn benchmark(&self) -> &'static str {
        "ssb"
    }

    fn scale_factor(&self) -> f64 {
        self.opts.sf
    }

    fn seed(&self) -> u64 {
        self.opts.seed
    }

    fn jobs(&self) -> Vec<ChunkJob> {
        let sf = self.opts.sf;
        let mut jobs = Vec::new();
        let mut push = |table: &'static str, total: u64, per: u64, rows_per_unit: u64| {
            let chunks = total.div_ceil(per).max(1);
            for c in 0..chunks {
                let (s, e) = Self::chunk_range(total, per, c as usize);
                jobs.push(ChunkJob {
                    table,
                    chunk: c as usize,
                    est_rows: (e - s) * rows_per_unit,
                });
            }
        };
        push("lineorder", order_count(sf), self.opts.orders_per_chunk, 4);
        push("part", part_count(sf), self.opts.dim_rows_per_chunk, 1);
        push(
            "customer",
            customer_count(sf),
            self.opts.dim_rows_per_chunk,
            1,
        );
        push(
            "supplier",
            supplier_count(sf),
            self.opts.dim_rows_per_chunk,
            1,
        );
        push("date", DATE_ROWS, DATE_ROWS, 1);
        jobs
    }

    fn generate(
        &self,
        job: &ChunkJob,
        sink: &mut dyn FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        match job.table {
            "lineorder" => self.gen_lineorder(job.chunk, sink),
            "customer" => self.gen_customer(job.chunk, sink),
            "supplier" => self.gen_supplier(job.chunk, sink),
            "part" => self.gen_part(job.chunk, sink),
            "date" => self.gen_date(sink),
            other => Err(BenchError::InvalidArgument(format!(
                "no SSB table `{other}`"
            ))),
        }
    }
}

struct LineorderBuilders {
    rows: usize,
    orderkey: Int64Builder,
    linenumber: Int32Builder,
    custkey: Int32Builder,
    partkey: Int32Builder,
    suppkey: Int32Builder,
    orderdate: Int32Builder,
    orderpriority: StringBuilder,
    shippriority: StringBuilder,
    quantity: Int32Builder,
    extendedprice: Int32Builder,
    ordtotalprice: Int32Builder,
    discount: Int32Builder,
    revenue: Int32Builder,
    supplycost: Int32Builder,
    tax: Int32Builder,
    commitdate: Int32Builder,
    shipmode: StringBuilder,
}

impl LineorderBuilders {
    fn new(cap: usize) -> Self {
        let i = || Int32Builder::with_capacity(cap);
        let s = || StringBuilder::with_capacity(cap, cap * 8);
        LineorderBuilders {
            rows: 0,
            orderkey: Int64Builder::with_capacity(cap),
            linenumber: i(),
            custkey: i(),
            partkey: i(),
            suppkey: i(),
            orderdate: i(),
            orderpriority: s(),
            shippriority: s(),
            quantity: i(),
            extendedprice: i(),
            ordtotalprice: i(),
            discount: i(),
            revenue: i(),
            supplycost: i(),
            tax: i(),
            commitdate: i(),
            shipmode: s(),
        }
    }

    fn finish(&mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        self.rows = 0;
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(self.orderkey.finish()),
            Arc::new(self.linenumber.finish()),
            Arc::new(self.custkey.finish()),
            Arc::new(self.partkey.finish()),
            Arc::new(self.suppkey.finish()),
            Arc::new(self.orderdate.finish()),
            Arc::new(self.orderpriority.finish()),
            Arc::new(self.shippriority.finish()),
            Arc::new(self.quantity.finish()),
            Arc::new(self.extendedprice.finish()),
            Arc::new(self.ordtotalprice.finish()),
            Arc::new(self.discount.finish()),
            Arc::new(self.revenue.finish()),
            Arc::new(self.supplycost.finish()),
            Arc::new(self.tax.finish()),
            Arc::new(self.commitdate.finish()),
            Arc::new(self.shipmode.finish()),
        ];
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    }
}

/// TPC-H's sparse order key: of every 32 keys the first 8 are used (index from 1).
pub fn sparse_order_key(index: u64) -> u64 {
    ((index >> 3) << 5) | (index & 7)
}

/// TPC-H's retail price of a part, in cents.
pub fn retail_price_cents(partkey: i64) -> i64 {
    90_000 + ((partkey / 10) % 20_001) + 100 * (partkey % 1_000)
}

/// City of a nation: the name's first 9 bytes, space padded, and a digit.
pub fn city(nation: usize, digit: u32) -> String {
    let name = NATIONS[nation % NATIONS.len()].0;
    let prefix = &name[..name.len().min(9)];
    format!("{prefix:<9}{digit}")
}

fn phone(rng: &mut ChaCha8Rng, nation: usize) -> String {
    format!(
        "{}-{}-{}-{}",
        nation + 10,
        rng.random_range(100..=999),
        rng.random_range(100..=999),
        rng.random_range(1000..=9999)
    )
}

fn random_text(rng: &mut ChaCha8Rng, min: usize, max: usize) -> String {
    let len = rng.random_range(min..=max);
    (0..len)
        .map(|_| ALNUM[rng.random_range(0..ALNUM.len())] as char)
        .collect()
}

/// The 2556 `d_datekey`s (yyyymmdd) from 1992-01-01, plus one spare day for safety.
fn date_keys() -> Vec<i32> {
    let base = days_from_civil(1992, 1, 1);
    (0..DATE_ROWS as i64 + 1)
        .map(|d| {
            let (y, m, dd) = civil_from_days(base + d);
            (y * 10000 + m * 100 + dd) as i32
        })
        .collect()
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01 as (year, month, day).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}
