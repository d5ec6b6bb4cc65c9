//! The TLS layer as CFEngine uses it: no certificate authorities, no host
//! names. Each side shows a self-signed certificate made from its host key
//! and the other side looks only at the key inside; whether that key is
//! trusted is decided after the handshake, against the key ring (see
//! [`super::client`]), as cf-agent decides it.
//!
//! Only TLS 1.3 is offered: cf-serverd 3.21 allows TLS 1.2 only with RSA
//! key exchange (`AES256-GCM-SHA384`, `AES256-SHA`), which rustls does not
//! implement, and with OpenSSL 3 it negotiates TLS 1.3
//! (`TLS_AES_256_GCM_SHA384`) anyway.

use super::keys::KeyPair;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, ServerName,
    SubjectPublicKeyInfoDer, UnixTime,
};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use std::sync::{Arc, Mutex};

/// Our side of the handshake: the certificate made from our key, and the
/// key itself in the form the TLS layer signs with.
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs1KeyDer<'static>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity { .. }")
    }
}

impl Identity {
    /// A self-signed certificate for `keys`, as cf-agent makes one in
    /// memory for each run (subject `CN=a`; the peer never checks the
    /// signature, only the key).
    pub fn new(keys: &KeyPair) -> Result<Identity, String> {
        let pkcs8 = keys.pkcs8_der();
        let signer = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(
            &PrivatePkcs8KeyDer::from(pkcs8.as_slice()),
            &rcgen::PKCS_RSA_SHA256,
        )
        .map_err(|e| format!("cannot use our key for a certificate: {e}"))?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
            .map_err(|e| format!("cannot make our certificate: {e}"))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "a");
        let cert = params
            .self_signed(&signer)
            .map_err(|e| format!("cannot sign our certificate: {e}"))?;
        Ok(Identity {
            cert: cert.der().clone(),
            key: PrivatePkcs1KeyDer::from(keys.pkcs1_der().to_vec()),
        })
    }
}

/// Remembers the public key the server showed, for the trust decision
/// made after the handshake; checks only that the server holds the private
/// half (the handshake signature).
#[derive(Debug)]
pub struct PeerKey {
    spki: Mutex<Option<Vec<u8>>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PeerKey {
    /// The `SubjectPublicKeyInfo` the server presented, once it has.
    pub fn presented(&self) -> Option<Vec<u8>> {
        self.spki.lock().ok().and_then(|s| s.clone())
    }
}

fn spki_of(cert: &CertificateDer<'_>) -> Result<Vec<u8>, rustls::Error> {
    super::der::certificate_spki(cert.as_ref())
        .map(<[u8]>::to_vec)
        .ok_or(rustls::Error::InvalidCertificate(
            CertificateError::BadEncoding,
        ))
}

impl ServerCertVerifier for PeerKey {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let spki = spki_of(end_entity)?;
        if let Ok(mut seen) = self.spki.lock() {
            *seen = Some(spki);
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not offered".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let spki = spki_of(cert)?;
        rustls::crypto::verify_tls13_signature_with_raw_key(
            message,
            &SubjectPublicKeyInfoDer::from(spki.as_slice()),
            dss,
            &self.algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A TLS client configuration for one connection, and the recorder of the
/// key the server will show.
pub fn client_config(identity: &Identity) -> Result<(rustls::ClientConfig, Arc<PeerKey>), String> {
    let provider = rustls::crypto::ring::default_provider();
    let peer = Arc::new(PeerKey {
        spki: Mutex::new(None),
        algorithms: provider.signature_verification_algorithms,
    });
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(peer.clone())
        .with_client_auth_cert(
            vec![identity.cert.clone()],
            PrivateKeyDer::Pkcs1(identity.key.clone_key()),
        )
        .map_err(|e| format!("cannot use our key for TLS: {e}"))?;
    Ok((config, peer))
}
