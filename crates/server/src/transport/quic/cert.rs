//! The QUIC endpoint's certificate: one configured by the operator, used as is, or one
//! generated at start and replaced before it expires.
//!
//! A generated certificate is what browsers accept through WebTransport's
//! `serverCertificateHashes`: ECDSA P-256, valid for less than 14 days in all (Chromium
//! refuses longer ones). It is made valid from an hour ago (clock skew) for
//! [`CertSource::Generated`]'s lifetime, twelve days by default, and replaced at half its
//! lifetime, so the certificate a client is sent always has days left. The endpoint
//! serves the current certificate to every new handshake ([`ResolvesServerCert`]), and
//! join answers carry the current fingerprint: connections made before a rotation keep
//! theirs (TLS checks a certificate only in the handshake).

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

/// How far back a generated certificate's validity starts, for peers whose clocks lag.
const BACKDATE: Duration = Duration::from_secs(3600);

/// The longest validity (backdating included) browsers accept for a certificate pinned by
/// its hash.
pub const BROWSER_MAX_VALIDITY: Duration = Duration::from_secs(14 * 24 * 3600);

/// The default lifetime of a generated certificate: with `BACKDATE`, under
/// [`BROWSER_MAX_VALIDITY`].
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(12 * 24 * 3600);

/// Where the endpoint's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM certificate chain and private key files, used as they are.
    Files(PathBuf, PathBuf),
    /// Generated at start, then every half `lifetime` (each valid from an hour ago until
    /// `lifetime` from its making).
    Generated {
        /// How long each generated certificate is valid from its making.
        lifetime: Duration,
    },
}

impl Default for CertSource {
    fn default() -> Self {
        Self::Generated {
            lifetime: DEFAULT_LIFETIME,
        }
    }
}

/// The certificate in use.
#[derive(Debug)]
struct Current {
    key: Arc<CertifiedKey>,
    sha256: String,
}

/// The endpoint's certificate: what it serves, and its fingerprint for join answers.
#[derive(Debug)]
pub struct Certificates {
    current: RwLock<Arc<Current>>,
    source: CertSource,
    provider: Arc<CryptoProvider>,
}

impl Certificates {
    /// Loads or generates the first certificate.
    pub fn new(source: CertSource, provider: Arc<CryptoProvider>) -> io::Result<Self> {
        let current = make(&source, &provider)?;
        Ok(Self {
            current: RwLock::new(Arc::new(current)),
            source,
            provider,
        })
    }

    /// SHA-256 of the current certificate (DER), lowercase hex.
    pub fn sha256(&self) -> String {
        self.get().sha256.clone()
    }

    /// Whether the certificate is generated (and rotated) by the relay.
    pub fn generated(&self) -> bool {
        matches!(self.source, CertSource::Generated { .. })
    }

    /// How often a generated certificate is replaced; `None` for a configured one.
    pub fn rotation(&self) -> Option<Duration> {
        match self.source {
            CertSource::Generated { lifetime } => Some(lifetime / 2),
            CertSource::Files(..) => None,
        }
    }

    /// Replaces a generated certificate with a new one; answers its fingerprint. A
    /// configured certificate stays (`None`).
    pub fn rotate(&self) -> io::Result<Option<String>> {
        if !self.generated() {
            return Ok(None);
        }
        let next = Arc::new(make(&self.source, &self.provider)?);
        let sha256 = next.sha256.clone();
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(Some(sha256))
    }

    fn get(&self) -> Arc<Current> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get().key.clone())
    }
}

/// Replaces `certs` every [`Certificates::rotation`] until the task is aborted; a failed
/// rotation keeps the current certificate and is retried a minute later.
pub(super) async fn rotate_forever(certs: Arc<Certificates>) {
    let Some(every) = certs.rotation() else {
        return;
    };
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        match certs.rotate() {
            Ok(sha256) => {
                tracing::info!(
                    cert_sha256 = ?sha256,
                    "QUIC certificate rotated: new joins carry the new fingerprint"
                );
                wait = every;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot make a new QUIC certificate; keeping the current one");
                wait = Duration::from_secs(60).min(every);
            }
        }
    }
}

