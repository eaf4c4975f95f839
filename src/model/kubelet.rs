//! What kubelet keeps on disk for its pods: `<root>/pods/<uid>`, one
//! directory per pod it runs or ran, with the pod's volumes mounted below
//! `volumes/`. kubelet removes a directory once its pod is gone and every
//! volume is unmounted; one that stays has outlived its pod. Beside them,
//! the pods' log directories (`/var/log/pods/<namespace>_<name>_<uid>`),
//! which name each uid's pod.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;
use crate::model::paths::Located;
use crate::model::{CgroupView, KubeletSetting};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeletView {
    /// kubelet's root (`--root-dir`), with where nodectl found it.
    pub root: Located,
    /// Every directory of `<root>/pods`.
    pub pod_dirs: Vec<PodDir>,
    /// Every pod log directory kubelet made (`<podLogsDir>/<ns>_<name>_<uid>`);
    /// `None` when they could not be read (a gap says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_logs: Option<Vec<PodLogDir>>,
    /// Where they were read (kubelet's `podLogsDir`), with where nodectl
    /// found it; `None` in a snapshot from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_logs_dir: Option<Located>,
    /// What kubelet's pod-resources API said of the pods it has.
    #[serde(default)]
    pub word: KubeletWord,
}

/// kubelet's own word on its pods: its pod-resources API
/// (`<root>/pod-resources/kubelet.sock`, `PodResourcesLister.List`), which
/// lists the pods kubelet has active, by namespace and name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
pub enum KubeletWord {
    /// Its listener proven kubelet's (root, in the host's namespaces), it
    /// answered with these pods.
    Listed { pods: Vec<PodName> },
    /// Not had, and why (no socket, a listener not proven, no answer).
    Unavailable { why: String },
}

/// What a report says of the kubelet nodectl judged by: its root and
/// cgroup root with where each was found, how many pod directories it
/// has, and its own word on its pods (how many it listed, or why it was
/// not had).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeletFacts {
    pub root: Located,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_root: Option<Located>,
    /// kubelet's `cgroupDriver` as its flags or config set it (none said:
    /// kubelet's default, or containerd's word on 1.31 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_driver: Option<KubeletSetting<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups_per_qos: Option<KubeletSetting<bool>>,
    /// kubelet's `podLogsDir`, where its pods' log directories were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_logs: Option<Located>,
    pub pod_dirs: usize,
    pub word: KubeletWordSummary,
}

/// [`KubeletWord`] without its list: the count, or why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "answer")]
pub enum KubeletWordSummary {
    Listed { pods: usize },
    Unavailable { why: String },
}

impl KubeletFacts {
    pub fn of(view: &KubeletView, cgroups: Option<&CgroupView>) -> KubeletFacts {
        KubeletFacts {
            root: view.root.clone(),
            cgroup_root: cgroups.map(|c| c.cgroup_root.clone()),
            cgroup_driver: cgroups.and_then(|c| c.cgroup_driver.clone()),
            cgroups_per_qos: cgroups.map(|c| c.cgroups_per_qos.clone()),
            pod_logs: view.pod_logs_dir.clone(),
            pod_dirs: view.pod_dirs.len(),
            word: match &view.word {
                KubeletWord::Listed { pods } => KubeletWordSummary::Listed { pods: pods.len() },
                KubeletWord::Unavailable { why } => {
                    KubeletWordSummary::Unavailable { why: why.clone() }
                }
            },
        }
    }
}

