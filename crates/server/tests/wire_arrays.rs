//! One-dimensional array columns over the wire (issue 12 item 2): values
//! go in as simple-query literals, text parameters and binary parameters
//! (PostgreSQL's `array_recv` layout, as tokio-postgres writes a `Vec`),
//! through the fixed-plan path (autocommit single-row INSERT) and the
//! general path (transaction blocks, several rows), and come back as text
//! (`array_out`) and binary (`array_send`) results with PostgreSQL's array
//! type OIDs; COPY text and CSV in and out; a restart keeps them.
//!
//! Every expected value in `arrays_round_trip` is PostgreSQL 15's answer:
//! `scripts/ci/wire-values-against-postgres.sh` runs it against a private
//! PostgreSQL too (`EDDY_WIRE_VALUES_PG`).

use bytes::{BufMut, BytesMut};
use futures::SinkExt;
use tokio_postgres::types::{IsNull, ToSql, Type};
use tokio_postgres::Client;

mod common;
use common::wire::{exec, on_servers, rows, simple_error, sqlstate, texts, Text};
use common::*;

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// Raw `array_recv` bytes, sent as a binary int4[] parameter whatever
/// they hold (a lower bound other than 1, two dimensions, lies).
#[derive(Debug)]
struct RawArray(Vec<u8>);

