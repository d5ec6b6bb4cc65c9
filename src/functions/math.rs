//! Arithmetic: `eval` (an infix expression language), numeric
//! comparisons, `int`, and `randomint`.

use super::args::Args;
use super::{FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::number::{parse_int, parse_real};

pub static FUNCTIONS: &[FnSpec] = &[
    spec("eval", 1, Some(3), eval),
    spec("isgreaterthan", 2, Some(2), isgreaterthan),
    spec("islessthan", 2, Some(2), islessthan),
    spec("int", 1, Some(1), int),
    spec("randomint", 2, Some(2), randomint),
];

fn eval(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("eval", a);
    let expr = args.str(0, "expression")?;
    let mode = args.opt_option(1, "mode", &["math", "class"], "math")?;
    args.opt_option(2, "options", &["infix"], "infix")?;
    let v = MathParser::new(expr)
        .parse()
        .map_err(|e| args.fail(format!("cannot evaluate '{expr}': {e}")))?;
    if mode == "class" {
        return Ok(class_result(v != 0.0));
    }
    Ok(Value::str(format!("{v:.6}")))
}

/// A number as a comparison reads it: the whole text, as a real.
fn number(s: &str) -> Option<f64> {
    let t = s.trim();
    t.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .or_else(|| parse_int(t).ok().map(|i| i as f64))
}

fn compare_values(a: &str, b: &str) -> std::cmp::Ordering {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
        _ => a.cmp(b),
    }
}

/// Whether the first argument compares to the second as `want`.
fn compares(name: &'static str, a: &[Value], want: std::cmp::Ordering) -> FnResult {
    let args = Args::new(name, a);
    let x = args.str(0, "value1")?;
    let y = args.str(1, "value2")?;
    Ok(class_result(compare_values(x, y) == want))
}

fn isgreaterthan(_: &mut EvalContext, a: &[Value]) -> FnResult {
    compares("isgreaterthan", a, std::cmp::Ordering::Greater)
}

fn islessthan(_: &mut EvalContext, a: &[Value]) -> FnResult {
    compares("islessthan", a, std::cmp::Ordering::Less)
}

/// `int("123.7")` is 123; unit suffixes are read (`1k`); text that is no
/// number fails.
fn int(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("int", a);
    let s = args.str(0, "string")?;
    // cf-agent reads the text as a real, unit suffix included ("65.987k" is
    // 65987), and drops the decimals.
    match parse_real(s) {
        Ok(f) => Ok(Value::str((f.trunc() as i64).to_string())),
        Err(_) => Err(args.fail(format!("'{s}' is not a number"))),
    }
}

/// A random integer in `[lower, upper)`; its result differs between runs.
fn randomint(_: &mut EvalContext, a: &[Value]) -> FnResult {
    use std::hash::{BuildHasher, Hasher};
    let args = Args::new("randomint", a);
    let lo = args.int(0, "lower")?;
    let hi = args.int(1, "upper")?;
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    if lo == hi {
        return Ok(Value::str(lo.to_string()));
    }
    // A fresh randomly keyed hasher is a good enough source for this.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(lo as u64 ^ (hi as u64).rotate_left(32));
    let r = h.finish() % (hi - lo) as u64;
    Ok(Value::str((lo + r as i64).to_string()))
}

// ---- the expression language ----------------------------------------------

