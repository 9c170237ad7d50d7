//! SQL-level `PREPARE name [(types)] AS statement`, `EXECUTE name [(args)]`
//! and `DEALLOCATE [PREPARE] name | ALL`.
//!
//! A prepared statement is parsed and described once, as the extended
//! protocol's Parse does (`Session::prepare_parsed`), and run by
//! `Session::execute_prepared` with the arguments bound as parameters.
//! Arguments are constants (numbers, strings, booleans, NULL, each
//! optionally cast): an expression argument is refused with 0A000.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    DataType as SqlType, Expr, Ident, ObjectName, Statement, UnaryOperator, Value as SqlValue,
};
use eddy_common::Value;

use super::{Output, Session};
use crate::error::{Result, SqlError};
use crate::pgtypes;
use crate::rewrite::{ident_name, table_name};

/// The text of a constant argument (`None` for NULL), as a text-format
/// parameter would carry it.
fn constant_text(e: &Expr) -> Result<Option<String>> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Null => Ok(None),
            SqlValue::Number(n, _) => Ok(Some(n.clone())),
            SqlValue::SingleQuotedString(s)
            | SqlValue::EscapedStringLiteral(s)
            | SqlValue::DollarQuotedString(datafusion::sql::sqlparser::ast::DollarQuotedString {
                value: s,
                ..
            }) => Ok(Some(s.clone())),
            SqlValue::Boolean(b) => Ok(Some(if *b { "t" } else { "f" }.into())),
            other => Err(SqlError::FeatureNotSupported(format!(
                "EXECUTE argument {other} is not supported"
            ))),
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => Ok(constant_text(expr)?.map(|t| format!("-{t}"))),
        Expr::Nested(inner) => constant_text(inner),
        Expr::Cast { expr, .. } => constant_text(expr),
        other => Err(SqlError::FeatureNotSupported(format!(
            "EXECUTE arguments must be constants, not {other}"
        ))),
    }
}

/// The OID of a parameter type PREPARE declares: a column type's, or
/// `oid` (pg_dump's `PREPARE getColumnACLs(pg_catalog.oid)`), which is no
/// column type but a parameter may be.
fn declared_type_oid(t: &SqlType) -> Result<u32> {
    if let SqlType::Custom(name, modifiers) = t {
        let parts: Vec<String> = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(ident_name))
            .collect();
        let bare = match parts.as_slice() {
            [schema, bare] if schema == "pg_catalog" => Some(bare.as_str()),
            [bare] => Some(bare.as_str()),
            _ => None,
        };
        if bare == Some("oid") && modifiers.is_empty() {
            return Ok(pgtypes::oid::OID);
        }
        if let (Some(bare), [_, _]) = (bare, parts.as_slice()) {
            // `pg_catalog.int4`: the type the bare name names
            let unqualified =
                SqlType::Custom(ObjectName::from(vec![Ident::new(bare)]), modifiers.clone());
            return declared_type_oid(&unqualified);
        }
    }
    pgtypes::column_type_from_sql(t).map(pgtypes::oid_for_column_type)
}

impl Session {
    pub(super) async fn sql_prepare(
        &mut self,
        name: &Ident,
        data_types: &[SqlType],
        statement: Statement,
    ) -> Result<Output> {
        let name = ident_name(name);
        if self.sql_prepared.contains_key(&name) {
            return Err(SqlError::DuplicatePreparedStatement(name));
        }
        let declared: Vec<u32> = data_types
            .iter()
            .map(declared_type_oid)
            .collect::<Result<_>>()?;
        let text = statement.to_string();
        let prepared = self.prepare_parsed(text, statement, &declared).await?;
        self.sql_prepared.insert(name, Arc::new(prepared));
        Ok(Output::Command("PREPARE".into()))
    }

    pub(super) async fn sql_execute(&mut self, name: &ObjectName, args: &[Expr]) -> Result<Output> {
        let name = table_name(name)?;
        let prepared = self
            .sql_prepared
            .get(&name)
            .cloned()
            .ok_or_else(|| SqlError::UndefinedPreparedStatement(name.clone()))?;
        if args.len() != prepared.param_types.len() {
            return Err(SqlError::Syntax(format!(
                "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                prepared.param_types.len(),
                args.len()
            )));
        }
        let params: Vec<Value> = args
            .iter()
            .zip(&prepared.param_types)
            .map(|(a, oid)| match constant_text(a)? {
                None => Ok(Value::Null),
                Some(text) => pgtypes::parse_param(text.as_bytes(), *oid, false),
            })
            .collect::<Result<_>>()?;
        Box::pin(self.execute_prepared(&prepared, &params)).await
    }

    pub(super) fn deallocate(&mut self, name: Option<&str>) -> Result<Output> {
        match name {
            None => self.sql_prepared.clear(),
            Some(n) => {
                self.sql_prepared
                    .remove(n)
                    .ok_or_else(|| SqlError::UndefinedPreparedStatement(n.to_string()))?;
            }
        }
        Ok(Output::Command("DEALLOCATE".into()))
    }
}
