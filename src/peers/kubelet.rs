//! kubelet's command line and `--config-dir`, read as kubelet reads them.
//!
//! - Flags: kubelet parses its command line with pflag under
//!   `cliflag.WordSepNormalizeFunc` (k8s.io/component-base/cli/flag,
//!   set in cmd/kubelet/app/server.go `NewKubeletCommand`), which turns
//!   every `_` of a flag's name into `-`: `--cgroup_root=/x` is
//!   `--cgroup-root`. pflag's `parseLongArg` takes `--name=value` whole,
//!   an empty value included (`--cgroup-root=` sets it to ""), and for a
//!   flag that is not boolean `--name value` takes the next argument,
//!   whatever it is; `--` ends the flags; the last occurrence wins.
//! - Drop-ins: `mergeKubeletConfigurations` walks `--config-dir` with
//!   `filepath.WalkDir` and takes a file when `filepath.Ext(name) ==
//!   ".conf"`: Go's `Ext` is everything from the last `.` of the name, so
//!   a file named just `.conf` is a drop-in (Rust's `Path::extension`
//!   says it has none).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// A flag's name as kubelet's `WordSepNormalizeFunc` makes it.
pub fn normalised(name: &str) -> String {
    name.replace('_', "-")
}

/// The value kubelet takes for the non-boolean long flag `name` (spelled
/// `--like-this`) from its command line `args` (the program's own name,
/// when first, is no flag): the
/// last one given, an empty value kept; `None` when it is not given.
pub fn flag_value(args: &[String], name: &str) -> Option<String> {
    let mut found = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (given, value) = match long.split_once('=') {
            Some((given, value)) => (given, Some(value)),
            None => (long, None),
        };
        if format!("--{}", normalised(given)) != name {
            continue;
        }
        found = match value {
            Some(value) => Some(value.to_string()),
            None => rest.next().cloned(),
        };
    }
    found
}

/// Whether a boolean flag `name` is given, and as what text: bare it is
/// `"true"` (pflag's `NoOptDefVal`), else its `=value`; the last wins.
pub fn bool_flag_text(args: &[String], name: &str) -> Option<String> {
    let mut found = None;
    for arg in args {
        if arg == "--" {
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            continue;
        };
        let (given, value) = match long.split_once('=') {
            Some((given, value)) => (given, value),
            None => (long, "true"),
        };
        if format!("--{}", normalised(given)) == name {
            found = Some(value.to_string());
        }
    }
    found
}

/// Whether kubelet merges the file named `name` from its `--config-dir`.
pub fn is_drop_in(name: &OsStr) -> bool {
    name.as_bytes().ends_with(b".conf")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        std::iter::once("kubelet")
            .chain(list.iter().copied())
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_flag_spelt_with_underscores_is_the_flag() {
        let given = args(&["--cgroup_root=/x", "--config_dir", "d"]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some("/x"));
        assert_eq!(flag_value(&given, "--config-dir").as_deref(), Some("d"));
    }

    #[test]
    fn an_empty_value_is_a_value_and_the_last_given_wins() {
        let given = args(&["--cgroup-root=/k", "--cgroup-root="]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some(""));
        let given = args(&["--cgroup-root=", "--cgroup-root", "/k"]);
        assert_eq!(flag_value(&given, "--cgroup-root").as_deref(), Some("/k"));
        assert_eq!(flag_value(&given, "--root-dir"), None);
    }

    #[test]
    fn nothing_after_the_end_of_flags_is_a_flag() {
        let given = args(&["--root-dir=/a", "--", "--root-dir=/b"]);
        assert_eq!(flag_value(&given, "--root-dir").as_deref(), Some("/a"));
    }

    #[test]
    fn a_bare_boolean_flag_is_true() {
        let given = args(&["--cgroups_per_qos"]);
        assert_eq!(
            bool_flag_text(&given, "--cgroups-per-qos").as_deref(),
            Some("true")
        );
        let given = args(&["--cgroups-per-qos", "--cgroups-per-qos=f"]);
        assert_eq!(
            bool_flag_text(&given, "--cgroups-per-qos").as_deref(),
            Some("f")
        );
    }

    #[test]
    fn a_drop_in_is_named_as_go_s_ext_reads_it() {
        for name in ["10-a.conf", ".conf", "x.y.conf"] {
            assert!(is_drop_in(OsStr::new(name)), "{name}");
        }
        for name in ["a.conf.bak", "a.CONF", "conf", "a.yaml", "a.conf~"] {
            assert!(!is_drop_in(OsStr::new(name)), "{name}");
        }
    }
}
