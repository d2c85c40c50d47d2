//! Downloads are bounded (issue 23 F11, F12), against a loopback HTTP server in the test: a
//! server that trickles a byte at a time is ended by the overall deadline
//! (`KILN_DOWNLOAD_DEADLINE`), one that sends without end by the size cap
//! (`KILN_DOWNLOAD_MAX_BYTES`), and a partial file from an earlier run is resumed only when the
//! server answers its range with a 206 from where it ends; otherwise it is discarded and the
//! install succeeds. Two kilns on one cache fetching one source take turns: the second finds
//! the first's file.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{World, text};

#[derive(Clone, Copy)]
enum Mode {
    /// Announces 100 kB, then sends a byte every 100 ms.
    Trickle,
    /// No length, bytes without end.
    Endless,
    /// Honours `Range` as RFC 9110 says (206 with `Content-Range`, 416 past the end).
    Honest,
    /// Answers every `Range` with a 206 of the whole file.
    WrongRange,
    /// Sends the whole file in 20 pieces, 100 ms apart.
    Slow,
}

/// Serves `body` (as `mode` says) on loopback until the test ends; returns the URL of the file
/// and the `Range` header of each request (empty when none).
fn serve(mode: Mode, body: Vec<u8>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let seen = ranges.clone();
    let body = Arc::new(body);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, body) = (seen.clone(), body.clone());
            std::thread::spawn(move || answer(stream, mode, &body, &seen));
        }
    });
    (
        format!("http://127.0.0.1:{port}/kiln-fixture-pure-1.0.0.tar.gz"),
        ranges,
    )
}

fn answer(mut stream: TcpStream, mode: Mode, body: &[u8], seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut range = String::new();
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("range:") {
            range = v.trim().to_string();
        }
        line.clear();
    }
    seen.lock().unwrap().push(range.clone());
    let from: Option<usize> = range
        .strip_prefix("bytes=")
        .and_then(|r| r.trim_end_matches('-').parse().ok());
    let _ = match (mode, from) {
        (Mode::Trickle, _) => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
            for _ in 0..100_000 {
                if stream.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(())
        }
        (Mode::Endless, _) => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let chunk = vec![b'y'; 1 << 16];
            while stream.write_all(&chunk).is_ok() {}
            Ok(())
        }
        (Mode::Honest, Some(n)) if n >= body.len() => stream.write_all(
            format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\nContent-Length: 0\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        ),
        (Mode::Honest, Some(n)) => {
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {n}-{}/{}\r\nContent-Length: {}\r\n\r\n",
                body.len() - 1,
                body.len(),
                body.len() - n
            );
            stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(&body[n..]))
        }
        (Mode::WrongRange, Some(_)) => {
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-{}/{}\r\nContent-Length: {}\r\n\r\n",
                body.len() - 1,
                body.len(),
                body.len()
            );
            stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body))
        }
        (Mode::Slow, _) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let _ = stream.write_all(head.as_bytes());
            for piece in body.chunks(body.len().div_ceil(20)) {
                std::thread::sleep(Duration::from_millis(100));
                if stream.write_all(piece).is_err() {
                    break;
                }
            }
            Ok(())
        }
        (_, _) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body))
        }
    };
}

/// Runs `cmd`, killing it after `limit` (a hang before the fix must fail the test, not stall it).
fn run_within(mut cmd: assert_cmd::Command, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let out = cmd
        .timeout(limit)
        .output()
        .unwrap_or_else(|e| panic!("killed after {limit:?}: {e}"));
    (out, started.elapsed())
}

fn partial_files(w: &World) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(w.cache.join("sources")) else {
        return Vec::new();
    };
    dirs.flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".part"))
        .collect()
}

