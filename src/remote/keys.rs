//! Host keys as `cf-key` makes them, and the key ring in `WORKDIR/ppkeys`.
//!
//! A host's identity is an RSA key pair: `ppkeys/localhost.priv` (PKCS#1
//! PEM, `-----BEGIN RSA PRIVATE KEY-----`, unencrypted, 0600) and
//! `ppkeys/localhost.pub` (PKCS#1 PEM, `-----BEGIN RSA PUBLIC KEY-----`).
//! A peer's key is trusted when its public key is stored as
//! `ppkeys/USER-MD5=<hex>.pub`, USER being the local user the connection
//! is made as. The digest is CFEngine's: MD5 over the modulus and then the
//! public exponent, each as unsigned big-endian bytes without leading
//! zeros (what OpenSSL's `BN_bn2bin` gives), printed `MD5=` and lowercase
//! hex.

use crate::host::local;
use md5::{Digest, Md5};
use rsa::pkcs1::der::pem;
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, EncodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use std::path::{Path, PathBuf};

/// The size of a key `cf-key` makes unless told otherwise.
pub const DEFAULT_BITS: usize = 2048;

/// Why a key could not be made, read, or stored.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read key file '{path}': {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("'{path}' is not an RSA {what} key in PEM form: {reason}")]
    Parse {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
    #[error(
        "'{path}' is an encrypted private key; cf-key writes them unencrypted and we read only those"
    )]
    Encrypted { path: PathBuf },
    #[error("cannot write key file '{path}': {reason}")]
    Write { path: PathBuf, reason: String },
    #[error("A key file already exists at {0}")]
    Exists(PathBuf),
    #[error("cannot make a {bits}-bit RSA key: {reason}")]
    Generate { bits: usize, reason: String },
    #[error("no key pair in {dir}: make one with cf-key")]
    NoLocalKey { dir: PathBuf },
    #[error("the public key '{public}' does not belong to the private key '{private}'")]
    PairMismatch { public: PathBuf, private: PathBuf },
}

/// An RSA public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    /// The key as a PKCS#1 `RSAPublicKey` in DER.
    pkcs1: Vec<u8>,
}

impl PublicKey {
    /// A key from PKCS#1 DER (`RSAPublicKey`). Any size is read: a key's
    /// name does not depend on whether we would make one that small.
    pub fn from_pkcs1_der(der: &[u8]) -> Result<PublicKey, String> {
        match super::der::rsa_public_integers(der) {
            Some((n, e)) if !n.is_empty() && !e.is_empty() => Ok(PublicKey {
                pkcs1: der.to_vec(),
            }),
            _ => Err("not a PKCS#1 RSAPublicKey".into()),
        }
    }

    /// A key from a `SubjectPublicKeyInfo` in DER (what a certificate
    /// carries); only RSA keys are taken, as CFEngine takes only those.
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey, String> {
        let pkcs1 = super::der::spki_rsa_key(der).ok_or("not an RSA public key")?;
        Self::from_pkcs1_der(pkcs1)
    }

    fn from_rsa(key: &rsa::PublicKey) -> Result<PublicKey, String> {
        let pkcs1 = key.to_pkcs1_der().map_err(|e| e.to_string())?;
        Self::from_pkcs1_der(pkcs1.as_bytes())
    }

