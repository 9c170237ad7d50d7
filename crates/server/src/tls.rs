//! TLS for the PostgreSQL protocol: the rustls acceptor built from a PEM
//! certificate chain and private key (`--tls-cert`, `--tls-key`).
//!
//! pgwire answers a client's SSLRequest with 'S' when an acceptor is given
//! (and 'N' otherwise), a GSSENCRequest always with 'N', and then runs the
//! whole connection, authentication included, inside the TLS stream. The
//! crypto provider is ring's (no aws-lc); TLS 1.2 and 1.3 only, rustls's
//! default cipher suites.
//!
//! Client certificates (`--tls-client-ca`, PostgreSQL's `ssl_ca_file`):
//! the server asks every TLS client for one; a certificate that does not
//! chain to one of the file's CAs (or has expired) fails the handshake,
//! none at all is allowed here. Whether a login needs one, and whose it
//! must be, is authentication's business (`--auth cert`,
//! [`certificate_user`]). With `--tls-crl` (PostgreSQL's `ssl_crl_file`),
//! a certificate its revocation lists revoke fails the handshake too;
//! one no list speaks for (its CA published none) passes, as in
//! PostgreSQL, whose CRL file only lists what is revoked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use tokio_rustls::rustls;

pub use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}: {source}")]
    Cert {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("the TLS certificate file {0} holds no certificate")]
    NoCert(PathBuf),
    #[error("cannot read the TLS private key {path}: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("the client CA file {0} holds no usable certificate")]
    NoClientCa(PathBuf),
    #[error("client certificate verification: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    #[error("cannot read the certificate revocation list {path}: {source}")]
    Crl {
        path: PathBuf,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    #[error("the certificate revocation list file {0} holds no list")]
    NoCrl(PathBuf),
}

/// The revocation lists of PEM file `path` (`-----BEGIN X509 CRL-----`).
fn revocation_lists(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let lists = CertificateRevocationListDer::pem_file_iter(path)
        .and_then(|lists| lists.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Crl {
            path: path.to_path_buf(),
            source: e,
        })?;
    if lists.is_empty() {
        return Err(TlsError::NoCrl(path.to_path_buf()));
    }
    Ok(lists)
}

/// The acceptor for `cert` (PEM chain, leaf first) and `key` (PEM);
/// with `client_ca`, client certificates are requested and verified
/// against its CAs.
pub fn acceptor(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    crl: Option<&Path>,
) -> Result<TlsAcceptor, TlsError> {
    let mut config = server_config(cert, key, client_ca, crl)?;
    // PostgreSQL 17's direct TLS negotiation requires this ALPN protocol;
    // clients using SSLRequest may send it or not
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The acceptor of the console's HTTPS (`--http-addr` when TLS is on):
/// the same certificate, no client certificates (the console asks for a
/// role's password), HTTP/1.1 by ALPN.
pub fn http_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let mut config = server_config(cert, key, None, None)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    crl: Option<&Path>,
) -> Result<rustls::ServerConfig, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Cert {
            path: cert.to_path_buf(),
            source: e,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert(cert.to_path_buf()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.to_path_buf(),
        source: e,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(ca)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| TlsError::Cert {
                    path: ca.to_path_buf(),
                    source: e,
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(TlsError::NoClientCa(ca.to_path_buf()));
            }
            let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            // a client without a certificate may still log in
            // where authentication does not ask for one
            .allow_unauthenticated();
            if let Some(crl) = crl {
                verifier = verifier
                    .with_crls(revocation_lists(crl)?)
                    // a CRL lists what is revoked: a certificate no list
                    // covers is not (PostgreSQL's reading of ssl_crl_file)
                    .allow_unknown_revocation_status();
            }
            let verifier = verifier.build()?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(builder.with_single_cert(chain, key_der)?)
}

/// The user a verified client certificate names: its subject's common
/// name (PostgreSQL's `cert` authentication and `clientcert=verify-full`
/// compare it with the user name). `None` for no certificate, or one
/// without a readable common name.
pub fn certificate_user(certificates: Option<&[CertificateDer<'_>]>) -> Option<String> {
    let leaf = certificates?.first()?;
    x509_certificate::X509Certificate::from_der(leaf.as_ref())
        .ok()?
        .subject_common_name()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(matches!(
            acceptor(&missing, &missing, None, None),
            Err(TlsError::Cert { .. })
        ));
        assert!(matches!(
            acceptor(&empty, &empty, None, None),
            Err(TlsError::NoCert(_))
        ));
    }

    #[test]
    fn a_generated_certificate_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status();
        if !made.is_ok_and(|s| s.success()) {
            println!("notice: openssl is not installed; skipping");
            return;
        }
        assert!(acceptor(&cert, &key, None, None).is_ok());
        // a certificate where the key should be
        assert!(matches!(
            acceptor(&cert, &cert, None, None),
            Err(TlsError::Key { .. })
        ));
        // the certificate as its own client CA, and its common name
        assert!(acceptor(&cert, &key, Some(&cert), None).is_ok());
        assert!(matches!(
            acceptor(&cert, &key, Some(&key), None),
            Err(TlsError::NoClientCa(_))
        ));
        // a revocation list file without a list
        assert!(matches!(
            acceptor(&cert, &key, Some(&cert), Some(&cert)),
            Err(TlsError::NoCrl(_))
        ));
        let der = CertificateDer::from_pem_file(&cert).unwrap();
        assert_eq!(
            certificate_user(Some(std::slice::from_ref(&der))),
            Some("localhost".to_string())
        );
        assert_eq!(certificate_user(None), None);
    }
}
