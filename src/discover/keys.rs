//! The host key's name: `sys.key_digest` (`MD5=<hex>`) and the
//! `PK_MD5_<hex>` class, from `WORKDIR/ppkeys/localhost.pub`.
//!
//! cf-agent hashes the RSA modulus and then the public exponent, each as
//! big-endian bytes without leading zeros. The key file is PEM, either
//! PKCS#1 (`RSA PUBLIC KEY`, what cf-key writes) or SubjectPublicKeyInfo
//! (`PUBLIC KEY`).

use super::Collector;
use super::root::Root;
use md5::{Digest, Md5};

pub(crate) fn key_digest(c: &mut Collector, root: &Root, layout: &super::Layout) {
    let path = layout.workdir.join("ppkeys").join("localhost.pub");
    let Some(pem) = root.read(&path.to_string_lossy()) else {
        return;
    };
    let Some(digest) = rsa_key_digest(&pem) else {
        return;
    };
    let digest = format!("MD5={digest}");
    c.sys(
        "key_digest",
        digest.clone(),
        "inventory,source=agent,attribute_name=CFEngine ID",
    );
    c.class(
        &format!("PK_{digest}"),
        "inventory,attribute_name=none,source=agent,derived-from=sys.key_digest",
    );
}

/// The hex MD5 digest of an RSA public key in PEM form.
pub(crate) fn rsa_key_digest(pem: &str) -> Option<String> {
    let b64: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("-----"))
        .collect();
    let der = base64_decode(&b64)?;
    let (n, e) = rsa_numbers(&der)?;
    let mut buf = strip_zeros(n).to_vec();
    buf.extend_from_slice(strip_zeros(e));
    Some(
        Md5::digest(&buf)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[start..]
}

/// One DER element: tag, contents, and the rest after it.
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)? as usize;
    let (len, header) = if first & 0x80 == 0 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *input.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let body = input.get(header..header.checked_add(len)?)?;
    Some((tag, body, &input[header + len..]))
}

/// Modulus and exponent from PKCS#1 RSAPublicKey or from
/// SubjectPublicKeyInfo wrapping one.
fn rsa_numbers(input: &[u8]) -> Option<(&[u8], &[u8])> {
    const SEQUENCE: u8 = 0x30;
    const INTEGER: u8 = 0x02;
    const BIT_STRING: u8 = 0x03;
    let (tag, body, _) = der(input)?;
    if tag != SEQUENCE {
        return None;
    }
    let (t1, first, rest) = der(body)?;
    match t1 {
        INTEGER => {
            let (t2, e, _) = der(rest)?;
            (t2 == INTEGER).then_some((first, e))
        }
        SEQUENCE => {
            let (t2, bits, _) = der(rest)?;
            if t2 != BIT_STRING || bits.is_empty() {
                return None;
            }
            // Skip the unused-bits byte of the BIT STRING.
            rsa_numbers(&bits[1..])
        }
        _ => None,
    }
}

pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for ch in s.bytes() {
        let v = match ch {
            b'A'..=b'Z' => ch - b'A',
            b'a'..=b'z' => ch - b'a' + 26,
            b'0'..=b'9' => ch - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}
