//! Definitions as PostgreSQL prints them (`pg_get_viewdef`, `pg_get_expr`,
//! `pg_get_constraintdef`, `pg_views`): what pg_dump writes into a dump,
//! and psql's `\d` shows.
//!
//! Under a search path without `public` (pg_dump's), PostgreSQL prints
//! names qualified so that the text means the same thing there: a view's
//! query ([`qualified_view_query`]), a default's sequence
//! ([`qualified_default`]) and a foreign key's referenced table
//! (`crate::fk_catalog::definition`). Type names in a CHECK's expression
//! are printed in lower case, as PostgreSQL's are ([`check_definition`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{DataType, Expr, Ident, ObjectName, ObjectNamePart};

use crate::sequences::sequence_of_default;

/// A view's query as `pg_get_viewdef` and `pg_views` give it: its text,
/// ended with `;` as PostgreSQL's is (pg_dump strips that character), and,
/// where `public` is not on the search path, with each relation it names
/// without a schema named `public.x` (CTE names and `pg_catalog` relations
/// aside), as PostgreSQL prints names not visible on the path; type names
/// in lower case.
pub(crate) fn qualified_view_query(
    query: &str,
    public_on_path: bool,
    schemas: &[String],
) -> String {
    let text = query.trim_end().trim_end_matches(';');
    let Ok(mut parsed) = crate::views::parse_query(text) else {
        return format!("{text};");
    };
    let ctes = crate::rewrite::query_cte_names(&parsed);
    let _ = datafusion::sql::sqlparser::ast::visit_relations_mut(&mut parsed, |name| {
        if let [ObjectNamePart::Identifier(id)] = name.0.as_slice() {
            let bare = crate::rewrite::ident_name(id);
            let (schema, relation) = crate::schemas::split(&bare, schemas);
            if schema != crate::schemas::PUBLIC {
                // a user schema's relation (stored as one name)
                *name = ObjectName(vec![
                    ObjectNamePart::Identifier(Ident::new(schema)),
                    ObjectNamePart::Identifier(quoted_if_needed(relation)),
                ]);
            } else if !public_on_path
                && !ctes.contains(&bare)
                && !crate::catalog::is_catalog_relation(&bare)
            {
                name.0
                    .insert(0, ObjectNamePart::Identifier(Ident::new("public")));
            }
        }
        ControlFlow::<()>::Continue(())
    });
    lower_case_types(&mut parsed);
    format!("{parsed};")
}

/// `name` as an identifier, quoted where it needs quotes.
fn quoted_if_needed(name: &str) -> Ident {
    if crate::pg_functions::quote_identifier(name) == name {
        Ident::new(name)
    } else {
        Ident::with_quote('"', name)
    }
}

/// The type names of the casts in `node` in lower case, as PostgreSQL
/// prints them (`(0)::numeric`, where the parser's text says `NUMERIC`).
fn lower_case_types<N: datafusion::sql::sqlparser::ast::VisitMut>(node: &mut N) {
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(node, |e| {
        if let Expr::Cast { data_type, .. } = e {
            let lower = data_type.to_string().to_ascii_lowercase();
            *data_type = DataType::Custom(ObjectName::from(vec![Ident::new(lower)]), Vec::new());
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A column default as `pg_get_expr` gives it: its text, with the
/// sequence of `nextval('s'::regclass)` named `public.s` where `public` is
/// not on the search path (module doc).
pub(crate) fn qualified_default(default: &str, public_on_path: bool, schemas: &[String]) -> String {
    match sequence_of_default(default) {
        Some(seq)
            if !public_on_path
                || crate::schemas::split(&seq, schemas).0 != crate::schemas::PUBLIC =>
        {
            let shown = crate::schemas::qualified_text(&seq, schemas, public_on_path);
            format!("nextval('{}'::regclass)", shown.replace('\'', "''"))
        }
        _ => default.to_string(),
    }
}

/// A CHECK constraint as `pg_get_constraintdef` gives it: `CHECK (e)`,
/// the type names of `e`'s casts in lower case.
pub(crate) fn check_definition(expr: &str) -> String {
    let parsed = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(expr)
    .and_then(|mut p| p.parse_expr());
    let Ok(mut parsed) = parsed else {
        return format!("CHECK ({expr})");
    };
    lower_case_types(&mut parsed);
    format!("CHECK ({parsed})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_prints_lower_case_types() {
        assert_eq!(
            check_definition("(balance >= ('-1000'::INTEGER)::NUMERIC)"),
            "CHECK ((balance >= ('-1000'::integer)::numeric))"
        );
        assert_eq!(
            check_definition("x::TIMESTAMP WITH TIME ZONE > '2024-01-01'::DATE"),
            "CHECK (x::timestamp with time zone > '2024-01-01'::date)"
        );
    }

    #[test]
    fn a_view_query_is_qualified_off_the_path() {
        assert_eq!(
            qualified_view_query("select x::INTEGER from t", true, &[]),
            "SELECT x::integer FROM t;"
        );
        assert_eq!(
            qualified_view_query(
                "WITH w AS (SELECT 1) SELECT * FROM t JOIN w ON true JOIN pg_class c ON true JOIN public.u ON true",
                false,
                &[]
            ),
            "WITH w AS (SELECT 1) SELECT * FROM public.t JOIN w ON true JOIN pg_class c ON true JOIN public.u ON true;"
        );
    }

    #[test]
    fn a_default_names_its_sequence_qualified_off_the_path() {
        let d = "nextval('t_id_seq'::regclass)";
        assert_eq!(qualified_default(d, true, &[]), d);
        assert_eq!(
            qualified_default(d, false, &[]),
            "nextval('public.t_id_seq'::regclass)"
        );
        assert_eq!(
            qualified_default("nextval('\"Odd Seq\"'::regclass)", false, &[]),
            "nextval('public.\"Odd Seq\"'::regclass)"
        );
        assert_eq!(qualified_default("'x'", false, &[]), "'x'");
        // a user schema's sequence is always qualified
        let app = vec!["app".to_string()];
        let d = "nextval('app.t_id_seq'::regclass)";
        assert_eq!(qualified_default(d, true, &app), d);
        assert_eq!(qualified_default(d, false, &app), d);
        assert_eq!(
            qualified_view_query(
                "SELECT a FROM \"app.t\" AS \"t\" JOIN u ON true",
                true,
                &app
            ),
            "SELECT a FROM app.t AS \"t\" JOIN u ON true;"
        );
    }
}
