//! Which containerd the test bed runs, and which release line it belongs to.
//!
//! The tests run on the system's containerd (Debian's 1.6.20) and, with
//! `NODECTL_CONTAINERD_DIR` naming a directory that holds `containerd`,
//! `containerd-shim-runc-v2` and `ctr`, on that release instead; `.ci/run`
//! does so for every archive in `../shared/containerd`. What differs between
//! lines is asserted per [`Line`], so a line the tests have no truth for
//! fails at start-up instead of being judged by another line's expectations.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::run_bounded;

/// Names a directory holding the containerd release to test against.
pub const CONTAINERD_DIR_ENV: &str = "NODECTL_CONTAINERD_DIR";

/// The binaries taken from [`CONTAINERD_DIR_ENV`]; the rest (runc, strace)
/// always come from PATH.
pub const RELEASE_BINARIES: &[&str] = &["containerd", "containerd-shim-runc-v2", "ctr"];

/// A containerd release line whose behaviour the tests write down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Line {
    /// 1.6 (Debian 12's 1.6.20; end of life August 2025).
    V1_6,
    /// 1.7 (LTS).
    V1_7,
    /// 2.0 (LTS).
    V2_0,
    /// 2.3 (LTS, current).
    V2_3,
}

impl Line {
    /// The 2.x lines: config version 3 on disk (a version 2 config is
    /// migrated on load), `bootstrap.json` instead of `address` in bundles,
    /// `ctr images import` says "saved" instead of "unpacking".
    pub fn is_v2(self) -> bool {
        self >= Line::V2_0
    }
}

/// The containerd under test: where its binaries are and what it says it is.
#[derive(Clone, Debug)]
pub struct Containerd {
    /// The directory from [`CONTAINERD_DIR_ENV`]; `None` means PATH.
    pub dir: Option<PathBuf>,
    /// `containerd --version`, e.g. `containerd github.com/containerd/containerd/v2 v2.3.4 `.
    pub version_output: String,
    /// `major.minor.patch` as printed, e.g. `2.3.4` or `1.6.20`.
    pub version: String,
    pub line: Line,
}

impl Containerd {
    /// The containerd named by the environment, or why it cannot be used.
    pub fn from_env() -> Result<Containerd, String> {
        let dir = std::env::var_os(CONTAINERD_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        if let Some(dir) = &dir {
            for binary in RELEASE_BINARIES {
                if !dir.join(binary).is_file() {
                    return Err(format!(
                        "{CONTAINERD_DIR_ENV}={} has no {binary}",
                        dir.display()
                    ));
                }
            }
        }
        let binary = binary_in(dir.as_deref(), "containerd");
        let output = run_bounded(
            Command::new(&binary).arg("--version"),
            Duration::from_secs(10),
        )?;
        let version_output = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let version = parse_version(&version_output)
            .ok_or_else(|| format!("cannot read a version from {version_output:?}"))?;
        let line = line_of(&version).ok_or_else(|| {
            format!(
                "containerd {version} is in no line the tests know: add it to \
                 tests/support/line.rs with what that line does"
            )
        })?;
        Ok(Containerd {
            dir,
            version_output,
            version,
            line,
        })
    }

    /// The version as numbers, to tell releases of one line apart (a bug
    /// fixed in a patch release: 2.0.6 has containerd#12344, 2.0.11 not).
    pub fn release(&self) -> (u32, u32, u32) {
        let mut numbers = self.version.split('.').map(|n| n.parse().unwrap_or(0));
        let mut next = || numbers.next().unwrap_or(0);
        (next(), next(), next())
    }

    /// The path to run one of [`RELEASE_BINARIES`].
    pub fn binary(&self, name: &str) -> PathBuf {
        binary_in(self.dir.as_deref(), name)
    }

    /// PATH for containerd itself: it finds `containerd-shim-runc-v2` there.
    pub fn path_env(&self) -> std::ffi::OsString {
        let system = std::env::var_os("PATH").unwrap_or_default();
        match &self.dir {
            None => system,
            Some(dir) => {
                let mut paths = vec![dir.clone()];
                paths.extend(std::env::split_paths(&system));
                std::env::join_paths(paths).unwrap_or(system)
            }
        }
    }
}

fn binary_in(dir: Option<&Path>, name: &str) -> PathBuf {
    match dir {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// `1.6.20` from `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`,
/// `2.3.4` from `containerd github.com/containerd/containerd/v2 v2.3.4 `.
fn parse_version(output: &str) -> Option<String> {
    let word = output.split_whitespace().nth(2)?;
    let digits: String = word
        .trim_start_matches('v')
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (digits.split('.').count() == 3).then_some(digits)
}

fn line_of(version: &str) -> Option<Line> {
    let mut parts = version.split('.');
    match (parts.next()?, parts.next()?) {
        ("1", "6") => Some(Line::V1_6),
        ("1", "7") => Some(Line::V1_7),
        ("2", "0") => Some(Line::V2_0),
        ("2", "3") => Some(Line::V2_3),
        _ => None,
    }
}

#[test]
fn versions_of_every_line_are_read() {
    let debian = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3";
    assert_eq!(parse_version(debian).as_deref(), Some("1.6.20"));
    let upstream = "containerd github.com/containerd/containerd/v2 v2.3.4 ";
    assert_eq!(parse_version(upstream).as_deref(), Some("2.3.4"));
    assert_eq!(line_of("1.7.34"), Some(Line::V1_7));
    assert_eq!(line_of("2.0.11"), Some(Line::V2_0));
    assert_eq!(line_of("2.1.4"), None);
}
