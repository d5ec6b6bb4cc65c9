//! Checking one literal value against an attribute's type and range, the
//! way cf-promises does before anything is evaluated.
//!
//! The rules were established by running cf-promises 3.21 on small
//! policies; each function says what it accepts. A value that still holds
//! a variable reference is left alone wherever cf-promises leaves it alone
//! (it is checked again once expanded, at run time).

use super::ValueType;
use crate::syntax::MAX_NESTING;
use crate::values::regex::RegexCache;

/// Why a literal does not fit its attribute. The text is the sentence the
/// validator shows, without the attribute's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    pub message: String,
    pub help: Option<String>,
}

impl Misfit {
    fn new(message: impl Into<String>) -> Misfit {
        Misfit {
            message: message.into(),
            help: None,
        }
    }

    fn help(mut self, help: impl Into<String>) -> Misfit {
        self.help = Some(help.into());
        self
    }
}

/// The range that marks an attribute holding an absolute file name.
const ABSOLUTE_PATH_RANGE: &str = "\"?(/.*)";

/// The range of class expressions (`expression`, `and`, `or`, ...).
const CONTEXT_RANGE: &str = r"[a-zA-Z0-9_!&@@$|.()\[\]{}:]+";

/// Whether a byte is in [`CONTEXT_RANGE`]'s class.
fn is_context_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_!&@$|.()[]{}:".contains(&b)
}

/// Whether `s` holds a variable reference (`$(x)`, `${x}`, `@(x)`, `@{x}`).
pub fn has_var_ref(s: &str) -> bool {
    // One pass for both sigils (four substring searches took ~110
    // instructions for each value of a policy).
    let b = s.as_bytes();
    crate::scan::memchr2_iter(b'$', b'@', b).any(|i| matches!(b.get(i + 1), Some(b'(' | b'{')))
}

/// Whether `s` is exactly one variable reference, such as `$(x)` or
/// `@{list}`, with nothing around it.
pub fn is_naked_var(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 4 || !matches!(b[0], b'$' | b'@') {
        return false;
    }
    let (open, close) = match b[1] {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        _ => return false,
    };
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(1) {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return i == b.len() - 1;
            }
        }
    }
    false
}

/// Checks a literal (one scalar, or one item of a list) of type `ty`.
/// `lval` matters for file modes, whose syntax is checked beyond the range.
pub fn check_literal(
    lval: &str,
    value: &str,
    ty: ValueType,
    range: &str,
    regexes: &mut RegexCache,
) -> Result<(), Misfit> {
    match ty {
        ValueType::String | ValueType::Slist => check_string(lval, value, range, regexes),
        ValueType::Int | ValueType::Ilist => check_int(value, range),
        ValueType::Real | ValueType::Rlist => check_real(value, range),
        ValueType::Option | ValueType::Olist => check_option(value, range),
        ValueType::Context | ValueType::Clist => check_context(value, range, regexes),
        ValueType::Irange => check_int_range(value, range),
        ValueType::Rrange => check_real_range(value, range),
        ValueType::Body | ValueType::Bundle | ValueType::Data => Ok(()),
    }
}

/// The literal arguments of a call to `f` that do not fit their
/// parameter's type and range, as cf-agent checks them against the
/// function's template before it calls it: each with its position, its
/// text and why. Class expressions are left to the call; a value naming a
/// variable, and a nested call, are not literal.
pub fn misfit_literal_arguments(
    f: &super::FunctionDef,
    args: &[crate::syntax::ast::Rval],
    regexes: &mut RegexCache,
) -> Vec<(usize, String, Misfit)> {
    use crate::syntax::ast::Rval;
    let mut out = Vec::new();
    for (i, (a, p)) in args.iter().zip(f.params).enumerate() {
        if matches!(p.ty, ValueType::Context | ValueType::Clist) || p.range.is_empty() {
            continue;
        }
        // Unquoted numbers are symbols to the parser.
        let text = match a {
            Rval::String(s) => s.value.as_str(),
            Rval::Symbol(i) => i.name.as_str(),
            _ => continue,
        };
        if let Err(m) = check_literal("", text, p.ty, p.range, regexes) {
            out.push((i, text.to_string(), m));
        }
    }
    out
}

