//! The values clients bind are stored and returned exactly (issue 12,
//! "Wrong data is stored"). Each value goes in as a simple-query literal
//! (text, as psql and psycopg2 send it), as a text-format parameter (pgjdbc,
//! node-postgres, psycopg 3) and as a binary parameter (asyncpg, psycopg 3
//! binary), through the fixed-plan path (autocommit single-row writes) and
//! the general path (transaction blocks, multi-row INSERT, UPDATE with an
//! expression), and comes back in text and binary results.
//!
//! Every expected value is PostgreSQL 15's answer. Set
//! `EDDY_WIRE_VALUES_PG` to a libpq connection string (for example
//! `host=127.0.0.1 port=5432 user=postgres dbname=postgres`) to run the same
//! assertions against a PostgreSQL server as well.

use std::error::Error;

use bytes::{BufMut, BytesMut};
use futures::SinkExt;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::SimpleQueryMessage;

mod common;
use common::wire::{exec, on_servers, rows, simple_error, sqlstate, text_rows, texts, Text};
use common::*;

type BoxError = Box<dyn Error + Sync + Send>;

/// A NUMERIC in PostgreSQL's binary format (asyncpg, psycopg 3 binary),
/// written and read as its decimal text with the scale it carries.
#[derive(Debug, PartialEq)]
struct Numeric(String);

