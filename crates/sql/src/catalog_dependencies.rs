//! `pg_depend` and `pg_rewrite`: what depends on what, as PostgreSQL
//! records it, and the definitions Eddy prints qualified.
//!
//! pg_dump orders what it writes by these dependencies, so they decide
//! whether a dump restores: a view's `_RETURN` rule (`pg_rewrite`) depends
//! on the relations its query reads, so the view is created after them; a
//! column default that draws from a sequence (`pg_attrdef`) depends on the
//! sequence, which, owned by the column, depends on the table, so pg_dump
//! breaks that loop by setting the default after the sequence exists, as
//! it does for PostgreSQL's own serial columns.
//!
//! Invariants: every row names objects by the OIDs the other catalogs give
//! them (`crate::catalog::table_oid`, `view_oid`, `sequence_oid`, the
//! `pg_attrdef` OID [`attrdef_oid`], the rule OID [`rule_oid`]); a
//! dependency Eddy cannot see (a relation named in text computed at run
//! time) is not invented.

use datafusion::common::ScalarValue;
use eddy_common::ViewDef;
use eddy_storage::Table;

use crate::catalog::{table_oid, view_oid};
use crate::sequences::{sequence_of_default, sequence_oid, SequenceDef};

/// PostgreSQL's OIDs of the catalogs the rows below name.
const PG_CLASS: i64 = 1259;
const PG_ATTRDEF: i64 = 2604;
const PG_REWRITE: i64 = 2618;

/// OID of the `pg_attrdef` row of column `attnum` (from 1) of `t`.
pub(crate) fn attrdef_oid(t: &Table, attnum: i64) -> i64 {
    (table_oid(t) << 10) | attnum
}

/// OID of a view's `_RETURN` rule: the OID after the view's, which no
/// relation has (a table's is its primary key's; a view has none).
pub(crate) fn rule_oid(v: &ViewDef) -> i64 {
    view_oid(v) + 1
}

/// One `pg_depend` row: (classid, objid, objsubid, refclassid, refobjid,
/// refobjsubid, deptype).
type Dependency = (i64, i64, i32, i64, i64, i32, &'static str);

fn row(d: Dependency) -> Vec<ScalarValue> {
    let (classid, objid, objsubid, refclassid, refobjid, refobjsubid, deptype) = d;
    vec![
        ScalarValue::Int64(Some(classid)),
        ScalarValue::Int64(Some(objid)),
        ScalarValue::Int32(Some(objsubid)),
        ScalarValue::Int64(Some(refclassid)),
        ScalarValue::Int64(Some(refobjid)),
        ScalarValue::Int32(Some(refobjsubid)),
        ScalarValue::Utf8(Some(deptype.to_string())),
    ]
}

/// The rows of `pg_depend` (see the module doc).
pub(crate) fn dependency_rows(
    tables: &[std::sync::Arc<Table>],
    views: &[ViewDef],
    sequences: &[(SequenceDef, Option<i64>)],
) -> Vec<Vec<ScalarValue>> {
    let mut rows = Vec::new();
    // a sequence owned by a column: 'a', or 'i' for an identity column's
    for (seq, _) in sequences {
        let Some(owner) = &seq.owned_by else { continue };
        let Some(t) = tables.iter().find(|t| t.def().name == owner.table) else {
            continue;
        };
        let Some(index) = t.def().column_index(&owner.column) else {
            continue;
        };
        let identity = t
            .def()
            .columns
            .get(index)
            .is_some_and(|c| c.identity.is_some());
        let attnum = index as i32 + 1;
        let deptype = if identity { "i" } else { "a" };
        let seq_oid = sequence_oid(&seq.name);
        rows.push(row((
            PG_CLASS,
            seq_oid,
            0,
            PG_CLASS,
            table_oid(t),
            attnum,
            deptype,
        )));
    }
    // a column default: on its column, and on the sequence it draws from
    for t in tables {
        for (n, c) in t.def().columns.iter().enumerate() {
            let (Some(default), None) = (&c.default, c.identity) else {
                continue;
            };
            let attnum = n as i64 + 1;
            let own = attrdef_oid(t, attnum);
            rows.push(row((
                PG_ATTRDEF,
                own,
                0,
                PG_CLASS,
                table_oid(t),
                attnum as i32,
                "a",
            )));
            let drawn = sequence_of_default(default)
                .and_then(|name| sequences.iter().find(|(s, _)| s.name == name));
            if let Some((seq, _)) = drawn {
                rows.push(row((
                    PG_ATTRDEF,
                    own,
                    0,
                    PG_CLASS,
                    sequence_oid(&seq.name),
                    0,
                    "n",
                )));
            }
        }
    }
    // a view's rule: on the view itself, and on each relation it reads
    for v in views {
        let rule = rule_oid(v);
        rows.push(row((PG_REWRITE, rule, 0, PG_CLASS, view_oid(v), 0, "i")));
        let Ok(query) = crate::views::parse_query(&v.query) else {
            continue;
        };
        for name in crate::views::relations_read(&query) {
            let read = tables
                .iter()
                .find(|t| t.def().name == name)
                .map(|t| table_oid(t))
                .or_else(|| views.iter().find(|w| w.name == name).map(view_oid));
            if let Some(read) = read {
                rows.push(row((PG_REWRITE, rule, 0, PG_CLASS, read, 0, "n")));
            }
        }
    }
    rows
}

/// The rows of `pg_rewrite`: each view's `_RETURN` rule (oid, rulename,
/// ev_class, ev_type, is_instead, ev_enabled), the catalog's columns.
pub(crate) fn rewrite_rows(views: &[ViewDef]) -> Vec<Vec<ScalarValue>> {
    views
        .iter()
        .map(|v| {
            vec![
                ScalarValue::Int64(Some(rule_oid(v))),
                ScalarValue::Utf8(Some("_RETURN".into())),
                ScalarValue::Int64(Some(view_oid(v))),
                // ON SELECT
                ScalarValue::Utf8(Some("1".into())),
                ScalarValue::Boolean(Some(true)),
                ScalarValue::Utf8(Some("O".into())),
            ]
        })
        .collect()
}
