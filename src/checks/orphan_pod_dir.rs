//! `orphan-pod-dir`: a kubelet pod directory (`<kubelet root>/pods/<uid>`)
//! whose uid no sandbox CRI lists has.
//!
//! kubelet removes a pod's directory once the pod is gone and every volume
//! below it is unmounted (`cleanupOrphanedPodDirs`, every 2 s): its
//! `volumes/` by `rmdir` only, never a recursive delete. While a volume is
//! still mounted (a stuck NFS or CSI volume, a busy device) it keeps the
//! directory and says so only at -v=3 ("Orphaned pod found, but volumes are
//! not cleaned up"); what the operator sees at the default verbosity is the
//! volume manager's retried "UnmountVolume.TearDown failed" for the uid.
//! ("... volume paths are still present on disk" is the wording of kubelet
//! up to 1.21, gone since kubernetes#102576.) The hand `rm -rf` of such a
//! directory has deleted mounted volume data. So the mounts still below it
//! are the evidence, and nodectl never offers to remove one.
//!
//! Judged on CRI's list of sandboxes (every state), which must have
//! answered; kubelet makes a pod's directory before its sandbox, hence the
//! grace (`--sandbox-grace`) on the directory's last change. And on
//! kubelet's own rules: `cleanupOrphanedPodDirs` keeps the directory of
//! every pod in kubelet's pod manager, a Pending pod whose RunPodSandbox
//! keeps failing (CNI ADD, an image pull) included, and such a pod has no
//! sandbox (containerd cleans a failed one up). kuberuntime's
//! `createPodSandbox` makes the pod's log directory
//! (`/var/log/pods/<namespace>_<name>_<uid>`) right before each
//! RunPodSandbox, and kubelet's container GC (`evictPodLogsDirectories`)
//! removes it once the pod's content may go. But a log directory is anyone's
//! who can write the pod log directory (a log shipper's `hostPath` of
//! `/var/log`): a tenant's `mkdir /var/log/pods/<ns>_<name>_<uid>` turned an
//! orphan into a `failing-sandbox`. So a log directory alone never makes a
//! directory kubelet's: only kubelet's word (its pod-resources API listing
//! the pod the log directory names, and no other log directory naming
//! that pod) does; without that word the finding stays, unconfirmed, with
//! the log directory said. Without the log directories read, a finding is
//! unconfirmed.

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{of_pod, pod_dirs_without_sandbox, pod_of_uid, KUBELET_RELEASES};
use crate::model::{
    timestamp, CniIndex, CniView, Finding, Kind, KubeletIndex, KubeletView, Located, PodDir,
    Severity, Snapshot,
};

#[derive(Serialize)]
pub struct Evidence {
    pub path: String,
    pub pod_uid: String,
    /// The pod's namespace and name, when libcni's cache still names its
    /// uid (its network teardown never ran); kubelet's layout has only
    /// the uid.
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    /// kubelet's root, and where nodectl found it (flag, process, default).
    pub kubelet_root: Located,
    pub modified_at: Value,
    pub age_seconds: f64,
    /// Mount points still below it (volumes kubelet could not unmount).
    pub mounts: Vec<String>,
    pub has_mounts: bool,
    /// Why kubelet's word on the pod could not be had, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

/// The pod directories of `snapshot` no listed sandbox's uid names, older
/// than the grace. Nothing without kubelet's directories and CRI's list.
pub fn orphans<'a>(snapshot: &'a Snapshot, settings: &Settings) -> Vec<&'a PodDir> {
    let Some((kubelet, dirs)) = pod_dirs_without_sandbox(snapshot) else {
        return Vec::new();
    };
    let kubelet = kubelet.index();
    dirs.into_iter()
        .filter(|dir| snapshot.is_older_than(dir.modified_at, settings.sandbox_grace))
        // A pod kubelet's pod-resources API lists, tied by its log
        // directory (alone, a tenant's to make: see the module's doc).
        .filter(|dir| kubelet.lists(&dir.uid) != Ok(true))
        .collect()
}

