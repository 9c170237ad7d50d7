//! Fuzz targets (issue 12) for every client-reachable decoder in `eddy-sql`:
//! bound parameters (`parse_param`, `parse_binary`, `binary_array_to_text`),
//! value text (`parse_text` and the date, timestamp, numeric and bytea
//! readers) and the COPY FROM STDIN parsers (text, CSV, binary).
//!
//! Each target first runs every input of its checked-in seed corpus
//! (`tests/fuzz/seeds/<target>/` at the repository root; `*.hex` files are
//! hex with `#` comments, anything else is raw bytes), then a bounded number
//! of proptest cases mixing random bytes with structured near-valid inputs.
//! A target asserts only that the decoder returns (`Ok` or `Err`): a panic
//! fails the test, and so does one allocation larger than [`ALLOC_LIMIT`]
//! while a decoder runs (a counting global allocator watches the thread).
//!
//! `EDDY_FUZZ_CASES=100000 cargo test -p eddy-sql --test decoder_fuzz`
//! raises the case count of every target for long local runs. A failing
//! random case is shrunk and printed as hex: add it to the target's seed
//! folder (see `tests/fuzz/README.md`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use eddy_common::ColumnType;
use eddy_sql::copy::CopyFinish;
use eddy_sql::pgtypes::{
    self, binary_array_to_text, bytea_from_text, numeric_from_text, parse_binary, parse_date,
    parse_decimal, parse_param, parse_text, parse_timestamp, timestamp_instant,
    timestamp_wall_clock,
};
use eddy_sql::{Database, Output, Session};
use eddy_storage::{Engine, EngineConfig};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

// ---------------------------------------------------------------------------
// allocation watch

/// The largest single allocation a decoder may make for these (small)
/// inputs. A decoder that sizes a buffer from a length field it has not
/// checked against the bytes present asks for far more.
const ALLOC_LIMIT: usize = 64 << 20;

thread_local! {
    /// Whether this thread is inside a watched decoder call.
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// The largest allocation seen on this thread while watching.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, noting the largest request made on a watched
/// thread. It never refuses one: the check happens after the decoder
/// returns, so the failure is an ordinary (shrinkable) test failure.
struct Watch;

fn note(size: usize) {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Watch = Watch;

/// Run `f` with the allocation watch on; panics if it allocated more than
/// [`ALLOC_LIMIT`] at once.
fn watched<R>(what: &str, f: impl FnOnce() -> R) -> R {
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    WATCHING.with(|w| w.set(false));
    let largest = LARGEST.with(|l| l.get());
    match r {
        Ok(r) => {
            assert!(
                largest <= ALLOC_LIMIT,
                "{what}: one allocation of {largest} bytes"
            );
            r
        }
        Err(p) => std::panic::resume_unwind(p),
    }
}

// ---------------------------------------------------------------------------
// seeds and runner

/// The case count: `EDDY_FUZZ_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("EDDY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn seed_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/seeds")
        .join(target)
}

/// Hex text (`#` to end of line is a comment, whitespace ignored) as bytes.
fn from_hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| {
            let s = std::str::from_utf8(p).expect("hex");
            u8::from_str_radix(s, 16).expect("hex digit")
        })
        .collect()
}

