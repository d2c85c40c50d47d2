//! Unit tests of the lockfile: reading back what was written, hostile values, differences.

use super::*;

fn sample() -> Lock {
    Lock {
        format: FORMAT,
        environment: Environment {
            python: "3.12.3".into(),
            platform: Some("linux x86_64".into()),
            archs: vec![Arch { major: 12, minor: 0 }],
            cuda: Some("13.0".into()),
            planned_for: None,
        },
        components: vec![Locked {
            name: "flashinfer".into(),
            version: "0.7.4".into(),
            features: vec!["cutedsl".into()],
            source: format!("sha256:{}", "ab".repeat(32)),
            wheel_sha256: Some("de".repeat(32)),
            wheel_url: None,
            archs: vec![Arch { major: 12, minor: 0 }],
            cuda: Some("13.0".into()),
            built_against: [("torch".to_string(), "2.14.1+cu130".to_string())].into(),
            inputs: [("cutlass".to_string(), format!("git:{}", "c".repeat(40)))].into(),
        }],
    }
}

#[test]
fn a_lock_reads_back_as_written() {
    let lock = sample();
    let text = render(&lock);
    assert!(text.starts_with("# kiln.lock"));
    assert!(text.contains("archs = [\"12.0\"]"), "{text}");
    assert_eq!(parse("kiln.lock", &text).unwrap(), lock);
}

#[test]
fn a_locked_component_is_reproduced_with_its_features_and_its_public_version() {
    let mut c = sample().components.remove(0);
    assert_eq!(c.target(), "flashinfer[cutedsl]==0.7.4");
    c.features.clear();
    c.version = "2.14.1+cu130".into();
    assert_eq!(c.target(), "flashinfer==2.14.1");
}

#[test]
fn a_malformed_lock_points_at_the_line() {
    let text = render(&sample()).replace("version = \"0.7.4\"", "version = 0.7");
    let Err(LockError::Invalid(d)) = parse("kiln.lock", &text) else {
        panic!("accepted a number as a version")
    };
    let line = text.lines().nth(d.line - 1).unwrap();
    assert_eq!(line, "version = 0.7", "{d}");
    let text = render(&sample()).replace("format = 1", "format = 9");
    let Err(LockError::Invalid(d)) = parse("kiln.lock", &text) else {
        panic!("accepted format 9")
    };
    assert!(d.message.contains("format 9"), "{d}");
    let text = render(&sample()).replace("cuda = \"13.0\"\n\n", "cuda = \"13.0\"\ncolour = 1\n\n");
    assert!(parse("kiln.lock", &text).is_err());
}

#[test]
fn hostile_values_are_refused_at_their_line() {
    let good = render(&sample());
    let sha = format!("sha256:{}", "ab".repeat(32));
    let input = format!("git:{}", "c".repeat(40));
    for (from, to, says) in [
        (input.as_str(), "git:--upload-pack=x", "build input `cutlass`"),
        (input.as_str(), "sha256:../x", "build input `cutlass`"),
        (sha.as_str(), "sha256:/some/dir", "64 hex digits"),
        (sha.as_str(), "sha256:../../dir", "64 hex digits"),
        (sha.as_str(), "git:--orphan=x", "read as an option"),
        ("name = \"flashinfer\"", "name = \"../x\"", "not a component name"),
        ("version = \"0.7.4\"", "version = \"--x\"", "not a version"),
    ] {
        let text = good.replacen(from, to, 1);
        assert_ne!(text, good, "{from}");
        let Err(LockError::Invalid(d)) = parse("kiln.lock", &text) else {
            panic!("accepted {to}")
        };
        assert!(d.message.contains(says), "{to}: {d}");
        assert!(d.help.is_some(), "{d}");
        let line = text.lines().nth(d.line - 1).unwrap();
        assert!(
            line.contains(to.rsplit('"').nth(1).unwrap_or(to)),
            "{line} for {to}: {d}"
        );
    }
    let text = good.replacen(&"de".repeat(32), "not-a-hash", 1);
    let Err(LockError::Invalid(d)) = parse("kiln.lock", &text) else {
        panic!("accepted a wheel_sha256 that is not a hash")
    };
    assert_eq!(text.lines().nth(d.line - 1).unwrap(), "wheel_sha256 = \"not-a-hash\"");
}

