//! Physical expressions to CUDA C statements with SQL three-valued logic.
//!
//! Every sub-expression becomes a pair of registers: the value and a NULL
//! flag. Column NULL flags come from the Arrow validity bitmap; operators
//! propagate them (`NULL + 1` is NULL) and AND/OR follow SQL's truth tables
//! (`FALSE AND NULL` is FALSE, `TRUE OR NULL` is TRUE). A filter keeps a row
//! only when its predicate is TRUE and not NULL, as DataFusion's does.
//!
//! Integer arithmetic wraps like DataFusion's (computed in unsigned
//! arithmetic, so there is no undefined behaviour in C); Eddy's checked
//! forms (`eddy_int_add/sub/mul`, `eddy_float_add/sub/mul/div`) and division
//! or remainder by zero and overflowing division set the kernel's error
//! flag, and the host then runs the CPU plan, which raises the same error
//! the user would have seen without a GPU.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, Literal,
    NegativeExpr, NotExpr,
};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};

use super::dict::{evaluate_on_dictionary, membership, single_dict_column};
use super::types::DevType;
use super::Unsupported;

/// A compiled sub-expression: C names of its value and NULL flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// C expression (usually a register name) holding the value.
    pub val: String,
    /// C boolean expression: true when the value is NULL (`"false"` when it
    /// never is).
    pub null: String,
    /// Device type of the value.
    pub ty: DevType,
}

/// An input column a kernel reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnUse {
    /// Index in the input schema (also the parameter suffix: `col3`).
    pub index: usize,
    /// Field name, for comments in the source.
    pub name: String,
    /// Device layout.
    pub ty: DevType,
    /// Whether the kernel takes a validity bitmap for it.
    pub nullable: bool,
}

/// A string predicate whose code set is computed on the host for each batch
/// (the dictionary is only known at run time) and passed as two bitmaps.
#[derive(Debug, Clone)]
pub struct DictParam {
    /// Parameter suffix: `dset{id}` / `dnull{id}`.
    pub id: usize,
    /// The dictionary column.
    pub column: usize,
    /// The predicate, evaluated on the dictionary with DataFusion.
    pub predicate: Arc<dyn PhysicalExpr>,
}

/// The result of compiling expressions for one kernel.
#[derive(Debug, Clone, Default)]
pub struct CompiledExpr {
    /// File-scope declarations (constant code bitmaps).
    pub globals: String,
    /// Column loads, emitted once per row before `body`.
    pub loads: String,
    /// Statements computing the expressions.
    pub body: String,
    /// Columns read, by input index.
    pub columns: BTreeMap<usize, ColumnUse>,
    /// Per-batch dictionary code sets.
    pub dict_params: Vec<DictParam>,
}

/// Translates physical expressions over one input schema into CUDA C.
#[derive(Debug)]
pub struct ExprCompiler<'a> {
    schema: &'a Schema,
    /// Dictionaries known when the kernel is generated (a table-level
    /// dictionary): their code sets are baked into the source.
    static_dicts: HashMap<usize, ArrayRef>,
    out: CompiledExpr,
    tmp: usize,
    indent: usize,
    /// Columns read at another row than the kernel's `row` (a fused join's
    /// build-side columns, read at the matched build row `r{level}`). Their
    /// loads go into `body` where first used, not into `loads`, because
    /// that row is only known after the probe.
    row_sources: HashMap<usize, String>,
}

const FLAG_ERR: &str = "eddy_set_error(err)";

impl<'a> ExprCompiler<'a> {
    /// A compiler over `schema`.
    pub fn new(schema: &'a Schema) -> Self {
        ExprCompiler {
            schema,
            static_dicts: HashMap::new(),
            out: CompiledExpr::default(),
            tmp: 0,
            indent: 2,
            row_sources: HashMap::new(),
        }
    }

    /// Reads column `index` at row `row_expr` (a C expression) instead of
    /// `row`; its load is emitted into `body` at first use. A caller that
    /// compiles conditional code (CASE) must load such columns first, at
    /// the top level, with [`ExprCompiler::column`].
    pub fn set_row_source(&mut self, index: usize, row_expr: &str) {
        self.row_sources.insert(index, row_expr.to_string());
    }

    /// Declares the dictionary of column `index` as known at generation time.
    pub fn with_static_dictionary(mut self, index: usize, values: ArrayRef) -> Self {
        self.static_dicts.insert(index, values);
        self
    }

    /// Sets the indentation (in levels of two spaces) of emitted statements.
    pub fn set_indent(&mut self, indent: usize) {
        self.indent = indent;
    }

    /// The compiled text so far.
    pub fn finish(self) -> CompiledExpr {
        self.out
    }

