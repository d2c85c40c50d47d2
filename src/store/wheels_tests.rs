use super::*;
use crate::store::wheel::test_wheel;

fn inputs<'a>(abi: &'a BTreeMap<String, String>, source: &'a str) -> KeyInputs<'a> {
    KeyInputs {
        component: "flashinfer",
        version: "0.7.4",
        features: &[],
        source,
        build: serde_json::json!({"env": {"FLASHINFER_CUDA_ARCH_LIST": "{arch.flashinfer}"}}),
        archs: vec![crate::arch::Arch { major: 12, minor: 0 }],
        cuda: Some("13.0".into()),
        host_compiler: Some("13.3.0"),
        python: "3.12.3",
        implementation: "cpython",
        platform: Some("linux x86_64".into()),
        abi,
    }
}

const IS: Expected = Expected {
    dist: "flashinfer",
    version: "0.7.4",
};

fn want(json: &serde_json::Value) -> Want<'_> {
    Want {
        dist: "flashinfer",
        version: "0.7.4",
        inputs: json,
        locked: None,
    }
}

#[test]
fn the_key_changes_with_what_decides_the_binary_and_a_stored_wheel_is_found() {
    let torch: BTreeMap<String, String> = [("torch".to_string(), "2.14.1 cu13.0".to_string())].into();
    let other_torch: BTreeMap<String, String> = [("torch".to_string(), "2.11.0 cu13.0".to_string())].into();
    let a = WheelKey::of(&inputs(&torch, "sha256:aa"));
    assert_eq!(a, WheelKey::of(&inputs(&torch, "sha256:aa")));
    assert_ne!(a, WheelKey::of(&inputs(&other_torch, "sha256:aa")));
    assert_ne!(a, WheelKey::of(&inputs(&torch, "sha256:bb")));
    // The key of inputs as key.json records them is the key they were stored under.
    let json = serde_json::to_value(inputs(&torch, "sha256:aa")).unwrap();
    assert_eq!(WheelKey::of_recorded(&json), Some(a.clone()));
    assert_eq!(WheelKey::of_recorded(&serde_json::json!({"component": "x"})), None);

    let tmp = tempfile::tempdir().unwrap();
    let wheel = test_wheel(tmp.path(), "flashinfer", "0.7.4", b"x = 1\n");
    let cache = tmp.path().join("cache");
    assert_eq!(lookup(&cache, &a), None);
    let kept = store(&cache, &a, &json, &wheel, IS).unwrap();
    assert_eq!(lookup(&cache, &a), Some(kept.clone()));
    assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(&wheel).unwrap());
    assert!(find(&cache, &a, &want(&json)).unwrap().is_some());
    // Storing again keeps the first entry.
    assert_eq!(store(&cache, &a, &json, &wheel, IS).unwrap(), kept);
    // A wheel of another distribution or version is never kept.
    let b = WheelKey::of(&inputs(&torch, "sha256:bb"));
    let other = test_wheel(tmp.path(), "evil", "0.7.4", b"x = 1\n");
    assert!(store(&cache, &b, &json, &other, IS).is_err());
    let older = test_wheel(tmp.path(), "flashinfer", "0.6.0", b"x = 1\n");
    assert!(store(&cache, &b, &json, &older, IS).is_err());
    assert_eq!(lookup(&cache, &b), None);
}

