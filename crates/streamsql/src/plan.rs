//! A materialized view's query planned by DataFusion and cut into the parts
//! the view operator runs incrementally.
//!
//! The query is planned with the SQL layer's rules (PostgreSQL output names,
//! checked integer arithmetic) over the view's source (two for an interval
//! join), each registered as a table whose scan is the marker
//! `SourceScanExec` (`source_scan.rs`). The physical plan must have the
//! shape
//!
//! ```text
//! post stages (FilterExec | ProjectionExec)*        -- HAVING, select list
//!   AggregateExec Final|Single  (GROUP BY, count/sum/min/max/avg)
//!     [AggregateExec Partial]
//!       pre stages (FilterExec | ProjectionExec)*   -- WHERE, expressions
//!         SourceScanExec
//!         | HashJoinExec of two sources (equi- or interval join, `interval_join.rs`)
//! ```
//!
//! (coalescing, repartitioning and cooperative-yield nodes are skipped; they change no
//! values). `TUMBLE(...)` / `HOP(...)` / `SESSION(...)` in FROM are bound
//! first (`window.rs`): the scan is then the source with `window_start` /
//! `window_end`, and the plan's [`EventTimePlan`] says how the view
//! operator assigns windows, drops late rows and closes windows. Lookup
//! joins become pre stages (`lookup.rs`). Anything else — other joins,
//! window functions (`OVER`), ORDER BY, LIMIT, DISTINCT ON, grouping sets, FILTER clauses, aggregates outside the list —
//! is refused with 0A000 at CREATE, so every view that is created is
//! maintained exactly.
//!
//! A query without an aggregate (filters and projections over one source
//! or over a join of two sources; no window, no lookup join) is an
//! **append-only** view ([`ViewPlan::append`]): its stages are all pre
//! stages and its rows are appended under their source row's position, or
//! over a join under the pair's number (`append_op.rs`).
//!
//! The view's table takes the output columns (visible names, storable
//! types); its primary key is the output columns that are GROUP BY columns
//! passed through unchanged, which must cover every GROUP BY expression.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::sqlparser::ast::{Query, Statement};
use eddy_common::{ColumnDef, ColumnType, TableDef};

use crate::error::{Result, StreamSqlError};
use crate::interval_join::IntervalJoin;
use crate::lookup::{LookupJoin, LookupTable};
use crate::session::{session_key, SessionKey};
use crate::source_scan::{SourceScanExec, SourceTable};
use crate::watermark::WatermarkDef;
use crate::window::{bind_windows, window_end_key, EmitMode, WindowEndKey, WindowKind, WindowSpec};

/// Aggregate functions the view operator maintains (their accumulators
/// take inserts one batch at a time and merge their own states).
const AGGREGATES: &[&str] = &["count", "sum", "min", "max", "avg"];

/// A row-wise step: the same rows in, the same or fewer rows out.
#[derive(Debug, Clone)]
pub enum Stage {
    /// Keep rows where `predicate` is true, then keep columns `projection`.
    Filter {
        predicate: Arc<dyn PhysicalExpr>,
        projection: Option<Vec<usize>>,
    },
    /// Compute `exprs` into a batch of `schema`.
    Project {
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        schema: SchemaRef,
    },
    /// Join each row with a table's row under its key (`lookup.rs`).
    Lookup(Arc<LookupJoin>),
}

