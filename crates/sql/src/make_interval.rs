//! `make_interval(years, months, weeks, days, hours, mins, secs)`, every
//! argument optional and nameable (`make_interval(days => 10)`), as in
//! PostgreSQL.
//!
//! DataFusion fills named arguments only up to the last one given, with no
//! defaults, so the call is completed on the AST ([`complete_call`], from
//! `crate::call_rewrites`): every argument is placed by position or name
//! and the missing ones are 0, giving `eddy_make_interval` all seven. A
//! name that is not a parameter, a name given twice or a positional
//! argument after a named one leaves the call as written, which then does
//! not resolve (42883), as in PostgreSQL.
//!
//! Arithmetic is PostgreSQL's (`make_interval` of its `timestamp.c`):
//! months = years * 12 + months, days = weeks * 7 + days, time = hours,
//! minutes and seconds in microseconds (seconds rounded half to even).
//! Where PostgreSQL 15 would wrap around, Eddy reports 22008 "interval out
//! of range" (as PostgreSQL 17 does); an infinite or NaN `secs` is 22008
//! too. An argument beyond int4 is 22003.

use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::ScalarUDF;
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
};

use crate::call_rewrites::call;
use crate::error::SqlError;
use crate::pg_functions::{arity, function, no_function};

/// The seven-argument function the call becomes.
pub const MAKE_INTERVAL: &str = "eddy_make_interval";

/// PostgreSQL's parameter names, in order.
const PARAMETERS: [&str; 7] = ["years", "months", "weeks", "days", "hours", "mins", "secs"];

/// `make_interval(...)` as `eddy_make_interval` with all seven arguments;
/// `None` when the call's arguments do not fit the parameters.
pub(crate) fn complete_call(f: &Function) -> Option<Expr> {
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let mut slots: [Option<Expr>; 7] = Default::default();
    match &f.args {
        FunctionArguments::List(list) => {
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return None;
            }
            let mut named = false;
            for (i, a) in list.args.iter().enumerate() {
                let (slot, arg) = match a {
                    FunctionArg::Unnamed(arg) if !named => (i, arg),
                    FunctionArg::Named { name, arg, .. } => {
                        named = true;
                        (parameter(&name.value, name.quote_style.is_some())?, arg)
                    }
                    FunctionArg::ExprNamed {
                        name: Expr::Identifier(name),
                        arg,
                        ..
                    } => {
                        named = true;
                        (parameter(&name.value, name.quote_style.is_some())?, arg)
                    }
                    _ => return None,
                };
                let FunctionArgExpr::Expr(e) = arg else {
                    return None;
                };
                let place = slots.get_mut(slot)?;
                if place.is_some() {
                    return None;
                }
                *place = Some(e.clone());
            }
        }
        FunctionArguments::None => {}
        FunctionArguments::Subquery(_) => return None,
    }
    let zero = |i: usize| {
        Expr::Value(Value::Number(if i == 6 { "0.0" } else { "0" }.to_string(), false).into())
    };
    let args = slots
        .into_iter()
        .enumerate()
        .map(|(i, e)| e.unwrap_or_else(|| zero(i)))
        .collect();
    Some(call(MAKE_INTERVAL, args))
}

/// The position of the parameter called `name` (unquoted names ignore
/// case).
fn parameter(name: &str, quoted: bool) -> Option<usize> {
    PARAMETERS.iter().position(|p| {
        if quoted {
            *p == name
        } else {
            p.eq_ignore_ascii_case(name)
        }
    })
}

/// The function, for the session to register.
pub fn make_interval_function() -> ScalarUDF {
    function(
        MAKE_INTERVAL,
        coerce,
        |_| Ok(DataType::Interval(IntervalUnit::MonthDayNano)),
        make_interval,
    )
}

fn coerce(args: &[DataType]) -> Result<Vec<DataType>, SqlError> {
    arity("make_interval", args, 7, 7)?;
    let numeric = |t: &DataType| t.is_numeric() || *t == DataType::Null;
    let ok = args.iter().enumerate().all(|(i, t)| {
        if i == 6 {
            numeric(t)
        } else {
            t.is_integer() || *t == DataType::Null
        }
    });
    if !ok {
        return Err(no_function("make_interval", args));
    }
    let mut out = vec![DataType::Int64; 6];
    out.push(DataType::Float64);
    Ok(out)
}