/// Every seed of `target`, sorted by file name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = seed_dir(target);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.expect("dir entry").path();
        if !path.is_file() {
            continue;
        }
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with('.') || name == "README.md" {
            continue;
        }
        let raw = std::fs::read(&path).expect("read seed");
        let bytes = if name.ends_with(".hex") {
            from_hex(&String::from_utf8(raw).expect("hex seed is text"))
        } else {
            raw
        };
        out.push((name, bytes));
    }
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Run `check` on every seed of `target` (each expanded into the inputs
/// `expand` makes of it), then on `default_cases` (or `EDDY_FUZZ_CASES`)
/// inputs from `strategy`. Panics (fails the test) naming the first seed
/// that fails, or with the shrunk failing random input.
fn fuzz(
    target: &str,
    default_cases: u32,
    strategy: impl Strategy<Value = Vec<u8>>,
    expand: impl Fn(&[u8]) -> Vec<Vec<u8>>,
    mut check: impl FnMut(&[u8]),
) {
    for (name, bytes) in seeds(target) {
        for input in expand(&bytes) {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| check(&input))) {
                panic!("{target}: seed {name} failed: {}", panic_message(&*p));
            }
        }
    }
    let config = Config {
        cases: cases(default_cases),
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    // `run` wants `Fn`; the COPY targets' check needs its world mutably
    let check = std::cell::RefCell::new(check);
    let result = runner.run(&strategy, |input| {
        catch_unwind(AssertUnwindSafe(|| (check.borrow_mut())(&input)))
            .map_err(|p| TestCaseError::fail(panic_message(&*p)))
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => panic!(
            "{target}: failing input (add it to tests/fuzz/seeds/{target}/ as a .hex file):\n{}\n{why}",
            hex(&input)
        ),
        Err(e) => panic!("{target}: {e}"),
    }
}

/// A seed is one input.
fn as_is(b: &[u8]) -> Vec<Vec<u8>> {
    vec![b.to_vec()]
}

// ---------------------------------------------------------------------------
// what is decoded

/// Every OID `parse_param` / `parse_binary` treat specially, array OIDs,
/// and a few it does not know (which fall back to text).
const OIDS: &[u32] = &[
    16,
    17,
    18,
    19,
    20,
    21,
    23,
    25,
    26,
    114,
    700,
    701,
    705,
    1005,
    1007,
    1009,
    1016,
    1042,
    1043,
    1082,
    1083,
    1114,
    1184,
    1186,
    1700,
    2950,
    3802,
    0,
    1,
    4_294_967_295,
];

/// Every column type, with reachable decimal shapes (precision 1..=38,
/// scale 0..=precision).
const TYPES: &[ColumnType] = &[
    ColumnType::Boolean,
    ColumnType::SmallInt,
    ColumnType::Int,
    ColumnType::BigInt,
    ColumnType::Real,
    ColumnType::Double,
    ColumnType::Decimal(38, 10),
    ColumnType::Decimal(10, 2),
    ColumnType::Decimal(5, 0),
    ColumnType::Decimal(38, 0),
    ColumnType::Decimal(38, 38),
    ColumnType::Decimal(1, 0),
    ColumnType::Decimal(1, 1),
    ColumnType::Text,
    ColumnType::Date,
    ColumnType::Timestamp,
    ColumnType::Bytea,
    ColumnType::Array(eddy_common::ArrayElem::Int),
    ColumnType::Array(eddy_common::ArrayElem::Text),
    ColumnType::Array(eddy_common::ArrayElem::Varchar(2)),
    ColumnType::Array(eddy_common::ArrayElem::Decimal(5, 2)),
];

/// Decoders of one bound parameter: every OID in both formats, and every
/// (wire OID, column type) pair of the binary decoder.
fn check_param(raw: &[u8]) {
    for &oid in OIDS {
        for binary in [false, true] {
            watched("parse_param", || {
                let _ = parse_param(raw, oid, binary);
            });
        }
        for &ty in TYPES {
            watched("parse_binary", || {
                let _ = parse_binary(raw, oid, ty);
            });
        }
    }
}

/// The binary array decoder, directly and as array-typed parameters.
fn check_array(raw: &[u8]) {
    watched("binary_array_to_text", || {
        let _ = binary_array_to_text(raw);
    });
    for oid in [1005, 1007, 1009, 1016, 1000, 1231, 0] {
        watched("parse_param(array)", || {
            let _ = parse_param(raw, oid, true);
        });
    }
}

/// The text readers, on the input as UTF-8 (lossily converted when it is
/// not), and text-format parameters of every OID.
fn check_text(raw: &[u8]) {
    let s = String::from_utf8_lossy(raw);
    let s: &str = &s;
    watched("text decoders", || {
        for &ty in TYPES {
            let _ = parse_text(s, ty);
        }
        let _ = bytea_from_text(s);
        let _ = pgtypes::parse_bytea_text(s);
        let _ = numeric_from_text(s).map(|n| n.into_text());
        let _ = timestamp_instant(s);
        let _ = timestamp_wall_clock(s);
        let _ = parse_date(s);
        let _ = parse_timestamp(s);
        for (p, sc) in [(38, 10), (38, 0), (38, 38), (1, 0), (1, 1), (10, 2), (0, 0)] {
            let _ = parse_decimal(s, p, sc);
        }
    });
    for &oid in OIDS {
        watched("parse_param(text)", || {
            let _ = parse_param(raw, oid, false);
        });
    }
}

// ---------------------------------------------------------------------------
// input generators

fn be16(v: i16) -> [u8; 2] {
    v.to_be_bytes()
}

fn be32(v: i32) -> [u8; 4] {
    v.to_be_bytes()
}

/// An i32 that is often a boundary.
fn edgy_i32() -> impl Strategy<Value = i32> {
    prop_oneof![
        3 => -4..16i32,
        2 => prop::sample::select(vec![
            i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1, -1, 0x8000, 0xFFFF, 0x10000,
            1 << 30, -(1 << 30), 65_535, 65_536,
        ]),
        1 => any::<i32>(),
    ]
}

/// An i16 that is often a boundary.
fn edgy_i16() -> impl Strategy<Value = i16> {
    prop_oneof![
        3 => -2..12i16,
        2 => prop::sample::select(vec![
            i16::MIN, i16::MAX, -1, 999, 1000, 1001, 2999, 3000, 3001, 9999, 10_000, 16_383,
            16_384,
        ]),
        1 => any::<i16>(),
    ]
}

/// Random bytes, short and sometimes longer.
fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => vec(any::<u8>(), 0..16),
        1 => vec(any::<u8>(), 0..256),
    ]
}