/// A view's query cut into incremental parts.
#[derive(Debug, Clone)]
pub struct ViewPlan {
    /// The source the view reads.
    pub source: String,
    /// Source columns the scan keeps.
    pub scan_projection: Option<Vec<usize>>,
    /// Stages between the source and the aggregate, bottom up.
    pub pre: Vec<Stage>,
    /// GROUP BY expressions over the pre stages' output.
    pub group_exprs: Vec<Arc<dyn PhysicalExpr>>,
    /// The aggregates, their arguments over the pre stages' output.
    pub aggregates: Vec<Arc<AggregateFunctionExpr>>,
    /// The aggregate's output: group columns, then one column per aggregate.
    pub aggregate_schema: SchemaRef,
    /// Stages after the aggregate, bottom up.
    pub post: Vec<Stage>,
    /// The view table's columns (the query's output).
    pub columns: Vec<ColumnDef>,
    /// Primary key: output columns that are GROUP BY columns.
    pub primary_key: Vec<usize>,
    /// Watermark, window and emit mode.
    pub time: EventTimePlan,
    /// Why the aggregates cannot take retractions exactly (`None`: they
    /// can), checked when the source is a change log.
    pub retract_refusal: Option<String>,
    /// The source is a change log: batches carry a sign column, groups
    /// count their live rows, accumulators take retractions.
    pub retractions: bool,
    /// An interval join of two sources below the pre stages
    /// (`interval_join.rs`): the view reads `source` (the left) and
    /// `join.right.source`, and the pre stages run on the join's output.
    pub join: Option<Arc<IntervalJoin>>,
    /// An append-only view (no GROUP BY, `append_op.rs`): the pre stages
    /// are the whole query, there is no aggregate, no post stage and no
    /// primary key (each row is stored under its source row's position).
    pub append: bool,
    /// A join of two windowed aggregates (`window_join.rs`): the left and
    /// right sides, each a grouped view's plan emitting on window close,
    /// whose output rows are `join`'s inputs; empty otherwise.
    pub window_inputs: Vec<ViewPlan>,
}

/// What a view does with event time (all `None`: nothing).
#[derive(Debug, Clone, Default)]
pub struct EventTimePlan {
    /// The source's watermark: (time column in the source's schema, delay
    /// in µs). Rows below the watermark are dropped before anything else.
    pub watermark: Option<(usize, i64)>,
    /// The window the scan assigns, and the source's schema with the
    /// window columns (what `scan_projection` indexes).
    pub window: Option<(WindowSpec, SchemaRef)>,
    /// Which GROUP BY column gives a group's window end; set only when the
    /// window is on the watermark column, so that closed windows can be
    /// told (and their state dropped).
    pub window_end: Option<WindowEndKey>,
    /// A SESSION window's bounds in the GROUP BY (`session.rs`); set only
    /// when the window is on the watermark column.
    pub session: Option<SessionKey>,
    pub emit: EmitMode,
}

fn unsupported(what: impl fmt::Display) -> StreamSqlError {
    StreamSqlError::NotSupported(format!(
        "materialized views do not support {what} yet (supported: one source, WHERE, \
         GROUP BY with count/sum/min/max/avg, HAVING, TUMBLE, HOP and SESSION windows, \
         lookup joins, interval joins; without GROUP BY: WHERE and the select list over \
         one source)"
    ))
}

/// Plans `query` over `sources` (name → schema), none with a watermark,
/// emitting on update.
pub fn plan_view(query: &Query, sources: &[(String, SchemaRef)]) -> Result<ViewPlan> {
    plan_view_with(query, sources, &[], EmitMode::OnUpdate)
}

/// Plans `query` over `sources` (name → schema), whose watermarks are
/// `watermarks` (source name → definition), writing rows as `emit` says.
pub fn plan_view_with(
    query: &Query,
    sources: &[(String, SchemaRef)],
    watermarks: &[(String, WatermarkDef)],
    emit: EmitMode,
) -> Result<ViewPlan> {
    plan_view_over(query, sources, watermarks, emit, &|_| None)
}

/// [`plan_view_with`], where a name that is no source is looked up in
/// `tables` (its definition: the view may lookup-join it, `lookup.rs`).
/// Literals like `0.908` are numeric, as in queries.
pub fn plan_view_over(
    query: &Query,
    sources: &[(String, SchemaRef)],
    watermarks: &[(String, WatermarkDef)],
    emit: EmitMode,
    tables: &dyn Fn(&str) -> Option<Arc<TableDef>>,
) -> Result<ViewPlan> {
    plan_view_literals(query, sources, watermarks, emit, tables, true)
}

