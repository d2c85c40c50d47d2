//! Recipe diagnostics: one problem in one recipe file, pinned to `file:line:col`.
//!
//! A diagnostic carries the byte span it is about and renders itself the way rustc and cargo do
//! (`error:` line, `-->` location, the source line with a caret underline, a `= help:` line).
//! It deliberately knows nothing about TOML or recipes: the parser decides what is wrong.

use std::fmt;
use std::ops::Range;

use serde::Serialize;

/// One problem found in a recipe file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it (or `<embedded>/name.toml`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it: every diagnostic says (rendered as `= help:`).
    pub help: Option<String>,
    /// The source line, for rendering.
    #[serde(skip)]
    source_line: String,
    /// Number of characters to underline.
    #[serde(skip)]
    width: usize,
}

impl Diagnostic {
    /// A diagnostic about `span` (byte offsets into `source`); `None` points at the file start.
    pub fn new(
        file: &str,
        source: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        let span = span.unwrap_or(0..0);
        let start = floor_char_boundary(source, span.start.min(source.len()));
        let end = floor_char_boundary(source, span.end.min(source.len())).max(start);
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
        let line = source[..start].matches('\n').count() + 1;
        let column = source[line_start..start].chars().count() + 1;
        let width = source[start..end.min(line_end)].chars().count().max(1);
        Diagnostic {
            file: file.to_string(),
            line,
            column,
            message: message.into(),
            help: Some(help.into()),
            source_line: source[line_start..line_end].trim_end_matches('\r').to_string(),
            width,
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gutter = self.line.to_string().len();
        let pad = " ".repeat(gutter);
        writeln!(f, "error: {}", self.message)?;
        writeln!(f, "{pad}--> {}:{}:{}", self.file, self.line, self.column)?;
        writeln!(f, "{pad} |")?;
        writeln!(f, "{} | {}", self.line, self.source_line)?;
        let lead: String = self
            .source_line
            .chars()
            .take(self.column - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{pad} | {lead}{}", "^".repeat(self.width))?;
        if let Some(help) = &self.help {
            write!(f, "\n{pad} = help: {help}")?;
        }
        Ok(())
    }
}

/// Every problem found while loading a recipe set, in file order.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        let files: std::collections::BTreeSet<&str> = self.0.iter().map(|d| d.file.as_str()).collect();
        write!(
            f,
            "\n\nerror: {} problem{} in {} recipe file{}",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" },
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for Diagnostics {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_at_line_and_column_in_characters() {
        let src = "[package]\nname = \"é\"\nverison = 1\n";
        let at = src.find("verison").unwrap();
        let d = Diagnostic::new(
            "r.toml",
            src,
            Some(at..at + 7),
            "unknown key `verison`",
            "did you mean `version`?",
        );
        assert_eq!((d.line, d.column), (3, 1));
        let at = src.find('"').unwrap() + 1;
        let d = Diagnostic::new("r.toml", src, Some(at..at + 2), "x", "y");
        assert_eq!((d.line, d.column), (2, 9));
        assert!(d.to_string().contains("2 | name = \"é\"\n  |         ^"));
    }

    #[test]
    fn span_past_the_end_does_not_panic() {
        let d = Diagnostic::new("r.toml", "a", Some(10..20), "x", "y");
        assert_eq!((d.line, d.column), (1, 2));
    }
}
