//! Seeding the cache's git mirror of a URL from a local repository (`kiln cache add-mirror`):
//! a clone or bare repository `dir` is checked to be a git repository, cloned `--mirror` into a
//! temporary directory next to the mirror's place (`<cache>/git/<24 hex of sha256(URL)>`, the
//! place [`mirror_dir`] names) and renamed into it, so no build ever
//! sees half a mirror. The mirror's origin is then set to the URL, so a later online fetch goes
//! where the recipe says (and is skipped when the pinned commit is already there).
//!
//! It deliberately ignores whether the repository is the one the URL names (the recipe's
//! pinned commits and tags are checked when a build checks out), and never fetches.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Where the mirror of the git repository at `url` is kept (named by the URL without its
/// credential: another token for one repository is one mirror).
pub fn mirror_dir(url: &str, cache: &Path) -> PathBuf {
    let mut h = Sha256::new();
    h.update(crate::process::secrets::split_url(url).0.as_bytes());
    cache.join("git").join(&hex::encode(h.finalize())[..24])
}

/// What a seeded mirror holds.
#[derive(Debug, Clone, Serialize)]
pub struct Seeded {
    pub url: String,
    pub mirror: PathBuf,
    /// Whether a mirror was there before (it is replaced).
    pub replaced: bool,
    /// Tags, each with the commit it names.
    pub tags: Vec<(String, String)>,
    /// Branch heads, each with its commit.
    pub branches: Vec<(String, String)>,
    /// How many commits the mirror holds.
    pub commits: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("{} is not a git repository (git rev-parse --git-dir fails there)", .0.display())]
    NotGit(PathBuf),
    #[error("git failed: {0}")]
    Git(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn git(args: &[&str], cwd: Option<&Path>) -> Result<String, SeedError> {
    let mut c = std::process::Command::new("git");
    c.args(args).env("GIT_TERMINAL_PROMPT", "0");
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    let out = c.output().map_err(|e| SeedError::Git(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(SeedError::Git(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Seeds the mirror of `url` in `cache` from the repository `dir`.
pub fn seed(url: &str, dir: &Path, cache: &Path) -> Result<Seeded, SeedError> {
    let git_dir = git(&["rev-parse", "--git-dir"], Some(dir)).map_err(|_| SeedError::NotGit(dir.to_path_buf()))?;
    let git_dir = dir.join(git_dir.trim());
    let mirror = mirror_dir(url, cache);
    let parent = mirror.parent().unwrap_or(cache);
    std::fs::create_dir_all(parent).map_err(|source| SeedError::Io {
        context: format!("cannot create {}", parent.display()),
        source,
    })?;
    let partial = mirror.with_extension(format!("seed.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let (from, to) = (git_dir.display().to_string(), partial.display().to_string());
    let cloned = git(&["clone", "--quiet", "--mirror", "--", &from, &to], None).and_then(|_| {
        let plain = crate::process::secrets::split_url(url).0;
        git(&["--git-dir", &to, "config", "remote.origin.url", plain.as_str()], None)
    });
    if let Err(e) = cloned {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    let replaced = mirror.exists();
    if replaced {
        let old = mirror.with_extension(format!("old.{}", std::process::id()));
        std::fs::rename(&mirror, &old).map_err(|source| SeedError::Io {
            context: format!("cannot move the old mirror {} aside", mirror.display()),
            source,
        })?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&partial, &mirror).map_err(|source| SeedError::Io {
        context: format!("cannot move the mirror into {}", mirror.display()),
        source,
    })?;
    let m = mirror.display().to_string();
    let refs = git(
        &[
            "--git-dir",
            &m,
            "for-each-ref",
            "--format=%(refname) %(objectname) %(*objectname)",
        ],
        None,
    )?;
    let (mut tags, mut branches) = (Vec::new(), Vec::new());
    for line in refs.lines() {
        let mut f = line.split(' ');
        let (Some(name), Some(obj)) = (f.next(), f.next()) else {
            continue;
        };
        // An annotated tag: the commit it peels to.
        let commit = f.next().filter(|p| !p.is_empty()).unwrap_or(obj).to_string();
        if let Some(t) = name.strip_prefix("refs/tags/") {
            tags.push((t.to_string(), commit));
        } else if let Some(b) = name.strip_prefix("refs/heads/") {
            branches.push((b.to_string(), commit));
        }
    }
    let commits = git(&["--git-dir", &m, "rev-list", "--all", "--count"], None)?
        .trim()
        .parse()
        .unwrap_or(0);
    Ok(Seeded {
        url: url.to_string(),
        mirror,
        replaced,
        tags,
        branches,
        commits,
    })
}