impl ToSql for Numeric {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let (neg, body) = match self.0.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, self.0.as_str()),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let int = int.trim_start_matches('0');
        // base-10000 groups: integer digits from the point leftwards,
        // fraction digits from the point rightwards
        let mut padded = "0".repeat((4 - int.len() % 4) % 4) + int;
        let int_groups = padded.len() / 4;
        padded.push_str(frac);
        padded.push_str(&"0".repeat((4 - frac.len() % 4) % 4));
        let mut groups: Vec<i16> = padded
            .as_bytes()
            .chunks(4)
            .map(|c| std::str::from_utf8(c).unwrap().parse().unwrap())
            .collect();
        let mut weight = int_groups as i16 - 1;
        while groups.first() == Some(&0) {
            groups.remove(0);
            weight -= 1;
        }
        while groups.last() == Some(&0) {
            groups.pop();
        }
        if groups.is_empty() {
            weight = 0;
        }
        out.put_i16(groups.len() as i16);
        out.put_i16(weight);
        out.put_u16(if neg { 0x4000 } else { 0 });
        out.put_i16(frac.len() as i16);
        for g in groups {
            out.put_i16(g);
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Numeric {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Numeric, BoxError> {
        let i16_at = |i: usize| i16::from_be_bytes([raw[i], raw[i + 1]]);
        let (n, weight, sign, dscale) = (i16_at(0), i16_at(2), i16_at(4) as u16, i16_at(6));
        let digit = |k: i32| -> i16 {
            usize::try_from(k)
                .ok()
                .filter(|k| *k < n as usize)
                .map_or(0, |k| i16_at(8 + 2 * k))
        };
        let mut s = String::new();
        if sign == 0x4000 {
            s.push('-');
        }
        if weight < 0 {
            s.push('0');
        } else {
            s.push_str(&digit(0).to_string());
            for k in 1..=weight as i32 {
                s.push_str(&format!("{:04}", digit(k)));
            }
        }
        if dscale > 0 {
            let mut frac = String::new();
            let mut k = weight as i32 + 1;
            while frac.len() < dscale as usize {
                frac.push_str(&format!("{:04}", digit(k)));
                k += 1;
            }
            frac.truncate(dscale as usize);
            s.push('.');
            s.push_str(&frac);
        }
        Ok(Numeric(s))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

fn num(s: &str) -> Numeric {
    Numeric(s.to_string())
}

/// A `timestamp` / `timestamptz` in binary: microseconds since 2000-01-01
/// UTC.
#[derive(Debug, PartialEq)]
struct Micros(i64);

impl ToSql for Micros {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ || *ty == Type::TIMESTAMP
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Micros {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Micros, BoxError> {
        Ok(Micros(i64::from_be_bytes(raw.try_into()?)))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ || *ty == Type::TIMESTAMP
    }
}

/// 2024-01-01 10:30:00 UTC in microseconds since 2000-01-01.
const JAN1_1030_UTC: i64 = (8766 * 86_400 + 10 * 3600 + 30 * 60) * 1_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_keeps_its_scale() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_num").await;
        exec(
            &c,
            "CREATE TABLE wv_num (id INT PRIMARY KEY, n NUMERIC(18,4), m NUMERIC(10,2))",
        )
        .await;

        // simple-query literals (psql, psycopg2)
        exec(&c, "INSERT INTO wv_num VALUES (1, 12345.6789, 1.50)").await;
        exec(
            &c,
            "INSERT INTO wv_num VALUES (2, 99999999999999.9999, 1.005), (3, -0.00005, -1.005)",
        )
        .await;
        assert_eq!(
            simple_error(&c, "INSERT INTO wv_num VALUES (4, 0, 123456789.12)").await,
            "22003"
        );

        // text-format parameters declared NUMERIC (pgjdbc, psycopg 3)
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_num VALUES ($1, $2, $3)",
                &[Type::INT4, Type::NUMERIC, Type::NUMERIC],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&10i32, &Text("12345.6789"), &Text("1.50")])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&11i32, &Text("0"), &Text("123456789.12")])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22003");
        // untyped text parameters, typed by the server (node-postgres)
        let untyped = c
            .prepare("INSERT INTO wv_num VALUES ($1, $2, $3)")
            .await
            .unwrap();
        assert_eq!(untyped.params()[1], Type::NUMERIC);
        c.execute(&untyped, &[&Text("12"), &Text("1.005"), &Text("2.5")])
            .await
            .unwrap();
        // the general path: inside a transaction block, multi-row INSERT,
        // UPDATE with an expression
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&13i32, &Text("12345.6789"), &Text("1.50")])
            .await
            .unwrap();
        exec(&c, "COMMIT").await;
        let multi = c
            .prepare_typed(
                "INSERT INTO wv_num VALUES ($1, $2, $3), ($4, $5, $6)",
                &[
                    Type::INT4,
                    Type::NUMERIC,
                    Type::NUMERIC,
                    Type::INT4,
                    Type::NUMERIC,
                    Type::NUMERIC,
                ],
            )
            .await
            .unwrap();
        c.execute(
            &multi,
            &[
                &14i32,
                &Text("-1.00005"),
                &Text("-1.005"),
                &15i32,
                &Text("1e3"),
                &Text("0.125"),
            ],
        )
        .await
        .unwrap();
        let upd = c
            .prepare_typed(
                "UPDATE wv_num SET m = m + $1 WHERE id = $2",
                &[Type::NUMERIC, Type::INT4],
            )
            .await
            .unwrap();
        c.execute(&upd, &[&Text("0.005"), &15i32]).await.unwrap();

        // binary parameters (asyncpg, psycopg 3 binary)
        c.execute(&ins, &[&20i32, &num("12345.6789"), &num("1.50")])
            .await
            .unwrap();
        c.execute(&ins, &[&21i32, &num("-0.0001"), &num("1.005")])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&22i32, &num("0"), &num("123456789.12")])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22003");
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&23i32, &num("12345.6789"), &num("-1.50")])
            .await
            .unwrap();
        c.execute(&upd, &[&num("0.004"), &23i32]).await.unwrap();
        exec(&c, "COMMIT").await;

        // PostgreSQL 15's answers, in text
        let want = rows(&[
            &["1", "12345.6789", "1.50"],
            &["2", "99999999999999.9999", "1.01"],
            &["3", "-0.0001", "-1.01"],
            &["10", "12345.6789", "1.50"],
            &["12", "1.0050", "2.50"],
            &["13", "12345.6789", "1.50"],
            &["14", "-1.0001", "-1.01"],
            &["15", "1000.0000", "0.14"],
            &["20", "12345.6789", "1.50"],
            &["21", "-0.0001", "1.01"],
            &["23", "12345.6789", "-1.50"],
        ]);
        assert_eq!(
            texts(&c, "SELECT id, n, m FROM wv_num ORDER BY id").await,
            want
        );
        // ... and in binary, through the general and the fixed-plan reads
        let all = c
            .query("SELECT id, n, m FROM wv_num ORDER BY id", &[])
            .await
            .unwrap();
        let got: Vec<Vec<String>> = all
            .iter()
            .map(|r| {
                vec![
                    r.get::<_, i32>(0).to_string(),
                    r.get::<_, Numeric>(1).0,
                    r.get::<_, Numeric>(2).0,
                ]
            })
            .collect();
        assert_eq!(got, want);
        let one = c
            .prepare_typed("SELECT n, m FROM wv_num WHERE id = $1", &[Type::INT4])
            .await
            .unwrap();
        let r = c.query_one(&one, &[&21i32]).await.unwrap();
        assert_eq!((r.get(0), r.get(1)), (num("-0.0001"), num("1.01")));
        // a key lookup by a numeric parameter finds the row
        let by_m = c
            .prepare_typed(
                "SELECT id FROM wv_num WHERE m = $1 ORDER BY id",
                &[Type::NUMERIC],
            )
            .await
            .unwrap();
        let ids: Vec<i32> = c
            .query(&by_m, &[&num("1.5")])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(ids, vec![1, 10, 13, 20]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytea_text_input_is_decoded() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_bytes").await;
        exec(&c, "CREATE TABLE wv_bytes (id INT PRIMARY KEY, b BYTEA)").await;

        // literals: hex and escape formats (psycopg2 quotes bytea this way)
        exec(
            &c,
            r"INSERT INTO wv_bytes VALUES (1, '\x68656c6c6f'), (2, E'\\000ab\\\\c'), (3, 'a\101\377')",
        )
        .await;
        exec(
            &c,
            r"INSERT INTO wv_bytes VALUES (4, '\x6869'::bytea), (5, 'a\000b'::bytea)",
        )
        .await;
        assert_eq!(
            texts(&c, r"SELECT '\x6869'::bytea, 'a\000b'::bytea").await,
            rows(&[&[r"\x6869", r"\x610062"]])
        );
        assert_eq!(
            simple_error(&c, r"INSERT INTO wv_bytes VALUES (6, '\9')").await,
            "22P02"
        );

        // text-format parameters
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_bytes VALUES ($1, $2)",
                &[Type::INT4, Type::BYTEA],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&10i32, &Text(r"\x68656c6c6f")])
            .await
            .unwrap();
        c.execute(&ins, &[&11i32, &Text(r"\000ab\\c")])
            .await
            .unwrap();
        for (bad, state) in [(r"\x6", "22023"), (r"\9", "22P02")] {
            let e = c.execute(&ins, &[&19i32, &Text(bad)]).await.unwrap_err();
            assert_eq!(sqlstate(&e), state, "{bad}");
        }
        let untyped = c
            .prepare("INSERT INTO wv_bytes VALUES ($1, $2)")
            .await
            .unwrap();
        c.execute(&untyped, &[&Text("12"), &Text(r"\x00ff")])
            .await
            .unwrap();
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&13i32, &Text(r"a\101\\")]).await.unwrap();
        exec(&c, "COMMIT").await;
        // binary parameters are the bytes
        c.execute(&ins, &[&20i32, &vec![0u8, 1, 2, 255]])
            .await
            .unwrap();

        // PostgreSQL 15's answers
        let want: &[(i32, &[u8])] = &[
            (1, b"hello"),
            (2, b"\0ab\\c"),
            (3, b"aA\xff"),
            (4, b"hi"),
            (5, b"a\0b"),
            (10, b"hello"),
            (11, b"\0ab\\c"),
            (12, b"\0\xff"),
            (13, b"aA\\"),
            (20, b"\0\x01\x02\xff"),
        ];
        let hex = |b: &[u8]| {
            let mut s = String::from(r"\x");
            for x in b {
                s.push_str(&format!("{x:02x}"));
            }
            s
        };
        assert_eq!(
            texts(&c, "SELECT id, b FROM wv_bytes ORDER BY id").await,
            want.iter()
                .map(|(id, b)| vec![id.to_string(), hex(b)])
                .collect::<Vec<_>>()
        );
        let got: Vec<(i32, Vec<u8>)> = c
            .query("SELECT id, b FROM wv_bytes ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let want: Vec<(i32, Vec<u8>)> = want.iter().map(|(i, b)| (*i, b.to_vec())).collect();
        assert_eq!(got, want);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn float_specials_print_as_postgresql_does() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_float").await;
        exec(
            &c,
            "CREATE TABLE wv_float (id INT PRIMARY KEY, f FLOAT8, r REAL)",
        )
        .await;

        exec(
            &c,
            "INSERT INTO wv_float VALUES (1, 'NaN', 'Infinity'), (2, '-Infinity', '-inf'), \
             (3, 'inf', 'nan'), (4, 1e15, 1234567), (5, 0.00001, 0.1)",
        )
        .await;
        assert_eq!(
            texts(
                &c,
                "SELECT 'NaN'::float8, 'INFINITY'::float8, '-inf'::float4, 1e15::float8"
            )
            .await,
            rows(&[&["NaN", "Infinity", "-Infinity", "1e+15"]])
        );

        let ins = c
            .prepare_typed(
                "INSERT INTO wv_float VALUES ($1, $2, $3)",
                &[Type::INT4, Type::FLOAT8, Type::FLOAT4],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&10i32, &Text("NaN"), &Text("-Infinity")])
            .await
            .unwrap();
        c.execute(&ins, &[&11i32, &Text(" INF "), &Text("+inf")])
            .await
            .unwrap();
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&12i32, &Text("-inf"), &Text("nan")])
            .await
            .unwrap();
        exec(&c, "COMMIT").await;
        let e = c
            .execute(&ins, &[&13i32, &Text("1e400"), &Text("0")])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22003");
        let untyped = c
            .prepare("INSERT INTO wv_float VALUES ($1, $2, $3)")
            .await
            .unwrap();
        c.execute(&untyped, &[&Text("14"), &Text("Infinity"), &Text("-0")])
            .await
            .unwrap();
        c.execute(&ins, &[&20i32, &f64::NAN, &f32::NEG_INFINITY])
            .await
            .unwrap();
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&21i32, &f64::INFINITY, &f32::NAN])
            .await
            .unwrap();
        exec(&c, "COMMIT").await;

        // PostgreSQL 15's answers
        let want = rows(&[
            &["1", "NaN", "Infinity"],
            &["2", "-Infinity", "-Infinity"],
            &["3", "Infinity", "NaN"],
            &["4", "1e+15", "1.234567e+06"],
            &["5", "1e-05", "0.1"],
            &["10", "NaN", "-Infinity"],
            &["11", "Infinity", "Infinity"],
            &["12", "-Infinity", "NaN"],
            &["14", "Infinity", "-0"],
            &["20", "NaN", "-Infinity"],
            &["21", "Infinity", "NaN"],
        ]);
        assert_eq!(
            texts(&c, "SELECT id, f, r FROM wv_float ORDER BY id").await,
            want
        );
        // binary results carry the same values
        let show = |v: f64| {
            if v.is_nan() {
                "NaN".to_string()
            } else if v.is_infinite() {
                (if v > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
            } else {
                String::new()
            }
        };
        let got: Vec<(String, String)> = c
            .query(
                "SELECT f, r FROM wv_float WHERE id IN (1, 2, 3, 10, 11, 12, 20, 21) ORDER BY id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (show(r.get(0)), show(r.get::<_, f32>(1) as f64)))
            .collect();
        let want_special: Vec<(String, String)> = want
            .iter()
            .filter(|r| ["1", "2", "3", "10", "11", "12", "20", "21"].contains(&r[0].as_str()))
            .map(|r| (r[1].clone(), r[2].clone()))
            .collect();
        assert_eq!(got, want_special);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamptz_keeps_its_instant() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_ts").await;
        exec(
            &c,
            "CREATE TABLE wv_ts (id INT PRIMARY KEY, ts TIMESTAMPTZ)",
        )
        .await;

        exec(
            &c,
            "INSERT INTO wv_ts VALUES (1, '2024-01-01 12:30:00+02'), \
             (2, '2024-01-01 12:30+02'::timestamptz), (3, '2024-01-01T10:30:00Z')",
        )
        .await;
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_ts VALUES ($1, $2)",
                &[Type::INT4, Type::TIMESTAMPTZ],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&10i32, &Text("2024-01-01 12:30+02")])
            .await
            .unwrap();
        c.execute(&ins, &[&11i32, &Text("2024-01-01 05:30:00-05")])
            .await
            .unwrap();
        exec(&c, "BEGIN").await;
        c.execute(&ins, &[&12i32, &Text("2024-01-01 12:30+02")])
            .await
            .unwrap();
        exec(&c, "COMMIT").await;
        c.execute(&ins, &[&20i32, &Micros(JAN1_1030_UTC)])
            .await
            .unwrap();

        // PostgreSQL 15, TimeZone UTC: the same instant every time
        let ids = [1, 2, 3, 10, 11, 12, 20];
        let got: Vec<(i32, Micros)> = c
            .query("SELECT id, ts FROM wv_ts ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let want: Vec<(i32, Micros)> = ids.iter().map(|i| (*i, Micros(JAN1_1030_UTC))).collect();
        assert_eq!(got, want);
        assert_eq!(
            texts(&c, "SELECT id, ts::timestamptz FROM wv_ts ORDER BY id").await,
            ids.iter()
                .map(|i| vec![i.to_string(), "2024-01-01 10:30:00+00".to_string()])
                .collect::<Vec<_>>()
        );

        // timestamptz-typed results print their zone; timestamp input
        // ignores a zone suffix
        assert_eq!(
            texts(
                &c,
                "SELECT '2024-01-01 12:30+02'::timestamptz, '2024-01-01 12:30+02'::timestamp"
            )
            .await,
            rows(&[&["2024-01-01 10:30:00+00", "2024-01-01 12:30:00"]])
        );
        let sel = c
            .prepare_typed("SELECT $1::timestamptz", &[Type::TIMESTAMPTZ])
            .await
            .unwrap();
        let r = c
            .query_one(&sel, &[&Text("2024-01-01 12:30+02")])
            .await
            .unwrap();
        assert_eq!(r.get::<_, Micros>(0), Micros(JAN1_1030_UTC));
    })
    .await;
}

