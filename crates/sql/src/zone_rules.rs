//! The session's TimeZone in planned expressions: an analyzer rule that
//! rewrites what PostgreSQL computes on the session zone's wall clock.
//!
//! Eddy's `timestamptz` values are UTC instants whatever the session zone
//! (`crate::session_zone`), and DataFusion's kernels read them in UTC. In a
//! session whose zone is not UTC, this rule (run right after DataFusion's
//! type coercion, which writes implicit conversions as `Cast` nodes)
//! replaces:
//! * a cast of `timestamptz` to `timestamp`, `date` or `time` by the cast
//!   of its wall-clock time (`eddy_at_time_zone(x, zone)`);
//! * a cast of `timestamp` or `date` to `timestamptz` by the instant the
//!   zone's clocks showed it; a cast of text (also text first read as a
//!   `timestamp`, as `x::timestamptz` is written) by the text read in the
//!   zone ([`TIMESTAMPTZ_IN_ZONE`]);
//! * a cast of `timestamptz` to text by the cast of the value labelled
//!   with the zone, which the text encoder writes on its wall clock;
//! * `date_trunc(f, x)` by truncation on the wall clock, `date_part(f, x)`
//!   (EXTRACT) by the field of the wall clock (the epoch is the instant's),
//!   `to_char(x, t)` by `to_char(x, t, zone)`, the wall clock's text with
//!   the zone's abbreviation and offset at each value, one-argument
//!   `age(x)` by `age` from the zone's midnight today, `current_date` and
//!   `current_time` by today's date and time there;
//! * `to_timestamp(text, template)` and six-argument `make_timestamptz` by
//!   their forms that name the zone;
//! * in a zone with daylight saving, `x + interval` and `x - interval` by
//!   [`ZONE_ADD_INTERVAL`], which moves months and days on the wall clock,
//!   and `generate_series` of `timestamptz` values by [`ZONE_SERIES`],
//!   which steps the same way.
//!
//! What the zone would change but Eddy does not compute on it is refused
//! (0A000) rather than answered in UTC: `range` of `timestamptz` values.
//! EXTRACT and `date_part` of the `timezone*` fields are the zone's offset
//! at the value (`crate::extract`).
//!
//! Invariants: every rewritten expression has its original type and output
//! name; the rewrite of a rewritten plan changes nothing (the analyzer may
//! run again on a prepared statement's plan); in a UTC session the rule
//! changes nothing at all.
//!
//! [`TIMESTAMPTZ_IN_ZONE`]: crate::zone_functions::TIMESTAMPTZ_IN_ZONE
//! [`ZONE_ADD_INTERVAL`]: crate::zone_functions::ZONE_ADD_INTERVAL
//! [`ZONE_SERIES`]: crate::zone_functions::ZONE_SERIES

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, ScalarUDF, TryCast,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Statement, Value as SqlValue, ValueWithSpan,
};
use datafusion::sql::sqlparser::tokenizer::Span;
use parking_lot::RwLock;

use crate::error::SqlError;
use crate::session_zone::SessionZone;

/// `eddy_timestamptz_in_zone(text)` calls on the AST (a `timestamptz`
/// literal, `crate::rewrite`) given the session's zone as their second
/// argument, before DataFusion folds them: a table function's arguments
/// are folded while the statement is planned, before this module's rule
/// runs.
pub fn bind_literal_zone(stmt: &mut Statement, zone: &SessionZone) {
    if zone.is_utc() {
        return;
    }
    let text = zone.at_time_zone_text();
    let _ = visit_expressions_mut(stmt, |e| {
        if let SqlExpr::Function(f) = e {
            let is_input = f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|id| id.value == crate::zone_functions::TIMESTAMPTZ_IN_ZONE);
            if let (true, FunctionArguments::List(list)) = (is_input, &mut f.args) {
                if list.args.len() == 1 {
                    list.args
                        .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::Value(
                            ValueWithSpan {
                                value: SqlValue::SingleQuotedString(text.clone()),
                                span: Span::empty(),
                            },
                        ))));
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The zone a session's statements are planned with; the session sets it
/// before planning each statement.
#[derive(Debug, Default)]
pub struct ZoneState {
    zone: RwLock<SessionZone>,
}

impl ZoneState {
    pub fn set(&self, zone: SessionZone) {
        *self.zone.write() = zone;
    }

    pub fn get(&self) -> SessionZone {
        self.zone.read().clone()
    }
}

/// The analyzer rule; it must run right after DataFusion's `TypeCoercion`.
#[derive(Debug)]
pub struct SessionZoneRule {
    zone: Arc<ZoneState>,
}

impl SessionZoneRule {
    pub fn new(zone: Arc<ZoneState>) -> SessionZoneRule {
        SessionZoneRule { zone }
    }
}

impl AnalyzerRule for SessionZoneRule {
    fn name(&self) -> &str {
        "eddy_session_zone"
    }

    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let zone = self.zone.get();
        let Some(label) = zone.output_label() else {
            return Ok(plan);
        };
        let ctx = Ctx {
            text: zone.at_time_zone_text(),
            fixed: zone.is_fixed(),
            label,
            now: Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(ScalarUDF::new_from_impl(
                    datafusion::functions::datetime::now::NowFunc::new_with_config(config),
                )),
                vec![],
            )),
        };
        Ok(plan
            .transform_up_with_subqueries(|p| match p {
                // a VALUES row's types are its schema's: rewritten in place
                LogicalPlan::Values(_) => {
                    p.map_expressions(|e| e.transform_up(|e| rewrite(e, &DFSchema::empty(), &ctx)))
                }
                LogicalPlan::Limit(_) => Ok(Transformed::no(p)),
                p => crate::node_rewrite::rewrite_node_expressions(p, |e, schema| {
                    rewrite(e, schema, &ctx)
                }),
            })?
            .data)
    }
}