/// Fixed-width binary values, many at the edges of the date and timestamp
/// ranges (infinity is i32/i64 MIN and MAX).
fn fixed_width() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 1..=1),
        vec(any::<u8>(), 2..=2),
        vec(any::<u8>(), 4..=4),
        vec(any::<u8>(), 8..=8),
        prop::sample::select(vec![
            i32::MIN,
            i32::MAX,
            i32::MIN + 1,
            i32::MAX - 1,
            -2_451_545,
            -2_451_546,
            2_145_031_948,
            2_145_031_949,
            0,
            -1,
        ])
        .prop_map(|v| be32(v).to_vec()),
        prop::sample::select(vec![
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            i64::MAX - 1,
            -211_813_488_000_000_000,
            -211_813_488_000_000_001,
            9_223_371_331_199_999_999,
            9_223_371_331_200_000_000,
            0,
            -1,
        ])
        .prop_map(|v| v.to_be_bytes().to_vec()),
        prop::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN_POSITIVE,
            -0.0,
            1e300
        ])
        .prop_map(|v| v.to_be_bytes().to_vec()),
        prop::sample::select(vec![f32::NAN, f32::INFINITY, f32::MAX, f32::MIN_POSITIVE])
            .prop_map(|v| v.to_be_bytes().to_vec()),
    ]
}

/// A binary NUMERIC: header fields often at or past their limits, digits
/// often in range, the digit count often matching the header.
fn numeric_binary() -> impl Strategy<Value = Vec<u8>> {
    (
        edgy_i16(),
        edgy_i16(),
        prop::sample::select(vec![
            0x0000u16, 0x4000, 0xC000, 0xD000, 0xF000, 0x8000, 0xFFFF, 0x0001,
        ]),
        edgy_i16(),
        vec(prop_oneof![0..10_000i16, edgy_i16()], 0..8),
        any::<bool>(),
    )
        .prop_map(|(nd, weight, sign, dscale, mut digits, exact)| {
            if exact && (0..8).contains(&nd) {
                digits.resize(nd as usize, 1);
            }
            let mut out = Vec::new();
            out.extend(be16(nd));
            out.extend(be16(weight));
            out.extend(sign.to_be_bytes());
            out.extend(be16(dscale));
            for d in digits {
                out.extend(be16(d));
            }
            out
        })
}

/// One array element: a length field (often honest, sometimes lying) and
/// its bytes.
fn array_element() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![
            vec(any::<u8>(), 4..=4),
            vec(any::<u8>(), 8..=8),
            numeric_binary(),
            random_bytes()
        ],
        prop_oneof![
            4 => Just(None),
            1 => prop::sample::select(vec![-1, -2, i32::MIN, i32::MAX, 0, 1, 1 << 20]).prop_map(Some),
        ],
    )
        .prop_map(|(body, len)| {
            let mut out = Vec::new();
            match len {
                Some(-1) => out.extend(be32(-1)),
                Some(l) => {
                    out.extend(be32(l));
                    out.extend(body);
                }
                None => {
                    out.extend(be32(body.len() as i32));
                    out.extend(body);
                }
            }
            out
        })
}

