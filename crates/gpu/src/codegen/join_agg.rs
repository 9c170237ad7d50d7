//! The fused star join + partial aggregation kernel (`eddy_join_preagg`).
//!
//! GpuJoin and GpuPreAgg as two operators make two round trips per chunk:
//! the join's matched row ids come back to the host, the host gathers the
//! joined rows with Arrow `take`, and the aggregation copies them to the
//! device again. This kernel does both in one pass over the fact chunk, as
//! PG-Strom's GpuPreAgg over GpuJoin does: each thread probes every level,
//! and for every combination of matching build rows it reads the build
//! columns the grouping needs straight from device-resident copies of the
//! build sides and adds into the same shared/global group tables as
//! `eddy_preagg`. Nothing per row comes back; the group table is read once
//! at the end.
//!
//! Expressions are compiled over a *virtual schema*: the fact input's
//! columns first (read at `row`), then each level's build columns (read at
//! that level's matched build row `r{level}`, loaded after the probe).
//! Duplicate build keys are handled by looping over their chains, so one
//! fact row can contribute to several groups, as the CPU join does.
//! The kernel keeps the rule of every Eddy kernel: no sync points but the
//! block's own `__syncthreads()` (module doc of [`super::kernels`]).

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;

use super::expr::ExprCompiler;
use super::kernels::{
    acc_functions, chain_next, common_params, compile_group, compile_probe_key, finish,
    group_defines, group_table_params, group_update, indent_block, join_table_params, probe_call,
    probe_helpers, signature, AggSpec, JoinLevelSpec, KernelSource, GROUP_EPILOGUE, GROUP_PROLOGUE,
    GROUP_TABLE_KERNELS, PRELUDE,
};
use super::types::DevType;
use super::Unsupported;

/// The fused kernel's inputs.
#[derive(Debug, Clone)]
pub struct JoinAggKernelSpec {
    /// Virtual schema: fact columns `0..fact_columns`, then each level's
    /// build columns at `build_columns[level]`.
    pub schema: Arc<Schema>,
    /// Number of fact (probe input) columns.
    pub fact_columns: usize,
    /// Virtual-schema indices of each level's build columns.
    pub build_columns: Vec<Range<usize>>,
    /// The fact side's own filter (over fact columns): rows it does not
    /// keep are dropped before they probe, as the CPU filters before it
    /// joins.
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// Levels: probe keys over fact columns, table layouts.
    pub levels: Vec<JoinLevelSpec>,
    /// Group keys over the virtual schema.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Aggregates over the virtual schema.
    pub aggs: Vec<AggSpec>,
}

