//! Arithmetic: `eval` (an infix expression language), numeric
//! comparisons, `int`, and `randomint`.

use super::args::Args;
use super::{FnResult, FnSpec, class_result, spec};
use crate::eval::EvalContext;
use crate::values::Value;
use crate::values::number::{parse_c_double, parse_int, parse_real};
use std::ffi::CStr;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("eval", 1, Some(3), eval).pure(),
    spec("isgreaterthan", 2, Some(2), isgreaterthan).pure(),
    spec("islessthan", 2, Some(2), islessthan).pure(),
    spec("int", 1, Some(1), int).pure(),
    spec("randomint", 2, Some(2), randomint),
];

fn eval(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let args = Args::new("eval", a);
    let expr = args.str(0, "expression")?;
    let mode = args.opt_option(1, "mode", &["math", "class"], "math")?;
    args.opt_option(2, "options", &["infix"], "infix")?;
    let v = MathParser::new(expr).parse();
    if mode == "class" {
        // What does not parse, and what is close enough to 0, is false.
        let zero = |v: f64| v < 0.00000000000000001 && v > -0.00000000000000001;
        return Ok(class_result(v.is_ok_and(|v| !zero(v))));
    }
    match v {
        Ok(v) => Ok(Value::str(c_real(v))),
        // cf-agent says so at the info level and gives an empty string.
        Err(e) => {
            crate::info!("eval error: {e} (input '{expr}')");
            Ok(Value::str(String::new()))
        }
    }
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
    // Its scanner also reads `inf`, `nan` and hexadecimal numbers.
    let scanned = || {
        let t = s.trim_start().trim_start_matches(['+', '-']);
        let special = ["inf", "nan", "0x"]
            .iter()
            .any(|p| t.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p)));
        special.then(|| parse_c_double(s))
    };
    match parse_real(s).ok().or_else(scanned) {
        Some(f) => Ok(Value::str(c_long_of_double(f).to_string())),
        None => Err(args.fail(format!("'{s}' is not a number"))),
    }
}