/// A binary array: header with random ndim / flags / element OID /
/// dimension lengths and lower bounds, then elements.
fn array_binary() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![3 => Just(1), 1 => edgy_i32()],
        prop_oneof![3 => 0..2i32, 1 => edgy_i32()],
        prop_oneof![
            3 => prop::sample::select(OIDS.to_vec()),
            1 => any::<u32>(),
        ],
        vec(
            (edgy_i32(), prop_oneof![3 => Just(1), 1 => edgy_i32()]),
            0..3,
        ),
        vec(array_element(), 0..6),
        any::<bool>(),
    )
        .prop_map(|(ndim, flags, elem, mut dims, elems, honest)| {
            if honest && ndim == 1 {
                dims = vec![(elems.len() as i32, dims.first().map_or(1, |d| d.1))];
            }
            let mut out = Vec::new();
            out.extend(be32(ndim));
            out.extend(be32(flags));
            out.extend(elem.to_be_bytes());
            for (len, lower) in dims {
                out.extend(be32(len));
                out.extend(be32(lower));
            }
            for e in elems {
                out.extend(e);
            }
            out
        })
}

/// Short strings that break parsers: multi-byte characters, signs, zone
/// suffixes, huge numbers, special words.
fn odd_text() -> impl Strategy<Value = &'static str> + Clone {
    prop::sample::select(vec![
        "",
        "é",
        "€",
        "𝄞",
        "\u{0}",
        " ",
        "+",
        "-",
        ":",
        ".",
        "Z",
        "T",
        "e",
        "E",
        "\\",
        "x",
        "\t",
        "+é",
        "-01:é",
        "+15:59",
        "+16",
        "-0530",
        "+99999999999",
        "9999999999999999999999",
        "infinity",
        "-infinity",
        "NaN",
        "Infinity",
    ])
}

/// A date or time field: small, boundary and huge numbers.
fn datetime_number() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        0..100u64,
        prop::sample::select(vec![0, 1, 12, 13, 23, 24, 29, 30, 31, 59, 60, 61, 99, 9999]),
        Just(5_874_897u64),
        Just(5_874_898u64),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX),
    ]
}

/// `YYYY-MM-DD` with any numbers.
fn date_text() -> impl Strategy<Value = String> + Clone {
    let n = datetime_number();
    (n.clone(), n.clone(), n).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"))
}

/// A timestamp with any numbers, fraction and zone suffix.
fn timestamp_text() -> impl Strategy<Value = String> {
    let n = datetime_number();
    (
        date_text(),
        prop::sample::select(vec![" ", "T", "  "]),
        n.clone(),
        n.clone(),
        n,
        prop::option::of("[0-9]{1,9}"),
        odd_text(),
    )
        .prop_map(|(d, sep, h, mi, s, frac, zone)| {
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{d}{sep}{h:02}:{mi:02}:{s:02}{frac}{zone}")
        })
}

/// A decimal number, with up to 45 digits each side and an exponent that
/// may be at or past the limits.
fn number_text() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["", "", "-", "+", "--"]),
        "[0-9]{0,45}",
        prop::option::of("[0-9]{0,45}"),
        prop::option::of((
            prop::sample::select(vec!["e", "E"]),
            prop::sample::select(vec!["", "-", "+"]),
            prop_oneof![
                "[0-9]{0,4}".boxed(),
                Just("1073741823".to_string()).boxed(),
                Just("1073741824".to_string()).boxed(),
                Just("99999999999999999999".to_string()).boxed(),
                Just("131072".to_string()).boxed(),
                Just("16383".to_string()).boxed(),
            ],
        )),
    )
        .prop_map(|(sign, int, frac, exp)| {
            let mut s = format!("{sign}{int}");
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            if let Some((e, es, ev)) = exp {
                s.push_str(e);
                s.push_str(es);
                s.push_str(&ev);
            }
            s
        })
}

/// `bytea` input, hex or escape format, often slightly wrong.
fn bytea_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\\\x[0-9a-fA-F \t\n]{0,20}[g-zé]?",
        "([a-z]|\\\\[0-7]{1,3}|\\\\\\\\|\\\\){0,8}",
    ]
}

/// Boolean and special-number words.
fn word_text() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "t",
        "true",
        "YES",
        "on",
        "1",
        "0",
        "n",
        "off",
        "oN",
        "infinity",
        "-Infinity",
        "+infinity",
        "nan",
        "inf",
        "-inf",
        "+-inf",
        "  1  ",
        "",
    ])
    .prop_map(str::to_string)
}

