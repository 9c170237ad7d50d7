//! `to_char(number, template)`: PostgreSQL 15's numeric formatting
//! ("Template Patterns for Numeric Formatting") for integers, numerics and
//! floats, called by `crate::to_char`.
//!
//! Supported: `9` (a digit, blank where it would be a leading zero), `0` (a
//! digit, zero-padded from the first `0` on), `.` and `D` (the decimal
//! point), `,` and `G` (the group separator, blank before the first digit),
//! `S` (a sign anchored to the number: before it, or after it when `S`
//! follows the digits), `MI` (a minus sign, or a blank, where it stands),
//! `FM` (no padding blanks, no trailing zeros in `9` fraction places),
//! double-quoted text and any other character, copied. Without `S` or `MI`
//! a sign place is kept before the number: a blank, or `-` next to the
//! first digit. The value is rounded to the template's fraction places
//! (numerics half away from zero, floats half to even on their exact binary
//! value, as PostgreSQL's `sprintf` does); a number with more integer
//! digits than the template has places prints `#` in every place.
//! Keyword matching ignores case, as PostgreSQL's does.
//!
//! Refused (0A000, never printed another way): `PR`, `PL`, `SG`, `L`,
//! `EEEE`, `RN`, `TH`, `V`, and NaN or infinite floats.

use crate::error::SqlError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// A digit place: `0` (zero padding) or `9`.
    Digit {
        zero: bool,
    },
    Point,
    Group,
    /// `S`: a sign anchored to the number.
    Sign,
    /// `MI`: `-` or a blank, here.
    Minus,
    Literal(char),
}

/// A parsed numeric template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumberTemplate {
    tokens: Vec<Token>,
    fill_mode: bool,
}

fn refuse(what: &str) -> SqlError {
    SqlError::FeatureNotSupported(format!(
        "to_char of a number with the template pattern \"{what}\" is not supported"
    ))
}

fn starts_with_ci(chars: &[char], at: usize, word: &str) -> bool {
    word.chars().enumerate().all(|(k, w)| {
        chars
            .get(at.saturating_add(k))
            .is_some_and(|c| c.eq_ignore_ascii_case(&w))
    })
}