fn full_match(pattern: &str, value: &str, regexes: &mut RegexCache) -> bool {
    // The range of most string attributes: patterns are compiled with
    // dotall, so it matches any value in full, and PCRE is not asked.
    if pattern == ".*" {
        return true;
    }
    // Asked of every class expression of a policy: the class, byte by byte
    // (PCRE took a thousand instructions a value).
    if pattern == CONTEXT_RANGE {
        return value == pattern || (!value.is_empty() && value.bytes().all(is_context_byte));
    }
    // A pattern that does not compile matches nothing but itself, as in
    // cf-promises, which also accepts a value equal to the pattern text.
    value == pattern || regexes.get(pattern).is_ok_and(|re| re.is_full_match(value))
}

fn check_string(
    lval: &str,
    value: &str,
    range: &str,
    regexes: &mut RegexCache,
) -> Result<(), Misfit> {
    if range.is_empty() || is_naked_var(value) {
        return Ok(());
    }
    if lval == "mode" || lval == "search_mode" {
        check_mode(value)?;
    }
    if full_match(range, value, regexes) || has_var_ref(value) {
        return Ok(());
    }
    if value.is_empty() {
        Err(Misfit::new("an empty value is not allowed"))
    } else if range == ABSOLUTE_PATH_RANGE {
        Err(Misfit::new(format!("'{value}' is not an absolute path")))
    } else {
        Err(Misfit::new(format!("'{value}' is out of range"))
            .help(format!("the value must match the pattern {range}")))
    }
}

fn check_context(value: &str, range: &str, regexes: &mut RegexCache) -> Result<(), Misfit> {
    if range.is_empty() || full_match(range, value, regexes) {
        return Ok(());
    }
    Err(
        Misfit::new(format!("'{value}' is not a valid class expression"))
            .help(format!("a class expression must match {range}")),
    )
}

/// An option must be one of the words of the range; cf-promises also lets
/// an empty value through.
fn check_option(value: &str, range: &str) -> Result<(), Misfit> {
    // Split on the byte: a `char` pattern searched per item cost more
    // than the check itself.
    let allowed = || {
        range
            .as_bytes()
            .split(|&b| b == b',')
            .any(|w| w == value.as_bytes())
    };
    if value.is_empty() || is_naked_var(value) || allowed() {
        return Ok(());
    }
    Err(
        Misfit::new(format!("'{value}' is not one of the allowed values"))
            .help(format!("allowed: {}", range.replace(',', ", "))),
    )
}

/// `"min,max"` of a numeric range; `inf` as the maximum means the integer
/// infinity cf-promises uses.
fn int_bounds(range: &str) -> (i64, i64) {
    let (lo, hi) = range.split_once(',').unwrap_or((range, range));
    let lo = lo
        .trim()
        .trim_start_matches('+')
        .parse()
        .unwrap_or(i64::MIN);
    let hi = match hi.trim() {
        "inf" => CF_INFINITY,
        h => h.trim_start_matches('+').parse().unwrap_or(i64::MAX),
    };
    (lo, hi)
}

fn real_bounds(range: &str) -> (f64, f64) {
    let (lo, hi) = range.split_once(',').unwrap_or((range, range));
    (
        lo.trim().parse().unwrap_or(f64::MIN),
        hi.trim().parse().unwrap_or(f64::MAX),
    )
}

/// The integer `inf` stands for in CFEngine.
const CF_INFINITY: i64 = 999_999_999;