/// A session's TimeZone reads text without an offset on its wall clock,
/// whichever path the value takes (a text or binary parameter, a prepared
/// statement planned in another zone, COPY, the fixed-plan write), and
/// writes instants there; the stored instants do not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_follow_the_session_time_zone() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_tz").await;
        exec(
            &c,
            "CREATE TABLE wv_tz (id INT PRIMARY KEY, ts TIMESTAMPTZ)",
        )
        .await;
        // planned in UTC, run in Berlin: the zone of the Execute counts
        let sel = c
            .prepare_typed("SELECT $1::timestamptz", &[Type::TIMESTAMPTZ])
            .await
            .unwrap();
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_tz VALUES ($1, $2)",
                &[Type::INT4, Type::TIMESTAMPTZ],
            )
            .await
            .unwrap();
        exec(&c, "SET TimeZone = 'Europe/Berlin'").await;
        // PostgreSQL 15: 11:30 in Berlin in winter is 10:30 UTC
        let r = c
            .query_one(&sel, &[&Text("2024-01-01 11:30")])
            .await
            .unwrap();
        assert_eq!(r.get::<_, Micros>(0), Micros(JAN1_1030_UTC));
        c.execute(&ins, &[&1i32, &Text("2024-01-01 11:30")])
            .await
            .unwrap();
        c.execute(
            "INSERT INTO wv_tz VALUES ($1, $2)",
            &[&2i32, &Micros(JAN1_1030_UTC)],
        )
        .await
        .unwrap();
        let sink = c.copy_in("COPY wv_tz FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(
            b"3\t2024-01-01 11:30\n4\t2024-01-01 10:30+00\n",
        ))
        .await
        .unwrap();
        sink.finish().await.unwrap();
        let got: Vec<(i32, Micros)> = c
            .query("SELECT id, ts FROM wv_tz ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(
            got,
            (1..=4)
                .map(|i| (i, Micros(JAN1_1030_UTC)))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            texts(
                &c,
                "SELECT ts, ts::date, ts::timestamp FROM wv_tz WHERE id = 1"
            )
            .await,
            rows(&[&[
                "2024-01-01 11:30:00+01",
                "2024-01-01",
                "2024-01-01 11:30:00"
            ]])
        );
        exec(&c, "SET TimeZone = 'America/New_York'").await;
        assert_eq!(
            texts(&c, "SELECT ts FROM wv_tz WHERE id = 4").await,
            rows(&[&["2024-01-01 05:30:00-05"]])
        );
        exec(&c, "RESET TimeZone").await;
        assert_eq!(
            texts(&c, "SELECT ts FROM wv_tz WHERE id = 4").await,
            rows(&[&["2024-01-01 10:30:00+00"]])
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varchar_casts_truncate() {
    on_servers(|c| async move {
        // PostgreSQL 15: an explicit cast to varchar(n) truncates
        assert_eq!(
            texts(&c, "SELECT 'abcdef'::varchar(3), CAST('ab' AS VARCHAR(5))").await,
            rows(&[&["abc", "ab"]])
        );
    })
    .await;
}

/// char(n) pads on output and is stored without its trailing spaces,
/// varchar(n) keeps them; both refuse a longer value with 22001 unless the
/// excess is spaces; a timestamptz column keeps the instant of a literal
/// with an offset. Every expectation is PostgreSQL 15's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_type_modifiers() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_mods").await;
        exec(
            &c,
            "CREATE TABLE wv_mods (id INT PRIMARY KEY, c CHAR(5), v VARCHAR(5), ts TIMESTAMPTZ)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO wv_mods VALUES (1, 'ab', 'ab', '2024-01-01 12:30+02'), \
             (2, 'abcde   ', 'abc  ', NULL)",
        )
        .await;
        for sql in [
            "INSERT INTO wv_mods VALUES (3, 'abcdef', 'x', NULL)",
            "INSERT INTO wv_mods VALUES (3, 'x', 'abcdef', NULL)",
        ] {
            assert_eq!(simple_error(&c, sql).await, "22001", "{sql}");
        }
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_mods VALUES ($1, $2, $3, NULL)",
                &[Type::INT4, Type::BPCHAR, Type::VARCHAR],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&4i32, &Text("xy"), &Text("xy")])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&5i32, &Text("abcdef"), &Text("x")])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22001");
        assert_eq!(
            text_rows(&c, "SELECT id, c, v, ts FROM wv_mods ORDER BY id").await,
            vec![
                vec![
                    Some("1".into()),
                    Some("ab   ".into()),
                    Some("ab".into()),
                    Some("2024-01-01 10:30:00+00".into())
                ],
                vec![
                    Some("2".into()),
                    Some("abcde".into()),
                    Some("abc  ".into()),
                    None
                ],
                vec![
                    Some("4".into()),
                    Some("xy   ".into()),
                    Some("xy".into()),
                    None
                ],
            ]
        );
        assert_eq!(
            texts(&c, "SELECT 'ab'::char(5), 'abcdef'::char(3)").await,
            rows(&[&["ab   ", "abc"]])
        );
    })
    .await;
}

