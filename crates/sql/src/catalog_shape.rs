//! Eddy's `pg_catalog` relations in PostgreSQL 15's shape.
//!
//! Tools that read the catalogs (pg_dump above all) name columns that Eddy
//! has no use for (`relfrozenxid`, `attalign`, `prolang`, ...) and read
//! catalogs of things Eddy does not have (foreign servers, text search
//! parsers, subscriptions, large objects). A query that names one fails
//! as a whole, so this module gives every catalog PostgreSQL 15's columns
//! (`crate::catalog_columns`, generated from PostgreSQL 15):
//! * a table `crate::catalog` builds keeps its columns and gains each
//!   missing one, appended, with the value PostgreSQL has for an object
//!   that uses nothing of it ([`default_value`]);
//! * a catalog of a kind of object Eddy does not have is present and
//!   empty, which is the truth: Eddy has no such objects;
//! * `pg_language` lists PostgreSQL's three built-in languages.
//!
//! Invariants: an appended column never contradicts a column Eddy fills
//! (it is only ever a column Eddy does not fill), and an empty catalog is
//! only one whose objects Eddy cannot create.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;

use crate::catalog_columns::{CatalogRelation, CATALOG_RELATIONS};

type S = ScalarValue;

/// PostgreSQL 15's definition of the catalog relation `name`.
fn relation(name: &str) -> Option<&'static CatalogRelation> {
    CATALOG_RELATIONS.iter().find(|(n, _, _)| *n == name)
}

/// PostgreSQL's OID of the catalog relation `name` (what `tableoid` and
/// `'pg_class'::regclass` are in PostgreSQL).
pub(crate) fn relation_oid(name: &str) -> Option<i64> {
    relation(name).map(|(_, oid, _)| *oid)
}

/// The PostgreSQL type of column `column` of the catalog relation whose
/// OID is `oid`.
pub(crate) fn column_type(oid: i64, column: &str) -> Option<&'static str> {
    let (_, _, columns) = CATALOG_RELATIONS.iter().find(|(_, o, _)| *o == oid)?;
    columns
        .iter()
        .find(|(c, _, _)| *c == column)
        .map(|(_, t, _)| *t)
}

/// The catalog relation whose OID is `oid`.
pub(crate) fn relation_name(oid: i64) -> Option<&'static str> {
    CATALOG_RELATIONS
        .iter()
        .find(|(_, o, _)| *o == oid)
        .map(|(n, _, _)| *n)
}

/// The catalog relations this module builds whole: catalogs of objects
/// Eddy does not have (empty) and `pg_language`. `built` says whether
/// `crate::catalog` builds the relation itself.
pub(crate) fn shaped_relations(built: &dyn Fn(&str) -> bool) -> Vec<&'static str> {
    CATALOG_RELATIONS
        .iter()
        .map(|(n, _, _)| *n)
        .filter(|n| !built(n))
        .collect()
}

/// The Arrow type Eddy's catalogs give a column of PostgreSQL type
/// `pg_type`: oids (and the reg* types, which are oids) as `oid`, vectors
/// and arrays as lists, node trees and `anyarray` as text.
fn arrow_type(pg_type: &str) -> DataType {
    let list = |t: DataType| DataType::List(Arc::new(Field::new_list_field(t, true)));
    match pg_type {
        "oid" | "regproc" | "regclass" | "regtype" => DataType::UInt32,
        "xid" | "bigint" => DataType::Int64,
        "boolean" => DataType::Boolean,
        "smallint" => DataType::Int16,
        "integer" => DataType::Int32,
        "real" => DataType::Float32,
        "double precision" => DataType::Float64,
        "bytea" => DataType::Binary,
        "timestamp with time zone" => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        "int2vector" | "smallint[]" => list(DataType::Int16),
        "oidvector" | "oid[]" => list(DataType::Int64),
        "real[]" => list(DataType::Float32),
        "text[]" | "name[]" | "aclitem[]" | "\"char\"[]" => list(DataType::Utf8),
        _ => DataType::Utf8,
    }
}

/// What PostgreSQL has in column `column` of `table` for an object that
/// uses nothing the column describes: NULL where the column may be NULL,
/// else the column's neutral value (`0`, `false`, empty), or the code
/// PostgreSQL's own objects carry (`attalign`, `provolatile`, ...).
fn default_value(table: &str, column: &str, pg_type: &str, not_null: bool) -> S {
    let ty = arrow_type(pg_type);
    if !not_null {
        return S::try_from(&ty).unwrap_or(S::Null);
    }
    let code = |c: &str| S::Utf8(Some(c.to_string()));
    match (table, column) {
        ("pg_attribute", "attalign") => return code("i"),
        ("pg_proc", "provolatile") => return code("v"),
        ("pg_proc", "proparallel") => return code("u"),
        ("pg_proc", "prolang") => return S::UInt32(Some(LANGUAGE_INTERNAL)),
        ("pg_operator", "oprkind") => return code("b"),
        ("pg_event_trigger", "evtenabled") | ("pg_rewrite", "ev_enabled") => return code("O"),
        // PostgreSQL's own objects belong to its bootstrap superuser
        _ if column.ends_with("owner") && ty == DataType::UInt32 => {
            return S::UInt32(Some(BOOTSTRAP_SUPERUSER));
        }
        _ => {}
    }
    match ty {
        DataType::UInt32 => S::UInt32(Some(0)),
        DataType::Int64 => S::Int64(Some(0)),
        DataType::Boolean => S::Boolean(Some(false)),
        DataType::Int16 => S::Int16(Some(0)),
        DataType::Int32 => S::Int32(Some(0)),
        DataType::Float32 => S::Float32(Some(0.0)),
        DataType::Float64 => S::Float64(Some(0.0)),
        DataType::List(field) => S::List(S::new_list_nullable(&[], field.data_type())),
        DataType::Utf8 => code(""),
        other => S::try_from(&other).unwrap_or(S::Null),
    }
}