/// A real converted to an integer as cf-agent's C cast does on x86-64:
/// the decimals dropped, and what does not fit (infinities, NaN, beyond
/// 2^63) the smallest integer.
fn c_long_of_double(f: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.is_finite() && f.trunc() < LIMIT && f.trunc() >= -LIMIT {
        f.trunc() as i64
    } else {
        i64::MIN
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

/// How deep parentheses may nest before an expression is refused, so that
/// a hostile one cannot exhaust the stack.
const MAX_MATH_DEPTH: usize = 200;

/// The constants of `eval`, tried in this order, each a prefix of what
/// follows (so `pi_2` reads as `pi`, and anything after `e` as `e`).
const CONSTANTS: [(&str, f64); 13] = [
    ("e", std::f64::consts::E),
    ("log2e", std::f64::consts::LOG2_E),
    ("log10e", std::f64::consts::LOG10_E),
    ("ln2", std::f64::consts::LN_2),
    ("ln10", std::f64::consts::LN_10),
    ("pi", std::f64::consts::PI),
    ("pi_2", std::f64::consts::FRAC_PI_2),
    ("pi_4", std::f64::consts::FRAC_PI_4),
    ("1_pi", std::f64::consts::FRAC_1_PI),
    ("2_pi", std::f64::consts::FRAC_2_PI),
    ("2_sqrtpi", std::f64::consts::FRAC_2_SQRT_PI),
    ("sqrt2", std::f64::consts::SQRT_2),
    ("sqrt1_2", std::f64::consts::FRAC_1_SQRT_2),
];

/// A function of one real: computed here, or the C math library's
/// function at that place of [`LIBM_NAMES`].
#[derive(Clone, Copy)]
enum Fn1 {
    Here(fn(f64) -> f64),
    Libm(usize),
}

/// The one-argument functions of `eval`, tried in this order.
const FUNCTIONS_1: [(&str, Fn1); 14] = [
    ("ceil", Fn1::Here(f64::ceil)),
    ("floor", Fn1::Here(f64::floor)),
    ("log10", Fn1::Libm(0)),
    ("log2", Fn1::Libm(1)),
    ("log", Fn1::Libm(2)),
    ("sqrt", Fn1::Here(f64::sqrt)),
    ("sin", Fn1::Libm(3)),
    ("cos", Fn1::Libm(4)),
    ("tan", Fn1::Libm(5)),
    ("asin", Fn1::Libm(6)),
    ("acos", Fn1::Libm(7)),
    ("atan", Fn1::Libm(8)),
    ("abs", Fn1::Here(f64::abs)),
    ("step", Fn1::Here(|x| if x < 0.0 { 0.0 } else { 1.0 })),
];

/// The functions `eval` takes from the C math library: those of one
/// double (places 0 to 8, named by [`FUNCTIONS_1`]), then `pow`.
const LIBM_NAMES: [&CStr; 10] = [
    c"log10", c"log2", c"log", c"sin", c"cos", c"tan", c"asin", c"acos", c"atan", c"pow",
];
const LIBM_POW: usize = 9;

type CFn1 = unsafe extern "C" fn(f64) -> f64;
type CFn2 = unsafe extern "C" fn(f64, f64) -> f64;

impl Fn1 {
    /// The value at `x`; `None` when the math library cannot be loaded.
    fn at(self, x: f64) -> Option<f64> {
        match self {
            Fn1::Here(f) => Some(f(x)),
            Fn1::Libm(i) => {
                // SAFETY: places 0 to 8 hold functions of one double,
                // whose signature CFn1 spells.
                let f = unsafe { std::mem::transmute::<usize, CFn1>(libm()?[i]) };
                // SAFETY: a pure function of a double.
                Some(unsafe { f(x) })
            }
        }
    }
}

/// `pow`, C's (as cf-agent's `^`); `None` when the math library cannot be
/// loaded.
fn pow(x: f64, y: f64) -> Option<f64> {
    // SAFETY: the place holds pow(3), whose signature CFn2 spells.
    let f = unsafe { std::mem::transmute::<usize, CFn2>(libm()?[LIBM_POW]) };
    // SAFETY: a pure function of two doubles.
    Some(unsafe { f(x, y) })
}

/// The functions of [`LIBM_NAMES`] (as addresses: a pointer is not Sync),
/// from the C math library (libm.so.6), loaded the first time `eval` calls
/// one. Linked, the library would be mapped and relocated at every start
/// of the agent (~9 page faults, ~50 µs of a 1.4 ms policy check) for the
/// few policies that take a sine; loaded, it gives cf-agent's results to
/// the last bit. `None`, with an error said once, when the library or one
/// of the functions cannot be found.
fn libm() -> Option<&'static [usize; 10]> {
    static LIBM: std::sync::OnceLock<Option<[usize; 10]>> = std::sync::OnceLock::new();
    LIBM.get_or_init(|| {
        // SAFETY: dlopen and dlsym take C string constants; the library is
        // never closed, so its functions stay valid.
        let found = unsafe {
            let lib = libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            (!lib.is_null())
                .then(|| LIBM_NAMES.map(|name| libc::dlsym(lib, name.as_ptr()) as usize))
        };
        match found {
            Some(fns) if !fns.contains(&0) => Some(fns),
            _ => {
                crate::error!("eval: the C math library (libm.so.6) could not be loaded");
                None
            }
        }
    })
    .as_ref()
}

/// Infix arithmetic as `eval` reads it: cf-agent's grammar (a PEG), read
/// the same way. A sum of products of values; the comparisons `==`, `<=`,
/// `<`, `>=`, `>` (1 or 0) rank with `+` and `-`; `^` or `**`, `*`, `/`
/// and `%` (of integers) with each other, all from the left. A value is a
/// number (`-` only joined to its digits, with an optional unit k, m, g,
/// t, p), a constant, a function of one value, or a parenthesised sum.
/// Blanks may follow numbers, operators and parentheses only. What follows
/// the longest expression at the start is ignored; no expression at all is
/// an error, except for the empty text, which is 0.
pub struct MathParser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> MathParser<'a> {
    pub fn new(s: &'a str) -> MathParser<'a> {
        MathParser {
            s: s.as_bytes(),
            pos: 0,
            depth: 0,
        }
    }

    pub fn parse(mut self) -> Result<f64, String> {
        self.space();
        match self.sum() {
            Some(v) => Ok(v),
            None if self.s.is_empty() => Ok(0.0),
            None => Err("expression could not be parsed".into()),
        }
    }

    fn space(&mut self) {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn lit(&mut self, t: &str) -> bool {
        let found = self.s[self.pos..].starts_with(t.as_bytes());
        if found {
            self.pos += t.len();
        }
        found
    }

    /// An operator or parenthesis: the text, then blanks.
    fn token(&mut self, t: &str) -> bool {
        let found = self.lit(t);
        if found {
            self.space();
        }
        found
    }

    /// One of `ops` and its right operand read by `operand`, or nothing
    /// consumed.
    fn operation(
        &mut self,
        ops: &[&str],
        operand: fn(&mut Self) -> Option<f64>,
    ) -> Option<(usize, f64)> {
        let save = self.pos;
        for (i, op) in ops.iter().enumerate() {
            if self.token(op)
                && let Some(r) = operand(self)
            {
                return Some((i, r));
            }
            self.pos = save;
        }
        None
    }

    fn sum(&mut self) -> Option<f64> {
        const OPS: [&str; 7] = ["+", "-", "==", "<=", "<", ">=", ">"];
        // cf-agent's "close enough" for equality.
        let close = |l: f64, r: f64| (l - r).abs() < 0.00000000000000001;
        let mut l = self.product()?;
        while let Some((op, r)) = self.operation(&OPS, Self::product) {
            let truth = |b: bool| if b { 1.0 } else { 0.0 };
            l = match op {
                0 => l + r,
                1 => l - r,
                2 => truth(close(l, r)),
                3 => truth(l < r || close(l, r)),
                4 => truth(l < r),
                5 => truth(l > r || close(l, r)),
                _ => truth(l > r),
            };
        }
        Some(l)
    }

    fn product(&mut self) -> Option<f64> {
        const OPS: [&str; 5] = ["^", "**", "*", "/", "%"];
        let mut l = self.value()?;
        while let Some((op, r)) = self.operation(&OPS, Self::value) {
            l = match op {
                0 | 1 => pow(l, r)?,
                2 => l * r,
                3 => l / r,
                // Of the integer parts; cf-agent dies of a zero divisor,
                // where we give the expression no value.
                _ => {
                    let (a, b) = (l as i64, r as i64);
                    if b == 0 {
                        return None;
                    }
                    a.wrapping_rem(b) as f64
                }
            };
        }
        Some(l)
    }

    fn value(&mut self) -> Option<f64> {
        if let Some(n) = self.number() {
            return Some(n * self.unit().unwrap_or(1.0));
        }
        for (name, v) in CONSTANTS {
            if self.lit(name) {
                return Some(v);
            }
        }
        if let Some(v) = self.function() {
            return Some(v);
        }
        let save = self.pos;
        if self.depth < MAX_MATH_DEPTH && self.token("(") {
            self.depth += 1;
            let v = self.sum();
            self.depth -= 1;
            if let Some(v) = v
                && self.token(")")
            {
                return Some(v);
            }
        }
        self.pos = save;
        None
    }

    /// `-`? digits with an optional fraction, or `-`? `.` digits; then
    /// blanks.
    fn number(&mut self) -> Option<f64> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.s.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - from
        };
        self.lit("-");
        let whole = digits(self);
        let ok = if whole > 0 {
            if self.lit(".") {
                digits(self);
            }
            true
        } else {
            self.lit(".") && digits(self) > 0
        };
        if !ok {
            self.pos = start;
            return None;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("0");
        self.space();
        Some(parse_c_double(text))
    }

    fn unit(&mut self) -> Option<f64> {
        let m = match self.s.get(self.pos)?.to_ascii_lowercase() {
            b'k' => 1e3,
            b'm' => 1e6,
            b'g' => 1e9,
            b't' => 1e12,
            b'p' => 1e15,
            _ => return None,
        };
        self.pos += 1;
        self.space();
        Some(m)
    }

    /// A function name, `(`, one value, `)`.
    fn function(&mut self) -> Option<f64> {
        let save = self.pos;
        let (_, f) = FUNCTIONS_1.into_iter().find(|(name, _)| self.lit(name))?;
        if self.depth < MAX_MATH_DEPTH && self.token("(") {
            self.depth += 1;
            let v = self.value();
            self.depth -= 1;
            if let Some(v) = v
                && self.token(")")
            {
                return f.at(v);
            }
        }
        self.pos = save;
        None
    }
}

/// A real as C's `printf("%lf")` writes it: six decimals, and `inf`,
/// `-inf`, `nan` or `-nan`.
fn c_real(v: f64) -> String {
    match (v.is_nan(), v.is_infinite()) {
        (true, _) if v.is_sign_negative() => "-nan".into(),
        (true, _) => "nan".into(),
        (_, true) if v < 0.0 => "-inf".into(),
        (_, true) => "inf".into(),
        _ => format!("{v:.6}"),
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
        assert_eq!(calc("-2 + 5 % 3"), Ok(0.0));
        assert_eq!(calc("1k + 1"), Ok(1001.0));
        assert_eq!(calc("3 > 2"), Ok(1.0));
        assert_eq!(calc("floor(2.7) + ceil(0.2)"), Ok(3.0));
        assert_eq!(calc("1/0"), Ok(f64::INFINITY));
        assert!(calc("nope(1)").is_err());
        assert!(calc("5 % 0").is_err());
    }

    /// What cf-agent 3.21 gives for the corners of its grammar.
    #[test]
    fn read_as_cf_agent_reads() {
        // From the left, comparisons as low as sums.
        assert_eq!(calc("2^3^2"), Ok(64.0));
        assert_eq!(calc("3 == 1 + 2"), Ok(2.0));
        // The longest expression at the start counts, the rest is ignored.
        assert_eq!(calc("1 +"), Ok(1.0));
        assert_eq!(calc("1 != 2"), Ok(1.0));
        assert_eq!(calc("pi + 1"), Ok(std::f64::consts::PI));
        assert_eq!(calc("pi_2"), Ok(std::f64::consts::PI));
        assert_eq!(calc("exp(1)"), Ok(std::f64::consts::E));
        assert_eq!(calc("1e5"), Ok(1.0));
        // Units after blanks; no unary plus or detached minus.
        assert_eq!(calc(" 5 k"), Ok(5000.0));
        assert_eq!(calc("2 ^ -1"), Ok(0.5));
        assert!(calc("+ 200").is_err());
        assert!(calc("- 200").is_err());
        assert!(calc("x").is_err());
        assert!(calc("  ").is_err());
        // A function takes one value, not a sum.
        assert!(calc("sqrt(1+2)").is_err());
        assert_eq!(calc(""), Ok(0.0));
        assert_eq!(c_real(calc("3 / 0").unwrap_or_default()), "inf");
        assert_eq!(c_real(calc("-3/0").unwrap_or_default()), "-inf");
    }

    #[test]
    fn deep_nesting_is_refused_not_fatal() {
        let deep = "(".repeat(100_000) + "1" + &")".repeat(100_000);
        assert!(calc(&deep).is_err());
    }
}
