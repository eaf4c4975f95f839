//! `leaked-pod-cgroup` on a real containerd: two pods whose cgroup parent
//! is a kubepods-style pod cgroup under the bed's own
//! (`<bed>/kubepods/burstable/pod<uid>`, as kubelet's cgroupfs driver
//! gives it), one stopped and removed through CRI. runc removes the
//! sandbox's own cgroup but not the pod's, kubelet's to remove (the bed
//! runs no kubelet): that one is leaked. nodectl must name it with its
//! uid, driver, qos and no process, leave the live pod's alone, call
//! nothing leaked within the grace, and say where the cgroup root came
//! from. `leaked-pod-cgroups --remove` plans, refuses a cgroup a process
//! was moved into between its scan and its act, and removes the other.
//!
//! kubelet's word: without its pod-resources socket every leak is
//! unconfirmed and nothing is removed; with it (a stand-in's, see
//! `support::StandInKubeletPodResources`) the leaks are confirmed. Two pods
//! started in kubelet's order (`support::kubelet_steps`) are kubelet's and
//! never leaked: one Pending behind a RunPodSandbox that keeps failing
//! (`failing-sandbox`, never `orphan-pod-dir`), one whose sandbox is gone
//! but whose emptyDir is still mounted (an `orphan-pod-dir`, its cgroup
//! kept); neither cgroup is planned nor removed, while the gone pod's is
//! still found and removed.
//!
//! A systemd driver's pod slice kubelet let go, made by the test where
//! kubelet's systemd driver names it under the bed's cgroup root (the
//! root's parts in every slice's name, `ToSystemd`/`ExpandSlice`): found
//! there, offered to `systemctl stop`, and refused by `--remove --yes`,
//! never rmdir'ed (no systemd runs the bed: the directory stands in for
//! the slice it would have made).

mod support;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "leaked_pod_cgroup_real";

