//! The names Kubernetes gives a container or sandbox, and the labels that
//! carry them.

use std::collections::BTreeMap;

use serde::Serialize;

/// Labels kubelet sets on every sandbox and container config. CRI copies a
/// config's labels onto containerd's container record and returns them in its
/// List calls, so they name an id for as long as its record lives, well after
/// containerd 1.7 and 2.x removed the task bundle (with its annotations).
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// CRI's own label on a containerd record: `sandbox` or `container`.
pub const KIND_LABEL: &str = "io.cri-containerd.kind";
/// The containerd namespace CRI keeps every sandbox and container in,
/// whatever namespace nodectl looks at for tasks (`-n`): a constant of the
/// CRI plugin, not a setting.
pub const CRI_NAMESPACE: &str = "k8s.io";

/// The labels that name an id, and none of the others: a sandbox carries all
/// of its pod's labels, whose number and size the pod's author decides.
pub fn name_labels<K, V>(labels: impl IntoIterator<Item = (K, V)>) -> BTreeMap<String, String>
where
    K: AsRef<str> + Into<String>,
    V: Into<String>,
{
    const KEPT: [&str; 4] = [
        POD_NAMESPACE_LABEL,
        POD_NAME_LABEL,
        CONTAINER_NAME_LABEL,
        KIND_LABEL,
    ];
    labels
        .into_iter()
        .filter(|(k, _)| KEPT.contains(&k.as_ref()))
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Names of a container (or, without a container name, of a sandbox) as
/// Kubernetes knows it. See [`Snapshot::names_in`] for where they come from.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PodRef {
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub container_name: Option<String>,
}

impl PodRef {
    /// The names in kubelet's labels (see [`name_labels`]).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> PodRef {
        let get = |key| labels.get(key).filter(|v| !v.is_empty()).cloned();
        PodRef {
            pod_namespace: get(POD_NAMESPACE_LABEL),
            pod_name: get(POD_NAME_LABEL),
            container_name: get(CONTAINER_NAME_LABEL),
        }
    }

    /// Each name from `self`, else from `other`.
    pub fn or(self, other: PodRef) -> PodRef {
        PodRef {
            pod_namespace: self.pod_namespace.or(other.pod_namespace),
            pod_name: self.pod_name.or(other.pod_name),
            container_name: self.container_name.or(other.container_name),
        }
    }

    /// `namespace/pod/container`, with `?` for what is not known.
    pub fn display(&self) -> String {
        let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "?".to_string());
        format!(
            "{}/{}/{}",
            part(&self.pod_namespace),
            part(&self.pod_name),
            part(&self.container_name)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_naming_labels_are_kept() {
        let kept = name_labels([
            (POD_NAME_LABEL, "web-0"),
            (KIND_LABEL, "sandbox"),
            ("app.kubernetes.io/name", "web"),
            ("io.kubernetes.pod.uid", "0d4c"),
        ]);
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            [KIND_LABEL, POD_NAME_LABEL]
        );
    }
}