impl ToSql for RawArray {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// An int4[] in `array_recv`'s layout.
fn raw_int4_array(dims: &[(i32, i32)], elems: &[Option<i32>]) -> RawArray {
    let mut b = Vec::new();
    b.extend_from_slice(&(dims.len() as i32).to_be_bytes());
    b.extend_from_slice(&i32::from(elems.iter().any(Option::is_none)).to_be_bytes());
    b.extend_from_slice(&23u32.to_be_bytes());
    for (len, lower) in dims {
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&lower.to_be_bytes());
    }
    for e in elems {
        match e {
            Some(v) => {
                b.extend_from_slice(&4i32.to_be_bytes());
                b.extend_from_slice(&v.to_be_bytes());
            }
            None => b.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    RawArray(b)
}

async fn copy_out(c: &Client, sql: &str) -> String {
    let stream = c.copy_out(sql).await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(stream).await.unwrap();
    String::from_utf8(chunks.concat()).unwrap()
}

/// 2024-01-01 10:30:00 UTC in microseconds since 2000-01-01.
const JAN1_1030_UTC: i64 = (8766 * 86_400 + 10 * 3600 + 30 * 60) * 1_000_000;

/// One array element's binary bytes, whatever its type.
#[derive(Debug)]
struct RawElem(Vec<u8>);

impl<'a> tokio_postgres::types::FromSql<'a> for RawElem {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<RawElem, BoxError> {
        Ok(RawElem(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

type Bools = Option<Vec<bool>>;
type BigInts = Option<Vec<Option<i64>>>;
type Floats = Option<Vec<Option<f64>>>;
type Ints = Option<Vec<Option<i32>>>;
type Strings = Option<Vec<Option<String>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_round_trip() {
    on_servers(|c| async move {
        exec(&c, "DROP TABLE IF EXISTS wv_arr").await;
        exec(
            &c,
            "CREATE TABLE wv_arr (id INT PRIMARY KEY, ids int4[], tags text[], big int8[], \
             f8 float8[], names varchar(4)[], flags bool[], amounts numeric(6,2)[])",
        )
        .await;
        // literals: fixed-plan path (one row, autocommit) and general path
        // (a transaction block, several rows) give the same values
        exec(
            &c,
            r#"INSERT INTO wv_arr VALUES (1, '{1,NULL,-3}', '{"a b","c\"d",NULL,"NULL",é}', '{9223372036854775807}', '{1.5,NULL}', '{abcd,x}', '{t,f}', '{1.005,-2}')"#,
        )
        .await;
        exec(
            &c,
            r#"BEGIN; INSERT INTO wv_arr VALUES (2, '{1,NULL,-3}', '{"a b","c\"d",NULL,"NULL",é}', '{9223372036854775807}', '{1.5,NULL}', '{abcd,x}', '{t,f}', '{1.005,-2}'), (3, '{}', '{}', NULL, NULL, NULL, NULL, '{}'); COMMIT"#,
        )
        .await;
        let want_row = [
            "{1,NULL,-3}",
            r#"{"a b","c\"d",NULL,"NULL",é}"#,
            "{9223372036854775807}",
            "{1.5,NULL}",
            "{abcd,x}",
            "{t,f}",
            "{1.01,-2.00}",
        ];
        let got = texts(
            &c,
            "SELECT ids, tags, big, f8, names, flags, amounts FROM wv_arr WHERE id < 3 ORDER BY id",
        )
        .await;
        assert_eq!(got, rows(&[&want_row, &want_row]));
        assert_eq!(
            texts(&c, "SELECT ids, tags, amounts FROM wv_arr WHERE id = 3").await,
            rows(&[&["{}", "{}", "{}"]])
        );
        for (bad, state) in [
            ("INSERT INTO wv_arr (id, ids) VALUES (9, '{1,2')", "22P02"),
            ("INSERT INTO wv_arr (id, ids) VALUES (9, '{1,two}')", "22P02"),
            ("INSERT INTO wv_arr (id, names) VALUES (9, '{abcde}')", "22001"),
            ("INSERT INTO wv_arr (id, amounts) VALUES (9, '{10000}')", "22003"),
            (
                "BEGIN; INSERT INTO wv_arr (id, names) VALUES (9, '{a}'), (10, '{abcde}'); COMMIT",
                "22001",
            ),
        ] {
            assert_eq!(simple_error(&c, bad).await, state, "{bad}");
            let _ = c.batch_execute("ROLLBACK").await;
        }

        // result columns carry the array types
        let st = c
            .prepare("SELECT ids, tags, big, f8, names, flags, amounts FROM wv_arr")
            .await
            .unwrap();
        let types: Vec<Type> = st.columns().iter().map(|c| c.type_().clone()).collect();
        assert_eq!(
            types,
            [
                Type::INT4_ARRAY,
                Type::TEXT_ARRAY,
                Type::INT8_ARRAY,
                Type::FLOAT8_ARRAY,
                Type::VARCHAR_ARRAY,
                Type::BOOL_ARRAY,
                Type::NUMERIC_ARRAY
            ]
        );

        // subscripts are named after the array, as PostgreSQL names them
        let st = c
            .prepare("SELECT ids[1], tags[2:3], cardinality(ids) FROM wv_arr")
            .await
            .unwrap();
        let names: Vec<&str> = st.columns().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["ids", "tags", "cardinality"]);
        let types: Vec<Type> = st.columns().iter().map(|c| c.type_().clone()).collect();
        assert_eq!(types, [Type::INT4, Type::TEXT_ARRAY, Type::INT4]);

        // every array type's OID, text and binary form
        let st = c
            .prepare(
                "SELECT '{1,NULL}'::int2[], '{1.5}'::float4[], '{2024-02-29}'::date[], \
                 '{\"2024-01-01 10:30:00\"}'::timestamp[], '{\"2024-01-01 12:30:00+02\"}'::timestamptz[], \
                 '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'::uuid[], '{}'::int8[]",
            )
            .await
            .unwrap();
        let types: Vec<Type> = st.columns().iter().map(|c| c.type_().clone()).collect();
        assert_eq!(
            types,
            [
                Type::INT2_ARRAY,
                Type::FLOAT4_ARRAY,
                Type::DATE_ARRAY,
                Type::TIMESTAMP_ARRAY,
                Type::TIMESTAMPTZ_ARRAY,
                Type::UUID_ARRAY,
                Type::INT8_ARRAY
            ]
        );
        let r = c.query_one(&st, &[]).await.unwrap();
        let small: Vec<Option<i16>> = r.get(0);
        let f4: Vec<f32> = r.get(1);
        let empty: Vec<i64> = r.get(6);
        assert_eq!((small, f4, empty), (vec![Some(1), None], vec![1.5], vec![]));
        // date, timestamp and uuid elements in binary: their raw bytes
        let raw: Vec<RawElem> = r.get(2);
        assert_eq!(raw[0].0, (8825i32).to_be_bytes());
        let raw: Vec<RawElem> = r.get(3);
        assert_eq!(raw[0].0, JAN1_1030_UTC.to_be_bytes());
        let raw: Vec<RawElem> = r.get(4);
        assert_eq!(raw[0].0, JAN1_1030_UTC.to_be_bytes());
        let raw: Vec<RawElem> = r.get(5);
        assert_eq!(raw[0].0[..4], [0xa0, 0xee, 0xbc, 0x99]);
        assert_eq!(
            texts(
                &c,
                "SELECT '{2024-02-29}'::date[], '{\"2024-01-01 10:30:00\"}'::timestamp[], \
                 '{\"2024-01-01 12:30:00+02\"}'::timestamptz[]"
            )
            .await,
            rows(&[&[
                "{2024-02-29}",
                r#"{"2024-01-01 10:30:00"}"#,
                r#"{"2024-01-01 10:30:00+00"}"#
            ]])
        );

        // binary parameters (tokio-postgres writes array_recv's layout)
        let ins = c
            .prepare("INSERT INTO wv_arr (id, ids, tags) VALUES ($1, $2, $3)")
            .await
            .unwrap();
        assert_eq!(ins.params()[1], Type::INT4_ARRAY);
        assert_eq!(ins.params()[2], Type::TEXT_ARRAY);
        let ids: Vec<Option<i32>> = vec![Some(i32::MIN), None, Some(7)];
        let tags: Vec<Option<String>> = vec![
            Some("日本語".into()),
            Some("NULL".into()),
            None,
            Some("{},\" \\".into()),
            Some(String::new()),
        ];
        c.execute(&ins, &[&4i32, &ids, &tags]).await.unwrap();
        c.execute(&ins, &[&5i32, &Vec::<i32>::new(), &None::<Vec<String>>])
            .await
            .unwrap();
        // text parameters
        c.execute(&ins, &[&6i32, &Text("{8, NULL}"), &Text(r#"{"x,y",z}"#)])
            .await
            .unwrap();
        let e = c
            .execute(&ins, &[&7i32, &Text("{8"), &Text("{}")])
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "22P02");

        // the general path (several rows): the same values as the fixed plan
        let ins2 = c
            .prepare("INSERT INTO wv_arr (id, ids, tags) VALUES ($1, $2, $3), ($4, $5, $6)")
            .await
            .unwrap();
        assert_eq!(ins2.params()[4], Type::INT4_ARRAY);
        c.execute(
            &ins2,
            &[&14i32, &ids, &tags, &16i32, &Text("{8, NULL}"), &Text(r#"{"x,y",z}"#)],
        )
        .await
        .unwrap();
        assert_eq!(
            texts(&c, "SELECT a.id FROM wv_arr a JOIN wv_arr b ON a.id + 10 = b.id AND a.ids = b.ids AND a.tags = b.tags ORDER BY a.id").await,
            rows(&[&["4"], &["6"]])
        );
        exec(&c, "DELETE FROM wv_arr WHERE id > 10").await;

        // binary results
        let got: Vec<(i32, Ints, Strings)> = c
            .query(
                "SELECT id, ids, tags FROM wv_arr WHERE id >= 3 ORDER BY id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        assert_eq!(
            got,
            vec![
                (3, Some(vec![]), Some(vec![])),
                (4, Some(ids.clone()), Some(tags.clone())),
                (5, Some(vec![]), None),
                (
                    6,
                    Some(vec![Some(8), None]),
                    Some(vec![Some("x,y".into()), Some("z".into())])
                ),
            ]
        );
        // text results of the same rows
        assert_eq!(
            texts(&c, "SELECT ids, tags FROM wv_arr WHERE id = 4").await,
            rows(&[&[
                "{-2147483648,NULL,7}",
                r#"{日本語,"NULL",NULL,"{},\" \\",""}"#
            ]])
        );
        let bins: (BigInts, Floats, Bools) = {
            let r = c
                .query_one("SELECT big, f8, flags FROM wv_arr WHERE id = 1", &[])
                .await
                .unwrap();
            (r.get(0), r.get(1), r.get(2))
        };
        assert_eq!(
            bins,
            (
                Some(vec![Some(i64::MAX)]),
                Some(vec![Some(1.5), None]),
                Some(vec![true, false])
            )
        );
        let names: Vec<String> = c
            .query_one("SELECT names FROM wv_arr WHERE id = 1", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(names, ["abcd", "x"]);

        // parameters compared with arrays
        let contains = c
            .prepare_typed(
                "SELECT count(*) FROM wv_arr WHERE ids @> $1",
                &[Type::INT4_ARRAY],
            )
            .await
            .unwrap();
        let n: i64 = c
            .query_one(&contains, &[&vec![Some(-3i32)]])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
        let n: i64 = c
            .query_one(&contains, &[&Text("{1,-3}")])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
        let any = c
            .prepare_typed(
                "SELECT id FROM wv_arr WHERE $1 = ANY(ids) ORDER BY id",
                &[Type::INT4],
            )
            .await
            .unwrap();
        let got: Vec<i32> = c
            .query(&any, &[&7i32])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(got, [4]);
        // untyped parameters take the types PostgreSQL infers
        let any = c
            .prepare("SELECT id FROM wv_arr WHERE $1 = ANY(ids) ORDER BY id")
            .await
            .unwrap();
        assert_eq!(any.params(), [Type::INT4]);
        let got: Vec<i32> = c
            .query(&any, &[&-3i32])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(got, [1, 2]);
        let sub = c
            .prepare("SELECT tags[$1] FROM wv_arr WHERE id = 1")
            .await
            .unwrap();
        assert_eq!(sub.params(), [Type::INT4]);
        let t: Option<String> = c.query_one(&sub, &[&2i32]).await.unwrap().get(0);
        assert_eq!(t.as_deref(), Some("c\"d"));
        exec(&c, "DROP TABLE wv_arr").await;
    })
    .await;
}

/// What Eddy refuses where PostgreSQL accepts (not run against it):
/// binary arrays with another lower bound or two dimensions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_parameters_eddy_cannot_store_are_refused() {
    let srv = Server::start("trust");
    let c = srv.connect().await;
    exec(&c, "CREATE TABLE wv_arr_r (id INT PRIMARY KEY, ids int4[])").await;
    let ins = c
        .prepare_typed(
            "INSERT INTO wv_arr_r VALUES ($1, $2)",
            &[Type::INT4, Type::INT4_ARRAY],
        )
        .await
        .unwrap();
    let one = raw_int4_array(&[(2, 1)], &[Some(1), None]);
    c.execute(&ins, &[&1i32, &one]).await.unwrap();
    for (raw, state) in [
        (raw_int4_array(&[(2, 0)], &[Some(1), Some(2)]), "0A000"),
        (raw_int4_array(&[(1, 1), (1, 1)], &[Some(1)]), "0A000"),
        // a count the bytes cannot back, a negative length, a short value
        (raw_int4_array(&[(i32::MAX, 1)], &[Some(1)]), "22P03"),
        (raw_int4_array(&[(-1, 1)], &[]), "22P03"),
        (raw_int4_array(&[(2, 1)], &[Some(1)]), "22P03"),
    ] {
        let e = c.execute(&ins, &[&2i32, &raw]).await.unwrap_err();
        assert_eq!(sqlstate(&e), state, "{raw:?}");
    }
    assert_eq!(
        texts(&c, "SELECT id, ids FROM wv_arr_r").await,
        rows(&[&["1", "{1,NULL}"]])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_copy_and_restart() {
    let mut srv = Server::start("trust");
    let c = srv.connect().await;
    exec(
        &c,
        "CREATE TABLE wv_arr_r (id INT PRIMARY KEY, ids int4[], tags text[], u uuid[], \
         ts timestamptz[]) WITH (orientation = 'row,column')",
    )
    .await;
    exec(
        &c,
        "CREATE TABLE wv_arr_c (id INT, ids int8[], tags varchar(5)[]) WITH (orientation = 'column')",
    )
    .await;
    // COPY text: a backslash is COPY's escape, so `c\"d` is sent as `c\\"d`
    let sink = c.copy_in("COPY wv_arr_r FROM STDIN").await.unwrap();
    let mut sink = Box::pin(sink);
    sink.send(bytes::Bytes::from_static(
        "1\t{1,NULL,3}\t{\"a b\",\"c\\\\\"d\",NULL,\"NULL\",ü}\t{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}\t{\"2024-01-01 12:00:00+00\"}\n2\t{}\t\\N\t{}\t\\N\n"
            .as_bytes(),
    ))
    .await
    .unwrap();
    sink.as_mut().finish().await.unwrap();
    // COPY CSV: the array text inside CSV quoting
    let sink = c
        .copy_in("COPY wv_arr_c FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    let mut sink = Box::pin(sink);
    sink.send(bytes::Bytes::from_static(
        b"1,\"{1,2}\",\"{\"\"x y\"\",z}\"\n2,,{}\n",
    ))
    .await
    .unwrap();
    sink.as_mut().finish().await.unwrap();
    for (copy, data, state) in [
        (
            "COPY wv_arr_r FROM STDIN",
            "3\t{1,\t\\N\t\\N\t\\N\n",
            "22P02",
        ),
        (
            "COPY wv_arr_r FROM STDIN",
            "3\t{x}\t\\N\t\\N\t\\N\n",
            "22P02",
        ),
        (
            "COPY wv_arr_c FROM STDIN WITH (FORMAT csv)",
            "3,,{toolong}\n",
            "22001",
        ),
    ] {
        let bad = c.copy_in(copy).await.unwrap();
        let mut bad = Box::pin(bad);
        bad.send(bytes::Bytes::from(data)).await.unwrap();
        let e = bad.as_mut().finish().await.unwrap_err();
        assert_eq!(sqlstate(&e), state, "{data}");
    }
    let want_text = "1\t{1,NULL,3}\t{\"a b\",\"c\\\\\"d\",NULL,\"NULL\",ü}\t{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}\t{\"2024-01-01 12:00:00+00\"}\n2\t{}\t\\N\t{}\t\\N\n";
    assert_eq!(
        copy_out(&c, "COPY (SELECT * FROM wv_arr_r ORDER BY id) TO STDOUT").await,
        want_text
    );
    let want_csv = "1,\"{1,2}\",\"{\"\"x y\"\",z}\"\n2,,{}\n";
    assert_eq!(
        copy_out(
            &c,
            "COPY (SELECT * FROM wv_arr_c ORDER BY id) TO STDOUT WITH (FORMAT csv)"
        )
        .await,
        want_csv
    );
    // binary COPY in (array_recv's layout per field) and out (array_send)
    let sink = c
        .copy_in("COPY wv_arr_c FROM STDIN WITH (FORMAT binary)")
        .await
        .unwrap();
    let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(
        sink,
        &[Type::INT4, Type::INT8_ARRAY, Type::VARCHAR_ARRAY],
    );
    futures::pin_mut!(writer);
    writer
        .as_mut()
        .write(&[
            &4i32,
            &vec![Some(i64::MIN), None],
            &vec![Some("ab".to_string()), None, Some("é".to_string())],
        ])
        .await
        .unwrap();
    writer.finish().await.unwrap();
    let out = c
        .copy_out("COPY (SELECT ids FROM wv_arr_c WHERE id = 4) TO STDOUT WITH (FORMAT binary)")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(out).await.unwrap();
    let raw = chunks.concat();
    // header (19 bytes), one field, array_send of {MIN,NULL}, trailer
    let mut want = b"PGCOPY\n\xff\r\n\0".to_vec();
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(&1i16.to_be_bytes());
    want.extend_from_slice(&36i32.to_be_bytes());
    for v in [1i32, 1, 20, 2, 1, 8] {
        want.extend_from_slice(&v.to_be_bytes());
    }
    want.extend_from_slice(&i64::MIN.to_be_bytes());
    want.extend_from_slice(&(-1i32).to_be_bytes());
    want.extend_from_slice(&(-1i16).to_be_bytes());
    assert_eq!(raw, want);
    assert_eq!(
        texts(&c, "SELECT ids, tags FROM wv_arr_c WHERE id = 4").await,
        rows(&[&["{-9223372036854775808,NULL}", "{ab,NULL,é}"]])
    );
    exec(&c, "DELETE FROM wv_arr_c WHERE id = 4").await;
    exec(&c, "CHECKPOINT").await;
    exec(&c, "INSERT INTO wv_arr_c VALUES (3, '{-1}', '{\"\"}')").await;
    drop(c);

    srv.stop();
    let data = srv.data_dir.clone();
    let dir = srv._dir.take();
    drop(srv);
    let srv2 = Server::start_in(dir, data, "trust");
    let c = srv2.connect().await;
    assert_eq!(
        copy_out(&c, "COPY (SELECT * FROM wv_arr_r ORDER BY id) TO STDOUT").await,
        want_text
    );
    assert_eq!(
        texts(&c, "SELECT id, ids, tags FROM wv_arr_c ORDER BY id").await,
        rows(&[
            &["1", "{1,2}", r#"{"x y",z}"#],
            &["2", "NULL", "{}"],
            &["3", "{-1}", r#"{""}"#],
        ])
    );
    // compaction merges the column files and the WAL's rows
    exec(&c, "VACUUM").await;
    assert_eq!(
        copy_out(&c, "COPY (SELECT * FROM wv_arr_r ORDER BY id) TO STDOUT").await,
        want_text
    );
    assert_eq!(
        texts(&c, "SELECT id, ids, tags FROM wv_arr_c ORDER BY id").await,
        rows(&[
            &["1", "{1,2}", r#"{"x y",z}"#],
            &["2", "NULL", "{}"],
            &["3", "{-1}", r#"{""}"#],
        ])
    );
    let ids: Vec<Option<i32>> = c
        .query_one("SELECT ids FROM wv_arr_r WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(ids, [Some(1), None, Some(3)]);
}
