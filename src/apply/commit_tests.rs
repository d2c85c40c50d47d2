//! Tests of the install transaction's pieces: backups put back, wheels kept or not.

use super::*;
use crate::apply::failure::Restored;
use crate::probe::python::Dist;

#[test]
fn kiln_json_is_listed_in_record_once() {
    let added = listed_with("a/x.py,sha256=1,2", "a-1.dist-info/kiln.json").unwrap();
    assert_eq!(added, "a/x.py,sha256=1,2\na-1.dist-info/kiln.json,,\n");
    assert_eq!(listed_with(&added, "a-1.dist-info/kiln.json"), None);
    assert_eq!(listed_with("", "k.json").unwrap(), "k.json,,\n");
}

/// A distribution `demo` 1.0 installed in `site` with one module.
fn installed(site: &Path) -> Dist {
    let info = site.join("demo-1.0.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    std::fs::write(site.join("demo.py"), "V = 1\n").unwrap();
    std::fs::write(info.join("RECORD"), "demo.py,,\ndemo-1.0.dist-info/RECORD,,\n").unwrap();
    Dist {
        name: "demo".into(),
        version: "1.0".into(),
        location: Some(site.display().to_string()),
        dist_info: Some(info.display().to_string()),
        direct_url: None,
        requires: Vec::new(),
        installer: None,
        kiln: None,
        kiln_unreadable: None,
    }
}

#[test]
fn a_failed_step_puts_back_what_was_there_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let dist = installed(&site);
    let backup = super::replace::of(&dist, &dir.path().join("backup")).unwrap();
    // The failed install replaced the module, then was uninstalled.
    std::fs::remove_file(site.join("demo.py")).unwrap();
    std::fs::remove_dir_all(site.join("demo-1.0.dist-info")).unwrap();
    let log = dir.path().join("demo.restore.log");
    let r = put_back("demo", Some(&backup), &log);
    assert!(matches!(r, Restored::Restored { files: 2, .. }), "{r:?}");
    assert_eq!(r.to_string(), "the previous demo was restored (2 files)");
    assert_eq!(std::fs::read_to_string(site.join("demo.py")).unwrap(), "V = 1\n");
    // Nothing was installed before: removing the new one is the whole restore.
    let r = put_back("demo", None, &log);
    assert_eq!(r.to_string(), "demo was removed again; it was not installed before");
    // A backup whose copies are gone cannot be restored, and says where to look.
    std::fs::remove_dir_all(dir.path().join("backup")).unwrap();
    let r = put_back("demo", Some(&backup), &log);
    assert!(matches!(r, Restored::Failed { .. }));
    assert!(
        r.to_string().starts_with("RESTORE FAILED: cannot restore demo: "),
        "{r}"
    );
    assert!(r.to_string().ends_with(&format!("see {}", log.display())), "{r}");
}

#[test]
fn a_proven_build_leaves_only_a_wheel_that_still_lives_in_its_tree() {
    let dir = tempfile::tempdir().unwrap();
    let tree = |name: &str| {
        let work = dir.path().join(name);
        for d in ["src", "build-requires", "wheel"] {
            std::fs::create_dir_all(work.join(d)).unwrap();
        }
        std::fs::write(work.join("wheel/a.whl"), "").unwrap();
        work
    };
    // The wheel went to the wheel cache: the whole tree goes.
    let cached = tree("cached");
    clean_up(&cached, Some(&dir.path().join("cache/a.whl")));
    assert!(!cached.exists());
    // The cache could not keep it: the wheel stays, sources and overlay go.
    let kept = tree("kept");
    clean_up(&kept, Some(&kept.join("wheel/a.whl")));
    assert!(kept.join("wheel/a.whl").is_file());
    assert!(!kept.join("src").exists() && !kept.join("build-requires").exists());
}