struct Ctx {
    /// The zone as `eddy_at_time_zone` reads it.
    text: String,
    /// Whether the zone's offset never changes.
    fixed: bool,
    /// The label that makes the encoder write the zone's wall clock.
    label: Arc<str>,
    /// `now()`, for `current_date` and `current_time`.
    now: Expr,
}

fn naive_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, None)
}

fn instant_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

fn is_instant(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(_, Some(_)))
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

fn is_interval(t: &DataType) -> bool {
    matches!(t, DataType::Interval(_))
}

fn text_literal(s: &str) -> Expr {
    Expr::Literal(ScalarValue::Utf8(Some(s.to_string())), None)
}

fn literal_text(e: &Expr) -> Option<&str> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s),
        _ => None,
    }
}

fn cast_to(e: Expr, from: &DataType, to: &DataType) -> Expr {
    if from == to {
        e
    } else {
        Expr::Cast(Cast::new(Box::new(e), to.clone()))
    }
}

fn call(udf: ScalarUDF, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), args))
}

fn refused(what: &str) -> DataFusionError {
    DataFusionError::from(SqlError::FeatureNotSupported(format!(
        "{what} is not supported in a session whose TimeZone is not UTC"
    )))
}

impl Ctx {
    /// `e` (a timestamp of type `from`, with or without zone) converted by
    /// `eddy_at_time_zone`: an instant to the zone's wall clock (a
    /// `timestamp`), a wall-clock time to its instant (a `timestamptz`).
    fn at_zone(&self, e: Expr, from: &DataType) -> Expr {
        let micros = match from {
            DataType::Timestamp(_, tz) => cast_to(
                e,
                from,
                &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
            ),
            _ => cast_to(e, from, &naive_micros()),
        };
        call(
            crate::at_time_zone::at_time_zone_function(),
            vec![micros, text_literal(&self.text)],
        )
    }

    /// Text read as a `timestamptz` in the zone.
    fn text_in(&self, e: Expr, from: &DataType) -> Expr {
        let text = cast_to(e, from, &DataType::Utf8);
        call(
            crate::zone_functions::timestamptz_in_zone_function(),
            vec![text, text_literal(&self.text)],
        )
    }

    fn add_interval(&self, ts: Expr, interval: Expr, sign: i32) -> Expr {
        call(
            crate::zone_functions::zone_add_interval_function(),
            vec![
                ts,
                interval,
                text_literal(&self.text),
                Expr::Literal(ScalarValue::Int32(Some(sign)), None),
            ],
        )
    }
}

/// The conversion of `e` (of type `from`) to `to` on the zone's wall
/// clock, if the zone takes part in it.
fn convert(e: &Expr, from: &DataType, to: &DataType, schema: &DFSchema, ctx: &Ctx) -> Option<Expr> {
    match (from, to) {
        (
            DataType::Timestamp(_, Some(_)),
            DataType::Timestamp(_, None)
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_),
        ) => Some(cast_to(ctx.at_zone(e.clone(), from), &naive_micros(), to)),
        (DataType::Timestamp(_, None), DataType::Timestamp(_, Some(_))) => {
            // text read as a timestamp first (`x::timestamptz`): read
            // with its zone suffix, in the zone without one
            if let Expr::Cast(Cast { expr: inner, .. })
            | Expr::TryCast(TryCast { expr: inner, .. }) = e
            {
                if let Ok(t) = inner.get_type(schema) {
                    if is_text(&t) {
                        return Some(cast_to(
                            ctx.text_in(inner.as_ref().clone(), &t),
                            &instant_micros(),
                            to,
                        ));
                    }
                }
            }
            Some(cast_to(ctx.at_zone(e.clone(), from), &instant_micros(), to))
        }
        (DataType::Date32 | DataType::Date64, DataType::Timestamp(_, Some(_))) => {
            let midnight = cast_to(e.clone(), from, &naive_micros());
            Some(cast_to(
                ctx.at_zone(midnight, &naive_micros()),
                &instant_micros(),
                to,
            ))
        }
        // an instant (also in an array or a record) written as text
        (from, t)
            if is_text(t) && crate::zone_functions::relabel_type(from, &ctx.label).is_some() =>
        {
            let labelled = crate::zone_functions::relabel_type(from, &ctx.label)
                .map(|r| Expr::Cast(Cast::new(Box::new(e.clone()), r)))?;
            Some(Expr::Cast(Cast::new(Box::new(labelled), to.clone())))
        }
        (t, DataType::Timestamp(_, Some(_))) if is_text(t) => {
            Some(cast_to(ctx.text_in(e.clone(), t), &instant_micros(), to))
        }
        _ => None,
    }
}

