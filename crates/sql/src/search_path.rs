//! Unqualified names under a search path without `public`.
//!
//! `crate::schemas` resolves the names the path finds in user schemas
//! first (they become storage names, which count as qualified here). A
//! path that names `public` (the default, `"$user", public`) resolves the
//! rest in `public`. One that does not (pg_dump's empty path, or only
//! schemas that do not hold the name) leaves them resolving nowhere. Under
//! it, as in PostgreSQL:
//! * an unqualified relation name a statement reads, writes, alters,
//!   drops, copies, grants on or comments on does not resolve (42P01),
//!   unless it is a CTE in scope, a temporary table (`pg_temp` is always
//!   searched) or a `pg_catalog` relation (always searched);
//! * an unqualified CREATE TABLE / VIEW / SEQUENCE has nowhere to go
//!   (3F000), unless it is temporary;
//! * a relation named in text (`nextval('s')`, `'t'::regclass`,
//!   `setval`, `currval`, `pg_get_serial_sequence`) follows the same rule
//!   when the text is a constant.
//!
//! Names stored before (a view's query, a column default) were bound when
//! they were made and are not checked again, as PostgreSQL stores them
//! bound. What this cannot see (a relation name computed at run time and
//! passed to `nextval`) resolves in `public`; the module's tests list what
//! is checked.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CommentObject, CopySource, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GrantObjects, ObjectName, ObjectNamePart, ObjectType, Query, Statement, TableFactor,
    Value as SqlValue, Visit, Visitor,
};

use crate::error::{Result, SqlError};
use crate::rewrite::{ident_name, CteScopes};

/// Whether a `search_path` value (as SET stored it) names `public`.
pub fn names_public(value: &str) -> bool {
    value.split(',').any(|element| {
        let element = element.trim();
        match element.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
            Some(quoted) => quoted == "public",
            None => element.eq_ignore_ascii_case("public"),
        }
    })
}

/// Checks the names `stmt` writes without a schema, for a search path
/// without `public`. `system_relation` says whether an unqualified name
/// is a `pg_catalog` relation, `qualified` whether one identifier is a
/// user schema's relation already (`crate::schemas` resolved it).
pub fn check_statement(
    stmt: &Statement,
    system_relation: &dyn Fn(&str) -> bool,
    qualified: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut check = PathCheck {
        system_relation,
        qualified,
        ctes: CteScopes::default(),
        // a temporary table's name is its own (`check_created` checked
        // a permanent one)
        skip: match stmt {
            Statement::CreateTable(ct) => Some(ct.name.clone()),
            _ => None,
        },
    };
    check_created(stmt, qualified)?;
    check_statement_names(stmt, &check)?;
    match stmt.visit(&mut check) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Takes out of a `DROP TABLE | VIEW | SEQUENCE | INDEX IF EXISTS` the
/// unqualified names that resolve nowhere under a search path without
/// `public`, as PostgreSQL skips each with a notice: returns the notices'
/// texts (`table "x" does not exist, skipping`). The statement keeps the
/// other names; with none left there is nothing to drop. Without this,
/// [`check_statement`] refuses such a name (dropping `public`'s instead
/// would be wrong).
pub fn skip_unresolved_drops(
    stmt: &mut Statement,
    system_relation: &dyn Fn(&str) -> bool,
    qualified: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let Statement::Drop {
        object_type,
        names,
        if_exists: true,
        ..
    } = stmt
    else {
        return Vec::new();
    };
    let what = match object_type {
        ObjectType::Table => "table",
        ObjectType::View => "view",
        ObjectType::Sequence => "sequence",
        ObjectType::Index => "index",
        _ => return Vec::new(),
    };
    let check = PathCheck {
        system_relation,
        qualified,
        ctes: CteScopes::default(),
        skip: None,
    };
    let mut notices = Vec::new();
    names.retain(|n| match unqualified(n) {
        Some(name) if !check.resolves(&name) => {
            notices.push(format!("{what} \"{name}\" does not exist, skipping"));
            false
        }
        _ => true,
    });
    notices
}

/// An unqualified relation name in a command Eddy parses itself (ALTER
/// SEQUENCE, an identity's table): as [`check_statement`] checks one.
pub fn check_relation(
    name: &ObjectName,
    system_relation: &dyn Fn(&str) -> bool,
    qualified: &dyn Fn(&str) -> bool,
) -> Result<()> {
    PathCheck {
        system_relation,
        qualified,
        ctes: CteScopes::default(),
        skip: None,
    }
    .relation(name)
}

/// 3F000 for a relation such a command creates without a schema
/// (`qualified`: as [`check_statement`] takes it).
pub fn check_created_name(name: &ObjectName, qualified: &dyn Fn(&str) -> bool) -> Result<()> {
    match unqualified(name) {
        Some(n) if !qualified(&n) => Err(SqlError::NoSchemaSelected),
        _ => Ok(()),
    }
}

/// The one part of an unqualified name (`None` for a qualified one).
fn unqualified(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] => Some(ident_name(id)),
        _ => None,
    }
}