#[test]
fn differences_name_each_field_and_a_rebuilt_wheel_is_only_a_note() {
    let lock = sample();
    let mut have = lock.components[0].clone();
    assert!(differences(&lock, &[("flashinfer".to_string(), have.clone())].into(), None).is_empty());
    have.wheel_sha256 = Some("0f".repeat(32));
    have.built_against.insert("torch".into(), "2.11.0+cu130".into());
    let d = differences(&lock, &[("flashinfer".to_string(), have)].into(), None);
    let fields: Vec<(&str, bool)> = d.iter().map(|d| (d.field, d.note_only)).collect();
    assert_eq!(fields, [("built against", false), ("wheel sha256", true)]);
    assert_eq!(
        d[0].to_string(),
        "flashinfer built against: the lock has torch 2.14.1+cu130, the environment has torch 2.11.0+cu130"
    );
    let d = differences(&lock, &BTreeMap::new(), None);
    assert_eq!(d[0].found, "nothing installed");
}

/// `--arch` over the lock's: a component built for the archs asked for differs only in a note;
/// one left for the lock's archs, or built for others still, is a difference.
#[test]
fn other_archs_are_a_note_only_where_they_are_the_ones_asked_for() {
    let lock = sample();
    let asked: Vec<Arch> = vec!["9.0".parse().unwrap()];
    let mut have = lock.components[0].clone();
    assert_ne!(have.archs, asked, "the sample is locked for other archs");
    have.archs = asked.clone();
    let found: BTreeMap<_, _> = [("flashinfer".to_string(), have.clone())].into();
    let d = differences(&lock, &found, Some(&asked));
    assert_eq!(
        d.iter().map(|d| (d.field, d.note_only)).collect::<Vec<_>>(),
        [("archs", true)]
    );
    assert!(
        !differences(&lock, &found, None)[0].note_only,
        "not asked for: a failure"
    );
    have.archs = vec!["8.0".parse().unwrap()];
    let found: BTreeMap<_, _> = [("flashinfer".to_string(), have)].into();
    let d = differences(&lock, &found, Some(&asked));
    assert_eq!(
        d.iter().map(|d| (d.field, d.note_only)).collect::<Vec<_>>(),
        [("archs", false)]
    );
}

/// An earlier kiln recorded a prebuilt wheel's install with the wheel's own hash as an sdist
/// `sha256:` (apply/prebuilt.rs); that lock pins the wheel, compares equal to `wheel:`, and a
/// wheel the recipe no longer offers is taken from the lock's URL.
#[test]
fn a_prebuilt_wheel_is_locked_and_pinned_as_a_wheel() {
    let hex = "de".repeat(32);
    let mut c = sample().components.remove(0);
    c.source = format!("sha256:{hex}");
    c.wheel_sha256 = Some(hex.clone());
    assert_eq!(wheel::locked_wheel(&c), Some(hex.as_str()));
    assert_eq!(wheel::identity(&c.source, Some(&hex)), format!("wheel:{hex}"));
    // An sdist build's wheel has another hash than its sdist: that stays an sdist.
    assert_eq!(
        wheel::identity(&format!("sha256:{}", "ab".repeat(32)), Some(&hex)),
        format!("sha256:{}", "ab".repeat(32))
    );
    let mut have = c.clone();
    have.source = format!("wheel:{hex}");
    let lock = Lock {
        components: vec![c.clone()],
        ..sample()
    };
    let found = [(c.name.clone(), have)].into();
    assert!(differences(&lock, &found, None).is_empty());

    let mut entry = VersionEntry::bare("0.7.4".parse().unwrap(), None);
    let mut problems = Vec::new();
    wheel::pin(&mut entry, &c, &hex, &mut problems);
    assert_eq!(problems.len(), 1, "no URL: {problems:?}");
    c.wheel_url = Some("https://example.org/flashinfer_python-0.7.4-py3-none-any.whl".into());
    problems.clear();
    wheel::pin(&mut entry, &c, &hex, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(entry.wheels[0].sha256, hex);
    assert_eq!(entry.wheels[0].tags, vec!["py3-none-any".to_string()]);
}
