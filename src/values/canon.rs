//! Class names: canonical form and the key a class is stored under.

/// Turns any text into a valid class name: every byte that is not an ASCII
/// letter, digit or underscore becomes `_` (a multi-byte character becomes
/// one `_` per byte, as CFEngine does).
pub fn canonify(s: &str) -> String {
    // Byte for byte in place: each byte of a multi-byte character becomes
    // its own `_`, and the result is ASCII. (Collecting `char`s encoded
    // each one anew: ~25 instructions a byte, at every start's ~200 names.)
    let mut out = s.as_bytes().to_vec();
    for b in &mut out {
        if !(b.is_ascii_alphanumeric() || *b == b'_') {
            *b = b'_';
        }
    }
    String::from_utf8(out).expect("only ASCII bytes are left")
}

/// Canonifies a class name that may carry a namespace prefix, keeping the
/// `ns:` part.
pub fn canonify_class(s: &str) -> String {
    match s.split_once(':') {
        Some((ns, name)) if !ns.is_empty() => format!("{}:{}", canonify(ns), canonify(name)),
        _ => canonify(s),
    }
}

/// The key under which a class of namespace `ns` is stored: bare for the
/// default namespace, `ns:name` otherwise.
pub fn class_key(ns: &str, name: &str) -> String {
    if ns == "default" || ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}:{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonify_like_cfengine() {
        assert_eq!(canonify("a-b.c d"), "a_b_c_d");
        assert_eq!(canonify("é"), "__");
        assert_eq!(canonify_class("ns:a-b"), "ns:a_b");
        assert_eq!(class_key("default", "x"), "x");
        assert_eq!(class_key("ns", "x"), "ns:x");
    }
}
