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
//! vanish. Without a last good file, the file holds only `nodectl_up 0`.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use crate::report::Report;

/// Writes the report's metrics to `path`.
pub fn write_report(path: &Path, report: &Report) -> io::Result<()> {
    let mut text = Vec::new();
    super::prometheus::render(report, &mut text)?;
    replace(path, &text)
}

/// After a run that produced no report: the last good file at `path`, its
/// `nodectl_up` set to 0, with `error` as a comment.
pub fn keep_last_good(path: &Path, command: &str, error: &str) -> io::Result<()> {
    let previous = read_previous(path);
    let text = after_failure(previous.as_deref(), command, error);
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

/// The most of a last good file that is kept (nodectl writes a few KiB).
const PREVIOUS_CAP: u64 = 1 << 20;

/// The file at `path` if it is a regular file nodectl can read; never
/// through a symlink.
fn read_previous(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(PREVIOUS_CAP).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Replaces `path` with `bytes` (mode 0644: node_exporter runs as another
/// user), as the module's documentation says.
fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(named(io::Error::other("is a directory")));
    }
    // A leading dot and a suffix other than .prom: node_exporter reads only
    // *.prom, so it never sees a file being written.
    let (tmp, mut file) = crate::evidence::create_beside(path, 0o644).map_err(named)?;
    let placed = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, path));
    if placed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    placed.map_err(named)
}

#[cfg(test)]
mod tests {
    use super::*;

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