/// Why kubelet's word on the pod of `uid` cannot be had, if it cannot;
/// `index` is `kubelet`'s.
fn unconfirmed(kubelet: &KubeletView, index: &KubeletIndex, uid: &str) -> Option<String> {
    match &kubelet.pod_logs {
        None => Some(
            "kubelet's pod log directories could not be read, so a pod kubelet still starts \
             cannot be told from one it let go"
                .to_string(),
        ),
        Some(_) => {
            let why = index.lists(uid).err()?;
            Some(match index.pod_log(uid) {
                Some(log) => format!(
                    "{why}; the log directory {}_{}_{} (which kubelet makes before each \
                     RunPodSandbox) names this uid, but a log directory is anyone's who can \
                     write the pod log directory, so it does not prove kubelet still has the pod",
                    log.namespace, log.name, log.uid
                ),
                None => why,
            })
        }
    }
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let Some(kubelet) = &snapshot.kubelet else {
        return Vec::new();
    };
    let cni = snapshot.cni.as_ref().map(CniView::index);
    let index = kubelet.index();
    orphans(snapshot, settings)
        .into_iter()
        .map(|dir| finding(snapshot, cni.as_ref(), kubelet, &index, dir))
        .collect()
}

fn finding(
    snapshot: &Snapshot,
    cni: Option<&CniIndex>,
    kubelet: &KubeletView,
    index: &KubeletIndex,
    dir: &PodDir,
) -> Finding {
    let (pod_namespace, pod_name) = pod_of_uid(cni, &dir.uid);
    let evidence = Evidence {
        path: dir.path.display().to_string(),
        pod_uid: dir.uid.clone(),
        pod_namespace,
        pod_name,
        kubelet_root: kubelet.root.clone(),
        modified_at: timestamp(dir.modified_at),
        age_seconds: snapshot.seconds_since(dir.modified_at),
        mounts: dir.mounts.clone(),
        has_mounts: !dir.mounts.is_empty(),
        unconfirmed: unconfirmed(kubelet, index, &dir.uid),
    };
    let (mut summary, remedy) = if evidence.has_mounts {
        (
            format!(
                "kubelet pod directory {}{} belongs to no sandbox, and {} volume mount(s) remain below it",
                evidence.path,
                of_pod(&evidence.pod_namespace, &evidence.pod_name),
                dir.mounts.len()
            ),
            format!(
                "Never remove it by hand while anything is mounted below it: `rm -rf` deletes \
                 the volumes' data. kubelet keeps the directory while a volume below it is \
                 mounted and removes it itself once none is. {releases} say so only at -v=3 \
                 (\"Orphaned pod found, but volumes are not cleaned up\" podUID=\"{uid}\"); \
                 why the unmount fails is in `journalctl -u kubelet | grep {uid}`: \
                 \"UnmountVolume.TearDown failed for volume ... pod \\\"{uid}\\\"\", retried \
                 with back-off (a stuck NFS or CSI volume, a busy device). Fix that or unmount \
                 each ({first}), and kubelet's next housekeeping (every 2 s) removes the \
                 directory.",
                releases = KUBELET_RELEASES,
                uid = dir.uid,
                first = dir.mounts[0],
            ),
        )
    } else {
        (
            format!(
                "kubelet pod directory {}{} belongs to no sandbox; nothing is mounted below it",
                evidence.path,
                of_pod(&evidence.pod_namespace, &evidence.pod_name)
            ),
            format!(
                "kubelet removes such a directory in its housekeeping (every 2 s) while it runs: \
                 one that stays means kubelet is down or cannot remove it. {releases} log why \
                 (the first error of each pass; every one at -v=5): \"There were many similar \
                 errors. Turn up verbosity to see them.\" err=\"orphaned pod \\\"{uid}\\\" \
                 found, but ...\" (\"failed to rmdir() volume at path\": a file left below \
                 volumes/, which kubelet never deletes). With nothing mounted below it and no \
                 pod of that uid on the API server, it is safe to remove.",
                releases = KUBELET_RELEASES,
                uid = dir.uid,
            ),
        )
    };
    let remedy = match &evidence.unconfirmed {
        Some(why) if !evidence.has_mounts => format!(
            "Unconfirmed, so not offered as removable: {why}. Ask kubelet (its log, and the \
             API server's pod of uid {}) first.",
            dir.uid
        ),
        _ => remedy,
    };
    if evidence.unconfirmed.is_some() {
        summary.push_str(" (unconfirmed: kubelet's word could not be had)");
    }
    Finding {
        kind: Kind::OrphanPodDir,
        severity: Severity::Warning,
        id: dir.uid.clone(),
        summary,
        cause: "kubelet keeps a pod's directory until its pod is gone and every volume below \
                it is unmounted; an unmount that fails (a stuck NFS or CSI volume, a busy \
                device) or a kubelet that stopped before its clean-up leaves it behind."
            .to_string(),
        remedy,
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CriView, Origin, PodLogDir};
    use std::path::PathBuf;
    use std::time::Duration;

    const HOUR: i64 = 3600 * SEC;

    fn dir(uid: &str, modified_at: i64, mounts: &[&str]) -> PodDir {
        PodDir {
            uid: uid.to_string(),
            path: PathBuf::from(format!("/var/lib/kubelet/pods/{uid}")),
            modified_at,
            mounts: mounts.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn node(dirs: Vec<PodDir>, sandbox_uids: &[&str]) -> Snapshot {
        let mut s = snapshot();
        s.kubelet = Some(KubeletView {
            root: Located {
                path: PathBuf::from("/var/lib/kubelet"),
                origin: Origin::Process,
            },
            pod_dirs: dirs,
            pod_logs: Some(Vec::new()),
            pod_logs_dir: None,
            word: crate::model::KubeletWord::Listed { pods: Vec::new() },
        });
        let sandboxes = sandbox_uids
            .iter()
            .enumerate()
            .map(|(n, uid)| crate::model::CriItem {
                uid: Some(uid.to_string()),
                ..cri_sandbox(&id((b'a' + n as u8) as char), "shop", "cart")
            })
            .collect();
        s.cri = Some(CriView {
            sandboxes: Some(sandboxes),
            ..CriView::default()
        });
        s
    }

    #[test]
    fn a_directory_no_sandbox_names_is_orphaned_with_its_mounts_as_evidence() {
        let volume = "/var/lib/kubelet/pods/gone/volumes/kubernetes.io~nfs/data";
        let s = node(
            vec![
                dir("live", NOW - HOUR, &[]),
                dir("gone", NOW - HOUR, &[volume]),
                dir("empty", NOW - HOUR, &[]),
            ],
            &["live"],
        );
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["gone", "empty"]);
        let gone = &findings[0];
        assert_eq!(gone.kind, Kind::OrphanPodDir);
        assert_eq!(gone.evidence["has_mounts"], true);
        assert_eq!(gone.evidence["mounts"][0], volume);
        assert_eq!(gone.evidence["kubelet_root"]["origin"], "process");
        assert!(gone.summary.contains("1 volume mount"), "{}", gone.summary);
        assert!(
            gone.remedy.contains("Never remove it by hand"),
            "{}",
            gone.remedy
        );
        assert_eq!(findings[1].evidence["has_mounts"], false);
        assert!(findings[1].remedy.contains("safe to remove"));
    }

    #[test]
    fn the_remedy_quotes_the_kubelet_line_of_each_case_by_release() {
        let volume = "/var/lib/kubelet/pods/gone/volumes/kubernetes.io~nfs/data";
        let s = node(
            vec![
                dir("gone", NOW - HOUR, &[volume]),
                dir("empty", NOW - HOUR, &[]),
            ],
            &[],
        );
        let findings = check(&s, &Settings::default());
        // Mounted: kubelet keeps it and says so only at -v=3; the unmount's
        // own failure is what the default verbosity shows.
        let mounted = &findings[0].remedy;
        for line in [
            "kubelet 1.26-1.35 say so only at -v=3",
            "\"Orphaned pod found, but volumes are not cleaned up\" podUID=\"gone\"",
            "`journalctl -u kubelet | grep gone`",
            "\"UnmountVolume.TearDown failed for volume ... pod \\\"gone\\\"\"",
            "kubelet's next housekeeping (every 2 s) removes the directory",
        ] {
            assert!(mounted.contains(line), "{line:?} in {mounted}");
        }
        // kubelet 1.21's wording is not what a 1.26-1.35 kubelet logs.
        assert!(
            !mounted.contains("volume paths are still present"),
            "{mounted}"
        );
        // Nothing mounted: the rolled-up error, with the uid in its err.
        let empty = &findings[1].remedy;
        for line in [
            "kubelet 1.26-1.35 log why",
            "\"There were many similar errors. Turn up verbosity to see them.\"",
            "err=\"orphaned pod \\\"empty\\\" found, but ...\"",
            "\"failed to rmdir() volume at path\"",
        ] {
            assert!(empty.contains(line), "{line:?} in {empty}");
        }
        assert!(findings.iter().all(|f| f.remedy.is_ascii()));
    }

    #[test]
    fn the_pod_is_named_when_libcnis_cache_still_names_its_uid() {
        let mut s = node(vec![dir("gone", NOW - HOUR, &[])], &[]);
        assert!(check(&s, &Settings::default())[0].evidence["pod_name"].is_null());
        s.cni = Some(named_in_cache("gone"));
        let f = &check(&s, &Settings::default())[0];
        assert_eq!(
            (&f.evidence["pod_namespace"], &f.evidence["pod_name"]),
            (&"shop".into(), &"cart".into())
        );
        assert!(f.summary.contains(" of pod shop/cart "), "{}", f.summary);
    }

    #[test]
    fn within_the_grace_or_without_cri_s_list_nothing_is_orphaned() {
        let s = node(vec![dir("new", NOW - 10 * SEC, &[])], &[]);
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            sandbox_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        let mut s = node(vec![dir("gone", NOW - HOUR, &[])], &[]);
        s.cri.as_mut().unwrap().sandboxes = None;
        assert!(check(&s, &Settings::default()).is_empty());
        s.kubelet = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }

    #[test]
    fn a_pod_kuberuntime_started_is_kubelets_never_an_orphan() {
        // Pending behind a failing RunPodSandbox: its directory, its log
        // directory, no sandbox.
        let mut s = node(
            vec![
                dir("pending", NOW - HOUR, &[]),
                dir("gone", NOW - HOUR, &[]),
            ],
            &[],
        );
        let logs = vec![PodLogDir {
            namespace: "shop".to_string(),
            name: "cart".to_string(),
            uid: "pending".to_string(),
            modified_at: NOW - HOUR,
        }];
        s.kubelet.as_mut().unwrap().pod_logs = Some(logs);
        // kubelet's word lists the pod its log directory names: kubelet's.
        s.kubelet.as_mut().unwrap().word = crate::model::KubeletWord::Listed {
            pods: vec![crate::model::PodName {
                namespace: "shop".to_string(),
                name: "cart".to_string(),
            }],
        };
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["gone"]);
        assert!(findings[0].evidence.get("unconfirmed").is_none());
        // A log directory alone (a tenant can make one) hides nothing:
        // kubelet's word not listing the pod, it is an orphan; without
        // its word, an unconfirmed one that names the log directory.
        let mut unlisted = s.clone();
        unlisted.kubelet.as_mut().unwrap().word =
            crate::model::KubeletWord::Listed { pods: Vec::new() };
        let findings = check(&unlisted, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["pending", "gone"]);
        assert!(findings[0].evidence.get("unconfirmed").is_none());
        let mut unasked = s.clone();
        unasked.kubelet.as_mut().unwrap().word = crate::model::KubeletWord::default();
        let findings = check(&unasked, &Settings::default());
        assert_eq!(findings.len(), 2);
        let why = findings[0].evidence["unconfirmed"].as_str().unwrap();
        assert!(
            why.contains("shop_cart_pending") && why.contains("anyone's"),
            "{why}"
        );
        assert!(findings[0].summary.contains("unconfirmed"));
        // Without the log directories read, nothing tells them apart: both
        // are said unconfirmed, neither called safe to remove.
        s.kubelet.as_mut().unwrap().pod_logs = None;
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 2);
        for f in &findings {
            let why = f.evidence["unconfirmed"].as_str().unwrap_or_default();
            assert!(why.contains("log directories could not be read"), "{why}");
            assert!(f.summary.contains("unconfirmed"), "{}", f.summary);
            assert!(!f.remedy.contains("safe to remove"), "{}", f.remedy);
        }
    }

    #[test]
    fn without_kubelets_word_an_orphan_is_unconfirmed() {
        let mut s = node(vec![dir("gone", NOW - HOUR, &[])], &[]);
        s.kubelet.as_mut().unwrap().word = crate::model::KubeletWord::Unavailable {
            why: "its listener is not believed: pid 9: it runs as uid 1000".to_string(),
        };
        let f = &check(&s, &Settings::default())[0];
        let why = f.evidence["unconfirmed"].as_str().unwrap_or_default();
        assert!(why.contains("not believed"), "{why}");
        assert!(!f.remedy.contains("safe to remove"), "{}", f.remedy);
    }
}