    /// Read-only view of what has been compiled so far.
    pub fn compiled(&self) -> &CompiledExpr {
        &self.out
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.body.push_str("  ");
        }
        self.out.body.push_str(s);
        self.out.body.push('\n');
    }

    fn fresh(&mut self) -> String {
        let t = format!("t{}", self.tmp);
        self.tmp += 1;
        t
    }

    /// Declares `T name = val; bool name_n = null;` and returns the value.
    fn bind(&mut self, ty: DevType, val: String, null: String) -> Value {
        let t = self.fresh();
        let null = if null == "false" || null == "true" {
            null
        } else {
            self.line(&format!("const bool {t}_n = {null};"));
            format!("{t}_n")
        };
        self.line(&format!("const {} {t} = {val};", ty.c_type()));
        Value { val: t, null, ty }
    }

    /// Ensures column `index` is loaded and returns its registers.
    pub fn column(&mut self, index: usize) -> Result<Value, Unsupported> {
        let field = self
            .schema
            .fields()
            .get(index)
            .ok_or_else(|| Unsupported::expr(format!("column index {index} out of range")))?;
        let ty = DevType::of(field.data_type())?;
        let nullable = field.is_nullable();
        if !self.out.columns.contains_key(&index) {
            let v = format!("c{index}");
            if let Some(row) = self.row_sources.get(&index).cloned() {
                match ty {
                    DevType::Bool => {
                        self.line(&format!("const bool {v} = eddy_bit(col{index}, {row});"))
                    }
                    _ => self.line(&format!("const {} {v} = col{index}[{row}];", ty.c_type())),
                }
                if nullable {
                    self.line(&format!(
                        "const bool {v}_n = eddy_is_null(valid{index}, {row});"
                    ));
                }
            } else {
                let load = match ty {
                    DevType::Bool => format!("    const bool {v} = eddy_bit(col{index}, row);\n"),
                    _ => format!("    const {} {v} = col{index}[row];\n", ty.c_type()),
                };
                let _ = write!(self.out.loads, "{load}");
                if nullable {
                    let _ = writeln!(
                        self.out.loads,
                        "    const bool {v}_n = eddy_is_null(valid{index}, row);"
                    );
                }
            }
            self.out.columns.insert(
                index,
                ColumnUse {
                    index,
                    name: field.name().clone(),
                    ty,
                    nullable,
                },
            );
        }
        let null = if nullable {
            format!("c{index}_n")
        } else {
            "false".into()
        };
        Ok(Value {
            val: format!("c{index}"),
            null,
            ty,
        })
    }

    /// Compiles `expr`, appending statements, and returns its registers.
    pub fn compile(&mut self, expr: &Arc<dyn PhysicalExpr>) -> Result<Value, Unsupported> {
        if let Some(c) = expr.downcast_ref::<Column>() {
            let v = self.column(c.index())?;
            if matches!(v.ty, DevType::DictCode { .. }) {
                return Err(Unsupported::expr(format!(
                    "dictionary column {} used outside a string predicate",
                    c.name()
                )));
            }
            return Ok(v);
        }
        if let Some(col) = single_dict_column(expr, self.schema) {
            return self.dict_predicate(expr, col);
        }
        if let Some(l) = expr.downcast_ref::<Literal>() {
            return literal(l.value());
        }
        if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
            return self.binary(expr, b);
        }
        if let Some(n) = expr.downcast_ref::<NotExpr>() {
            let a = self.compile(n.arg())?;
            if a.ty != DevType::Bool {
                return Err(Unsupported::expr(format!("NOT of non-boolean {}", n.arg())));
            }
            return Ok(self.bind(DevType::Bool, format!("!{}", a.val), a.null));
        }
        if let Some(n) = expr.downcast_ref::<IsNullExpr>() {
            let a = self.compile(n.arg())?;
            return Ok(self.bind(DevType::Bool, format!("({})", a.null), "false".into()));
        }
        if let Some(n) = expr.downcast_ref::<IsNotNullExpr>() {
            let a = self.compile(n.arg())?;
            return Ok(self.bind(DevType::Bool, format!("!({})", a.null), "false".into()));
        }
        if let Some(n) = expr.downcast_ref::<NegativeExpr>() {
            let a = self.compile(n.arg())?;
            let val = if a.ty.is_float() {
                format!("-{}", a.val)
            } else if a.ty.is_integer()
                && !a.ty.is_unsigned()
                && !matches!(a.ty, DevType::DictCode { .. } | DevType::Date32)
            {
                format!(
                    "({})(0ULL - (unsigned long long)({}))",
                    a.ty.c_type(),
                    a.val
                )
            } else {
                return Err(Unsupported::expr(format!("negation of {:?}", a.ty)));
            };
            return Ok(self.bind(a.ty, val, a.null));
        }
        if let Some(i) = expr.downcast_ref::<InListExpr>() {
            return self.in_list(i);
        }
        if let Some(c) = expr.downcast_ref::<CaseExpr>() {
            return self.case(expr, c);
        }
        if let Some(c) = expr.downcast_ref::<CastExpr>() {
            return self.cast(c);
        }
        if let Some(f) = expr.downcast_ref::<ScalarFunctionExpr>() {
            if let Some(op) = checked_int_op(f.name()) {
                return self.checked_int(op, f.args());
            }
            if let Some(op) = checked_float_op(f.name()) {
                return self.checked_float(op, f.args());
            }
        }
        Err(Unsupported::expr(format!("expression {expr}")))
    }

    /// Eddy's checked integer arithmetic (`eddy_int_add/sub/mul`, which
    /// Eddy's SQL layer plans for `+ - *` on integers so that overflow is
    /// 22003 instead of a wrapped number): computed like the wrapping
    /// form, with an overflow test that raises the kernel's error flag, so
    /// the host runs the CPU plan and the user sees the same error.
    fn checked_int(
        &mut self,
        op: Operator,
        args: &[Arc<dyn PhysicalExpr>],
    ) -> Result<Value, Unsupported> {
        let (l, r) = self.checked_operands(op, args, |t| {
            matches!(t, DevType::I16 | DevType::I32 | DevType::I64)
        })?;
        let t = l.ty.c_type();
        let null = or_null(&l.null, &r.null);
        let d = self.fresh();
        let c = match op {
            Operator::Plus => "+",
            Operator::Minus => "-",
            _ => "*",
        };
        let (a, b) = (&l.val, &r.val);
        let overflow = if l.ty == DevType::I64 {
            // the wrapped result, then the sign rules of two's complement;
            // a product is checked through its high 64 bits
            self.line(&format!(
                "int64_t {d}w = (int64_t)((unsigned long long)({a}) {c} (unsigned long long)({b}));"
            ));
            match op {
                Operator::Plus => format!("((({a}) ^ {d}w) & (({b}) ^ {d}w)) < 0"),
                Operator::Minus => format!("((({a}) ^ ({b})) & (({a}) ^ {d}w)) < 0"),
                _ => format!("__mul64hi({a}, {b}) != ({d}w >> 63)"),
            }
        } else {
            // narrower types: exact in 64 bits, then a range check
            self.line(&format!(
                "int64_t {d}w = (int64_t)({a}) {c} (int64_t)({b});"
            ));
            let bits = if l.ty == DevType::I16 { 15 } else { 31 };
            format!("{d}w < -(1LL << {bits}) || {d}w >= (1LL << {bits})")
        };
        self.line(&format!("{t} {d} = 0;"));
        self.line(&format!(
            "if (!({null})) {{ if ({overflow}) {{ {FLAG_ERR}; }} else {{ {d} = ({t}){d}w; }} }}"
        ));
        Ok(Value {
            val: d,
            null,
            ty: l.ty,
        })
    }

    /// The two operands of a checked function, compiled; both of one type
    /// that `accept` takes, or the expression stays on the CPU.
    fn checked_operands(
        &mut self,
        op: Operator,
        args: &[Arc<dyn PhysicalExpr>],
        accept: fn(DevType) -> bool,
    ) -> Result<(Value, Value), Unsupported> {
        let [left, right] = args else {
            return Err(Unsupported::expr(
                "checked arithmetic without two arguments",
            ));
        };
        let l = self.compile(left)?;
        let r = self.compile(right)?;
        if l.ty != r.ty || !accept(l.ty) {
            return Err(Unsupported::ty(format!(
                "checked {op} on {:?} and {:?}",
                l.ty, r.ty
            )));
        }
        Ok((l, r))
    }

    /// Eddy's float operators (`eddy_float_add/sub/mul/div`, planned for
    /// `+ - * /` on real and double precision so that overflow, underflow
    /// and division by zero are errors as in PostgreSQL): computed in the
    /// operands' type, with PostgreSQL's tests raising the kernel's error
    /// flag so the host runs the CPU plan and the user sees the error.
    /// Finiteness is tested by comparison with the type's largest value
    /// (false for NaN and both infinities), which needs no math library.
    fn checked_float(
        &mut self,
        op: Operator,
        args: &[Arc<dyn PhysicalExpr>],
    ) -> Result<Value, Unsupported> {
        let (l, r) = self.checked_operands(op, args, DevType::is_float)?;
        let t = l.ty.c_type();
        let max = if l.ty == DevType::F32 {
            "3.40282347e38f"
        } else {
            "1.7976931348623157e308"
        };
        let finite = |x: &str| format!("(({x}) >= -{max} && ({x}) <= {max})");
        let infinite = |x: &str| format!("(({x}) > {max} || ({x}) < -{max})");
        let null = or_null(&l.null, &r.null);
        let d = self.fresh();
        let (a, b) = (l.val.as_str(), r.val.as_str());
        let (c, error) = match op {
            Operator::Plus | Operator::Minus => {
                let c = if op == Operator::Plus { "+" } else { "-" };
                let e = format!("{} && {} && {}", infinite(&d), finite(a), finite(b));
                (c, e)
            }
            Operator::Multiply => {
                let e = format!(
                    "({} && {} && {}) || ({d} == 0 && ({a}) != 0 && ({b}) != 0)",
                    infinite(&d),
                    finite(a),
                    finite(b)
                );
                ("*", e)
            }
            _ => {
                let e = format!(
                    "({} && {}) || ({d} == 0 && ({a}) != 0 && {})",
                    infinite(&d),
                    finite(a),
                    finite(b)
                );
                ("/", e)
            }
        };
        // a zero divisor is an error unless the dividend is NaN (a != a)
        let zero_divisor = if op == Operator::Divide {
            format!("({b}) == 0 && ({a}) == ({a})")
        } else {
            "false".into()
        };
        self.line(&format!("{t} {d} = 0;"));
        self.line(&format!(
            "if (!({null})) {{ if ({zero_divisor}) {{ {FLAG_ERR}; }} else {{ {d} = ({a}) {c} ({b}); if ({error}) {{ {FLAG_ERR}; }} }} }}"
        ));
        Ok(Value {
            val: d,
            null,
            ty: l.ty,
        })
    }

    fn dict_predicate(
        &mut self,
        expr: &Arc<dyn PhysicalExpr>,
        col: usize,
    ) -> Result<Value, Unsupported> {
        let code = self.column(col)?;
        if let Some(values) = self.static_dicts.get(&col).cloned() {
            let set = evaluate_on_dictionary(expr, self.schema, col, &values).map_err(|e| {
                Unsupported::expr(format!("evaluating {expr} on the dictionary: {e}"))
            })?;
            let n = values.len();
            let t = self.member_expr(&code.val, &set.true_codes(), n);
            let nn = self.member_expr(&code.val, &set.null_codes(), n);
            let (val, null) = if code.null == "false" {
                (t, nn)
            } else {
                match set.null_row {
                    Some(b) => {
                        let null = if nn == "false" {
                            nn
                        } else {
                            format!("(!{} && {nn})", code.null)
                        };
                        (format!("({} ? {b} : {t})", code.null), null)
                    }
                    None => (format!("(!{} && {t})", code.null), or_null(&code.null, &nn)),
                }
            };
            return Ok(self.bind(DevType::Bool, val, null));
        }
        // Dictionary known only per batch: the host passes the code sets.
        let id = self.out.dict_params.len();
        self.out.dict_params.push(DictParam {
            id,
            column: col,
            predicate: Arc::clone(expr),
        });
        let t = format!("eddy_code_in(dset{id}, (uint32_t){})", code.val);
        let nn = format!("eddy_code_in(dnull{id}, (uint32_t){})", code.val);
        let (val, null) = if code.null == "false" {
            (t, nn)
        } else {
            // The NULL row's value is passed as two scalar flags.
            (
                format!("({} ? dnullrow_val{id} : {t})", code.null),
                format!("({} ? dnullrow_null{id} : {nn})", code.null),
            )
        };
        Ok(self.bind(DevType::Bool, val, null))
    }

    fn member_expr(&mut self, var: &str, codes: &[u32], n: usize) -> String {
        if let Some(s) = membership(var, codes, n) {
            return s;
        }
        let id = self.out.globals.matches("__constant__").count();
        let mut words = vec![0u32; n.div_ceil(32)];
        for c in codes {
            words[*c as usize / 32] |= 1 << (c % 32);
        }
        let list: Vec<String> = words.iter().map(|w| format!("0x{w:08x}u")).collect();
        let _ = writeln!(
            self.out.globals,
            "__constant__ uint32_t eddy_codes{id}[{}] = {{{}}};",
            words.len(),
            list.join(", ")
        );
        format!("eddy_code_in(eddy_codes{id}, (uint32_t){var})")
    }

    fn binary(
        &mut self,
        expr: &Arc<dyn PhysicalExpr>,
        b: &BinaryExpr,
    ) -> Result<Value, Unsupported> {
        let op = *b.op();
        match op {
            Operator::And | Operator::Or => {
                let l = self.compile(b.left())?;
                let r = self.compile(b.right())?;
                if l.ty != DevType::Bool || r.ty != DevType::Bool {
                    return Err(Unsupported::expr(format!("{op} of non-booleans")));
                }
                let (a, an, c, cn) = (&l.val, &l.null, &r.val, &r.null);
                // SQL: a FALSE operand decides AND, a TRUE one decides OR;
                // otherwise any NULL makes the result NULL.
                let decided = if op == Operator::And {
                    format!("((!{an} && !{a}) || (!{cn} && !{c}))")
                } else {
                    format!("((!{an} && {a}) || (!{cn} && {c}))")
                };
                let d = self.bind(DevType::Bool, decided, "false".into());
                let any_null = or_null(an, cn);
                let null = if any_null == "false" {
                    any_null
                } else {
                    format!("(!{} && {any_null})", d.val)
                };
                let val = if op == Operator::And {
                    format!("(!{} && !({null}))", d.val)
                } else {
                    d.val.clone()
                };
                return Ok(self.bind(DevType::Bool, val, null));
            }
            Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq => {
                let l = self.compile(b.left())?;
                let r = self.compile(b.right())?;
                same_type(&l, &r, op)?;
                if l.ty == DevType::Bool && !matches!(op, Operator::Eq | Operator::NotEq) {
                    return Err(Unsupported::expr("ordering comparison of booleans"));
                }
                let c = match op {
                    Operator::Eq => "==",
                    Operator::NotEq => "!=",
                    Operator::Lt => "<",
                    Operator::LtEq => "<=",
                    Operator::Gt => ">",
                    _ => ">=",
                };
                let null = or_null(&l.null, &r.null);
                return Ok(self.bind(DevType::Bool, format!("({} {c} {})", l.val, r.val), null));
            }
            Operator::Plus
            | Operator::Minus
            | Operator::Multiply
            | Operator::Divide
            | Operator::Modulo => {}
            other => return Err(Unsupported::expr(format!("operator {other}"))),
        }
        // Arithmetic: refuse DataFusion's checked mode (we wrap).
        let strict = BinaryExpr::new(Arc::clone(b.left()), op, Arc::clone(b.right()))
            .with_fail_on_overflow(true);
        if &strict == b {
            return Err(Unsupported::expr("arithmetic with fail_on_overflow"));
        }
        let out_dt = expr
            .data_type(self.schema)
            .map_err(|e| Unsupported::expr(e.to_string()))?;
        let out_ty = DevType::of(&out_dt)?;
        let l = self.compile(b.left())?;
        let r = self.compile(b.right())?;
        let null = or_null(&l.null, &r.null);
        match (l.ty, r.ty, out_ty) {
            (
                DevType::Dec64 { scale: s1, .. },
                DevType::Dec64 { scale: s2, .. },
                DevType::Dec64 { scale: so, .. },
            ) => {
                let ok = match op {
                    Operator::Plus | Operator::Minus => s1 == s2 && so == s1,
                    Operator::Multiply => i16::from(so) == i16::from(s1) + i16::from(s2),
                    _ => false,
                };
                if !ok {
                    return Err(Unsupported::expr(format!(
                        "decimal {op} with scales {s1}, {s2} -> {so}"
                    )));
                }
                let c = if op == Operator::Multiply {
                    "*"
                } else if op == Operator::Plus {
                    "+"
                } else {
                    "-"
                };
                let val = format!(
                    "(int64_t)((unsigned long long)({}) {c} (unsigned long long)({}))",
                    l.val, r.val
                );
                Ok(self.bind(out_ty, val, null))
            }
            (a, b2, o) if a == b2 && a == o && (a.is_plain_int() || a.is_float()) => {
                let t = a.c_type();
                if a.is_float() {
                    let val = match op {
                        Operator::Plus => format!("({} + {})", l.val, r.val),
                        Operator::Minus => format!("({} - {})", l.val, r.val),
                        Operator::Multiply => format!("({} * {})", l.val, r.val),
                        Operator::Divide => format!("({} / {})", l.val, r.val),
                        _ => format!("fmod({}, {})", l.val, r.val),
                    };
                    return Ok(self.bind(a, val, null));
                }
                match op {
                    Operator::Plus | Operator::Minus | Operator::Multiply => {
                        let c = if op == Operator::Plus {
                            "+"
                        } else if op == Operator::Minus {
                            "-"
                        } else {
                            "*"
                        };
                        let val = format!(
                            "({t})((unsigned long long)({}) {c} (unsigned long long)({}))",
                            l.val, r.val
                        );
                        Ok(self.bind(a, val, null))
                    }
                    _ => {
                        // Division: zero divisors (and MIN / -1) are errors in
                        // DataFusion; flag them and let the CPU raise it.
                        let d = self.fresh();
                        let c = if op == Operator::Divide { "/" } else { "%" };
                        let min_check = if a.is_unsigned() {
                            String::new()
                        } else {
                            format!(
                                " || ({} == -1 && {} == ({t})(1ULL << (sizeof({t}) * 8 - 1)))",
                                r.val, l.val
                            )
                        };
                        self.line(&format!("{t} {d} = 0;"));
                        self.line(&format!(
                            "if (!({null})) {{ if ({} == 0{min_check}) {{ {FLAG_ERR}; }} else {{ {d} = {} {c} {}; }} }}",
                            r.val, l.val, r.val
                        ));
                        Ok(Value {
                            val: d,
                            null,
                            ty: a,
                        })
                    }
                }
            }
            (a, b2, o) => Err(Unsupported::ty(format!(
                "{op} on {a:?} and {b2:?} giving {o:?}"
            ))),
        }
    }

    fn in_list(&mut self, i: &InListExpr) -> Result<Value, Unsupported> {
        let v = self.compile(i.expr())?;
        let mut hits = Vec::new();
        let mut list_has_null = false;
        for item in i.list() {
            let lit = item.downcast_ref::<Literal>().ok_or_else(|| {
                Unsupported::expr(format!("IN list item {item} is not a literal"))
            })?;
            let lv = literal(lit.value())?;
            if lv.null == "true" {
                list_has_null = true;
                continue;
            }
            if lv.ty != v.ty {
                return Err(Unsupported::ty(format!(
                    "IN list of {:?} against {:?}",
                    lv.ty, v.ty
                )));
            }
            hits.push(format!("{} == {}", v.val, lv.val));
        }
        let any = if hits.is_empty() {
            "false".to_string()
        } else {
            format!("({})", hits.join(" || "))
        };
        let a = self.bind(DevType::Bool, any, "false".into());
        // x IN (..., NULL) is NULL unless it matched; NULL IN (...) is NULL.
        let null = if list_has_null {
            or_null(&v.null, &format!("!{}", a.val))
        } else {
            v.null.clone()
        };
        let val = if i.negated() {
            format!("!{}", a.val)
        } else {
            a.val.clone()
        };
        Ok(self.bind(DevType::Bool, val, null))
    }

    fn case(&mut self, expr: &Arc<dyn PhysicalExpr>, c: &CaseExpr) -> Result<Value, Unsupported> {
        let out_dt = expr
            .data_type(self.schema)
            .map_err(|e| Unsupported::expr(e.to_string()))?;
        let out_ty = DevType::of(&out_dt)?;
        if matches!(out_ty, DevType::DictCode { .. }) {
            return Err(Unsupported::ty("CASE producing strings"));
        }
        let base = match c.expr() {
            Some(e) => Some(self.compile(e)?),
            None => None,
        };
        let r = self.fresh();
        self.line(&format!("{} {r} = 0; bool {r}_n = true;", out_ty.c_type()));
        let mut closes = 0;
        for (when, then) in c.when_then_expr() {
            let w = self.compile(when)?;
            let cond = match &base {
                Some(b) => {
                    if b.ty != w.ty {
                        return Err(Unsupported::ty("CASE operand and WHEN of different types"));
                    }
                    format!("!({}) && !({}) && {} == {}", b.null, w.null, b.val, w.val)
                }
                None => {
                    if w.ty != DevType::Bool {
                        return Err(Unsupported::expr("WHEN condition is not boolean"));
                    }
                    format!("!({}) && {}", w.null, w.val)
                }
            };
            self.line(&format!("if ({cond}) {{"));
            self.indent += 1;
            let t = self.compile(then)?;
            if t.ty != out_ty {
                return Err(Unsupported::ty(format!(
                    "CASE branch {:?} vs result {:?}",
                    t.ty, out_ty
                )));
            }
            self.line(&format!("{r} = {}; {r}_n = {};", t.val, t.null));
            self.indent -= 1;
            self.line("} else {");
            self.indent += 1;
            closes += 1;
        }
        if let Some(e) = c.else_expr() {
            let t = self.compile(e)?;
            if t.ty != out_ty {
                return Err(Unsupported::ty(format!(
                    "CASE ELSE {:?} vs result {:?}",
                    t.ty, out_ty
                )));
            }
            self.line(&format!("{r} = {}; {r}_n = {};", t.val, t.null));
        }
        for _ in 0..closes {
            self.indent -= 1;
            self.line("}");
        }
        Ok(Value {
            val: r.clone(),
            null: format!("{r}_n"),
            ty: out_ty,
        })
    }

    fn cast(&mut self, c: &CastExpr) -> Result<Value, Unsupported> {
        let a = self.compile(c.expr())?;
        let to = DevType::of(c.cast_type())?;
        if a.ty == to {
            return Ok(a);
        }
        let rank = |t: DevType| -> Option<(bool, u32)> {
            Some(match t {
                DevType::I8 => (true, 8),
                DevType::I16 => (true, 16),
                DevType::I32 => (true, 32),
                DevType::I64 => (true, 64),
                DevType::U8 => (false, 8),
                DevType::U16 => (false, 16),
                DevType::U32 => (false, 32),
                DevType::U64 => (false, 64),
                _ => return None,
            })
        };
        let val = match (a.ty, to) {
            (f, t) if f.is_plain_int() && t.is_plain_int() => {
                let (fs, fb) = rank(f).ok_or_else(|| Unsupported::ty("cast"))?;
                let (ts, tb) = rank(t).ok_or_else(|| Unsupported::ty("cast"))?;
                // Widening only: every source value fits the target.
                let widening = (fs == ts && tb > fb) || (!fs && ts && tb > fb);
                if !widening {
                    return Err(Unsupported::ty(format!("narrowing cast {f:?} -> {t:?}")));
                }
                format!("({}){}", t.c_type(), a.val)
            }
            (f, DevType::F64) if f.is_plain_int() || f == DevType::F32 => {
                format!("(double){}", a.val)
            }
            (DevType::I8 | DevType::I16 | DevType::U8 | DevType::U16, DevType::F32) => {
                format!("(float){}", a.val)
            }
            (f, DevType::Dec64 { precision, scale }) if f.is_plain_int() => {
                let digits = match rank(f) {
                    Some((_, 8)) => 3,
                    Some((_, 16)) => 5,
                    Some((_, 32)) => 10,
                    _ => 20,
                };
                if scale < 0 || i16::from(precision) - i16::from(scale) < digits {
                    return Err(Unsupported::ty(format!(
                        "cast {f:?} -> Decimal({precision},{scale}) may overflow"
                    )));
                }
                format!("(int64_t){} * {}LL", a.val, 10i64.pow(scale as u32))
            }
            (
                DevType::Dec64 {
                    precision: p1,
                    scale: s1,
                },
                DevType::Dec64 {
                    precision: p2,
                    scale: s2,
                },
            ) => {
                if s2 < s1 || i16::from(p2) - i16::from(s2) < i16::from(p1) - i16::from(s1) {
                    return Err(Unsupported::ty("narrowing decimal cast"));
                }
                format!("{} * {}LL", a.val, 10i64.pow((s2 - s1) as u32))
            }
            (f, t) => return Err(Unsupported::ty(format!("cast {f:?} -> {t:?}"))),
        };
        Ok(self.bind(to, val, a.null))
    }
}

