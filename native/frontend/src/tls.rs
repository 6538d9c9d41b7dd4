//! TLS (`serve --tls-cert --tls-key [--tls-client-ca]`): rustls from the same PEM files grpcio takes, and who
//! the handshake says is calling. With a client CA, every client must present a certificate that chains to it
//! (as grpcio's `require_client_auth`); its subject's CN is the principal (`User:<CN>`, auth.py), handed to
//! Python once per call in the shape of grpcio's `context.auth_context()`. ALPN offers h2 only: gRPC clients
//! refuse a TLS server that does not select it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig, ServerConnection};

/// A client that has not finished its handshake by then is dropped (it holds a task and a socket meanwhile).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one TLS connection's handshake established; shared by every call on the connection.
pub(crate) struct TlsPeer {
    /// The verified client certificate's subject CN; None without a client certificate (or without a CN).
    pub(crate) common_name: Option<Bytes>,
}

/// The rustls configuration of `--tls-cert`, `--tls-key` and `--tls-client-ca` (PEM); the message of an error
/// names the flag whose file is wrong.
pub(crate) fn server_config(
    cert_chain: &[u8],
    key: &[u8],
    client_ca: Option<&[u8]>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = CertificateDer::pem_slice_iter(cert_chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert: not a PEM certificate chain: {e}"))?;
    if certs.is_empty() {
        return Err("--tls-cert: no PEM certificate in it".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("--tls-key: not a PEM private key: {e}"))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("--tls-client-ca: not a PEM certificate: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("--tls-client-ca: not a usable CA certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("--tls-client-ca: no PEM certificate in it".into());
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--tls-client-ca: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("--tls-cert and --tls-key do not make a usable pair: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Why a handshake failed, when TLS itself refused it (a certificate, a protocol error, a plaintext client);
/// None when the connection just ended or failed (a TCP probe, a reset), which is not worth a log line.
pub(crate) fn refusal(error: &std::io::Error) -> Option<String> {
    if error.kind() != std::io::ErrorKind::InvalidData {
        return None;
    }
    Some(match error.get_ref() {
        Some(inner) => inner.to_string(),
        None => error.to_string(),
    })
}

/// The caller, read once the handshake is done (the verifier has checked the chain already).
pub(crate) fn peer_of(connection: &ServerConnection) -> TlsPeer {
    let leaf = connection.peer_certificates().and_then(|chain| chain.first());
    TlsPeer {
        common_name: leaf.and_then(|der| common_name(der)),
    }
}

/// The subject's first CN, as gRPC core reads it (`X509_NAME_get_index_by_NID(.., NID_commonName, -1)`).
fn common_name(der: &[u8]) -> Option<Bytes> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    Some(match cn.as_str() {
        Ok(text) => Bytes::copy_from_slice(text.as_bytes()),
        Err(_) => Bytes::copy_from_slice(cn.as_slice()),
    })
}

/// grpcio's auth context of a TLS call, the keys of it that groupcoord reads or can state exactly:
/// `transport_security_type`, `security_level` and, with a client certificate, `x509_common_name`.
pub(crate) fn auth_context<'py>(py: Python<'py>, peer: &TlsPeer) -> PyResult<Bound<'py, PyDict>> {
    let context = PyDict::new(py);
    let one = |value: &[u8]| PyList::new(py, [PyBytes::new(py, value)]);
    context.set_item("transport_security_type", one(b"ssl")?)?;
    context.set_item("security_level", one(b"TSI_PRIVACY_AND_INTEGRITY")?)?;
    if let Some(cn) = &peer.common_name {
        context.set_item("x509_common_name", one(cn)?)?;
    }
    Ok(context)
}
