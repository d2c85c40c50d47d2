//! Secrets stay out of logs: the values of environment variables that look like credentials
//! (`*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, `AWS_*`, `HF_TOKEN`), in kiln's environment or
//! given to a command, are masked wherever kiln writes what a command did: the `# K=V` lines
//! of a step log, the command's own output on its way into the log (a build that prints its
//! environment), captured output and the command line in errors, events and reports.
//!
//! Credentials inside URLs (`https://user:token@host/…`, `redis://:pass@host`, in recipe git
//! URLs, index URLs, proxies, compile-cache backends) are masked by [`mask_urls`] wherever kiln
//! writes: step logs, command lines in errors, and the writers that hold no command (events,
//! lock holders, lock files, reports): the user part stays, the password (or a lone token)
//! becomes [`MASK`]. A command's output handed back to kiln as data keeps its URLs
//! ([`Secrets::mask_values`]).
//! [`split_url`] takes them out of a URL for a program that is given them some other way (git
//! through `GIT_ASKPASS`, so a mirror's config never holds them).
//!
//! A value shorter than [`SHORTEST`] is masked in `# K=V` lines but not inside other text,
//! where it would mask ordinary words (`AWS_REGION=1`). It deliberately ignores secrets under
//! other names and secrets a program derives or fetches itself.

use std::borrow::Cow;
use std::fs::File;
use std::io::BufReader;

use super::capped;
use std::sync::mpsc;

/// What a masked value becomes.
pub const MASK: &str = "****";

/// Values shorter than this are not searched for inside other text.
pub const SHORTEST: usize = 6;

/// Whether a variable named `name` holds a credential.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_TOKEN")
        || n.ends_with("_KEY")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.starts_with("AWS_")
        || n == "HF_TOKEN"
}

/// The secret values to mask: kiln's own environment's and those of `extra` (a command's).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    pub fn of<'a>(extra: impl IntoIterator<Item = (&'a str, &'a str)>) -> Secrets {
        let keep = |k: &str, v: &str| (is_secret(k) && v.len() >= SHORTEST).then(|| v.to_string());
        let mut values: Vec<String> = std::env::vars_os()
            .filter_map(|(k, v)| keep(k.to_str()?, v.to_str()?))
            .chain(extra.into_iter().filter_map(|(k, v)| keep(k, v)))
            .collect();
        // Longest first: a value that contains another is masked whole.
        values.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        values.dedup();
        Secrets { values }
    }

    /// `text` with every secret value masked, URLs left whole: what a command answers, handed
    /// back to kiln as data (a submodule's URL is used as it is; what kiln writes of it is masked).
    pub fn mask_values<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = Cow::Owned(out.replace(v.as_str(), MASK));
            }
        }
        out
    }

    /// `text` with every secret value and every credential inside a URL masked: what is written.
    pub fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match self.mask_values(text) {
            Cow::Borrowed(t) => mask_urls(t),
            Cow::Owned(t) => Cow::Owned(mask_urls(&t).into_owned()),
        }
    }

    /// The `# K=V` line a log shows for one variable of a command's environment.
    pub fn env_line(&self, k: &str, v: &str) -> String {
        if is_secret(k) {
            format!("# {k}={MASK}")
        } else {
            format!("# {k}={}", self.mask(v))
        }
    }

    /// A pipe for a command's output: each line read from it is masked and appended to
    /// `log`, within the limits of [`capped`]. Returns the end to hand to the command, and a receiver that says when the
    /// output has ended.
    pub fn into_log(self, log: File) -> std::io::Result<(std::io::PipeWriter, mpsc::Receiver<()>)> {
        let (reader, writer) = std::io::pipe()?;
        let (done, ended) = mpsc::channel();
        std::thread::spawn(move || {
            let limits = capped::Limits::default();
            let mut capped = capped::Capped::new(log, limits);
            capped::lines(BufReader::new(reader), limits.line, |kept, cut| {
                let text = String::from_utf8_lossy(kept);
                let line = if cut > 0 {
                    let (keep, note) = capped::cut_line(&text, cut);
                    self.mask(&keep).into_owned() + &note
                } else {
                    self.mask(&text).into_owned()
                };
                capped.push(line);
            });
            capped.finish();
            let _ = done.send(());
        });
        Ok((writer, ended))
    }
}

/// Where the authority of a URL ends (its path, query or fragment, or the text around it).
fn authority_end(b: u8) -> bool {
    matches!(b, b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\') || b.is_ascii_whitespace()
}

/// The byte range of the userinfo (what precedes `@`) of each `scheme://userinfo@host` in `text`.
fn userinfos(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://") {
        let start = from + i + 3;
        let end = b[start..]
            .iter()
            .position(|c| authority_end(*c))
            .map_or(b.len(), |n| start + n);
        if let Some(at) = text[start..end].rfind('@') {
            found.push((start, start + at));
        }
        from = end.max(start);
    }
    found
}