/// Infix arithmetic as `eval` accepts it: numbers (with k/m/g... unit
/// suffixes), `+ - * / % ^`, comparisons (`== != < > <= >=`, giving 1 or
/// 0), parentheses, constants (`e`, `pi`...) and one-argument functions.
pub struct MathParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> MathParser<'a> {
    pub fn new(s: &'a str) -> MathParser<'a> {
        MathParser {
            s: s.as_bytes(),
            pos: 0,
        }
    }

    pub fn parse(mut self) -> Result<f64, String> {
        let v = self.comparison()?;
        self.ws();
        if self.pos < self.s.len() {
            return Err(format!(
                "unexpected '{}' at position {}",
                String::from_utf8_lossy(&self.s[self.pos..]),
                self.pos + 1
            ));
        }
        Ok(v)
    }

    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.pos..].starts_with(t.as_bytes()) {
            self.pos += t.len();
            true
        } else {
            false
        }
    }

    fn comparison(&mut self) -> Result<f64, String> {
        let l = self.additive()?;
        for (op, f) in [
            (
                "==",
                (|a: f64, b: f64| (a - b).abs() < 1e-8) as fn(f64, f64) -> bool,
            ),
            ("!=", |a, b| (a - b).abs() >= 1e-8),
            ("<=", |a, b| a <= b),
            (">=", |a, b| a >= b),
            ("<", |a, b| a < b),
            (">", |a, b| a > b),
        ] {
            if self.eat(op) {
                let r = self.additive()?;
                return Ok(if f(l, r) { 1.0 } else { 0.0 });
            }
        }
        Ok(l)
    }

    fn additive(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        loop {
            if self.eat("+") {
                v += self.term()?;
            } else if self.eat("-") {
                v -= self.term()?;
            } else {
                return Ok(v);
            }
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.power()?;
        loop {
            if self.eat("*") {
                v *= self.power()?;
            } else if self.eat("/") {
                let d = self.power()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                v /= d;
            } else if self.eat("%") {
                let d = self.power()?;
                if d == 0.0 {
                    return Err("modulo by zero".into());
                }
                v %= d;
            } else {
                return Ok(v);
            }
        }
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.eat("^") || self.eat("**") {
            let e = self.power()?;
            return Ok(base.powf(e));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, String> {
        if self.eat("-") {
            return Ok(-self.unary()?);
        }
        if self.eat("+") {
            return self.unary();
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.ws();
        if self.eat("(") {
            let v = self.comparison()?;
            if !self.eat(")") {
                return Err("missing ')'".into());
            }
            return Ok(v);
        }
        let start = self.pos;
        let c = *self.s.get(self.pos).ok_or("unexpected end of expression")?;
        if c.is_ascii_digit() || c == b'.' {
            while self.pos < self.s.len()
                && (self.s[self.pos].is_ascii_digit() || self.s[self.pos] == b'.')
            {
                self.pos += 1;
            }
            if self.pos < self.s.len() && matches!(self.s[self.pos], b'e' | b'E') {
                let save = self.pos;
                self.pos += 1;
                if self.pos < self.s.len() && matches!(self.s[self.pos], b'+' | b'-') {
                    self.pos += 1;
                }
                if self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                    while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                        self.pos += 1;
                    }
                } else {
                    self.pos = save;
                }
            }
            let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
            let mut v: f64 = text.parse().map_err(|_| format!("bad number '{text}'"))?;
            if let Some(&u) = self.s.get(self.pos) {
                let mult = match u {
                    b'k' => Some(1e3),
                    b'm' => Some(1e6),
                    b'g' => Some(1e9),
                    b't' => Some(1e12),
                    b'p' => Some(1e15),
                    _ => None,
                };
                let next_is_word = self
                    .s
                    .get(self.pos + 1)
                    .is_some_and(|n| n.is_ascii_alphanumeric());
                if let Some(m) = mult
                    && !next_is_word
                {
                    v *= m;
                    self.pos += 1;
                }
            }
            return Ok(v);
        }
        if c.is_ascii_alphabetic() {
            while self.pos < self.s.len()
                && (self.s[self.pos].is_ascii_alphanumeric() || self.s[self.pos] == b'_')
            {
                self.pos += 1;
            }
            let name = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
            let constant = match name {
                "e" => Some(std::f64::consts::E),
                "pi" => Some(std::f64::consts::PI),
                "log2e" => Some(std::f64::consts::LOG2_E),
                "log10e" => Some(std::f64::consts::LOG10_E),
                "ln2" => Some(std::f64::consts::LN_2),
                "ln10" => Some(std::f64::consts::LN_10),
                "pi_2" => Some(std::f64::consts::FRAC_PI_2),
                "pi_4" => Some(std::f64::consts::FRAC_PI_4),
                "1_pi" => Some(std::f64::consts::FRAC_1_PI),
                "2_pi" => Some(std::f64::consts::FRAC_2_PI),
                "2_sqrtpi" => Some(std::f64::consts::FRAC_2_SQRT_PI),
                "sqrt2" => Some(std::f64::consts::SQRT_2),
                "sqrt1_2" => Some(std::f64::consts::FRAC_1_SQRT_2),
                _ => None,
            };
            self.ws();
            if self.s.get(self.pos) != Some(&b'(') {
                return constant.ok_or_else(|| format!("unknown name '{name}'"));
            }
            let f: fn(f64) -> f64 = match name {
                "ceil" => f64::ceil,
                "floor" => f64::floor,
                "log10" => f64::log10,
                "log2" => f64::log2,
                "log" => f64::ln,
                "sqrt" => f64::sqrt,
                "sin" => f64::sin,
                "cos" => f64::cos,
                "tan" => f64::tan,
                "asin" => f64::asin,
                "acos" => f64::acos,
                "atan" => f64::atan,
                "abs" => f64::abs,
                "step" => |x| if x < 0.0 { 0.0 } else { 1.0 },
                _ => return Err(format!("unknown function '{name}'")),
            };
            self.eat("(");
            let arg = self.comparison()?;
            if !self.eat(")") {
                return Err("missing ')'".into());
            }
            let v = f(arg);
            if !v.is_finite() {
                return Err(format!("{name}({arg}) is not a number"));
            }
            return Ok(v);
        }
        Err(format!("unexpected '{}'", c as char))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calc(s: &str) -> Result<f64, String> {
        MathParser::new(s).parse()
    }

    #[test]
    fn arithmetic() {
        assert_eq!(calc("1+2*3"), Ok(7.0));
        assert_eq!(calc("(1+2)*3"), Ok(9.0));
        assert_eq!(calc("2^3^2"), Ok(512.0));
        assert_eq!(calc("-2 + 5 % 3"), Ok(0.0));
        assert_eq!(calc("1k + 1"), Ok(1001.0));
        assert_eq!(calc("3 > 2"), Ok(1.0));
        assert_eq!(calc("floor(2.7) + ceil(0.2)"), Ok(3.0));
        assert!(calc("1/0").is_err());
        assert!(calc("1 +").is_err());
        assert!(calc("nope(1)").is_err());
        assert!(calc("").is_err());
    }
}