/// 3F000 for a permanent relation created without a schema.
fn check_created(stmt: &Statement, qualified: &dyn Fn(&str) -> bool) -> Result<()> {
    let created = match stmt {
        Statement::CreateTable(ct) if !ct.temporary => Some(&ct.name),
        Statement::CreateView(cv) if !cv.temporary => Some(&cv.name),
        Statement::CreateSequence {
            temporary: false,
            name,
            ..
        } => Some(name),
        Statement::Explain { statement, .. } => return check_created(statement, qualified),
        _ => None,
    };
    created.map_or(Ok(()), |n| check_created_name(n, qualified))
}

/// Names the visitor does not reach (sqlparser visits a statement's
/// relations only in some positions).
fn check_statement_names(stmt: &Statement, check: &PathCheck<'_>) -> Result<()> {
    match stmt {
        Statement::Explain { statement, .. } => check_statement_names(statement, check),
        Statement::Prepare { statement, .. } => check_statement_names(statement, check),
        Statement::Drop {
            object_type,
            names,
            if_exists,
            ..
        } => {
            let what = match object_type {
                ObjectType::Table => "table",
                ObjectType::View => "view",
                ObjectType::Sequence => "sequence",
                ObjectType::Index => "index",
                _ => return Ok(()),
            };
            for n in names {
                let Some(name) = unqualified(n) else { continue };
                if check.resolves(&name) {
                    continue;
                }
                if *if_exists {
                    // `skip_unresolved_drops` takes such names out before
                    // this check; dropping the `public` one instead would
                    // be wrong
                    return Err(SqlError::Internal(format!(
                        "DROP ... IF EXISTS {name}: an unresolved name reached the drop"
                    )));
                }
                let message = format!("{what} \"{name}\" does not exist");
                return Err(match object_type {
                    ObjectType::Index => SqlError::UndefinedObject(message),
                    _ => SqlError::UndefinedRelation(message),
                });
            }
            Ok(())
        }
        Statement::Copy {
            source: CopySource::Table { table_name, .. },
            ..
        } => check.relation(table_name),
        Statement::Comment {
            object_type,
            object_name,
            ..
        } => match object_type {
            // `t.c`: the table is all but the last part
            CommentObject::Column => match object_name.0.as_slice() {
                [ObjectNamePart::Identifier(t), _] => check.name(&ident_name(t)),
                _ => Ok(()),
            },
            CommentObject::Table | CommentObject::View => check.relation(object_name),
            _ => Ok(()),
        },
        Statement::Grant(g) => check_grant_objects(g.objects.as_ref(), check),
        Statement::Revoke(r) => check_grant_objects(r.objects.as_ref(), check),
        _ => Ok(()),
    }
}

fn check_grant_objects(objects: Option<&GrantObjects>, check: &PathCheck<'_>) -> Result<()> {
    match objects {
        Some(GrantObjects::Tables(names) | GrantObjects::Sequences(names)) => {
            names.iter().try_for_each(|n| check.relation(n))
        }
        _ => Ok(()),
    }
}

