//! Just enough DER reading for what CFEngine's peers hand us: the public
//! key inside a certificate, and the two integers of an RSA public key.
//! Everything else of a certificate is ignored on purpose: CFEngine's
//! certificates are self-signed, version 1, and carry nothing but the key.

/// One element: its tag, its content and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8], usize)> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest, len_bytes) = if first < 0x80 {
        (usize::from(first), rest, 1)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..], 1 + n)
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..], 1 + len_bytes + len))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const CONTEXT_0: u8 = 0xa0;
const OID: u8 = 0x06;
const BIT_STRING: u8 = 0x03;

/// The `SubjectPublicKeyInfo` of an X.509 certificate, whole (tag and
/// length included), or `None` when the bytes are not a certificate.
pub fn certificate_spki(cert: &[u8]) -> Option<&[u8]> {
    let (tag, cert, _, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    // [0] version (absent in a version 1 certificate, as CFEngine's are).
    if tbs.first() == Some(&CONTEXT_0) {
        tbs = element(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity, subject.
    for _ in 0..5 {
        tbs = element(tbs)?.2;
    }
    let (tag, _, _, size) = element(tbs)?;
    (tag == SEQUENCE).then(|| &tbs[..size])
}

/// The PKCS#1 `RSAPublicKey` inside a `SubjectPublicKeyInfo` whose
/// algorithm is rsaEncryption.
pub fn spki_rsa_key(spki: &[u8]) -> Option<&[u8]> {
    // 1.2.840.113549.1.1.1
    const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    let (tag, seq, _, _) = element(spki)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, algorithm, rest, _) = element(seq)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, oid, _, _) = element(algorithm)?;
    if tag != OID || oid != RSA_ENCRYPTION {
        return None;
    }
    let (tag, bits, _, _) = element(rest)?;
    // A BIT STRING whose first byte counts the unused bits: none here.
    if tag != BIT_STRING || bits.first() != Some(&0) {
        return None;
    }
    Some(&bits[1..])
}

/// The modulus and public exponent of a PKCS#1 `RSAPublicKey`, as unsigned
/// big-endian bytes without leading zeros.
pub fn rsa_public_integers(pkcs1: &[u8]) -> Option<(&[u8], &[u8])> {
    let (tag, seq, _, _) = element(pkcs1)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, n, rest, _) = element(seq)?;
    if tag != INTEGER {
        return None;
    }
    let (tag, e, _, _) = element(rest)?;
    if tag != INTEGER {
        return None;
    }
    let strip = |b: &[u8]| -> usize { b.iter().take_while(|&&x| x == 0).count() };
    Some((&n[strip(n)..], &e[strip(e)..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_lengths() {
        assert_eq!(element(&[0x02, 0x01, 0x05]).unwrap().1, &[5]);
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend(std::iter::repeat_n(7u8, 0x80));
        assert_eq!(element(&long).unwrap().1.len(), 0x80);
        // Truncated input is refused, never read past.
        assert!(element(&[0x04, 0x82, 0x01]).is_none());
        assert!(element(&[0x04, 0x05, 1, 2]).is_none());
    }

    #[test]
    fn integers_lose_their_sign_byte() {
        // SEQUENCE { INTEGER 0x00ff, INTEGER 0x010001 }
        let der = [
            0x30, 0x09, 0x02, 0x02, 0x00, 0xff, 0x02, 0x03, 0x01, 0x00, 0x01,
        ];
        let (n, e) = rsa_public_integers(&der).unwrap();
        assert_eq!(n, &[0xff]);
        assert_eq!(e, &[1, 0, 1]);
        assert!(rsa_public_integers(&der[..5]).is_none());
    }
}
