//! The type of a parameter that is a LIMIT, OFFSET or FETCH count
//! (`LIMIT $1`): bigint, as PostgreSQL infers it. DataFusion's plan
//! gives such a placeholder no type, and a driver that binds by the
//! described type (asyncpg, pgjdbc, tokio-postgres) would otherwise be
//! told text and refuse an integer.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{LimitClause, Query, Statement, Visit, Visitor};

use crate::pgtypes::oid;
use crate::rewrite::placeholder_index;

struct Counts<'a> {
    types: &'a mut [u32],
}

impl Counts<'_> {
    fn count(&mut self, e: &datafusion::sql::sqlparser::ast::Expr) {
        // a cast names its own type (`LIMIT $1::int`)
        if matches!(e, datafusion::sql::sqlparser::ast::Expr::Cast { .. }) {
            return;
        }
        if let Some(slot) = placeholder_index(e).and_then(|n| self.types.get_mut(n.wrapping_sub(1)))
        {
            if *slot == 0 {
                *slot = oid::INT8;
            }
        }
    }
}

impl Visitor for Counts<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        match &q.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, .. }) => {
                if let Some(l) = limit {
                    self.count(l);
                }
                if let Some(o) = offset {
                    self.count(&o.value);
                }
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                self.count(offset);
                self.count(limit);
            }
            None => {}
        }
        if let Some(q) = q.fetch.as_ref().and_then(|f| f.quantity.as_ref()) {
            self.count(q);
        }
        ControlFlow::Continue(())
    }
}

/// Sets each still-unknown (0) slot of `types` whose parameter is a row
/// count to bigint.
pub fn infer_count_params(stmt: &Statement, types: &mut [u32]) {
    let _ = stmt.visit(&mut Counts { types });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    #[test]
    fn counts_are_bigint_unless_cast_or_known() {
        let stmt = parse_statement("SELECT * FROM t WHERE a = $1 LIMIT $2 OFFSET $3::int").unwrap();
        let mut types = [0, 0, 0];
        infer_count_params(&stmt, &mut types);
        assert_eq!(types, [0, oid::INT8, 0]);
        let stmt =
            parse_statement("WITH n AS (SELECT id FROM t LIMIT $1) SELECT * FROM n OFFSET $2 ROWS FETCH FIRST $3 ROWS ONLY")
                .unwrap();
        let mut types = [0, 0, oid::INT4];
        infer_count_params(&stmt, &mut types);
        assert_eq!(types, [oid::INT8, oid::INT8, oid::INT4]);
    }
}