fn same_type(l: &Value, r: &Value, op: Operator) -> Result<(), Unsupported> {
    let ok = match (l.ty, r.ty) {
        (DevType::Dec64 { scale: a, .. }, DevType::Dec64 { scale: b, .. }) => a == b,
        (a, b) => a == b,
    };
    if ok {
        Ok(())
    } else {
        Err(Unsupported::ty(format!(
            "{op} between {:?} and {:?}",
            l.ty, r.ty
        )))
    }
}

fn or_null(a: &str, b: &str) -> String {
    match (a, b) {
        ("false", x) | (x, "false") => x.to_string(),
        ("true", _) | (_, "true") => "true".into(),
        _ => format!("({a} || {b})"),
    }
}

/// The operator of Eddy's checked float functions, by name (they are
/// defined in `eddy-sql`'s `checked_arith`, which depends on this crate).
fn checked_float_op(name: &str) -> Option<Operator> {
    match name {
        "eddy_float_add" => Some(Operator::Plus),
        "eddy_float_sub" => Some(Operator::Minus),
        "eddy_float_mul" => Some(Operator::Multiply),
        "eddy_float_div" => Some(Operator::Divide),
        _ => None,
    }
}

/// The operator of Eddy's checked integer functions, by name.
fn checked_int_op(name: &str) -> Option<Operator> {
    match name {
        "eddy_int_add" => Some(Operator::Plus),
        "eddy_int_sub" => Some(Operator::Minus),
        "eddy_int_mul" => Some(Operator::Multiply),
        _ => None,
    }
}