/// The declared types reach the client and every write path checks them:
/// RowDescription says bpchar / varchar / timestamptz, an UPDATE and a COPY
/// get 22001 like an INSERT, a char(n) column compares without its padding,
/// and the catalog prints the declared types. PostgreSQL 15's answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_type_modifiers_on_every_path() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_mods2").await;
        exec(
            &c,
            "CREATE TABLE wv_mods2 (id INT PRIMARY KEY, c CHAR(3), v VARCHAR(3), ts TIMESTAMPTZ)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO wv_mods2 VALUES (1, 'a', 'a', '2024-06-01 00:00:00-05')",
        )
        .await;
        let stmt = c.prepare("SELECT c, v, ts FROM wv_mods2").await.unwrap();
        let types: Vec<Type> = stmt
            .columns()
            .iter()
            .map(|col| col.type_().clone())
            .collect();
        assert_eq!(types, vec![Type::BPCHAR, Type::VARCHAR, Type::TIMESTAMPTZ]);
        let stmt = c
            .prepare("SELECT c, v, ts FROM wv_mods2 WHERE id = 1")
            .await
            .unwrap();
        let types: Vec<Type> = stmt
            .columns()
            .iter()
            .map(|col| col.type_().clone())
            .collect();
        assert_eq!(types, vec![Type::BPCHAR, Type::VARCHAR, Type::TIMESTAMPTZ]);
        assert_eq!(
            texts(&c, "SELECT c, v, ts FROM wv_mods2 WHERE id = 1").await,
            rows(&[&["a  ", "a", "2024-06-01 05:00:00+00"]])
        );
        assert_eq!(
            texts(&c, "SELECT id FROM wv_mods2 WHERE c = 'a'").await,
            rows(&[&["1"]])
        );
        for sql in [
            "UPDATE wv_mods2 SET v = 'abcd' WHERE id = 1",
            "UPDATE wv_mods2 SET c = 'abcd' WHERE id = 1",
            "INSERT INTO wv_mods2 SELECT 2, 'abcd', 'x', NULL",
        ] {
            assert_eq!(simple_error(&c, sql).await, "22001", "{sql}");
        }
        let sink = c.copy_in("COPY wv_mods2 FROM STDIN").await.unwrap();
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from_static(b"3\tx\tlong\t\\N\n"))
            .await
            .unwrap();
        let e = sink.finish().await.unwrap_err();
        assert_eq!(sqlstate(&e), "22001");
        assert_eq!(
            texts(
                &c,
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                 FROM pg_attribute a JOIN pg_class r ON a.attrelid = r.oid \
                 WHERE r.relname = 'wv_mods2' AND a.attnum > 0 ORDER BY a.attnum"
            )
            .await,
            rows(&[
                &["id", "integer"],
                &["c", "character(3)"],
                &["v", "character varying(3)"],
                &["ts", "timestamp with time zone"]
            ])
        );
    })
    .await;
}

/// Result column names, by the extended protocol's Describe and by the
/// simple protocol's RowDescription, are PostgreSQL 15's (`count`,
/// `?column?`, `int4`, `case`), and a name may repeat (`SELECT $1, $1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_columns_have_postgresql_names() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_names").await;
        exec(&c, "DROP TABLE IF EXISTS wv_names_ctas").await;
        exec(&c, "CREATE TABLE wv_names (id INT PRIMARY KEY, v TEXT)").await;
        exec(&c, "INSERT INTO wv_names VALUES (1, 'a'), (2, 'b')").await;
        let cases: &[(&str, &[&str])] = &[
            (
                "SELECT count(*), 1 + 1, 'a', 'a'::text, '1'::int, CASE WHEN true THEN 1 END, \
                 coalesce(NULL, 2), sum(id) AS total FROM wv_names",
                &[
                    "count", "?column?", "?column?", "text", "int4", "case", "coalesce", "total",
                ],
            ),
            ("SELECT id, id, x.v FROM wv_names x", &["id", "id", "v"]),
            (
                "SELECT (SELECT max(id) FROM wv_names), upper(v), DATE '2024-01-01' FROM wv_names",
                &["max", "upper", "date"],
            ),
            (
                "SELECT * FROM (SELECT count(*), min(v) FROM wv_names) s",
                &["count", "min"],
            ),
            (
                "SELECT v, count(*) FROM wv_names GROUP BY v ORDER BY count DESC, v",
                &["v", "count"],
            ),
        ];
        for (sql, names) in cases {
            let stmt = c.prepare(sql).await.unwrap();
            let got: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
            assert_eq!(&got, names, "Describe of {sql}");
            let msgs = c.simple_query(sql).await.unwrap();
            let described = msgs.iter().find_map(|m| match m {
                SimpleQueryMessage::RowDescription(cols) => Some(
                    cols.iter()
                        .map(|col| col.name().to_string())
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            });
            assert_eq!(
                described.as_deref(),
                Some(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>()[..]),
                "RowDescription of {sql}"
            );
        }
        // the same parameter twice, and its values
        let row = c
            .query_one("SELECT $1::int, $1::int", &[&7i32])
            .await
            .unwrap();
        let names: Vec<&str> = row.columns().iter().map(|col| col.name()).collect();
        assert_eq!(names, ["int4", "int4"]);
        assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (7, 7));
        // CREATE TABLE AS names its columns the same way
        exec(
            &c,
            "CREATE TABLE wv_names_ctas AS SELECT count(*), max(v) FROM wv_names",
        )
        .await;
        let stmt = c.prepare("SELECT * FROM wv_names_ctas").await.unwrap();
        let got: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
        assert_eq!(got, ["count", "max"]);
        assert_eq!(
            simple_error(&c, "CREATE TABLE wv_names_dup AS SELECT 1 AS a, 2 AS a").await,
            "42701"
        );
    })
    .await;
}

