//! `api-unreachable`: containerd's or CRI's API did not answer at all.
//!
//! A containerd that is frozen, deadlocked or down still leaves its files
//! and processes to read; the report says the API part is missing and why.

use serde_json::json;

use crate::model::{ApiCall, Finding, Kind, Severity, Snapshot};

pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let mut findings = Vec::new();
    if let Some(view) = &snapshot.containerd {
        findings.extend(unreachable(
            "containerd",
            &view.address.display().to_string(),
            &view.calls,
        ));
    }
    if let Some(view) = &snapshot.cri {
        findings.extend(unreachable(
            "cri",
            &view.address.display().to_string(),
            &view.calls,
        ));
    }
    findings
}

fn unreachable(api: &str, address: &str, calls: &[ApiCall]) -> Option<Finding> {
    let failed = calls
        .iter()
        .find(|c| c.method.reaches_the_api() && c.error.is_some())?;
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
    use crate::model::{Api, ContainerdView, Method};

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
