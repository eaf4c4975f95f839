//! `api-unreachable`: containerd's or CRI's API did not answer at all.
//!
//! A containerd that is frozen, deadlocked or down still leaves its files
//! and processes to read; the report says the API part is missing and why.
//! A node with no containerd at all (nothing at the socket, no containerd
//! process) has none to be unreachable: that is one gap, could not check.

use std::path::Path;

use serde_json::json;

use crate::model::{ApiCall, Finding, Gap, Kind, Severity, Snapshot, Source};

/// The one sentence a report says for a node without containerd.
pub const NO_CONTAINERD: &str = "no containerd on this node: no socket there and no containerd \
                                 process running (--address if it listens elsewhere)";

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let absent = no_containerd(snapshot);
    let mut findings = Vec::new();
    let mut api = |name: &str, address: &Path, calls: &[ApiCall]| {
        // Neither API at the missing socket is unreachable: nothing is there.
        if absent.is_some_and(|socket| socket == address) {
            return;
        }
        findings.extend(unreachable(name, &address.display().to_string(), calls));
    };
    if let Some(view) = &snapshot.containerd {
        api("containerd", &view.address, &view.calls);
    }
    if let Some(view) = &snapshot.cri {
        api("cri", &view.address, &view.calls);
    }
    findings
}

/// The socket of a node with no containerd at all: nodectl found no
/// containerd process, and connecting found nothing at the socket's path.
pub fn no_containerd(snapshot: &Snapshot) -> Option<&Path> {
    let view = snapshot.containerd.as_ref()?;
    (snapshot.paths.process.is_none() && view.found_no_socket())
        .then_some(snapshot.paths.address.path.as_path())
}

/// The snapshot's gaps as a report lists them: on a node with no
/// containerd, the APIs' gaps at its socket are one gap saying so, first.
pub fn gaps(snapshot: &Snapshot) -> Vec<Gap> {
    let mut gaps = snapshot.gaps.clone();
    if let Some(socket) = no_containerd(snapshot) {
        gaps.retain(|g| {
            !(matches!(g.source, Source::ContainerdApi | Source::CriApi) && g.path == socket)
        });
        gaps.insert(0, Gap::source(Source::ContainerdApi, socket, NO_CONTAINERD));
    }
    gaps
}

