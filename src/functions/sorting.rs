//! The orders of `sort`, `min` and `max` as cf-agent 3.21 computes them.
//!
//! cf-agent does not compare with a total order: each mode is a "less
//! than" predicate over two texts, and `sort` is a bottom-up merge sort of
//! a linked list that takes the right-hand item whenever the left one is
//! not less. Items that compare equal therefore come out in an order of
//! their own (not the input order), and that order is what policies see;
//! so both the predicates and the sort are reproduced here.
//!
//! The `IP` mode reads addresses with cf-agent's own parser, which is
//! stricter than the standard one in places (upper-case hexadecimal is no
//! IPv6 address) and more lenient in others (an IPv4 address may end in
//! one stray character); [`parse_ip`] follows it.

use crate::values::number::scan_c_double;

/// The sort modes: `lex`, `int`, `real`, `IP`, `MAC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortMode {
    Lex,
    Int,
    Real,
    Ip,
    Mac,
}

/// Whether `a` sorts before `b` in `mode`. In every mode but `lex`, items
/// that do not read as the mode's kind of value sort before those that
/// do, in byte order among themselves.
pub fn less(mode: SortMode, a: &str, b: &str) -> bool {
    match mode {
        SortMode::Lex => lex_less(a, b),
        SortMode::Int => number_less(a, b, true),
        SortMode::Real => number_less(a, b, false),
        SortMode::Ip => ip_less(a, b),
        SortMode::Mac => mac_less(a, b),
    }
}

/// Sorts as cf-agent's list sort does: merge passes over runs of 1, 2,
/// 4, ... items; in each merge the left run's head goes first only when
/// it is less than the right run's head.
pub fn sort(items: Vec<String>, mode: SortMode) -> Vec<String> {
    let mut list = items;
    let mut width = 1;
    loop {
        let mut merged = Vec::with_capacity(list.len());
        let mut merges = 0;
        let mut rest = list.into_iter().peekable();
        while rest.peek().is_some() {
            merges += 1;
            let left: Vec<String> = rest.by_ref().take(width).collect();
            let right: Vec<String> = rest.by_ref().take(width).collect();
            let mut l = left.into_iter().peekable();
            let mut r = right.into_iter().peekable();
            loop {
                let take_left = match (l.peek(), r.peek()) {
                    (None, None) => break,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (Some(x), Some(y)) => less(mode, x, y),
                };
                let next = if take_left { l.next() } else { r.next() };
                merged.extend(next);
            }
        }
        list = merged;
        if merges <= 1 {
            return list;
        }
        width *= 2;
    }
}

fn lex_less(a: &str, b: &str) -> bool {
    a.as_bytes() < b.as_bytes()
}

/// The `int` and `real` orders read the leading number of each item as
/// `sscanf("%lf")` does; `int` then truncates both to integers.
fn number_less(a: &str, b: &str, int_mode: bool) -> bool {
    match (scan_c_double(a), scan_c_double(b)) {
        (Some(x), Some(y)) if int_mode => c_long(x) < c_long(y),
        (Some(x), Some(y)) => x - y < 0.0,
        (Some(_), None) => false,
        (None, Some(_)) => true,
        (None, None) => lex_less(a, b),
    }
}

