//! Files are bytes; the line editor works on text. A file is decoded so
//! that every byte comes back when it is encoded again, whatever the
//! encoding: an edit changes only the bytes its promises change (a Latin-1
//! `café` stays `caf\xe9`, not U+FFFD).
//!
//! A byte that is not part of valid UTF-8 becomes the private-use character
//! U+F0000 + byte (plane 15, which no encoding of a configuration file
//! uses), so a regex's `.` matches it as one character, as PCRE's byte
//! mode matches one byte in cf-agent. A character that is itself in
//! U+F0000..=U+F00FF is taken byte by byte the same way, so the mapping is
//! exact in both directions.

use std::borrow::Cow;

/// The first of the 256 characters that stand for raw bytes.
const RAW_BASE: u32 = 0xF0000;

fn is_raw(c: char) -> bool {
    (RAW_BASE..RAW_BASE + 0x100).contains(&(c as u32))
}

/// Whether `text` holds a character standing for a raw byte. Those are
/// encoded `F3 B0 80..=83 xx` in UTF-8, so the bytes are searched rather
/// than every character decoded (a 5 MB file is scanned at memchr speed).
fn has_raw(text: &str) -> bool {
    let b = text.as_bytes();
    memchr::memmem::find_iter(b, b"\xF3\xB0").any(|i| matches!(b.get(i + 2), Some(0x80..=0x83)))
}

fn raw(b: u8) -> char {
    char::from_u32(RAW_BASE + u32::from(b)).expect("plane 15 is valid")
}

/// The text an editor works on, for a file's bytes.
pub fn decode(bytes: &[u8]) -> String {
    decode_borrowed(bytes).into_owned()
}

/// [`decode`] without a copy when the bytes are already the text (valid
/// UTF-8 without the private-use characters that stand for raw bytes).
pub fn decode_borrowed(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes)
        && !has_raw(s)
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 8);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if is_raw(c) {
                let mut buf = [0u8; 4];
                out.extend(c.encode_utf8(&mut buf).bytes().map(raw));
            } else {
                out.push(c);
            }
        }
        out.extend(chunk.invalid().iter().copied().map(raw));
    }
    Cow::Owned(out)
}

/// The bytes of a file, for the text an editor made.
pub fn encode(text: &str) -> Vec<u8> {
    if !has_raw(text) {
        return text.as_bytes().to_vec();
    }
    encode_raw(text)
}

/// [`encode`] of a text that is no longer needed: without a copy when it
/// has no raw bytes.
pub fn encode_owned(text: String) -> Vec<u8> {
    if !has_raw(&text) {
        return text.into_bytes();
    }
    encode_raw(&text)
}

fn encode_raw(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        if is_raw(c) {
            out.push((c as u32 - RAW_BASE) as u8);
        } else {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_comes_back() {
        let cases: [&[u8]; 5] = [
            b"name=caf\xe9\n",
            b"\xff\xfe\x00plain\n",
            "utf-8 \u{e9} and \u{F0041} itself\n".as_bytes(),
            b"\xf3\xb0\x81",
            b"",
        ];
        for c in cases {
            assert_eq!(encode(&decode(c)), c, "{c:?}");
        }
        let all: Vec<u8> = (0..=255u8).collect();
        assert_eq!(encode(&decode(&all)), all);
    }

    #[test]
    fn raw_characters_are_found_by_their_bytes() {
        // Around and inside plane 15's first 256 characters.
        for cp in [
            0xEFFFFu32, 0xF0000, 0xF0041, 0xF00FF, 0xF0100, 0xF0400, 0x10FFFF,
        ] {
            let c = char::from_u32(cp).unwrap();
            let text = format!("key = v{c}alue \u{e9}");
            assert_eq!(has_raw(&text), text.chars().any(is_raw), "U+{cp:X}");
        }
        assert!(!has_raw("plain ascii"));
    }

    #[test]
    fn an_invalid_byte_is_one_character() {
        let t = decode(b"caf\xe9");
        assert_eq!(t.chars().count(), 4);
        let re = crate::values::regex::Regex::new("^caf.$").unwrap();
        assert!(re.is_match(&t));
    }
}
