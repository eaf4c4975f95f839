//! A real kubelet with the systemd cgroup driver, under a real systemd, on
//! each kubelet release scripts/peers builds, each on two of the four lines
//! (`support::kubelet_release_on`). Both releases on every line (eight
//! systemds, containerds and kubelets at once as the lines run side by
//! side) once left both systemds of a line unable to answer `systemctl`
//! for a minute.
//!
//! systemd is PID 1 of namespaces of the test's own, with this machine's
//! cgroup layout (every v1 controller, systemd's named hierarchy and the
//! unified one: `support::systemd`, `Hierarchies::LikeTheHost`); the bed's
//! containerd runs inside them with runc's `SystemdCgroup`, and kubelet
//! with `cgroupDriver: systemd` and `cgroupRoot: /`, so its pods are the
//! slices `kubepods-besteffort-pod<uid>.slice` of systemd's
//! `kubepods.slice`, as on a node.
//!
//! 1. Two static pods run: systemd says each pod's slice is active and
//!    holds its container's scope. nodectl finds nothing, and
//!    `leaked-pod-cgroups --remove --yes` removes nothing: the slices stay
//!    active.
//! 2. kubelet is killed (SIGKILL) inside one pod's teardown, once its
//!    sandbox is stopped, and that sandbox is removed through CRI while
//!    kubelet is dead: nodectl names the pod, removes nothing of it (its
//!    slice stays active: kubelet's word cannot be had) and nothing of the
//!    live pod.
//! 3. The node moves to the cgroupfs driver (containerd's runc and kubelet
//!    both, the move that leaves slices behind: the cgroupfs driver walks
//!    only `<root>/kubepods`) and kubelet starts again. kubelet removes the
//!    gone pod's directory at its housekeeping and never its slice: nodectl
//!    calls that slice a `leaked-pod-cgroup` on kubelet's word (its
//!    pod-resources lists only the live pod), and `--remove --yes` stops it
//!    through systemd: the unit inactive and its cgroup gone, as systemd
//!    says. The live pod's slice is never named or touched.
//! 4. The live pod is deleted: kubelet removes its directory, its cgroupfs
//!    cgroup and its sandboxes, and never its slice of before the move,
//!    which nodectl finds only now, on kubelet's word, and stops through
//!    systemd; then nodectl finds nothing.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::systemd::{run_inside_systemd, show, Hierarchies};
use support::{Kubelet, KubeletSetup, Line, TestBed};

/// Set in the run inside systemd's namespaces.
const IN_SYSTEMD: &str = "NODECTL_TEST_IN_SYSTEMD";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_driver_kubelet() {
    systemd_driver(support::kubelet_release_here(), "systemd_driver_kubelet").await;
}

/// The slice kubelet's systemd driver gives BestEffort pod `uid` under
/// cgroup root `/` (`ToSystemd`: every `-` of the uid escaped to `_`).
fn slice(uid: &str) -> String {
    format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_"))
}

/// That slice's directory in systemd's own hierarchy.
fn slice_dir(uid: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup/systemd/kubepods.slice/kubepods-besteffort.slice").join(slice(uid))
}

/// The processes below the slice of `uid` (systemd's pids hierarchy, where
/// nodectl counts them): each one's cgroup, pid and command line.
fn slice_processes(uid: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![
        Path::new("/sys/fs/cgroup/pids/kubepods.slice/kubepods-besteffort.slice").join(slice(uid)),
    ];
    while let Some(dir) = dirs.pop() {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push(format!(
                "{} pid {pid}: {}",
                dir.display(),
                String::from_utf8_lossy(&cmdline).replace('\0', " ").trim()
            ));
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
    }
    found
}

/// Where kubelet and systemd are, for a kubelet that never ran its pods:
/// systemd's pending jobs, and the goroutines of kubelet (SIGQUIT makes Go
/// print them, and exit) that wait on systemd's D-Bus.
fn stuck(kubelet: &Kubelet) -> String {
    let jobs = std::process::Command::new("systemctl")
        .args(["list-jobs", "--no-pager"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| e.to_string());
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(kubelet.pid()),
        nix::sys::signal::Signal::SIGQUIT,
    );
    std::thread::sleep(Duration::from_secs(2));
    let log = std::fs::read_to_string(&kubelet.log).unwrap_or_default();
    let waiting: Vec<&str> = log
        .split("\n\n")
        .filter(|goroutine| {
            goroutine.starts_with("goroutine ")
                && (goroutine.contains("dbus") || goroutine.contains("cgroups/systemd"))
        })
        .collect();
    format!(
        "systemd's jobs:\n{jobs}\nkubelet's goroutines on D-Bus:\n{}",
        waiting.join("\n\n")
    )
}

