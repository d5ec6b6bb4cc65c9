//! The host key's name: `sys.key_digest` (`MD5=<hex>`) and the
//! `PK_MD5_<hex>` class, from `WORKDIR/ppkeys/localhost.pub`.
//!
//! The digest is the key ring's (`remote::keys`): cf-agent hashes the RSA
//! modulus and then the public exponent. The key file is PEM, either
//! PKCS#1 (`RSA PUBLIC KEY`, what cf-key writes) or SubjectPublicKeyInfo
//! (`PUBLIC KEY`).

use super::Collector;
use super::root::Root;

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

/// The hex MD5 digest of an RSA public key in PEM form, as the key ring
/// names keys.
pub(crate) fn rsa_key_digest(pem: &str) -> Option<String> {
    let key = crate::remote::keys::PublicKey::from_pem(pem).ok()?;
    key.digest().strip_prefix("MD5=").map(str::to_string)
}
