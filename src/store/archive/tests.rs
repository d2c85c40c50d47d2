//! Unpacking hostile and ordinary archives built member by member: what is written, what is refused.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use super::*;

/// One member of a test archive: name, kind, mode, data (a link's target for links).
struct M(&'static str, tar::EntryType, u32, &'static [u8]);

/// A tar built header by header, so that names the `tar` crate's writer refuses (`..`,
/// absolute) can be written too.
fn tar_bytes(members: &[M]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for M(name, ty, mode, data) in members {
        let mut h = tar::Header::new_gnu();
        let raw = &mut h.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*ty);
        h.set_mode(*mode);
        h.set_mtime(1_700_000_000);
        if ty.is_symlink() || ty.is_hard_link() {
            h.set_link_name_literal(data).unwrap();
            h.set_size(0);
            h.set_cksum();
            b.append(&h, std::io::empty()).unwrap();
        } else {
            h.set_size(data.len() as u64);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
    }
    b.into_inner().unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn unpack_bytes(bytes: &[u8], links: Links) -> (tempfile::TempDir, PathBuf, Result<(), ArchiveError>) {
    let t = tempfile::tempdir().unwrap();
    let archive = t.path().join("a.tar.gz");
    std::fs::write(&archive, bytes).unwrap();
    let dest = t.path().join("out");
    let r = unpack(&archive, &dest, links);
    (t, dest, r)
}

fn refusal(r: Result<(), ArchiveError>) -> (String, Refusal) {
    match r {
        Err(ArchiveError::Refused { member, why, .. }) => (member, why),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

use tar::EntryType as T;

#[test]
fn unpacks_files_and_dirs_keeping_only_the_executable_bit() {
    let tar = tar_bytes(&[
        M("pkg-1.0/", T::Directory, 0o755, b""),
        M("pkg-1.0/setup.py", T::Regular, 0o644, b"print('hi')\n"),
        M("pkg-1.0/tools/run.sh", T::Regular, 0o4777, b"#!/bin/sh\n"),
        M("pkg-1.0/old-style-dir/", T::Regular, 0o755, b""),
    ]);
    let (_t, dest, r) = unpack_bytes(&gz(&tar), Links::Refuse);
    r.unwrap();
    let setup = dest.join("pkg-1.0/setup.py");
    assert_eq!(std::fs::read_to_string(&setup).unwrap(), "print('hi')\n");
    let mode = std::fs::metadata(dest.join("pkg-1.0/tools/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7000, 0, "no setuid/setgid/sticky: {mode:o}");
    assert_eq!(mode & 0o100, 0o100, "still executable: {mode:o}");
    assert_eq!(std::fs::metadata(&setup).unwrap().permissions().mode() & 0o111, 0);
    assert!(dest.join("pkg-1.0/old-style-dir").is_dir());
    let mtime = std::fs::metadata(&setup).unwrap().modified().unwrap();
    assert_eq!(mtime, SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    // A plain (uncompressed) tar unpacks the same.
    let (_t, dest, r) = unpack_bytes(&tar, Links::Refuse);
    r.unwrap();
    assert!(dest.join("pkg-1.0/setup.py").is_file());
}

#[test]
fn refuses_absolute_paths_dotdot_and_devices_and_leaves_nothing() {
    for (member, why) in [
        (M("/tmp/evil", T::Regular, 0o644, b"x"), Refusal::Absolute),
        (M("pkg/../../evil", T::Regular, 0o644, b"x"), Refusal::ParentDir),
        (M("pkg/dev", T::Char, 0o644, b""), Refusal::Kind("a character device")),
        (M("pkg/fifo", T::Fifo, 0o644, b""), Refusal::Kind("a fifo")),
    ] {
        let name = member.0;
        let tar = tar_bytes(&[M("pkg/ok.py", T::Regular, 0o644, b"ok"), member]);
        let (t, dest, r) = unpack_bytes(&gz(&tar), Links::InsideTree);
        assert_eq!(refusal(r), (name.to_string(), why));
        assert!(!dest.exists(), "nothing is moved into place");
        assert!(!t.path().join("out.part").exists(), "the partial tree is removed");
        assert!(!t.path().join("evil").exists() && !Path::new("/tmp/evil").exists());
    }
}

#[test]
fn symlinks_inside_the_tree_are_kept_where_allowed() {
    let tar = tar_bytes(&[
        M("pkg/VERSION", T::Regular, 0o644, b"1.0\n"),
        M("pkg/sub/VERSION", T::Symlink, 0o777, b"../VERSION"),
        M("pkg/copy", T::Link, 0o644, b"pkg/VERSION"),
    ]);
    let (_t, dest, r) = unpack_bytes(&gz(&tar), Links::InsideTree);
    r.unwrap();
    let link = dest.join("pkg/sub/VERSION");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "1.0\n");
    let copy = dest.join("pkg/copy");
    assert!(std::fs::symlink_metadata(&copy).unwrap().file_type().is_file());
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "1.0\n");

    let (_t, _dest, r) = unpack_bytes(&gz(&tar), Links::Refuse);
    assert_eq!(refusal(r), ("pkg/sub/VERSION".into(), Refusal::LinkNotAllowed));
}

#[test]
fn symlinks_that_leave_the_tree_are_refused() {
    let cases: &[&[M]] = &[
        &[M("pkg/l", T::Symlink, 0o777, b"/etc/passwd")],
        &[M("pkg/l", T::Symlink, 0o777, b"../../outside")],
        // Each link alone stays inside; followed together, `s/..` leaves the root.
        &[
            M("s", T::Symlink, 0o777, b"."),
            M("l", T::Symlink, 0o777, b"s/../outside"),
        ],
    ];
    for members in cases {
        let (_t, dest, r) = unpack_bytes(&gz(&tar_bytes(members)), Links::InsideTree);
        let (_, why) = refusal(r);
        assert!(matches!(why, Refusal::LinkOutside(_)), "{why:?}");
        assert!(!dest.exists());
    }
    // A member may not be written through a link of the archive.
    let through = tar_bytes(&[
        M("pkg/real/", T::Directory, 0o755, b""),
        M("pkg/link", T::Symlink, 0o777, b"real"),
        M("pkg/link/l2", T::Symlink, 0o777, b"../x"),
    ]);
    let (_t, _dest, r) = unpack_bytes(&gz(&through), Links::InsideTree);
    assert_eq!(refusal(r), ("pkg/link/l2".into(), Refusal::ThroughLink));
    // A hard link must name a file unpacked before it.
    let hard = tar_bytes(&[M("pkg/h", T::Link, 0o644, b"/etc/passwd")]);
    let (_t, _dest, r) = unpack_bytes(&gz(&hard), Links::InsideTree);
    assert_eq!(
        refusal(r),
        ("pkg/h".into(), Refusal::HardLinkMissing("/etc/passwd".into()))
    );
}

#[test]
fn zip_sdists_unpack_with_their_links() {
    let t = tempfile::tempdir().unwrap();
    let archive = t.path().join("pkg-1.0.zip");
    let mut z = zip::ZipWriter::new(File::create(&archive).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    z.add_directory("pkg-1.0/", opts).unwrap();
    z.start_file("pkg-1.0/setup.py", opts.unix_permissions(0o755)).unwrap();
    z.write_all(b"print('zip')\n").unwrap();
    z.add_symlink("pkg-1.0/link.py", "setup.py", opts).unwrap();
    z.start_file("../evil", opts).unwrap();
    z.write_all(b"x").unwrap();
    z.finish().unwrap();
    let dest = t.path().join("out");
    let (member, why) = refusal(unpack(&archive, &dest, Links::InsideTree));
    assert_eq!((member.as_str(), why), ("../evil", Refusal::ParentDir));

    let mut z = zip::ZipWriter::new(File::create(&archive).unwrap());
    z.start_file("pkg-1.0/setup.py", opts.unix_permissions(0o4755)).unwrap();
    z.write_all(b"print('zip')\n").unwrap();
    z.add_symlink("pkg-1.0/link.py", "setup.py", opts).unwrap();
    z.finish().unwrap();
    unpack(&archive, &dest, Links::InsideTree).unwrap();
    assert_eq!(
        std::fs::read_to_string(dest.join("pkg-1.0/link.py")).unwrap(),
        "print('zip')\n"
    );
    let mode = std::fs::metadata(dest.join("pkg-1.0/setup.py"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!((mode & 0o7000, mode & 0o100), (0, 0o100), "{mode:o}");
}

#[test]
fn other_compressions_are_named() {
    let (_t, _dest, r) = unpack_bytes(b"BZh91AY&SY", Links::InsideTree);
    assert!(
        matches!(
            r,
            Err(ArchiveError::Unsupported {
                compression: "bzip2",
                ..
            })
        ),
        "{r:?}"
    );
}

/// A plain tar of 10 kB whose one member is sparse: 512 bytes of data at the end of `real`.
fn sparse_tar(real: u64) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_path("wheels/ab/big.whl").unwrap();
    h.set_entry_type(T::GNUSparse);
    h.set_mode(0o644);
    h.set_size(512);
    let g = h.as_gnu_mut().unwrap();
    g.sparse[0].set_offset(real - 512);
    g.sparse[0].set_length(512);
    g.set_real_size(real);
    h.set_cksum();
    b.append(&h, &[7u8; 512][..]).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn a_small_member_that_unpacks_to_gigabytes_is_refused_before_it_is_written() {
    let tar = sparse_tar(4 << 30);
    assert!(tar.len() < 16 * 1024, "{}", tar.len());
    let t = tempfile::tempdir().unwrap();
    let archive = t.path().join("bundle.tar");
    std::fs::write(&archive, &tar).unwrap();
    let dest = t.path().join("out");
    let started = std::time::Instant::now();
    let (member, why) = refusal(unpack(&archive, &dest, Links::Refuse));
    assert_eq!(member, "wheels/ab/big.whl");
    assert!(
        matches!(why, Refusal::TooLarge { size, .. } if size == 4 << 30),
        "{why}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(!dest.exists() && !t.path().join("out.part").exists());
}

#[test]
fn limits_hold_per_member_and_in_total_while_streaming() {
    let big = vec![0u8; 3 << 20];
    let mut b = tar::Builder::new(Vec::new());
    for name in ["pkg/a.bin", "pkg/b.bin"] {
        let mut h = tar::Header::new_gnu();
        h.set_path(name).unwrap();
        h.set_mode(0o644);
        h.set_size(big.len() as u64);
        h.set_cksum();
        b.append(&h, &big[..]).unwrap();
    }
    let archive_bytes = gz(&b.into_inner().unwrap());
    assert!(
        archive_bytes.len() < 64 * 1024,
        "a 6 MiB bomb in {} bytes",
        archive_bytes.len()
    );
    let t = tempfile::tempdir().unwrap();
    let archive = t.path().join("a.tar.gz");
    std::fs::write(&archive, &archive_bytes).unwrap();
    let dest = t.path().join("out");
    for (limits, member, what) in [
        (
            Limits {
                member: 1 << 20,
                total: 1 << 30,
            },
            "pkg/a.bin",
            "for one member",
        ),
        (
            Limits {
                member: 4 << 20,
                total: 5 << 20,
            },
            "pkg/b.bin",
            "for the whole archive",
        ),
    ] {
        let r = unpack_limited(&archive, &dest, Links::Refuse, Some(limits));
        let (name, why) = refusal(r);
        assert_eq!(name, member);
        assert!(matches!(why, Refusal::TooLarge { what: w, .. } if w == what), "{why}");
        assert!(!dest.exists());
    }
    unpack_limited(
        &archive,
        &dest,
        Links::Refuse,
        Some(Limits {
            member: 4 << 20,
            total: 8 << 20,
        }),
    )
    .unwrap();
    assert_eq!(std::fs::metadata(dest.join("pkg/b.bin")).unwrap().len(), 3 << 20);
}

#[test]
fn an_archive_that_is_a_fifo_is_refused_not_waited_on() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("bundle.tar");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let r = unpack(&fifo, &t.path().join("out"), Links::Refuse);
    assert!(matches!(r, Err(ArchiveError::Read { .. })), "{r:?}");
    assert!(r.unwrap_err().to_string().contains("not a regular file"));
}
