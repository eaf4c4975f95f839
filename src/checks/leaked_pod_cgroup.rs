//! `leaked-pod-cgroup`: a kubelet pod cgroup whose uid no sandbox CRI
//! lists has.
//!
//! kubelet makes a cgroup per pod (`kubepods[/<qos>]/pod<uid>`, or the
//! systemd driver's `kubepods[-<qos>]-pod<uid>.slice`) and removes it once
//! the pod is gone; one it failed to remove stays, and kubelet's CPU grows
//! with each such cgroup it walks (kubernetes#123766, #112151). Worst when
//! processes still run in it: they escaped their pod's teardown and hold
//! its memory and pids.
//!
//! Judged on CRI's sandbox list (any state), which must have answered,
//! past the grace on the cgroup's creation (kubelet makes a pod's cgroup
//! before its sandbox), and on kubelet's own rules: a pod whose directory
//! (`<kubelet root>/pods/<uid>`) is still there is one kubelet has not let
//! go, and its cgroup is never leaked. kubelet's `HandlePodCleanups` runs
//! `cleanupOrphanedPodDirs` (which keeps the directory of every pod in its
//! pod manager, Pending ones behind a failing RunPodSandbox included, and
//! of every pod with a volume still mounted) before
//! `cleanupOrphanedPodCgroups` (which keeps the cgroup of every pod that
//! may still run, and of every pod whose volumes exist, `podVolumesExist`,
//! "so any memory backed volumes don't have their charges propagated to
//! the parent cgroup"). A cgroup whose directory is gone is one kubelet
//! let go of. kubelet's own word (its pod-resources API, see
//! `sources::pod_resources`) names pods, never uids: a listed pod is tied
//! to a uid only by its log directory, which anyone who can write the pod
//! log directory can make (`mkdir /var/log/pods/<ns>_<name>_<uid>` made a
//! leaked cgroup vanish), so a cgroup so tied is still reported, its
//! finding unconfirmed and never removed. Without that word, or without
//! kubelet's directories read, a finding is unconfirmed and never removed.

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::checks::shared::{of_pod, pod_of_uid, KUBELET_RELEASES};
use crate::model::{
    timestamp, CniView, Finding, Kind, KubeletIndex, KubeletSetting, KubeletView, Located,
    PodCgroup, Severity, Snapshot,
};

#[derive(Serialize)]
pub struct Evidence {
    pub path: String,
    pub pod_uid: String,
    /// The pod's namespace and name, when libcni's cache still names its
    /// uid (its network teardown never ran); the cgroup has only the uid.
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub driver: String,
    pub qos: String,
    /// kubelet's cgroup root, and where nodectl found it.
    pub cgroup_root: Located,
    /// kubelet's `cgroupDriver` as its command line or config set it, and
    /// where (null when nothing nodectl read sets it); `driver` is the
    /// layout the cgroup itself is in.
    pub cgroup_driver: Option<KubeletSetting<String>>,
    pub cgroup_version: u8,
    pub created_at: Value,
    pub age_seconds: f64,
    /// Processes in it and every cgroup below it.
    pub procs: usize,
    /// cgroup v2's `cgroup.events`: whether anything runs in the subtree
    /// (null on v1).
    pub populated: Option<bool>,
    /// Why kubelet's word on the pod could not be had, when it could not:
    /// then nothing is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

/// A leaked pod cgroup, and why it is unconfirmed if it is.
pub struct Leaked<'a> {
    pub cgroup: &'a PodCgroup,
    pub unconfirmed: Option<String>,
}

/// The pod cgroups of `snapshot` no listed sandbox's uid names and kubelet
/// no longer has (see the module's doc), older than the grace. Nothing
/// without the cgroups read and CRI's list.
pub fn leaked<'a>(snapshot: &'a Snapshot, settings: &Settings) -> Vec<Leaked<'a>> {
    let Some(cgroups) = &snapshot.pod_cgroups else {
        return Vec::new();
    };
    let Some(uids) = snapshot.cri.as_ref().and_then(|cri| cri.pod_uids()) else {
        return Vec::new();
    };
    // kubelet's directories indexed once for every cgroup's uid.
    let kubelet = snapshot.kubelet.as_ref().map(KubeletView::index);
    let kubelet = kubelet.as_ref();
    cgroups
        .pod_cgroups
        .iter()
        .filter(|cgroup| !uids.contains(cgroup.uid.as_str()))
        .filter(|cgroup| snapshot.is_older_than(cgroup.created_at, settings.sandbox_grace))
        // kubelet has not let the pod go while its directory is there (a
        // log directory is no such proof: see the module's doc).
        .filter(|cgroup| kubelet.is_none_or(|k| k.pod_dir(&cgroup.uid).is_none()))
        .map(|cgroup| Leaked {
            cgroup,
            unconfirmed: unconfirmed(kubelet, &cgroup.uid),
        })
        .collect()
}

