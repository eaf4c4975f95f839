//! Strings from the node made safe to show to a person, and bounded.
//!
//! Shim argv, bundle annotations, status `Reason`s and mount sources are
//! written by tenants and by whatever runs on the node. A terminal acts on
//! control sequences in them (OSC `ESC ] … BEL` retitles it or hides what
//! follows, `ESC [2J` clears it, CR overwrites a line, U+202E reverses the
//! text after it), so every human renderer passes node strings through
//! [`inert`] before anything cuts them to a column's width (cutting first
//! could leave half an escape sequence open).

use std::borrow::Cow;

use unicode_general_category::{get_general_category, GeneralCategory};

/// Shows `s` with every character a terminal could act on escaped: C0
/// controls (newline and tab too: a cell value is one line), DEL, C1, the
/// bidirectional and other format characters and the line and paragraph
/// separators, as `\x1b` or `\u{202e}` (see [`dangerous`]).
pub fn inert(s: &str) -> Cow<'_, str> {
    if !s.chars().any(dangerous) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push(&mut out, c);
    }
    Cow::Owned(out)
}

/// [`inert`] for bytes that may not be UTF-8 (paths, argv): invalid bytes
/// show as `\xff`.
pub fn inert_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A path as [`inert_bytes`] shows it.
pub fn inert_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    inert_bytes(path.as_os_str().as_bytes())
}

fn push(out: &mut String, c: char) {
    if !dangerous(c) {
        out.push(c);
    } else if (c as u32) < 0x80 {
        out.push_str(&format!("\\x{:02x}", c as u32));
    } else {
        out.push_str(&format!("\\u{{{:x}}}", c as u32));
    }
}

/// Whether a terminal, a log viewer or a reader could be fooled by `c`:
/// controls (C0, DEL, C1 with NEL), format characters (the bidirectional
/// controls of UAX #9, the "Trojan Source" set; zero-width characters, tag
/// characters, soft hyphen) and U+2028/U+2029, which many viewers and JSON
/// consumers take for a new line. By Unicode's general categories, so a
/// character a later Unicode adds to them is escaped too.
fn dangerous(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// The most bytes of one node string any output carries (JSON, Prometheus,
/// tables). containerd's ids and namespaces are at most 76 characters and a
/// socket path at most 108 bytes; an overlay mount's options (one lowerdir
/// per image layer) are the longest legitimate value, a few KB at 128 layers.
pub const STRING_CAP: usize = 4096;

/// `s` cut to at most `limit` bytes (at a character boundary) with a mark
/// saying how much was left out: `abc…(+131000 bytes)`.
pub fn capped(s: &str, limit: usize) -> Cow<'_, str> {
    if s.len() <= limit {
        return Cow::Borrowed(s);
    }
    let mut end = limit;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…(+{} bytes)", &s[..end], s.len() - end))
}

/// Caps `s` in place (see [`capped`]).
pub fn cap_in_place(s: &mut String, limit: usize) {
    if let Cow::Owned(cut) = capped(s, limit) {
        *s = cut;
    }
}

/// Caps every string inside a JSON value, keys included.
pub fn cap_value(value: &mut serde_json::Value, limit: usize) {
    use serde_json::Value;
    match value {
        Value::String(s) => cap_in_place(s, limit),
        Value::Array(items) => items.iter_mut().for_each(|v| cap_value(v, limit)),
        Value::Object(map) => {
            if map.keys().any(|k| k.len() > limit) {
                let old = std::mem::take(map);
                for (k, v) in old {
                    map.insert(capped(&k, limit).into_owned(), v);
                }
            }
            map.values_mut().for_each(|v| cap_value(v, limit));
        }
        _ => {}
    }
}

/// The most bytes of one node string a person is shown (tables, npd,
/// stderr); `-o json` has up to [`STRING_CAP`].
pub const SHOWN_CAP: usize = 512;

/// For a person: capped at [`SHOWN_CAP`], then made inert.
pub fn shown(s: &str) -> String {
    inert(&capped(s, SHOWN_CAP)).into_owned()
}

/// Text nodectl writes itself, quoting nothing of the node (a finding's
/// cause), for a person: not held to [`SHOWN_CAP`], which bounds one node
/// string, since each advisory that explains a finding adds a sentence or
/// two; capped at [`STRING_CAP`] as in JSON, and made inert all the same.
/// A remedy may quote a mount point: it is [`shown`].
pub fn prose(s: &str) -> String {
    inert(&capped(s, STRING_CAP)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_are_shown_escaped() {
        assert_eq!(
            inert("a\x1b]0;pwned\x07b"),
            "a\\x1b]0;pwned\\x07b",
            "OSC title"
        );
        assert_eq!(inert("\x1b[2Jx"), "\\x1b[2Jx", "clear screen");
        assert_eq!(inert("ok\rbad"), "ok\\x0dbad");
        assert_eq!(inert("a\nb\tc"), "a\\x0ab\\x09c");
        assert_eq!(inert("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(inert("\u{2066}\u{2069}"), "\\u{2066}\\u{2069}");
        assert_eq!(inert("\u{9b}31m\u{7f}"), "\\u{9b}31m\\x7f", "C1 CSI, DEL");
        assert_eq!(
            inert("a\u{2028}b\u{2029}c\u{85}d"),
            "a\\u{2028}b\\u{2029}c\\u{85}d",
            "line and paragraph separators, NEL"
        );
        assert_eq!(
            inert("p\u{200b}\u{ad}\u{feff}\u{e0041}q"),
            "p\\u{200b}\\u{ad}\\u{feff}\\u{e0041}q",
            "zero width, soft hyphen, BOM, tag"
        );
        assert_eq!(inert_bytes(b"a\xffb\x1b"), "a\\xffb\\x1b");
        assert!(matches!(inert("k8s.io/web-0 ✓"), Cow::Borrowed(_)));
    }

    #[test]
    fn caps_cut_at_a_character_boundary_and_say_how_much_is_gone() {
        assert_eq!(capped("abcdef", 6), "abcdef");
        assert_eq!(capped("abcdef", 4), "abcd…(+2 bytes)");
        // 'é' is two bytes: the cut moves back rather than split it.
        assert_eq!(capped("aé", 2), "a…(+2 bytes)");
        let mut v = serde_json::json!({"id": "x".repeat(10), "n": [ "y".repeat(10) ]});
        cap_value(&mut v, 3);
        assert_eq!(v["id"], "xxx…(+7 bytes)");
        assert_eq!(v["n"][0], "yyy…(+7 bytes)");
    }
}