fn leaked(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-pod-cgroup")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cgroup_left_after_its_pod_is_found_and_the_live_one_is_not() {
    let Some(bed) = TestBed::start(TEST).await else {
        return;
    };
    let (_live, live_uid) = bed.run_sandbox_in_pod_cgroup("live").await;
    let (gone, gone_uid) = bed.run_sandbox_in_pod_cgroup("gone").await;
    let removed = bed
        .stop_and_remove_pod(&gone, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the gone pod is stopped and removed");

    let cgroup_root = bed.cgroup_parent().to_string();
    // kubelet's root, read for its word: no pod directory of either pod
    // (kubelet let the gone one go; the live one's sandbox is listed).
    let kubelet_dir = bed.scratch("kubelet");
    std::fs::create_dir_all(kubelet_dir.join("pods")).unwrap();
    let kubelet_root = kubelet_dir.display().to_string();
    let pod_logs_dir = bed.scratch("pod-logs-of-kubelet");
    let pod_logs = pod_logs_dir.display().to_string();

    // A pod Pending behind a RunPodSandbox that keeps failing (a
    // RuntimeClass's handler containerd has no runtime for): its cgroup,
    // directories, emptyDir tmpfs and log directory, no sandbox.
    let pending = bed
        .kubelet_start_pod(&kubelet_dir, &pod_logs_dir, "pending", "no-such-handler", 2)
        .await;
    let failure = pending
        .sandbox
        .as_ref()
        .expect_err("no runtime for that handler");
    assert!(failure.message.contains("no-such-handler"), "{failure:?}");
    let version = bed.containerd_version();
    eprintln!("{TEST}: {version}: RunPodSandbox: {}", failure.message);
    // A pod kubelet ran and let go whose emptyDir it could not unmount:
    // its sandbox removed, its log directory removed by kubelet's GC
    // (evictPodLogsDirectories), its directory and volume left.
    let mounted = bed
        .kubelet_start_pod(&kubelet_dir, &pod_logs_dir, "mounted", "", 1)
        .await;
    let sandbox = mounted
        .sandbox
        .as_ref()
        .expect("the mounted pod runs")
        .clone();
    let removed = bed
        .stop_and_remove_pod(&sandbox, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the mounted pod's sandbox is stopped and removed");
    std::fs::remove_dir_all(&mounted.log_dir).unwrap();
    let run = |grace: &str| {
        bed.nodectl(&[
            "check",
            "--kubelet-root",
            &kubelet_root,
            "--kubelet-pod-logs",
            &pod_logs,
            "--kubelet-cgroup-root",
            &cgroup_root,
            "--settle",
            "0s",
            "--sandbox-grace",
            grace,
            "-o",
            "json",
        ])
    };
    let doc = support::report(&run("10m"));
    assert!(leaked(&doc).is_empty(), "within the grace: {doc:#}");

    // No pod-resources socket: kubelet's word cannot be had, so the leak
    // is reported unconfirmed (and never removed, below).
    let doc = support::report(&run("0s"));
    let found = leaked(&doc);
    assert_eq!(found.len(), 1, "{doc:#}");
    let why = found[0]["evidence"]["unconfirmed"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("pod-resources") && why.contains("does not exist"),
        "{why}"
    );
    let act = [
        "leaked-pod-cgroups",
        "--kubelet-root",
        &kubelet_root,
        "--kubelet-pod-logs",
        &pod_logs,
        "--kubelet-cgroup-root",
        &cgroup_root,
        "--grace",
        "0s",
        "--remove",
        "--yes",
        "-o",
        "json",
    ];
    let doc = support::report(&bed.nodectl(&act));
    let planned = doc["cleanups"].as_array().map_or(0, Vec::len);
    assert_eq!(planned, 0, "unconfirmed, nothing removed: {doc:#}");

    // kubelet's word, served as kubelet serves it: only the Pending pod is
    // active. A stand-in: a real kubelet answering would destroy the gone
    // pods' cgroups at its next housekeeping (2 s), and a standalone one
    // ignores runtimeClassName: it cannot keep a pod Pending on a handler.
    let _kubelet =
        support::StandInKubeletPodResources::start(TEST, &kubelet_dir, &[("default", "pending")]);

    let output = run("0s");
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let found = leaked(&doc);
    assert_eq!(found.len(), 1, "only the gone pod's cgroup: {doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: {}: {finding:#}", bed.containerd_version());
    assert_eq!(finding["id"], gone_uid.as_str());
    assert_ne!(finding["id"], live_uid.as_str());
    let evidence = &finding["evidence"];
    assert_eq!(evidence["driver"], "cgroupfs");
    assert_eq!(evidence["qos"], "burstable");
    assert_eq!(evidence["procs"], 0);
    assert_eq!(evidence["cgroup_root"]["origin"], "flag");
    assert!(evidence.get("unconfirmed").is_none(), "{finding:#}");
    let path = evidence["path"].as_str().unwrap_or_default();
    assert!(
        path.ends_with(&format!("{cgroup_root}/kubepods/burstable/pod{gone_uid}")),
        "{path}"
    );
    assert!(
        std::path::Path::new(path).is_dir(),
        "a report, never a removal: {path}"
    );
    // The Pending pod is kubelet's: no orphan, its own finding instead;
    // the pod whose volume is mounted is an orphan (kubelet let it go),
    // its cgroup kept.
    let of_kind = |kind: &str| -> Vec<String> {
        support::findings_of_kind(&doc, kind)
            .iter()
            .filter_map(|f| f["id"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(of_kind("orphan-pod-dir"), [mounted.uid.as_str()], "{doc:#}");
    assert_eq!(
        of_kind("failing-sandbox"),
        [pending.uid.as_str()],
        "{doc:#}"
    );
    let failing = support::findings_of_kind(&doc, "failing-sandbox")[0];
    assert_eq!(failing["evidence"]["pod_name"], "pending");
    assert_eq!(
        failing["evidence"]["mounts"],
        serde_json::json!([pending.volume.display().to_string()])
    );

    // A second gone pod; the plan touches neither.
    let (other, _) = bed.run_sandbox_in_pod_cgroup("other").await;
    let removed = bed
        .stop_and_remove_pod(&other, std::time::Duration::from_secs(30))
        .await;
    assert!(removed, "the other pod is stopped and removed");
    let remove = |yes: bool| {
        let mut args = vec![
            "leaked-pod-cgroups",
            "--kubelet-root",
            kubelet_root.as_str(),
            "--kubelet-pod-logs",
            pod_logs.as_str(),
            "--kubelet-cgroup-root",
            cgroup_root.as_str(),
            "--grace",
            "0s",
            "--remove",
            "-o",
            "json",
        ];
        if yes {
            args.push("--yes");
        }
        args.into_iter()
            .map(str::to_string)
            .collect::<Vec<String>>()
    };
    let plan = remove(false);
    let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
    let output = bed.nodectl(&plan);
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    let outcomes: Vec<&Value> = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["outcome"])
        .collect();
    assert_eq!(outcomes, ["would-remove", "would-remove"], "{doc:#}");
    let paths: Vec<String> = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["path"].as_str().map(str::to_string))
        .collect();
    assert!(paths.iter().all(|p| std::path::Path::new(p).is_dir()));
    let busy = paths
        .iter()
        .find(|p| !p.contains(&gone_uid))
        .cloned()
        .unwrap_or_default();

    // Between the scan and the act, a process is moved into the other
    // pod's cgroup: refused; the gone pod's is removed.
    let pause = bed.scratch("pause");
    let act = remove(true);
    let act: Vec<&str> = act.iter().map(String::as_str).collect();
    let child = support::spawn_paused_before_act(
        &act,
        [bed.root(), bed.state(), bed.address(), bed.config_path()],
        &pause,
    );
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    std::fs::write(
        std::path::Path::new(&busy).join("cgroup.procs"),
        sleeper.id().to_string(),
    )
    .expect("moving a process into the pod cgroup");
    std::fs::remove_file(&pause).unwrap();
    let output = child.wait_with_output().unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let doc = support::report(&output);
    eprintln!(
        "{TEST}: {}: removed: {:#}",
        bed.containerd_version(),
        doc["cleanups"]
    );
    let row = |path: &str| {
        doc["cleanups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["path"] == path)
            .cloned()
            .unwrap_or_else(|| panic!("no cleanup of {path}: {doc:#}"))
    };
    assert_eq!(row(path)["action"], "remove-cgroup");
    assert_eq!(row(path)["outcome"], "removed", "{doc:#}");
    assert_eq!(row(&busy)["outcome"], "refused", "{doc:#}");
    let detail = row(&busy)["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("1 process"), "{detail}");
    assert!(!std::path::Path::new(path).exists(), "removed: {path}");
    // On cgroup v1 (this machine) runc made it in every hierarchy: gone
    // from each.
    if let Some(memory) = path
        .contains("/pids/")
        .then(|| path.replace("/pids/", "/memory/"))
    {
        assert!(!std::path::Path::new(&memory).exists(), "removed: {memory}");
    }
    assert!(std::path::Path::new(&busy).is_dir(), "kept: {busy}");
    let hierarchy = path
        .strip_suffix(&format!("{cgroup_root}/kubepods/burstable/pod{gone_uid}"))
        .expect("the hierarchy the gone pod's cgroup was in");
    // kubelet's pods' cgroups are never planned nor removed.
    for cgroup in pending.cgroups.iter().chain(&mounted.cgroups) {
        let shown = cgroup.display().to_string();
        assert!(cgroup.is_dir(), "kept: {shown}");
        let rows = doc["cleanups"].as_array().into_iter().flatten();
        assert!(
            !rows.clone().any(|c| c["path"] == shown.as_str()),
            "{doc:#}"
        );
    }

    // A systemd driver's slice of a pod kubelet let go, under the same
    // cgroup root as kubelet's systemd driver names it.
    let prefix = support::systemd_prefix(&cgroup_root);
    let slice_uid = "5d5d5d5d-0000-4000-8000-00000000000a";
    let unit = support::systemd_besteffort_slice(&cgroup_root, slice_uid);
    let top = std::path::Path::new(hierarchy).join(format!("{prefix}.slice"));
    let _top = RemovedAfter(top.clone());
    let slice = top
        .join(format!(
            "{prefix}-kubepods.slice/{prefix}-kubepods-besteffort.slice"
        ))
        .join(&unit);
    std::fs::create_dir_all(slice.join("container")).unwrap();
    let shown = slice.display().to_string();
    let stop = format!("`systemctl stop {unit}`");
    let doc = support::report(&run("0s"));
    let finding = leaked(&doc)
        .into_iter()
        .find(|f| f["id"] == slice_uid)
        .unwrap_or_else(|| panic!("the slice is found at {shown}: {doc:#}"));
    assert_eq!(finding["evidence"]["driver"], "systemd");
    assert_eq!(finding["evidence"]["path"], shown.as_str());
    let remedy = finding["remedy"].as_str().unwrap_or_default();
    assert!(remedy.contains(&stop), "{remedy}");
    let output = bed.nodectl(&act);
    let doc = support::report(&output);
    support::assert_matches_schema(&doc);
    let row = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["path"] == shown.as_str())
        .unwrap_or_else(|| panic!("no cleanup of {shown}: {doc:#}"));
    assert_eq!(row["outcome"], "refused", "{doc:#}");
    let detail = row["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&stop), "{detail}");
    assert!(slice.join("container").is_dir(), "never an rmdir: {shown}");
}

/// A cgroup tree the test made outside its bed's own cgroup, removed
/// (deepest first) when dropped.
struct RemovedAfter(std::path::PathBuf);

impl Drop for RemovedAfter {
    fn drop(&mut self) {
        fn rmdir_tree(dir: &std::path::Path) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    rmdir_tree(&entry.path());
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        rmdir_tree(&self.0);
    }
}