/// The command that removes `cgroup` the way its maker does, when it is a
/// slice systemd made for kubelet (the systemd cgroup driver): its
/// directory's name is the slice unit's. kubelet's `Destroy` (through
/// libcontainer's systemd manager) stops the unit over D-Bus, and systemd
/// removes the cgroup; an `rmdir` behind systemd's back leaves the unit
/// loaded as if it still had its cgroup, so nodectl never does one.
pub fn systemd_stop(cgroup: &PodCgroup) -> Option<String> {
    if cgroup.driver != "systemd" {
        return None;
    }
    let unit = cgroup.path.file_name()?.to_str()?;
    Some(format!("systemctl stop {unit}"))
}

/// Why kubelet's word on the pod of `uid` cannot be had, if it cannot.
fn unconfirmed(kubelet: Option<&KubeletIndex>, uid: &str) -> Option<String> {
    match kubelet {
        None => Some(
            "kubelet's pod directories were not read, so a pod kubelet still has cannot be \
             told from one it let go"
                .to_string(),
        ),
        Some(kubelet) => match kubelet.lists(uid) {
            Ok(true) => Some(tied_by_log_directory(kubelet, uid)),
            Ok(false) => None,
            Err(why) => Some(why),
        },
    }
}

/// Why a pod kubelet's word lists only through its log directory is not
/// proven kubelet's.
fn tied_by_log_directory(kubelet: &KubeletIndex, uid: &str) -> String {
    let log = kubelet
        .pod_log(uid)
        .map(|log| format!("{}_{}_{}", log.namespace, log.name, log.uid))
        .unwrap_or_default();
    format!(
        "kubelet's pod-resources API lists a pod that only the log directory {log} ties to \
         this uid, and kubelet has no pod directory of it; a log directory is anyone's who can \
         write the pod log directory, so it does not prove the pod kubelet's"
    )
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let Some(view) = &snapshot.pod_cgroups else {
        return Vec::new();
    };
    let cni = snapshot.cni.as_ref().map(CniView::index);
    leaked(snapshot, settings)
        .into_iter()
        .map(
            |Leaked {
                 cgroup,
                 unconfirmed,
             }| {
                let (pod_namespace, pod_name) = pod_of_uid(cni.as_ref(), &cgroup.uid);
                let evidence = Evidence {
                    path: cgroup.path.display().to_string(),
                    pod_uid: cgroup.uid.clone(),
                    pod_namespace,
                    pod_name,
                    driver: cgroup.driver.clone(),
                    qos: cgroup.qos.clone(),
                    cgroup_root: view.cgroup_root.clone(),
                    cgroup_driver: view.cgroup_driver.clone(),
                    cgroup_version: view.version,
                    created_at: timestamp(cgroup.created_at),
                    age_seconds: snapshot.seconds_since(cgroup.created_at),
                    procs: cgroup.procs.unwrap_or_default(),
                    populated: cgroup.populated,
                    unconfirmed,
                };
                finding(cgroup, evidence)
            },
        )
        .collect()
}

