//! The transfer against a one-request loopback server.

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

#[test]
fn a_length_over_the_cap_is_refused_before_a_byte_is_kept_and_the_deadline_grows_with_it() {
    let url = serve_once(vec![b'z'; 5000]);
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("file.part");
    std::fs::write(&part, b"").unwrap();
    let policy = Policy {
        max_bytes: 4096,
        ..Policy::default()
    };
    let e = fetch(&url, &part, &policy, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, DownloadError::TooLarge { limit: 4096, .. }), "{e}");
    assert!(!part.exists(), "the partial file is removed");
    let p = Policy {
        deadline: Duration::from_secs(10),
        ..Policy::default()
    };
    assert_eq!(p.allowed(None), Duration::from_secs(10));
    assert_eq!(p.allowed(Some(3 << 30)), Duration::from_secs(10 + 3072));
}
