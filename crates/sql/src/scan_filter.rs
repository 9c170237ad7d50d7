//! `ScanFilter`: the filters Eddy's scan applies itself, exactly, so that
//! DataFusion drops its `FilterExec` for them.
//!
//! DataFusion evaluates `a BETWEEN 4 AND 6 AND b BETWEEN 26 AND 35` as four
//! comparison kernels joined by a short-circuiting AND that gathers and
//! scatters the rows still selected: ~10 ns a row on SSB q1.2's 6 M
//! lineorder rows. Eddy compares integer columns to constants in one tight
//! loop per term that packs 64 results into a word (vectorised by the
//! compiler), ANDs the words, and filters the batch once, on the scan's own
//! thread.
//!
//! Supported, and so reported `Exact` to DataFusion: conjunctions of
//! `column op literal` (`=`, `<>`, `<`, `<=`, `>`, `>=`, either side) and
//! `column BETWEEN literal AND literal`, over smallint, int, bigint, date,
//! timestamp and decimal columns, where the literal already has the
//! column's exact Arrow type (DataFusion's coercion puts it there whenever
//! the comparison is exact; anything else, such as a float literal against
//! an integer column, stays with DataFusion). Floats are left out because
//! PostgreSQL orders NaN above every number and plain comparisons do not.
//!
//! Invariant: a row passes only if every term is TRUE; NULL fails, as in a
//! SQL WHERE clause.

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int16Array, Int32Array,
    Int64Array, RecordBatch, TimestampMicrosecondArray,
};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use std::sync::Arc;

use crate::join_filter::JoinKeyFilter;

/// Comparison of a column with a constant, column on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

/// One `column op literal` term; `column` indexes the table's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub column: usize,
    op: Op,
    literal: ScalarValue,
}

/// A conjunction of terms applied by the scan.
#[derive(Debug, Clone, Default)]
pub struct ScanFilter {
    terms: Vec<Term>,
}

impl ScanFilter {
    /// The terms of `expr` if the scan can apply all of it exactly.
    pub fn terms_of(expr: &Expr, schema: &Schema) -> Option<Vec<Term>> {
        let mut out = Vec::new();
        let mut all_supported = true;
        let all_comparisons = for_each_comparison(expr, &mut |col, op, lit| match Op::of(op)
            .and_then(|op| term(col, op, lit, schema))
        {
            Some(t) => out.push(t),
            None => all_supported = false,
        });
        (all_comparisons && all_supported).then_some(out)
    }