    /// A key from PEM text: `RSA PUBLIC KEY` (PKCS#1, what cf-key writes)
    /// or `PUBLIC KEY` (SubjectPublicKeyInfo).
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        let (label, der) = pem::decode_vec(text.trim().as_bytes()).map_err(|e| e.to_string())?;
        match label {
            "RSA PUBLIC KEY" => Self::from_pkcs1_der(&der),
            "PUBLIC KEY" => Self::from_spki_der(&der),
            other => Err(format!("a PEM '{other}', not a public key")),
        }
    }

    /// Reads a public key file.
    pub fn read(path: &Path) -> Result<PublicKey, KeyError> {
        let text = read_text(path)?;
        Self::from_pem(&text).map_err(|reason| KeyError::Parse {
            path: path.to_path_buf(),
            what: "public",
            reason,
        })
    }

    /// The key in PEM, as cf-key writes `localhost.pub` (PKCS#1, lines of
    /// 64 characters).
    pub fn to_pem(&self) -> String {
        pem::encode_string("RSA PUBLIC KEY", LineEnding::LF, &self.pkcs1)
            .expect("base64 of a key always encodes")
    }

    /// The key as PKCS#1 DER.
    pub fn pkcs1_der(&self) -> &[u8] {
        &self.pkcs1
    }

    /// CFEngine's name for the key: `MD5=` and the hex MD5 of the modulus
    /// followed by the exponent.
    pub fn digest(&self) -> String {
        let (n, e) = super::der::rsa_public_integers(&self.pkcs1)
            .expect("a PublicKey holds valid PKCS#1 DER");
        let mut h = Md5::new();
        h.update(n);
        h.update(e);
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        format!("MD5={hex}")
    }

    /// The size of the modulus in bits.
    pub fn bits(&self) -> usize {
        let (n, _) = super::der::rsa_public_integers(&self.pkcs1)
            .expect("a PublicKey holds valid PKCS#1 DER");
        match n.first() {
            Some(&top) => n.len() * 8 - top.leading_zeros() as usize,
            None => 0,
        }
    }
}

/// A host's RSA key pair.
pub struct KeyPair {
    private: rsa::PrivateKey,
    public: PublicKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private part.
        f.debug_struct("KeyPair")
            .field("public", &self.public.digest())
            .finish()
    }
}

impl KeyPair {
    /// A new key pair of `bits` bits, public exponent 65537, as cf-key
    /// makes it.
    pub fn generate(bits: usize) -> Result<KeyPair, KeyError> {
        let private =
            rsa::PrivateKey::new(&mut getrandom::SysRng, bits).map_err(|e| KeyError::Generate {
                bits,
                reason: e.to_string(),
            })?;
        Self::from_rsa(private).map_err(|reason| KeyError::Generate { bits, reason })
    }

    fn from_rsa(private: rsa::PrivateKey) -> Result<KeyPair, String> {
        let public = PublicKey::from_rsa(&private.to_public_key())?;
        Ok(KeyPair { private, public })
    }

    /// A key pair from PEM text: `RSA PRIVATE KEY` (PKCS#1, what cf-key
    /// writes) or `PRIVATE KEY` (PKCS#8), unencrypted.
    pub fn from_pem(text: &str) -> Result<KeyPair, String> {
        let private = if text.contains("-----BEGIN RSA PRIVATE KEY-----") {
            rsa::PrivateKey::from_pkcs1_pem(text.trim()).map_err(|e| e.to_string())?
        } else if text.contains("-----BEGIN PRIVATE KEY-----") {
            rsa::PrivateKey::from_pkcs8_pem(text.trim())
                .map_err(|e| format!("not an RSA private key ({e})"))?
        } else {
            return Err("no '-----BEGIN RSA PRIVATE KEY-----' line".into());
        };
        Self::from_rsa(private)
    }

    /// Reads a private key file.
    pub fn read(path: &Path) -> Result<KeyPair, KeyError> {
        let text = read_text(path)?;
        if text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("BEGIN ENCRYPTED PRIVATE KEY") {
            return Err(KeyError::Encrypted {
                path: path.to_path_buf(),
            });
        }
        Self::from_pem(&text).map_err(|reason| KeyError::Parse {
            path: path.to_path_buf(),
            what: "private",
            reason,
        })
    }

    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The private key in PEM, as cf-key writes `localhost.priv`.
    pub fn private_pem(&self) -> zeroize::Zeroizing<String> {
        self.private
            .to_pkcs1_pem(LineEnding::LF)
            .expect("an RSA private key always encodes")
    }

    /// The private key as PKCS#1 DER (for the TLS layer).
    pub fn pkcs1_der(&self) -> zeroize::Zeroizing<Vec<u8>> {
        zeroize::Zeroizing::new(
            self.private
                .to_pkcs1_der()
                .expect("an RSA private key always encodes")
                .as_bytes()
                .to_vec(),
        )
    }

    /// The private key as PKCS#8 DER (for making our certificate).
    pub fn pkcs8_der(&self) -> zeroize::Zeroizing<Vec<u8>> {
        zeroize::Zeroizing::new(
            self.private
                .to_pkcs8_der()
                .expect("an RSA private key always encodes")
                .as_bytes()
                .to_vec(),
        )
    }