impl Default for KubeletWord {
    fn default() -> KubeletWord {
        KubeletWord::Unavailable {
            why: "kubelet's pod-resources API was not asked".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodDir {
    /// The directory's name: the pod's uid.
    pub uid: String,
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// The directory's last change (unix ns): kubelet creates it before
    /// the pod's sandbox, and it changes as volumes come and go.
    pub modified_at: UnixNanos,
    /// Mount points below it (volumes still mounted), from the mount table.
    #[serde(default)]
    pub mounts: Vec<String>,
}

/// A pod's log directory: kuberuntime makes it right before each
/// RunPodSandbox (`createPodSandbox`), and kubelet's container GC
/// (`evictPodLogsDirectories`) removes it once the pod's content may go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodLogDir {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The directory's last change (unix ns): its making, for a pod whose
    /// sandbox never ran (no container's directory was added below it).
    pub modified_at: UnixNanos,
}

impl PodLogDir {
    /// The log directory named `name` (`<namespace>_<name>_<uid>`, as
    /// kubelet's `BuildPodLogsDirectory` writes it: none of the three has a
    /// `_`), if it is one.
    pub fn parse(name: &str, modified_at: UnixNanos) -> Option<PodLogDir> {
        let mut parts = name.split('_');
        let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || [namespace, pod, uid].iter().any(|p| p.is_empty()) {
            return None;
        }
        Some(PodLogDir {
            namespace: namespace.to_string(),
            name: pod.to_string(),
            uid: uid.to_string(),
            modified_at,
        })
    }
}

impl KubeletView {
    /// The pod directory of `uid` ([`KubeletIndex::pod_dir`]), for one uid:
    /// a check asking of many builds [`KubeletView::index`] once.
    pub fn pod_dir(&self, uid: &str) -> Option<&PodDir> {
        self.pod_dirs.iter().find(|dir| dir.uid == uid)
    }

    /// The log directory of `uid` ([`KubeletIndex::pod_log`]), for one uid.
    pub fn pod_log(&self, uid: &str) -> Option<&PodLogDir> {
        self.pod_logs.iter().flatten().find(|log| log.uid == uid)
    }

    /// Whether kubelet's word lists the pod of `uid`
    /// ([`KubeletIndex::lists`]), for one uid (indexed all the same: the
    /// question is one of every listed pod and log directory).
    pub fn lists(&self, uid: &str) -> Result<bool, String> {
        self.index().lists(uid)
    }

    /// The pod directories, log directories and listed pods by uid and
    /// name, built once for all the uids a check asks about: a node of tens
    /// of thousands of pods has as many directories, and a search of every
    /// listed pod and log directory per uid made a check cubic.
    pub fn index(&self) -> KubeletIndex<'_> {
        let mut index = KubeletIndex {
            view: self,
            dirs: HashMap::new(),
            logs: HashMap::new(),
            uids_of_pod: HashMap::new(),
            place_of_pod: HashMap::new(),
            untied: None,
        };
        for dir in &self.pod_dirs {
            index.dirs.entry(dir.uid.as_str()).or_insert(dir);
        }
        for log in self.pod_logs.iter().flatten() {
            index.logs.entry(log.uid.as_str()).or_default().push(log);
            let named = (log.namespace.as_str(), log.name.as_str());
            index.uids_of_pod.entry(named).or_default().push(&log.uid);
        }
        if let KubeletWord::Listed { pods } = &self.word {
            for (place, pod) in pods.iter().enumerate() {
                let named = (pod.namespace.as_str(), pod.name.as_str());
                index.place_of_pod.entry(named).or_insert(place);
            }
            index.untied = pods.iter().find(|pod| {
                let named = (pod.namespace.as_str(), pod.name.as_str());
                !index.uids_of_pod.contains_key(&named)
            });
        }
        index
    }
}

/// A pod's namespace and name.
type Named<'a> = (&'a str, &'a str);

/// See [`KubeletView::index`]; each entry the first a search in the
/// view's order finds.
pub struct KubeletIndex<'a> {
    view: &'a KubeletView,
    dirs: HashMap<&'a str, &'a PodDir>,
    /// The log directories of each uid, in order.
    logs: HashMap<&'a str, Vec<&'a PodLogDir>>,
    /// The uids the log directories name for each pod, in order.
    uids_of_pod: HashMap<Named<'a>, Vec<&'a str>>,
    /// Where kubelet's word lists each pod.
    place_of_pod: HashMap<Named<'a>, usize>,
    /// The first pod kubelet's word lists that no log directory names.
    untied: Option<&'a PodName>,
}

