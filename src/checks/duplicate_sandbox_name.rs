//! `duplicate-sandbox-name`: two sandbox containers in containerd's records
//! carry one CRI sandbox name, which containerd's next start-up cannot
//! reserve: it exits, and the node runs no pod until the extra record goes.
//!
//! CRI names a sandbox `<pod>_<namespace>_<uid>_<attempt>` and keeps that
//! name in the sandbox container's metadata (`io.cri-containerd.sandbox.
//! metadata`, `Metadata.Name`). On start-up it recovers every sandbox
//! container and reserves its name; a second one with the same name fails
//! `failed to recover state: failed to reserve sandbox name` and CRI's
//! plugin exits containerd (`Fatal("Failed to run CRI service")`), on every
//! line (1.7 `pkg/cri/server/restart.go`, 2.x `internal/cri/server/
//! restart.go`; measured, see tests/duplicate_sandbox_name_real.rs). Such a
//! pair is made by a RunPodSandbox that fails after the sandbox started (an
//! NRI plugin rejecting it) and whose rollback leaves the sandbox container
//! (containerd#13609: 2.0 to 2.2.5, 2.3.0 to 2.3.2), then kubelet's retry
//! with the same attempt. 2.x's sandbox store entries are not reserved at
//! start-up: only sandbox containers count.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::model::{CriIndex, CriView, Finding, Kind, Severity, Snapshot, CRI_NAMESPACE};

#[derive(Serialize)]
pub struct Evidence {
    /// CRI's name: `<pod>_<namespace>_<uid>_<attempt>`.
    pub name: String,
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    /// Every sandbox container carrying it, by id.
    pub sandbox_ids: Vec<String>,
    /// Those CRI lists now (it reserved the name for one of them); null
    /// when CRI did not answer.
    pub listed_by_cri: Option<Vec<String>>,
    pub basis: &'static str,
}

/// Each CRI sandbox name more than one sandbox container of `k8s.io`
/// carries, with their ids (sorted).
pub fn duplicates(snapshot: &Snapshot) -> BTreeMap<&str, Vec<&str>> {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let records = snapshot
        .containerd
        .as_ref()
        .and_then(|view| view.namespaces.get(CRI_NAMESPACE))
        .filter(|ns| ns.containers.is_some());
    for (id, name) in records.into_iter().flat_map(|ns| &ns.sandbox_names) {
        by_name.entry(name.as_str()).or_default().push(id.as_str());
    }
    by_name.retain(|_, ids| ids.len() > 1);
    by_name
}

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    // CRI's list indexed once for every name's sandboxes (a node of tens of
    // thousands of sandboxes: a search of the list per id was quadratic).
    let cri = snapshot
        .cri
        .as_ref()
        .filter(|cri| cri.sandboxes.is_some())
        .map(CriView::index);
    duplicates(snapshot)
        .into_iter()
        .map(|(name, ids)| finding(cri.as_ref(), name, &ids))
        .collect()
}