/// [`plan_view_over`], with `numeric_literals` choosing how a literal with
/// a fraction is typed: numeric, as PostgreSQL and Eddy's queries type it
/// (`ViewDef::numeric_literals`, every view created since), or double
/// precision, as views created before kept it (their tables and
/// checkpointed states hold those types, so they are planned as they were).
pub fn plan_view_literals(
    query: &Query,
    sources: &[(String, SchemaRef)],
    watermarks: &[(String, WatermarkDef)],
    emit: EmitMode,
    tables: &dyn Fn(&str) -> Option<Arc<TableDef>>,
    numeric_literals: bool,
) -> Result<ViewPlan> {
    let mut config = SessionConfig::new()
        .with_target_partitions(1)
        .with_information_schema(false);
    config.options_mut().sql_parser.parse_float_as_decimal = numeric_literals;
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rule(Arc::new(eddy_sql::checked_arith::CheckedArithmetic))
        .build();
    let ctx = SessionContext::new_with_state(state);
    // `count(DISTINCT x)` stays one aggregate (its accumulator keeps the
    // distinct values) instead of becoming two stacked GROUP BYs
    ctx.remove_optimizer_rule("single_distinct_aggregation_to_group_by");
    let mut query = query.clone();
    let windows = bind_windows(&mut query, sources, &ctx.state())?;
    for (name, schema) in sources {
        ctx.register_table(
            name.as_str(),
            Arc::new(SourceTable {
                name: name.clone(),
                schema: Arc::clone(schema),
                window: None,
            }),
        )?;
    }
    for w in &windows {
        let schema = sources
            .iter()
            .find(|(n, _)| *n == w.source)
            .map(|(_, s)| s)
            .ok_or_else(|| StreamSqlError::Undefined("source", w.source.clone()))?;
        ctx.register_table(
            datafusion::common::TableReference::bare(w.table.as_str()),
            Arc::new(SourceTable {
                name: w.source.clone(),
                schema: crate::window::windowed_schema(schema, w.spec.time_column)?,
                window: Some(w.spec.clone()),
            }),
        )?;
    }
    let mut stmt = Statement::Query(Box::new(query));
    eddy_sql::output_names::name_columns(&mut stmt);
    let df_stmt = datafusion::sql::parser::Statement::Statement(Box::new(stmt));
    let state = ctx.state();
    for t in state.resolve_table_references(&df_stmt)? {
        let known = sources.iter().any(|(name, _)| name == t.table())
            || windows.iter().any(|w| w.table == t.table());
        if known {
            continue;
        }
        match tables(t.table()) {
            Some(def) => {
                ctx.register_table(t.clone(), Arc::new(LookupTable::new(def)))?;
            }
            None => return Err(StreamSqlError::Undefined("source", t.table().to_string())),
        }
    }
    let physical = futures::executor::block_on(async {
        let logical = state.statement_to_plan(df_stmt).await?;
        state.create_physical_plan(&logical).await
    })?;
    let mut plan = cut(&physical)?;
    if !plan.window_inputs.is_empty() {
        if emit != EmitMode::OnWindowClose {
            return Err(StreamSqlError::NotSupported(
                "a join of two window aggregates needs EMIT ON WINDOW CLOSE (emitting on \
                 update, each side would revise its rows, and the join takes no retractions)"
                    .into(),
            ));
        }
        // each side closes its windows by its own source's watermark; the
        // join over their final rows drops nothing as late
        for side in &mut plan.window_inputs {
            plan_event_time(side, sources, watermarks, EmitMode::OnWindowClose)?;
        }
    }
    plan_event_time(&mut plan, sources, watermarks, emit)?;
    Ok(plan)
}