fn unreachable(api: &str, address: &str, calls: &[ApiCall]) -> Option<Finding> {
    let failed = ApiCall::first_unanswered(calls)?;
    let what = if failed.timed_out {
        format!("no answer within {:.0} ms", failed.latency_ms)
    } else {
        failed.error.clone().unwrap_or_default()
    };
    Some(Finding {
        kind: Kind::ApiUnreachable,
        severity: Severity::Critical,
        id: api.to_string(),
        summary: format!(
            "the {api} API at {address} did not answer ({}: {what})",
            failed.text()
        ),
        evidence: json!({
            "api": api,
            "address": address,
            "call": failed.text(),
            "error": failed.error,
            "timed_out": failed.timed_out,
            "latency_ms": failed.latency_ms,
        }),
        cause: if failed.timed_out {
            "containerd accepts connections but does not answer: frozen (stopped), \
             deadlocked, or starved."
        } else {
            "containerd is not running, or listens on another socket (see --address)."
        }
        .to_string(),
        remedy: "Check containerd's process state (T means stopped: `kill -CONT`) and its log; \
                 `systemctl restart containerd` if it is wedged (running containers keep \
                 running). The file-based findings in this report are still valid."
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Api, ContainerdProcess, ContainerdView, CriView, Method, NO_SOCKET};

    #[test]
    fn a_deadline_missed_on_version_is_unreachable_with_its_latency() {
        let mut s = snapshot();
        s.containerd = Some(ContainerdView {
            address: ADDRESS.into(),
            calls: vec![
                ApiCall {
                    api: Api::Containerd,
                    method: Method::Connect,
                    target: None,
                    latency_ms: 1.0,
                    error: None,
                    timed_out: false,
                },
                ApiCall {
                    api: Api::Containerd,
                    method: Method::Version,
                    target: None,
                    latency_ms: 3000.0,
                    error: Some("no answer before the deadline".into()),
                    timed_out: true,
                },
            ],
            ..ContainerdView::default()
        });
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].id, "containerd");
        assert_eq!(findings[0].evidence["timed_out"], true);
        assert_eq!(findings[0].evidence["latency_ms"], 3000.0);
    }

    #[test]
    fn a_failed_connect_is_unreachable_a_failed_later_call_is_not() {
        let failed = |method: Method| ApiCall {
            api: Api::Containerd,
            method,
            target: None,
            latency_ms: 2.0,
            error: Some("connection refused".into()),
            timed_out: false,
        };
        let mut s = snapshot();
        s.containerd = Some(ContainerdView {
            calls: vec![failed(Method::Connect)],
            ..ContainerdView::default()
        });
        let findings = check(&s);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].evidence["call"], "connect");
        assert_eq!(findings[0].evidence["error"], "connection refused");
        // It answered Version: what failed after that is another finding's.
        s.containerd = Some(ContainerdView {
            calls: vec![
                ApiCall {
                    api: Api::Containerd,
                    method: Method::Version,
                    target: None,
                    latency_ms: 1.0,
                    error: None,
                    timed_out: false,
                },
                failed(Method::ContainersList),
            ],
            ..ContainerdView::default()
        });
        assert!(check(&s).is_empty());
    }

    /// A snapshot whose APIs, both at the containerd socket, failed to
    /// connect with `error`, and whose containerd process is `process`.
    fn not_connected(error: &str, process: bool) -> Snapshot {
        let failed = |api: Api| ApiCall {
            api,
            method: Method::Connect,
            target: None,
            latency_ms: 0.1,
            error: Some(error.into()),
            timed_out: false,
        };
        let mut s = snapshot();
        s.containerd = Some(ContainerdView {
            address: ADDRESS.into(),
            calls: vec![failed(Api::Containerd)],
            ..ContainerdView::default()
        });
        s.cri = Some(CriView {
            address: ADDRESS.into(),
            calls: vec![failed(Api::Cri)],
            ..CriView::default()
        });
        s.paths.process = process.then(|| ContainerdProcess {
            pid: 812,
            ..ContainerdProcess::default()
        });
        s.gaps = vec![
            Gap::source(Source::Bundles, "/run/containerd/x", "gone"),
            Gap::source(Source::ContainerdApi, ADDRESS, error),
            Gap::source(Source::CriApi, ADDRESS, error),
        ];
        s
    }

    #[test]
    fn no_socket_and_no_containerd_process_is_one_gap_and_no_finding() {
        let s = not_connected(NO_SOCKET, false);
        assert_eq!(no_containerd(&s), Some(Path::new(ADDRESS)));
        assert!(check(&s).is_empty());
        let gaps = gaps(&s);
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert_eq!(
            gaps[0],
            Gap::source(Source::ContainerdApi, ADDRESS, NO_CONTAINERD)
        );
        assert_eq!(gaps[1].source, Source::Bundles, "other gaps stay");
    }

    #[test]
    fn a_missing_socket_with_containerd_running_or_a_refused_one_is_unreachable() {
        // containerd runs but its socket is gone: it is unreachable.
        for s in [
            not_connected(NO_SOCKET, true),
            not_connected("connection refused", false),
        ] {
            assert_eq!(no_containerd(&s), None);
            let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
            assert_eq!(ids, ["containerd", "cri"]);
            assert_eq!(gaps(&s), s.gaps, "the APIs' own gaps");
        }
        // CRI on a socket of its own is still unreachable without containerd.
        let mut s = not_connected(NO_SOCKET, false);
        s.cri.as_mut().unwrap().address = "/run/other/cri.sock".into();
        let ids: Vec<String> = check(&s).into_iter().map(|f| f.id).collect();
        assert_eq!(ids, ["cri"]);
    }

    #[test]
    fn answering_api_is_fine() {
        let mut s = snapshot();
        s.containerd = Some(ContainerdView {
            calls: vec![ApiCall {
                api: Api::Containerd,
                method: Method::Version,
                target: None,
                latency_ms: 1.0,
                error: None,
                timed_out: false,
            }],
            ..ContainerdView::default()
        });
        assert!(check(&s).is_empty());
    }
}
