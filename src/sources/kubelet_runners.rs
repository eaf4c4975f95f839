//! The programs kubelet runs as, and where each keeps kubelet's flags. The
//! process's name only says which of these rules to read; whether it is
//! believed is the kernel's word (`kubelet::believed_kubelets`).
//!
//! - `kubelet` itself (and rke2's, a real kubelet binary it starts as a
//!   child, its flags on its command line: rke2 `pkg/podexecutor`
//!   `StaticPodConfig.Kubelet`).
//! - k3s runs kubelet inside its own process (`k3s-server` or `k3s-agent`,
//!   the names `cmd/k3s` execs), and hides its command line
//!   (`gspt.SetProcTitle(os.Args[0] + " server")` in `pkg/cli/server`), so
//!   kubelet's flags are read where k3s reads them: `kubelet-arg` of its
//!   config file (`/etc/rancher/k3s/config.yaml`, or `$K3S_CONFIG_FILE`) and
//!   of its drop-ins `<file>.d/*.yaml` in name order (`pkg/configfilearg`),
//!   after k3s's own (`kubeletArgsAndConfig` in
//!   `pkg/daemons/agent/agent_linux.go`): `--config-dir` under its data-dir,
//!   where k3s writes its defaults (cgroup driver included) as a drop-in,
//!   and no `--root-dir` (kubelet's default) unless rootless.
//! - microk8s runs kubelet inside `kubelite`, its flags in the file of
//!   `--kubelet-args-file` (`ReadArgsFromFile`: one or more per line, `#`
//!   lines skipped, quotes dropped, split on spaces, `$VAR` expanded from
//!   kubelite's environment: `${SNAP_COMMON}/var/lib/kubelet` is its root).

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::model::Origin;
use crate::peers::kubelet::{Budget, DECODED_LIMIT};
use crate::read::deadline;
use crate::sources::kubelet_config::{
    arg_in, list_within, read_file, read_settings, Unread, LIST_LIMIT,
};

/// k3s's config file when `$K3S_CONFIG_FILE` names none.
pub const K3S_CONFIG: &str = "/etc/rancher/k3s/config.yaml";
/// k3s's data-dir (run as root) when its config names none.
pub const K3S_DATA_DIR: &str = "/var/lib/rancher/k3s";
/// kubelite's `--kubelet-args-file` when given none.
pub const KUBELITE_ARGS: &str = "/var/snap/microk8s/current/args/kubelet";
/// A config file or args file is a few KB.
const FILE_LIMIT: u64 = 1024 * 1024;
/// k3s drop-ins read at most. k3s reads every `.yaml` and `.yml` file of
/// its `<file>.d`, listed whole (`dotDFiles`: `os.ReadDir`), so past this,
/// or past [`LIST_LIMIT`] entries listed, kubelet's flags are unknown: why,
/// never the first few.
const DROP_IN_LIMIT: usize = 64;

/// The program kubelet runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    Kubelet,
    K3s,
    Kubelite,
}

impl Runner {
    /// Which rules a process named `comm` is read by, if any.
    pub fn of(comm: &str) -> Option<Runner> {
        match comm {
            "kubelet" => Some(Runner::Kubelet),
            "k3s-server" | "k3s-agent" => Some(Runner::K3s),
            "kubelite" => Some(Runner::Kubelite),
            _ => None,
        }
    }
}

/// What a believed process tells of the kubelet it runs.
pub struct Described {
    pub runner: Runner,
    /// Its command line, NUL-split.
    pub cmdline: Vec<String>,
    /// Its environment (`/proc/<pid>/environ`), `NAME=value` each.
    pub environ: Vec<String>,
    /// Its working directory, as its paths are resolved (see
    /// [`crate::sources::kubelet_config::KubeletFiles`]).
    pub cwd: PathBuf,
}