/// Integer arithmetic that overflows is 22003, never a wrapped number:
/// DataFusion's kernels wrap (`9223372036854775807 + 1` was negative and
/// `UPDATE ... SET n = n * 2` could store it). PostgreSQL 15's answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integer_overflow_is_an_error() {
    on_servers(|c| async move {
        for sql in [
            "SELECT 2147483647::int + 1::int",
            "SELECT 9223372036854775807 + 1",
            "SELECT (-9223372036854775807 - 1) - 1",
            "SELECT 3037000500 * 3037000500",
            "SELECT 32767::smallint + 1::smallint",
        ] {
            assert_eq!(simple_error(&c, sql).await, "22003", "{sql}");
        }
        assert_eq!(
            texts(
                &c,
                "SELECT 9223372036854775806 + 1, 2147483646::int + 1::int"
            )
            .await,
            rows(&[&["9223372036854775807", "2147483647"]])
        );
        exec(&c, "DROP TABLE IF EXISTS wv_overflow").await;
        exec(
            &c,
            "CREATE TABLE wv_overflow (id INT PRIMARY KEY, n INT, b BIGINT)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO wv_overflow VALUES (1, 2147483647, 9223372036854775807)",
        )
        .await;
        for sql in [
            "UPDATE wv_overflow SET n = n * 2 WHERE id > 0",
            "UPDATE wv_overflow SET b = b + id WHERE id > 0",
            "SELECT b * 2 FROM wv_overflow",
            "SELECT n + n FROM wv_overflow",
        ] {
            assert_eq!(simple_error(&c, sql).await, "22003", "{sql}");
        }
        assert_eq!(
            texts(&c, "SELECT n, b FROM wv_overflow").await,
            rows(&[&["2147483647", "9223372036854775807"]])
        );
    })
    .await;
}

/// `information_schema` describes columns with PostgreSQL's names, not
/// Arrow's (`Int32`, `Utf8`, `Decimal128(18, 4)` before). PostgreSQL 15's
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn information_schema_speaks_postgresql() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_info").await;
        exec(
            &c,
            "CREATE TABLE wv_info (id INT PRIMARY KEY, n NUMERIC(18,4), v VARCHAR(7), \
             c CHAR(2), t TEXT, ts TIMESTAMPTZ, b BIGINT NOT NULL, f DOUBLE PRECISION)",
        )
        .await;
        assert_eq!(
            texts(
                &c,
                "SELECT column_name::text, data_type::text, udt_name::text, is_nullable::text, \
                 coalesce(character_maximum_length::text, '-'), \
                 coalesce(numeric_precision::text, '-'), coalesce(numeric_scale::text, '-') \
                 FROM information_schema.columns WHERE table_name = 'wv_info' \
                 ORDER BY ordinal_position"
            )
            .await,
            rows(&[
                &["id", "integer", "int4", "NO", "-", "32", "0"],
                &["n", "numeric", "numeric", "YES", "-", "18", "4"],
                &["v", "character varying", "varchar", "YES", "7", "-", "-"],
                &["c", "character", "bpchar", "YES", "2", "-", "-"],
                &["t", "text", "text", "YES", "-", "-", "-"],
                &[
                    "ts",
                    "timestamp with time zone",
                    "timestamptz",
                    "YES",
                    "-",
                    "-",
                    "-"
                ],
                &["b", "bigint", "int8", "NO", "-", "64", "0"],
                &["f", "double precision", "float8", "YES", "-", "53", "-"],
            ])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT table_schema::text, table_type::text FROM information_schema.tables \
                 WHERE table_name = 'wv_info'"
            )
            .await,
            rows(&[&["public", "BASE TABLE"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT tc.constraint_type::text, k.column_name::text \
                 FROM information_schema.table_constraints tc \
                 JOIN information_schema.key_column_usage k \
                 ON k.constraint_name = tc.constraint_name AND k.table_name = tc.table_name \
                 WHERE tc.table_name = 'wv_info'"
            )
            .await,
            rows(&[&["PRIMARY KEY", "id"]])
        );
    })
    .await;
}

/// Bytes that are not UTF-8 are 22021 ("invalid byte sequence for
/// encoding"), in a COPY line or made by its escapes, as in PostgreSQL 15
/// (it was 22P04).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_22021() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_utf8").await;
        exec(&c, "CREATE TABLE wv_utf8 (id INT PRIMARY KEY, v TEXT)").await;
        for line in [&b"1\tab\xffcd\n"[..], &b"2\t\\377\n"[..]] {
            let sink = c.copy_in("COPY wv_utf8 FROM STDIN").await.unwrap();
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::copy_from_slice(line))
                .await
                .unwrap();
            let e = sink.finish().await.unwrap_err();
            assert_eq!(sqlstate(&e), "22021", "{line:?}: {e:?}");
        }
        assert_eq!(
            texts(&c, "SELECT count(*) FROM wv_utf8").await,
            rows(&[&["0"]])
        );
    })
    .await;
}

/// Binary COPY TO reads with tokio-postgres's `BinaryCopyOutStream`,
/// which needs the header in one message with the first row (or the
/// trailer), as PostgreSQL sends it: rows, and an empty result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_copy_out_reads_with_a_driver() {
    on_servers(|c| async move {
        use futures::TryStreamExt;
        use tokio_postgres::binary_copy::BinaryCopyOutStream;
        exec(&c, "DROP TABLE IF EXISTS wv_bcopy").await;
        exec(&c, "CREATE TABLE wv_bcopy (id INT PRIMARY KEY, v TEXT)").await;
        exec(
            &c,
            "INSERT INTO wv_bcopy VALUES (1, 'a'), (2, NULL), (3, 'é')",
        )
        .await;
        let types = [Type::INT4, Type::TEXT];
        let read = |sql: &'static str| {
            let c = &c;
            let types = types.clone();
            async move {
                let out = c.copy_out(sql).await.unwrap();
                let rows: Vec<tokio_postgres::binary_copy::BinaryCopyOutRow> =
                    BinaryCopyOutStream::new(out, &types)
                        .try_collect()
                        .await
                        .unwrap();
                rows.iter()
                    .map(|r| (r.get::<i32>(0), r.get::<Option<String>>(1)))
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            read("COPY (SELECT id, v FROM wv_bcopy ORDER BY id) TO STDOUT WITH (FORMAT binary)")
                .await,
            [
                (1, Some("a".to_string())),
                (2, None),
                (3, Some("é".to_string()))
            ]
        );
        assert_eq!(
            read("COPY (SELECT id, v FROM wv_bcopy WHERE id > 9) TO STDOUT WITH (FORMAT binary)")
                .await,
            []
        );
    })
    .await;
}