/// Text near the accepted forms of dates, timestamps, numbers, booleans
/// and bytea, with random multi-byte characters spliced in.
fn near_text() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        date_text(),
        timestamp_text(),
        number_text(),
        bytea_text(),
        word_text(),
        any::<String>(),
    ];
    (base, odd_text(), odd_text(), any::<prop::sample::Index>()).prop_map(|(b, pre, post, at)| {
        // splice `pre` in at a char boundary, append `post`
        let mut at = at.index(b.len() + 1);
        while !b.is_char_boundary(at) {
            at -= 1;
        }
        format!("{}{pre}{}{post}", &b[..at], &b[at..])
    })
}

/// Random byte flips, insertions, deletions and truncation.
fn mutated(base: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        base,
        vec((0..4u8, any::<prop::sample::Index>(), any::<u8>()), 0..4),
    )
        .prop_map(|(mut b, edits)| {
            for (kind, at, byte) in edits {
                let i = at.index(b.len() + 1);
                match kind {
                    0 if i < b.len() => b[i] = byte,
                    1 => b.insert(i, byte),
                    2 if i < b.len() => {
                        b.remove(i);
                    }
                    3 => b.truncate(i),
                    _ => {}
                }
            }
            b
        })
}

// ---------------------------------------------------------------------------
// value decoder targets

#[test]
fn fuzz_param() {
    let strategy = prop_oneof![
        2 => random_bytes(),
        2 => fixed_width(),
        3 => mutated(numeric_binary()),
        1 => array_binary(),
        1 => near_text().prop_map(String::into_bytes),
    ];
    fuzz("param", 20_000, strategy, as_is, check_param);
}

#[test]
fn fuzz_array() {
    let strategy = prop_oneof![
        1 => random_bytes(),
        4 => array_binary(),
        2 => mutated(array_binary()),
    ];
    fuzz("array", 20_000, strategy, as_is, check_array);
}

#[test]
fn fuzz_text() {
    let strategy = prop_oneof![
        1 => random_bytes(),
        4 => near_text().prop_map(String::into_bytes),
        1 => mutated(near_text().prop_map(String::into_bytes)),
    ];
    fuzz("text", 20_000, strategy, as_is, check_text);
}

// ---------------------------------------------------------------------------
// COPY FROM STDIN

/// A database with one table holding every column type, and a session.
struct CopyWorld {
    _dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    session: Session,
}

const COPY_COLUMNS: usize = 11;

impl CopyWorld {
    fn new() -> CopyWorld {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = EngineConfig::new(dir.path());
        cfg.sync = false;
        cfg.background_compaction = false;
        let db = Arc::new(
            Database::open(Engine::open(cfg).expect("open engine"), "eddy", None)
                .expect("database"),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut session = Session::new(db, "eddy", 1).expect("session");
        rt.block_on(async {
            for r in session
                .simple_query(
                    "CREATE TABLE fz (a INT, b BIGINT, c TEXT, d NUMERIC(10,2), e DATE, \
                     f TIMESTAMP, g BYTEA, h BOOLEAN, i DOUBLE PRECISION, j REAL, k SMALLINT)",
                )
                .await
            {
                r.expect("create table");
            }
        });
        CopyWorld {
            _dir: dir,
            rt,
            session,
        }
    }

    /// Run `copy` (a COPY ... FROM STDIN), feed it `chunks`, finish it.
    /// In a transaction block the rows are handed to the transaction,
    /// which is then rolled back; outside one they are committed.
    fn copy(&mut self, copy: &str, in_block: bool, chunks: &[&[u8]]) {
        let session = &mut self.session;
        self.rt.block_on(async {
            let sql = if in_block {
                format!("BEGIN; {copy}")
            } else {
                copy.to_string()
            };
            let mut outs = session.simple_query(&sql).await;
            let last = outs.pop().expect("an output");
            let mut c = match last {
                Ok(Output::CopyIn(c)) => c,
                Ok(other) => panic!("{copy}: no CopyIn but {other:?}"),
                Err(e) => panic!("{copy}: {e}"),
            };
            let done = watched("COPY", || {
                for chunk in chunks {
                    let _ = c.feed(chunk);
                }
                c.finish()
            });
            if let Ok(CopyFinish::InTransaction { table, batches }) = done {
                let _ = session.copy_into_transaction(&table, batches);
            }
            if in_block {
                for r in session.simple_query("ROLLBACK").await {
                    r.expect("rollback");
                }
            }
        });
    }
}

/// COPY statements of one format: defaults and non-default options.
fn copy_statements(format: &str) -> Vec<&'static str> {
    match format {
        "text" => vec![
            "COPY fz FROM STDIN",
            "COPY fz (c, a, g) FROM STDIN",
            "COPY fz FROM STDIN WITH (FORMAT text, DELIMITER '|', NULL 'nil')",
        ],
        "csv" => vec![
            "COPY fz FROM STDIN WITH (FORMAT csv)",
            "COPY fz FROM STDIN WITH (FORMAT csv, HEADER true)",
            "COPY fz (k, c) FROM STDIN WITH (FORMAT csv, DELIMITER ';', QUOTE '''', ESCAPE '\\')",
            "COPY fz FROM STDIN WITH (FORMAT csv, NULL 'NULL', QUOTE '|')",
            "COPY fz FROM STDIN WITH (FORMAT csv, DELIMITER ',', QUOTE ',', ESCAPE ',')",
        ],
        _ => vec![
            "COPY fz FROM STDIN WITH (FORMAT binary)",
            "COPY fz (a, c, d) FROM STDIN (FORMAT binary)",
        ],
    }
}