/// kubelet's own flags as it runs with them, and where they were read:
/// its command line (`Process`), k3s's config (`K3sConfig`) or kubelite's
/// args file (`KubeliteArgs`). Files are read inside `root` when there is
/// one. Why they cannot be read, when they cannot.
pub fn kubelet_args(
    described: &Described,
    root: Option<&File>,
) -> Result<(Vec<String>, Origin), String> {
    match described.runner {
        Runner::Kubelet => Ok((described.cmdline.clone(), Origin::Process)),
        Runner::K3s => k3s_kubelet_args(described, root).map(|args| (args, Origin::K3sConfig)),
        Runner::Kubelite => {
            let file = arg_in(&described.cmdline, "--kubelet-args-file")
                .unwrap_or_else(|| KUBELITE_ARGS.to_string());
            let path = described.cwd.join(file);
            let read = read_file(root, &path, FILE_LIMIT)
                .map_err(|err| format!("kubelite's kubelet args file {}: {err}", path.display()))?;
            let text = String::from_utf8_lossy(&read.bytes);
            let mut args = vec!["kubelet".to_string()];
            args.extend(kubelite_args(&text, &described.environ));
            Ok((args, Origin::KubeliteArgs))
        }
    }
}

/// The flags in a kubelite args file's `text`, as `ReadArgsFromFile` takes
/// them, `$NAME` and `${NAME}` expanded from `environ` (unset: empty).
pub fn kubelite_args(text: &str, environ: &[String]) -> Vec<String> {
    let mut args = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line: String = line.chars().filter(|c| *c != '"' && *c != '\'').collect();
        args.extend(line.split(' ').map(|part| expand(part, environ)));
    }
    args
}