fn rewrite(e: Expr, schema: &DFSchema, ctx: &Ctx) -> DfResult<Transformed<Expr>> {
    let replaced = match &e {
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field })
            if field.metadata().is_empty() =>
        {
            let from = expr.get_type(schema)?;
            convert(expr, &from, field.data_type(), schema, ctx)
        }
        Expr::ScalarFunction(f) => function(f, &e, schema, ctx)?,
        Expr::AggregateFunction(agg) if TEXT_WRITERS.contains(&agg.func.name()) => {
            relabel_arguments(&agg.params.args, schema, ctx)?.map(|args| {
                let mut agg = agg.clone();
                agg.params.args = args;
                Expr::AggregateFunction(agg)
            })
        }
        Expr::BinaryExpr(b) if !ctx.fixed && matches!(b.op, Operator::Plus | Operator::Minus) => {
            interval_arithmetic(b, schema, ctx)?
        }
        _ => None,
    };
    Ok(match replaced {
        Some(new) => Transformed::yes(new),
        None => Transformed::no(e),
    })
}

fn function(f: &ScalarFunction, e: &Expr, schema: &DFSchema, ctx: &Ctx) -> DfResult<Option<Expr>> {
    let args = f.args.as_slice();
    let arg_type = |i: usize| -> DfResult<Option<DataType>> {
        args.get(i).map(|a| a.get_type(schema)).transpose()
    };
    Ok(match (f.func.name(), args) {
        ("arrow_cast", [x, target]) => {
            let Some(to) = literal_text(target).and_then(|t| t.parse::<DataType>().ok()) else {
                return Ok(None);
            };
            let from = x.get_type(schema)?;
            convert(x, &from, &to, schema, ctx)
        }
        ("date_trunc", [field, x]) => {
            let Some(from) = arg_type(1)?.filter(is_instant) else {
                return Ok(None);
            };
            let truncated = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::clone(&f.func),
                vec![field.clone(), ctx.at_zone(x.clone(), &from)],
            ));
            Some(cast_to(
                ctx.at_zone(truncated, &naive_micros()),
                &instant_micros(),
                &from,
            ))
        }
        // EXTRACT (crate::extract): the same, on its numeric
        ("date_part" | crate::extract::EXTRACT, [field, x]) => {
            let Some(from) = arg_type(1)?.filter(is_instant) else {
                return Ok(None);
            };
            let Some(name) = literal_text(field).map(str::to_ascii_lowercase) else {
                return Err(refused("date_part with a field that is not a constant"));
            };
            if name == "epoch" {
                return Ok(None);
            }
            if name.starts_with("timezone") {
                // the zone's offset at the value (`crate::extract`)
                let extract = crate::extract::extract_function();
                let call = Expr::ScalarFunction(ScalarFunction::new_udf(
                    extract,
                    vec![field.clone(), x.clone(), text_literal(&ctx.text)],
                ));
                let now = call.get_type(schema)?;
                return Ok(Some(cast_to(call, &now, &e.get_type(schema)?)));
            }
            let original = e.get_type(schema)?;
            let part = Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::clone(&f.func),
                vec![field.clone(), ctx.at_zone(x.clone(), &from)],
            ));
            let now = part.get_type(schema)?;
            Some(cast_to(part, &now, &original))
        }
        // written on the zone's wall clock with its abbreviation and
        // offset at each value (`crate::to_char`); a date at the zone's
        // midnight
        ("to_char", [x, template]) => {
            let t = arg_type(0)?;
            if !matches!(t, Some(DataType::Date32 | DataType::Date64))
                && !t.as_ref().is_some_and(is_instant)
            {
                return Ok(None);
            }
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::clone(&f.func),
                vec![x.clone(), template.clone(), text_literal(&ctx.text)],
            )))
        }
        ("to_timestamp", [_, _])
        | ("make_timestamptz", [_, _, _, _, _, _])
        | (crate::zone_functions::TIMESTAMPTZ_IN_ZONE, [_]) => {
            let mut with_zone = args.to_vec();
            with_zone.push(text_literal(&ctx.text));
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::clone(&f.func),
                with_zone,
            )))
        }
        // age from the zone's midnight today (PostgreSQL's current_date)
        ("age", [x]) => {
            let today = Expr::Cast(Cast::new(
                Box::new(ctx.at_zone(ctx.now.clone(), &ctx.now.get_type(schema)?)),
                DataType::Date32,
            ));
            Some(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::clone(&f.func),
                vec![
                    cast_to(today, &DataType::Date32, &naive_micros()),
                    x.clone(),
                ],
            )))
        }
        (name, _) if TEXT_WRITERS.contains(&name) => relabelled_arguments(f, schema, ctx)?,
        ("generate_series", [start, stop, step]) if !ctx.fixed => {
            let Some(from) = arg_type(0)?.filter(is_instant) else {
                return Ok(None);
            };
            let original = e.get_type(schema)?;
            let series = call(
                crate::zone_functions::zone_series_function(),
                vec![
                    cast_to(start.clone(), &from, &instant_micros()),
                    stop.clone(),
                    step.clone(),
                    text_literal(&ctx.text),
                ],
            );
            Some(cast_to(
                series,
                &DataType::new_list(instant_micros(), true),
                &original,
            ))
        }
        ("range", [start, ..]) if !ctx.fixed && is_instant(&start.get_type(schema)?) => {
            return Err(refused("range of timestamptz values"))
        }
        ("current_date", []) => Some(Expr::Cast(Cast::new(
            Box::new(ctx.at_zone(ctx.now.clone(), &ctx.now.get_type(schema)?)),
            DataType::Date32,
        ))),
        ("current_time", []) => {
            let original = e.get_type(schema)?;
            Some(Expr::Cast(Cast::new(
                Box::new(ctx.at_zone(ctx.now.clone(), &ctx.now.get_type(schema)?)),
                original,
            )))
        }
        _ => None,
    })
}