impl NumberTemplate {
    pub fn parse(template: &str) -> Result<NumberTemplate, SqlError> {
        let chars: Vec<char> = template.chars().collect();
        let mut tokens = Vec::new();
        let mut fill_mode = false;
        let mut i = 0usize;
        while let Some(&c) = chars.get(i) {
            let word = |w: &str| starts_with_ci(&chars, i, w);
            if c == '"' {
                i = i.saturating_add(1);
                while let Some(&q) = chars.get(i) {
                    i = i.saturating_add(1);
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(&esc) = chars.get(i) {
                                tokens.push(Token::Literal(esc));
                                i = i.saturating_add(1);
                            }
                        }
                        other => tokens.push(Token::Literal(other)),
                    }
                }
                continue;
            }
            let (len, token) = if word("FM") {
                fill_mode = true;
                (2, None)
            } else if word("MI") {
                (2, Some(Token::Minus))
            } else if word("EEEE") {
                return Err(refuse("EEEE"));
            } else {
                for w in ["PR", "PL", "SG", "RN", "TH"] {
                    if word(w) {
                        return Err(refuse(w));
                    }
                }
                let t = match c.to_ascii_uppercase() {
                    '9' => Token::Digit { zero: false },
                    '0' => Token::Digit { zero: true },
                    '.' | 'D' => Token::Point,
                    ',' | 'G' => Token::Group,
                    'S' => Token::Sign,
                    'L' => return Err(refuse("L")),
                    'V' => return Err(refuse("V")),
                    _ => Token::Literal(c),
                };
                (1, Some(t))
            };
            if let Some(t) = token {
                tokens.push(t);
            }
            i = i.saturating_add(len);
        }
        Ok(NumberTemplate { tokens, fill_mode })
    }

    fn point_at(&self) -> Option<usize> {
        self.tokens.iter().position(|t| *t == Token::Point)
    }

    fn places(&self) -> (usize, usize) {
        let point = self.point_at().unwrap_or(self.tokens.len());
        let is_digit = |t: &&Token| matches!(t, Token::Digit { .. });
        let int = self.tokens.iter().take(point).filter(is_digit).count();
        let frac = self.tokens.iter().skip(point).filter(is_digit).count();
        (int, frac)
    }

    /// The number of fraction places: what the value is rounded to.
    pub fn fraction_places(&self) -> usize {
        self.places().1
    }

    /// Formats a value already rounded to [`Self::fraction_places`]:
    /// `int` its integer digits without leading zeros (`"0"` for none),
    /// `frac` exactly that many fraction digits.
    pub fn format(&self, negative: bool, int: &str, frac: &str) -> String {
        let (int_places, _) = self.places();
        let has_point = self.point_at().is_some();
        let overflow = int.len() > int_places;
        // a zero integer part is blank where a fraction follows
        let shown = if int == "0" && has_point { "" } else { int };
        let zero_from = self
            .tokens
            .iter()
            .filter(|t| matches!(t, Token::Digit { .. }))
            .take(int_places)
            .position(|t| *t == Token::Digit { zero: true })
            .unwrap_or(int_places);
        let negative =
            negative && !(int.bytes().all(|b| b == b'0') && frac.bytes().all(|b| b == b'0'));
        let sign_after = self
            .tokens
            .iter()
            .position(|t| *t == Token::Sign)
            .is_some_and(|s| {
                self.tokens
                    .iter()
                    .take(s)
                    .any(|t| matches!(t, Token::Digit { .. } | Token::Point))
            });
        let has_minus = self.tokens.contains(&Token::Minus);
        let anchored = !has_minus && !sign_after;
        let explicit_sign = self.tokens.contains(&Token::Sign);
        let sign_char = match (negative, explicit_sign) {
            (true, _) => '-',
            (false, true) => '+',
            (false, false) => ' ',
        };
        // the digits to place, right-aligned on the integer places
        let int_digits: Vec<char> = shown.chars().collect();
        let first_digit_place = int_places.saturating_sub(int_digits.len());
        let mut frac_digits = frac.chars();
        let mut out: Vec<char> = Vec::new();
        let mut number_start: Option<usize> = None;
        let mut int_place = 0usize;
        let mut printed_digit = false;
        let mut in_fraction = false;
        // fraction places FM leaves out: trailing `9` places holding 0
        let mut frac_keep = frac.len();
        if self.fill_mode {
            let frac_tokens: Vec<&Token> = self
                .tokens
                .iter()
                .skip(self.point_at().unwrap_or(self.tokens.len()))
                .filter(|t| matches!(t, Token::Digit { .. }))
                .collect();
            let bytes = frac.as_bytes();
            while frac_keep > 0
                && bytes.get(frac_keep.saturating_sub(1)) == Some(&b'0')
                && frac_tokens.get(frac_keep.saturating_sub(1))
                    == Some(&&Token::Digit { zero: false })
            {
                frac_keep = frac_keep.saturating_sub(1);
            }
        }
        let mut frac_place = 0usize;
        for t in &self.tokens {
            match t {
                Token::Digit { .. } | Token::Point if number_start.is_none() => {
                    number_start = Some(out.len());
                }
                _ => {}
            }
            match t {
                Token::Digit { .. } if !in_fraction => {
                    let c = if overflow {
                        '#'
                    } else if int_place >= first_digit_place {
                        int_digits
                            .get(int_place.saturating_sub(first_digit_place))
                            .copied()
                            .unwrap_or('0')
                    } else if int_place >= zero_from {
                        '0'
                    } else {
                        ' '
                    };
                    printed_digit |= c != ' ';
                    out.push(c);
                    int_place = int_place.saturating_add(1);
                }
                Token::Digit { .. } => {
                    let d = frac_digits.next().unwrap_or('0');
                    if frac_place < frac_keep {
                        out.push(if overflow { '#' } else { d });
                    }
                    frac_place = frac_place.saturating_add(1);
                }
                Token::Point => {
                    in_fraction = true;
                    out.push('.');
                }
                Token::Group => {
                    if in_fraction || printed_digit {
                        out.push(',');
                    } else {
                        out.push(' ');
                    }
                }
                Token::Sign if sign_after => out.push(sign_char),
                Token::Sign => {}
                Token::Minus => out.push(if negative { '-' } else { ' ' }),
                Token::Literal(c) => out.push(*c),
            }
        }
        if anchored {
            let start = number_start.unwrap_or(out.len());
            let blanks = out.iter().skip(start).take_while(|c| **c == ' ').count();
            out.insert(start, ' ');
            if let Some(slot) = out.get_mut(start.saturating_add(blanks)) {
                *slot = sign_char;
            }
        }
        if self.fill_mode {
            // padding blanks of the number go: those before its first
            // character that is not a blank
            let start = number_start.unwrap_or(0).min(out.len());
            let blanks = out.iter().skip(start).take_while(|c| **c == ' ').count();
            out.drain(start..start.saturating_add(blanks));
        }
        out.into_iter().collect()
    }
}

/// An exact decimal `(unscaled, scale)` rounded half away from zero to
/// `places` fraction digits: (negative, integer digits, fraction digits).
pub fn decimal_parts(unscaled: i128, scale: i8, places: usize) -> (bool, String, String) {
    let negative = unscaled < 0;
    let mut magnitude = unscaled.unsigned_abs();
    let mut scale = usize::try_from(scale).unwrap_or(0);
    if scale > places {
        let drop = u32::try_from(scale.saturating_sub(places)).unwrap_or(u32::MAX);
        magnitude = match 10u128.checked_pow(drop) {
            Some(p) => {
                let (q, r) = (magnitude / p, magnitude % p);
                // r < p <= 10^38, so 2r fits in a u128
                let up = r.checked_mul(2).is_some_and(|twice| twice >= p);
                q.saturating_add(u128::from(up))
            }
            None => 0,
        };
        scale = places;
    }
    let digits = format!("{magnitude:0>width$}", width = scale.saturating_add(1));
    let split = digits.len().saturating_sub(scale);
    let (int, frac) = digits.split_at(split);
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let frac = format!("{frac:0<places$}");
    (negative, int.to_string(), frac)
}