fn out_of_range() -> SqlError {
    SqlError::DatetimeOverflow("interval out of range".into())
}

fn make_interval(args: &[ScalarValue], _: &DataType) -> Result<ScalarValue, SqlError> {
    let mut ints = [0i32; 6];
    for (i, slot) in ints.iter_mut().enumerate() {
        match args.get(i) {
            Some(ScalarValue::Int64(Some(v))) => {
                *slot = i32::try_from(*v)
                    .map_err(|_| SqlError::NumericOutOfRange("integer out of range".into()))?;
            }
            _ => return Ok(ScalarValue::IntervalMonthDayNano(None)),
        }
    }
    let Some(ScalarValue::Float64(Some(secs))) = args.get(6) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    let [years, months, weeks, days, hours, mins] = ints;
    if !secs.is_finite() {
        return Err(out_of_range());
    }
    let months = years
        .checked_mul(12)
        .and_then(|y| y.checked_add(months))
        .ok_or_else(out_of_range)?;
    let days = weeks
        .checked_mul(7)
        .and_then(|w| w.checked_add(days))
        .ok_or_else(out_of_range)?;
    let secs_micros = (secs * 1_000_000.0).round_ties_even();
    if secs_micros.abs() >= 9.2e18 {
        return Err(out_of_range());
    }
    // in range: checked just above
    let secs_micros = secs_micros as i64;
    let micros = i64::from(hours)
        .checked_mul(3_600_000_000)
        .and_then(|h| h.checked_add(i64::from(mins) * 60_000_000))
        .and_then(|t| t.checked_add(secs_micros))
        .filter(|t| t.unsigned_abs() <= eddy_common::interval::MAX_INTERVAL_MICROS.unsigned_abs())
        .ok_or_else(out_of_range)?;
    Ok(ScalarValue::IntervalMonthDayNano(Some(
        IntervalMonthDayNano::new(months, days, micros * 1000),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn completed(sql: &str) -> Option<String> {
        let e = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        let Expr::Function(f) = e else {
            panic!("not a call")
        };
        complete_call(&f).map(|e| e.to_string())
    }

    #[test]
    fn arguments_are_placed_by_position_and_name() {
        assert_eq!(
            completed("make_interval(days => 10)").as_deref(),
            Some("eddy_make_interval(0, 0, 0, 10, 0, 0, 0.0)")
        );
        assert_eq!(
            completed("make_interval(1, 2, secs => 1.5)").as_deref(),
            Some("eddy_make_interval(1, 2, 0, 0, 0, 0, 1.5)")
        );
        assert_eq!(
            completed("make_interval()").as_deref(),
            Some("eddy_make_interval(0, 0, 0, 0, 0, 0, 0.0)")
        );
        assert_eq!(completed("make_interval(dayz => 1)"), None);
        assert_eq!(completed("make_interval(days => 1, days => 2)"), None);
        assert_eq!(completed("make_interval(days => 1, 2)"), None);
        assert_eq!(completed("make_interval(1, 2, 3, 4, 5, 6, 7, 8)"), None);
    }

    fn eval(ints: [i64; 6], secs: f64) -> Result<ScalarValue, SqlError> {
        let mut args: Vec<ScalarValue> =
            ints.iter().map(|v| ScalarValue::Int64(Some(*v))).collect();
        args.push(ScalarValue::Float64(Some(secs)));
        make_interval(&args, &DataType::Null)
    }

    #[test]
    fn fields_combine_as_postgres_does() {
        assert_eq!(
            eval([1, 2, 3, 4, 5, 6], 7.5).unwrap(),
            ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano::new(
                14,
                25,
                (5 * 3600 + 6 * 60) * 1_000_000_000 + 7_500_000_000
            )))
        );
        assert_eq!(
            eval([i64::from(i32::MAX), 0, 0, 0, 0, 0], 0.0)
                .unwrap_err()
                .sqlstate(),
            "22008"
        );
        assert_eq!(eval([0; 6], f64::INFINITY).unwrap_err().sqlstate(), "22008");
        assert_eq!(
            eval([1 << 40, 0, 0, 0, 0, 0], 0.0).unwrap_err().sqlstate(),
            "22003"
        );
    }
}