impl<'a> KubeletIndex<'a> {
    /// The pod directory of `uid`, if kubelet still has one.
    pub fn pod_dir(&self, uid: &str) -> Option<&'a PodDir> {
        self.dirs.get(uid).copied()
    }

    /// The log directory of `uid`, if kubelet still has one (`None` also
    /// when they were not read).
    pub fn pod_log(&self, uid: &str) -> Option<&'a PodLogDir> {
        self.logs.get(uid).and_then(|logs| logs.first()).copied()
    }

    /// Whether kubelet's word lists the pod of `uid`: a listed pod is
    /// tied to its uid by its log directory (the API names pods, never
    /// uids). A log directory is anyone's who can write the pod log
    /// directory (a log shipper's `hostPath` of `/var/log`), so a name
    /// whose log directories name more than one uid ties none of them: a
    /// tenant's `mkdir <ns>_<name>_<uid>` for a listed pod must not make
    /// another uid's pod kubelet's (a pod made again under its name has
    /// two until kubelet's GC, and is unconfirmed meanwhile). `Err` says
    /// why kubelet's word cannot be had: no answer, its log directories
    /// unread, a listed pod no log directory ties (whose uid might be this
    /// one), or one several do.
    pub fn lists(&self, uid: &str) -> Result<bool, String> {
        let pods = match &self.view.word {
            KubeletWord::Listed { pods } => pods,
            KubeletWord::Unavailable { why } => return Err(why.clone()),
        };
        if self.view.pod_logs.is_none() {
            return Err(
                "kubelet's pod log directories could not be read, so the pods its \
                 pod-resources API lists cannot be tied to their uids"
                    .to_string(),
            );
        }
        // The first listed pod a log directory of `uid` names.
        let of_uid = self.logs.get(uid).into_iter().flatten();
        if let Some(pod) = of_uid
            .filter_map(|log| {
                let named = (log.namespace.as_str(), log.name.as_str());
                self.place_of_pod.get(&named)
            })
            .min()
            .map(|&place| &pods[place])
        {
            let uids = &self.uids_of_pod[&(pod.namespace.as_str(), pod.name.as_str())];
            if uids.len() > 1 {
                return Err(format!(
                    "kubelet's pod-resources API lists pod {}/{}, and log directories name {}                      uids for it ({}): a log directory is anyone's who can write the pod log                      directory, so which one is kubelet's cannot be told",
                    pod.namespace,
                    pod.name,
                    uids.len(),
                    uids.join(", ")
                ));
            }
            return Ok(true);
        }
        match self.untied {
            Some(untied) => Err(format!(
                "kubelet's pod-resources API lists pod {}/{}, which no log directory ties to \
                 a uid",
                untied.namespace, untied.name
            )),
            None => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_directory_names_its_pod_in_three_parts() {
        let log = PodLogDir::parse("shop_cart-7f9c_0f1e2d3c-aaaa-bbbb", 5).unwrap();
        assert_eq!(
            (log.namespace.as_str(), log.name.as_str(), log.uid.as_str()),
            ("shop", "cart-7f9c", "0f1e2d3c-aaaa-bbbb")
        );
        for not_one in [
            "shop_cart",
            "a_b_c_d",
            "_cart_uid",
            "shop__uid",
            "lost+found",
        ] {
            assert_eq!(PodLogDir::parse(not_one, 0), None, "{not_one}");
        }
    }

    fn view(word: KubeletWord, logs: Option<Vec<PodLogDir>>) -> KubeletView {
        KubeletView {
            root: Located {
                path: PathBuf::from("/var/lib/kubelet"),
                origin: crate::model::paths::Origin::Default,
            },
            pod_dirs: Vec::new(),
            pod_logs: logs,
            pod_logs_dir: None,
            word,
        }
    }

    #[test]
    fn kubelets_word_lists_a_uid_through_its_log_directory() {
        let logs = || {
            Some(vec![
                PodLogDir::parse("shop_cart_uid-1", 0).unwrap(),
                PodLogDir::parse("shop_cart_uid-2", 0).unwrap(),
                PodLogDir::parse("shop_gone_uid-3", 0).unwrap(),
            ])
        };
        let pod = |name: &str| PodName {
            namespace: "shop".to_string(),
            name: name.to_string(),
        };
        let listed = view(
            KubeletWord::Listed {
                pods: vec![pod("cart")],
            },
            logs(),
        );
        // Two uids its name has (the pod made again under its name, or a
        // tenant's `mkdir` beside kubelet's): neither is told kubelet's.
        for uid in ["uid-1", "uid-2"] {
            let why = listed.lists(uid).unwrap_err();
            assert!(
                why.contains("shop/cart") && why.contains("uid-1, uid-2"),
                "{why}"
            );
        }
        assert_eq!(listed.lists("uid-3"), Ok(false));
        // One: kubelet's word ties it.
        let mut one = listed.clone();
        one.pod_logs.as_mut().unwrap().remove(1);
        assert_eq!(one.lists("uid-1"), Ok(true));
        // A listed pod no log directory ties: any uid might be its own.
        let untied = view(
            KubeletWord::Listed {
                pods: vec![pod("new")],
            },
            logs(),
        );
        let why = untied.lists("uid-3").unwrap_err();
        assert!(why.contains("shop/new"), "{why}");
        let unread = view(KubeletWord::Listed { pods: vec![] }, None);
        assert!(unread
            .lists("uid-3")
            .unwrap_err()
            .contains("could not be read"));
        let unasked = view(KubeletWord::default(), logs());
        assert!(unasked.lists("uid-3").unwrap_err().contains("not asked"));
    }

    #[test]
    fn of_the_pods_a_uid_s_log_directories_name_the_first_kubelet_lists_tells() {
        // uid-x's two log directories name two listed pods: `web` by it
        // alone, `cart` with uid-1 too.
        let logs = ["shop_cart_uid-1", "shop_cart_uid-x", "shop_web_uid-x"];
        let logs = logs.map(|name| PodLogDir::parse(name, 0).unwrap());
        let listing = |names: &[&str]| {
            let pods = names.iter().map(|name| PodName {
                namespace: "shop".to_string(),
                name: name.to_string(),
            });
            view(
                KubeletWord::Listed {
                    pods: pods.collect(),
                },
                Some(logs.to_vec()),
            )
        };
        assert_eq!(listing(&["web", "cart"]).lists("uid-x"), Ok(true));
        let why = listing(&["cart", "web"]).lists("uid-x").unwrap_err();
        assert!(why.contains("shop/cart"), "{why}");
        // Of the pods no log directory ties, the first listed is named.
        let why = listing(&["web", "new-a", "new-b"])
            .lists("uid-9")
            .unwrap_err();
        assert!(why.contains("shop/new-a,"), "{why}");
    }
}