    /// The terms of every filter the scan supports (those `terms_of`
    /// accepts, so exactly the ones reported `Exact`).
    pub fn from_filters(filters: &[Expr], schema: &Schema) -> ScanFilter {
        let terms = filters
            .iter()
            .filter_map(|f| ScanFilter::terms_of(f, schema))
            .flatten()
            .collect();
        ScanFilter { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Mask of term `i` alone.
    fn term_mask_at(
        &self,
        i: usize,
        batch: &RecordBatch,
        position: &dyn Fn(usize) -> Option<usize>,
    ) -> Option<BooleanBuffer> {
        let t = self.terms.get(i)?;
        let array = position(t.column).and_then(|c| batch.columns().get(c))?;
        term_mask(array, t.op, &t.literal)
    }

    /// Keeps the indices in `selection` whose row passes term `i`.
    fn term_retain(
        &self,
        i: usize,
        batch: &RecordBatch,
        position: &dyn Fn(usize) -> Option<usize>,
        selection: &mut Vec<u32>,
    ) -> Option<()> {
        let t = self.terms.get(i)?;
        let array = position(t.column).and_then(|c| batch.columns().get(c))?;
        let op = t.op;
        macro_rules! typed {
            ($array_type:ty, $x:expr) => {{
                let a = array.as_any().downcast_ref::<$array_type>()?;
                let (values, valid, x) = (a.values(), a.nulls(), *$x);
                selection.retain(|&r| {
                    let r = r as usize;
                    valid.is_none_or(|n| n.is_valid(r))
                        && values.get(r).is_some_and(|v| holds(*v, op, x))
                });
            }};
        }
        match &t.literal {
            ScalarValue::Int16(Some(x)) => typed!(Int16Array, x),
            ScalarValue::Int32(Some(x)) => typed!(Int32Array, x),
            ScalarValue::Int64(Some(x)) => typed!(Int64Array, x),
            ScalarValue::Date32(Some(x)) => typed!(Date32Array, x),
            ScalarValue::Decimal128(Some(x), _, _) => typed!(Decimal128Array, x),
            ScalarValue::TimestampMicrosecond(Some(x), None) => {
                typed!(TimestampMicrosecondArray, x)
            }
            _ => return None,
        }
        Some(())
    }
}

/// One row test a scan applies: a term of its own filter, or a join's
/// key bitmap (see `join_filter`).
#[derive(Clone)]
enum RowTest {
    Term(usize),
    JoinKeys(usize, Arc<JoinKeyFilter>),
}

/// Everything one scan filters on, most selective first: the first test
/// runs over every row as a packed pass, the others only over the rows
/// still selected, and the survivors are gathered once. The order is
/// measured on the first batch (each test's pass rate on its own).
pub struct RowFilters {
    own: Arc<ScanFilter>,
    tests: Vec<RowTest>,
    ordered: bool,
}

impl RowFilters {
    /// The scan's own terms plus the join filters that are published.
    pub fn new(own: Arc<ScanFilter>, joins: Vec<(usize, Arc<JoinKeyFilter>)>) -> RowFilters {
        let mut tests: Vec<RowTest> = (0..own.terms.len()).map(RowTest::Term).collect();
        tests.extend(
            joins
                .into_iter()
                .filter(|(_, f)| f.is_published())
                .map(|(c, f)| RowTest::JoinKeys(c, f)),
        );
        RowFilters {
            own,
            tests,
            ordered: false,
        }
    }

    /// Table columns the tests read.
    pub fn columns(&self) -> Vec<usize> {
        self.tests
            .iter()
            .filter_map(|t| match t {
                RowTest::Term(i) => self.own.terms.get(*i).map(|t| t.column),
                RowTest::JoinKeys(c, _) => Some(*c),
            })
            .collect()
    }

    fn mask_of(
        &self,
        test: &RowTest,
        batch: &RecordBatch,
        position: &dyn Fn(usize) -> Option<usize>,
    ) -> Option<BooleanBuffer> {
        match test {
            RowTest::Term(i) => self.own.term_mask_at(*i, batch, position),
            RowTest::JoinKeys(c, f) => {
                let keys = position(*c).and_then(|i| batch.columns().get(i))?;
                f.mask(keys)
            }
        }
    }

    /// The rows of `batch` that pass every test. An own term that cannot
    /// be evaluated is an error (DataFusion relies on it); a join filter
    /// that cannot is skipped (the join still checks).
    pub fn apply(
        &mut self,
        batch: RecordBatch,
        position: impl Fn(usize) -> Option<usize>,
    ) -> datafusion::error::Result<RecordBatch> {
        if self.tests.is_empty() || batch.num_rows() == 0 {
            return Ok(batch);
        }
        let missing = |t: &RowTest| match t {
            RowTest::Term(i) => Err(datafusion::error::DataFusionError::Internal(format!(
                "scan filter term {i} cannot be evaluated on this batch"
            ))),
            RowTest::JoinKeys(..) => Ok(()),
        };
        if !self.ordered {
            let mut rated = Vec::with_capacity(self.tests.len());
            for t in self.tests.drain(..) {
                let m = match &t {
                    RowTest::Term(i) => self.own.term_mask_at(*i, &batch, &position),
                    RowTest::JoinKeys(c, f) => position(*c)
                        .and_then(|i| batch.columns().get(i))
                        .and_then(|k| f.mask(k)),
                };
                let passed = m.as_ref().map(|m| m.count_set_bits()).unwrap_or(usize::MAX);
                rated.push((passed, t, m));
            }
            rated.sort_by_key(|r| r.0);
            let mut mask: Option<BooleanBuffer> = None;
            for (_, t, m) in rated {
                match m {
                    Some(m) => {
                        mask = Some(match mask {
                            None => m,
                            Some(acc) => &acc & &m,
                        })
                    }
                    None => missing(&t)?,
                }
                self.tests.push(t);
            }
            self.ordered = true;
            return filter_batch(batch, mask);
        }
        let first = &self.tests[0];
        let Some(mask) = self.mask_of(first, &batch, &position) else {
            // Tests whose mask cannot be computed were rated last on the
            // first batch (own terms among them fail there), so the first
            // test has none only when every test is such a join filter.
            missing(first)?;
            return Ok(batch);
        };
        if self.tests.len() == 1 {
            return filter_batch(batch, Some(mask));
        }
        let mut selection: Vec<u32> = mask.set_indices().map(|i| i as u32).collect();
        for t in &self.tests[1..] {
            if selection.is_empty() {
                break;
            }
            match t {
                RowTest::Term(i) => {
                    if self
                        .own
                        .term_retain(*i, &batch, &position, &mut selection)
                        .is_none()
                    {
                        missing(t)?;
                    }
                }
                RowTest::JoinKeys(c, f) => {
                    if let Some(k) = position(*c).and_then(|i| batch.columns().get(i)) {
                        f.retain(k, &mut selection);
                    }
                }
            }
        }
        if selection.len() == batch.num_rows() {
            return Ok(batch);
        }
        let indices = datafusion::arrow::array::UInt32Array::from(selection);
        Ok(datafusion::arrow::compute::take_record_batch(
            &batch, &indices,
        )?)
    }
}

/// Keeps the rows of `batch` set in `mask` (`None`: all of them).
pub fn filter_batch(
    batch: RecordBatch,
    mask: Option<BooleanBuffer>,
) -> datafusion::error::Result<RecordBatch> {
    let Some(mask) = mask else {
        return Ok(batch);
    };
    let selected = mask.count_set_bits();
    if selected == batch.num_rows() {
        return Ok(batch);
    }
    if selected == 0 {
        return Ok(batch.slice(0, 0));
    }
    Ok(filter_record_batch(&batch, &BooleanArray::new(mask, None))?)
}

/// Calls `each(column, op, literal)` for every `column op literal`
/// comparison of the conjunction `expr` (literal-first comparisons are
/// mirrored; `BETWEEN` gives `>=` and `<=`); every conjunct is visited.
/// Returns whether every conjunct was such a comparison. Shared with the
/// row-group pruning in `provider`.
pub fn for_each_comparison<'e>(
    expr: &'e Expr,
    each: &mut dyn FnMut(&'e str, Operator, &'e ScalarValue),
) -> bool {
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            let l = for_each_comparison(left, each);
            let r = for_each_comparison(right, each);
            l && r
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(l, _)) => each(&c.name, *op, l),
                (Expr::Literal(l, _), Expr::Column(c)) => match op.swap() {
                    Some(op) => each(&c.name, op, l),
                    None => return false,
                },
                _ => return false,
            }
            true
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => match (expr.as_ref(), low.as_ref(), high.as_ref()) {
            (Expr::Column(c), Expr::Literal(lo, _), Expr::Literal(hi, _)) => {
                each(&c.name, Operator::GtEq, lo);
                each(&c.name, Operator::LtEq, hi);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

impl Op {
    fn of(op: Operator) -> Option<Op> {
        Some(match op {
            Operator::Eq => Op::Eq,
            Operator::NotEq => Op::NotEq,
            Operator::Lt => Op::Lt,
            Operator::LtEq => Op::LtEq,
            Operator::Gt => Op::Gt,
            Operator::GtEq => Op::GtEq,
            _ => return None,
        })
    }
}

fn term(name: &str, op: Op, literal: &ScalarValue, schema: &Schema) -> Option<Term> {
    let (column, field) = schema.column_with_name(name)?;
    let supported = matches!(
        field.data_type(),
        DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Date32
            | DataType::Decimal128(..)
            | DataType::Timestamp(TimeUnit::Microsecond, None)
    );
    if !supported || literal.is_null() || &literal.data_type() != field.data_type() {
        return None;
    }
    Some(Term {
        column,
        op,
        literal: literal.clone(),
    })
}

/// Packs `pred(v)` for every value into a bitmap, 64 values a word.
fn pack<T: Copy>(values: &[T], pred: impl Fn(T) -> bool) -> BooleanBuffer {
    let mut words: Vec<u64> = Vec::with_capacity(values.len().div_ceil(64));
    for chunk in values.chunks(64) {
        let mut w = 0u64;
        for (j, v) in chunk.iter().enumerate() {
            w |= (pred(*v) as u64) << j;
        }
        words.push(w);
    }
    BooleanBuffer::new(Buffer::from_vec(words), 0, values.len())
}

#[inline]
fn holds<T: PartialOrd>(v: T, op: Op, x: T) -> bool {
    match op {
        Op::Eq => v == x,
        Op::NotEq => v != x,
        Op::Lt => v < x,
        Op::LtEq => v <= x,
        Op::Gt => v > x,
        Op::GtEq => v >= x,
    }
}

fn compare<T: Copy + PartialOrd>(values: &[T], op: Op, x: T) -> BooleanBuffer {
    match op {
        Op::Eq => pack(values, |v| v == x),
        Op::NotEq => pack(values, |v| v != x),
        Op::Lt => pack(values, |v| v < x),
        Op::LtEq => pack(values, |v| v <= x),
        Op::Gt => pack(values, |v| v > x),
        Op::GtEq => pack(values, |v| v >= x),
    }
}

/// The rows of `array` for which `array op literal` is TRUE.
fn term_mask(array: &ArrayRef, op: Op, literal: &ScalarValue) -> Option<BooleanBuffer> {
    macro_rules! typed {
        ($array_type:ty, $x:expr) => {{
            let a = array.as_any().downcast_ref::<$array_type>()?;
            compare(a.values(), op, *$x)
        }};
    }
    let mask = match literal {
        ScalarValue::Int16(Some(x)) => typed!(Int16Array, x),
        ScalarValue::Int32(Some(x)) => typed!(Int32Array, x),
        ScalarValue::Int64(Some(x)) => typed!(Int64Array, x),
        ScalarValue::Date32(Some(x)) => typed!(Date32Array, x),
        ScalarValue::Decimal128(Some(x), _, _) => typed!(Decimal128Array, x),
        ScalarValue::TimestampMicrosecond(Some(x), None) => typed!(TimestampMicrosecondArray, x),
        _ => return None,
    };
    Some(match array.nulls() {
        Some(valid) => &mask & valid.inner(),
        None => mask,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
        ])
    }

    #[test]
    fn takes_only_exact_integer_comparisons() {
        let s = schema();
        assert!(ScanFilter::terms_of(&col("a").between(lit(4i32), lit(6i32)), &s).is_some());
        assert!(ScanFilter::terms_of(&lit(3i32).lt(col("a")), &s).is_some());
        // literal of another type: DataFusion keeps it
        assert!(ScanFilter::terms_of(&col("a").gt(lit(4.5f64)), &s).is_none());
        assert!(ScanFilter::terms_of(&col("f").gt(lit(1.0f64)), &s).is_none());
        assert!(ScanFilter::terms_of(&col("s").eq(lit("x")), &s).is_none());
        assert!(ScanFilter::terms_of(&col("a").not_between(lit(1i32), lit(2i32)), &s).is_none());
        // one unsupported conjunct makes the whole filter DataFusion's
        let mixed = col("a").gt(lit(1i32)).and(col("s").eq(lit("x")));
        assert!(ScanFilter::terms_of(&mixed, &s).is_none());
    }

    #[test]
    fn matches_sql_semantics_with_nulls_and_word_edges() {
        let s = schema();
        let values: Vec<Option<i32>> = (0..200)
            .map(|i| if i % 7 == 0 { None } else { Some(i % 13) })
            .collect();
        let a: ArrayRef = Arc::new(Int32Array::from(values.clone()));
        let f: ArrayRef = Arc::new(datafusion::arrow::array::Float64Array::from(vec![0.0; 200]));
        let st: ArrayRef = Arc::new(datafusion::arrow::array::StringArray::from(vec!["x"; 200]));
        let batch = RecordBatch::try_new(Arc::new(s.clone()), vec![a, f, st]).unwrap();
        type Model = Box<dyn Fn(i32) -> bool>;
        let cases: Vec<(Expr, Model)> = vec![
            (
                col("a").between(lit(4i32), lit(6i32)),
                Box::new(|v| (4..=6).contains(&v)),
            ),
            (col("a").not_eq(lit(3i32)), Box::new(|v| v != 3)),
            (lit(5i32).gt_eq(col("a")), Box::new(|v| v <= 5)),
            (
                col("a").gt(lit(2i32)).and(col("a").lt(lit(9i32))),
                Box::new(|v| v > 2 && v < 9),
            ),
        ];
        for (expr, model) in cases {
            let filter = ScanFilter::from_filters(std::slice::from_ref(&expr), &s);
            assert!(!filter.is_empty(), "{expr}");
            // first batch: all masks ANDed; later batches: the first term
            // packed, the rest on a selection; both give the model's rows
            let mut ordered = RowFilters::new(Arc::new(filter.clone()), Vec::new());
            let out = ordered.apply(batch.clone(), Some).unwrap();
            let second = ordered.apply(batch.clone(), Some).unwrap();
            assert_eq!(second, out, "{expr}");
            let got: Vec<i32> = out
                .column(0)
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap()
                .iter()
                .map(|v| v.unwrap())
                .collect();
            let want: Vec<i32> = values
                .iter()
                .flatten()
                .copied()
                .filter(|v| model(*v))
                .collect();
            assert_eq!(got, want, "{expr}");
        }
    }
}