/// `text` with `$NAME` and `${NAME}` replaced as Go's `os.ExpandEnv` does.
fn expand(text: &str, environ: &[String]) -> String {
    let lookup = |name: &str| {
        environ
            .iter()
            .rev()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("")
            .to_string()
    };
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            if let Some(end) = braced.find('}') {
                out.push_str(&lookup(&braced[..end]));
                rest = &braced[end + 1..];
                continue;
            }
        }
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if end == 0 {
            out.push('$');
        } else {
            out.push_str(&lookup(&after[..end]));
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// kubelet's flags inside k3s (see the module's documentation).
fn k3s_kubelet_args(described: &Described, root: Option<&File>) -> Result<Vec<String>, String> {
    let config = described
        .environ
        .iter()
        .find_map(|pair| pair.strip_prefix("K3S_CONFIG_FILE="))
        .filter(|file| !file.is_empty())
        .unwrap_or(K3S_CONFIG);
    let config = described.cwd.join(config);
    let mut files = vec![config.clone()];
    let mut dot_d = config.into_os_string();
    dot_d.push(".d");
    let dot_d = PathBuf::from(dot_d);
    // One budget for the whole reading, as for kubelet's own config (see
    // [`DECODED_LIMIT`]); stopped once its waiter gives up, if any does.
    let stop = deadline::given_up();
    let budget = Budget::new(DECODED_LIMIT, stop.as_deref());
    match list_within(root, &dot_d, &budget) {
        Ok((entries, _)) if entries.len() > LIST_LIMIT => {
            return Err(format!(
                "k3s's config drop-ins {}: more than {LIST_LIMIT} entries, not read",
                dot_d.display()
            ))
        }
        Ok((mut entries, _listed)) => {
            entries.sort();
            files.extend(
                entries
                    .into_iter()
                    .filter(|(path, is_dir)| {
                        !is_dir
                            && path
                                .extension()
                                .is_some_and(|ext| ext == "yaml" || ext == "yml")
                    })
                    .map(|(path, _)| path),
            );
        }
        Err(Unread::Io(err)) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(format!("k3s's config drop-ins {}: {err}", dot_d.display())),
    }
    // The config file and its drop-ins.
    if files.len() > 1 + DROP_IN_LIMIT {
        return Err(format!(
            "k3s's config drop-ins {}: more than {DROP_IN_LIMIT}, not read",
            dot_d.display()
        ));
    }
    let mut data_dir = K3S_DATA_DIR.to_string();
    let mut kubelet_args: Vec<String> = Vec::new();
    for file in files {
        let settings = match read_settings(root, &file, FILE_LIMIT, &budget) {
            Ok(settings) => settings,
            // k3s runs without a config file.
            Err(Unread::Io(err)) if err.kind() == ErrorKind::NotFound => continue,
            Err(why) => return Err(format!("k3s's config {}: {why}", file.display())),
        };
        if let Some(Value::String(dir)) = settings.get("data-dir") {
            data_dir = dir.clone();
        }
        // A later file's list replaces an earlier one's; `kubelet-arg+`
        // appends to it.
        if let Some(value) = settings.get("kubelet-arg") {
            kubelet_args = strings(value);
        }
        if let Some(value) = settings.get("kubelet-arg+") {
            kubelet_args.extend(strings(value));
        }
    }
    let config_dir = Path::new(&data_dir).join("agent/etc/kubelet.conf.d");
    let mut args = vec![
        "kubelet".to_string(),
        format!("--config-dir={}", config_dir.display()),
    ];
    // Given as `name=value` (a leading `--` allowed), after k3s's own: the
    // last of a flag wins.
    args.extend(
        kubelet_args
            .iter()
            .map(|arg| format!("--{}", arg.trim_start_matches('-'))),
    );
    Ok(args)
}

/// A config value that is a list of strings, or one string.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(one) => vec![one.clone()],
        Value::Array(list) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_these_names_are_read_as_kubelet() {
        assert_eq!(Runner::of("kubelet"), Some(Runner::Kubelet));
        assert_eq!(Runner::of("k3s-server"), Some(Runner::K3s));
        assert_eq!(Runner::of("k3s-agent"), Some(Runner::K3s));
        assert_eq!(Runner::of("kubelite"), Some(Runner::Kubelite));
        assert_eq!(Runner::of("k3s"), None, "k3s's own CLI, not a node");
        assert_eq!(Runner::of("containerd"), None);
    }

    #[test]
    fn a_kubelite_args_file_is_read_as_kubelite_reads_it() {
        let text = "# microk8s\n--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n\n  --root-dir=${SNAP_COMMON}/var/lib/kubelet \n--node-labels=\"a=b\" --v=$LEVEL\n--cgroup-root=$UNSET/k$\n";
        let environ = strings(&[
            "SNAP_DATA=/var/snap/microk8s/9072",
            "SNAP_COMMON=/var/snap/microk8s/common",
            "LEVEL=2",
        ]);
        assert_eq!(
            kubelite_args(text, &environ),
            strings(&[
                "--kubeconfig=/var/snap/microk8s/9072/credentials/kubelet.config",
                "--root-dir=/var/snap/microk8s/common/var/lib/kubelet",
                "--node-labels=a=b",
                "--v=2",
                "--cgroup-root=/k$",
            ])
        );
    }

    fn k3s(dir: &Path, environ: &[&str]) -> Result<(Vec<String>, Origin), String> {
        let described = Described {
            runner: Runner::K3s,
            cmdline: strings(&["/usr/local/bin/k3s server"]),
            environ: strings(environ),
            cwd: PathBuf::from("/"),
        };
        kubelet_args(&described, Some(&File::open(dir).unwrap()))
    }

    #[test]
    fn k3s_kubelet_flags_are_its_own_then_its_config_files_in_order() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc/rancher/k3s");
        // No config at all: k3s's own flags only.
        let (args, origin) = k3s(root.path(), &[]).unwrap();
        assert_eq!(origin, Origin::K3sConfig);
        assert_eq!(
            args,
            strings(&[
                "kubelet",
                "--config-dir=/var/lib/rancher/k3s/agent/etc/kubelet.conf.d"
            ])
        );
        fs::create_dir_all(etc.join("config.yaml.d")).unwrap();
        fs::write(
            etc.join("config.yaml"),
            "data-dir: /data/k3s\nkubelet-arg:\n  - root-dir=/data/kubelet\n  - --cgroup-root=/one\n",
        )
        .unwrap();
        // A later drop-in's list replaces it, `+` appends.
        fs::write(
            etc.join("config.yaml.d/20-b.yaml"),
            "kubelet-arg: cgroup-root=/two\n",
        )
        .unwrap();
        fs::write(etc.join("config.yaml.d/30-c.yml"), "kubelet-arg+: [v=2]\n").unwrap();
        fs::write(
            etc.join("config.yaml.d/40-d.txt"),
            "kubelet-arg: [ignored=1]\n",
        )
        .unwrap();
        let (args, _) = k3s(root.path(), &[]).unwrap();
        assert_eq!(
            args,
            strings(&[
                "kubelet",
                "--config-dir=/data/k3s/agent/etc/kubelet.conf.d",
                "--cgroup-root=/two",
                "--v=2",
            ])
        );
        // $K3S_CONFIG_FILE names another.
        fs::write(
            root.path().join("other.yaml"),
            "kubelet-arg: root-dir=/else\n",
        )
        .unwrap();
        let (args, _) = k3s(root.path(), &["K3S_CONFIG_FILE=/other.yaml"]).unwrap();
        assert_eq!(arg_in(&args, "--root-dir").as_deref(), Some("/else"));
        // A config that is not YAML: why, not a guess.
        fs::write(
            etc.join("config.yaml.d/50-e.yaml"),
            "kubelet-arg: [unclosed\n",
        )
        .unwrap();
        let why = k3s(root.path(), &[]).unwrap_err();
        assert!(why.contains("50-e.yaml"), "{why}");
    }

    /// k3s lists its `config.yaml.d` whole: a drop-in after more entries
    /// than nodectl once listed (64) is read, and past the listing's bound
    /// (or past the drop-ins it reads) kubelet's flags are why, never the
    /// first few.
    #[test]
    fn k3s_drop_ins_are_listed_whole_and_past_the_bound_are_a_gap() {
        let root = tempfile::tempdir().unwrap();
        let dot_d = root.path().join("etc/rancher/k3s/config.yaml.d");
        fs::create_dir_all(&dot_d).unwrap();
        // 3,000 other entries, as the issue measured, and 20 drop-ins: each
        // read wherever the directory's order puts it.
        for n in 0..3000 {
            fs::write(dot_d.join(format!("{n:04}.txt")), "").unwrap();
        }
        for n in 0..20 {
            let arg = format!("kubelet-arg+: [x-{n:02}=1]\n");
            fs::write(dot_d.join(format!("zz-{n:02}.yaml")), arg).unwrap();
        }
        let (args, _) = k3s(root.path(), &[]).unwrap();
        let wanted: Vec<String> = (0..20).map(|n| format!("--x-{n:02}=1")).collect();
        assert_eq!(args[2..], wanted[..]);

        for n in 0..DROP_IN_LIMIT {
            fs::write(dot_d.join(format!("{n:03}.yaml")), "v: 1\n").unwrap();
        }
        let why = k3s(root.path(), &[]).unwrap_err();
        assert!(why.contains(&format!("more than {DROP_IN_LIMIT}")), "{why}");

        let root = tempfile::tempdir().unwrap();
        let dot_d = root.path().join("etc/rancher/k3s/config.yaml.d");
        fs::create_dir_all(&dot_d).unwrap();
        fs::write(dot_d.join("00.yaml"), "kubelet-arg: root-dir=/first\n").unwrap();
        for n in 0..LIST_LIMIT {
            fs::write(dot_d.join(format!("{n}")), "").unwrap();
        }
        let why = k3s(root.path(), &[]).unwrap_err();
        assert!(
            why.contains(&format!("more than {LIST_LIMIT} entries")),
            "{why}"
        );
    }

    /// k3s's config and its drop-ins are one reading within one budget: an
    /// alias bomb split across them is why, not a guess.
    #[test]
    fn k3s_config_files_share_one_budget() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc/rancher/k3s");
        fs::create_dir_all(etc.join("config.yaml.d")).unwrap();
        let bomb = format!(
            "kubelet-arg: [v=2]\nanchor: &a \"{}\"\nlist:\n{}",
            "x".repeat(64 * 1024),
            "- *a\n".repeat(150)
        );
        fs::write(etc.join("config.yaml"), &bomb).unwrap();
        assert!(k3s(root.path(), &[]).is_ok(), "one alone is within it");
        for n in 0..9 {
            fs::write(etc.join(format!("config.yaml.d/{n}.yaml")), &bomb).unwrap();
        }
        let why = k3s(root.path(), &[]).unwrap_err();
        assert!(why.contains("more than 64 MiB"), "{why}");
    }
}