/// The certificate `source` names, with its signing key and fingerprint.
fn make(source: &CertSource, provider: &CryptoProvider) -> io::Result<Current> {
    let (chain, key) = match source {
        CertSource::Files(cert, key) => load(cert, key)?,
        CertSource::Generated { lifetime } => generate(*lifetime)?,
    };
    let leaf = chain
        .first()
        .ok_or_else(|| io::Error::other("the certificate file holds no certificate"))?;
    let sha256 = super::fingerprint(leaf);
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(io::Error::other)?;
    Ok(Current {
        key: Arc::new(CertifiedKey::new(chain, signer)),
        sha256,
    })
}

fn load(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| io::Error::other(format!("{}: {e}", cert.display())))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| io::Error::other(format!("{}: {e}", key.display())))?;
    Ok((chain, key))
}

/// A self-signed certificate for a QUIC endpoint whose certificate no one checks (the
/// links between nodes authenticate otherwise), valid for [`DEFAULT_LIFETIME`].
pub fn self_signed() -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    generate(DEFAULT_LIFETIME)
}

/// A self-signed ECDSA P-256 certificate for `localhost`, valid from [`BACKDATE`] ago
/// until `lifetime` from now.
fn generate(
    lifetime: Duration,
) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let key =
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(io::Error::other)?;
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).map_err(io::Error::other)?;
    let now = SystemTime::now();
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + lifetime).into();
    let cert = params.self_signed(&key).map_err(io::Error::other)?;
    let der = PrivatePkcs8KeyDer::from(key.serialize_der());
    Ok((vec![cert.der().clone()], der.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// The seconds since 2000 of the UTCTime (`YYMMDDHHMMSSZ`, DER tag 0x17) at `at`
    /// (months and days approximated; only differences of whole days are compared).
    fn utc_time(der: &[u8], at: usize) -> i64 {
        let s = std::str::from_utf8(&der[at + 2..at + 14]).unwrap();
        let n = |i: usize| s[i..i + 2].parse::<i64>().unwrap();
        ((n(0) * 372 + n(2) * 31 + n(4)) * 24 + n(6)) * 3600 + n(8) * 60 + n(10)
    }

    #[test]
    fn a_generated_certificate_fits_the_browser_rule() {
        assert!(BACKDATE + DEFAULT_LIFETIME < BROWSER_MAX_VALIDITY);
        // Ten minutes: start and end fall on the same day, so the approximation is exact.
        let lifetime = Duration::from_secs(600);
        let (chain, _) = generate(lifetime).unwrap();
        let der = chain[0].as_ref();
        // The validity: two UTCTimes in a row, notBefore then notAfter.
        let at = der
            .windows(2)
            .position(|w| w == [0x17, 13])
            .expect("a UTCTime");
        assert_eq!(&der[at + 15..at + 17], &[0x17, 13]);
        let (before, after) = (utc_time(der, at), utc_time(der, at + 15));
        let span = (BACKDATE + lifetime).as_secs() as i64;
        // Midnight may fall between the two; then the day arithmetic is off by whole days.
        assert_eq!((after - before).rem_euclid(24 * 3600), span);
        // ECDSA with SHA-256 (1.2.840.10045.4.3.2) on a P-256 key (1.2.840.10045.3.1.7).
        let has = |oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
        assert!(has(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]));
        assert!(has(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]));
    }

    #[test]
    fn rotation_changes_a_generated_certificate_only() {
        let certs = Certificates::new(CertSource::default(), ring()).unwrap();
        let first = certs.sha256();
        assert_eq!(certs.rotation(), Some(DEFAULT_LIFETIME / 2));
        let second = certs.rotate().unwrap().unwrap();
        assert_ne!(first, second);
        assert_eq!(certs.sha256(), second);
    }
}
