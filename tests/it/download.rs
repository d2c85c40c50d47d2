//! Downloads over real TLS from a local HTTPS server with its own CA: the CA named by
//! `SSL_CERT_FILE` is trusted, an unknown one is refused at once with a hint, and a transfer cut
//! short is resumed with a `Range` request.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::Instant;

use crate::common::{World, text};

/// The variables that could make the test CA (or the machine's) trusted behind kiln's back.
const CA_VARS: [&str; 4] = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"];

/// A CA and a server certificate for 127.0.0.1 signed by it (ECDSA P-256, made by the rcgen
/// crate: no `openssl` program needed); returns (ca.pem, cert, key).
fn make_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, "kiln test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    server.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    let key = KeyPair::generate().unwrap();
    let cert = server.signed_by(&key, &ca).unwrap();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    (
        write("ca.pem", ca.pem()),
        write("server.pem", cert.pem()),
        write("server.key", key.serialize_pem()),
    )
}

struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(root: &Path, cert: &Path, key: &Path, cut: usize) -> Server {
    let log = root.with_extension("log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/https_server.py");
    let mut child = StdCommand::new("python3")
        .arg(script)
        .args([root, cert, key, &log])
        .args(["--cut", &cut.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("server said {line:?}"));
    Server { child, port, log }
}

#[test]
fn https_downloads_trust_ssl_cert_file_refuse_unknown_cas_and_resume_a_cut_transfer() {
    let w = World::new();
    let tls = w.dir.path().join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    let (ca, cert, key) = make_ca(&tls);
    let (tarball, sha) = w.sdist("kiln-fixture-pure");
    let served = w.dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let name = tarball.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::copy(&tarball, served.join(&name)).unwrap();
    let size = std::fs::metadata(&tarball).unwrap().len() as usize;
    let server = serve(&served, &cert, &key, size / 2);
    let url = format!("https://127.0.0.1:{}/{name}", server.port);
    w.use_source("fixture-pure", &format!("sdist = \"{url}\"\nsha256 = \"{sha}\""));

    // An unknown CA: refused on the first attempt (no retries), with what to do about it.
    let started = Instant::now();
    let mut kiln = w.kiln();
    for v in CA_VARS {
        kiln.env_remove(v);
    }
    let out = kiln.args(["install", "fixture-pure"]).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("certificate is not trusted"), "{err}");
    assert!(err.contains("SSL_CERT_FILE"), "the hint names the variable: {err}");
    assert!(started.elapsed().as_secs() < 20, "a certificate error is not retried");
    assert!(w.py("import kiln_fixture_pure").is_err(), "nothing was installed");

    // The CA named by SSL_CERT_FILE is trusted; the first transfer is cut halfway and resumed.
    let mut kiln = w.kiln();
    for v in CA_VARS {
        kiln.env_remove(v);
    }
    let out = kiln
        .env("SSL_CERT_FILE", &ca)
        .args(["install", "fixture-pure"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        w.py("from kiln_fixture_pure import greet; print(greet('tls'))")
            .unwrap(),
        "hello, tls"
    );
    let log = std::fs::read_to_string(&server.log).unwrap();
    let gets: Vec<&str> = log.lines().collect();
    assert_eq!(gets.first(), Some(&format!("GET /{name} range=-").as_str()), "{log}");
    assert!(
        gets.iter()
            .any(|l| *l == format!("GET /{name} range=bytes={}-", size / 2)),
        "the second request resumes where the cut transfer stopped:\n{log}"
    );
    assert!(w.cache.join("sources").join(&sha).join(&name).is_file());
}