fn finding(cgroup: &PodCgroup, evidence: Evidence) -> Finding {
    let mut summary = format!(
        "pod cgroup {} (uid {}){} belongs to no sandbox",
        evidence.path,
        cgroup.uid,
        of_pod(&evidence.pod_namespace, &evidence.pod_name)
    );
    let runs = evidence.procs > 0 || evidence.populated == Some(true);
    if evidence.procs > 0 {
        summary.push_str(&format!(
            "; {} process(es) still run in it, outside any pod",
            evidence.procs
        ));
    } else if runs {
        summary.push_str("; the kernel says processes still run below it (populated 1)");
    }
    let remedy = if let Some(why) = &evidence.unconfirmed {
        summary.push_str(" (unconfirmed: kubelet's word could not be had)");
        format!(
            "Unconfirmed, so nothing is offered for removal: {why}. Ask kubelet (its log, and \
             the API server's pod of uid {}) before touching it.",
            cgroup.uid
        )
    } else if runs {
        format!(
            "Find what the processes are (`cat {path}/cgroup.procs`, then `ps -o pid,args -p \
             ...`) and why they outlived their pod. kubelet, while it runs, SIGKILLs what is \
             left in a pod cgroup it let go (5 tries) and then removes it, so processes that \
             stay mean kubelet is down or cannot kill them (a process stuck in the kernel, D \
             state). {releases} log it in `journalctl -u kubelet | grep pod{uid}`: \
             \"Failed to kill all the processes attached to cgroup\" or \"Failed to delete \
             cgroup paths\" with cgroupName=[... pod{uid}]. End them once you know what they \
             hold, and kubelet removes the cgroup. Never move or kill them blindly: they may \
             hold a volume's data.",
            path = evidence.path,
            releases = KUBELET_RELEASES,
            uid = cgroup.uid,
        )
    } else if let Some(stop) = systemd_stop(cgroup) {
        format!(
            "Nothing runs in it: kubelet removes it while it runs (one that stays means kubelet \
             is down or cannot; its log says why). It is a slice systemd made for kubelet (the \
             systemd cgroup driver): stop it through systemd, as kubelet does, never rmdir it \
             behind systemd's back (the unit's state would stay wrong): `{stop}`, or \
             `nodectl leaked-pod-cgroups --remove --yes`, which stops it through systemd \
             (StopUnit) when it can prove systemd, and otherwise refuses it."
        )
    } else {
        format!(
            "Nothing runs in it: kubelet removes it while it runs (one that stays means kubelet \
             is down or cannot: {releases} log \"Failed to delete cgroup paths\" \
             cgroupName=[... pod{uid}] with why, in `journalctl -u kubelet | grep pod{uid}`). \
             It can be removed, container cgroups first: \
             `find {path} -depth -type d -exec rmdir {{}} \\;`.",
            path = evidence.path,
            releases = KUBELET_RELEASES,
            uid = cgroup.uid,
        )
    };
    Finding {
        kind: Kind::LeakedPodCgroup,
        severity: Severity::Warning,
        id: cgroup.uid.clone(),
        summary,
        cause: "kubelet removes a pod's cgroup once the pod is gone and its volumes are \
                unmounted (it keeps it while they exist, so that memory-backed volumes' charges \
                stay in it), killing what is left in it first; a removal that failed \
                (processes it could not kill, kubelet restarted or stopped mid-way) leaves it, \
                and kubelet's housekeeping grows with each one (kubernetes#123766, #112151)."
            .to_string(),
        remedy,
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CgroupView, KubeletView, Origin, PodDir};
    use std::path::PathBuf;
    use std::time::Duration;

    const HOUR: i64 = 3600 * SEC;

    fn cgroup(uid: &str, created_at: i64, procs: usize) -> PodCgroup {
        PodCgroup {
            uid: uid.to_string(),
            path: PathBuf::from(format!("/sys/fs/cgroup/kubepods/burstable/pod{uid}")),
            driver: "cgroupfs".to_string(),
            qos: "burstable".to_string(),
            created_at,
            procs: Some(procs),
            populated: None,
        }
    }

    fn node(cgroups: Vec<PodCgroup>, sandbox_uids: &[&str]) -> Snapshot {
        let mut s = snapshot();
        s.pod_cgroups = Some(CgroupView {
            cgroup_root: Located {
                path: PathBuf::from("/"),
                origin: Origin::Default,
            },
            cgroup_driver: None,
            cgroups_per_qos: crate::model::KubeletSetting::per_qos_default(),
            version: 2,
            hierarchy: PathBuf::from("/sys/fs/cgroup"),
            pod_cgroups: cgroups,
        });
        s.cri = Some(cri_listing_pod_uids(sandbox_uids));
        s.kubelet = Some(kubelet(&[]));
        s
    }

    /// kubelet's view with the pod directories of `uids` (`volume` mounted
    /// in the first).
    fn kubelet(uids: &[(&str, &[&str])]) -> KubeletView {
        KubeletView {
            root: Located {
                path: PathBuf::from("/var/lib/kubelet"),
                origin: Origin::Default,
            },
            pod_dirs: uids
                .iter()
                .map(|(uid, mounts)| PodDir {
                    uid: uid.to_string(),
                    path: PathBuf::from(format!("/var/lib/kubelet/pods/{uid}")),
                    modified_at: NOW - HOUR,
                    mounts: mounts.iter().map(|m| m.to_string()).collect(),
                })
                .collect(),
            pod_logs: Some(Vec::new()),
            pod_logs_dir: None,
            word: crate::model::KubeletWord::Listed { pods: Vec::new() },
        }
    }

    #[test]
    fn a_pod_cgroup_no_sandbox_names_is_leaked_with_its_processes_counted() {
        let s = node(
            vec![
                cgroup("live", NOW - HOUR, 2),
                cgroup("empty", NOW - HOUR, 0),
                cgroup("busy", NOW - HOUR, 3),
            ],
            &["live"],
        );
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["empty", "busy"]);
        assert_eq!(findings[0].kind, Kind::LeakedPodCgroup);
        assert_eq!(findings[0].evidence["procs"], 0);
        assert!(
            findings[0].remedy.contains("rmdir"),
            "{}",
            findings[0].remedy
        );
        assert_eq!(findings[1].evidence["procs"], 3);
        assert!(findings[1].summary.contains("3 process(es) still run"));
        assert_eq!(findings[1].evidence["qos"], "burstable");
        assert_eq!(findings[1].evidence["cgroup_root"]["origin"], "default");
    }

    #[test]
    fn the_remedy_says_what_kubelet_does_and_quotes_its_lines() {
        let s = node(
            vec![
                cgroup("empty", NOW - HOUR, 0),
                cgroup("busy", NOW - HOUR, 3),
            ],
            &[],
        );
        let findings = check(&s, &Settings::default());
        let (empty, busy) = (&findings[0].remedy, &findings[1].remedy);
        for line in [
            "SIGKILLs what is left in a pod cgroup it let go (5 tries) and then removes it",
            "kubelet 1.26-1.35 log it in `journalctl -u kubelet | grep podbusy`",
            "\"Failed to kill all the processes attached to cgroup\"",
            "\"Failed to delete cgroup paths\" with cgroupName=[... podbusy]",
        ] {
            assert!(busy.contains(line), "{line:?} in {busy}");
        }
        for line in [
            "kubelet 1.26-1.35 log \"Failed to delete cgroup paths\" cgroupName=[... podempty]",
            "`journalctl -u kubelet | grep podempty`",
        ] {
            assert!(empty.contains(line), "{line:?} in {empty}");
        }
        let cause = &findings[0].cause;
        assert!(cause.contains("keeps it while they exist"), "{cause}");
        assert!(findings
            .iter()
            .all(|f| f.remedy.is_ascii() && f.cause.is_ascii()));
    }

    #[test]
    fn the_pod_is_named_when_libcnis_cache_still_names_its_uid() {
        let mut s = node(vec![cgroup("busy", NOW - HOUR, 3)], &[]);
        assert!(check(&s, &Settings::default())[0].evidence["pod_name"].is_null());
        s.cni = Some(named_in_cache("busy"));
        let f = &check(&s, &Settings::default())[0];
        assert_eq!(
            (&f.evidence["pod_namespace"], &f.evidence["pod_name"]),
            (&"shop".into(), &"cart".into())
        );
        assert!(f.summary.contains(" of pod shop/cart "), "{}", f.summary);
    }

    #[test]
    fn within_the_grace_or_without_cri_s_list_nothing_is_leaked() {
        let s = node(vec![cgroup("new", NOW - 10 * SEC, 0)], &[]);
        assert!(check(&s, &Settings::default()).is_empty());
        let none = Settings {
            sandbox_grace: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(check(&s, &none).len(), 1);
        let mut s = node(vec![cgroup("gone", NOW - HOUR, 0)], &[]);
        s.cri.as_mut().unwrap().sandboxes = None;
        assert!(check(&s, &Settings::default()).is_empty());
        s.pod_cgroups = None;
        assert!(check(&s, &Settings::default()).is_empty());
    }

    #[test]
    fn a_pod_whose_directory_kubelet_keeps_is_never_leaked() {
        let volume = "/var/lib/kubelet/pods/mounted/volumes/kubernetes.io~empty-dir/data";
        let mut s = node(
            vec![
                cgroup("pending", NOW - HOUR, 0),
                cgroup("mounted", NOW - HOUR, 0),
                cgroup("gone", NOW - HOUR, 0),
            ],
            &[],
        );
        // Pending behind a failing sandbox (its directory, nothing
        // mounted), and a pod whose sandbox is gone but whose volume is
        // still mounted.
        s.kubelet = Some(kubelet(&[("pending", &[]), ("mounted", &[volume])]));
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["gone"]);
        assert!(findings[0].evidence.get("unconfirmed").is_none());
    }

    #[test]
    fn without_kubelets_directories_a_leak_is_unconfirmed() {
        let mut s = node(vec![cgroup("gone", NOW - HOUR, 0)], &[]);
        s.kubelet = None;
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1);
        let why = findings[0].evidence["unconfirmed"]
            .as_str()
            .unwrap_or_default();
        assert!(why.contains("pod directories were not read"), "{why}");
        assert!(findings[0].summary.contains("unconfirmed"));
        assert!(
            !findings[0].remedy.contains("rmdir"),
            "{}",
            findings[0].remedy
        );
    }

    #[test]
    fn a_pod_kubelets_word_lists_only_through_a_log_directory_is_unconfirmed_and_without_its_word_none_is_confirmed(
    ) {
        use crate::model::{KubeletWord, PodLogDir, PodName};
        let mut s = node(
            vec![
                cgroup("listed", NOW - HOUR, 0),
                cgroup("gone", NOW - HOUR, 0),
            ],
            &[],
        );
        let kubelet = s.kubelet.as_mut().unwrap();
        kubelet.pod_logs = Some(vec![
            PodLogDir::parse("shop_cart_listed", NOW - HOUR).unwrap()
        ]);
        kubelet.word = KubeletWord::Listed {
            pods: vec![PodName {
                namespace: "shop".to_string(),
                name: "cart".to_string(),
            }],
        };
        // Listed only through its log directory, which a tenant can make:
        // reported, unconfirmed, never removed.
        let findings = check(&s, &Settings::default());
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["listed", "gone"]);
        assert!(findings[1].evidence.get("unconfirmed").is_none());
        let why = findings[0].evidence["unconfirmed"].as_str().unwrap();
        assert!(
            why.contains("shop_cart_listed") && why.contains("anyone's"),
            "{why}"
        );
        assert!(findings[0].summary.contains("unconfirmed"));
        // No socket: both reported, neither confirmed, the why said.
        s.kubelet.as_mut().unwrap().word = KubeletWord::Unavailable {
            why: "kubelet's pod-resources API (/k/pod-resources/kubelet.sock): it does not exist"
                .to_string(),
        };
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 2);
        for f in &findings {
            let why = f.evidence["unconfirmed"].as_str().unwrap_or_default();
            assert!(why.contains("does not exist"), "{why}");
            assert!(!f.remedy.contains("rmdir"), "{}", f.remedy);
        }
    }

    #[test]
    fn a_systemd_slice_is_offered_to_systemctl_stop_never_to_rmdir() {
        let slice = "/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1111_aaaa.slice";
        let mut s = node(vec![cgroup("1111-aaaa", NOW - HOUR, 0)], &[]);
        let view = s.pod_cgroups.as_mut().unwrap();
        view.cgroup_driver = Some(KubeletSetting {
            value: "systemd".to_string(),
            origin: Origin::KubeletConfig,
        });
        let pod = &mut view.pod_cgroups[0];
        (pod.driver, pod.path) = ("systemd".to_string(), PathBuf::from(slice));
        let f = &check(&s, &Settings::default())[0];
        assert!(
            f.remedy
                .contains("`systemctl stop kubepods-burstable-pod1111_aaaa.slice`"),
            "{}",
            f.remedy
        );
        assert!(!f.remedy.contains("rmdir {}"), "{}", f.remedy);
        assert!(
            f.remedy.contains("stops it through systemd"),
            "{}",
            f.remedy
        );
        assert_eq!(f.evidence["cgroup_driver"]["value"], "systemd");
        assert_eq!(f.evidence["cgroup_driver"]["origin"], "kubelet_config");
        // A cgroupfs one still offers the rmdir.
        let s = node(vec![cgroup("gone", NOW - HOUR, 0)], &[]);
        let f = &check(&s, &Settings::default())[0];
        assert!(!f.remedy.contains("systemctl"), "{}", f.remedy);
        assert!(f.evidence["cgroup_driver"].is_null());
    }

    #[test]
    fn a_subtree_the_kernel_says_is_populated_is_never_offered_for_rmdir() {
        let mut s = node(vec![cgroup("deep", NOW - HOUR, 0)], &[]);
        s.pod_cgroups.as_mut().unwrap().pod_cgroups[0].populated = Some(true);
        let f = &check(&s, &Settings::default())[0];
        assert_eq!(f.evidence["populated"], true);
        assert!(f.summary.contains("populated 1"), "{}", f.summary);
        assert!(!f.remedy.contains("rmdir"), "{}", f.remedy);
    }
}
