//! `FETCH FIRST n ROWS ONLY` (SQL's standard spelling of LIMIT, which
//! Hibernate 6 and other tools send to PostgreSQL; DataFusion refuses it):
//! on the AST, the query's LIMIT, beside its OFFSET. `FETCH ... WITH TIES`
//! and `PERCENT` are left for the planner to refuse (0A000), never
//! answered as a plain LIMIT.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, LimitClause, Query, Value as SqlValue, VisitMut, VisitorMut,
};

/// Rewrites every `FETCH FIRST` of `stmt` (module doc).
pub fn fetch_as_limit<S: VisitMut>(stmt: &mut S) {
    let _ = stmt.visit(&mut FetchAsLimit);
}

struct FetchAsLimit;

impl VisitorMut for FetchAsLimit {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Some(fetch) = &query.fetch else {
            return ControlFlow::Continue(());
        };
        if fetch.with_ties || fetch.percent {
            return ControlFlow::Continue(());
        }
        // `FETCH FIRST ROW ONLY`: one row
        let quantity = fetch
            .quantity
            .clone()
            .unwrap_or_else(|| Expr::value(SqlValue::Number("1".into(), false)));
        match &mut query.limit_clause {
            None => {
                query.limit_clause = Some(LimitClause::LimitOffset {
                    limit: Some(quantity),
                    offset: None,
                    limit_by: Vec::new(),
                })
            }
            Some(LimitClause::LimitOffset {
                limit: limit @ None,
                ..
            }) => *limit = Some(quantity),
            // LIMIT and FETCH together: PostgreSQL's syntax error, left
            // for the planner to refuse
            Some(_) => return ControlFlow::Continue(()),
        }
        query.fetch = None;
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        fetch_as_limit(&mut stmts);
        stmts[0].to_string()
    }

    #[test]
    fn fetch_first_becomes_limit() {
        assert_eq!(
            rewritten("SELECT a FROM t ORDER BY a OFFSET 2 ROWS FETCH FIRST 3 ROWS ONLY"),
            "SELECT a FROM t ORDER BY a LIMIT 3 OFFSET 2 ROWS"
        );
        assert_eq!(
            rewritten("SELECT a FROM t FETCH NEXT ROW ONLY"),
            "SELECT a FROM t LIMIT 1"
        );
        let ties = "SELECT a FROM t ORDER BY a FETCH FIRST 3 ROWS WITH TIES";
        assert_eq!(
            rewritten(ties),
            Parser::parse_sql(&PostgreSqlDialect {}, ties).expect("parses")[0].to_string()
        );
    }
}