/// One text or CSV field: a valid value of some column, or hostile text.
fn copy_field() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "1", "-32768", "2147483648", "9223372036854775807", "1.5", "12345678.99",
            "2024-02-29", "2023-02-30", "infinity", "2024-01-01 10:00:00+é",
            "\\x00ff", "\\xzz", "t", "maybe", "NaN", "1e400", "\\N", "", "\"", "\"\"",
            "\"a,b\"", "\"unterminated", "\\", "\\.", "\\377", "\\x", "\\xé", "é", "nil", "NULL",
        ])
        .prop_map(str::to_string),
        2 => near_text(),
        1 => "[ -~\t\\\\\"';|,]{0,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(12).collect()),
    ]
}

/// A text field near the accepted input of column `col` of `fz`.
fn typed_text(col: usize) -> BoxedStrategy<String> {
    let int = || {
        prop_oneof![
            4 => "-?[0-9]{1,6}",
            1 => "[+-]?[0-9]{18,21}",
        ]
        .boxed()
    };
    match col {
        0 | 1 | 10 => int(),
        2 => any::<String>()
            .prop_map(|s| s.chars().take(8).collect())
            .boxed(),
        3 | 8 | 9 => number_text().boxed(),
        4 => date_text().boxed(),
        5 => timestamp_text().boxed(),
        6 => prop_oneof!["\\\\\\\\x[0-9a-f]{0,8}", bytea_text()].boxed(),
        7 => word_text().boxed(),
        _ => copy_field().boxed(),
    }
}

/// Field delimiters of the text statements (mostly the default tab) and of
/// the CSV ones (mostly the default comma).
const TEXT_DELIMITERS: &[&str] = &["\t", "\t", "\t", "\t", "|", ","];
const CSV_DELIMITERS: &[&str] = &[",", ",", ",", ",", ";", "|"];

/// A valid text field of column `col` of `fz` (in the text, CSV and
/// binary-as-text forms alike: no delimiters, quotes or escapes).
fn valid_text(col: usize) -> BoxedStrategy<String> {
    let re = match col {
        0 | 1 | 10 => "-?[0-9]{1,4}",
        2 => "[a-z]{0,5}",
        3 => "-?[0-9]{1,6}\\.[0-9]{2}",
        4 => "20[0-9]{2}-0[1-9]-[12][0-9]",
        5 => "2024-0[1-9]-1[0-9] 1[0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?",
        6 => "\\\\\\\\x([0-9a-f]{2}){0,4}",
        7 => "(t|f|true|false)",
        _ => "-?[0-9]{1,5}(\\.[0-9]{1,3})?",
    };
    re.boxed()
}