/// Fills in `plan.time` (the window is set by [`cut`]) and checks that
/// `emit` can be honoured.
fn plan_event_time(
    plan: &mut ViewPlan,
    sources: &[(String, SchemaRef)],
    watermarks: &[(String, WatermarkDef)],
    emit: EmitMode,
) -> Result<()> {
    let schema = sources
        .iter()
        .find(|(n, _)| *n == plan.source)
        .map(|(_, s)| s)
        .ok_or_else(|| StreamSqlError::Undefined("source", plan.source.clone()))?;
    if let Some(join) = plan.join.as_mut().filter(|j| j.interval.is_some()) {
        // each side keeps its own clock (`interval_join.rs`); an equi-join
        // has none (it drops no row as late), so needs no watermark
        let mut j = IntervalJoin::clone(join);
        for input in [&mut j.left, &mut j.right] {
            let schema = sources
                .iter()
                .find(|(n, _)| *n == input.source)
                .map(|(_, s)| s)
                .ok_or_else(|| StreamSqlError::Undefined("source", input.source.clone()))?;
            let wm = watermarks
                .iter()
                .find(|(n, _)| *n == input.source)
                .map(|(_, w)| (w.column.clone(), w.delay_micros));
            input.bind_watermark(schema, wm)?;
        }
        *join = Arc::new(j);
    } else if plan.append || plan.join.is_some() {
        // an append-only view keeps every row, late or not: no window
        // closes, so lateness changes nothing (as in Flink and RisingWave)
    } else if let Some((_, w)) = watermarks.iter().find(|(n, _)| *n == plan.source) {
        let (column, _) = schema.column_with_name(&w.column).ok_or_else(|| {
            StreamSqlError::State(format!(
                "watermark column \"{}\" is not in source \"{}\"",
                w.column, plan.source
            ))
        })?;
        plan.time.watermark = Some((column, w.delay_micros));
    }
    let on_watermark = match (&plan.time.window, plan.time.watermark) {
        (Some((spec, _)), Some((column, _))) => spec.time_column == column,
        _ => false,
    };
    if let Some((
        WindowSpec {
            kind: WindowKind::Session { gap },
            ..
        },
        _,
    )) = &plan.time.window
    {
        if !on_watermark {
            return Err(StreamSqlError::NotSupported(
                "a SESSION window needs a source with a WATERMARK on the window's time column \
                 (sessions close when the watermark passes their end)"
                    .into(),
            ));
        }
        plan.time.session = Some(session_key(
            *gap,
            schema.fields().len(),
            plan.scan_projection.as_deref(),
            &plan.pre,
            &plan.group_exprs,
            &plan.aggregates,
        )?);
    } else if let (Some((spec, _)), true) = (&plan.time.window, on_watermark) {
        plan.time.window_end = window_end_key(
            &spec.kind,
            schema.fields().len(),
            plan.scan_projection.as_deref(),
            &plan.pre,
            &plan.group_exprs,
        );
    }
    let closes = plan.time.window_end.is_some() || plan.time.session.is_some();
    if emit == EmitMode::OnWindowClose && !closes && plan.window_inputs.is_empty() {
        let why = if plan.time.window.is_none() {
            "the view has no TUMBLE, HOP or SESSION window"
        } else if plan.time.watermark.is_none() {
            "its source has no WATERMARK"
        } else if !on_watermark {
            "the window's time column is not the source's WATERMARK column"
        } else {
            "the view does not GROUP BY window_start or window_end"
        };
        return Err(StreamSqlError::NotSupported(format!(
            "EMIT ON WINDOW CLOSE needs a TUMBLE, HOP or SESSION window on the source's WATERMARK \
             column, grouped by window_start or window_end: {why}"
        )));
    }
    plan.time.emit = emit;
    Ok(())
}

/// Skips nodes that change no values.
pub(crate) fn skip_neutral(mut plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    loop {
        let neutral = plan.is::<CoalescePartitionsExec>()
            || plan.is::<RepartitionExec>()
            || plan.is::<CooperativeExec>();
        match plan.children().first() {
            Some(child) if neutral => plan = child,
            _ => return plan,
        }
    }
}

/// A stateless stage, or `None` if `plan` is not one.
pub(crate) fn stage_of(plan: &Arc<dyn ExecutionPlan>) -> Option<Stage> {
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        return Some(Stage::Filter {
            predicate: Arc::clone(f.predicate()),
            projection: f.projection().as_ref().map(|p| p.to_vec()),
        });
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        return Some(Stage::Project {
            exprs: p.expr().iter().map(|e| Arc::clone(&e.expr)).collect(),
            schema: p.schema(),
        });
    }
    None
}

fn only_child(plan: &Arc<dyn ExecutionPlan>) -> Result<&Arc<dyn ExecutionPlan>> {
    match plan.children().as_slice() {
        [c] => Ok(c),
        _ => Err(unsupported(plan.name())),
    }
}

