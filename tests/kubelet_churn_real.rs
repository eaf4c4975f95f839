//! No false finding under a real kubelet's churn: static pods made and
//! deleted in rounds, 100 lifecycles a containerd line, among them
//! containers that crash in a loop and containers whose liveness probe
//! fails (kubelet restarts them), and kubelet itself killed (SIGKILL) and
//! started again mid-round. Each kubelet release scripts/peers builds takes
//! two of the four lines (v1.34 on 1.6 and 2.0, v1.37 on 1.7 and 2.3): 200
//! lifecycles a release over a CI run. Meanwhile `nodectl watch` and
//! `nodectl serve` run, and `nodectl check` looks every few seconds, all
//! with their default graces: any finding any of them reports is a failed
//! test, named with its evidence, but one: a shim containerd itself leaked
//! when kubelet's kill cut a RunPodSandbox short (containerd's log says the
//! call failed, "failed to create shim task: context canceled", and the shim
//! is still there, serving nothing, at the end), and a bundle directory
//! containerd left with nobody behind it (`orphan-bundle`), when at the end
//! containerd's own `ctr` knows no container and no task of its id and no
//! process works in it. 2.3.4 leaves such bundles, holding an empty
//! `rootfs` only, when kubelet's kill cuts a StartContainer short ("failed to
//! create containerd task: failed to create shim task: context canceled");
//! the containerd log lines of each are written to
//! target/test-logs/kubelet_churn-<release>-leftovers.log. Those are leaks
//! the scenario made, and what nodectl is for: they are said, not counted
//! false. A bundle nodectl called orphaned that containerd still owns, or
//! that was gone by the end, is a false finding.

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::serve::Served;
use support::{Kubelet, TestBed};

const ROUNDS: usize = 5;
const PODS_A_ROUND: usize = 20;

/// A pod of the churn: `kind` 0 sleeps, 1 crashes in a loop, 2 has a
/// liveness probe that always fails.
fn manifest(name: &str, kind: usize) -> String {
    let image = support::IMAGE;
    let (command, probe) = match kind {
        1 => ("sleep 1; exit 1", ""),
        2 => (
            "sleep 3600",
            "    livenessProbe:\n      exec:\n        command: [\"/bin/sh\", \"-c\", \"exit 1\"]\n      \
             periodSeconds: 1\n      failureThreshold: 1\n",
        ),
        _ => ("sleep 3600", ""),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: scratch\n    emptyDir: {{}}\n  \
         containers:\n  - name: c\n    image: {image}\n    imagePullPolicy: Never\n    \
         command: [\"/bin/sh\", \"-c\", \"{command}\"]\n    \
         volumeMounts:\n    - {{name: scratch, mountPath: /scratch}}\n{probe}"
    )
}

/// containerd's log line saying the RunPodSandbox that made sandbox `id`
/// failed. CRI logs the sandbox's id with the name it generated it for
/// (`<pod>_<namespace>_<uid>_<attempt>`), and the failure with the pod's
/// metadata only (`RunPodSandbox for &PodSandboxMetadata{Name:…,Uid:…} failed`
/// on 1.x, `RunPodSandbox for name:"…" uid:"…" … failed` on 2.x).
fn run_pod_sandbox_failed<'a>(log: &'a str, id: &str) -> Option<&'a str> {
    let named = log.lines().find(|l| {
        l.contains("generated id for sandbox name") && l.contains(&format!("podsandboxid={id}"))
    })?;
    let name = named.split("\\\"").nth(1)?;
    let uid = name.split('_').nth(2)?;
    // The metadata as each line's cri-api prints it: gogo's
    // `&PodSandboxMetadata{Name:…,Uid:…,}` on 1.x, protobuf-go's text
    // `name:"…" uid:"…"` on 2.x (its quotes escaped in logrus's msg).
    let (gogo, text) = (format!("Uid:{uid},"), format!("uid:\\\"{uid}\\\""));
    log.lines().find(|l| {
        l.contains("RunPodSandbox for")
            && (l.contains(&gogo) || l.contains(&text))
            && l.contains("failed")
    })
}

