//! `check --textfile PATH`: the Prometheus metrics written for
//! node_exporter's textfile collector, so the DaemonSet's loop is only a
//! loop.
//!
//! The file is replaced whole: written under a fresh name in the same
//! directory (`O_CREAT|O_EXCL|O_NOFOLLOW`, so never through a symlink or
//! into someone else's file), flushed to disk, then renamed over `PATH` (a
//! rename replaces a symlink at `PATH` itself, never its target). A scrape
//! sees the old file or the new one, never half of one.
//!
//! A run that fails (no report at all) does not wipe the series: the last
//! good file is kept with `nodectl_up` set to 0 and the error as a comment,
//! so the alert on `nodectl_up == 0` fires and `nodectl_findings` does not
//! vanish. Without a last good file, the file holds only `nodectl_up 0`;
//! so it does when the old file cannot be kept whole and valid (read
//! through the bounded reader: over 1 MiB, not UTF-8, a line that is not
//! text format), since node_exporter drops a whole file for one bad line.

use std::io;
use std::path::Path;

use crate::read::bounded::{read_regular, Links};
use crate::report::Report;

/// Writes the report's metrics to `path`.
pub fn write_report(path: &Path, report: &Report) -> io::Result<()> {
    let mut text = Vec::new();
    super::prometheus::render(report, &mut text)?;
    replace(path, &text)
}

/// After a run that produced no report: the last good file at `path`, its
/// `nodectl_up` set to 0, with `error` as a comment. A file that cannot be
/// kept whole as valid text format is dropped, and the comment says why:
/// node_exporter rejects a whole file for one bad line.
pub fn keep_last_good(path: &Path, command: &str, error: &str) -> io::Result<()> {
    let text = match read_previous(path) {
        Ok(previous) => after_failure(previous.as_deref(), command, error),
        Err(why) => after_failure(
            None,
            command,
            &format!("{error} (the last good file was not kept: {why})"),
        ),
    };
    replace(path, text.as_bytes())
}

/// The metrics after a run that produced no report, now: `previous` (the
/// last good run's metrics, if any) kept with `nodectl_up` 0 and `error`
/// as a comment. `serve` answers scrapes with it too.
pub fn after_failure(previous: Option<&str>, command: &str, error: &str) -> String {
    let when = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    failed(previous, command, &when, error)
}

/// The comment lines this module writes; dropped from a last good file
/// before the new one is added, so failures do not pile up.
const FAILURE_MARK: &str = "# nodectl: ";

