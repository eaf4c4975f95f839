//! `late-exit`: CRI recorded an exit long after it happened.
//!
//! When the retried exit handling finally succeeds, CRI writes the real exit
//! time (`FinishedAt`) into the status file, but the write happens minutes
//! later. The file's mtime minus `FinishedAt` is how long CRI showed a dead
//! container as RUNNING: evidence of a zombie that has since resolved itself.

use serde::Serialize;
use serde_json::Value;

use crate::checks::settings::Settings;
use crate::model::{seconds, timestamp, CriState, Finding, Kind, PodRef, Severity, Snapshot};

#[derive(Serialize)]
struct Evidence {
    container_id: String,
    #[serde(flatten)]
    pod: PodRef,
    exit_code: i64,
    reason: String,
    finished_at: Value,
    recorded_at: Value,
    lag_seconds: f64,
    status_file: String,
}

pub fn check(snapshot: &Snapshot, settings: &Settings) -> Vec<Finding> {
    let late_after = settings.late_after.as_nanos() as i64;
    let since = settings.since.as_nanos().min(i64::MAX as u128) as i64;
    let names = snapshot.names();
    snapshot
        .cri_containers
        .iter()
        .filter(|c| c.status.state() == CriState::Exited)
        .filter(|c| snapshot.taken_at.saturating_sub(c.status.finished_at) <= since)
        .filter_map(|c| {
            // Saturating: the times are the status file's, whatever it holds.
            let lag = c.status_written_at.saturating_sub(c.status.finished_at);
            if lag <= late_after {
                return None;
            }
            let pod = names.of(&c.id);
            let summary = format!(
                "exit of {} was recorded {:.0} s after it happened; CRI showed it RUNNING meanwhile",
                pod.display(),
                seconds(lag)
            );
            let evidence = Evidence {
                container_id: c.id.clone(),
                pod,
                exit_code: c.status.exit_code,
                reason: c.status.reason.clone(),
                finished_at: timestamp(c.status.finished_at),
                recorded_at: timestamp(c.status_written_at),
                lag_seconds: seconds(lag),
                status_file: c.status_path.display().to_string(),
            };
            Some(Finding {
                kind: Kind::LateExit,
                severity: Severity::Warning,
                id: c.id.clone(),
                summary,
                evidence: serde_json::to_value(evidence).unwrap_or(Value::Null),
                cause: "CRI records an exit only after task.Delete succeeds. The first \
                        delete timed out (10 s), typically in the shim's umount2 of the \
                        overlay rootfs under disk I/O pressure, and only a later retry \
                        succeeded."
                    .to_string(),
                remedy: "Nothing to undo for this container. The node had overlay unmounts \
                         slow enough to stall CRI: check disk I/O pressure and dirty page \
                         write-back at that time, and consider volatile overlay mounts \
                         (containerd >= 1.6.24, kernel >= 5.10). Check for leaked shims \
                         (nodectl leaked-shims)."
                    .to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use std::time::Duration;

    #[test]
    fn exit_recorded_a_minute_late_is_reported_with_its_lag() {
        let mut s = snapshot();
        let finished = NOW - 600 * SEC;
        s.cri_containers
            .push(exited(&id('a'), finished, finished + 75 * SEC));
        let findings = check(&s, &Settings::default());
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!(f.kind, Kind::LateExit);
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.evidence["lag_seconds"], 75.0);
        assert_eq!(f.evidence["exit_code"], 0);
        assert_eq!(f.evidence["reason"], "Completed");
        assert!(f.evidence["finished_at"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn a_container_whose_bundle_is_gone_is_named_from_its_record() {
        // containerd 1.7 and 2.x remove the bundle with the task, long before
        // a late exit is seen; the container record keeps kubelet's labels.
        let mut s = snapshot();
        let finished = NOW - 600 * SEC;
        s.cri_containers
            .push(exited(&id('a'), finished, finished + 75 * SEC));
        with_records(&mut s, &[id('a')]);
        with_labels(&mut s, &id('a'), labels("shop", "web-0", Some("init")));
        let f = &check(&s, &Settings::default())[0];
        assert_eq!(f.evidence["pod_namespace"], "shop");
        assert_eq!(f.evidence["pod_name"], "web-0");
        assert_eq!(f.evidence["container_name"], "init");
        assert!(f.summary.contains("shop/web-0/init"), "{}", f.summary);
    }

    #[test]
    fn prompt_exit_is_not_late() {
        let mut s = snapshot();
        let finished = NOW - 600 * SEC;
        s.cri_containers
            .push(exited(&id('a'), finished, finished + SEC / 10));
        assert!(check(&s, &Settings::default()).is_empty());
    }

    #[test]
    fn threshold_and_window_are_settings() {
        let mut s = snapshot();
        let finished = NOW - 3 * 3600 * SEC;
        s.cri_containers
            .push(exited(&id('a'), finished, finished + 20 * SEC));
        assert!(check(&s, &Settings::default()).is_empty());
        let strict = Settings {
            late_after: Duration::from_secs(10),
            ..Settings::default()
        };
        assert_eq!(check(&s, &strict).len(), 1);
        let recent_only = Settings {
            since: Duration::from_secs(3600),
            ..strict
        };
        assert!(check(&s, &recent_only).is_empty());
    }

    #[test]
    fn a_running_container_is_not_a_late_exit() {
        // FinishedAt = 0: measured from it, any status write looks decades
        // late. An unbounded window, so only the state keeps it out.
        let mut s = snapshot();
        let mut running = running(&id('b'), 7, NOW - 600 * SEC);
        running.status_written_at = NOW - 10 * SEC;
        s.cri_containers.push(running);
        let any_time = Settings {
            since: Duration::MAX,
            ..Settings::default()
        };
        assert!(check(&s, &any_time).is_empty());
    }
}