/// A double converted to a C `long` on x86-64: truncated toward zero,
/// and the "integer indefinite" value (the smallest long) for NaN and
/// for what does not fit.
fn c_long(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if !(-LIMIT..LIMIT).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

fn ip_less(a: &str, b: &str) -> bool {
    match (parse_ip(a), parse_ip(b)) {
        // IPv4 addresses before IPv6 ones; the port does not count.
        (Some(x), Some(y)) => match (x, y) {
            (IpAddress::V4(p, _), IpAddress::V4(q, _)) => p < q,
            (IpAddress::V6(p, _), IpAddress::V6(q, _)) => p < q,
            (IpAddress::V4(..), IpAddress::V6(..)) => true,
            (IpAddress::V6(..), IpAddress::V4(..)) => false,
        },
        (Some(_), None) => false,
        (None, Some(_)) => true,
        (None, None) => lex_less(a, b),
    }
}

/// Two MAC addresses compare by their six bytes; equal ones, and an
/// address against a text that is none, fall to the rules for texts
/// that are not addresses (so an address is never less than another
/// equal to it).
fn mac_less(a: &str, b: &str) -> bool {
    let (x, y) = (parse_mac(a), parse_mac(b));
    if let (Some(p), Some(q)) = (x, y)
        && p != q
    {
        return p < q;
    }
    match (x, y) {
        (Some(_), _) => false,
        (None, Some(_)) => true,
        (None, None) => lex_less(a, b),
    }
}

/// A MAC address as cf-agent reads one: a text longer than 12 characters
/// is six hexadecimal numbers separated by colons (`%hhx:` six times, so
/// each may have any number of digits, only its low byte counts); a
/// shorter one is six numbers of at most two characters each, unseparated.
/// What follows the sixth number is ignored.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut rest = s.as_bytes();
    let separated = s.len() > 12;
    for (i, byte) in out.iter_mut().enumerate() {
        if separated && i > 0 {
            rest = rest.strip_prefix(b":")?;
        }
        let (value, used) = scan_hex(rest, if separated { None } else { Some(2) })?;
        *byte = value as u8;
        rest = &rest[used..];
    }
    Some(out)
}

/// `scanf("%x")` with an optional maximum field width: leading white
/// space (not counted in the width), a sign, an optional `0x`, hex
/// digits. The value (negated as an unsigned number after a `-`,
/// saturated when too large) and the bytes read; None when no digit.
fn scan_hex(s: &[u8], width: Option<usize>) -> Option<(u64, usize)> {
    let start = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let end = width.map_or(s.len(), |w| (start + w).min(s.len()));
    let field = &s[start..end];
    let mut i = 0;
    let negative = field.first() == Some(&b'-');
    if matches!(field.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    if field.get(i) == Some(&b'0')
        && matches!(field.get(i + 1), Some(b'x' | b'X'))
        && field.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let digits = field[i..]
        .iter()
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    if digits == 0 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in &field[i..i + digits] {
        let d = (b as char).to_digit(16).unwrap_or(0) as u64;
        value = value.saturating_mul(16).saturating_add(d);
    }
    let value = if negative {
        value.wrapping_neg()
    } else {
        value
    };
    Some((value, start + i + digits))
}

/// An IP address as cf-agent's parser reads it, with its port (0 when
/// none was written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpAddress {
    V4([u8; 4], u16),
    V6([u16; 8], u16),
}

/// Reads `s` as an IPv4 address, else as an IPv6 one, as cf-agent does.
pub fn parse_ip(s: &str) -> Option<IpAddress> {
    parse_ipv4(s)
        .map(|(a, p)| IpAddress::V4(a, p))
        .or_else(|| parse_ipv6(s).map(|(a, p)| IpAddress::V6(a, p)))
}

/// cf-agent's IPv4 reader: four decimal octets separated by dots, then
/// optionally `:port`. A character it does not expect ends the address
/// where it stands, which is an error unless it is the last character of
/// the text and digits came before it (`1.2.3.4x` reads as 1.2.3.0).
fn parse_ipv4(s: &str) -> Option<([u8; 4], u16)> {
    let mut octets = [0u8; 4];
    let mut port: u32 = 0;
    let mut value: u32 = 0;
    let mut field_chars = 0;
    let mut has_digit = false;
    // 0..=3: the octets; 5: the port; 7: stopped at a stray character.
    let mut state = 0;
    for &c in s.as_bytes() {
        if state == 7 {
            return None;
        }
        let mut next = None;
        match state {
            0..=2 => match c {
                b'0'..=b'9' => {
                    value = value * 10 + u32::from(c - b'0');
                    has_digit = true;
                }
                b'.' => {
                    octets[state] = value as u8;
                    next = Some(state + 1);
                }
                _ => next = Some(7),
            },
            3 => match c {
                b'0'..=b'9' => {
                    value = value * 10 + u32::from(c - b'0');
                    has_digit = true;
                }
                b':' => {
                    octets[3] = value as u8;
                    next = Some(5);
                }
                _ => next = Some(7),
            },
            _ => match c {
                b'0'..=b'9' => port = port * 10 + u32::from(c - b'0'),
                _ => next = Some(7),
            },
        }
        field_chars += 1;
        if value > 255 || port > 65535 {
            return None;
        }
        if let Some(n) = next {
            if !has_digit {
                return None;
            }
            state = n;
            value = 0;
            port = 0;
            field_chars = 0;
            has_digit = false;
        }
    }
    match state {
        0..=2 => None,
        3 if field_chars == 0 => None,
        3 => {
            octets[3] = value as u8;
            Some((octets, 0))
        }
        5 if field_chars == 0 => None,
        5 => Some((octets, port as u16)),
        _ => Some((octets, 0)),
    }
}