/// Why bundle `id` is, by containerd's own word and the kernel's, left with
/// nobody behind it at the end: its directory is still there, `ctr` knows
/// no container and no task of that id, and no process works in it (a
/// shim's working directory is its bundle). None when any of that fails.
fn left_behind(bed: &TestBed, id: &str) -> Option<String> {
    let dir = bed.bundles().join(id);
    let entries: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let ctr = |args: &[&str]| {
        support::run_bounded(
            std::process::Command::new(bed.ctr())
                .arg("--address")
                .arg(bed.address())
                .args(["-n", support::NAMESPACE])
                .args(args),
            Duration::from_secs(20),
        )
    };
    let info = ctr(&["containers", "info", id]).ok()?;
    let unknown =
        !info.status.success() && String::from_utf8_lossy(&info.stderr).contains("not found");
    let tasks = ctr(&["tasks", "ls", "-q"]).ok()?;
    let no_task = tasks.status.success()
        && !String::from_utf8_lossy(&tasks.stdout)
            .lines()
            .any(|t| t.trim() == id);
    let worked_in = procfs::process::all_processes()
        .ok()?
        .flatten()
        .any(|p| p.cwd().is_ok_and(|cwd| cwd == dir));
    (unknown && no_task && !worked_in).then(|| format!("holds {entries:?}"))
}

/// containerd's log lines that name `id`, each ended by a newline.
fn lines_of(log: &str, id: &str) -> String {
    log.lines()
        .filter(|l| l.contains(id))
        .flat_map(|l| [l, "\n"])
        .collect()
}

/// The report of a `nodectl check -o json` run with `args`, if it ran.
fn report_of(args: &[String], paths: [&std::path::Path; 4]) -> Option<Value> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = support::nodectl_at(&args, paths).ok()?;
    Some(serde_json::from_slice(&output.stdout).unwrap_or(Value::Null))
}

/// Keeps containerd's log lines `lines` of what a run found in
/// `target/test-logs/kubelet_churn-<version>-<what>.log`, and prints the
/// first 40 (CI shows a part of a failed test's output).
fn keep_log(test: &str, bed: &TestBed, what: &str, lines: &str) {
    let logs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-logs");
    let file = logs.join(format!(
        "kubelet_churn-{}-{what}.log",
        bed.containerd_version()
    ));
    let written = std::fs::create_dir_all(&logs).and_then(|()| std::fs::write(&file, lines));
    eprintln!(
        "{test}: containerd's lines of the {what}: {} ({written:?})",
        file.display()
    );
    for line in lines.lines().take(40) {
        eprintln!("{}", line.chars().take(400).collect::<String>());
    }
}

/// What any of nodectl's runs reported, with where.
#[derive(Default)]
struct Seen {
    /// The findings of check's looks.
    findings: Vec<Value>,
    /// serve's `nodectl_findings` lines that count any.
    served: Vec<String>,
    /// The findings of a look right after serve counted any.
    when_served: Vec<Value>,
    looks: usize,
}