/// The functions that write their arguments as JSON or array text, where
/// an instant is written on the zone's wall clock.
const TEXT_WRITERS: &[&str] = &[
    crate::array_type::ARRAY_OUT,
    "to_json",
    "to_jsonb",
    "row_to_json",
    "json_build_object",
    "jsonb_build_object",
    "json_build_array",
    "jsonb_build_array",
    "json_agg",
    "jsonb_agg",
    "json_object_agg",
    "jsonb_object_agg",
];

/// The arguments that hold an instant, labelled with the zone so that the
/// writer (`crate::json_build`, `crate::array_type`, both through the text
/// encoder) writes its wall clock; `None` if no argument holds one.
fn relabel_arguments(args: &[Expr], schema: &DFSchema, ctx: &Ctx) -> DfResult<Option<Vec<Expr>>> {
    let mut changed = false;
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        match crate::zone_functions::relabel_type(&a.get_type(schema)?, &ctx.label) {
            Some(t) => {
                changed = true;
                out.push(Expr::Cast(Cast::new(Box::new(a.clone()), t)));
            }
            None => out.push(a.clone()),
        }
    }
    Ok(changed.then_some(out))
}

fn relabelled_arguments(
    f: &ScalarFunction,
    schema: &DFSchema,
    ctx: &Ctx,
) -> DfResult<Option<Expr>> {
    Ok(relabel_arguments(&f.args, schema, ctx)?
        .map(|args| Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&f.func), args))))
}

/// `x ± interval` and `interval + x` of a `timestamptz` x, in a zone with
/// daylight saving.
fn interval_arithmetic(b: &BinaryExpr, schema: &DFSchema, ctx: &Ctx) -> DfResult<Option<Expr>> {
    // the right operand first: usually a literal, so a long chain of
    // additions costs one type walk per link
    let right = b.right.get_type(schema)?;
    let (ts, ts_type, interval, sign) = if is_interval(&right) {
        let left = b.left.get_type(schema)?;
        if !is_instant(&left) {
            return Ok(None);
        }
        let sign = if b.op == Operator::Minus { -1 } else { 1 };
        (b.left.as_ref(), left, b.right.as_ref(), sign)
    } else if is_instant(&right) && b.op == Operator::Plus {
        if !is_interval(&b.left.get_type(schema)?) {
            return Ok(None);
        }
        (b.right.as_ref(), right, b.left.as_ref(), 1)
    } else {
        return Ok(None);
    };
    Ok(Some(cast_to(
        ctx.add_interval(ts.clone(), interval.clone(), sign),
        &instant_micros(),
        &ts_type,
    )))
}
