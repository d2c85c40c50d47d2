//! The TOML document as the recipe walk reads it: tables whose entries come in the order they
//! were written, every key and value with its byte span, and the type names users see in
//! "found inline table".
//!
//! The text is parsed once into `toml`'s borrowed, spanned tree ([`DeTable`]), which costs about
//! half of what an editable `toml_edit` document does and allocates only for strings with escapes.
//! That tree does not say which tables were written inline or which arrays are `[[headers]]`;
//! this module tells them apart by where a value starts relative to its key (a header starts
//! before its key, an inline value after it). It deliberately ignores comments and formatting:
//! recipes never need them.

use std::borrow::Cow;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A document that is not TOML: the parser's message and where it stopped.
pub(super) struct SyntaxError {
    pub span: Option<Range<usize>>,
    pub message: String,
}

/// Parses `src` into the tree the other functions here read.
pub(super) fn parse(src: &str) -> Result<Spanned<DeTable<'_>>, SyntaxError> {
    DeTable::parse(src).map_err(|e| SyntaxError {
        span: e.span(),
        message: e.message().to_string(),
    })
}

/// One table: the document root, a `[header]` table, an implicit one made by a dotted key, or an
/// inline `{ ... }` one.
#[derive(Clone, Copy)]
pub(super) struct Table<'a> {
    map: &'a DeTable<'a>,
    /// Written inside `{ ... }` or `[ ... ]`: every table below it is an inline table too.
    inline: bool,
}

/// One value, with how it was written.
#[derive(Clone, Copy)]
pub(super) struct Item<'a> {
    value: &'a Spanned<DeValue<'a>>,
    /// Written as `[header]` or `[[header]]` lines.
    header: bool,
    inline: bool,
}

/// A key of a table with its value.
pub(super) struct Entry<'a> {
    pub key: &'a str,
    pub key_span: Range<usize>,
    pub item: Item<'a>,
}

impl<'a> Table<'a> {
    pub fn root(doc: &'a Spanned<DeTable<'a>>) -> Table<'a> {
        Table {
            map: doc.get_ref(),
            inline: false,
        }
    }

    /// The entries in the order they were written.
    pub fn entries(self) -> Vec<Entry<'a>> {
        let mut out: Vec<Entry<'a>> = self.map.iter().map(|(k, v)| self.entry(k, v)).collect();
        out.sort_unstable_by_key(|e| e.key_span.start);
        out
    }

    /// Whether every key is one of `allowed` (a cheaper question than [`Table::entries`]).
    pub fn keys_within(self, allowed: &[&str]) -> bool {
        self.map.keys().all(|k| allowed.contains(&k.get_ref().as_ref()))
    }

    pub fn get(self, key: &str) -> Option<Item<'a>> {
        let (k, v) = self.map.get_key_value(key)?;
        Some(self.entry(k, v).item)
    }

    pub fn contains(self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    fn entry(self, key: &'a Spanned<Cow<'a, str>>, value: &'a Spanned<DeValue<'a>>) -> Entry<'a> {
        let key_span = key.span();
        let start = value.span().start;
        let header = !self.inline && start < key_span.start;
        Entry {
            key: key.get_ref(),
            item: Item {
                value,
                header,
                inline: self.inline || (!header && start > key_span.start),
            },
            key_span,
        }
    }
}

impl<'a> Item<'a> {
    /// Where the value is written: for an array of tables, from its first header to its last.
    pub fn span(self) -> Option<Range<usize>> {
        let span = self.value.span();
        match self.value.get_ref() {
            DeValue::Array(a) if self.header => {
                let end = a.iter().last().map_or(span.end, |t| t.span().end);
                Some(span.start..end)
            }
            _ => Some(span),
        }
    }

    /// The name of its type, as `toml_edit` spells it.
    pub fn type_name(self) -> &'static str {
        match self.value.get_ref() {
            DeValue::Table(_) if self.inline => "inline table",
            DeValue::Array(_) if self.header => "array of tables",
            v => v.type_str(),
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self.value.get_ref() {
            DeValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(self) -> Option<bool> {
        self.value.get_ref().as_bool()
    }

    /// A table of any kind (`[header]`, dotted or inline).
    pub fn as_table(self) -> Option<Table<'a>> {
        match self.value.get_ref() {
            DeValue::Table(map) => Some(Table {
                map,
                inline: self.inline,
            }),
            _ => None,
        }
    }

    /// An inline array `[ ... ]` (not an array of tables).
    pub fn as_array(self) -> Option<impl Iterator<Item = Item<'a>>> {
        match self.value.get_ref() {
            DeValue::Array(a) if !self.header => Some(a.iter().map(|value| Item {
                value,
                header: false,
                inline: true,
            })),
            _ => None,
        }
    }

    /// An array of tables written as `[[header]]` lines, each table with its header's span.
    pub fn as_array_of_tables(self) -> Option<impl Iterator<Item = (Table<'a>, Range<usize>)>> {
        match self.value.get_ref() {
            DeValue::Array(a) if self.header => Some(a.iter().filter_map(|t| match t.get_ref() {
                DeValue::Table(map) => Some((Table { map, inline: false }, t.span())),
                _ => None,
            })),
            _ => None,
        }
    }
}