async fn churn() {
    // A /24: the bed's /29 has addresses for five pods.
    let Some(bed) = TestBed::start_networked_on("kubelet_churn", "10.252.0.0/24").await else {
        return;
    };
    let release = support::kubelet_release_on(bed.line());
    let test = format!("kubelet_churn_{release}");
    let Some(mut kubelet) = Kubelet::start(&bed, &test, release) else {
        return;
    };
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()].map(PathBuf::from);
    let paths = [&paths[0], &paths[1], &paths[2], &paths[3]].map(|p| p.as_path());
    let flags = kubelet.nodectl_flags();
    let with_flags = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(flags.iter().cloned())
            .collect()
    };

    // watch: every change it tells is a line on stdout.
    let recorder = bed
        .scratch("recorder/flight-recorder.json")
        .display()
        .to_string();
    let watch_args = with_flags(&["watch", "-o", "json", "--recorder-file", &recorder]);
    let watch_args: Vec<&str> = watch_args.iter().map(String::as_str).collect();
    let mut watch = support::nodectl_command(&watch_args, paths)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("nodectl watch");
    let told = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let (told, stdout) = (told.clone(), watch.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                told.lock().unwrap().push(line);
            }
        })
    };
    let serve_args = with_flags(&["serve", "--listen", "127.0.0.1:0", "--interval", "2s"]);
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let served = Served::start(support::nodectl_command(&serve_args, paths));

    // check a second after its last look ended (a look under the churn
    // takes seconds), and serve's metrics with it.
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let checker = {
        let (done, seen) = (done.clone(), seen.clone());
        let check_args = with_flags(&["check", "-o", "json"]);
        let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()].map(PathBuf::from);
        let address = served.address;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let paths = [&paths[0], &paths[1], &paths[2], &paths[3]].map(|p| p.as_path());
                if let Some(doc) = report_of(&check_args, paths) {
                    let mut seen = seen.lock().unwrap();
                    seen.looks += 1;
                    // When the look ended, to read beside containerd's log.
                    let at = chrono::Utc::now().to_rfc3339();
                    let found = doc["findings"].as_array().into_iter().flatten();
                    seen.findings.extend(found.map(|f| {
                        let mut f = f.clone();
                        f["look_ended_at"] = Value::from(at.as_str());
                        // What that look could not read (a source given up
                        // leaves checks that depend on it blind).
                        f["look_gaps"] = doc["gaps"].clone();
                        f
                    }));
                }
                if let Ok(answer) = support::serve::request(address, "GET", "/metrics") {
                    let mut counted = false;
                    for line in answer.body.lines() {
                        let found = line.starts_with("nodectl_findings{") && !line.ends_with(" 0");
                        if found {
                            seen.lock().unwrap().served.push(line.to_string());
                            counted = true;
                        }
                    }
                    // serve's counts name no id: a look right away (its
                    // second look no later) says which, if it lasts.
                    if counted {
                        let mut args = check_args.clone();
                        args.extend(["--settle".to_string(), "0s".to_string()]);
                        if let Some(doc) = report_of(&args, paths) {
                            let found = doc["findings"].as_array().into_iter().flatten();
                            seen.lock().unwrap().when_served.extend(found.cloned());
                        }
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let start = Instant::now();
    let mut lifecycles = 0;
    for round in 0..ROUNDS {
        let names: Vec<String> = (0..PODS_A_ROUND)
            .map(|n| format!("churn-{round}-{n}"))
            .collect();
        for (n, name) in names.iter().enumerate() {
            kubelet.add_static_pod(name, &manifest(name, n % 7 % 3));
        }
        // The sleepers run (the others crash or are restarted meanwhile).
        let sleepers: Vec<&String> = names
            .iter()
            .enumerate()
            .filter(|(n, _)| n % 7 % 3 == 0)
            .map(|(_, s)| s)
            .collect();
        if round % 2 == 1 {
            // kubelet killed while it makes the round's pods.
            std::thread::sleep(Duration::from_secs(2));
            kubelet.kill_hard();
            std::thread::sleep(Duration::from_secs(1));
            kubelet.restart();
        }
        let running = kubelet.wait_for(Duration::from_secs(120), |k| {
            let states = k.crictl(&["ps"]);
            let running: Vec<&str> = states["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["labels"]["io.kubernetes.pod.name"].as_str())
                .collect();
            sleepers
                .iter()
                .all(|s| running.contains(&format!("{s}-{}", support::NODE_NAME).as_str()))
        });
        if !running {
            kubelet.fail(&format!("round {round}: the sleepers never all ran"));
        }
        // Let the crash loops and failing probes go round a few times.
        std::thread::sleep(Duration::from_secs(6));
        for name in &names {
            kubelet.remove_static_pod(name);
        }
        lifecycles += names.len();
        // Their containers stopped (their sandboxes go at container GC).
        let stopped = kubelet.wait_for(Duration::from_secs(120), |k| {
            let states = k.crictl(&["ps"]);
            !states["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["labels"]["io.kubernetes.pod.name"]
                        .as_str()
                        .is_some_and(|p| p.starts_with(&format!("churn-{round}-")))
                })
        });
        assert!(stopped, "{test}: round {round}'s containers never stopped");
    }
    // kubelet's cleanup of the last round, looked at meanwhile.
    std::thread::sleep(Duration::from_secs(10));
    done.store(true, Ordering::Relaxed);
    checker.join().unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watch.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = watch.wait();
    reader.join().unwrap();
    drop(served);

    // A shim left serving nothing, still there at the end, that
    // containerd's log ties to a RunPodSandbox kubelet's kill cut short, is
    // containerd's own leak (the shim finished after its client gave up,
    // and nothing sends it Shutdown): made by the scenario, and what
    // nodectl is for. It is said, not counted false.
    let final_look = support::report(
        &bed.nodectl(
            &with_flags(&["check", "-o", "json"])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
    );
    let log = std::fs::read_to_string(bed.log_path()).unwrap_or_default();
    let ids_of = |kind: &str| -> Vec<String> {
        support::findings_of_kind(&final_look, kind)
            .iter()
            .filter_map(|f| f["id"].as_str().map(str::to_string))
            .collect()
    };
    let leaks: Vec<String> = ids_of("leaked-shim")
        .into_iter()
        .filter(|id| {
            let cut_short = run_pod_sandbox_failed(&log, id);
            eprintln!("{test}: leaked-shim {id:.13} at the end; its RunPodSandbox: {cut_short:?}");
            cut_short.is_some()
        })
        .collect();
    // A bundle directory containerd left with nobody behind it: its own
    // leftover, settled by containerd's word, not nodectl's. What containerd
    // logged of it is kept for finding out why.
    let mut leftovers = String::new();
    let bundles: Vec<String> = ids_of("orphan-bundle")
        .into_iter()
        .filter(|id| {
            let behind = left_behind(&bed, id);
            eprintln!("{test}: orphan-bundle {id:.13} at the end; left behind: {behind:?}");
            leftovers.push_str(&format!("== {id}: left behind: {behind:?}\n"));
            leftovers.push_str(&lines_of(&log, id));
            behind.is_some()
        })
        .collect();
    if !leftovers.is_empty() {
        keep_log(&test, &bed, "leftovers", &leftovers);
    }
    let containerd_s_leak = |finding: &Value| {
        let of = |kind: &str, ids: &[String]| {
            finding["kind"] == kind
                && finding["id"]
                    .as_str()
                    .is_some_and(|id| ids.iter().any(|l| l == id))
        };
        of("leaked-shim", &leaks) || of("orphan-bundle", &bundles)
    };
    let seen = seen.lock().unwrap();
    let checked: Vec<&Value> = seen
        .findings
        .iter()
        .filter(|f| !containerd_s_leak(f))
        .collect();
    let told: Vec<Value> = told
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line.get("finding").is_some_and(|f| !containerd_s_leak(f)))
        .collect();
    // serve's counts name no id: a leaked-shim count is containerd's leak
    // when check saw no other.
    let served: Vec<&String> = seen
        .served
        .iter()
        .filter(|line| leaks.is_empty() || !line.contains("kind=\"leaked-shim\""))
        .filter(|line| bundles.is_empty() || !line.contains("kind=\"orphan-bundle\""))
        .collect();
    eprintln!(
        "{test}: containerd {}: {lifecycles} pod lifecycles in {:.0?}, {} looks by check, \
         watch told {} findings, check {} and serve {}; containerd's own leaked shims and bundles: {}",
        bed.containerd_version(),
        start.elapsed(),
        seen.looks,
        told.len(),
        checked.len(),
        served.len(),
        leaks.len() + bundles.len()
    );
    // containerd's own lines of what was found, to tell the churn's
    // steps from a false finding.
    let found_ids: BTreeSet<&str> = checked
        .iter()
        .copied()
        .chain(told.iter().map(|line| &line["finding"]))
        .chain(seen.when_served.iter())
        .filter_map(|f| f["id"].as_str())
        .collect();
    if !found_ids.is_empty() {
        let mut lines = String::new();
        for id in &found_ids {
            lines.push_str(&format!("== {id}\n"));
            lines.push_str(&lines_of(&log, id));
        }
        keep_log(&test, &bed, "findings", &lines);
    }
    assert!(lifecycles >= 100, "{test}: {lifecycles} lifecycles");
    // At least a look a round: a look takes 6 to 10 s under the churn here.
    assert!(seen.looks >= ROUNDS, "{test}: only {} looks", seen.looks);
    assert!(
        told.is_empty() && checked.is_empty() && served.is_empty(),
        "{test}: findings the churn did not make:\nwatch: {told:#?}\ncheck: {checked:#?}\n\
         serve: {served:#?}\na look right after serve counted any: {:#?}",
        seen.when_served
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_false_finding_under_a_real_kubelet_s_churn() {
    churn().await;
}
