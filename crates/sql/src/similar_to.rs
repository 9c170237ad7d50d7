//! `x SIMILAR TO pattern [ESCAPE e]`: DataFusion matched the pattern as
//! an unanchored POSIX regular expression, so `'abc' SIMILAR TO 'a%'` was
//! false and `'xabc' SIMILAR TO 'abc'` true. PostgreSQL translates the
//! SQL pattern into an anchored regular expression (`similar_escape` in
//! its `regexp.c`) and matches that; so does Eddy, on the AST
//! (`crate::rewrite`): `x ~ '<regex>'` for a literal pattern, `x ~
//! eddy_similar_escape(pattern, escape)` otherwise.
//!
//! The translation, as PostgreSQL's: the whole pattern is anchored and
//! grouped (`^(?:...)$`); `%` is `.*` and `_` is `.` outside a bracket
//! expression; `(` opens a non-capturing group; `.`, `^` and `$` are
//! literal; the escape character (default `\`, none with `ESCAPE ''`)
//! makes the next character literal; `|`, `*`, `+`, `?`, `{m,n}` and
//! bracket expressions keep their regular-expression meaning.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

/// `eddy_similar_escape(pattern, escape)`: the regular expression of a
/// SIMILAR TO pattern.
pub const SIMILAR_ESCAPE: &str = "eddy_similar_escape";

/// The anchored regular expression PostgreSQL matches for a SIMILAR TO
/// `pattern` with escape character `escape` (`None`: the default
/// backslash; `""`: none). An escape of more than one character is 22025,
/// as in PostgreSQL.
pub fn similar_to_regex(pattern: &str, escape: Option<&str>) -> Result<String, SqlError> {
    let escape = match escape {
        None => Some('\\'),
        Some("") => None,
        Some(e) => {
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => {
                    return Err(SqlError::InvalidEscapeSequence(
                        "invalid escape string: escape string must be empty or one character"
                            .into(),
                    ))
                }
            }
        }
    };
    let mut out = String::with_capacity(pattern.len() + 8);
    out.push_str("^(?:");
    let mut after_escape = false;
    let mut in_class = 0usize;
    for c in pattern.chars() {
        if after_escape {
            // (PostgreSQL's `"` separators belong to SUBSTRING ... SIMILAR)
            out.push('\\');
            out.push(c);
            after_escape = false;
        } else if Some(c) == escape {
            after_escape = true;
        } else if in_class > 0 {
            if c == '\\' {
                out.push('\\');
            }
            out.push(c);
            if c == ']' {
                in_class -= 1;
            } else if c == '[' {
                in_class += 1;
            }
        } else {
            match c {
                '[' => {
                    in_class += 1;
                    out.push(c);
                }
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '(' => out.push_str("(?:"),
                '\\' | '.' | '^' | '$' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
    }
    // (an escape character at the end escapes nothing, as in PostgreSQL)
    out.push_str(")$");
    Ok(out)
}

/// The function [`SIMILAR_ESCAPE`] names, for a pattern that is not a
/// literal.
pub fn similar_escape_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(SimilarEscape {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SimilarEscape {
    signature: Signature,
}

impl ScalarUDFImpl for SimilarEscape {
    fn name(&self) -> &str {
        SIMILAR_ESCAPE
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let n = args.number_rows;
        let all_scalar = crate::udf_args::all_scalar(&args.args);
        let [pattern, escape] = args.args.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "{SIMILAR_ESCAPE} takes two arguments"
            )));
        };
        let text = |v: &ColumnarValue| -> DfResult<Arc<dyn Array>> {
            let a = v.to_array(n)?;
            Ok(datafusion::arrow::compute::cast(&a, &DataType::Utf8)?)
        };
        let patterns = text(pattern)?;
        let escapes = text(escape)?;
        let (patterns, escapes) = (patterns.as_string::<i32>(), escapes.as_string::<i32>());
        let mut out = Vec::with_capacity(patterns.len());
        for row in 0..patterns.len() {
            if patterns.is_null(row) {
                out.push(None);
                continue;
            }
            // a NULL escape: PostgreSQL's default, the backslash
            let escape = (!escapes.is_null(row)).then(|| escapes.value(row));
            let regex = similar_to_regex(patterns.value(row), escape)
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            out.push(Some(regex));
        }
        crate::udf_args::scalar_if(all_scalar, Arc::new(StringArray::from(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_translate_as_in_postgresql() {
        let r = |p: &str| similar_to_regex(p, None).expect("translates");
        assert_eq!(r("a%"), "^(?:a.*)$");
        assert_eq!(r("%@%.com"), "^(?:.*@.*\\.com)$");
        assert_eq!(r("a_c"), "^(?:a.c)$");
        assert_eq!(r("(a|b)%"), "^(?:(?:a|b).*)$");
        assert_eq!(r("[a-c_%]x"), "^(?:[a-c_%]x)$");
        assert_eq!(r("100\\%"), "^(?:100\\%)$");
        assert_eq!(r("a$^b"), "^(?:a\\$\\^b)$");
        assert_eq!(
            similar_to_regex("a!%b", Some("!")).expect("translates"),
            "^(?:a\\%b)$"
        );
        assert_eq!(
            similar_to_regex("a\\b", Some("")).expect("translates"),
            "^(?:a\\\\b)$"
        );
    }

    #[test]
    fn a_long_escape_is_22025_and_a_trailing_one_escapes_nothing() {
        assert!(matches!(
            similar_to_regex("a", Some("ab")),
            Err(SqlError::InvalidEscapeSequence(_))
        ));
        assert_eq!(
            similar_to_regex("a\\", None).ok().as_deref(),
            Some("^(?:a)$")
        );
    }
}
