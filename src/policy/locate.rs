//! Where a key of a policy file is, from the TOML parser's own spans: for
//! errors that name the line and the key.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The byte offset of `key` in `[table]` (its key), else of the table's
/// header, else 0. The text is read even when it has errors elsewhere.
pub fn key_offset(text: &str, table: &str, key: &str) -> usize {
    let (doc, _) = DeTable::parse_recoverable(text);
    let Some((tk, tv)) = entry(doc.get_ref(), table) else {
        return 0;
    };
    if let DeValue::Table(t) = tv.get_ref()
        && let Some((k, _)) = entry(t, key)
    {
        return k.span().start;
    }
    tk.span().start
}

/// The dotted key whose key or value holds byte `offset`, innermost
/// tables first (`roots.allow_under` for any byte of its array).
///
/// A syntax error in a table header leaves no key in the parse: then the
/// header's own text, when the offset is on a header line.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let (doc, _) = DeTable::parse_recoverable(text);
    let mut path = Vec::new();
    if find(doc.get_ref(), offset, &mut path) {
        return Some(path.join("."));
    }
    let start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text.get(start..)?.lines().next()?.trim();
    line.starts_with('[')
        .then(|| {
            line.trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string()
        })
        .filter(|h| !h.is_empty())
}

fn entry<'a, 'i>(
    table: &'a DeTable<'i>,
    name: &str,
) -> Option<(
    &'a Spanned<std::borrow::Cow<'i, str>>,
    &'a Spanned<DeValue<'i>>,
)> {
    table.iter().find(|(k, _)| k.get_ref() == name)
}

fn find(table: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (k, v) in table {
        path.push(k.get_ref().to_string());
        // A table's entries may lie anywhere after its header: look in
        // every table, whatever its own span.
        let inner = match v.get_ref() {
            DeValue::Table(t) => find(t, offset, path),
            // An array of tables (`[[roots.static]]`): named without index.
            DeValue::Array(items) => items.iter().any(|item| match item.get_ref() {
                DeValue::Table(t) => find(t, offset, path),
                _ => false,
            }),
            _ => false,
        };
        if inner {
            return true;
        }
        if k.span().contains(&offset) || v.span().contains(&offset) {
            return true;
        }
        path.pop();
    }
    false
}
