//! `check --from` at scale: an archive of 20,000 orphan bundles, each with
//! its rootfs mounted, is checked whole (every bundle reported with its
//! mount) within `--from`'s deadline. The joins are maps built once; with
//! a search of every mount per bundle this archive ran into the 60 s
//! deadline and exited 2. How long it takes is bench/run's to measure
//! (docs/performance.md), not this test's.

mod support;

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn twenty_thousand_orphan_bundles_each_reported_with_its_mount() {
    const COUNT: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("orphans.tar.gz");
    support::write_orphan_archive(&archive, COUNT);
    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["check", "-o", "json", "--from"])
        .arg(&archive)
        .output()
        .unwrap();
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
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
