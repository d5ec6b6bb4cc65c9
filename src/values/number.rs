//! Numbers as cf-agent reads them, and a value converted to the type a
//! variable is declared with.

use super::value::{DataType, Value};

/// Converts an evaluated value to the declared type, as cf-agent stores it.
pub fn convert(dtype: DataType, v: Value) -> Result<Value, String> {
    match (dtype, v) {
        (DataType::String, Value::Scalar(s)) => Ok(Value::Scalar(s)),
        (DataType::Int, Value::Scalar(s)) => parse_int(&s).map(|i| Value::Scalar(i.to_string())),
        (DataType::Real, Value::Scalar(s)) => {
            parse_real(&s).map(|r| Value::Scalar(format!("{r:.6}")))
        }
        (DataType::Slist, Value::List(l)) => Ok(Value::List(l)),
        (DataType::Ilist, Value::List(l)) => l
            .iter()
            .map(|s| {
                // cf-agent keeps the text of each integer in a list, and an
                // item still naming a variable (`$(x)`, `${x}`, `@{x}`) as it is.
                if super::refs::has_refs(s) {
                    Ok(s.clone())
                } else {
                    parse_int(s).map(|_| s.clone())
                }
            })
            .collect::<Result<_, _>>()
            .map(Value::List),
        (DataType::Rlist, Value::List(l)) => l
            .iter()
            .map(|s| {
                // cf-agent keeps the text of each real in a list, and an
                // item still naming a variable (`$(x)`, `${x}`, `@{x}`) as it is.
                if super::refs::has_refs(s) {
                    Ok(s.clone())
                } else {
                    parse_real(s).map(|_| s.clone())
                }
            })
            .collect::<Result<_, _>>()
            .map(Value::List),
        (DataType::Data, Value::Data(mut d)) => {
            // Stored containers hold numbers as cf-agent stores them.
            crate::values::json::normalize_shared(&mut d);
            Ok(Value::Data(d))
        }
        (DataType::Data, Value::List(l)) => Ok(Value::data(serde_json::Value::Array(
            l.into_iter().map(serde_json::Value::String).collect(),
        ))),
        (DataType::Data, Value::Scalar(s)) => crate::values::json::parse(&s)
            .map(|mut j| {
                crate::values::json::normalize(&mut j);
                Value::data(j)
            })
            .map_err(|e| format!("'{s}' is not valid JSON: {e}")),
        (t, v) => Err(format!(
            "a {} value cannot be stored as {}",
            v.natural_type().as_str(),
            t.as_str()
        )),
    }
}

/// Integers as cf-agent reads them: optional blanks and sign, digits, then
/// at most one character, which is a unit (k, m, g are powers of 1000; K,
/// M, G powers of 1024), a percentage (`50%`, kept as -50, as cf-agent
/// represents percentages) or ignored, and then only blanks. `inf` is
/// cf-agent's infinity.
pub fn parse_int(s: &str) -> Result<i64, String> {
    let t = s.trim_start();
    if t.trim_end() == "inf" {
        return Ok(999_999_999);
    }
    if t.trim_end() == "-inf" {
        return Ok(-999_999_999);
    }
    let bad = || format!("'{s}' is not an integer");
    let b = t.as_bytes();
    let sign = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = b[sign..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return Err(bad());
    }
    let n: i64 = t[..sign + digits].parse().map_err(|_| bad())?;
    let mut rest = t[sign + digits..].chars();
    let unit = rest.next();
    if !rest.as_str().trim().is_empty() {
        return Err(bad());
    }
    Ok(match unit {
        Some('k') => n.saturating_mul(1_000),
        Some('K') => n.saturating_mul(1_024),
        Some('m') => n.saturating_mul(1_000_000),
        Some('M') => n.saturating_mul(1_048_576),
        Some('g') => n.saturating_mul(1_000_000_000),
        Some('G') => n.saturating_mul(1_073_741_824),
        Some('%') if (0..=100).contains(&n) => -n,
        Some('%') => return Err(format!("percentage '{s}' is out of range")),
        _ => n,
    })
}

/// Reals as cf-agent reads them: a number (sign, digits, fraction,
/// exponent) with the same optional unit or percentage as integers, then
/// only blanks.
pub fn parse_real(s: &str) -> Result<f64, String> {
    let t = s.trim_start();
    let bad = || format!("'{s}' is not a real number");
    let len = float_prefix_len(t);
    let d: f64 = t[..len].parse().map_err(|_| bad())?;
    let mut rest = t[len..].chars();
    let unit = rest.next();
    if !rest.as_str().trim().is_empty() {
        return Err(bad());
    }
    Ok(match unit {
        Some('k') => d * 1e3,
        Some('K') => d * 1024.0,
        Some('m') => d * 1e6,
        Some('M') => d * 1_048_576.0,
        Some('g') => d * 1e9,
        Some('G') => d * 1_073_741_824.0,
        Some('%') if (0.0..=100.0).contains(&d) => -d,
        Some('%') => return Err(format!("percentage '{s}' is out of range")),
        _ => d,
    })
}

