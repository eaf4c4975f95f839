//! `check --textfile PATH`, as the DaemonSet's loop runs it: the metrics
//! replace the file whole, a failed run keeps the last good series with
//! `nodectl_up 0` and the error, and nothing is written through a symlink.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

/// A hand-made node whose socket accepts and never answers: a run there
/// always has a report (the API calls time out).
struct Node {
    dir: tempfile::TempDir,
    _listener: std::os::unix::net::UnixListener,
}

impl Node {
    fn new() -> Node {
        let dir = support::hand_made_node();
        let [_, _, socket, _] = support::hand_made_paths(dir.path());
        let _listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
        Node { dir, _listener }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn check(node: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "-q", "--timeout", "300ms"];
    args.extend_from_slice(extra);
    let [root, state, socket, config] = support::hand_made_paths(node);
    support::run_bounded(
        &mut support::nodectl_command(&args, [&root, &state, &socket, &config]),
        std::time::Duration::from_secs(60),
    )
    .unwrap()
}

fn series(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn a_failed_run_keeps_the_last_good_series_with_up_0() {
    let node = Node::new();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("nodectl.prom");
    let textfile = file.to_str().unwrap();

    let good = check(node.path(), &["--textfile", textfile]);
    assert!(
        !support::stderr(&good).contains("--textfile"),
        "{}",
        support::stderr(&good)
    );
    assert!(good.stdout.is_empty(), "-q: nothing on stdout");
    let first = fs::read_to_string(&file).unwrap();
    assert!(
        first.contains("nodectl_findings{command=\"check\",kind=\"zombie\"} 0"),
        "{first}"
    );
    assert!(
        first.contains("nodectl_last_run_timestamp_seconds"),
        "{first}"
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644,
        "node_exporter runs as another user"
    );
    support::promtool_accepts(&first);

    // A run that produces no report at all.
    let missing = out.path().join("no-such-bundle.tar.gz");
    let failed = check(
        node.path(),
        &["--textfile", textfile, "--from", missing.to_str().unwrap()],
    );
    assert_eq!(failed.status.code(), Some(2));
    assert!(
        support::stderr(&failed).contains("no-such-bundle"),
        "the error is on stderr: {}",
        support::stderr(&failed)
    );
    let kept = fs::read_to_string(&file).unwrap();
    let comment = kept.lines().next().unwrap();
    assert!(
        comment.starts_with("# nodectl: ") && comment.contains("no-such-bundle"),
        "{kept}"
    );
    let up_0: Vec<String> = series(&first)
        .iter()
        .map(|line| match line.strip_prefix("nodectl_up{") {
            Some(rest) => format!("nodectl_up{{{}", rest.replace("} 1", "} 0")),
            None => line.to_string(),
        })
        .collect();
    assert_eq!(
        series(&kept),
        up_0,
        "every series kept, nodectl_up 0:\n{first}\n---\n{kept}"
    );
    support::promtool_accepts(&kept);
    assert_eq!(
        support::temp_files_left_in(out.path()),
        Vec::<String>::new()
    );
}

#[test]
fn a_failed_first_run_writes_up_0_and_no_timestamp() {
    let node = Node::new();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("nodectl.prom");
    let failed = check(
        node.path(),
        &[
            "--textfile",
            file.to_str().unwrap(),
            "--from",
            "/nonexistent/bundle.tar.gz",
        ],
    );
    assert_eq!(failed.status.code(), Some(2));
    let text = fs::read_to_string(&file).unwrap();
    assert_eq!(series(&text), ["nodectl_up{command=\"check\"} 0"], "{text}");
    support::promtool_accepts(&text);
}

#[test]
fn a_symlink_at_the_path_is_replaced_never_followed() {
    let node = Node::new();
    let out = tempfile::tempdir().unwrap();
    let victim = out.path().join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let file = out.path().join("nodectl.prom");
    std::os::unix::fs::symlink(&victim, &file).unwrap();
    // Both writers: a report, and a failed run's kept file.
    for failing in [false, true] {
        let mut args = vec!["--textfile", file.to_str().unwrap()];
        if failing {
            args.extend(["--from", "/nonexistent/bundle.tar.gz"]);
        }
        check(node.path(), &args);
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(fs::symlink_metadata(&file).unwrap().is_file(), "{args:?}");
        let text = fs::read_to_string(&file).unwrap();
        assert!(!text.contains("precious"), "never read through it: {text}");
        if failing {
            assert_eq!(series(&text), ["nodectl_up{command=\"check\"} 0"], "{text}");
        }
        fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&victim, &file).unwrap();
    }
}

/// Issue 26: an old file over 1 MiB was kept cut at 1 MiB, mid-line, and
/// node_exporter rejects a whole file for one bad line. An old file that
/// cannot be kept whole and valid (too big, not UTF-8, a line that is not
/// text format) is dropped: what is written is valid, `nodectl_up 0`, with
/// a comment saying why.
#[test]
fn an_old_file_that_cannot_be_kept_valid_never_survives() {
    let node = Node::new();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("nodectl.prom");
    let textfile = file.to_str().unwrap();
    check(node.path(), &["--textfile", textfile]);
    let good = fs::read_to_string(&file).unwrap();
    // Valid whole; cut at 1 MiB, inside its last line's label value.
    let long = "x".repeat(1 << 20);
    let oversized = format!(
        "{good}# HELP padding A long label value.\n# TYPE padding gauge\npadding{{v=\"{long}\"}} 1\n"
    );
    support::promtool_accepts(&oversized);
    let invalid: [(&str, Vec<u8>); 3] = [
        ("larger than", oversized.into_bytes()),
        ("not UTF-8", [good.as_bytes(), b"\xff\n"].concat()),
        (
            "is not Prometheus text format",
            format!("{good}<html>\n").into_bytes(),
        ),
    ];
    for (why, old) in invalid {
        fs::write(&file, &old).unwrap();
        let failed = check(
            node.path(),
            &[
                "--textfile",
                textfile,
                "--from",
                "/nonexistent/bundle.tar.gz",
            ],
        );
        assert_eq!(failed.status.code(), Some(2));
        let text = fs::read_to_string(&file).unwrap();
        support::promtool_accepts(&text);
        assert_eq!(
            series(&text),
            ["nodectl_up{command=\"check\"} 0"],
            "{why}: {text}"
        );
        let comment = text.lines().next().unwrap();
        assert!(
            comment.contains("the last good file was not kept") && comment.contains(why),
            "{why}: {comment}"
        );
    }
}