/// `text` with the credential of every URL in it masked: `https://user:****@host/…`,
/// `https://****@host/…` for a lone token, `redis://:****@host`.
pub fn mask_urls(text: &str) -> Cow<'_, str> {
    rewrite_userinfos(text, |info, out| {
        if let Some((user, _)) = info.split_once(':') {
            out.push_str(user);
            out.push(':');
        }
        out.push_str(MASK);
        out.push('@');
    })
}

/// `text` with the credential of every URL in it taken out (`https://host/…`): a file that
/// travels (a mirror's git config in a bundle) and must still name the repository.
pub fn strip_urls(text: &str) -> Cow<'_, str> {
    rewrite_userinfos(text, |_, _| {})
}

/// `text` with each URL's `userinfo@` replaced by what `with` writes for it.
fn rewrite_userinfos<'t>(text: &'t str, with: impl Fn(&str, &mut String)) -> Cow<'t, str> {
    let spans = userinfos(text);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, at) in spans {
        out.push_str(&text[last..start]);
        with(&text[start..at], &mut out);
        last = at + 1;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// A credential taken out of a URL, percent-decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub user: String,
    pub password: String,
}

/// `url` without its userinfo, and the credential it held (`None` when it held none).
pub fn split_url(url: &str) -> (String, Option<Credential>) {
    let Some(&(start, at)) = userinfos(url).first() else {
        return (url.to_string(), None);
    };
    let info = &url[start..at];
    let (user, password) = info.split_once(':').unwrap_or((info, ""));
    let plain = format!("{}{}", &url[..start], &url[at + 1..]);
    let credential = Credential {
        user: percent_decode(user),
        password: percent_decode(password),
    };
    (plain, Some(credential))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_told_by_name_and_masked_by_value() {
        for name in [
            "HF_TOKEN",
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "MY_SECRET_THING",
            "PGPASSWORD",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(is_secret(name), "{name}");
        }
        for name in ["PATH", "MAX_JOBS", "TOKENIZERS_PARALLELISM", "KEYRING"] {
            assert!(!is_secret(name), "{name}");
        }
        let s = Secrets::of([
            ("HF_TOKEN", "hf_abcdefghijkl"),
            ("AWS_REGION", "us"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(
            s.mask("token hf_abcdefghijkl in PATH /usr/bin us"),
            "token **** in PATH /usr/bin us"
        );
        assert_eq!(s.env_line("AWS_REGION", "us"), "# AWS_REGION=****");
        assert_eq!(s.env_line("PATH", "/usr/bin"), "# PATH=/usr/bin");
    }

    #[test]
    fn credentials_inside_urls_are_masked_and_split_off() {
        let cases = [
            (
                "git https://user:tok3n@host/x.git @ v1",
                "git https://user:****@host/x.git @ v1",
            ),
            ("https://ghp_abc@github.com/o/r", "https://****@github.com/o/r"),
            ("redis://:pa55@10.0.0.1:6379/0", "redis://:****@10.0.0.1:6379/0"),
            (
                "# UV_INDEX_URL=https://u:p%40ss@idx/simple",
                "# UV_INDEX_URL=https://u:****@idx/simple",
            ),
            (
                "{\"d\":\"http://a:b@p:3128\",\"e\":\"https://c:d@q\"}",
                "{\"d\":\"http://a:****@p:3128\",\"e\":\"https://c:****@q\"}",
            ),
            (
                "git@github.com:o/r.git https://host/a@b",
                "git@github.com:o/r.git https://host/a@b",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(mask_urls(text), want, "{text}");
            assert_eq!(Secrets::default().mask(text), want, "{text}");
        }
        // Data handed back to kiln keeps its URLs (a submodule's is cloned as it is).
        assert_eq!(Secrets::default().mask_values("https://u:pw@h/x"), "https://u:pw@h/x");
        let (plain, c) = split_url("https://user:p%40ss@host/x.git");
        assert_eq!(plain, "https://host/x.git");
        assert_eq!(
            c,
            Some(Credential {
                user: "user".into(),
                password: "p@ss".into()
            })
        );
        assert_eq!(split_url("https://host/x.git"), ("https://host/x.git".into(), None));
        assert_eq!(
            strip_urls("[remote \"origin\"]\n\turl = https://u:pw@h/x.git\n"),
            "[remote \"origin\"]\n\turl = https://h/x.git\n"
        );
    }

    #[test]
    fn a_command_that_prints_its_environment_leaves_no_secret_in_its_log() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("step.log");
        let started = std::time::Instant::now();
        let out = crate::process::Cmd::new("sh")
            .args(["-c", "env; echo \"token=$HF_TOKEN\" >&2; echo \"out=$HF_TOKEN\""])
            .env("HF_TOKEN", "hf_secretvalue123")
            .env("MAX_JOBS", "4")
            .output_logged(&log)
            .unwrap();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "waited for the pipe"
        );
        assert!(
            out.ends_with("out=****\n") && !out.contains("hf_secretvalue123"),
            "{out}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains("hf_secretvalue123"), "{text}");
        assert!(
            text.contains("# HF_TOKEN=****") && text.contains("token=****"),
            "{text}"
        );
        assert!(text.contains("# MAX_JOBS=4"), "{text}");
    }
}
