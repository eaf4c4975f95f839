//! `check --from` at scale: an archive of 20,000 orphan bundles, each with
//! its rootfs mounted, is checked whole (every bundle reported with its
//! mount) within `--from`'s deadline; so is one of 20,000 pods whose
//! records containerd lost, each giving a finding of five kinds. The joins
//! are maps built once; with a search of every mount per bundle the first
//! archive ran into the 60 s deadline and exited 2, and with a search per
//! uid the second's kubelet part alone did at 2,000 pods. How long it takes
//! is bench/run's to measure (docs/performance.md), not this test's.

mod support;

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn twenty_thousand_orphan_bundles_each_reported_with_its_mount() {
    const COUNT: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("orphans.tar.gz");
    support::write_orphan_archive(&archive, COUNT);
    let report = check_from(&archive);
    let findings = report["findings"].as_array().unwrap();
    let of_kind = |kind: &'static str| findings.iter().filter(move |f| f["kind"] == kind);
    // A report lists the first 200 of a kind and counts the rest.
    let listed = 200;
    let expected: BTreeSet<String> = (0..listed).map(support::orphan_id).collect();
    let mut bundles = BTreeSet::new();
    for finding in of_kind("orphan-bundle") {
        let id = finding["id"].as_str().unwrap().to_string();
        let evidence = &finding["evidence"];
        assert_eq!(
            evidence["bundle_dir"],
            format!("{}/{id}", support::ARCHIVE_BUNDLES),
            "{finding}"
        );
        assert_eq!(evidence["has_mounts"], true, "{finding}");
        bundles.insert(id);
    }
    assert_eq!(bundles, expected);
    // Each rootfs is a leaked mount of its bundle's id.
    let leaked: BTreeSet<String> = of_kind("leaked-mount")
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(leaked, expected);
    let omitted = &report["findings_omitted"];
    assert_eq!(omitted["orphan-bundle"], COUNT - listed, "{omitted}");
    assert_eq!(omitted["leaked-mount"], COUNT - listed, "{omitted}");
}

/// 20,000 pods whose records containerd lost while CRI and kubelet still
/// know them (tests/support/lost_records_archive.rs): each kind below is
/// reported for every one of them, and the findings listed name what the
/// joins found (a container's pod through its sandbox in CRI's list, the
/// sandbox that superseded an old one, the record CRI does not list).
/// Every join is by a map built once; with a search per finding the
/// kubelet part alone ran into the deadline at 2,000 pods
/// (docs/performance.md).
#[test]
fn twenty_thousand_pods_containerd_lost_each_reported_and_named() {
    use support::{lost_id, Part, Tag};
    const COUNT: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("lost.tar.gz");
    // Every part but the shims (leaked-shim, shim-blocked): with them the
    // archive is past the 5,000,000 JSON values `--from` reads.
    let parts = [
        Part::Drift,
        Part::Snapshot,
        Part::OldSandbox,
        Part::PodDir,
        Part::Duplicate,
    ];
    support::write_lost_records_archive(&archive, COUNT, &parts);
    let report = check_from(&archive);
    let findings = report["findings"].as_array().unwrap();
    let listed = 200;
    // Each kind's findings in the report's order, and how many in all.
    let of_kind = |kind: &str| {
        let listed: Vec<&serde_json::Value> =
            findings.iter().filter(|f| f["kind"] == kind).collect();
        let omitted = report["findings_omitted"][kind].as_u64().unwrap_or(0) as usize;
        let total = listed.len() + omitted;
        (listed, total)
    };
    let kinds: BTreeSet<&str> = findings
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "cri-drift",
            "leaked-snapshot",
            "leaked-sandbox",
            "orphan-pod-dir",
            "duplicate-sandbox-name"
        ])
    );
    // The first of a kind by id: ids of one tag sort as their numbers.
    let first = |ids: Vec<String>| -> Vec<String> {
        let mut ids = ids;
        ids.sort();
        ids.truncate(listed);
        ids
    };
    let ids = |found: &[&serde_json::Value]| -> Vec<String> {
        found
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_string())
            .collect()
    };

    // CRI knows every container, containerd has no record of it (and of
    // each duplicated sandbox's extra record, CRI does not know it).
    let (drift, total) = of_kind("cri-drift");
    assert_eq!(total, 2 * COUNT);
    assert_eq!(
        ids(&drift),
        first((0..COUNT).map(|n| lost_id(Tag::Container, n)).collect())
    );
    for (n, f) in drift.iter().enumerate() {
        let e = &f["evidence"];
        assert_eq!(
            (&e["in_cri"], &e["in_containerd"]),
            (&true.into(), &false.into()),
            "{f}"
        );
        assert_eq!(e["pod_namespace"], "shop", "{f}");
        assert_eq!(e["pod_name"], format!("pod-{n}"), "{f}");
        assert_eq!(e["container_name"], "app", "{f}");
    }

    // Each container's snapshot is held by nothing; the duplicated
    // sandboxes' are held by their records.
    let (snapshots, total) = of_kind("leaked-snapshot");
    assert_eq!(total, COUNT);
    assert_eq!(
        ids(&snapshots),
        first((0..COUNT).map(|n| lost_id(Tag::Container, n)).collect())
    );

    // Each pod's old sandbox, superseded by its live one.
    let (sandboxes, total) = of_kind("leaked-sandbox");
    assert_eq!(total, COUNT);
    assert_eq!(
        ids(&sandboxes),
        first((0..COUNT).map(|n| lost_id(Tag::OldSandbox, n)).collect())
    );
    for (n, f) in sandboxes.iter().enumerate() {
        let e = &f["evidence"];
        assert_eq!(e["superseded_by"], lost_id(Tag::Sandbox, n), "{f}");
        assert_eq!(e["pod_name"], format!("pod-{n}"), "{f}");
    }

    // kubelet's directory of each pod gone, confirmed by kubelet's word
    // (it lists the live pods, each tied to its uid).
    let (dirs, total) = of_kind("orphan-pod-dir");
    assert_eq!(total, COUNT);
    assert_eq!(
        ids(&dirs),
        first((0..COUNT).map(|n| format!("gone-uid-{n}")).collect())
    );
    for f in &dirs {
        assert!(f["evidence"].get("unconfirmed").is_none(), "{f}");
    }

    // Two sandbox records carry each duplicated name: the one CRI does not
    // list is the one to remove.
    let (duplicates, total) = of_kind("duplicate-sandbox-name");
    assert_eq!(total, COUNT);
    let names = first((0..COUNT).map(support::duplicate_name).collect());
    assert_eq!(ids(&duplicates), names);
    for f in &duplicates {
        let name = f["id"].as_str().unwrap();
        let n: usize = name["dup-".len()..]
            .split('_')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let (kept, extra) = (lost_id(Tag::Listed, n), lost_id(Tag::Extra, n));
        let e = &f["evidence"];
        assert_eq!(e["sandbox_ids"], serde_json::json!([kept, extra]), "{f}");
        assert_eq!(e["listed_by_cri"], serde_json::json!([kept]), "{f}");
        let remedy = f["remedy"].as_str().unwrap();
        assert!(
            remedy.contains(&format!("remove {extra} (CRI does not list it)")),
            "{f}"
        );
    }
}

/// `nodectl check -o json --from <archive>`, which found something: its report.
fn check_from(archive: &std::path::Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["check", "-o", "json", "--from"])
        .arg(archive)
        .output()
        .unwrap();
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    serde_json::from_slice(&output.stdout).unwrap()
}
