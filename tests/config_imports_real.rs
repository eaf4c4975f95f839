//! containerd's config as containerd reads it, on a real containerd: the
//! bed's config is split as a node's often is (`imports = ["conf.d/*.toml"]`
//! in the main file, root, state and CRI's section in a drop-in: see
//! `config_toml` in tests/support/testbed.rs). nodectl given only the socket
//! must find the daemon's real state through the drop-in, a config edited
//! after containerd started must not hand it another root as the daemon's
//! own, and nothing in a state the daemon never used is judged.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Line, TestBed};

/// nodectl with only `--address`: every other path is the running
/// containerd's (its command line, then the config it was started with).
fn nodectl_by_socket(bed: &TestBed, args: &[&str]) -> (Output, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
    command
        .args(args)
        .arg("--address")
        .arg(bed.address())
        .stdin(Stdio::null());
    let started = Instant::now();
    let output = support::run_bounded(&mut command, Duration::from_secs(60))
        .unwrap_or_else(|e| bed.fail(&format!("nodectl {args:?}: {e}")));
    eprintln!(
        "nodectl {args:?} --address <bed's>: exit {:?} in {:.0} ms",
        output.status.code(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let doc = support::report(&output);
    (output, doc)
}

fn located(path: &Path, origin: &str) -> Value {
    serde_json::json!({"path": path.display().to_string(), "origin": origin})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_in_s_state_is_searched_given_only_the_socket() {
    const TEST: &str = "a_drop_in_s_state_is_searched_given_only_the_socket";
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    // A rootfs left mounted for a task containerd does not know, in the
    // state the drop-in names (the main file names none: containerd's
    // default /run/containerd, where nothing of this bed is).
    let unknown = support::unknown_id('e');
    let bundle = bed
        .state()
        .join("io.containerd.runtime.v2.task")
        .join(support::NAMESPACE)
        .join(&unknown);
    let rootfs = bundle.join("rootfs");
    fs::create_dir_all(&rootfs).unwrap();
    support::mount_tmpfs(&rootfs);

    // Found live, past every bed's neighbourhood in the mount table (read
    // to its end), and in a copy of it given with --mountinfo alike.
    let mountinfo = bed.scratch("mountinfo");
    fs::copy("/proc/self/mountinfo", &mountinfo).unwrap();
    let mountinfo = mountinfo.display().to_string();
    for args in [
        vec!["leaked-mounts", "-o", "json"],
        vec!["leaked-mounts", "-o", "json", "--mountinfo", &mountinfo],
    ] {
        let kinds = ["orphan-bundle", "leaked-mount"];
        let (output, doc) = nodectl_by_socket(&bed, &args);
        let paths = &doc["paths"];
        assert_eq!(paths["root"], located(bed.root(), "config"), "{paths}");
        assert_eq!(paths["state"], located(bed.state(), "config"), "{paths}");
        assert_eq!(paths["process"]["pid"], bed.containerd_pid(), "{paths}");
        assert_eq!(paths["unproven"], serde_json::json!([]), "{paths}");
        let keys = support::finding_keys(&doc);
        for kind in kinds {
            assert!(
                keys.contains(&(kind.to_string(), unknown.clone())),
                "{args:?}: {kind} {unknown} not found: {keys:?}\n{}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        assert_ne!(output.status.code(), Some(0), "findings, exit 0: {doc}");
    }
    nix::mount::umount2(&rootfs, nix::mount::MntFlags::MNT_DETACH).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_edited_after_start_gives_no_other_root_as_the_daemon_s() {
    const TEST: &str = "a_config_edited_after_start_gives_no_other_root_as_the_daemon_s";
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    // The drop-in now names another root (and the same state): containerd
    // still runs on the one it started with.
    let drop_in = bed.dir().join(support::DROP_IN);
    let elsewhere = bed.scratch("edited-root");
    fs::create_dir_all(elsewhere.join("io.containerd.metadata.v1.bolt")).unwrap();
    fs::write(
        elsewhere.join("io.containerd.metadata.v1.bolt/meta.db"),
        b"not the daemon's",
    )
    .unwrap();
    let text = fs::read_to_string(&drop_in).unwrap();
    let root_line = format!("root = \"{}\"", bed.root().display());
    assert!(text.contains(&root_line), "{text}");
    let edited = text.replace(&root_line, &format!("root = \"{}\"", elsewhere.display()));
    fs::write(&drop_in, edited).unwrap();

    let (_, doc) = nodectl_by_socket(&bed, &["check", "-o", "json"]);
    let paths = &doc["paths"];
    // The root it holds its metadata database in, found by identity.
    assert_eq!(paths["root"], located(bed.root(), "open_file"), "{paths}");
    let note = paths["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&format!("its config names {}", elsewhere.display())),
        "{paths}"
    );
    // The state: 2.3 holds its mount manager's database there, tying it;
    // 1.6 to 2.2 hold nothing there, and the edited config cannot. CRI's
    // own word (its Status' config, which `check` asks) names the state
    // the daemon runs on: judged, and acted on.
    assert_eq!(paths["unproven"], serde_json::json!([]), "{paths}");
    assert_eq!(paths.get("untied"), None, "{paths}");
    let by_cri = format!(
        "state {} is containerd pid {}'s by CRI's own word",
        bed.state().display(),
        bed.containerd_pid()
    );
    match bed.line() {
        Line::V2_3 => assert!(!note.contains(&by_cri), "{paths}"),
        _ => assert!(note.contains(&by_cri), "{paths}"),
    }
    assert!(
        !doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|gap| gap["source"] == "bundles"),
        "{doc}"
    );

    // Without CRI's word (leaked-mounts does not ask it), 1.6 to 2.2's
    // state is not judged: a gap of the bundles naming it, never "none".
    let (output, doc) = nodectl_by_socket(&bed, &["leaked-mounts", "-o", "json"]);
    let gaps: Vec<&Value> = doc["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|gap| gap["source"] == "bundles")
        .collect();
    match bed.line() {
        Line::V2_3 => assert!(gaps.is_empty(), "{doc}"),
        _ => {
            assert_eq!(gaps.len(), 1, "{doc}");
            assert_eq!(gaps[0]["path"], bed.state().display().to_string(), "{doc}");
            let error = gaps[0]["error"].as_str().unwrap();
            assert!(error.contains("was not asked"), "{error}");
            assert_eq!(output.status.code(), Some(2), "{doc}");
        }
    }
}

/// A state containerd never used (`--state` given wrong; a config edited
/// since it started, or read by another line's rules, names one too): a
/// stale bundle and its rootfs mount there are nobody's known to be
/// containerd's. Judged, they were an `orphan-bundle` and a `leaked-mount`
/// that `leaked-mounts --remove-bundles` would remove; now a gap that names
/// the state CRI says the daemon runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_bundle_in_a_state_containerd_never_used_is_a_gap_not_a_finding() {
    const TEST: &str = "a_stale_bundle_in_a_state_containerd_never_used_is_a_gap_not_a_finding";
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let unknown = support::unknown_id('f');
    let elsewhere = bed.scratch("never-used-state");
    let rootfs = elsewhere
        .join("io.containerd.runtime.v2.task")
        .join(support::NAMESPACE)
        .join(&unknown)
        .join("rootfs");
    fs::create_dir_all(&rootfs).unwrap();
    support::mount_tmpfs(&rootfs);
    let state = elsewhere.display().to_string();
    for (args, why) in [
        (
            vec!["check", "-o", "json", "--state", &state],
            format!(
                "CRI's Status says containerd's state is {}",
                bed.state().display()
            ),
        ),
        (
            vec!["leaked-mounts", "-o", "json", "--state", &state],
            "was not asked".to_string(),
        ),
    ] {
        let (_, doc) = nodectl_by_socket(&bed, &args);
        let keys = support::finding_keys(&doc);
        assert!(
            !keys.iter().any(|(_, id)| *id == unknown),
            "{args:?}: judged in a state containerd never used: {keys:?}"
        );
        assert_eq!(doc["paths"]["untied"][0]["dir"], "state", "{doc}");
        let gap = doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|gap| gap["source"] == "bundles" && gap["path"] == state.as_str())
            .unwrap_or_else(|| panic!("{args:?}: no bundles gap for {state}: {doc}"));
        assert_eq!(gap["source_unavailable"], true, "{gap}");
        let error = gap["error"].as_str().unwrap();
        assert!(error.contains("is not containerd pid"), "{error}");
        assert!(error.contains(&why), "{args:?}: {error}");
    }
    nix::mount::umount2(&rootfs, nix::mount::MntFlags::MNT_DETACH).unwrap();
}

/// containerd before 1.6.29 and 1.7.16 globs a relative import from its
/// working directory, later ones from the importing file's (upstream's "Fix
/// config import relative path glob"). With a drop-in in each place naming
/// another root and state, nodectl must report the ones this line's
/// containerd runs on, whichever rule it follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relative_glob_is_read_where_this_line_reads_it() {
    const TEST: &str = "a_relative_glob_is_read_where_this_line_reads_it";
    let Some(mut bed) = TestBed::start(TEST).await else {
        return;
    };
    let drop_in = bed.dir().join(support::DROP_IN);
    let text = fs::read_to_string(&drop_in).unwrap();
    // The bed's drop-in in containerd's working directory; beside the
    // config, one naming another root and state.
    let cwd = bed.scratch("cwd");
    fs::create_dir_all(cwd.join("conf.d")).unwrap();
    fs::write(cwd.join(support::DROP_IN), &text).unwrap();
    let (other_root, other_state) = (bed.scratch("other-root"), bed.scratch("other-state"));
    let other = text
        .replace(
            &format!("root = \"{}\"", bed.root().display()),
            &format!("root = \"{}\"", other_root.display()),
        )
        .replace(
            &format!("state = \"{}\"", bed.state().display()),
            &format!("state = \"{}\"", other_state.display()),
        );
    assert_ne!(other, text);
    bed.stop_containerd();
    fs::write(&drop_in, other).unwrap();
    bed.start_containerd_in(&cwd).await;

    let from_cwd = matches!(bed.containerd_release(), (1, 6, p) if p < 29)
        || matches!(bed.containerd_release(), (1, 7, p) if p < 16);
    let (root, state) = match from_cwd {
        true => (bed.root().to_path_buf(), bed.state().to_path_buf()),
        false => (other_root.clone(), other_state.clone()),
    };
    eprintln!(
        "{TEST}: containerd {} globs from {}",
        bed.containerd_version(),
        if from_cwd {
            "its working directory"
        } else {
            "the config's directory"
        }
    );
    // What the daemon runs on, by what it holds open.
    let meta_db = root.join("io.containerd.metadata.v1.bolt/meta.db");
    let held = fs::read_dir(format!("/proc/{}/fd", bed.containerd_pid()))
        .unwrap()
        .flatten()
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l == meta_db));
    assert!(held, "containerd does not hold {}", meta_db.display());

    let (_, doc) = nodectl_by_socket(&bed, &["check", "-o", "json"]);
    let paths = &doc["paths"];
    assert_eq!(paths["root"], located(&root, "config"), "{paths}");
    assert_eq!(paths["state"], located(&state, "config"), "{paths}");
    assert_eq!(paths["unproven"], serde_json::json!([]), "{paths}");
    let note = paths["note"].as_str().unwrap_or_default();
    assert_eq!(
        note.contains("before 1.6.29 and 1.7.16"),
        from_cwd,
        "{paths}"
    );
}

/// CRI's config as the running line merged it, from its own
/// `Status(verbose)`: what the test takes as the daemon's word.
async fn cri_config(bed: &TestBed) -> Value {
    let request = k8s_cri::v1::StatusRequest { verbose: true };
    let reply = bed.cri().await.status(request).await;
    let info = reply
        .unwrap_or_else(|e| bed.fail(&format!("CRI's Status: {e}")))
        .into_inner()
        .info;
    let text = info.get("config").cloned().unwrap_or_default();
    eprintln!("CRI's config on {}: {text}", bed.containerd_version());
    serde_json::from_str(&text).unwrap_or_else(|e| bed.fail(&format!("CRI's config: {e}")))
}

/// The images plugin's snapshotter as the line's `config dump` says it
/// (2.x: CRI's Status does not say it).
fn dumped_snapshotter(bed: &TestBed) -> String {
    let containerd = bed.ctr().with_file_name("containerd");
    let output = support::run_bounded(
        Command::new(containerd)
            .arg("--config")
            .arg(bed.config_path())
            .args(["config", "dump"])
            // Where the daemon runs: 1.6.20 globs a relative import from there.
            .current_dir(bed.dir()),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|e| bed.fail(&format!("config dump: {e}")));
    let dump: toml::Table = String::from_utf8_lossy(&output.stdout)
        .parse()
        .unwrap_or_else(|e| bed.fail(&format!("config dump: {e}")));
    let plugins = &dump["plugins"];
    let snapshotter = match bed.line() {
        Line::V1_6 | Line::V1_7 => {
            &plugins["io.containerd.grpc.v1.cri"]["containerd"]["snapshotter"]
        }
        Line::V2_0 | Line::V2_3 => &plugins["io.containerd.cri.v1.images"]["snapshotter"],
    };
    snapshotter.as_str().unwrap_or_default().to_string()
}

/// A network namespace at `path` that nothing holds, named as CRI names
/// its pods' (`cni-<uuid>`): an nsfs bind mount on an empty file, as `ip
/// netns add` makes one.
fn unheld_cri_style_netns(dir: &Path) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!(
        "cni-{:08x}-4343-4343-8000-{:012x}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    );
    let path = dir.join(name);
    fs::create_dir_all(dir).unwrap();
    fs::write(&path, "").unwrap();
    let status = Command::new("unshare")
        .arg(format!("--net={}", path.display()))
        .arg("true")
        .status()
        .unwrap();
    assert!(status.success(), "unshare --net={}", path.display());
    path
}

/// A version 2 drop-in after the bed's that states CRI's table again
/// without `netns_mounts_under_state_dir` and with the `native`
/// snapshotter but no runtimes table (an installer's CRI section beside
/// the node's): 1.x replaces CRI's whole table with it (pods' namespaces
/// in /var/run/netns, images in `native`); 2.3 merges it key by key and
/// takes no snapshotter from a version 2 file without runtimes (the
/// bed's: under the state dir, `overlayfs`), as nodectl reads the files;
/// 2.0 migrates the merged whole (`native`). nodectl asked on the proven
/// daemon takes CRI's own word where it says the setting: no `config` gap
/// for it, and CRI's netns directory judged, not the one the files name.
/// 2.x's CRI does not say its snapshotter: on 2.0 that gap stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cri_s_own_word_settles_the_settings_its_files_are_read_apart_on() {
    const TEST: &str = "cri_s_own_word_settles_the_settings_its_files_are_read_apart_on";
    let Some(mut bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let node = fs::read_to_string(bed.dir().join(support::DROP_IN)).unwrap();
    assert!(
        node.contains("netns_mounts_under_state_dir = true"),
        "{node}"
    );
    let mut in_runtimes = false;
    let installer: Vec<&str> = node
        .lines()
        .filter(|line| {
            let key = line.trim_start();
            if key.starts_with('[') {
                in_runtimes = key.contains(".runtimes.");
            }
            !in_runtimes && !key.starts_with("netns_mounts_under_state_dir")
        })
        .collect();
    let installer = installer
        .join("\n")
        .replace("snapshotter = \"overlayfs\"", "snapshotter = \"native\"");
    assert!(
        installer.contains("snapshotter = \"native\""),
        "{installer}"
    );
    bed.stop_containerd();
    fs::write(bed.dir().join("conf.d/60-installer.toml"), &installer).unwrap();
    bed.start_containerd().await;

    // The daemon's own word, and what its line merged.
    let config = cri_config(&bed).await;
    let under_state = config["netnsMountsUnderStateDir"].as_bool();
    let cri_snapshotter = config["containerd"]["snapshotter"].as_str();
    let dumped = dumped_snapshotter(&bed);
    let one_x = matches!(bed.line(), Line::V1_6 | Line::V1_7);
    assert_eq!(under_state, Some(!one_x), "{config}");
    match one_x {
        true => assert_eq!(cri_snapshotter, Some("native"), "{config}"),
        false => assert_eq!(cri_snapshotter, None, "2.x's CRI says none: {config}"),
    }
    let line_s_snapshotter = match bed.line() {
        Line::V2_3 => "overlayfs",
        _ => "native",
    };
    assert_eq!(dumped, line_s_snapshotter);

    // A namespace nothing holds, named as CRI's are, where the files (read
    // as 2.3 does) say CRI mounts them: judged only where CRI says so.
    let planted = unheld_cri_style_netns(&bed.netns_dir());
    let name = planted.file_name().unwrap().to_string_lossy().into_owned();
    let args = [
        "check",
        "-o",
        "json",
        "--settle",
        "0s",
        "--sandbox-grace",
        "0s",
    ];
    let (_, doc) = nodectl_by_socket(&bed, &args);
    let paths = &doc["paths"];
    assert_eq!(paths["process"]["pid"], bed.containerd_pid(), "{paths}");
    assert_eq!(paths["unproven"], serde_json::json!([]), "{paths}");
    assert_eq!(
        paths["netns_under_state_dir"].as_bool().unwrap_or(false),
        !one_x,
        "{paths}"
    );
    // 1.x: CRI's word; 2.x: the files' as 2.3 reads them (CRI says none).
    let snapshotter = if one_x { "native" } else { "overlayfs" };
    assert_eq!(paths["snapshotter"], snapshotter, "{paths}");
    // Its snapshots listed, though neither the files (as 2.3 reads them)
    // nor a container record names it on 1.x.
    let listed = format!("containerd Snapshots.List {snapshotter}");
    let calls = doc["api_calls"].as_array().unwrap();
    assert!(
        calls
            .iter()
            .any(|call| call["call"] == listed.as_str() && call["error"].is_null()),
        "{listed}: {calls:?}"
    );
    let note = paths["note"].as_str().unwrap_or_default();
    for said in [
        "CRI's netns_mounts_under_state_dir is false by its own word",
        "CRI's snapshotter is native by its own word",
    ] {
        assert_eq!(note.contains(said), one_x, "{said}: {paths}");
    }
    let config_gaps: Vec<&Value> = doc["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|gap| gap["source"] == "config")
        .collect();
    match bed.line() {
        Line::V2_0 => {
            assert_eq!(config_gaps.len(), 1, "{doc}");
            let error = config_gaps[0]["error"].as_str().unwrap();
            assert!(
                error.contains(
                    "2.0 to 2.2 (the files merged, then migrated) read snapshotter native"
                ),
                "{error}"
            );
        }
        _ => assert!(config_gaps.is_empty(), "{config_gaps:?}"),
    }
    let judged = support::finding_keys(&doc).contains(&("leaked-netns".to_string(), name.clone()));
    assert_eq!(
        judged,
        !one_x,
        "{}: the namespace in {} judged: {judged}\n{doc}",
        bed.containerd_version(),
        bed.netns_dir().display()
    );
    // The commands whose checks list nothing of CRI's ask it for its
    // Status alone: the same word, the same judgement, no gap left.
    let (_, doc) = nodectl_by_socket(&bed, &["leaked-netns", "-o", "json", "--grace", "0s"]);
    let note = doc["paths"]["note"].as_str().unwrap_or_default();
    let said = "CRI's netns_mounts_under_state_dir is false by its own word";
    assert_eq!(note.contains(said), one_x, "leaked-netns: {}", doc["paths"]);
    assert_eq!(
        doc["paths"]["netns_under_state_dir"]
            .as_bool()
            .unwrap_or(false),
        !one_x,
        "{}",
        doc["paths"]
    );
    let judged = support::finding_keys(&doc).contains(&("leaked-netns".to_string(), name.clone()));
    assert_eq!(judged, !one_x, "leaked-netns: {doc}");
    let leftover_gaps = |doc: &Value| -> usize {
        doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|gap| gap["source"] == "config")
            .count()
    };
    // 2.0's snapshotter gap, as `check`'s.
    let expected = match bed.line() {
        Line::V2_0 => 1,
        _ => 0,
    };
    assert_eq!(leftover_gaps(&doc), expected, "leaked-netns: {doc}");
    let (_, doc) = nodectl_by_socket(&bed, &["leaked-snapshots", "-o", "json"]);
    assert_eq!(doc["paths"]["snapshotter"], snapshotter, "{}", doc["paths"]);
    assert_eq!(leftover_gaps(&doc), expected, "leaked-snapshots: {doc}");
    nix::mount::umount2(&planted, nix::mount::MntFlags::MNT_DETACH).unwrap();
    let _ = fs::remove_file(&planted);
}

/// Both cleanups of `leaked-mounts`, acting.
const CLEAN: &[&str] = support::LEAKED_MOUNTS_CLEAN;

/// A state that only nodectl's reading of containerd's config names is
/// judged, and cleaned only once the daemon's own act or word ties it
/// (`paths.by_config_only`). containerd before 2.3 holds nothing open under
/// its state; with CRI disabled (a drop-in, as a node that runs containerd
/// for something else has) and CRI's Status unasked, what ties the state on
/// 1.6 to 2.2 is a shim containerd started in its task's bundle there. With
/// the sandbox's shim running: cleaned on every line. With no task: found,
/// and every cleanup refused on 1.6 to 2.2, cleaned on 2.3 (its mount
/// manager's database, held under the state). CRI back: cleaned by its
/// word on every line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_only_the_config_names_is_cleaned_once_a_shim_or_cri_ties_it() {
    const TEST: &str = "a_state_only_the_config_names_is_cleaned_once_a_shim_or_cri_ties_it";
    let Some(mut bed) = TestBed::start(TEST).await else {
        return;
    };
    let sandbox = bed.run_sandbox("tied-by-its-shim").await;
    let shim = bed.shim_pid(&sandbox);
    // Every line appends a drop-in's `disabled_plugins` to the main
    // file's (`mergeConfig`).
    let no_cri = bed.dir().join("conf.d/90-no-cri.toml");
    fs::write(
        &no_cri,
        "version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n",
    )
    .unwrap();
    bed.stop_containerd();
    bed.start_containerd_without_cri().await;
    assert!(support::is_running(shim), "the sandbox's shim lives on");

    let by_config_only = |doc: &Value| doc["paths"].get("by_config_only").cloned();
    // The sandbox's shim works in its bundle under the state.
    let (look, done, acted, gone, _) = plant_and_clean(&bed, 'a');
    assert_eq!(by_config_only(&look), None, "{}", look["paths"]);
    assert_eq!(acted, ["unmounted", "removed"], "{done:#}");
    assert!(gone, "{done:#}");

    // No task: nothing of the daemon's under the state but on 2.3.
    let ctr = |args: &[&str]| {
        let output = Command::new(bed.ctr())
            .arg("--address")
            .arg(bed.address())
            .args(["-n", support::NAMESPACE])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    ctr(&["tasks", "kill", "-s", "SIGKILL", &sandbox]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Command::new(bed.ctr())
        .arg("--address")
        .arg(bed.address())
        .args(["-n", support::NAMESPACE, "tasks", "rm", &sandbox])
        .output()
        .is_ok_and(|o| !o.status.success())
    {
        assert!(Instant::now() < deadline, "the sandbox's task not deleted");
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while support::is_running(shim) {
        assert!(Instant::now() < deadline, "the sandbox's shim did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (look, done, acted, gone, rootfs) = plant_and_clean(&bed, 'b');
    eprintln!(
        "{TEST}: {}: no task, no CRI: by_config_only {:?}, cleanups {acted:?}",
        bed.containerd_version(),
        by_config_only(&look)
    );
    match bed.line() {
        Line::V2_3 => {
            assert_eq!(by_config_only(&look), None, "{}", look["paths"]);
            assert_eq!(acted, ["unmounted", "removed"], "{done:#}");
            assert!(gone, "{done:#}");
        }
        _ => {
            let listed = by_config_only(&look).unwrap_or_default();
            assert_eq!(listed[0]["dir"], "state", "{}", look["paths"]);
            assert_eq!(
                listed[0]["path"],
                bed.state().display().to_string(),
                "{}",
                look["paths"]
            );
            assert_eq!(acted, ["refused", "refused"], "{done:#}");
            let detail = done["cleanups"][0]["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("nothing but its config"), "{detail}");
            assert!(!gone, "{done:#}");
            // CRI back. The restart itself removes the bundle of no task
            // (its start-up deletes each bundle no shim answers for,
            // unmounting its rootfs); another, planted after, is cleaned:
            // CRI's Status (asked by the leak commands too, as nothing
            // else ties the state) names the state.
            fs::remove_file(&no_cri).unwrap();
            bed.restart_containerd().await;
            assert!(
                !rootfs.parent().unwrap().exists(),
                "restarted, containerd kept it"
            );
            let (look, done, acted, gone, _) = plant_and_clean(&bed, 'c');
            assert_eq!(by_config_only(&look), None, "{}", look["paths"]);
            assert_eq!(acted, ["unmounted", "removed"], "{done:#}");
            assert!(gone, "{done:#}");
        }
    }
}

/// Plants a leaked rootfs (`TestBed::leak_rootfs`) of an id made of
/// `letter`, looks with `leaked-mounts` and cleans with [`CLEAN`], both
/// given only the socket: the look, the cleanup, the outcome of its unmount
/// and of its bundle's removal, whether the bundle is gone, and the rootfs.
fn plant_and_clean(bed: &TestBed, letter: char) -> (Value, Value, Vec<String>, bool, PathBuf) {
    let id = support::unknown_id(letter);
    let rootfs = bed.leak_rootfs(&id);
    let (_, look) = nodectl_by_socket(bed, &["leaked-mounts", "-o", "json"]);
    let keys = support::finding_keys(&look);
    for kind in ["orphan-bundle", "leaked-mount"] {
        assert!(
            keys.contains(&(kind.to_string(), id.clone())),
            "{kind} {id} not found: {look:#}"
        );
    }
    let (_, done) = nodectl_by_socket(bed, CLEAN);
    let outcomes = support::cleanup_rows(&done);
    let acted = ["unmount", "remove-bundle"]
        .iter()
        .map(|action| {
            outcomes
                .iter()
                .find(|(a, i, _)| a == action && *i == id)
                .map_or("none".to_string(), |(_, _, outcome)| outcome.clone())
        })
        .collect();
    let gone = !rootfs.parent().unwrap().exists();
    (look, done, acted, gone, rootfs)
}
