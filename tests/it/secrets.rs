//! Credentials inside URLs are never written (issue 23 F6–F8): a recipe's git URL with a
//! token (served over HTTP with Basic authentication, so the clone really needs it), an index
//! URL with a password, a proxy with a password and a `--compile-cache` Redis password reach no
//! file under the cache, no step log, no event, no lock file, no bundle, no report and not the
//! mirror's git config; the clone still authenticates.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{World, git, sh, text};

/// A dumb-HTTP git server (Python's `http.server`) over `root` that answers 401 unless the
/// request carries Basic `user:password`.
const SERVER: &str = r#"
import base64, functools, http.server, sys
want = "Basic " + base64.b64encode(sys.argv[2].encode()).decode()
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="kiln"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(H, directory=sys.argv[1]))
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(root: &Path, credential: &str) -> (Server, u16) {
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .arg(root)
        .arg(credential)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    (Server(child), port)
}

/// Every file under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            files_holding(&p, needle, found);
        } else if kind.is_file()
            && std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(p.display().to_string());
        }
    }
}

#[test]
fn credentials_in_urls_reach_no_file_no_output_and_no_mirror_config() {
    const TOKEN: &str = "tok3n-in-the-git-url-9f8e";
    const INDEX_PW: &str = "idx-pa55-in-the-index-url";
    const PROXY_PW: &str = "proxy-pa55-5150";
    const REDIS_PW: &str = "r3dis-pa55-in-the-backend";
    let w = World::new();
    let (repo, commit) = w.git_pure();
    let served = w.dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    git(
        &served,
        &["clone", "-q", "--bare", &repo.display().to_string(), "pure.git"],
    );
    sh(&served.join("pure.git"), &["git", "update-server-info"]);
    let (_server, port) = serve(&served, &format!("kiln:{TOKEN}"));
    let url = format!("http://kiln:{TOKEN}@127.0.0.1:{port}/pure.git");
    w.use_source("fixture-pure", &format!("git = \"{url}\"\nrev = \"v1.0.0\""));
    let env = [
        (
            "PIP_INDEX_URL",
            format!("http://idx:{INDEX_PW}@127.0.0.1:{port}/simple"),
        ),
        ("HTTPS_PROXY", format!("http://px:{PROXY_PW}@127.0.0.1:9")),
        ("NO_PROXY", "127.0.0.1,localhost".to_string()),
    ];

    let mut outputs = String::new();
    let mut run = |args: &[&str]| {
        let out = w.kiln().args(args).envs(env.iter().cloned()).output().unwrap();
        outputs.push_str(&format!("{}{}", text(&out.stdout), text(&out.stderr)));
        out
    };
    let out = run(&["install", "--json", "fixture-pure"]);
    assert!(out.status.success(), "{outputs}");
    assert_eq!(
        w.py("from kiln_fixture_pure import greet; print(greet('git'))")
            .unwrap(),
        "hello, git"
    );
    // The next run fetches through the mirror again: the credential is given once more.
    let out = run(&["plan", "fixture-pure"]);
    assert!(out.status.success(), "{outputs}");
    let lockfile = w.dir.path().join("kiln.lock");
    let out = run(&["lock", "fixture-pure", "-o", &lockfile.display().to_string()]);
    assert!(out.status.success(), "{outputs}");
    assert!(std::fs::read_to_string(&lockfile).unwrap().contains(&commit));
    // A password in --compile-cache: the backend does not answer, but kiln held its locks.
    let backend = format!("redis://:{REDIS_PW}@127.0.0.1:9/0");
    run(&["install", "--compile-cache", &backend, "fixture-pure"]);
    // A mirror an older kiln wrote names its URL with the credential: a bundle carries it
    // without, and the next fetch rewrites it.
    let mirrors: Vec<_> = std::fs::read_dir(w.cache.join("git")).unwrap().flatten().collect();
    assert!(!mirrors.is_empty());
    for m in &mirrors {
        sh(&m.path(), &["git", "config", "remote.origin.url", &url]);
    }
    let (bundle, out) = w.bundle(&lockfile, "pure.tar");
    outputs.push_str(&format!("{}{}", text(&out.stdout), text(&out.stderr)));
    assert!(out.status.success(), "{outputs}");
    let packed = std::fs::read(&bundle).unwrap();
    let plain = format!("url = http://127.0.0.1:{port}/pure.git");
    assert!(
        packed.windows(plain.len()).any(|x| x == plain.as_bytes()),
        "the bundle carries the mirror's config without the credential"
    );

    // A failure names the URL (no such tag): masked there too.
    w.use_source("fixture-pure", &format!("git = \"{url}\"\nrev = \"v9.9.9\""));
    let fresh = crate::common::venv(&w.dir.path().join("venv2"));
    let out = w.kiln_for(&fresh).args(["install", "fixture-pure"]).output().unwrap();
    outputs.push_str(&format!("{}{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(out.status.code(), Some(1), "{outputs}");
    assert!(
        outputs.contains("kiln:****@127.0.0.1"),
        "the failure names the URL, masked: {outputs}"
    );
    w.use_source("fixture-pure", &format!("git = \"{url}\"\nrev = \"v1.0.0\""));

    for secret in [TOKEN, INDEX_PW, PROXY_PW, REDIS_PW] {
        assert!(!outputs.contains(secret), "{secret} in kiln's output: {outputs}");
        let mut found = Vec::new();
        files_holding(&w.cache, secret, &mut found);
        files_holding(&w.dir.path().join("venv"), secret, &mut found);
        for f in [&lockfile, &bundle] {
            if std::fs::read(f).is_ok_and(|b| b.windows(secret.len()).any(|x| x == secret.as_bytes())) {
                found.push(f.display().to_string());
            }
        }
        assert!(found.is_empty(), "{secret} written into {found:?}");
        for m in &mirrors {
            let config = sh(&m.path(), &["git", "config", "--list"]);
            assert!(!config.contains(secret), "{secret} in {}: {config}", m.path().display());
        }
    }
    // What was masked says so: the step log shows the index with its user and a mask.
    let mut masked = Vec::new();
    files_holding(&w.cache, "http://idx:****@127.0.0.1", &mut masked);
    assert!(!masked.is_empty(), "the index URL is in no log at all");
}
