//! What every section shares to fit the width: prose wrapped at spaces,
//! borderless lists cut or wrapped by comfy-table, ids cut as crictl cuts
//! them. Kept apart so each section says only what it prints.

use std::io::{self, Write};

use comfy_table::{presets, Cell, ContentArrangement, Row, Table};

use super::Layout;
use crate::inert::shown;

/// Writes `text` wrapped to the layout's width, the first line led by
/// `first`, the others by `first` and two spaces; outside `-o wide` a word
/// longer than a line is cut so that no line is wider.
pub(super) fn write_wrapped(
    out: &mut dyn Write,
    layout: Layout,
    text: &str,
    first: &str,
) -> io::Result<()> {
    let rest = format!("{first}  ");
    for line in wrap(text, layout.width, first, &rest, !layout.wide) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The first 13 characters of an id, as crictl shows them; made inert
/// first, so the cut never leaves an escape sequence open.
pub(super) fn short(id: &str) -> String {
    shown(id).chars().take(13).collect()
}

/// A borderless list with a header, as kubectl prints one, arranged to fit
/// `width` (cells wrap; [`one_line`] rows are cut instead).
pub(super) fn list_table(header: &[&str], width: usize) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(u16::try_from(width).unwrap_or(u16::MAX))
        .set_truncation_indicator("…")
        .set_header(header.to_vec());
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    table
}

pub(super) fn one_line(cells: Vec<Cell>) -> Row {
    let mut row = Row::from(cells);
    row.max_height(1);
    row
}

/// Writes a table without the spaces its padding leaves at line ends.
pub(super) fn write_table(out: &mut dyn Write, table: &Table) -> io::Result<()> {
    for line in table.lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `text` in lines of at most `width` columns, broken at spaces, the first
/// line led by `first`, the others by `rest`. A word longer than a line is
/// cut into pieces when `break_words` (nothing is lost and the line fits),
/// else kept whole on its own line (`-o wide`: ids and paths stay whole, to
/// copy).
pub(super) fn wrap(
    text: &str,
    width: usize,
    first: &str,
    rest: &str,
    break_words: bool,
) -> Vec<String> {
    let cols = |s: &str| s.chars().count();
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !empty && cols(&line) + 1 + cols(word) > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        let mut word = word;
        while break_words && cols(&line) + cols(word) > width {
            let room = width.saturating_sub(cols(&line)).max(1);
            let cut = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
            line.push_str(&word[..cut]);
            word = &word[cut..];
            lines.push(std::mem::replace(&mut line, rest.to_string()));
        }
        line.push_str(word);
        empty = word.is_empty();
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_breaks_at_spaces_and_cuts_only_what_cannot_fit() {
        assert_eq!(wrap("aa bb cc", 5, "", "  ", true), ["aa bb", "  cc"]);
        assert_eq!(wrap("abcdefgh", 5, "", "  ", true), ["abcde", "  fgh"]);
        assert_eq!(wrap("x abcdefgh", 5, "", "", false), ["x", "abcdefgh"]);
        assert_eq!(wrap("", 5, "> ", "", true), ["> "]);
    }
}