/// The finding of `name`, carried by `ids`; `cri` is CRI's list of
/// sandboxes, when it answered.
fn finding(cri: Option<&CriIndex>, name: &str, ids: &[&str]) -> Finding {
    let listed_by_cri = cri.map(|cri| {
        ids.iter()
            .filter(|id| cri.is_sandbox(id))
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
    });
    // Kubernetes names hold no `_`: the name's parts are CRI's.
    let mut parts = name.split('_');
    let (pod_name, pod_namespace) = (parts.next(), parts.next());
    let evidence = Evidence {
        name: name.to_string(),
        pod_namespace: pod_namespace.map(str::to_string),
        pod_name: pod_name.map(str::to_string),
        sandbox_ids: ids.iter().map(|id| id.to_string()).collect(),
        listed_by_cri,
        basis: "containerd-api",
    };
    let extra: Vec<&str> = match &evidence.listed_by_cri {
        Some(listed) => {
            let listed: HashSet<&str> = listed.iter().map(String::as_str).collect();
            ids.iter()
                .copied()
                .filter(|id| !listed.contains(id))
                .collect()
        }
        None => Vec::new(),
    };
    let which = if extra.is_empty() {
        "the one CRI does not list (`crictl pods -q` against `ctr -n k8s.io containers ls`)"
            .to_string()
    } else {
        format!("{} (CRI does not list it)", extra.join(", "))
    };
    Finding {
        kind: Kind::DuplicateSandboxName,
        severity: Severity::Critical,
        id: name.to_string(),
        summary: format!(
            "CRI sandbox name {name} is carried by {} sandbox containers ({}): containerd's next \
             start-up cannot reserve it and exits",
            ids.len(),
            ids.join(", ")
        ),
        cause: "A RunPodSandbox failed after its sandbox had started (an NRI plugin \
                rejected it, a store update failed) and its rollback left the sandbox \
                container; kubelet retried the pod with the same attempt and succeeded, \
                so two records carry one name. On start-up CRI reserves each sandbox \
                container's name and exits on the second (\"failed to recover state: \
                failed to reserve sandbox name\"), on every line."
            .to_string(),
        remedy: format!(
            "Before containerd restarts (a restart will not come back), remove {which}: \
             `ctr -n k8s.io tasks kill -s KILL <id>; ctr -n k8s.io tasks rm <id>; ctr -n \
             k8s.io containers rm <id>`. If containerd already exits at start-up, start it \
             with the CRI plugin disabled to remove it."
        ),
        evidence: serde_json::to_value(&evidence).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{ContainerdView, CriView, NamespaceView};

    fn node(names: &[(&str, &str)]) -> Snapshot {
        let mut s = snapshot();
        let mut view = ContainerdView::default();
        view.namespaces.insert(
            CRI_NAMESPACE.to_string(),
            NamespaceView {
                containers: Some(names.iter().map(|(id, _)| id.to_string()).collect()),
                sandbox_names: names
                    .iter()
                    .map(|(id, name)| (id.to_string(), name.to_string()))
                    .collect(),
                ..NamespaceView::default()
            },
        );
        s.containerd = Some(view);
        s
    }

    #[test]
    fn two_sandbox_containers_with_one_name_are_reported_with_the_one_cri_does_not_list() {
        let mut s = node(&[
            ("a1", "web_shop_u1_0"),
            ("b2", "web_shop_u1_0"),
            ("c3", "web_shop_u1_1"),
            ("d4", "db_shop_u2_0"),
        ]);
        s.cri = Some(CriView {
            sandboxes: Some(
                ["b2", "c3", "d4"]
                    .iter()
                    .map(|id| cri_sandbox(id, "shop", "web"))
                    .collect(),
            ),
            ..CriView::default()
        });
        let findings = check(&s);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.kind, f.severity, f.id.as_str()),
            (
                Kind::DuplicateSandboxName,
                Severity::Critical,
                "web_shop_u1_0"
            )
        );
        assert_eq!(f.evidence["sandbox_ids"], serde_json::json!(["a1", "b2"]));
        assert_eq!(f.evidence["listed_by_cri"], serde_json::json!(["b2"]));
        assert_eq!(
            (&f.evidence["pod_namespace"], &f.evidence["pod_name"]),
            (&Value::from("shop"), &Value::from("web"))
        );
        assert!(
            f.remedy.contains("remove a1 (CRI does not list it)"),
            "{}",
            f.remedy
        );
    }

    #[test]
    fn without_the_records_or_with_one_record_per_name_nothing_is_reported() {
        assert!(check(&node(&[("a1", "web_shop_u1_0"), ("b2", "web_shop_u1_1")])).is_empty());
        let mut s = node(&[("a1", "web_shop_u1_0"), ("b2", "web_shop_u1_0")]);
        assert_eq!(check(&s).len(), 1);
        assert!(
            check(&s)[0].evidence["listed_by_cri"].is_null(),
            "CRI unread"
        );
        s.containerd
            .as_mut()
            .unwrap()
            .namespaces
            .get_mut(CRI_NAMESPACE)
            .unwrap()
            .containers = None;
        assert!(check(&s).is_empty(), "containerd did not list its records");
    }
}