pub(crate) fn cut(physical: &Arc<dyn ExecutionPlan>) -> Result<ViewPlan> {
    let output_schema = physical.schema();
    // post stages, top down
    let mut post = Vec::new();
    let mut node = skip_neutral(physical);
    let top = loop {
        if let Some(agg) = node.downcast_ref::<AggregateExec>() {
            break agg;
        }
        if let Some(scan) = node.downcast_ref::<SourceScanExec>() {
            post.reverse();
            return append_plan(scan, post, &output_schema);
        }
        if let Some(join) = node.downcast_ref::<HashJoinExec>() {
            if let Some(j) = IntervalJoin::of(join)? {
                post.reverse();
                return append_join_plan(j, post, &output_schema);
            }
            if crate::window_join::is_aggregate(join.left())
                && crate::window_join::is_aggregate(join.right())
            {
                post.reverse();
                return crate::window_join::plan(join, post, &output_schema, cut);
            }
        }
        if node.name().contains("Join") {
            return Err(StreamSqlError::NotSupported(format!(
                "a materialized view without GROUP BY over a join ({}) is not supported yet \
                 (an append-only view reads one source, or a join of two sources, through \
                 filters and projections)",
                node.name()
            )));
        }
        let stage = stage_of(node).ok_or_else(|| unsupported(node.name()))?;
        post.push(stage);
        node = skip_neutral(only_child(node)?);
    };
    post.reverse();
    let aggregate_schema = top.schema();
    let input_agg = match top.mode() {
        AggregateMode::Single | AggregateMode::SinglePartitioned => top,
        AggregateMode::Final | AggregateMode::FinalPartitioned => {
            let below = skip_neutral(top.input());
            match below.downcast_ref::<AggregateExec>() {
                Some(p) if matches!(p.mode(), AggregateMode::Partial) => p,
                _ => return Err(unsupported("this aggregate plan")),
            }
        }
        _ => return Err(unsupported("this aggregate plan")),
    };
    // DISTINCT and GROUP BY become aggregates too; one level only
    let group_by = input_agg.group_expr();
    if group_by.has_grouping_set() || !group_by.is_single() {
        return Err(unsupported("GROUPING SETS, CUBE or ROLLUP"));
    }
    if group_by.expr().is_empty() {
        return Err(StreamSqlError::NotSupported(
            "a materialized view needs GROUP BY for now (its rows are keyed by the groups)".into(),
        ));
    }
    if input_agg.filter_expr().iter().any(Option::is_some) {
        return Err(unsupported("FILTER clauses on aggregates"));
    }
    for a in input_agg.aggr_expr() {
        let name = a.fun().name().to_ascii_lowercase();
        if !AGGREGATES.contains(&name.as_str()) {
            return Err(unsupported(format!("aggregate {name}")));
        }
        if !a.order_bys().is_empty() {
            return Err(unsupported("ORDER BY inside an aggregate"));
        }
    }
    // pre stages, top down
    let mut pre = Vec::new();
    let mut node = skip_neutral(input_agg.input());
    let scan = loop {
        if let Some(scan) = node.downcast_ref::<SourceScanExec>() {
            break Ok(scan);
        }
        if let Some(join) = node.downcast_ref::<HashJoinExec>() {
            if let Some(j) = IntervalJoin::of(join)? {
                break Err(j);
            }
            let lookup = LookupJoin::of(join)?;
            node = skip_neutral(if lookup.source_left() {
                join.left()
            } else {
                join.right()
            });
            pre.push(Stage::Lookup(Arc::new(lookup)));
            continue;
        }
        if node.name().contains("Join") {
            return Err(StreamSqlError::NotSupported(format!(
                "this join ({}) is not supported: a materialized view may lookup-join its \
                 source with a table on the table's primary key",
                node.name()
            )));
        }
        let stage = stage_of(node).ok_or_else(|| unsupported(node.name()))?;
        pre.push(stage);
        node = skip_neutral(only_child(node)?);
    };
    pre.reverse();
    let (source, scan_projection, window, join) = match scan {
        Ok(scan) => {
            if scan.limit.is_some() {
                return Err(unsupported("LIMIT"));
            }
            (
                scan.source.clone(),
                scan.projection.clone(),
                scan.window.clone(),
                None,
            )
        }
        Err(j) => (j.left.source.clone(), None, None, Some(Arc::new(j))),
    };
    let retract_refusal = crate::changelog::retract_refusal(input_agg)?;
    let group_count = group_by.expr().len();
    let columns = output_columns(&output_schema)?;
    let primary_key = key_columns(
        &post,
        group_count,
        aggregate_schema.fields().len(),
        columns.len(),
    )?;
    Ok(ViewPlan {
        source,
        scan_projection,
        pre,
        group_exprs: group_by.expr().iter().map(|(e, _)| Arc::clone(e)).collect(),
        aggregates: input_agg.aggr_expr().to_vec(),
        aggregate_schema,
        post,
        columns,
        primary_key,
        time: EventTimePlan {
            window,
            ..EventTimePlan::default()
        },
        retract_refusal,
        retractions: false,
        join,
        append: false,
        window_inputs: Vec::new(),
    })
}