/// The file after a failed run: `previous` (the last good file, if any)
/// with every `nodectl_up` sample set to 0 and one comment naming `error`.
fn failed(previous: Option<&str>, command: &str, when: &str, error: &str) -> String {
    // One line, inert and capped: the error may quote node strings.
    let error = crate::inert::shown(&error.replace('\n', " "));
    let mut out = format!(
        "{FAILURE_MARK}the run at {when} failed; the series below are the last good run's, \
         with nodectl_up 0: {error}\n"
    );
    let mut up_seen = false;
    for line in previous.unwrap_or_default().lines() {
        if line.starts_with(FAILURE_MARK) {
            continue;
        }
        if line.starts_with("nodectl_up{") || line.starts_with("nodectl_up ") {
            if let Some((series, _value)) = line.rsplit_once(' ') {
                out.push_str(series);
                out.push_str(" 0\n");
                up_seen = true;
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    if !up_seen {
        // No last good file (or not one of ours): only the verdict. No
        // timestamp either, so the staleness alerts see no run.
        let command = command.replace(['\\', '"', '\n'], "_");
        out.push_str(
            "# HELP nodectl_up 1 when every source could be read, 0 when one was unavailable.\n\
             # TYPE nodectl_up gauge\n",
        );
        out.push_str(&format!("nodectl_up{{command=\"{command}\"}} 0\n"));
    }
    out
}

/// The largest last good file that is kept (nodectl writes a few KiB); a
/// larger one is not nodectl's, and cut short it would be invalid.
const PREVIOUS_CAP: u64 = 1 << 20;

/// The last good file at `path`: `None` when there is none, why not when
/// it cannot be kept: not a regular file (never read through a symlink,
/// never waited on as a FIFO), over [`PREVIOUS_CAP`], not UTF-8, or with
/// a line that is not Prometheus text format.
fn read_previous(path: &Path) -> Result<Option<String>, String> {
    let bytes = match read_regular(path, PREVIOUS_CAP, Links::Refuse) {
        Ok(file) => file.bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err.to_string()),
    };
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    match invalid_line(&text) {
        Some(number) => Err(format!("line {number} is not Prometheus text format")),
        None => Ok(Some(text)),
    }
}

/// The number of the first line of `text` that Prometheus's text format
/// does not allow, as node_exporter's parser (Go's `expfmt`) reads a line:
/// blank, a comment (`# HELP` and `# TYPE` well formed) or a sample. Every
/// line ends with a newline: a file cut short does not. What spans lines
/// (a `# TYPE` after its samples) is not judged.
fn invalid_line(text: &str) -> Option<usize> {
    let Some(lines) = text.strip_suffix('\n') else {
        return (!text.is_empty()).then(|| text.split('\n').count());
    };
    lines
        .split('\n')
        .position(|line| !is_exposition_line(line))
        .map(|index| index + 1)
}

fn is_exposition_line(line: &str) -> bool {
    let line = blanks(line);
    match line.strip_prefix('#') {
        None if line.is_empty() => true,
        None => is_sample(line),
        Some(comment) => is_comment(blanks(comment)),
    }
}

/// `# HELP name text` (escapes `\\` and `\n` only), `# TYPE name type`; any
/// other comment is ignored.
fn is_comment(comment: &str) -> bool {
    let (keyword, rest) = comment.split_once([' ', '\t']).unwrap_or((comment, ""));
    let after_name = metric_name(blanks(rest));
    match keyword {
        "HELP" => after_name.is_some_and(|text| {
            text.is_empty() || text.starts_with([' ', '\t']) && escaped(text, &['\\', 'n'])
        }),
        "TYPE" => after_name.is_some_and(|kind| {
            let kind = blanks(kind)
                .trim_end_matches([' ', '\t'])
                .to_ascii_lowercase();
            matches!(
                kind.as_str(),
                "counter" | "gauge" | "histogram" | "summary" | "untyped"
            )
        }),
        _ => true,
    }
}

/// `name{label="value",...} value [timestamp]`.
fn is_sample(line: &str) -> bool {
    let Some(mut rest) = metric_name(line).map(blanks) else {
        return false;
    };
    if let Some(labels) = rest.strip_prefix('{') {
        match label_pairs(blanks(labels)) {
            Some(after) => rest = blanks(after),
            None => return false,
        }
    }
    let mut fields = rest.split([' ', '\t']).filter(|field| !field.is_empty());
    let value = fields.next().is_some_and(|v| v.parse::<f64>().is_ok());
    let timestamp = fields.next().is_none_or(|t| t.parse::<i64>().is_ok());
    value && timestamp && fields.next().is_none()
}

/// What follows the `}` of `label="value", ...}`.
fn label_pairs(mut rest: &str) -> Option<&str> {
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some(after);
        }
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let value = blanks(blanks(&rest[name_end..]).strip_prefix('=')?).strip_prefix('"')?;
        let close = closing_quote(value)?;
        if !escaped(&value[..close], &['\\', '"', 'n']) {
            return None;
        }
        rest = blanks(&value[close + 1..]);
        match rest.strip_prefix(',') {
            Some(after) => rest = blanks(after),
            None if rest.starts_with('}') => {}
            None => return None,
        }
    }
}

/// Where the `"` that ends a label value is (one not escaped).
fn closing_quote(value: &str) -> Option<usize> {
    let mut escaping = false;
    for (at, c) in value.char_indices() {
        match c {
            _ if escaping => escaping = false,
            '\\' => escaping = true,
            '"' => return Some(at),
            _ => {}
        }
    }
    None
}

/// Whether every `\` in `text` starts one of the escapes `allowed`.
fn escaped(text: &str, allowed: &[char]) -> bool {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && !chars.next().is_some_and(|next| allowed.contains(&next)) {
            return false;
        }
    }
    true
}

/// What follows a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`) at the start.
fn metric_name(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let name = &text[..end];
    (!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit())).then(|| &text[end..])
}

/// `text` after its leading blanks and tabs.
fn blanks(text: &str) -> &str {
    text.trim_start_matches([' ', '\t'])
}