    /// Writes the pair as cf-key does: the private key to `private`, the
    /// public one to `public`, both 0600, refusing when either exists.
    pub fn write_new(&self, public: &Path, private: &Path) -> Result<(), KeyError> {
        for p in [public, private] {
            if local::exists(p) {
                return Err(KeyError::Exists(p.to_path_buf()));
            }
        }
        write_key(private, self.private_pem().as_bytes())?;
        write_key(public, self.public.to_pem().as_bytes())
    }
}

fn read_text(path: &Path) -> Result<String, KeyError> {
    let bytes = local::read(path).map_err(|e| KeyError::Read {
        path: path.to_path_buf(),
        reason: crate::host::strerror(&e),
    })?;
    String::from_utf8(bytes).map_err(|_| KeyError::Parse {
        path: path.to_path_buf(),
        what: "PEM",
        reason: "not text".into(),
    })
}

fn write_key(path: &Path, data: &[u8]) -> Result<(), KeyError> {
    local::write_private(path, data).map_err(|e| KeyError::Write {
        path: path.to_path_buf(),
        reason: crate::host::strerror(&e),
    })
}

/// The keys of a work directory: `WORKDIR/ppkeys`.
#[derive(Clone, Debug)]
pub struct KeyRing {
    dir: PathBuf,
}

/// A peer's key stored in the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredKey {
    pub user: String,
    pub digest: String,
    pub path: PathBuf,
}