/// Text or CSV COPY data: rows of fields joined by one of the delimiters in
/// use, random line ends, sometimes an end marker. A row is either valid
/// but for at most one field, or wild (any number of fields, each near
/// its column's input or hostile).
fn copy_lines(delimiters: &[&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let valid: Vec<BoxedStrategy<String>> = (0..COPY_COLUMNS).map(valid_text).collect();
    let clean = (
        valid,
        prop::option::of((
            0..COPY_COLUMNS,
            prop_oneof![typed_text(0), typed_text(3), typed_text(5), copy_field()],
        )),
    )
        .prop_map(|(mut fields, bad)| {
            if let Some((i, f)) = bad {
                fields[i] = f;
            }
            fields
        });
    let wild_fields: Vec<BoxedStrategy<String>> = (0..14)
        .map(|i| prop_oneof![3 => typed_text(i), 1 => copy_field()].boxed())
        .collect();
    let wild = (
        prop_oneof![3 => Just(COPY_COLUMNS), 1 => 0..14usize],
        wild_fields,
    )
        .prop_map(|(n, fields)| fields[..n].to_vec());
    let line = (
        prop_oneof![3 => clean, 1 => wild],
        prop::sample::select(delimiters.to_vec()),
        prop::sample::select(vec!["\n", "\n", "\r\n", "\r", ""]),
    )
        .prop_map(|(fields, delim, end)| format!("{}{end}", fields.join(delim)));
    (
        vec(line, 0..6),
        prop::sample::select(vec!["", "", "\\.\n", "\\.", "\\.\nafter the end\n"]),
    )
        .prop_map(|(lines, tail)| format!("{}{tail}", lines.concat()).into_bytes())
}

/// The binary form of a value of column `col` of `fz`, often the right
/// width.
fn typed_binary(col: usize) -> BoxedStrategy<Vec<u8>> {
    let width = |n: usize| vec(any::<u8>(), n..=n).boxed();
    match col {
        0 | 4 | 9 => prop_oneof![3 => width(4), 1 => fixed_width()].boxed(),
        1 | 5 | 8 => prop_oneof![3 => width(8), 1 => fixed_width()].boxed(),
        2 => prop_oneof![
            3 => any::<String>().prop_map(String::into_bytes),
            1 => random_bytes(),
        ]
        .boxed(),
        3 => numeric_binary().boxed(),
        7 => width(1),
        10 => width(2),
        _ => random_bytes().boxed(),
    }
}

/// A valid binary value of column `col` of `fz`.
fn valid_binary(col: usize) -> BoxedStrategy<Vec<u8>> {
    match col {
        0 => any::<i32>().prop_map(|v| be32(v).to_vec()).boxed(),
        1 => any::<i64>().prop_map(|v| v.to_be_bytes().to_vec()).boxed(),
        2 => "[a-zé]{0,6}".prop_map(String::into_bytes).boxed(),
        // numeric(10,2): one base-10000 digit, weight 0 or -1, scale 0..=2
        3 => (
            0..10_000i16,
            -1..=0i16,
            prop::sample::select(vec![0u16, 0x4000]),
            0..=2i16,
        )
            .prop_map(|(d, w, sign, scale)| {
                let mut out = Vec::new();
                for f in [1, w] {
                    out.extend(be16(f));
                }
                out.extend(sign.to_be_bytes());
                out.extend(be16(scale));
                out.extend(be16(d));
                out
            })
            .boxed(),
        4 => (-100_000..100_000i32)
            .prop_map(|v| be32(v).to_vec())
            .boxed(),
        5 => (-1_000_000_000_000_000..1_000_000_000_000_000i64)
            .prop_map(|v| v.to_be_bytes().to_vec())
            .boxed(),
        6 => vec(any::<u8>(), 0..6).boxed(),
        7 => (0..2u8).prop_map(|b| vec![b]).boxed(),
        8 => any::<f64>().prop_map(|v| v.to_be_bytes().to_vec()).boxed(),
        9 => any::<f32>().prop_map(|v| v.to_be_bytes().to_vec()).boxed(),
        _ => any::<i16>().prop_map(|v| be16(v).to_vec()).boxed(),
    }
}

/// Binary COPY data: a (sometimes damaged) header, tuples with random
/// field counts and lengths, and maybe the trailer.
fn copy_binary_data() -> impl Strategy<Value = Vec<u8>> {
    // a valid tuple but for at most one field
    let valid: Vec<BoxedStrategy<Vec<u8>>> = (0..COPY_COLUMNS).map(valid_binary).collect();
    let clean = (
        valid,
        prop::option::of((0..COPY_COLUMNS, typed_binary(0), any::<bool>())),
    )
        .prop_map(|(fields, bad)| {
            let mut out = be16(COPY_COLUMNS as i16).to_vec();
            for (i, body) in fields.into_iter().enumerate() {
                let body = match &bad {
                    Some((at, _, true)) if *at == i => {
                        out.extend(be32(-1));
                        continue;
                    }
                    Some((at, b, false)) if *at == i => b.clone(),
                    _ => body,
                };
                out.extend(be32(body.len() as i32));
                out.extend(body);
            }
            out
        });
    let length = || {
        prop_oneof![
            6 => Just(None),
            1 => prop::sample::select(vec![-1, -1, -2, i32::MIN, i32::MAX, 0, 3, 1 << 30])
                .prop_map(Some),
        ]
    };
    let fields: Vec<_> = (0..12).map(|i| (length(), typed_binary(i))).collect();
    let wild = (
        prop_oneof![6 => Just(COPY_COLUMNS as i16), 1 => Just(3), 1 => edgy_i16()],
        prop_oneof![6 => Just(None), 1 => (0..12usize).prop_map(Some)],
        fields,
    )
        .prop_map(|(n, written, fields)| {
            let mut out = be16(n).to_vec();
            let written = written.unwrap_or(usize::try_from(n).unwrap_or(0).min(12));
            for (len, body) in fields.into_iter().take(written) {
                match len {
                    Some(-1) => out.extend(be32(-1)),
                    Some(l) => {
                        out.extend(be32(l));
                        out.extend(body);
                    }
                    None => {
                        out.extend(be32(body.len() as i32));
                        out.extend(body);
                    }
                }
            }
            out
        });
    let tuple = prop_oneof![3 => clean, 2 => wild];
    (
        prop_oneof![
            4 => Just(b"PGCOPY\n\xff\r\n\0".to_vec()),
            1 => vec(any::<u8>(), 0..12),
        ],
        prop_oneof![3 => Just(0i32), 1 => edgy_i32()],
        prop_oneof![3 => Just(0u32), 1 => 0..8u32, 1 => Just(u32::MAX)],
        vec(tuple, 0..4),
        any::<bool>(),
    )
        .prop_map(|(sig, flags, ext, tuples, trailer)| {
            let mut out = sig;
            out.extend(be32(flags));
            out.extend(ext.to_be_bytes());
            out.extend(std::iter::repeat_n(0u8, ext.min(8) as usize));
            for t in tuples {
                out.extend(t);
            }
            if trailer {
                out.extend(be16(-1));
            }
            out
        })
}

/// COPY input: the data, which statement to run, whether in a block, and
/// where to cut the data into CopyData chunks. Encoded as bytes so seeds
/// and random cases share one check: byte 0 picks the statement, byte 1
/// the block (odd: in a block), byte 2 the chunk size (0: one chunk), the
/// rest is the data.
fn copy_case(data: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u8>(),
        any::<u8>(),
        prop_oneof![Just(0u8), 1..8u8, any::<u8>()],
        data,
    )
        .prop_map(|(stmt, block, chunk, data)| {
            let mut out = vec![stmt, block, chunk];
            out.extend(data);
            out
        })
}