fn columns_of(e: &Arc<dyn PhysicalExpr>, out: &mut Vec<usize>) {
    let _ = e.apply(|n| {
        if let Some(c) = n.downcast_ref::<Column>() {
            if !out.contains(&c.index()) {
                out.push(c.index());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

impl JoinAggKernelSpec {
    /// The level whose build columns hold virtual column `index`, if any.
    pub fn level_of(&self, index: usize) -> Option<usize> {
        self.build_columns.iter().position(|r| r.contains(&index))
    }

    /// Generates the kernel.
    pub fn generate(&self) -> Result<KernelSource, Unsupported> {
        if self.levels.is_empty() || self.levels.len() != self.build_columns.len() {
            return Err(Unsupported::operator("fused join without levels"));
        }
        let mut cx = ExprCompiler::new(&self.schema);
        for (l, r) in self.build_columns.iter().enumerate() {
            for i in r.clone() {
                cx.set_row_source(i, &format!("r{l}"));
            }
        }
        cx.set_indent(3);
        let keep = match &self.filter {
            Some(f) => {
                let mut cols = Vec::new();
                columns_of(f, &mut cols);
                if cols.iter().any(|c| *c >= self.fact_columns) {
                    return Err(Unsupported::operator("fact filter over a build column"));
                }
                let v = cx.compile(f)?;
                if v.ty != DevType::Bool {
                    return Err(Unsupported::expr("filter is not boolean"));
                }
                Some(if v.null == "false" {
                    v.val
                } else {
                    format!("{} && !{}", v.val, v.null)
                })
            }
            None => None,
        };
        let filter_len = cx.compiled().body.len();
        let mut probe_keys = Vec::new();
        for lv in &self.levels {
            let mut cols = Vec::new();
            columns_of(&lv.probe_key, &mut cols);
            if cols.iter().any(|c| *c >= self.fact_columns) {
                return Err(Unsupported::operator(
                    "probe key from a build side (snowflake)",
                ));
            }
            probe_keys.push(compile_probe_key(&mut cx, &lv.probe_key)?);
        }
        let probe_len = cx.compiled().body.len();
        // Build columns are loaded once, at the top of the innermost loop,
        // before any conditional code (CASE) could first use them inside
        // a branch.
        let mut used = Vec::new();
        for e in self
            .keys
            .iter()
            .chain(self.aggs.iter().filter_map(|a| a.arg.as_ref()))
        {
            columns_of(e, &mut used);
        }
        used.sort_unstable();
        for i in used {
            if self.level_of(i).is_some() {
                cx.column(i)?;
            }
        }
        let g = compile_group(&mut cx, &self.keys, &self.aggs)?;
        let c = cx.finish();
        if c.dict_params.iter().any(|d| d.column >= self.fact_columns) {
            return Err(Unsupported::ty(
                "per-batch dictionary predicate on a build column",
            ));
        }
        let (mut params, mut decl) = common_params(&c);
        join_table_params(&self.levels, &mut params, &mut decl);
        group_table_params(&mut params, &mut decl);

        let mut src = String::from(PRELUDE);
        src.push_str(&group_defines(&g));
        src.push_str(&c.globals);
        src.push_str(&acc_functions(&g.slots));
        src.push_str(&probe_helpers(&self.levels));
        src.push_str("\n// Star join fused with partial GROUP BY: every level probed by the\n");
        src.push_str("// same thread, each match added into the block's shared table (global\n");
        src.push_str("// table behind it). Only __syncthreads(): no grid-wide sync.\n");
        src.push_str(&signature("eddy_join_preagg", &decl));
        src.push_str("{\n");
        src.push_str(GROUP_PROLOGUE);
        src.push_str("  const long long stride = (long long)gridDim.x * blockDim.x;\n");
        src.push_str("  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < nrows; row += stride) {\n");
        src.push_str(&c.loads);
        let (head, group_body) = c.body.split_at(probe_len.min(c.body.len()));
        let (filter_body, probe_body) = head.split_at(filter_len.min(head.len()));
        src.push_str(filter_body);
        if let Some(keep) = &keep {
            // Nothing below is evaluated for a dropped row (`WHERE b <> 0`
            // guards `a / b` in an aggregate, as on the CPU).
            let _ = writeln!(src, "      if (!({keep})) continue;");
        }
        src.push_str(probe_body);
        // One nested loop per level over its matching build rows (a direct
        // level, or a hash level with unique keys, loops at most once).
        let mut depth = 3;
        for (l, (lv, k)) in self.levels.iter().zip(&probe_keys).enumerate() {
            let pad = "  ".repeat(depth);
            let _ = writeln!(src, "{pad}if (!({})) {{", k.null);
            let _ = writeln!(
                src,
                "{pad}for (int r{l} = {}; r{l} >= 0; {}) {{",
                probe_call(l, lv, &k.val),
                chain_next(l, lv)
            );
            depth += 1;
        }
        src.push_str(&indent_block(group_body, depth.saturating_sub(3)));
        src.push_str(&indent_block(&group_update(&g), depth.saturating_sub(3)));
        for _ in 0..self.levels.len() {
            depth -= 1;
            let pad = "  ".repeat(depth);
            let _ = writeln!(src, "{pad}}}\n{pad}}}");
        }
        src.push_str("  }\n");
        src.push_str(GROUP_EPILOGUE);
        src.push_str(GROUP_TABLE_KERNELS);
        Ok(finish(
            "eddy_join_preagg",
            src,
            params,
            c.columns.into_values().collect(),
            c.dict_params,
            vec![],
            g.slots,
            g.shared_slots,
        ))
    }
}