/// A literal as a constant C expression.
pub fn literal(v: &ScalarValue) -> Result<Value, Unsupported> {
    let dt = v.data_type();
    let ty = DevType::of(&dt)?;
    if v.is_null() {
        return Ok(Value {
            val: format!("({})0", ty.c_type()),
            null: "true".into(),
            ty,
        });
    }
    let val = match v {
        ScalarValue::Boolean(Some(b)) => b.to_string(),
        ScalarValue::Int8(Some(x)) => format!("((int8_t){x})"),
        ScalarValue::Int16(Some(x)) => format!("((int16_t){x})"),
        ScalarValue::Int32(Some(x)) => format!("((int32_t){x})"),
        ScalarValue::Int64(Some(x)) if *x == i64::MIN => {
            "((int64_t)(-9223372036854775807LL - 1))".into()
        }
        ScalarValue::Int64(Some(x)) => format!("((int64_t){x}LL)"),
        ScalarValue::UInt8(Some(x)) => format!("((uint8_t){x}u)"),
        ScalarValue::UInt16(Some(x)) => format!("((uint16_t){x}u)"),
        ScalarValue::UInt32(Some(x)) => format!("((uint32_t){x}u)"),
        ScalarValue::UInt64(Some(x)) => format!("((uint64_t){x}ULL)"),
        ScalarValue::Float32(Some(x)) if x.is_finite() => format!("{x:e}f"),
        ScalarValue::Float64(Some(x)) if x.is_finite() => format!("{x:e}"),
        ScalarValue::Decimal128(Some(x), _, _) => {
            let x =
                i64::try_from(*x).map_err(|_| Unsupported::ty("decimal literal beyond int64"))?;
            if x == i64::MIN {
                return Err(Unsupported::ty("decimal literal at int64 minimum"));
            }
            format!("((int64_t){x}LL)")
        }
        ScalarValue::Date32(Some(d)) => format!("((int32_t){d})"),
        other => return Err(Unsupported::ty(format!("literal {other:?}"))),
    };
    Ok(Value {
        val,
        null: "false".into(),
        ty,
    })
}