struct PathCheck<'a> {
    system_relation: &'a dyn Fn(&str) -> bool,
    qualified: &'a dyn Fn(&str) -> bool,
    /// The CTE names of the queries being visited, innermost last.
    ctes: CteScopes,
    /// The next relation name the visitor meets that is not a relation
    /// read: the table function being visited (`FROM generate_series(...)`)
    /// or the table CREATE TABLE makes.
    skip: Option<ObjectName>,
}

impl PathCheck<'_> {
    /// Whether unqualified `name` means something without `public`.
    fn resolves(&self, name: &str) -> bool {
        (self.system_relation)(name)
            || (self.qualified)(name)
            || crate::temp_tables::is_reserved(name)
            || self.ctes.contains(name)
    }

    fn name(&self, name: &str) -> Result<()> {
        if self.resolves(name) {
            return Ok(());
        }
        Err(SqlError::UndefinedTable(name.to_string()))
    }

    fn relation(&self, name: &ObjectName) -> Result<()> {
        match unqualified(name) {
            Some(n) => self.name(&n),
            None => Ok(()),
        }
    }

    /// A relation named by constant text (`nextval('s')`).
    fn text(&self, text: &str) -> Result<()> {
        match crate::sequences::name_parts(text)?.as_slice() {
            [n] => self.name(n),
            _ => Ok(()),
        }
    }

    fn expr(&self, e: &Expr) -> Result<()> {
        match e {
            Expr::Cast {
                data_type: DataType::Regclass,
                expr,
                ..
            } => match text_constant(expr) {
                Some(t) => self.text(t),
                None => Ok(()),
            },
            Expr::Function(f) => {
                let Some(ObjectNamePart::Identifier(last)) = f.name.0.last() else {
                    return Ok(());
                };
                let named = matches!(
                    ident_name(last).as_str(),
                    "nextval" | "currval" | "setval" | "pg_get_serial_sequence"
                );
                let FunctionArguments::List(list) = &f.args else {
                    return Ok(());
                };
                match list.args.first() {
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))) if named => {
                        match text_constant(arg) {
                            Some(t) => self.text(t),
                            None => Ok(()),
                        }
                    }
                    _ => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The text of a string constant (`'s'`, or `'s'::regclass` inside).
fn text_constant(e: &Expr) -> Option<&str> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::SingleQuotedString(s) => Some(s),
            _ => None,
        },
        Expr::Cast {
            data_type: DataType::Regclass,
            expr,
            ..
        } => text_constant(expr),
        Expr::Nested(inner) => text_constant(inner),
        _ => None,
    }
}

