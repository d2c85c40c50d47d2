//! A release as a package index's Simple API describes it (PEP 691, JSON): its files with their
//! sha256, size and Requires-Python, and its core metadata (PEP 658/714: the wheel's METADATA
//! beside it as `<url>.metadata`), which gives Requires-Dist without the wheel. Fetched through
//! kiln's own downloads (the system's CA roots and proxies, bounded), never cached: a draft
//! reads the index as it is now.
//!
//! The index is `UV_INDEX_URL`, else `PIP_INDEX_URL`, else https://pypi.org/simple — the Simple
//! API is what every index serves (PyPI's per-version JSON API is not reachable behind every
//! proxy). It owns the requests and the reading of the answers; choosing what to draft from them
//! is the caller's.

use std::path::Path;

use serde::Deserialize;

/// The Simple API's project page.
#[derive(Debug, Clone, Deserialize)]
pub struct Project {
    pub files: Vec<File>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct File {
    pub filename: String,
    pub url: String,
    pub hashes: Hashes,
    #[serde(default, rename = "requires-python")]
    pub requires_python: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    /// PEP 714's name, and PEP 691's older one: `true` or the hashes of `<url>.metadata`.
    #[serde(default, rename = "core-metadata")]
    pub core_metadata: Option<serde_json::Value>,
    #[serde(default, rename = "dist-info-metadata")]
    pub dist_info_metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub yanked: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Hashes {
    #[serde(default)]
    pub sha256: Option<String>,
}

impl File {
    /// Whether the index serves this file's metadata beside it.
    pub fn has_metadata(&self) -> bool {
        let served = |v: &Option<serde_json::Value>| v.as_ref().is_some_and(|m| m != &serde_json::Value::Bool(false));
        served(&self.core_metadata) || served(&self.dist_info_metadata)
    }

    pub fn is_yanked(&self) -> bool {
        self.yanked
            .as_ref()
            .is_some_and(|y| y != &serde_json::Value::Bool(false))
    }

    /// The version in its file name (`vllm-0.33.0.tar.gz`, `vllm-0.33.0-cp38-abi3-....whl`).
    pub fn version(&self) -> Option<String> {
        let f = &self.filename;
        if let Some(stem) = f.strip_suffix(".whl") {
            return stem.split('-').nth(1).map(str::to_string);
        }
        let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz"]
            .iter()
            .find_map(|s| f.strip_suffix(s))?;
        stem.rsplit_once('-').map(|(_, v)| v.to_string())
    }
}

/// The index's Simple API base URL.
pub fn index() -> String {
    ["UV_INDEX_URL", "PIP_INDEX_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "https://pypi.org/simple".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// The project page of `dist` (its name normalized, PEP 503).
pub fn project_url(dist: &str) -> String {
    let mut name = dist.to_ascii_lowercase().replace(['_', '.'], "-");
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    format!("{}/{name}/", index())
}

/// The project page at `url`.
pub fn project(url: &str, scratch: &Path) -> Result<Project, String> {
    let text = get(url, Some("application/vnd.pypi.simple.v1+json"), scratch)?;
    serde_json::from_str(&text).map_err(|e| format!("{url} did not answer with the Simple API's JSON (PEP 691): {e}"))
}

/// The core metadata of a file the index serves it for (its `Requires-Dist` and
/// `Requires-Python` lines).
pub fn metadata(file: &File, scratch: &Path) -> Result<String, String> {
    get(&format!("{}.metadata", file.url), None, scratch)
}

/// A small document, through a scratch file in `scratch`.
fn get(url: &str, accept: Option<&str>, scratch: &Path) -> Result<String, String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let part = scratch.join(format!("index-{}-{stamp}.part", std::process::id()));
    let mut policy = crate::download::Policy::from_env().map_err(|e| e.to_string())?;
    policy.accept = accept.map(str::to_string);
    // An index page is not a wheel: 256 MiB bounds the largest project page with room to spare.
    policy.max_bytes = policy.max_bytes.min(256 << 20);
    let got = crate::download::fetch(url, &part, &policy, &mut |_, _| {});
    let text = std::fs::read_to_string(&part);
    let _ = std::fs::remove_file(&part);
    got.map_err(|e| match e {
        // Not a file a recipe names: the index has no such page.
        crate::download::DownloadError::Status { status: 404, .. } => format!(
            "{url}: the index has no such page (HTTP 404): check the name, or set UV_INDEX_URL to the index that has it"
        ),
        e => match e.hint() {
            Some(h) => format!("{e} ({h})"),
            None => e.to_string(),
        },
    })?;
    text.map_err(|e| format!("cannot read the answer of {url}: {e}"))
}

/// The values of `field` in core metadata (RFC 822 headers, before the body).
pub fn fields<'a>(metadata: &'a str, field: &str) -> Vec<&'a str> {
    metadata
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case(field))
        .map(|(_, v)| v.trim())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> File {
        File {
            filename: name.into(),
            url: String::new(),
            hashes: Hashes::default(),
            requires_python: None,
            size: None,
            core_metadata: None,
            dist_info_metadata: None,
            yanked: None,
        }
    }

    #[test]
    fn versions_come_from_file_names_and_fields_from_headers() {
        assert_eq!(file("vllm-0.33.0.tar.gz").version().as_deref(), Some("0.33.0"));
        assert_eq!(
            file("flash_attn_4-4.0.0b36-py3-none-any.whl").version().as_deref(),
            Some("4.0.0b36")
        );
        assert_eq!(
            file("sgl_kernel-0.4.2.post1.tar.gz").version().as_deref(),
            Some("0.4.2.post1")
        );
        let m = "Metadata-Version: 2.4\nName: x\nRequires-Dist: torch==2.14.0\nRequires-Dist: a; extra == \"b\"\n\nRequires-Dist: body\n";
        assert_eq!(fields(m, "requires-dist"), ["torch==2.14.0", "a; extra == \"b\""]);
    }
}
