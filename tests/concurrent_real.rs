//! `collect` while `leaked-shims --kill --yes` ends leaked shims, on a real
//! containerd: the kill ends exactly the leaks, the pod's shim lives, and
//! `collect` still writes a whole archive (a shim that exits while it reads
//! procfs is churn, not an error) that `check --from` reads. Two `check`s
//! beside them answer the same. The hand-made cases (two `collect`s to one
//! archive, a reader watching it) are in `concurrent_runs.rs`.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{procs, TestBed};

/// nodectl on the bed's paths, started now, waited for later.
fn start(bed: &TestBed, args: &[&str]) -> std::process::Child {
    let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()];
    support::nodectl_command(args, paths)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: std::process::Child) -> Output {
    child.wait_with_output().unwrap()
}

fn leaked_ids(doc: &Value) -> Vec<String> {
    let mut ids: Vec<String> = doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-shim")
        .map(|f| f["id"].as_str().unwrap_or_default().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_beside_a_kill_writes_a_whole_archive_and_the_kill_ends_only_the_leaks() {
    let Some(bed) = TestBed::start("collect_beside_a_kill").await else {
        return;
    };
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let healthy_shim = bed.shim_pid(&healthy.sandbox_id);
    let out = bed.scratch("out");
    std::fs::create_dir_all(&out).unwrap();

    for round in 0..3 {
        let orphans: Vec<_> = (0..2)
            .map(|i| bed.start_orphan_shim(&format!("{:064x}", 0xc011_ec70_u64 + round * 16 + i)))
            .collect();
        let mut expected: Vec<String> = orphans.iter().map(|o| o.id.clone()).collect();
        expected.sort();

        // Both checks first see the leaks; the kill and the collect run at once.
        let checks = [
            start(&bed, &["check", "-o", "json"]),
            start(&bed, &["check", "-o", "json"]),
        ];
        let archive = out.join(format!("evidence-{round}.tar.gz"));
        let kill = start(&bed, &["leaked-shims", "--kill", "--yes", "-o", "json"]);
        let collect = start(&bed, &["collect", archive.to_str().unwrap()]);
        let [a, b] = checks.map(finish);
        let (kill, collect) = (finish(kill), finish(collect));

        for check in [&a, &b] {
            let doc = support::report(check);
            // Seen before or after the kill: the leaks or nothing, never
            // the pod's shim; and never half a report.
            let seen = leaked_ids(&doc);
            assert!(
                seen.iter().all(|id| expected.contains(id)),
                "round {round}: {seen:?} not in {expected:?}"
            );
        }
        let doc = support::report(&kill);
        let actions = doc["actions"].as_array().cloned().unwrap_or_default();
        let mut ended: Vec<String> = actions
            .iter()
            .filter(|a| a["outcome"] == "terminated" || a["outcome"] == "killed")
            .map(|a| a["shim_id"].as_str().unwrap_or_default().to_string())
            .collect();
        ended.sort();
        assert_eq!(ended, expected, "round {round}: {doc}");
        for orphan in &orphans {
            assert!(
                support::wait_until(Duration::from_secs(10), || !procs::is_running(orphan.pid)),
                "round {round}: leaked shim {} ended",
                orphan.pid
            );
        }
        assert!(procs::is_running(healthy_shim), "the pod's shim lives");

        assert_eq!(
            collect.status.code(),
            Some(0),
            "{}",
            support::stderr(&collect)
        );
        let evidence = nodectl::archive::read(&archive, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("round {round}: the archive is whole: {e}"));
        assert!(
            evidence.first.shims.iter().any(|s| s.pid == healthy_shim),
            "round {round}: the pod's shim is in the archive"
        );
        let from = Command::new(env!("CARGO_BIN_EXE_nodectl"))
            .args(["check", "-o", "json", "--from"])
            .arg(&archive)
            .output()
            .unwrap();
        assert_ne!(from.status.code(), Some(2), "{}", support::stderr(&from));
        support::report(&from);
        assert_eq!(support::temp_files_left_in(&out), Vec::<String>::new());
    }
}