/// A `uuid` in binary: its 16 bytes (tokio-postgres needs a feature for
/// its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Uuid16([u8; 16]);

impl ToSql for Uuid16 {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Uuid16 {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Uuid16, BoxError> {
        Ok(Uuid16(raw.try_into()?))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
}

fn uuid16(s: &str) -> Uuid16 {
    let hex: String = s.chars().filter(char::is_ascii_hexdigit).collect();
    let mut b = [0u8; 16];
    for (i, x) in b.iter_mut().enumerate() {
        *x = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    Uuid16(b)
}

const U1: &str = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
const U2: &str = "00000000-0000-0000-0000-000000000000";
const U3: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";
const U4: &str = "123e4567-e89b-12d3-a456-426614174000";
const U5: &str = "6ba7b810-9dad-11d1-80b4-00c04fd430c8";
const U6: &str = "6ba7b811-9dad-11d1-80b4-00c04fd430c8";
const U7: &str = "6ba7b812-9dad-11d1-80b4-00c04fd430c8";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid_round_trips() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_uuid").await;
        exec(
            &c,
            "CREATE TABLE wv_uuid (id UUID PRIMARY KEY, n INT, other uuid)",
        )
        .await;
        // literals in PostgreSQL's input forms: fixed-plan path (one row,
        // autocommit), general path (several rows, a transaction block)
        exec(
            &c,
            "INSERT INTO wv_uuid VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 1, NULL)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO wv_uuid VALUES ('{00000000-0000-0000-0000-000000000000}', 2, \
             'a0eebc999c0b4ef8bb6d6bb9bd380a11'), \
             ('ffff-ffff-ffff-ffff-ffff-ffff-ffff-ffff', 3, '{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}')",
        )
        .await;
        exec(
            &c,
            "BEGIN; INSERT INTO wv_uuid VALUES ('123e4567-e89b-12d3-a456-426614174000'::uuid, 4, NULL); COMMIT",
        )
        .await;
        for bad in [
            "INSERT INTO wv_uuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1', 9, NULL)",
            "INSERT INTO wv_uuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-', 9, NULL)",
            "INSERT INTO wv_uuid VALUES ('x', 9, NULL), ('y', 10, NULL)",
            "SELECT 'a0eeb-c99'::uuid",
            "SELECT * FROM wv_uuid WHERE id = 'nope'",
        ] {
            assert_eq!(simple_error(&c, bad).await, "22P02", "{bad}");
        }
        assert_eq!(
            simple_error(
                &c,
                "INSERT INTO wv_uuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 9, NULL)"
            )
            .await,
            "23505"
        );

        // text and binary parameters, typed and untyped
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_uuid VALUES ($1, $2, $3)",
                &[Type::UUID, Type::INT4, Type::UUID],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&uuid16(U5), &5i32, &uuid16(U1)])
            .await
            .unwrap();
        c.execute(&ins, &[&Text("6BA7B811-9DAD-11D1-80B4-00C04FD430C8"), &6i32, &None::<Uuid16>])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&Text("zz"), &8i32, &None::<Uuid16>])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P02");
        let untyped = c
            .prepare("INSERT INTO wv_uuid (id, n) VALUES ($1, $2)")
            .await
            .unwrap();
        assert_eq!(untyped.params()[0], Type::UUID);
        c.execute(&untyped, &[&uuid16(U7), &7i32]).await.unwrap();

        // text results, ordered as PostgreSQL orders uuids (bytewise)
        assert_eq!(
            texts(&c, "SELECT id, n, other FROM wv_uuid ORDER BY id").await,
            rows(&[
                &[U2, "2", U1],
                &[U4, "4", "NULL"],
                &[U5, "5", U1],
                &[U6, "6", "NULL"],
                &[U7, "7", "NULL"],
                &[U1, "1", "NULL"],
                &[U3, "3", U1],
            ])
        );
        // binary results
        let got: Vec<(Uuid16, i32, Option<Uuid16>)> = c
            .query("SELECT id, n, other FROM wv_uuid ORDER BY n", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(got.len(), 7);
        assert_eq!(got[0], (uuid16(U1), 1, None));
        assert_eq!(got[1], (uuid16(U2), 2, Some(uuid16(U1))));
        assert_eq!(got[4], (uuid16(U5), 5, Some(uuid16(U1))));

        // point lookups: literal in any form, text and binary parameters
        assert_eq!(
            texts(
                &c,
                "SELECT n FROM wv_uuid WHERE id = 'A0EEBC999C0B4EF8BB6D6BB9BD380A11'"
            )
            .await,
            rows(&[&["1"]])
        );
        let get = c
            .prepare("SELECT n FROM wv_uuid WHERE id = $1")
            .await
            .unwrap();
        assert_eq!(get.params()[0], Type::UUID);
        let n: i32 = c.query_one(&get, &[&uuid16(U4)]).await.unwrap().get(0);
        assert_eq!(n, 4);
        let get_text = c
            .prepare_typed("SELECT n FROM wv_uuid WHERE id = $1", &[Type::UUID])
            .await
            .unwrap();
        let n: i32 = c
            .query_one(&get_text, &[&Text("ffffffffffffffffffffffffffffffff")])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 3);
        let any = c
            .prepare("SELECT n FROM wv_uuid WHERE id = ANY($1)")
            .await
            .unwrap();
        let mut ns: Vec<i32> = c
            .query(&any, &[&vec![uuid16(U1), uuid16(U6), uuid16(U4)]])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        ns.sort();
        assert_eq!(ns, vec![1, 4, 6]);

        // WHERE, GROUP BY, joins, IN, casts to text
        assert_eq!(
            texts(
                &c,
                "SELECT other, count(*) FROM wv_uuid WHERE other IS NOT NULL GROUP BY other"
            )
            .await,
            rows(&[&[U1, "3"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT a.n, b.n FROM wv_uuid a JOIN wv_uuid b ON a.other = b.id ORDER BY a.n"
            )
            .await,
            rows(&[&["2", "1"], &["3", "1"], &["5", "1"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT n FROM wv_uuid WHERE id IN ('00000000000000000000000000000000', \
                 '{FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF}') ORDER BY n"
            )
            .await,
            rows(&[&["2"], &["3"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT id::text, upper(id::text), 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid \
                 FROM wv_uuid WHERE n = 1"
            )
            .await,
            rows(&[&[U1, &U1.to_uppercase(), U1]])
        );
        assert_eq!(
            texts(&c, "SELECT n FROM wv_uuid WHERE id > 'ffff0000-0000-0000-0000-000000000000'")
                .await,
            rows(&[&["3"]])
        );

        // gen_random_uuid() is a version 4 uuid, storable in the column
        exec(
            &c,
            "INSERT INTO wv_uuid VALUES (gen_random_uuid(), 100, gen_random_uuid())",
        )
        .await;
        assert_eq!(
            texts(
                &c,
                "SELECT length(id::text), substr(id::text, 15, 1), id <> other \
                 FROM wv_uuid WHERE n = 100"
            )
            .await,
            rows(&[&["36", "4", "t"]])
        );

        // the catalog's names
        assert_eq!(
            texts(
                &c,
                "SELECT column_name, data_type, udt_name FROM information_schema.columns \
                 WHERE table_name = 'wv_uuid' ORDER BY ordinal_position"
            )
            .await,
            rows(&[
                &["id", "uuid", "uuid"],
                &["n", "integer", "int4"],
                &["other", "uuid", "uuid"],
            ])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT a.atttypid, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 JOIN pg_class c ON a.attrelid = c.oid \
                 WHERE c.relname = 'wv_uuid' AND a.attname = 'id'"
            )
            .await,
            rows(&[&["2950", "uuid"]])
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid_copy_and_restart() {
    let mut srv = Server::start("trust");
    let c = srv.connect().await;
    exec(
        &c,
        "CREATE TABLE wv_uuid_r (id uuid PRIMARY KEY, v uuid) WITH (orientation = 'row,column')",
    )
    .await;
    // the other new types persist too
    exec(
        &c,
        "CREATE TABLE wv_types_r (id INT PRIMARY KEY, j JSON, b JSONB, iv INTERVAL, t TIME) \
         WITH (orientation = 'row,column')",
    )
    .await;
    exec(
        &c,
        r#"INSERT INTO wv_types_r VALUES (1, '{"x" : 1}', '{"x" : 1, "a": [2]}', '1 year -2 days 03:00:00.5', '23:59:59.999999'), (2, NULL, NULL, NULL, NULL)"#,
    )
    .await;
    let sink = c.copy_in("COPY wv_uuid_r FROM STDIN").await.unwrap();
    let mut sink = Box::pin(sink);
    sink.send(bytes::Bytes::from(format!(
        "{}\t{}\n{}\t\\N\n",
        U1.to_uppercase(),
        U2.replace('-', ""),
        U3
    )))
    .await
    .unwrap();
    sink.as_mut().finish().await.unwrap();
    let bad = c.copy_in("COPY wv_uuid_r FROM STDIN").await.unwrap();
    let mut bad = Box::pin(bad);
    bad.send(bytes::Bytes::from_static(b"nope\t\\N\n"))
        .await
        .unwrap();
    let e = bad.as_mut().finish().await.unwrap_err();
    assert_eq!(sqlstate(&e), "22P02");
    drop(c);

    srv.stop();
    let data = srv.data_dir.clone();
    let dir = srv._dir.take();
    drop(srv);
    let srv2 = Server::start_in(dir, data, "trust");
    let c = srv2.connect().await;
    assert_eq!(
        texts(&c, "SELECT id, v FROM wv_uuid_r ORDER BY id").await,
        rows(&[&[U1, U2], &[U3, "NULL"]])
    );
    assert_eq!(
        texts(&c, "SELECT id, j, b, iv, t FROM wv_types_r ORDER BY id").await,
        rows(&[
            &[
                "1",
                r#"{"x" : 1}"#,
                r#"{"a": [2], "x": 1}"#,
                "1 year -2 days +03:00:00.5",
                "23:59:59.999999"
            ],
            &["2", "NULL", "NULL", "NULL", "NULL"],
        ])
    );
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM wv_uuid_r WHERE id = $1",
            &[&uuid16(U3)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
}

/// A `json` / `jsonb` value in binary: jsonb is version byte 1, then the
/// text; json is the text.
#[derive(Clone, Debug, PartialEq)]
struct JsonText(String);

impl ToSql for JsonText {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        if *ty == Type::JSONB {
            out.put_u8(1);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || *ty == Type::JSONB
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for JsonText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<JsonText, BoxError> {
        let body = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("bad jsonb version".into()),
            }
        } else {
            raw
        };
        Ok(JsonText(std::str::from_utf8(body)?.to_string()))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || *ty == Type::JSONB
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_jsonb_round_trip() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_json").await;
        exec(&c, "CREATE TABLE wv_json (id INT PRIMARY KEY, j JSON, b JSONB)").await;
        exec(
            &c,
            r#"INSERT INTO wv_json VALUES (1, '{"b": 1,  "a":[true]}', '{"b": 1,  "a":[true], "b": "é\n"}')"#,
        )
        .await;
        exec(
            &c,
            r#"BEGIN; INSERT INTO wv_json VALUES (2, '"x"', '"x"'), (3, NULL, 'null'); COMMIT"#,
        )
        .await;
        assert_eq!(
            simple_error(&c, "INSERT INTO wv_json VALUES (9, '{', NULL)").await,
            "22P02"
        );
        assert_eq!(
            simple_error(&c, "INSERT INTO wv_json VALUES (9, NULL, 'tru')").await,
            "22P02"
        );
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_json VALUES ($1, $2, $3)",
                &[Type::INT4, Type::JSON, Type::JSONB],
            )
            .await
            .unwrap();
        // binary parameters
        c.execute(
            &ins,
            &[
                &4i32,
                &JsonText(r#"{"z":0, "z":1}"#.into()),
                &JsonText(r#"{"z":0, "z":1, "yy": [1,2]}"#.into()),
            ],
        )
        .await
        .unwrap();
        // text parameters
        c.execute(&ins, &[&5i32, &Text("[1,2 ]"), &Text(r#"{"k":"v"}"#)])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&6i32, &Text("[1,"), &None::<JsonText>])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P02");

        let want = rows(&[
            &["1", r#"{"b": 1,  "a":[true]}"#, "{\"a\": [true], \"b\": \"é\\n\"}"],
            &["2", r#""x""#, r#""x""#],
            &["3", "NULL", "null"],
            &["4", r#"{"z":0, "z":1}"#, r#"{"z": 1, "yy": [1, 2]}"#],
            &["5", "[1,2 ]", r#"{"k": "v"}"#],
        ]);
        assert_eq!(texts(&c, "SELECT id, j, b FROM wv_json ORDER BY id").await, want);
        // binary results: the OIDs and jsonb's version byte
        let got = c
            .query("SELECT id, j, b FROM wv_json ORDER BY id", &[])
            .await
            .unwrap();
        assert_eq!(got[0].columns()[1].type_(), &Type::JSON);
        assert_eq!(got[0].columns()[2].type_(), &Type::JSONB);
        let got: Vec<Vec<String>> = got
            .iter()
            .map(|r| {
                let j: Option<JsonText> = r.get(1);
                let b: Option<JsonText> = r.get(2);
                vec![
                    r.get::<_, i32>(0).to_string(),
                    j.map_or("NULL".into(), |x| x.0),
                    b.map_or("NULL".into(), |x| x.0),
                ]
            })
            .collect();
        assert_eq!(got, want);

        // operators on jsonb
        assert_eq!(
            texts(
                &c,
                "SELECT b -> 'a', b ->> 'b', b -> 'a' -> 0, b ->> 'nope' FROM wv_json WHERE id = 1"
            )
            .await,
            rows(&[&["[true]", "é\n", "true", "NULL"]])
        );
        assert_eq!(
            texts(
                &c,
                r#"SELECT id FROM wv_json WHERE b @> '{"yy": [2]}' OR b ? 'k' ORDER BY id"#
            )
            .await,
            rows(&[&["4"], &["5"]])
        );
        let arrow = c
            .query("SELECT b -> 'yy' FROM wv_json WHERE id = 4", &[])
            .await
            .unwrap();
        assert_eq!(arrow[0].columns()[0].type_(), &Type::JSONB);
        assert_eq!(arrow[0].get::<_, JsonText>(0).0, "[1, 2]");

        assert_eq!(
            texts(
                &c,
                "SELECT column_name, data_type, udt_name FROM information_schema.columns \
                 WHERE table_name = 'wv_json' AND column_name <> 'id' ORDER BY ordinal_position"
            )
            .await,
            rows(&[&["j", "json", "json"], &["b", "jsonb", "jsonb"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT a.atttypid, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 JOIN pg_class c ON a.attrelid = c.oid \
                 WHERE c.relname = 'wv_json' AND a.attnum > 1 ORDER BY a.attnum"
            )
            .await,
            rows(&[&["114", "json"], &["3802", "jsonb"]])
        );
    })
    .await;
}

/// An `interval` in binary: microseconds, days, months.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PgInterval {
    micros: i64,
    days: i32,
    months: i32,
}

impl ToSql for PgInterval {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.micros);
        out.put_i32(self.days);
        out.put_i32(self.months);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for PgInterval {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<PgInterval, BoxError> {
        let raw: [u8; 16] = raw.try_into()?;
        Ok(PgInterval {
            micros: i64::from_be_bytes(raw[..8].try_into()?),
            days: i32::from_be_bytes(raw[8..12].try_into()?),
            months: i32::from_be_bytes(raw[12..].try_into()?),
        })
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_round_trips() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_interval").await;
        exec(
            &c,
            "CREATE TABLE wv_interval (id INT PRIMARY KEY, d INTERVAL)",
        )
        .await;
        exec(
            &c,
            "INSERT INTO wv_interval VALUES (1, '1 year 2 mons 3 days 04:05:06.5')",
        )
        .await;
        exec(
            &c,
            "BEGIN; INSERT INTO wv_interval VALUES (2, 'P1Y2M'), (3, '-1 days +01:00:00'); COMMIT",
        )
        .await;
        assert_eq!(
            simple_error(&c, "INSERT INTO wv_interval VALUES (9, '1 fortnight')").await,
            "22007"
        );
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_interval VALUES ($1, $2)",
                &[Type::INT4, Type::INTERVAL],
            )
            .await
            .unwrap();
        let bin = PgInterval {
            micros: -1_500_000,
            days: 2,
            months: -13,
        };
        c.execute(&ins, &[&4i32, &bin]).await.unwrap();
        c.execute(&ins, &[&5i32, &Text("@ 2 hours ago")])
            .await
            .unwrap();
        c.execute(&ins, &[&6i32, &None::<PgInterval>])
            .await
            .unwrap();
        let e = c.execute(&ins, &[&7i32, &Text("nope")]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "22007");

        assert_eq!(
            texts(&c, "SELECT id, d FROM wv_interval ORDER BY id").await,
            rows(&[
                &["1", "1 year 2 mons 3 days 04:05:06.5"],
                &["2", "1 year 2 mons"],
                &["3", "-1 days +01:00:00"],
                &["4", "-1 years -1 mons +2 days -00:00:01.5"],
                &["5", "-02:00:00"],
                &["6", "NULL"],
            ])
        );
        let got: Vec<Option<PgInterval>> = c
            .query("SELECT d FROM wv_interval ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(
            got,
            vec![
                Some(PgInterval {
                    micros: 14_706_500_000,
                    days: 3,
                    months: 14
                }),
                Some(PgInterval {
                    micros: 0,
                    days: 0,
                    months: 14
                }),
                Some(PgInterval {
                    micros: 3_600_000_000,
                    days: -1,
                    months: 0
                }),
                Some(bin),
                Some(PgInterval {
                    micros: -7_200_000_000,
                    days: 0,
                    months: 0
                }),
                None,
            ]
        );
        assert_eq!(
            texts(
                &c,
                "SELECT TIMESTAMP '2024-01-31 10:00:00' + d FROM wv_interval WHERE id = 1"
            )
            .await,
            rows(&[&["2025-04-03 14:05:06.5"]])
        );
        assert_eq!(
            texts(
                &c,
                "SELECT format_type(a.atttypid, a.atttypmod), a.atttypid FROM pg_attribute a \
                 JOIN pg_class c ON a.attrelid = c.oid \
                 WHERE c.relname = 'wv_interval' AND a.attname = 'd'"
            )
            .await,
            rows(&[&["interval", "1186"]])
        );
    })
    .await;
}

/// A `time` in binary: microseconds since midnight.
#[derive(Clone, Copy, Debug, PartialEq)]
struct PgTime(i64);

impl ToSql for PgTime {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIME
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for PgTime {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<PgTime, BoxError> {
        Ok(PgTime(i64::from_be_bytes(raw.try_into()?)))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIME
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_round_trips() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_time").await;
        exec(&c, "CREATE TABLE wv_time (id INT PRIMARY KEY, t TIME)").await;
        exec(
            &c,
            "INSERT INTO wv_time VALUES (1, '04:05:06.5'), (2, '24:00:00')",
        )
        .await;
        let ins = c
            .prepare_typed(
                "INSERT INTO wv_time VALUES ($1, $2)",
                &[Type::INT4, Type::TIME],
            )
            .await
            .unwrap();
        c.execute(&ins, &[&3i32, &PgTime(3_600_000_001)])
            .await
            .unwrap();
        c.execute(&ins, &[&4i32, &Text("23:59")]).await.unwrap();
        let e = c
            .execute(&ins, &[&5i32, &PgTime(86_400_000_001)])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22008");
        let e = c.execute(&ins, &[&5i32, &Text("25:00")]).await.unwrap_err();
        assert_eq!(sqlstate(&e), "22008");
        assert_eq!(
            texts(&c, "SELECT id, t FROM wv_time ORDER BY id").await,
            rows(&[
                &["1", "04:05:06.5"],
                &["2", "24:00:00"],
                &["3", "01:00:00.000001"],
                &["4", "23:59:00"],
            ])
        );
        let got: Vec<PgTime> = c
            .query("SELECT t FROM wv_time ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(
            got,
            vec![
                PgTime(14_706_500_000),
                PgTime(86_400_000_000),
                PgTime(3_600_000_001),
                PgTime(86_340_000_000)
            ]
        );
    })
    .await;
}