/// A float rounded to `places` fraction digits as `sprintf("%.*f")` does.
pub fn float_parts(v: f64, places: usize) -> Result<(bool, String, String), SqlError> {
    if !v.is_finite() {
        return Err(SqlError::FeatureNotSupported(
            "to_char of NaN or an infinite number is not supported".into(),
        ));
    }
    let text = format!("{:.*}", places, v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    Ok((v.is_sign_negative(), int.to_string(), frac.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt_dec(unscaled: i128, scale: i8, template: &str) -> String {
        let t = NumberTemplate::parse(template).unwrap();
        let (neg, int, frac) = decimal_parts(unscaled, scale, t.fraction_places());
        t.format(neg, &int, &frac)
    }

    fn fmt_f(v: f64, template: &str) -> String {
        let t = NumberTemplate::parse(template).unwrap();
        let (neg, int, frac) = float_parts(v, t.fraction_places()).unwrap();
        t.format(neg, &int, &frac)
    }

    // the answers are PostgreSQL 15's
    #[test]
    fn templates_as_postgres_formats_them() {
        assert_eq!(fmt_dec(12345, 1, "9,999.99"), " 1,234.50");
        assert_eq!(fmt_dec(-12345, 1, "9,999.99"), "-1,234.50");
        assert_eq!(fmt_dec(5, 0, "999"), "   5");
        assert_eq!(fmt_dec(-5, 0, "999"), "  -5");
        assert_eq!(fmt_dec(5, 0, "009"), " 005");
        assert_eq!(fmt_dec(5, 1, "9.99"), "  .50");
        assert_eq!(fmt_dec(-5, 1, "9.99"), " -.50");
        assert_eq!(fmt_dec(12345, 0, "999"), " ###");
        assert_eq!(fmt_dec(123456, 1, "999.9"), " ###.#");
        assert_eq!(fmt_dec(15, 1, "FM9.99"), "1.5");
        assert_eq!(fmt_dec(1, 0, "FM9.99"), "1.");
        assert_eq!(fmt_dec(5, 1, "FM9.99"), ".5");
        assert_eq!(fmt_dec(5, 1, "FM0.99"), "0.5");
        assert_eq!(fmt_dec(-15, 1, "FM9.99"), "-1.5");
        assert_eq!(fmt_dec(5, 0, "9,999"), "     5");
        assert_eq!(fmt_dec(5, 0, "S999"), "  +5");
        assert_eq!(fmt_dec(-5, 0, "999S"), "  5-");
        assert_eq!(fmt_dec(-5, 0, "999MI"), "  5-");
        assert_eq!(fmt_dec(5, 0, "999MI"), "  5 ");
        assert_eq!(fmt_dec(-5, 0, "MI999"), "-  5");
        assert_eq!(fmt_dec(5, 1, ".99"), " .##");
        assert_eq!(fmt_dec(5, 0, "0999"), " 0005");
        assert_eq!(fmt_dec(5, 0, "9099"), "  005");
        assert_eq!(fmt_dec(1234567891, 3, "9G999G999D99"), " 1,234,567.89");
        assert_eq!(fmt_dec(2555, 3, "9.99"), " 2.56");
        assert_eq!(fmt_dec(-2555, 3, "FM9990.00"), "-2.56");
        assert_eq!(fmt_dec(0, 0, "9"), " 0");
        assert_eq!(fmt_dec(0, 0, "FM9"), "0");
        assert_eq!(fmt_dec(485, 0, "\"Total: \"999"), "Total:  485");
        assert_eq!(fmt_dec(12, 0, "FM999,999"), "12");
        assert_eq!(fmt_dec(1234, 0, "FM999,999"), "1,234");
        assert_eq!(fmt_dec(1, 3, "0.99"), " 0.00");
        assert_eq!(fmt_dec(123, 0, "S9999"), " +123");
        assert_eq!(fmt_dec(-123, 0, "FMS9999"), "-123");
        assert_eq!(fmt_dec(-4, 3, "9.99"), "  .00");
        assert_eq!(fmt_f(2.5, "9"), " 2");
        assert_eq!(fmt_f(3.5, "9"), " 4");
        assert_eq!(fmt_f(1e10, "99999999999"), " 10000000000");
    }

    #[test]
    fn unsupported_patterns_are_refused() {
        for t in [
            "9.99EEEE", "RN", "999PR", "PL999", "SG999", "L999", "99V9", "999TH",
        ] {
            assert_eq!(
                NumberTemplate::parse(t).unwrap_err().sqlstate(),
                "0A000",
                "{t}"
            );
        }
        assert!(float_parts(f64::NAN, 2).is_err());
    }
}