/// How long kubelet may take to stop a removed pod's sandbox.
const SANDBOX_STOPS_WITHIN: Duration = Duration::from_secs(180);

/// After kubelet's restart: the first kubelet's sandboxes are the second's
/// to remove, and on a line that carries containerd#7496 (1.6.20) removing
/// one whose shim's delete timed out (on the disk that stalled the first
/// kubelet) leaves that shim running, a real leaked shim. Each one found is
/// asserted started before the restart and ended with nodectl; anything
/// else the looks find still fails the test.
fn end_shims_leaked_before(bed: &TestBed, restarted: chrono::DateTime<chrono::Utc>, at: &str) {
    let doc = nodectl(bed, None, &["leaked-shims"]);
    let leaked = support::findings_of_kind(&doc, "leaked-shim");
    if leaked.is_empty() {
        return;
    }
    for finding in &leaked {
        let started = finding["evidence"]["started_at"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        assert!(
            started.is_some_and(|started| started < restarted),
            "{at}: a shim leaked after kubelet's restart at {restarted}: {finding:#}"
        );
    }
    eprintln!(
        "{at}: the first kubelet left {} leaked shim(s), ended now: {leaked:#?}",
        leaked.len()
    );
    let killed = nodectl(bed, None, &["leaked-shims", "--kill", "--yes"]);
    let actions = killed["actions"].as_array().cloned().unwrap_or_default();
    assert_eq!(actions.len(), leaked.len(), "{at}: {killed:#}");
    for action in &actions {
        let outcome = action["outcome"].as_str().unwrap_or_default();
        assert!(
            outcome == "terminated" || outcome == "killed",
            "{at}: {killed:#}"
        );
    }
}

/// nodectl's JSON report for `args`: kubelet's places found as on a node
/// (the only kubelet in systemd's pid namespace), or given by flag
/// (`named`: a dead kubelet cannot be found).
fn nodectl(bed: &TestBed, named: Option<&Kubelet>, args: &[&str]) -> Value {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-o".to_string(), "json".to_string()]);
    all.extend(named.map(Kubelet::nodectl_flags).unwrap_or_default());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let doc = support::report(&bed.nodectl(&all));
    support::assert_matches_schema(&doc);
    doc
}

/// `check` with no grace: everything nodectl would call leaked now.
fn look(bed: &TestBed, kubelet: Option<&Kubelet>) -> Value {
    let check = [
        "check",
        "--settle",
        "0s",
        "--sandbox-grace",
        "0s",
        "--ip-grace",
        "0s",
    ];
    nodectl(bed, kubelet, &check)
}

/// `leaked-pod-cgroups --remove` with no grace (`--yes` when `yes`);
/// systemd is asked over D-Bus, which a loaded CI machine can slow.
fn remove(bed: &TestBed, kubelet: Option<&Kubelet>, yes: bool) -> Value {
    let mut args = vec![
        "leaked-pod-cgroups",
        "--grace",
        "0s",
        "--remove",
        "--timeout",
        "30s",
    ];
    if yes {
        args.push("--yes");
    }
    nodectl(bed, kubelet, &args)
}

/// The findings and cleanups of `doc` that name `uid` anywhere.
fn naming(doc: &Value, uid: &str) -> Vec<Value> {
    let underscored = uid.replace('-', "_");
    ["findings", "cleanups"]
        .iter()
        .flat_map(|key| doc[key].as_array().cloned().unwrap_or_default())
        .filter(|item| {
            let text = item.to_string();
            text.contains(uid) || text.contains(&underscored)
        })
        .collect()
}

/// nodectl's facts of the kubelet it found are kubelet's own (its
/// /configz): its root, cgroup root and cgroup driver, `driver`.
fn assert_kubelet_facts(doc: &Value, kubelet: &Kubelet, driver: &str, at: &str) {
    let (facts, configz) = (&doc["kubelet"], kubelet.configz());
    let context = format!("{at}: nodectl: {facts:#}\n/configz: {configz:#}");
    assert_eq!(configz["cgroupDriver"], driver, "{context}");
    assert_eq!(facts["cgroup_driver"]["value"], driver, "{context}");
    assert_eq!(facts["cgroup_root"]["path"], "/", "{context}");
    assert_eq!(
        facts["root"]["path"],
        kubelet.root.display().to_string(),
        "{context}"
    );
}

async fn systemd_driver(release: &str, name: &str) {
    let test = format!("kubelet_systemd_{release}");
    if std::env::var_os(IN_SYSTEMD).is_none() {
        return run_inside_systemd(&test, name, IN_SYSTEMD, Hierarchies::LikeTheHost);
    }
    let Some(mut bed) = TestBed::start_networked(&test).await else {
        return;
    };
    bed.set_systemd_cgroup(true).await;
    let setup = KubeletSetup {
        cgroups: Some(("systemd", "/")),
        ..Default::default()
    };
    let Some(mut kubelet) = Kubelet::start_with(&bed, &test, release, setup) else {
        return;
    };
    let version = bed.containerd_version().to_string();
    let at = format!("{test} on containerd {version}");

    // 1. Two pods, each in its slice as systemd says.
    for pod in ["live", "doomed"] {
        kubelet.add_static_pod(pod, &support::sleeper_manifest(pod));
    }
    let running = |k: &Kubelet| {
        ["live", "doomed"].iter().all(|pod| {
            k.container_states(pod)
                .iter()
                .any(|(name, state)| name == "sleep" && state == "CONTAINER_RUNNING")
        })
    };
    // Once in a CI run (of 8 kubelets under systemd, lines side by side)
    // kubelet v1.37.2 on 2.3.4 logged nothing past its memory manager's
    // start, before its container manager's slices, and skipped every pod
    // sync for minutes: where it waited is printed, and it is started
    // again, once.
    if !kubelet.wait_for(Duration::from_secs(90), running) {
        eprintln!(
            "{at}: kubelet {release} ran no pod in 90 s and is started again; {}",
            stuck(&kubelet)
        );
        let restarted = chrono::Utc::now();
        kubelet.restart();
        if !kubelet.wait_for(Duration::from_secs(90), running) {
            kubelet.fail(&format!(
                "the pods never ran, kubelet started twice; {}",
                stuck(&kubelet)
            ));
        }
        end_shims_leaked_before(&bed, restarted, &at);
    }
    let containers: Vec<String> = ["live", "doomed"]
        .iter()
        .map(|pod| kubelet.running_container(pod, "sleep"))
        .collect();
    let uid = |pod: &str| {
        kubelet
            .pod_uid(pod)
            .unwrap_or_else(|| kubelet.fail(&format!("{pod}: CRI names no uid")))
    };
    let (live, doomed) = (uid("live"), uid("doomed"));
    for (uid, container) in [&live, &doomed].into_iter().zip(&containers) {
        assert_eq!(show(&slice(uid), "ActiveState"), "active", "{at}: {uid}");
        assert_eq!(
            show(&slice(uid), "Slice"),
            "kubepods-besteffort.slice",
            "{at}"
        );
        // containerd's runc names the container's scope so
        // (`<slice>:cri-containerd:<id>`).
        let scope = format!("cri-containerd-{container}.scope");
        assert_eq!(show(&scope, "Slice"), slice(uid), "{at}: {scope}");
        assert!(
            slice_dir(uid).is_dir(),
            "{at}: {}",
            slice_dir(uid).display()
        );
    }
    let doc = look(&bed, None);
    assert_eq!(
        support::finding_keys(&doc),
        Vec::<(String, String)>::new(),
        "{at}: two running pods: {doc:#}"
    );
    assert_kubelet_facts(&doc, &kubelet, "systemd", &at);
    let removal = remove(&bed, None, true);
    assert_eq!(
        removal["cleanups"].as_array().map_or(0, Vec::len),
        0,
        "{at}: {removal:#}"
    );
    for uid in [&live, &doomed] {
        assert_eq!(show(&slice(uid), "ActiveState"), "active", "{at}: {uid}");
    }

    // 2. kubelet killed once the doomed pod's sandbox is stopped; the
    // sandbox then removed through CRI while kubelet is dead.
    // kubelet removes the slice at its next housekeeping (every 2 s) once
    // the sandbox is stopped: CRI is asked as often as it answers.
    kubelet.remove_static_pod("doomed");
    // Under a loaded disk the container's exit can be a zombie for a
    // while (its shim's delete, unmounting the rootfs, past CRI's 10 s and
    // tried again), and the sandbox stops only after it: kubelet gives a
    // CRI call 2 min and tries again.
    let stopping = Instant::now();
    while kubelet
        .sandboxes("doomed")
        .iter()
        .any(|(_, state)| state == "SANDBOX_READY")
    {
        assert!(
            stopping.elapsed() < SANDBOX_STOPS_WITHIN,
            "{at}: the doomed pod's sandbox never stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    if stopping.elapsed() > Duration::from_secs(30) {
        eprintln!(
            "{at}: the doomed pod's sandbox stopped {:.0} s after its removal",
            stopping.elapsed().as_secs_f64()
        );
    }
    kubelet.kill_hard();
    for (id, _) in kubelet.sandboxes("doomed") {
        assert!(
            bed.stop_and_remove_pod(&id, Duration::from_secs(30)).await,
            "{at}: CRI did not remove sandbox {id}"
        );
    }
    assert!(
        slice_dir(&doomed).is_dir(),
        "{at}: kubelet was killed before it removed the pod's slice"
    );
    let doc = look(&bed, Some(&kubelet));
    assert_eq!(naming(&doc, &live), Vec::<Value>::new(), "{at}: {doc:#}");
    assert!(
        !naming(&doc, &doomed).is_empty(),
        "{at}: nothing named of the pod whose sandbox went while kubelet was dead: {doc:#}"
    );
    let removal = remove(&bed, Some(&kubelet), true);
    assert_eq!(
        removal["cleanups"].as_array().map_or(0, Vec::len),
        0,
        "{at}: kubelet is dead, its word cannot be had: {removal:#}"
    );
    assert_eq!(show(&slice(&doomed), "ActiveState"), "active", "{at}");

    // 3. The node moves to the cgroupfs driver, kubelet dead meanwhile.
    bed.set_systemd_cgroup(false).await;
    let config = std::fs::read_to_string(&kubelet.config).unwrap();
    std::fs::write(
        &kubelet.config,
        config.replace("cgroupDriver: systemd", "cgroupDriver: cgroupfs"),
    )
    .unwrap();
    kubelet.restart();
    let back = Instant::now();
    let dir = kubelet.root.join("pods").join(&doomed);
    let removed = kubelet.wait_for(Duration::from_secs(120), |_| !dir.exists());
    assert!(
        removed,
        "{at}: kubelet (cgroupfs) never removed {}",
        dir.display()
    );
    let took = back.elapsed();
    let doc = look(&bed, None);
    assert_kubelet_facts(&doc, &kubelet, "cgroupfs", &at);
    eprintln!(
        "{at}: kubelet {release} moved to cgroupfs removed the pod's directory in {took:?}; \
         nodectl then found {:?}",
        support::finding_keys(&doc)
    );
    let leaked = support::findings_of_kind(&doc, "leaked-pod-cgroup");
    let of_doomed: Vec<&Value> = leaked
        .into_iter()
        .filter(|f| f["evidence"]["pod_uid"] == doomed.as_str())
        .collect();
    assert!(
        !of_doomed.is_empty(),
        "{at}: the slice kubelet left: {doc:#}"
    );
    for finding in &of_doomed {
        assert_eq!(
            finding["evidence"]["driver"], "systemd",
            "{at}: {finding:#}"
        );
        assert!(
            finding["evidence"].get("unconfirmed").is_none(),
            "{at}: kubelet answers: {finding:#}"
        );
    }
    assert_eq!(naming(&doc, &live), Vec::<Value>::new(), "{at}: {doc:#}");

    let plan = remove(&bed, None, false);
    eprintln!("{at}: plan: {:#}", plan["cleanups"]);
    assert_eq!(naming(&plan, &live), Vec::<Value>::new(), "{at}: {plan:#}");
    assert_eq!(show(&slice(&doomed), "ActiveState"), "active", "{at}");
    let done = remove(&bed, None, true);
    eprintln!("{at}: done: {:#}", done["cleanups"]);
    assert_stopped_through_systemd(&done, &doomed, &at);
    assert_eq!(naming(&done, &live), Vec::<Value>::new(), "{at}: {done:#}");
    // The live pod through the move (kubelet may have replaced its
    // sandbox with one under cgroupfs): its slice never named or stopped.
    eprintln!(
        "{at}: after the move the live pod has sandboxes {:?}; its slice is {}",
        kubelet.sandboxes("live"),
        show(&slice(&live), "ActiveState")
    );
    let doc = look(&bed, None);
    assert_eq!(
        support::findings_of_kind(&doc, "leaked-pod-cgroup").len(),
        0,
        "{at}: {doc:#}"
    );

    // 4. The live pod goes too. kubelet tears it down as cgroupfs has it
    // (its pod cgroup, its directory, its sandboxes at container GC) and
    // never its slice of before the move: found only now, and stopped.
    kubelet.remove_static_pod("live");
    let gone = Instant::now();
    let torn_down = kubelet.wait_for(Duration::from_secs(150), |k| {
        k.sandboxes("live").is_empty()
            && !k.root.join("pods").join(&live).exists()
            && k.pod_cgroups(&live).is_empty()
    });
    assert!(
        torn_down,
        "{at}: kubelet did not tear the live pod down: sandboxes {:?}, cgroups {:?}",
        kubelet.sandboxes("live"),
        kubelet.pod_cgroups(&live)
    );
    let outlived = slice_processes(&live);
    let doc = look(&bed, None);
    eprintln!(
        "{at}: kubelet {release} removed the pod's directory, cgroupfs cgroup and sandboxes in \
         {:?}, and left its slice of before the move {}, processes in it: {outlived:?}; \
         nodectl found {:?}",
        gone.elapsed(),
        show(&slice(&live), "ActiveState"),
        support::finding_keys(&doc)
    );
    let found: Vec<&Value> = support::findings_of_kind(&doc, "leaked-pod-cgroup")
        .into_iter()
        .filter(|f| f["evidence"]["pod_uid"] == live.as_str())
        .collect();
    assert!(
        found.len() == 1 && found[0]["evidence"].get("unconfirmed").is_none(),
        "{at}: the slice kubelet never removes, once its pod is gone: {doc:#}"
    );
    let done = remove(&bed, None, true);
    // containerd 1.7 may remove the sandbox made before the move while its
    // process (the sandbox image's) still runs in the slice: the pod is
    // gone and its process is not, which nodectl names and never removes.
    // The other lines kill it with the sandbox (seen on 1.7.34 in every
    // run but one, with both kubelet releases when each ran on every line;
    // never on 1.6.20, 2.0.11, 2.3.4). In that one (the CI of 0ce98e7,
    // v1.37.2) 1.7.34 killed it too, and the slice was stopped as on the
    // other lines: on 1.7 either is containerd's, and each is held to what
    // nodectl must then do.
    // Its rootfs is still mounted too (`leaked-mount` of that sandbox).
    eprintln!("{at}: processes left in the slice of before the move: {outlived:?}");
    if bed.line() == Line::V1_7 && !outlived.is_empty() {
        assert_eq!(outlived.len(), 1, "{at}: {outlived:?}");
        let sandbox = outlived[0]
            .split("cri-containerd-")
            .nth(1)
            .and_then(|rest| rest.split(".scope").next())
            .unwrap_or_default();
        assert_eq!(
            support::finding_keys(&doc),
            vec![
                ("leaked-mount".to_string(), sandbox.to_string()),
                ("leaked-pod-cgroup".to_string(), live.clone()),
            ],
            "{at}: {doc:#}"
        );
        assert_eq!(found[0]["evidence"]["procs"], 1, "{at}: {doc:#}");
        let refused: Vec<Value> = naming(&done, &live)
            .into_iter()
            .filter(|item| item.get("outcome").is_some())
            .collect();
        assert!(
            refused.len() == 1
                && refused[0]["outcome"] == "refused"
                && refused[0]["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("outlived their pod")),
            "{at}: {done:#}"
        );
        assert_eq!(show(&slice(&live), "ActiveState"), "active", "{at}");
        return;
    }
    assert_eq!(outlived, Vec::<String>::new(), "{at}");
    assert_stopped_through_systemd(&done, &live, &at);
    assert_eq!(
        support::finding_keys(&look(&bed, None)),
        Vec::<(String, String)>::new(),
        "{at}: nothing left"
    );
}

/// `done` (a `--remove --yes` report) stopped the slice of `uid` through
/// systemd, and systemd says so: the unit inactive, its cgroup gone.
fn assert_stopped_through_systemd(done: &Value, uid: &str, at: &str) {
    let rows: Vec<Value> = naming(done, uid)
        .into_iter()
        .filter(|item| item.get("outcome").is_some())
        .collect();
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["outcome"] == "removed"),
        "{at}: {done:#}"
    );
    assert!(
        rows.iter().any(|r| r["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&format!("StopUnit {}", slice(uid))))),
        "{at}: stopped through systemd: {done:#}"
    );
    assert_eq!(show(&slice(uid), "ActiveState"), "inactive", "{at}");
    assert!(!slice_dir(uid).exists(), "{at}: systemd removed it");
}
