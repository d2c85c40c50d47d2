//! Git sources: a mirror of each repository in the cache (`<cache>/git/<hash of the URL>`,
//! cloned with `--mirror` the first time and fetched before each later online use), a checkout
//! at a revision cloned from it, and the submodules the checkout asks for, each from a mirror of
//! its own (so that a checkout with submodules works offline and travels in a bundle).
//!
//! What the mirrors hold is read with git itself, offline: which mirrors a checkout needs
//! ([`needed`]: the repository's, and for each submodule at the commit the parent records, its
//! own, recursively) is what `--offline` checks before anything runs and what a bundle carries.
//! It deliberately runs `git` as a program and never passes a revision where git could read an
//! option (`--end-of-options`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{NotCached, SourceError, io};
use crate::process::{Cmd, secrets};

/// Which submodules a checkout gets.
#[derive(Debug, Clone, Copy)]
pub enum Which<'a> {
    None,
    All,
    /// These paths (and, inside them, every submodule).
    Only(&'a [String]),
}

impl Which<'_> {
    fn wants(&self, path: &str) -> bool {
        match self {
            Which::None => false,
            Which::All => true,
            Which::Only(paths) => paths.iter().any(|p| p.trim_end_matches('/') == path),
        }
    }
}

pub use crate::store::mirror::mirror_dir;

/// Clones `url` at `rev` into `dir` (which must not exist) from the cache's mirror, with the
/// submodules `which` names; returns the commit checked out.
pub fn checkout(
    url: &str,
    rev: &str,
    which: Which<'_>,
    dir: &Path,
    cache: &Path,
    offline: bool,
    log: &Path,
) -> Result<String, SourceError> {
    // A full commit the mirror already has cannot change: no fetch, so a mirror seeded by
    // `kiln cache add-mirror` whose origin cannot be reached serves an online run too.
    let have = is_hex(rev) && has_commit(url, rev, cache);
    let mirror = git_mirror(url, cache, offline || have, log)?;
    Cmd::new("git")
        .args([
            "clone",
            "--quiet",
            "--no-checkout",
            "--",
            &mirror.display().to_string(),
            &dir.display().to_string(),
        ])
        .run_logged(log)?;
    // The rev (from a recipe or a lock) is resolved to a commit first, read only as a rev
    // (`--end-of-options`): `--orphan=x` must never reach `checkout` as an option.
    let commit = resolve_rev(dir, rev, log).ok_or_else(|| SourceError::NoRev {
        url: url.to_string(),
        rev: rev.to_string(),
    })?;
    Cmd::new("git")
        .args([
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--detach",
            "--end-of-options",
            commit.as_str(),
        ])
        .cwd(dir)
        .run_logged(log)?;
    submodules(dir, url, which, cache, offline, log)?;
    Ok(commit)
}

/// Whether the cache's mirror of `url` holds the commit `commit`.
pub fn has_commit(url: &str, commit: &str, cache: &Path) -> bool {
    rev_parse(&mirror_dir(url, cache), &format!("{commit}^{{commit}}")).is_some_and(|c| c.eq_ignore_ascii_case(commit))
}

/// The commit `tag` names in the mirror of `url`, when the mirror has the tag.
pub fn tag_commit(url: &str, tag: &str, cache: &Path) -> Option<String> {
    let mirror = mirror_dir(url, cache);
    rev_parse(&mirror, &format!("refs/tags/{tag}^{{commit}}"))
}

/// The commit `rev` names in the clone `dir`: a commit, a tag or a local branch, else the
/// origin's branch of that name (as `git checkout` would guess); `None` when it names nothing.
/// A rev that starts with `-` is refused here even before git reads it.
fn resolve_rev(dir: &Path, rev: &str, log: &Path) -> Option<String> {
    if rev.starts_with('-') {
        return None;
    }
    [
        format!("{rev}^{{commit}}"),
        format!("refs/remotes/origin/{rev}^{{commit}}"),
    ]
    .iter()
    .find_map(|spec| {
        Cmd::new("git")
            .args(["rev-parse", "--verify", "--quiet", "--end-of-options", spec.as_str()])
            .cwd(dir)
            .output_logged(log)
            .ok()
            .map(|out| out.trim().to_string())
            .filter(|c| is_hex(c))
    })
}