/// Reads an integer as CFEngine does: optional blanks and sign, digits,
/// then at most one unit character (`k`, `m`, `g` powers of 1000; `K`,
/// `M`, `G` powers of 1024; `%` a percentage, kept negative; any other
/// character counts as no unit) followed only by blanks. `inf` and `now`
/// are numbers too.
pub fn parse_cf_int(s: &str) -> Result<i64, String> {
    match s {
        "inf" => return Ok(CF_INFINITY),
        // The start of the run; any present-day time is in every range
        // that accepts it, so the exact value does not matter here.
        "now" => return Ok(1_700_000_000),
        _ => {}
    }
    let t = s.trim_start();
    let (neg, digits_at) = match t.as_bytes().first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let rest = &t[digits_at..];
    let ndigits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if ndigits == 0 {
        return Err(format!("'{s}' is not an integer"));
    }
    let magnitude: i128 = rest[..ndigits].bytes().fold(0i128, |acc, d| {
        (acc * 10 + i128::from(d - b'0')).min(i128::from(i64::MAX))
    });
    let mut value = if neg { -magnitude } else { magnitude };
    let mut tail = rest[ndigits..].chars();
    if let Some(unit) = tail.next() {
        if !tail.as_str().chars().all(char::is_whitespace) {
            return Err(format!(
                "'{s}' is not an integer: unexpected '{}' after the number",
                &rest[ndigits..]
            ));
        }
        value = match unit {
            'k' => value * 1000,
            'K' => value * 1024,
            'm' => value * 1_000_000,
            'M' => value * 1024 * 1024,
            'g' => value * 1_000_000_000,
            'G' => value * 1024 * 1024 * 1024,
            '%' if !(0..=100).contains(&value) => {
                return Err(format!("percentage '{s}' is not between 0 and 100"));
            }
            '%' => -value,
            _ => value,
        };
    }
    Ok(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

fn check_int(value: &str, range: &str) -> Result<(), Misfit> {
    if has_var_ref(value) {
        return Ok(());
    }
    let v = parse_cf_int(value).map_err(Misfit::new)?;
    let (lo, hi) = int_bounds(range);
    if v < lo || v > hi {
        return Err(Misfit::new(format!("integer '{value}' is out of range"))
            .help(format!("the value must be between {lo} and {hi}")));
    }
    Ok(())
}

/// Reads a real number as CFEngine does: the longest prefix `strtod`
/// would read (decimal, exponent, hexadecimal, `inf`, `nan`), then an
/// optional unit character as for integers; anything but white space
/// after that makes it no number (cf-promises: "Anomalous ending").
pub fn parse_cf_real(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let sign = if b.first() == Some(&b'-') { -1.0 } else { 1.0 };
    let lower = t[i..].to_ascii_lowercase();
    if lower.starts_with("nan") {
        return Some(f64::NAN);
    }
    if lower.starts_with("inf") {
        return Some(sign * f64::INFINITY);
    }
    let start = i;
    if lower.starts_with("0x") {
        i += 2;
        let hex_start = i;
        let mut mantissa = 0f64;
        let mut scale = 0i32;
        let mut seen_point = false;
        while i < b.len() {
            match b[i] {
                c if c.is_ascii_hexdigit() => {
                    mantissa = mantissa * 16.0 + f64::from((c as char).to_digit(16).unwrap_or(0));
                    if seen_point {
                        scale -= 4;
                    }
                }
                b'.' if !seen_point => seen_point = true,
                _ => break,
            }
            i += 1;
        }
        if i == hex_start {
            // "0x" with no digits reads as the number 0.
            return Some(0.0);
        }
        if matches!(b.get(i), Some(b'p' | b'P')) {
            let exp: String = t[i + 1..]
                .chars()
                .enumerate()
                .take_while(|&(k, c)| c.is_ascii_digit() || (k == 0 && (c == '-' || c == '+')))
                .map(|(_, c)| c)
                .collect();
            scale += exp.parse::<i32>().unwrap_or(0);
        }
        return Some(sign * mantissa * 2f64.powi(scale));
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if !t[start..i].bytes().any(|c| c.is_ascii_digit()) {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let mut v: f64 = t[..i].parse().ok()?;
    // One character may follow the number (a unit, or anything, as
    // sscanf's `%lf%c` reads it); more is an "anomalous ending".
    let mut after = t[i..].chars();
    after.next();
    if !after.as_str().trim().is_empty() {
        return None;
    }
    v *= match b.get(i) {
        Some(b'k') => 1e3,
        Some(b'K') => 1024.0,
        Some(b'm') => 1e6,
        Some(b'M') => 1024.0 * 1024.0,
        Some(b'g') => 1e9,
        Some(b'G') => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    Some(v)
}

fn check_real(value: &str, range: &str) -> Result<(), Misfit> {
    if value == "inf" {
        return Err(Misfit::new(
            "'inf' is an integer keyword and cannot be a real number",
        ));
    }
    if has_var_ref(value) {
        return Ok(());
    }
    let (lo, hi) = real_bounds(range);
    match parse_cf_real(value) {
        // NaN compares false both ways and passes, as in cf-promises.
        Some(v) if !(v < lo || v > hi) => Ok(()),
        Some(_) => Err(
            Misfit::new(format!("real number '{value}' is out of range"))
                .help(format!("the value must be between {lo} and {hi}")),
        ),
        None => Err(Misfit::new(format!("'{value}' is not a real number"))),
    }
}

fn check_int_range(value: &str, range: &str) -> Result<(), Misfit> {
    if value.starts_with('[') || value.starts_with('(') {
        return Err(Misfit::new("a range is written 'a,b', without brackets"));
    }
    if has_var_ref(value) {
        return Ok(());
    }
    let parts: Vec<&str> = value.split(',').filter(|p| !p.is_empty()).collect();
    if parts.len() != 2 {
        return Err(Misfit::new(format!(
            "'{value}' is not a range of the form 'a,b'"
        )));
    }
    let (lo, hi) = int_bounds(range);
    for p in parts {
        // Unreadable ends count as out of range, as in cf-promises.
        let v = parse_cf_int(p).unwrap_or(i64::MIN);
        if v < lo || v > hi {
            return Err(
                Misfit::new(format!("'{p}' in range '{value}' is out of range"))
                    .help(format!("both ends must be between {lo} and {hi}")),
            );
        }
    }
    Ok(())
}

fn check_real_range(value: &str, range: &str) -> Result<(), Misfit> {
    if value.starts_with('[') || value.starts_with('(') {
        return Err(Misfit::new("a range is written 'a,b', without brackets"));
    }
    if value == "inf" {
        return Err(Misfit::new(
            "'inf' is an integer keyword and cannot be a real number",
        ));
    }
    if has_var_ref(value) {
        return Ok(());
    }
    let parts: Vec<&str> = value.split(',').filter(|p| !p.is_empty()).collect();
    if parts.len() != 2 {
        return Err(Misfit::new(format!(
            "'{value}' is not a range of the form 'a,b'"
        )));
    }
    let (lo, hi) = real_bounds(range);
    for p in parts {
        match parse_cf_real(p) {
            Some(v) if !(v < lo || v > hi) => {}
            _ => {
                return Err(
                    Misfit::new(format!("'{p}' in range '{value}' is out of range"))
                        .help(format!("both ends must be between {lo} and {hi}")),
                );
            }
        }
    }
    Ok(())
}

/// Checks a file mode the way cf-agent reads one: octal digits, or
/// symbolic clauses `who op perms` (`u+rwx,go-w`) separated by commas.
/// Like cf-agent, it rejects a clause with two operators, an unknown
/// character, and a mode that sets nothing ("0" and "u=" are incomplete,
/// "000" and "0000" are not); mixing forms is only worth a warning there,
/// so it passes here.
pub fn check_mode(mode: &str) -> Result<(), Misfit> {
    let bad = |why: &str| {
        Err(
            Misfit::new(format!("'{mode}' is not a valid file mode: {why}"))
                .help("write octal digits such as 0644, or clauses such as u+rwx,go-w"),
        )
    };
    // `who` is true right after a comma, where a clause starts again.
    let mut who = false;
    let mut got_op = false;
    let mut bits: u32 = 0;
    let mut affected: u32 = 0;
    let b = mode.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'a' => affected |= 0o7777,
            b'u' => affected |= 0o4700,
            b'g' => affected |= 0o2070,
            b'o' => affected |= 0o0007,
            b'+' | b'-' | b'=' => {
                if got_op {
                    return bad("a clause has more than one of + - =");
                }
                got_op = true;
                who = false;
            }
            b'r' => bits |= 0o444 & affected,
            b'w' => bits |= 0o222 & affected,
            b'x' => bits |= 0o111 & affected,
            b's' => bits |= 0o6000 & affected,
            b't' => bits |= 0o1000,
            b'0'..=b'7' => {
                let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                // Like sscanf's %o: octal digits up to the first other one.
                let octal = b[i..i + digits]
                    .iter()
                    .take_while(|c| (b'0'..=b'7').contains(c))
                    .fold(0u32, |acc, d| {
                        acc.wrapping_mul(8).wrapping_add(u32::from(d - b'0'))
                    });
                // File-type bits cannot be set and are dropped.
                bits = octal & !0o170000;
                if bits > 0o7777 {
                    return bad("the number is too large");
                }
                got_op = true;
                who = false;
                affected = 0o7777;
                i += digits;
                continue;
            }
            b',' => {
                bits = 0;
                affected = 0;
                got_op = false;
                who = true;
            }
            c => return bad(&format!("unexpected '{}'", c as char)),
        }
        i += 1;
    }
    if (who || bits == 0) && mode != "0000" && mode != "000" {
        return bad("it is incomplete");
    }
    Ok(())
}

/// Checks a class expression written as a literal (an `if` or
/// `ifvarclass` value, or a class guard) as cf-promises does: some prefix
/// of it must be a well-formed expression. Names are made of letters,
/// digits, `_`, `:`, `[` and `]`, and variable references; operators are
/// `.`, `&`, `|`, `||` and `!`; no blanks are skipped. Returns the byte
/// offset where reading failed.
pub fn check_class_literal(s: &str) -> Result<(), ClassLiteralError> {
    let mut p = ClassLiteral {
        s: s.as_bytes(),
        pos: 0,
        depth: 0,
        too_deep: false,
    };
    p.or().map_err(|at| ClassLiteralError {
        at,
        too_deep: p.too_deep,
    })
}

/// Where a class expression literal cannot be read, and whether that is
/// because it nests `(` and `!` deeper than [`MAX_NESTING`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassLiteralError {
    pub at: usize,
    pub too_deep: bool,
}

struct ClassLiteral<'a> {
    s: &'a [u8],
    pos: usize,
    /// How many `(` and `!` enclose the cursor; the checker recurses, so
    /// it stops at [`MAX_NESTING`] as the class expression parser does.
    depth: usize,
    too_deep: bool,
}

impl ClassLiteral<'_> {
    fn or(&mut self) -> Result<(), usize> {
        self.and()?;
        while self.s.get(self.pos) == Some(&b'|') {
            self.pos += 1;
            if self.s.get(self.pos) == Some(&b'|') {
                self.pos += 1;
            }
            self.and()?;
        }
        Ok(())
    }

    fn and(&mut self) -> Result<(), usize> {
        self.not()?;
        while matches!(self.s.get(self.pos), Some(b'.' | b'&')) {
            self.pos += 1;
            self.not()?;
        }
        Ok(())
    }

    fn not(&mut self) -> Result<(), usize> {
        if self.s.get(self.pos) == Some(&b'!') {
            self.pos += 1;
            if self.s.get(self.pos) == Some(&b'!') {
                return Err(self.pos);
            }
            return self.nested(Self::primary);
        }
        self.primary()
    }

    fn nested(&mut self, inner: fn(&mut Self) -> Result<(), usize>) -> Result<(), usize> {
        if self.depth >= MAX_NESTING {
            self.too_deep = true;
            return Err(self.pos);
        }
        self.depth += 1;
        let r = inner(self);
        self.depth -= 1;
        r
    }

    fn primary(&mut self) -> Result<(), usize> {
        if self.s.get(self.pos) == Some(&b'(') {
            return self.nested(|p| {
                p.pos += 1;
                p.or()?;
                if p.s.get(p.pos) != Some(&b')') {
                    return Err(p.pos);
                }
                p.pos += 1;
                Ok(())
            });
        }
        let start = self.pos;
        loop {
            match self.s.get(self.pos) {
                Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'[' | b']') => {
                    self.pos += 1;
                }
                Some(b'$' | b'@') => match self.var_ref_len() {
                    Some(n) => self.pos += n,
                    None => break,
                },
                _ => break,
            }
        }
        if self.pos == start {
            Err(self.pos)
        } else {
            Ok(())
        }
    }

    /// The length of a complete `$(...)` or `${...}` at the cursor.
    fn var_ref_len(&self) -> Option<usize> {
        let rest = &self.s[self.pos..];
        let close = match rest.get(1) {
            Some(b'(') => b')',
            Some(b'{') => b'}',
            _ => return None,
        };
        let open = rest[1];
        let mut depth = 0usize;
        for (i, &c) in rest.iter().enumerate().skip(1) {
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_options_found_as_before() {
        let old =
            |s: &str| s.contains("$(") || s.contains("${") || s.contains("@(") || s.contains("@{");
        for s in [
            "", "$", "@", "a$", "$x", "$(x)", "a ${y}", "@(l)", "x@{l}", "$@(", "$$", "@@{",
            "a@b.c",
        ] {
            assert_eq!(has_var_ref(s), old(s), "{s:?}");
        }
        assert!(check_option("true", "true,false,yes").is_ok());
        assert!(check_option("yes", "true,false,yes").is_ok());
        assert!(check_option("ye", "true,false,yes").is_err());
        assert!(check_option("true,false", "true,false,yes").is_err());
    }

    #[test]
    fn ranges_answered_without_pcre_answer_as_pcre_does() {
        let mut regexes = RegexCache::default();
        let values = [
            "",
            "linux",
            "(linux|solaris).!windows",
            "a&b",
            "$(x)",
            "@{l}",
            "ns:c[1]",
            "a b",
            "a-b",
            "a\nb",
            "\n",
            "é",
            "x\r",
            "a=b",
            CONTEXT_RANGE,
        ];
        for pattern in [".*", CONTEXT_RANGE] {
            let re = regexes.get(pattern).unwrap();
            for v in values {
                let by_pcre = v == pattern || re.is_full_match(v);
                assert_eq!(
                    full_match(pattern, v, &mut regexes),
                    by_pcre,
                    "{pattern} {v:?}"
                );
            }
        }
    }

    #[test]
    fn integers_as_cfengine_reads_them() {
        for ok in [
            "12", "12k", "1K", "2m", "3M", "1g", "1G", "50%", " 12", "12 ", "+5", "-0", "inf",
            "now", "012", "1t",
        ] {
            assert!(parse_cf_int(ok).is_ok(), "{ok}");
        }
        for bad in ["abc", "101%", "1.5", "0x10", "12kb", "1e3", "12 k", ""] {
            assert!(parse_cf_int(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_cf_int("2k"), Ok(2000));
        assert_eq!(parse_cf_int("1K"), Ok(1024));
        assert_eq!(parse_cf_int("50%"), Ok(-50));
    }

    #[test]
    fn int_ranges() {
        let r = "-99999999999,99999999999";
        assert!(check_int("99999999999", r).is_ok());
        assert!(check_int("100000000000", r).is_err());
        assert!(check_int("-100000000000", r).is_err());
        assert!(check_int("$(x)", r).is_ok());
        assert!(check_int("-5", "0,99999999999").is_err());
        assert!(check_int_range("1,2", "0,inf").is_ok());
        assert!(check_int_range("1,2,3", "0,inf").is_err());
        assert!(check_int_range("-1,2", "0,inf").is_err());
        assert!(check_int_range("[1,2]", "0,inf").is_err());
    }

    #[test]
    fn reals_as_cfengine_reads_them() {
        let r = "-9.99999E100,9.99999E100";
        for ok in [
            "1.5", "1e3", "1k", "1.5x", " 1.5", "nan", "50%", "0x1p3", "$(x)",
        ] {
            assert!(check_real(ok, r).is_ok(), "{ok}");
        }
        for bad in ["inf", "abc", "-inf", "1e200", "1.2.3", "1.2e.3", "1.5qq"] {
            assert!(check_real(bad, r).is_err(), "{bad}");
        }
    }

    #[test]
    fn options() {
        let r = "true,false,yes,no,on,off";
        assert!(check_option("true", r).is_ok());
        assert!(check_option("$(x)", r).is_ok());
        let e = check_option("maybe", r).unwrap_err();
        assert!(e.help.unwrap_or_default().contains("yes"));
        // Only a whole reference is deferred.
        assert!(check_option("x$(x)", r).is_err());
        assert!(check_option("", r).is_ok());
    }

    #[test]
    fn strings_against_ranges() {
        let mut re = RegexCache::default();
        assert!(check_string("edit_template", "/etc/x", ABSOLUTE_PATH_RANGE, &mut re).is_ok());
        let e = check_string("edit_template", "relative", ABSOLUTE_PATH_RANGE, &mut re);
        assert!(e.unwrap_err().message.contains("absolute"));
        assert!(check_string("edit_template", "", ABSOLUTE_PATH_RANGE, &mut re).is_err());
        assert!(check_string("edit_template", "x$(x)", ABSOLUTE_PATH_RANGE, &mut re).is_ok());
        assert!(check_string("owners", "ro ot", "[a-zA-Z0-9_$.-]+", &mut re).is_err());
        assert!(check_string("anything", "", "", &mut re).is_ok());
    }

    #[test]
    fn modes_as_cf_agent_reads_them() {
        for ok in [
            "644",
            "0644",
            "7777",
            "17777",
            "u+rwx",
            "a=r",
            "ugo+rw",
            "u+s",
            "o+t",
            "u+rwx,go-w",
            "644,u+x",
            "u+x,644",
            "64",
            "a+rwxst",
            "000",
            "0000",
        ] {
            assert!(check_mode(ok).is_ok(), "{ok}");
        }
        for bad in [
            "+x",
            "u=rwx,g=rx,o=",
            "=",
            "x",
            "u+",
            "8",
            "u-",
            ",",
            "u+rwx,",
            "rwx",
            "g+X",
            "u+rw-x",
            "u=r+w",
            "0",
            "00000",
            "999",
        ] {
            assert!(check_mode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn class_literals_as_cf_promises_reads_them() {
        for ok in [
            "$(x).a",
            "a.$(x)",
            "$(x)",
            "${x}",
            "a||b",
            "a-b",
            "a=b",
            "any ",
            "a::b",
            "ns:a",
            "a.b)",
            "@(x)",
            "isvariable(x)",
            "a b",
            "a.(b|c).!d",
            "a&!b",
            "(a)",
            "a$(x)",
            "[a]",
            "_a",
            "1a",
            "a.[b]",
            "!(!a)",
            "a$(x",
            "$(x)(y)",
        ] {
            assert!(check_class_literal(ok).is_ok(), "{ok}");
        }
        for bad in [
            "a&&b", "!!a", "a. b", " ", "()", "a|", "", "-a", ".a", "&a", "|a", "éa", "a.-b",
            "a|||b", "a.!!b", "( a)", "(a )", "! a", "a.b.", "$(x.", "\"a\"", "a..b", "a.(b",
        ] {
            assert!(check_class_literal(bad).is_err(), "{bad}");
        }
        let deep = |n: usize, open: &str| format!("{}a{}", open.repeat(n), ")".repeat(n));
        assert!(check_class_literal(&deep(MAX_NESTING, "(")).is_ok());
        assert!(check_class_literal(&deep(MAX_NESTING / 2, "!(")).is_ok());
        for open in ["(", "!("] {
            let e = check_class_literal(&deep(100_000, open)).unwrap_err();
            assert!(e.too_deep, "{e:?}");
        }
        assert!(!check_class_literal("a..b").unwrap_err().too_deep);
    }

    proptest::proptest! {
        /// No literal makes a checker panic, whatever its type.
        #[test]
        fn literals_never_panic(value in "\\PC{0,12}") {
            let mut re = RegexCache::default();
            for ty in [ValueType::String, ValueType::Int, ValueType::Real, ValueType::Option, ValueType::Context, ValueType::Irange, ValueType::Rrange] {
                let _ = check_literal("mode", &value, ty, "0,99", &mut re);
            }
            let _ = check_class_literal(&value);
            let _ = check_mode(&value);
            let _ = parse_cf_real(&value);
            let _ = is_naked_var(&value);
        }
    }

    #[test]
    fn naked_vars() {
        assert!(is_naked_var("$(x)"));
        assert!(is_naked_var("@{x}"));
        assert!(is_naked_var("$(a[$(b)])"));
        assert!(!is_naked_var("$(x)y"));
        assert!(!is_naked_var("$(x"));
        assert!(!is_naked_var("x"));
    }
}