impl KeyRing {
    /// The ring of the work directory `workdir`.
    pub fn of_workdir(workdir: &Path) -> KeyRing {
        KeyRing {
            dir: workdir.join("ppkeys"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `ppkeys/localhost.pub`.
    pub fn local_public_path(&self) -> PathBuf {
        self.dir.join("localhost.pub")
    }

    /// `ppkeys/localhost.priv`.
    pub fn local_private_path(&self) -> PathBuf {
        self.dir.join("localhost.priv")
    }

    /// Makes the directory (0700) when it is missing.
    pub fn ensure_dir(&self) -> Result<(), KeyError> {
        local::create_private_dir(&self.dir).map_err(|e| KeyError::Write {
            path: self.dir.clone(),
            reason: crate::host::strerror(&e),
        })
    }

    /// This host's key pair; its public half must match `localhost.pub`
    /// when that file is there.
    pub fn local_pair(&self) -> Result<KeyPair, KeyError> {
        let private = self.local_private_path();
        if !local::exists(&private) {
            return Err(KeyError::NoLocalKey {
                dir: self.dir.clone(),
            });
        }
        let pair = KeyPair::read(&private)?;
        let public = self.local_public_path();
        if local::exists(&public) && PublicKey::read(&public)? != *pair.public() {
            return Err(KeyError::PairMismatch { public, private });
        }
        Ok(pair)
    }

    /// Where the key `digest` is trusted for connections made as `user`.
    pub fn peer_path(&self, user: &str, digest: &str) -> PathBuf {
        self.dir.join(format!("{user}-{digest}.pub"))
    }

    /// The stored key `digest` for `user`, if it is trusted.
    pub fn peer(&self, user: &str, digest: &str) -> Result<Option<PublicKey>, KeyError> {
        let p = self.peer_path(user, digest);
        if !local::exists(&p) {
            return Ok(None);
        }
        PublicKey::read(&p).map(Some)
    }

    /// Trusts `key` for `user`: stores it under its digest. Returns the file.
    pub fn trust(&self, user: &str, key: &PublicKey) -> Result<PathBuf, KeyError> {
        self.ensure_dir()?;
        let p = self.peer_path(user, &key.digest());
        write_key(&p, key.to_pem().as_bytes())?;
        Ok(p)
    }

    /// Every trusted peer key (`USER-MD5=….pub`, `USER-SHA=….pub`).
    pub fn peers(&self) -> Result<Vec<StoredKey>, KeyError> {
        let entries = match local::list_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(KeyError::Read {
                    path: self.dir.clone(),
                    reason: crate::host::strerror(&e),
                });
            }
        };
        let mut out: Vec<StoredKey> = entries
            .into_iter()
            .filter_map(|path| {
                let name = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".pub")?
                    .to_string();
                let i = name.find("-MD5=").or_else(|| name.find("-SHA="))?;
                Some(StoredKey {
                    user: name[..i].to_string(),
                    digest: name[i + 1..].to_string(),
                    path,
                })
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Removes every stored key with this digest; returns how many files.
    pub fn remove_digest(&self, digest: &str) -> Result<usize, KeyError> {
        let mut n = 0;
        for k in self.peers()?.into_iter().filter(|k| k.digest == digest) {
            local::remove_file(&k.path).map_err(|e| KeyError::Write {
                path: k.path.clone(),
                reason: crate::host::strerror(&e),
            })?;
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key made by cf-key 3.21 (`cf-key -T 1024`, a test key of no
    /// use anywhere) and its digest as `cf-key -p` prints it.
    const CF_KEY_PUB: &str = "-----BEGIN RSA PUBLIC KEY-----
MIGJAoGBALphfpvR//RFoDhfFVK+d3yp/otl3zRo80FYKUZHjmU56wKs5wuWjvhL
ONMTK3WC87SbIYIE4YXv3JKe69X8RX9rriE28Lqhn7orVMJT5KdpBXBStgR7AIZi
6lkUXke7aQC+i7Dgfsd5zu0xNbXZs6/HSED2B49kFZs0gWnqybhJAgMBAAE=
-----END RSA PUBLIC KEY-----
";

    #[test]
    fn digest_is_md5_of_modulus_then_exponent() {
        let k = PublicKey::from_pem(CF_KEY_PUB).unwrap();
        assert_eq!(k.bits(), 1024);
        assert_eq!(k.digest(), "MD5=20a2dc4166bccd857d8c8d19d6067b67");
        // Written back, it reads the same.
        assert_eq!(PublicKey::from_pem(&k.to_pem()).unwrap(), k);
    }

    #[test]
    fn the_ring_stores_lists_and_forgets_peers() {
        let tmp = tempfile::tempdir().unwrap();
        let ring = KeyRing::of_workdir(tmp.path());
        assert!(ring.peers().unwrap().is_empty());
        assert!(matches!(
            ring.local_pair(),
            Err(KeyError::NoLocalKey { .. })
        ));
        let k = PublicKey::from_pem(CF_KEY_PUB).unwrap();
        let p = ring.trust("root", &k).unwrap();
        assert!(p.ends_with("root-MD5=20a2dc4166bccd857d8c8d19d6067b67.pub"));
        assert_eq!(ring.peer("root", &k.digest()).unwrap(), Some(k.clone()));
        assert_eq!(ring.peer("other", &k.digest()).unwrap(), None);
        let peers = ring.peers().unwrap();
        assert_eq!(peers.len(), 1);
        assert_eq!(
            (peers[0].user.as_str(), peers[0].digest.as_str()),
            ("root", k.digest().as_str())
        );
        assert_eq!(ring.remove_digest(&k.digest()).unwrap(), 1);
        assert!(ring.peers().unwrap().is_empty());
    }

    #[test]
    fn a_new_pair_is_written_once_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let ring = KeyRing::of_workdir(tmp.path());
        ring.ensure_dir().unwrap();
        let pair = KeyPair::generate(1024).unwrap();
        pair.write_new(&ring.local_public_path(), &ring.local_private_path())
            .unwrap();
        let again = ring.local_pair().unwrap();
        assert_eq!(again.public(), pair.public());
        assert!(matches!(
            pair.write_new(&ring.local_public_path(), &ring.local_private_path()),
            Err(KeyError::Exists(_))
        ));
        // Someone else's public half beside our private one is refused.
        local::write_private(&ring.local_public_path(), CF_KEY_PUB.as_bytes()).unwrap();
        assert!(matches!(
            ring.local_pair(),
            Err(KeyError::PairMismatch { .. })
        ));
    }

    #[test]
    fn bad_pem_is_an_error_not_a_panic() {
        assert!(PublicKey::from_pem("").is_err());
        assert!(
            PublicKey::from_pem(
                "-----BEGIN RSA PUBLIC KEY-----\nAAAA\n-----END RSA PUBLIC KEY-----\n"
            )
            .is_err()
        );
        assert!(
            KeyPair::from_pem(
                "-----BEGIN RSA PRIVATE KEY-----\n!!\n-----END RSA PRIVATE KEY-----\n"
            )
            .is_err()
        );
    }
}