/// How long the decimal number at the start of `t` is: sign, digits with
/// an optional fraction, and an exponent only when digits follow it.
fn float_prefix_len(t: &str) -> usize {
    let b = t.as_bytes();
    let digits_from = |i: usize| {
        b[i.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let int = digits_from(i);
    i += int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits_from(i + 1);
        if int + frac > 0 {
            i += 1 + frac;
        }
    }
    if int + frac == 0 {
        return 0;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        let exp = digits_from(i + 1 + sign);
        if exp > 0 {
            i += 1 + sign + exp;
        }
    }
    i
}

/// `strtod` (and `sscanf("%lf")`): the longest leading number; 0 when
/// there is none.
pub fn parse_c_double(s: &str) -> f64 {
    scan_c_double(s).unwrap_or(0.0)
}

/// `sscanf(s, "%lf")`: leading white space, then the longest number
/// `strtod` reads (decimal with an optional exponent, hexadecimal with an
/// optional binary exponent, `inf`, `infinity`, `nan`); what follows is
/// ignored. `None` when no number starts the text.
pub fn scan_c_double(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let b = t.as_bytes();
    let signed = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let neg = b.first() == Some(&b'-');
    let body = &t[signed..];
    let starts = |p: &str| {
        body.as_bytes()
            .get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p.as_bytes()))
    };
    let magnitude = if starts("inf") {
        f64::INFINITY
    } else if starts("nan") {
        f64::NAN
    } else if starts("0x") {
        scan_hex_double(&body[2..])
    } else {
        let len = float_prefix_len(body);
        if len == 0 || body.starts_with(['+', '-']) {
            return None;
        }
        body[..len].parse().ok()?
    };
    Some(if neg { -magnitude } else { magnitude })
}

/// The hexadecimal number after `0x`: hex digits with an optional
/// fraction, then an optional `p` exponent (a power of two). No digits
/// reads as 0, as `strtod` reads the `0` of `0x`.
fn scan_hex_double(t: &str) -> f64 {
    let mut mantissa = 0f64;
    let mut scale = 0i32;
    let mut seen_point = false;
    let mut chars = t.char_indices().peekable();
    let mut end = 0;
    while let Some(&(i, c)) = chars.peek() {
        match c {
            '.' if !seen_point => seen_point = true,
            c if c.is_ascii_hexdigit() => {
                mantissa = mantissa * 16.0 + f64::from(c.to_digit(16).unwrap_or(0));
                if seen_point {
                    scale = scale.saturating_sub(4);
                }
            }
            _ => break,
        }
        end = i + c.len_utf8();
        chars.next();
    }
    let rest = &t[end..];
    if let Some(exp) = rest.strip_prefix(['p', 'P']) {
        let sign = usize::from(exp.starts_with(['+', '-']));
        let digits = exp[sign..].bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            scale = scale.saturating_add(exp[..sign + digits].parse::<i32>().unwrap_or(0));
        }
    }
    mantissa * 2f64.powi(scale)
}

/// `strtol` (and `atoi`): leading spaces, a sign and digits; what follows
/// is ignored, and no digits at all is 0.
pub fn parse_c_long(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut n: i64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add((b - b'0') as i64);
    }
    if neg { -n } else { n }
}

/// A boolean option as CFEngine spells it (`true/yes/on` or
/// `false/no/off`).
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanned_doubles_like_sscanf() {
        assert_eq!(scan_c_double("1x"), Some(1.0));
        assert_eq!(scan_c_double(" 3 "), Some(3.0));
        assert_eq!(scan_c_double("1e"), Some(1.0));
        assert_eq!(scan_c_double("1e1"), Some(10.0));
        assert_eq!(scan_c_double("-.5"), Some(-0.5));
        assert_eq!(scan_c_double("0x10"), Some(16.0));
        assert_eq!(scan_c_double("0x1p3"), Some(8.0));
        assert_eq!(scan_c_double("-inf"), Some(f64::NEG_INFINITY));
        assert!(scan_c_double("nan").is_some_and(f64::is_nan));
        assert_eq!(scan_c_double("a"), None);
        assert_eq!(scan_c_double("-.e1"), None);
        assert_eq!(scan_c_double("+-1"), None);
        assert_eq!(scan_c_double(""), None);
        assert_eq!(scan_c_double("é"), None);
    }

    #[test]
    fn numbers_like_cfengine() {
        assert_eq!(parse_int("1k"), Ok(1000));
        assert_eq!(parse_int("2K"), Ok(2048));
        assert_eq!(parse_int("-5"), Ok(-5));
        assert!(parse_int("x").is_err());
        assert_eq!(parse_int("50%"), Ok(-50));
        assert!(parse_int("150%").is_err());
        assert_eq!(parse_int(" 42 "), Ok(42));
        assert_eq!(parse_int("12x"), Ok(12));
        assert!(parse_int("12xy").is_err());
        assert_eq!(parse_real("50%"), Ok(-50.0));
        assert_eq!(parse_real("1.5q"), Ok(1.5));
        assert_eq!(parse_real(".5"), Ok(0.5));
        assert_eq!(parse_real("2.5e-3"), Ok(0.0025));
        assert_eq!(parse_real("1k"), Ok(1000.0));
        assert!(parse_real("1.5qq").is_err());
        assert!(parse_real("x").is_err());
        assert_eq!(
            convert(DataType::Real, Value::str("1.50")),
            Ok(Value::str("1.500000"))
        );
    }
}