/// The plan of a view without an aggregate: `stages` (bottom up) over the
/// source `scan`, appended row by row (`append_op.rs`).
fn append_plan(
    scan: &SourceScanExec,
    stages: Vec<Stage>,
    output_schema: &SchemaRef,
) -> Result<ViewPlan> {
    if scan.window.is_some() {
        return Err(StreamSqlError::NotSupported(
            "a TUMBLE, HOP or SESSION window in a materialized view without GROUP BY is not \
             supported (window the rows in an aggregate: GROUP BY window_start, window_end)"
                .into(),
        ));
    }
    if scan.limit.is_some() {
        return Err(unsupported("LIMIT"));
    }
    appended(
        scan.source.clone(),
        scan.projection.clone(),
        None,
        stages,
        output_schema,
    )
}

/// The plan of a view without an aggregate over a join of two sources:
/// `stages` (bottom up) over the join's output, appended pair by pair
/// (`append_op.rs`: each pair stored under its number among the pairs).
pub(crate) fn append_join_plan(
    join: IntervalJoin,
    stages: Vec<Stage>,
    output_schema: &SchemaRef,
) -> Result<ViewPlan> {
    let source = join.left.source.clone();
    appended(source, None, Some(Arc::new(join)), stages, output_schema)
}

/// What [`append_plan`] and [`append_join_plan`] share: an append-only
/// view of `stages` over `source` (or the join's output).
fn appended(
    source: String,
    scan_projection: Option<Vec<usize>>,
    join: Option<Arc<IntervalJoin>>,
    stages: Vec<Stage>,
    output_schema: &SchemaRef,
) -> Result<ViewPlan> {
    if stages.iter().any(|s| matches!(s, Stage::Lookup(_))) {
        return Err(StreamSqlError::NotSupported(
            "a lookup join in a materialized view without GROUP BY is not supported yet".into(),
        ));
    }
    Ok(ViewPlan {
        source,
        scan_projection,
        pre: stages,
        group_exprs: Vec::new(),
        aggregates: Vec::new(),
        aggregate_schema: Arc::clone(output_schema),
        post: Vec::new(),
        columns: output_columns(output_schema)?,
        primary_key: Vec::new(),
        time: EventTimePlan::default(),
        retract_refusal: None,
        retractions: false,
        join,
        append: true,
        window_inputs: Vec::new(),
    })
}

fn output_columns(schema: &SchemaRef) -> Result<Vec<ColumnDef>> {
    let mut columns: Vec<ColumnDef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let name = eddy_sql::output_names::visible(f.name()).to_string();
        if columns.iter().any(|c| c.name == name) {
            return Err(StreamSqlError::Duplicate("column", name));
        }
        let ty: ColumnType = eddy_sql::session::storable_type(f.data_type())
            .ok_or_else(|| unsupported(format!("a column of type {}", f.data_type())))?;
        columns.push(ColumnDef::new(name, ty, true));
    }
    Ok(columns)
}

/// Traces which output columns are unchanged GROUP BY columns; every
/// group column must reach the output so that a row has a key.
fn key_columns(
    post: &[Stage],
    group_count: usize,
    aggregate_width: usize,
    outputs: usize,
) -> Result<Vec<usize>> {
    // origin[i]: the group column output column i of the current stage is
    let origin = crate::stages::trace_origins(
        (0..aggregate_width)
            .map(|i| (i < group_count).then_some(i))
            .collect(),
        post,
    );
    let mut key = Vec::with_capacity(group_count);
    for g in 0..group_count {
        match origin.iter().position(|o| *o == Some(g)) {
            Some(i) if i < outputs => key.push(i),
            _ => {
                return Err(StreamSqlError::NotSupported(
                    "every GROUP BY expression must be a column of the materialized view (it \
                     is the view's key)"
                        .into(),
                ))
            }
        }
    }
    Ok(key)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