impl Visitor for PathCheck<'_> {
    type Break = SqlError;

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<SqlError> {
        self.ctes.enter(q);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<SqlError> {
        self.ctes.leave();
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, tf: &TableFactor) -> ControlFlow<SqlError> {
        if let TableFactor::Table {
            name,
            args: Some(_),
            ..
        } = tf
        {
            self.skip = Some(name.clone());
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &ObjectName) -> ControlFlow<SqlError> {
        if self.skip.as_ref() == Some(name) {
            self.skip = None;
            return ControlFlow::Continue(());
        }
        match self.relation(name) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<SqlError> {
        match self.expr(e) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::parse_statement;

    fn check(sql: &str) -> Result<()> {
        let stmt = parse_statement(sql).unwrap();
        check_statement(&stmt, &|n| n == "pg_class", &|_| false)
    }

    fn sqlstate(sql: &str) -> &'static str {
        match check(sql) {
            Ok(()) => "ok",
            Err(e) => e.sqlstate(),
        }
    }

    #[test]
    fn qualified_names_pass_and_unqualified_do_not_resolve() {
        for ok in [
            "SELECT * FROM public.t",
            "SELECT * FROM pg_class",
            "SELECT * FROM pg_catalog.pg_class",
            "WITH t AS (SELECT 1) SELECT * FROM t",
            "SELECT * FROM generate_series(1, 3)",
            "INSERT INTO public.t VALUES (1)",
            "UPDATE public.t SET a = 1",
            "DELETE FROM public.t",
            "CREATE TABLE public.t (a int)",
            "CREATE TEMP TABLE t (a int)",
            "CREATE TEMP TABLE t AS SELECT * FROM public.u",
            "CREATE VIEW public.v AS SELECT a FROM public.t",
            "CREATE SEQUENCE public.s",
            "CREATE INDEX i ON public.t (a)",
            "DROP TABLE public.t",
            "COPY public.t FROM STDIN",
            "COMMENT ON TABLE public.t IS 'x'",
            "COMMENT ON COLUMN public.t.a IS 'x'",
            "GRANT SELECT ON public.t TO PUBLIC",
            "SELECT pg_catalog.setval('public.s', 3, true)",
            "SELECT nextval('public.s'::regclass)",
            "ALTER TABLE ONLY public.t ADD CONSTRAINT t_pkey PRIMARY KEY (a)",
            "SELECT 1",
        ] {
            assert_eq!(sqlstate(ok), "ok", "{ok}");
        }
        for (bad, code) in [
            ("SELECT * FROM t", "42P01"),
            ("SELECT * FROM public.t JOIN u ON true", "42P01"),
            ("SELECT (SELECT count(*) FROM u)", "42P01"),
            ("WITH x AS (SELECT * FROM t) SELECT * FROM x", "42P01"),
            ("INSERT INTO t VALUES (1)", "42P01"),
            ("UPDATE t SET a = 1", "42P01"),
            ("DELETE FROM t", "42P01"),
            ("TRUNCATE t", "42P01"),
            ("ALTER TABLE t ADD COLUMN b int", "42P01"),
            ("DROP TABLE t", "42P01"),
            ("DROP INDEX i", "42704"),
            // refused if it reaches the check (`skip_unresolved_drops`
            // takes such names out first)
            ("DROP TABLE IF EXISTS t", "XX000"),
            ("COPY t FROM STDIN", "42P01"),
            ("COMMENT ON TABLE t IS 'x'", "42P01"),
            ("COMMENT ON COLUMN t.a IS 'x'", "42P01"),
            ("GRANT SELECT ON t TO PUBLIC", "42P01"),
            ("SELECT nextval('s')", "42P01"),
            ("SELECT setval('s', 3)", "42P01"),
            ("SELECT 's'::regclass", "42P01"),
            ("CREATE TABLE t (a int)", "3F000"),
            ("CREATE VIEW v AS SELECT 1", "3F000"),
            ("CREATE SEQUENCE s", "3F000"),
            ("CREATE TABLE public.t2 AS SELECT * FROM t", "42P01"),
            ("EXPLAIN SELECT * FROM t", "42P01"),
        ] {
            assert_eq!(sqlstate(bad), code, "{bad}");
        }
    }

    #[test]
    fn drops_if_exists_skip_names_that_resolve_nowhere() {
        let mut stmt = parse_statement("DROP TABLE IF EXISTS public.a, b, pg_class, c").unwrap();
        let notices = skip_unresolved_drops(&mut stmt, &|n| n == "pg_class", &|_| false);
        assert_eq!(
            notices,
            [
                "table \"b\" does not exist, skipping",
                "table \"c\" does not exist, skipping"
            ]
        );
        assert_eq!(stmt.to_string(), "DROP TABLE IF EXISTS public.a, pg_class");
        let mut plain = parse_statement("DROP TABLE b").unwrap();
        assert!(skip_unresolved_drops(&mut plain, &|_| false, &|_| false).is_empty());
        assert_eq!(plain.to_string(), "DROP TABLE b");
        let mut index = parse_statement("DROP INDEX IF EXISTS i").unwrap();
        assert_eq!(
            skip_unresolved_drops(&mut index, &|_| false, &|_| false),
            ["index \"i\" does not exist, skipping"]
        );
    }

    #[test]
    fn paths_that_name_public() {
        assert!(names_public("\"$user\", public"));
        assert!(names_public("PUBLIC"));
        assert!(names_public("\"public\", pg_catalog"));
        assert!(!names_public(""));
        assert!(!names_public("''"));
        assert!(!names_public("\"$user\""));
        assert!(!names_public("\"Public\""));
    }
}