/// cf-agent's IPv6 reader: up to eight groups of lower-case hexadecimal
/// digits separated by colons, one `::` standing for zero groups,
/// optionally in brackets followed by `:port`. Upper-case digits are
/// refused (RFC 5952 writes addresses in lower case).
fn parse_ipv6(s: &str) -> Option<([u16; 8], u16)> {
    let mut groups = [0u16; 8];
    // The groups after a `::`, placed from the right at the end.
    let mut tail: Vec<u16> = Vec::new();
    let mut compressed = false;
    let mut bracket_open = false;
    let mut value: u32 = 0;
    let mut port: u32 = 0;
    let mut field_chars = 0;
    // 0..=7: the groups; 8: after `]`; 9: the port; 11: error.
    let mut state: usize = 0;
    for &c in s.as_bytes() {
        if state == 11 {
            return None;
        }
        let hex = c.is_ascii_hexdigit();
        let upper = c.is_ascii_uppercase();
        let mut next = None;
        let group_digit = |value: &mut u32| {
            if upper {
                Some(11)
            } else {
                *value = *value * 16 + (c as char).to_digit(16).unwrap_or(0);
                None
            }
        };
        match state {
            0 => {
                if c == b'[' {
                    if field_chars == 0 {
                        bracket_open = true;
                    } else {
                        next = Some(11);
                    }
                } else if hex {
                    next = group_digit(&mut value);
                } else if c == b':' {
                    groups[0] = value as u16;
                    next = Some(1);
                } else {
                    next = Some(11);
                }
            }
            1 => {
                if hex {
                    next = group_digit(&mut value);
                } else if c == b':' {
                    if field_chars == 0 {
                        compressed = true;
                    } else {
                        groups[1] = value as u16;
                    }
                    next = Some(2);
                } else {
                    next = Some(11);
                }
            }
            2..=6 => {
                if hex {
                    next = group_digit(&mut value);
                } else if c == b':' {
                    if field_chars == 0 {
                        // `::` here stays in this state, its second
                        // colon counting as the group's first character.
                        if compressed {
                            next = Some(11);
                        } else {
                            compressed = true;
                        }
                    } else {
                        if compressed {
                            tail.push(value as u16);
                        } else {
                            groups[state] = value as u16;
                        }
                        next = Some(state + 1);
                    }
                } else if c == b']' && bracket_open && compressed {
                    bracket_open = false;
                    tail.push(value as u16);
                    next = Some(8);
                } else {
                    next = Some(11);
                }
            }
            7 => {
                if hex {
                    next = group_digit(&mut value);
                } else if c == b']' && bracket_open {
                    bracket_open = false;
                    groups[7] = value as u16;
                    next = Some(8);
                } else {
                    next = Some(11);
                }
            }
            8 => next = Some(if c == b':' { 9 } else { 11 }),
            _ => {
                if c.is_ascii_digit() {
                    port = port * 10 + u32::from(c - b'0');
                } else {
                    next = Some(11);
                }
            }
        }
        field_chars += 1;
        if value > 0xFFFF || port > 65535 {
            return None;
        }
        if let Some(n) = next {
            state = n;
            value = 0;
            port = 0;
            field_chars = 0;
        }
    }
    let place_tail = |groups: &mut [u16; 8], tail: &[u16]| {
        for (i, v) in tail.iter().rev().enumerate().take(8) {
            groups[7 - i] = *v;
        }
    };
    match state {
        0 | 1 | 11 => None,
        2..=6 => {
            if bracket_open || !compressed {
                return None;
            }
            tail.push(value as u16);
            place_tail(&mut groups, &tail);
            Some((groups, 0))
        }
        7 => {
            if field_chars == 0 || bracket_open {
                return None;
            }
            groups[7] = value as u16;
            Some((groups, 0))
        }
        8 => {
            if compressed {
                // cf-agent places the bracketed form's groups from the
                // right in the order they were read.
                for (i, v) in tail.iter().enumerate().take(8) {
                    groups[7 - i] = *v;
                }
            }
            Some((groups, 0))
        }
        _ => {
            if field_chars == 0 {
                return None;
            }
            Some((groups, port as u16))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mode: SortMode, items: &[&str]) -> Vec<String> {
        sort(items.iter().map(|s| s.to_string()).collect(), mode)
    }

    #[test]
    fn numbers_read_as_sscanf_and_ties_take_the_right_run_first() {
        assert_eq!(
            sorted(SortMode::Int, &["b", "a", "10", "9", "-1", "1.5"]),
            ["a", "b", "-1", "1.5", "9", "10"]
        );
        // 0.88 and 00.88 are equal: the later one comes first.
        assert_eq!(
            sorted(SortMode::Real, &["", "-2.1", "0.88", "b", "00.88"]),
            ["", "b", "-2.1", "00.88", "0.88"]
        );
        assert_eq!(
            sorted(SortMode::Real, &["9", "9.7", "9.7.5"]),
            ["9", "9.7.5", "9.7"]
        );
    }

    #[test]
    fn ip_addresses_read_as_cf_agent_reads_them() {
        assert_eq!(parse_ip("1.2.3.4"), Some(IpAddress::V4([1, 2, 3, 4], 0)));
        assert_eq!(
            parse_ip("1.2.3.4:80"),
            Some(IpAddress::V4([1, 2, 3, 4], 80))
        );
        assert_eq!(parse_ip("1.2.3.4x"), Some(IpAddress::V4([1, 2, 3, 0], 0)));
        assert_eq!(parse_ip("9.7.5"), None);
        assert_eq!(parse_ip("-1"), None);
        assert_eq!(parse_ip("1.2.3.256"), None);
        assert_eq!(
            parse_ip("2001:db8::1:0:0:1"),
            Some(IpAddress::V6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1], 0))
        );
        assert_eq!(
            parse_ip("::1"),
            Some(IpAddress::V6([0, 0, 0, 0, 0, 0, 0, 1], 0))
        );
        assert_eq!(parse_ip("2001:DB8:0:0:1::1"), None);
        assert_eq!(parse_ip("FE80::0202:B3FF:FE1E:8329"), None);
        assert_eq!(
            parse_ip("[a:b:c:d:e:f:0:1]:8080"),
            Some(IpAddress::V6([0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0, 1], 8080))
        );
        assert_eq!(parse_ip("1::2::3"), None);
        assert_eq!(
            parse_ip("2001:db8::0:1:0:0:1"),
            Some(IpAddress::V6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1], 0))
        );
    }

    #[test]
    fn mac_addresses_read_as_scanf_reads_them() {
        let m = [0x00, 0x14, 0xbf, 0xf7, 0x23, 0x1d];
        assert_eq!(parse_mac("00:14:BF:F7:23:1D"), Some(m));
        assert_eq!(parse_mac("0:14:BF:F7:23:1D"), Some(m));
        assert_eq!(parse_mac("00:014:BF:0F7:23:01D"), Some(m));
        assert_eq!(parse_mac("0014BFF7231D"), Some(m));
        assert_eq!(parse_mac(":14:BF:F7:23:1D"), None);
        assert_eq!(parse_mac("-1"), None);
        // Equal addresses: the later one first.
        assert_eq!(
            sorted(
                SortMode::Mac,
                &[
                    "01:14:BF:F7:23:1D",
                    "1:14:BF:F7:23:1D",
                    "x",
                    "0:14:BF:F7:23:1D"
                ]
            ),
            [
                "x",
                "0:14:BF:F7:23:1D",
                "1:14:BF:F7:23:1D",
                "01:14:BF:F7:23:1D"
            ]
        );
    }
}