fn copy_target(target: &str, format: &str, data: impl Strategy<Value = Vec<u8>>) {
    let mut world = CopyWorld::new();
    let statements = copy_statements(format);
    let n = statements.len() as u8;
    // seeds are raw data: each runs with every statement, whole and byte
    // by byte, in and out of a transaction block
    let expand = |data: &[u8]| {
        let mut out = Vec::new();
        for stmt in 0..n {
            for (block, chunk) in [(1u8, 0u8), (0, 1)] {
                let mut input = vec![stmt, block, chunk];
                input.extend_from_slice(data);
                out.push(input);
            }
        }
        out
    };
    let check = |input: &[u8]| {
        let [stmt, block, chunk, data @ ..] = input else {
            return;
        };
        let copy = statements[usize::from(*stmt) % statements.len()];
        let chunks: Vec<&[u8]> = match *chunk {
            0 => vec![data],
            n => data.chunks(usize::from(n)).collect(),
        };
        world.copy(copy, block % 2 == 1, &chunks);
    };
    fuzz(target, 2000, copy_case(data), expand, check);
}

#[test]
fn fuzz_copy_text() {
    copy_target(
        "copy_text",
        "text",
        prop_oneof![
            4 => copy_lines(TEXT_DELIMITERS),
            1 => mutated(copy_lines(TEXT_DELIMITERS)),
            1 => random_bytes(),
        ],
    );
}

#[test]
fn fuzz_copy_csv() {
    copy_target(
        "copy_csv",
        "csv",
        prop_oneof![
            4 => copy_lines(CSV_DELIMITERS),
            1 => mutated(copy_lines(CSV_DELIMITERS)),
            1 => random_bytes(),
        ],
    );
}

#[test]
fn fuzz_copy_binary() {
    copy_target(
        "copy_binary",
        "binary",
        prop_oneof![
            4 => copy_binary_data(),
            2 => mutated(copy_binary_data()),
            1 => random_bytes(),
        ],
    );
}