/// Whether the data type can be a kernel column (for planning decisions).
pub fn supported_column_type(dt: &DataType) -> bool {
    DevType::of(dt).is_ok()
}

#[cfg(test)]
mod checked_tests {
    use super::*;
    use arrow::datatypes::Field;
    use datafusion::common::config::ConfigOptions;
    use datafusion::logical_expr::{
        ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
    };

    /// Stands in for `eddy-sql`'s checked functions (this crate cannot
    /// depend on it): only the name and the types matter to the compiler.
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Named(String, Signature);

    impl ScalarUDFImpl for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn signature(&self) -> &Signature {
            &self.1
        }
        fn return_type(&self, args: &[DataType]) -> datafusion::common::Result<DataType> {
            Ok(args[0].clone())
        }
        fn invoke_with_args(
            &self,
            _: ScalarFunctionArgs,
        ) -> datafusion::common::Result<ColumnarValue> {
            unimplemented!("only compiled, never run")
        }
    }

    fn body(name: &str, ty: DataType) -> Result<String, Unsupported> {
        let schema = Schema::new(vec![
            Field::new("a", ty.clone(), true),
            Field::new("b", ty.clone(), true),
        ]);
        let udf = Arc::new(ScalarUDF::new_from_impl(Named(
            name.to_string(),
            Signature::any(2, Volatility::Immutable),
        )));
        let args: Vec<Arc<dyn PhysicalExpr>> =
            vec![Arc::new(Column::new("a", 0)), Arc::new(Column::new("b", 1))];
        let f: Arc<dyn PhysicalExpr> = Arc::new(ScalarFunctionExpr::new(
            name,
            udf,
            args,
            Arc::new(Field::new(name, ty, true)),
            Arc::new(ConfigOptions::default()),
        ));
        let mut c = ExprCompiler::new(&schema);
        c.compile(&f)?;
        Ok(c.finish().body)
    }

    #[test]
    fn checked_arithmetic_flags_overflow() {
        let add = body("eddy_int_add", DataType::Int64).unwrap();
        assert!(add.contains("< 0") && add.contains(FLAG_ERR), "{add}");
        let mul = body("eddy_int_mul", DataType::Int64).unwrap();
        assert!(mul.contains("__mul64hi") && mul.contains(FLAG_ERR), "{mul}");
        let narrow = body("eddy_int_sub", DataType::Int32).unwrap();
        assert!(
            narrow.contains("(1LL << 31)") && narrow.contains(FLAG_ERR),
            "{narrow}"
        );
        assert!(body("eddy_int_add", DataType::Float64).is_err());
        assert!(body("some_other_function", DataType::Int64).is_err());
    }

    #[test]
    fn checked_float_arithmetic_flags_overflow_underflow_and_zero_divisors() {
        let mul = body("eddy_float_mul", DataType::Float64).unwrap();
        assert!(
            mul.contains("1.7976931348623157e308")
                && mul.contains("== 0")
                && mul.contains(FLAG_ERR),
            "{mul}"
        );
        let div = body("eddy_float_div", DataType::Float32).unwrap();
        assert!(
            div.contains("3.40282347e38f")
                && div.contains("(c1) == 0 && (c0) == (c0)")
                && div.contains(FLAG_ERR),
            "{div}"
        );
        assert!(body("eddy_float_add", DataType::Int64).is_err());
    }
}