/// `table` as `crate::catalog` built it, with each PostgreSQL 15 column it
/// lacks appended (see the module doc). A relation PostgreSQL does not
/// have is returned as it is.
pub(crate) async fn complete(name: &str, table: MemTable) -> datafusion::error::Result<MemTable> {
    let Some((_, _, columns)) = relation(name) else {
        return Ok(table);
    };
    let schema = datafusion::catalog::TableProvider::schema(&table);
    let missing: Vec<_> = columns
        .iter()
        .filter(|(c, _, _)| schema.field_with_name(c).is_err())
        .collect();
    if missing.is_empty() {
        return Ok(table);
    }
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (c, t, _) in &missing {
        fields.push(Field::new(*c, arrow_type(t), true));
    }
    let completed = Arc::new(Schema::new(fields));
    let mut partitions = Vec::with_capacity(table.batches.len());
    for partition in &table.batches {
        let mut batches = Vec::new();
        for batch in partition.read().await.iter() {
            let mut arrays = batch.columns().to_vec();
            for (c, t, not_null) in &missing {
                arrays
                    .push(default_value(name, c, t, *not_null).to_array_of_size(batch.num_rows())?);
            }
            batches.push(RecordBatch::try_new(Arc::clone(&completed), arrays)?);
        }
        partitions.push(batches);
    }
    MemTable::try_new(completed, partitions)
}

/// PostgreSQL's OID of its bootstrap superuser (`crate::catalog::SUPERUSER_OID`).
const BOOTSTRAP_SUPERUSER: u32 = 10;

/// PostgreSQL's OIDs of its built-in languages.
const LANGUAGE_INTERNAL: u32 = 12;
const LANGUAGE_C: u32 = 13;
const LANGUAGE_SQL: u32 = 14;

/// A catalog this module builds whole (see [`shaped_relations`]): empty,
/// or `pg_language`'s built-in languages (none of them a procedural
/// language, so pg_dump, which dumps those, dumps none).
pub(crate) fn shaped_table(name: &str) -> datafusion::error::Result<Option<MemTable>> {
    let Some((_, _, columns)) = relation(name) else {
        return Ok(None);
    };
    let types: Vec<(&str, DataType)> = columns
        .iter()
        .map(|(c, t, _)| (*c, arrow_type(t)))
        .collect();
    let rows: Vec<Vec<S>> = match name {
        "pg_language" => [
            (LANGUAGE_INTERNAL, "internal", false),
            (LANGUAGE_C, "c", false),
            (LANGUAGE_SQL, "sql", true),
        ]
        .iter()
        .map(|(oid, lanname, trusted)| {
            columns
                .iter()
                .map(|(c, t, not_null)| match *c {
                    "oid" => S::UInt32(Some(*oid)),
                    "lanname" => S::Utf8(Some(lanname.to_string())),
                    "lanowner" => S::UInt32(Some(BOOTSTRAP_SUPERUSER)),
                    "lanpltrusted" => S::Boolean(Some(*trusted)),
                    _ => default_value(name, c, t, *not_null),
                })
                .collect()
        })
        .collect(),
        _ => Vec::new(),
    };
    Ok(Some(crate::catalog::mem_table(&types, rows)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::catalog::TableProvider;

    #[test]
    fn every_relation_has_a_known_oid_and_columns() {
        assert_eq!(relation_oid("pg_class"), Some(1259));
        assert_eq!(relation_oid("pg_init_privs"), Some(3394));
        assert_eq!(relation_oid("no_such"), None);
        for (name, oid, columns) in CATALOG_RELATIONS {
            assert!(*oid > 0, "{name}");
            assert!(!columns.is_empty(), "{name}");
        }
    }

    #[test]
    fn an_empty_catalog_has_postgresql_columns() {
        let t = shaped_table("pg_ts_parser").unwrap().unwrap();
        let schema = t.schema();
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "oid",
                "prsname",
                "prsnamespace",
                "prsstart",
                "prstoken",
                "prsend",
                "prsheadline",
                "prslextype"
            ]
        );
        assert_eq!(schema.field(0).data_type(), &DataType::UInt32);
    }

    #[tokio::test]
    async fn a_built_table_gains_the_columns_it_lacks() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("oid", DataType::UInt32, true),
            Field::new("attname", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                S::UInt32(Some(7)).to_array_of_size(2).unwrap(),
                S::Utf8(Some("a".into())).to_array_of_size(2).unwrap(),
            ],
        )
        .unwrap();
        let t = MemTable::try_new(schema, vec![vec![batch]]).unwrap();
        let t = complete("pg_attribute", t).await.unwrap();
        let schema = t.schema();
        // its own columns first, unchanged
        assert_eq!(schema.field(0).name(), "oid");
        assert_eq!(schema.field(1).name(), "attname");
        let batches = t.batches[0].read().await;
        let align = schema.index_of("attalign").unwrap();
        let value = S::try_from_array(batches[0].column(align), 1).unwrap();
        assert_eq!(value, S::Utf8(Some("i".into())));
        let options = schema.index_of("attoptions").unwrap();
        assert!(
            batches[0].column(options).is_null(0),
            "attoptions may be NULL"
        );
        let inhcount = schema.index_of("attinhcount").unwrap();
        assert_eq!(
            S::try_from_array(batches[0].column(inhcount), 0).unwrap(),
            S::Int32(Some(0))
        );
    }
}
