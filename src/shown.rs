//! How a name kiln did not choose (a bundle member, a lock value, a file name from an archive)
//! is shown in a message: control characters, escapes and bytes that are not UTF-8 are written
//! as escapes (`\n`, `\u{1b}`, `\xff`), so a hostile name can neither fake lines of kiln's
//! output nor drive the terminal.
//!
//! It deliberately ignores names kiln made itself (they are shown as they are) and does not
//! shorten long names.

use std::fmt::Write;

/// `text` with every control character escaped (printable Unicode stays as it is).
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push(&mut out, text);
    out
}

/// The bytes of a name (a path from an archive): valid UTF-8 as [`text`], other bytes as `\xNN`.
pub fn bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        push(&mut out, chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A path as [`bytes`] shows it.
pub fn path(p: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    bytes(p.as_os_str().as_bytes())
}

fn push(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() || c == '\\' {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_and_foreign_bytes_are_escaped_and_the_rest_kept() {
        assert_eq!(super::text("wheels/ab/x\n\u{1b}[31mok"), "wheels/ab/x\\n\\u{1b}[31mok");
        assert_eq!(super::text("säure-1.0"), "säure-1.0");
        assert_eq!(super::bytes(b"a\xffb\r"), "a\\xffb\\r");
        assert_eq!(super::text("back\\slash"), "back\\\\slash");
    }
}