#[test]
fn a_trickling_download_ends_at_its_deadline_and_an_endless_one_at_the_size_cap() {
    let w = World::new();
    let sha = "ab".repeat(32);
    let (url, _) = serve(Mode::Trickle, Vec::new());
    w.use_source("fixture-pure", &format!("sdist = \"{url}\"\nsha256 = \"{sha}\""));
    let mut cmd = w.kiln();
    cmd.args(["install", "fixture-pure"]).env("KILN_DOWNLOAD_DEADLINE", "2");
    let (out, took) = run_within(cmd, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "killed after {took:?}: {err}");
    assert!(took < Duration::from_secs(30), "{took:?}: {err}");
    assert!(err.contains("did not end within its deadline of 2 s"), "{err}");
    assert!(err.contains("KILN_DOWNLOAD_DEADLINE"), "{err}");

    let (url, _) = serve(Mode::Endless, Vec::new());
    w.use_source("fixture-pure", &format!("sdist = \"{url}\"\nsha256 = \"{sha}\""));
    let mut cmd = w.kiln();
    cmd.args(["install", "fixture-pure"])
        .env("KILN_DOWNLOAD_MAX_BYTES", "1000000");
    let (out, took) = run_within(cmd, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "killed after {took:?}: {err}");
    assert!(err.contains("more than 1000000 bytes"), "{err}");
    assert_eq!(
        partial_files(&w),
        Vec::<PathBuf>::new(),
        "the oversized partial file is removed"
    );

    let mut cmd = w.kiln();
    cmd.args(["install", "fixture-pure"])
        .env("KILN_DOWNLOAD_DEADLINE", "soon");
    let (out, _) = run_within(cmd, Duration::from_secs(60));
    assert!(text(&out.stderr).contains("KILN_DOWNLOAD_DEADLINE=\"soon\" is not a whole number"));
}

#[test]
fn a_partial_file_is_resumed_only_from_a_206_where_it_ends_and_otherwise_discarded() {
    // (server, what the partial file holds: a prefix of this much, or the file and more)
    let cases = [
        // Longer than the file: the honest server answers 416; the file is fetched again.
        (Mode::Honest, None),
        // A 206 from byte 0 for a range from the middle: not appended, fetched again.
        (Mode::WrongRange, Some(2)),
        // A true prefix and an honest server: resumed where it ends.
        (Mode::Honest, Some(2)),
    ];
    for (i, (mode, half)) in cases.into_iter().enumerate() {
        let w = World::new();
        let (tarball, sha) = w.sdist("kiln-fixture-pure");
        let body = std::fs::read(&tarball).unwrap();
        let partial = match half {
            Some(d) => body[..body.len() / d].to_vec(),
            None => [&body[..], b"left over from a server that sent too much"].concat(),
        };
        let part = w
            .cache
            .join("sources")
            .join(&sha)
            .join("kiln-fixture-pure-1.0.0.tar.gz.part");
        std::fs::create_dir_all(part.parent().unwrap()).unwrap();
        std::fs::write(&part, &partial).unwrap();
        let (url, ranges) = serve(mode, body);
        w.use_source("fixture-pure", &format!("sdist = \"{url}\"\nsha256 = \"{sha}\""));
        let mut cmd = w.kiln();
        cmd.args(["install", "fixture-pure"]);
        let (out, _) = run_within(cmd, Duration::from_secs(120));
        let ranges = ranges.lock().unwrap().clone();
        assert!(
            out.status.success(),
            "case {i}: requests {ranges:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(ranges[0], format!("bytes={}-", partial.len()), "case {i}");
        if i < 2 {
            assert_eq!(
                ranges.get(1).map(String::as_str),
                Some(""),
                "case {i}: fetched again whole: {ranges:?}"
            );
        } else {
            assert_eq!(ranges.len(), 1, "case {i}: resumed in one request: {ranges:?}");
        }
        assert!(w.py("import kiln_fixture_pure").is_ok(), "case {i}");
    }
}

#[test]
fn two_kilns_on_one_cache_fetch_one_source_once_and_both_install() {
    let w = World::new();
    let (tarball, sha) = w.sdist("kiln-fixture-pure");
    let (url, ranges) = serve(Mode::Slow, std::fs::read(&tarball).unwrap());
    w.use_source("fixture-pure", &format!("sdist = \"{url}\"\nsha256 = \"{sha}\""));
    let other = crate::common::venv(&w.dir.path().join("other"));
    // Two processes at once: the download takes about two seconds, so they overlap.
    let mut first = w.kiln_std();
    first.args(["install", "fixture-pure"]);
    let mut second = w.kiln_std_for(&other);
    second.args(["install", "fixture-pure"]);
    let a = first.spawn().unwrap();
    let b = second.spawn().unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert!(b.status.success(), "{}", text(&b.stderr));
    assert_eq!(
        ranges.lock().unwrap().len(),
        1,
        "one download, the other kiln found it whole"
    );
    assert_eq!(partial_files(&w), Vec::<PathBuf>::new());
    assert!(w.py("import kiln_fixture_pure").is_ok());
}