fn is_hex(c: &str) -> bool {
    c.len() >= 40 && c.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `git rev-parse --verify` in the repository (or bare mirror) `git_dir`, unlogged.
fn rev_parse(git_dir: &Path, spec: &str) -> Option<String> {
    if spec.starts_with('-') || !git_dir.join("HEAD").is_file() {
        return None;
    }
    git_in(git_dir, &["rev-parse", "--verify", "--quiet", "--end-of-options", spec])
        .map(|out| out.trim().to_string())
        .filter(|c| is_hex(c))
}

/// Runs git with `--git-dir` and returns its stdout when it succeeds.
fn git_in(git_dir: &Path, args: &[&str]) -> Option<String> {
    let out = Cmd::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(args.iter().copied())
        .capture(b"", Duration::from_secs(60))
        .ok()?;
    out.success.then_some(out.stdout)
}

/// What git is asked for a credential through `GIT_ASKPASS`: the script answers from the
/// environment kiln gives that one command, so the credential is in no file and no argument.
const ASKPASS: &str = "#!/bin/sh\ncase \"$1\" in\n  Username*) printf '%s\\n' \"$KILN_GIT_USER_SECRET\" ;;\n  *) printf '%s\\n' \"$KILN_GIT_PASSWORD\" ;;\nesac\n";

/// `git` for a command that reaches the remote of `url`: the credential the URL held (if any)
/// is handed over through `GIT_ASKPASS` and variables masked in every log.
fn git_for(url: &str, cache: &Path) -> Result<(Cmd, String), SourceError> {
    let (plain, credential) = secrets::split_url(url);
    let mut cmd = Cmd::new("git");
    if let Some(c) = credential {
        let script = cache.join("tools").join("git-askpass");
        if std::fs::read_to_string(&script).ok().as_deref() != Some(ASKPASS) {
            let dir = cache.join("tools");
            std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
            crate::store::atomic::write_executable(&script, ASKPASS.as_bytes(), crate::store::atomic::Sync::Cache)
                .map_err(io(format!("cannot write {}", script.display())))?;
        }
        // No credential helper of the user's keeps it either (`credential.helper=` empties
        // the list, git-config(1)).
        cmd = cmd
            .args(["-c", "credential.helper="])
            .env("GIT_ASKPASS", script.display().to_string())
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("KILN_GIT_USER_SECRET", c.user)
            .env("KILN_GIT_PASSWORD", c.password);
    }
    Ok((cmd, plain))
}

/// The cache's mirror of `url`: cloned the first time, fetched (tags that moved included) each
/// time after, left as it is offline. The mirror's config names the URL without its credential
/// (a mirror written before, with it, is rewritten).
pub fn git_mirror(url: &str, cache: &Path, offline: bool, log: &Path) -> Result<PathBuf, SourceError> {
    let dir = mirror_dir(url, cache);
    if dir.join("HEAD").is_file() {
        if !offline {
            let (git, plain) = git_for(url, cache)?;
            let config = std::fs::read_to_string(dir.join("config")).unwrap_or_default();
            if secrets::mask_urls(&config) != config {
                Cmd::new("git")
                    .args(["config", "remote.origin.url", plain.as_str()])
                    .cwd(&dir)
                    .run_logged(log)?;
            }
            git.args(["fetch", "--quiet", "--prune", "--force", "origin"])
                .cwd(&dir)
                .run_logged(log)?;
        }
        return Ok(dir);
    }
    if offline {
        return Err(SourceError::Offline {
            what: NotCached::Git {
                url: url.into(),
                dir,
                submodule: None,
            },
        });
    }
    let parent = dir.parent().unwrap_or(cache);
    std::fs::create_dir_all(parent).map_err(io(format!("cannot create {}", parent.display())))?;
    let partial = dir.with_extension("part");
    let _ = std::fs::remove_dir_all(&partial);
    let (git, plain) = git_for(url, cache)?;
    git.args([
        "clone",
        "--quiet",
        "--mirror",
        "--",
        plain.as_str(),
        &partial.display().to_string(),
    ])
    .run_logged(log)?;
    std::fs::rename(&partial, &dir).map_err(io("cannot move the mirror into the cache"))?;
    Ok(dir)
}

/// One submodule as `.gitmodules` declares it.
struct Submodule {
    name: String,
    path: String,
    url: String,
}

/// The submodules `.gitmodules` text declares (read with `git config`, so every spelling git
/// accepts is read), their relative URLs resolved against `parent_url`.
fn declared(config_args: &[&str], git_dir: Option<&Path>, cwd: Option<&Path>, parent_url: &str) -> Vec<Submodule> {
    let mut args: Vec<&str> = config_args.to_vec();
    args.extend(["--get-regexp", r"^submodule\..*\.(path|url)$"]);
    let mut c = Cmd::new("git");
    if let Some(g) = git_dir {
        c = c.arg(format!("--git-dir={}", g.display()));
    }
    c = c.arg("config").args(args);
    if let Some(d) = cwd {
        c = c.cwd(d);
    }
    let Ok(out) = c.capture(b"", Duration::from_secs(60)) else {
        return Vec::new();
    };
    let mut paths: Vec<(String, String)> = Vec::new();
    let mut urls: Vec<(String, String)> = Vec::new();
    for line in out.stdout.lines() {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        let Some(rest) = key.strip_prefix("submodule.") else {
            continue;
        };
        if let Some(name) = rest.strip_suffix(".path") {
            paths.push((name.to_string(), value.to_string()));
        } else if let Some(name) = rest.strip_suffix(".url") {
            urls.push((name.to_string(), value.to_string()));
        }
    }
    paths
        .into_iter()
        .filter_map(|(name, path)| {
            let url = urls.iter().find(|(n, _)| *n == name)?.1.clone();
            Some(Submodule {
                url: absolute_url(parent_url, &url),
                name,
                path,
            })
        })
        .collect()
}

/// A submodule URL as git resolves it: `./x` and `../x` relative to the parent's URL.
fn absolute_url(parent: &str, url: &str) -> String {
    if !(url.starts_with("./") || url.starts_with("../")) {
        return url.to_string();
    }
    let mut base: Vec<&str> = parent.trim_end_matches('/').split('/').collect();
    for part in url.split('/') {
        match part {
            "." => {}
            ".." => {
                base.pop();
            }
            p => base.push(p),
        }
    }
    base.join("/")
}

/// Checks out the submodules of the checkout `dir` that `which` names, each from its mirror.
fn submodules(
    dir: &Path,
    url: &str,
    which: Which<'_>,
    cache: &Path,
    offline: bool,
    log: &Path,
) -> Result<(), SourceError> {
    if matches!(which, Which::None) || !dir.join(".gitmodules").is_file() {
        return Ok(());
    }
    for sub in declared(&["-f", ".gitmodules"], None, Some(dir), url) {
        if !which.wants(&sub.path) {
            continue;
        }
        // The commit the superproject pins for it: a mirror that has it is not fetched.
        let pinned = Cmd::new("git")
            .args(["rev-parse", "--verify", "--quiet", &format!("HEAD:{}", sub.path)])
            .cwd(dir)
            .output_logged(log)
            .ok()
            .map(|o| o.trim().to_string());
        let have = pinned.is_some_and(|c| is_hex(&c) && has_commit(&sub.url, &c, cache));
        let mirror = git_mirror(&sub.url, cache, offline || have, log)?;
        Cmd::new("git")
            .args([
                "config",
                &format!("submodule.{}.url", sub.name),
                &mirror.display().to_string(),
            ])
            .cwd(dir)
            .run_logged(log)?;
        Cmd::new("git")
            .args([
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "update",
                "--init",
                "--quiet",
                "--",
                sub.path.as_str(),
            ])
            .cwd(dir)
            .run_logged(log)?;
        submodules(&dir.join(&sub.path), &sub.url, Which::All, cache, offline, log)?;
    }
    Ok(())
}

/// The mirrors a checkout of `url` at `rev` with the submodules `which` needs, read from the
/// mirrors already in the cache (offline); the first one missing, or the first commit a mirror
/// lacks, is the error.
pub fn needed(url: &str, rev: &str, which: Which<'_>, cache: &Path) -> Result<Vec<PathBuf>, NotCached> {
    let mirror = mirror_dir(url, cache);
    let missing = || NotCached::Git {
        url: url.to_string(),
        dir: mirror.clone(),
        submodule: None,
    };
    if !mirror.join("HEAD").is_file() {
        return Err(missing());
    }
    let Some(commit) = rev_parse(&mirror, &format!("{rev}^{{commit}}")) else {
        return Err(NotCached::Commit {
            url: url.to_string(),
            rev: rev.to_string(),
            dir: mirror,
        });
    };
    let mut out = vec![mirror.clone()];
    if matches!(which, Which::None) {
        return Ok(out);
    }
    let blob = format!("{commit}:.gitmodules");
    if rev_parse(&mirror, &blob).is_none() {
        return Ok(out);
    }
    // Every submodule mirror that is missing is named at once, each as a submodule.
    let mut lacking = Vec::new();
    for sub in declared(&["--blob", &blob], Some(&mirror), None, url) {
        if !which.wants(&sub.path) {
            continue;
        }
        // The commit the parent records for the submodule (a gitlink in its tree).
        let line = git_in(&mirror, &["ls-tree", &commit, "--", &sub.path]).unwrap_or_default();
        let Some(pinned) = line.split_whitespace().nth(2).filter(|c| is_hex(c)) else {
            continue;
        };
        match needed(&sub.url, pinned, Which::All, cache) {
            Ok(dirs) => out.extend(dirs),
            Err(NotCached::Git {
                url: u,
                dir,
                submodule: None,
            }) => lacking.push(NotCached::Git {
                url: u,
                dir,
                submodule: Some(format!("submodule `{}` of {url}", sub.path)),
            }),
            Err(NotCached::Several(all)) => lacking.extend(all),
            Err(e) => lacking.push(e),
        }
    }
    match lacking.len() {
        0 => {}
        1 => return Err(lacking.remove(0)),
        _ => return Err(NotCached::Several(lacking)),
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_submodule_urls_resolve_against_the_parent() {
        assert_eq!(absolute_url("https://h/a/b.git", "../c.git"), "https://h/a/c.git");
        assert_eq!(absolute_url("/srv/git/b", "./sub"), "/srv/git/b/sub");
        assert_eq!(absolute_url("https://h/a/b", "https://x/y"), "https://x/y");
    }

    #[test]
    fn only_the_named_submodules_are_wanted() {
        let only = ["csrc/cutlass/".to_string()];
        assert!(Which::Only(&only).wants("csrc/cutlass"));
        assert!(!Which::Only(&only).wants("third_party/aiter"));
        assert!(Which::All.wants("x") && !Which::None.wants("x"));
    }
}