#[test]
fn an_unverified_wheel_is_marked_until_a_verification_passes_or_it_is_forgotten() {
    let torch = BTreeMap::new();
    let key = WheelKey::of(&inputs(&torch, "sha256:cc"));
    let json = serde_json::to_value(inputs(&torch, "sha256:cc")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let wheel = test_wheel(tmp.path(), "flashinfer", "0.7.4", b"x = 1\n");
    let cache = tmp.path().join("cache");
    let why = "No module named 'six'";
    let kept = store_unverified(&cache, &key, &json, &wheel, IS, why).unwrap();
    let found = find(&cache, &key, &want(&json)).unwrap().unwrap();
    assert_eq!(found.wheel, kept);
    assert_eq!(found.unverified.as_ref().map(|u| u.why.as_str()), Some(why));
    assert_eq!(unverified(&cache), [(kept.clone(), found.unverified.unwrap())]);
    // Verified now: the same entry, without its mark.
    assert_eq!(store(&cache, &key, &json, &wheel, IS).unwrap(), kept);
    assert_eq!(find(&cache, &key, &want(&json)).unwrap().unwrap().unverified, None);
    assert!(unverified(&cache).is_empty());
    // A verified entry is neither marked again nor forgotten.
    store_unverified(&cache, &key, &json, &wheel, IS, why).unwrap();
    forget_unverified(&cache, &key).unwrap();
    assert_eq!(find(&cache, &key, &want(&json)).unwrap().unwrap().unverified, None);
    // An unverified one is forgotten.
    let other = WheelKey::of(&inputs(&torch, "sha256:dd"));
    store_unverified(&cache, &other, &json, &wheel, IS, why).unwrap();
    forget_unverified(&cache, &other).unwrap();
    assert_eq!(find(&cache, &other, &want(&json)), Ok(None));
}

#[test]
fn a_wheel_that_is_not_the_one_its_entry_recorded_is_refused_and_moved_aside() {
    let torch = BTreeMap::new();
    let key = WheelKey::of(&inputs(&torch, "sha256:ee"));
    let json = serde_json::to_value(inputs(&torch, "sha256:ee")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let wheel = test_wheel(tmp.path(), "flashinfer", "0.7.4", b"verified = True\n");
    let name = wheel.file_name().unwrap().to_owned();
    let cache = tmp.path().join("cache");
    let kept = store(&cache, &key, &json, &wheel, IS).unwrap();
    let found = find(&cache, &key, &want(&json)).unwrap().unwrap();
    assert_eq!(found.sha256, crate::store::sha256_file(&wheel).unwrap());

    // A lock that names another wheel: refused, moved aside.
    let zeros = "0".repeat(64);
    let locked = Want {
        locked: Some(&zeros),
        ..want(&json)
    };
    let r = find(&cache, &key, &locked).unwrap_err();
    assert!(
        matches!(&*r.why, Why::Differs { whose, .. } if whose == "the lock"),
        "{r}"
    );
    assert!(r.moved.starts_with(cache.join("quarantine")), "{r}");
    assert!(r.moved.join(&name).is_file(), "{r}");
    assert_eq!(lookup(&cache, &key), None);

    // The wheel changed under its record: refused at use, moved aside, never found again.
    store(&cache, &key, &json, &wheel, IS).unwrap();
    std::fs::write(&kept, b"something else").unwrap();
    let r = find(&cache, &key, &want(&json)).unwrap_err();
    assert!(
        matches!(&*r.why, Why::Differs { whose, .. } if whose == "its cache entry"),
        "{r}"
    );
    assert!(r.to_string().contains("was moved aside to"), "{r}");
    assert_eq!(std::fs::read(r.moved.join(&name)).unwrap(), b"something else");
    assert_eq!(find(&cache, &key, &want(&json)), Ok(None));

    // F17: no record, and the wheel changed: refused, never recorded on first use.
    store(&cache, &key, &json, &wheel, IS).unwrap();
    std::fs::remove_file(key.dir(&cache).join(SHA256)).unwrap();
    test_wheel(
        kept.parent().unwrap(),
        "flashinfer",
        "0.7.4",
        b"import os; os.system('evil')\n",
    );
    let r = find(&cache, &key, &want(&json)).unwrap_err();
    assert_eq!(*r.why, Why::NoRecord, "{r}");
    assert_eq!(lookup(&cache, &key), None);

    // F1: a consistent entry (record, key.json) holding another distribution's wheel, or kept
    // under another build's inputs.
    for (dist, inputs_of) in [("evil", json.clone()), ("flashinfer", serde_json::json!({"other": 1}))] {
        let planted = test_wheel(tmp.path(), dist, "0.7.4", b"evil = True\n");
        let dir = key.dir(&cache);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&planted, dir.join(planted.file_name().unwrap())).unwrap();
        let sha = crate::store::sha256_file(&planted).unwrap();
        std::fs::write(dir.join(SHA256), sha).unwrap();
        std::fs::write(dir.join(KEY_JSON), inputs_of.to_string()).unwrap();
        let r = find(&cache, &key, &want(&json)).unwrap_err();
        match dist {
            "evil" => assert!(matches!(*r.why, Why::Contents { .. }), "{r}"),
            _ => assert_eq!(*r.why, Why::OtherKey, "{r}"),
        }
        assert_eq!(lookup(&cache, &key), None);
    }

    // A wheel replaced by a fifo is refused without hanging.
    store(&cache, &key, &json, &wheel, IS).unwrap();
    std::fs::remove_file(&kept).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&kept).status().unwrap();
    assert!(made.success());
    assert!(find(&cache, &key, &want(&json)).is_err());
}

#[test]
fn a_tree_hash_follows_contents_not_mtimes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::create_dir_all(d.join("pkg/__pycache__")).unwrap();
    std::fs::write(d.join("pkg/a.py"), "x = 1\n").unwrap();
    std::fs::write(d.join("pkg/__pycache__/a.pyc"), "junk").unwrap();
    let first = tree_hash(d).unwrap();
    std::fs::write(d.join("pkg/__pycache__/a.pyc"), "other junk").unwrap();
    std::fs::write(d.join("pkg/a.py"), "x = 1\n").unwrap();
    assert_eq!(tree_hash(d).unwrap(), first);
    std::fs::write(d.join("pkg/a.py"), "x = 2\n").unwrap();
    assert_ne!(tree_hash(d).unwrap(), first);
}