/// Replaces `path` with `bytes` (mode 0644: node_exporter runs as another
/// user), as the module's documentation says.
/// A leading dot and a suffix other than .prom: node_exporter reads only
/// *.prom, so it never sees a file being written.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::read::beside::replace(path, bytes, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const GOOD: &str = "\
# HELP nodectl_up 1 when every source could be read, 0 when one was unavailable.
# TYPE nodectl_up gauge
nodectl_up{command=\"check\"} 1
# HELP nodectl_findings Findings of the last run, by kind.
# TYPE nodectl_findings gauge
nodectl_findings{command=\"check\",kind=\"zombie\"} 2
nodectl_last_run_timestamp_seconds{command=\"check\"} 1700000000
";

    #[test]
    fn a_failed_run_keeps_the_last_good_series_with_up_0_and_the_error() {
        let text = failed(
            Some(GOOD),
            "check",
            "2026-01-01T00:00:00Z",
            "bad\narchive\x1b[2J",
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with(FAILURE_MARK), "{text}");
        assert!(
            lines[0].ends_with("bad archive\\x1b[2J"),
            "one inert line: {text}"
        );
        assert!(text.contains("nodectl_up{command=\"check\"} 0\n"), "{text}");
        assert!(!text.contains("nodectl_up{command=\"check\"} 1"), "{text}");
        for kept in [
            "nodectl_findings{command=\"check\",kind=\"zombie\"} 2",
            "nodectl_last_run_timestamp_seconds{command=\"check\"} 1700000000",
        ] {
            assert!(text.contains(kept), "{kept} kept: {text}");
        }
        // A second failure replaces the comment, it does not add one.
        let again = failed(Some(&text), "check", "2026-01-01T00:01:00Z", "again");
        assert_eq!(again.matches(FAILURE_MARK).count(), 1, "{again}");
        assert_eq!(again.lines().count(), GOOD.lines().count() + 1, "{again}");
    }

    #[test]
    fn lines_are_judged_as_node_exporters_parser_reads_them() {
        // Each as `promtool check metrics` judged it (lint warnings aside).
        for valid in [
            "nodectl_up{command=\"check\"} 1",
            "  nodectl_up 0 1700000000",
            "a:b_c{x=\"1\",} NaN",
            r#"a{x="q\"\\\n"} +Inf"#,
            "a{} 1",
            "a{x=\"1\"}1",
            "a\t1",
            r"# HELP a some \\ help\n",
            "# TYPE a GAUGE",
            "# anything at all",
            "",
        ] {
            assert!(is_exposition_line(valid), "{valid:?} is valid");
        }
        for invalid in [
            "nodectl_findings{command=\"ch",
            "a{x=\"1\"} one",
            "a 1 1.5",
            "1a 1",
            "a{1x=\"1\"} 1",
            r#"a{x="\q"} 1"#,
            "# TYPE a gauges",
            r"# HELP a bad \q escape",
            "a{x=\"1\" y=\"2\"} 1",
            "a 1 2 3",
            "a{x=\"1\"}",
            "a{x=\"1\",,} 1",
        ] {
            assert!(!is_exposition_line(invalid), "{invalid:?} is invalid");
        }
        assert_eq!(invalid_line(GOOD), None);
        assert_eq!(invalid_line(""), None, "an empty file is valid");
        // Cut short: the last line has no newline.
        assert_eq!(invalid_line(&GOOD[..GOOD.len() - 1]), Some(7));
    }

    #[test]
    fn an_old_file_that_cannot_be_kept_valid_is_dropped_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodectl.prom");
        let kept_after = |old: &[u8]| {
            fs::write(&path, old).unwrap();
            keep_last_good(&path, "check", "no report").unwrap();
            let text = fs::read_to_string(&path).unwrap();
            assert_eq!(invalid_line(&text), None, "{text}");
            text
        };
        let only_up_0 = |text: &str, why: &str| {
            let series: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            assert_eq!(series, ["nodectl_up{command=\"check\"} 0"], "{text}");
            let comment = text.lines().next().unwrap();
            assert!(
                comment.contains("the last good file was not kept"),
                "{text}"
            );
            assert!(comment.contains(why), "{why}: {text}");
        };

        // A valid one is kept.
        let text = kept_after(GOOD.as_bytes());
        assert!(text.contains("kind=\"zombie\"} 2"), "{text}");
        // Over the cap, every line valid: cut at the cap, it would not be.
        let big = GOOD.repeat((PREVIOUS_CAP as usize / GOOD.len()) + 1);
        only_up_0(&kept_after(big.as_bytes()), "larger than");
        only_up_0(&kept_after(b"nodectl_up 1\n\xff\xfe\n"), "not UTF-8");
        let cut = &GOOD[..GOOD.len() - 20];
        only_up_0(&kept_after(cut.as_bytes()), "line 7 is not");
        let html = b"nodectl_up 1\n<html>503</html>\n";
        only_up_0(&kept_after(html), "line 2 is not");
    }

    #[test]
    fn an_old_fifo_is_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nodectl.prom");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_previous(&path).unwrap_err().contains("FIFO"));
    }

    #[test]
    fn a_failed_first_run_writes_only_up_0() {
        let text = failed(None, "check", "2026-01-01T00:00:00Z", "no report");
        assert!(text.contains("nodectl_up{command=\"check\"} 0\n"), "{text}");
        assert!(
            !text.contains("nodectl_last_run_timestamp_seconds"),
            "{text}"
        );
        assert!(!text.contains("nodectl_findings"), "{text}");
    }
}
